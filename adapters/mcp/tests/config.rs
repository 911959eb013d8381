//! The `[mcp.<name>]` tables of the CLI's TOML file: both kinds of server, the defaults, and a
//! clear error for every table that is not one of them.

use std::collections::BTreeMap;

use turnstile_mcp::{ServerConfig, Transport};

#[derive(serde::Deserialize)]
struct File {
    mcp: BTreeMap<String, ServerConfig>,
}

fn parse(text: &str) -> Result<BTreeMap<String, ServerConfig>, String> {
    toml::from_str::<File>(text).map(|f| f.mcp).map_err(|e| e.message().to_owned())
}

#[test]
fn stdio_and_http_servers_with_their_options_and_defaults() {
    let servers = parse(
        r#"
        [mcp.files]
        command = ["npx", "-y", "server-filesystem", "/srv"]
        env = { NODE_ENV = "production" }
        cwd = "/srv"
        timeout_secs = 30

        [mcp.search]
        url = "https://example.test/mcp"
        headers = { Authorization = "Bearer abc" }
        startup_timeout_secs = 5
        "#,
    )
    .unwrap();
    let files = &servers["files"];
    assert_eq!(
        files.transport,
        Transport::Stdio {
            command: ["npx", "-y", "server-filesystem", "/srv"].map(String::from).to_vec(),
            env: BTreeMap::from([("NODE_ENV".into(), "production".into())]),
            cwd: Some("/srv".into()),
        }
    );
    assert_eq!((files.timeout_secs, files.startup_timeout_secs), (30, 20));
    let search = &servers["search"];
    assert_eq!(
        search.transport,
        Transport::Http {
            url: "https://example.test/mcp".into(),
            headers: BTreeMap::from([("Authorization".into(), "Bearer abc".into())]),
        }
    );
    assert_eq!((search.timeout_secs, search.startup_timeout_secs), (60, 5));
    assert_eq!(
        *files,
        ServerConfig::stdio(["npx", "-y", "server-filesystem", "/srv"])
            .with_env("NODE_ENV", "production")
            .with_cwd("/srv")
            .with_timeout_secs(30)
    );
}

#[test]
fn a_table_that_is_not_one_server_is_refused_with_a_reason() {
    let cases = [
        (
            "command = [\"a\"]\nurl = \"http://x\"",
            "a server has either `command` (stdio) or `url` (streamable HTTP), not both",
        ),
        (
            "timeout_secs = 3",
            "a server needs `command = [\"program\", \"arg\", ...]` (stdio) or `url = \"http://...\"` (streamable HTTP)",
        ),
        ("command = []", "`command` must name a program: it is empty"),
        ("command = [\"\"]", "`command` must name a program: its first item is empty"),
        ("url = \"ftp://x\"", "`url` must start with http:// or https://: \"ftp://x\""),
        (
            "url = \"http://x\"\nenv = { A = \"b\" }",
            "`env` and `cwd` are for a `command` server; this one has `url`",
        ),
        (
            "command = [\"a\"]\nheaders = { A = \"b\" }",
            "`headers` is for a `url` server; this one has `command`",
        ),
        (
            "url = \"http://x\"\nheaders = { \"a b\" = \"c\" }",
            "`headers`: \"a b\" is not a valid HTTP header name",
        ),
        (
            "command = [\"a\"]\ntimeout_secs = 0",
            "`timeout_secs` must be from 1 to 86400 (a day): 0",
        ),
        (
            "command = [\"a\"]\nstartup_timeout_secs = 86401",
            "`startup_timeout_secs` must be from 1 to 86400 (a day): 86401",
        ),
    ];
    for (body, message) in cases {
        assert_eq!(parse(&format!("[mcp.s]\n{body}")), Err(message.to_owned()), "{body}");
    }
    let unknown = parse("[mcp.s]\ncommand = [\"a\"]\ntimeout = 3").unwrap_err();
    assert!(unknown.starts_with("unknown field `timeout`, expected one of"), "{unknown}");
}
