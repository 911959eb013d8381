//! Layer 3, the lifecycle: one handler module per SPEC concept (sections 4 and 5).
//!
//! Each `on_<input>` handler holds one session, filters stale replies, decides, and puts its
//! outputs into the transition's buckets ([`crate::state::Tx`]). Handlers call each other freely
//! inside this folder (a cancel ends a turn, which hands off, which starts a step); they import
//! only the alphabet and the state below them, never the checks or the engine above.

pub(crate) mod acceptance;
pub(crate) mod admission;
pub(crate) mod cancel;
pub(crate) mod cleanup;
pub(crate) mod fold;
pub(crate) mod loops;
pub(crate) mod outcome;
pub(crate) mod preparation;
pub(crate) mod retry;
pub(crate) mod shutdown;
pub(crate) mod step;
pub(crate) mod stream;
pub(crate) mod subagent;
pub(crate) mod summary;
pub(crate) mod title;
pub(crate) mod watchdog;
