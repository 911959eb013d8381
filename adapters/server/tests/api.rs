//! The API end to end: a real server on 127.0.0.1 over a real host and SQLite store, driven
//! through HTTP (SPEC 9 "Server", 4.10, 5).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::{TOKEN, answers_hello, calls_echo_then_answers, start};
use serde_json::json;
use turnstile_host::{Answer, EchoTool, ScriptedProvider, ToolSet, Usage};
use turnstile_testkit::events::{data, run_complete_ids};

#[tokio::test]
async fn a_prompt_is_accepted_durably_and_its_run_complete_follows_its_final_message() {
    let s = start(answers_hello(), ToolSet::new(), |_| {}).await;
    let mut events = s.events(None).await;
    let first = events.next().await;
    assert_eq!(first.event, "asks", "a stream opens with the pending asks");
    let v = s.prompt("s1", "hi", "r1").await;
    assert_eq!(
        (v["session"].as_str(), v["run_id"].as_str(), v["existing"].as_bool()),
        (Some("s1"), Some("r1"), Some(false))
    );
    assert!(v["seq"].as_u64().unwrap() >= 1);
    // Durable: the ledger row is there as soon as the 202 is.
    let (status, run) = s.get("/v1/runs/r1").await;
    assert_eq!(status, 200, "{run}");
    let frames = events.until_run_complete("r1").await;
    let last_message = frames
        .iter()
        .rfind(|f| f.event == "message" && data(f)["message"]["role"] == "assistant")
        .expect("the assistant message's state");
    assert_eq!(data(last_message)["message"]["text"], "hello there");
    assert!(data(last_message)["message"]["finish"].is_object(), "its final state came first");
    let done = data(frames.last().unwrap());
    assert_eq!(
        (done["outcome"].as_str(), done["text"].as_str()),
        (Some("completed"), Some("hello there"))
    );
    assert!(frames.iter().all(|f| f.id.is_some()), "every event has an id");
    // The same request again answers the existing run; another request with its RunId is 409.
    let again = s.prompt("s1", "hi", "r1").await;
    assert_eq!(
        (again["existing"].as_bool(), again["outcome"].as_str()),
        (Some(true), Some("completed"))
    );
    let (status, v) =
        s.post("/v1/sessions/s1/prompts", json!({"prompt": "other", "run_id": "r1"})).await;
    assert_eq!((status, v["error"]["code"].as_str()), (409, Some("run_id_conflict")), "{v}");
    // wait, the run and the session answer from the ledger.
    let rc = s.finished("r1").await;
    assert_eq!(rc["cursor"], done["cursor"]);
    let (_, session) = s.get("/v1/sessions/s1").await;
    assert_eq!((session["busy"].as_bool(), session["unfinished"].as_u64()), (Some(false), Some(0)));
    let (_, list) = s.get("/v1/sessions").await;
    assert_eq!(list["sessions"][0]["id"], "s1");
    // A prompt without a RunId gets one.
    let (status, v) = s.post("/v1/sessions/s1/prompts", json!({"prompt": "again"})).await;
    assert_eq!(status, 202);
    assert!(!v["run_id"].as_str().unwrap().is_empty());
}

#[tokio::test]
async fn messages_are_paged_in_write_order() {
    let s = start(answers_hello(), ToolSet::new(), |_| {}).await;
    for i in 0..3 {
        s.prompt("s", "hi", &format!("r{i}")).await;
        s.finished(&format!("r{i}")).await;
    }
    let (status, page) = s.get("/v1/sessions/s/messages?limit=4").await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(page["messages"].as_array().unwrap().len(), 4);
    let next = page["next"].as_u64().expect("a next page");
    let (_, rest) = s.get(&format!("/v1/sessions/s/messages?limit=4&after={next}")).await;
    assert_eq!(rest["messages"].as_array().unwrap().len(), 2);
    assert!(rest["next"].is_null());
    let ids: Vec<u64> = page["messages"]
        .as_array()
        .unwrap()
        .iter()
        .chain(rest["messages"].as_array().unwrap())
        .map(|m| m["id"].as_u64().unwrap())
        .collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    let (status, v) = s.get("/v1/sessions/s/messages?limit=0").await;
    assert_eq!((status, v["error"]["code"].as_str()), (400, Some("invalid_query")));
    let (status, v) = s.get("/v1/sessions/nope/messages").await;
    assert_eq!((status, v["error"]["code"].as_str()), (404, Some("session_not_found")));
}

#[tokio::test]
async fn a_client_that_reconnects_gets_each_missed_run_complete_exactly_once() {
    let s = start(answers_hello(), ToolSet::new(), |_| {}).await;
    let mut events = s.events(None).await;
    events.next().await;
    s.prompt("a", "one", "r1").await;
    events.until_run_complete("r1").await;
    let resume = events.last().unwrap().to_owned();
    drop(events);
    // Missed while away: three runs of two sessions.
    for (session, run) in [("a", "r2"), ("b", "r3"), ("a", "r4")] {
        s.prompt(session, "more", run).await;
    }
    for run in ["r2", "r3", "r4"] {
        s.finished(run).await;
    }
    let mut events = s.events(Some(&resume)).await;
    let mut frames = Vec::new();
    while let Some(f) = events.next_within(Duration::from_millis(600)).await {
        frames.push(f);
    }
    let mut got = run_complete_ids(&frames);
    got.sort();
    assert_eq!(got, ["r2", "r3", "r4"], "each missed RunComplete once, none from before");
    let sessions: Vec<_> = frames
        .iter()
        .filter(|f| f.event == "session")
        .map(|f| data(f)["id"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        sessions.contains(&"a".to_owned()) && sessions.contains(&"b".to_owned()),
        "{sessions:?}"
    );
    // The current state of each assistant message touched (a state may come twice: from the
    // store and from the live feed; states are idempotent, RunCompletes are not).
    let touched: std::collections::BTreeMap<u64, String> = frames
        .iter()
        .filter(|f| f.event == "message" && data(f)["message"]["role"] == "assistant")
        .map(|f| {
            (
                data(f)["message"]["id"].as_u64().unwrap(),
                data(f)["message"]["text"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(touched.len(), 3, "{touched:?}");
    assert!(touched.values().all(|t| t == "hello there"));
    // And from the newest id, nothing again.
    let resume = events.last().unwrap().to_owned();
    drop(events);
    let mut events = s.events(Some(&resume)).await;
    let mut again = Vec::new();
    while let Some(f) = events.next_within(Duration::from_millis(400)).await {
        again.push(f);
    }
    assert!(
        run_complete_ids(&again).is_empty(),
        "{:?}",
        again.iter().map(|f| &f.event).collect::<Vec<_>>()
    );
    // An id from the future, or not an id, is refused.
    for bad in ["999999-1", "nope"] {
        let req = s.http.get(s.url("/v1/events")).bearer_auth(TOKEN).header("Last-Event-ID", bad);
        let (status, v) = common::answer(req.send().await.unwrap()).await;
        assert_eq!((status, v["error"]["code"].as_str()), (400, Some("invalid_event_id")), "{bad}");
    }
}

#[tokio::test]
async fn a_slow_client_slows_nobody_and_still_gets_every_run_complete_once() {
    // A feed that keeps only 16 frames: the client that does not read falls behind at once.
    let s = start(answers_hello(), ToolSet::new(), |c| c.feed_capacity = 16).await;
    let mut slow = s.events(None).await;
    let mut fast = s.events(None).await;
    slow.next().await;
    fast.next().await;
    let runs: Vec<String> = (0..40).map(|i| format!("r{i}")).collect();
    for (i, run) in runs.iter().enumerate() {
        s.prompt(&format!("s{}", i % 4), "go", run).await;
    }
    // The fast client sees all 40 while the slow one has read nothing.
    let mut fast_seen = Vec::new();
    while fast_seen.len() < runs.len() {
        let f = fast.next().await;
        if f.event == "run_complete" {
            fast_seen.push(data(&f)["run_id"].as_str().unwrap().to_owned());
        }
    }
    // Now the slow client reads: every RunComplete once (it fell behind and read the store).
    let mut slow_frames = Vec::new();
    while let Some(f) = slow.next_within(Duration::from_millis(800)).await {
        slow_frames.push(f);
    }
    // It never got a state older than one it had (its catch-up from the store was ahead of
    // the frames still queued for it).
    let mut newest = std::collections::BTreeMap::new();
    for f in slow_frames.iter().filter(|f| f.event == "message" || f.event == "session") {
        let d = data(f);
        let (key, revision) = if f.event == "message" {
            (d["message"]["id"].to_string(), d["revision"].as_u64().unwrap())
        } else {
            (d["id"].to_string(), d["revision"].as_u64().unwrap())
        };
        let had = newest.entry((f.event.clone(), key)).or_insert(revision);
        assert!(revision >= *had, "{} {d} after revision {had}", f.event);
        *had = revision;
    }
    let mut slow_seen = run_complete_ids(&slow_frames);
    slow_seen.sort();
    let mut want = runs.clone();
    want.sort();
    fast_seen.sort();
    assert_eq!(fast_seen, want);
    assert_eq!(slow_seen, want);
}

#[tokio::test]
async fn a_permission_ask_is_an_event_answered_over_http() {
    let tools = ToolSet::new().with(EchoTool { name: "echo".into(), delay_ms: 0 });
    let s = start(calls_echo_then_answers(), tools, |_| {}).await;
    let mut events = s.events(None).await;
    events.next().await;
    s.prompt("s", "use echo", "r1").await;
    let ask = events.next_event("ask").await;
    assert_eq!((ask["tool"].as_str(), ask["session"].as_str()), (Some("echo"), Some("s")));
    let (_, pending) = s.get("/v1/asks").await;
    assert_eq!(pending["asks"][0]["id"], ask["id"]);
    let id = ask["id"].as_str().unwrap();
    let (status, v) = s.post(&format!("/v1/asks/{id}"), json!({"answer": "once"})).await;
    assert_eq!(status, 200, "{v}");
    let frames = events.until_run_complete("r1").await;
    assert!(frames.iter().any(|f| f.event == "ask_closed" && data(f)["why"] == "answered"));
    let done = data(frames.last().unwrap());
    assert_eq!(
        (done["outcome"].as_str(), done["text"].as_str()),
        (Some("completed"), Some("done"))
    );
    // Answering again is a conflict; an unknown ask is not found; a bad answer is invalid.
    let (status, v) = s.post(&format!("/v1/asks/{id}"), json!({"answer": "once"})).await;
    assert_eq!((status, v["error"]["code"].as_str()), (409, Some("ask_closed")));
    let (status, _) = s.post("/v1/asks/nope", json!({"answer": "once"})).await;
    assert_eq!(status, 404);
    let (status, _) = s.post("/v1/asks/nope", json!({"answer": "maybe"})).await;
    assert_eq!(status, 400);
}

#[tokio::test]
async fn a_cancel_withdraws_the_ask_and_a_late_answer_is_refused() {
    let tools = ToolSet::new().with(EchoTool { name: "echo".into(), delay_ms: 0 });
    let s = start(calls_echo_then_answers(), tools, |_| {}).await;
    let mut events = s.events(None).await;
    events.next().await;
    s.prompt("s", "use echo", "r1").await;
    let ask = events.next_event("ask").await;
    let (status, _) = s.post("/v1/runs/r1/cancel", json!({})).await;
    assert_eq!(status, 202);
    let frames = events.until_run_complete("r1").await;
    let id = ask["id"].as_str().unwrap();
    assert!(
        frames.iter().any(|f| f.event == "ask_closed"
            && data(f)["id"] == id
            && data(f)["why"] == "withdrawn"),
        "the ask was withdrawn"
    );
    assert_eq!(data(frames.last().unwrap())["outcome"], "cancelled");
    let (status, v) = s.post(&format!("/v1/asks/{id}"), json!({"answer": "once"})).await;
    assert_eq!((status, v["error"]["code"].as_str()), (409, Some("ask_closed")), "{v}");
    let (_, pending) = s.get("/v1/asks").await;
    assert_eq!(pending["asks"], json!([]));
}

#[tokio::test]
async fn cancel_clear_and_summarize_answer_as_spec_9_says() {
    let s = start(ScriptedProvider::new(|_, _| Answer::hang()), ToolSet::new(), |_| {}).await;
    for path in [
        "/v1/sessions/none/cancel",
        "/v1/sessions/none/clear",
        "/v1/sessions/none/summarize",
        "/v1/runs/none/cancel",
    ] {
        let (status, v) = s.post(path, json!({})).await;
        assert_eq!(status, 404, "{path}: {v}");
    }
    s.prompt("s", "hangs", "r1").await;
    s.prompt("s", "waits", "r2").await;
    let (status, v) = s.post("/v1/sessions/s/summarize", json!({})).await;
    assert_eq!((status, v["error"]["code"].as_str()), (409, Some("session_busy")), "{v}");
    let (status, _) = s.post("/v1/sessions/s/clear", json!({})).await;
    assert_eq!(status, 202);
    assert_eq!(s.finished("r2").await["outcome"], "cancelled", "clear ends the waiting one");
    let (_, run) = s.get("/v1/runs/r1").await;
    assert_eq!(run["state"], "active", "and leaves the active turn");
    let (status, v) = s.get("/v1/runs/r1/wait?timeout_ms=50").await;
    assert_eq!((status, v["finished"].as_bool()), (200, Some(false)), "a long poll that times out");
    let (status, _) = s.post("/v1/sessions/s/cancel", json!({})).await;
    assert_eq!(status, 202);
    assert_eq!(s.finished("r1").await["outcome"], "cancelled");
    // Shutdown: new prompts get 503; wait still answers.
    s.server.shutdown().await.unwrap();
    let (status, v) = s.post("/v1/sessions/s/prompts", json!({"prompt": "late"})).await;
    assert_eq!((status, v["error"]["code"].as_str()), (503, Some("shutting_down")), "{v}");
    assert_eq!(s.finished("r1").await["outcome"], "cancelled");
    let (status, v) = s.get("/v1/health").await;
    assert_eq!((status, v["status"].as_str()), (503, Some("shutting_down")));
}

#[tokio::test]
async fn a_retry_is_an_event_and_heartbeats_keep_an_idle_stream_open() {
    // The first attempt fails with a retryable 503; the second answers.
    let provider = ScriptedProvider::new(|_, n| {
        if n == 0 {
            Answer::failure(503, "overloaded")
        } else {
            Answer::streamed("second time", 1, 1, Usage::default())
        }
    });
    let s = start(provider, ToolSet::new(), |_| {}).await;
    let mut events = s.events(None).await;
    events.next().await;
    s.prompt("s", "hi", "r1").await;
    let frames = events.until_run_complete("r1").await;
    let retry = frames.iter().find(|f| f.event == "retry").expect("a retry event");
    let retry = data(retry);
    assert_eq!(
        (retry["session"].as_str(), retry["attempt"].as_u64()),
        (Some("s"), Some(2)),
        "{retry}"
    );
    assert!(retry["reason"].as_str().unwrap().contains("overloaded"), "{retry}");
    assert_eq!(data(frames.last().unwrap())["text"], "second time");
    // An idle stream gets comment lines (the test server's heartbeat is 200 ms).
    let resp = s.http.get(s.url("/v1/events")).bearer_auth(TOKEN).send().await.unwrap();
    let mut resp = resp;
    let mut raw = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
    while !String::from_utf8_lossy(&raw).lines().any(|l| l.starts_with(':')) {
        let chunk = tokio::time::timeout_at(deadline, resp.chunk())
            .await
            .expect("a heartbeat within 3 s")
            .unwrap()
            .unwrap();
        raw.extend_from_slice(&chunk);
    }
}

#[tokio::test]
async fn a_manual_summarize_of_an_idle_session_is_accepted_and_written() {
    let s = start(answers_hello(), ToolSet::new(), |_| {}).await;
    s.prompt("s", "hi", "r1").await;
    s.finished("r1").await;
    let (status, v) = s.post("/v1/sessions/s/summarize", json!({})).await;
    assert_eq!(status, 202, "{v}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (_, state) = s.get("/v1/sessions/s").await;
        if state["summary_message"].is_u64() && state["summarizing"] == false {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "no summary: {state}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Calls `echo` (slow: the test types meanwhile), then answers with every user message it saw.
fn echoes_then_repeats_the_user() -> ScriptedProvider {
    ScriptedProvider::new(|req, _| {
        if req.messages.iter().any(|m| matches!(m, turnstile_host::RequestMessage::ToolResults(_)))
        {
            let users: Vec<&str> = req
                .messages
                .iter()
                .filter_map(|m| match m {
                    turnstile_host::RequestMessage::User { text, .. } => Some(text.as_str()),
                    _ => None,
                })
                .collect();
            Answer::streamed(&format!("saw: {}", users.join(" | ")), 1, 1, Usage::default())
        } else {
            Answer::tool_call("c1", "echo", r#"{"text":"x"}"#)
        }
    })
}

#[tokio::test]
async fn a_steered_prompt_joins_the_running_turn_and_an_idle_one_runs_on_its_own() {
    let tools = ToolSet::new().with(EchoTool { name: "echo".into(), delay_ms: 400 });
    let s = start(echoes_then_repeats_the_user(), tools, |_| {}).await;
    let mut events = s.events(None).await;
    s.prompt("s", "list the files", "r1").await;
    let ask = events.next_event("ask").await;
    let id = ask["id"].as_str().unwrap();
    let (status, v) = s.post(&format!("/v1/asks/{id}"), json!({"answer": "session"})).await;
    assert_eq!(status, 200, "{v}");
    // While the tool runs, a steer: folded into the turn at its next step, no RunId of its own.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (status, v) = s
        .post(
            "/v1/sessions/s/prompts",
            json!({"prompt": "and the tests", "mode": "steer", "run_id": "ignored"}),
        )
        .await;
    assert_eq!(status, 202, "{v}");
    assert_eq!((v["steered"].as_bool(), v["run_id"].is_null()), (Some(true), true), "{v}");
    let done = s.finished("r1").await;
    assert_eq!(
        done["text"], "saw: list the files | and the tests",
        "the model saw the steered text at its next step"
    );
    let (status, run) = s.get("/v1/runs/ignored").await;
    assert_eq!(status, 404, "a steered prompt has no RunId: {run}");
    // Idle: a steer runs as its own turn, with its RunId and its RunComplete.
    let (status, v) = s
        .post(
            "/v1/sessions/s/prompts",
            json!({"prompt": "now run them", "mode": "steer", "run_id": "r2"}),
        )
        .await;
    assert_eq!(status, 202, "{v}");
    assert_eq!((v["steered"].as_bool(), v["run_id"].as_str()), (Some(false), Some("r2")), "{v}");
    assert_eq!(s.finished("r2").await["outcome"], "completed");
    let seen: Vec<(serde_json::Value, serde_json::Value)> = events
        .until_run_complete("r2")
        .await
        .iter()
        .filter(|f| f.event == "run_complete")
        .map(|f| (data(f)["run_id"].clone(), data(f)["outcome"].clone()))
        .collect();
    let want = [
        (json!(null), json!("folded")), // the steered prompt, published with its turn's writes
        (json!("r1"), json!("completed")),
        (json!("r2"), json!("completed")),
    ];
    assert_eq!(
        seen, want,
        "one RunComplete for each run; the steered prompt's completion has no RunId"
    );
    // A queued prompt's answer does not carry `steered`; an unknown mode is refused.
    let v = s.prompt("s", "thanks", "r3").await;
    assert!(v.get("steered").is_none(), "{v}");
    let (status, v) =
        s.post("/v1/sessions/s/prompts", json!({"prompt": "x", "mode": "interrupt"})).await;
    assert_eq!(status, 400, "{v}");
}

#[tokio::test]
async fn a_user_prompt_submit_hook_refuses_a_prompt_with_400_blocked_by_hook() {
    let script = "grep -q password && { echo 'no secrets' >&2; exit 2; }; exit 0";
    let guard = turnstile_tools::Hook::new(
        vec!["sh".into(), "-c".into(), script.into()],
        Duration::from_secs(10),
    );
    let s = start(answers_hello(), ToolSet::new(), |c| c.prompt_hooks = vec![guard]).await;
    let (status, v) = s
        .post("/v1/sessions/s/prompts", json!({"prompt": "my password is x", "run_id": "r1"}))
        .await;
    assert_eq!((status, v["error"]["code"].as_str()), (400, Some("blocked_by_hook")), "{v}");
    assert_eq!(v["error"]["message"], "Prompt blocked by hook. Reason: no secrets");
    assert_eq!(s.get("/v1/runs/r1").await.0, 404, "nothing was accepted");
    s.prompt("s", "hello", "r2").await;
    assert_eq!(s.finished("r2").await["outcome"], "completed");
}
