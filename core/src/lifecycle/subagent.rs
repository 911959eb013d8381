//! Sub-agents (SPEC 4.11).
//!
//! A complete call to the `agent` tool starts a turn in a child session named
//! `<assistant message id>$$<tool call id>`, titled "New Agent Session", whose parent is the
//! calling session. The child submission gets a sequence but no RunId, no preparation, and is
//! never queued. Sub-agents do not get the `agent` tool (depth 1) nor interactive tools. The
//! child's end becomes the parent's tool result. `cancel(child)` cancels only the child; a
//! cancel of the parent's turn cascades to its children. Every cost increment of a child is
//! added, in the same write, to its parent.
//!
//! A handler holds one session at a time, so what crosses sessions is queued as a
//! [`Crossing`] and carried out by [`cross`] before the transition ends.

use crate::alphabet::{
    AGENT_TOOL, CallId, MessageId, Millis, Mode, NEW_AGENT_TITLE, OutputKind, RunUsage, SessionId,
    Setup, StoreOp, ToolSpec,
};
use crate::lifecycle::admission;
use crate::lifecycle::cancel;
use crate::lifecycle::step;
use crate::state::Tx;
use crate::state::{Crossing, ParentLink, Sessions, State, Submission};

/// The result of an `agent` call whose id contains `$$`: its child session id would not split
/// into exactly two parts (SPEC 4.11), so no child starts.
#[must_use]
pub fn unusable_call_id(call: &CallId) -> String {
    format!("Tool call failed: the call id {call} contains $$ and cannot name a sub-agent session.")
}

/// The child session of an `agent` call: `<assistant message id>$$<tool call id>`.
#[must_use]
pub fn child_session_id(message: MessageId, call: &CallId) -> SessionId {
    SessionId::new(format!("{message}$${call}"))
}

/// The assistant message a sub-agent session was started from: the inverse of
/// [`child_session_id`] (`m<id>$$<call>`, split on `$$` into exactly two parts). `None` for a
/// session id that is not a child's.
#[must_use]
pub fn parent_message(session: &SessionId) -> Option<MessageId> {
    let mut parts = session.as_str().split("$$");
    let (message, _call, rest) = (parts.next()?, parts.next()?, parts.next());
    if rest.is_some() {
        return None;
    }
    message.strip_prefix('m')?.parse().ok().map(MessageId)
}

/// The `prompt` of an `agent` call's arguments, when it has a non-empty one.
pub(crate) fn agent_prompt(input: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(input).ok()?;
    v.get("prompt").and_then(|p| p.as_str()).filter(|p| !p.trim().is_empty()).map(str::to_owned)
}

/// Whether a sub-agent is offered `tool`: not the `agent` tool (depth 1) and nothing
/// interactive (SPEC 4.11). A host lists a child's tools in its model requests by this rule.
#[must_use]
pub fn offered_to_sub_agent(tool: &ToolSpec) -> bool {
    tool.name != AGENT_TOOL && !tool.interactive
}

/// What a sub-agent may use: the parent's setup with the tools [`offered_to_sub_agent`].
pub(crate) fn child_setup(parent: &Setup) -> Setup {
    let tools = parent.tools.iter().filter(|t| offered_to_sub_agent(t)).cloned().collect();
    Setup {
        tools,
        context_window: parent.context_window,
        prompt_tokens: 0,
        completion_tokens: 0,
        titled: true,
    }
}

/// Delegates an `agent` call: assigns the child's sequence now and queues its start.
pub(crate) fn delegate(
    st: &mut State,
    link: ParentLink,
    message: MessageId,
    prompt: String,
    setup: &Setup,
) -> SessionId {
    let child = child_session_id(message, &link.call.call);
    let seq = st.new_seq(None);
    let setup = Box::new(child_setup(setup));
    st.crossings.push_back(Crossing::StartChild { link, child: child.clone(), seq, prompt, setup });
    child
}

/// Carries out one crossing.
pub(crate) fn cross(st: &mut State, ss: &mut Sessions, tx: &mut Tx, now: Millis, c: Crossing) {
    match c {
        Crossing::StartChild { link, child, seq, prompt, setup } => {
            ss.with(&child.clone(), true, |s| {
                debug_assert!(s.is_idle(), "a child session is new");
                let (parent, parent_seq) = (link.call.session.clone(), link.call.seq);
                let title = NEW_AGENT_TITLE;
                let op = StoreOp::ChildAccepted {
                    session: child.clone(),
                    seq,
                    parent,
                    parent_seq,
                    prompt: prompt.clone(),
                    title,
                };
                tx.handoff(seq, OutputKind::Store(op));
                s.parent = Some(link);
                let attachments = Vec::new();
                let sub = Submission {
                    seq,
                    session: child,
                    run_id: None,
                    mode: Mode::OwnTurn,
                    prompt,
                    attachments,
                    steps: 0,
                    summaries: 0,
                    usage: RunUsage::default(),
                };
                admission::start_child(st, tx, s, sub, *setup);
            });
        }
        Crossing::ChildEnded { link, result } => {
            ss.with(&link.call.session.clone(), false, |s| {
                step::report(st, tx, s, link.call, result, true)
            });
        }
        Crossing::AbortChild { child, cause } => {
            ss.with(&child, false, |s| cancel::abort_turn(st, tx, now, s, cause));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_session_names_its_parent_message() {
        let child = child_session_id(MessageId(42), &CallId::new("call-1"));
        assert_eq!(child.as_str(), "m42$$call-1");
        assert_eq!(parent_message(&child), Some(MessageId(42)));
        for not_a_child in ["s", "m42", "42$$c", "mx$$c", "m1$$c$$d", "$$c"] {
            assert_eq!(parent_message(&SessionId::new(not_a_child)), None, "{not_a_child}");
        }
    }
}
