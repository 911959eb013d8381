//! Shutdown with its deadline, and the timers (SPEC 4.5, 4.9, 4.10).

use crate::alphabet::mutants::mutant;
use crate::alphabet::{Millis, OutputKind, TimerId, TimerPurpose};
use crate::lifecycle::cancel;
use crate::lifecycle::cleanup::{self, TurnEnd};
use crate::lifecycle::outcome::Verdict;
use crate::lifecycle::retry;
use crate::lifecycle::summary;
use crate::lifecycle::title;
use crate::state::Tx;
use crate::state::{Abort, Closing, Lane, Phase, Sessions, State};

/// `Shutdown`: waiting submissions end `interrupted` at once, active turns are aborted and end
/// `interrupted` after their clean-up or at the deadline, whichever is first.
pub(crate) fn on_shutdown(st: &mut State, ss: &mut Sessions, tx: &mut Tx, now: Millis) {
    if st.closing != Closing::Open {
        return; // shutdown is idempotent
    }
    debug_assert!(ss.iter().all(|(_, s)| !s.is_idle()), "idle sessions are forgotten");
    debug_assert!(
        st.timers.values().all(|t| t.purpose != TimerPurpose::ShutdownDeadline),
        "no deadline before shutdown"
    );
    st.closing = Closing::Draining { deadline: None };
    title::abandon_all(st, tx);
    let ids = ss.ids();
    for id in &ids {
        ss.with(id, false, |s| {
            let error = Verdict::Interrupted(cleanup::shutdown_error());
            if mutant!(st.config, ShutdownSwallowsWaiting) {
                s.queue.clear(); // the bug (G-20): no outcome, no RunComplete, no abort
            }
            cancel::end_waiting(st, tx, s, &|_| true, &error);
            cancel::abort_turn(st, tx, now, s, Abort::Shutdown);
        });
    }
    if !ss.is_empty() {
        let deadline = now.plus_ms(st.config.shutdown_deadline_ms);
        let timer = st.new_timer(deadline, TimerPurpose::ShutdownDeadline);
        tx.tail(OutputKind::SetTimer { timer, deadline, purpose: TimerPurpose::ShutdownDeadline });
        st.closing = Closing::Draining { deadline: Some(timer) };
    }
}

/// Ends shutdown once nothing is unfinished: disarms the deadline and emits `Stopped` once.
pub(crate) fn finish_if_drained(st: &mut State, ss: &Sessions, tx: &mut Tx) {
    let Closing::Draining { deadline } = st.closing else {
        return;
    };
    if !ss.is_empty() {
        return;
    }
    if let Some(timer) = deadline
        && st.timers.remove(&timer).is_some()
    {
        tx.abort(crate::alphabet::Seq(0), OutputKind::CancelTimer { timer });
    }
    st.closing = Closing::Closed;
    tx.tail(OutputKind::Stopped);
}

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
                crate::lifecycle::watchdog::timer_fired(st, tx, now, s, timer, turn);
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
