//! The stream watchdog (SPEC 4.5), with the default idle timeout of 300 s.

use super::*;

fn no_watchdog() -> Config {
    Config { stream_idle_timeout_ms: 0, ..Config::default() }
}

pub(super) fn scenarios() -> Vec<Scenario> {
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
