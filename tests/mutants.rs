//! Every mutant of the core (SPEC 10) makes an observable difference: one scenario per mutant,
//! run on a correct engine and on one with the mutant switched on, asserting the difference the
//! bug predicts (a missing or second completion, another activation order, a missing write).
//!
//! Both engines run in a lenient host, which records broken invariants instead of panicking.
//! The correct run must break none; neither run may crash inside a transition.
#![cfg(feature = "mutants")]

use turnstile_core::{
    Acceptor, CallIo, Config, ErrorClass, ErrorKind, FinishReason, Input, Mode, Mutant, Outcome,
    OutputKind, RunId, Seq, SessionId, StoreOp, Submit, ToolOutput, ToolSpec,
};
use turnstile_tests::harness::{Host, short};

/// A lenient host whose engine has `mutant` (or none), and, when given, this context window.
/// The stream watchdog is off (10 s for its own mutant's pair): the scenarios pin other rules'
/// outputs. The core is the acceptor, except for the mutants that need an external one.
fn host(mutant: Option<Mutant>, window: Option<u64>, watchdog: bool, external: bool) -> Host {
    let stream_idle_timeout_ms = if watchdog { 10_000 } else { 0 };
    let acceptor = if external { Acceptor::External } else { Acceptor::Core };
    let config = Config { mutant, stream_idle_timeout_ms, acceptor, ..Config::default() };
    let mut h = Host::lenient(config);
    if let Some(w) = window {
        h.setup.context_window = w;
    }
    h
}

/// A lenient host with a step limit of 2 (SPEC 4.6) and, when given, this context window.
fn step_limited(mutant: Option<Mutant>, window: Option<u64>) -> Host {
    let config = Config { mutant, stream_idle_timeout_ms: 0, step_limit: 2, ..Config::default() };
    let mut h = Host::lenient(config);
    if let Some(w) = window {
        h.setup.context_window = w;
    }
    h
}

/// Runs `script` on a correct engine and on one with `m`; returns what the script returned and
/// both hosts. The correct run breaks no invariant; neither run crashes.
fn pair<T>(m: Mutant, window: Option<u64>, script: impl Fn(&mut Host) -> T) -> [(T, Host); 2] {
    let runs = [None, Some(m)].map(|mutant| {
        let watchdog = matches!(m, Mutant::WatchdogNotExtended | Mutant::WatchdogNeverDisarmed);
        let external = matches!(
            m,
            Mutant::WatermarkDroppedEarly
                | Mutant::CoveredLateSubmissionRuns
                | Mutant::WatermarkOffByOne
                | Mutant::WatermarkIgnoresSequence
        );
        let mut h = host(mutant, window, watchdog, external);
        if matches!(m, Mutant::TitleCancelledWithTurn | Mutant::TitleRequestedAgain) {
            h.setup.titled = false; // the store has no title for the session yet
        }
        if matches!(m, Mutant::StepLimitPerTurn | Mutant::StepLimitAfterEnd) {
            h = step_limited(mutant, window);
        }
        (script(&mut h), h)
    });
    assert_eq!(runs[0].1.violations, Vec::<String>::new(), "the correct engine breaks nothing");
    assert!(runs[1].1.crashes().is_empty(), "{}: {:?}", m.name(), runs[1].1.crashes());
    runs
}

fn kinds(outs: &[turnstile_core::Output]) -> Vec<String> {
    outs.iter().map(|o| short(&o.kind)).collect()
}

fn log(h: &Host) -> Vec<String> {
    kinds(&h.log)
}

fn own(h: &mut Host, session: &str, prompt: &str) -> Seq {
    h.submit(Submit::new(session, prompt).with_mode(Mode::OwnTurn))
}

/// Submits an own-turn prompt and prepares it.
fn active(h: &mut Host, session: &str) -> Seq {
    let seq = own(h, session, "go");
    h.prepare(seq);
    seq
}

fn cancel(h: &mut Host, session: &str) -> Vec<String> {
    kinds(&h.send(Input::Cancel { session: SessionId::new(session), up_to: None }))
}

/// The sequences activated, in order (a resumed submission appears again).
fn activations(h: &Host) -> Vec<u64> {
    h.log
        .iter()
        .filter_map(|o| match &o.kind {
            OutputKind::Store(StoreOp::LedgerActivated { seq, .. }) => Some(seq.0),
            _ => None,
        })
        .collect()
}

/// Every completion published for `seq`, in order.
fn completions(h: &Host, seq: Seq) -> Vec<Outcome> {
    h.log
        .iter()
        .filter_map(|o| match &o.kind {
            OutputKind::Finished(c) if c.seq() == seq => Some(c.outcome()),
            _ => None,
        })
        .collect()
}

/// Tool results written for `call`, as (content, synthetic).
fn results(h: &Host, call: &str) -> Vec<(String, bool)> {
    h.log
        .iter()
        .filter_map(|o| match &o.kind {
            OutputKind::Store(StoreOp::ToolResult { call: c, content, synthetic, .. })
                if c.as_str() == call =>
            {
                Some((content.clone(), *synthetic))
            }
            _ => None,
        })
        .collect()
}

/// Finishes every live step with `stop`, until none is left or `max` were finished.
fn finish_all(h: &mut Host, max: usize) {
    for _ in 0..max {
        let Some(step) = h.steps.first().cloned() else { return };
        h.finish(step.seq, FinishReason::Stop);
    }
}

/// A tool call that runs: `c1` to `ls`, and the stream's `tool_calls` finish.
/// A running call `c1` of a tool left to finish (`write`): a cancel waits for it.
fn running_tool(h: &mut Host, seq: Seq) -> CallIo {
    h.tool_call(seq, "c1", "write");
    h.finish(seq, FinishReason::ToolCalls);
    h.tools.iter().find(|t| t.0.seq == seq).map(|t| t.0.clone()).expect("c1 runs")
}

#[test]
fn the_catalogue_has_distinct_names_and_explanations() {
    assert!(Mutant::ALL.len() >= 12, "{} mutants", Mutant::ALL.len());
    let mut names: Vec<&str> = Mutant::ALL.iter().map(|m| m.name()).collect();
    for m in Mutant::ALL {
        assert!(!m.explain().trim().is_empty(), "{} has no explanation", m.name());
        assert_eq!(serde_json::to_value(m).expect("json"), m.name(), "serde name of {m:?}");
    }
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), Mutant::ALL.len(), "names are distinct");
}

#[test]
fn cancel_flag_cancels_the_next_submission_after_an_idle_cancel() {
    let [(good, _), (bad, _)] = pair(Mutant::CancelFlag, None, |h| {
        assert!(cancel(h, "s").is_empty(), "an idle cancel says nothing");
        let out = h.send(Input::Submit(Submit::new("s", "after")));
        kinds(&out)
    });
    assert_eq!(good, ["reply accepted", "prepare #1"]);
    assert_eq!(
        bad,
        ["reply accepted", "store ledger_outcome #1", "commit", "finished #1 Cancelled"],
        "I10: the idle cancel poisoned the next prompt"
    );
}

#[test]
fn watermark_first_only_leaves_later_covered_submissions_running() {
    let [(_, good), (_, bad)] = pair(Mutant::WatermarkFirstOnly, None, |h| {
        let a = active(h, "s");
        own(h, "s", "b");
        own(h, "s", "c");
        cancel(h, "s");
        a
    });
    for s in 1..=3 {
        assert_eq!(completions(&good, Seq(s)), [Outcome::Cancelled]);
    }
    assert_eq!(completions(&bad, Seq(1)), [Outcome::Cancelled], "the oldest is cancelled");
    assert!(
        completions(&bad, Seq(2)).is_empty() && completions(&bad, Seq(3)).is_empty(),
        "I4: #2 and #3 were covered and survive"
    );
    assert_eq!(bad.engine.unfinished(), 2);
}

#[test]
fn fold_run_ids_folds_a_submission_with_a_run_id() {
    let [(b, good), (_, bad)] = pair(Mutant::FoldRunIds, None, |h| {
        let a = active(h, "s");
        let b = h.submit(Submit::new("s", "b").with_run_id("r"));
        h.prepare(b);
        let call = running_tool(h, a);
        h.send(Input::ToolResult { call, result: ToolOutput::ok("x") });
        finish_all(h, 4);
        b
    });
    assert!(good.replies.iter().any(|r| matches!(
        r,
        turnstile_core::Reply::Accepted { mode: Mode::OwnTurn, run_id: Some(_), .. }
    )));
    assert!(bad.replies.iter().any(|r| matches!(
        r,
        turnstile_core::Reply::Accepted { mode: Mode::Fold, run_id: Some(_), .. }
    )));
    assert_eq!(completions(&good, b), [Outcome::Completed]);
    assert_eq!(activations(&good), [1, 2], "its own turn");
    assert_eq!(completions(&bad, b), [Outcome::Folded], "SPEC 3: folded into #1's turn");
    assert!(bad.finished[&b].is_run_complete(), "its RunComplete says folded");
    assert_eq!(activations(&bad), [1]);
}

#[test]
fn complete_on_pause_completes_a_paused_submission_early_and_again_at_its_end() {
    let [(_, good), (_, bad)] = pair(Mutant::CompleteOnPause, Some(1_000), |h| {
        let a = h.submit(Submit::new("s", "fix").with_run_id("r"));
        h.prepare(a);
        h.tool_step_using(a, "c1", 950);
        h.summary_done(40);
        finish_all(h, 2);
    });
    assert_eq!(completions(&good, Seq(1)), [Outcome::Completed]);
    assert_eq!(completions(&bad, Seq(1)), [Outcome::Completed, Outcome::Completed], "I1");
    let k = log(&bad);
    let first = k.iter().position(|x| x == "finished #1 Completed +RunComplete");
    let summary = k.iter().position(|x| x == "start_summary");
    assert!(first < summary, "I11: the RunComplete came at the pause: {k:?}");
    assert!(bad.violations.iter().any(|v| v.contains("second completion for 1")));
}

#[test]
fn skip_handoff_on_error_strands_the_prepared_queue_after_a_failure() {
    let [(out, good), (bad_out, bad)] = pair(Mutant::SkipHandoffOnError, None, |h| {
        let a = active(h, "s");
        let b = own(h, "s", "b");
        h.prepare(b);
        kinds(&h.fail_step(a, ErrorClass::Provider))
    });
    assert!(out.contains(&"finished #1 Failed".to_owned()));
    assert!(out.contains(&"store ledger_activated #2".to_owned()), "{out:?}");
    assert!(bad_out.contains(&"finished #1 Failed".to_owned()));
    assert!(!bad_out.iter().any(|k| k.contains("ledger_activated")), "G-01: {bad_out:?}");
    assert!(good.engine.has_active_turn(&SessionId::new("s")));
    assert!(!bad.engine.has_active_turn(&SessionId::new("s")), "#2 is stranded");
}

/// Three own turns prepared in the order 3, 2, 1; then every turn ends.
fn prepared_backwards(h: &mut Host) {
    let seqs = [own(h, "s", "a"), own(h, "s", "b"), own(h, "s", "c")];
    for seq in seqs.iter().rev() {
        h.prepare(*seq);
    }
    finish_all(h, 6);
}

#[test]
fn requeue_head_at_back_lets_later_entries_overtake_a_preparing_head() {
    let [(_, good), (_, bad)] = pair(Mutant::RequeueHeadAtBack, None, prepared_backwards);
    assert_eq!(activations(&good), [1, 2, 3]);
    // Preparing #3 sends the preparing #1 to the back; #2 then heads and runs, then #3.
    assert_eq!(activations(&bad), [2, 3, 1], "I7, G-16");
}

#[test]
fn admit_in_preparation_order_runs_whatever_is_prepared_first() {
    let [(_, good), (_, bad)] = pair(Mutant::AdmitInPreparationOrder, None, prepared_backwards);
    assert_eq!(activations(&good), [1, 2, 3]);
    assert_eq!(activations(&bad), [3, 1, 2], "I7, G-16: #3 was prepared first");
}

#[test]
fn no_synthetic_result_leaves_an_aborted_call_without_a_result() {
    let [(_, good), (_, bad)] = pair(Mutant::NoSyntheticResult, None, |h| {
        let a = active(h, "s");
        running_tool(h, a);
        cancel(h, "s");
        h.fire_next_timer(); // the grace timer: clean-up
    });
    let synthetic = ("Error: user cancelled assistant tool calling".to_owned(), true);
    assert_eq!(results(&good, "c1"), [synthetic]);
    assert_eq!(results(&bad, "c1"), [], "I8: the call has no result");
    assert_eq!(completions(&bad, Seq(1)), [Outcome::Cancelled]);
}

#[test]
fn complete_before_flush_publishes_the_completion_before_its_writes() {
    let [(good, _), (bad, _)] = pair(Mutant::CompleteBeforeFlush, None, |h| {
        let a = active(h, "s");
        h.text(a, "done");
        kinds(&h.finish(a, FinishReason::Stop))
    });
    let tail = ["store flush", "store ledger_outcome #1", "commit", "finished #1 Completed"];
    assert_eq!(good[good.len() - 4..], tail);
    let early = ["finished #1 Completed", "store flush", "store ledger_outcome #1", "commit"];
    assert_eq!(bad[bad.len() - 4..], early, "I9: {bad:?}");
}

#[test]
fn late_tool_result_written_writes_a_result_after_clean_up() {
    let [(good, _), (bad, b)] = pair(Mutant::LateToolResultWritten, None, |h| {
        let a = active(h, "s");
        let call = running_tool(h, a);
        cancel(h, "s");
        h.fire_next_timer(); // clean-up writes the synthetic result
        kinds(&h.send(Input::ToolResult { call, result: ToolOutput::ok("late") }))
    });
    assert_eq!(good, Vec::<String>::new(), "I13: stale, no output");
    assert_eq!(bad, ["store tool_result #1", "commit"]);
    assert_eq!(results(&b, "c1").len(), 2, "two results for one call");
}

#[test]
fn waits_for_dropped_tools_holds_a_cancel_for_the_whole_grace() {
    let [(good, _), (bad, _)] = pair(Mutant::WaitsForDroppedTools, None, |h| {
        let a = active(h, "s");
        h.tool_call(a, "c1", "bash"); // dropped on abort
        h.finish(a, FinishReason::ToolCalls);
        kinds(&h.send(Input::Cancel { session: SessionId::new("s"), up_to: None }))
    });
    assert_eq!(good[0], "abort_tool #1 c1");
    assert!(good.contains(&"finished #1 Cancelled".to_owned()), "ends at once: {good:?}");
    assert_eq!(bad, ["abort_tool #1 c1", "set_timer"], "waits 5 s for a call that cannot report");
}

#[test]
fn summary_cancel_continues_resumes_a_cancelled_paused_submission() {
    let [(good, g), (bad, b)] = pair(Mutant::SummaryCancelContinues, Some(1_000), |h| {
        let a = h.submit(Submit::new("s", "fix").with_run_id("r"));
        h.prepare(a);
        h.tool_step_using(a, "c1", 950);
        let out = kinds(&h.send(Input::CancelRun { run_id: RunId::new("r") }));
        finish_all(h, 2);
        out
    });
    assert_eq!(good[..2], ["abort_summary", "store summary_deleted"]);
    assert!(good.contains(&"finished #1 Cancelled +RunComplete".to_owned()), "{good:?}");
    assert_eq!(bad[..2], ["abort_summary", "store summary_deleted"]);
    assert!(!bad.iter().any(|k| k.starts_with("finished")), "{bad:?}");
    assert!(bad.contains(&"store ledger_activated #1".to_owned()), "G-03: {bad:?}");
    assert_eq!(completions(&g, Seq(1)), [Outcome::Cancelled]);
    assert_eq!(completions(&b, Seq(1)), [Outcome::Completed], "the continuation ran");
}

#[test]
fn refresh_not_aborted_lets_a_cancel_wait_for_the_refresh() {
    let [(good, _), (bad, _)] = pair(Mutant::RefreshNotAborted, None, |h| {
        let a = active(h, "s");
        h.fail_step(a, ErrorClass::Unauthorized);
        let attempt = h.refreshes[0].clone();
        let cancelled = cancel(h, "s");
        let answered = kinds(&h.send(Input::CredentialsRefreshed { attempt, ok: true }));
        (cancelled, answered)
    });
    assert_eq!(good.0[0], "abort_refresh");
    assert!(good.0.contains(&"finished #1 Cancelled".to_owned()));
    assert_eq!(good.1, Vec::<String>::new(), "a late refresh is stale");
    assert_eq!(bad.0, Vec::<String>::new(), "G-13: the cancel does nothing yet");
    assert!(bad.1.contains(&"finished #1 Cancelled".to_owned()), "only now: {:?}", bad.1);
}

#[test]
fn refresh_without_reset_retries_onto_the_refused_attempts_content() {
    let [(good, _), (bad, _)] = pair(Mutant::RefreshWithoutReset, None, |h| {
        let a = active(h, "s");
        h.text(a, "half");
        h.fail_step(a, ErrorClass::Unauthorized);
        let attempt = h.refreshes[0].clone();
        kinds(&h.send(Input::CredentialsRefreshed { attempt, ok: true }))
    });
    assert_eq!(good, ["store message_reset #1", "commit", "start_step #1 turn 1 step 0 attempt 1"]);
    assert_eq!(bad, ["start_step #1 turn 1 step 0 attempt 1"], "G-21: no reset");
}

#[test]
fn queue_before_resume_runs_the_queue_head_before_the_paused_submission() {
    let [(_, good), (_, bad)] = pair(Mutant::QueueBeforeResume, Some(1_000), |h| {
        let a = h.submit(Submit::new("s", "fix").with_run_id("r"));
        h.prepare(a);
        let b = own(h, "s", "later");
        h.prepare(b);
        h.tool_step_using(a, "c1", 950);
        h.summary_done(40);
        finish_all(h, 4);
    });
    assert_eq!(activations(&good), [1, 1, 2], "#1 resumes first (I11)");
    assert_eq!(activations(&bad), [1, 2, 1], "G-25: #2 overtakes the paused #1");
    assert_eq!(completions(&bad, Seq(1)), [Outcome::Completed]);
}

#[test]
fn sticky_preparation_failure_fails_every_later_submission_of_the_session() {
    let [(good, _), (bad, b)] = pair(Mutant::StickyPreparationFailure, None, |h| {
        let a = own(h, "s", "a");
        h.fail_preparation(a, "no model");
        kinds(&h.send(Input::Submit(Submit::new("s", "b"))))
    });
    assert_eq!(good, ["reply accepted", "prepare #2"]);
    assert_eq!(
        bad,
        ["reply accepted", "store ledger_outcome #2", "commit", "finished #2 Failed"],
        "G-24"
    );
    let e = b.finished[&Seq(2)].error().cloned().expect("failed");
    assert_eq!((e.kind, e.message.as_str()), (ErrorKind::Preparation, "no model"));
}

#[test]
fn shutdown_swallows_waiting_leaves_a_run_without_its_run_complete() {
    let [(good, _), (bad, b)] = pair(Mutant::ShutdownSwallowsWaiting, None, |h| {
        h.submit(Submit::new("s", "a").with_run_id("r"));
        kinds(&h.send(Input::Shutdown))
    });
    assert_eq!(
        good,
        [
            "abort_preparation #1",
            "store ledger_outcome #1",
            "commit",
            "finished #1 Interrupted +RunComplete",
            "stopped"
        ]
    );
    assert_eq!(bad, ["stopped"], "G-20: no outcome, no RunComplete");
    assert_eq!(b.engine.unfinished(), 1);
}

#[test]
fn clear_skips_preparing_lets_a_cleared_prompt_run_later() {
    let [(_, good), (_, bad)] = pair(Mutant::ClearSkipsPreparing, None, |h| {
        active(h, "s");
        let b = own(h, "s", "b");
        let c = own(h, "s", "c");
        h.prepare(c);
        h.send(Input::ClearQueue { session: SessionId::new("s") });
        if h.prepares.iter().any(|p| p.1 == b) {
            h.prepare(b);
        }
        finish_all(h, 4);
    });
    assert_eq!(completions(&good, Seq(2)), [Outcome::Cancelled]);
    assert_eq!(completions(&good, Seq(3)), [Outcome::Cancelled]);
    assert_eq!(activations(&good), [1]);
    assert_eq!(completions(&bad, Seq(3)), [Outcome::Cancelled], "the prepared one is cleared");
    assert_eq!(completions(&bad, Seq(2)), [Outcome::Completed], "G-07: #2 survived the clear");
    assert_eq!(activations(&bad), [1, 2]);
}

#[test]
fn summarize_while_queued_summarizes_a_session_with_waiting_submissions() {
    let [(good, _), (bad, _)] = pair(Mutant::SummarizeWhileQueued, None, |h| {
        let a = own(h, "s", "a");
        let asked = kinds(&h.send(Input::Summarize { session: SessionId::new("s") }));
        let prepared = kinds(&h.prepare(a));
        (asked, prepared)
    });
    assert_eq!(good.0, ["reply rejected"], "busy: a submission waits");
    assert!(good.1.contains(&"store ledger_activated #1".to_owned()));
    assert_eq!(
        bad.0,
        ["reply summarizing", "store summary_message", "commit", "start_summary"],
        "G-05"
    );
    assert_eq!(bad.1, Vec::<String>::new(), "the prepared submission waits for the summary");
}

#[test]
fn retry_without_reset_appends_the_next_attempt_to_the_failed_one() {
    let [(good, _), (bad, _)] = pair(Mutant::RetryWithoutReset, None, |h| {
        let a = active(h, "s");
        h.text(a, "half");
        h.fail_step(a, ErrorClass::Transport);
        kinds(&h.fire_next_timer())
    });
    assert_eq!(good, ["store message_reset #1", "commit", "start_step #1 turn 1 step 0 attempt 1"]);
    assert_eq!(bad, ["start_step #1 turn 1 step 0 attempt 1"], "SPEC 4.5: no reset");
}

#[test]
fn watchdog_not_extended_kills_a_live_slow_stream() {
    // The idle timeout is 10 s here; a text delta 5 s into the attempt shows it alive.
    let [(good, g), (bad, _)] = pair(Mutant::WatchdogNotExtended, None, |h| {
        let a = active(h, "s");
        h.advance(5_000);
        h.text(a, "alive");
        kinds(&h.fire_next_timer())
    });
    let aborts = |k: &[String]| k.iter().any(|k| k.starts_with("abort_step"));
    assert_eq!(good, ["set_timer"], "SPEC 4.5: watched on from the delta, nothing else");
    assert!(!aborts(&good) && g.violations.is_empty());
    assert!(aborts(&bad), "the mutant kills the live stream: {bad:?}");
    assert!(bad.iter().any(|k| k == "set_timer"), "and backs off to retry it: {bad:?}");
}

#[test]
fn watchdog_never_disarmed_fails_the_next_step_early() {
    // The idle timeout is 10 s here. Step 0 finishes with a tool call at 1 s; the tool reports
    // at 9 s and step 1 starts; at 10 s step 0's watchdog, which nothing disarmed, fires.
    let [(good, g), (bad, _)] = pair(Mutant::WatchdogNeverDisarmed, None, |h| {
        let a = active(h, "s");
        h.advance(1_000);
        h.tool_call(a, "t1", "ls");
        let finished = kinds(&h.finish(a, FinishReason::ToolCalls));
        h.advance(8_000);
        h.tool_result(a, "t1", ToolOutput::ok("files"));
        let first = h
            .log
            .iter()
            .find_map(|o| match &o.kind {
                OutputKind::SetTimer { timer, .. } => Some(*timer),
                _ => None,
            })
            .expect("step 0 was watched");
        h.advance(1_000);
        (finished, kinds(&h.send(Input::TimerFired { timer: first })))
    });
    assert!(good.0.contains(&"cancel_timer".to_owned()), "disarmed at the finish: {:?}", good.0);
    assert!(good.1.is_empty() && g.violations.is_empty(), "a stale firing changes nothing");
    assert!(!bad.0.contains(&"cancel_timer".to_owned()), "never disarmed: {:?}", bad.0);
    assert!(
        bad.1.iter().any(|k| k.starts_with("abort_step #1 turn 1 step 1")),
        "the stale firing kills step 1, which streamed for 1 s: {:?}",
        bad.1
    );
}

/// With an external acceptor: submission `seq` (own turn) reaches the core.
fn arrive(h: &mut Host, session: &str, seq: u64) -> Vec<String> {
    let mut submit = Submit::new(session, "late").with_mode(Mode::OwnTurn);
    submit.seq = Some(Seq(seq));
    kinds(&h.send(Input::Submit(submit)))
}

/// With an external acceptor: a cancel naming the acceptor's newest sequence.
fn cancel_up_to(h: &mut Host, session: &str, up_to: u64) -> Vec<String> {
    kinds(&h.send(Input::Cancel { session: SessionId::new(session), up_to: Some(Seq(up_to)) }))
}

const CANCELLED_ON_ENTRY: [&str; 4] =
    ["reply accepted", "store ledger_outcome #2", "commit", "finished #2 Cancelled"];

#[test]
fn watermark_dropped_early_runs_the_second_covered_submission() {
    let [(good, _), (bad, _)] = pair(Mutant::WatermarkDroppedEarly, None, |h| {
        assert!(cancel_up_to(h, "s", 2).is_empty(), "#1 and #2 are still in flight");
        arrive(h, "s", 1);
        arrive(h, "s", 2)
    });
    assert_eq!(good, CANCELLED_ON_ENTRY, "the watermark still covers #2");
    assert_eq!(bad, ["reply accepted", "prepare #2"], "I4: dropped when #1 arrived");
}

#[test]
fn covered_late_submission_runs_queues_a_covered_arrival() {
    let [(good, _), (bad, _)] = pair(Mutant::CoveredLateSubmissionRuns, None, |h| {
        assert!(cancel_up_to(h, "s", 2).is_empty());
        arrive(h, "s", 1);
        arrive(h, "s", 2)
    });
    assert_eq!(good, CANCELLED_ON_ENTRY);
    assert_eq!(bad, ["reply accepted", "prepare #2"], "I4: covered, and it runs");
}

#[test]
fn watermark_off_by_one_cancels_the_next_submission_after_the_cancel() {
    let [(good, _), (bad, _)] = pair(Mutant::WatermarkOffByOne, None, |h| {
        arrive(h, "s", 1);
        cancel_up_to(h, "s", 1);
        arrive(h, "s", 2)
    });
    assert_eq!(good, ["reply accepted", "prepare #2"], "#2 was accepted after the cancel");
    assert_eq!(bad, CANCELLED_ON_ENTRY, "I4, I10: the watermark covered #2");
}

#[test]
fn watermark_ignores_sequence_cancels_an_arrival_above_a_held_watermark() {
    let [(good, _), (bad, _)] = pair(Mutant::WatermarkIgnoresSequence, None, |h| {
        // #1 never reaches the core as a submission (the acceptor numbered a call the core
        // does not accept), so the watermark is still held when #2 arrives.
        assert!(cancel_up_to(h, "s", 1).is_empty());
        arrive(h, "s", 2)
    });
    assert_eq!(good, ["reply accepted", "prepare #2"], "above the watermark");
    assert_eq!(bad, CANCELLED_ON_ENTRY, "I4: covered though above the watermark");
}

fn titles(kinds: &[String], what: &str) -> usize {
    kinds.iter().filter(|k| k.starts_with(what)).count()
}

#[test]
fn title_cancelled_with_turn_abandons_the_title_at_a_cancel() {
    let [(good, _), (bad, _)] = pair(Mutant::TitleCancelledWithTurn, None, |h| {
        let a = own(h, "s", "fix the login bug");
        let started = kinds(&h.prepare(a));
        (titles(&started, "request_title"), titles(&cancel(h, "s"), "abort_title"))
    });
    assert_eq!(good, (1, 0), "SPEC 4.11: requested at the first activation, kept by a cancel");
    assert_eq!(bad, (1, 1), "the cancel abandoned it");
}

#[test]
fn title_requested_again_asks_twice_while_one_is_pending() {
    let [(good, _), (bad, _)] = pair(Mutant::TitleRequestedAgain, None, |h| {
        let a = active(h, "s");
        h.finish(a, FinishReason::Stop);
        // The title has not arrived; the store still says "untitled".
        let b = own(h, "s", "and the logout");
        titles(&kinds(&h.prepare(b)), "request_title")
    });
    assert_eq!(good, 0, "one request per session while it is pending");
    assert_eq!(bad, 1, "a second request");
}

#[test]
fn step_limit_per_turn_forgets_the_steps_before_a_pause() {
    let [(good, g), (bad, b)] = pair(Mutant::StepLimitPerTurn, Some(1_000), |h| {
        let a = active(h, "s");
        h.tool_step_using(a, "c1", 950); // step 1, at the threshold: the submission pauses
        h.summary_done(10);
        h.tool_step_using(a, "c2", 10); // step 2 of the submission, the first after resuming
        a
    });
    assert_eq!(good, bad);
    assert_eq!(completions(&g, good), [Outcome::Failed], "SPEC 4.6: the limit of 2 steps");
    assert_eq!(completions(&b, bad), [], "counted from zero after the resume: it goes on");
}

#[test]
fn step_limit_after_end_completes_a_turn_that_reached_the_limit() {
    let [(good, g), (bad, b)] = pair(Mutant::StepLimitAfterEnd, None, |h| {
        let a = active(h, "s");
        h.tool_step_using(a, "c1", 10);
        h.finish(a, FinishReason::Stop); // the second step: the limit
        a
    });
    assert_eq!(completions(&g, good), [Outcome::Failed], "case 2 comes before case 3");
    assert_eq!(completions(&b, bad), [Outcome::Completed]);
}

/// Two calls of one step, `c1` then `c2`, to these tools, and the stream's `tool_calls`
/// finish: both run.
fn two_calls(h: &mut Host, seq: Seq, first: &str, second: &str) -> Vec<String> {
    h.tool_call(seq, "c1", first);
    h.tool_call(seq, "c2", second);
    kinds(&h.finish(seq, FinishReason::ToolCalls))
}

#[test]
fn synthetic_first_only_leaves_the_second_aborted_call_without_a_result() {
    let [(_, good), (_, bad)] = pair(Mutant::SyntheticFirstOnly, None, |h| {
        let a = active(h, "s");
        two_calls(h, a, "ls", "bash"); // both dropped on abort
        cancel(h, "s");
    });
    let synthetic = ("Error: user cancelled assistant tool calling".to_owned(), true);
    for call in ["c1", "c2"] {
        assert_eq!(results(&good, call), std::slice::from_ref(&synthetic));
    }
    assert_eq!(results(&bad, "c1"), [synthetic]);
    assert_eq!(results(&bad, "c2"), [], "I8: the second call has no result");
    assert!(!bad.violations.is_empty(), "the state checker sees the unanswered call");
}

#[test]
fn step_ends_at_first_result_starts_the_next_step_while_a_call_runs() {
    let [(good, _), (bad, _)] = pair(Mutant::StepEndsAtFirstResult, None, |h| {
        let a = active(h, "s");
        two_calls(h, a, "ls", "grep");
        kinds(&h.tool_result(a, "c2", ToolOutput::ok("found")))
    });
    // The second result to arrive (the first call's) is the one that ends the step.
    assert_eq!(good, ["store tool_result #1", "commit"], "c1 still runs");
    assert!(bad.iter().any(|k| k.starts_with("start_step #1")), "SPEC 4.4: {bad:?}");
}

#[test]
fn abort_stops_at_finishing_call_leaves_a_later_droppable_call_running() {
    let [(good, _), (bad, _)] = pair(Mutant::AbortStopsAtFinishingCall, None, |h| {
        let a = active(h, "s");
        two_calls(h, a, "write", "bash"); // left to finish, then dropped
        cancel(h, "s")
    });
    assert_eq!(good, ["abort_tool #1 c2", "set_timer"], "c2 dropped, c1 waited for");
    assert_eq!(bad, ["set_timer"], "SPEC 4.9: the droppable c2 is never aborted");
}

#[test]
fn first_call_abort_policy_aborts_a_call_left_to_finish() {
    let [(good, g), (bad, b)] = pair(Mutant::FirstCallAbortPolicy, None, |h| {
        let a = active(h, "s");
        two_calls(h, a, "bash", "write"); // dropped, then left to finish
        cancel(h, "s")
    });
    assert_eq!(good, ["abort_tool #1 c1", "set_timer"], "c2 is waited for");
    assert_eq!(bad[..2], ["abort_tool #1 c1", "abort_tool #1 c2"], "SPEC 4.9: {bad:?}");
    assert_eq!(completions(&g, Seq(1)), []);
    assert_eq!(completions(&b, Seq(1)), [Outcome::Cancelled], "ended without waiting");
}

// ---- Sub-agents (SPEC 4.11) ----

/// A host whose setup offers the `agent` tool (and `write`, left to finish): the parent `s`
/// runs, and its `agent` call `c1` starts a child. Returns the parent's and the child's
/// sequences and the child's session.
fn delegated(h: &mut Host) -> (Seq, Seq, SessionId) {
    h.setup = turnstile_core::Setup::with_tools(&["ls", "agent"]);
    let a = active(h, "s");
    let out = h.agent_call(a, "c1", r#"{"prompt":"go"}"#);
    let child = out.iter().find_map(|o| match &o.kind {
        OutputKind::Store(StoreOp::ChildAccepted { session, seq, .. }) => {
            Some((*seq, session.clone()))
        }
        _ => None,
    });
    let (c, session) = child.expect("a child starts");
    (a, c, session)
}

/// The usage writes of `session` that add cost to an ancestor, in the order written.
fn ancestor_writes(h: &Host, session: &str) -> usize {
    h.log
        .iter()
        .filter(|o| {
            matches!(&o.kind, OutputKind::Store(StoreOp::SessionUsage { session: s, ancestor: Some(_), .. })
                if s.as_str() == session)
        })
        .count()
}

#[test]
fn child_cost_twice_adds_a_sub_agents_cost_to_its_parent_twice() {
    let [(good, _), (bad, _)] = pair(Mutant::ChildCostTwice, None, |h| {
        let (_, c, child) = delegated(h);
        let usage = turnstile_core::Usage { cost_micros: 7, ..turnstile_core::Usage::default() };
        let event =
            turnstile_core::StepEvent::Finished { reason: FinishReason::Stop, usage: Some(usage) };
        h.stream(c, event);
        ancestor_writes(h, child.as_str())
    });
    assert_eq!(good, 1, "once, in the child's own write");
    assert_eq!(bad, 2, "SPEC 4.11: exactly once");
}

#[test]
fn cascade_misses_child_leaves_the_sub_agent_running_after_its_parent_is_cancelled() {
    let [(good, g), (bad, b)] = pair(Mutant::CascadeMissesChild, None, |h| {
        let (a, c, _) = delegated(h);
        cancel(h, "s");
        (a, c)
    });
    let ((a, c), (_, _)) = (good, bad);
    assert_eq!((g.outcome(c), g.outcome(a)), (Some(Outcome::Cancelled), Some(Outcome::Cancelled)));
    assert_eq!((b.outcome(c), b.outcome(a)), (None, None), "SPEC 4.11: the child runs on");
    assert!(b.steps.iter().any(|s| s.seq == c), "its stream was never aborted");
}

#[test]
fn child_cancel_cancels_parent_ends_the_parent_with_its_child() {
    let [(good, g), (bad, b)] = pair(Mutant::ChildCancelCancelsParent, None, |h| {
        let (a, c, child) = delegated(h);
        h.send(Input::Cancel { session: child, up_to: None });
        (a, c)
    });
    let ((a, c), _) = (good, bad);
    assert_eq!((g.outcome(c), g.outcome(a)), (Some(Outcome::Cancelled), None), "parent goes on");
    assert_eq!(b.outcome(a), Some(Outcome::Cancelled), "SPEC 4.11: only the child");
}

#[test]
fn child_result_lost_while_aborting_makes_the_parent_wait_for_its_grace() {
    let [(good, g), (bad, b)] = pair(Mutant::ChildResultLostWhileAborting, None, |h| {
        let (a, c, _) = delegated(h);
        (cancel(h, "s"), a, c)
    });
    let ((out, a, c), (bad_out, _, _)) = (good, bad);
    assert_eq!((g.outcome(c), g.outcome(a)), (Some(Outcome::Cancelled), Some(Outcome::Cancelled)));
    assert!(!out.iter().any(|k| k.starts_with("set_timer")), "nothing to wait for: {out:?}");
    assert_eq!((b.outcome(c), b.outcome(a)), (Some(Outcome::Cancelled), None));
    assert!(bad_out.iter().any(|k| k.starts_with("set_timer")), "SPEC 4.11: waits {bad_out:?}");
}

// ---- A tool left to finish once started (SPEC 4.9) ----

#[test]
fn started_ignored_drops_a_call_whose_work_began() {
    let [(good, g), (bad, b)] = pair(Mutant::StartedIgnored, None, |h| {
        // `ask` waits for a person's answer before its work begins.
        h.setup.tools.push(ToolSpec::new("ask").left_to_finish_once_started());
        let a = active(h, "s");
        h.tool_call(a, "c1", "ask");
        h.finish(a, FinishReason::ToolCalls);
        let call = h.tools.iter().find(|t| t.0.seq == a).map(|t| t.0.clone()).expect("c1 runs");
        assert!(h.send(Input::ToolStarted { call: call.clone() }).is_empty(), "no output");
        assert!(h.engine.is_tool_started(&call), "the work begins");
        (cancel(h, "s"), a)
    });
    let ((out, a), (bad_out, _)) = (good, bad);
    assert_eq!(out, ["set_timer"], "the started call is left to finish");
    assert_eq!(g.outcome(a), None, "the cancel waits for its result");
    assert_eq!(bad_out[0], "abort_tool #1 c1", "SPEC 4.9: {bad_out:?}");
    assert_eq!(b.outcome(a), Some(Outcome::Cancelled), "ended without waiting");
    let synthetic = ("Error: user cancelled assistant tool calling".to_owned(), true);
    assert_eq!(results(&b, "c1"), [synthetic], "recorded as cancelled while the tool runs");
    // Only a host sees the difference: the core's own checkers find nothing wrong.
    assert_eq!(b.violations, Vec::<String>::new());
}

#[test]
fn every_mutant_has_a_scenario_here() {
    let text = include_str!("mutants.rs");
    for m in Mutant::ALL {
        let name = format!("Mutant::{m:?}");
        assert!(text.contains(&format!("pair({name},")), "no scenario uses {name}");
    }
}
