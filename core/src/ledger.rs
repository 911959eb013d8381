//! The run ledger as the core sees it: RunId idempotency across restarts (SPEC 4.1).
//!
//! The host's store keeps one ledger row per submission; the core keeps, per RunId, the
//! sequence, the request's fingerprint and, once decided, the outcome. It is started with the
//! ledger's finished runs ([`crate::Start`]), so a finished run is never run again after a
//! restart.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::ids::{RunId, SessionId, Seq};
use crate::input::Submit;
use crate::outcome::Outcome;

/// SHA-256 over the length-prefixed session id, prompt and attachments of a submission, in
/// lower-case hex: two calls are "the same call" (SPEC 4.1) exactly when fingerprints match.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Fingerprint(pub String);

impl Fingerprint {
    /// The fingerprint of a submission.
    #[must_use]
    pub fn of(submit: &Submit) -> Fingerprint {
        let mut h = Sha256::new();
        let mut field = |bytes: &[u8]| {
            h.update((bytes.len() as u64).to_be_bytes());
            h.update(bytes);
        };
        field(submit.session.0.as_bytes());
        field(submit.prompt.as_bytes());
        field(&(submit.attachments.len() as u64).to_be_bytes());
        for a in &submit.attachments {
            field(a.name.as_bytes());
            field(a.media_type.as_bytes());
            field(a.content.as_bytes());
        }
        let digest = h.finalize();
        let mut hex = String::with_capacity(64);
        for b in digest.iter() {
            hex.push(char::from(b"0123456789abcdef"[usize::from(b >> 4)]));
            hex.push(char::from(b"0123456789abcdef"[usize::from(b & 15)]));
        }
        Fingerprint(hex)
    }
}

/// A finished run as the store's ledger holds it, handed to the engine at start.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KnownRun {
    /// The run.
    pub run_id: RunId,
    /// Its session.
    pub session: SessionId,
    /// Its sequence.
    pub seq: Seq,
    /// The fingerprint of its request.
    pub fingerprint: Fingerprint,
    /// How it ended.
    pub outcome: Outcome,
}

/// What the core knows of one RunId.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RunEntry {
    pub(crate) session: SessionId,
    pub(crate) seq: Seq,
    pub(crate) fingerprint: Fingerprint,
    /// `None` while the run is unfinished.
    pub(crate) outcome: Option<Outcome>,
}

/// Every RunId accepted in the store's life. Grows by one entry per accepted RunId; the bound
/// is the store's ledger, which the host owns.
#[derive(Clone, Debug, Default)]
pub(crate) struct RunLedger {
    runs: BTreeMap<RunId, RunEntry>,
}

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
