//! Identifiers and time (SPEC section 3 vocabulary).
//!
//! Every identifier is a newtype so that a sequence cannot be passed where a turn is expected.
//! All are totally ordered, because the core orders its outputs by them (SPEC section 7).

use std::fmt;

use serde::{Deserialize, Serialize};

/// A point in the host's virtual or real time, in milliseconds since an arbitrary epoch.
///
/// The core never reads a clock: every input carries the current `Millis`, and it must never go
/// backwards (the engine answers [`crate::HostError::TimeWentBackwards`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Millis(pub u64);

impl Millis {
    /// `self + ms`, saturating: a deadline never wraps around.
    #[must_use]
    pub fn plus_ms(self, ms: u64) -> Millis {
        Millis(self.0.saturating_add(ms))
    }
}

/// The engine-wide acceptance sequence of a submission (SPEC 3).
///
/// Strictly increasing in acceptance order, continuing above the ledger's maximum after a
/// restart. It is assigned exactly once, at acceptance, and never reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Seq(pub u64);

impl fmt::Display for Seq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A session's id, chosen by the caller. A submission to an unknown top-level id creates it.
///
/// An id of the form `<assistant message id>$$<tool call id>` names a sub-agent session
/// (SPEC 4.11) and cannot be submitted to from outside.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SessionId(pub String);

impl SessionId {
    /// Builds a session id from anything string-like.
    #[must_use]
    pub fn new(id: impl Into<String>) -> SessionId {
        SessionId(id.into())
    }

    /// True when the id parses as a sub-agent session id: splitting on `$$` gives exactly two
    /// parts (SPEC 4.11).
    #[must_use]
    pub fn is_child(&self) -> bool {
        self.0.split("$$").count() == 2
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A caller-chosen, engine-wide idempotency key of a submission (SPEC 4.1).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RunId(pub String);

impl RunId {
    /// Builds a run id from anything string-like.
    #[must_use]
    pub fn new(id: impl Into<String>) -> RunId {
        RunId(id.into())
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The id of a message the core asks the host to write.
///
/// Engine-wide and strictly increasing; the engine starts above the store's maximum
/// ([`crate::Start::next_message`]), so ids stay unique across restarts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct MessageId(pub u64);

impl fmt::Display for MessageId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "m{}", self.0)
    }
}

/// One activation of the agent loop (SPEC 3 "Turn"). Engine-wide, strictly increasing within
/// one run of the engine; replies name it so that a reply for an older turn is stale (I13).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TurnId(pub u64);

/// A timer the core asked the host to arm. Engine-wide, strictly increasing, never reused, so
/// a firing for a cancelled timer is recognisably stale (I13).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TimerId(pub u64);

/// A tool call's id as the provider chose it (unique within a turn; a repeat is ignored).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct CallId(pub String);

impl CallId {
    /// Builds a call id from anything string-like.
    #[must_use]
    pub fn new(id: impl Into<String>) -> CallId {
        CallId(id.into())
    }
}

impl fmt::Display for CallId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
