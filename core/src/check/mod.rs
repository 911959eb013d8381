//! Layer 3, the checks: the invariants of SPEC section 6 and the projection of SPEC section 7,
//! written against the alphabet and the state, never against the handlers.
//!
//! - [`crate::check_invariants`] inspects an engine's state (`state.rs`): queue order, one lane
//!   per session, that every unfinished submission is waiting for a pending host request or
//!   timer (the local half of I6), and the bookkeeping behind exactly-once (I1). The engine runs
//!   it after every input in debug builds.
//! - [`Auditor`] (`auditor.rs`) watches the input and output stream, independently of the
//!   engine's code: exactly one outcome per accepted submission and at most one RunComplete per
//!   RunId (I1, I2), one active turn per session (I3), cancel precision and effect (I4, I5,
//!   I10), order (I7), protocol-legal history at every turn end (I8), writes committed before
//!   their completion and no message for a never-activated submission (I9), stale replies
//!   without effect (I13), and message, turn and timer ids that never repeat (I14).
//! - [`projection`] maps outputs to what the model compares (SPEC 7).
//!
//! Replay, the proptests, the model checker and the simulator call both checkers after every
//! input.

use std::fmt;

mod auditor;
pub mod projection;
mod sorted;
mod state;

pub use auditor::Auditor;
pub(crate) use state::check_state;

/// A broken invariant: which one (`"I1"` ... `"I14"`) and what was seen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The invariant's name in SPEC section 6.
    pub invariant: &'static str,
    /// What was seen.
    pub detail: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.invariant, self.detail)
    }
}

impl std::error::Error for Violation {}

pub(crate) fn fail<T>(invariant: &'static str, detail: impl Into<String>) -> Result<T, Violation> {
    Err(Violation { invariant, detail: detail.into() })
}
