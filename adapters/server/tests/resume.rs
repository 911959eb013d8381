//! `docs/server.md`: the `asks` event comes first on every connection, a resumed one too
//! (before, a resumed stream sent what it missed from the store first and the asks last).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{answers_hello, start};
use turnstile_host::ToolSet;
use turnstile_testkit::events::data;

#[tokio::test]
async fn a_resumed_stream_opens_with_the_pending_asks_then_catches_up() {
    let s = start(answers_hello(), ToolSet::new(), |_| {}).await;
    s.prompt("s1", "hi", "r1").await;
    s.finished("r1").await;
    // From the very beginning: everything is missed, and read back from the store.
    let mut events = s.events(Some("0-0")).await;
    let first = events.next().await;
    assert_eq!(first.event, "asks", "asks first, also on a resume: {first:?}");
    assert_eq!(data(&first)["asks"], serde_json::json!([]));
    let frames = events.until_run_complete("r1").await;
    assert!(
        frames.iter().all(|f| f.event != "asks"),
        "then what was missed, without a second asks: {frames:?}"
    );
}
