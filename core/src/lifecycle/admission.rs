//! Admission in acceptance order and the hand-off (SPEC 4.2, 4.6).
//!
//! [`hand_off`] is the only code that makes a submission active. It runs in the same transition
//! as every event that can free the lane or prepare the head (a turn's end, a preparation
//! reply, a cancel), so a session is never observably idle while a prepared submission waits
//! (G-01, G-16), and only the queue's head is ever admitted (G-16: nobody overtakes).

use std::collections::VecDeque;

use crate::alphabet::mutants::mutant;
use crate::alphabet::{MessageId, OutputKind, Setup, StoreOp};
use crate::lifecycle::fold;
use crate::lifecycle::title;
use crate::state::Tx;
use crate::state::{
    Budget, Closing, Gauges, Lane, MessageState, Parts, Paused, Phase, Prep, Session, State,
    Submission, Turn,
};

/// Admits the queue's head if it is prepared and the lane is free.
pub(crate) fn hand_off(st: &mut State, tx: &mut Tx, s: &mut Session) {
    if !matches!(s.lane, Lane::Idle) || st.closing != Closing::Open {
        return;
    }
    if mutant!(st.config, RequeueHeadAtBack)
        && s.queue.front().is_some_and(|w| !w.prep.is_prepared())
        && s.queue.iter().any(|w| w.prep.is_prepared())
    {
        s.queue.rotate_left(1); // the bug (G-16): the preparing head goes to the back
    }
    if mutant!(st.config, AdmitInPreparationOrder)
        && let Some(w) =
            s.queue.iter().position(|w| w.prep.is_prepared()).and_then(|p| s.queue.remove(p))
    {
        s.queue.push_front(w); // the bug (G-16): the first prepared entry overtakes
    }
    if !s.queue.front().is_some_and(|w| w.prep.is_prepared()) {
        return;
    }
    let Some(head) = s.queue.pop_front() else { return };
    let Prep::Prepared(setup) = head.prep else { return };
    let text = head.sub.prompt.clone();
    if s.gauges.is_none() {
        s.gauges = Some(Gauges {
            prompt_tokens: setup.prompt_tokens,
            completion_tokens: setup.completion_tokens,
        });
    }
    activate(st, tx, s, head.sub, setup, text, Activation::First);
}

/// Resumes a submission whose summarization succeeded, before anything queued (SPEC 4.7,
/// G-25): a new turn, same sequence and RunId, starting with the synthetic continuation prompt
/// (always the original prompt, never nested) and a fresh loop-detection window.
pub(crate) fn resume(st: &mut State, tx: &mut Tx, s: &mut Session, p: Paused) {
    debug_assert!(matches!(s.lane, Lane::Idle), "the summary left the lane");
    debug_assert!(
        s.queue.iter().all(|w| w.sub.seq > p.sub.seq)
            || mutant!(st.config, QueueBeforeResume | RequeueHeadAtBack | AdmitInPreparationOrder),
        "the paused submission is the oldest"
    );
    debug_assert_eq!(
        st.closing,
        Closing::Open,
        "shutdown aborts summaries at once, so none succeeds"
    );
    let text = crate::lifecycle::rules::continuation(&p.sub.prompt);
    let mut sub = p.sub;
    if mutant!(st.config, StepLimitPerTurn) {
        sub.steps = 0; // the bug: the resumed turn counts its steps from zero
    }
    activate(st, tx, s, sub, p.setup, text, Activation::Resume);
}

/// Starts a sub-agent's turn at once in its new child session: no preparation, never queued
/// (SPEC 4.11).
pub(crate) fn start_child(
    st: &mut State,
    tx: &mut Tx,
    s: &mut Session,
    sub: Submission,
    setup: Setup,
) {
    debug_assert!(matches!(s.lane, Lane::Idle) && s.queue.is_empty(), "a child session is new");
    s.gauges = Some(Gauges::default());
    let text = sub.prompt.clone();
    activate(st, tx, s, sub, setup, text, Activation::Child);
}

/// How a submission becomes active.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Activation {
    /// From the queue, for the first time: a title may be requested.
    First,
    /// After its summarization, with the synthetic continuation prompt.
    Resume,
    /// A sub-agent, at once.
    Child,
}

/// Makes `sub` the lane's turn: ledger activation, its user message, the title request of a
/// first activation, then step 0 (SPEC 7's hand-off order).
fn activate(
    st: &mut State,
    tx: &mut Tx,
    s: &mut Session,
    mut sub: Submission,
    setup: Setup,
    text: String,
    how: Activation,
) {
    let (seq, session) = (sub.seq, s.id.clone());
    let turn = st.new_turn();
    tx.handoff(
        seq,
        OutputKind::Store(StoreOp::LedgerActivated { session: session.clone(), seq, turn }),
    );
    let id = st.new_message();
    let synthetic = how == Activation::Resume;
    let attachments = std::mem::take(&mut sub.attachments).into_boxed_slice(); // written once
    let op = StoreOp::UserMessage { session, seq, id, text, attachments, synthetic };
    tx.handoff(seq, OutputKind::Store(op));
    if how == Activation::First {
        title::maybe_request(st, tx, s, seq, setup.titled, &sub.prompt);
    }
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
        phase: Phase::Streaming { attempt: 0, watchdog: None },
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
    t.budget = Budget::first();
    t.phase = Phase::Streaming { attempt: 0, watchdog: None };
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
    let watchdog = crate::lifecycle::watchdog::arm(st, tx, seq, &s.id, t.id);
    t.phase = Phase::Streaming { attempt: 0, watchdog };
}
