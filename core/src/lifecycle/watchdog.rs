//! The stream watchdog of every attempt of a step or a summary (SPEC 4.5 "Stream watchdog").
//!
//! Each streaming attempt has one timer (purpose `StreamIdle`), armed when the attempt starts
//! and disarmed (`CancelTimer`) when it ends in any way. The deadline is lazy: a content event
//! only records its time in the attempt, with no output, so a fast stream costs nothing per
//! event. When the timer fires and no content event arrived since the moment its deadline
//! counts from, the attempt has been idle for the whole timeout: it is aborted (the host closes
//! the stream) and fails as a retryable transport error "stream idle for `<N>` s", so the
//! attempt budget and the backoff apply (`retry::on_failure`). Otherwise one new timer is armed
//! for the last content event + the timeout. A firing for an attempt that ended is stale and
//! ignored (I13). The decision depends on the order of the inputs only, never on how late a
//! host delivered the firing (`docs/lifecycle-rules.md`, "Stream watchdog").

use crate::alphabet::mutants::mutant;
use crate::alphabet::{
    ErrorClass, Millis, OutputKind, ProviderError, Seq, SessionId, StepEvent, TimerPurpose, TurnId,
    stream_idle_message,
};
use crate::state::Tx;
use crate::state::{State, Watchdog};

/// Arms the watchdog of an attempt that starts now, counted from now; `None` (and no output)
/// when the timeout is 0. The `SetTimer` goes into the hand-off bucket of `key`, after the
/// attempt's start (SPEC 7).
pub(crate) fn arm(
    st: &mut State,
    tx: &mut Tx,
    key: Seq,
    session: &SessionId,
    turn: TurnId,
) -> Option<Watchdog> {
    let now = st.now;
    arm_from(st, tx, key, session, turn, now)
}

/// Arms one timer due at `from` + the timeout.
pub(crate) fn arm_from(
    st: &mut State,
    tx: &mut Tx,
    key: Seq,
    session: &SessionId,
    turn: TurnId,
    from: Millis,
) -> Option<Watchdog> {
    let timeout = st.config.stream_idle_timeout_ms;
    if timeout == 0 {
        return None;
    }
    let deadline = from.plus_ms(timeout);
    let purpose = TimerPurpose::StreamIdle { session: session.clone(), turn };
    let timer = st.new_timer(deadline, purpose.clone());
    tx.handoff(key, OutputKind::SetTimer { timer, deadline, purpose });
    Some(Watchdog { timer, from, last: None })
}

/// True for an event that carries content and so shows the stream alive (SPEC 4.5): every
/// event but a failure and a delta without text (which a host could send as a keep-alive).
pub(crate) fn is_content(event: &StepEvent) -> bool {
    match event {
        StepEvent::TextDelta { text } | StepEvent::ReasoningDelta { text } => !text.is_empty(),
        StepEvent::Failed { .. } => false,
        _ => true,
    }
}

/// A content event of the watched attempt arrived at `now`: only the time is kept (no output,
/// SPEC 4.5: one deadline per attempt, not an output per event).
#[cfg_attr(not(feature = "mutants"), allow(unused_variables))] // `st` names the mutant
pub(crate) fn saw_content(st: &State, watchdog: &mut Option<Watchdog>, now: Millis) {
    if let Some(w) = watchdog
        && !mutant!(st.config, WatchdogNotExtended)
    {
        w.last = Some(now);
    }
}

/// The attempt ended (its finish, a failure, an abort, clean-up): its timer is disarmed with a
/// `CancelTimer` in the abort bucket of `key`, unless it already fired.
pub(crate) fn disarm(st: &mut State, tx: &mut Tx, key: Seq, watchdog: &mut Option<Watchdog>) {
    if mutant!(st.config, WatchdogNeverDisarmed) {
        watchdog.take(); // the bug: the timer stays armed, and the host is not told
        return;
    }
    if let Some(w) = watchdog.take()
        && st.timers.remove(&w.timer).is_some()
    {
        tx.abort(key, OutputKind::CancelTimer { timer: w.timer });
    }
}

/// The error an idle attempt fails with: a retryable transport error (SPEC 4.5, 8).
pub(crate) fn idle_error(timeout_ms: u64) -> ProviderError {
    ProviderError {
        class: ErrorClass::Transport,
        message: stream_idle_message(timeout_ms),
        ..ProviderError::default()
    }
}

/// What a firing of the watched attempt's timer means.
pub(crate) enum Wake {
    /// A content event arrived since the deadline's start: watch on from the last one.
    Extend { from: Millis },
    /// Idle for the whole timeout: the attempt fails.
    Idle,
}

pub(crate) fn judge(w: &Watchdog) -> Wake {
    match w.last {
        Some(from) => Wake::Extend { from },
        None => Wake::Idle,
    }
}
