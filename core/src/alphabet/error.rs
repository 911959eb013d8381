//! Host misuse and internal failure (SPEC section 2, STYLE 4): the two things `handle` may
//! return as errors.
//!
//! Provider, tool and store failures are *inputs* that lead to outcomes, never errors here.

use std::fmt;

use crate::alphabet::ids::{Millis, RunId, Seq, TimerId};

/// An input the host was not allowed to send, or an engine that failed for good.
///
/// Host misuse leaves the engine's state exactly as it was; [`HostError::Internal`] means a bug
/// in the core was detected and the engine refuses every later input.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum HostError {
    /// `now` was earlier than the previous input's.
    TimeWentBackwards {
        /// The previous input's time.
        last: Millis,
        /// The offending time.
        now: Millis,
    },
    /// A timer was reported fired before its deadline.
    TimerNotDue {
        /// The timer.
        timer: TimerId,
        /// Its deadline.
        deadline: Millis,
        /// The time it was reported.
        now: Millis,
    },
    /// An externally assigned sequence was not above every sequence the core has seen.
    SequenceNotIncreasing {
        /// The offending sequence.
        seq: Seq,
        /// The newest sequence seen.
        last: Seq,
    },
    /// A sequence was given where the configured acceptor assigns it, or missing where it does
    /// not ([`crate::Acceptor`]).
    WrongAcceptor {
        /// What was wrong, in a sentence.
        reason: &'static str,
    },
    /// With the core as acceptor, a cancel named a watermark above the newest sequence: it
    /// would cancel prompts that do not exist yet (I10).
    WatermarkAhead {
        /// The watermark.
        up_to: Seq,
        /// The newest sequence assigned, if any.
        newest: Option<Seq>,
    },
    /// A sequence at the top of the range (`u64::MAX`) was given: nothing could follow it.
    SequenceOutOfRange {
        /// The offending sequence.
        seq: Seq,
    },
    /// A configuration value is unusable.
    InvalidConfig {
        /// The field.
        field: &'static str,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The start state is unusable: `next_seq` or `next_message` 0 or at `u64::MAX`, a run not
    /// below `next_seq`, a RunId listed twice.
    InvalidStart {
        /// The field of [`crate::Start`] at fault (`next_seq`, `next_message`, `runs`).
        field: &'static str,
        /// The run at fault, if one is.
        run_id: Option<RunId>,
        /// What is wrong.
        reason: &'static str,
    },
    /// A counter of the engine reached its maximum (`next_seq`, `next_message`, `next_turn`,
    /// `next_timer`, `next_output`, or a turn's `step`, ...): the transition that needed the
    /// next value was discarded, and the engine accepts no further input. Nothing wrapped and no
    /// id repeated; restart from the store (whose recovery decides what was unfinished).
    Exhausted {
        /// The counter.
        counter: &'static str,
    },
    /// The engine detected a bug in itself and stopped; it accepts no further input.
    Internal(&'static str),
}

impl fmt::Display for HostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostError::TimeWentBackwards { last, now } => {
                write!(f, "time went backwards: input at {} ms after one at {} ms", now.0, last.0)
            }
            HostError::TimerNotDue { timer, deadline, now } => write!(
                f,
                "timer {} fired at {} ms before its deadline {} ms",
                timer.0, now.0, deadline.0
            ),
            HostError::SequenceNotIncreasing { seq, last } => {
                write!(f, "submitted sequence {seq} is not above the newest sequence {last}")
            }
            HostError::WrongAcceptor { reason } => write!(f, "wrong acceptor: {reason}"),
            HostError::WatermarkAhead { up_to, newest } => match newest {
                Some(n) => write!(f, "cancel watermark {up_to} is above the newest sequence {n}"),
                None => write!(f, "cancel watermark {up_to} names a sequence before any exists"),
            },
            HostError::InvalidConfig { field, reason } => {
                write!(f, "invalid configuration: {field} {reason}")
            }
            HostError::SequenceOutOfRange { seq } => write!(f, "sequence {seq} is out of range"),
            HostError::InvalidStart { field, run_id: Some(run_id), reason } => {
                write!(f, "invalid start state: {field}: run {run_id}: {reason}")
            }
            HostError::InvalidStart { field, run_id: None, reason } => {
                write!(f, "invalid start state: {field} {reason}")
            }
            HostError::Exhausted { counter } => write!(
                f,
                "engine failed: the counter {counter} reached its maximum; restart from the store"
            ),
            HostError::Internal(what) => write!(f, "engine failed: internal error: {what}"),
        }
    }
}

impl std::error::Error for HostError {}

impl HostError {
    /// A stable name for the kind of error (`time_went_backwards`, `internal`, ...), for hosts
    /// in other languages that map it to their own error types (the process driver's and the
    /// Python package's).
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            HostError::TimeWentBackwards { .. } => "time_went_backwards",
            HostError::TimerNotDue { .. } => "timer_not_due",
            HostError::SequenceNotIncreasing { .. } => "sequence_not_increasing",
            HostError::WrongAcceptor { .. } => "wrong_acceptor",
            HostError::WatermarkAhead { .. } => "watermark_ahead",
            HostError::SequenceOutOfRange { .. } => "sequence_out_of_range",
            HostError::InvalidConfig { .. } => "invalid_config",
            HostError::InvalidStart { .. } => "invalid_start",
            HostError::Exhausted { .. } => "exhausted",
            HostError::Internal(_) => "internal",
        }
    }

    /// Whether the engine is finished: it accepts no further input (a counter at its maximum,
    /// or a bug it detected in itself). Every other error is host misuse that changed nothing.
    #[must_use]
    pub fn is_fatal(&self) -> bool {
        matches!(self, HostError::Exhausted { .. } | HostError::Internal(_))
    }
}
