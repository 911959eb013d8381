//! The tokio host end to end: submissions through the engine, the workers, the store writer
//! and SQLite, with the scripted provider.

mod common;

use std::sync::Arc;
use std::time::Duration;

use turnstile_core::{
    ErrorKind, FinishReason, HostError, Outcome, Rejection, RunId, Seq, SessionId, StepEvent,
    Submit, Usage,
};
use turnstile_host::store::{Fault, Reader, RunState, Store, StoreConfig};
use turnstile_host::{
    Answer, Cursor, EchoTool, Event, Flight, Host, HostConfig, InvalidRequest, OpenError, Scripted,
    ScriptedProvider, Stopped, StoreError, SubmitError, ToolSet, Update, WaitError,
};

fn usage() -> Usage {
    Usage { input_tokens: 10, output_tokens: 5, cost_micros: 7, ..Usage::default() }
}

/// Answers every request by streaming "echo: <last user text>" in 4 deltas, 5 ms apart.
fn echo() -> ScriptedProvider {
    ScriptedProvider::new(|req, _| {
        let text = format!("echo: {}", req.last_user_text().unwrap_or(""));
        Answer::streamed(&text, 4, 5, usage())
    })
}

fn hang() -> ScriptedProvider {
    ScriptedProvider::new(|_, _| Answer::hang())
}

fn config(dir: &common::Scratch) -> HostConfig {
    let mut c = HostConfig::with_store(dir.store());
    c.workers = 2;
    c
}

async fn open(c: &HostConfig, p: ScriptedProvider) -> Host {
    Host::open(
        c.clone(),
        Arc::new(p),
        ToolSet::new().with(EchoTool { name: "view".into(), delay_ms: 5 }),
    )
    .await
    .expect("open")
}

both_stores!(
    a_run_completes_with_its_text_and_is_in_the_ledger,
    wait_answers_before_during_after_and_after_a_restart,
    resubmission_is_idempotent_and_a_conflict_is_rejected_also_after_restart,
    cancel_ends_a_hanging_turn_and_the_queue_behind_it_with_one_completion_each,
    own_turns_run_in_acceptance_order_across_sessions_and_tools_run,
    completions_stream_from_a_cursor_is_lossless_and_resumable,
    shutdown_interrupts_and_releases_the_store_and_a_second_host_is_refused,
    a_transient_store_failure_is_retried_and_loses_nothing,
    a_persistent_store_failure_stops_the_engine_and_recovery_decides_on_restart,
    a_retried_step_resets_its_content_and_a_refresh_retries_with_fresh_credentials,
    a_nearly_full_context_is_summarized_and_history_then_starts_at_the_summary,
    a_resubmission_is_answered_only_after_the_run_is_durable,
    dropping_every_handle_releases_the_store_and_recovery_ends_the_rest,
    a_run_complete_is_published_after_its_text_is_durable,
    a_cancel_during_a_droppable_tool_ends_the_turn_at_once,
    a_sub_agent_runs_in_a_child_session_and_its_text_is_the_parent_s_result,
    after_a_storage_failure_finished_runs_are_still_answered_by_sequence,
);

async fn legal(host: &Host, session: &str) {
    let s = SessionId::new(session);
    let problems = host.read(move |r| r.protocol_problems(&s)).await.expect("read");
    assert!(problems.is_empty(), "history of {session} is not protocol-legal: {problems:?}");
}

async fn a_run_completes_with_its_text_and_is_in_the_ledger(kind: common::Kind) {
    let dir = common::Scratch::new(kind);
    let host = open(&config(&dir), echo()).await;
    let run = host.submit(Submit::new("s1", "hello").with_run_id("r1")).await.expect("accepted");
    assert_eq!(run.run_id, Some(RunId::new("r1")));
    assert!(!run.existing);
    let done = host.wait(&RunId::new("r1")).await.expect("completion");
    assert_eq!(done.outcome, Outcome::Completed);
    assert_eq!(done.text.as_deref(), Some("echo: hello"));
    assert_eq!(done.seq, run.seq);
    let row = host.read(|r| r.run(&RunId::new("r1"))).await.expect("read").expect("row");
    assert_eq!(row.state, RunState::Finished);
    assert_eq!(row.completion.expect("completion").1, done);
    let session =
        host.read(|r| r.session(&SessionId::new("s1"))).await.expect("read").expect("row");
    assert_eq!((session.prompt_tokens, session.completion_tokens, session.cost_micros), (10, 5, 7));
    assert_eq!(session.title.as_deref(), Some("hello"), "the provider's title was written");
    legal(&host, "s1").await;
    host.shutdown().await.expect("shutdown");
}

async fn wait_answers_before_during_after_and_after_a_restart(kind: common::Kind) {
    let dir = common::Scratch::new(kind);
    let c = config(&dir);
    let host = open(&c, echo()).await;
    let early = {
        let host = host.clone();
        // Before: the run does not exist yet, so this wait must be told "not found"...
        tokio::spawn(async move { host.wait(&RunId::new("r1")).await })
    };
    assert_eq!(
        early.await.expect("join"),
        Err(WaitError::NotFound(RunId::new("r1"))),
        "a RunId never accepted is not waited for"
    );
    host.submit(Submit::new("s1", "one").with_run_id("r1")).await.expect("accepted");
    // ... during:
    let during = host.wait(&RunId::new("r1")).await.expect("during");
    // ... after:
    let after = host.wait(&RunId::new("r1")).await.expect("after");
    assert_eq!(during, after);
    assert_eq!(host.wait(&RunId::new("nope")).await, Err(WaitError::NotFound(RunId::new("nope"))));
    assert_eq!(WaitError::NotFound(RunId::new("nope")).to_string(), "run not found: nope");
    assert_eq!(host.wait_seq(Seq(99)).await, Err(WaitError::SeqNotFound(Seq(99))));
    assert_eq!(WaitError::SeqNotFound(Seq(99)).to_string(), "run not found: seq 99");
    host.shutdown().await.expect("shutdown");
    drop(host);
    let again = open(&c, echo()).await;
    assert_eq!(again.wait(&RunId::new("r1")).await.expect("after restart"), after);
    again.shutdown().await.expect("shutdown");
}

async fn resubmission_is_idempotent_and_a_conflict_is_rejected_also_after_restart(
    kind: common::Kind,
) {
    let dir = common::Scratch::new(kind);
    let c = config(&dir);
    let host = open(&c, echo()).await;
    let first = host.submit(Submit::new("s1", "same").with_run_id("r1")).await.expect("accepted");
    host.wait(&RunId::new("r1")).await.expect("done");
    host.shutdown().await.expect("shutdown");
    drop(host);
    let host = open(&c, echo()).await;
    let again = host.submit(Submit::new("s1", "same").with_run_id("r1")).await.expect("existing");
    assert!(again.existing);
    assert_eq!((again.seq, again.outcome), (first.seq, Some(Outcome::Completed)));
    let conflict = host.submit(Submit::new("s1", "different").with_run_id("r1")).await;
    assert_eq!(conflict, Err(SubmitError::Rejected(Rejection::RunIdConflict(RunId::new("r1")))));
    assert_eq!(
        conflict.unwrap_err().to_string(),
        "run id r1 is already used by a different request"
    );
    let empty = host.submit(Submit::new("s1", "")).await;
    assert_eq!(empty, Err(SubmitError::Rejected(Rejection::PromptEmpty)));
    host.shutdown().await.expect("shutdown");
}

async fn cancel_ends_a_hanging_turn_and_the_queue_behind_it_with_one_completion_each(
    kind: common::Kind,
) {
    let dir = common::Scratch::new(kind);
    let host = open(&config(&dir), hang()).await;
    let s = SessionId::new("s1");
    host.submit(Submit::new("s1", "first").with_run_id("a")).await.expect("a");
    host.submit(Submit::new("s1", "second").with_run_id("b")).await.expect("b");
    common::until_active(&host, "a").await;
    assert!(host.is_busy(&s).await.expect("busy"));
    host.cancel(&s).await.expect("cancel");
    let a = host.wait(&RunId::new("a")).await.expect("a done");
    let b = host.wait(&RunId::new("b")).await.expect("b done");
    assert_eq!((a.outcome, b.outcome), (Outcome::Cancelled, Outcome::Cancelled));
    assert!(a.message_id.is_some(), "the active one was activated");
    assert!(b.message_id.is_none(), "the waiting one never was, and wrote no message");
    assert!(!host.is_busy(&s).await.expect("busy"));
    legal(&host, "s1").await;
    // An idle cancel changes nothing later (I10); cancel_run is precise.
    host.cancel(&s).await.expect("idle cancel");
    host.submit(Submit::new("s1", "third").with_run_id("c")).await.expect("c");
    host.submit(Submit::new("s1", "fourth").with_run_id("d")).await.expect("d");
    host.cancel_run(&RunId::new("d")).await.expect("cancel d");
    assert_eq!(host.wait(&RunId::new("d")).await.expect("d").outcome, Outcome::Cancelled);
    host.cancel_run(&RunId::new("c")).await.expect("cancel c");
    assert_eq!(host.wait(&RunId::new("c")).await.expect("c").outcome, Outcome::Cancelled);
    host.shutdown().await.expect("shutdown");
}

async fn own_turns_run_in_acceptance_order_across_sessions_and_tools_run(kind: common::Kind) {
    let dir = common::Scratch::new(kind);
    let provider = ScriptedProvider::new(|req, _| {
        let last = req.messages.last();
        match last {
            Some(turnstile_host::provider::RequestMessage::ToolResults(r)) => {
                Answer::streamed(&format!("tool said {}", r[0].content), 2, 1, usage())
            }
            _ if req.last_user_text() == Some("use a tool") => {
                Answer::tool_call("c1", "view", "{\"path\":\"x\"}")
            }
            _ => Answer::streamed(req.last_user_text().unwrap_or(""), 3, 2, usage()),
        }
    });
    let host = open(&config(&dir), provider).await;
    let mut seqs = Vec::new();
    for i in 0..6 {
        let session = format!("s{}", i % 3);
        let prompt = if i == 4 { "use a tool".to_owned() } else { format!("p{i}") };
        let run = host
            .submit(Submit::new(&session, prompt).with_run_id(format!("r{i}")))
            .await
            .expect("accepted");
        seqs.push(run.seq);
    }
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "sequences follow acceptance order: {seqs:?}");
    for i in 0..6 {
        let done = host.wait(&RunId::new(format!("r{i}"))).await.expect("done");
        assert_eq!(done.outcome, Outcome::Completed, "r{i}");
        if i == 4 {
            assert_eq!(done.text.as_deref(), Some("tool said echo {\"path\":\"x\"}"));
        }
    }
    for s in ["s0", "s1", "s2"] {
        legal(&host, s).await;
        // Own turns start in acceptance order: user messages are in sequence order (I7).
        let id = SessionId::new(s);
        let msgs = host.read(move |r| r.messages(&id)).await.expect("read");
        let user_seqs: Vec<_> = msgs
            .iter()
            .filter(|m| m.role == turnstile_host::store::StoredRole::User)
            .map(|m| m.seq)
            .collect();
        assert!(user_seqs.windows(2).all(|w| w[0] < w[1]), "{s}: {user_seqs:?}");
    }
    host.shutdown().await.expect("shutdown");
}

async fn completions_stream_from_a_cursor_is_lossless_and_resumable(kind: common::Kind) {
    let dir = common::Scratch::new(kind);
    let c = config(&dir);
    let host = open(&c, echo()).await;
    let mut all = host.completions(Cursor(0));
    for i in 0..5 {
        host.submit(Submit::new("s", format!("p{i}")).with_run_id(format!("r{i}")))
            .await
            .expect("ok");
    }
    let mut got = Vec::new();
    for _ in 0..5 {
        let (cursor, record) = all.next().await.expect("read").expect("one");
        got.push((cursor, record.run_id.expect("run id").to_string()));
    }
    assert_eq!(
        got.iter().map(|g| g.1.as_str()).collect::<Vec<_>>(),
        ["r0", "r1", "r2", "r3", "r4"]
    );
    assert!(got.windows(2).all(|w| w[0].0 < w[1].0));
    host.shutdown().await.expect("shutdown");
    drop(host);
    // Resume after the second, after a restart.
    let host = open(&c, echo()).await;
    let mut rest = host.completions(got[1].0);
    let (_, third) = rest.next().await.expect("read").expect("one");
    assert_eq!(third.run_id, Some(RunId::new("r2")));
    host.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_subscriber_gets_lagged_and_never_blocks_the_engine() {
    let dir = common::Scratch::new(common::Kind::Sqlite);
    let mut c = config(&dir);
    c.updates_capacity = 4;
    let host = open(&c, echo()).await;
    let mut slow = host.subscribe();
    for i in 0..5 {
        host.submit(Submit::new("s", format!("p{i}")).with_run_id(format!("r{i}")))
            .await
            .expect("ok");
    }
    for i in 0..5 {
        host.wait(&RunId::new(format!("r{i}"))).await.expect("done");
    }
    let first = slow.recv().await.expect("event");
    assert!(matches!(first, Event::Lagged { skipped } if skipped > 0), "{first:?}");
    let mut finished = 0;
    while let Ok(Some(e)) = tokio::time::timeout(Duration::from_millis(50), slow.recv()).await {
        if matches!(e, Event::Update(Update::TurnFinished { .. })) {
            finished += 1;
        }
    }
    assert!(finished <= 4, "only the newest updates are kept");
    host.shutdown().await.expect("shutdown");
}

async fn shutdown_interrupts_and_releases_the_store_and_a_second_host_is_refused(
    kind: common::Kind,
) {
    let dir = common::Scratch::new(kind);
    let c = config(&dir);
    let host = open(&c, hang()).await;
    let second = Host::open(c.clone(), Arc::new(hang()), ToolSet::new()).await;
    assert_eq!(
        second.expect_err("in use").to_string(),
        "store is in use by another turnstile process"
    );
    host.submit(Submit::new("s", "active").with_run_id("a")).await.expect("a");
    host.submit(Submit::new("s", "waiting").with_run_id("b")).await.expect("b");
    host.shutdown().await.expect("shutdown");
    let a = host.wait(&RunId::new("a")).await.expect("a");
    let b = host.wait(&RunId::new("b")).await.expect("b");
    assert_eq!((a.outcome, b.outcome), (Outcome::Interrupted, Outcome::Interrupted));
    assert_eq!(a.error.as_ref().map(|e| e.kind), Some(ErrorKind::Interrupted));
    let late = host.submit(Submit::new("s", "late")).await;
    assert_eq!(late, Err(SubmitError::Rejected(Rejection::WorkspaceClosing)));
    // SPEC 4.1's order holds with the engine gone: the submission's own faults come first.
    let empty = host.submit(Submit::new("s", "")).await;
    assert_eq!(empty, Err(SubmitError::Rejected(Rejection::PromptEmpty)));
    let child = host.submit(Submit::new("m1$$c1", "continue")).await;
    assert_eq!(
        child,
        Err(SubmitError::Rejected(Rejection::ChildSession(SessionId::new("m1$$c1"))))
    );
    assert_eq!(host.shutdown().await, Ok(()), "shutdown is idempotent");
    assert_eq!(host.is_busy(&SessionId::new("s")).await, Ok(false));
    host.cancel(&SessionId::new("s")).await.expect("a cancel after shutdown is a no-op");
    drop(host);
    let again = open(&c, echo()).await;
    legal(&again, "s").await;
    assert!(again.recovered().is_empty(), "a clean shutdown leaves nothing to recover");
    again.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_deltas_are_debounced_into_few_writes() {
    let dir = common::Scratch::new(common::Kind::Sqlite);
    let provider = ScriptedProvider::new(|_, _| {
        let mut events = Vec::new();
        for i in 0..200 {
            events.push(Scripted::Wait(1));
            events.push(Scripted::Event(StepEvent::TextDelta { text: format!("{i} ") }));
        }
        events
            .push(Scripted::Event(StepEvent::Finished { reason: FinishReason::Stop, usage: None }));
        Answer(events)
    });
    let host = open(&config(&dir), provider).await;
    host.submit(Submit::new("s", "go").with_run_id("r")).await.expect("ok");
    let done = host.wait(&RunId::new("r")).await.expect("done");
    let expected: String = (0..200).map(|i| format!("{i} ")).collect();
    assert_eq!(done.text.as_deref(), Some(expected.as_str()));
    let stats = host.writer_stats();
    let appends = stats.appends_in.load(std::sync::atomic::Ordering::Relaxed);
    let txns = stats.txns.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(appends, 200, "every delta reached the writer");
    // 200 deltas over at least 200 ms with a 33 ms window: about 7 streaming writes, plus the
    // structural ones (acceptance, activation, finish, title, usage). Far below one per delta.
    assert!(txns < 40, "{txns} transactions for 200 deltas");
    host.shutdown().await.expect("shutdown");
}

async fn a_transient_store_failure_is_retried_and_loses_nothing(kind: common::Kind) {
    let dir = common::Scratch::new(kind);
    let mut c = config(&dir);
    let faults = common::faulty(&mut c);
    let host = open(&c, echo()).await;
    host.submit(Submit::new("s", "warm").with_run_id("r0")).await.expect("ok");
    host.wait(&RunId::new("r0")).await.expect("done");
    faults.fail_next(3, Fault::Locked);
    host.submit(Submit::new("s", "through failures").with_run_id("r1"))
        .await
        .expect("accepted after retries");
    let done = host.wait(&RunId::new("r1")).await.expect("done");
    assert_eq!(done.outcome, Outcome::Completed);
    assert!(host.writer_stats().retries.load(std::sync::atomic::Ordering::Relaxed) >= 3);
    legal(&host, "s").await;
    host.shutdown().await.expect("shutdown");
}

/// Seeds 21503, 109025 and 153031 of the simulation: bursts of failures that each fit the
/// retry budget must not add up to a stop when a later one lands on the retries of an earlier
/// one. A shutdown during the retries waits for them and then finishes cleanly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shutdown_during_store_retries_succeeds_when_each_burst_fits_the_retry_budget() {
    let dir = common::Scratch::new(common::Kind::Sqlite);
    let mut c = config(&dir);
    // The simulated world's budget: attempts at 0, 10, 30, 70, ..., 1270 and 2000 ms, so up
    // to 8 failures in a row are absorbed and a 9th stops the host.
    c.store_retry = Duration::from_secs(2);
    let faults = common::faulty(&mut c);
    let host = open(&c, hang()).await;
    host.submit(Submit::new("s", "active").with_run_id("a")).await.expect("a");
    host.submit(Submit::new("s", "waiting").with_run_id("b")).await.expect("b");
    common::until_active(&host, "a").await;
    // The shutdown's writes fail 4 times (150 ms of retries) ...
    faults.fail_next(4, Fault::Locked);
    let shutdown = {
        let host = host.clone();
        tokio::spawn(async move { host.shutdown().await })
    };
    // ... and a second burst of 6 arrives during them (from the 3rd failure to the 5th
    // attempt: a window of 120 ms). Chained, 9 or 10 failures in a row would stop the host;
    // each burst on its own is absorbed.
    while faults.injected() < 3 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    faults.fail_burst(6, Fault::DiskFull);
    assert_eq!(shutdown.await.expect("join"), Ok(()), "each burst fits the retry budget");
    assert_eq!(host.stopped(), None);
    let a = host.wait(&RunId::new("a")).await.expect("a");
    let b = host.wait(&RunId::new("b")).await.expect("b");
    assert_eq!((a.outcome, b.outcome), (Outcome::Interrupted, Outcome::Interrupted));
    drop(host);
    faults.clear();
    let again = open(&c, echo()).await;
    legal(&again, "s").await;
    assert!(again.recovered().is_empty(), "a clean shutdown leaves nothing to recover");
    again.shutdown().await.expect("shutdown");
}

async fn a_persistent_store_failure_stops_the_engine_and_recovery_decides_on_restart(
    kind: common::Kind,
) {
    let dir = common::Scratch::new(kind);
    let mut c = config(&dir);
    c.store_retry = Duration::from_millis(300);
    let faults = common::faulty(&mut c);
    let host = open(&c, hang()).await;
    host.submit(Submit::new("s", "stuck").with_run_id("r1")).await.expect("accepted");
    common::until_active(&host, "r1").await;
    faults.fail_always(Fault::DiskFull);
    let waiter = {
        let host = host.clone();
        tokio::spawn(async move { host.wait(&RunId::new("r1")).await })
    };
    // The cancel's clean-up cannot be written: retried for 300 ms, then the engine stops.
    host.cancel(&SessionId::new("s")).await.expect("cancel");
    let got = waiter.await.expect("join");
    let expected = "engine stopped: storage failure: database or disk is full";
    let Err(WaitError::Stopped(why)) = got else { panic!("the waiter heard {got:?}") };
    assert_eq!(why.to_string(), expected);
    // The stop carries the store's error itself, as the cause.
    let Stopped::Storage(cause) = &why else { panic!("a storage failure: {why:?}") };
    assert!(matches!(**cause, StoreError::Sqlite(_)), "{cause:?}");
    let source = std::error::Error::source(&why).expect("the store error is the source");
    assert_eq!(source.to_string(), "database or disk is full");
    assert_eq!(host.stopped(), Some(why.clone()));
    let late = host.submit(Submit::new("s", "after")).await;
    assert_eq!(late, Err(SubmitError::Stopped(why.clone())));
    assert_eq!(late.expect_err("stopped").to_string(), expected);
    assert_eq!(host.flush().await, Err(why.clone()));
    let _ = host.shutdown().await;
    drop(host);
    // Nothing was published that was not recorded: the ledger still has the run unfinished,
    // and the next start's recovery decides it.
    faults.clear();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let again = open(&c, echo()).await;
    let rec = again.wait(&RunId::new("r1")).await.expect("recovered");
    assert_eq!(rec.outcome, Outcome::Interrupted);
    assert_eq!(again.recovered().len(), 1);
    legal(&again, "s").await;
    again.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_flight_recorder_writes_a_trace_that_replays() {
    let dir = common::Scratch::new(common::Kind::Sqlite);
    let mut c = config(&dir);
    let trace = dir.path().join("flight.jsonl");
    c.trace = Some(Flight::File(trace.clone()));
    c.trace_outputs = true;
    let host = open(&c, echo()).await;
    host.submit(Submit::new("s", "one").with_run_id("r1")).await.expect("ok");
    host.submit(Submit::new("s", "two")).await.expect("ok");
    host.wait(&RunId::new("r1")).await.expect("done");
    host.cancel(&SessionId::new("s")).await.expect("cancel");
    host.shutdown().await.expect("shutdown");
    let text = std::fs::read_to_string(&trace).expect("trace");
    let parsed = turnstile_core::Trace::parse(&text).expect("parses");
    assert!(parsed.lines.len() >= 6, "{} lines", parsed.lines.len());
    let report = turnstile_core::replay(&parsed).expect("replays with identical outputs");
    let _ = report;
}

async fn a_retried_step_resets_its_content_and_a_refresh_retries_with_fresh_credentials(
    kind: common::Kind,
) {
    let dir = common::Scratch::new(kind);
    // Each prompt's first request fails once: "retry" with a short retry-after, "auth" with 401.
    let failed = Arc::new(std::sync::Mutex::new(std::collections::BTreeSet::new()));
    let provider = ScriptedProvider::new(move |req, _| {
        let prompt = req.last_user_text().unwrap_or("").to_owned();
        let first = failed.lock().expect("set").insert(prompt.clone());
        match (prompt.as_str(), first) {
            ("retry", true) => Answer(vec![
                Scripted::Event(StepEvent::TextDelta { text: "partial ".into() }),
                Scripted::Event(StepEvent::Failed {
                    error: turnstile_core::ProviderError {
                        status: Some(503),
                        retry_after_ms: Some(20),
                        message: "overloaded".into(),
                        ..Default::default()
                    },
                }),
            ]),
            ("auth", true) => Answer(vec![
                Scripted::Event(StepEvent::TextDelta { text: "stale ".into() }),
                Scripted::Event(StepEvent::Failed {
                    error: turnstile_core::ProviderError {
                        class: turnstile_core::ErrorClass::Unauthorized,
                        status: Some(401),
                        message: "expired".into(),
                        ..Default::default()
                    },
                }),
            ]),
            _ => Answer::streamed("fine", 2, 1, usage()),
        }
    });
    let counter = provider.clone();
    let host = open(&config(&dir), provider).await;
    host.submit(Submit::new("s", "retry").with_run_id("r")).await.expect("ok");
    let done = host.wait(&RunId::new("r")).await.expect("done");
    assert_eq!(done.outcome, Outcome::Completed);
    assert_eq!(done.text.as_deref(), Some("fine"), "the failed attempt's text was reset");
    host.submit(Submit::new("s", "auth").with_run_id("a")).await.expect("ok");
    let done = host.wait(&RunId::new("a")).await.expect("done");
    assert_eq!((done.outcome, done.text.as_deref()), (Outcome::Completed, Some("fine")));
    assert_eq!(counter.requests(), 4, "each prompt: one failed attempt, one retry");
    legal(&host, "s").await;
    host.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_refresh_fails_the_run_and_a_failed_preparation_only_its_own() {
    let dir = common::Scratch::new(common::Kind::Sqlite);
    let provider = ScriptedProvider::new(|_, _| Answer::failure(401, "expired"))
        .with_refresh(false)
        .with_prepare(|s| {
            if s.as_str() == "broken" {
                Err("no model for you".into())
            } else {
                Ok(Default::default())
            }
        });
    let host = open(&config(&dir), provider).await;
    host.submit(Submit::new("broken", "x").with_run_id("p")).await.expect("ok");
    host.submit(Submit::new("s", "x").with_run_id("u")).await.expect("ok");
    let p = host.wait(&RunId::new("p")).await.expect("p");
    assert_eq!(p.outcome, Outcome::Failed);
    assert_eq!(
        p.error.as_ref().map(|e| (e.kind, e.message.as_str())),
        Some((ErrorKind::Preparation, "no model for you"))
    );
    assert!(p.message_id.is_none(), "never activated");
    let u = host.wait(&RunId::new("u")).await.expect("u");
    assert_eq!(
        u.error.as_ref().map(|e| (e.kind, e.title.as_str())),
        Some((ErrorKind::Unauthorized, "Unauthorized"))
    );
    legal(&host, "s").await;
    host.shutdown().await.expect("shutdown");
}

async fn a_nearly_full_context_is_summarized_and_history_then_starts_at_the_summary(
    kind: common::Kind,
) {
    let dir = common::Scratch::new(kind);
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    let provider = ScriptedProvider::new(move |req, _| {
        log.lock().expect("log").push((
            req.kind,
            req.messages.len(),
            req.messages.first().cloned(),
        ));
        match req.kind {
            turnstile_host::provider::RequestKind::Summary => {
                Answer::streamed("SUMMARY", 2, 1, Usage { output_tokens: 40, ..Usage::default() })
            }
            turnstile_host::provider::RequestKind::Step => Answer::streamed(
                "long answer",
                2,
                1,
                Usage { input_tokens: 900, output_tokens: 50, ..Usage::default() },
            ),
        }
    })
    .with_prepare(|_| Ok(turnstile_host::ModelInfo { context_window: 1_000 }));
    let host = open(&config(&dir), provider).await;
    let s = SessionId::new("s");
    host.submit(Submit::new("s", "first").with_run_id("r1")).await.expect("ok");
    assert_eq!(host.wait(&RunId::new("r1")).await.expect("r1").outcome, Outcome::Completed);
    // The housekeeping summary runs after the RunComplete. `is_busy` is the engine's view; the
    // summary's writes become durable just after, so poll the store (bounded).
    let mut row = None;
    for _ in 0..2_000 {
        let s = s.clone();
        let r = host.read(move |r| r.session(&s)).await.expect("read").expect("row");
        if r.summary_message.is_some() {
            row = Some(r);
            break;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let row = row.expect("the summary pointer is set within 4 s");
    assert!(!host.is_busy(&s).await.expect("busy"));
    assert!(row.summary_message.is_some(), "the summary pointer is set");
    assert_eq!((row.prompt_tokens, row.completion_tokens), (0, 40), "gauges reset to the summary");
    host.submit(Submit::new("s", "second").with_run_id("r2")).await.expect("ok");
    host.wait(&RunId::new("r2")).await.expect("r2");
    let log = seen.lock().expect("log").clone();
    let last = log.last().expect("a request");
    assert_eq!(
        last.2,
        Some(turnstile_host::provider::RequestMessage::User {
            text: "SUMMARY".into(),
            attachments: vec![]
        }),
        "history starts at the summary, relabelled as a user message: {log:?}"
    );
    // r2's step filled the context again, so another summary may be running now: check the
    // history once everything has ended (a live summary message is unfinished by design).
    host.shutdown().await.expect("shutdown");
    drop(host);
    let again = open(&config(&dir), echo()).await;
    legal(&again, "s").await;
    again.shutdown().await.expect("shutdown");
}

/// A tool that panics: the host must report it as a failed call, not hang the turn.
struct Boom;

impl turnstile_host::Tool for Boom {
    fn spec(&self) -> turnstile_core::ToolSpec {
        turnstile_core::ToolSpec::new("boom")
    }
    fn run(
        &self,
        _: turnstile_host::ToolCall,
    ) -> turnstile_host::tool::BoxFuture<turnstile_core::ToolOutput> {
        Box::pin(async { panic!("the tool exploded") })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_tool_or_provider_fails_its_call_instead_of_hanging_the_turn() {
    let dir = common::Scratch::new(common::Kind::Sqlite);
    let provider = ScriptedProvider::new(|req, _| match req.messages.last() {
        Some(turnstile_host::provider::RequestMessage::ToolResults(r)) => {
            Answer::streamed(&format!("after: {}", r[0].content), 1, 1, usage())
        }
        _ if req.last_user_text() == Some("provider") => panic!("the provider exploded"),
        _ => Answer::tool_call("c1", "boom", "{}"),
    });
    let host = Host::open(config(&dir), Arc::new(provider), ToolSet::new().with(Boom))
        .await
        .expect("open");
    host.submit(Submit::new("s", "tool").with_run_id("t")).await.expect("ok");
    let done = tokio::time::timeout(Duration::from_secs(10), host.wait(&RunId::new("t")))
        .await
        .expect("the turn ended")
        .expect("done");
    assert_eq!(done.text.as_deref(), Some("after: the tool failed: the tool exploded"));
    // The scripted provider panics while building its answer, inside `stream`, before any
    // future exists: that too must end the turn, as a non-retryable provider failure.
    host.submit(Submit::new("s", "provider").with_run_id("p")).await.expect("ok");
    let p = tokio::time::timeout(Duration::from_secs(10), host.wait(&RunId::new("p")))
        .await
        .expect("the turn ended")
        .expect("done");
    assert_eq!(p.error.as_ref().map(|e| e.kind), Some(ErrorKind::Provider), "{p:?}");
    legal(&host, "s").await;
    host.shutdown().await.expect("shutdown");
}

async fn a_resubmission_is_answered_only_after_the_run_is_durable(kind: common::Kind) {
    let dir = common::Scratch::new(kind);
    let mut c = config(&dir);
    let faults = common::faulty(&mut c);
    let host = open(&c, hang()).await;
    // The first acceptance's commit fails a few times (about 150 ms of retries).
    faults.fail_next(4, Fault::Locked);
    let first = {
        let host = host.clone();
        tokio::spawn(async move { host.submit(Submit::new("s", "same").with_run_id("r1")).await })
    };
    tokio::time::sleep(Duration::from_millis(20)).await;
    let again = host.submit(Submit::new("s", "same").with_run_id("r1")).await.expect("existing");
    assert!(again.existing);
    // Answered "existing" means the run is durable: wait finds it.
    let row = host.read(|r| r.run(&RunId::new("r1"))).await.expect("read");
    assert!(row.is_some(), "an existing run was reported before its ledger row was durable");
    let conflict = host.submit(Submit::new("other", "x").with_run_id("r1")).await;
    assert_eq!(conflict, Err(SubmitError::Rejected(Rejection::RunIdConflict(RunId::new("r1")))));
    first.await.expect("join").expect("accepted");
    host.shutdown().await.expect("shutdown");
}

async fn dropping_every_handle_releases_the_store_and_recovery_ends_the_rest(kind: common::Kind) {
    let dir = common::Scratch::new(kind);
    let c = config(&dir);
    let host = open(&c, hang()).await;
    host.submit(Submit::new("s", "left running").with_run_id("r1")).await.expect("ok");
    drop(host);
    // The engine, workers and writer notice and release the store; retry the open briefly.
    let mut again = None;
    for _ in 0..200 {
        match Host::open(c.clone(), Arc::new(echo()), ToolSet::new()).await {
            Ok(h) => {
                again = Some(h);
                break;
            }
            Err(e) => {
                assert_eq!(e.to_string(), "store is in use by another turnstile process");
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    }
    let again = again.expect("the store was released after every handle was dropped");
    assert_eq!(
        again.wait(&RunId::new("r1")).await.expect("recovered").outcome,
        Outcome::Interrupted
    );
    again.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_end_after_shutdown_and_abandoned_waits_leave_nothing_behind() {
    let dir = common::Scratch::new(common::Kind::Sqlite);
    let host = open(&config(&dir), hang()).await;
    let mut updates = host.subscribe();
    let mut completions = host.completions(Cursor(0));
    host.submit(Submit::new("s", "x").with_run_id("r1")).await.expect("ok");
    let abandoned =
        tokio::time::timeout(Duration::from_millis(20), host.wait(&RunId::new("r1"))).await;
    assert!(abandoned.is_err(), "the provider hangs, so the wait timed out");
    assert_eq!(host.waiters(), 0, "an abandoned wait leaves no waiter behind");
    host.shutdown().await.expect("shutdown");
    let (_, only) = completions.next().await.expect("read").expect("the interrupted run");
    assert_eq!(only.outcome, Outcome::Interrupted);
    assert_eq!(completions.next().await.expect("read"), None, "the stream ends after shutdown");
    let ended = tokio::time::timeout(Duration::from_secs(5), async {
        while updates.recv().await.is_some() {}
    })
    .await;
    assert!(ended.is_ok(), "live updates end after shutdown");
}

async fn after_a_storage_failure_finished_runs_are_still_answered_by_sequence(kind: common::Kind) {
    let dir = common::Scratch::new(kind);
    let mut c = config(&dir);
    c.store_retry = Duration::from_millis(100);
    let faults = common::faulty(&mut c);
    let host = open(&c, echo()).await;
    let r0 = host.submit(Submit::new("s", "done before").with_run_id("r0")).await.expect("ok");
    host.wait(&RunId::new("r0")).await.expect("done");
    faults.fail_always(Fault::ReadOnly);
    let stuck = host.submit(Submit::new("s", "never durable")).await;
    assert!(matches!(stuck, Err(SubmitError::Stopped(_))), "{stuck:?}");
    assert_eq!(host.wait_seq(r0.seq).await.expect("recorded").outcome, Outcome::Completed);
    assert_eq!(host.wait(&RunId::new("r0")).await.expect("recorded").outcome, Outcome::Completed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flush_writes_held_streamed_text_at_once() {
    let dir = common::Scratch::new(common::Kind::Sqlite);
    let mut c = config(&dir);
    // A debounce window far longer than the test: only a flush can write the text.
    c.debounce = Duration::from_secs(60);
    let provider = ScriptedProvider::new(|_, _| {
        Answer(vec![
            Scripted::Event(StepEvent::TextDelta { text: "held ".into() }),
            Scripted::Event(StepEvent::TextDelta { text: "text".into() }),
            Scripted::Hang,
        ])
    });
    let host = open(&c, provider).await;
    host.submit(Submit::new("s", "go").with_run_id("r")).await.expect("ok");
    let text = |host: Host| async move {
        host.read(|r| r.messages(&SessionId::new("s")))
            .await
            .expect("read")
            .iter()
            .filter(|m| m.role == turnstile_host::store::StoredRole::Assistant)
            .map(|m| m.text.clone())
            .collect::<String>()
    };
    let mut seen = String::new();
    for _ in 0..1_000 {
        host.flush().await.expect("flush");
        seen = text(host.clone()).await;
        if seen == "held text" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    assert_eq!(seen, "held text", "flush wrote the held deltas");
    host.shutdown().await.expect("shutdown");
    assert_eq!(host.flush().await, Ok(()), "after a clean shutdown everything is durable");
}

/// I9 through the host: when a RunComplete is published, its text is durable in the store,
/// even with a debounce window far longer than the turn (the final flush carries it).
async fn a_run_complete_is_published_after_its_text_is_durable(kind: common::Kind) {
    let dir = common::Scratch::new(kind);
    let mut c = config(&dir);
    c.debounce = Duration::from_secs(30);
    let provider = common::two_deltas_then_finish();
    let host = open(&c, provider).await;
    host.submit(Submit::new("s", "go").with_run_id("r")).await.expect("ok");
    let done = host.wait(&RunId::new("r")).await.expect("done");
    let stored = common::assistant_text(&host, "s").await;
    assert_eq!(Some(stored.as_str()), done.text.as_deref());
    host.shutdown().await.expect("shutdown");
}

/// Found by the simulator (seed 1): a manual summarize of a session the store does not hold
/// wrote a summary message for no session, the write failed (a foreign key), and the store
/// failure stopped the whole host. It is now refused before it reaches the engine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn summarizing_an_unknown_session_is_refused_and_harms_nothing() {
    let dir = common::Scratch::new(common::Kind::Sqlite);
    let host = open(&config(&dir), echo()).await;
    let got = host.summarize(&SessionId::new("nobody")).await;
    let nobody = SessionId::new("nobody");
    assert_eq!(got, Err(SubmitError::Invalid(InvalidRequest::SessionNotFound(nobody))));
    assert_eq!(got.expect_err("refused").to_string(), "session not found: nobody");
    host.submit(Submit::new("s", "still fine").with_run_id("r")).await.expect("ok");
    assert_eq!(host.wait(&RunId::new("r")).await.expect("done").outcome, Outcome::Completed);
    assert_eq!(host.stopped(), None);
    host.summarize(&SessionId::new("s")).await.expect("a known idle session summarizes");
    host.shutdown().await.expect("shutdown");
}

/// SPEC 4.9: a cancel does not cut off a tool that must finish; its result arrives within the
/// grace and is written as reported (it really ran), not replaced by the cancel text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_that_must_finish_is_not_cut_off_and_its_result_is_written() {
    let dir = common::Scratch::new(common::Kind::Sqlite);
    let results = common::cancel_during_a_tool_left_to_finish(config(&dir)).await;
    assert_eq!(results, [("really ran".to_owned(), false)]);
}

/// SPEC 4.9: a cancel during a call the host drops (the default) does not wait for it: the
/// turn is cleaned up in the cancel's own transition, with no grace timer, and the next run
/// starts. The flight trace shows what the core decided; the RunComplete follows at once
/// rather than after the 5 s grace.
async fn a_cancel_during_a_droppable_tool_ends_the_turn_at_once(kind: common::Kind) {
    let dir = common::Scratch::new(kind);
    let mut c = config(&dir);
    let flight = turnstile_host::FlightBuffer::default();
    c.trace = Some(Flight::Memory(flight.clone()));
    c.trace_outputs = true;
    let provider = ScriptedProvider::new(|req, _| match req.messages.last() {
        Some(turnstile_host::provider::RequestMessage::ToolResults(_)) => {
            Answer::streamed("done", 1, 0, usage())
        }
        _ if req.last_user_text() == Some("next") => Answer::streamed("next done", 1, 0, usage()),
        _ => Answer::tool_call("c1", "bash", "{}"),
    });
    let tools = ToolSet::new().with(EchoTool { name: "bash".into(), delay_ms: 600_000 });
    let host = Host::open(c, Arc::new(provider), tools).await.expect("open");
    host.submit(Submit::new("s", "go").with_run_id("r1")).await.expect("ok");
    host.submit(Submit::new("s", "next").with_run_id("r2")).await.expect("ok");
    while !flight.text().contains(r#""type":"run_tool""#) {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    host.cancel_run(&RunId::new("r1")).await.expect("cancel");
    assert_eq!(host.wait(&RunId::new("r1")).await.expect("done").outcome, Outcome::Cancelled);
    assert_eq!(host.wait(&RunId::new("r2")).await.expect("done").outcome, Outcome::Completed);
    let msgs = host.read(|r| r.messages(&SessionId::new("s"))).await.expect("read");
    let results: Vec<_> = msgs.iter().flat_map(|m| m.results.iter()).map(|r| r.synthetic).collect();
    assert_eq!(results, [true], "the dropped call gets the synthetic result");
    legal(&host, "s").await;
    host.shutdown().await.expect("shutdown");

    let trace = turnstile_core::Trace::parse(&flight.text()).expect("parses");
    let (_, cancel) = trace
        .lines
        .iter()
        .find(|(_, l)| matches!(l.input, turnstile_core::Input::CancelRun { .. }))
        .expect("the cancel_run was recorded");
    let outputs = cancel.expect.as_ref().expect("outputs recorded");
    let kinds: Vec<String> = outputs
        .iter()
        .map(|o| {
            let k = &o["kind"];
            match (k["type"].as_str(), k["outcome"].as_str(), k["purpose"]["timer"].as_str()) {
                (Some(t), Some(outcome), _) => format!("{t} {outcome}"),
                (Some(t), _, Some(purpose)) => format!("{t} {purpose}"),
                (t, _, _) => t.unwrap_or("?").to_owned(),
            }
        })
        .collect();
    assert!(kinds.iter().any(|k| k == "abort_tool"), "the call was aborted: {kinds:?}");
    // The next turn's step arms its stream watchdog (SPEC 4.5); no grace timer is armed.
    assert!(
        !kinds.iter().any(|k| k == "set_timer cancel_grace"),
        "no grace timer: nothing can still report: {kinds:?}"
    );
    assert!(
        kinds.iter().any(|k| k == "finished cancelled"),
        "the RunComplete is decided in the cancel's own transition: {kinds:?}"
    );
    turnstile_core::replay(&trace).expect("the flight trace replays");
}

/// SPEC 4.11 through the host: the `agent` tool is offered to the parent (not to the child),
/// the child runs in its own session with the parent's id and "New Agent Session", its text is
/// the parent's tool result, its cost is added to the parent, and both ledger rows finish.
async fn a_sub_agent_runs_in_a_child_session_and_its_text_is_the_parent_s_result(
    kind: common::Kind,
) {
    let dir = common::Scratch::new(kind);
    type Offered = Vec<(String, Vec<String>)>;
    let offered: Arc<std::sync::Mutex<Offered>> = Arc::default();
    let seen = offered.clone();
    let provider = ScriptedProvider::new(move |req, _| {
        let tools = req.tools.iter().map(|t| t.name.clone()).collect();
        seen.lock().expect("lock").push((req.session.to_string(), tools));
        if req.session.is_child() {
            return Answer::streamed("found two files", 2, 5, usage());
        }
        match req.messages.last() {
            Some(turnstile_host::provider::RequestMessage::ToolResults(_)) => {
                Answer::streamed("the agent says so", 2, 5, usage())
            }
            _ => Answer::tool_call("c1", "agent", r#"{"prompt":"look around"}"#),
        }
    });
    let tools = ToolSet::new().with(EchoTool { name: "view".into(), delay_ms: 5 }).with_agent();
    let host = Host::open(config(&dir), Arc::new(provider), tools).await.expect("open");
    host.submit(Submit::new("p", "delegate").with_run_id("r1")).await.expect("accepted");
    let done = host.wait(&RunId::new("r1")).await.expect("completion");
    assert_eq!(done.outcome, Outcome::Completed);
    assert_eq!(done.text.as_deref(), Some("the agent says so"));

    let sessions = host.read(|r| r.sessions()).await.expect("read");
    let child = sessions.iter().find(|s| s.id.is_child()).expect("a child session");
    assert_eq!(child.parent, Some(SessionId::new("p")));
    assert_eq!(child.title.as_deref(), Some(turnstile_core::NEW_AGENT_TITLE));
    assert!(child.id.as_str().ends_with("$$c1"), "{}", child.id);
    let parent = sessions.iter().find(|s| s.id.as_str() == "p").expect("the parent");
    // The first parent step (the call) reports no usage: its own last step plus the child.
    assert_eq!(parent.cost_micros, 2 * 7, "the parent's answer and the child's");

    let p = SessionId::new("p");
    let messages = host.read(move |r| r.messages(&p)).await.expect("read");
    let result = messages.iter().flat_map(|m| &m.results).next().expect("the agent's result");
    assert_eq!((result.content.as_str(), result.is_error), ("found two files", false));
    let runs = host.read(|r| r.runs()).await.expect("read");
    let child_run = runs.iter().find(|r| r.session == child.id).expect("the child's row");
    assert_eq!(child_run.state, RunState::Finished);
    let record = &child_run.completion.as_ref().expect("recorded").1;
    assert_eq!(
        (record.outcome, record.text.as_deref()),
        (Outcome::Completed, Some("found two files"))
    );
    legal(&host, "p").await;
    legal(&host, child.id.as_str()).await;

    let offered = offered.lock().expect("lock").clone();
    for (session, tools) in &offered {
        let agent = tools.iter().any(|t| t == "agent");
        assert_eq!(agent, session == "p", "{session} was offered {tools:?}");
        assert!(tools.iter().any(|t| t == "view"), "{session} keeps its other tools");
    }
    host.shutdown().await.expect("shutdown");
}

/// A submission that brings its own sequence while the engine assigns them is host misuse:
/// refused as invalid, naming the core's reason, and the host goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_submission_with_its_own_sequence_is_invalid_and_the_host_goes_on() {
    let dir = common::Scratch::new(common::Kind::Sqlite);
    let host = open(&config(&dir), echo()).await;
    let mut submit = Submit::new("s", "numbered").with_run_id("r0");
    submit.seq = Some(Seq(7));
    let got = host.submit(submit).await;
    let Err(SubmitError::Invalid(InvalidRequest::Refused(HostError::WrongAcceptor { .. }))) = &got
    else {
        panic!("a sequence the engine did not assign: {got:?}");
    };
    let text = got.expect_err("refused").to_string();
    assert!(text.starts_with("engine refused an input: wrong acceptor: "), "{text}");
    assert_eq!(host.stopped(), None);
    host.submit(Submit::new("s", "plain").with_run_id("r1")).await.expect("accepted");
    assert_eq!(host.wait(&RunId::new("r1")).await.expect("done").outcome, Outcome::Completed);
    assert_eq!(host.wait(&RunId::new("r0")).await, Err(WaitError::NotFound(RunId::new("r0"))));
    host.shutdown().await.expect("shutdown");
}

/// The source chain of an error, outermost first, as text.
fn chain(e: &dyn std::error::Error) -> Vec<String> {
    let mut out = vec![e.to_string()];
    let mut next = e.source();
    while let Some(e) = next {
        out.push(e.to_string());
        next = e.source();
    }
    out
}

/// A store in a directory that does not exist: the error names the lock file (the first
/// thing opened) and what failed, and carries the OS error as its source.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_in_a_missing_directory_names_the_lock_file_and_the_action() {
    let dir = common::Scratch::new(common::Kind::Sqlite);
    let path = dir.path().join("missing").join("store.db");
    let lock = dir.path().join("missing").join("store.db.lock");
    let got = Host::open(HostConfig::new(&path), Arc::new(echo()), ToolSet::new()).await;
    let Err(OpenError::Store(StoreError::Io { path: at, action, source })) = &got else {
        panic!("an IO error: {:?}", got.err());
    };
    assert_eq!((at, *action), (&lock, "open the lock file"));
    assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
    let os = source.to_string();
    let e = got.expect_err("refused");
    let text = e.to_string();
    assert!(text.starts_with(&format!("cannot open the lock file {}: ", lock.display())), "{text}");
    let causes = chain(&e);
    assert_eq!(causes.len(), 3, "open error, store error, OS error: {causes:?}");
    assert_eq!(causes[2], os);
    // The store on its own says the same.
    let direct = Store::open(&StoreConfig::new(&path)).expect_err("no directory");
    assert_eq!(direct.to_string(), text);
}

/// A store below a regular file cannot be created (also for root, who may write anywhere): the
/// error names the lock file.
#[test]
fn a_store_below_a_file_names_the_lock_file() {
    let dir = common::Scratch::new(common::Kind::Sqlite);
    let file = dir.path().join("plain.txt");
    std::fs::write(&file, "not a directory").expect("write");
    let path = file.join("store.db");
    let err = Store::open(&StoreConfig::new(&path)).expect_err("not a directory");
    let lock = file.join("store.db.lock");
    assert!(
        matches!(&err, StoreError::Io { path: p, action: "open the lock file", .. } if *p == lock)
    );
    assert!(
        err.to_string().starts_with(&format!("cannot open the lock file {}: ", lock.display()))
    );
}

/// SQLite failing to open the database names the store's path: a directory where the database
/// file should be (the lock file beside it is fine), and a reader on a file that is missing.
#[test]
fn sqlite_open_failures_name_the_store() {
    let dir = common::Scratch::new(common::Kind::Sqlite);
    let path = dir.path().join("a-directory");
    std::fs::create_dir(&path).expect("mkdir");
    let err = Store::open(&StoreConfig::new(&path)).expect_err("a directory is no database");
    assert!(matches!(&err, StoreError::Open { path: p, .. } if *p == path), "{err:?}");
    let prefix = format!("cannot open the store {}: ", path.display());
    assert!(err.to_string().starts_with(&prefix), "{err}");
    assert!(std::error::Error::source(&err).is_some(), "SQLite's error is the source");

    let missing = dir.path().join("missing.db");
    let err = Reader::open(&missing).expect_err("no such file");
    assert!(matches!(&err, StoreError::Open { path: p, .. } if *p == missing), "{err:?}");
    let text = err.to_string();
    assert!(text.starts_with(&format!("cannot open the store {}: ", missing.display())), "{text}");

    // A file that is not a database: found when the first statement reads it.
    let junk = dir.path().join("junk.db");
    std::fs::write(&junk, vec![b'x'; 4096]).expect("write");
    let err = Store::open(&StoreConfig::new(&junk)).expect_err("not a database");
    assert!(matches!(&err, StoreError::Open { path: p, .. } if *p == junk), "{err:?}");
    assert!(err.to_string().contains("file is not a database"), "{err}");
}

/// The flight recorder's file in a directory that does not exist: the error names the trace
/// file and what failed, and nothing was started (the store's lock is free again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flight_trace_in_a_missing_directory_names_the_trace_file() {
    let dir = common::Scratch::new(common::Kind::Sqlite);
    let mut c = config(&dir);
    let trace = dir.path().join("missing").join("flight.jsonl");
    c.trace = Some(Flight::File(trace.clone()));
    let got = Host::open(c.clone(), Arc::new(echo()), ToolSet::new()).await;
    let Err(OpenError::Trace { path, action, source }) = &got else {
        panic!("a trace error: {:?}", got.err());
    };
    assert_eq!((path, *action), (&trace, "create the trace file"));
    assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
    let e = got.expect_err("refused");
    let text = e.to_string();
    assert!(text.starts_with(&format!("cannot create the trace file {}: ", trace.display())));
    assert_eq!(chain(&e).len(), 2, "the OS error is the source");
    c.trace = None;
    let host = open(&c, echo()).await;
    host.shutdown().await.expect("shutdown");
}

/// The texts of the stop reasons SPEC and the simulator rely on, and their sources.
#[test]
fn stop_reasons_keep_their_texts() {
    let disk_full = Stopped::Storage(Arc::new(Fault::DiskFull.error()));
    assert_eq!(disk_full.to_string(), "engine stopped: storage failure: database or disk is full");
    assert!(std::error::Error::source(&disk_full).is_some());
    assert_eq!(
        Stopped::HandlesDropped.to_string(),
        "engine stopped: every handle was dropped without shutdown"
    );
    assert_eq!(Stopped::TaskEnded.to_string(), "engine stopped: the engine task ended");
    assert_eq!(Stopped::WriterEnded.to_string(), "engine stopped: the store writer stopped");
    let engine = Stopped::Engine(HostError::Internal("a bug"));
    assert_eq!(engine.to_string(), "engine stopped: engine failed: internal error: a bug");
    assert_eq!(chain(&WaitError::Stopped(engine.clone())).len(), 3);
    assert_eq!(StoreError::InUse.to_string(), "store is in use by another turnstile process");
}

/// A store in a directory this process may not write to names the lock file and the action.
/// Root may write anywhere: then there is nothing to see, and the test says so.
#[cfg(unix)]
#[test]
fn a_store_in_a_read_only_directory_names_the_lock_file() {
    use std::os::unix::fs::PermissionsExt;
    let dir = common::Scratch::new(common::Kind::Sqlite);
    let locked = dir.path().join("read-only");
    std::fs::create_dir(&locked).expect("mkdir");
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o555)).expect("chmod");
    let writable = std::fs::write(locked.join("probe"), "").is_ok();
    let got = Store::open(&StoreConfig::new(locked.join("store.db")));
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    if writable {
        eprintln!("skipped: this process may write to a read-only directory (root)");
        return;
    }
    let err = got.expect_err("read-only");
    let lock = locked.join("store.db.lock");
    assert!(
        matches!(&err, StoreError::Io { path: p, action: "open the lock file", source }
        if *p == lock && source.kind() == std::io::ErrorKind::PermissionDenied),
        "{err:?}"
    );
    assert!(
        err.to_string().starts_with(&format!("cannot open the lock file {}: ", lock.display()))
    );
}

/// A provider that counts the streams it opened and the ones the host closed (dropped).
struct Counted {
    inner: ScriptedProvider,
    closed: Arc<std::sync::atomic::AtomicU64>,
}

/// Counts a stream as closed when the host drops it.
struct Closed(Arc<std::sync::atomic::AtomicU64>);

impl Drop for Closed {
    fn drop(&mut self) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

impl turnstile_host::Provider for Counted {
    fn prepare(
        &self,
        session: &SessionId,
    ) -> turnstile_host::BoxFuture<Result<turnstile_host::ModelInfo, turnstile_host::BoxError>>
    {
        self.inner.prepare(session)
    }

    fn stream(
        &self,
        request: turnstile_host::ModelRequest,
        sink: turnstile_host::EventSink,
    ) -> turnstile_host::BoxFuture<()> {
        let guard = Closed(self.closed.clone());
        let stream = self.inner.stream(request, sink);
        Box::pin(async move {
            let _guard = guard;
            stream.await;
        })
    }

    fn refresh_credentials(&self) -> turnstile_host::BoxFuture<bool> {
        self.inner.refresh_credentials()
    }

    fn title(
        &self,
        prompt: String,
    ) -> turnstile_host::BoxFuture<Result<(String, Option<Usage>), turnstile_host::BoxError>> {
        self.inner.title(prompt)
    }
}

/// SPEC 4.5 through the host: a stream that sends one delta and then nothing (the connection
/// open) is failed by the core's watchdog after the idle timeout, and the host closes it on the
/// abort; each retry stalls too, so after the last attempt the run ends `failed`, kind
/// `transport`. Virtual time (paused, advanced by the runtime): 1 s of idle timeout and the
/// backoffs of 5, 10 and 20 s.
#[tokio::test(start_paused = true)]
async fn a_stalled_stream_is_closed_by_the_watchdog_and_fails_transport_after_the_retries() {
    let dir = common::Scratch::new(common::Kind::Sqlite);
    let mut c = config(&dir);
    c.engine.stream_idle_timeout_ms = 1_000;
    let scripted = ScriptedProvider::new(|_, _| {
        Answer(vec![Scripted::Event(StepEvent::TextDelta { text: "one ".into() }), Scripted::Hang])
    });
    let closed = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let provider = Counted { inner: scripted.clone(), closed: closed.clone() };
    let host = Host::open(c, Arc::new(provider), ToolSet::new()).await.expect("open");
    let started = tokio::time::Instant::now();
    host.submit(Submit::new("s", "go").with_run_id("r")).await.expect("ok");
    let done = host.wait(&RunId::new("r")).await.expect("done");
    assert_eq!(done.outcome, Outcome::Failed, "{done:?}");
    let e = done.error.as_ref().expect("an error");
    assert_eq!(
        (e.kind, e.title.as_str(), e.message.as_str()),
        (ErrorKind::Transport, "Stream Transport Error", "stream idle for 1 s")
    );
    assert_eq!(scripted.requests(), 4, "every attempt of the step");
    assert!(started.elapsed() >= Duration::from_secs(35), "after the backoffs");
    host.flush().await.expect("flush");
    assert_eq!(
        closed.load(std::sync::atomic::Ordering::Relaxed),
        4,
        "the host closed every stalled stream"
    );
    legal(&host, "s").await;
    host.shutdown().await.expect("shutdown");
}

/// The live `Retrying` update until the run's end: (attempt, delay_ms, reason) of each.
async fn retries_until_done(updates: &mut turnstile_host::Updates) -> Vec<(u32, u64, String)> {
    let mut seen = Vec::new();
    while let Some(event) = updates.recv().await {
        match event {
            turnstile_host::Event::Update(turnstile_host::Update::Retrying {
                attempt,
                delay_ms,
                reason,
                ..
            }) => seen.push((attempt, delay_ms, reason)),
            turnstile_host::Event::Update(turnstile_host::Update::TurnFinished { .. }) => break,
            _ => {}
        }
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_is_announced_live_with_its_attempt_delay_and_reason() {
    let dir = common::Scratch::new(common::Kind::Sqlite);
    // The first attempt fails with a retry-after; the second hangs until the stream watchdog
    // (1 s here) fails it; the third answers.
    let provider = ScriptedProvider::new(|_, n| match n {
        0 => Answer(vec![Scripted::Event(StepEvent::Failed {
            error: turnstile_core::ProviderError {
                status: Some(503),
                retry_after_ms: Some(30),
                message: "overloaded".into(),
                ..Default::default()
            },
        })]),
        1 => Answer::hang(),
        _ => Answer::streamed("fine", 2, 1, usage()),
    });
    let mut c = config(&dir);
    c.engine.stream_idle_timeout_ms = 1_000;
    let host = open(&c, provider).await;
    let mut updates = host.subscribe();
    host.submit(Submit::new("s", "go").with_run_id("r")).await.expect("ok");
    let retries = retries_until_done(&mut updates).await;
    assert_eq!(retries.len(), 2, "{retries:?}");
    assert_eq!(retries[0], (2, 30, "overloaded".to_owned()));
    assert_eq!((retries[1].0, retries[1].2.as_str()), (3, "stream idle for 1 s"));
    assert_eq!(retries[1].1, 10_000, "the second retry waits the second backoff (SPEC 8)");
    let done = host.wait(&RunId::new("r")).await.expect("done");
    assert_eq!((done.outcome, done.text.as_deref()), (Outcome::Completed, Some("fine")));
    host.shutdown().await.expect("shutdown");
}

/// Polls `fut` at most `polls` times (letting other tasks run between polls), then drops it;
/// true when it was dropped before it finished.
async fn drop_after<F: std::future::Future>(fut: F, polls: usize) -> bool {
    let mut fut = std::pin::pin!(fut);
    for _ in 0..polls {
        let poll = std::future::poll_fn(|cx| std::task::Poll::Ready(fut.as_mut().poll(cx))).await;
        if poll.is_ready() {
            return false;
        }
        tokio::task::yield_now().await;
    }
    true
}

/// Ends the connections of this test's database (the caller's own aside) that have this
/// `application_name` (any, with `None`), as the server does when it restarts or an
/// administrator ends them; first checks that the writer names its role. Returns how many.
async fn terminate(url: String, role: Option<&'static str>) -> i64 {
    tokio::task::spawn_blocking(move || {
        let mut admin = ::postgres::Client::connect(&url, ::postgres::NoTls).expect("connect");
        let roles: Vec<String> = admin
            .query(
                "SELECT application_name FROM pg_stat_activity \
                 WHERE datname = current_database() AND pid <> pg_backend_pid()",
                &[],
            )
            .expect("roles")
            .iter()
            .map(|r| r.get(0))
            .collect();
        assert!(roles.iter().any(|r| r == "turnstile writer"), "{roles:?}");
        admin
            .query_one(
                "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                 WHERE datname = current_database() AND pid <> pg_backend_pid() \
                 AND ($1::text IS NULL OR application_name = $1)) AS ended",
                &[&role],
            )
            .expect("terminate")
            .get(0)
    })
    .await
    .expect("join")
}

/// The connections to this test's database that are inside a transaction they left idle.
fn idle_in_transaction(url: &str) -> i64 {
    let mut client = ::postgres::Client::connect(url, ::postgres::NoTls).expect("connect");
    client
        .query_one(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE datname = current_database() AND pid <> pg_backend_pid() \
             AND state LIKE 'idle in transaction%'",
            &[],
        )
        .expect("pg_stat_activity")
        .get(0)
}

/// SPEC 11 "Cancellation-safe IO": a dropped future never leaves a connection inside a
/// transaction. Thousands of submissions, snapshot reads and cancels are dropped after every
/// number of polls their futures take (every await point of each), while runs stream; then
/// `pg_stat_activity` shows no connection of the database idle in a transaction, every
/// accepted run has exactly one RunComplete, and the history is legal. (The check is first
/// shown to find a connection left in a transaction on purpose.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: eval \"$(scripts/postgres.sh env)\", then --ignored"]
async fn postgres_dropped_futures_leave_no_connection_inside_a_transaction() {
    let dir = common::Scratch::new(common::Kind::Postgres);
    let url = dir.url().expect("a database").to_owned();
    // The check can fail: a connection left in a transaction is found.
    let left = url.clone();
    let found = tokio::task::spawn_blocking(move || {
        let mut open = ::postgres::Client::connect(&left, ::postgres::NoTls).expect("connect");
        open.batch_execute("BEGIN; SELECT 1").expect("begin");
        let found = idle_in_transaction(&left);
        drop(open);
        found
    })
    .await
    .expect("the control");
    assert_eq!(found, 1, "the check sees a connection idle in a transaction");

    let host = open(&config(&dir), echo()).await;
    let mut dropped = 0;
    for i in 0..1200_usize {
        let polls = i % 16;
        let session = SessionId::new(format!("s{}", i % 5));
        let submit = Submit::new(session.as_str(), "hi").with_run_id(format!("r{i}"));
        dropped += usize::from(drop_after(host.submit(submit), polls).await);
        let read = host.read(|r| r.changes(turnstile_host::store::Position::default(), 16));
        dropped += usize::from(drop_after(read, polls).await);
        if i % 3 == 0 {
            dropped += usize::from(drop_after(host.cancel(&session), polls).await);
        }
    }
    assert!(dropped >= 2000, "{dropped} futures dropped before they finished");
    // A dropped submission may still be accepted: the engine takes its inbox in order, so
    // once a last one, awaited, is accepted, every earlier one was decided.
    let last = Submit::new("s0", "the last").with_run_id("last");
    host.submit(last).await.expect("accepted");
    // Every accepted run ends, once (read again until no more were accepted meanwhile).
    let mut runs = host.read(|r| r.runs()).await.expect("runs");
    loop {
        for run in &runs {
            let id = run.run_id.clone().expect("a RunId");
            host.wait(&id).await.expect("finished");
        }
        host.flush().await.expect("flush");
        let again = host.read(|r| r.runs()).await.expect("runs");
        if again.len() == runs.len() {
            break;
        }
        runs = again;
    }
    let completions =
        host.read(|r| r.completions_after(Cursor(0), usize::MAX)).await.expect("completions");
    let mut ids: Vec<String> =
        completions.iter().filter_map(|(_, c)| c.run_id.as_ref().map(|r| r.to_string())).collect();
    let all = ids.len();
    ids.sort();
    ids.dedup();
    assert_eq!((ids.len(), all), (runs.len(), runs.len()), "one RunComplete per accepted run");
    for s in 0..5 {
        legal(&host, &format!("s{s}")).await;
    }
    let check = url.clone();
    let idle =
        tokio::task::spawn_blocking(move || idle_in_transaction(&check)).await.expect("check");
    assert_eq!(idle, 0, "a connection was left inside a transaction");
    host.shutdown().await.expect("shutdown");
}

/// SPEC 11 and 4.12 on PostgreSQL: a connection lost mid-turn (the server ends every backend
/// of the database, as a restart of the database does) is a store failure: the writes are
/// retried for the bounded time, then the engine stops and the waiter hears why, with
/// PostgreSQL's own message. Nothing was published that was not recorded, and the next start
/// (new connections) recovers the run `interrupted`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: eval \"$(scripts/postgres.sh env)\", then --ignored"]
async fn postgres_a_lost_connection_stops_the_engine_and_the_next_start_recovers() {
    let dir = common::Scratch::new(common::Kind::Postgres);
    let url = dir.url().expect("a database").to_owned();
    let mut c = config(&dir);
    c.store_retry = Duration::from_millis(300);
    let host = open(&c, hang()).await;
    host.submit(Submit::new("s", "stuck").with_run_id("r1")).await.expect("accepted");
    common::until_active(&host, "r1").await;
    let waiter = {
        let host = host.clone();
        tokio::spawn(async move { host.wait(&RunId::new("r1")).await })
    };
    let ended = terminate(url, None).await;
    assert!(ended >= 2, "the writer's and the readers' connections ended: {ended}");
    // The cancel's clean-up cannot be written: retried for 300 ms, then the engine stops.
    host.cancel(&SessionId::new("s")).await.expect("cancel");
    let got = waiter.await.expect("join");
    let Err(WaitError::Stopped(why)) = got else { panic!("the waiter heard {got:?}") };
    let Stopped::Storage(cause) = &why else { panic!("a storage failure: {why:?}") };
    assert!(matches!(**cause, StoreError::Postgres { .. }), "{cause:?}");
    assert!(why.to_string().starts_with("engine stopped: storage failure: PostgreSQL "), "{why}");
    let _ = host.shutdown().await;
    drop(host);
    let again = open(&c, echo()).await;
    let rec = again.wait(&RunId::new("r1")).await.expect("recovered");
    assert_eq!(rec.outcome, Outcome::Interrupted);
    assert_eq!(again.recovered().len(), 1);
    legal(&again, "s").await;
    again.shutdown().await.expect("shutdown");
}

/// A reader whose connection was lost (the server ended it: an idle timeout, a proxy, an
/// administrator) connects again at its next read; the host goes on, and only the writer's
/// loss stops it (the test above). `pg_stat_activity` names each connection's role.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: eval \"$(scripts/postgres.sh env)\", then --ignored"]
async fn postgres_a_reader_whose_connection_was_lost_connects_again() {
    let dir = common::Scratch::new(common::Kind::Postgres);
    let url = dir.url().expect("a database").to_owned();
    let host = open(&config(&dir), echo()).await;
    host.submit(Submit::new("s", "one").with_run_id("r1")).await.expect("accepted");
    host.wait(&RunId::new("r1")).await.expect("done");
    let ended = terminate(url, Some("turnstile reader")).await;
    assert!(ended >= 2, "every reader's connection ended: {ended}");
    // Reads (the ledger, a run's wait, the history) and new runs go on.
    let runs = host.read(|r| r.runs()).await.expect("a reader connected again");
    assert_eq!(runs.len(), 1);
    host.submit(Submit::new("s", "two").with_run_id("r2")).await.expect("accepted");
    let rec = host.wait(&RunId::new("r2")).await.expect("done");
    assert_eq!(rec.outcome, Outcome::Completed);
    legal(&host, "s").await;
    assert_eq!(host.stopped(), None);
    host.shutdown().await.expect("shutdown");
}
