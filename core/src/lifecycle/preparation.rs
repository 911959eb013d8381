//! The preparation phase: prepared, failed, aborted (SPEC 4.1).

use crate::alphabet::mutants::mutant;
use crate::alphabet::{Mode, Seq, SessionId, Setup};
use crate::lifecycle::admission;
use crate::lifecycle::outcome::{self, Verdict};
use crate::lifecycle::rules::failure;
use crate::state::Tx;
use crate::state::{Closing, Prep, Sessions, State};

/// The queue position of `seq` if it is preparing. The queue is in sequence order (I7), so a
/// binary search finds it.
fn preparing(s: &crate::state::Session, seq: Seq) -> Option<usize> {
    let pos = s.queue.binary_search_by_key(&seq, |w| w.sub.seq).ok()?;
    (s.queue[pos].prep == Prep::Preparing).then_some(pos)
}

/// `Prepared`: the entry becomes `Prepared`; if it heads an idle session's queue it is admitted
/// in the same transition (SPEC 4.2).
pub(crate) fn on_prepared(
    st: &mut State,
    ss: &mut Sessions,
    tx: &mut Tx,
    session: &SessionId,
    seq: Seq,
    setup: Setup,
) {
    ss.with(session, false, |s| {
        // Guard (I13): only a preparing entry of this session accepts the reply.
        let Some(entry) = preparing(s, seq).and_then(|pos| s.queue.get_mut(pos)) else {
            return;
        };
        debug_assert_eq!(entry.sub.session, *session);
        debug_assert!(
            entry.sub.run_id.is_none()
                || entry.sub.mode == Mode::OwnTurn
                || mutant!(st.config, FoldRunIds),
            "RunId: own_turn"
        );
        entry.prep = Prep::Prepared(setup);
        admission::hand_off(st, tx, s);
    });
}

/// `PreparationFailed`: only this submission ends `failed` (kind `preparation`); nothing stays
/// sticky (G-24), and the queue moves on if it was the head (G-14).
pub(crate) fn on_preparation_failed(
    st: &mut State,
    ss: &mut Sessions,
    tx: &mut Tx,
    session: &SessionId,
    seq: Seq,
    error: String,
) {
    ss.with(session, false, |s| {
        let Some(pos) = preparing(s, seq) else {
            return;
        };
        let Some(entry) = s.queue.remove(pos) else {
            return;
        };
        debug_assert_eq!(entry.sub.seq, seq);
        debug_assert_eq!(st.closing, Closing::Open, "no waiting entry survives shutdown's start");
        if mutant!(st.config, StickyPreparationFailure) {
            crate::state::poison(st, session, &error); // the bug (G-24): the failure sticks
        }
        outcome::decide(st, tx, entry.sub, Verdict::Failed(failure(error)), None);
        admission::hand_off(st, tx, s);
    });
}
