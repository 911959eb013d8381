//! What the end-to-end tests of `turnstile run` share: a provider server on 127.0.0.1 that
//! answers with Anthropic event streams (recorded ones, or ones built in the recorded streams'
//! exact shape), a scratch project with a configuration pointing at it, and the real binary.
#![allow(dead_code)] // each test file uses part of it

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The system prompt of a title request (`turnstile_http::prompt::TITLE_PROMPT` starts so).
const TITLE_MARK: &str = "Write a short title";

/// One answer of the provider.
#[derive(Clone, Debug)]
pub enum Reply {
    /// A 200 event stream.
    Sse(Vec<u8>),
    /// An error status with a JSON body and headers.
    Status(u16, Vec<(String, String)>, String),
    /// A 200 event-stream head, then nothing until the client goes away.
    Hang,
    /// A 200 event stream sent in pieces, each after its pause in milliseconds.
    Paced(Vec<(u64, Vec<u8>)>),
}

/// A request the provider received.
#[derive(Clone, Debug)]
pub struct Captured {
    pub body: serde_json::Value,
}

/// The provider server: step requests get the scripted replies in order (the last one again
/// when they run out); title requests get a title.
pub struct Provider {
    pub base_url: String,
    pub requests: Arc<Mutex<Vec<Captured>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Provider {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Provider {
    pub async fn start(replies: Vec<Reply>) -> Provider {
        Provider::start_titled(replies, "A test title").await
    }

    /// The same, with `title` the answer to every title request.
    pub async fn start_titled(replies: Vec<Reply>, title: &str) -> Provider {
        let title: Arc<str> = Arc::from(title);
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let script = Arc::new(Mutex::new((replies, 0usize)));
        let seen = requests.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((socket, _)) = listener.accept().await else {
                    return;
                };
                let (seen, script, title) = (seen.clone(), script.clone(), title.clone());
                tokio::spawn(async move { serve(socket, seen, script, &title).await });
            }
        });
        Provider {
            base_url,
            requests,
            task,
        }
    }

    /// The step requests (title requests left out), in order.
    pub fn steps(&self) -> Vec<serde_json::Value> {
        self.requests
            .lock()
            .unwrap()
            .iter()
            .filter(|c| !is_title(&c.body))
            .map(|c| c.body.clone())
            .collect()
    }
}

fn is_title(body: &serde_json::Value) -> bool {
    body["system"].to_string().contains(TITLE_MARK)
}

type Script = Arc<Mutex<(Vec<Reply>, usize)>>;

async fn serve(
    mut socket: TcpStream,
    seen: Arc<Mutex<Vec<Captured>>>,
    script: Script,
    title_text: &str,
) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let (head_end, length) = loop {
        let Ok(n) = socket.read(&mut chunk).await else {
            return;
        };
        if n == 0 {
            return;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_lowercase();
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            break (end + 4, length);
        }
    };
    while buf.len() < head_end + length {
        let Ok(n) = socket.read(&mut chunk).await else {
            return;
        };
        if n == 0 {
            return;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let body: serde_json::Value =
        serde_json::from_slice(&buf[head_end..head_end + length]).unwrap_or_default();
    let title = is_title(&body);
    seen.lock().unwrap().push(Captured { body });
    let reply = if title {
        Reply::Sse(text_stream(title_text))
    } else {
        let mut s = script.lock().unwrap();
        let i = s.1.min(s.0.len().saturating_sub(1));
        s.1 += 1;
        s.0.get(i)
            .cloned()
            .unwrap_or(Reply::Sse(text_stream("(no more replies)")))
    };
    let head = |status: u16, kind: &str, len: Option<usize>| {
        let len = len
            .map(|l| format!("content-length: {l}\r\n"))
            .unwrap_or_default();
        format!("HTTP/1.1 {status} X\r\ncontent-type: {kind}\r\n{len}connection: close\r\n")
    };
    match reply {
        Reply::Sse(bytes) => {
            let h = head(200, "text/event-stream", Some(bytes.len())) + "\r\n";
            let _ = socket.write_all(h.as_bytes()).await;
            let _ = socket.write_all(&bytes).await;
        }
        Reply::Status(status, headers, text) => {
            let mut h = head(status, "application/json", Some(text.len()));
            for (k, v) in headers {
                h.push_str(&format!("{k}: {v}\r\n"));
            }
            h.push_str("\r\n");
            let _ = socket.write_all(h.as_bytes()).await;
            let _ = socket.write_all(text.as_bytes()).await;
        }
        Reply::Paced(pieces) => {
            let total = pieces.iter().map(|(_, b)| b.len()).sum();
            let h = head(200, "text/event-stream", Some(total)) + "\r\n";
            let _ = socket.write_all(h.as_bytes()).await;
            for (pause, bytes) in pieces {
                tokio::time::sleep(Duration::from_millis(pause)).await;
                let _ = socket.write_all(&bytes).await;
                let _ = socket.flush().await;
            }
        }
        Reply::Hang => {
            let h = head(200, "text/event-stream", None) + "\r\n";
            let _ = socket.write_all(h.as_bytes()).await;
            // Until the client closes.
            let _ = socket.read(&mut chunk).await;
        }
    }
    let _ = socket.shutdown().await;
}

fn event(name: &str, data: &serde_json::Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

fn message_start(id: &str) -> String {
    event(
        "message_start",
        &serde_json::json!({"type": "message_start", "message": {
            "model": "claude-sonnet-4-20250514", "id": id, "type": "message", "role": "assistant",
            "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 100, "cache_creation_input_tokens": 0,
                      "cache_read_input_tokens": 0, "output_tokens": 1}}}),
    )
}

fn message_end(stop: &str) -> String {
    event(
        "message_delta",
        &serde_json::json!({"type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": null},
            "usage": {"input_tokens": 100, "output_tokens": 20}}),
    ) + &event("message_stop", &serde_json::json!({"type": "message_stop"}))
}

/// A text block at index 0 streamed as `pieces`; `close`: with its stop event.
fn text_block(pieces: &[&str], close: bool) -> String {
    let mut s = event(
        "content_block_start",
        &serde_json::json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "text", "text": ""}}),
    );
    for piece in pieces {
        s += &event(
            "content_block_delta",
            &serde_json::json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "text_delta", "text": piece}}),
        );
    }
    if close {
        s += &event(
            "content_block_stop",
            &serde_json::json!({"type": "content_block_stop", "index": 0}),
        );
    }
    s
}

/// The opening of a text answer: its message start, its text block and `text` (the first
/// piece of a [`Reply::Paced`] whose next piece is [`overloaded_event`]).
pub fn text_opening(text: &str) -> Vec<u8> {
    (message_start("msg_partial") + &text_block(&[text], false)).into_bytes()
}

/// Anthropic's mid-stream `overloaded_error` event (retryable), as the API sends it.
pub fn overloaded_event() -> Vec<u8> {
    event(
        "error",
        &serde_json::json!({"type": "error",
            "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    )
    .into_bytes()
}

/// An answer that is only text, in the shape of the recorded Anthropic streams.
pub fn text_stream(text: &str) -> Vec<u8> {
    // In pieces, as a model streams it.
    let words: Vec<&str> = text.split_inclusive(' ').collect();
    (message_start("msg_text") + &text_block(&words, true) + &message_end("end_turn")).into_bytes()
}

/// An answer that is only text, a word every `every_ms` milliseconds (as a model writes; more
/// than the store's 33 ms debounce, so most words are a commit of their own).
pub fn paced_text(text: &str, every_ms: u64) -> Reply {
    let mut pieces = vec![(
        0,
        (message_start("msg_paced") + &text_block(&[], false)).into_bytes(),
    )];
    for word in text.split_inclusive(' ') {
        let delta = event(
            "content_block_delta",
            &serde_json::json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "text_delta", "text": word}}),
        );
        pieces.push((every_ms, delta.into_bytes()));
    }
    let end = event(
        "content_block_stop",
        &serde_json::json!({"type": "content_block_stop", "index": 0}),
    ) + &message_end("end_turn");
    pieces.push((0, end.into_bytes()));
    Reply::Paced(pieces)
}

/// An answer with a short text and one tool call whose arguments stream in three pieces, in
/// the shape of the recorded Anthropic tool streams.
pub fn tool_stream(id: &str, name: &str, input: &serde_json::Value) -> Vec<u8> {
    tool_stream_raw(id, name, &input.to_string())
}

/// The same with the arguments as the model streamed them, valid JSON or not.
pub fn tool_stream_raw(id: &str, name: &str, json: &str) -> Vec<u8> {
    let mut s = message_start(&format!("msg_{id}"));
    s += &text_block(&[&format!("Using {name}.")], true);
    s += &event(
        "content_block_start",
        &serde_json::json!({"type": "content_block_start", "index": 1,
            "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
    );
    let cut = |n: usize| {
        let mut i = n.min(json.len());
        while !json.is_char_boundary(i) {
            i += 1;
        }
        i
    };
    let (a, b) = (cut(json.len() / 3), cut(2 * json.len() / 3));
    for piece in [&json[..a], &json[a..b], &json[b..]] {
        s += &event(
            "content_block_delta",
            &serde_json::json!({"type": "content_block_delta", "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": piece}}),
        );
    }
    s += &event(
        "content_block_stop",
        &serde_json::json!({"type": "content_block_stop", "index": 1}),
    );
    s += &message_end("tool_use");
    s.into_bytes()
}

/// The MCP test server binary, which `cargo test --workspace` builds beside `turnstile`.
pub fn mcp_test_server() -> PathBuf {
    let path = PathBuf::from(env!("CARGO_BIN_EXE_turnstile")).with_file_name(format!(
        "turnstile-mcp-test-server{}",
        std::env::consts::EXE_SUFFIX
    ));
    assert!(
        path.exists(),
        "{} is missing: build it with `cargo build -p turnstile-mcp --bin turnstile-mcp-test-server` \
         (`cargo test --workspace` builds it)",
        path.display()
    );
    path
}

/// A recorded response body of the repository's fixtures.
pub fn recorded(case: &str, n: usize) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/providers/anthropic-messages")
        .join(case)
        .join(format!("{n:02}.response.body"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A scratch project: a working directory with a configuration for the provider.
pub struct Project {
    pub dir: tempfile::TempDir,
    pub config: PathBuf,
    /// The project's store is this PostgreSQL database (`TURNSTILE_STORE`), not its file.
    pub database: Option<turnstile_host::store::ScratchDatabase>,
}

impl Project {
    /// A project whose configuration uses `base_url`, plus `extra` TOML.
    pub fn new(base_url: &str, extra: &str) -> Project {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("turnstile.toml");
        std::fs::write(
            &config,
            format!(
                "model = \"test/claude\"\n{extra}\n\n[providers.test]\napi = \"anthropic-messages\"\n\
                 base_url = \"{base_url}\"\n\n[providers.test.models.claude]\n\
                 model = \"claude-sonnet-4-20250514\"\ncontext_window = 200000\n"
            ),
        )
        .unwrap();
        Project {
            dir,
            config,
            database: None,
        }
    }

    /// The same project with its store in a scratch PostgreSQL database of its own (the
    /// server `TURNSTILE_TEST_POSTGRES` names; without it, a panic saying how to start one).
    #[must_use]
    pub fn on_postgres(mut self) -> Project {
        let db = turnstile_host::store::ScratchDatabase::create().unwrap_or_else(|e| panic!("{e}"));
        self.database = Some(db);
        self
    }

    /// A reader of the project's store, wherever it is.
    pub fn reader(&self) -> turnstile_host::store::Reader {
        match &self.database {
            Some(db) => turnstile_host::store::Reader::open_at(
                &turnstile_host::store::Location::Postgres(db.url().to_owned()),
            )
            .unwrap(),
            None => turnstile_host::store::Reader::open(&self.store()).unwrap(),
        }
    }

    /// A project with this configuration file.
    pub fn with_config(text: &str) -> Project {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("turnstile.toml");
        std::fs::write(&config, text).unwrap();
        Project {
            dir,
            config,
            database: None,
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn store(&self) -> PathBuf {
        self.path().join(".turnstile").join("store.db")
    }

    /// `turnstile ARGS` in the project, with nothing of the caller's environment that could
    /// change what it does.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_turnstile"));
        c.args(args)
            .current_dir(self.path())
            .env_remove("TURNSTILE_CONFIG")
            .env_remove("TURNSTILE_STORE")
            .env_remove("TURNSTILE_MODEL")
            .env_remove("RUST_LOG")
            .env("HOME", self.path())
            .env_remove("XDG_CONFIG_HOME")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(db) = &self.database {
            c.env("TURNSTILE_STORE", db.url());
        }
        c
    }

    /// Runs `turnstile ARGS` to its end (60 s at most).
    pub async fn run(&self, args: &[&str]) -> Done {
        let child = self.command(args).spawn().unwrap();
        finish(child).await
    }

    /// `turnstile sessions` before any run.
    pub async fn sessions_empty(&self) -> Done {
        assert!(!self.store().exists());
        self.run(&["sessions"]).await
    }

    /// Starts `turnstile ARGS` without waiting.
    pub fn spawn(&self, args: &[&str]) -> Child {
        self.command(args).spawn().unwrap()
    }
}

/// How a process ended.
#[derive(Debug)]
pub struct Done {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// Waits for `child` (60 s at most: a test never hangs) off the async threads.
pub async fn finish(child: Child) -> Done {
    let pid = child.id();
    let mut waiting = tokio::task::spawn_blocking(move || child.wait_with_output());
    let out: Output = match tokio::time::timeout(Duration::from_secs(60), &mut waiting).await {
        Ok(r) => r.unwrap().unwrap(),
        Err(_) => {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(i32::try_from(pid).unwrap()),
                nix::sys::signal::Signal::SIGKILL,
            );
            // What it printed until then says where it stuck.
            let out = waiting.await.unwrap().unwrap();
            panic!(
                "`turnstile` did not end within 60 s\nstdout: {}\nstderr: {}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    };
    Done {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Waits (10 s at most) until `path` exists and holds a number.
pub async fn number_in(path: &Path) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(text) = std::fs::read_to_string(path)
            && let Ok(n) = text.trim().parse()
        {
            return n;
        }
        assert!(
            Instant::now() < deadline,
            "{} was not written",
            path.display()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// True while a process of group `pgid` lives.
pub fn group_alive(pgid: i32) -> bool {
    nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pgid), None).is_ok()
}

/// Waits (10 s at most) for the group to be gone.
pub async fn group_gone(pgid: i32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while group_alive(pgid) {
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    true
}

/// Sends `signal` to the process.
pub fn signal(pid: u32, signal: nix::sys::signal::Signal) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(pid).unwrap()),
        signal,
    )
    .unwrap();
}

/// Every `tool_use` of the request's messages has its `tool_result` in the next message: what
/// the Anthropic API requires of a request (and what history repair guarantees, SPEC 4.12).
pub fn protocol_legal(body: &serde_json::Value) -> Result<(), String> {
    let messages = body["messages"].as_array().ok_or("no messages")?;
    for (i, m) in messages.iter().enumerate() {
        let Some(content) = m["content"].as_array() else {
            continue;
        };
        for block in content.iter().filter(|b| b["type"] == "tool_use") {
            let id = &block["id"];
            let answered = messages
                .get(i + 1)
                .and_then(|n| n["content"].as_array())
                .is_some_and(|c| {
                    c.iter()
                        .any(|b| b["type"] == "tool_result" && &b["tool_use_id"] == id)
                });
            if !answered {
                return Err(format!(
                    "tool_use {id} of message {i} has no tool_result after it"
                ));
            }
        }
    }
    Ok(())
}

/// The tool results of the request's last message, as (tool_use_id, text).
pub fn last_results(body: &serde_json::Value) -> Vec<(String, String)> {
    let last = body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .cloned()
        .unwrap_or_default();
    last["content"]
        .as_array()
        .map(|c| {
            c.iter()
                .filter(|b| b["type"] == "tool_result")
                .map(|b| {
                    let text = match &b["content"] {
                        serde_json::Value::String(s) => s.clone(),
                        serde_json::Value::Array(parts) => {
                            parts.iter().filter_map(|p| p["text"].as_str()).collect()
                        }
                        other => other.to_string(),
                    };
                    (b["tool_use_id"].as_str().unwrap_or("").to_owned(), text)
                })
                .collect()
        })
        .unwrap_or_default()
}
