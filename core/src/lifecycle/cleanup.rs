//! Clean-up at every turn end and the end of a turn (SPEC 4.6, 4.9).
//!
//! [`end_turn`] is the only code that empties a session's lane. In one transition it writes the
//! clean-up (synthetic results for every call without one, appended after the existing results;
//! the message's finish if it has none), decides the owner's outcome, and runs the hand-off.
//! That makes the persisted history protocol-legal on every path (I8) and keeps the queue moving
//! after any end (G-01).

use crate::alphabet::mutants::mutant;
use crate::alphabet::{
    CANCELED_FINISH, CANCELLED_TOOL_RESULT, ErrorInfo, FAILED_TOOL_RESULT, MessageFinish,
    OutputKind, SHUTDOWN_FINISH, SessionId, StoreOp,
};
use crate::lifecycle::admission;
use crate::lifecycle::outcome::{self, Verdict};
use crate::lifecycle::rules::{self, shutdown_error};
use crate::state::Tx;
use crate::state::{Abort, CallState, Lane, MessageState, Phase, Reasoning, Session, State, Turn};

/// How a turn ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TurnEnd {
    /// A normal end after a step (SPEC 4.6 cases 1 to 3): the message is finished already.
    Done(Verdict),
    /// A failure (provider error, step limit): the verdict is `failed`.
    Failed(ErrorInfo),
    /// An abort whose clean-up is due now (every tool reported, or the timer fired).
    Aborted(Abort),
}

/// What follows a turn's end in the same transition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum After {
    /// The queue's head, if prepared, becomes active (SPEC 4.6).
    HandOff,
    /// The context is nearly full: the session summarizes as housekeeping first (SPEC 4.7).
    Summarize,
}

/// Ends the lane's turn: clean-up writes, the owner's outcome, then the hand-off.
pub(crate) fn end_turn(st: &mut State, tx: &mut Tx, s: &mut Session, end: TurnEnd) {
    end_turn_then(st, tx, s, end, After::HandOff);
}

/// Ends the lane's turn: clean-up writes, the owner's outcome, then what `after` says.
pub(crate) fn end_turn_then(
    st: &mut State,
    tx: &mut Tx,
    s: &mut Session,
    end: TurnEnd,
    after: After,
) {
    let Lane::Turn(t) = std::mem::take(&mut s.lane) else {
        debug_assert!(false, "end_turn needs a turn");
        return;
    };
    let mut t = *t;
    let seq = t.owner.seq;
    if let Phase::Aborting { grace: Some(timer), .. } | Phase::Backoff { timer, .. } = t.phase
        && st.timers.remove(&timer).is_some()
    {
        tx.abort(seq, OutputKind::CancelTimer { timer });
    }
    if let Phase::Streaming { watchdog, .. } = &mut t.phase {
        crate::lifecycle::watchdog::disarm(st, tx, seq, watchdog);
    }
    let failed = matches!(end, TurnEnd::Failed(_));
    let (result_text, finish, verdict) = match end {
        TurnEnd::Done(v) => (FAILED_TOOL_RESULT, None, v),
        TurnEnd::Failed(e) => (
            FAILED_TOOL_RESULT,
            Some(MessageFinish::Error { title: e.title.clone(), message: e.message.clone() }),
            Verdict::Failed(e),
        ),
        TurnEnd::Aborted(Abort::Cancel) => (
            CANCELLED_TOOL_RESULT,
            Some(MessageFinish::Canceled { message: CANCELED_FINISH.to_owned() }),
            Verdict::Cancelled,
        ),
        TurnEnd::Aborted(Abort::Shutdown) => (
            CANCELLED_TOOL_RESULT,
            Some(MessageFinish::Canceled { message: SHUTDOWN_FINISH.to_owned() }),
            Verdict::Interrupted(shutdown_error()),
        ),
    };
    if mutant!(st.config, NoSyntheticResult) {
        // The bug: a call that has no result is passed over as if it had one.
        for c in &mut t.calls {
            if !matches!(c.state, CallState::Reported { .. } | CallState::Unfinished) {
                c.state = CallState::Reported { output: String::new(), stop: None };
            }
        }
    }
    let first_only = mutant!(st.config, SyntheticFirstOnly);
    clean_up(tx, &s.id, &mut t, result_text, finish, first_only);
    let last = t.last_message();
    let seq = t.owner.seq;
    if let Some(link) = s.parent.clone() {
        let result = rules::child_result(&verdict, &last.text);
        st.crossings.push_back(crate::state::Crossing::ChildEnded { link, result });
    }
    outcome::decide(st, tx, t.owner, verdict, Some(last));
    match after {
        After::Summarize if st.closing == crate::state::Closing::Open => {
            crate::lifecycle::summary::start(st, tx, s, crate::state::Purpose::Housekeeping, seq);
        }
        _ if failed && mutant!(st.config, SkipHandoffOnError) => {} // the bug (G-01)
        _ => admission::hand_off(st, tx, s),
    }
}

/// The clean-up writes of SPEC 4.9, in its order: close the reasoning section; finish every
/// unfinished call with `{}`; give every call without a result a synthetic error result,
/// appended after the existing ones, in the calls' order; give the message its finish if it
/// has none. `first_only` is the mutant `synthetic_first_only`.
fn clean_up(
    tx: &mut Tx,
    session: &SessionId,
    t: &mut Turn,
    result_text: &str,
    finish: Option<MessageFinish>,
    first_only: bool,
) {
    let (seq, id) = (t.owner.seq, t.message);
    let write = |tx: &mut Tx, op| tx.decided(seq, OutputKind::Store(op));
    close_open_parts(tx, session, t);
    // The bug `synthetic_first_only`: only the first call without a result gets one.
    let unanswered = t.calls.iter_mut().filter(|c| !matches!(c.state, CallState::Reported { .. }));
    for c in unanswered.take(if first_only { 1 } else { usize::MAX }) {
        c.state = CallState::Reported { output: result_text.to_owned(), stop: None };
        let (call, content) = (c.id.clone(), result_text.to_owned());
        write(
            tx,
            StoreOp::ToolResult {
                session: session.clone(),
                seq,
                id,
                call,
                content,
                is_error: true,
                synthetic: true,
            },
        );
    }
    // A message without its final finish gets the cancel or error finish; `tool_use` is
    // replaced, since the model will not be called again (SPEC 4.9).
    if let (MessageState::Open | MessageState::ToolUse, Some(finish)) = (t.message_state, finish) {
        t.message_state = MessageState::Final;
        write(tx, StoreOp::MessageFinished { session: session.clone(), seq, id, finish });
    }
}

/// Closes what a stream can leave open (SPEC 4.4, 4.9): the reasoning section, and every
/// unfinished call (cut off by max tokens, say), which is finished with `{}` and never runs.
pub(crate) fn close_open_parts(tx: &mut Tx, session: &SessionId, t: &mut Turn) {
    let (seq, id) = (t.owner.seq, t.message);
    let write = |tx: &mut Tx, op| tx.decided(seq, OutputKind::Store(op));
    if t.parts.reasoning == Reasoning::Open {
        t.parts.reasoning = Reasoning::Ended;
        write(tx, StoreOp::ReasoningEnded { session: session.clone(), seq, id, signature: None });
    }
    for c in t.calls.iter_mut().filter(|c| c.state == CallState::Unfinished) {
        c.state = CallState::Invalid;
        let (call, name, input) = (c.id.clone(), c.name.clone(), c.input.clone());
        write(tx, StoreOp::ToolCall { session: session.clone(), seq, id, call, name, input });
    }
}
