//! cancel with its watermark, cancel_run and clear_queue (SPEC 4.10, I4, I5, I10).
//!
//! A cancel is a predicate over sequences decided once, in one transition: every waiting
//! submission it covers ends `cancelled` at once (a preparing one also gets its preparation
//! aborted), the active turn it covers is aborted and ends `cancelled` at clean-up. Nothing it
//! does not cover is touched, and a cancel that covers nothing changes nothing (I10).

use crate::alphabet::mutants::mutant;
use crate::alphabet::{
    AttemptIo, Millis, OnAbort, OutputKind, RunId, Seq, SessionId, TimerPurpose,
};
use crate::lifecycle::admission;
use crate::lifecycle::cleanup::{self, TurnEnd};
use crate::lifecycle::outcome::{self, Verdict};
use crate::lifecycle::summary;
use crate::state::Tx;
use crate::state::{
    Abort, Call, CallState, Crossing, Lane, Phase, Prep, Purpose, Session, Sessions, State, Turn,
};

/// `Cancel`: covers the session's unfinished submissions at or below the watermark.
pub(crate) fn on_cancel(
    st: &mut State,
    ss: &mut Sessions,
    tx: &mut Tx,
    now: Millis,
    session: &SessionId,
    up_to: Option<Seq>,
) {
    debug_assert!(
        st.watermarks.values().all(|wm| *wm >= st.next_seq),
        "stale watermarks are dropped (G-08)"
    );
    debug_assert!(ss.get(session).is_none_or(|s| !s.is_idle()), "idle sessions are forgotten");
    crate::lifecycle::title::cancelled_with_turn(st, tx, session);
    let newest = Seq(st.next_seq.0.saturating_sub(1));
    let mut wm = up_to.unwrap_or(newest);
    if mutant!(st.config, WatermarkOffByOne)
        && st.config.acceptor == crate::alphabet::Acceptor::External
    {
        // The bug: the acceptor's newest sequence taken for the first one not covered.
        wm = Seq(wm.0.saturating_add(1));
    }
    if mutant!(st.config, CancelFlag) && ss.get(session).is_none() {
        // The bug: an idle cancel is a "cancel pending" flag that trips the next submission.
        st.watermarks.insert(session.clone(), st.next_seq);
    }
    if wm >= st.next_seq {
        // Covers sequences an external acceptor assigned that have not reached the core yet.
        let entry = st.watermarks.entry(session.clone()).or_insert(wm);
        *entry = (*entry).max(wm);
    }
    // The bug `watermark_first_only`: only the oldest covered submission is cancelled.
    let only = if mutant!(st.config, WatermarkFirstOnly) {
        ss.get(session).and_then(oldest_unfinished)
    } else {
        None
    };
    let covers = |seq: Seq| seq <= wm && only.is_none_or(|o| seq == o);
    // The bug `child_cancel_cancels_parent`: a sub-agent's cancel aborts its parent's turn too.
    if mutant!(st.config, ChildCancelCancelsParent)
        && let Some(link) = ss.get(session).and_then(|s| s.parent.clone())
    {
        let parent = link.call.session;
        st.crossings.push_back(Crossing::AbortChild { child: parent, cause: Abort::Cancel });
    }
    ss.with(session, false, |s| cover(st, tx, now, s, &covers, Verdict::Cancelled, true));
}

/// The session's oldest unfinished submission (for the mutant `watermark_first_only`).
fn oldest_unfinished(s: &Session) -> Option<Seq> {
    let owner = match &s.lane {
        Lane::Turn(t) => Some(t.owner.seq),
        Lane::Summary(sm) => match &sm.purpose {
            Purpose::Resume(p) => Some(p.sub.seq),
            Purpose::Housekeeping => None,
        },
        Lane::Idle => None,
    };
    owner.or_else(|| s.queue.front().map(|w| w.sub.seq))
}

/// `CancelRun`: covers exactly the run's submission; a finished or unknown run is a no-op.
pub(crate) fn on_cancel_run(
    st: &mut State,
    ss: &mut Sessions,
    tx: &mut Tx,
    now: Millis,
    run_id: &RunId,
) {
    let Some(run) = st.runs.get(run_id) else {
        return;
    };
    if run.outcome.is_some() {
        return;
    }
    let (session, target) = (run.session.clone(), run.seq);
    debug_assert!(target < st.next_seq, "a run's sequence was assigned");
    debug_assert!(
        ss.get(&session).is_some() || mutant!(st.config, ShutdownSwallowsWaiting),
        "an unfinished run's session has work"
    );
    ss.with(&session, false, |s| {
        cover(st, tx, now, s, &|seq| seq == target, Verdict::Cancelled, false)
    });
}

/// `ClearQueue`: every waiting submission ends `cancelled`; the active turn is untouched.
pub(crate) fn on_clear_queue(st: &mut State, ss: &mut Sessions, tx: &mut Tx, session: &SessionId) {
    ss.with(session, false, |s| {
        debug_assert!(s.queue.iter().all(|w| w.sub.session == s.id), "filed under its session");
        debug_assert!(
            s.queue.iter().is_sorted_by_key(|w| w.sub.seq) || mutant!(st.config, RequeueHeadAtBack),
            "I7: acceptance order"
        );
        let idle_before = matches!(s.lane, Lane::Idle);
        // The bug `clear_skips_preparing` (G-07): entries still preparing survive the clear.
        let kept: Vec<Seq> = if mutant!(st.config, ClearSkipsPreparing) {
            s.queue.iter().filter(|w| !w.prep.is_prepared()).map(|w| w.sub.seq).collect()
        } else {
            Vec::new()
        };
        end_waiting(st, tx, s, &|seq| !kept.contains(&seq), &Verdict::Cancelled);
        debug_assert_eq!(idle_before, matches!(s.lane, Lane::Idle), "the active turn is untouched");
    });
}

/// Ends the waiting entries matching `covers` with `verdict`, in ascending sequence order.
pub(crate) fn end_waiting(
    st: &mut State,
    tx: &mut Tx,
    s: &mut Session,
    covers: &dyn Fn(Seq) -> bool,
    verdict: &Verdict,
) {
    let covered = s.queue.iter().filter(|w| covers(w.sub.seq)).count();
    if covered == 0 {
        return;
    }
    let ended = if covered == s.queue.len() {
        std::mem::take(&mut s.queue)
    } else if covered == 1 {
        // cancel_run of one waiting entry: remove it in place.
        let pos = s.queue.iter().position(|w| covers(w.sub.seq));
        pos.and_then(|p| s.queue.remove(p)).into_iter().collect()
    } else {
        let (ended, kept) =
            std::mem::take(&mut s.queue).into_iter().partition(|w| covers(w.sub.seq));
        s.queue = kept;
        ended
    };
    for w in ended {
        let seq = w.sub.seq;
        if w.prep == Prep::Preparing {
            tx.abort(seq, OutputKind::AbortPreparation { session: s.id.clone(), seq });
        }
        outcome::decide(st, tx, w.sub, verdict.clone(), None);
    }
}

/// Applies a cancel predicate to a session: waiting entries, then the active turn, then the
/// hand-off (a covered turn with nothing running ends at once and frees the lane).
fn cover(
    st: &mut State,
    tx: &mut Tx,
    now: Millis,
    s: &mut Session,
    covers: &dyn Fn(Seq) -> bool,
    verdict: Verdict,
    session_wide: bool,
) {
    end_waiting(st, tx, s, covers, &verdict);
    let active = match &s.lane {
        Lane::Turn(t) => covers(t.owner.seq),
        Lane::Summary(sm) => match &sm.purpose {
            Purpose::Resume(p) => covers(p.sub.seq),
            // Housekeeping belongs to no submission: a session's cancel stops it, a run's not.
            Purpose::Housekeeping => session_wide,
        },
        Lane::Idle => false,
    };
    if active {
        abort_turn(st, tx, now, s, Abort::Cancel);
    }
    admission::hand_off(st, tx, s);
}

/// Aborts the lane's turn (SPEC 4.9): the stream, a credential refresh, a backoff and every
/// running tool are aborted. A call the host drops on abort can never report, so only calls
/// left to finish ([`crate::OnAbort::Finish`]) and sub-agents hold clean-up back, up to the
/// grace timer (a cancel) or the shutdown deadline; with none, clean-up runs now (a cancel during
/// a long droppable call or a refresh wait takes effect at once: G-13). An already aborting turn
/// keeps its first cause.
pub(crate) fn abort_turn(st: &mut State, tx: &mut Tx, now: Millis, s: &mut Session, cause: Abort) {
    if matches!(s.lane, Lane::Summary(_)) {
        return summary::abort(st, tx, s, cause);
    }
    let Lane::Turn(t) = &mut s.lane else { return };
    let seq = t.owner.seq;
    match t.phase {
        Phase::Aborting { .. } => return,
        // end_turn disarms the watchdog
        Phase::Streaming { attempt, .. } => {
            tx.abort(seq, OutputKind::AbortStep { step: t.step_io(&s.id, attempt) })
        }
        Phase::Refreshing { .. } if mutant!(st.config, RefreshNotAborted) => {
            // The bug (G-13): the cancel waits for the person to re-authenticate.
            t.phase = Phase::Aborting { cause, grace: None };
            return;
        }
        Phase::Refreshing { attempt } => tx.abort(
            seq,
            OutputKind::AbortRefresh { attempt: AttemptIo::Step(t.step_io(&s.id, attempt)) },
        ),
        Phase::Backoff { .. } => {} // end_turn disarms the timer
        Phase::Tools { .. } => {
            abort_calls(st, tx, &s.id, t, cause);
            if t.calls.iter().any(|c| c.is_running()) {
                let grace = match cause {
                    Abort::Cancel => {
                        let deadline = now.plus_ms(st.config.cancel_grace_ms);
                        let purpose =
                            TimerPurpose::CancelGrace { session: s.id.clone(), turn: t.id };
                        let timer = st.new_timer(deadline, purpose.clone());
                        tx.handoff(seq, OutputKind::SetTimer { timer, deadline, purpose });
                        Some(timer)
                    }
                    Abort::Shutdown => None,
                };
                t.phase = Phase::Aborting { cause, grace };
                return;
            }
        }
    }
    cleanup::end_turn(st, tx, s, TurnEnd::Aborted(cause));
}

/// The running calls of an aborted step: a droppable tool gets its `AbortTool` and is
/// `Dropped` (it will never report), and so does a call left to finish once started whose work
/// has not begun (its wait for a person's answer is withdrawn); a sub-agent is aborted with
/// its parent (SPEC 4.11, I4); a call left to finish is not told anything and keeps running.
fn abort_calls(st: &mut State, tx: &mut Tx, session: &SessionId, t: &mut Turn, cause: Abort) {
    let seq = t.owner.seq;
    // The bug `started_ignored`: an abort reads only the tool's policy, as if no call had ever
    // started, so a call left to finish once started is dropped after its work began too.
    let started_ignored = mutant!(st.config, StartedIgnored);
    let policy = |t: &Turn, c: &Call| match t.setup.abort_policy(&c.name) {
        OnAbort::FinishOnceStarted if started_ignored => OnAbort::Drop,
        _ => t.abort_policy(c),
    };
    // The bug `first_call_abort_policy`: every call gets the first call's policy.
    let first = t.calls.first().map(|c| policy(t, c));
    let first = first.filter(|_| mutant!(st.config, FirstCallAbortPolicy));
    for i in 0..t.calls.len() {
        let c = &t.calls[i];
        match &c.state {
            // The bug `cascade_misses_child`: the sub-agent is not aborted with its parent.
            CallState::Delegated { child } if !mutant!(st.config, CascadeMissesChild) => {
                st.crossings.push_back(Crossing::AbortChild { child: child.clone(), cause });
            }
            CallState::Running | CallState::Started => {
                if first.unwrap_or_else(|| policy(t, c)) == OnAbort::Finish {
                    // The bug `abort_stops_at_finishing_call`: the calls after it are left.
                    if mutant!(st.config, AbortStopsAtFinishingCall) {
                        break;
                    }
                    continue;
                }
                tx.abort(seq, OutputKind::AbortTool { call: t.call_io(session, &c.id) });
                // The bug `waits_for_dropped_tools`: the dropped call is still waited for, up to
                // the grace (the 5 s Escape of a host that drops its tools).
                if !mutant!(st.config, WaitsForDroppedTools) {
                    t.calls[i].state = CallState::Dropped;
                }
            }
            _ => {}
        }
    }
}
