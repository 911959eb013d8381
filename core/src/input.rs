//! The input alphabet: every application command and every host reply (SPEC sections 4 and 6).
//!
//! Commands come from clients (submit, cancel, ...); replies report the result of IO that an
//! [`crate::Output`] asked for and name that IO exactly (SPEC I13), so a reply for IO that the
//! core aborted, superseded or never requested is recognised and ignored.

use serde::{Deserialize, Serialize};

use crate::ids::{CallId, RunId, Seq, SessionId, TimerId, TurnId};

/// One input to [`crate::Engine::handle`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Input {
    /// A client hands a prompt to a session (SPEC 4.1). Answered by exactly one
    /// [`crate::Reply`], the first output of the transition.
    Submit(Submit),
    /// Escape on a session (SPEC 4.10): cancels exactly the unfinished submissions of the session
    /// accepted at or before the watermark.
    Cancel {
        /// The session to cancel.
        session: SessionId,
        /// The watermark: the newest sequence the cancel covers. `None` means "everything
        /// accepted so far", the right value for a host whose acceptor is the core itself. A
        /// host with an external acceptor passes the newest sequence that acceptor had assigned
        /// when the user cancelled; submissions at or below it that reach the core later end
        /// `cancelled` on entry.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        up_to: Option<Seq>,
    },
    /// Cancels exactly one run (SPEC 4.10). A finished or unknown run is a no-op.
    CancelRun {
        /// The run to cancel.
        run_id: RunId,
    },
    /// Ends every waiting submission of the session `cancelled`; the active turn is untouched.
    ClearQueue {
        /// The session whose queue is cleared.
        session: SessionId,
    },
    /// Begins shutdown (SPEC 4.10): new submissions are rejected, every unfinished submission
    /// ends `interrupted`, and [`crate::OutputKind::Stopped`] follows when all have.
    Shutdown,
    /// The host finished preparing a submission (answers [`crate::OutputKind::Prepare`]).
    Prepared {
        /// The submission's session.
        session: SessionId,
        /// The submission.
        seq: Seq,
    },
    /// The host could not prepare a submission; it ends `failed` (kind `preparation`).
    PreparationFailed {
        /// The submission's session.
        session: SessionId,
        /// The submission.
        seq: Seq,
        /// What went wrong, shown to the user as the error message.
        error: String,
    },
    /// Something happened in a model step the core started with
    /// [`crate::OutputKind::StartStep`].
    Step {
        /// Which step and attempt this event belongs to.
        step: StepIo,
        /// What happened.
        event: StepEvent,
    },
    /// A tool the core started with [`crate::OutputKind::RunTool`] reported its result.
    ToolResult {
        /// Which call this result belongs to.
        call: CallIo,
        /// The result.
        result: ToolOutput,
    },
    /// A timer the core armed with [`crate::OutputKind::SetTimer`] reached its deadline.
    TimerFired {
        /// The timer.
        timer: TimerId,
    },
}

/// A prompt handed to a session (SPEC 4.1).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Submit {
    /// The target session. Empty is rejected ("session id is missing").
    pub session: SessionId,
    /// The prompt. Empty is allowed only with a text attachment; whitespace counts as text.
    pub prompt: String,
    /// Files handed along with the prompt.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<Attachment>,
    /// The caller's idempotency key. With it the submission is always `own_turn`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<RunId>,
    /// `fold` or `own_turn`; default `fold` without a RunId. Ignored (always `own_turn`) with one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<Mode>,
    /// A sequence assigned by an external acceptor (SPEC 4.10). `None` lets the core assign the
    /// next one. When given it must be above every sequence the core has seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<Seq>,
}

impl Submit {
    /// A plain prompt for a session: no attachment, no RunId, default mode.
    #[must_use]
    pub fn new(session: impl AsRef<str>, prompt: impl Into<String>) -> Submit {
        Submit {
            session: SessionId::new(session),
            prompt: prompt.into(),
            attachments: Vec::new(),
            run_id: None,
            mode: None,
            seq: None,
        }
    }

    /// The same submission carrying a RunId (and therefore `own_turn`).
    #[must_use]
    pub fn with_run_id(mut self, run_id: impl AsRef<str>) -> Submit {
        self.run_id = Some(RunId::new(run_id));
        self
    }

    /// The same submission with an explicit mode.
    #[must_use]
    pub fn with_mode(mut self, mode: Mode) -> Submit {
        self.mode = Some(mode);
        self
    }
}

/// A file handed along with a prompt.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attachment {
    /// The file name.
    pub name: String,
    /// The media type; `text/*` counts as a text attachment (SPEC 4.1).
    pub media_type: String,
    /// The content: text as is, anything else base64-encoded.
    pub content: String,
}

impl Attachment {
    /// True for a text attachment, the kind that makes an empty prompt acceptable.
    #[must_use]
    pub fn is_text(&self) -> bool {
        self.media_type.starts_with("text/")
    }
}

/// How a submission joins its session (SPEC 3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Folded into the running turn at its next step start when it is in the queue's prepared
    /// prefix (SPEC 4.3).
    Fold,
    /// Always gets a turn of its own.
    OwnTurn,
}

/// Names one attempt of one model step (SPEC I13).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct StepIo {
    /// The session.
    pub session: SessionId,
    /// The submission that owns the turn.
    pub seq: Seq,
    /// The turn.
    pub turn: TurnId,
    /// The step within the turn, from 0.
    pub step: u32,
    /// The attempt within the step, from 0.
    pub attempt: u32,
}

/// Names one tool call of one step (SPEC I13).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct CallIo {
    /// The session.
    pub session: SessionId,
    /// The submission that owns the turn.
    pub seq: Seq,
    /// The turn.
    pub turn: TurnId,
    /// The step within the turn.
    pub step: u32,
    /// The tool call.
    pub call: CallId,
}

/// What happened during a model step's attempt (SPEC 4.4).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum StepEvent {
    /// Streamed assistant text.
    TextDelta {
        /// The text.
        text: String,
    },
    /// A complete tool call streamed by the model.
    ToolCall {
        /// The provider's call id.
        id: CallId,
        /// The tool's name.
        name: String,
        /// The call's arguments, as the model wrote them (JSON text).
        input: String,
    },
    /// The stream ended with a finish reason.
    Finished {
        /// The provider's finish reason, normalised by the host.
        reason: FinishReason,
    },
    /// The attempt failed and will not be retried.
    Failed {
        /// The classified error.
        error: ProviderError,
    },
}

/// A provider's finish reason, normalised by the host (SPEC 4.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// `stop`: the model ended its turn.
    Stop,
    /// `length`: the output hit the token limit.
    Length,
    /// `tool_calls`: the model asked for tools.
    ToolCalls,
    /// `content_filter`: the provider filtered the output.
    ContentFilter,
    /// Anything else.
    Other,
}

/// A provider failure as the host classified it (SPEC 4.5 and 4.6).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderError {
    /// The class, which decides the error kind of the outcome.
    pub class: ErrorClass,
    /// The provider's title, if it gave one; the core puts it in Title Case.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The error text.
    pub message: String,
}

/// The class of a provider failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorClass {
    /// The provider answered with an error.
    Provider,
    /// The connection or the stream broke.
    Transport,
    /// The provider refused the credentials.
    Unauthorized,
}

/// A tool's result as the host reports it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolOutput {
    /// The result text (or error text).
    pub content: String,
    /// True when the tool failed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_error: bool,
    /// Set when the result asks to stop the turn (SPEC 4.6 case 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<StopTurn>,
}

impl ToolOutput {
    /// A successful result with this text.
    #[must_use]
    pub fn ok(content: impl Into<String>) -> ToolOutput {
        ToolOutput { content: content.into(), is_error: false, stop: None }
    }
}

/// Why a tool result stops the turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopTurn {
    /// The user or the permission gate denied the call.
    PermissionDenied,
    /// A pre-tool hook halted the turn (exit 49).
    HookHalt,
}
