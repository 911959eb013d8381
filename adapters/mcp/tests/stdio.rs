//! Servers run as child processes over stdio: listing and calls, the offered names and
//! definitions, error results, a server that crashes or hangs during a call, a dropped call
//! that reaches the server as a cancellation, and servers that fail to start without stopping
//! the others.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::{SERVER, WAIT, call, find, run, stdio, wait_for_line};
use serde_json::json;
use turnstile_core::ToolOutput;
use turnstile_host::Tool;
use turnstile_mcp::{ServerConfig, connect_all};

fn one(name: &str, config: ServerConfig) -> BTreeMap<String, ServerConfig> {
    BTreeMap::from([(name.to_owned(), config)])
}

#[tokio::test]
async fn a_stdio_server_lists_its_tools_and_answers_calls() {
    let (tools, failures) = connect_all(&one("test", stdio(&[]))).await;
    assert_eq!(failures, []);
    let names: Vec<&str> = tools.iter().map(|t| t.name()).collect();
    assert_eq!(
        names,
        [
            "mcp_test_echo",
            "mcp_test_sleep",
            "mcp_test_crash",
            "mcp_test_fail",
            "mcp_test_mixed",
            "mcp_test_cwd",
            "mcp_test_header"
        ]
    );
    assert_eq!(
        run(&tools, "mcp_test_echo", json!({"text": "hello"})).await,
        ToolOutput::ok("hello")
    );
    assert_eq!(
        run(&tools, "mcp_test_mixed", json!({})).await,
        ToolOutput::ok("before\n[image: image/png]\nafter")
    );
}

#[tokio::test]
async fn tools_are_offered_under_prefixed_names_with_the_servers_definitions() {
    let (tools, _) = connect_all(&one("my.server", stdio(&[]))).await;
    let echo = find(&tools, "mcp_my_server_echo");
    assert_eq!((echo.server(), echo.remote_name()), ("my.server", "echo"));
    assert_eq!(echo.spec().name, "mcp_my_server_echo");
    let def = echo.definition();
    assert_eq!(def.name, "mcp_my_server_echo");
    assert_eq!(def.description, "Returns its text.");
    assert_eq!(
        def.input_schema,
        json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]})
    );
    let set = turnstile_mcp::add_tools(turnstile_host::ToolSet::new(), tools.clone());
    assert_eq!(set.definitions().len(), tools.len());
    assert!(set.get("mcp_my_server_sleep").is_some());
}

#[tokio::test]
async fn names_that_clash_across_servers_are_made_unique() {
    // `my.s` and `my_s` both give `mcp_my_s_echo`: the first in name order keeps it.
    let configs =
        BTreeMap::from([("my.s".to_owned(), stdio(&[])), ("my_s".to_owned(), stdio(&[]))]);
    let (tools, failures) = connect_all(&configs).await;
    assert_eq!(failures, []);
    let mut names: Vec<&str> = tools.iter().map(|t| t.name()).collect();
    assert_eq!(find(&tools, "mcp_my_s_echo").server(), "my.s");
    let other = tools.iter().find(|t| t.server() == "my_s" && t.remote_name() == "echo").unwrap();
    assert!(other.name().starts_with("mcp_my_s_echo_") && other.name().len() == 22, "{other:?}");
    assert_eq!(run(&tools, other.name(), json!({"text": "x"})).await, ToolOutput::ok("x"));
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), 14);
}

#[tokio::test]
async fn env_and_cwd_reach_the_process() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let config = stdio(&[])
        .with_cwd(dir.path())
        .with_env("TURNSTILE_MCP_TEST_CANCEL_LOG", log.to_str().unwrap());
    let (tools, _) = connect_all(&one("t", config)).await;
    let cwd = run(&tools, "mcp_t_cwd", json!({})).await;
    assert_eq!(cwd, ToolOutput::ok(dir.path().canonicalize().unwrap().display().to_string()));
    assert_eq!(run(&tools, "mcp_t_sleep", json!({"ms": 1})).await, ToolOutput::ok("slept 1 ms"));
    wait_for_line(&log, "started").await;
}

#[tokio::test]
async fn is_error_and_refusals_are_error_results() {
    let (tools, _) = connect_all(&one("t", stdio(&[]))).await;
    assert_eq!(run(&tools, "mcp_t_fail", json!({})).await, ToolOutput::error("failed as asked"));
    let not_an_object = find(&tools, "mcp_t_echo").run(call(json!([1]))).await;
    assert_eq!(not_an_object, ToolOutput::error("the input must be a JSON object, not an array"));
    // The server still answers after both.
    assert_eq!(run(&tools, "mcp_t_echo", json!({"text": "x"})).await, ToolOutput::ok("x"));
}

#[tokio::test]
async fn a_server_that_crashes_mid_call_gives_an_error_and_later_calls_fail_at_once() {
    let (tools, _) = connect_all(&one("t", stdio(&[]))).await;
    let out = tokio::time::timeout(WAIT, run(&tools, "mcp_t_crash", json!({}))).await.unwrap();
    assert!(out.is_error, "{out:?}");
    assert_eq!(
        out.content,
        "MCP server `t` stopped during the call to `crash`: it exited (exit status: 3); its \
         stderr ends with: crashing as asked"
    );
    let t0 = Instant::now();
    let later = run(&tools, "mcp_t_echo", json!({"text": "x"})).await;
    assert!(t0.elapsed() < Duration::from_millis(500), "at once: {:?}", t0.elapsed());
    assert!(later.is_error, "{later:?}");
    assert_eq!(
        later.content,
        "MCP server `t` has stopped: it exited (exit status: 3); its stderr ends with: crashing \
         as asked"
    );
}

#[tokio::test]
async fn a_call_that_hangs_times_out_with_an_error_and_a_cancellation() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let config = stdio(&["--cancel-log", log.to_str().unwrap()]).with_timeout_secs(1);
    let (tools, _) = connect_all(&one("t", config)).await;
    let t0 = Instant::now();
    let out = run(&tools, "mcp_t_sleep", json!({"ms": 60_000})).await;
    let took = t0.elapsed();
    assert!(took >= Duration::from_secs(1) && took < Duration::from_secs(5), "{took:?}");
    assert!(out.is_error, "{out:?}");
    assert!(
        out.content.starts_with("MCP server `t`: the call to `sleep` timed out after 1 s"),
        "{out:?}"
    );
    wait_for_line(&log, "cancelled").await;
    assert_eq!(run(&tools, "mcp_t_echo", json!({"text": "x"})).await, ToolOutput::ok("x"));
}

#[tokio::test]
async fn a_dropped_call_reaches_the_server_as_a_cancellation() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let (tools, _) = connect_all(&one("t", stdio(&["--cancel-log", log.to_str().unwrap()]))).await;
    let sleep = find(&tools, "mcp_t_sleep").clone();
    // The host drops an aborted call's future; aborting the task that polls it does the same.
    let task = tokio::spawn(async move { sleep.run(call(json!({"ms": 60_000}))).await });
    wait_for_line(&log, "started").await;
    task.abort();
    assert!(task.await.unwrap_err().is_cancelled());
    wait_for_line(&log, "cancelled").await;
    assert_eq!(run(&tools, "mcp_t_echo", json!({"text": "x"})).await, ToolOutput::ok("x"));
}

#[tokio::test]
async fn servers_that_fail_to_start_offer_nothing_and_the_others_work() {
    let configs = BTreeMap::from([
        ("a-missing".to_owned(), ServerConfig::stdio(["/nonexistent/turnstile-mcp-server"])),
        ("b-exits".to_owned(), stdio(&["--exit", "3"])),
        ("c-hangs".to_owned(), stdio(&["--hang"]).with_startup_timeout_secs(1)),
        ("d-good".to_owned(), stdio(&[])),
    ]);
    let t0 = Instant::now();
    let (tools, failures) = connect_all(&configs).await;
    assert!(t0.elapsed() < Duration::from_secs(5), "started at once: {:?}", t0.elapsed());
    let servers: Vec<&str> = failures.iter().map(|f| f.server.as_str()).collect();
    assert_eq!(servers, ["a-missing", "b-exits", "c-hangs"]);
    let reason = |i: usize| failures[i].reason.as_str();
    assert!(
        reason(0).starts_with("could not run \"/nonexistent/turnstile-mcp-server\": "),
        "{failures:?}"
    );
    assert_eq!(
        reason(1),
        "it exited during the MCP handshake (exit status: 3); its stderr ends with: exiting at \
         start as asked"
    );
    assert_eq!(reason(2), "no answer to the MCP handshake within 1 s", "{failures:?}");
    assert_eq!(
        failures[2].to_string(),
        "MCP server `c-hangs` did not start: no answer to the MCP handshake within 1 s"
    );
    assert!(tools.iter().all(|t| t.server() == "d-good"));
    assert_eq!(run(&tools, "mcp_d-good_echo", json!({"text": "x"})).await, ToolOutput::ok("x"));
}

#[tokio::test]
async fn an_invalid_configuration_is_a_start_failure() {
    let configs = one("t", ServerConfig::stdio(Vec::<String>::new()));
    let (tools, failures) = connect_all(&configs).await;
    assert!(tools.is_empty());
    assert_eq!(failures[0].reason, "`command` must name a program: it is empty");
    assert!(SERVER.ends_with("turnstile-mcp-test-server"));
}

#[tokio::test]
async fn one_server_alone() {
    let tools = turnstile_mcp::connect("one", &stdio(&[])).await.unwrap();
    assert_eq!(run(&tools, "mcp_one_echo", json!({"text": "x"})).await, ToolOutput::ok("x"));
    let failure = turnstile_mcp::connect("two", &stdio(&["--exit", "1"])).await.unwrap_err();
    assert_eq!(failure.server, "two");
}

/// True while process `pid` runs (a zombie does not count). Linux's /proc.
fn running(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat.rsplit_once(") ").is_some_and(|(_, rest)| rest.starts_with('Z')),
        Err(_) => false,
    }
}

/// Waits for the pid written to `path`.
async fn pid_in(path: &std::path::Path) -> u32 {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Ok(text) = std::fs::read_to_string(path)
            && let Ok(pid) = text.trim().parse()
        {
            return pid;
        }
        assert!(Instant::now() < deadline, "no pid in {path:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits for process `pid` to end.
async fn ends(pid: u32) {
    let deadline = Instant::now() + WAIT;
    while running(pid) {
        assert!(Instant::now() < deadline, "process {pid} still runs");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_server_that_does_not_start_leaves_no_process_behind() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    // A wrapper that starts a background child, then never speaks MCP.
    let script = format!("sleep 300 & echo $! > {}; sleep 300", pid_file.display());
    let config = ServerConfig::stdio(["sh", "-c", &script]).with_startup_timeout_secs(1);
    let (tools, failures) = connect_all(&one("t", config)).await;
    assert!(tools.is_empty());
    assert_eq!(failures[0].reason, "no answer to the MCP handshake within 1 s");
    ends(pid_in(&pid_file).await).await;
}

#[tokio::test]
async fn dropping_the_last_tool_ends_the_server_and_its_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let script = format!("sleep 300 & echo $! > {}; exec {SERVER}", pid_file.display());
    let (tools, failures) =
        connect_all(&one("t", ServerConfig::stdio(["sh", "-c", &script]))).await;
    assert_eq!(failures, []);
    let pid = pid_in(&pid_file).await;
    assert_eq!(run(&tools, "mcp_t_echo", json!({"text": "x"})).await, ToolOutput::ok("x"));
    assert!(running(pid));
    drop(tools);
    ends(pid).await;
}
