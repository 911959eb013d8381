//! What the tests share: the test server, calls, and bounded waits.

#![allow(dead_code, reason = "each test file uses its own part")]

use std::path::Path;
use std::time::{Duration, Instant};

use turnstile_core::{CallId, SessionId, ToolOutput};
use turnstile_host::{Tool, ToolCall};
use turnstile_mcp::{McpTool, ServerConfig};

/// The project's test server (`src/bin/turnstile-mcp-test-server.rs`), built by cargo first.
pub const SERVER: &str = env!("CARGO_BIN_EXE_turnstile-mcp-test-server");

/// The longest a test waits for something a server does.
pub const WAIT: Duration = Duration::from_secs(10);

/// The test server over stdio, with these arguments.
pub fn stdio(args: &[&str]) -> ServerConfig {
    ServerConfig::stdio(std::iter::once(SERVER).chain(args.iter().copied()))
}

/// A call with this input.
pub fn call(input: serde_json::Value) -> ToolCall {
    ToolCall::new(SessionId::new("s"), CallId::new("c"), input.to_string())
}

/// The tool offered as `name`.
pub fn find<'a>(tools: &'a [McpTool], name: &str) -> &'a McpTool {
    let names: Vec<&str> = tools.iter().map(McpTool::name).collect();
    tools.iter().find(|t| t.name() == name).unwrap_or_else(|| panic!("no {name} in {names:?}"))
}

/// Runs one call of the tool offered as `name`.
pub async fn run(tools: &[McpTool], name: &str, input: serde_json::Value) -> ToolOutput {
    find(tools, name).run(call(input)).await
}

/// Waits ([`WAIT`] at most) for `path` to have the line `line`.
pub async fn wait_for_line(path: &Path, line: &str) {
    let deadline = Instant::now() + WAIT;
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text.lines().any(|l| l == line) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "no line {line:?} in {path:?} within {WAIT:?}: {text:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The test server over streamable HTTP, a child process killed when this is dropped (it also
/// exits when its stdin, a pipe held here, closes).
pub struct HttpServer {
    /// The endpoint it printed.
    pub url: String,
    _child: tokio::process::Child,
}

impl HttpServer {
    /// Starts it with `--http` and these extra arguments, and reads its URL.
    pub async fn start(args: &[&str]) -> HttpServer {
        use tokio::io::AsyncBufReadExt;
        let mut child = tokio::process::Command::new(SERVER)
            .arg("--http")
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("the test server runs");
        let stdout = child.stdout.take().expect("piped");
        let mut line = String::new();
        let mut reader = tokio::io::BufReader::new(stdout);
        tokio::time::timeout(WAIT, reader.read_line(&mut line))
            .await
            .expect("the test server prints its URL")
            .expect("its stdout reads");
        let url = line.trim().to_owned();
        assert!(url.starts_with("http://127.0.0.1:"), "{url:?}");
        HttpServer { url, _child: child }
    }
}
