//! Streaming into a step's assistant message, and the end of the stream (SPEC 4.4).
//!
//! While an attempt streams, its events update the message: reasoning start, delta and end
//! (with the provider's signature), text deltas (the leading-newline rule), unfinished tool
//! calls and complete ones. When the stream finishes, every complete call with valid arguments
//! to a known tool runs; an unfinished call is finished with `{}` and, like a call with invalid
//! arguments, gets the invalid-JSON result without running; a call to an unknown tool gets
//! "tool not found: `<name>`". Tools start only after the stream finished, so a retry never runs
//! a tool twice.

use crate::alphabet::mutants::mutant;
use crate::alphabet::{
    CallId, FinishReason, INVALID_JSON_RESULT, MessageFinish, OutputKind, SessionId, StepEvent,
    StepIo, StoreOp, Usage,
};
use crate::lifecycle::retry;
use crate::lifecycle::step;
use crate::lifecycle::subagent;
use crate::lifecycle::watchdog;
use crate::state::Tx;
use crate::state::{
    Call, CallState, Lane, MessageState, ParentLink, Phase, Reasoning, Session, Sessions, State,
    Turn,
};

/// The result of a call to a tool the turn does not have (SPEC 8).
#[must_use]
pub fn unknown_tool_result(name: &str) -> String {
    format!("tool not found: {name}")
}

/// Maps the host's finish reason to the message's finish (SPEC 4.4).
pub(crate) fn message_finish(reason: FinishReason) -> MessageFinish {
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
                && matches!(t.phase, Phase::Streaming { attempt, .. } if attempt == io.attempt) =>
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
    now: crate::alphabet::Millis,
    io: StepIo,
    event: StepEvent,
) {
    let calls_max = st.config.calls_per_step_max as usize;
    ss.with(&io.session.clone(), false, |s| {
        let session = s.id.clone();
        let Some(t) = streaming_turn(s, &io) else { return };
        debug_assert_eq!(t.message_state, MessageState::Open, "a streaming message has no finish");
        debug_assert!(
            t.calls
                .iter()
                .all(|c| !c.is_running() || matches!(c.state, CallState::Reported { .. }))
        );
        match event {
            StepEvent::Finished { reason, usage } => stream_end(st, tx, s, reason, usage),
            StepEvent::Failed { error } => retry::on_failed(st, tx, now, s, error),
            content => {
                if let Phase::Streaming { watchdog, .. } = &mut t.phase
                    && watchdog::is_content(&content)
                {
                    watchdog::saw_content(st, watchdog, now);
                }
                if let Some(op) = apply_content(t, calls_max, &session, content) {
                    tx.decided(io.seq, OutputKind::Store(op));
                    tx.seal_decided(io.seq);
                }
            }
        }
    });
}

/// Applies a content event to the streaming message and returns the write it needs, if any.
/// Reasoning events out of order (a second start, a delta without a start) are ignored: the
/// message keeps one well-formed reasoning section.
fn apply_content(
    t: &mut Turn,
    calls_max: usize,
    session: &SessionId,
    event: StepEvent,
) -> Option<StoreOp> {
    let (session, seq, id) = (session.clone(), t.owner.seq, t.message);
    match event {
        StepEvent::ReasoningStart if t.parts.reasoning == Reasoning::None => {
            t.parts = crate::state::Parts { any: true, reasoning: Reasoning::Open };
            Some(StoreOp::ReasoningStarted { session, seq, id })
        }
        StepEvent::ReasoningDelta { text } if t.parts.reasoning == Reasoning::Open => {
            Some(StoreOp::AppendReasoning { session, seq, id, text })
        }
        StepEvent::ReasoningEnd { signature } if t.parts.reasoning == Reasoning::Open => {
            t.parts.reasoning = Reasoning::Ended;
            Some(StoreOp::ReasoningEnded { session, seq, id, signature })
        }
        StepEvent::TextDelta { text } => {
            // One leading "\n" goes while the message has no content part (SPEC 4.4).
            let text = match text.strip_prefix('\n') {
                Some(rest) if !t.parts.any => rest.to_owned(),
                _ => text,
            };
            if text.is_empty() {
                return None;
            }
            t.parts.any = true;
            t.text.push_str(&text);
            Some(StoreOp::AppendText { session, seq, id, text })
        }
        StepEvent::ToolInputStart { id: call, name } => {
            if t.seen.contains(&call) || t.calls.len() >= calls_max {
                return None;
            }
            t.seen.insert(call.clone());
            t.parts.any = true;
            t.calls.push(Call {
                id: call.clone(),
                name: name.clone(),
                input: "{}".to_owned(),
                state: CallState::Unfinished,
            });
            Some(StoreOp::ToolInputStarted { session, seq, id, call, name })
        }
        StepEvent::ToolCall { id: call, name, input } => {
            let (call, name, input) = complete_call(t, calls_max, call, name, input)?;
            Some(StoreOp::ToolCall { session, seq, id, call, name, input })
        }
        _ => None,
    }
}

/// A complete call: replaces its unfinished self, or is new; a repeated complete id, or one
/// beyond the step's limit, is ignored. Returns the write's (call, name, input).
fn complete_call(
    t: &mut Turn,
    calls_max: usize,
    call: CallId,
    name: String,
    input: String,
) -> Option<(CallId, String, String)> {
    let valid = serde_json::from_str::<serde_json::Value>(&input).is_ok();
    let (state, input) =
        if valid { (CallState::Complete, input) } else { (CallState::Invalid, "{}".to_owned()) };
    let full = t.calls.len() >= calls_max;
    match t.calls.iter_mut().find(|c| c.id == call) {
        Some(c) if c.state == CallState::Unfinished => {
            *c = Call { id: call.clone(), name: name.clone(), input: input.clone(), state };
        }
        Some(_) => return None,
        None if t.seen.contains(&call) || full => return None,
        None => {
            t.seen.insert(call.clone());
            t.calls.push(Call {
                id: call.clone(),
                name: name.clone(),
                input: input.clone(),
                state,
            });
        }
    }
    t.parts.any = true;
    Some((call, name, input))
}

/// The stream ended: close what is open, finish the message, account the usage, answer the
/// calls that cannot run, start the others; with none running, judge the step.
fn stream_end(
    st: &mut State,
    tx: &mut Tx,
    s: &mut Session,
    reason: FinishReason,
    usage: Option<Usage>,
) {
    let Lane::Turn(t) = &mut s.lane else { return };
    let (seq, id, session) = (t.owner.seq, t.message, s.id.clone());
    if let Phase::Streaming { watchdog, .. } = &mut t.phase {
        watchdog::disarm(st, tx, seq, watchdog);
    }
    let write = |tx: &mut Tx, op| tx.decided(seq, OutputKind::Store(op));
    crate::lifecycle::cleanup::close_open_parts(tx, &session, t);
    let finish = message_finish(reason);
    write(tx, StoreOp::MessageFinished { session: session.clone(), seq, id, finish });
    t.message_state =
        if reason == FinishReason::ToolCalls { MessageState::ToolUse } else { MessageState::Final };
    if let Some(u) = usage {
        let ancestor = s.parent.as_ref().map(|l| l.call.session.clone());
        step::account_usage(&mut s.gauges, tx, &session, seq, &u, ancestor.as_ref());
        t.owner.usage.add(u.prompt_tokens(), u.output_tokens, u.billed_micros());
        if ancestor.is_some() && mutant!(st.config, ChildCostTwice) {
            // The bug: the sub-agent's usage, and so its parent's share, written twice.
            step::account_usage(&mut s.gauges, tx, &session, seq, &u, ancestor.as_ref());
        }
    }
    answer_calls(st, tx, &session, t);
    let running = t.calls.iter().any(|c| c.is_running());
    if running {
        // Tools run whatever the finish (SPEC 4.4), so the turn is not over: a cancel or a
        // failure before they report still gives the message its cancel or error finish (4.9).
        t.message_state = MessageState::ToolUse;
    }
    if running {
        tx.seal_decided(seq);
        t.phase = Phase::Tools { finish: reason };
    } else {
        step::after_step(st, tx, s, reason);
    }
}

/// At the stream's end: calls that cannot run get their refusal as a result at once; the others
/// start.
fn answer_calls(st: &mut State, tx: &mut Tx, session: &SessionId, t: &mut Turn) {
    let (seq, id, turn, step) = (t.owner.seq, t.message, t.id, t.step);
    for c in &mut t.calls {
        let agent = c.name == crate::alphabet::AGENT_TOOL;
        let prompt = if agent { subagent::agent_prompt(&c.input) } else { None };
        let refusal = match (&c.state, t.setup.tool(&c.name)) {
            (CallState::Invalid, _) => Some(INVALID_JSON_RESULT.to_owned()),
            (_, None) => Some(unknown_tool_result(&c.name)),
            _ if agent && prompt.is_none() => Some(crate::alphabet::PROMPT_REQUIRED.to_owned()),
            // `<message>$$<call>` must split into exactly two parts (SPEC 4.11).
            _ if agent && c.id.as_str().contains("$$") => Some(subagent::unusable_call_id(&c.id)),
            _ => None,
        };
        let call = crate::alphabet::CallIo {
            session: session.clone(),
            seq,
            turn,
            step,
            call: c.id.clone(),
        };
        match (refusal, prompt) {
            (Some(content), _) => {
                c.state = CallState::Reported { output: content.clone(), stop: None };
                let (call, is_error, synthetic) = (c.id.clone(), true, true);
                let op = StoreOp::ToolResult {
                    session: session.clone(),
                    seq,
                    id,
                    call,
                    content,
                    is_error,
                    synthetic,
                };
                tx.decided(seq, OutputKind::Store(op));
            }
            (None, Some(prompt)) => {
                let child = subagent::delegate(st, ParentLink { call }, id, prompt, &t.setup);
                c.state = CallState::Delegated { child };
            }
            (None, None) => {
                c.state = CallState::Running;
                tx.handoff(
                    seq,
                    OutputKind::RunTool { call, name: c.name.clone(), input: c.input.clone() },
                );
            }
        }
    }
}
