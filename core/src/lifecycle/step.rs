//! Tool results and the ends of a turn (SPEC 4.4, 4.6).
//!
//! After each step, in SPEC 4.6's order of precedence: a stop-turn result ends the submission
//! `completed` (permission_denied, hook_halt); loop detection or the step limit end it `failed`;
//! a finish other than `tool_use` ends it `completed`; otherwise the next step starts.

use crate::alphabet::mutants::mutant;
use crate::alphabet::{
    CallIo, ErrorInfo, ErrorKind, FinishReason, LOOP_MESSAGE, LOOP_TITLE, MessageFinish, MessageId,
    OnAbort, OutputKind, STEP_LIMIT_TITLE, SessionId, StopReason, StopTurn, StoreOp, ToolOutput,
    Usage,
};
use crate::lifecycle::admission;
use crate::lifecycle::cleanup::{self, After, TurnEnd};
use crate::lifecycle::loops;
use crate::lifecycle::outcome::Verdict;
use crate::lifecycle::summary;
use crate::state::Tx;
use crate::state::{
    Call, CallState, Gauges, Lane, MessageState, Phase, SUMMARIES_WITHOUT_PROGRESS_MAX, Session,
    Sessions, State, Turn,
};

/// Writes a step's usage as field-level updates (SPEC 4.4): gauges **set** when non-zero, cost
/// **added**; estimated usage costs nothing. The session's gauges in memory follow.
pub(crate) fn account_usage(
    gauges: &mut Option<Gauges>,
    tx: &mut Tx,
    session: &SessionId,
    seq: crate::alphabet::Seq,
    u: &Usage,
    ancestor: Option<&SessionId>,
) {
    let prompt = u.prompt_tokens();
    let g = gauges.get_or_insert_with(Gauges::default);
    if prompt > 0 {
        g.prompt_tokens = prompt;
    }
    if u.output_tokens > 0 {
        g.completion_tokens = u.output_tokens;
    }
    let op = StoreOp::SessionUsage {
        session: session.clone(),
        seq: Some(seq),
        prompt_tokens: (prompt > 0).then_some(prompt),
        completion_tokens: (u.output_tokens > 0).then_some(u.output_tokens),
        cost_micros: u.billed_micros(),
        ancestor: ancestor.cloned(),
    };
    tx.decided(seq, OutputKind::Store(op));
}

/// `ToolResult`: written as reported while the turn is running or aborting (a tool that really
/// ran is never recorded as cancelled, SPEC 4.9); when it was the last running call, the step
/// is judged, or the aborted turn is cleaned up.
pub(crate) fn on_tool_result(
    st: &mut State,
    ss: &mut Sessions,
    tx: &mut Tx,
    io: CallIo,
    result: ToolOutput,
) {
    debug_assert!(st.crossings.is_empty(), "crossings are carried out within their transition");
    debug_assert!(st.outcomes_decided <= st.accepted, "I1 bookkeeping");
    if mutant!(st.config, LateToolResultWritten) && !turn_lives(ss, &io) {
        return late_write(tx, io, result);
    }
    ss.with(&io.session.clone(), false, |s| report(st, tx, s, io, result, false));
}

/// `ToolStarted`: the work of a running call of a tool left to finish once started begins, so
/// from now on an abort leaves it to finish (SPEC 4.9). Stale, and ignored (I13), unless the
/// named turn is in its tools phase and the named call still runs without having started:
/// an abort that came first dropped the call, and its work must never begin. No output.
pub(crate) fn on_tool_started(ss: &mut Sessions, io: &CallIo) {
    ss.with(&io.session.clone(), false, |s| {
        let Lane::Turn(t) = &mut s.lane else { return };
        if t.id != io.turn || t.owner.seq != io.seq || t.step != io.step {
            return;
        }
        if !matches!(t.phase, Phase::Tools { .. }) {
            return;
        }
        let policy = |name: &str| t.setup.abort_policy(name);
        let Some(i) = t.calls.iter().position(|c| {
            c.id == io.call
                && c.state == CallState::Running
                && policy(&c.name) == OnAbort::FinishOnceStarted
        }) else {
            return;
        };
        debug_assert!(t.message_state != MessageState::Open, "tools run after the stream");
        debug_assert!(t.calls[i].is_running(), "only a running call begins its work");
        t.calls[i].state = CallState::Started;
    });
}

/// True when the call `io` names runs and its work began ([`on_tool_started`]): an abort
/// leaves it to finish.
pub(crate) fn tool_started(ss: &Sessions, io: &CallIo) -> bool {
    ss.get(&io.session).is_some_and(|s| {
        matches!(&s.lane, Lane::Turn(t)
            if t.id == io.turn && t.owner.seq == io.seq && t.step == io.step
                && t.calls.iter().any(|c| c.id == io.call && c.state == CallState::Started))
    })
}

/// True while the turn that `io` names runs (for the mutant `late_tool_result_written`).
fn turn_lives(ss: &Sessions, io: &CallIo) -> bool {
    ss.get(&io.session).is_some_and(|s| matches!(&s.lane, Lane::Turn(t) if t.id == io.turn))
}

/// The mutant `late_tool_result_written` (I13): the result of a turn that was already cleaned
/// up is written anyway. The turn and its message are forgotten, so the write names message 0.
fn late_write(tx: &mut Tx, io: CallIo, result: ToolOutput) {
    let CallIo { session, seq, call, .. } = io;
    let (content, is_error) = (result.content, result.is_error);
    let id = MessageId(0);
    let op = StoreOp::ToolResult { session, seq, id, call, content, is_error, synthetic: false };
    tx.decided(seq, OutputKind::Store(op));
    tx.seal_decided(seq);
}

/// A call's result, from the host's tool or (`from_child`) from a sub-agent that ended. Stale
/// when the turn or the call is not the one named, or the call does not wait for this source.
pub(crate) fn report(
    st: &mut State,
    tx: &mut Tx,
    s: &mut Session,
    io: CallIo,
    result: ToolOutput,
    from_child: bool,
) {
    let Lane::Turn(t) = &mut s.lane else { return };
    if t.id != io.turn || t.owner.seq != io.seq || t.step != io.step {
        return;
    }
    let waits = |c: &Call| match c.state {
        CallState::Running | CallState::Started => !from_child,
        CallState::Delegated { .. } => from_child,
        _ => false,
    };
    let Some(c) = t.calls.iter_mut().find(|c| c.id == io.call && waits(c)) else { return };
    // The bug `child_result_lost_while_aborting`: an aborting parent ignores its child's end.
    if from_child
        && matches!(t.phase, Phase::Aborting { .. })
        && mutant!(st.config, ChildResultLostWhileAborting)
    {
        return;
    }
    debug_assert!(matches!(t.phase, Phase::Tools { .. } | Phase::Aborting { .. }));
    debug_assert!(t.message_state != MessageState::Open, "tools run after the stream");
    c.state = CallState::Reported { output: result.content.clone(), stop: result.stop };
    let seq = t.owner.seq;
    let (content, is_error) = (result.content, result.is_error);
    let op = StoreOp::ToolResult {
        session: s.id.clone(),
        seq,
        id: t.message,
        call: io.call,
        content,
        is_error,
        synthetic: false,
    };
    tx.decided(seq, OutputKind::Store(op));
    // The bug `step_ends_at_first_result`: a running step is judged at its first result.
    let early = mutant!(st.config, StepEndsAtFirstResult) && matches!(t.phase, Phase::Tools { .. });
    if t.calls.iter().any(|c| c.is_running()) && !early {
        tx.seal_decided(seq);
        return;
    }
    // Otherwise the result joins the transaction of what follows: the next step or the end.
    match t.phase {
        Phase::Tools { finish } => after_step(st, tx, s, finish),
        Phase::Aborting { cause, .. } => cleanup::end_turn(st, tx, s, TurnEnd::Aborted(cause)),
        _ => debug_assert!(false, "no tool runs outside the tools and aborting phases"),
    }
}

/// After each step, in SPEC 4.6's order of precedence, and the context check of SPEC 4.7: a
/// turn that ends at the threshold is followed by a housekeeping summary; one that would go on
/// pauses for a summary (or fails when summaries stopped helping).
pub(crate) fn after_step(st: &mut State, tx: &mut Tx, s: &mut Session, reason: FinishReason) {
    let used = s.gauges.unwrap_or_default().used();
    let Lane::Turn(t) = &mut s.lane else { return };
    t.owner.steps = st.bump(t.owner.steps, "steps");
    let looped = loops::record(&mut t.window, loops::signature(&t.calls));
    let full = st.config.auto_summarize
        && s.parent.is_none() // sub-agents do not summarize (docs/lifecycle-rules.md)
        && crate::lifecycle::rules::at_threshold(t.setup.context_window, used, st.config.summarize_buffer_tokens);
    let stop = t.calls.iter().find_map(|c| match c.state {
        CallState::Reported { stop, .. } => stop,
        _ => None,
    });
    if stop.is_some() && reason == FinishReason::ToolCalls {
        // `tool_use` becomes `end_turn`: the model will not be called again (SPEC 4.4).
        t.message_state = MessageState::Final;
        let (seq, id, finish) = (t.owner.seq, t.message, MessageFinish::EndTurn);
        tx.decided(
            seq,
            OutputKind::Store(StoreOp::MessageFinished { session: s.id.clone(), seq, id, finish }),
        );
    }
    let after = if full { After::Summarize } else { After::HandOff };
    let limit_last = mutant!(st.config, StepLimitAfterEnd);
    match judge(st.config.step_limit, t, stop, looped, reason, limit_last) {
        Some(end) => cleanup::end_turn_then(st, tx, s, end, after),
        None if !full => {
            t.owner.summaries = 0; // a step below the threshold: progress
            t.step = st.bump(t.step, "step");
            admission::start_step(st, tx, s);
        }
        None if t.owner.summaries >= SUMMARIES_WITHOUT_PROGRESS_MAX => {
            cleanup::end_turn(st, tx, s, TurnEnd::Failed(crate::lifecycle::rules::no_progress()));
        }
        None => summary::pause(st, tx, s),
    }
}

/// SPEC 4.6's ends of a turn, in order of precedence; `None` when the turn goes on.
fn judge(
    limit: u32,
    t: &Turn,
    stop: Option<StopTurn>,
    looped: bool,
    reason: FinishReason,
    limit_last: bool,
) -> Option<TurnEnd> {
    if let Some(stop) = stop {
        let reason = match stop {
            StopTurn::PermissionDenied => StopReason::PermissionDenied,
            StopTurn::HookHalt => StopReason::HookHalt,
        };
        return Some(TurnEnd::Done(Verdict::Completed(Some(reason))));
    }
    if looped {
        let (title, message) = (LOOP_TITLE.to_owned(), LOOP_MESSAGE.to_owned());
        return Some(TurnEnd::Failed(ErrorInfo { kind: ErrorKind::LoopDetected, title, message }));
    }
    // The bug `step_limit_after_end`: the limit only stops a turn that would continue.
    let would_end = limit_last && reason != FinishReason::ToolCalls;
    if limit > 0 && t.owner.steps >= limit && !would_end {
        let message = format!("The turn reached the limit of {limit} steps.");
        let title = STEP_LIMIT_TITLE.to_owned();
        return Some(TurnEnd::Failed(ErrorInfo { kind: ErrorKind::StepLimit, title, message }));
    }
    let stop = match reason {
        FinishReason::ToolCalls => return None,
        FinishReason::Stop => Some(StopReason::EndTurn),
        FinishReason::Length => Some(StopReason::MaxTokens),
        FinishReason::ContentFilter => Some(StopReason::ContentFilter),
        FinishReason::Other => None,
    };
    Some(TurnEnd::Done(Verdict::Completed(stop)))
}
