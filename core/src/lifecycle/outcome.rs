//! The one place that decides a submission's outcome (SPEC section 5, I1).
//!
//! `decide` takes the submission **by value**: a `Submission` is not `Clone`, it lives in
//! exactly one place (a queue entry, a turn, and later a paused slot) until `decide` consumes
//! it, so a finished submission no longer exists anywhere it could be finished again. It is the
//! only code that builds a [`Completion`] (whose fields are private to the alphabet).

use crate::alphabet::mutants::mutant;
use crate::alphabet::outcome::Ending;
use crate::alphabet::{Completion, ErrorInfo, Outcome, OutputKind, StopReason, StoreOp};
use crate::state::{LastMessage, State, Submission, Tx};

/// What decided an outcome, with the data the completion needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    Completed(Option<StopReason>),
    Failed(ErrorInfo),
    Cancelled,
    Interrupted(ErrorInfo),
    Folded,
}

impl Verdict {
    fn outcome(&self) -> Outcome {
        match self {
            Verdict::Completed(_) => Outcome::Completed,
            Verdict::Failed(_) => Outcome::Failed,
            Verdict::Cancelled => Outcome::Cancelled,
            Verdict::Interrupted(_) => Outcome::Interrupted,
            Verdict::Folded => Outcome::Folded,
        }
    }
}

/// Builds the completion of `sub` and tells the run ledger. The only constructor of
/// [`Completion`]; `sub` is consumed, so it cannot be completed again.
fn complete(
    st: &mut State,
    sub: Submission,
    verdict: Verdict,
    last: Option<LastMessage>,
) -> Completion {
    let outcome = verdict.outcome();
    let (stop_reason, error) = match verdict {
        Verdict::Completed(stop) => (stop, None),
        Verdict::Failed(e) | Verdict::Interrupted(e) => (None, Some(e)),
        Verdict::Cancelled | Verdict::Folded => (None, None),
    };
    let Submission { seq, session, run_id, usage, .. } = sub;
    if let Some(run_id) = &run_id {
        st.runs.finish(run_id, outcome);
    }
    st.outcomes_decided = st.bump(st.outcomes_decided, "outcomes_decided");
    let last = last.map(|m| (m.id, m.text));
    Completion::record(session, run_id, seq, Ending { outcome, stop_reason, error }, last, usage)
}

/// Ends `sub` with `verdict` in its own bucket of the transition (SPEC 7 step 3): the final
/// flush (when it wrote messages), the ledger outcome, the commit, then the completion.
pub(crate) fn decide(
    st: &mut State,
    tx: &mut Tx,
    sub: Submission,
    verdict: Verdict,
    last: Option<LastMessage>,
) {
    let seq = sub.seq;
    let early = mutant!(st.config, CompleteBeforeFlush);
    let completion = complete(st, sub, verdict, last);
    let session = completion.session().clone();
    if early {
        // The bug: the completion is published before its writes are durable (I9).
        tx.decided(seq, OutputKind::Finished(completion.clone()));
    }
    if completion.message_id().is_some() {
        tx.decided(seq, OutputKind::Store(StoreOp::Flush { session: session.clone() }));
    }
    tx.decided(seq, OutputKind::Store(StoreOp::LedgerOutcome { completion: completion.clone() }));
    tx.decided(seq, OutputKind::Commit { session });
    if !early {
        tx.decided(seq, OutputKind::Finished(completion));
    }
}

/// The mutant `complete_on_pause`: the completion a pausing submission would get if it had
/// completed, built without consuming it or telling the ledger, so that the real one still
/// follows when it ends (a second completion, I1, I11).
pub(crate) fn premature(sub: &Submission, last: &LastMessage) -> Completion {
    let (session, run_id, last) =
        (sub.session.clone(), sub.run_id.clone(), (last.id, last.text.clone()));
    let ending = Ending { outcome: Outcome::Completed, stop_reason: None, error: None };
    Completion::record(session, run_id, sub.seq, ending, Some(last), sub.usage)
}

/// Ends a folded submission (SPEC 4.3). The caller writes the returned ledger op in the
/// transaction of the turn it joined and publishes the completion after that commit.
pub(crate) fn fold(st: &mut State, sub: Submission) -> (StoreOp, Completion) {
    debug_assert!(
        sub.run_id.is_none() || mutant!(st.config, FoldRunIds),
        "a submission with a RunId is never folded (SPEC 3)"
    );
    let completion = complete(st, sub, Verdict::Folded, None);
    (StoreOp::LedgerOutcome { completion: completion.clone() }, completion)
}
