//! The one place that decides a submission's outcome (SPEC section 5, I1).
//!
//! `decide` takes the submission **by value**: a `Submission` is not `Clone`, it lives in
//! exactly one place (a queue entry, a turn, and later a paused slot) until `decide` consumes
//! it, so a finished submission no longer exists anywhere it could be finished again. It is the
//! only code that builds a [`Completion`]; its fields are private, so a host or another module
//! cannot forge one:
//!
//! ```compile_fail
//! // The record's fields are private: neither the tuple field nor the fields can be named.
//! let forged = turnstile_core::Completion(std::sync::Arc::new(todo!()));
//! ```

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::ids::{MessageId, RunId, Seq, SessionId};
use crate::mutants::mutant;
use crate::output::{OutputKind, StoreOp};
use crate::state::{State, Submission};
use crate::transition::Tx;

/// How a submission ended (SPEC 3 "Outcome").
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
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
pub struct ErrorInfo {
    /// The kind.
    pub kind: ErrorKind,
    /// A short title for people.
    pub title: String,
    /// The error text.
    pub message: String,
}

/// What decided an outcome, with the data the completion needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    Completed(Option<StopReason>),
    Failed(ErrorInfo),
    Cancelled,
    Interrupted(ErrorInfo),
    Folded,
}

impl Verdict {
    fn outcome(&self) -> Outcome {
        match self {
            Verdict::Completed(_) => Outcome::Completed,
            Verdict::Failed(_) => Outcome::Failed,
            Verdict::Cancelled => Outcome::Cancelled,
            Verdict::Interrupted(_) => Outcome::Interrupted,
            Verdict::Folded => Outcome::Folded,
        }
    }
}

/// The last assistant message of an activated submission (SPEC 5 `message_id` and `text`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LastMessage {
    pub(crate) id: MessageId,
    pub(crate) text: String,
}

/// The completion record of a submission: its outcome with SPEC section 5's fields.
///
/// Built only by the outcome decider, exactly once per accepted submission. When `run_id` is
/// present, it *is* the public RunComplete of that run; the host publishes it after the commit
/// that records it, and there is never a second one for the same run.
///
/// Cheap to clone: the ledger write and the publication share one record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Completion(Arc<Fields>);

/// The fields of a [`Completion`], private to this module.
#[derive(Debug, PartialEq, Eq, Serialize)]
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
}

/// Builds the completion of `sub` and tells the run ledger. The only constructor of
/// [`Completion`]; `sub` is consumed, so it cannot be completed again.
fn complete(
    st: &mut State,
    sub: Submission,
    verdict: Verdict,
    last: Option<LastMessage>,
) -> Completion {
    let outcome = verdict.outcome();
    let (stop_reason, error) = match verdict {
        Verdict::Completed(stop) => (stop, None),
        Verdict::Failed(e) | Verdict::Interrupted(e) => (None, Some(e)),
        Verdict::Cancelled | Verdict::Folded => (None, None),
    };
    let Submission { seq, session, run_id, .. } = sub;
    if let Some(run_id) = &run_id {
        st.runs.finish(run_id, outcome);
    }
    st.outcomes_decided += 1;
    Completion(Arc::new(Fields {
        session,
        run_id,
        seq,
        outcome,
        stop_reason,
        message_id: last.as_ref().map(|m| m.id),
        text: last.map(|m| m.text),
        error,
    }))
}

/// Ends `sub` with `verdict` in its own bucket of the transition (SPEC 7 step 3): the final
/// flush (when it wrote messages), the ledger outcome, the commit, then the completion.
pub(crate) fn decide(
    st: &mut State,
    tx: &mut Tx,
    sub: Submission,
    verdict: Verdict,
    last: Option<LastMessage>,
) {
    let seq = sub.seq;
    let early = mutant!(st.config, CompleteBeforeFlush);
    let completion = complete(st, sub, verdict, last);
    let session = completion.0.session.clone();
    if early {
        // The bug: the completion is published before its writes are durable (I9).
        tx.decided(seq, OutputKind::Finished(completion.clone()));
    }
    if completion.0.message_id.is_some() {
        tx.decided(seq, OutputKind::Store(StoreOp::Flush { session: session.clone() }));
    }
    tx.decided(seq, OutputKind::Store(StoreOp::LedgerOutcome { completion: completion.clone() }));
    tx.decided(seq, OutputKind::Commit { session });
    if !early {
        tx.decided(seq, OutputKind::Finished(completion));
    }
}

/// The mutant `complete_on_pause`: the completion a pausing submission would get if it had
/// completed, built without consuming it or telling the ledger, so that the real one still
/// follows when it ends (a second completion, I1, I11).
pub(crate) fn premature(sub: &Submission, last: &LastMessage) -> Completion {
    Completion(Arc::new(Fields {
        session: sub.session.clone(),
        run_id: sub.run_id.clone(),
        seq: sub.seq,
        outcome: Outcome::Completed,
        stop_reason: None,
        message_id: Some(last.id),
        text: Some(last.text.clone()),
        error: None,
    }))
}

/// Ends a folded submission (SPEC 4.3). The caller writes the returned ledger op in the
/// transaction of the turn it joined and publishes the completion after that commit.
pub(crate) fn fold(st: &mut State, sub: Submission) -> (StoreOp, Completion) {
    debug_assert!(
        sub.run_id.is_none() || mutant!(st.config, FoldRunIds),
        "a submission with a RunId is never folded (SPEC 3)"
    );
    let completion = complete(st, sub, Verdict::Folded, None);
    (StoreOp::LedgerOutcome { completion: completion.clone() }, completion)
}
