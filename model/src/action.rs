//! The specification's input alphabet (SPEC sections 4 and 6): client commands, host replies to
//! pending IO, and stale replies, abstracted from the core's `Input` (the driver turns each into
//! the concrete input a host would send).

use crate::state::Tool;

/// How a client submits (SPEC 3: the mode, and whether a RunId comes with it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// No RunId, mode `fold`.
    Fold,
    /// No RunId, mode `own_turn`.
    Own,
    /// A fresh RunId (by index): always `own_turn`.
    Run(u8),
}

/// A provider failure, by what SPEC 4.5 does with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Failure {
    /// Retried after a backoff (HTTP 503).
    Retryable,
    /// Ends the step at once (HTTP 400).
    Fatal,
    /// Credentials refused (HTTP 401): one refresh per step, then a retry.
    Auth,
}

/// A timer, by purpose.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Timer {
    /// The backoff before a retry in this session.
    Retry(u8),
    /// The cancel grace of this session's aborting turn.
    Grace(u8),
    /// The shutdown deadline.
    Deadline,
    /// The stream watchdog of the attempt streaming in this session (SPEC 4.5).
    Watchdog(u8),
}

/// The abstract input alphabet: client commands, host replies, and stale replies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// A client submits to a session.
    Submit {
        /// The session.
        session: u8,
        /// Mode and RunId.
        kind: Kind,
    },
    /// External acceptor only: a client submits to a session through the acceptor, which
    /// assigns the next sequence; the submission is in flight to the core and nothing reaches
    /// the core yet (the acceptor, not the core, replies to the client).
    Accept {
        /// The session.
        session: u8,
        /// Mode and RunId.
        kind: Kind,
    },
    /// External acceptor only: a client repeats a used RunId through the acceptor (the same
    /// call when `same`, a different one otherwise), which numbers it like any submission.
    LookUp {
        /// The RunId.
        run: u8,
        /// The same call, byte for byte (else a conflict).
        same: bool,
    },
    /// External acceptor only: the oldest call in flight reaches the core, which is sent
    /// `Submit` with its sequence. The channel is in order, so arrivals are in sequence
    /// order; for SPEC I6 it is a pending host reply.
    Arrive,
    /// The same call with a used RunId, byte for byte.
    Resubmit {
        /// The RunId.
        run: u8,
    },
    /// A different call reusing a RunId.
    Conflict {
        /// The RunId.
        run: u8,
    },
    /// A submission with an empty prompt.
    Invalid,
    /// A client submission to the sub-agent's child session, which is rejected (SPEC 4.1).
    SubmitChild,
    /// Escape on a session.
    Cancel {
        /// The session.
        session: u8,
    },
    /// Cancel one run.
    CancelRun {
        /// The RunId.
        run: u8,
    },
    /// Clear a session's queue.
    Clear {
        /// The session.
        session: u8,
    },
    /// A manual summarize.
    Summarize {
        /// The session.
        session: u8,
    },
    /// Shutdown.
    Shutdown,
    /// The host prepared a submission.
    Prepared {
        /// The submission.
        seq: u8,
    },
    /// The host could not prepare it.
    PrepFailed {
        /// The submission.
        seq: u8,
    },
    /// The current step's stream delivers a complete tool call: the step's first, or its
    /// second after a first (the call ids `c<step>` and `c<step>b`).
    ToolCall {
        /// The session.
        session: u8,
        /// Which of the setup's tools it calls, so what an abort does to it (SPEC 4.9): the
        /// one the host drops, the one left to finish, or the one left to finish once started
        /// (never `started` here).
        tool: Tool,
    },
    /// The current step's stream delivers a complete call of the `agent` tool (SPEC 4.11):
    /// the step's only call, in a top-level session; the sub-agent starts when the stream
    /// finishes.
    AgentCall {
        /// The session.
        session: u8,
    },
    /// The current step's stream finishes (with the tool call if one was streamed).
    StepDone {
        /// The session.
        session: u8,
        /// True when the step's usage puts the context at the summarization threshold.
        high: bool,
        /// True for the finish reason that does not match the calls: `stop` although a tool
        /// call was streamed (the tool still runs, then the turn ends), or `tool_calls` without
        /// any call (the turn continues with another step) (SPEC 4.4, 4.6).
        odd: bool,
    },
    /// The current step's attempt fails.
    StepFail {
        /// The session.
        session: u8,
        /// How.
        failure: Failure,
    },
    /// The host reports that the work of a running call of the tool left to finish once
    /// started begins ([`Tool::Asks`]: a person answered its ask), while its step's tools run
    /// and before its result. From then on an abort leaves it to finish. No output.
    ToolStarted {
        /// The session.
        session: u8,
        /// Which call of the step: 0 the first, 1 the second.
        call: u8,
    },
    /// A running call reports.
    ToolResult {
        /// The session.
        session: u8,
        /// Which call of the step: 0 the first, 1 the second.
        call: u8,
        /// True when the result asks to stop the turn: a permission denial for the step's first
        /// call, a hook halt for its second (so SPEC 4.6's precedence between two stops shows).
        stop: bool,
    },
    /// The credential refresh ends.
    Refreshed {
        /// The session.
        session: u8,
        /// True when it worked.
        ok: bool,
    },
    /// The current summary attempt finishes.
    SummaryDone {
        /// The session.
        session: u8,
    },
    /// The current summary attempt fails.
    SummaryFail {
        /// The session.
        session: u8,
        /// How.
        failure: Failure,
    },
    /// An armed timer fires.
    Fire {
        /// The timer.
        timer: Timer,
    },
    /// The host answers the title request of the session (SPEC 4.11), generated or not (the
    /// core then writes the prompt's title): the same record either way.
    Titled {
        /// The session.
        session: u8,
        /// True when generation gave a title.
        generated: bool,
    },
    /// A preparation reply for a submission that is no longer preparing.
    StalePrepared {
        /// The submission.
        seq: u8,
    },
    /// A preparation failure for a submission that is no longer preparing (SPEC 4.10: a
    /// cancel beats a failure reported after it).
    StalePrepFailed {
        /// The submission.
        seq: u8,
    },
    /// An event for a summary attempt that is no longer current.
    StaleSummary,
    /// A refresh answer for a refresh that was aborted or already answered.
    StaleRefresh,
    /// An event for a step attempt that is no longer current.
    StaleStep,
    /// A tool result for a call the core abandoned: aborted (a dropped call, even while the
    /// turn still waits for a call left to finish), or given its synthetic result at clean-up.
    LateTool,
    /// A second result for a call that already has one.
    DuplicateTool,
    /// A `ToolStarted` for a call of the tool left to finish once started that an abort
    /// dropped before its work began: the person's answer came after the ask was withdrawn.
    LateStarted,
    /// A timer firing after it was disarmed or fired.
    StaleTimer,
    /// A title answer after shutdown abandoned the request, or a second answer.
    StaleTitle,
}

impl Action {
    /// True for a client command; false for a host reply (SPEC I6 answers only those).
    #[must_use]
    pub fn is_client(self) -> bool {
        matches!(
            self,
            Action::Submit { .. }
                | Action::Accept { .. }
                | Action::LookUp { .. }
                | Action::Resubmit { .. }
                | Action::Conflict { .. }
                | Action::Invalid
                | Action::SubmitChild
                | Action::Cancel { .. }
                | Action::CancelRun { .. }
                | Action::Clear { .. }
                | Action::Summarize { .. }
                | Action::Shutdown
        )
    }

    /// False for the actions the core does not see: an external acceptor numbering a call
    /// (the checker sends the core nothing for them, and writes no trace line).
    #[must_use]
    pub fn reaches_core(self) -> bool {
        !matches!(self, Action::Accept { .. } | Action::LookUp { .. })
    }

    /// True for a reply to IO that is no longer pending (SPEC I13).
    #[must_use]
    pub fn is_stale(self) -> bool {
        matches!(
            self,
            Action::StalePrepared { .. }
                | Action::StalePrepFailed { .. }
                | Action::StaleSummary
                | Action::StaleRefresh
                | Action::StaleStep
                | Action::LateTool
                | Action::DuplicateTool
                | Action::LateStarted
                | Action::StaleTimer
                | Action::StaleTitle
        )
    }
}
