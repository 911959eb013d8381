//! The kit against itself: the fake provider's script, titles, captures and closes, and the
//! event-stream client reading, resuming and counting over streams the fake provider sends.

use std::time::Duration;

use turnstile_testkit::events::{Events, is_run_complete};
use turnstile_testkit::provider::{FakeProvider, Reply, TITLE_MARK};

/// POSTs `body` to `{base}{path}`: the status and the body's text.
async fn post(base: &str, path: &str, body: &serde_json::Value) -> (u16, String) {
    let r = reqwest::Client::new()
        .post(format!("{base}{path}"))
        .header("x-test", "yes")
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

fn title_request() -> serde_json::Value {
    serde_json::json!({"system": [{"type": "text", "text": format!("{TITLE_MARK} (at most 50)")}]})
}

#[tokio::test]
async fn a_script_answers_in_order_repeats_its_last_reply_and_keeps_what_was_sent() {
    let p = FakeProvider::start(vec![
        Reply::sse("one").in_pieces(3),
        Reply::json(529, &[("retry-after-ms", "20")], "{}"),
    ])
    .await;
    assert!(p.base_url.starts_with("http://127.0.0.1:") && p.base_url.ends_with("/v1"));
    let got = [
        post(&p.base_url, "/messages", &serde_json::json!({"n": 1})).await,
        post(&p.base_url, "/messages", &serde_json::json!({"n": 2})).await,
        post(&p.base_url, "/messages", &serde_json::json!({"n": 3})).await,
    ];
    assert_eq!(got, [(200, "one".into()), (529, "{}".into()), (529, "{}".into())]);
    let sent = p.requests();
    assert_eq!(sent.len(), 3);
    assert_eq!(sent[0].path, "/v1/messages");
    assert_eq!(sent[0].header("X-Test"), Some("yes"));
    assert_eq!(sent[2].body, serde_json::json!({"n": 3}));
    // Without a title answer, a title request is a request like any other.
    assert_eq!(post(&p.base_url, "/messages", &title_request()).await.0, 529);
    assert_eq!(p.steps().len(), 3);
    // No script at all: a 500 that says so.
    let empty = FakeProvider::start(vec![]).await;
    let (status, text) = post(&empty.base_url, "/messages", &serde_json::json!({})).await;
    assert_eq!((status, text.contains("no more replies")), (500, true));
}

#[tokio::test]
async fn title_requests_get_the_title_and_leave_the_script_to_the_steps() {
    let p = FakeProvider::titled(vec![Reply::sse("step 1"), Reply::sse("step 2")], Reply::sse("t"))
        .await;
    assert_eq!(post(&p.base_url, "/m", &title_request()).await.1, "t");
    assert_eq!(post(&p.base_url, "/m", &serde_json::json!({"n": 1})).await.1, "step 1");
    assert_eq!(post(&p.base_url, "/m", &title_request()).await.1, "t");
    assert_eq!(post(&p.base_url, "/m", &serde_json::json!({"n": 2})).await.1, "step 2");
    assert_eq!(p.requests().len(), 4);
    assert_eq!(p.steps(), [serde_json::json!({"n": 1}), serde_json::json!({"n": 2})]);
    p.wait_steps(2).await;
    p.wait_requests(4).await;
}

#[tokio::test]
async fn a_hang_is_closed_by_the_client_and_a_cut_by_the_server() {
    let p = FakeProvider::start(vec![
        Reply::Hang,
        Reply::Cut { body: b"data: 1\n\n".to_vec(), bytes: 4 },
    ])
    .await;
    let client = reqwest::Client::new();
    let mut hung = client.post(format!("{}/m", p.base_url)).body("{}").send().await.unwrap();
    assert_eq!(hung.status(), 200);
    let nothing = tokio::time::timeout(Duration::from_millis(200), hung.chunk()).await;
    assert!(nothing.is_err(), "nothing after the head");
    p.wait_requests(1).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(p.closed_at(0).is_none(), "open while the client keeps it");
    drop(hung);
    assert!(p.wait_closed(0).await.is_some(), "the client's close is seen");
    let cut = client.post(format!("{}/m", p.base_url)).body("{}").send().await.unwrap();
    assert!(cut.bytes().await.is_err(), "the body is cut before its end");
    assert!(p.wait_closed(1).await.is_some());
}

#[tokio::test]
async fn paced_pieces_arrive_after_their_pauses() {
    let p = FakeProvider::start(vec![Reply::Paced(vec![(0, b"a".to_vec()), (300, b"b".to_vec())])])
        .await;
    let started = std::time::Instant::now();
    let r = reqwest::Client::new().post(format!("{}/m", p.base_url)).send().await.unwrap();
    assert_eq!(r.text().await.unwrap(), "ab");
    assert!(started.elapsed() >= Duration::from_millis(300));
}

/// An event stream as the server sends it: an id, an event name and JSON data per event.
fn stream(events: &[(&str, &str, serde_json::Value)]) -> Vec<u8> {
    events
        .iter()
        .map(|(id, event, data)| {
            format!(": heartbeat\n\nid: {id}\nevent: {event}\ndata: {data}\n\n")
        })
        .collect::<String>()
        .into_bytes()
}

#[tokio::test]
async fn the_event_client_reads_resumes_from_its_last_id_and_counts_run_completes() {
    let first = stream(&[
        ("1", "asks", serde_json::json!({"asks": []})),
        ("2", "run_complete", serde_json::json!({"run_id": "r1", "outcome": "completed"})),
        ("3", "session", serde_json::json!({})),
    ]);
    let second = stream(&[
        ("3", "session", serde_json::json!({})),
        ("4", "run_complete", serde_json::json!({"run_id": "r2", "outcome": "interrupted"})),
        ("5", "run_complete", serde_json::json!({"run_id": "r1", "outcome": "completed"})),
    ]);
    let p = FakeProvider::start(vec![Reply::sse(&first).in_pieces(7), Reply::sse(&second)]).await;
    let base = p.base_url.trim_end_matches("/v1");
    let mut events = Events::connect(base, "a-token", None).await;
    assert_eq!(events.next().await.event, "asks");
    assert!(events.read_until(|f| is_run_complete(f, "r1")).await);
    assert_eq!(events.last(), Some("2"), "the event after the stop is not read yet");
    assert!(!events.read_until(|_| false).await, "the connection ends");
    assert_eq!((events.last(), events.bytes()), (Some("3"), first.len()));
    assert!(events.next_within(Duration::from_millis(50)).await.is_none());
    events.reconnect().await;
    let frames = events.until_run_complete("r2").await;
    assert_eq!(frames.len(), 2);
    assert!(!events.read_until(|_| false).await);
    let ids: Vec<_> = events.frames().iter().map(|f| f.id.clone().unwrap()).collect();
    assert_eq!(ids, ["1", "2", "3", "3", "4", "5"], "every event read, over both connections");
    let counts = events.run_completes();
    assert_eq!(counts["r1"], (2, "completed".to_owned()));
    assert_eq!(counts["r2"], (1, "interrupted".to_owned()));
    let sent = p.requests();
    assert_eq!(sent[0].path, "/v1/events");
    assert_eq!(sent[0].header("authorization"), Some("Bearer a-token"));
    assert_eq!(
        (sent[0].header("last-event-id"), sent[1].header("last-event-id")),
        (None, Some("3"))
    );
    // Connected with an id: resumes from it, at a path with a query.
    let resumed = Events::connect_at(base, "/v1/events?deltas=false", "a-token", Some("9")).await;
    assert_eq!(resumed.last(), Some("9"));
    assert_eq!(p.requests()[2].path, "/v1/events?deltas=false");
    assert_eq!(p.requests()[2].header("last-event-id"), Some("9"));
}
