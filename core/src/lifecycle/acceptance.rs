//! Validation, acceptance and RunId idempotency (SPEC 4.1).

use crate::alphabet::mutants::mutant;
use crate::alphabet::{Fingerprint, Mode, OutputKind, Rejection, Reply, RunUsage, Submit};
use crate::lifecycle::outcome::{self, Verdict};
use crate::state::RunEntry;
use crate::state::Tx;
use crate::state::{Closing, Prep, Sessions, State, Submission, Waiting};

/// The checks of SPEC 4.1 that depend on the submission alone, in SPEC's order: "prompt is
/// empty", "session id is missing", "cannot continue an agent tool session". The engine makes
/// them first (the closing check comes after the RunId look-up, see `closing`); a rejection
/// consumes no sequence. A host whose engine has stopped applies them too, so that what it
/// refuses is refused in SPEC's order ("workspace closing" last).
///
/// # Errors
/// The first check the submission fails.
pub fn validate(submit: &Submit) -> Result<(), Rejection> {
    if submit.prompt.is_empty() && !submit.attachments.iter().any(|a| a.is_text()) {
        return Err(Rejection::PromptEmpty);
    }
    if submit.session.as_str().is_empty() {
        return Err(Rejection::SessionIdMissing);
    }
    if submit.session.is_child() {
        return Err(Rejection::ChildSession(submit.session.clone()));
    }
    Ok(())
}

/// "workspace closing" (SPEC 4.1, 4.10): checked after the RunId look-up, because a RunId
/// look-up still answers during shutdown; only a new submission is refused.
fn closing(st: &State) -> Result<(), Rejection> {
    if st.closing != Closing::Open {
        return Err(Rejection::WorkspaceClosing);
    }
    Ok(())
}

/// Idempotency (SPEC 4.1): a known RunId answers with the existing run for the same call and
/// with a conflict for a different one.
fn known_run(st: &State, submit: &Submit, fp: Option<&Fingerprint>) -> Option<Reply> {
    let (run_id, fp) = (submit.run_id.as_ref()?, fp?);
    let known = st.runs.get(run_id)?;
    Some(if known.fingerprint == *fp && known.session == submit.session {
        Reply::Existing {
            session: known.session.clone(),
            seq: known.seq,
            run_id: run_id.clone(),
            outcome: known.outcome,
        }
    } else {
        Reply::Rejected { error: Rejection::RunIdConflict(run_id.clone()) }
    })
}

/// The reply when the submission is not accepted, in SPEC 4.1's order: a validation
/// rejection, the existing run or a conflict for a known RunId, then "workspace closing".
fn answered_without_accepting(
    st: &State,
    submit: &Submit,
    fingerprint: Option<&Fingerprint>,
) -> Option<Reply> {
    let rejected = |error| Some(Reply::Rejected { error });
    if let Err(error) = validate(submit) {
        return rejected(error);
    }
    if let Some(reply) = known_run(st, submit, fingerprint) {
        return Some(reply);
    }
    closing(st).err().and_then(rejected)
}

/// `Submit`: reply first (SPEC 7 step 1), then either the preparation request, or, when a cancel
/// watermark already covers the sequence (an external acceptor, SPEC 4.10), `cancelled` at once.
pub(crate) fn on_submit(st: &mut State, ss: &mut Sessions, tx: &mut Tx, submit: Submit) {
    debug_assert!(st.outcomes_decided <= st.accepted, "I1: no more outcomes than submissions");
    debug_assert!(
        st.watermarks.values().all(|wm| *wm >= st.next_seq),
        "watermarks cover only what can arrive"
    );
    let fingerprint = submit.run_id.as_ref().map(|_| Fingerprint::of(&submit));
    if let Some(reply) = answered_without_accepting(st, &submit, fingerprint.as_ref()) {
        tx.reply(OutputKind::Reply(reply));
        return;
    }
    debug_assert!(submit.seq.is_none_or(|q| q >= st.next_seq), "checked by the engine");

    let seq = st.new_seq(submit.seq);
    let own = submit.run_id.is_some() && !mutant!(st.config, FoldRunIds);
    let mode = if own { Mode::OwnTurn } else { submit.mode.unwrap_or(Mode::Fold) };
    let Submit { session, prompt, attachments, run_id, .. } = submit;
    if let (Some(run_id), Some(fingerprint)) = (&run_id, fingerprint) {
        let entry = RunEntry { session: session.clone(), seq, fingerprint, outcome: None };
        st.runs.insert(run_id.clone(), entry);
    }
    tx.reply(OutputKind::Reply(Reply::Accepted {
        session: session.clone(),
        seq,
        run_id: run_id.clone(),
        mode,
    }));
    let sub = Submission {
        seq,
        session: session.clone(),
        run_id,
        mode,
        prompt,
        attachments,
        steps: 0,
        summaries: 0,
        usage: RunUsage::default(),
    };
    // Watermarks exist only with an external acceptor; most engines skip this.
    let covered = !st.watermarks.is_empty()
        && st
            .watermarks
            .get(&session)
            .is_some_and(|wm| seq <= *wm || mutant!(st.config, WatermarkIgnoresSequence))
        && !mutant!(st.config, CoveredLateSubmissionRuns);
    if covered && mutant!(st.config, WatermarkDroppedEarly) {
        // The bug: the first covered arrival consumes the watermark.
        st.watermarks.remove(&session);
    }
    if !st.watermarks.is_empty() {
        // A watermark is dropped as soon as nothing it covers can still arrive (SPEC 4.10).
        let next = st.next_seq;
        st.watermarks.retain(|_, wm| *wm >= next);
    }
    if covered {
        outcome::decide(st, tx, sub, Verdict::Cancelled, None);
        return;
    }
    if mutant!(st.config, StickyPreparationFailure)
        && let Some(error) = crate::state::poisoned(st, &session)
    {
        // The bug (G-24): an earlier failure of the session fails this one without preparing.
        let info = crate::lifecycle::rules::failure(error);
        return outcome::decide(st, tx, sub, Verdict::Failed(info), None);
    }
    ss.with(&session, true, |s| {
        s.queue.push_back(Waiting { sub, prep: Prep::Preparing });
    });
    tx.handoff(seq, OutputKind::Prepare { session, seq });
}
