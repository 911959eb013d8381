//! A turn (SPEC 4.4, 4.6, 4.8, 4.9): streams, steps, stops, loops, clean-up, usage.

use super::*;

pub(super) fn scenarios() -> Vec<Scenario> {
    vec![
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
    ]
}
