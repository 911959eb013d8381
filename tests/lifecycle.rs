//! One test per lifecycle rule of SPEC 4.1 to 4.3, 4.6, 4.9, 4.10 and section 7, driven through
//! the scripted host (which also runs both invariant checkers after every input).

use turnstile_core::{
    Acceptor, Attachment, Config, ErrorClass, ErrorKind, Fingerprint, FinishReason, HostError,
    Input, KnownRun, Millis, Mode, Outcome, OutputKind, ProviderError, Reply, RunId, Seq,
    SessionId, Start, StepEvent, StopReason, StopTurn, StoreOp, Submit, ToolOutput,
};
use turnstile_tests::harness::{Host, short};

/// The SPEC defaults with the stream watchdog off (SPEC 4.5): these tests pin the outputs of
/// other rules, and every attempt's `SetTimer` and `CancelTimer` would only repeat what the
/// watchdog's own tests pin. The property tests and the scenario traces run with it on.
fn no_watchdog() -> Config {
    Config { stream_idle_timeout_ms: 0, ..Config::default() }
}

fn host() -> Host {
    Host::new(no_watchdog())
}

fn kinds(outs: &[turnstile_core::Output]) -> Vec<String> {
    outs.iter().map(|o| short(&o.kind)).collect()
}

fn rejected(h: &mut Host, s: Submit) -> String {
    match &h.send(Input::Submit(s))[..] {
        [o] => match &o.kind {
            OutputKind::Reply(Reply::Rejected { error }) => error.to_string(),
            other => panic!("expected a rejection, got {other:?}"),
        },
        other => panic!("expected one output, got {other:?}"),
    }
}

/// Starts a turn for a fresh own-turn submission and returns its sequence.
fn active(h: &mut Host, session: &str, prompt: &str) -> Seq {
    let seq = h.submit(Submit::new(session, prompt).with_mode(Mode::OwnTurn));
    h.prepare(seq);
    seq
}

#[test]
fn validation_rejects_in_spec_order_with_exact_strings_and_consumes_no_sequence() {
    let mut h = host();
    assert_eq!(rejected(&mut h, Submit::new("", "")), "prompt is empty");
    assert_eq!(rejected(&mut h, Submit::new("", "hi")), "session id is missing");
    assert_eq!(
        rejected(&mut h, Submit::new("m1$$call", "hi")),
        "cannot continue an agent tool session: m1$$call"
    );
    let binary =
        Attachment { name: "a.png".into(), media_type: "image/png".into(), content: "AAAA".into() };
    let mut s = Submit::new("s", "");
    s.attachments.push(binary);
    assert_eq!(rejected(&mut h, s.clone()), "prompt is empty");
    s.attachments.push(Attachment {
        name: "a.txt".into(),
        media_type: "text/plain".into(),
        content: "x".into(),
    });
    assert_eq!(
        h.submit(s),
        Seq(1),
        "an empty prompt with a text attachment is accepted; rejections used no sequence"
    );
    assert_eq!(h.submit(Submit::new("s", " ")), Seq(2), "whitespace counts as text");
    h.send(Input::Shutdown);
    assert_eq!(rejected(&mut h, Submit::new("s", "late")), "workspace closing");
}

#[test]
fn sequences_continue_above_the_ledger_after_a_restart() {
    let start = Start { next_seq: Some(Seq(41)), ..Start::default() };
    let mut h = Host::with_start(no_watchdog(), start);
    assert_eq!(h.submit(Submit::new("s", "a")), Seq(41));
    assert_eq!(h.submit(Submit::new("t", "b")), Seq(42));
}

#[test]
fn a_run_id_forces_own_turn_and_the_default_mode_is_fold() {
    let mut h = host();
    let out = h.send(Input::Submit(Submit::new("s", "a").with_run_id("r").with_mode(Mode::Fold)));
    assert!(matches!(&out[0].kind, OutputKind::Reply(Reply::Accepted { mode: Mode::OwnTurn, .. })));
    let out = h.send(Input::Submit(Submit::new("s", "b")));
    assert!(matches!(&out[0].kind, OutputKind::Reply(Reply::Accepted { mode: Mode::Fold, .. })));
}

#[test]
fn run_id_idempotency_returns_the_existing_run_and_rejects_a_different_call() {
    let mut h = host();
    let seq = h.submit(Submit::new("s", "a").with_run_id("r1"));
    let again = h.send(Input::Submit(Submit::new("s", "a").with_run_id("r1")));
    assert_eq!(kinds(&again), ["reply existing"], "no new sequence, no state change");
    assert!(
        matches!(&again[0].kind, OutputKind::Reply(Reply::Existing { seq: s, outcome: None, .. }) if *s == seq)
    );
    assert_eq!(
        rejected(&mut h, Submit::new("s", "b").with_run_id("r1")),
        "run id r1 is already used by a different request"
    );
    assert_eq!(
        rejected(&mut h, Submit::new("t", "a").with_run_id("r1")),
        "run id r1 is already used by a different request"
    );
    h.drive_to_quiescence(100);
    let done = h.send(Input::Submit(Submit::new("s", "a").with_run_id("r1")));
    assert!(matches!(
        &done[0].kind,
        OutputKind::Reply(Reply::Existing { outcome: Some(Outcome::Completed), .. })
    ));
    // A RunId rejected at validation stays free.
    assert_eq!(rejected(&mut h, Submit::new("", "x").with_run_id("r2")), "session id is missing");
    assert_eq!(h.submit(Submit::new("s", "x").with_run_id("r2")), Seq(2));
}

#[test]
fn a_finished_run_from_the_ledger_is_never_run_again_after_a_restart() {
    let submit = Submit::new("s", "a").with_run_id("r1");
    let known = KnownRun {
        run_id: RunId::new("r1"),
        session: SessionId::new("s"),
        seq: Seq(7),
        fingerprint: Fingerprint::of(&submit),
        outcome: Outcome::Cancelled,
    };
    let start = Start { next_seq: Some(Seq(8)), runs: vec![known], ..Start::default() };
    let mut h = Host::with_start(no_watchdog(), start);
    let out = h.send(Input::Submit(submit));
    assert!(matches!(&out[..], [o] if matches!(&o.kind,
        OutputKind::Reply(Reply::Existing { seq: Seq(7), outcome: Some(Outcome::Cancelled), .. }))));
    let bad =
        Start { next_seq: Some(Seq(3)), runs: h.header.start.runs.clone(), ..Start::default() };
    assert!(matches!(
        turnstile_core::Engine::new(no_watchdog(), bad),
        Err(HostError::InvalidStart { .. })
    ));
}

#[test]
fn own_turns_start_in_acceptance_order_whatever_order_preparations_finish_in() {
    let mut h = host();
    let a = h.submit(Submit::new("s", "a").with_mode(Mode::OwnTurn));
    let b = h.submit(Submit::new("s", "b").with_mode(Mode::OwnTurn));
    assert!(h.prepare(b).is_empty(), "a prepared entry behind a preparing one waits (G-16)");
    let out = h.prepare(a);
    assert!(kinds(&out).contains(&"store ledger_activated #1".to_owned()));
    let out = h.finish(a, FinishReason::Stop);
    let k = kinds(&out);
    let done = k.iter().position(|x| x == "finished #1 Completed").expect("a completes");
    let next = k
        .iter()
        .position(|x| x == "store ledger_activated #2")
        .expect("b is handed the lane in the same transition");
    assert!(done < next, "outcome before hand-off: {k:?}");
}

#[test]
fn a_failed_preparation_fails_only_its_submission_and_the_queue_moves_on() {
    let mut h = host();
    let a = h.submit(Submit::new("s", "a").with_mode(Mode::OwnTurn));
    let b = h.submit(Submit::new("s", "b").with_mode(Mode::OwnTurn));
    h.prepare(b);
    let out = h.fail_preparation(a, "model not found");
    assert_eq!(
        kinds(&out)[..4],
        ["store ledger_outcome #1", "commit", "finished #1 Failed", "store ledger_activated #2"]
    );
    let c = &h.finished[&a];
    assert_eq!(c.error().map(|e| e.kind), Some(ErrorKind::Preparation));
    assert_eq!(c.error().map(|e| e.message.as_str()), Some("model not found"));
    assert!(c.message_id().is_none(), "never activated: no message (G-14, I9)");
    // Nothing sticky (G-24): a later submission runs normally.
    h.drive_to_quiescence(50);
    let d = active(&mut h, "s", "d");
    h.finish(d, FinishReason::Stop);
    assert_eq!(h.outcome(d), Some(Outcome::Completed));
}

#[test]
fn the_prepared_fold_prefix_is_folded_at_every_step_start_in_sequence_order() {
    let mut h = host();
    let a = active(&mut h, "s", "a");
    let b = h.submit(Submit::new("s", "b"));
    let c = h.submit(Submit::new("s", "c"));
    let d = h.submit(Submit::new("s", "d").with_mode(Mode::OwnTurn));
    let e = h.submit(Submit::new("s", "e"));
    for q in [c, b, d, e] {
        assert!(h.prepare(q).is_empty(), "nothing happens until the next step starts");
    }
    h.tool_call(a, "t1", "ls");
    h.finish(a, FinishReason::ToolCalls);
    let out = h.tool_result(a, "t1", ToolOutput::ok("files"));
    assert_eq!(
        kinds(&out),
        [
            "store tool_result #1",
            "store user_message #2",
            "store ledger_outcome #2",
            "store user_message #3",
            "store ledger_outcome #3",
            "store assistant_message #1",
            "commit",
            "finished #2 Folded",
            "finished #3 Folded",
            "start_step #1 turn 1 step 1 attempt 0",
        ]
    );
    assert_eq!(h.outcome(d), None, "an own_turn entry ends the prefix");
    assert_eq!(h.outcome(e), None, "and nothing behind it folds");
}

#[test]
fn folding_happens_at_step_zero_too() {
    let mut h = host();
    let a = h.submit(Submit::new("s", "a").with_mode(Mode::OwnTurn));
    let b = h.submit(Submit::new("s", "b"));
    h.prepare(b);
    let out = h.prepare(a);
    let k = kinds(&out);
    assert_eq!(
        k[..3],
        ["store ledger_activated #1", "store user_message #1", "store user_message #2"]
    );
    assert!(k.contains(&"finished #2 Folded".to_owned()));
}

#[test]
fn tools_run_after_the_stream_and_their_results_lead_to_the_next_step() {
    let mut h = host();
    let a = active(&mut h, "s", "a");
    h.text(a, "let me look");
    h.tool_call(a, "t1", "ls");
    let dup = h.tool_call(a, "t1", "ls");
    assert!(dup.is_empty(), "a repeated call id is ignored");
    h.tool_call(a, "t2", "grep");
    let out = h.finish(a, FinishReason::Stop);
    assert_eq!(
        kinds(&out),
        ["store message_finished #1", "commit", "run_tool #1 t1", "run_tool #1 t2"],
        "calls run whatever the finish"
    );
    h.tool_result(a, "t2", ToolOutput::ok("b"));
    let out = h.tool_result(a, "t1", ToolOutput::ok("a"));
    assert!(
        kinds(&out).contains(&"finished #1 Completed".to_owned()),
        "finish stop: the turn ends after its tools"
    );
    assert_eq!(h.finished[&a].stop_reason(), Some(StopReason::EndTurn));
    assert_eq!(h.finished[&a].text(), Some("let me look"));
}

#[test]
fn a_stop_turn_result_wins_over_everything_else() {
    for (stop, reason) in [
        (StopTurn::PermissionDenied, StopReason::PermissionDenied),
        (StopTurn::HookHalt, StopReason::HookHalt),
    ] {
        let mut h = Host::new(Config { step_limit: 1, ..no_watchdog() });
        let a = active(&mut h, "s", "a");
        h.tool_call(a, "t1", "bash");
        h.finish(a, FinishReason::ToolCalls);
        h.tool_result(
            a,
            "t1",
            ToolOutput { content: "denied".into(), is_error: true, stop: Some(stop) },
        );
        assert_eq!(h.outcome(a), Some(Outcome::Completed));
        assert_eq!(
            h.finished[&a].stop_reason(),
            Some(reason),
            "precedence over the step limit and tool_use"
        );
    }
}

#[test]
fn the_step_limit_fails_the_submission_with_its_exact_strings() {
    let mut h = Host::new(Config { step_limit: 2, ..no_watchdog() });
    let a = active(&mut h, "s", "a");
    for call in ["t1", "t2"] {
        h.tool_call(a, call, "ls");
        h.finish(a, FinishReason::ToolCalls);
        h.tool_result(a, call, ToolOutput::ok("x"));
    }
    let c = &h.finished[&a];
    assert_eq!(c.outcome(), Outcome::Failed);
    let e = c.error().expect("an error");
    assert_eq!((e.kind, e.title.as_str()), (ErrorKind::StepLimit, "Step Limit Reached"));
    assert_eq!(e.message, "The turn reached the limit of 2 steps.");
}

#[test]
fn finish_reasons_map_to_stop_reasons() {
    let cases = [
        (FinishReason::Stop, Some(StopReason::EndTurn)),
        (FinishReason::Length, Some(StopReason::MaxTokens)),
        (FinishReason::ContentFilter, Some(StopReason::ContentFilter)),
        (FinishReason::Other, None),
    ];
    for (reason, stop) in cases {
        let mut h = host();
        let a = active(&mut h, "s", "a");
        h.finish(a, reason);
        assert_eq!(h.finished[&a].outcome(), Outcome::Completed);
        assert_eq!(h.finished[&a].stop_reason(), stop, "{reason:?}");
    }
}

#[test]
fn a_provider_error_fails_the_turn_with_a_classified_error_and_legal_history() {
    for (class, title, kind, want) in [
        (ErrorClass::Provider, None, ErrorKind::Provider, "Provider Error"),
        (
            ErrorClass::Provider,
            Some("invalid request error"),
            ErrorKind::Provider,
            "Invalid Request Error",
        ),
    ] {
        let mut h = host();
        let a = active(&mut h, "s", "a");
        let b = h.submit(Submit::new("s", "b").with_mode(Mode::OwnTurn));
        h.prepare(b);
        h.tool_call(a, "t1", "ls");
        let error = ProviderError {
            class,
            status: Some(400),
            title: title.map(str::to_owned),
            message: "bad".into(),
            ..ProviderError::default()
        };
        let out = h.stream(a, StepEvent::Failed { error });
        let k = kinds(&out);
        assert_eq!(
            k[..3],
            ["store tool_result #1", "store message_finished #1", "store flush"],
            "SPEC 4.9's order: the synthetic result, then the finish"
        );
        let e = h.finished[&a].error().cloned().expect("error");
        assert_eq!((e.kind, e.title.as_str()), (kind, want));
        assert!(
            k.contains(&"store ledger_activated #2".to_owned()),
            "a failed turn never strands the queue (G-01)"
        );
        let synthetic = out.iter().any(|o| matches!(&o.kind, OutputKind::Store(StoreOp::ToolResult { content, synthetic: true, .. })
            if content == turnstile_core::FAILED_TOOL_RESULT));
        assert!(synthetic);
    }
}

#[test]
fn cancel_covers_exactly_what_was_accepted_before_it() {
    let mut h = host();
    let a = active(&mut h, "s", "a");
    let b = h.submit(Submit::new("s", "b").with_mode(Mode::OwnTurn));
    let c = h.submit(Submit::new("s", "c"));
    h.prepare(b);
    let other = active(&mut h, "t", "elsewhere");
    let out = h.send(Input::Cancel { session: SessionId::new("s"), up_to: None });
    assert_eq!(
        kinds(&out),
        [
            "abort_step #1 turn 1 step 0 attempt 0",
            "abort_preparation #3",
            "store message_finished #1",
            "store flush",
            "store ledger_outcome #1",
            "commit",
            "finished #1 Cancelled",
            "store ledger_outcome #2",
            "commit",
            "finished #2 Cancelled",
            "store ledger_outcome #3",
            "commit",
            "finished #3 Cancelled",
        ],
        "aborts first, then outcomes ascending by sequence (SPEC 7)"
    );
    assert_eq!((h.outcome(a), h.outcome(b)), (Some(Outcome::Cancelled), Some(Outcome::Cancelled)));
    assert_eq!(h.outcome(other), None, "another session is untouched");
    let late = Input::Prepared { session: SessionId::new("s"), seq: c, setup: Default::default() };
    assert!(h.send(late).is_empty(), "a preparation reply after the cancel is ignored");
    let d = active(&mut h, "s", "d");
    h.finish(d, FinishReason::Stop);
    assert_eq!(h.outcome(d), Some(Outcome::Completed), "a later submission is never affected (I4)");
}

#[test]
fn an_idle_cancel_changes_nothing() {
    let mut h = host();
    assert!(h.send(Input::Cancel { session: SessionId::new("s"), up_to: None }).is_empty());
    let a = active(&mut h, "s", "a");
    h.finish(a, FinishReason::Stop);
    assert!(h.send(Input::Cancel { session: SessionId::new("s"), up_to: None }).is_empty());
    let b = active(&mut h, "s", "b");
    h.finish(b, FinishReason::Stop);
    assert_eq!(
        h.outcome(b),
        Some(Outcome::Completed),
        "an idle Escape does not poison the next prompt (I10)"
    );
}

#[test]
fn a_cancel_with_running_tools_left_to_finish_waits_for_them_within_the_grace() {
    let mut h = host();
    let a = active(&mut h, "s", "a");
    h.tool_call(a, "t1", "write");
    h.tool_call(a, "t2", "write");
    h.finish(a, FinishReason::ToolCalls);
    let out = h.send(Input::Cancel { session: SessionId::new("s"), up_to: None });
    assert_eq!(kinds(&out), ["set_timer"], "a tool left to finish is not aborted (SPEC 4.9)");
    assert!(h.engine.is_busy(&SessionId::new("s")), "a turn in clean-up keeps the session busy");
    let late_but_in_time = h.tool_result(a, "t1", ToolOutput::ok("it ran"));
    assert!(
        matches!(
            &late_but_in_time[0].kind,
            OutputKind::Store(StoreOp::ToolResult { synthetic: false, .. })
        ),
        "a tool that really ran is recorded as it reported"
    );
    let out = h.tool_result(a, "t2", ToolOutput::ok("so did this"));
    let k = kinds(&out);
    assert_eq!(
        k[..4],
        ["cancel_timer", "store tool_result #1", "store message_finished #1", "store flush"],
        "the last result joins the final transaction; tool_use becomes canceled (SPEC 4.9)"
    );
    assert!(k.contains(&"finished #1 Cancelled".to_owned()));
}

#[test]
fn a_cancel_drops_the_calls_the_host_drops_and_ends_the_turn_at_once() {
    let mut h = host();
    let a = h.submit(Submit::new("s", "a").with_run_id("ra"));
    h.prepare(a);
    let b = h.submit(Submit::new("s", "b").with_run_id("rb"));
    h.prepare(b);
    h.tool_call(a, "t1", "bash");
    h.tool_call(a, "t2", "grep");
    h.finish(a, FinishReason::ToolCalls);
    let out = h.send(Input::CancelRun { run_id: turnstile_core::RunId::new("ra") });
    let k = kinds(&out);
    assert_eq!(k[..2], ["abort_tool #1 t1", "abort_tool #1 t2"]);
    assert!(!k.iter().any(|k| k == "set_timer"), "no grace: nothing can still report: {k:?}");
    let done = "finished #1 Cancelled +RunComplete".to_owned();
    assert!(k.contains(&done), "clean-up in the same transition: {k:?}");
    assert!(
        out.iter().any(|o| matches!(&o.kind, OutputKind::StartStep { step } if step.seq == b)),
        "and the hand-off too: the next run starts at once"
    );
    let call = |id: &str| turnstile_core::CallIo {
        session: SessionId::new("s"),
        seq: a,
        turn: turnstile_core::TurnId(1),
        step: 0,
        call: turnstile_core::CallId::new(id),
    };
    let late = h.send(Input::ToolResult { call: call("t1"), result: ToolOutput::ok("late") });
    assert!(late.is_empty(), "a dropped call's result is stale (I13)");
}

#[test]
fn a_cancel_aborts_the_droppable_calls_and_waits_only_for_the_one_left_to_finish() {
    let mut h = host();
    let a = active(&mut h, "s", "a");
    h.tool_call(a, "t1", "bash");
    h.tool_call(a, "t2", "write");
    h.finish(a, FinishReason::ToolCalls);
    let out = h.send(Input::Cancel { session: SessionId::new("s"), up_to: None });
    assert_eq!(kinds(&out), ["abort_tool #1 t1", "set_timer"]);
    let out = h.tool_result(a, "t2", ToolOutput::ok("written"));
    let k = kinds(&out);
    assert_eq!(
        k[..4],
        [
            "cancel_timer",
            "store tool_result #1",
            "store tool_result #1",
            "store message_finished #1"
        ],
        "the real result, then the dropped call's synthetic one"
    );
    let results: Vec<(String, bool)> = out
        .iter()
        .filter_map(|o| match &o.kind {
            OutputKind::Store(StoreOp::ToolResult { call, synthetic, .. }) => {
                Some((call.as_str().to_owned(), *synthetic))
            }
            _ => None,
        })
        .collect();
    assert_eq!(results, [("t2".to_owned(), false), ("t1".to_owned(), true)]);
    assert_eq!(h.outcome(a), Some(Outcome::Cancelled));
}

#[test]
fn the_grace_timer_cleans_up_with_synthetic_results_and_later_results_are_ignored() {
    let mut h = host();
    let a = active(&mut h, "s", "a");
    h.tool_call(a, "t1", "write");
    h.finish(a, FinishReason::ToolCalls);
    let call = h.tools[0].0.clone();
    h.send(Input::Cancel { session: SessionId::new("s"), up_to: None });
    assert!(!h.fire_next_timer().is_empty());
    let synthetic = h.log.iter().any(|o| {
        matches!(&o.kind, OutputKind::Store(StoreOp::ToolResult { content, synthetic: true, .. })
        if content == turnstile_core::CANCELLED_TOOL_RESULT)
    });
    assert!(synthetic);
    assert_eq!(h.outcome(a), Some(Outcome::Cancelled));
    assert!(
        h.send(Input::ToolResult { call, result: ToolOutput::ok("too late") }).is_empty(),
        "never written after clean-up"
    );
}

#[test]
fn a_timer_reported_early_is_host_misuse_and_changes_nothing() {
    let mut h = host();
    let a = active(&mut h, "s", "a");
    h.tool_call(a, "t1", "write");
    h.finish(a, FinishReason::ToolCalls);
    h.send(Input::Cancel { session: SessionId::new("s"), up_to: None });
    let timer = *h.timers.keys().next().expect("timer");
    let err = h.engine.handle(Millis(1), Input::TimerFired { timer }).expect_err("early");
    assert!(matches!(err, HostError::TimerNotDue { .. }));
    assert!(h.engine.poll_output().is_none());
    assert!(
        h.engine.handle(Millis(0), Input::Shutdown).is_ok(),
        "time did not move: the failed input left no trace"
    );
    let err = h.engine.handle(Millis(0).plus_ms(0), Input::Shutdown);
    assert!(err.is_ok());
}

#[test]
fn time_going_backwards_is_host_misuse_and_changes_nothing() {
    let mut h = host();
    h.advance(10);
    h.submit(Submit::new("s", "a"));
    let before = h.engine.unfinished();
    let err =
        h.engine.handle(Millis(5), Input::Submit(Submit::new("s", "b"))).expect_err("backwards");
    assert_eq!(err, HostError::TimeWentBackwards { last: Millis(10), now: Millis(5) });
    assert!(h.engine.poll_output().is_none());
    assert_eq!(h.engine.unfinished(), before);
}

#[test]
fn cancel_run_cancels_exactly_its_run() {
    let mut h = host();
    let a = h.submit(Submit::new("s", "a").with_run_id("ra"));
    let b = h.submit(Submit::new("s", "b").with_run_id("rb"));
    let c = h.submit(Submit::new("s", "c").with_run_id("rc"));
    h.prepare(a);
    h.prepare(b);
    let out = h.send(Input::CancelRun { run_id: RunId::new("rb") });
    assert_eq!(
        kinds(&out),
        ["store ledger_outcome #2", "commit", "finished #2 Cancelled +RunComplete"]
    );
    let out = h.send(Input::CancelRun { run_id: RunId::new("ra") });
    assert!(kinds(&out).contains(&"finished #1 Cancelled +RunComplete".to_owned()));
    assert_eq!(h.outcome(c), None);
    assert!(
        h.send(Input::CancelRun { run_id: RunId::new("ra") }).is_empty(),
        "a finished run: no-op"
    );
    assert!(
        h.send(Input::CancelRun { run_id: RunId::new("nope") }).is_empty(),
        "an unknown run: no-op"
    );
    h.prepare(c);
    h.finish(c, FinishReason::Stop);
    assert_eq!(h.outcome(c), Some(Outcome::Completed));
}

#[test]
fn clear_queue_ends_waiting_submissions_and_leaves_the_active_turn() {
    let mut h = host();
    let a = active(&mut h, "s", "a");
    let b = h.submit(Submit::new("s", "b"));
    let c = h.submit(Submit::new("s", "c").with_run_id("rc"));
    h.prepare(c);
    let out = h.send(Input::ClearQueue { session: SessionId::new("s") });
    assert_eq!(kinds(&out)[0], "abort_preparation #2");
    assert_eq!((h.outcome(b), h.outcome(c)), (Some(Outcome::Cancelled), Some(Outcome::Cancelled)));
    assert_eq!(h.outcome(a), None);
    h.finish(a, FinishReason::Stop);
    assert_eq!(h.outcome(a), Some(Outcome::Completed));
}

#[test]
fn shutdown_interrupts_everything_and_every_run_gets_its_run_complete() {
    let mut h = host();
    let a = h.submit(Submit::new("s", "a").with_run_id("ra"));
    h.prepare(a);
    h.tool_call(a, "t1", "write");
    h.finish(a, FinishReason::ToolCalls);
    let b = h.submit(Submit::new("s", "b").with_run_id("rb"));
    let c = active(&mut h, "t", "c");
    let out = h.send(Input::Shutdown);
    let k = kinds(&out);
    assert_eq!(k[..2], ["abort_preparation #2", "abort_step #3 turn 2 step 0 attempt 0"]);
    assert_eq!(k.last().map(String::as_str), Some("set_timer"), "the shutdown deadline");
    assert_eq!(h.outcome(b), Some(Outcome::Interrupted));
    assert_eq!(h.outcome(c), Some(Outcome::Interrupted));
    assert_eq!(h.outcome(a), None, "the active turn waits for its tool or the deadline");
    let out = h.fire_next_timer();
    assert_eq!(kinds(&out).last().map(String::as_str), Some("stopped"));
    let e = h.finished[&a].error().cloned().expect("interrupted carries an error");
    assert_eq!(
        (e.kind, e.title.as_str(), e.message.as_str()),
        (ErrorKind::Interrupted, "Interrupted", "Interrupted by shutdown")
    );
    assert!(h.engine.is_stopped());
    assert!(h.send(Input::Shutdown).is_empty(), "shutdown is idempotent");
}

#[test]
fn shutdown_with_nothing_running_stops_at_once() {
    let mut h = host();
    let out = h.send(Input::Shutdown);
    assert_eq!(kinds(&out), ["stopped"]);
}

#[test]
fn an_external_acceptors_watermark_cancels_late_arrivals_and_then_is_dropped() {
    let mut h = Host::new(Config { acceptor: Acceptor::External, ..no_watchdog() });
    let mut s5 = Submit::new("s", "five");
    s5.seq = Some(Seq(5));
    let mut s6 = Submit::new("s", "six");
    s6.seq = Some(Seq(6));
    assert!(h.send(Input::Cancel { session: SessionId::new("s"), up_to: Some(Seq(5)) }).is_empty());
    let out = h.send(Input::Submit(s5));
    assert_eq!(
        kinds(&out),
        ["reply accepted", "store ledger_outcome #5", "commit", "finished #5 Cancelled"]
    );
    let out = h.send(Input::Submit(s6));
    assert_eq!(kinds(&out), ["reply accepted", "prepare #6"], "above the watermark: untouched");
    let mut s4 = Submit::new("s", "four");
    s4.seq = Some(Seq(4));
    assert!(matches!(
        h.engine.handle(h.now, Input::Submit(s4)),
        Err(HostError::SequenceNotIncreasing { .. })
    ));
    assert!(matches!(
        h.engine.handle(h.now, Input::Submit(Submit::new("s", "no sequence"))),
        Err(HostError::WrongAcceptor { .. })
    ));
}

#[test]
fn with_the_core_as_acceptor_sequences_and_future_watermarks_are_host_misuse() {
    let mut h = host();
    h.submit(Submit::new("s", "a"));
    let mut with_seq = Submit::new("s", "b");
    with_seq.seq = Some(Seq(9));
    assert!(matches!(
        h.engine.handle(h.now, Input::Submit(with_seq)),
        Err(HostError::WrongAcceptor { .. })
    ));
    let ahead = Input::Cancel { session: SessionId::new("s"), up_to: Some(Seq(2)) };
    let err = h.engine.handle(h.now, ahead).expect_err("ahead");
    assert_eq!(err, HostError::WatermarkAhead { up_to: Seq(2), newest: Some(Seq(1)) });
    assert_eq!(err.to_string(), "cancel watermark 2 is above the newest sequence 1");
    assert!(h.engine.poll_output().is_none());
    assert_eq!(h.engine.newest_seq(), Some(Seq(1)));
}

#[test]
fn a_reply_for_an_aborted_attempt_is_ignored() {
    let mut h = host();
    let a = active(&mut h, "s", "a");
    let step = h.step_of(a);
    h.send(Input::Cancel { session: SessionId::new("s"), up_to: None });
    let stale =
        Input::Step { step, event: turnstile_core::StepEvent::TextDelta { text: "ghost".into() } };
    assert!(h.send(stale).is_empty());
}

#[test]
fn the_same_inputs_give_byte_identical_outputs() {
    let run = || {
        let mut h = host();
        let a = active(&mut h, "s", "a");
        let b = h.submit(Submit::new("s", "b").with_run_id("r"));
        h.tool_call(a, "t", "edit");
        h.finish(a, FinishReason::ToolCalls);
        h.prepare(b);
        h.send(Input::Cancel { session: SessionId::new("s"), up_to: None });
        h.fire_next_timer();
        let c = active(&mut h, "s", "c");
        h.finish(c, FinishReason::Stop);
        serde_json::to_string(&h.log).expect("json")
    };
    assert_eq!(run(), run());
}

#[test]
fn attachments_are_written_once_with_the_user_message_of_an_activated_or_folded_submission() {
    let mut h = host();
    let file = Attachment {
        name: "notes.txt".into(),
        media_type: "text/plain".into(),
        content: "hi".into(),
    };
    let mut first = Submit::new("s", "read this").with_mode(Mode::OwnTurn);
    first.attachments.push(file.clone());
    let mut follow = Submit::new("s", "and this");
    follow.attachments.push(file.clone());
    let a = h.submit(first);
    let b = h.submit(follow);
    h.prepare(b);
    let out = h.prepare(a);
    let written: Vec<(Seq, usize)> = out
        .iter()
        .filter_map(|o| match &o.kind {
            OutputKind::Store(StoreOp::UserMessage { seq, attachments, .. }) => {
                Some((*seq, attachments.len()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        written,
        [(a, 1), (b, 1)],
        "the activated prompt and the folded one keep their files"
    );
}

/// A start state that leaves no room for the next number is refused, naming the field.
#[test]
fn a_start_state_at_a_counters_end_is_refused_naming_the_field() {
    let engine = |start: Start| turnstile_core::Engine::new(no_watchdog(), start);
    let field = |start: Start| match engine(start) {
        Err(HostError::InvalidStart { field, .. }) => field,
        other => panic!("expected InvalidStart, got {other:?}"),
    };
    assert_eq!(field(Start { next_seq: Some(Seq(0)), ..Start::default() }), "next_seq");
    assert_eq!(field(Start { next_seq: Some(Seq(u64::MAX)), ..Start::default() }), "next_seq");
    let message =
        |m| Start { next_message: Some(turnstile_core::MessageId(m)), ..Start::default() };
    assert_eq!(field(message(0)), "next_message");
    assert_eq!(field(message(u64::MAX)), "next_message");
    let err = engine(Start { next_seq: Some(Seq(u64::MAX)), ..Start::default() });
    let text = err.expect_err("refused").to_string();
    assert_eq!(
        text,
        "invalid start state: next_seq must be below u64::MAX: no sequence could follow it"
    );
    assert!(engine(Start { next_seq: Some(Seq(u64::MAX - 1)), ..Start::default() }).is_ok());
}

/// A counter that reaches its maximum fails the engine with `Exhausted` naming it: the
/// transition that needed the next value is discarded (no output, so no wrapped or repeated
/// number leaves the core), and every later input gets the same error. Nothing panics.
#[test]
fn a_counter_at_its_maximum_fails_the_engine_instead_of_wrapping() {
    // Sequences: the last one is assigned, the one after it cannot be.
    let start = Start { next_seq: Some(Seq(u64::MAX - 1)), ..Start::default() };
    let mut e = turnstile_core::Engine::new(no_watchdog(), start).expect("valid");
    e.handle(Millis(0), Input::Submit(Submit::new("s", "a"))).expect("the last sequence");
    let accepted: Vec<_> = std::iter::from_fn(|| e.poll_output()).collect();
    assert!(
        matches!(&accepted[0].kind, OutputKind::Reply(Reply::Accepted { seq, .. }) if *seq == Seq(u64::MAX - 1))
    );
    let exhausted = HostError::Exhausted { counter: "next_seq" };
    assert_eq!(e.handle(Millis(0), Input::Submit(Submit::new("s", "b"))), Err(exhausted.clone()));
    assert!(e.poll_output().is_none(), "the failed transition emits nothing");
    assert_eq!(e.handle(Millis(1), Input::Shutdown), Err(exhausted), "the engine stays failed");
    assert_eq!(e.config(), &no_watchdog(), "its configuration is still readable");
    assert!(turnstile_core::check_invariants(&e).is_err(), "the checker reports the failure");

    // Message ids: an activation needs two (the user and the assistant message).
    let next_message = Some(turnstile_core::MessageId(u64::MAX - 1));
    let mut e =
        turnstile_core::Engine::new(no_watchdog(), Start { next_message, ..Start::default() })
            .expect("valid");
    e.handle(Millis(0), Input::Submit(Submit::new("s", "a"))).expect("accepted");
    while e.poll_output().is_some() {}
    let prepared =
        Input::Prepared { session: SessionId::new("s"), seq: Seq(1), setup: Default::default() };
    assert_eq!(
        e.handle(Millis(0), prepared),
        Err(HostError::Exhausted { counter: "next_message" })
    );
    assert!(e.poll_output().is_none());
}

/// I14: the auditor refuses a stream in which a message id does not increase (an engine that
/// wrapped a counter, or a host that restarted without the store's `next_message`).
#[test]
fn the_auditor_refuses_a_message_id_that_does_not_increase() {
    let mut h = host();
    let a = active(&mut h, "s", "a");
    h.finish(a, FinishReason::Stop);
    let ids: Vec<u64> = h
        .log
        .iter()
        .filter_map(|o| match &o.kind {
            OutputKind::Store(
                StoreOp::UserMessage { id, .. } | StoreOp::AssistantMessage { id, .. },
            ) => Some(id.0),
            _ => None,
        })
        .collect();
    assert_eq!(ids, [1, 2], "the engine assigns increasing ids");
    let mut auditor = turnstile_core::Auditor::new(&Start::default());
    let submit = Input::Submit(Submit::new("s", "a").with_mode(Mode::OwnTurn));
    let (first, rest): (Vec<_>, Vec<_>) = h.log.iter().cloned().partition(|o| o.no < 2);
    auditor.observe(&submit, &first).expect("the acceptance");
    let mut forged = rest.clone();
    for o in &mut forged {
        if let OutputKind::Store(StoreOp::AssistantMessage { id, .. }) = &mut o.kind {
            *id = turnstile_core::MessageId(1); // the user message's id again
        }
    }
    let prepared = Input::Prepared { session: SessionId::new("s"), seq: a, setup: h.setup.clone() };
    let v = auditor.observe(&prepared, &forged.clone()).expect_err("a repeated id");
    assert_eq!(v.invariant, "I14");
    assert_eq!(v.detail, "message id 1 was assigned twice in one transition");

    // A later transition must assign ids above every earlier one (a host that restarted the
    // engine without the store's `next_message` would reuse them).
    let mut auditor = turnstile_core::Auditor::new(&Start::default());
    auditor.observe(&submit, &first).expect("the acceptance");
    auditor.observe(&prepared, &rest).expect("the turn, as the engine produced it");
    let again = Input::Submit(Submit::new("s", "b").with_mode(Mode::OwnTurn));
    let reused = first
        .iter()
        .cloned()
        .map(|mut o| {
            if let OutputKind::Reply(Reply::Accepted { seq, .. }) = &mut o.kind {
                *seq = Seq(2);
            }
            if let OutputKind::Prepare { seq, .. } = &mut o.kind {
                *seq = Seq(2);
            }
            o
        })
        .collect::<Vec<_>>();
    auditor.observe(&again, &reused).expect("the second acceptance");
    let mut old = rest.clone();
    for o in &mut old {
        match &mut o.kind {
            OutputKind::Store(
                StoreOp::UserMessage { seq, .. } | StoreOp::AssistantMessage { seq, .. },
            )
            | OutputKind::Store(StoreOp::LedgerActivated { seq, .. }) => *seq = Seq(2),
            _ => {}
        }
    }
    let prepared_b =
        Input::Prepared { session: SessionId::new("s"), seq: Seq(2), setup: h.setup.clone() };
    let v = auditor.observe(&prepared_b, &old).expect_err("ids of an earlier transition");
    assert_eq!(v.invariant, "I14");
    assert!(v.detail.contains("id 1 is not above the newest one"), "{}", v.detail);
}
