//! What occupies a session's lane: a turn with its steps, calls and phases, or a summary
//! (SPEC 3 "Turn", "Step", "Paused", 4.4 to 4.9).

use std::collections::{BTreeSet, VecDeque};

use crate::alphabet::{
    CallId, MessageId, Millis, OnAbort, SessionId, Setup, StopTurn, TimerId, TurnId,
};
use crate::state::submission::Submission;

/// What occupies a session's single lane (SPEC I3).
#[derive(Debug, Default)]
#[cfg_attr(feature = "checker", derive(PartialEq))]
pub(crate) enum Lane {
    /// Nothing runs.
    #[default]
    Idle,
    /// A turn runs or is being aborted.
    Turn(Box<Turn>),
    /// The session summarizes (SPEC 4.7), as housekeeping or for a paused submission.
    Summary(Box<Summary>),
}

/// `clone_from` copies a turn or summary into the one there (`crate::reuse`).
#[cfg(feature = "checker")]
impl Clone for Lane {
    fn clone(&self) -> Lane {
        match self {
            Lane::Idle => Lane::Idle,
            Lane::Turn(turn) => Lane::Turn(turn.clone()),
            Lane::Summary(summary) => Lane::Summary(summary.clone()),
        }
    }

    fn clone_from(&mut self, source: &Lane) {
        match (self, source) {
            (Lane::Turn(into), Lane::Turn(from)) => into.clone_from(from),
            (Lane::Summary(into), Lane::Summary(from)) => into.clone_from(from),
            (into, from) => *into = from.clone(),
        }
    }
}

/// A summarization in progress (SPEC 4.7).
#[derive(Debug)]
#[cfg_attr(feature = "checker", derive(PartialEq))]
pub(crate) struct Summary {
    /// Numbered like turns; replies name it (I13).
    pub(crate) id: TurnId,
    pub(crate) purpose: Purpose,
    /// The summary message being written.
    pub(crate) message: MessageId,
    /// Streaming, backing off or waiting for credentials (the same rules as a step, SPEC 4.5).
    pub(crate) phase: Attempting,
    pub(crate) budget: Budget,
}

#[cfg(feature = "checker")]
clone_reusing!(Summary { id, purpose, message, phase, budget });

/// Why a session summarizes.
#[derive(Debug)]
#[cfg_attr(feature = "checker", derive(Clone, PartialEq))]
pub(crate) enum Purpose {
    /// After a submission ended, or on request: no submission depends on it.
    Housekeeping,
    /// A submission paused mid-turn; it resumes when the summary succeeds.
    Resume(Box<Paused>),
}

/// The last assistant message of an activated submission (SPEC 5 `message_id` and `text`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LastMessage {
    pub(crate) id: MessageId,
    pub(crate) text: String,
}

/// A submission paused for a summarization: not ended, not queued (SPEC 4.7).
#[derive(Debug)]
#[cfg_attr(feature = "checker", derive(Clone, PartialEq))]
pub(crate) struct Paused {
    pub(crate) sub: Submission,
    pub(crate) setup: Setup,
    /// The paused turn's last assistant message, reported if the submission ends while paused.
    pub(crate) last: LastMessage,
}

/// The stream watchdog of one streaming attempt (SPEC 4.5): its one armed timer and the lazy
/// deadline. A content event only sets `last` (no output); when the timer fires the attempt
/// fails if `last` is `None`, else one timer is armed for `last` + the timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Watchdog {
    /// The armed timer (purpose `StreamIdle`), due at `from` + the timeout.
    pub(crate) timer: TimerId,
    /// What the timer's deadline counts from: the attempt's start, or the last content event
    /// seen when the previous timer fired.
    pub(crate) from: Millis,
    /// When the newest content event arrived since the timer was armed, if one did.
    pub(crate) last: Option<Millis>,
}

/// The phases of an attempt that can be retried (a summary's; a turn's are in [`Phase`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Attempting {
    /// Waiting for the stream of this attempt, watched unless the timeout is 0.
    Streaming { attempt: u32, watchdog: Option<Watchdog> },
    /// The next attempt starts when `timer` fires.
    Backoff { next: u32, timer: TimerId },
    /// Waiting for the host's credential refresh of the refused attempt.
    Refreshing { attempt: u32 },
}

/// One activation of the agent loop for a submission (SPEC 3 "Turn").
#[derive(Debug)]
#[cfg_attr(feature = "checker", derive(PartialEq))]
pub(crate) struct Turn {
    pub(crate) owner: Submission,
    pub(crate) id: TurnId,
    /// What the owner's preparation resolved: tools, context window.
    pub(crate) setup: Setup,
    /// The current step, from 0.
    pub(crate) step: u32,
    /// The current step's assistant message (SPEC 5: the last one is reported).
    pub(crate) message: MessageId,
    /// That message's text so far.
    pub(crate) text: String,
    /// What the message holds besides text (the leading-newline rule and clean-up need it).
    pub(crate) parts: Parts,
    /// The current step's tool calls in the order the model sent them. Bounded by
    /// [`Config::calls_per_step_max`]: later calls are ignored like duplicates.
    pub(crate) calls: Vec<Call>,
    /// Every call id used in this turn (a repeated id is ignored, SPEC 4.4). Grows with the
    /// turn's calls, at most `calls_per_step_max` per step.
    pub(crate) seen: BTreeSet<CallId>,
    /// Retries and refreshes used by the current step (SPEC 4.5).
    pub(crate) budget: Budget,
    /// Loop-detection signatures of the turn's last steps, oldest first; at most
    /// [`LOOP_WINDOW_MAX`] (SPEC 4.8). `None` for a step without tool calls.
    pub(crate) window: VecDeque<Option<[u8; 32]>>,
    pub(crate) phase: Phase,
    /// Whether the current step's assistant message has its finish already.
    pub(crate) message_state: MessageState,
}

#[cfg(feature = "checker")]
clone_reusing!(Turn {
    owner,
    id,
    setup,
    step,
    message,
    text,
    parts,
    calls,
    seen,
    budget,
    window,
    phase,
    message_state,
});

/// The loop-detection window: the last 10 steps of the submission (SPEC 4.8, section 8).
pub(crate) const LOOP_WINDOW_MAX: usize = 10;

/// What an assistant message holds besides its text.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Parts {
    /// True once any content part exists (text, reasoning or a tool call): from then on a
    /// leading "\n" of a text delta is kept (SPEC 4.4).
    pub(crate) any: bool,
    /// The reasoning section, which clean-up must close if the stream did not (SPEC 4.9).
    pub(crate) reasoning: Reasoning,
}

/// The reasoning section of an assistant message.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Reasoning {
    /// No reasoning.
    #[default]
    None,
    /// Started and not ended.
    Open,
    /// Ended.
    Ended,
}

/// Retries and credential refreshes used by the current step (SPEC 4.5).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Budget {
    /// Attempts made since the step started or since its last refresh (at most the
    /// configuration's `attempts_max`).
    pub(crate) attempts: u32,
    /// True once the step used its one credential refresh.
    pub(crate) refreshed: bool,
    /// While a refresh is awaited: the message of the refused attempt (the provider's), which
    /// the failure keeps if the refresh fails.
    pub(crate) refused: Option<String>,
}

impl Budget {
    /// The budget of a step's (or a summary's) first attempt.
    pub(crate) fn first() -> Budget {
        Budget { attempts: 1, refreshed: false, refused: None }
    }

    /// The budget after a successful refresh: a fresh retry budget, the refresh used.
    pub(crate) fn refreshed() -> Budget {
        Budget { attempts: 0, refreshed: true, refused: None }
    }
}

/// Whether an assistant message still needs its finish (clean-up writes one if so, SPEC 4.9).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MessageState {
    /// Streaming into it; no finish yet.
    Open,
    /// Finished `tool_use`, or finished otherwise while the step's tools still run: rewritten
    /// if the turn ends by a cancel or a failure (SPEC 4.4, 4.9).
    ToolUse,
    /// Its final finish was written.
    Final,
}

impl Turn {
    /// The current step's assistant message and text, for the completion (SPEC 5).
    pub(crate) fn last_message(&self) -> LastMessage {
        LastMessage { id: self.message, text: self.text.clone() }
    }

    /// The IO name of the current step's attempt.
    pub(crate) fn step_io(&self, session: &SessionId, attempt: u32) -> crate::alphabet::StepIo {
        crate::alphabet::StepIo {
            session: session.clone(),
            seq: self.owner.seq,
            turn: self.id,
            step: self.step,
            attempt,
        }
    }

    /// What an abort does to this call of the current step now (SPEC 4.9): its tool's
    /// policy, where a call left to finish once started counts as dropped until the host
    /// reported that its work began ([`CallState::Started`]).
    pub(crate) fn abort_policy(&self, c: &Call) -> OnAbort {
        match self.setup.abort_policy(&c.name) {
            OnAbort::FinishOnceStarted if c.state == CallState::Started => OnAbort::Finish,
            OnAbort::FinishOnceStarted => OnAbort::Drop,
            policy => policy,
        }
    }

    /// The IO name of one of the current step's calls.
    pub(crate) fn call_io(&self, session: &SessionId, call: &CallId) -> crate::alphabet::CallIo {
        crate::alphabet::CallIo {
            session: session.clone(),
            seq: self.owner.seq,
            turn: self.id,
            step: self.step,
            call: call.clone(),
        }
    }
}

/// A tool call of the current step.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Call {
    pub(crate) id: CallId,
    pub(crate) name: String,
    /// The arguments as stored (`{}` for an unfinished or invalid call).
    pub(crate) input: String,
    pub(crate) state: CallState,
}

clone_reusing!(Call { id, name, input, state });

/// Where a tool call is in its life (SPEC 4.4, 4.9).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CallState {
    /// Its input is still streaming (a `tool_input_start` without its `tool_call`).
    Unfinished,
    /// Complete, with valid JSON arguments; runs when the stream finishes.
    Complete,
    /// Complete, but its arguments were not valid JSON: stored as `{}`, never run.
    Invalid,
    /// Running: a `RunTool` was emitted; its result is awaited.
    Running,
    /// Running, and the host reported that its work began ([`crate::Input::ToolStarted`]):
    /// a call of a tool left to finish once started ([`crate::OnAbort::FinishOnceStarted`])
    /// is no longer dropped by an abort (SPEC 4.9).
    Started,
    /// Its turn was aborted and the host dropped it ([`crate::OnAbort::Drop`]): it will never
    /// report, so nothing waits for it; clean-up gives it its synthetic result (SPEC 4.9).
    Dropped,
    /// An `agent` call: a sub-agent runs in `child` (SPEC 4.11); its end is the result.
    Delegated { child: SessionId },
    /// Its result was written: `output` feeds the loop signature, `stop` the turn's end.
    Reported { output: String, stop: Option<StopTurn> },
}

impl Call {
    /// True while the call's result is awaited (a tool or a sub-agent runs and can report).
    pub(crate) fn is_running(&self) -> bool {
        matches!(self.state, CallState::Running | CallState::Started | CallState::Delegated { .. })
    }
}

/// What a turn is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Waiting for the model's stream of this attempt, watched unless the timeout is 0.
    Streaming { attempt: u32, watchdog: Option<Watchdog> },
    /// A retryable error: the next attempt starts when `timer` fires (SPEC 4.5).
    Backoff { next: u32, timer: TimerId },
    /// A 401: waiting for the host's credential refresh of the refused `attempt` (SPEC 4.5).
    Refreshing { attempt: u32 },
    /// The stream finished with tool calls; some are still running. `finish` is the step's
    /// mapped finish, needed once the last tool reports (SPEC 4.6).
    Tools { finish: crate::alphabet::FinishReason },
    /// Aborted; clean-up waits for running tools or for the timer.
    Aborting { cause: Abort, grace: Option<TimerId> },
}

/// Why a turn was aborted: decides its outcome and its finish text (SPEC 4.9, 4.10).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Abort {
    /// cancel or cancel_run: the outcome is `cancelled`.
    Cancel,
    /// shutdown: the outcome is `interrupted`.
    Shutdown,
}
