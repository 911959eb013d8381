//! Tool results and the ends of a turn (SPEC 4.4, 4.6).
//!
//! After each step, in SPEC 4.6's order of precedence: a stop-turn result ends the submission
//! `completed` (permission_denied, hook_halt); loop detection or the step limit end it `failed`;
//! a finish other than `tool_use` ends it `completed`; otherwise the next step starts.

use crate::admission;
use crate::cleanup::{self, TurnEnd};
use crate::ids::SessionId;
use crate::input::{CallIo, FinishReason, StopTurn, ToolOutput, Usage};
use crate::loops;
use crate::outcome::{ErrorInfo, ErrorKind, StopReason, Verdict};
use crate::output::{MessageFinish, OutputKind, StoreOp};
use crate::state::{CallState, Lane, MessageState, Phase, Session, Sessions, State};
use crate::transition::Tx;

/// The title of a `step_limit` failure.
pub const STEP_LIMIT_TITLE: &str = "Step Limit Reached";
/// The title of a `loop_detected` failure.
pub const LOOP_TITLE: &str = "Loop Detected";
/// The message of a `loop_detected` failure.
pub const LOOP_MESSAGE: &str =
    "The same tool interaction was repeated more than 5 times in the last 10 steps.";

/// Writes a step's usage as field-level updates (SPEC 4.4): gauges **set** when non-zero, cost
/// **added**; estimated usage costs nothing.
pub(crate) fn account_usage(
    _st: &mut State,
    tx: &mut Tx,
    session: &SessionId,
    seq: crate::ids::Seq,
    u: &Usage,
) {
    let prompt = u.prompt_tokens();
    let op = StoreOp::SessionUsage {
        session: session.clone(),
        seq,
        prompt_tokens: (prompt > 0).then_some(prompt),
        completion_tokens: (u.output_tokens > 0).then_some(u.output_tokens),
        cost_micros: if u.estimated { 0 } else { u.cost_micros },
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
    ss.with(&io.session.clone(), false, |s| {
        let Lane::Turn(t) = &mut s.lane else { return };
        if t.id != io.turn || t.owner.seq != io.seq || t.step != io.step {
            return;
        }
        let Some(c) = t.calls.iter_mut().find(|c| c.id == io.call && c.state == CallState::Running)
        else {
            return;
        };
        debug_assert!(matches!(t.phase, Phase::Tools { .. } | Phase::Aborting { .. }));
        debug_assert_eq!(t.message_state, MessageState::Finished, "tools run after the stream");
        c.state = CallState::Reported { output: result.content.clone(), stop: result.stop };
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
        if t.calls.iter().any(|c| c.state == CallState::Running) {
            tx.seal_decided(seq);
            return;
        }
        // Otherwise the result joins the transaction of what follows: the next step or the end.
        match t.phase {
            Phase::Tools { finish } => after_step(st, tx, s, finish),
            Phase::Aborting { cause, .. } => cleanup::end_turn(st, tx, s, TurnEnd::Aborted(cause)),
            _ => debug_assert!(false, "no tool runs outside the tools and aborting phases"),
        }
    });
}

/// After each step, in SPEC 4.6's order of precedence.
pub(crate) fn after_step(st: &mut State, tx: &mut Tx, s: &mut Session, reason: FinishReason) {
    let Lane::Turn(t) = &mut s.lane else { return };
    t.owner.steps += 1;
    let looped = loops::record(&mut t.window, loops::signature(&t.calls));
    let stop = t.calls.iter().find_map(|c| match c.state {
        CallState::Reported { stop, .. } => stop,
        _ => None,
    });
    let limit = st.config.step_limit;
    if stop.is_some() && reason == FinishReason::ToolCalls {
        // `tool_use` becomes `end_turn`: the model will not be called again (SPEC 4.4).
        let (seq, id) = (t.owner.seq, t.message);
        let op = StoreOp::MessageFinished {
            session: s.id.clone(),
            seq,
            id,
            finish: MessageFinish::EndTurn,
        };
        tx.decided(seq, OutputKind::Store(op));
    }
    let end = if let Some(stop) = stop {
        Some(TurnEnd::Done(Verdict::Completed(Some(match stop {
            StopTurn::PermissionDenied => StopReason::PermissionDenied,
            StopTurn::HookHalt => StopReason::HookHalt,
        }))))
    } else if looped {
        let e = ErrorInfo {
            kind: ErrorKind::LoopDetected,
            title: LOOP_TITLE.to_owned(),
            message: LOOP_MESSAGE.to_owned(),
        };
        Some(TurnEnd::Failed(e))
    } else if limit > 0 && t.owner.steps >= limit {
        Some(TurnEnd::Failed(ErrorInfo {
            kind: ErrorKind::StepLimit,
            title: STEP_LIMIT_TITLE.to_owned(),
            message: format!("The turn reached the limit of {limit} steps."),
        }))
    } else {
        let stop = match reason {
            FinishReason::ToolCalls => None,
            FinishReason::Stop => Some(Some(StopReason::EndTurn)),
            FinishReason::Length => Some(Some(StopReason::MaxTokens)),
            FinishReason::ContentFilter => Some(Some(StopReason::ContentFilter)),
            FinishReason::Other => Some(None),
        };
        stop.map(|s| TurnEnd::Done(Verdict::Completed(s)))
    };
    match end {
        Some(end) => cleanup::end_turn(st, tx, s, end),
        None => {
            t.step += 1;
            admission::start_step(st, tx, s);
        }
    }
}
