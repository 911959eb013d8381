//! Names for the values the host's log events carry (see "Logs" in the crate docs).
//!
//! Field values are the store's and the RunComplete's snake_case names, so a log line reads
//! like the ledger: `outcome=completed`, `mode=own_turn`, `stop_reason=end_turn`.

use turnstile_core::{ErrorClass, StopReason};

pub(crate) use crate::store::{mode_text as mode, outcome_text as outcome};

pub(crate) fn stop_reason(reason: StopReason) -> &'static str {
    match reason {
        StopReason::EndTurn => "end_turn",
        StopReason::MaxTokens => "max_tokens",
        StopReason::ContentFilter => "content_filter",
        StopReason::PermissionDenied => "permission_denied",
        StopReason::HookHalt => "hook_halt",
    }
}

pub(crate) fn error_class(class: ErrorClass) -> &'static str {
    match class {
        ErrorClass::Provider => "provider",
        ErrorClass::Transport => "transport",
        ErrorClass::Unauthorized => "unauthorized",
        ErrorClass::Incomplete => "incomplete",
    }
}

/// Why an attempt failed, kept from the input that reported it (or from the watchdog's
/// verdict) until the transition's outputs say what the core made of it: a retry, a credential
/// refresh, or the end of the turn.
#[derive(Debug)]
pub(crate) struct Failure {
    /// The step's sequence (none for a summary).
    pub(crate) seq: Option<turnstile_core::Seq>,
    /// The step within the turn (none for a summary).
    pub(crate) step: Option<u32>,
    /// The attempt that failed, from 0.
    pub(crate) attempt: u32,
    pub(crate) class: &'static str,
    pub(crate) status: Option<u16>,
    /// The error text (never a prompt or message content: the provider's or the host's
    /// description of the failure).
    pub(crate) reason: String,
}

pub(crate) fn error_kind(kind: turnstile_core::ErrorKind) -> String {
    use turnstile_core::ErrorKind;
    let name = match kind {
        ErrorKind::Preparation => "preparation",
        ErrorKind::Provider => "provider",
        ErrorKind::Unauthorized => "unauthorized",
        ErrorKind::Transport => "transport",
        ErrorKind::Summarization => "summarization",
        ErrorKind::ContextWindow => "context_window",
        ErrorKind::LoopDetected => "loop_detected",
        ErrorKind::StepLimit => "step_limit",
        ErrorKind::Interrupted => "interrupted",
        // A kind newer than this host: its Debug name.
        other => return format!("{other:?}"),
    };
    name.to_owned()
}

/// The sequence (of a step; none for a summary) and the attempt number, from 0, of the
/// attempt a credential refresh is for.
pub(crate) fn attempt_fields(
    attempt: &turnstile_core::AttemptIo,
) -> (Option<turnstile_core::Seq>, u32) {
    match attempt {
        turnstile_core::AttemptIo::Step(s) => (Some(s.seq), s.attempt),
        turnstile_core::AttemptIo::Summary(s) => (None, s.attempt),
    }
}
