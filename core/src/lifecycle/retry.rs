//! Retries and credential refresh inside a step or a summary (SPEC 4.5).
//!
//! A step gets at most 4 attempts: 3 retries after 5, 10 and 20 s (the defaults of
//! `Config::attempts_max` and `Config::retry_backoff_ms`), a `retry-after-ms` or
//! `retry-after` header replacing the backoff when it is between 0 and 60 s or below the
//! backoff. Every retry first resets the message's streamed content (one structural write), so
//! an attempt is never appended to a failed one. A 401 gets one credential refresh per step;
//! after it the step is retried with a fresh retry budget and the content reset (G-21). All of
//! it stays inside one turn with one outcome: no intermediate terminal event (G-02). A summary
//! follows the same rules ([`on_failure`] decides for both).

use crate::alphabet::mutants::mutant;
use crate::alphabet::{
    AttemptIo, Millis, OutputKind, ProviderError, StepIo, StoreOp, TimerId, TimerPurpose,
};
use crate::lifecycle::cleanup::{self, TurnEnd};
use crate::lifecycle::rules::{OnFailure, on_failure, refresh_failed};
use crate::state::Tx;
use crate::state::{Budget, Lane, Parts, Phase, Session, Sessions, State};

/// A failed attempt of the lane's turn: refresh, back off, or fail.
pub(crate) fn on_failed(
    st: &mut State,
    tx: &mut Tx,
    now: Millis,
    s: &mut Session,
    error: ProviderError,
) {
    let Lane::Turn(t) = &mut s.lane else { return };
    let Phase::Streaming { attempt, mut watchdog } = t.phase else { return };
    debug_assert!(
        t.budget.attempts >= 1 && t.budget.attempts <= st.config.attempts_max,
        "an attempt is running"
    );
    debug_assert!(t.calls.iter().all(|c| !c.is_running()), "no tool runs yet");
    let seq = t.owner.seq;
    crate::lifecycle::watchdog::disarm(st, tx, seq, &mut watchdog);
    t.phase = Phase::Streaming { attempt, watchdog };
    match on_failure(&st.config, &t.budget, error) {
        OnFailure::Refresh { refused } => {
            t.budget.refused = Some(refused);
            t.phase = Phase::Refreshing { attempt };
            let attempt = AttemptIo::Step(t.step_io(&s.id, attempt));
            tx.handoff(seq, OutputKind::RefreshCredentials { attempt });
        }
        OnFailure::Retry { delay_ms } => {
            let deadline = now.plus_ms(delay_ms);
            let purpose = TimerPurpose::Retry { session: s.id.clone(), turn: t.id };
            let timer = st.new_timer(deadline, purpose.clone());
            t.phase = Phase::Backoff { next: st.bump(attempt, "attempt"), timer };
            tx.handoff(seq, OutputKind::SetTimer { timer, deadline, purpose });
        }
        OnFailure::Fail(e) => cleanup::end_turn(st, tx, s, TurnEnd::Failed(e)),
    }
}

/// The backoff timer fired: reset the message and start the next attempt.
pub(crate) fn on_backoff_done(st: &mut State, tx: &mut Tx, s: &mut Session, timer: TimerId) {
    let Lane::Turn(t) = &mut s.lane else { return };
    let Phase::Backoff { next, timer: armed } = t.phase else { return };
    if armed != timer {
        return;
    }
    debug_assert!(!st.timers.contains_key(&timer), "a fired timer is disarmed first");
    debug_assert!(
        t.budget.attempts < st.config.attempts_max,
        "a backoff only while the budget lasts"
    );
    debug_assert_eq!(
        t.message_state,
        crate::state::MessageState::Open,
        "the step has not finished"
    );
    restart(st, tx, s, next, !mutant!(st.config, RetryWithoutReset));
}

/// `CredentialsRefreshed` for a step: retry with a fresh budget, or fail `unauthorized`.
pub(crate) fn on_refreshed(st: &mut State, ss: &mut Sessions, tx: &mut Tx, io: StepIo, ok: bool) {
    ss.with(&io.session.clone(), false, |s| {
        let Lane::Turn(t) = &mut s.lane else { return };
        if mutant!(st.config, RefreshNotAborted)
            && (t.id, t.step) == (io.turn, io.step)
            && let Phase::Aborting { cause, grace: None } = t.phase
        {
            // The bug (G-13): the cancel took effect only now that the person answered.
            return cleanup::end_turn(st, tx, s, TurnEnd::Aborted(cause));
        }
        if t.id != io.turn
            || t.owner.seq != io.seq
            || t.step != io.step
            || t.phase != (Phase::Refreshing { attempt: io.attempt })
        {
            return; // stale (I13)
        }
        debug_assert!(!t.budget.refreshed, "one refresh per step");
        debug_assert_eq!(t.message_state, crate::state::MessageState::Open);
        if !ok {
            let e = refresh_failed(t.budget.refused.take());
            return cleanup::end_turn(st, tx, s, TurnEnd::Failed(e));
        }
        t.budget = Budget::refreshed();
        let next = st.bump(io.attempt, "attempt");
        restart(st, tx, s, next, !mutant!(st.config, RefreshWithoutReset));
    });
}

/// Resets the message's streamed content and starts attempt `attempt` of the current step.
/// Only a mutant (`retry_without_reset`, `refresh_without_reset`) passes `reset: false`.
fn restart(st: &mut State, tx: &mut Tx, s: &mut Session, attempt: u32, reset: bool) {
    let Lane::Turn(t) = &mut s.lane else { return };
    let (seq, id) = (t.owner.seq, t.message);
    if reset {
        let op = StoreOp::MessageReset { session: s.id.clone(), seq, id };
        tx.handoff(seq, OutputKind::Store(op));
        tx.seal_handoff(seq);
    }
    for c in &t.calls {
        t.seen.remove(&c.id); // the ids of a discarded attempt may come again
    }
    t.calls.clear();
    t.text.clear();
    t.parts = Parts::default();
    t.budget.attempts = st.bump(t.budget.attempts, "attempts");
    tx.handoff(seq, OutputKind::StartStep { step: t.step_io(&s.id, attempt) });
    let watchdog = crate::lifecycle::watchdog::arm(st, tx, seq, &s.id, t.id);
    t.phase = Phase::Streaming { attempt, watchdog };
}
