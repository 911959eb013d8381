//! Sub-agents and titles (SPEC 4.11).

use super::*;

pub(super) fn scenarios() -> Vec<Scenario> {
    vec![
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
    ]
}
