//! How a submission ended: its outcome and the completion record (SPEC section 5).
//!
//! A [`Completion`] is built only by the outcome decider of the lifecycle
//! (`lifecycle/outcome.rs`), exactly once per accepted submission; its fields are private, so a
//! host or another module cannot forge one:
//!
//! ```compile_fail
//! // The record's fields are private: neither the tuple field nor the fields can be named.
//! let forged = turnstile_core::Completion(std::sync::Arc::new(todo!()));
//! ```

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::alphabet::ids::{MessageId, RunId, Seq, SessionId};
/// How a submission ended (SPEC 3 "Outcome").
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The turn ended normally (possibly stopped by a denial or a hook halt).
    Completed,
    /// The submission failed; the completion carries the error.
    Failed,
    /// A cancel, cancel_run or clear_queue covered it.
    Cancelled,
    /// Shutdown or a process stop ended it.
    Interrupted,
    /// It became part of another submission's turn.
    Folded,
}

/// Why a completed submission stopped (SPEC 5 `stop_reason`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model ended its turn.
    EndTurn,
    /// The output hit the token limit.
    MaxTokens,
    /// The provider filtered the output.
    ContentFilter,
    /// A tool call was denied.
    PermissionDenied,
    /// A pre-tool hook halted the turn.
    HookHalt,
}

/// The error kinds of SPEC section 5.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ErrorKind {
    /// The host could not prepare the submission.
    Preparation,
    /// The provider answered with an error.
    Provider,
    /// The provider refused the credentials, and a refresh did not help.
    Unauthorized,
    /// The stream or connection broke.
    Transport,
    /// The summarization of a paused submission failed.
    Summarization,
    /// Summarization did not free enough context.
    ContextWindow,
    /// The same tool interaction repeated too often.
    LoopDetected,
    /// The submission reached the configured step limit.
    StepLimit,
    /// Shutdown or a process stop ended the submission.
    Interrupted,
}

/// The error of a `failed` or `interrupted` submission.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ErrorInfo {
    /// The kind.
    pub kind: ErrorKind,
    /// A short title for people.
    pub title: String,
    /// The error text.
    pub message: String,
}

/// How a submission ended, as the decider says it: the outcome with its stop reason (a
/// completed one) or its error (a failed or interrupted one).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Ending {
    /// The outcome.
    pub(crate) outcome: Outcome,
    /// Why a completed submission stopped.
    pub(crate) stop_reason: Option<StopReason>,
    /// The error of a failed or interrupted one.
    pub(crate) error: Option<ErrorInfo>,
}

/// What a submission's model requests used: the tokens and cost of its turn's steps (every
/// attempt that reported usage) and of a summarization that paused it, summed. A folded
/// submission's prompt runs in another's turn, so its usage is that turn's; a sub-agent's is
/// its own run's (its parent session's total cost includes it, SPEC 4.11); a title is requested
/// beside the run and is not part of it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct RunUsage {
    /// Prompt tokens over the steps (each step's input + cache-read + cache-creation tokens).
    pub prompt_tokens: u64,
    /// Completion (output) tokens over the steps.
    pub completion_tokens: u64,
    /// Cost in millionths of the price's currency unit; estimated usage costs nothing.
    pub cost_micros: u64,
}

impl RunUsage {
    /// True when nothing was used (no usage was reported): the completion leaves it out.
    #[must_use]
    pub fn is_zero(&self) -> bool {
        *self == RunUsage::default()
    }

    /// Adds one report, saturating (a counter that cannot overflow decides nothing).
    pub(crate) fn add(&mut self, prompt_tokens: u64, completion_tokens: u64, cost_micros: u64) {
        self.prompt_tokens = self.prompt_tokens.saturating_add(prompt_tokens);
        self.completion_tokens = self.completion_tokens.saturating_add(completion_tokens);
        self.cost_micros = self.cost_micros.saturating_add(cost_micros);
    }
}

/// The completion record of a submission: its outcome with SPEC section 5's fields.
///
/// Built only by the outcome decider, exactly once per accepted submission. When `run_id` is
/// present, it *is* the public RunComplete of that run; the host publishes it after the commit
/// that records it, and there is never a second one for the same run.
///
/// Cheap to clone: the ledger write and the publication share one record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(transparent)]
pub struct Completion(Arc<Fields>);

/// The fields of a [`Completion`], private to this module.
#[derive(Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(rename = "CompletionFields"))]
#[serde(deny_unknown_fields)]
struct Fields {
    session: SessionId,
    #[serde(skip_serializing_if = "Option::is_none")]
    run_id: Option<RunId>,
    seq: Seq,
    outcome: Outcome,
    #[serde(skip_serializing_if = "Option::is_none")]
    stop_reason: Option<StopReason>,
    #[serde(skip_serializing_if = "Option::is_none")]
    message_id: Option<MessageId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<ErrorInfo>,
    #[serde(default, skip_serializing_if = "RunUsage::is_zero")]
    usage: RunUsage,
}

impl Completion {
    /// The submission's session.
    #[must_use]
    pub fn session(&self) -> &SessionId {
        &self.0.session
    }
    /// The run, when the submission carried a RunId (then this is its RunComplete).
    #[must_use]
    pub fn run_id(&self) -> Option<&RunId> {
        self.0.run_id.as_ref()
    }
    /// True when this completion is the public RunComplete of a run.
    #[must_use]
    pub fn is_run_complete(&self) -> bool {
        self.0.run_id.is_some()
    }
    /// The submission's sequence.
    #[must_use]
    pub fn seq(&self) -> Seq {
        self.0.seq
    }
    /// The outcome.
    #[must_use]
    pub fn outcome(&self) -> Outcome {
        self.0.outcome
    }
    /// Why a completed submission stopped, when it stopped for a known reason.
    #[must_use]
    pub fn stop_reason(&self) -> Option<StopReason> {
        self.0.stop_reason
    }
    /// The last assistant message; present exactly when the submission was activated.
    #[must_use]
    pub fn message_id(&self) -> Option<MessageId> {
        self.0.message_id
    }
    /// That message's text (possibly empty or partial); present exactly when activated.
    #[must_use]
    pub fn text(&self) -> Option<&str> {
        self.0.text.as_deref()
    }
    /// The error; present exactly for `failed` and `interrupted`.
    #[must_use]
    pub fn error(&self) -> Option<&ErrorInfo> {
        self.0.error.as_ref()
    }
    /// What the submission's model requests used ([`RunUsage`]; zero when none reported).
    #[must_use]
    pub fn usage(&self) -> RunUsage {
        self.0.usage
    }
}

impl Completion {
    /// The record of a decided submission. Called only by the decider (`lifecycle/outcome.rs`,
    /// checked by `tests/style.rs`); `last` is the activated submission's last assistant message.
    pub(crate) fn record(
        session: SessionId,
        run_id: Option<RunId>,
        seq: Seq,
        ending: Ending,
        last: Option<(MessageId, String)>,
        usage: RunUsage,
    ) -> Completion {
        let Ending { outcome, stop_reason, error } = ending;
        let (message_id, text) = match last {
            Some((id, text)) => (Some(id), Some(text)),
            None => (None, None),
        };
        Completion(Arc::new(Fields {
            session,
            run_id,
            seq,
            outcome,
            stop_reason,
            message_id,
            text,
            error,
            usage,
        }))
    }
}
