//! The output alphabet: what the core asks its host to do, numbered and in SPEC section 7 order.
//!
//! Outputs are drained with [`crate::Engine::poll_output`]. Each carries a number that is
//! strictly increasing over the engine's life, so a run of the core is a pure function from an
//! input sequence to an output sequence (SPEC I12).

use std::fmt;

use serde::Serialize;

use crate::alphabet::ids::{CallId, MessageId, Millis, RunId, Seq, SessionId, TimerId, TurnId};
use crate::alphabet::input::{Attachment, AttemptIo, CallIo, Mode, StepIo, SummaryIo};
use crate::alphabet::outcome::{Completion, Outcome};

/// One numbered output.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Output {
    /// Strictly increasing from 0 over the engine's life.
    pub no: u64,
    /// What to do.
    pub kind: OutputKind,
}

/// What the host must do. See the host protocol in the crate docs for the rules of each kind.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum OutputKind {
    /// The answer to a [`crate::Input::Submit`]; always the first output of its transition.
    Reply(Reply),
    /// Prepare this submission (resolve the model, refresh credentials, wait for tool servers)
    /// and answer [`crate::Input::Prepared`] or [`crate::Input::PreparationFailed`].
    Prepare {
        /// The submission's session.
        session: SessionId,
        /// The submission.
        seq: Seq,
    },
    /// Stop preparing this submission; any later reply for it is ignored.
    AbortPreparation {
        /// The submission's session.
        session: SessionId,
        /// The submission.
        seq: Seq,
    },
    /// A durable write. Writes of one session are totally ordered and must be applied in order.
    Store(StoreOp),
    /// The writes of this session since its previous `Commit` form one transaction: commit it
    /// now, before performing any later output that concerns the session (SPEC 4.12). A commit
    /// whose transaction holds only [`StoreOp::AppendText`] or [`StoreOp::AppendReasoning`] may
    /// be deferred by the debounce
    /// window; a [`StoreOp::Flush`] ends any deferral.
    Commit {
        /// The session whose transaction ends here.
        session: SessionId,
    },
    /// Start one attempt of a model step: build the request from the store (after applying
    /// every earlier write) and stream the answer back as [`crate::Input::Step`] events.
    StartStep {
        /// The step, named as every reply for it must name it.
        step: StepIo,
    },
    /// Close this step's stream at once; later events for it are ignored.
    AbortStep {
        /// The step.
        step: StepIo,
    },
    /// The provider refused the credentials (HTTP 401): refresh them, waiting up to 5 minutes
    /// for a person if needed, and answer [`crate::Input::CredentialsRefreshed`] (SPEC 4.5).
    RefreshCredentials {
        /// The refused attempt.
        attempt: AttemptIo,
    },
    /// Stop waiting for the credential refresh at once (a cancel, SPEC 4.5 and G-13).
    AbortRefresh {
        /// The refused attempt.
        attempt: AttemptIo,
    },
    /// Start one attempt of a summarization: request "Provide a detailed summary of our
    /// conversation above." over the session's history and stream the answer back as
    /// [`crate::Input::Summary`] events (SPEC 4.7).
    StartSummary {
        /// The attempt, named as every reply for it must name it.
        io: SummaryIo,
    },
    /// Close this summary's stream at once; later events for it are ignored.
    AbortSummary {
        /// The attempt.
        io: SummaryIo,
    },
    /// Generate a title for the session from this prompt, and answer
    /// [`crate::Input::TitleGenerated`]. Not awaited: nothing waits for it (SPEC 4.11).
    RequestTitle {
        /// The session.
        session: SessionId,
        /// The submission whose first activation asked for it.
        seq: Seq,
        /// The prompt.
        prompt: String,
    },
    /// Stop generating the title (shutdown); the core wrote the prompt's title instead.
    AbortTitle {
        /// The session.
        session: SessionId,
        /// The submission named by the request.
        seq: Seq,
    },
    /// Run a tool and answer [`crate::Input::ToolResult`].
    RunTool {
        /// The call, named as its result must name it.
        call: CallIo,
        /// The tool's name.
        name: String,
        /// The call's arguments (JSON text).
        input: String,
    },
    /// Drop a running tool call at once (its tool is [`crate::OnAbort::Drop`]): it will never
    /// report, nothing waits for it, and a result that still arrives is ignored (I13). A call
    /// of a tool left to finish ([`crate::OnAbort::Finish`]) is never aborted (SPEC 4.9).
    AbortTool {
        /// The call.
        call: CallIo,
    },
    /// Arm a timer; answer [`crate::Input::TimerFired`] at or after `deadline`.
    SetTimer {
        /// The timer.
        timer: TimerId,
        /// When it fires.
        deadline: Millis,
        /// Why it exists (for logs and traces).
        purpose: TimerPurpose,
    },
    /// Disarm a timer; a firing that still arrives is ignored.
    CancelTimer {
        /// The timer.
        timer: TimerId,
    },
    /// A submission's outcome, decided exactly once; publish it (and its RunComplete, if it has
    /// one) only after the preceding `Commit` of its session is durable.
    Finished(Completion),
    /// Shutdown is complete: no submission is unfinished and no IO is pending. Emitted once.
    Stopped,
}

/// What a host must do with an output, by kind: the three classes of the host protocol.
///
/// A host handles the outputs it knows and falls back on the class for the rest; it must never
/// drop an output of the first two classes (the enums are `#[non_exhaustive]`, so a catch-all
/// arm is needed: make it check the class).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum OutputClass {
    /// Start the IO and, when it ends, send the input that answers it, naming the IO exactly
    /// as the output did ([`OutputKind::Prepare`], [`OutputKind::StartStep`],
    /// [`OutputKind::RunTool`], [`OutputKind::RefreshCredentials`],
    /// [`OutputKind::StartSummary`], [`OutputKind::SetTimer`]: `TimerFired` at the deadline).
    /// A submission waits for the answer: a host that drops one of these hangs it forever.
    MustAnswer,
    /// Carry it out, in order; no input answers it ([`OutputKind::Reply`]: answer the caller;
    /// [`OutputKind::Store`] and [`OutputKind::Commit`]: the durable writes, SPEC 4.12;
    /// [`OutputKind::Finished`]: publish the completion after its commit). Dropping one loses a
    /// reply, a write or a completion.
    MustPerform,
    /// Safe to ignore: the core already behaves as if it were done. The `Abort*` outputs and
    /// [`OutputKind::CancelTimer`] stop IO the core no longer waits for (what still arrives is
    /// ignored, I13; stopping it only saves work); [`OutputKind::RequestTitle`] and
    /// [`OutputKind::AbortTitle`]: nothing waits for a title (an unanswered request leaves the
    /// session untitled); [`OutputKind::Stopped`] only reports that shutdown completed.
    MayIgnore,
}

impl OutputKind {
    /// The output's class: whether the host must answer it, must perform it, or may ignore it.
    #[must_use]
    pub fn class(&self) -> OutputClass {
        match self {
            OutputKind::Prepare { .. }
            | OutputKind::StartStep { .. }
            | OutputKind::RunTool { .. }
            | OutputKind::RefreshCredentials { .. }
            | OutputKind::StartSummary { .. }
            | OutputKind::SetTimer { .. } => OutputClass::MustAnswer,
            OutputKind::Reply(_)
            | OutputKind::Store(_)
            | OutputKind::Commit { .. }
            | OutputKind::Finished(_) => OutputClass::MustPerform,
            OutputKind::AbortPreparation { .. }
            | OutputKind::AbortStep { .. }
            | OutputKind::AbortTool { .. }
            | OutputKind::AbortRefresh { .. }
            | OutputKind::AbortSummary { .. }
            | OutputKind::CancelTimer { .. }
            | OutputKind::RequestTitle { .. }
            | OutputKind::AbortTitle { .. }
            | OutputKind::Stopped => OutputClass::MayIgnore,
        }
    }

    /// The session this output concerns, if it concerns one.
    #[must_use]
    pub fn session(&self) -> Option<&SessionId> {
        match self {
            OutputKind::Reply(
                Reply::Accepted { session, .. }
                | Reply::Existing { session, .. }
                | Reply::Summarizing { session },
            ) => Some(session),
            OutputKind::Prepare { session, .. }
            | OutputKind::AbortPreparation { session, .. }
            | OutputKind::RequestTitle { session, .. }
            | OutputKind::AbortTitle { session, .. }
            | OutputKind::Commit { session } => Some(session),
            OutputKind::Store(op) => Some(op.session()),
            OutputKind::StartStep { step } | OutputKind::AbortStep { step } => Some(&step.session),
            OutputKind::RefreshCredentials { attempt } | OutputKind::AbortRefresh { attempt } => {
                Some(attempt.session())
            }
            OutputKind::StartSummary { io } | OutputKind::AbortSummary { io } => Some(&io.session),
            OutputKind::RunTool { call, .. } | OutputKind::AbortTool { call } => {
                Some(&call.session)
            }
            OutputKind::SetTimer { purpose, .. } => match purpose {
                TimerPurpose::CancelGrace { session, .. }
                | TimerPurpose::Retry { session, .. }
                | TimerPurpose::StreamIdle { session, .. } => Some(session),
                TimerPurpose::ShutdownDeadline => None,
            },
            OutputKind::Finished(c) => Some(c.session()),
            OutputKind::Reply(Reply::Rejected { .. })
            | OutputKind::CancelTimer { .. }
            | OutputKind::Stopped => None,
        }
    }
}

/// The reply to a submission (SPEC 4.1).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, tag = "reply", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Reply {
    /// A new submission: insert its ledger row (the host holds the submission's content) and
    /// make it durable before answering the caller.
    Accepted {
        /// The session.
        session: SessionId,
        /// The sequence assigned at acceptance.
        seq: Seq,
        /// The caller's RunId, if any.
        #[serde(skip_serializing_if = "Option::is_none")]
        run_id: Option<RunId>,
        /// The mode the submission runs in.
        mode: Mode,
    },
    /// A byte-equal resubmission of a known RunId: no new submission, the existing run.
    Existing {
        /// The session.
        session: SessionId,
        /// The run's sequence.
        seq: Seq,
        /// The run.
        run_id: RunId,
        /// The run's outcome, if it has finished.
        #[serde(skip_serializing_if = "Option::is_none")]
        outcome: Option<Outcome>,
    },
    /// A manual `summarize` was accepted: the session summarizes as housekeeping.
    Summarizing {
        /// The session.
        session: SessionId,
    },
    /// The submission (or manual summarize) was rejected; no sequence was consumed.
    Rejected {
        /// Why.
        error: Rejection,
    },
}

/// Why a submission was rejected. `Display` gives SPEC section 8's exact strings.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, tag = "reason", content = "id", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Rejection {
    /// "prompt is empty"
    PromptEmpty,
    /// "session id is missing"
    SessionIdMissing,
    /// "cannot continue an agent tool session: `<id>`"
    ChildSession(SessionId),
    /// "workspace closing"
    WorkspaceClosing,
    /// "run id `<id>` is already used by a different request"
    RunIdConflict(RunId),
    /// "session is currently processing another request" (a manual summarize while busy)
    Busy,
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rejection::PromptEmpty => f.write_str("prompt is empty"),
            Rejection::SessionIdMissing => f.write_str("session id is missing"),
            Rejection::ChildSession(id) => write!(f, "cannot continue an agent tool session: {id}"),
            Rejection::WorkspaceClosing => f.write_str("workspace closing"),
            Rejection::Busy => f.write_str("session is currently processing another request"),
            Rejection::RunIdConflict(id) => {
                write!(f, "run id {id} is already used by a different request")
            }
        }
    }
}

/// A durable write (SPEC 4.12). Every op names its session and, where it belongs to one, the
/// submission, so a host can route it and an auditor can check I9.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, tag = "op", rename_all = "snake_case")]
#[non_exhaustive]
pub enum StoreOp {
    /// The submission became the active turn (in the same transaction as its user message).
    LedgerActivated {
        /// The session.
        session: SessionId,
        /// The submission.
        seq: Seq,
        /// The turn it runs in.
        turn: TurnId,
    },
    /// The submission's outcome with its completion payload (the RunComplete, when it has a
    /// RunId), written in the transaction that carries the turn's final writes.
    LedgerOutcome {
        /// The completion record.
        completion: Completion,
    },
    /// A sub-agent's submission and session (SPEC 4.11): the ledger row of the child submission
    /// (a sequence, no RunId, never queued) and the child session with its title and parent.
    ChildAccepted {
        /// The child session, `<assistant message id>$$<tool call id>`.
        session: SessionId,
        /// The child submission.
        seq: Seq,
        /// The calling session.
        parent: SessionId,
        /// The submission whose turn made the call.
        parent_seq: Seq,
        /// The prompt the `agent` call gave.
        prompt: String,
        /// "New Agent Session".
        title: &'static str,
    },
    /// The submission paused for a summarization (SPEC 4.7): not ended, not queued.
    LedgerPaused {
        /// The session.
        session: SessionId,
        /// The submission.
        seq: Seq,
    },
    /// A user message: the submission's prompt, written when it is activated or folded; or the
    /// synthetic continuation prompt of a resumed submission.
    UserMessage {
        /// The session.
        session: SessionId,
        /// The submission the message belongs to.
        seq: Seq,
        /// The message.
        id: MessageId,
        /// The text.
        text: String,
        /// The files the caller handed along with the prompt (none on a continuation). A boxed
        /// slice keeps every output small.
        #[serde(default, skip_serializing_if = "<[Attachment]>::is_empty")]
        attachments: Box<[Attachment]>,
        /// True for the continuation prompt the core wrote on resume (SPEC 4.7).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        synthetic: bool,
    },
    /// The session's title: a field update that changes nothing else (SPEC 4.11).
    Title {
        /// The session.
        session: SessionId,
        /// The title.
        title: String,
    },
    /// A new, empty summary message (SPEC 4.7).
    SummaryMessage {
        /// The session.
        session: SessionId,
        /// The message.
        id: MessageId,
    },
    /// Streamed summary text appended: coalescible.
    SummaryText {
        /// The session.
        session: SessionId,
        /// The message.
        id: MessageId,
        /// The text to append.
        text: String,
    },
    /// The summary's streamed text is cleared before a retry (structural).
    SummaryReset {
        /// The session.
        session: SessionId,
        /// The message.
        id: MessageId,
    },
    /// The summary succeeded: it becomes the session's summary pointer (history starts there)
    /// and the gauges reset: `prompt_tokens` 0, `completion_tokens` the summary's output.
    SummaryDone {
        /// The session.
        session: SessionId,
        /// The summary message.
        id: MessageId,
        /// The summary's output tokens, the new `completion_tokens`.
        completion_tokens: u64,
    },
    /// The summary failed: only the summary message is marked (SPEC 4.7).
    SummaryFailed {
        /// The session.
        session: SessionId,
        /// The summary message.
        id: MessageId,
        /// The classified title.
        title: String,
        /// The error text.
        message: String,
    },
    /// A cancelled summary's partial message is deleted (SPEC 4.7).
    SummaryDeleted {
        /// The session.
        session: SessionId,
        /// The summary message.
        id: MessageId,
    },
    /// A new, empty assistant message for one step of a turn.
    AssistantMessage {
        /// The session.
        session: SessionId,
        /// The submission that owns the turn.
        seq: Seq,
        /// The message.
        id: MessageId,
        /// The turn.
        turn: TurnId,
        /// The step.
        step: u32,
    },
    /// A reasoning section begins in an assistant message (structural).
    ReasoningStarted {
        /// The session.
        session: SessionId,
        /// The submission that owns the turn.
        seq: Seq,
        /// The message.
        id: MessageId,
    },
    /// Streamed reasoning appended: coalescible.
    AppendReasoning {
        /// The session.
        session: SessionId,
        /// The submission that owns the turn.
        seq: Seq,
        /// The message.
        id: MessageId,
        /// The text to append.
        text: String,
    },
    /// The reasoning section ends, with the provider's signature (structural).
    ReasoningEnded {
        /// The session.
        session: SessionId,
        /// The submission that owns the turn.
        seq: Seq,
        /// The message.
        id: MessageId,
        /// The provider's signature, kept for later requests.
        #[serde(skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
    },
    /// A tool call began streaming: an unfinished call in the message (structural).
    ToolInputStarted {
        /// The session.
        session: SessionId,
        /// The submission that owns the turn.
        seq: Seq,
        /// The assistant message holding the call.
        id: MessageId,
        /// The call.
        call: CallId,
        /// The tool's name.
        name: String,
    },
    /// The message's streamed content (text, reasoning, tool calls) is cleared before a retry,
    /// so an attempt is never appended to a failed one (SPEC 4.5; structural).
    MessageReset {
        /// The session.
        session: SessionId,
        /// The submission that owns the turn.
        seq: Seq,
        /// The message.
        id: MessageId,
    },
    /// Field-level update of the session's gauges and cost (SPEC 4.4): each gauge is **set**
    /// when present, the cost is **added**; never a read-modify-write of the session row.
    SessionUsage {
        /// The session.
        session: SessionId,
        /// The submission whose step used it (none for a housekeeping summary).
        #[serde(skip_serializing_if = "Option::is_none")]
        seq: Option<Seq>,
        /// New `prompt_tokens` (input + cache read + cache creation), when non-zero.
        #[serde(skip_serializing_if = "Option::is_none")]
        prompt_tokens: Option<u64>,
        /// New `completion_tokens`, when non-zero.
        #[serde(skip_serializing_if = "Option::is_none")]
        completion_tokens: Option<u64>,
        /// Cost to add, in millionths.
        cost_micros: u64,
        /// For a sub-agent, the session the same cost is added to in the same write: its parent,
        /// its only ancestor (sub-agents have depth 1, SPEC 4.11).
        #[serde(skip_serializing_if = "Option::is_none")]
        ancestor: Option<SessionId>,
    },
    /// Streamed text appended to an assistant message: coalescible (debounced by the host).
    AppendText {
        /// The session.
        session: SessionId,
        /// The submission that owns the turn.
        seq: Seq,
        /// The message.
        id: MessageId,
        /// The text to append.
        text: String,
    },
    /// A complete tool call added to an assistant message (structural).
    ToolCall {
        /// The session.
        session: SessionId,
        /// The submission that owns the turn.
        seq: Seq,
        /// The assistant message holding the call.
        id: MessageId,
        /// The call.
        call: CallId,
        /// The tool's name.
        name: String,
        /// The call's arguments.
        input: String,
    },
    /// A tool result, appended after the existing results of its assistant message.
    ToolResult {
        /// The session.
        session: SessionId,
        /// The submission that owns the turn.
        seq: Seq,
        /// The assistant message holding the call.
        id: MessageId,
        /// The call.
        call: CallId,
        /// The result text.
        content: String,
        /// True for an error result.
        is_error: bool,
        /// True when the core synthesized it at clean-up (the tool never reported).
        synthetic: bool,
    },
    /// The assistant message's finish (structural).
    MessageFinished {
        /// The session.
        session: SessionId,
        /// The submission that owns the turn.
        seq: Seq,
        /// The message.
        id: MessageId,
        /// How it finished.
        finish: MessageFinish,
    },
    /// Write every coalesced update of this session now (the final flush of a turn).
    Flush {
        /// The session.
        session: SessionId,
    },
}

impl StoreOp {
    /// The session this write belongs to.
    #[must_use]
    pub fn session(&self) -> &SessionId {
        match self {
            StoreOp::LedgerOutcome { completion } => completion.session(),
            StoreOp::LedgerActivated { session, .. }
            | StoreOp::ReasoningStarted { session, .. }
            | StoreOp::AppendReasoning { session, .. }
            | StoreOp::ReasoningEnded { session, .. }
            | StoreOp::ToolInputStarted { session, .. }
            | StoreOp::MessageReset { session, .. }
            | StoreOp::SessionUsage { session, .. }
            | StoreOp::LedgerPaused { session, .. }
            | StoreOp::ChildAccepted { session, .. }
            | StoreOp::Title { session, .. }
            | StoreOp::SummaryMessage { session, .. }
            | StoreOp::SummaryText { session, .. }
            | StoreOp::SummaryReset { session, .. }
            | StoreOp::SummaryDone { session, .. }
            | StoreOp::SummaryFailed { session, .. }
            | StoreOp::SummaryDeleted { session, .. }
            | StoreOp::UserMessage { session, .. }
            | StoreOp::AssistantMessage { session, .. }
            | StoreOp::AppendText { session, .. }
            | StoreOp::ToolCall { session, .. }
            | StoreOp::ToolResult { session, .. }
            | StoreOp::MessageFinished { session, .. }
            | StoreOp::Flush { session } => session,
        }
    }

    /// The submission this write belongs to, if any.
    #[must_use]
    pub fn seq(&self) -> Option<Seq> {
        match self {
            StoreOp::LedgerOutcome { completion } => Some(completion.seq()),
            StoreOp::LedgerActivated { seq, .. }
            | StoreOp::ReasoningStarted { seq, .. }
            | StoreOp::AppendReasoning { seq, .. }
            | StoreOp::ReasoningEnded { seq, .. }
            | StoreOp::ToolInputStarted { seq, .. }
            | StoreOp::MessageReset { seq, .. }
            | StoreOp::LedgerPaused { seq, .. }
            | StoreOp::ChildAccepted { seq, .. }
            | StoreOp::UserMessage { seq, .. }
            | StoreOp::AssistantMessage { seq, .. }
            | StoreOp::AppendText { seq, .. }
            | StoreOp::ToolCall { seq, .. }
            | StoreOp::ToolResult { seq, .. }
            | StoreOp::MessageFinished { seq, .. } => Some(*seq),
            StoreOp::SessionUsage { seq, .. } => *seq,
            StoreOp::Flush { .. }
            | StoreOp::Title { .. }
            | StoreOp::SummaryMessage { .. }
            | StoreOp::SummaryText { .. }
            | StoreOp::SummaryReset { .. }
            | StoreOp::SummaryDone { .. }
            | StoreOp::SummaryFailed { .. }
            | StoreOp::SummaryDeleted { .. } => None,
        }
    }
}

/// How an assistant message finished (SPEC 4.4, 4.9).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, tag = "reason", rename_all = "snake_case")]
#[non_exhaustive]
pub enum MessageFinish {
    /// The model ended its turn.
    EndTurn,
    /// The output hit the token limit.
    MaxTokens,
    /// The model asked for tools.
    ToolUse,
    /// The provider filtered the output.
    ContentFilter,
    /// An unrecognised finish reason.
    Unknown,
    /// The turn was cancelled ("User canceled request") or interrupted by shutdown
    /// ("Interrupted by shutdown").
    Canceled {
        /// The text shown for the finish.
        message: String,
    },
    /// The turn failed.
    Error {
        /// The classified title.
        title: String,
        /// The error text.
        message: String,
    },
}

/// Why a timer exists.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, tag = "timer", rename_all = "snake_case")]
#[non_exhaustive]
pub enum TimerPurpose {
    /// The cancel grace of an aborting turn (SPEC 4.9): clean-up runs when it fires.
    CancelGrace {
        /// The session.
        session: SessionId,
        /// The aborting turn.
        turn: TurnId,
    },
    /// The backoff before a step's next attempt (SPEC 4.5).
    Retry {
        /// The session.
        session: SessionId,
        /// The turn whose step retries.
        turn: TurnId,
    },
    /// The shutdown deadline (SPEC 4.10): every turn still aborting is cleaned up when it fires.
    ShutdownDeadline,
    /// The stream watchdog of the current attempt of a step or summary (SPEC 4.5): one timer
    /// per attempt, armed at its start and disarmed when the attempt ends. When it fires, the
    /// attempt fails as "stream idle for `<N>` s" if no content event arrived since the deadline
    /// was counted from; otherwise the core arms one new timer for the last content + timeout.
    StreamIdle {
        /// The session.
        session: SessionId,
        /// The turn or summary whose attempt streams.
        turn: TurnId,
    },
}
