//! One test per rule of what a turn does and writes (SPEC 4.4 to 4.9), driven through the
//! scripted host, which runs both invariant checkers after every input.

use turnstile_core::{
    Acceptor, CallId, Config, ErrorClass, ErrorKind, FinishReason, HostError, Input, MessageFinish,
    Millis, Mode, Outcome, OutputKind, ProviderError, Seq, SessionId, Start, StepEvent, StopReason,
    StopTurn, StoreOp, Submit, ToolOutput, Usage,
};
use turnstile_tests::harness::{Host, short};

/// The SPEC defaults with the stream watchdog off (SPEC 4.5): these tests pin the outputs of
/// other rules, and every attempt's `SetTimer` and `CancelTimer` would only repeat what the
/// watchdog's own tests pin. The property tests and the scenario traces run with it on.
fn no_watchdog() -> Config {
    Config { stream_idle_timeout_ms: 0, ..Config::default() }
}

fn kinds(outs: &[turnstile_core::Output]) -> Vec<String> {
    outs.iter().map(|o| short(&o.kind)).collect()
}

fn active(h: &mut Host, session: &str) -> Seq {
    let seq = h.submit(Submit::new(session, "go").with_mode(Mode::OwnTurn));
    h.prepare(seq);
    seq
}

fn ops(outs: &[turnstile_core::Output]) -> Vec<StoreOp> {
    outs.iter()
        .filter_map(|o| match &o.kind {
            OutputKind::Store(op) => Some(op.clone()),
            _ => None,
        })
        .collect()
}

/// True when the outputs write a tool result with exactly this content.
fn has_result(outs: &[turnstile_core::Output], text: &str) -> bool {
    ops(outs).iter().any(|op| matches!(op, StoreOp::ToolResult { content, .. } if content == text))
}

fn error(status: Option<u16>, class: ErrorClass) -> ProviderError {
    ProviderError { class, status, message: "failed".into(), ..ProviderError::default() }
}

fn fail(h: &mut Host, seq: Seq, e: ProviderError) -> Vec<turnstile_core::Output> {
    h.stream(seq, StepEvent::Failed { error: e })
}

#[test]
fn one_leading_newline_is_dropped_only_while_the_message_is_empty() {
    let mut h = Host::new(no_watchdog());
    let a = active(&mut h, "s");
    assert!(h.text(a, "\n").is_empty(), "a lone newline at the start writes nothing");
    let out = h.text(a, "\nHello");
    assert!(matches!(&ops(&out)[0], StoreOp::AppendText { text, .. } if text == "Hello"));
    let out = h.text(a, "\nworld");
    assert!(
        matches!(&ops(&out)[0], StoreOp::AppendText { text, .. } if text == "\nworld"),
        "kept once text exists"
    );
    let b = active(&mut h, "t");
    h.stream(b, StepEvent::ReasoningStart);
    h.stream(b, StepEvent::ReasoningEnd { signature: Some("sig".into()) });
    let out = h.text(b, "\nafter reasoning");
    assert!(
        matches!(&ops(&out)[0], StoreOp::AppendText { text, .. } if text == "\nafter reasoning")
    );
}

#[test]
fn reasoning_keeps_its_signature_and_clean_up_closes_an_open_section() {
    let mut h = Host::new(no_watchdog());
    let a = active(&mut h, "s");
    h.stream(a, StepEvent::ReasoningStart);
    assert!(h.stream(a, StepEvent::ReasoningStart).is_empty(), "a second start is ignored");
    h.stream(a, StepEvent::ReasoningDelta { text: "thinking".into() });
    let out = h.stream(a, StepEvent::ReasoningEnd { signature: Some("sig-1".into()) });
    assert!(
        matches!(&ops(&out)[0], StoreOp::ReasoningEnded { signature: Some(s), .. } if s == "sig-1")
    );
    let b = active(&mut h, "t");
    h.stream(b, StepEvent::ReasoningStart);
    let out = h.send(Input::Cancel { session: SessionId::new("t"), up_to: None });
    let k = kinds(&out);
    assert_eq!(k[1..3], ["store reasoning_ended #2", "store message_finished #2"], "{k:?}");
}

#[test]
fn unfinished_invalid_unknown_and_repeated_calls_never_run_and_get_results() {
    let mut h = Host::new(no_watchdog());
    let a = active(&mut h, "s");
    h.stream(a, StepEvent::ToolInputStart { id: CallId::new("cut"), name: "ls".into() });
    h.stream(a, StepEvent::ToolInputStart { id: CallId::new("ok"), name: "ls".into() });
    let done = StepEvent::ToolCall {
        id: CallId::new("ok"),
        name: "ls".into(),
        input: "{\"path\":\".\"}".into(),
    };
    let out = h.stream(a, done);
    assert!(
        matches!(&ops(&out)[0], StoreOp::ToolCall { call, .. } if call.as_str() == "ok"),
        "replaces the unfinished one"
    );
    let bad = StepEvent::ToolCall {
        id: CallId::new("bad"),
        name: "ls".into(),
        input: "{not json".into(),
    };
    let out = h.stream(a, bad);
    assert!(
        matches!(&ops(&out)[0], StoreOp::ToolCall { input, .. } if input == "{}"),
        "stored with {{}}"
    );
    h.tool_call(a, "nope", "teleport");
    assert!(h.tool_call(a, "ok", "ls").is_empty(), "a repeated id is ignored");
    let out = h.finish(a, FinishReason::Length);
    let results: Vec<(String, String)> = ops(&out)
        .into_iter()
        .filter_map(|op| match op {
            StoreOp::ToolResult { call, content, synthetic: true, .. } => {
                Some((call.to_string(), content))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        results,
        [
            ("cut".to_owned(), turnstile_core::INVALID_JSON_RESULT.to_owned()),
            ("bad".to_owned(), turnstile_core::INVALID_JSON_RESULT.to_owned()),
            ("nope".to_owned(), "tool not found: teleport".to_owned()),
        ]
    );
    let k = kinds(&out);
    assert_eq!(
        k.iter().filter(|x| x.starts_with("run_tool")).count(),
        1,
        "only the valid known call runs: {k:?}"
    );
    assert!(
        matches!(&ops(&out)[0], StoreOp::ToolCall { call, input, .. } if call.as_str() == "cut" && input == "{}")
    );
    h.tool_result(a, "ok", ToolOutput::ok("a.rs"));
    assert_eq!(
        h.outcome(a),
        Some(Outcome::Completed),
        "finish length: the turn ends after its tools"
    );
    assert_eq!(h.finished[&a].stop_reason(), Some(StopReason::MaxTokens));
}

#[test]
fn usage_sets_the_gauges_and_adds_the_cost_and_estimates_cost_nothing() {
    let mut h = Host::new(no_watchdog());
    let a = active(&mut h, "s");
    let usage = Usage {
        input_tokens: 100,
        cache_read_tokens: 20,
        cache_creation_tokens: 3,
        output_tokens: 7,
        cost_micros: 42,
        estimated: false,
    };
    let out = h.stream(a, StepEvent::Finished { reason: FinishReason::Stop, usage: Some(usage) });
    assert!(ops(&out).contains(&StoreOp::SessionUsage {
        session: SessionId::new("s"),
        seq: Some(a),
        prompt_tokens: Some(123),
        completion_tokens: Some(7),
        cost_micros: 42,
        ancestor: None
    }));
    let b = active(&mut h, "t");
    let estimate = Usage::estimate(["user", "hello world", ""], ["hi"]);
    assert_eq!(
        (estimate.input_tokens, estimate.output_tokens),
        (1 + 3, 1),
        "ceil(bytes/4) per string, 0 for empty"
    );
    let out = h.stream(
        b,
        StepEvent::Finished {
            reason: FinishReason::Stop,
            usage: Some(Usage { cost_micros: 9, ..estimate }),
        },
    );
    assert!(ops(&out).iter().any(|op| matches!(
        op,
        StoreOp::SessionUsage { cost_micros: 0, prompt_tokens: Some(4), .. }
    )));
    let c = active(&mut h, "u");
    let out = h.stream(
        c,
        StepEvent::Finished { reason: FinishReason::Stop, usage: Some(Usage::default()) },
    );
    assert!(ops(&out).iter().any(|op| matches!(
        op,
        StoreOp::SessionUsage { prompt_tokens: None, completion_tokens: None, .. }
    )));
}

#[test]
fn a_runs_completion_carries_the_usage_of_its_steps_summed() {
    use turnstile_core::RunUsage;
    let mut h = Host::new(no_watchdog());
    h.setup = turnstile_core::Setup::with_tools(&["ls"]);
    let a = h.submit(Submit::new("s", "go").with_run_id("r"));
    h.prepare(a);
    let step = |input, output, cost, estimated| Usage {
        input_tokens: input,
        cache_read_tokens: 10,
        output_tokens: output,
        cost_micros: cost,
        estimated,
        ..Usage::default()
    };
    h.tool_call(a, "c1", "ls");
    let first = Some(step(100, 5, 40, false));
    h.stream(a, StepEvent::Finished { reason: FinishReason::ToolCalls, usage: first });
    h.tool_result(a, "c1", ToolOutput::ok("a.rs"));
    // An estimate counts its tokens and costs nothing, as for the session (SPEC 4.4).
    let second = Some(step(200, 7, 999, true));
    h.stream(a, StepEvent::Finished { reason: FinishReason::Stop, usage: second });
    let usage = h.finished[&a].usage();
    assert_eq!(
        usage,
        RunUsage { prompt_tokens: 110 + 210, completion_tokens: 12, cost_micros: 40 },
        "both steps, with their cache tokens"
    );
    // The ledger's record carries the same, and a run that reported nothing leaves it out.
    let record = ops(&h.log).into_iter().find_map(|op| match op {
        StoreOp::LedgerOutcome { completion } if completion.seq() == a => Some(completion),
        _ => None,
    });
    assert_eq!(record.map(|c| c.usage()), Some(usage));
    let b = active(&mut h, "t");
    h.finish(b, FinishReason::Stop);
    assert!(h.finished[&b].usage().is_zero());
    let json = serde_json::to_value(&h.finished[&b]).expect("json");
    assert!(json.get("usage").is_none(), "{json}");
}

#[test]
fn retry_delays_follow_the_backoff_and_the_headers() {
    let plain = error(Some(429), ErrorClass::Provider);
    assert_eq!(
        [0, 1, 2].map(|r| turnstile_core::retry_delay_ms(r, &plain)),
        [5_000, 10_000, 20_000]
    );
    let ms =
        ProviderError { retry_after_ms: Some(1_500), retry_after: Some(30_000), ..plain.clone() };
    assert_eq!(turnstile_core::retry_delay_ms(0, &ms), 1_500, "retry-after-ms wins");
    let long = ProviderError { retry_after: Some(90_000), ..plain.clone() };
    assert_eq!(
        turnstile_core::retry_delay_ms(0, &long),
        5_000,
        "60 s or more and above the backoff: ignored"
    );
    let short = ProviderError { retry_after: Some(59_999), ..plain.clone() };
    assert_eq!(turnstile_core::retry_delay_ms(2, &short), 59_999);
    for status in [408, 409, 429, 500, 503] {
        assert!(error(Some(status), ErrorClass::Provider).is_retryable(), "{status}");
    }
    for status in [400, 403, 404] {
        assert!(!error(Some(status), ErrorClass::Provider).is_retryable(), "{status}");
    }
    assert!(
        ProviderError { should_retry: Some(true), ..error(Some(400), ErrorClass::Provider) }
            .is_retryable()
    );
    assert!(
        error(None, ErrorClass::Transport).is_retryable()
            && error(None, ErrorClass::Incomplete).is_retryable()
    );
    assert!(
        !error(Some(403), ErrorClass::Provider).is_unauthorized()
            && error(Some(401), ErrorClass::Provider).is_unauthorized()
    );
}

#[test]
fn a_step_gets_four_attempts_each_after_a_reset_then_fails() {
    let mut h = Host::new(no_watchdog());
    let a = active(&mut h, "s");
    for (retry, delay) in [5_000u64, 10_000, 20_000].into_iter().enumerate() {
        h.text(a, "partial");
        let out = fail(&mut h, a, error(Some(503), ErrorClass::Provider));
        assert_eq!(
            kinds(&out),
            ["set_timer"],
            "retry {retry}: a backoff, no terminal event (G-02)"
        );
        let before = h.now;
        let out = h.fire_next_timer();
        assert_eq!(h.now.0 - before.0, delay);
        let k = kinds(&out);
        assert_eq!(
            k,
            [
                "store message_reset #1",
                "commit",
                &format!("start_step #1 turn 1 step 0 attempt {}", retry + 1)
            ]
        );
    }
    let out = fail(&mut h, a, error(Some(503), ErrorClass::Provider));
    assert!(kinds(&out).contains(&"finished #1 Failed".to_owned()));
    assert_eq!(h.finished[&a].text(), Some(""), "the reset attempt's text is gone");
}

#[test]
fn the_attempts_and_the_backoff_are_configurable() {
    let config = Config { attempts_max: 2, retry_backoff_ms: vec![1_000], ..no_watchdog() };
    let mut h = Host::new(config);
    let a = active(&mut h, "s");
    let out = fail(&mut h, a, error(Some(503), ErrorClass::Provider));
    assert_eq!(kinds(&out), ["set_timer"]);
    let before = h.now;
    h.fire_next_timer();
    assert_eq!(h.now.0 - before.0, 1_000, "the configured backoff");
    let out = fail(&mut h, a, error(Some(503), ErrorClass::Provider));
    assert!(kinds(&out).contains(&"finished #1 Failed".to_owned()), "two attempts, not four");
    let once = Config { attempts_max: 1, retry_backoff_ms: vec![], ..no_watchdog() };
    let mut h = Host::new(once);
    let a = active(&mut h, "s");
    let out = fail(&mut h, a, error(Some(503), ErrorClass::Provider));
    assert!(kinds(&out).contains(&"finished #1 Failed".to_owned()), "1: never retried");
    let more = Config { attempts_max: 6, ..no_watchdog() };
    assert_eq!(more.backoff_ms(4), 20_000, "beyond the list: its last delay");
    for (bad, field) in [
        (Config { attempts_max: 0, ..Config::default() }, "attempts_max"),
        (Config { retry_backoff_ms: vec![], ..Config::default() }, "retry_backoff_ms"),
    ] {
        assert!(matches!(
            turnstile_core::Engine::new(bad, turnstile_core::Start::default()),
            Err(turnstile_core::HostError::InvalidConfig { field: f, .. }) if f == field
        ));
    }
    // The defaults are SPEC's and are not written to a trace (old traces stay as they were).
    let text = serde_json::to_string(&Config::default()).unwrap();
    assert!(!text.contains("attempts_max") && !text.contains("retry_backoff_ms"), "{text}");
    let read: Config = serde_json::from_str("{}").unwrap();
    assert_eq!((read.attempts_max, read.backoff_ms(0)), (4, 5_000));
}

#[test]
fn a_cancel_during_backoff_ends_the_turn_at_once() {
    let mut h = Host::new(no_watchdog());
    let a = active(&mut h, "s");
    fail(&mut h, a, error(None, ErrorClass::Transport));
    let out = h.send(Input::Cancel { session: SessionId::new("s"), up_to: None });
    assert_eq!(kinds(&out)[0], "cancel_timer");
    assert_eq!(h.outcome(a), Some(Outcome::Cancelled));
}

#[test]
fn a_401_refreshes_credentials_once_then_retries_with_a_fresh_budget_and_a_reset() {
    let mut h = Host::new(no_watchdog());
    let a = active(&mut h, "s");
    fail(&mut h, a, error(Some(500), ErrorClass::Provider));
    h.fire_next_timer();
    fail(&mut h, a, error(Some(500), ErrorClass::Provider));
    h.fire_next_timer();
    h.text(a, "half");
    let out = fail(&mut h, a, error(Some(401), ErrorClass::Provider));
    assert_eq!(kinds(&out), ["refresh_credentials"]);
    let step = h.refreshes[0].clone();
    let out = h.send(Input::CredentialsRefreshed { attempt: step, ok: true });
    assert_eq!(
        kinds(&out),
        ["store message_reset #1", "commit", "start_step #1 turn 1 step 0 attempt 3"],
        "G-21"
    );
    for _ in 0..3 {
        fail(&mut h, a, error(Some(500), ErrorClass::Provider));
        h.fire_next_timer();
    }
    assert_eq!(h.outcome(a), None, "a fresh budget of four attempts after the refresh");
    let out = fail(&mut h, a, error(None, ErrorClass::Unauthorized));
    assert!(
        kinds(&out).contains(&"finished #1 Failed".to_owned()),
        "a second 401 in the step fails"
    );
    let e = h.finished[&a].error().cloned().expect("error");
    assert_eq!((e.kind, e.title.as_str()), (ErrorKind::Unauthorized, "Unauthorized"));
}

#[test]
fn a_failed_refresh_fails_and_a_cancel_during_the_wait_takes_effect_at_once() {
    let mut h = Host::new(no_watchdog());
    let a = active(&mut h, "s");
    fail(&mut h, a, error(Some(401), ErrorClass::Provider));
    let step = h.refreshes[0].clone();
    h.send(Input::CredentialsRefreshed { attempt: step, ok: false });
    let e = h.finished[&a].error().cloned().expect("error");
    assert_eq!(e.kind, ErrorKind::Unauthorized);
    assert_eq!(
        e.message, "The credential refresh failed. The provider said: failed",
        "the refused attempt's message is kept"
    );
    let b = active(&mut h, "s");
    fail(&mut h, b, error(Some(401), ErrorClass::Provider));
    let step = h.refreshes[0].clone();
    let out = h.send(Input::CancelRun { run_id: turnstile_core::RunId::new("none") });
    assert!(out.is_empty());
    let out = h.send(Input::Cancel { session: SessionId::new("s"), up_to: None });
    assert_eq!(kinds(&out)[0], "abort_refresh", "G-13: no waiting for the person");
    assert_eq!(h.outcome(b), Some(Outcome::Cancelled));
    assert!(
        h.send(Input::CredentialsRefreshed { attempt: step, ok: true }).is_empty(),
        "a late refresh is stale"
    );
}

#[test]
fn a_stop_turn_result_rewrites_tool_use_to_end_turn() {
    let mut h = Host::new(no_watchdog());
    let a = active(&mut h, "s");
    h.tool_call(a, "c1", "bash");
    h.finish(a, FinishReason::ToolCalls);
    let result = ToolOutput {
        content: "denied".into(),
        is_error: true,
        stop: Some(StopTurn::PermissionDenied),
    };
    let out = h.tool_result(a, "c1", result);
    assert!(
        ops(&out).iter().any(|op| matches!(
            op,
            StoreOp::MessageFinished { finish: MessageFinish::EndTurn, .. }
        ))
    );
    assert_eq!(h.finished[&a].stop_reason(), Some(StopReason::PermissionDenied));
}

#[test]
fn six_identical_tool_steps_in_ten_are_a_loop() {
    let mut h = Host::new(no_watchdog());
    let a = active(&mut h, "s");
    for i in 0..10 {
        // Four different steps first, then the same call with the same result again and again.
        let (input, output) = if i < 4 {
            (format!("{{\"n\":{i}}}"), format!("r{i}"))
        } else {
            ("{}".into(), "same".into())
        };
        let call = format!("c{i}");
        h.stream(a, StepEvent::ToolCall { id: CallId::new(&call), name: "ls".into(), input });
        h.finish(a, FinishReason::ToolCalls);
        h.tool_result(a, &call, ToolOutput::ok(output));
        if i < 9 {
            assert_eq!(h.outcome(a), None, "step {i}");
        }
    }
    let e = h.finished[&a].error().cloned().expect("a loop fails the submission");
    assert_eq!(
        (e.kind, e.title.as_str(), e.message.as_str()),
        (ErrorKind::LoopDetected, "Loop Detected", turnstile_core::LOOP_MESSAGE)
    );
}

#[test]
fn shutdown_orders_sessions_by_their_oldest_sequence() {
    let mut h = Host::new(no_watchdog());
    active(&mut h, "s");
    h.submit(Submit::new("t", "b"));
    h.submit(Submit::new("s", "c"));
    let out = h.send(Input::Shutdown);
    let finished: Vec<String> =
        kinds(&out).into_iter().filter(|k| k.starts_with("finished")).collect();
    assert_eq!(
        finished,
        ["finished #1 Interrupted", "finished #3 Interrupted", "finished #2 Interrupted"]
    );
}

#[test]
fn sequences_at_the_top_of_the_range_and_a_zero_start_are_refused() {
    let config = Config { acceptor: Acceptor::External, ..no_watchdog() };
    let mut h = Host::new(config.clone());
    let mut s = Submit::new("s", "a");
    s.seq = Some(Seq(u64::MAX));
    assert_eq!(
        h.engine.handle(Millis(0), Input::Submit(s)),
        Err(HostError::SequenceOutOfRange { seq: Seq(u64::MAX) })
    );
    let cancel = Input::Cancel { session: SessionId::new("s"), up_to: Some(Seq(u64::MAX)) };
    assert!(h.engine.handle(Millis(0), cancel).is_err());
    let zero = Start { next_seq: Some(Seq(0)), ..Start::default() };
    assert!(matches!(
        turnstile_core::Engine::new(config, zero),
        Err(HostError::InvalidStart { run_id: None, .. })
    ));
}

#[test]
fn an_external_acceptors_idempotent_retry_gets_the_existing_run() {
    let mut h = Host::new(Config { acceptor: Acceptor::External, ..no_watchdog() });
    let mut s = Submit::new("s", "a").with_run_id("r");
    s.seq = Some(Seq(5));
    h.submit(s.clone());
    let out = h.send(Input::Submit(s));
    assert_eq!(kinds(&out), ["reply existing"]);
}

#[test]
fn the_flight_recorder_keeps_what_the_engine_accepted() {
    let header = turnstile_core::TraceHeader::new(no_watchdog(), Start::default());
    let mut r = turnstile_core::Recorder::new(header, true).expect("recorder");
    r.handle(Millis(5), Input::Submit(Submit::new("s", "a"))).expect("valid");
    assert!(r.handle(Millis(1), Input::Shutdown).is_err(), "misuse is not recorded");
    while r.poll_output().is_some() {}
    let trace = r.trace();
    assert_eq!(trace.lines.len(), 1);
    let report =
        turnstile_core::replay(&turnstile_core::Trace::parse(&trace.to_jsonl()).expect("parse"))
            .expect("replays");
    assert_eq!(report.compared, 1);
}

// ---- The stream watchdog (SPEC 4.5) ----

fn watched() -> Host {
    Host::new(Config::default())
}

fn watchdog_timers(outs: &[turnstile_core::Output]) -> usize {
    outs.iter()
        .filter(|o| match &o.kind {
            OutputKind::SetTimer { purpose, .. } => {
                matches!(purpose, turnstile_core::TimerPurpose::StreamIdle { .. })
            }
            OutputKind::CancelTimer { .. } => true,
            _ => false,
        })
        .count()
}

#[test]
fn every_attempt_is_watched_from_its_start_and_disarmed_at_its_end() {
    let mut h = watched();
    let a = h.submit(Submit::new("s", "a").with_mode(Mode::OwnTurn));
    let started = h.prepare(a);
    let armed: Vec<_> = started
        .iter()
        .filter_map(|o| match &o.kind {
            OutputKind::SetTimer { deadline, purpose, .. } => Some((*deadline, purpose.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(armed.len(), 1, "one deadline per attempt");
    assert_eq!(armed[0].0, Millis(300_000), "300 s from the attempt's start (SPEC 8)");
    assert_eq!(kinds(&started).last().map(String::as_str), Some("set_timer"), "after the start");
    let ended = h.finish(a, FinishReason::Stop);
    assert_eq!(kinds(&ended)[0], "cancel_timer", "disarmed first, with the aborts (SPEC 7)");
    assert!(h.timers.is_empty(), "nothing outlives the attempt");
}

#[test]
fn content_events_cost_no_output_and_extend_the_deadline_lazily() {
    let mut h = watched();
    let a = h.submit(Submit::new("s", "a").with_mode(Mode::OwnTurn));
    h.prepare(a);
    for i in 0..100u64 {
        h.advance(2_000);
        let outs = h.text(a, "x");
        assert_eq!(watchdog_timers(&outs), 0, "no watchdog output for delta {i}");
    }
    // The deadline (300 s) passed the last delta (200 s): one new timer from that delta.
    let fired = h.fire_next_timer();
    let deadline = fired.iter().find_map(|o| match &o.kind {
        OutputKind::SetTimer { deadline, .. } => Some(*deadline),
        _ => None,
    });
    assert_eq!(deadline, Some(Millis(500_000)), "last content + the timeout: {:?}", kinds(&fired));
    assert!(!kinds(&fired).iter().any(|k| k.starts_with("abort_step")), "a live stream lives");
}

#[test]
fn a_stalled_attempt_is_retried_and_the_last_one_fails_the_submission_as_transport() {
    let mut h = watched();
    let a = h.submit(Submit::new("s", "a").with_run_id("r"));
    h.prepare(a);
    h.text(a, "half");
    h.advance(300_000);
    let fired = h.fire_next_timer(); // the delta at 0 s extends to 300 s: now idle at 300 s
    assert_eq!(watchdog_timers(&fired), 1, "re-armed once: {:?}", kinds(&fired));
    let mut aborted = 0;
    for _ in 0..4 {
        let outs = h.fire_next_timer();
        aborted += kinds(&outs).iter().filter(|k| k.starts_with("abort_step")).count();
        if h.outcome(a).is_some() {
            break;
        }
        let retry = h.fire_next_timer();
        assert!(kinds(&retry).iter().any(|k| k.starts_with("store message_reset")), "reset");
    }
    assert_eq!(aborted, 4, "4 attempts, each aborted by the watchdog");
    let c = &h.finished[&a];
    assert_eq!(c.outcome(), Outcome::Failed);
    assert!(c.is_run_complete());
    let e = c.error().expect("an error");
    assert_eq!(e.kind, ErrorKind::Transport);
    assert_eq!(e.title, "Stream Transport Error");
    assert_eq!(e.message, "stream idle for 300 s");
    assert_eq!(e.message, turnstile_core::stream_idle_message(300_000));
}

#[test]
fn a_summary_attempt_is_watched_like_a_step() {
    let mut h = watched();
    h.send(Input::Summarize { session: SessionId::new("s") });
    let stalled = h.summaries[0].clone();
    let fired = h.fire_next_timer();
    assert!(kinds(&fired).iter().any(|k| k.starts_with("abort_summary")), "{:?}", kinds(&fired));
    assert!(h.summaries.is_empty(), "the stalled attempt is aborted");
    h.fire_next_timer(); // the backoff
    assert_ne!(h.summaries[0], stalled, "a new attempt");
    h.summary_done(100);
    assert!(h.timers.is_empty());
}

#[test]
fn the_idle_timeout_is_configurable_zero_disables_it_and_below_a_second_is_refused() {
    let mut h = Host::new(Config { stream_idle_timeout_ms: 2_000, ..Config::default() });
    let a = h.submit(Submit::new("s", "a").with_run_id("r"));
    h.prepare(a);
    while h.outcome(a).is_none() {
        h.fire_next_timer();
    }
    assert_eq!(h.finished[&a].error().map(|e| e.message.as_str()), Some("stream idle for 2 s"));
    let mut off = Host::new(no_watchdog());
    let b = off.submit(Submit::new("s", "b").with_mode(Mode::OwnTurn));
    assert!(watchdog_timers(&off.prepare(b)) == 0 && off.timers.is_empty(), "0 disables it");
    let bad = Config { stream_idle_timeout_ms: 999, ..Config::default() };
    assert!(
        matches!(
            turnstile_core::Engine::new(bad, Start::default()),
            Err(HostError::InvalidConfig { field: "stream_idle_timeout_ms", .. })
        ),
        "N counts whole seconds"
    );
}

// ---- Summarization (SPEC 4.7) ----

fn summary_host(window: u64) -> Host {
    let mut h = Host::new(no_watchdog());
    h.setup.context_window = window;
    h
}

fn used(tokens: u64) -> Option<Usage> {
    Some(Usage { input_tokens: tokens, output_tokens: 0, ..Usage::default() })
}

fn summary_io(h: &Host) -> turnstile_core::SummaryIo {
    h.summaries.first().cloned().expect("a summary runs")
}

#[test]
fn the_threshold_follows_the_test_vectors() {
    use turnstile_core::at_threshold;
    assert!(at_threshold(200_000, 160_000, 20_000), "cw 200,000 triggers at 40,000 left");
    assert!(!at_threshold(200_000, 159_999, 20_000));
    assert!(at_threshold(200_001, 180_001, 20_000), "cw 200,001 triggers at 20,000 left");
    assert!(!at_threshold(200_001, 180_000, 20_000));
    assert!(at_threshold(1_000_000, 990_000, 20_000) && !at_threshold(1_000_000, 900_000, 20_000));
    assert!(!at_threshold(0, u64::MAX, 20_000), "an unknown window never triggers");
    assert!(at_threshold(1_000, 5_000, 20_000), "over the window");
}

#[test]
fn a_turn_ending_at_the_threshold_completes_first_then_summarizes_as_housekeeping() {
    let mut h = summary_host(1_000);
    let a = active(&mut h, "s");
    let b = h.submit(Submit::new("s", "next").with_mode(Mode::OwnTurn));
    h.prepare(b);
    let out = h.stream(a, StepEvent::Finished { reason: FinishReason::Stop, usage: used(900) });
    let k = kinds(&out);
    let done = k.iter().position(|x| x == "finished #1 Completed").expect("completes");
    let summary = k.iter().position(|x| x == "start_summary").expect("then summarizes");
    assert!(done < summary, "{k:?}");
    assert!(
        !k.iter().any(|x| x.contains("ledger_activated #2")),
        "the queue waits for the summary: {k:?}"
    );
    let out = h.summary_done(50);
    let k = kinds(&out);
    assert_eq!(k[0], "store summary_done");
    assert!(k.contains(&"store ledger_activated #2".to_owned()), "then the hand-off: {k:?}");
}

#[test]
fn a_turn_that_would_continue_pauses_and_the_same_submission_resumes_first() {
    let mut h = summary_host(1_000);
    let a = h.submit(Submit::new("s", "fix the bug").with_run_id("r").with_mode(Mode::OwnTurn));
    h.prepare(a);
    let b = h.submit(Submit::new("s", "later").with_mode(Mode::OwnTurn));
    h.prepare(b);
    let out = h.tool_step_using(a, "c1", 950);
    let k = kinds(&out);
    assert!(
        k.contains(&"store ledger_paused #1".to_owned()) && k.contains(&"start_summary".to_owned()),
        "{k:?}"
    );
    assert!(
        !k.iter().any(|x| x.starts_with("finished")),
        "paused: not ended, no RunComplete (G-02)"
    );
    let out = h.summary_done(40);
    let text = ops(&out).into_iter().find_map(|op| match op {
        StoreOp::UserMessage { seq, text, synthetic: true, .. } if seq == a => Some(text),
        _ => None,
    });
    assert_eq!(
        text.as_deref(),
        Some(
            "The previous session was interrupted because it got too long, the initial user request was: `fix the bug`"
        )
    );
    assert!(
        kinds(&out).contains(&"store ledger_activated #1".to_owned()),
        "#1 resumes before #2 (G-25)"
    );
    h.finish(a, FinishReason::Stop);
    assert!(h.finished[&a].is_run_complete() && h.outcome(a) == Some(Outcome::Completed));
    assert!(h.outcome(b).is_none() && h.steps.iter().any(|s| s.seq == b), "then the queue");
}

#[test]
fn a_failed_summary_fails_a_paused_submission_but_only_marks_a_housekeeping_one() {
    let mut h = summary_host(1_000);
    let a = active(&mut h, "s");
    h.tool_step_using(a, "c1", 950);
    let io = summary_io(&h);
    let e =
        ProviderError { status: Some(400), message: "too long".into(), ..ProviderError::default() };
    h.send(Input::Summary { io, event: StepEvent::Failed { error: e.clone() } });
    let err = h.finished[&a].error().cloned().expect("failed");
    assert_eq!(
        (err.kind, err.title.as_str(), err.message.as_str()),
        (ErrorKind::Summarization, "Summarization Error", "too long")
    );
    let b = active(&mut h, "t");
    h.stream(b, StepEvent::Finished { reason: FinishReason::Stop, usage: used(990) });
    let io = summary_io(&h);
    let out = h.send(Input::Summary { io, event: StepEvent::Failed { error: e } });
    assert_eq!(kinds(&out)[0], "store summary_failed");
    assert_eq!(h.outcome(b), Some(Outcome::Completed), "housekeeping fails no submission");
}

#[test]
fn cancelling_a_summary_cancels_the_paused_submission_and_deletes_the_partial_summary() {
    let mut h = summary_host(1_000);
    let a = h.submit(Submit::new("s", "go").with_run_id("r").with_mode(Mode::OwnTurn));
    h.prepare(a);
    h.tool_step_using(a, "c1", 950);
    let io = summary_io(&h);
    h.send(Input::Summary {
        io: io.clone(),
        event: StepEvent::TextDelta { text: "So far".into() },
    });
    let out = h.send(Input::CancelRun { run_id: turnstile_core::RunId::new("r") });
    let k = kinds(&out);
    assert_eq!(k[..2], ["abort_summary", "store summary_deleted"], "{k:?}");
    assert_eq!(h.outcome(a), Some(Outcome::Cancelled), "G-03: the continuation never runs");
    assert!(
        h.send(Input::Summary { io, event: StepEvent::TextDelta { text: "late".into() } })
            .is_empty()
    );
}

#[test]
fn summaries_that_free_nothing_end_the_submission_with_context_window() {
    let mut h = summary_host(1_000);
    let a = active(&mut h, "s");
    for i in 0..3 {
        h.tool_step_using(a, &format!("c{i}"), 990);
        if i < 2 {
            assert_eq!(h.outcome(a), None, "summary {i} is allowed");
            h.summary_done(10);
        }
    }
    let e = h.finished[&a].error().cloned().expect("the guard fails it");
    assert_eq!((e.kind, e.title.as_str()), (ErrorKind::ContextWindow, "Context Window Exceeded"));
    assert_eq!(e.message, "Summarization did not free enough context to continue.");
}

#[test]
fn a_manual_summarize_is_rejected_while_busy_and_runs_as_housekeeping_otherwise() {
    let mut h = summary_host(1_000);
    let a = active(&mut h, "s");
    let out = h.send(Input::Summarize { session: SessionId::new("s") });
    assert!(
        matches!(&out[..], [o] if matches!(&o.kind, OutputKind::Reply(turnstile_core::Reply::Rejected { error })
        if error.to_string() == "session is currently processing another request"))
    );
    h.finish(a, FinishReason::Stop);
    let out = h.send(Input::Summarize { session: SessionId::new("s") });
    assert_eq!(
        kinds(&out),
        ["reply summarizing", "store summary_message", "commit", "start_summary"]
    );
    assert!(h.engine.is_busy(&SessionId::new("s")), "a summary makes the session busy");
    let b = h.submit(Submit::new("s", "next").with_mode(Mode::OwnTurn));
    h.prepare(b);
    assert!(!h.engine.has_active_turn(&SessionId::new("s")), "no turn while summarizing (G-05)");
    h.summary_done(5);
    assert!(h.engine.has_active_turn(&SessionId::new("s")));
}

#[test]
fn a_summary_retries_and_refreshes_like_a_step_and_shutdown_interrupts_it() {
    let mut h = summary_host(1_000);
    let a = active(&mut h, "s");
    h.tool_step_using(a, "c1", 950);
    let io = summary_io(&h);
    h.send(Input::Summary {
        io,
        event: StepEvent::Failed { error: error(Some(529), ErrorClass::Provider) },
    });
    let out = h.fire_next_timer();
    assert_eq!(kinds(&out), ["store summary_reset", "commit", "start_summary"]);
    let io = summary_io(&h);
    let out = h.send(Input::Summary {
        io,
        event: StepEvent::Failed { error: error(Some(401), ErrorClass::Provider) },
    });
    assert_eq!(kinds(&out), ["refresh_credentials"]);
    let out = h.send(Input::Shutdown);
    assert_eq!(kinds(&out)[..2], ["abort_refresh", "store summary_deleted"]);
    assert_eq!(h.outcome(a), Some(Outcome::Interrupted));
    assert!(h.engine.is_stopped());
}

// ---- Sub-agents (SPEC 4.11) ----

fn agent_host() -> Host {
    let mut h = Host::new(no_watchdog());
    h.setup = turnstile_core::Setup::with_tools(&["ls", "agent"]);
    h
}

fn child_of(out: &[turnstile_core::Output]) -> (SessionId, Seq) {
    ops(out)
        .into_iter()
        .find_map(|op| match op {
            StoreOp::ChildAccepted { session, seq, title, .. } => {
                assert_eq!(title, "New Agent Session");
                Some((session, seq))
            }
            _ => None,
        })
        .expect("a child starts")
}

#[test]
fn an_agent_call_runs_a_child_turn_whose_text_is_the_parents_result() {
    let mut h = agent_host();
    let a = active(&mut h, "s");
    let message = h.step_of(a);
    let out = h.agent_call(a, "call-1", r#"{"prompt":"find the bug"}"#);
    let (child, c) = child_of(&out);
    assert_eq!(
        child.as_str(),
        format!("m2$$call-1"),
        "<assistant message id>$$<tool call id> ({message:?})"
    );
    assert!(child.is_child());
    assert!(
        kinds(&out).contains(&format!("start_step #{c} turn 2 step 0 attempt 0")),
        "started at once, never queued"
    );
    let rejected = h.send(Input::Submit(Submit::new(child.as_str(), "hi")));
    assert!(matches!(&rejected[0].kind, OutputKind::Reply(turnstile_core::Reply::Rejected { .. })));
    h.text(c, "It is in main.rs");
    let usage = Usage { input_tokens: 10, output_tokens: 5, cost_micros: 7, ..Usage::default() };
    let out = h.stream(c, StepEvent::Finished { reason: FinishReason::Stop, usage: Some(usage) });
    assert!(ops(&out).iter().any(|op| matches!(op, StoreOp::SessionUsage { ancestor: Some(p), cost_micros: 7, .. } if p.as_str() == "s")),
        "the child's cost is added to its parent in the same write");
    let result = ops(&out).into_iter().find_map(|op| match op {
        StoreOp::ToolResult { call, content, is_error, .. } if call.as_str() == "call-1" => {
            Some((content, is_error))
        }
        _ => None,
    });
    assert_eq!(result, Some(("It is in main.rs".to_owned(), false)));
    assert_eq!(h.outcome(c), Some(Outcome::Completed));
    assert!(h.steps.iter().any(|s| s.seq == a && s.step == 1), "the parent continues");
}

#[test]
fn a_child_without_text_or_failing_gives_its_error_text_and_no_prompt_is_refused() {
    let mut h = agent_host();
    let a = active(&mut h, "s");
    let out = h.agent_call(a, "c1", r#"{"prompt":"go"}"#);
    let (_, c) = child_of(&out);
    let out = h.finish(c, FinishReason::Stop);
    assert!(
        ops(&out).iter().any(|op| matches!(op, StoreOp::ToolResult { content, is_error: true, .. }
        if content == "Sub-agent completed but produced no text output."))
    );
    let out = h.agent_call(a, "c2", r#"{"prompt":"again"}"#);
    let (_, c) = child_of(&out);
    let out = fail(
        &mut h,
        c,
        ProviderError {
            status: Some(400),
            message: "bad request".into(),
            ..ProviderError::default()
        },
    );
    assert!(has_result(&out, "Failed to generate response: bad request"));
    let out = h.agent_call(a, "c3", r#"{"task":"no prompt"}"#);
    assert!(!ops(&out).iter().any(|op| matches!(op, StoreOp::ChildAccepted { .. })));
    assert!(has_result(&out, "prompt is required"));
}

#[test]
fn sub_agents_have_depth_one() {
    let mut h = agent_host();
    let a = active(&mut h, "s");
    let out = h.agent_call(a, "c1", r#"{"prompt":"go"}"#);
    let (_, c) = child_of(&out);
    let out = h.agent_call(c, "nested", r#"{"prompt":"deeper"}"#);
    assert!(has_result(&out, "tool not found: agent"));
}

#[test]
fn cancelling_the_child_cancels_only_the_child_and_the_parent_goes_on() {
    let mut h = agent_host();
    let a = active(&mut h, "s");
    let out = h.agent_call(a, "c1", r#"{"prompt":"go"}"#);
    let (child, c) = child_of(&out);
    let out = h.send(Input::Cancel { session: child, up_to: None });
    assert!(has_result(&out, turnstile_core::CANCELLED_TOOL_RESULT));
    assert_eq!((h.outcome(c), h.outcome(a)), (Some(Outcome::Cancelled), None));
    assert!(h.steps.iter().any(|s| s.seq == a && s.step == 1));
}

#[test]
fn cancelling_the_parent_cascades_to_its_sub_agent() {
    let mut h = agent_host();
    let a = h.submit(Submit::new("s", "go").with_run_id("r"));
    h.prepare(a);
    let out = h.agent_call(a, "c1", r#"{"prompt":"go"}"#);
    let (_, c) = child_of(&out);
    let out = h.send(Input::CancelRun { run_id: turnstile_core::RunId::new("r") });
    let k = kinds(&out);
    assert!(
        k.contains(&format!("finished #{c} Cancelled"))
            && k.contains(&format!("finished #{a} Cancelled +RunComplete")),
        "{k:?}"
    );
}

// ---- Titles (SPEC 4.11) ----

fn untitled_host() -> Host {
    let mut h = Host::new(no_watchdog());
    h.setup.titled = false;
    h
}

#[test]
fn a_title_is_requested_once_at_the_first_activation_and_written_as_a_field() {
    let mut h = untitled_host();
    let a = h.submit(Submit::new("s", "Fix the login\nbug please").with_mode(Mode::OwnTurn));
    let out = h.prepare(a);
    assert_eq!(
        kinds(&out)[..3],
        ["store ledger_activated #1", "store user_message #1", "request_title"]
    );
    h.finish(a, FinishReason::Stop);
    let b = active(&mut h, "s");
    assert!(h.titles.len() == 1, "no second request while one is pending");
    let usage = Some(Usage { cost_micros: 11, ..Usage::default() });
    let out = h.send(Input::TitleGenerated {
        session: SessionId::new("s"),
        seq: a,
        title: Some("<think>hm</think> Login fix\n".into()),
        usage,
    });
    assert_eq!(
        ops(&out),
        [
            StoreOp::Title { session: SessionId::new("s"), title: "Login fix".into() },
            StoreOp::SessionUsage {
                session: SessionId::new("s"),
                seq: None,
                prompt_tokens: None,
                completion_tokens: None,
                cost_micros: 11,
                ancestor: None
            },
        ]
    );
    assert!(
        h.send(Input::TitleGenerated {
            session: SessionId::new("s"),
            seq: a,
            title: None,
            usage: None
        })
        .is_empty(),
        "stale"
    );
    assert_eq!(h.outcome(b), None, "not awaited: the turn goes on");
}

#[test]
fn a_failed_or_empty_title_falls_back_to_the_prompt() {
    let mut h = untitled_host();
    let long = "word ".repeat(20);
    let a = h.submit(Submit::new("s", long.clone()).with_mode(Mode::OwnTurn));
    h.prepare(a);
    let out = h.send(Input::TitleGenerated {
        session: SessionId::new("s"),
        seq: a,
        title: Some("<think>only thinking</think>\n".into()),
        usage: None,
    });
    let want = format!("{}…", &long.trim()[..49]);
    assert_eq!(ops(&out), [StoreOp::Title { session: SessionId::new("s"), title: want }]);
    let b = h.submit(Submit::new("t", " \n ").with_mode(Mode::OwnTurn));
    h.prepare(b);
    let out = h.send(Input::TitleGenerated {
        session: SessionId::new("t"),
        seq: b,
        title: None,
        usage: None,
    });
    assert_eq!(
        ops(&out),
        [StoreOp::Title { session: SessionId::new("t"), title: "Untitled Session".into() }]
    );
}

#[test]
fn shutdown_abandons_a_pending_title_and_writes_the_prompts() {
    let mut h = untitled_host();
    let a = h.submit(Submit::new("s", "Refactor the parser").with_mode(Mode::OwnTurn));
    h.prepare(a);
    let out = h.send(Input::Shutdown);
    let k = kinds(&out);
    assert_eq!(k[0], "abort_title", "{k:?}");
    assert!(ops(&out).contains(&StoreOp::Title {
        session: SessionId::new("s"),
        title: "Refactor the parser".into()
    }));
}

#[test]
fn sub_agents_and_resumed_submissions_request_no_title() {
    let mut h = untitled_host();
    h.setup = turnstile_core::Setup {
        titled: false,
        context_window: 1_000,
        ..turnstile_core::Setup::with_tools(&["ls", "agent"])
    };
    let a = active(&mut h, "s");
    assert_eq!(h.titles.len(), 1);
    let out = h.agent_call(a, "c1", r#"{"prompt":"go"}"#);
    assert!(!kinds(&out).contains(&"request_title".to_owned()), "a child keeps New Agent Session");
    let (_, c) = child_of(&out);
    h.finish(c, FinishReason::Stop);
    h.tool_call(a, "c2", "ls");
    h.stream(a, StepEvent::Finished { reason: FinishReason::ToolCalls, usage: used(950) });
    h.tool_result(a, "c2", ToolOutput::ok("x"));
    let out = h.summary_done(10);
    assert!(
        kinds(&out).contains(&"store ledger_activated #1".to_owned())
            && !kinds(&out).contains(&"request_title".to_owned())
    );
}

// ---- Fixes from review ----

#[test]
fn an_external_acceptor_cannot_offer_the_agent_tool() {
    let mut h = Host::new(Config { acceptor: Acceptor::External, ..no_watchdog() });
    let mut s = Submit::new("s", "a");
    s.seq = Some(Seq(1));
    h.submit(s);
    let setup = turnstile_core::Setup::with_tools(&["agent"]);
    let err = h
        .engine
        .handle(h.now, Input::Prepared { session: SessionId::new("s"), seq: Seq(1), setup })
        .expect_err("refused");
    assert!(matches!(err, HostError::WrongAcceptor { .. }), "{err}");
}

#[test]
fn a_timer_armed_and_disarmed_in_one_transition_is_never_announced() {
    let mut h = agent_host();
    let a = h.submit(Submit::new("s", "go").with_run_id("r"));
    h.prepare(a);
    let out = h.agent_call(a, "c1", r#"{"prompt":"go"}"#);
    child_of(&out);
    let out = h.send(Input::CancelRun { run_id: turnstile_core::RunId::new("r") });
    let k = kinds(&out);
    assert!(!k.iter().any(|x| x == "set_timer" || x == "cancel_timer"), "{k:?}");
}

#[test]
fn a_title_is_not_requested_again_while_the_session_stays_in_memory() {
    let mut h = untitled_host();
    let a = active(&mut h, "s");
    let b = h.submit(Submit::new("s", "next").with_mode(Mode::OwnTurn));
    h.prepare(b); // its setup still says untitled
    h.send(Input::TitleGenerated {
        session: SessionId::new("s"),
        seq: a,
        title: Some("T".into()),
        usage: None,
    });
    let out = h.finish(a, FinishReason::Stop);
    assert!(!kinds(&out).contains(&"request_title".to_owned()), "{:?}", kinds(&out));
}

#[test]
fn a_manual_summarize_of_a_sub_agent_session_is_refused() {
    let mut h = Host::new(no_watchdog());
    let out = h.send(Input::Summarize { session: SessionId::new("m2$$call-1") });
    assert!(matches!(&out[0].kind, OutputKind::Reply(turnstile_core::Reply::Rejected { error })
        if error.to_string() == "cannot continue an agent tool session: m2$$call-1"));
}

#[test]
fn a_cancel_during_tools_and_a_failure_after_a_step_replace_the_tool_use_finish() {
    let mut h = Host::new(Config { step_limit: 1, ..no_watchdog() });
    let a = active(&mut h, "s");
    h.tool_call(a, "c1", "ls");
    h.finish(a, FinishReason::ToolCalls);
    let out = h.tool_result(a, "c1", ToolOutput::ok("x"));
    assert!(ops(&out).iter().any(|op| matches!(op, StoreOp::MessageFinished { finish: MessageFinish::Error { title, .. }, .. }
        if title == "Step Limit Reached")));
    let b = active(&mut h, "t");
    h.tool_call(b, "c1", "ls");
    h.finish(b, FinishReason::ToolCalls);
    let out = h.send(Input::Cancel { session: SessionId::new("t"), up_to: None });
    assert!(ops(&out).iter().any(|op| matches!(op, StoreOp::MessageFinished { finish: MessageFinish::Canceled { message }, .. }
        if message == "User canceled request")));
}

#[test]
fn an_interrupted_child_gives_the_cancel_text_and_a_double_dollar_call_id_starts_no_child() {
    let mut h = agent_host();
    let a = active(&mut h, "s");
    let out = h.agent_call(a, "a$$b", r#"{"prompt":"go"}"#);
    assert!(!ops(&out).iter().any(|op| matches!(op, StoreOp::ChildAccepted { .. })));
    assert!(has_result(&out, &turnstile_core::unusable_call_id(&CallId::new("a$$b"))));
    let out = h.agent_call(a, "c2", r#"{"prompt":"go"}"#);
    child_of(&out);
    let out = h.send(Input::Shutdown);
    assert!(ops(&out).iter().any(|op| matches!(op, StoreOp::ToolResult { call, content, .. }
        if call.as_str() == "c2" && content == turnstile_core::CANCELLED_TOOL_RESULT)));
}

#[test]
fn a_paused_submission_cancelled_during_its_summary_gets_a_canceled_finish() {
    let mut h = summary_host(1_000);
    let a = active(&mut h, "s");
    h.tool_step_using(a, "c1", 950);
    let out = h.send(Input::Cancel { session: SessionId::new("s"), up_to: None });
    assert!(ops(&out).iter().any(|op| matches!(op, StoreOp::MessageFinished { seq, finish: MessageFinish::Canceled { message }, .. }
        if *seq == a && message == "User canceled request")));
}

#[test]
fn unusable_configurations_are_refused_with_the_field() {
    let err = turnstile_core::Engine::new(
        Config { calls_per_step_max: 0, ..no_watchdog() },
        Start::default(),
    )
    .expect_err("refused");
    assert_eq!(
        err.to_string(),
        "invalid configuration: calls_per_step_max must be at least 1; offer no tools to disable them"
    );
    assert!(
        turnstile_core::Engine::new(Config { queue_max: 0, ..no_watchdog() }, Start::default())
            .is_err()
    );
}

#[test]
fn a_flight_recording_written_as_it_goes_replays() {
    let header = turnstile_core::TraceHeader::new(no_watchdog(), Start::default());
    let mut r = turnstile_core::Recorder::new(header, true).expect("recorder");
    let mut file = r.header_jsonl();
    let a = Submit::new("s", "a").with_mode(Mode::OwnTurn);
    r.handle(Millis(0), Input::Submit(a)).expect("valid");
    file.push_str(&r.take_jsonl());
    let mut prepare = None;
    while let Some(o) = r.poll_output() {
        if let OutputKind::Prepare { session, seq } = o.kind {
            prepare =
                Some(Input::Prepared { session, seq, setup: turnstile_core::Setup::default() });
        }
    }
    r.handle(Millis(1), prepare.expect("a preparation")).expect("valid");
    file.push_str(&r.take_jsonl());
    assert!(r.trace().lines.is_empty(), "taken lines are forgotten");
    let trace = turnstile_core::Trace::parse(&file).expect("parses");
    assert_eq!(trace.lines.len(), 2);
    assert_eq!(turnstile_core::replay(&trace).expect("replays").compared, 2);
}
