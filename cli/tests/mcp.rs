//! MCP tools in a real run: the project's own MCP test server (`adapters/mcp`) over stdio,
//! its tools offered under prefixed names, one call answered and one that crashes the server
//! mid-call: the crash is the call's error result and the turn goes on. A server that does not
//! start is a warning, not a failed run.

mod common;

use common::{Project, last_results, mcp_test_server as test_server};
use serde_json::json;
use turnstile_testkit::anthropic::{text_stream, tool_stream};
use turnstile_testkit::provider::{FakeProvider, Reply};

#[tokio::test(flavor = "multi_thread")]
async fn an_mcp_server_that_crashes_mid_call_gives_an_error_result_and_the_turn_goes_on() {
    let provider = FakeProvider::anthropic(vec![
        Reply::sse(tool_stream(
            "toolu_1",
            "mcp_test_echo",
            &json!({"text": "ping"}),
        )),
        Reply::sse(tool_stream("toolu_2", "mcp_test_crash", &json!({}))),
        Reply::sse(tool_stream(
            "toolu_3",
            "mcp_test_echo",
            &json!({"text": "again"}),
        )),
        Reply::sse(text_stream("The MCP server crashed.")),
    ])
    .await;
    let config = format!(
        "[permissions]\nallow = [\"mcp_test_*\"]\n\n[mcp.test]\ncommand = [\"{}\"]\n\n\
         [mcp.broken]\ncommand = [\"/nonexistent/mcp-server\"]\n",
        test_server().display()
    );
    let project = Project::new(&provider.base_url, &config);
    let done = project.run(&["run", "Use the MCP tools"]).await;
    assert_eq!(done.code, Some(0), "{done:?}");
    assert_eq!(done.stdout, "The MCP server crashed.\n");
    assert!(
        done.stderr
            .contains("warning: MCP server `broken` did not start"),
        "a server that does not start is named: {}",
        done.stderr
    );
    let steps = provider.steps();
    assert_eq!(steps.len(), 4, "{done:?}");
    let offered: Vec<&str> = steps[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        offered.contains(&"mcp_test_echo") && offered.contains(&"mcp_test_crash"),
        "{offered:?}"
    );
    assert!(
        !offered.iter().any(|t| t.starts_with("mcp_broken")),
        "{offered:?}"
    );
    assert_eq!(
        last_results(&steps[1]),
        [("toolu_1".to_owned(), "ping".to_owned())]
    );
    let crashed = &last_results(&steps[2])[0].1;
    assert!(
        crashed.contains("stopped during the call to `crash`"),
        "{crashed}"
    );
    let after = &last_results(&steps[3])[0].1;
    assert!(
        after.contains("MCP server `test`"),
        "a later call errs at once: {after}"
    );
}
