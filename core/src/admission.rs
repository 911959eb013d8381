//! Admission in acceptance order and the hand-off (SPEC 4.2, 4.6).
//!
//! [`hand_off`] is the only code that makes a submission active. It runs in the same transition
//! as every event that can free the lane or prepare the head (a turn's end, a preparation
//! reply, a cancel), so a session is never observably idle while a prepared submission waits
//! (G-01, G-16), and only the queue's head is ever admitted (G-16: nobody overtakes).

use std::collections::VecDeque;

use crate::fold;
use crate::ids::MessageId;
use crate::output::{OutputKind, StoreOp};
use crate::state::{Budget, Closing, Lane, MessageState, Parts, Phase, Prep, Session, State, Turn};
use crate::transition::Tx;

/// Admits the queue's head if it is prepared and the lane is free.
pub(crate) fn hand_off(st: &mut State, tx: &mut Tx, s: &mut Session) {
    if !matches!(s.lane, Lane::Idle) || st.closing != Closing::Open {
        return;
    }
    if !s.queue.front().is_some_and(|w| w.prep.is_prepared()) {
        return;
    }
    let Some(head) = s.queue.pop_front() else { return };
    let Prep::Prepared(setup) = head.prep else { return };
    let sub = head.sub;
    let (seq, session) = (sub.seq, s.id.clone());
    let turn = st.new_turn();
    tx.handoff(
        seq,
        OutputKind::Store(StoreOp::LedgerActivated { session: session.clone(), seq, turn }),
    );
    let id = st.new_message();
    let text = sub.prompt.clone();
    tx.handoff(seq, OutputKind::Store(StoreOp::UserMessage { session, seq, id, text }));
    let t = Turn {
        owner: sub,
        id: turn,
        setup,
        step: 0,
        message: MessageId(0),
        text: String::new(),
        parts: Parts::default(),
        calls: Vec::new(),
        seen: Default::default(),
        budget: Budget::default(),
        window: VecDeque::new(),
        phase: Phase::Streaming { attempt: 0 },
        message_state: MessageState::Open,
    };
    s.lane = Lane::Turn(Box::new(t));
    start_step(st, tx, s);
}

/// Starts the lane's turn's current step (SPEC 4.3, 4.4): folds the queue's prepared `fold`
/// prefix, writes the step's assistant message, commits, publishes the folds, then starts the
/// model request. Step 0 and every later step go through here.
pub(crate) fn start_step(st: &mut State, tx: &mut Tx, s: &mut Session) {
    let folded = fold::fold_prefix(st, tx, s);
    let message = st.new_message();
    let Lane::Turn(t) = &mut s.lane else {
        debug_assert!(false, "start_step needs a turn");
        return;
    };
    let seq = t.owner.seq;
    t.message = message;
    t.text.clear();
    t.parts = Parts::default();
    t.calls.clear();
    t.budget = Budget { attempts: 1, refreshed: false };
    t.phase = Phase::Streaming { attempt: 0 };
    t.message_state = MessageState::Open;
    let op = StoreOp::AssistantMessage {
        session: s.id.clone(),
        seq,
        id: message,
        turn: t.id,
        step: t.step,
    };
    tx.handoff(seq, OutputKind::Store(op));
    tx.seal_handoff(seq);
    for c in folded {
        tx.handoff(seq, OutputKind::Finished(c));
    }
    tx.handoff(seq, OutputKind::StartStep { step: t.step_io(&s.id, 0) });
}
