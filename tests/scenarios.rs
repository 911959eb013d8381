//! The named lifecycle scenarios behind `traces/*.jsonl`.
//!
//! Each scenario drives the scripted host through one rule of SPEC or one appendix flaw and
//! states, by hand, the outcome every submission must reach. `traces.rs` turns each into a
//! trace file with the outputs the core produced ("blessed", like a snapshot), replays every
//! file with all invariants checked after every input, and checks the stated outcomes.

use std::collections::BTreeMap;

use turnstile_core::trace::Trace;
use turnstile_core::{
    Acceptor, Attachment, CallId, Config, ErrorClass, Fingerprint, FinishReason, Input, KnownRun,
    Mode, Outcome, ProviderError, RunId, Seq, SessionId, Setup, Start, StepEvent, StopTurn, Submit,
    ToolOutput, ToolSpec, Usage,
};

use crate::harness::Host;

/// One named scenario.
pub struct Scenario {
    /// The file name without `.jsonl`.
    pub name: &'static str,
    /// The rule or flaw it pins down.
    pub rule: &'static str,
    /// The configuration.
    pub config: fn() -> Config,
    /// The start state.
    pub start: fn() -> Start,
    /// Drives the host.
    pub run: fn(&mut Host),
    /// The outcome each sequence must reach, stated by hand.
    pub outcomes: &'static [(u64, Outcome)],
}

impl Scenario {
    /// Runs the scenario and returns its trace (without expected outputs).
    #[must_use]
    pub fn trace(&self) -> Trace {
        let mut h = Host::with_start((self.config)(), (self.start)());
        (self.run)(&mut h);
        let mut t = h.trace();
        t.header.name = Some(self.name.to_owned());
        t.header.rule = Some(self.rule.to_owned());
        t.header.origin = Some(serde_json::json!({ "scenario": self.name }));
        t.header.expect_outcomes =
            Some(self.outcomes.iter().map(|(s, o)| (Seq(*s), *o)).collect::<BTreeMap<_, _>>());
        t
    }
}

fn s(id: &str) -> SessionId {
    SessionId::new(id)
}

fn own(session: &str, prompt: &str) -> Submit {
    Submit::new(session, prompt).with_mode(Mode::OwnTurn)
}

fn cancel(h: &mut Host, session: &str) {
    h.send(Input::Cancel { session: s(session), up_to: None });
}

/// A step that calls `ls`, a tool the host drops on abort.
fn tool_step(h: &mut Host, seq: Seq, call: &str) {
    h.tool_call(seq, call, "ls");
    h.finish(seq, FinishReason::ToolCalls);
}

/// A step that calls `write`, a tool an abort must leave to finish (SPEC 4.9).
fn finishing_tool_step(h: &mut Host, seq: Seq, call: &str) {
    h.tool_call(seq, call, "write");
    h.finish(seq, FinishReason::ToolCalls);
}

fn default_config() -> Config {
    Config::default()
}

fn no_start() -> Start {
    Start::default()
}

macro_rules! scenario {
    ($name:literal, $rule:literal, $outcomes:expr, $run:expr) => {
        Scenario {
            name: $name,
            rule: $rule,
            config: default_config,
            start: no_start,
            run: $run,
            outcomes: $outcomes,
        }
    };
}

use Outcome::{Cancelled, Completed, Failed, Folded, Interrupted};

/// Every scenario, in file-name order.
#[must_use]
pub fn all() -> Vec<Scenario> {
    let mut v = vec![
        scenario!(
            "acceptance-validation-order",
            "SPEC 4.1: rejections in order with exact strings consume no sequence",
            &[(1, Completed)],
            |h| {
                h.send(Input::Submit(Submit::new("", "")));
                h.send(Input::Submit(Submit::new("", "hi")));
                h.send(Input::Submit(Submit::new("a$$b", "hi")));
                let mut att = Submit::new("s", "");
                att.attachments.push(Attachment {
                    name: "n.txt".into(),
                    media_type: "text/plain".into(),
                    content: "x".into(),
                });
                let a = h.submit(att);
                h.prepare(a);
                h.finish(a, FinishReason::Stop);
            }
        ),
        Scenario {
            name: "acceptance-sequence-continues-after-restart",
            rule: "SPEC 3: sequences continue above the ledger's maximum after a restart",
            config: default_config,
            start: || Start { next_seq: Some(Seq(100)), ..Start::default() },
            run: |h| {
                let a = h.submit(Submit::new("s", "a"));
                h.prepare(a);
                h.finish(a, FinishReason::Stop);
            },
            outcomes: &[(100, Completed)],
        },
        scenario!(
            "runid-idempotent-resubmission",
            "SPEC 4.1: the same call with a used RunId is the existing run, before and after it ends",
            &[(1, Completed)],
            |h| {
                let a = h.submit(Submit::new("s", "a").with_run_id("r1"));
                h.send(Input::Submit(Submit::new("s", "a").with_run_id("r1")));
                h.prepare(a);
                h.finish(a, FinishReason::Stop);
                h.send(Input::Submit(Submit::new("s", "a").with_run_id("r1")));
            }
        ),
        scenario!(
            "runid-conflict-rejected",
            "SPEC 4.1: a different call reusing a RunId is rejected; a RunId rejected at validation stays free",
            &[(1, Completed), (2, Completed)],
            |h| {
                let a = h.submit(Submit::new("s", "a").with_run_id("r1"));
                h.send(Input::Submit(Submit::new("s", "other").with_run_id("r1")));
                h.send(Input::Submit(Submit::new("", "x").with_run_id("r2")));
                let b = h.submit(Submit::new("s", "x").with_run_id("r2"));
                h.prepare(a);
                h.prepare(b);
                h.finish(a, FinishReason::Stop);
                h.finish(b, FinishReason::Stop);
            }
        ),
        scenario!(
            "cancel-while-tools-run-after-a-stop-finish",
            "SPEC 4.4, 4.9: a call streamed with finish `stop` still runs; a cancel before it reports gives the message its `canceled` finish",
            &[(1, Cancelled)],
            |h| {
                let a = h.submit(own("s", "a"));
                h.prepare(a);
                h.tool_call(a, "c1", "write");
                h.finish(a, FinishReason::Stop);
                cancel(h, "s");
                h.tool_result(a, "c1", turnstile_core::ToolOutput::ok("done"));
            }
        ),
        scenario!(
            "runid-lookup-during-shutdown",
            "SPEC 4.10: during shutdown a RunId look-up still answers (the existing run, or the conflict); only new submissions get \"workspace closing\"",
            &[(1, Interrupted)],
            |h| {
                let a = h.submit(Submit::new("s", "a").with_run_id("r1"));
                h.prepare(a);
                h.tool_call(a, "c1", "write");
                h.finish(a, FinishReason::ToolCalls);
                h.send(Input::Shutdown);
                h.send(Input::Submit(Submit::new("s", "a").with_run_id("r1")));
                h.send(Input::Submit(Submit::new("s", "other").with_run_id("r1")));
                h.send(Input::Submit(Submit::new("s", "new").with_run_id("r2")));
                h.tool_result(a, "c1", turnstile_core::ToolOutput::ok("done"));
                h.send(Input::Submit(Submit::new("s", "a").with_run_id("r1")));
            }
        ),
        Scenario {
            name: "runid-finished-in-ledger-not-rerun",
            rule: "SPEC 4.1: the core starts with the ledger's runs; a finished run is never run again",
            config: default_config,
            start: || {
                let submit = Submit::new("s", "a").with_run_id("r1");
                let known = KnownRun {
                    run_id: RunId::new("r1"),
                    session: s("s"),
                    seq: Seq(7),
                    fingerprint: Fingerprint::of(&submit),
                    outcome: Outcome::Completed,
                };
                Start { next_seq: Some(Seq(8)), runs: vec![known], ..Start::default() }
            },
            run: |h| {
                h.send(Input::Submit(Submit::new("s", "a").with_run_id("r1")));
                h.send(Input::CancelRun { run_id: RunId::new("r1") });
            },
            outcomes: &[],
        },
        scenario!(
            "admission-acceptance-order-g16",
            "SPEC 4.2, G-16: own turns start in acceptance order whatever order preparations finish in",
            &[(1, Completed), (2, Completed), (3, Completed)],
            |h| {
                let a = h.submit(own("s", "a"));
                let b = h.submit(own("s", "b"));
                let c = h.submit(own("s", "c"));
                h.prepare(c);
                h.prepare(b);
                h.prepare(a);
                h.finish(a, FinishReason::Stop);
                h.finish(b, FinishReason::Stop);
                h.finish(c, FinishReason::Stop);
            }
        ),
        scenario!(
            "handoff-in-the-same-transition-g16",
            "SPEC 4.6, G-16: the queue's prepared head becomes active in the transition that ends the turn",
            &[(1, Completed), (2, Completed)],
            |h| {
                let a = h.submit(own("s", "a"));
                h.prepare(a);
                let b = h.submit(own("s", "b"));
                h.prepare(b);
                h.finish(a, FinishReason::Stop);
                h.finish(b, FinishReason::Stop);
            }
        ),
        scenario!(
            "fold-prefix-at-step-start-g09",
            "SPEC 4.3, G-09: the prepared fold prefix joins the turn at the next step start and stays in history",
            &[(1, Completed), (2, Folded), (3, Folded), (4, Completed)],
            |h| {
                let a = h.submit(own("s", "a"));
                h.prepare(a);
                let b = h.submit(Submit::new("s", "b"));
                let c = h.submit(Submit::new("s", "c"));
                let d = h.submit(own("s", "d"));
                h.prepare(c);
                h.prepare(d);
                h.prepare(b);
                tool_step(h, a, "t1");
                h.tool_result(a, "t1", ToolOutput::ok("x"));
                h.finish(a, FinishReason::Stop);
                h.finish(d, FinishReason::Stop);
            }
        ),
        scenario!(
            "fold-at-step-zero",
            "SPEC 4.3: folding happens at step 0 too",
            &[(1, Completed), (2, Folded)],
            |h| {
                let a = h.submit(own("s", "a"));
                let b = h.submit(Submit::new("s", "b"));
                h.prepare(b);
                h.prepare(a);
                h.finish(a, FinishReason::Stop);
            }
        ),
        scenario!(
            "fold-stops-at-preparing-entry",
            "SPEC 4.3: a preparing entry ends the fold prefix; what is behind it waits",
            &[(1, Completed), (2, Completed), (3, Folded)],
            |h| {
                let a = h.submit(own("s", "a"));
                h.prepare(a);
                let b = h.submit(Submit::new("s", "b"));
                let c = h.submit(Submit::new("s", "c"));
                h.prepare(c);
                tool_step(h, a, "t1");
                h.tool_result(a, "t1", ToolOutput::ok("x"));
                h.prepare(b);
                h.finish(a, FinishReason::Stop);
                h.finish(b, FinishReason::Stop);
            }
        ),
        scenario!(
            "step-tools-run-after-the-stream",
            "SPEC 4.4: complete calls run after the stream whatever the finish; a repeated call id runs once",
            &[(1, Completed)],
            |h| {
                let a = h.submit(own("s", "a"));
                h.prepare(a);
                h.text(a, "looking");
                h.tool_call(a, "t1", "ls");
                h.tool_call(a, "t1", "ls");
                h.tool_call(a, "t2", "grep");
                h.finish(a, FinishReason::Stop);
                h.tool_result(a, "t2", ToolOutput::ok("2"));
                h.tool_result(a, "t1", ToolOutput::ok("1"));
            }
        ),
        scenario!(
            "turn-end-permission-denied",
            "SPEC 4.6 case 1: a denied call stops the turn, completed with permission_denied",
            &[(1, Completed)],
            |h| {
                let a = h.submit(own("s", "a").with_run_id("r"));
                h.prepare(a);
                tool_step(h, a, "t1");
                h.tool_result(
                    a,
                    "t1",
                    ToolOutput {
                        content: "denied".into(),
                        is_error: true,
                        stop: Some(StopTurn::PermissionDenied),
                    },
                );
            }
        ),
        Scenario {
            name: "turn-end-step-limit",
            rule: "SPEC 4.6 case 2: the step limit fails the submission with kind step_limit",
            config: || Config { step_limit: 2, ..Config::default() },
            start: no_start,
            run: |h| {
                let a = h.submit(own("s", "a").with_run_id("r"));
                h.prepare(a);
                tool_step(h, a, "t1");
                h.tool_result(a, "t1", ToolOutput::ok("x"));
                tool_step(h, a, "t2");
                h.tool_result(a, "t2", ToolOutput::ok("x"));
            },
            outcomes: &[(1, Failed)],
        },
        scenario!(
            "turn-end-provider-error-g01",
            "SPEC 4.6, G-01: a failed turn writes synthetic results, fails, and hands off to the queue",
            &[(1, Failed), (2, Completed)],
            |h| {
                let a = h.submit(own("s", "a").with_run_id("ra"));
                h.prepare(a);
                let b = h.submit(own("s", "b"));
                h.prepare(b);
                h.tool_call(a, "t1", "ls");
                h.fail_step(a, ErrorClass::Provider);
                h.finish(b, FinishReason::Stop);
            }
        ),
        scenario!(
            "cancel-preparing-aborts-preparation",
            "SPEC 4.10: a cancel ends a preparing submission at once and aborts its preparation; a late reply is ignored",
            &[(1, Cancelled)],
            |h| {
                let a = h.submit(Submit::new("s", "a").with_run_id("r"));
                cancel(h, "s");
                h.send(Input::Prepared { session: s("s"), seq: a, setup: Default::default() });
            }
        ),
        scenario!(
            "cancel-active-turn-g01",
            "SPEC 4.10, G-01: a cancelled turn is cleaned up and hands off to a submission accepted after the cancel",
            &[(1, Cancelled), (2, Cancelled), (3, Completed)],
            |h| {
                let a = h.submit(own("s", "a"));
                h.prepare(a);
                let b = h.submit(own("s", "b"));
                h.prepare(b);
                cancel(h, "s");
                let c = h.submit(own("s", "c"));
                h.prepare(c);
                h.finish(c, FinishReason::Stop);
            }
        ),
        scenario!(
            "cancel-precision-other-session-untouched",
            "SPEC I4: a cancel never affects a later submission or another session",
            &[(1, Cancelled), (2, Completed), (3, Completed)],
            |h| {
                let a = h.submit(own("s", "a"));
                h.prepare(a);
                let b = h.submit(own("t", "b"));
                h.prepare(b);
                cancel(h, "s");
                let c = h.submit(own("s", "c"));
                h.prepare(c);
                h.finish(b, FinishReason::Stop);
                h.finish(c, FinishReason::Stop);
            }
        ),
        scenario!(
            "cancel-idle-changes-nothing",
            "SPEC I10: an idle Escape records nothing and does not poison the next prompt",
            &[(1, Completed), (2, Completed)],
            |h| {
                cancel(h, "s");
                let a = h.submit(own("s", "a"));
                h.prepare(a);
                h.finish(a, FinishReason::Stop);
                cancel(h, "s");
                let b = h.submit(own("s", "b"));
                h.prepare(b);
                h.finish(b, FinishReason::Stop);
            }
        ),
        scenario!(
            "cancel-grace-tool-reports-in-time",
            "SPEC 4.9: a result that arrives before clean-up is written as reported; the rest are synthesized",
            &[(1, Cancelled)],
            |h| {
                let a = h.submit(own("s", "a").with_run_id("r"));
                h.prepare(a);
                h.tool_call(a, "t1", "write");
                h.tool_call(a, "t2", "write");
                h.finish(a, FinishReason::ToolCalls);
                cancel(h, "s");
                h.advance(1_000);
                h.tool_result(a, "t1", ToolOutput::ok("it ran"));
                h.tool_result(a, "t2", ToolOutput::ok("so did this"));
            }
        ),
        scenario!(
            "cancel-grace-timer-fires",
            "SPEC 4.9: the grace timer cleans up with synthetic results; a later result is ignored",
            &[(1, Cancelled)],
            |h| {
                let a = h.submit(own("s", "a"));
                h.prepare(a);
                finishing_tool_step(h, a, "t1");
                let call = h.tools[0].0.clone();
                cancel(h, "s");
                h.fire_next_timer();
                h.send(Input::ToolResult { call, result: ToolOutput::ok("too late") });
            }
        ),
        scenario!(
            "cancel-dropped-tool-ends-at-once",
            "SPEC 4.9: a cancel during a call the host drops aborts it and cleans up in the same transition (no grace); its late result is ignored",
            &[(1, Cancelled), (2, Completed)],
            |h| {
                let a = h.submit(own("s", "a").with_run_id("ra"));
                h.prepare(a);
                h.tool_call(a, "t1", "bash");
                h.tool_call(a, "t2", "grep");
                h.finish(a, FinishReason::ToolCalls);
                let call = h.tools[0].0.clone();
                let b = h.submit(own("s", "b"));
                h.prepare(b);
                h.send(Input::CancelRun { run_id: RunId::new("ra") });
                h.send(Input::ToolResult { call, result: ToolOutput::ok("too late") });
                h.finish(b, FinishReason::Stop);
            }
        ),
        scenario!(
            "cancel-grace-only-for-calls-left-to-finish",
            "SPEC 4.9: a cancel aborts the droppable call at once and waits only for the one left to finish; its result is written, the dropped one gets the synthetic result",
            &[(1, Cancelled)],
            |h| {
                let a = h.submit(own("s", "a").with_run_id("r"));
                h.prepare(a);
                h.tool_call(a, "t1", "bash");
                h.tool_call(a, "t2", "write");
                h.finish(a, FinishReason::ToolCalls);
                cancel(h, "s");
                h.advance(1_000);
                h.tool_result(a, "t2", ToolOutput::ok("written"));
            }
        ),
        scenario!(
            "cancel-withdraws-the-ask-of-a-call-left-to-finish-once-started",
            "SPEC 4.9: a call left to finish once started whose work has not begun (its ask is pending) is aborted at once like a droppable one; clean-up does not wait the grace; a late start is stale",
            &[(1, Cancelled)],
            |h| {
                h.setup.tools.push(ToolSpec::new("write_asks").left_to_finish_once_started());
                let a = h.submit(own("s", "a").with_run_id("r"));
                h.prepare(a);
                h.tool_call(a, "t1", "write_asks");
                h.finish(a, FinishReason::ToolCalls);
                let io = h.call_io(a, "t1");
                cancel(h, "s");
                h.send(Input::ToolStarted { call: io.clone() });
                h.send(Input::ToolResult { call: io, result: ToolOutput::ok("written") });
            }
        ),
        scenario!(
            "cancel-waits-for-a-started-call-left-to-finish-once-started",
            "SPEC 4.9: once the work of a call left to finish once started began, a cancel leaves it to finish and writes its result; a second start is stale",
            &[(1, Cancelled)],
            |h| {
                h.setup.tools.push(ToolSpec::new("write_asks").left_to_finish_once_started());
                let a = h.submit(own("s", "a").with_run_id("r"));
                h.prepare(a);
                h.tool_call(a, "t1", "write_asks");
                h.tool_call(a, "t2", "bash");
                h.finish(a, FinishReason::ToolCalls);
                assert!(h.tool_started(a, "t1"));
                assert!(h.tool_started(a, "t1"), "a second start changes nothing");
                cancel(h, "s");
                h.advance(1_000);
                h.tool_result(a, "t1", ToolOutput::ok("written"));
            }
        ),
        scenario!(
            "shutdown-withdraws-the-ask-of-a-call-left-to-finish-once-started",
            "SPEC 4.9, 4.10: shutdown aborts a call left to finish once started whose work has not begun at once; the submission ends interrupted without waiting for the deadline",
            &[(1, Interrupted)],
            |h| {
                h.setup.tools.push(ToolSpec::new("write_asks").left_to_finish_once_started());
                let a = h.submit(own("s", "a").with_run_id("r"));
                h.prepare(a);
                h.tool_call(a, "t1", "write_asks");
                h.finish(a, FinishReason::ToolCalls);
                h.send(Input::Shutdown);
            }
        ),
        scenario!(
            "cancel-run-exactly-one",
            "SPEC 4.10: cancel_run ends exactly its run; a finished or unknown run is a no-op",
            &[(1, Completed), (2, Cancelled), (3, Completed)],
            |h| {
                let a = h.submit(own("s", "a").with_run_id("ra"));
                let b = h.submit(own("s", "b").with_run_id("rb"));
                let c = h.submit(own("s", "c").with_run_id("rc"));
                h.prepare(a);
                h.prepare(b);
                h.prepare(c);
                h.send(Input::CancelRun { run_id: RunId::new("rb") });
                h.finish(a, FinishReason::Stop);
                h.send(Input::CancelRun { run_id: RunId::new("ra") });
                h.send(Input::CancelRun { run_id: RunId::new("unknown") });
                h.finish(c, FinishReason::Stop);
            }
        ),
        scenario!(
            "clear-queue-leaves-active-turn-g07",
            "SPEC 4.10, G-07: clear_queue ends every waiting submission and touches neither the active turn nor later ones",
            &[(1, Completed), (2, Cancelled), (3, Cancelled), (4, Completed)],
            |h| {
                let a = h.submit(own("s", "a"));
                h.prepare(a);
                let b = h.submit(Submit::new("s", "b"));
                let c = h.submit(own("s", "c").with_run_id("rc"));
                h.prepare(c);
                h.send(Input::ClearQueue { session: s("s") });
                let d = h.submit(own("s", "d"));
                h.send(Input::Prepared { session: s("s"), seq: b, setup: Default::default() });
                h.prepare(d);
                h.finish(a, FinishReason::Stop);
                h.finish(d, FinishReason::Stop);
            }
        ),
        scenario!(
            "shutdown-interrupts-everything-g20",
            "SPEC 4.10, G-20: shutdown ends every accepted submission interrupted, each run with its RunComplete",
            &[(1, Interrupted), (2, Interrupted), (3, Interrupted)],
            |h| {
                let a = h.submit(own("s", "a").with_run_id("ra"));
                h.prepare(a);
                let b = h.submit(own("s", "b").with_run_id("rb"));
                let c = h.submit(own("t", "c").with_run_id("rc"));
                h.prepare(c);
                h.send(Input::Shutdown);
                h.send(Input::Submit(Submit::new("s", "late")));
                let _ = b;
            }
        ),
        scenario!(
            "shutdown-deadline-cleans-up",
            "SPEC 4.10: a turn waiting for its tools at shutdown is cleaned up at the deadline",
            &[(1, Interrupted)],
            |h| {
                let a = h.submit(own("s", "a").with_run_id("ra"));
                h.prepare(a);
                finishing_tool_step(h, a, "t1");
                h.send(Input::Shutdown);
                h.fire_next_timer();
            }
        ),
        scenario!(
            "preparation-failure-not-sticky-g24",
            "SPEC 4.1, G-24: a failed preparation fails only its submission; later ones run",
            &[(1, Failed), (2, Completed), (3, Completed)],
            |h| {
                let a = h.submit(own("s", "a").with_run_id("ra"));
                let b = h.submit(own("s", "b"));
                h.fail_preparation(a, "credentials expired");
                h.prepare(b);
                h.finish(b, FinishReason::Stop);
                let c = h.submit(own("s", "c"));
                h.prepare(c);
                h.finish(c, FinishReason::Stop);
            }
        ),
        scenario!(
            "preparation-failure-is-not-silent-g14",
            "SPEC 4.1, G-14: a failure before the user message exists still ends the submission with its RunComplete",
            &[(1, Failed)],
            |h| {
                let a = h.submit(own("s", "a").with_run_id("ra"));
                h.fail_preparation(a, "no such model");
            }
        ),
        scenario!(
            "stale-replies-ignored",
            "SPEC I13: replies for aborted, superseded, answered or never-requested IO produce no output",
            &[(1, Cancelled), (2, Completed)],
            |h| {
                let a = h.submit(own("s", "a"));
                h.prepare(a);
                let step = h.step_of(a);
                cancel(h, "s");
                h.send(Input::Step {
                    step: step.clone(),
                    event: StepEvent::TextDelta { text: "ghost".into() },
                });
                h.send(Input::Step {
                    step,
                    event: StepEvent::Finished { reason: FinishReason::Stop, usage: None },
                });
                h.send(Input::Prepared { session: s("s"), seq: a, setup: Default::default() });
                h.send(Input::Prepared {
                    session: s("s"),
                    seq: Seq(99),
                    setup: Default::default(),
                });
                let b = h.submit(own("s", "b"));
                h.prepare(b);
                h.send(Input::Prepared { session: s("s"), seq: b, setup: Default::default() });
                h.finish(b, FinishReason::Stop);
            }
        ),
        Scenario {
            name: "watermark-external-acceptor-g08",
            rule: "SPEC 4.10, G-08: a submission that reaches the core after a cancel covering it ends cancelled on entry; one above is untouched",
            config: || Config { acceptor: Acceptor::External, ..Config::default() },
            start: no_start,
            outcomes: &[(5, Cancelled), (6, Completed)],
            run: |h| {
                h.send(Input::Cancel { session: s("s"), up_to: Some(Seq(5)) });
                let mut five = Submit::new("s", "five");
                five.seq = Some(Seq(5));
                h.send(Input::Submit(five));
                let mut six = own("s", "six");
                six.seq = Some(Seq(6));
                let six = h.submit(six);
                h.prepare(six);
                h.finish(six, FinishReason::Stop);
            },
        },
        scenario!(
            "watermark-other-session-not-covered-g08",
            "SPEC 4.10, G-08: a watermark covers only its session and is dropped once nothing it covers can arrive",
            &[(1, Completed), (2, Cancelled), (3, Completed)],
            |h| {
                let a = h.submit(own("t", "a"));
                h.prepare(a);
                let b = h.submit(own("s", "b"));
                h.send(Input::Cancel { session: s("s"), up_to: Some(Seq(2)) });
                let c = h.submit(own("s", "c"));
                h.prepare(c);
                h.finish(a, FinishReason::Stop);
                h.finish(c, FinishReason::Stop);
                let _ = b;
            }
        ),
        scenario!(
            "cancelled-waiting-never-runs-g04",
            "SPEC I1, I5, G-04: a submission reported cancelled while waiting never runs and never gets a second outcome",
            &[(1, Completed), (2, Cancelled), (3, Folded)],
            |h| {
                let a = h.submit(own("s", "a"));
                h.prepare(a);
                let b = h.submit(Submit::new("s", "b").with_run_id("rb"));
                h.prepare(b);
                h.send(Input::CancelRun { run_id: RunId::new("rb") });
                let c = h.submit(Submit::new("s", "c"));
                h.prepare(c);
                tool_step(h, a, "t1");
                h.tool_result(a, "t1", ToolOutput::ok("x"));
                h.finish(a, FinishReason::Stop);
                let _ = (b, c);
            }
        ),
        scenario!(
            "one-turn-per-session-g05",
            "SPEC I3, G-05: two prepared submissions never run at once on one session",
            &[(1, Completed), (2, Completed)],
            |h| {
                let a = h.submit(own("s", "a"));
                let b = h.submit(own("s", "b"));
                h.prepare(b);
                h.prepare(a);
                h.finish(a, FinishReason::Stop);
                h.finish(b, FinishReason::Stop);
            }
        ),
        scenario!(
            "turn-end-does-not-touch-next-turn-g06",
            "SPEC I13, G-06: late replies of an ended turn never touch the turn that replaced it",
            &[(1, Cancelled), (2, Completed)],
            |h| {
                let a = h.submit(own("s", "a"));
                h.prepare(a);
                finishing_tool_step(h, a, "t1");
                let call = h.tools[0].0.clone();
                let b = h.submit(own("s", "b"));
                h.prepare(b);
                h.send(Input::CancelRun { run_id: RunId::new("none") });
                h.send(Input::Cancel { session: s("s"), up_to: Some(a) });
                h.fire_next_timer();
                h.send(Input::ToolResult { call, result: ToolOutput::ok("late") });
                h.finish(b, FinishReason::Stop);
            }
        ),
        scenario!(
            "stream-leading-newline-rule",
            "SPEC 4.4: one leading newline goes while the message is empty; after reasoning it stays",
            &[(1, Completed), (2, Completed)],
            |h| {
                let a = h.submit(own("s", "a"));
                h.prepare(a);
                h.text(a, "\nHello");
                h.text(a, "\nworld");
                h.finish(a, FinishReason::Stop);
                let b = h.submit(own("t", "b"));
                h.prepare(b);
                h.stream(b, StepEvent::ReasoningStart);
                h.stream(b, StepEvent::ReasoningEnd { signature: None });
                h.text(b, "\nkept");
                h.finish(b, FinishReason::Stop);
            }
        ),
        scenario!(
            "stream-reasoning-signature-kept",
            "SPEC 4.4: reasoning start, deltas and end keep the provider's signature",
            &[(1, Completed)],
            |h| {
                let a = h.submit(own("s", "a"));
                h.prepare(a);
                h.stream(a, StepEvent::ReasoningStart);
                h.stream(a, StepEvent::ReasoningDelta { text: "thinking".into() });
                h.stream(a, StepEvent::ReasoningEnd { signature: Some("sig-abc".into()) });
                h.text(a, "done");
                h.finish(a, FinishReason::Stop);
            }
        ),
        scenario!(
            "stream-unfinished-call-finished-with-empty-input",
            "SPEC 4.4: a call cut off by max tokens is finished with {} and gets the invalid-JSON result without running",
            &[(1, Completed)],
            |h| {
                let a = h.submit(own("s", "a"));
                h.prepare(a);
                h.stream(
                    a,
                    StepEvent::ToolInputStart { id: CallId::new("cut"), name: "ls".into() },
                );
                h.finish(a, FinishReason::Length);
            }
        ),
        scenario!(
            "stream-invalid-json-and-unknown-tool-never-run",
            "SPEC 4.4: invalid arguments are stored as {} and answered without running; an unknown tool gets tool not found",
            &[(1, Completed)],
            |h| {
                let a = h.submit(own("s", "a"));
                h.prepare(a);
                h.stream(
                    a,
                    StepEvent::ToolCall {
                        id: CallId::new("bad"),
                        name: "ls".into(),
                        input: "{oops".into(),
                    },
                );
                h.stream(
                    a,
                    StepEvent::ToolCall {
                        id: CallId::new("who"),
                        name: "teleport".into(),
                        input: "{}".into(),
                    },
                );
                h.finish(a, FinishReason::ToolCalls);
                h.finish(a, FinishReason::Stop);
            }
        ),
        scenario!(
            "stream-repeated-call-id-runs-once",
            "SPEC 4.4: a second call with an id already used in the turn is ignored: one run, one result",
            &[(1, Completed)],
            |h| {
                let a = h.submit(own("s", "a"));
                h.prepare(a);
                tool_step(h, a, "t1");
                h.tool_result(a, "t1", ToolOutput::ok("x"));
                h.tool_call(a, "t1", "ls");
                h.finish(a, FinishReason::Stop);
            }
        ),
        scenario!(
            "usage-gauges-set-cost-added-g15",
            "SPEC 4.4, G-15: gauges are set and cost incremented as field-level writes; estimated usage costs nothing",
            &[(1, Completed)],
            |h| {
                let a = h.submit(own("s", "a"));
                h.prepare(a);
                h.tool_call(a, "t1", "ls");
                let usage = Usage {
                    input_tokens: 100,
                    cache_read_tokens: 20,
                    output_tokens: 9,
                    cost_micros: 40,
                    ..Usage::default()
                };
                h.stream(
                    a,
                    StepEvent::Finished { reason: FinishReason::ToolCalls, usage: Some(usage) },
                );
                h.tool_result(a, "t1", ToolOutput::ok("x"));
                let estimate =
                    Usage { cost_micros: 99, ..Usage::estimate(["user", "a"], ["done"]) };
                h.stream(
                    a,
                    StepEvent::Finished { reason: FinishReason::Stop, usage: Some(estimate) },
                );
            }
        ),
        scenario!(
            "retries-one-outcome-g02",
            "SPEC 4.5, G-02: retries reset the message, emit no intermediate terminal event, and each run gets its own RunComplete",
            &[(1, Completed), (2, Completed)],
            |h| {
                let a = h.submit(own("s", "a").with_run_id("ra"));
                h.prepare(a);
                let b = h.submit(own("s", "b").with_run_id("rb"));
                h.prepare(b);
                h.text(a, "partial");
                h.stream(
                    a,
                    StepEvent::Failed {
                        error: ProviderError {
                            status: Some(529),
                            message: "overloaded".into(),
                            ..ProviderError::default()
                        },
                    },
                );
                h.fire_next_timer();
                h.text(a, "whole");
                h.finish(a, FinishReason::Stop);
                h.finish(b, FinishReason::Stop);
            }
        ),
        scenario!(
            "retry-after-header-wins",
            "SPEC 4.5: retry-after-ms wins over retry-after and replaces the backoff below 60 s",
            &[(1, Completed)],
            |h| {
                let a = h.submit(own("s", "a"));
                h.prepare(a);
                let e = ProviderError {
                    status: Some(429),
                    retry_after_ms: Some(1_200),
                    retry_after: Some(30_000),
                    message: "slow down".into(),
                    ..ProviderError::default()
                };
                h.stream(a, StepEvent::Failed { error: e });
                h.fire_next_timer();
                h.finish(a, FinishReason::Stop);
            }
        ),
        scenario!(
            "retry-budget-exhausted",
            "SPEC 4.5: a step gets at most 4 attempts (retries after 5, 10, 20 s), then fails",
            &[(1, Failed)],
            |h| {
                let a = h.submit(own("s", "a").with_run_id("r"));
                h.prepare(a);
                for _ in 0..3 {
                    h.stream(
                        a,
                        StepEvent::Failed {
                            error: ProviderError {
                                class: ErrorClass::Transport,
                                message: "reset".into(),
                                ..ProviderError::default()
                            },
                        },
                    );
                    h.fire_next_timer();
                }
                h.stream(
                    a,
                    StepEvent::Failed {
                        error: ProviderError {
                            class: ErrorClass::Transport,
                            message: "reset".into(),
                            ..ProviderError::default()
                        },
                    },
                );
            }
        ),
        scenario!(
            "refresh-then-retry-with-reset-g21",
            "SPEC 4.5, G-21: a 401 gets one credential refresh, then the step retries with a fresh budget and the content reset",
            &[(1, Completed)],
            |h| {
                let a = h.submit(own("s", "a"));
                h.prepare(a);
                h.text(a, "half");
                h.stream(
                    a,
                    StepEvent::Failed {
                        error: ProviderError {
                            status: Some(401),
                            message: "expired".into(),
                            ..ProviderError::default()
                        },
                    },
                );
                let attempt = h.refreshes[0].clone();
                h.send(Input::CredentialsRefreshed { attempt, ok: true });
                h.text(a, "whole");
                h.finish(a, FinishReason::Stop);
            }
        ),
        scenario!(
            "refresh-wait-cancelled-at-once-g13",
            "SPEC 4.5, G-13: a cancel during the credential wait takes effect at once; the late refresh is ignored",
            &[(1, Cancelled)],
            |h| {
                let a = h.submit(own("s", "a").with_run_id("r"));
                h.prepare(a);
                h.stream(
                    a,
                    StepEvent::Failed {
                        error: ProviderError {
                            class: ErrorClass::Unauthorized,
                            message: "login".into(),
                            ..ProviderError::default()
                        },
                    },
                );
                let attempt = h.refreshes[0].clone();
                cancel(h, "s");
                h.send(Input::CredentialsRefreshed { attempt, ok: true });
            }
        ),
        scenario!(
            "refresh-second-401-fails",
            "SPEC 4.5: a second 401 in the step ends the submission failed, kind unauthorized, title Unauthorized",
            &[(1, Failed)],
            |h| {
                let a = h.submit(own("s", "a").with_run_id("r"));
                h.prepare(a);
                let e = ProviderError {
                    status: Some(401),
                    message: "expired".into(),
                    ..ProviderError::default()
                };
                h.stream(a, StepEvent::Failed { error: e.clone() });
                let attempt = h.refreshes[0].clone();
                h.send(Input::CredentialsRefreshed { attempt, ok: true });
                h.stream(a, StepEvent::Failed { error: e });
            }
        ),
        scenario!(
            "loop-detected",
            "SPEC 4.8: more than 5 equal tool signatures in the last 10 steps fail the submission loop_detected",
            &[(1, Failed)],
            |h| {
                let a = h.submit(own("s", "a").with_run_id("r"));
                h.prepare(a);
                for i in 0..10 {
                    let (input, out) = if i < 4 {
                        (format!("{{\"n\":{i}}}"), format!("r{i}"))
                    } else {
                        ("{}".to_owned(), "same".to_owned())
                    };
                    let call = format!("c{i}");
                    h.stream(
                        a,
                        StepEvent::ToolCall { id: CallId::new(&call), name: "ls".into(), input },
                    );
                    h.finish(a, FinishReason::ToolCalls);
                    h.tool_result(a, &call, ToolOutput::ok(out));
                }
            }
        ),
        scenario!(
            "stop-turn-hook-halt-rewrites-tool-use",
            "SPEC 4.4, 4.6: a hook halt stops the turn; tool_use becomes end_turn; completed with hook_halt",
            &[(1, Completed)],
            |h| {
                let a = h.submit(own("s", "a").with_run_id("r"));
                h.prepare(a);
                tool_step(h, a, "t1");
                h.tool_result(
                    a,
                    "t1",
                    ToolOutput {
                        content: "Turn halted by hook. Reason: no".into(),
                        is_error: true,
                        stop: Some(StopTurn::HookHalt),
                    },
                );
            }
        ),
        scenario!(
            "summary-housekeeping-after-end",
            "SPEC 4.7: a turn ending at the threshold publishes its RunComplete first, then the session summarizes before the queue moves",
            &[(1, Completed), (2, Completed)],
            |h| {
                h.setup.context_window = 1_000;
                let a = h.submit(own("s", "a").with_run_id("r"));
                h.prepare(a);
                let b = h.submit(own("s", "b"));
                h.prepare(b);
                h.stream(
                    a,
                    StepEvent::Finished {
                        reason: FinishReason::Stop,
                        usage: Some(Usage { input_tokens: 900, ..Usage::default() }),
                    },
                );
                h.summary_done(30);
                h.finish(b, FinishReason::Stop);
            }
        ),
        scenario!(
            "summary-pause-resume-before-queue-g25",
            "SPEC 4.7, G-25: a turn that would continue pauses; after the summary the same submission resumes before anything queued",
            &[(1, Completed), (2, Completed)],
            |h| {
                h.setup.context_window = 1_000;
                let a = h.submit(own("s", "fix it").with_run_id("r"));
                h.prepare(a);
                let b = h.submit(own("s", "next"));
                h.prepare(b);
                h.tool_step_using(a, "t1", 950);
                h.summary_done(30);
                h.finish(a, FinishReason::Stop);
                h.finish(b, FinishReason::Stop);
            }
        ),
        scenario!(
            "summary-cancel-no-continuation-g03",
            "SPEC 4.7, G-03: cancelling during the summary ends the paused submission cancelled and deletes the partial summary",
            &[(1, Cancelled)],
            |h| {
                h.setup.context_window = 1_000;
                let a = h.submit(own("s", "a").with_run_id("r"));
                h.prepare(a);
                h.tool_step_using(a, "t1", 950);
                let io = h.summaries[0].clone();
                h.send(Input::Summary {
                    io: io.clone(),
                    event: StepEvent::TextDelta { text: "So far".into() },
                });
                cancel(h, "s");
                h.send(Input::Summary {
                    io,
                    event: StepEvent::Finished { reason: FinishReason::Stop, usage: None },
                });
            }
        ),
        scenario!(
            "summary-failure-fails-paused",
            "SPEC 4.7: a failed summary ends the paused submission failed (summarization, Summarization Error)",
            &[(1, Failed), (2, Completed)],
            |h| {
                h.setup.context_window = 1_000;
                let a = h.submit(own("s", "a").with_run_id("r"));
                h.prepare(a);
                let b = h.submit(own("s", "b"));
                h.prepare(b);
                h.tool_step_using(a, "t1", 950);
                let io = h.summaries[0].clone();
                h.send(Input::Summary {
                    io,
                    event: StepEvent::Failed {
                        error: ProviderError {
                            status: Some(400),
                            message: "prompt too long".into(),
                            ..ProviderError::default()
                        },
                    },
                });
                h.finish(b, FinishReason::Stop);
            }
        ),
        scenario!(
            "summary-no-progress-guard",
            "SPEC 4.7: when the first step after the second summary without progress is at the threshold again, the submission fails context_window",
            &[(1, Failed)],
            |h| {
                h.setup.context_window = 1_000;
                let a = h.submit(own("s", "a").with_run_id("r"));
                h.prepare(a);
                for i in 0..3 {
                    h.tool_step_using(a, &format!("c{i}"), 990);
                    if i < 2 {
                        h.summary_done(10);
                    }
                }
            }
        ),
        scenario!(
            "summary-manual-rejected-while-busy-g05",
            "SPEC 4.7, G-04, G-05: a manual summarize is rejected while busy; when idle it runs as housekeeping and holds the lane",
            &[(1, Completed), (2, Completed)],
            |h| {
                let a = h.submit(own("s", "a"));
                h.prepare(a);
                h.send(Input::Summarize { session: s("s") });
                h.finish(a, FinishReason::Stop);
                h.send(Input::Summarize { session: s("s") });
                let b = h.submit(own("s", "b"));
                h.prepare(b);
                h.summary_done(5);
                h.finish(b, FinishReason::Stop);
            }
        ),
        scenario!(
            "cleanup-cancelled-prompt-writes-nothing-g10",
            "SPEC 4.10, G-10: a prompt cancelled while waiting writes no message, so a tool call and its result stay adjacent",
            &[(1, Cancelled), (2, Cancelled)],
            |h| {
                let a = h.submit(own("s", "a"));
                h.prepare(a);
                finishing_tool_step(h, a, "t1");
                let b = h.submit(Submit::new("s", "b").with_run_id("rb"));
                cancel(h, "s");
                h.tool_result(a, "t1", ToolOutput::ok("ran"));
                let _ = b;
            }
        ),
        scenario!(
            "subagent-result-to-parent",
            "SPEC 4.11: an agent call runs a child session whose text becomes the parent's tool result; its cost reaches the parent",
            &[(1, Completed), (2, Completed)],
            |h| {
                h.setup = Setup { titled: true, ..Setup::with_tools(&["ls", "agent"]) };
                let a = h.submit(own("s", "a").with_run_id("r"));
                h.prepare(a);
                h.agent_call(a, "call-1", r#"{"prompt":"look"}"#);
                let c = h.steps.iter().find(|st| st.seq != a).map(|st| st.seq).expect("child step");
                h.text(c, "found it");
                h.stream(
                    c,
                    StepEvent::Finished {
                        reason: FinishReason::Stop,
                        usage: Some(Usage { output_tokens: 3, cost_micros: 5, ..Usage::default() }),
                    },
                );
                h.finish(a, FinishReason::Stop);
            }
        ),
        scenario!(
            "subagent-cancel-cascades",
            "SPEC 4.11, I4: cancelling the parent's run cancels its sub-agent too",
            &[(1, Cancelled), (2, Cancelled)],
            |h| {
                h.setup = Setup { titled: true, ..Setup::with_tools(&["ls", "agent"]) };
                let a = h.submit(own("s", "a").with_run_id("r"));
                h.prepare(a);
                h.agent_call(a, "call-1", r#"{"prompt":"look"}"#);
                h.send(Input::CancelRun { run_id: RunId::new("r") });
            }
        ),
        scenario!(
            "title-first-activation-with-fallback",
            "SPEC 4.11: a title is requested at a top-level session's first activation, not awaited; a failed generation falls back to the prompt",
            &[(1, Completed), (2, Completed)],
            |h| {
                h.setup = Setup { titled: false, ..Setup::with_tools(&["ls"]) };
                let a = h.submit(own("s", "Fix the flaky\nlogin test"));
                h.prepare(a);
                h.finish(a, FinishReason::Stop);
                let b = h.submit(own("s", "and the other one"));
                h.prepare(b);
                h.send(Input::TitleGenerated {
                    session: s("s"),
                    seq: a,
                    title: Some("<think>hmm</think>".into()),
                    usage: None,
                });
                h.finish(b, FinishReason::Stop);
            }
        ),
    ];
    v.extend(watchdog_scenarios());
    v.sort_by_key(|s| s.name);
    v
}

fn no_watchdog() -> Config {
    Config { stream_idle_timeout_ms: 0, ..Config::default() }
}

/// The stream watchdog (SPEC 4.5), with the default idle timeout of 300 s.
fn watchdog_scenarios() -> Vec<Scenario> {
    vec![
        scenario!(
            "watchdog-stalled-attempt-retries-then-succeeds",
            "SPEC 4.5: an attempt without a content event for the idle timeout (300 s from its start) is aborted and retried as a transport error, after the 5 s backoff and the content reset",
            &[(1, Completed)],
            |h| {
                let a = h.submit(own("s", "a"));
                h.prepare(a);
                h.advance(1_000);
                h.text(a, "half");
                h.fire_next_timer(); // at 300 s: content arrived, so it watches on until 301 s
                h.fire_next_timer(); // at 301 s: idle for 300 s, the attempt is aborted
                h.fire_next_timer(); // the backoff: attempt 1
                h.text(a, "whole");
                h.finish(a, FinishReason::Stop);
            }
        ),
        scenario!(
            "watchdog-every-attempt-stalls-fails-transport",
            "SPEC 4.5, 8: when all 4 attempts stall the submission fails, kind transport, \"Stream Transport Error\", \"stream idle for 300 s\"",
            &[(1, Failed)],
            |h| {
                let a = h.submit(own("s", "a").with_run_id("r"));
                h.prepare(a);
                for _ in 0..3 {
                    h.fire_next_timer(); // the watchdog
                    h.fire_next_timer(); // the backoff
                }
                h.fire_next_timer();
            }
        ),
        scenario!(
            "watchdog-late-event-of-aborted-attempt-ignored",
            "SPEC 4.5, I13: events of the attempt the watchdog aborted are stale, during the backoff and after the next attempt started",
            &[(1, Completed)],
            |h| {
                let a = h.submit(own("s", "a"));
                h.prepare(a);
                let stalled = h.step_of(a);
                h.fire_next_timer();
                h.send(Input::Step {
                    step: stalled.clone(),
                    event: StepEvent::TextDelta { text: "late".into() },
                });
                h.fire_next_timer();
                h.send(Input::Step {
                    step: stalled,
                    event: StepEvent::Finished { reason: FinishReason::Stop, usage: None },
                });
                h.text(a, "fresh");
                h.finish(a, FinishReason::Stop);
            }
        ),
        scenario!(
            "watchdog-disarmed-firing-ignored-backoff-and-cancel",
            "SPEC 4.5, I13: an attempt's end disarms its watchdog (CancelTimer); a firing that still arrives, during the backoff or after a cancel, changes nothing",
            &[(1, Completed), (2, Cancelled)],
            |h| {
                let a = h.submit(own("s", "a"));
                h.prepare(a);
                let first = h.watchdog().expect("the attempt is watched");
                h.fail_step(a, ErrorClass::Transport);
                h.advance(300_000);
                h.send(Input::TimerFired { timer: first }); // during the backoff
                h.fire_next_timer();
                h.finish(a, FinishReason::Stop);
                let b = h.submit(own("s", "b"));
                h.prepare(b);
                let second = h.watchdog().expect("the attempt is watched");
                cancel(h, "s");
                h.advance(300_000);
                h.send(Input::TimerFired { timer: second }); // after the cancel
            }
        ),
        scenario!(
            "watchdog-slow-stream-not-killed",
            "SPEC 4.5: each content event extends the idle timeout, with no output per event (the deadline is checked when it fires): a stream with gaps below 300 s is never killed",
            &[(1, Completed)],
            |h| {
                let a = h.submit(own("s", "a"));
                h.prepare(a);
                for word in ["slow ", "but ", "steady "] {
                    h.advance(200_000);
                    h.text(a, word);
                    h.fire_next_timer(); // re-armed for that word + 300 s
                }
                h.advance(150_000);
                h.tool_call(a, "t1", "ls");
                h.finish(a, FinishReason::ToolCalls);
                h.tool_result(a, "t1", ToolOutput::ok("files"));
                h.finish(a, FinishReason::Stop);
            }
        ),
        scenario!(
            "watchdog-summary-attempt-stalls-and-retries",
            "SPEC 4.5, 4.7: a summary's attempt is watched like a step's: a stalled one is aborted, its partial text reset, and retried after the backoff",
            &[],
            |h| {
                h.send(Input::Summarize { session: s("s") });
                h.fire_next_timer();
                h.fire_next_timer();
                h.summary_done(200);
            }
        ),
        Scenario {
            name: "watchdog-off-with-zero",
            rule: "SPEC 4.5, 8: an idle timeout of 0 disables the watchdog: no timer, and a stream may stay silent for ever",
            config: no_watchdog,
            start: no_start,
            run: |h| {
                let a = h.submit(own("s", "a"));
                h.prepare(a);
                h.advance(3_600_000);
                h.finish(a, FinishReason::Stop);
            },
            outcomes: &[(1, Completed)],
        },
    ]
}
