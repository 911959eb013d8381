//! The step skeleton: streaming events, tool execution, and the ends of a turn (SPEC 4.4, 4.6).

use crate::admission;
use crate::cleanup::{self, TurnEnd};
use crate::input::{CallIo, FinishReason, StepEvent, StepIo, ToolOutput};
use crate::outcome::{ErrorInfo, ErrorKind, StopReason, Verdict};
use crate::output::{MessageFinish, OutputKind, StoreOp};
use crate::state::{Call, CallResult, Lane, MessageState, Phase, Session, Sessions, State, Turn};
use crate::transition::Tx;

/// The title of a `step_limit` failure.
pub const STEP_LIMIT_TITLE: &str = "Step Limit Reached";

/// Maps the host's finish reason to the message's finish (SPEC 4.4).
fn message_finish(reason: FinishReason) -> MessageFinish {
    match reason {
        FinishReason::Stop => MessageFinish::EndTurn,
        FinishReason::Length => MessageFinish::MaxTokens,
        FinishReason::ToolCalls => MessageFinish::ToolUse,
        FinishReason::ContentFilter => MessageFinish::ContentFilter,
        FinishReason::Other => MessageFinish::Unknown,
    }
}

/// The turn in the lane if `io` names its current attempt exactly (I13).
fn streaming_turn<'a>(s: &'a mut Session, io: &StepIo) -> Option<&'a mut Turn> {
    match &mut s.lane {
        Lane::Turn(t)
            if t.id == io.turn
                && t.owner.seq == io.seq
                && t.step == io.step
                && t.phase == Phase::Streaming { attempt: io.attempt } =>
        {
            Some(t)
        }
        _ => None,
    }
}

/// `Step`: one streaming event of the current attempt.
pub(crate) fn on_step(
    st: &mut State,
    ss: &mut Sessions,
    tx: &mut Tx,
    io: StepIo,
    event: StepEvent,
) {
    let calls_max = st.config.calls_per_step_max as usize;
    ss.with(&io.session.clone(), false, |s| {
        let session = s.id.clone();
        let Some(t) = streaming_turn(s, &io) else {
            return;
        };
        debug_assert_eq!(t.message_state, MessageState::Open, "a streaming message has no finish");
        debug_assert!(t.calls.iter().all(|c| c.result == CallResult::Pending));
        let (seq, id) = (io.seq, t.message);
        match event {
            StepEvent::TextDelta { text } => {
                t.text.push_str(&text);
                tx.decided(seq, OutputKind::Store(StoreOp::AppendText { session, seq, id, text }));
                tx.seal_decided(seq);
            }
            StepEvent::ToolCall { id: call, name, input } => {
                if t.seen.contains(&call) || t.calls.len() >= calls_max {
                    return; // a repeated id runs once and has one result (SPEC 4.4)
                }
                t.seen.insert(call.clone());
                let (name2, input2) = (name.clone(), input.clone());
                t.calls.push(Call { id: call.clone(), name, input, result: CallResult::Pending });
                let op = StoreOp::ToolCall { session, seq, id, call, name: name2, input: input2 };
                tx.decided(seq, OutputKind::Store(op));
                tx.seal_decided(seq);
            }
            StepEvent::Finished { reason } => on_stream_finished(st, tx, s, reason),
            StepEvent::Failed { error } => {
                cleanup::end_turn(st, tx, s, TurnEnd::Failed(cleanup::provider_error(error)));
            }
        }
    });
}

/// The stream ended: finish the message, then run every complete call (whatever the finish
/// reason) or, with none, judge the step.
fn on_stream_finished(st: &mut State, tx: &mut Tx, s: &mut Session, reason: FinishReason) {
    let Lane::Turn(t) = &mut s.lane else { return };
    let seq = t.owner.seq;
    let finish = message_finish(reason);
    let op = StoreOp::MessageFinished { session: s.id.clone(), seq, id: t.message, finish };
    tx.decided(seq, OutputKind::Store(op));
    tx.seal_decided(seq);
    t.message_state = MessageState::Finished;
    if t.calls.is_empty() {
        return after_step(st, tx, s, reason);
    }
    for c in &mut t.calls {
        c.result = CallResult::Running;
        let call =
            CallIo { session: s.id.clone(), seq, turn: t.id, step: t.step, call: c.id.clone() };
        tx.handoff(seq, OutputKind::RunTool { call, name: c.name.clone(), input: c.input.clone() });
    }
    t.phase = Phase::Tools { finish: reason };
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
    ss.with(&io.session.clone(), false, |s| {
        let Lane::Turn(t) = &mut s.lane else { return };
        if t.id != io.turn || t.owner.seq != io.seq || t.step != io.step {
            return;
        }
        let Some(c) =
            t.calls.iter_mut().find(|c| c.id == io.call && c.result == CallResult::Running)
        else {
            return;
        };
        debug_assert!(matches!(t.phase, Phase::Tools { .. } | Phase::Aborting { .. }));
        debug_assert_eq!(t.message_state, MessageState::Finished, "tools run after the stream");
        c.result = CallResult::Reported { stop: result.stop };
        let seq = t.owner.seq;
        let op = StoreOp::ToolResult {
            session: s.id.clone(),
            seq,
            id: t.message,
            call: io.call,
            content: result.content,
            is_error: result.is_error,
            synthetic: false,
        };
        tx.decided(seq, OutputKind::Store(op));
        if t.calls.iter().any(|c| c.result == CallResult::Running) {
            tx.seal_decided(seq);
            return;
        }
        // Otherwise the result joins the transaction of what follows: the next step or the end.
        match t.phase {
            Phase::Tools { finish } => after_step(st, tx, s, finish),
            Phase::Aborting { cause, .. } => cleanup::end_turn(st, tx, s, TurnEnd::Aborted(cause)),
            Phase::Streaming { .. } => debug_assert!(false, "no tool runs while streaming"),
        }
    });
}

/// After each step, in SPEC 4.6's order of precedence: a stop-turn result, the step limit, the
/// finish; otherwise the next step.
fn after_step(st: &mut State, tx: &mut Tx, s: &mut Session, reason: FinishReason) {
    let Lane::Turn(t) = &mut s.lane else { return };
    let stop = t.calls.iter().find_map(|c| match c.result {
        CallResult::Reported { stop } => stop,
        _ => None,
    });
    let steps_done = t.step + 1;
    let limit = st.config.step_limit;
    let end = if let Some(stop) = stop {
        Some(TurnEnd::Done(Verdict::Completed(Some(match stop {
            crate::input::StopTurn::PermissionDenied => StopReason::PermissionDenied,
            crate::input::StopTurn::HookHalt => StopReason::HookHalt,
        }))))
    } else if limit > 0 && steps_done >= limit {
        Some(TurnEnd::Failed(ErrorInfo {
            kind: ErrorKind::StepLimit,
            title: STEP_LIMIT_TITLE.to_owned(),
            message: format!("The turn reached the limit of {limit} steps."),
        }))
    } else {
        match reason {
            FinishReason::ToolCalls => None,
            FinishReason::Stop => {
                Some(TurnEnd::Done(Verdict::Completed(Some(StopReason::EndTurn))))
            }
            FinishReason::Length => {
                Some(TurnEnd::Done(Verdict::Completed(Some(StopReason::MaxTokens))))
            }
            FinishReason::ContentFilter => {
                Some(TurnEnd::Done(Verdict::Completed(Some(StopReason::ContentFilter))))
            }
            FinishReason::Other => Some(TurnEnd::Done(Verdict::Completed(None))),
        }
    };
    match end {
        Some(end) => cleanup::end_turn(st, tx, s, end),
        None => {
            t.step += 1;
            admission::start_step(st, tx, s);
        }
    }
}
