//! A real server on 127.0.0.1 over a real host and store, and an HTTP client for it.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)] // each test uses a subset

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use turnstile_host::{Host, HostConfig, Provider, ToolSet};
use turnstile_server::{Asks, Server, ServerConfig, Token};
use turnstile_tools::{Gate, Permissions, PermissionsFile};
use turnstile_wire::sse::{Frame, Framer};

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
        self.events_at("/v1/events", last).await
    }

    /// Opens the event stream at `path` (`/v1/events` with a query), resuming after `last`.
    pub async fn events_at(&self, path: &str, last: Option<&str>) -> Events {
        let mut req = self.http.get(self.url(path)).bearer_auth(TOKEN);
        if let Some(id) = last {
            req = req.header("Last-Event-ID", id);
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status().as_u16(), 200);
        Events { resp, framer: Framer::new(), ready: Default::default(), last: None, bytes: 0 }
    }
}

pub async fn answer(r: reqwest::Response) -> (u16, Value) {
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

/// An open event stream.
pub struct Events {
    resp: reqwest::Response,
    framer: Framer,
    ready: std::collections::VecDeque<Frame>,
    /// The id of the last event read.
    pub last: Option<String>,
    /// The bytes of the stream received so far.
    pub bytes: usize,
}

impl Events {
    /// The next event, or `None` when the stream ended or nothing came for `within`.
    pub async fn next_within(&mut self, within: Duration) -> Option<Frame> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if let Some(f) = self.ready.pop_front() {
                self.last.clone_from(&f.id);
                return Some(f);
            }
            let chunk = tokio::time::timeout_at(deadline, self.resp.chunk()).await.ok()?.ok()??;
            self.bytes += chunk.len();
            let mut out = Vec::new();
            self.framer.feed(&chunk, &mut out).unwrap();
            self.ready.extend(out);
        }
    }

    /// The next event; panics after 10 s of nothing.
    pub async fn next(&mut self) -> Frame {
        self.next_within(Duration::from_secs(10)).await.expect("an event within 10 s")
    }

    /// Reads events until the RunComplete of `run_id`; returns every event read.
    pub async fn until_run_complete(&mut self, run_id: &str) -> Vec<Frame> {
        let mut seen = Vec::new();
        loop {
            let f = self.next().await;
            let done = f.event == "run_complete" && data(&f)["run_id"] == run_id;
            seen.push(f);
            if done {
                return seen;
            }
        }
    }
}

/// An event's JSON.
pub fn data(f: &Frame) -> Value {
    serde_json::from_str(&f.data).unwrap()
}

/// The RunIds of the `run_complete` events among `frames`, in order.
pub fn run_completes(frames: &[Frame]) -> Vec<String> {
    frames
        .iter()
        .filter(|f| f.event == "run_complete")
        .map(|f| data(f)["run_id"].as_str().unwrap().to_owned())
        .collect()
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
