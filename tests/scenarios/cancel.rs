//! Cancels, clears and shutdown (SPEC 4.10): watermarks, what a cancel ends and what it leaves.

use super::*;

pub(super) fn scenarios() -> Vec<Scenario> {
    vec![
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
    ]
}
