//! The host's errors (SPEC 8 and 9): why a host could not open, why a submission was not
//! accepted, why a wait was not answered, and why a host stopped.
//!
//! Every error is typed: it names its cause as a value (a [`StoreError`], a core
//! [`HostError`], a [`RunId`]), never as text only, and returns the error underneath from
//! [`std::error::Error::source`]. `Display` gives SPEC's exact texts ("engine stopped: storage
//! failure: `<error>`", "run not found: `<id>`", "session not found: `<id>`", ...).
//!
//! [`Stopped`], [`SubmitError`] and [`WaitError`] are `Clone`: the host hands the same stop to
//! every waiter, so a store error inside them is shared ([`Arc`]).

use std::path::PathBuf;
use std::sync::Arc;

use turnstile_core::{HostError, Rejection, RunId, Seq, SessionId};

use crate::store::StoreError;

/// Why a host stopped without a clean shutdown. Once stopped, a host accepts nothing more;
/// every waiter of an unfinished run is answered with this, and the next start's recovery
/// decides those runs (SPEC 4.12).
///
/// `Display` begins with "engine stopped".
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Stopped {
    /// A store write kept failing past the retry budget ([`crate::HostConfig::store_retry`]),
    /// or the store could not be closed at shutdown: "engine stopped: storage failure:
    /// `<error>`" (SPEC section 8).
    Storage(Arc<StoreError>),
    /// The store writer panicked while committing; the store was released without a commit:
    /// "engine stopped: storage failure: the store writer panicked: `<panic message>`".
    WriterPanicked(String),
    /// The store writer ended without a reason (its task is gone): "engine stopped: the store
    /// writer stopped".
    WriterEnded,
    /// The engine failed for good (a bug in the core detected, or a counter at its maximum):
    /// "engine stopped: `<core error>`".
    Engine(HostError),
    /// Every [`crate::Host`] handle was dropped without a shutdown: "engine stopped: every
    /// handle was dropped without shutdown".
    HandlesDropped,
    /// The engine task ended otherwise (it panicked, or its runtime shut down): "engine
    /// stopped: the engine task ended".
    TaskEnded,
}

impl Stopped {
    /// A storage failure with this store error.
    pub(crate) fn storage(e: StoreError) -> Stopped {
        Stopped::Storage(Arc::new(e))
    }
}

impl std::fmt::Display for Stopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("engine stopped: ")?;
        match self {
            Stopped::Storage(e) => write!(f, "storage failure: {e}"),
            Stopped::WriterPanicked(why) => {
                write!(f, "storage failure: the store writer panicked: {why}")
            }
            Stopped::WriterEnded => f.write_str("the store writer stopped"),
            Stopped::Engine(e) => write!(f, "{e}"),
            Stopped::HandlesDropped => f.write_str("every handle was dropped without shutdown"),
            Stopped::TaskEnded => f.write_str("the engine task ended"),
        }
    }
}

impl std::error::Error for Stopped {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Stopped::Storage(e) => Some(&**e),
            Stopped::Engine(e) => Some(e),
            Stopped::WriterPanicked(_)
            | Stopped::WriterEnded
            | Stopped::HandlesDropped
            | Stopped::TaskEnded => None,
        }
    }
}

/// Why a submission (or a manual summarize) was not accepted. Nothing changed in the store
/// or the engine, except after [`SubmitError::Stopped`] (the host had stopped already).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum SubmitError {
    /// Validation or a RunId conflict; SPEC section 8's exact text via `Display` ("workspace
    /// closing" after a clean shutdown).
    Rejected(Rejection),
    /// The request does not fit this host; `Display` is the reason's.
    Invalid(InvalidRequest),
    /// The host stopped; `Display` is the stop's ("engine stopped: storage failure: ...").
    Stopped(Stopped),
    /// The store could not be read to check the request; `Display` is the store error's.
    Store(Arc<StoreError>),
}

impl std::fmt::Display for SubmitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SubmitError::Rejected(r) => write!(f, "{r}"),
            SubmitError::Invalid(why) => write!(f, "{why}"),
            SubmitError::Stopped(why) => write!(f, "{why}"),
            SubmitError::Store(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for SubmitError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SubmitError::Rejected(_) => None,
            SubmitError::Invalid(why) => why.source(),
            SubmitError::Stopped(why) => Some(why),
            SubmitError::Store(e) => Some(&**e),
        }
    }
}

/// Why the host refused a request before the engine decided anything.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum InvalidRequest {
    /// A manual summarize of a session the store does not hold (there is nothing to
    /// summarize, and its summary message would belong to no session): "session not found:
    /// `<id>`".
    SessionNotFound(SessionId),
    /// The engine refused the input as host misuse and is unchanged: for example a submission
    /// that brings its own sequence while the engine assigns them
    /// ([`HostError::WrongAcceptor`]), or one whose sequence is not above the newest with an
    /// external acceptor. "engine refused an input: `<core error>`".
    Refused(HostError),
    /// A request only several hosts over one store answer (SPEC 11), made of a host alone:
    /// "not one of several hosts: `<what>`".
    NotAMember(&'static str),
    /// A request a host alone answers, made of one of several hosts (SPEC 11): "not available
    /// on several hosts: `<what>`".
    MembersOnly(&'static str),
}

impl std::fmt::Display for InvalidRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InvalidRequest::SessionNotFound(id) => write!(f, "session not found: {id}"),
            InvalidRequest::Refused(e) => write!(f, "engine refused an input: {e}"),
            InvalidRequest::NotAMember(what) => write!(f, "not one of several hosts: {what}"),
            InvalidRequest::MembersOnly(what) => {
                write!(f, "not available on several hosts: {what}")
            }
        }
    }
}

impl std::error::Error for InvalidRequest {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            InvalidRequest::SessionNotFound(_)
            | InvalidRequest::NotAMember(_)
            | InvalidRequest::MembersOnly(_) => None,
            InvalidRequest::Refused(e) => Some(e),
        }
    }
}

/// Why a wait (or a completion stream) could not be answered.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum WaitError {
    /// No submission with this RunId was ever accepted: "run not found: `<id>`". Answered at
    /// once, never waited for.
    NotFound(RunId),
    /// No submission with this sequence was ever accepted: "run not found: seq `<n>`".
    SeqNotFound(Seq),
    /// The host stopped before the run finished; `Display` is the stop's. The next start's
    /// recovery decides the run's outcome.
    Stopped(Stopped),
    /// The store could not be read, or holds a ledger row it cannot use; `Display` is the
    /// store error's.
    Store(Arc<StoreError>),
}

impl WaitError {
    /// A store error, shared.
    pub(crate) fn store(e: StoreError) -> WaitError {
        WaitError::Store(Arc::new(e))
    }
}

impl std::fmt::Display for WaitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WaitError::NotFound(id) => write!(f, "run not found: {id}"),
            WaitError::SeqNotFound(seq) => write!(f, "run not found: seq {seq}"),
            WaitError::Stopped(why) => write!(f, "{why}"),
            WaitError::Store(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for WaitError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            WaitError::NotFound(_) | WaitError::SeqNotFound(_) => None,
            WaitError::Stopped(why) => Some(why),
            WaitError::Store(e) => Some(&**e),
        }
    }
}

/// Why a host could not start. Nothing was started; the store's owner lock is not held.
#[derive(Debug)]
#[non_exhaustive]
pub enum OpenError {
    /// The store could not be opened: in use ("store is in use by another turnstile
    /// process", and no recovery ran), its lock file or database file cannot be opened (the
    /// error names the file), a newer schema, rows that do not parse. `Display` is the store
    /// error's.
    Store(StoreError),
    /// The engine refused the configuration or the ledger's start state; `Display` is the
    /// core's.
    Engine(HostError),
    /// The configuration asks for something a member of several hosts does not offer
    /// (SPEC 11): "several hosts: `<what>`".
    Member(&'static str),
    /// The flight recorder's file could not be created or written: "cannot `<action>`
    /// `<path>`: `<error>`" ("cannot create the trace file ...").
    Trace {
        /// The trace file ([`crate::Flight::File`]).
        path: PathBuf,
        /// What was being done ("create the trace file", "write the trace file").
        action: &'static str,
        /// The operating system's error.
        source: std::io::Error,
    },
}

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OpenError::Store(e) => write!(f, "{e}"),
            OpenError::Engine(e) => write!(f, "{e}"),
            OpenError::Member(what) => write!(f, "several hosts: {what}"),
            OpenError::Trace { path, action, source } => {
                write!(f, "cannot {action} {}: {source}", path.display())
            }
        }
    }
}

impl std::error::Error for OpenError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            OpenError::Store(e) => Some(e),
            OpenError::Engine(e) => Some(e),
            OpenError::Member(_) => None,
            OpenError::Trace { source, .. } => Some(source),
        }
    }
}

impl From<StoreError> for OpenError {
    fn from(e: StoreError) -> OpenError {
        OpenError::Store(e)
    }
}
