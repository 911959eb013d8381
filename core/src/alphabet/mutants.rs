//! Switchable bugs for measuring the checkers (SPEC section 10, "Mutants"). Test builds only.
//!
//! With the `mutants` feature, [`crate::Config::mutant`] names at most one plausible bug, and
//! the core behaves as if it had that bug. The model checker (and later the simulator) must
//! find every mutant in its scope; `turnstile-model mutants` reports which they found. Without
//! the feature the field does not exist and every [`mutant!`] check is the constant `false`, so
//! a host's build cannot carry a mutant.

use serde::{Deserialize, Serialize};

/// One plausible bug of the core. Each names the SPEC rule or appendix flaw it breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Mutant {
    /// A cancel on a session with nothing unfinished is remembered as a flag and cancels
    /// the session's next submission on entry (breaks I10, SPEC 4.10).
    CancelFlag,
    /// A cancel covers only the oldest unfinished submission under its watermark; the other
    /// covered waiting ones survive (breaks I4).
    WatermarkFirstOnly,
    /// A submission with a RunId defaults to mode fold and can be folded into another turn
    /// (breaks SPEC 3, 4.3).
    FoldRunIds,
    /// A submission that pauses for summarization already gets its completion
    /// (RunComplete), and a second one when it really ends (breaks I1, I11).
    CompleteOnPause,
    /// A turn that ends failed does not hand off to the queue's prepared head, which is
    /// stranded (G-01, SPEC 4.6).
    SkipHandoffOnError,
    /// At hand-off a still-preparing queue head is moved to the back of the queue, so a
    /// prepared later entry runs first (breaks I7, G-16).
    RequeueHeadAtBack,
    /// Admission takes the first prepared entry even when an earlier one is still preparing
    /// (breaks I7, SPEC 4.2, G-16).
    AdmitInPreparationOrder,
    /// Clean-up does not synthesize the error result of a tool call without a result
    /// (breaks I8, SPEC 4.9).
    NoSyntheticResult,
    /// A deciding submission's completion is emitted before its flush, ledger outcome and
    /// commit (breaks I9, SPEC 7).
    CompleteBeforeFlush,
    /// A tool result that arrives after its turn's clean-up is still written (breaks I13,
    /// SPEC 4.9).
    LateToolResultWritten,
    /// Cancelling a paused submission during its summarization aborts the summary but
    /// resumes the submission instead of ending it cancelled (G-03, I4).
    SummaryCancelContinues,
    /// A cancel during a credential-refresh wait does not abort the refresh; the turn ends
    /// only when the refresh answer arrives (G-13, I5).
    RefreshNotAborted,
    /// The retry after a successful credential refresh does not reset the streamed content
    /// (G-21, SPEC 4.5).
    RefreshWithoutReset,
    /// When a paused submission's summary succeeds, a prepared queue head is activated
    /// before the paused submission resumes (G-25, I11).
    QueueBeforeResume,
    /// After a failed preparation in a session, every later submission of that session
    /// fails preparation at once (G-24, SPEC 4.1).
    StickyPreparationFailure,
    /// Shutdown drops waiting submissions without any outcome or RunComplete (G-20, I1).
    ShutdownSwallowsWaiting,
    /// `clear_queue` leaves still-preparing entries in the queue, so a cleared prompt runs
    /// later (G-07, SPEC 4.10).
    ClearSkipsPreparing,
    /// A manual summarize is accepted while the session has waiting submissions but no
    /// active turn (G-05, SPEC 4.7, SPEC 3 busy).
    SummarizeWhileQueued,
    /// A retry after a retryable provider error does not reset the streamed content, so the
    /// attempt is appended to the failed one (SPEC 4.5, G-11).
    RetryWithoutReset,
    /// An aborted turn waits for a call the host dropped as if it could still report: a cancel
    /// during a long droppable tool waits the whole grace (SPEC 4.9, I6).
    WaitsForDroppedTools,
    /// The stream watchdog is not extended by content events: it fires the idle timeout after
    /// the attempt's start whatever arrived, so a live but slow stream is killed and retried
    /// (SPEC 4.5 "Stream watchdog").
    WatchdogNotExtended,
    /// The stream watchdog is never disarmed: its timer survives the attempt's end (no
    /// `CancelTimer`) and, when it fires, judges whatever attempt of the turn streams then, so
    /// a later attempt or the next step fails early (SPEC 4.5, I13).
    WatchdogNeverDisarmed,
    /// With an external acceptor, a cancel's watermark is dropped when the first submission
    /// it covers arrives, so a later covered one that was still in flight runs (breaks I4,
    /// SPEC 4.10 "dropped as soon as nothing it covers can still arrive").
    WatermarkDroppedEarly,
    /// With an external acceptor, a submission that a cancel's watermark covers but that
    /// arrives after the cancel is queued and runs instead of ending `cancelled` on entry
    /// (breaks I4, SPEC 4.10).
    CoveredLateSubmissionRuns,
    /// With an external acceptor, a cancel's watermark covers one sequence more than it names,
    /// so the next submission accepted after the cancel ends `cancelled` on entry, even after
    /// an idle cancel (breaks I4, I10).
    WatermarkOffByOne,
    /// With an external acceptor, while a session's watermark is held every submission of the
    /// session that arrives is covered, whatever its sequence: one accepted after the cancel
    /// that arrives while a sequence below the watermark is still awaited (a gap: a RunId
    /// look-up took it) ends `cancelled` on entry (breaks I4).
    WatermarkIgnoresSequence,
    /// A cancel also abandons the session's pending title request, as if the title belonged
    /// to the turn (breaks SPEC 4.11: "not cancelled with the turn").
    TitleCancelledWithTurn,
    /// A first activation requests a title although one is already pending for the session,
    /// so the session gets two requests and two title writes (breaks SPEC 4.11).
    TitleRequestedAgain,
    /// The step limit counts the steps of a turn, not of the submission: a resumed turn
    /// after a summarization starts again from zero (breaks SPEC 4.6 "counted per submission
    /// across resumed turns").
    StepLimitPerTurn,
    /// The step limit is judged after the finish reason, so a last step that ends the turn
    /// normally completes instead of failing `step_limit` (breaks SPEC 4.6's precedence).
    StepLimitAfterEnd,
    /// Clean-up gives only the first call without a result its synthetic result; the step's
    /// other unanswered calls are left without one (breaks I8, SPEC 4.9 "every tool call").
    SyntheticFirstOnly,
    /// A step with several running calls ends at the first result: the next step starts (or
    /// the turn ends) while a call still runs, and its result is then ignored (breaks SPEC
    /// 4.4 "their results end the step").
    StepEndsAtFirstResult,
    /// An abort's loop over the running calls stops at the first call left to finish, so the
    /// droppable calls streamed after it are never aborted and the turn waits for them up to
    /// the grace (breaks SPEC 4.9, each call by its own tool's policy).
    AbortStopsAtFinishingCall,
    /// An abort treats every call of the step by the first call's `OnAbort` policy: a call
    /// left to finish after a droppable first call is aborted, a droppable one after a call
    /// left to finish is waited for (breaks SPEC 4.9).
    FirstCallAbortPolicy,
    /// A sub-agent's step usage is written twice, each write adding the cost to the parent
    /// too, so parent and child pay twice (breaks SPEC 4.11 "exactly once").
    ChildCostTwice,
    /// Aborting a parent's turn does not abort its running sub-agent: the parent waits for
    /// the child up to its grace or the deadline, and the child runs on (breaks SPEC 4.11, I4).
    CascadeMissesChild,
    /// `cancel(child)` also cancels the parent's turn, as if a cancel covered the whole tree
    /// (breaks SPEC 4.11 "cancels only the child; the parent continues").
    ChildCancelCancelsParent,
    /// The end of a sub-agent whose parent is aborting is dropped as stale, so the parent
    /// waits for its grace (or the deadline) and gives the call a synthetic result although
    /// the child ended (breaks SPEC 4.11, 4.9).
    ChildResultLostWhileAborting,
    /// An abort ignores that the work of a call left to finish once started began
    /// ([`crate::Input::ToolStarted`]): the call is dropped although its tool really runs,
    /// so its result is recorded as cancelled and the cancel ends at once instead of waiting
    /// for it (breaks SPEC 4.9).
    StartedIgnored,
}

impl Mutant {
    /// Every mutant, in catalogue order.
    pub const ALL: &'static [Mutant] = &[
        Mutant::CancelFlag,
        Mutant::WatermarkFirstOnly,
        Mutant::FoldRunIds,
        Mutant::CompleteOnPause,
        Mutant::SkipHandoffOnError,
        Mutant::RequeueHeadAtBack,
        Mutant::AdmitInPreparationOrder,
        Mutant::NoSyntheticResult,
        Mutant::CompleteBeforeFlush,
        Mutant::LateToolResultWritten,
        Mutant::SummaryCancelContinues,
        Mutant::RefreshNotAborted,
        Mutant::RefreshWithoutReset,
        Mutant::QueueBeforeResume,
        Mutant::StickyPreparationFailure,
        Mutant::ShutdownSwallowsWaiting,
        Mutant::ClearSkipsPreparing,
        Mutant::SummarizeWhileQueued,
        Mutant::RetryWithoutReset,
        Mutant::WaitsForDroppedTools,
        Mutant::WatchdogNotExtended,
        Mutant::WatchdogNeverDisarmed,
        Mutant::WatermarkDroppedEarly,
        Mutant::CoveredLateSubmissionRuns,
        Mutant::WatermarkOffByOne,
        Mutant::WatermarkIgnoresSequence,
        Mutant::TitleCancelledWithTurn,
        Mutant::TitleRequestedAgain,
        Mutant::StepLimitPerTurn,
        Mutant::StepLimitAfterEnd,
        Mutant::SyntheticFirstOnly,
        Mutant::StepEndsAtFirstResult,
        Mutant::AbortStopsAtFinishingCall,
        Mutant::FirstCallAbortPolicy,
        Mutant::ChildCostTwice,
        Mutant::CascadeMissesChild,
        Mutant::ChildCancelCancelsParent,
        Mutant::ChildResultLostWhileAborting,
        Mutant::StartedIgnored,
    ];

    /// The tools whose scope contains the mutant (SPEC 10). Every mutant here is a core-level
    /// bug, so the model checker must find it, and so must the simulator unless the bug needs
    /// an external acceptor (the simulator's host is its own acceptor: the core assigns the
    /// sequences there). Store-level mutants (the simulator's and the crash tests' alone)
    /// belong to the store.
    #[must_use]
    pub fn scope(self) -> &'static [&'static str] {
        match self {
            Mutant::WatermarkDroppedEarly
            | Mutant::CoveredLateSubmissionRuns
            | Mutant::WatermarkOffByOne
            | Mutant::WatermarkIgnoresSequence => &["model"],
            // The simulator's world neither leaves sessions untitled long enough nor sets a
            // step limit, and hides title requests and step ends behind its host.
            Mutant::TitleCancelledWithTurn
            | Mutant::TitleRequestedAgain
            | Mutant::StepLimitPerTurn
            | Mutant::StepLimitAfterEnd => &["model"],
            // The simulator's tools never wait for a person before their work begins.
            Mutant::StartedIgnored => &["model"],
            _ => &["model", "sim"],
        }
    }

    /// The mutant's name as the command line and `docs/verification.md` spell it.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Mutant::CancelFlag => "cancel_flag",
            Mutant::WatermarkFirstOnly => "watermark_first_only",
            Mutant::FoldRunIds => "fold_run_ids",
            Mutant::CompleteOnPause => "complete_on_pause",
            Mutant::SkipHandoffOnError => "skip_handoff_on_error",
            Mutant::RequeueHeadAtBack => "requeue_head_at_back",
            Mutant::AdmitInPreparationOrder => "admit_in_preparation_order",
            Mutant::NoSyntheticResult => "no_synthetic_result",
            Mutant::CompleteBeforeFlush => "complete_before_flush",
            Mutant::LateToolResultWritten => "late_tool_result_written",
            Mutant::SummaryCancelContinues => "summary_cancel_continues",
            Mutant::RefreshNotAborted => "refresh_not_aborted",
            Mutant::RefreshWithoutReset => "refresh_without_reset",
            Mutant::QueueBeforeResume => "queue_before_resume",
            Mutant::StickyPreparationFailure => "sticky_preparation_failure",
            Mutant::ShutdownSwallowsWaiting => "shutdown_swallows_waiting",
            Mutant::ClearSkipsPreparing => "clear_skips_preparing",
            Mutant::SummarizeWhileQueued => "summarize_while_queued",
            Mutant::RetryWithoutReset => "retry_without_reset",
            Mutant::WaitsForDroppedTools => "waits_for_dropped_tools",
            Mutant::WatchdogNotExtended => "watchdog_not_extended",
            Mutant::WatchdogNeverDisarmed => "watchdog_never_disarmed",
            Mutant::WatermarkDroppedEarly => "watermark_dropped_early",
            Mutant::CoveredLateSubmissionRuns => "covered_late_submission_runs",
            Mutant::WatermarkOffByOne => "watermark_off_by_one",
            Mutant::WatermarkIgnoresSequence => "watermark_ignores_sequence",
            Mutant::TitleCancelledWithTurn => "title_cancelled_with_turn",
            Mutant::TitleRequestedAgain => "title_requested_again",
            Mutant::StepLimitPerTurn => "step_limit_per_turn",
            Mutant::StepLimitAfterEnd => "step_limit_after_end",
            Mutant::SyntheticFirstOnly => "synthetic_first_only",
            Mutant::StepEndsAtFirstResult => "step_ends_at_first_result",
            Mutant::AbortStopsAtFinishingCall => "abort_stops_at_finishing_call",
            Mutant::FirstCallAbortPolicy => "first_call_abort_policy",
            Mutant::ChildCostTwice => "child_cost_twice",
            Mutant::CascadeMissesChild => "cascade_misses_child",
            Mutant::ChildCancelCancelsParent => "child_cancel_cancels_parent",
            Mutant::ChildResultLostWhileAborting => "child_result_lost_while_aborting",
            Mutant::StartedIgnored => "started_ignored",
        }
    }

    /// One line: what the bug is and which SPEC rule or appendix flaw it breaks.
    #[must_use]
    pub fn explain(self) -> &'static str {
        match self {
            Mutant::CancelFlag => {
                "a cancel on a session with nothing unfinished is remembered as a flag and cancels the session's next submission on entry (breaks I10, SPEC 4.10)"
            }
            Mutant::WatermarkFirstOnly => {
                "a cancel covers only the oldest unfinished submission under its watermark; the other covered waiting ones survive (breaks I4)"
            }
            Mutant::FoldRunIds => {
                "a submission with a RunId defaults to mode fold and can be folded into another turn (breaks SPEC 3, 4.3)"
            }
            Mutant::CompleteOnPause => {
                "a submission that pauses for summarization already gets its completion (RunComplete), and a second one when it really ends (breaks I1, I11)"
            }
            Mutant::SkipHandoffOnError => {
                "a turn that ends failed does not hand off to the queue's prepared head, which is stranded (G-01, SPEC 4.6)"
            }
            Mutant::RequeueHeadAtBack => {
                "at hand-off a still-preparing queue head is moved to the back of the queue, so a prepared later entry runs first (breaks I7, G-16)"
            }
            Mutant::AdmitInPreparationOrder => {
                "admission takes the first prepared entry even when an earlier one is still preparing (breaks I7, SPEC 4.2, G-16)"
            }
            Mutant::NoSyntheticResult => {
                "clean-up does not synthesize the error result of a tool call without a result (breaks I8, SPEC 4.9)"
            }
            Mutant::CompleteBeforeFlush => {
                "a deciding submission's completion is emitted before its flush, ledger outcome and commit (breaks I9, SPEC 7)"
            }
            Mutant::LateToolResultWritten => {
                "a tool result that arrives after its turn's clean-up is still written (breaks I13, SPEC 4.9)"
            }
            Mutant::SummaryCancelContinues => {
                "cancelling a paused submission during its summarization aborts the summary but resumes the submission instead of ending it cancelled (G-03, I4)"
            }
            Mutant::RefreshNotAborted => {
                "a cancel during a credential-refresh wait does not abort the refresh; the turn ends only when the refresh answer arrives (G-13, I5)"
            }
            Mutant::RefreshWithoutReset => {
                "the retry after a successful credential refresh does not reset the streamed content (G-21, SPEC 4.5)"
            }
            Mutant::QueueBeforeResume => {
                "when a paused submission's summary succeeds, a prepared queue head is activated before the paused submission resumes (G-25, I11)"
            }
            Mutant::StickyPreparationFailure => {
                "after a failed preparation in a session, every later submission of that session fails preparation at once (G-24, SPEC 4.1)"
            }
            Mutant::ShutdownSwallowsWaiting => {
                "shutdown drops waiting submissions without any outcome or RunComplete (G-20, I1)"
            }
            Mutant::ClearSkipsPreparing => {
                "clear_queue leaves still-preparing entries in the queue, so a cleared prompt runs later (G-07, SPEC 4.10)"
            }
            Mutant::SummarizeWhileQueued => {
                "a manual summarize is accepted while the session has waiting submissions but no active turn (G-05, SPEC 4.7, SPEC 3 busy)"
            }
            Mutant::RetryWithoutReset => {
                "a retry after a retryable provider error does not reset the streamed content, so the attempt is appended to the failed one (SPEC 4.5, G-11)"
            }
            Mutant::WaitsForDroppedTools => {
                "an aborted turn waits for a call the host dropped as if it could still report: a cancel during a long droppable tool waits the whole grace (SPEC 4.9, I6)"
            }
            Mutant::WatchdogNotExtended => {
                "content events do not extend the stream watchdog: a live but slow stream is killed at the idle timeout after its start (SPEC 4.5)"
            }
            later => later.explain_later(),
        }
    }

    /// [`Mutant::explain`] for the newest mutants: the stream watchdog's second, the external
    /// acceptor's, the titles', the step limit's, those of several calls per step, the
    /// sub-agents' and that of a tool left to finish once started.
    fn explain_later(self) -> &'static str {
        match self {
            Mutant::WatchdogNeverDisarmed => {
                "the stream watchdog survives its attempt (no CancelTimer) and, when it fires, fails whatever attempt of the turn streams then (SPEC 4.5, I13)"
            }
            Mutant::WatermarkDroppedEarly => {
                "with an external acceptor, a watermark is dropped when the first submission it covers arrives, so a later covered one still in flight runs (breaks I4, SPEC 4.10)"
            }
            Mutant::CoveredLateSubmissionRuns => {
                "with an external acceptor, a covered submission arriving after the cancel is queued and runs instead of ending cancelled on entry (breaks I4, SPEC 4.10)"
            }
            Mutant::WatermarkOffByOne => {
                "with an external acceptor, a watermark covers one sequence above the one it names, so the next submission after the cancel ends cancelled on entry (breaks I4, I10)"
            }
            Mutant::WatermarkIgnoresSequence => {
                "with an external acceptor, a held watermark covers every arrival of its session whatever its sequence, so a submission above it that arrives across a gap ends cancelled (breaks I4)"
            }
            Mutant::TitleCancelledWithTurn => {
                "a cancel also abandons the session's pending title request (breaks SPEC 4.11: not cancelled with the turn)"
            }
            Mutant::TitleRequestedAgain => {
                "a first activation requests a title although one is pending, so the session gets two (breaks SPEC 4.11)"
            }
            Mutant::StepLimitPerTurn => {
                "the step limit counts a turn's steps, restarting from zero when a paused submission resumes (breaks SPEC 4.6)"
            }
            Mutant::StepLimitAfterEnd => {
                "the step limit is judged after the finish reason, so a last step that ends the turn completes instead of failing step_limit (breaks SPEC 4.6)"
            }
            Mutant::SyntheticFirstOnly => {
                "clean-up gives only the first call without a result its synthetic result, leaving the step's other calls without one (breaks I8, SPEC 4.9)"
            }
            Mutant::StepEndsAtFirstResult => {
                "a step with several running calls ends at the first result, so the next step starts while a call still runs (breaks SPEC 4.4)"
            }
            Mutant::AbortStopsAtFinishingCall => {
                "an abort stops at the first call left to finish, so the droppable calls after it are never aborted and are waited for (breaks SPEC 4.9)"
            }
            Mutant::FirstCallAbortPolicy => {
                "an abort treats every call of the step by the first call's OnAbort policy (breaks SPEC 4.9)"
            }
            Mutant::ChildCostTwice => {
                "a sub-agent's step usage is written twice, each write adding the cost to the parent too (breaks SPEC 4.11)"
            }
            Mutant::CascadeMissesChild => {
                "aborting a parent's turn does not abort its running sub-agent, which runs on while the parent waits for it (breaks SPEC 4.11, I4)"
            }
            Mutant::ChildCancelCancelsParent => {
                "cancel(child) also cancels the parent's turn (breaks SPEC 4.11)"
            }
            Mutant::ChildResultLostWhileAborting => {
                "the end of a sub-agent whose parent is aborting is dropped, so the parent waits for its grace and synthesizes the call's result (breaks SPEC 4.11, 4.9)"
            }
            Mutant::StartedIgnored => {
                "an abort ignores ToolStarted: a call left to finish once started is dropped even after its work began, so its result is recorded as cancelled while the tool really ran (breaks SPEC 4.9)"
            }
            // Every other mutant has its own arm in `explain`.
            _ => unreachable!("explained by Mutant::explain"),
        }
    }
}

/// True when the engine's configuration switches `$m` on (or one of `A | B`). Without the
/// `mutants` feature this is the constant `false` and does not even evaluate `$config`.
#[cfg(feature = "mutants")]
macro_rules! mutant {
    ($config:expr, $m:ident) => {
        $config.mutant == Some($crate::alphabet::mutants::Mutant::$m)
    };
    ($config:expr, $($m:ident)|+) => {
        matches!($config.mutant, Some($($crate::alphabet::mutants::Mutant::$m)|+))
    };
}

/// True when the engine's configuration switches `$m` on (or one of `A | B`). Without the
/// `mutants` feature this is the constant `false` and does not even evaluate `$config`.
#[cfg(not(feature = "mutants"))]
macro_rules! mutant {
    ($config:expr, $($m:ident)|+) => {
        false
    };
}

pub(crate) use mutant;
