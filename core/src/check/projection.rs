//! The conformance projection of SPEC section 7: what of a transition's outputs an independent
//! specification must agree on.
//!
//! SPEC 7 compares "replies, outcome decisions (sequence, outcome, RunComplete or not),
//! activations and folds (sequence and order), starts and aborts of steps, attempts, tools and
//! preparations, timers, and the per-session order of message records (role, finish reason,
//! tool-call ids, synthetic or real result). Text, usage and cost are abstracted away."
//!
//! A [`Projection`] is that, in a canonical form that two implementations can compare with `==`:
//! - the reply, if the input was a submission or a manual summarize;
//! - the records (message, ledger and outcome writes) of each session in output order, the
//!   sessions in ascending order of their id's text (the order within a session is the one
//!   SPEC 4.12 makes the host apply; across sessions SPEC 7 leaves it to the rank rule, which the
//!   core's own tests pin);
//! - the IO requests (starts, aborts, timers), sorted: they are independent of each other.
//!
//! Left out: text, reasoning, usage, cost and the titles' text (abstracted; a title's request,
//! abort and write are kept, and so is where cost crosses sessions: a sub-agent's usage writes
//! and the ancestor each names, SPEC 4.11), `Commit` (a transaction boundary, checked by the
//! [`crate::Auditor`]), and the internal numbering of turns, messages and timers (a timer is
//! named by its purpose, a sub-agent session by its call: [`label`]). A trace line may carry a
//! projection as its expectation (`expect_projection`), which is how a model counterexample
//! is replayed.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::alphabet::{
    AttemptIo, ErrorKind, Input, MessageFinish, Mode, Outcome, Output, OutputKind, Rejection,
    Reply, SHUTDOWN_FINISH, Seq, SessionId, StopReason, StoreOp, TimerId, TimerPurpose,
};

/// One transition's outputs, projected (see the module docs).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Projection {
    /// The reply to a submission or a manual summarize.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply: Option<ReplyP>,
    /// Records, grouped by session (ascending id text), each session's in output order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub records: Vec<Record>,
    /// IO requests and timers, sorted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub io: Vec<Io>,
    /// True when the transition emitted `Stopped`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stopped: bool,
}

impl Projection {
    /// Puts the records and IO requests into the canonical order (see the module docs). Stable:
    /// the order of one session's records is kept.
    pub fn canonicalize(&mut self) {
        self.records.sort_by(|a, b| a.session.cmp(&b.session));
        self.io.sort();
    }

    /// True when the transition produced nothing that the projection keeps.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        *self == Projection::default()
    }
}

/// A reply, projected.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, tag = "reply", rename_all = "snake_case")]
pub enum ReplyP {
    /// A new submission.
    Accepted {
        /// Its sequence.
        seq: Seq,
        /// Whether it carries a RunId.
        run: bool,
        /// The mode it runs in.
        mode: Mode,
    },
    /// A known RunId resubmitted.
    Existing {
        /// The run's sequence.
        seq: Seq,
        /// Its outcome, when finished.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        outcome: Option<Outcome>,
    },
    /// A manual summarize was accepted.
    Summarizing,
    /// Rejected, with the rule that rejected it.
    Rejected {
        /// The rule.
        why: Why,
    },
}

/// Why a submission or summarize was rejected (SPEC 4.1, 4.7), without the ids in the text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Why {
    /// "prompt is empty".
    PromptEmpty,
    /// "session id is missing".
    SessionIdMissing,
    /// "cannot continue an agent tool session".
    ChildSession,
    /// "workspace closing".
    WorkspaceClosing,
    /// "run id is already used by a different request".
    RunIdConflict,
    /// "session is currently processing another request".
    Busy,
}

/// A record of one session, projected.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Record {
    /// The session's id.
    pub session: String,
    /// What was recorded.
    pub rec: Rec,
}

/// What a record says (SPEC 7: role, finish reason, tool-call ids, synthetic or real result;
/// activations, folds and outcomes).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, tag = "rec", rename_all = "snake_case")]
pub enum Rec {
    /// The ledger marks the submission active.
    Activated {
        /// The submission.
        seq: Seq,
    },
    /// The ledger marks the submission paused for a summarization.
    Paused {
        /// The submission.
        seq: Seq,
    },
    /// A user message of the submission (its prompt, or the continuation when synthetic).
    User {
        /// The submission.
        seq: Seq,
        /// True for the continuation of a resumed submission.
        synthetic: bool,
    },
    /// An assistant message for a step.
    Assistant {
        /// The submission.
        seq: Seq,
        /// The step within the turn.
        step: u32,
    },
    /// A tool call started streaming (unfinished).
    ToolInput {
        /// The submission.
        seq: Seq,
        /// The call id.
        call: String,
    },
    /// A complete (or clean-up finished) tool call.
    ToolCall {
        /// The submission.
        seq: Seq,
        /// The call id.
        call: String,
    },
    /// A tool result.
    ToolResult {
        /// The submission.
        seq: Seq,
        /// The call id.
        call: String,
        /// True when the core synthesized it (clean-up, invalid JSON, unknown tool).
        synthetic: bool,
    },
    /// The streamed content of the message was reset for a retry.
    Reset {
        /// The submission.
        seq: Seq,
    },
    /// The message got its finish.
    Finish {
        /// The submission.
        seq: Seq,
        /// The finish.
        finish: FinishP,
    },
    /// All pending streaming writes of the session are flushed.
    Flush,
    /// The ledger records the outcome.
    LedgerOutcome {
        /// The submission.
        seq: Seq,
        /// The outcome.
        outcome: Outcome,
    },
    /// The outcome is published (with a RunComplete when `run`).
    Completed {
        /// The submission.
        seq: Seq,
        /// The outcome.
        outcome: Outcome,
        /// True when the submission carries a RunId (a RunComplete).
        run: bool,
        /// The error kind, for `failed` and `interrupted`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<ErrorKind>,
        /// The stop reason, for `completed`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stop: Option<StopReason>,
    },
    /// A summary message was created.
    SummaryStarted,
    /// The summary's streamed content was reset for a retry.
    SummaryReset,
    /// The summary finished.
    SummaryDone,
    /// The summary failed.
    SummaryFailed,
    /// The partial summary was deleted (cancel, shutdown).
    SummaryDeleted,
    /// The session's title was written (SPEC 4.11; its text is abstracted).
    Title,
    /// A sub-agent's child submission was recorded.
    ChildAccepted {
        /// The child's sequence.
        seq: Seq,
    },
    /// A usage write where cost crosses sessions (SPEC 4.11): every usage write of a
    /// sub-agent session (it must name its parent as the ancestor the same cost is added to),
    /// and any other write that names an ancestor. Other usage writes are abstracted (SPEC 7).
    Cost {
        /// The submission whose step used it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        seq: Option<Seq>,
        /// The session the same cost is added to, in the same write.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ancestor: Option<String>,
    },
}

/// A message finish, projected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum FinishP {
    /// `end_turn`.
    EndTurn,
    /// `max_tokens`.
    MaxTokens,
    /// `tool_use`.
    ToolUse,
    /// `content_filter`.
    ContentFilter,
    /// `unknown`.
    Unknown,
    /// `canceled` by the user.
    Canceled,
    /// `canceled` by shutdown ("Interrupted by shutdown").
    Interrupted,
    /// `error`.
    Error,
}

/// An IO request or timer, projected: named by submission, step and attempt, or by purpose.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, tag = "io", rename_all = "snake_case")]
pub enum Io {
    /// Prepare a submission.
    Prepare {
        /// The submission.
        seq: Seq,
    },
    /// Stop preparing it.
    AbortPreparation {
        /// The submission.
        seq: Seq,
    },
    /// Start a step's attempt.
    StartStep {
        /// The submission.
        seq: Seq,
        /// The step within the turn.
        step: u32,
        /// The attempt.
        attempt: u32,
    },
    /// Close a step's stream.
    AbortStep {
        /// The submission.
        seq: Seq,
        /// The step within the turn.
        step: u32,
        /// The attempt.
        attempt: u32,
    },
    /// Run a tool.
    RunTool {
        /// The submission.
        seq: Seq,
        /// The call id.
        call: String,
    },
    /// Abort a tool.
    AbortTool {
        /// The submission.
        seq: Seq,
        /// The call id.
        call: String,
    },
    /// Refresh credentials for a refused attempt.
    Refresh {
        /// The session.
        session: String,
        /// The attempt of a step (`Some(seq)`) or of a summary (`None`).
        seq: Option<Seq>,
        /// The attempt.
        attempt: u32,
    },
    /// Stop waiting for a refresh.
    AbortRefresh {
        /// The session.
        session: String,
        /// The attempt of a step (`Some(seq)`) or of a summary (`None`).
        seq: Option<Seq>,
        /// The attempt.
        attempt: u32,
    },
    /// Start a summary's attempt.
    StartSummary {
        /// The session.
        session: String,
        /// The attempt.
        attempt: u32,
    },
    /// Close a summary's stream.
    AbortSummary {
        /// The session.
        session: String,
        /// The attempt.
        attempt: u32,
    },
    /// Arm a timer.
    SetTimer {
        /// Its purpose.
        timer: TimerP,
    },
    /// Disarm a timer.
    CancelTimer {
        /// Its purpose.
        timer: TimerP,
    },
    /// Generate the session's title (SPEC 4.11), for the submission whose first activation
    /// asked.
    RequestTitle {
        /// The session.
        session: String,
        /// The submission.
        seq: Seq,
    },
    /// Stop generating it (shutdown).
    AbortTitle {
        /// The session.
        session: String,
        /// The submission named by the request.
        seq: Seq,
    },
}

/// A timer, named by its purpose.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, tag = "purpose", rename_all = "snake_case")]
pub enum TimerP {
    /// The cancel grace of an aborting turn of this session.
    Grace {
        /// The session.
        session: String,
    },
    /// The backoff before a retry in this session.
    Retry {
        /// The session.
        session: String,
    },
    /// The shutdown deadline.
    Deadline,
    /// The stream watchdog of the attempt streaming in this session (SPEC 4.5).
    Watchdog {
        /// The session.
        session: String,
    },
    /// A timer the projector never saw armed (a bug in the outputs).
    Unknown,
}

/// Projects the outputs of successive transitions. It remembers the purpose of every armed
/// timer, so a `CancelTimer` is named by purpose too. Two projectors are equal when they
/// remember the same timers.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Projector {
    timers: BTreeMap<TimerId, TimerP>,
}

clone_reusing!(Projector { timers => crate::reuse::clone_map });

impl Projector {
    /// Projects one transition: its input and all its outputs, in the order the engine gave
    /// them. A fired timer is forgotten first (its id can no longer be cancelled), the way the
    /// `Auditor` follows the same stream.
    pub fn project(&mut self, input: &Input, outputs: &[Output]) -> Projection {
        if let Input::TimerFired { timer } = input {
            self.timers.remove(timer);
        }
        // Room for the records and the IO at once: growing the vectors one push at a time
        // reallocated them two or three times in most transitions.
        let records = outputs
            .iter()
            .filter(|o| matches!(o.kind, OutputKind::Store(_) | OutputKind::Finished(_)))
            .count();
        let others = outputs
            .iter()
            .filter(|o| matches!(o.kind, OutputKind::Reply(_) | OutputKind::Stopped))
            .count();
        let mut p = Projection {
            records: Vec::with_capacity(records),
            io: Vec::with_capacity(outputs.len() - records - others),
            ..Projection::default()
        };
        for o in outputs {
            self.one(&mut p, &o.kind);
        }
        p.canonicalize();
        p
    }

    fn one(&mut self, p: &mut Projection, out: &OutputKind) {
        match out {
            OutputKind::Reply(r) => p.reply = Some(reply(r)),
            OutputKind::Store(op) => {
                if let Some(rec) = record(op) {
                    p.records.push(Record { session: label(op.session()), rec });
                }
            }
            OutputKind::Finished(c) => p.records.push(Record {
                session: label(c.session()),
                rec: Rec::Completed {
                    seq: c.seq(),
                    outcome: c.outcome(),
                    run: c.is_run_complete(),
                    error: c.error().map(|e| e.kind),
                    stop: c.stop_reason(),
                },
            }),
            OutputKind::SetTimer { timer, purpose, .. } => {
                let t = timer_p(purpose);
                self.timers.insert(*timer, t.clone());
                p.io.push(Io::SetTimer { timer: t });
            }
            OutputKind::CancelTimer { timer } => {
                let t = self.timers.remove(timer).unwrap_or(TimerP::Unknown);
                p.io.push(Io::CancelTimer { timer: t });
            }
            OutputKind::Stopped => p.stopped = true,
            other => {
                if let Some(io) = io(other) {
                    p.io.push(io);
                }
            }
        }
    }
}

fn reply(r: &Reply) -> ReplyP {
    match r {
        Reply::Accepted { seq, run_id, mode, .. } => {
            ReplyP::Accepted { seq: *seq, run: run_id.is_some(), mode: *mode }
        }
        Reply::Existing { seq, outcome, .. } => ReplyP::Existing { seq: *seq, outcome: *outcome },
        Reply::Summarizing { .. } => ReplyP::Summarizing,
        Reply::Rejected { error } => ReplyP::Rejected {
            why: match error {
                Rejection::PromptEmpty => Why::PromptEmpty,
                Rejection::SessionIdMissing => Why::SessionIdMissing,
                Rejection::ChildSession(_) => Why::ChildSession,
                Rejection::WorkspaceClosing => Why::WorkspaceClosing,
                Rejection::RunIdConflict(_) => Why::RunIdConflict,
                Rejection::Busy => Why::Busy,
            },
        },
    }
}

fn record(op: &StoreOp) -> Option<Rec> {
    Some(match op {
        StoreOp::LedgerActivated { seq, .. } => Rec::Activated { seq: *seq },
        StoreOp::LedgerPaused { seq, .. } => Rec::Paused { seq: *seq },
        StoreOp::LedgerOutcome { completion } => {
            Rec::LedgerOutcome { seq: completion.seq(), outcome: completion.outcome() }
        }
        StoreOp::ChildAccepted { seq, .. } => Rec::ChildAccepted { seq: *seq },
        StoreOp::UserMessage { seq, synthetic, .. } => {
            Rec::User { seq: *seq, synthetic: *synthetic }
        }
        StoreOp::AssistantMessage { seq, step, .. } => Rec::Assistant { seq: *seq, step: *step },
        StoreOp::ToolInputStarted { seq, call, .. } => {
            Rec::ToolInput { seq: *seq, call: call.as_str().to_owned() }
        }
        StoreOp::ToolCall { seq, call, .. } => {
            Rec::ToolCall { seq: *seq, call: call.as_str().to_owned() }
        }
        StoreOp::ToolResult { seq, call, synthetic, .. } => {
            Rec::ToolResult { seq: *seq, call: call.as_str().to_owned(), synthetic: *synthetic }
        }
        StoreOp::MessageReset { seq, .. } => Rec::Reset { seq: *seq },
        StoreOp::MessageFinished { seq, finish, .. } => {
            Rec::Finish { seq: *seq, finish: finish_p(finish) }
        }
        StoreOp::Flush { .. } => Rec::Flush,
        StoreOp::SummaryMessage { .. } => Rec::SummaryStarted,
        StoreOp::SummaryReset { .. } => Rec::SummaryReset,
        StoreOp::SummaryDone { .. } => Rec::SummaryDone,
        StoreOp::SummaryFailed { .. } => Rec::SummaryFailed,
        StoreOp::SummaryDeleted { .. } => Rec::SummaryDeleted,
        StoreOp::Title { .. } => Rec::Title,
        // Usage is abstracted (SPEC 7), except where cost crosses sessions (SPEC 4.11): every
        // usage write of a sub-agent session, and any write that names an ancestor.
        StoreOp::SessionUsage { session, seq, ancestor, .. }
            if session.is_child() || ancestor.is_some() =>
        {
            Rec::Cost { seq: *seq, ancestor: ancestor.as_ref().map(label) }
        }
        StoreOp::SessionUsage { .. }
        | StoreOp::AppendText { .. }
        | StoreOp::SummaryText { .. }
        | StoreOp::ReasoningStarted { .. }
        | StoreOp::AppendReasoning { .. }
        | StoreOp::ReasoningEnded { .. } => return None,
    })
}

fn finish_p(f: &MessageFinish) -> FinishP {
    match f {
        MessageFinish::EndTurn => FinishP::EndTurn,
        MessageFinish::MaxTokens => FinishP::MaxTokens,
        MessageFinish::ToolUse => FinishP::ToolUse,
        MessageFinish::ContentFilter => FinishP::ContentFilter,
        MessageFinish::Unknown => FinishP::Unknown,
        MessageFinish::Canceled { message } if message == SHUTDOWN_FINISH => FinishP::Interrupted,
        MessageFinish::Canceled { .. } => FinishP::Canceled,
        MessageFinish::Error { .. } => FinishP::Error,
    }
}

/// A session's name in a projection: its id, except that a sub-agent session
/// (`m<message>$$<call>`, SPEC 4.11) is named `$$<call>`, without the message id, which is
/// the core's internal numbering.
#[must_use]
pub fn label(session: &SessionId) -> String {
    let id = session.as_str();
    // Only a child's id is searched: the projection labels every output's session.
    match session.is_child().then(|| id.find("$$")).flatten() {
        Some(i) => id[i..].to_owned(),
        None => id.to_owned(),
    }
}

fn timer_p(purpose: &TimerPurpose) -> TimerP {
    match purpose {
        TimerPurpose::CancelGrace { session, .. } => TimerP::Grace { session: label(session) },
        TimerPurpose::Retry { session, .. } => TimerP::Retry { session: label(session) },
        TimerPurpose::ShutdownDeadline => TimerP::Deadline,
        TimerPurpose::StreamIdle { session, .. } => TimerP::Watchdog { session: label(session) },
    }
}

fn attempt_p(a: &AttemptIo) -> (String, Option<Seq>, u32) {
    match a {
        AttemptIo::Step(s) => (label(&s.session), Some(s.seq), s.attempt),
        AttemptIo::Summary(s) => (label(&s.session), None, s.attempt),
    }
}

fn io(out: &OutputKind) -> Option<Io> {
    Some(match out {
        OutputKind::Prepare { seq, .. } => Io::Prepare { seq: *seq },
        OutputKind::AbortPreparation { seq, .. } => Io::AbortPreparation { seq: *seq },
        OutputKind::StartStep { step } => {
            Io::StartStep { seq: step.seq, step: step.step, attempt: step.attempt }
        }
        OutputKind::AbortStep { step } => {
            Io::AbortStep { seq: step.seq, step: step.step, attempt: step.attempt }
        }
        OutputKind::RunTool { call, .. } => {
            Io::RunTool { seq: call.seq, call: call.call.as_str().to_owned() }
        }
        OutputKind::AbortTool { call } => {
            Io::AbortTool { seq: call.seq, call: call.call.as_str().to_owned() }
        }
        OutputKind::RefreshCredentials { attempt } => {
            let (session, seq, attempt) = attempt_p(attempt);
            Io::Refresh { session, seq, attempt }
        }
        OutputKind::AbortRefresh { attempt } => {
            let (session, seq, attempt) = attempt_p(attempt);
            Io::AbortRefresh { session, seq, attempt }
        }
        OutputKind::StartSummary { io } => {
            Io::StartSummary { session: label(&io.session), attempt: io.attempt }
        }
        OutputKind::AbortSummary { io } => {
            Io::AbortSummary { session: label(&io.session), attempt: io.attempt }
        }
        OutputKind::RequestTitle { session, seq, .. } => {
            Io::RequestTitle { session: label(session), seq: *seq }
        }
        OutputKind::AbortTitle { session, seq } => {
            Io::AbortTitle { session: label(session), seq: *seq }
        }
        _ => return None,
    })
}
