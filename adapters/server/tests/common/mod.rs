//! A real server on 127.0.0.1 over a real host and store, and an HTTP client for it (its event
//! stream read with the test kit's client).

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)] // each test uses a subset

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use turnstile_host::{Host, HostConfig, Provider, ToolSet};
use turnstile_server::{Asks, Server, ServerConfig, Token};
use turnstile_testkit::events::Events;
use turnstile_tools::{Gate, Permissions, PermissionsFile};

pub const TOKEN: &str = "test-token-0123456789";

/// A server under test.
pub struct Running {
    pub dir: tempfile::TempDir,
    pub server: Server,
    pub base: String,
    pub http: reqwest::Client,
    pub task: tokio::task::JoinHandle<()>,
}

/// Starts a host on a scratch store with `provider` and `tools` behind a gate whose asks go
/// to the server's clients, and serves it on a free port of 127.0.0.1.
pub async fn start(
    provider: impl Provider,
    tools: ToolSet,
    tune: impl FnOnce(&mut ServerConfig),
) -> Running {
    let dir = tempfile::tempdir().unwrap();
    start_in(dir, provider, tools, tune).await
}

pub async fn start_in(
    dir: tempfile::TempDir,
    provider: impl Provider,
    tools: ToolSet,
    tune: impl FnOnce(&mut ServerConfig),
) -> Running {
    let asks = Asks::new();
    let permissions = Permissions::new(&PermissionsFile::default()).unwrap();
    let gate = Arc::new(Gate::new(permissions, Vec::new(), Arc::new(asks.clone()), dir.path()));
    let tools = gate.wrap(tools);
    let host = Host::open(HostConfig::new(dir.path().join("store.db")), Arc::new(provider), tools)
        .await
        .expect("open the host");
    let mut config = ServerConfig::new(Token::new(TOKEN).unwrap());
    config.heartbeat = Duration::from_millis(200);
    tune(&mut config);
    let server = Server::start(host, asks, config).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    // Through the server's own connection layer (timeouts, the cap, errors before the router).
    let serving = server.clone();
    let task = tokio::spawn(async move {
        serving.serve(listener, std::future::pending()).await.unwrap();
    });
    Running { dir, server, base, http: reqwest::Client::new(), task }
}

impl Running {
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub async fn get(&self, path: &str) -> (u16, Value) {
        let r = self.http.get(self.url(path)).bearer_auth(TOKEN).send().await.unwrap();
        answer(r).await
    }

    pub async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let r = self.http.post(self.url(path)).bearer_auth(TOKEN).json(&body).send().await.unwrap();
        answer(r).await
    }

    /// Submits a prompt; panics unless it is accepted. Returns its RunId.
    pub async fn prompt(&self, session: &str, prompt: &str, run_id: &str) -> Value {
        let (status, v) = self
            .post(
                &format!("/v1/sessions/{session}/prompts"),
                serde_json::json!({"prompt": prompt, "run_id": run_id}),
            )
            .await;
        assert_eq!(status, 202, "{v}");
        v
    }

    /// Waits (long poll) until the run finished; returns its RunComplete.
    pub async fn finished(&self, run_id: &str) -> Value {
        loop {
            let (status, v) = self.get(&format!("/v1/runs/{run_id}/wait?timeout_ms=5000")).await;
            assert_eq!(status, 200, "{v}");
            if v["finished"] == true {
                return v["run_complete"].clone();
            }
        }
    }

    /// Opens the event stream, resuming after `last` when given.
    pub async fn events(&self, last: Option<&str>) -> Events {
        Events::connect(&self.base, TOKEN, last).await
    }

    /// Opens the event stream at `path` (`/v1/events` with a query), resuming after `last`.
    pub async fn events_at(&self, path: &str, last: Option<&str>) -> Events {
        Events::connect_at(&self.base, path, TOKEN, last).await
    }
}

pub async fn answer(r: reqwest::Response) -> (u16, Value) {
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

/// Calls `echo` first, then answers with text once the result is in.
pub fn calls_echo_then_answers() -> turnstile_host::ScriptedProvider {
    turnstile_host::ScriptedProvider::new(|req, _| {
        if req.messages.iter().any(|m| matches!(m, turnstile_host::RequestMessage::ToolResults(_)))
        {
            turnstile_host::Answer::streamed("done", 1, 1, turnstile_host::Usage::default())
        } else {
            turnstile_host::Answer::tool_call("c1", "echo", r#"{"text":"x"}"#)
        }
    })
}

/// A provider that answers every request with "hello there", in 3 deltas 5 ms apart.
pub fn answers_hello() -> turnstile_host::ScriptedProvider {
    answers("hello there", 3, 5)
}

/// A provider that answers every request with `text`, in `deltas` deltas `every_ms` apart.
pub fn answers(
    text: &'static str,
    deltas: usize,
    every_ms: u64,
) -> turnstile_host::ScriptedProvider {
    turnstile_host::ScriptedProvider::new(move |_, _| {
        turnstile_host::Answer::streamed(text, deltas, every_ms, turnstile_host::Usage::default())
    })
}
