//! Summaries when the context is nearly full (SPEC 4.7).

use super::*;

pub(super) fn scenarios() -> Vec<Scenario> {
    vec![
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
    ]
}
