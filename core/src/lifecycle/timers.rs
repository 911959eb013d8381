//! Where a fired timer goes (SPEC 4.5, 4.9, 4.10): a cancel's grace timer to the clean-up, a
//! backoff to the next attempt, a stream watchdog to its judgement, the shutdown deadline to
//! the clean-up of every turn still aborting. One place routes them all, above the handlers
//! it calls.

use crate::alphabet::mutants::mutant;
use crate::alphabet::{Millis, OutputKind, SummaryIo, TimerId, TimerPurpose, TurnId};
use crate::lifecycle::cleanup::{self, TurnEnd};
use crate::lifecycle::retry;
use crate::lifecycle::summary;
use crate::lifecycle::watchdog::{self, Wake};
use crate::state::Tx;
use crate::state::{Attempting, Closing, Lane, Phase, Session, Sessions, State};

/// `TimerFired`: a grace timer cleans up its turn; the shutdown deadline cleans up every turn
/// still aborting. A timer that is not armed is stale and ignored (I13).
pub(crate) fn on_timer(
    st: &mut State,
    ss: &mut Sessions,
    tx: &mut Tx,
    now: Millis,
    timer: TimerId,
) {
    let Some(t) = st.timers.remove(&timer) else {
        return;
    };
    debug_assert!(t.deadline <= now, "the engine refuses early firings");
    debug_assert!(
        t.purpose != TimerPurpose::ShutdownDeadline
            || matches!(st.closing, Closing::Draining { .. }),
        "the deadline exists only while draining"
    );
    match t.purpose {
        TimerPurpose::CancelGrace { session, turn } => {
            ss.with(&session, false, |s| {
                let cause = match &s.lane {
                    Lane::Turn(tn) if tn.id == turn => match tn.phase {
                        Phase::Aborting { cause, grace: Some(g) } if g == timer => cause,
                        _ => return,
                    },
                    _ => return,
                };
                cleanup::end_turn(st, tx, s, TurnEnd::Aborted(cause));
            });
        }
        TimerPurpose::Retry { session, .. } => {
            ss.with(&session, false, |s| match s.lane {
                Lane::Summary(_) => summary::on_backoff_done(st, tx, s, timer),
                _ => retry::on_backoff_done(st, tx, s, timer),
            });
        }
        TimerPurpose::StreamIdle { session, turn } => {
            ss.with(&session, false, |s| {
                stream_idle(st, tx, now, s, timer, turn);
            });
        }
        TimerPurpose::ShutdownDeadline => {
            if let Closing::Draining { .. } = st.closing {
                st.closing = Closing::Draining { deadline: None };
            }
            let ids = ss.ids();
            for id in &ids {
                ss.with(id, false, |s| {
                    let cause = match &s.lane {
                        Lane::Turn(tn) => match tn.phase {
                            Phase::Aborting { cause, .. } => cause,
                            _ => return,
                        },
                        Lane::Summary(_) | Lane::Idle => return, // summaries end at once
                    };
                    cleanup::end_turn(st, tx, s, TurnEnd::Aborted(cause));
                });
            }
        }
    }
}

/// The watchdog `timer` of the lane's turn or summary `turn` fired (already removed from the
/// armed timers): extend it or fail the attempt. Anything but the current attempt's timer is
/// stale (I13).
fn stream_idle(
    st: &mut State,
    tx: &mut Tx,
    now: Millis,
    s: &mut Session,
    timer: TimerId,
    turn: TurnId,
) {
    match &mut s.lane {
        Lane::Turn(t) if t.id == turn => {
            let Phase::Streaming { attempt, watchdog: Some(w) } = t.phase else { return };
            if w.timer != timer && !mutant!(st.config, WatchdogNeverDisarmed) {
                return;
            }
            let seq = t.owner.seq;
            match watchdog::judge(&w) {
                Wake::Extend { from } => {
                    let watchdog = watchdog::arm_from(st, tx, seq, &s.id, turn, from);
                    t.phase = Phase::Streaming { attempt, watchdog };
                }
                Wake::Idle => {
                    t.phase = Phase::Streaming { attempt, watchdog: None };
                    tx.abort(seq, OutputKind::AbortStep { step: t.step_io(&s.id, attempt) });
                    let error = watchdog::idle_error(st.config.stream_idle_timeout_ms);
                    retry::on_failed(st, tx, now, s, error);
                }
            }
        }
        Lane::Summary(sm) if sm.id == turn => {
            let Attempting::Streaming { attempt, watchdog: Some(w) } = sm.phase else { return };
            if w.timer != timer && !mutant!(st.config, WatchdogNeverDisarmed) {
                return;
            }
            let key = summary::key(sm);
            match watchdog::judge(&w) {
                Wake::Extend { from } => {
                    let watchdog = watchdog::arm_from(st, tx, key, &s.id, turn, from);
                    sm.phase = Attempting::Streaming { attempt, watchdog };
                }
                Wake::Idle => {
                    sm.phase = Attempting::Streaming { attempt, watchdog: None };
                    let io = SummaryIo { session: s.id.clone(), summary: sm.id, attempt };
                    tx.abort(key, OutputKind::AbortSummary { io });
                    let error = watchdog::idle_error(st.config.stream_idle_timeout_ms);
                    summary::attempt_failed(st, tx, now, s, attempt, error);
                }
            }
        }
        _ => {} // the turn or summary ended: stale (I13)
    }
}
