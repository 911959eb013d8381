//! Bytes an event-stream client reads for one streamed answer (not a timed test): run with
//! `cargo bench -p turnstile-server --bench deltas`.
//!
//! A real server over a real store, with the host's default 33 ms debounce; a scripted model
//! streams an answer of N characters in N/20 pieces, 40 ms apart (about a model's pace), so
//! that nearly every piece is a commit of its own. Two clients follow the same run at the same
//! time: one with `message_delta` events (the default) and, as the baseline measured in the
//! same run, one with `?deltas=false` (every state of the message whole). Printed per answer
//! size: the events and bytes each client read until the run's RunComplete. Each client
//! rebuilds the message from its events and must end with the stored text.
//!
//! Sizes: `TURNSTILE_DELTAS_SIZES` (characters, comma-separated; `2000,8000,16000`).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark: a failure is a panic

use std::sync::Arc;
use std::time::Duration;

use turnstile_core::Usage;
use turnstile_host::store::StoredMessage;
use turnstile_host::{Answer, Host, HostConfig, ScriptedProvider, ToolSet};
use turnstile_server::delta::MessageDelta;
use turnstile_server::{Asks, Server, ServerConfig, Token};
use turnstile_testkit::events::Events;

const TOKEN: &str = "deltas-bench-token-0123456789";
/// Milliseconds between two pieces of the answer.
const EVERY_MS: u64 = 40;
/// Characters per piece.
const PIECE: usize = 20;

fn answer(chars: usize) -> String {
    let words = "the quick brown fox jumps over the lazy dog ";
    words.chars().cycle().take(chars).collect()
}

fn main() {
    let sizes: Vec<usize> = std::env::var("TURNSTILE_DELTAS_SIZES")
        .unwrap_or_else(|_| "2000,8000,16000".to_owned())
        .split(',')
        .map(|s| s.trim().parse().expect("a size in characters"))
        .collect();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    println!(
        "# turnstile-server message deltas: one answer streamed in pieces of {PIECE} characters \
         {EVERY_MS} ms apart, two clients on the same run"
    );
    println!(
        "| answer | pieces | with deltas: events, bytes | whole states (baseline): events, bytes | \
         baseline / deltas |"
    );
    println!("|---|---|---|---|---|");
    for chars in sizes {
        rt.block_on(one(chars));
    }
}

/// What one client read.
#[derive(Default)]
struct Read {
    events: usize,
    bytes: usize,
    /// The assistant message as rebuilt from the events, with its revision.
    message: Option<(u64, StoredMessage)>,
}

async fn one(chars: usize) {
    let text = answer(chars);
    let pieces = chars.div_ceil(PIECE);
    let scripted = text.clone();
    let provider = ScriptedProvider::new(move |_, _| {
        Answer::streamed(&scripted, pieces, EVERY_MS, Usage::default())
    });
    let dir = tempfile::tempdir().expect("scratch dir");
    let host = Host::open(
        HostConfig::new(dir.path().join("store.db")),
        Arc::new(provider),
        ToolSet::new(),
    )
    .await
    .expect("open the host");
    let server = Server::start(
        host.clone(),
        Asks::new(),
        ServerConfig::new(Token::new(TOKEN).expect("a token")),
    )
    .await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let serving = server.clone();
    tokio::spawn(async move { serving.serve(listener, std::future::pending()).await });
    let http = reqwest::Client::new();
    let mut clients = Vec::new();
    for query in ["", "?deltas=false"] {
        let events = Events::connect_at(&base, &format!("/v1/events{query}"), TOKEN, None).await;
        clients.push(tokio::spawn(follow(events)));
    }
    // Both streams are open once their first event is in; the prompt goes after.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let r = http
        .post(format!("{base}/v1/sessions/s/prompts"))
        .bearer_auth(TOKEN)
        .json(&serde_json::json!({"prompt": "write", "run_id": "r1"}))
        .send()
        .await
        .expect("the prompt");
    assert_eq!(r.status(), 202);
    let mut read = Vec::new();
    for c in clients {
        read.push(c.await.expect("a client"));
    }
    for r in &read {
        let (_, m) = r.message.as_ref().expect("the answer");
        assert_eq!(m.text, text, "the client rebuilt the stored answer");
    }
    let (d, w) = (&read[0], &read[1]);
    println!(
        "| {chars} characters | {pieces} | {}, {} | {}, {} | {:.1} |",
        d.events,
        thousands(d.bytes),
        w.events,
        thousands(w.bytes),
        w.bytes as f64 / d.bytes as f64
    );
    let _ = host.shutdown().await;
}

/// Reads a stream until the RunComplete of `r1`, rebuilding the assistant message.
async fn follow(mut events: Events) -> Read {
    let mut read = Read::default();
    loop {
        let f = events.next_within(Duration::from_secs(120)).await.expect("an event within 120 s");
        match f.event.as_str() {
            "message" => {
                let v: serde_json::Value = serde_json::from_str(&f.data).expect("JSON");
                let m: StoredMessage =
                    serde_json::from_value(v["message"].clone()).expect("a message");
                if m.role == turnstile_host::store::StoredRole::Assistant {
                    read.message = Some((v["revision"].as_u64().expect("a revision"), m));
                }
            }
            "message_delta" => {
                let d: MessageDelta = serde_json::from_str(&f.data).expect("a delta");
                let (revision, m) = read.message.as_mut().expect("the message it is on");
                assert_eq!(*revision, d.base_revision);
                d.apply(m).expect("the same message");
                *revision = d.revision;
            }
            "run_complete" => {
                (read.events, read.bytes) = (events.frames().len(), events.bytes());
                return read;
            }
            _ => {}
        }
    }
}

fn thousands(n: usize) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
