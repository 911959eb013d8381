//! Shutdown with its deadline, and the timers (SPEC 4.5, 4.9, 4.10).

use crate::alphabet::mutants::mutant;
use crate::alphabet::{Millis, OutputKind, TimerPurpose};
use crate::lifecycle::cancel;
use crate::lifecycle::outcome::Verdict;
use crate::lifecycle::title;
use crate::state::Tx;
use crate::state::{Abort, Closing, Sessions, State};

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
            let error = Verdict::Interrupted(crate::lifecycle::rules::shutdown_error());
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
