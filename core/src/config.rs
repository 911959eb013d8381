//! Configuration and the state an engine starts from (SPEC 4.1, 4.12, 8).

use serde::{Deserialize, Serialize};

use crate::ids::{MessageId, Seq};
use crate::ledger::KnownRun;

/// Tunable constants (SPEC section 8). Every field has the SPEC default.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// How long an aborted turn waits for its running tools before clean-up (SPEC 4.9).
    pub cancel_grace_ms: u64,
    /// How long shutdown waits for aborting turns before cleaning them up (SPEC 4.10).
    pub shutdown_deadline_ms: u64,
    /// Steps per submission before it fails with `step_limit`; 0 means unlimited (SPEC 4.6).
    pub step_limit: u32,
    /// Tool calls kept per step; later ones are ignored like duplicate ids.
    pub calls_per_step_max: u32,
    /// Queue length per session above which [`crate::Engine::queue_len`] should make a host push
    /// back. The core never drops an accepted submission to honour it.
    pub queue_max: u32,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            cancel_grace_ms: 5_000,
            shutdown_deadline_ms: 5_000,
            step_limit: 0,
            calls_per_step_max: 128,
            queue_max: 1_024,
        }
    }
}

/// What the store's ledger says when the engine starts (SPEC 4.1, 4.12 recovery).
///
/// The host runs recovery first, so every run here is finished.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Start {
    /// The first sequence to assign: above the ledger's maximum.
    pub next_seq: Option<Seq>,
    /// The first message id to assign: above the store's maximum.
    pub next_message: Option<MessageId>,
    /// Every run in the ledger, with its outcome.
    pub runs: Vec<KnownRun>,
}
