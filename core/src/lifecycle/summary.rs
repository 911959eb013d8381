//! Summarization when the context is nearly full (SPEC 4.7).
//!
//! After every step the core compares the session's context (`prompt_tokens +
//! completion_tokens`) with the model's window. If the submission just ended, its RunComplete
//! goes first and the session then summarizes as **housekeeping** (busy, cancellable; a failure
//! marks only the summary message). If the turn would continue, the submission **pauses**: the
//! session summarizes and, on success, the same submission resumes before anything queued
//! (G-25) with the continuation prompt; on failure it ends `failed` (summarization); on cancel
//! it ends `cancelled` and the partial summary is deleted (G-03). A no-progress guard stops a
//! submission whose summaries do not free enough context. A manual `summarize` is rejected
//! while the session is busy (G-04, G-05).

use crate::alphabet::mutants::mutant;
use crate::alphabet::{
    AttemptIo, CANCELED_FINISH, ErrorInfo, ErrorKind, MessageFinish, Millis, Mode, OutputKind,
    Rejection, Reply, SHUTDOWN_FINISH, SUMMARIZATION_TITLE, Seq, SessionId, StepEvent, StoreOp,
    SummaryIo, TimerId, TimerPurpose, Usage,
};
use crate::lifecycle::admission;
use crate::lifecycle::outcome::{self, Verdict};
use crate::lifecycle::rules::{self, OnFailure};
use crate::lifecycle::watchdog;
use crate::state::LastMessage;
use crate::state::Tx;
use crate::state::{
    Abort, Attempting, Budget, Closing, Gauges, Lane, Paused, Prep, Purpose, Session, Sessions,
    State, Summary, Turn, Waiting,
};

/// Starts a summarization in the session's free lane. `key` orders its outputs (the ended or
/// paused submission's sequence; 0 for a manual request).
pub(crate) fn start(st: &mut State, tx: &mut Tx, s: &mut Session, purpose: Purpose, key: Seq) {
    debug_assert!(matches!(s.lane, Lane::Idle), "one turn or summary per session (I3)");
    let (id, message) = (st.new_turn(), st.new_message());
    tx.handoff(
        key,
        OutputKind::Store(StoreOp::SummaryMessage { session: s.id.clone(), id: message }),
    );
    tx.seal_handoff(key);
    let io = SummaryIo { session: s.id.clone(), summary: id, attempt: 0 };
    tx.handoff(key, OutputKind::StartSummary { io });
    let watchdog = watchdog::arm(st, tx, key, &s.id, id);
    let budget = Budget::first();
    s.lane = Lane::Summary(Box::new(Summary {
        id,
        purpose,
        message,
        phase: Attempting::Streaming { attempt: 0, watchdog },
        budget,
    }));
}

/// Pauses the lane's turn and summarizes for it; fails it instead when two summaries in a row
/// freed nothing (the no-progress guard).
pub(crate) fn pause(st: &mut State, tx: &mut Tx, s: &mut Session) {
    let Lane::Turn(t) = std::mem::take(&mut s.lane) else { return };
    let Turn { mut owner, setup, message, text, .. } = *t;
    let seq = owner.seq;
    owner.summaries = st.bump(owner.summaries, "summaries");
    tx.decided(seq, OutputKind::Store(StoreOp::LedgerPaused { session: s.id.clone(), seq }));
    tx.seal_decided(seq);
    let last = LastMessage { id: message, text };
    if mutant!(st.config, CompleteOnPause) {
        // The bug: the pausing submission is reported complete (its RunComplete) already.
        tx.decided(seq, OutputKind::Finished(outcome::premature(&owner, &last)));
    }
    start(st, tx, s, Purpose::Resume(Box::new(Paused { sub: owner, setup, last })), seq);
}

/// The summary in the lane if `io` names its current attempt exactly (I13).
fn streaming(s: &mut Session, io: &SummaryIo) -> Option<Seq> {
    match &s.lane {
        Lane::Summary(sm)
            if sm.id == io.summary
                && matches!(sm.phase, Attempting::Streaming { attempt, .. } if attempt == io.attempt) =>
        {
            Some(key(sm))
        }
        _ => None,
    }
}

/// The sequence that orders a summary's outputs.
pub(crate) fn key(sm: &Summary) -> Seq {
    match &sm.purpose {
        Purpose::Resume(p) => p.sub.seq,
        Purpose::Housekeeping => Seq(0),
    }
}

/// `Summary`: an event of the current summary attempt.
pub(crate) fn on_summary(
    st: &mut State,
    ss: &mut Sessions,
    tx: &mut Tx,
    now: Millis,
    io: SummaryIo,
    event: StepEvent,
) {
    ss.with(&io.session.clone(), false, |s| {
        let Some(k) = streaming(s, &io) else { return };
        debug_assert!(
            s.queue.iter().all(|w| w.sub.seq > k)
                || mutant!(
                    st.config,
                    QueueBeforeResume | RequeueHeadAtBack | AdmitInPreparationOrder
                ),
            "a paused submission is older than the queue"
        );
        let Lane::Summary(sm) = &mut s.lane else { return };
        debug_assert!(sm.budget.attempts >= 1, "an attempt is running");
        if let Attempting::Streaming { watchdog, .. } = &mut sm.phase
            && watchdog::is_content(&event)
        {
            watchdog::saw_content(st, watchdog, now);
        }
        match event {
            StepEvent::TextDelta { text } if !text.is_empty() => {
                tx.decided(
                    k,
                    OutputKind::Store(StoreOp::SummaryText {
                        session: s.id.clone(),
                        id: sm.message,
                        text,
                    }),
                );
                tx.seal_decided(k);
            }
            StepEvent::Finished { usage, .. } => {
                if let Attempting::Streaming { watchdog, .. } = &mut sm.phase {
                    watchdog::disarm(st, tx, k, watchdog);
                }
                done(st, tx, s, usage.unwrap_or_default());
            }
            StepEvent::Failed { error } => attempt_failed(st, tx, now, s, io.attempt, error),
            _ => {} // reasoning and tool events have no place in a summary
        }
    });
}

/// Attempt `attempt` of the lane's summary failed (a provider error, or the stream watchdog):
/// its watchdog is disarmed, then SPEC 4.5 decides: refresh, back off, or fail the summary.
pub(crate) fn attempt_failed(
    st: &mut State,
    tx: &mut Tx,
    now: Millis,
    s: &mut Session,
    attempt: u32,
    error: crate::alphabet::ProviderError,
) {
    let Lane::Summary(sm) = &mut s.lane else { return };
    let k = key(sm);
    if let Attempting::Streaming { watchdog, .. } = &mut sm.phase {
        watchdog::disarm(st, tx, k, watchdog);
    }
    let io = SummaryIo { session: s.id.clone(), summary: sm.id, attempt };
    match rules::on_failure(&st.config, &sm.budget, error) {
        OnFailure::Refresh { refused } => {
            sm.budget.refused = Some(refused);
            sm.phase = Attempting::Refreshing { attempt };
            tx.handoff(k, OutputKind::RefreshCredentials { attempt: AttemptIo::Summary(io) });
        }
        OnFailure::Retry { delay_ms } => {
            let deadline = now.plus_ms(delay_ms);
            let purpose = TimerPurpose::Retry { session: s.id.clone(), turn: sm.id };
            let timer = st.new_timer(deadline, purpose.clone());
            sm.phase = Attempting::Backoff { next: st.bump(attempt, "attempt"), timer };
            tx.handoff(k, OutputKind::SetTimer { timer, deadline, purpose });
        }
        OnFailure::Fail(e) => failed(st, tx, s, e),
    }
}

/// The summary succeeded: pointer and gauges, then the paused submission resumes or the queue
/// moves on.
fn done(st: &mut State, tx: &mut Tx, s: &mut Session, usage: Usage) {
    let Lane::Summary(mut sm) = std::mem::take(&mut s.lane) else { return };
    let (k, session) = (key(&sm), s.id.clone());
    let completion_tokens = usage.output_tokens;
    tx.decided(
        k,
        OutputKind::Store(StoreOp::SummaryDone {
            session: session.clone(),
            id: sm.message,
            completion_tokens,
        }),
    );
    let cost_micros = usage.billed_micros();
    let seq = match &mut sm.purpose {
        Purpose::Resume(p) => {
            // The summary ran for this submission: its usage is part of the run's.
            p.sub.usage.add(usage.prompt_tokens(), usage.output_tokens, cost_micros);
            Some(p.sub.seq)
        }
        Purpose::Housekeeping => None,
    };
    let op = StoreOp::SessionUsage {
        session,
        seq,
        prompt_tokens: None,
        completion_tokens: None,
        cost_micros,
        ancestor: None, // sub-agents do not summarize (docs/lifecycle-rules.md)
    };
    tx.decided(k, OutputKind::Store(op));
    tx.seal_decided(k);
    s.gauges = Some(Gauges { prompt_tokens: 0, completion_tokens });
    match sm.purpose {
        Purpose::Housekeeping => admission::hand_off(st, tx, s),
        Purpose::Resume(p) if mutant!(st.config, QueueBeforeResume) => queue_first(st, tx, s, *p),
        Purpose::Resume(p) => admission::resume(st, tx, s, *p),
    }
}

/// The mutant `queue_before_resume` (G-25): a prepared queue head is activated first; the
/// paused submission waits behind it at the queue's front and later starts again.
fn queue_first(st: &mut State, tx: &mut Tx, s: &mut Session, p: Paused) {
    admission::hand_off(st, tx, s);
    if matches!(s.lane, Lane::Idle) {
        return admission::resume(st, tx, s, p);
    }
    let Paused { mut sub, setup, .. } = p;
    sub.mode = Mode::OwnTurn; // not folded into the turn that overtook it
    s.queue.push_front(Waiting { sub, prep: Prep::Prepared(setup) });
}

/// The summary failed for good: only its message is marked; a paused submission fails.
fn failed(st: &mut State, tx: &mut Tx, s: &mut Session, e: ErrorInfo) {
    let Lane::Summary(sm) = std::mem::take(&mut s.lane) else { return };
    let k = key(&sm);
    let (title, message) = (SUMMARIZATION_TITLE.to_owned(), e.message);
    let op = StoreOp::SummaryFailed {
        session: s.id.clone(),
        id: sm.message,
        title: title.clone(),
        message: message.clone(),
    };
    tx.decided(k, OutputKind::Store(op));
    if let Purpose::Resume(p) = sm.purpose {
        let e = ErrorInfo { kind: ErrorKind::Summarization, title, message };
        let finish = MessageFinish::Error { title: e.title.clone(), message: e.message.clone() };
        end_paused(st, tx, &s.id, *p, Verdict::Failed(e), finish);
    } else {
        tx.seal_decided(k);
    }
    admission::hand_off(st, tx, s);
}

/// Aborts the lane's summary at once (cancel or shutdown): the request, a refresh wait or a
/// backoff stop, the partial summary is deleted, and a paused submission ends `cancelled` or
/// `interrupted`.
pub(crate) fn abort(st: &mut State, tx: &mut Tx, s: &mut Session, cause: Abort) {
    let Lane::Summary(mut sm) = std::mem::take(&mut s.lane) else { return };
    let k = key(&sm);
    if let Attempting::Streaming { watchdog, .. } = &mut sm.phase {
        watchdog::disarm(st, tx, k, watchdog);
    }
    let io = |attempt| SummaryIo { session: s.id.clone(), summary: sm.id, attempt };
    match sm.phase {
        Attempting::Streaming { attempt, .. } => {
            tx.abort(k, OutputKind::AbortSummary { io: io(attempt) })
        }
        Attempting::Refreshing { attempt } => {
            tx.abort(k, OutputKind::AbortRefresh { attempt: AttemptIo::Summary(io(attempt)) });
        }
        Attempting::Backoff { timer, .. } => {
            if st.timers.remove(&timer).is_some() {
                tx.abort(k, OutputKind::CancelTimer { timer });
            }
        }
    }
    tx.decided(
        k,
        OutputKind::Store(StoreOp::SummaryDeleted { session: s.id.clone(), id: sm.message }),
    );
    if let Purpose::Resume(p) = sm.purpose {
        if cause == Abort::Cancel && mutant!(st.config, SummaryCancelContinues) {
            // The bug (G-03): the summary stops, but the continuation runs anyway.
            tx.seal_decided(k);
            admission::resume(st, tx, s, *p);
            return;
        }
        let (verdict, text) = match cause {
            Abort::Cancel => (Verdict::Cancelled, CANCELED_FINISH),
            Abort::Shutdown => (Verdict::Interrupted(rules::shutdown_error()), SHUTDOWN_FINISH),
        };
        end_paused(
            st,
            tx,
            &s.id,
            *p,
            verdict,
            MessageFinish::Canceled { message: text.to_owned() },
        );
    } else {
        tx.seal_decided(k);
    }
    admission::hand_off(st, tx, s);
}

/// Ends a paused submission without resuming it: its last message (finished `tool_use` when it
/// paused) gets the cancel or error finish, since the model will not be called again (SPEC 4.9).
fn end_paused(
    st: &mut State,
    tx: &mut Tx,
    session: &SessionId,
    p: Paused,
    verdict: Verdict,
    finish: MessageFinish,
) {
    let Paused { sub, last, .. } = p;
    let (seq, id) = (sub.seq, last.id);
    tx.decided(
        seq,
        OutputKind::Store(StoreOp::MessageFinished { session: session.clone(), seq, id, finish }),
    );
    outcome::decide(st, tx, sub, verdict, Some(last));
}

/// The summary's backoff timer fired: reset its text and start the next attempt.
pub(crate) fn on_backoff_done(st: &mut State, tx: &mut Tx, s: &mut Session, timer: TimerId) {
    let Lane::Summary(sm) = &mut s.lane else { return };
    let Attempting::Backoff { next, timer: armed } = sm.phase else { return };
    debug_assert!(
        sm.budget.attempts < st.config.attempts_max,
        "a backoff only while the budget lasts"
    );
    debug_assert!(next >= 1, "a backoff precedes a later attempt");
    if armed == timer {
        restart(st, tx, &s.id.clone(), sm, next);
    }
}

/// `CredentialsRefreshed` for a summary: retry with a fresh budget, or fail it.
pub(crate) fn on_refreshed(
    st: &mut State,
    ss: &mut Sessions,
    tx: &mut Tx,
    io: SummaryIo,
    ok: bool,
) {
    ss.with(&io.session.clone(), false, |s| {
        let Lane::Summary(sm) = &mut s.lane else { return };
        if sm.id != io.summary || sm.phase != (Attempting::Refreshing { attempt: io.attempt }) {
            return; // stale (I13)
        }
        debug_assert!(!sm.budget.refreshed, "one refresh per summary");
        debug_assert!(
            s.queue.iter().all(|w| w.sub.session == s.id),
            "entries are filed under their session"
        );
        if !ok {
            let refused = sm.budget.refused.take();
            return failed(st, tx, s, rules::refresh_failed(refused));
        }
        sm.budget = Budget::refreshed();
        let next = st.bump(io.attempt, "attempt");
        restart(st, tx, &io.session, sm, next);
    });
}

fn restart(st: &mut State, tx: &mut Tx, session: &SessionId, sm: &mut Summary, attempt: u32) {
    let k = key(sm);
    tx.handoff(
        k,
        OutputKind::Store(StoreOp::SummaryReset { session: session.clone(), id: sm.message }),
    );
    tx.seal_handoff(k);
    sm.budget.attempts = st.bump(sm.budget.attempts, "attempts");
    tx.handoff(
        k,
        OutputKind::StartSummary {
            io: SummaryIo { session: session.clone(), summary: sm.id, attempt },
        },
    );
    let watchdog = watchdog::arm(st, tx, k, session, sm.id);
    sm.phase = Attempting::Streaming { attempt, watchdog };
}

/// `Summarize`: rejected while the session is busy or the workspace closes; otherwise the
/// session summarizes as housekeeping.
pub(crate) fn on_summarize(st: &mut State, ss: &mut Sessions, tx: &mut Tx, session: SessionId) {
    debug_assert!(st.closing != Closing::Closed || ss.is_empty(), "nothing runs after shutdown");
    debug_assert!(ss.get(&session).is_none_or(|s| !s.is_idle()), "idle sessions are forgotten");
    let error = if session.is_child() {
        // A sub-agent session is the parent's business, like a submission to it (SPEC 4.1).
        Some(Rejection::ChildSession(session.clone()))
    } else if st.closing != Closing::Open {
        Some(Rejection::WorkspaceClosing)
    } else if ss.get(&session).is_some()
        && !(mutant!(st.config, SummarizeWhileQueued)
            && ss.get(&session).is_some_and(|s| matches!(s.lane, Lane::Idle)))
    {
        Some(Rejection::Busy)
    } else {
        None
    };
    if let Some(error) = error {
        return tx.reply(OutputKind::Reply(Reply::Rejected { error }));
    }
    tx.reply(OutputKind::Reply(Reply::Summarizing { session: session.clone() }));
    ss.with(&session, true, |s| start(st, tx, s, Purpose::Housekeeping, Seq(0)));
}
