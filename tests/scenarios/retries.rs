//! Retries and credential refreshes inside a step (SPEC 4.5).

use super::*;

pub(super) fn scenarios() -> Vec<Scenario> {
    vec![
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
    ]
}
