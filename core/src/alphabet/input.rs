//! The input alphabet: every application command and every host reply (SPEC sections 4 and 6).
//!
//! Commands come from clients (submit, cancel, ...); replies report the result of IO that an
//! [`crate::Output`] asked for and name that IO exactly (SPEC I13), so a reply for IO that the
//! core aborted, superseded or never requested is recognised and ignored.

use serde::{Deserialize, Serialize};

use crate::alphabet::ids::{CallId, RunId, Seq, SessionId, TimerId, TurnId};

/// One input to [`crate::Engine::handle`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, tag = "type", rename_all = "snake_case")]
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
        /// What the preparation resolved: the tools, the model's context window, the session's
        /// stored gauges and title.
        #[serde(default, skip_serializing_if = "Setup::is_empty")]
        setup: Setup,
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
    /// The work of a call whose tool is left to finish once started
    /// ([`OnAbort::FinishOnceStarted`]) is about to begin: what came before it (a person's
    /// answer to a permission ask, a hook) is over. From this input on, an abort leaves the call
    /// to finish; before it, an abort drops the call, and a late `ToolStarted` is stale (I13).
    /// The host begins the work only when [`crate::Engine::is_tool_started`] says so right
    /// after this input; otherwise the call was aborted and its work must never begin.
    ToolStarted {
        /// Which call begins its work.
        call: CallIo,
    },
    /// A tool the core started with [`crate::OutputKind::RunTool`] reported its result.
    ToolResult {
        /// Which call this result belongs to.
        call: CallIo,
        /// The result.
        result: ToolOutput,
    },
    /// The credential refresh the core asked for with
    /// [`crate::OutputKind::RefreshCredentials`] ended (SPEC 4.5).
    CredentialsRefreshed {
        /// The attempt (of a step or a summary) that was refused.
        attempt: AttemptIo,
        /// True when fresh credentials are in place; false when the refresh failed.
        ok: bool,
    },
    /// A manual request to summarize a session (SPEC 4.7): rejected while the session is busy,
    /// otherwise the session summarizes as housekeeping.
    Summarize {
        /// The session.
        session: SessionId,
    },
    /// Something happened in the summary request the core started with
    /// [`crate::OutputKind::StartSummary`]: text deltas, the finish, or a failure.
    Summary {
        /// Which summary attempt this event belongs to.
        io: SummaryIo,
        /// What happened (reasoning and tool events are ignored in a summary).
        event: StepEvent,
    },
    /// The title the core asked for with [`crate::OutputKind::RequestTitle`] (SPEC 4.11).
    TitleGenerated {
        /// The session.
        session: SessionId,
        /// The submission named by the request.
        seq: Seq,
        /// The generated title; `None` when generation failed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
        /// What generating it used and cost.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<Usage>,
    },
    /// A timer the core armed with [`crate::OutputKind::SetTimer`] reached its deadline.
    TimerFired {
        /// The timer.
        timer: TimerId,
    },
}

/// A prompt handed to a session (SPEC 4.1).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
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

/// What a preparation resolved for a submission (SPEC 4.1): the turn runs with it.
#[derive(Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Setup {
    /// The tools the turn may call. A call to any other name gets "tool not found: `<name>`"
    /// without running (SPEC 4.4). The `agent` tool starts sub-agents (SPEC 4.11).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolSpec>,
    /// The resolved model's context window in tokens; 0 when unknown (never summarizes).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub context_window: u64,
    /// The session's stored `prompt_tokens` gauge.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub prompt_tokens: u64,
    /// The session's stored `completion_tokens` gauge.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub completion_tokens: u64,
    /// True when the session already has a title (no title is requested then).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub titled: bool,
}

clone_reusing!(Setup { tools, context_window, prompt_tokens, completion_tokens, titled });

impl Setup {
    /// A setup with these tools (not interactive, dropped on abort) and nothing else known.
    #[must_use]
    pub fn with_tools(names: &[&str]) -> Setup {
        let tools = names.iter().map(|n| ToolSpec::new(*n)).collect();
        Setup { tools, ..Setup::default() }
    }

    /// True when nothing was resolved (the serialised form omits it).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        *self == Setup::default()
    }

    /// The spec of the tool with this name, if the turn may call it.
    #[must_use]
    pub fn tool(&self, name: &str) -> Option<&ToolSpec> {
        self.tools.iter().find(|t| t.name == name)
    }

    /// What an abort does to a running call of the tool with this name (SPEC 4.9); a call runs
    /// only for a tool of the setup, so an unknown name reads as the default.
    #[must_use]
    pub fn abort_policy(&self, name: &str) -> OnAbort {
        self.tool(name).map_or(OnAbort::Drop, |spec| spec.on_abort)
    }
}

/// A tool the turn may call.
#[derive(Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ToolSpec {
    /// The tool's name as the model calls it.
    pub name: String,
    /// True for a tool that asks a person (sub-agents do not get these, SPEC 4.11).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interactive: bool,
    /// What the host does with a running call when its turn is aborted (SPEC 4.9). The core
    /// decides from it, in the abort's own transition, which calls can still report: only those
    /// hold the turn's clean-up back.
    #[serde(default, skip_serializing_if = "OnAbort::is_drop")]
    pub on_abort: OnAbort,
}

clone_reusing!(ToolSpec { name, interactive, on_abort });

impl ToolSpec {
    /// A tool that is not interactive and whose calls the host drops on abort (the default).
    #[must_use]
    pub fn new(name: impl Into<String>) -> ToolSpec {
        ToolSpec { name: name.into(), interactive: false, on_abort: OnAbort::Drop }
    }

    /// The same tool, with calls that an abort must leave to finish ([`OnAbort::Finish`]).
    #[must_use]
    pub fn left_to_finish(mut self) -> ToolSpec {
        self.on_abort = OnAbort::Finish;
        self
    }

    /// The same tool, with calls that may wait before their work begins (a permission ask)
    /// and that an abort leaves to finish only once it has
    /// ([`OnAbort::FinishOnceStarted`]).
    #[must_use]
    pub fn left_to_finish_once_started(mut self) -> ToolSpec {
        self.on_abort = OnAbort::FinishOnceStarted;
        self
    }
}

/// What happens to a running tool call when its turn is aborted (cancel, cancel_run, shutdown;
/// SPEC 4.9).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum OnAbort {
    /// The core emits [`crate::OutputKind::AbortTool`] and the host drops the call's work at
    /// once: it never reports (a result that arrives anyway is ignored, I13). Clean-up does not
    /// wait for it, so a cancel during a long call ends at once.
    #[default]
    Drop,
    /// The call has effects that must not be cut off half-way: the core sends no abort, the
    /// host lets it finish and reports its result, which is written if it arrives before the
    /// turn's clean-up (the tool really ran). Clean-up waits for it up to the cancel grace (or
    /// the shutdown deadline); a result after clean-up is ignored.
    Finish,
    /// The call may wait before its work begins (a person's answer to a permission ask, a
    /// hook), and that wait is droppable even though the work is not: until the host reports
    /// [`crate::Input::ToolStarted`] the call is treated as [`OnAbort::Drop`] (an abort emits
    /// [`crate::OutputKind::AbortTool`], withdrawing the ask at once, and nothing waits for
    /// it); from then on as [`OnAbort::Finish`]. So no answer that arrives after an abort can
    /// run the call, and a cancel never waits the grace for a question nobody answered.
    FinishOnceStarted,
}

impl OnAbort {
    /// True for [`OnAbort::Drop`] (the serialised form omits it).
    #[must_use]
    pub fn is_drop(&self) -> bool {
        *self == OnAbort::Drop
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A file handed along with a prompt.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
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
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Folded into the running turn at its next step start when it is in the queue's prepared
    /// prefix (SPEC 4.3).
    Fold,
    /// Always gets a turn of its own.
    OwnTurn,
}

/// Names one attempt of one model step (SPEC I13).
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
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

clone_reusing!(StepIo { session, seq, turn, step, attempt });

/// Names one attempt of a summarization (SPEC I13).
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SummaryIo {
    /// The session.
    pub session: SessionId,
    /// The summarization (numbered like turns).
    pub summary: TurnId,
    /// The attempt, from 0.
    pub attempt: u32,
}

clone_reusing!(SummaryIo { session, summary, attempt });

/// Names the attempt a credential refresh is for: a model step's or a summary's.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, tag = "of", rename_all = "snake_case")]
pub enum AttemptIo {
    /// A model step's attempt.
    Step(StepIo),
    /// A summary's attempt.
    Summary(SummaryIo),
}

impl AttemptIo {
    /// The session the attempt belongs to.
    #[must_use]
    pub fn session(&self) -> &SessionId {
        match self {
            AttemptIo::Step(s) => &s.session,
            AttemptIo::Summary(s) => &s.session,
        }
    }
}

/// Names one tool call of one step (SPEC I13).
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
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

clone_reusing!(CallIo { session, seq, turn, step, call });

/// What happened during a model step's attempt (SPEC 4.4).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum StepEvent {
    /// A reasoning section begins.
    ReasoningStart,
    /// Streamed reasoning text.
    ReasoningDelta {
        /// The text.
        text: String,
    },
    /// The reasoning section ends, with the provider's signature when it gives one.
    ReasoningEnd {
        /// The provider's signature of the reasoning, kept for the next request.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
    },
    /// Streamed assistant text. While the message has no content part yet (also right after a
    /// retry reset), one leading "\n" is removed; after reasoning it is kept.
    TextDelta {
        /// The text.
        text: String,
    },
    /// A tool call started streaming: it is unfinished until its `tool_call` arrives.
    ToolInputStart {
        /// The provider's call id.
        id: CallId,
        /// The tool's name.
        name: String,
    },
    /// A complete tool call (replaces the unfinished one with the same id).
    ToolCall {
        /// The provider's call id.
        id: CallId,
        /// The tool's name.
        name: String,
        /// The call's arguments, as the model wrote them (JSON text).
        input: String,
    },
    /// The stream ended with a finish reason and, when the provider reported it, usage.
    Finished {
        /// The provider's finish reason, normalised by the host.
        reason: FinishReason,
        /// Token usage and cost; `None` when the provider reported nothing (the host then
        /// sends an estimate, see [`Usage::estimate`], or nothing at all).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<Usage>,
    },
    /// The attempt failed; the core decides whether to retry (SPEC 4.5).
    Failed {
        /// The classified error.
        error: ProviderError,
    },
}

/// Token usage of one step (SPEC 4.4).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Usage {
    /// Input tokens.
    #[serde(default)]
    pub input_tokens: u64,
    /// Output tokens.
    #[serde(default)]
    pub output_tokens: u64,
    /// Input tokens read from the provider's cache.
    #[serde(default)]
    pub cache_read_tokens: u64,
    /// Input tokens written to the provider's cache.
    #[serde(default)]
    pub cache_creation_tokens: u64,
    /// The step's cost in millionths of the account's currency unit (the host prices it).
    #[serde(default)]
    pub cost_micros: u64,
    /// True when the host estimated the tokens (no usage reported): such usage costs nothing.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub estimated: bool,
}

impl Usage {
    /// The estimate SPEC 4.4 prescribes when a provider reports no usage: over the request's
    /// strings (role names, texts, reasoning, tool names, inputs, ids, outputs) the sum of
    /// ceil(bytes / 4) per string, 0 for an empty one; estimated usage costs 0.
    #[must_use]
    pub fn estimate<'a>(
        request: impl IntoIterator<Item = &'a str>,
        response: impl IntoIterator<Item = &'a str>,
    ) -> Usage {
        let tokens = |strings: &mut dyn Iterator<Item = &'a str>| {
            strings.map(|s| s.len().div_ceil(4) as u64).sum()
        };
        Usage {
            input_tokens: tokens(&mut request.into_iter()),
            output_tokens: tokens(&mut response.into_iter()),
            estimated: true,
            ..Usage::default()
        }
    }

    /// The context the step used: input + cache-read + cache-creation tokens.
    #[must_use]
    pub fn prompt_tokens(&self) -> u64 {
        self.input_tokens + self.cache_read_tokens + self.cache_creation_tokens
    }

    /// The cost to account: estimated usage costs nothing (SPEC 4.4).
    #[must_use]
    pub fn billed_micros(&self) -> u64 {
        if self.estimated { 0 } else { self.cost_micros }
    }
}

/// A provider's finish reason, normalised by the host (SPEC 4.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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

/// A provider failure as the host saw it (SPEC 4.5 and 4.6). The core decides from it whether
/// to retry, refresh credentials or fail.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ProviderError {
    /// The class, which decides the error kind of the outcome.
    pub class: ErrorClass,
    /// The HTTP status, when there was a response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// The `x-should-retry` header, when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub should_retry: Option<bool>,
    /// The `retry-after-ms` header, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
    /// The `retry-after` header converted to milliseconds (seconds or an HTTP date).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after: Option<u64>,
    /// The provider's title, if it gave one; the core puts it in Title Case.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The error text.
    pub message: String,
}

impl ProviderError {
    /// True for an authentication failure: HTTP 401 or the provider's auth-error flag (the
    /// `unauthorized` class); 403 is not one.
    #[must_use]
    pub fn is_unauthorized(&self) -> bool {
        self.class == ErrorClass::Unauthorized || self.status == Some(401)
    }

    /// True when SPEC 4.5 allows a retry: HTTP 408, 409, 429 or 5xx, `x-should-retry: true`, a
    /// stream that ended without a finish, or a transport error.
    #[must_use]
    pub fn is_retryable(&self) -> bool {
        matches!(self.status, Some(408 | 409 | 429 | 500..=599))
            || self.should_retry == Some(true)
            || matches!(self.class, ErrorClass::Transport | ErrorClass::Incomplete)
    }

    /// The header delay SPEC 4.5 honours: `retry-after-ms` wins over `retry-after`.
    #[must_use]
    pub fn header_delay_ms(&self) -> Option<u64> {
        self.retry_after_ms.or(self.retry_after)
    }
}

/// The class of a provider failure.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ErrorClass {
    /// The provider answered with an error.
    #[default]
    Provider,
    /// The connection or the stream broke.
    Transport,
    /// The provider refused the credentials.
    Unauthorized,
    /// The stream ended without a finish (retryable; reported as a transport error).
    Incomplete,
}

/// A tool's result as the host reports it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
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

    /// A failed result with this text: the model reads it and the turn goes on.
    #[must_use]
    pub fn error(content: impl Into<String>) -> ToolOutput {
        ToolOutput { content: content.into(), is_error: true, stop: None }
    }
}

/// Why a tool result stops the turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum StopTurn {
    /// The user or the permission gate denied the call.
    PermissionDenied,
    /// A pre-tool hook halted the turn (exit 49).
    HookHalt,
}
