//! The run ledger as the core sees it: RunId idempotency across restarts (SPEC 4.1).
//!
//! The host's store keeps one ledger row per submission; the core keeps, per RunId, the
//! sequence, the request's fingerprint and, once decided, the outcome. It is started with the
//! ledger's finished runs ([`crate::Start`]), so a finished run is never run again after a
//! restart.

use std::collections::BTreeMap;

use crate::alphabet::{Fingerprint, Outcome, RunId, Seq, SessionId};

/// What the core knows of one RunId.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct RunEntry {
    pub(crate) session: SessionId,
    pub(crate) seq: Seq,
    pub(crate) fingerprint: Fingerprint,
    /// `None` while the run is unfinished.
    pub(crate) outcome: Option<Outcome>,
}

clone_reusing!(RunEntry { session, seq, fingerprint, outcome });

/// Every RunId accepted in the store's life. Grows by one entry per accepted RunId; the bound
/// is the store's ledger, which the host owns.
#[derive(Debug, Default)]
#[cfg_attr(feature = "checker", derive(PartialEq))]
pub(crate) struct RunLedger {
    runs: BTreeMap<RunId, RunEntry>,
}

clone_reusing!(RunLedger { runs => crate::reuse::clone_map });

impl RunLedger {
    pub(crate) fn get(&self, run_id: &RunId) -> Option<&RunEntry> {
        self.runs.get(run_id)
    }

    pub(crate) fn insert(&mut self, run_id: RunId, entry: RunEntry) {
        let previous = self.runs.insert(run_id, entry);
        debug_assert!(previous.is_none(), "a RunId is accepted once");
    }

    pub(crate) fn finish(&mut self, run_id: &RunId, outcome: Outcome) {
        if let Some(e) = self.runs.get_mut(run_id) {
            debug_assert!(e.outcome.is_none(), "a run is finished once (I1)");
            e.outcome = Some(outcome);
        }
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (&RunId, &RunEntry)> {
        self.runs.iter()
    }
}
