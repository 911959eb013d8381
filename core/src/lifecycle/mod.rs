//! Layer 3, the lifecycle: one handler module per SPEC concept (sections 4 and 5).
//!
//! Each `on_<input>` handler holds one session, filters stale replies, decides, and puts its
//! outputs into the transition's buckets ([`crate::state::Tx`]). They import only the alphabet
//! and the state below them, never the checks or the engine above. Inside the folder, the files
//! are floors too, and a file calls only files on a lower floor (`tests/style.rs` finds any
//! circle):
//!
//! ```text
//! 7  timers      where a fired timer goes; shutdown
//! 6  stream      a step's events
//! 5  subagent    crossings between a parent and its child
//! 4  step, retry, cancel     a tool's result and the next step; a failed attempt; cancels
//! 3  cleanup     the one end of a turn (SPEC 4.9), then the hand-off
//! 2  summary, preparation, acceptance
//! 1  admission   the hand-off: the head of the queue becomes active, a paused one resumes
//! 0  rules, outcome, fold, watchdog, loops, title   pure rules; the one decider; helpers
//! ```
//!
//! A cancel ends a turn, which hands off, which starts a step: each of those calls goes down
//! a floor.

pub(crate) mod acceptance;
pub(crate) mod admission;
pub(crate) mod cancel;
pub(crate) mod cleanup;
pub(crate) mod fold;
pub(crate) mod loops;
pub(crate) mod outcome;
pub(crate) mod preparation;
pub(crate) mod retry;
pub(crate) mod rules;
pub(crate) mod shutdown;
pub(crate) mod step;
pub(crate) mod stream;
pub(crate) mod subagent;
pub(crate) mod summary;
pub(crate) mod timers;
pub(crate) mod title;
pub(crate) mod watchdog;
