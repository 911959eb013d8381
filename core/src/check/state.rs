//! The invariants of SPEC section 6 that an engine's state shows (I1, I3, I6, I7).

use crate::alphabet::{Mode, OnAbort, SessionId, TimerPurpose};
use crate::state::{
    Attempting, Call, CallState, Closing, LOOP_WINDOW_MAX, Lane, MessageState, Phase, Purpose,
    Session, Sessions, State, Summary, Turn,
};

use super::{Violation, fail};

/// Checks an engine's state (see [`crate::check_invariants`]). O(size of the state).
///
/// # Errors
/// The first [`Violation`] found.
pub(crate) fn check_state(
    state: Result<&State, String>,
    sessions: &Sessions,
) -> Result<(), Violation> {
    let st = match state {
        Ok(st) => st,
        Err(failed) => return fail("internal", failed),
    };
    let (mut unfinished, mut live_runs) = (0u64, 0usize);
    for (id, s) in sessions.iter() {
        let (held, runs) = check_session(st, id, s)?;
        unfinished += held;
        live_runs += runs;
        check_children(sessions, id, s)?;
    }
    if unfinished != st.unfinished() {
        let counted = st.unfinished();
        return fail("I1", format!("{unfinished} submissions held, {counted} unfinished counted"));
    }
    let ledger_live = st.runs.iter().filter(|(_, e)| e.outcome.is_none()).count();
    if ledger_live != live_runs {
        return fail("I1", format!("{ledger_live} live runs in the ledger, {live_runs} held"));
    }
    check_timers(st, sessions)?;
    if st.closing != Closing::Open && !st.titles.is_empty() {
        return fail("I6", "a title request outlived the start of shutdown");
    }
    if st.closing == Closing::Closed && !sessions.is_empty() {
        return fail("I6", "shutdown completed with unfinished submissions");
    }
    if let Some((s, wm)) = st.watermarks.iter().find(|(_, wm)| **wm < st.next_seq) {
        return fail("internal", format!("watermark {wm} of {s} outlived what it covers (G-08)"));
    }
    Ok(())
}

/// One session: queue order (I7), no idle gap (I6, G-16), runs consistent with the ledger (I1).
/// Returns how many unfinished submissions and live runs it holds.
fn check_session(st: &State, id: &SessionId, s: &Session) -> Result<(u64, usize), Violation> {
    if s.id != *id || s.is_idle() {
        return fail("internal", format!("session {id} is misfiled or idle and not forgotten"));
    }
    let owner = match &s.lane {
        Lane::Turn(t) => Some(&t.owner),
        Lane::Summary(sm) => match &sm.purpose {
            Purpose::Resume(p) => Some(&p.sub),
            Purpose::Housekeeping => None,
        },
        Lane::Idle => None,
    };
    let idle = matches!(s.lane, Lane::Idle);
    let mut prev = owner.map(|o| o.seq);
    for w in &s.queue {
        if prev.is_some_and(|p| w.sub.seq <= p) {
            let at = w.sub.seq;
            return fail("I7", format!("session {id}: queue not in acceptance order at {at}"));
        }
        prev = Some(w.sub.seq);
    }
    let open = st.closing == Closing::Open;
    if idle && open && s.queue.front().is_some_and(|w| w.prep.is_prepared()) {
        return fail("I6", format!("session {id} is idle while its prepared head waits (G-16)"));
    }
    if !open && !s.queue.is_empty() {
        return fail("I6", format!("session {id} keeps waiting submissions in shutdown (G-20)"));
    }
    let (mut held, mut runs) = (0u64, 0usize);
    for sub in s.queue.iter().map(|w| &w.sub).chain(owner) {
        held += 1;
        if sub.session != *id {
            return fail("internal", format!("submission {} filed under session {id}", sub.seq));
        }
        let Some(r) = &sub.run_id else { continue };
        runs += 1;
        let consistent = st.runs.get(r).is_some_and(|e| e.seq == sub.seq && e.outcome.is_none());
        if sub.mode != Mode::OwnTurn || !consistent {
            return fail("I1", format!("run {r} is not own_turn or the ledger disagrees"));
        }
    }
    match &s.lane {
        Lane::Turn(t) => check_turn(st, id, t)?,
        Lane::Summary(sm) => check_summary(st, id, sm)?,
        Lane::Idle => {}
    }
    Ok((held, runs))
}

/// True when an abort leaves the call to finish (SPEC 4.9): its tool's policy says so, or it
/// is left to finish once started and its work began.
fn left_to_finish(t: &Turn, c: &Call) -> bool {
    t.abort_policy(c) == OnAbort::Finish
}

fn check_turn(st: &State, id: &SessionId, t: &Turn) -> Result<(), Violation> {
    let running = t.calls.iter().filter(|c| c.is_running()).count();
    let started =
        t.calls.iter().any(|c| c.is_running() || matches!(c.state, CallState::Reported { .. }));
    let open = t.message_state == MessageState::Open;
    let ok = match t.phase {
        // SPEC 4.5: a streaming attempt is watched (a stalled one has a pending timer).
        Phase::Streaming { watchdog, .. } => open && !started && watched(st, watchdog),
        Phase::Refreshing { .. } => open && !started,
        Phase::Backoff { timer, .. } => {
            open && !started
                && st.timers.get(&timer).is_some_and(|tm| {
                    tm.purpose == TimerPurpose::Retry { session: id.clone(), turn: t.id }
                })
        }
        // I6: a tool step waits for a running tool; nothing is dropped before an abort.
        Phase::Tools { .. } => {
            !open && running > 0 && !t.calls.iter().any(|c| c.state == CallState::Dropped)
        }
        // SPEC 4.9: clean-up waits only for calls that can still report: a droppable tool's
        // call is dropped by the abort, never waited for.
        Phase::Aborting { .. }
            if t.calls.iter().any(|c| {
                matches!(c.state, CallState::Running | CallState::Started) && !left_to_finish(t, c)
            }) =>
        {
            false
        }
        Phase::Aborting { grace, .. } => {
            let armed = match grace {
                Some(g) => st.timers.contains_key(&g),
                None => {
                    matches!(st.closing, Closing::Draining { deadline: Some(d) } if st.timers.contains_key(&d))
                }
            };
            running > 0 && armed
        }
    };
    if !ok {
        return fail(
            "I6",
            format!(
                "session {id}: turn {} in {:?} waits for nothing or is inconsistent",
                t.id.0, t.phase
            ),
        );
    }
    if t.calls.iter().any(|c| {
        c.state == CallState::Started && t.setup.abort_policy(&c.name) != OnAbort::FinishOnceStarted
    }) {
        return fail(
            "I13",
            format!("session {id}: the work of a call began for a tool that never waits"),
        );
    }
    if st.closing != Closing::Open && !matches!(t.phase, Phase::Aborting { .. }) {
        return fail("I6", format!("session {id}: a turn still runs during shutdown"));
    }
    if t.calls.len() > st.config.calls_per_step_max as usize
        || t.budget.attempts > st.config.attempts_max
        || t.window.len() > LOOP_WINDOW_MAX
    {
        return fail("internal", format!("session {id}: a bounded collection outgrew its limit"));
    }
    Ok(())
}

/// I6 across sessions: a call waiting for a sub-agent has a child session whose turn answers
/// it (SPEC 4.11).
fn check_children(sessions: &Sessions, id: &SessionId, s: &Session) -> Result<(), Violation> {
    let Lane::Turn(t) = &s.lane else { return Ok(()) };
    for c in &t.calls {
        if let CallState::Delegated { child } = &c.state {
            let answers = sessions.get(child).and_then(|cs| cs.parent.as_ref()).is_some_and(|l| {
                l.call.session == *id
                    && l.call.seq == t.owner.seq
                    && l.call.turn == t.id
                    && l.call.call == c.id
            });
            if !answers {
                return fail(
                    "I6",
                    format!("session {id}: call {} waits for a sub-agent that is gone", c.id),
                );
            }
        }
    }
    Ok(())
}

/// A summary waits for its stream, its refresh, or an armed backoff timer (I6); none survives
/// the start of shutdown.
fn check_summary(st: &State, id: &SessionId, sm: &Summary) -> Result<(), Violation> {
    let ok = match sm.phase {
        Attempting::Streaming { watchdog, .. } => watched(st, watchdog),
        Attempting::Refreshing { .. } => true,
        Attempting::Backoff { timer, .. } => st
            .timers
            .get(&timer)
            .is_some_and(|t| t.purpose == TimerPurpose::Retry { session: id.clone(), turn: sm.id }),
    };
    if !ok || st.closing != Closing::Open || sm.budget.attempts > st.config.attempts_max {
        return fail(
            "I6",
            format!("session {id}: summary {} in {:?} is inconsistent", sm.id.0, sm.phase),
        );
    }
    Ok(())
}

/// A streaming attempt's watchdog (SPEC 4.5): armed unless the timeout is 0.
fn watched(st: &State, watchdog: Option<crate::state::Watchdog>) -> bool {
    match watchdog {
        Some(w) => st.config.stream_idle_timeout_ms > 0 && st.timers.contains_key(&w.timer),
        None => st.config.stream_idle_timeout_ms == 0,
    }
}

fn check_timers(st: &State, sessions: &Sessions) -> Result<(), Violation> {
    for (timer, t) in &st.timers {
        let ok = match &t.purpose {
            TimerPurpose::CancelGrace { session, turn } => sessions.get(session).is_some_and(|s| {
                matches!(&s.lane, Lane::Turn(tn) if tn.id == *turn
                    && matches!(tn.phase, Phase::Aborting { grace: Some(g), .. } if g == *timer))
            }),
            TimerPurpose::Retry { session, turn } => sessions.get(session).is_some_and(|s| match &s.lane {
                Lane::Turn(tn) => tn.id == *turn && matches!(tn.phase, Phase::Backoff { timer: t, .. } if t == *timer),
                Lane::Summary(sm) => {
                    sm.id == *turn && matches!(sm.phase, Attempting::Backoff { timer: t, .. } if t == *timer)
                }
                Lane::Idle => false,
            }),
            TimerPurpose::ShutdownDeadline => {
                matches!(st.closing, Closing::Draining { deadline: Some(d) } if d == *timer)
            }
            // SPEC 4.5: one watchdog per attempt, disarmed when the attempt ends.
            TimerPurpose::StreamIdle { session, turn } => sessions.get(session).is_some_and(|s| {
                let watched = match &s.lane {
                    Lane::Turn(tn) if tn.id == *turn => match tn.phase {
                        Phase::Streaming { watchdog, .. } => watchdog,
                        _ => None,
                    },
                    Lane::Summary(sm) if sm.id == *turn => match sm.phase {
                        Attempting::Streaming { watchdog, .. } => watchdog,
                        _ => None,
                    },
                    _ => None,
                };
                watched.is_some_and(|w| {
                    w.timer == *timer
                        && t.deadline == w.from.plus_ms(st.config.stream_idle_timeout_ms)
                })
            }),
        };
        if !ok {
            return fail("I13", format!("timer {} is armed for nothing", timer.0));
        }
    }
    Ok(())
}
