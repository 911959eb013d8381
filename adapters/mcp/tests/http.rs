//! Servers over streamable HTTP (the test server on 127.0.0.1): listing and calls, headers,
//! error results, a dropped call that reaches the server as a cancellation, and a server that
//! dies or is not there.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::{HttpServer, WAIT, call, find, run, wait_for_line};
use serde_json::json;
use turnstile_core::ToolOutput;
use turnstile_host::Tool;
use turnstile_mcp::{ServerConfig, connect_all};

fn one(name: &str, config: ServerConfig) -> BTreeMap<String, ServerConfig> {
    BTreeMap::from([(name.to_owned(), config)])
}

#[tokio::test]
async fn an_http_server_lists_its_tools_and_answers_calls() {
    let server = HttpServer::start(&[]).await;
    let config = ServerConfig::http(&server.url).with_header("X-Turnstile-Test", "yes");
    let (tools, failures) = connect_all(&one("web", config)).await;
    assert_eq!(failures, []);
    assert_eq!(tools.len(), 7);
    assert_eq!(find(&tools, "mcp_web_echo").definition().description, "Returns its text.");
    assert_eq!(
        run(&tools, "mcp_web_echo", json!({"text": "hello"})).await,
        ToolOutput::ok("hello")
    );
    assert_eq!(
        run(&tools, "mcp_web_header", json!({"name": "x-turnstile-test"})).await,
        ToolOutput::ok("yes")
    );
    assert_eq!(run(&tools, "mcp_web_fail", json!({})).await, ToolOutput::error("failed as asked"));
}

#[tokio::test]
async fn a_dropped_http_call_reaches_the_server_as_a_cancellation() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let server = HttpServer::start(&["--cancel-log", log.to_str().unwrap()]).await;
    let (tools, _) = connect_all(&one("web", ServerConfig::http(&server.url))).await;
    let sleep = find(&tools, "mcp_web_sleep").clone();
    let task = tokio::spawn(async move { sleep.run(call(json!({"ms": 60_000}))).await });
    wait_for_line(&log, "started").await;
    task.abort();
    assert!(task.await.unwrap_err().is_cancelled());
    wait_for_line(&log, "cancelled").await;
    assert_eq!(run(&tools, "mcp_web_echo", json!({"text": "x"})).await, ToolOutput::ok("x"));
}

#[tokio::test]
async fn an_http_call_that_hangs_times_out() {
    let server = HttpServer::start(&[]).await;
    let config = ServerConfig::http(&server.url).with_timeout_secs(1);
    let (tools, _) = connect_all(&one("web", config)).await;
    let out = run(&tools, "mcp_web_sleep", json!({"ms": 60_000})).await;
    assert_eq!(
        out,
        ToolOutput::error(
            "MCP server `web`: the call to `sleep` timed out after 1 s (the server was told to \
             cancel it)"
        )
    );
}

#[tokio::test]
async fn an_http_server_that_dies_gives_error_results_without_hanging() {
    let server = HttpServer::start(&[]).await;
    let (tools, _) = connect_all(&one("web", ServerConfig::http(&server.url))).await;
    let t0 = Instant::now();
    let out = tokio::time::timeout(WAIT, run(&tools, "mcp_web_crash", json!({}))).await.unwrap();
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    assert!(out.is_error, "{out:?}");
    assert_eq!(
        out.content,
        "MCP server `web`: the connection closed before the call to `crash` was answered"
    );
    let t0 = Instant::now();
    let later = run(&tools, "mcp_web_echo", json!({"text": "x"})).await;
    assert!(t0.elapsed() < Duration::from_secs(1), "at once: {:?}", t0.elapsed());
    assert!(later.is_error, "{later:?}");
    assert_eq!(
        later.content,
        format!(
            "MCP server `web`: the call to `echo` failed: Client error: error sending request \
             for url ({})",
            server.url
        )
    );
}

#[tokio::test]
async fn an_http_server_that_is_not_there_does_not_start() {
    // A port that was free a moment ago: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let config = ServerConfig::http(format!("http://127.0.0.1:{port}/mcp"));
    let (tools, failures) = connect_all(&one("web", config)).await;
    assert!(tools.is_empty());
    assert_eq!(failures[0].server, "web");
    assert_eq!(
        failures[0].reason,
        format!(
            "the MCP handshake failed: Client error: error sending request for url \
             (http://127.0.0.1:{port}/mcp)"
        )
    );
}
