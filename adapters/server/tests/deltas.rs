//! Streamed text goes out as `message_delta` events, each on top of a state the same stream
//! sent, and a client that applies them holds every message exactly as stored.
//! A resumed stream starts with whole states; `deltas=false` sends whole states only.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;

use common::start;
use turnstile_host::store::StoredMessage;
use turnstile_host::{Answer, ScriptedProvider, ToolSet, Usage};
use turnstile_server::delta::MessageDelta;
use turnstile_testkit::events::{Events, Frame, data};

/// A long answer: about 3,000 characters.
fn long_answer() -> String {
    (0..300).map(|i| format!("word{i:03} ")).collect()
}

/// Answers every prompt with the long answer in `pieces` deltas, `every_ms` apart (more
/// than the store's 33 ms debounce, so that most pieces are a commit of their own).
fn streams_long(pieces: usize, every_ms: u64) -> ScriptedProvider {
    let text = long_answer();
    ScriptedProvider::new(move |_, _| Answer::streamed(&text, pieces, every_ms, Usage::default()))
}

/// A client's copy of the messages, built only from the events.
#[derive(Default)]
struct Copy {
    /// Each message's state and its revision.
    messages: BTreeMap<u64, (u64, StoredMessage)>,
    deltas: usize,
    /// Whole `message` events read.
    wholes: usize,
}

impl Copy {
    /// Applies one event; returns the id of the message it changed.
    fn read(&mut self, f: &Frame) -> Option<u64> {
        match f.event.as_str() {
            "message" => {
                let d = data(f);
                let m: StoredMessage = serde_json::from_value(d["message"].clone()).unwrap();
                let id = m.id.0;
                self.messages.insert(id, (d["revision"].as_u64().unwrap(), m));
                self.wholes += 1;
                Some(id)
            }
            "message_delta" => {
                let d: MessageDelta = serde_json::from_str(&f.data).unwrap();
                let (revision, m) =
                    self.messages.get_mut(&d.id.0).expect("a delta on a message this client has");
                assert_eq!(*revision, d.base_revision, "a delta on the state this stream sent");
                assert!(d.revision > d.base_revision, "{d:?}");
                d.apply(m).unwrap();
                *revision = d.revision;
                self.deltas += 1;
                Some(d.id.0)
            }
            _ => None,
        }
    }

    /// Reads events until the RunComplete of `run`.
    async fn until_run_complete(&mut self, events: &mut Events, run: &str) {
        loop {
            let f = events.next().await;
            self.read(&f);
            if f.event == "run_complete" && data(&f)["run_id"] == run {
                return;
            }
        }
    }

    /// The messages as the client holds them.
    fn held(&self) -> Vec<StoredMessage> {
        self.messages.values().map(|(_, m)| m.clone()).collect()
    }
}

/// The session's messages as the store has them.
async fn stored(s: &common::Running, session: &str) -> Vec<StoredMessage> {
    let (status, v) = s.get(&format!("/v1/sessions/{session}/messages")).await;
    assert_eq!(status, 200, "{v}");
    serde_json::from_value(v["messages"].clone()).unwrap()
}

#[tokio::test]
async fn streamed_text_goes_out_as_deltas_that_rebuild_every_message() {
    let s = start(streams_long(60, 45), ToolSet::new(), |_| {}).await;
    let mut with = s.events(None).await;
    let mut whole = s.events_at("/v1/events?deltas=false", None).await;
    // Both streams are open (their first event, `asks`, arrived) before the prompt.
    with.next().await;
    whole.next().await;
    s.prompt("s", "go", "r1").await;
    let (mut a, mut b) = (Copy::default(), Copy::default());
    a.until_run_complete(&mut with, "r1").await;
    b.until_run_complete(&mut whole, "r1").await;

    let want = stored(&s, "s").await;
    assert_eq!(want.last().unwrap().text, long_answer());
    assert_eq!(a.held(), want, "the deltas rebuilt every message as stored");
    assert_eq!(b.held(), want);
    assert!(a.deltas >= 10, "60 pieces 45 ms apart: {} deltas", a.deltas);
    assert_eq!(b.deltas, 0, "`deltas=false` sends whole states only");
    // Whole states cost the square of the answer; deltas its length (with 60 pieces, the
    // whole states are far more than three times the deltas).
    assert!(
        with.bytes() * 3 < whole.bytes(),
        "{} bytes with deltas, {} without",
        with.bytes(),
        whole.bytes()
    );
}

#[tokio::test]
async fn a_resumed_stream_sends_whole_states_before_deltas() {
    let s = start(streams_long(60, 45), ToolSet::new(), |_| {}).await;
    let mut events = s.events(None).await;
    events.next().await;
    s.prompt("s", "go", "r1").await;
    let mut copy = Copy::default();
    while copy.deltas < 3 {
        let f = events.next().await;
        copy.read(&f);
    }
    let last = events.last().unwrap().to_owned();
    drop(events);

    // The client keeps its copy; the new stream owes it whole states first: a delta on a
    // state the new stream did not send itself would panic in `Copy::read`.
    let mut resumed = s.events(Some(&last)).await;
    let mut first = BTreeMap::new();
    loop {
        let f = resumed.next().await;
        if let Some(id) = copy.read(&f) {
            first.entry(id).or_insert_with(|| f.event.clone());
        }
        if f.event == "run_complete" && data(&f)["run_id"] == "r1" {
            break;
        }
    }
    assert!(!first.is_empty());
    for (id, event) in &first {
        assert_eq!(event, "message", "message {id}'s first event after the resume");
    }
    assert_eq!(copy.held(), stored(&s, "s").await);
}

#[tokio::test]
async fn deltas_takes_true_or_false() {
    let s = start(streams_long(1, 0), ToolSet::new(), |_| {}).await;
    let (status, v) = s.get("/v1/events?deltas=maybe").await;
    assert_eq!((status, v["error"]["code"].as_str()), (400, Some("invalid_query")), "{v}");
}
