//! What a client can hold of the server is bounded (SPEC 9 "Server"), tried as an attacker
//! would, on loopback: idle and byte-a-second connections are closed after the header timeout
//! and never take more than the connection cap; a closed stream frees its slot at once; a
//! stream whose client stops reading is ended past its backlog and resumes exactly; errors
//! before the router have the JSON body; the small refusals of the API.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::{Running, TOKEN, answers, start};
use serde_json::json;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use turnstile_host::ToolSet;
use turnstile_testkit::events::{frames_of, run_complete_ids};

fn host_port(base: &str) -> String {
    base.trim_start_matches("http://").to_owned()
}

/// Reads until the server closes the connection (10 s at most); returns what it sent.
async fn until_closed(c: &mut TcpStream) -> Vec<u8> {
    let mut all = Vec::new();
    let mut buf = [0_u8; 4096];
    loop {
        match tokio::time::timeout(Duration::from_secs(10), c.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return all,
            Ok(Ok(n)) => all.extend_from_slice(&buf[..n]),
            Err(_) => panic!("the server kept the connection open past 10 s"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_and_slow_connections_are_closed_after_the_header_timeout() {
    let s = start(answers("hi", 4, 1), ToolSet::new(), |c| {
        c.connections.header_timeout = Duration::from_millis(500);
    })
    .await;
    let addr = host_port(&s.base);
    let mut idle = TcpStream::connect(&addr).await.unwrap();
    let mut slow = TcpStream::connect(&addr).await.unwrap();
    // A byte a while: the head never completes in time.
    for b in b"GET /v1/he" {
        // Past the timeout the server has closed it, and a write may fail.
        let _ = slow.write_all(&[*b]).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(until_closed(&mut idle).await.is_empty());
    assert!(until_closed(&mut slow).await.is_empty());
    // A kept-alive connection that goes idle after a request is closed too.
    let mut kept = TcpStream::connect(&addr).await.unwrap();
    let request =
        format!("GET /v1/health HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {TOKEN}\r\n\r\n");
    kept.write_all(request.as_bytes()).await.unwrap();
    let answer = String::from_utf8(until_closed(&mut kept).await).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_beyond_the_cap_wait_until_a_slot_is_free() {
    let s = start(answers("hi", 4, 1), ToolSet::new(), |c| {
        c.connections.max = 8;
        c.connections.header_timeout = Duration::from_secs(60);
    })
    .await;
    let addr = host_port(&s.base);
    let mut held = Vec::new();
    for _ in 0..8 {
        held.push(TcpStream::connect(&addr).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    // Every slot is held: a ninth client is not served...
    let waiting = s.http.get(s.url("/v1/health")).bearer_auth(TOKEN).send();
    let waiting = tokio::spawn(waiting);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!waiting.is_finished(), "a connection beyond the cap was served");
    // ...until one is given back.
    drop(held.pop());
    let answer = tokio::time::timeout(Duration::from_secs(10), waiting).await.unwrap().unwrap();
    assert_eq!(answer.unwrap().status().as_u16(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_before_the_router_have_the_json_body() {
    let s = start(answers("hi", 4, 1), ToolSet::new(), |_| {}).await;
    let addr = host_port(&s.base);
    let long_uri = format!("GET /v1/{} HTTP/1.1\r\nhost: x\r\n\r\n", "a".repeat(20_000));
    let big_head =
        format!("GET /v1/health HTTP/1.1\r\nhost: x\r\nx-big: {}\r\n\r\n", "b".repeat(100_000));
    let cases = [
        (long_uri, 414, "uri_too_long"),
        (big_head, 431, "headers_too_large"),
        ("\x16\x03\x01\x02\x00 not http\r\n\r\n".to_owned(), 400, "malformed_request"),
    ];
    for (request, status, code) in cases {
        let mut c = TcpStream::connect(&addr).await.unwrap();
        let _ = c.write_all(request.as_bytes()).await;
        let answer = String::from_utf8_lossy(&until_closed(&mut c).await).into_owned();
        assert!(answer.starts_with(&format!("HTTP/1.1 {status} ")), "{code}: {answer}");
        let body = answer.split("\r\n\r\n").nth(1).unwrap();
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(v["error"]["code"], code, "{answer}");
    }
    // A later request of a kept-alive connection is checked the same way.
    let mut c = TcpStream::connect(&addr).await.unwrap();
    let first =
        format!("GET /v1/health HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {TOKEN}\r\n\r\n");
    let second = format!(
        "GET /v1/{} HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {TOKEN}\r\nconnection: close\r\n\r\n",
        "a".repeat(20_000)
    );
    c.write_all(format!("{first}{second}").as_bytes()).await.unwrap();
    let answer = String::from_utf8_lossy(&until_closed(&mut c).await).into_owned();
    assert!(answer.contains("HTTP/1.1 414 "), "{answer}");
    assert!(answer.contains("\"uri_too_long\""), "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_stream_frees_its_slot_at_once() {
    let s = start(answers("hi", 4, 1), ToolSet::new(), |c| {
        c.limits.streams = 1;
        c.heartbeat = Duration::from_secs(60);
    })
    .await;
    for _ in 0..3 {
        let mut events = s.events(None).await;
        assert_eq!(events.next().await.event, "asks");
        drop(events);
        // The slot is free as soon as the server sees the connection close.
        until_a_stream_opens(&s, Duration::from_secs(5), "the slot was not freed").await;
    }
}

/// Opens event streams (dropped at once) until one is not refused for want of a slot:
/// with one slot, until the stream that held it ended. Panics with `never` after `within`.
async fn until_a_stream_opens(s: &Running, within: Duration, never: &str) {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let r = s.http.get(s.url("/v1/events")).bearer_auth(TOKEN).send().await.unwrap();
        if r.status() == 200 {
            return;
        }
        assert_eq!(r.status(), 503);
        assert!(tokio::time::Instant::now() < deadline, "{never}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The body of a chunked HTTP/1.1 response read so far (after its head), and whether its last
/// chunk came.
fn dechunk(response: &[u8]) -> (Vec<u8>, bool) {
    let Some(head) = response.windows(4).position(|w| w == b"\r\n\r\n") else {
        return (Vec::new(), false);
    };
    let (mut rest, mut body) = (&response[head + 4..], Vec::new());
    loop {
        let Some(eol) = rest.windows(2).position(|w| w == b"\r\n") else { return (body, false) };
        let size = usize::from_str_radix(std::str::from_utf8(&rest[..eol]).unwrap(), 16).unwrap();
        if size == 0 {
            return (body, true);
        }
        let Some(chunk) = rest.get(eol + 2..eol + 2 + size) else { return (body, false) };
        body.extend_from_slice(chunk);
        rest = rest.get(eol + 4 + size..).unwrap_or_default();
    }
}

/// A stream whose client stops reading is ended once it is more than its backlog behind; the
/// client resumes from its `Last-Event-ID` and gets every RunComplete exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_that_stops_reading_is_ended_past_its_backlog_and_resumes_exactly() {
    // 80 answers of 150 KB: far more than the kernel's socket buffers, hyper's buffer and the
    // stream's queue hold, so a client that does not read falls behind the feed.
    let text: &'static str = Box::leak("x".repeat(150_000).into_boxed_str());
    let s = start(answers(text, 4, 1), ToolSet::new(), |c| {
        c.stream_backlog_bytes = 256 << 10;
        // One stream at a time: a second one opens once the stuck one has ended.
        c.limits.streams = 1;
    })
    .await;
    // A raw client with a small receive buffer that reads its first event, then stops. Not
    // smaller: below the loopback's segment size (64 KB) the kernel holds back its window
    // updates, and the drain below crawled on the sender's probe timer (minutes, under load).
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(128 << 10).unwrap();
    let mut stuck = socket.connect(host_port(&s.base).parse().unwrap()).await.unwrap();
    let request =
        format!("GET /v1/events HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {TOKEN}\r\n\r\n");
    stuck.write_all(request.as_bytes()).await.unwrap();
    let mut response = vec![0_u8; 512];
    let n = stuck.read(&mut response).await.unwrap();
    response.truncate(n);
    let mut runs = Vec::new();
    for i in 0..80 {
        let run = format!("r{i}");
        s.prompt(&format!("s{i}"), "long answer", &run).await;
        runs.push(run);
    }
    for run in &runs {
        s.finished(run).await;
    }
    // `/wait` answers from the host, and the feed may still be behind it: the stream is ended
    // once the feed gets more than its backlog past it. Its slot tells when, without reading
    // (a client that read now would let it catch up).
    until_a_stream_opens(&s, Duration::from_secs(60), "the stream was never ended").await;
    // Ended: what was queued for it drains, then its last chunk comes.
    let mut buf = vec![0_u8; 1 << 16];
    let body = loop {
        let (body, ended) = dechunk(&response);
        if ended {
            break body;
        }
        let n = tokio::time::timeout(Duration::from_secs(10), stuck.read(&mut buf))
            .await
            .expect("the stream was not ended")
            .unwrap();
        assert!(n > 0, "the connection closed before the stream's last chunk");
        response.extend_from_slice(&buf[..n]);
    };
    let before = frames_of(&body);
    let last_id = before.iter().filter_map(|f| f.id.clone()).next_back().expect("an event id");
    let seen_before = run_complete_ids(&before);
    assert!(seen_before.len() < runs.len(), "the stream ended before it carried everything");
    // Resumed from its last event: the rest, each exactly once.
    let mut resumed = s.events(Some(&last_id)).await;
    let mut frames = Vec::new();
    while let Some(f) = resumed.next_within(Duration::from_millis(1500)).await {
        frames.push(f);
    }
    assert_eq!(frames[0].event, "asks", "a resumed stream opens with the pending asks");
    let mut all = seen_before.clone();
    all.extend(run_complete_ids(&frames));
    all.sort();
    let mut want = runs.clone();
    want.sort();
    assert_eq!(all, want, "every RunComplete exactly once across the two connections");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_refusals_and_acceptances_of_the_api() {
    let s = start(answers("hi", 4, 1), ToolSet::new(), |c| {
        c.allowed_origins = vec!["http://localhost:3000".into()];
    })
    .await;
    // `Bearer` in any case; a 401 names the scheme.
    for scheme in ["bearer", "BEARER", "Bearer"] {
        let r = s
            .http
            .get(s.url("/v1/sessions"))
            .header("authorization", format!("{scheme} {TOKEN}"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{scheme}");
    }
    let r = s.http.get(s.url("/v1/sessions")).send().await.unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(r.headers()["www-authenticate"], "Bearer");
    // CORS: an allowed origin's preflight is answered without a token, and its requests are
    // answered with the origin named.
    let r = s
        .http
        .request(reqwest::Method::OPTIONS, s.url("/v1/sessions/s/prompts"))
        .header("origin", "http://localhost:3000")
        .header("access-control-request-method", "POST")
        .header("access-control-request-headers", "authorization, content-type")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    assert_eq!(r.headers()["access-control-allow-origin"], "http://localhost:3000");
    let methods = r.headers()["access-control-allow-methods"].to_str().unwrap().to_owned();
    assert!(methods.contains("POST"), "{methods}");
    let allowed = r.headers()["access-control-allow-headers"].to_str().unwrap().to_owned();
    assert!(allowed.contains("authorization"), "{allowed}");
    let r = s
        .http
        .get(s.url("/v1/sessions"))
        .bearer_auth(TOKEN)
        .header("origin", "http://localhost:3000")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["access-control-allow-origin"], "http://localhost:3000");
    let r = s
        .http
        .request(reqwest::Method::OPTIONS, s.url("/v1/sessions"))
        .header("origin", "http://evil.example")
        .header("access-control-request-method", "GET")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    assert!(r.headers().get("access-control-allow-origin").is_none());
    // A prompt or a RunId of only whitespace is refused.
    let (status, v) = s.post("/v1/sessions/s/prompts", json!({"prompt": " \n\t "})).await;
    assert_eq!((status, v["error"]["code"].as_str()), (400, Some("blank_prompt")), "{v}");
    let (status, v) =
        s.post("/v1/sessions/s/prompts", json!({"prompt": "hi", "run_id": "   "})).await;
    assert_eq!((status, v["error"]["code"].as_str()), (400, Some("invalid_id")), "{v}");
    // `?after=0` pages from the first message.
    s.prompt("s", "hi", "r1").await;
    s.finished("r1").await;
    let (status, v) = s.get("/v1/sessions/s/messages?after=0").await;
    assert_eq!(status, 200, "{v}");
    let (_, all) = s.get("/v1/sessions/s/messages").await;
    assert_eq!(v["messages"], all["messages"]);
}
