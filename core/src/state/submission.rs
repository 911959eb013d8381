//! A submission and where it waits (SPEC 3 "Submission", "Waiting", 4.1, 4.2).

use crate::alphabet::{Attachment, Mode, RunId, RunUsage, Seq, SessionId, Setup};

/// An accepted, unfinished submission. Deliberately not `Clone`: it lives in exactly one place
/// until [`crate::lifecycle::outcome`] consumes it (SPEC I1). The `checker` feature clones it only as part
/// of a whole-engine [`crate::Engine::fork`] or [`crate::Engine::fork_into`], where each copy
/// still holds it once.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Submission {
    pub(crate) seq: Seq,
    pub(crate) session: SessionId,
    pub(crate) run_id: Option<RunId>,
    pub(crate) mode: Mode,
    pub(crate) prompt: String,
    /// Written with the submission's user message (then emptied); bounded by what the caller
    /// sent.
    pub(crate) attachments: Vec<Attachment>,
    /// Steps run so far, across resumed turns (the step limit counts them, SPEC 4.6).
    pub(crate) steps: u32,
    /// Summarizations not separated by a step that ended below the threshold (the no-progress
    /// guard of SPEC 4.7); at most [`SUMMARIES_WITHOUT_PROGRESS_MAX`].
    pub(crate) summaries: u32,
    /// What its model requests used so far ([`RunUsage`]): its completion carries it.
    pub(crate) usage: RunUsage,
}

#[cfg(feature = "checker")]
clone_reusing!(Submission {
    seq,
    session,
    run_id,
    mode,
    prompt,
    attachments,
    steps,
    summaries,
    usage
});

/// Summarizations without progress before the submission fails `context_window` (SPEC 8).
pub(crate) const SUMMARIES_WITHOUT_PROGRESS_MAX: u32 = 2;

/// Where a waiting submission is (SPEC 3 "Waiting").
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Prep {
    /// The host is preparing it.
    Preparing,
    /// Prepared, behind others or about to be admitted, with what the preparation resolved.
    Prepared(Setup),
}

/// `clone_from` copies a setup into the one there (the model checker's copies, `crate::reuse`).
impl Clone for Prep {
    fn clone(&self) -> Prep {
        match self {
            Prep::Preparing => Prep::Preparing,
            Prep::Prepared(setup) => Prep::Prepared(setup.clone()),
        }
    }

    fn clone_from(&mut self, source: &Prep) {
        match (self, source) {
            (Prep::Prepared(into), Prep::Prepared(from)) => into.clone_from(from),
            (into, from) => *into = from.clone(),
        }
    }
}

impl Prep {
    pub(crate) fn is_prepared(&self) -> bool {
        matches!(self, Prep::Prepared(_))
    }
}

/// One entry of a session's queue.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Waiting {
    pub(crate) sub: Submission,
    pub(crate) prep: Prep,
}

#[cfg(feature = "checker")]
clone_reusing!(Waiting { sub, prep });
