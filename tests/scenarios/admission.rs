//! Accepting and admitting (SPEC 4.1 to 4.3): validation, RunIds, preparation, hand-off, folds.

use super::*;

pub(super) fn scenarios() -> Vec<Scenario> {
    vec![
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
    ]
}
