//! What the engine task hears: a client's [`Command`] with where its answer goes, an input
//! of the IO, or what the member task of several hosts tells it ([`MemberMsg`]).

use tokio::sync::oneshot;
use turnstile_core::{MessageId, Mode, Outcome, RunId, Seq, SessionId, Submit};

use crate::error::{Stopped, SubmitError};
use crate::store::NewRun;
use crate::store::cluster::CommandRow;
use crate::store::lease::Epoch;

/// The answer to a submission.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Submitted {
    /// The session.
    pub session: SessionId,
    /// The submission's sequence.
    pub seq: Seq,
    /// Its RunId, if any.
    pub run_id: Option<RunId>,
    /// The mode it runs in (unknown for an existing run).
    pub mode: Option<Mode>,
    /// True when this was an idempotent resubmission of an existing run.
    pub existing: bool,
    /// An existing run's outcome, when it has finished.
    pub outcome: Option<Outcome>,
}

/// A client command.
pub(crate) enum Command {
    Submit(Submit, oneshot::Sender<Result<Submitted, SubmitError>>),
    /// A submission that folds into the session's running turn, or runs as its own turn (with
    /// its RunId) when none runs: decided by the engine task, in order with every other input.
    Steer(Submit, oneshot::Sender<Result<Submitted, SubmitError>>),
    Cancel(SessionId),
    CancelRun(RunId),
    ClearQueue(SessionId),
    Summarize(SessionId, oneshot::Sender<Result<(), SubmitError>>),
    IsBusy(SessionId, oneshot::Sender<bool>),
    /// A call's work is about to begin: report it to the core and answer whether it may.
    BeginWork(turnstile_core::CallIo, oneshot::Sender<bool>),
    Shutdown(oneshot::Sender<Result<(), Stopped>>),
}

/// The engine task's inbox.
pub(crate) enum Msg {
    Command(Command),
    Input(turnstile_core::Input),
    Member(MemberMsg),
}

/// What the member task tells the engine task.
pub(crate) enum MemberMsg {
    /// A session was taken at `epoch`: start its core and feed it.
    Adopt { session: SessionId, epoch: Epoch, next_message: MessageId, work: Vec<Work> },
    /// New work for an owned session.
    Feed { session: SessionId, epoch: Epoch, work: Vec<Work> },
    /// The session is no longer this host's: drop its core, write nothing more for it.
    Drop { session: SessionId, epoch: Epoch },
    /// Drop the session's core if it has nothing to do; answers whether it did.
    ReleaseIfIdle { session: SessionId, epoch: Epoch, reply: oneshot::Sender<bool> },
}

/// One thing accepted for an owned session, as its core is fed it.
#[derive(Debug)]
pub(crate) enum Work {
    /// A waiting submission.
    Submit(NewRun),
    /// A command not yet applied.
    Command(CommandRow),
}
