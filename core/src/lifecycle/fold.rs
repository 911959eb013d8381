//! Folding the queue's prepared `fold` prefix into a running turn (SPEC 4.3).
//!
//! Called at the start of every step (step 0 included). The folded user messages are written
//! before that step's assistant message and, being stored messages of the session, stay in the
//! conversation for every later step (G-09). Each folded submission ends `folded` in the same
//! transaction. An `own_turn` or a preparing entry ends the prefix.

use crate::alphabet::mutants::mutant;
use crate::alphabet::{Completion, Mode, OutputKind, StoreOp};
use crate::lifecycle::outcome;
use crate::state::Tx;
use crate::state::{Lane, Session, State};

/// Folds the prefix and returns the completions to publish after the step's commit.
pub(crate) fn fold_prefix(st: &mut State, tx: &mut Tx, s: &mut Session) -> Vec<Completion> {
    let Lane::Turn(t) = &s.lane else {
        return Vec::new();
    };
    let owner = t.owner.seq;
    let mut done = Vec::new();
    while matches!(s.queue.front(), Some(w) if w.prep.is_prepared() && w.sub.mode == Mode::Fold) {
        let Some(w) = s.queue.pop_front() else { break };
        debug_assert!(
            w.sub.seq > owner || mutant!(st.config, RequeueHeadAtBack | AdmitInPreparationOrder),
            "the queue holds only later submissions (I7)"
        );
        let id = st.new_message();
        let mut sub = w.sub;
        let (seq, text, attachments) =
            (sub.seq, sub.prompt.clone(), std::mem::take(&mut sub.attachments).into_boxed_slice());
        let op = StoreOp::UserMessage {
            session: s.id.clone(),
            seq,
            id,
            text,
            attachments,
            synthetic: false,
        };
        tx.handoff(owner, OutputKind::Store(op));
        let (op, completion) = outcome::fold(st, sub);
        tx.handoff(owner, OutputKind::Store(op));
        done.push(completion);
    }
    done
}
