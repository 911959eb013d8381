//! Building a model request from the stored history (SPEC 4.9, last paragraph).
//!
//! Pure: stored messages in, request messages out. The repairs make any stored history
//! acceptable to a strict provider, whatever a crash or a bug left behind: history starts at
//! the session's summary (relabelled as a user message), an orphan call gets
//! [`turnstile_core::HISTORY_REPAIR_RESULT`], an orphan result is dropped, and an assistant
//! message with no text, reasoning or tool calls is skipped.

use turnstile_core::{MessageId, SUMMARY_REQUEST};

use crate::provider::{RequestCall, RequestKind, RequestMessage, RequestResult};
use crate::store::{StoredMessage, StoredRole};
use turnstile_core::HISTORY_REPAIR_RESULT;

/// The request messages for `kind` from a session's stored messages (in write order) and its
/// summary pointer.
#[must_use]
pub fn build(
    stored: &[StoredMessage],
    summary: Option<MessageId>,
    kind: RequestKind,
) -> Vec<RequestMessage> {
    let start = summary.and_then(|id| stored.iter().position(|m| m.id == id)).unwrap_or(0);
    let mut out = Vec::new();
    for m in &stored[start..] {
        match m.role {
            StoredRole::Summary if Some(m.id) == summary => {
                out.push(RequestMessage::User { text: m.text.clone(), attachments: Vec::new() });
            }
            // Another summary (in progress, failed) is not part of the conversation.
            StoredRole::Summary => {}
            StoredRole::User => out.push(RequestMessage::User {
                text: m.text.clone(),
                attachments: m.attachments.clone(),
            }),
            StoredRole::Assistant => assistant(m, &mut out),
        }
    }
    if kind == RequestKind::Summary {
        out.push(RequestMessage::User { text: SUMMARY_REQUEST.to_owned(), attachments: vec![] });
    }
    out
}

/// An assistant message and, when it has calls, exactly one result per call in call order.
fn assistant(m: &StoredMessage, out: &mut Vec<RequestMessage>) {
    // Reasoning with a provider's state counts even without text: an encrypted reasoning item
    // must go back with the next request.
    let reasoning = m
        .reasoning
        .clone()
        .filter(|r| !r.is_empty() || m.reasoning_signature.is_some())
        .map(|r| (r, m.reasoning_signature.clone()));
    if m.text.is_empty() && reasoning.is_none() && m.calls.is_empty() {
        return;
    }
    let calls: Vec<RequestCall> = m
        .calls
        .iter()
        .map(|c| RequestCall {
            id: c.call.clone(),
            name: c.name.clone(),
            input: c.input.clone().filter(|_| c.finished).unwrap_or_else(|| "{}".to_owned()),
        })
        .collect();
    let results: Vec<RequestResult> = calls
        .iter()
        .map(|c| match m.results.iter().find(|r| r.call == c.id) {
            Some(r) => {
                RequestResult { id: c.id.clone(), content: r.content.clone(), is_error: r.is_error }
            }
            None => RequestResult {
                id: c.id.clone(),
                content: HISTORY_REPAIR_RESULT.to_owned(),
                is_error: true,
            },
        })
        .collect();
    out.push(RequestMessage::Assistant { text: m.text.clone(), reasoning, calls });
    if !results.is_empty() {
        out.push(RequestMessage::ToolResults(results));
    }
}

#[cfg(test)]
mod tests {
    use turnstile_core::{CallId, Seq};

    use super::*;
    use crate::store::{StoredCall, StoredResult};

    fn msg(id: u64, role: StoredRole, text: &str) -> StoredMessage {
        StoredMessage {
            id: MessageId(id),
            seq: Some(Seq(1)),
            role,
            text: text.to_owned(),
            attachments: vec![],
            synthetic: false,
            reasoning: None,
            reasoning_signature: None,
            reasoning_done: false,
            finish: None,
            calls: vec![],
            results: vec![],
        }
    }

    fn call(id: &str, finished: bool) -> StoredCall {
        StoredCall {
            call: CallId::new(id),
            name: "view".into(),
            input: finished.then(|| "{\"a\":1}".to_owned()),
            finished,
            raw_input: None,
        }
    }

    #[test]
    fn history_starts_at_the_summary_relabelled_as_user() {
        let stored = vec![
            msg(1, StoredRole::User, "old"),
            msg(2, StoredRole::Assistant, "old answer"),
            msg(3, StoredRole::Summary, "the summary"),
            msg(4, StoredRole::User, "new"),
            msg(5, StoredRole::Summary, "a failed later summary"),
        ];
        let got = build(&stored, Some(MessageId(3)), RequestKind::Step);
        assert_eq!(
            got,
            vec![
                RequestMessage::User { text: "the summary".into(), attachments: vec![] },
                RequestMessage::User { text: "new".into(), attachments: vec![] },
            ]
        );
    }

    #[test]
    fn orphan_calls_get_the_repair_result_and_orphan_results_are_dropped() {
        let mut a = msg(2, StoredRole::Assistant, "");
        a.calls = vec![call("c1", true), call("c2", false)];
        a.results = vec![
            StoredResult {
                call: CallId::new("c1"),
                content: "ok".into(),
                is_error: false,
                synthetic: false,
            },
            StoredResult {
                call: CallId::new("zz"),
                content: "orphan".into(),
                is_error: false,
                synthetic: false,
            },
        ];
        let stored = vec![msg(1, StoredRole::User, "go"), a, msg(3, StoredRole::Assistant, "")];
        let got = build(&stored, None, RequestKind::Summary);
        assert_eq!(got.len(), 4, "{got:?}");
        let RequestMessage::Assistant { calls, .. } = &got[1] else { panic!("{got:?}") };
        assert_eq!(calls[1].input, "{}", "an unfinished call is sent with empty input");
        let RequestMessage::ToolResults(results) = &got[2] else { panic!("{got:?}") };
        assert_eq!(results.len(), 2);
        assert_eq!(results[0].content, "ok");
        assert_eq!(results[1].content, HISTORY_REPAIR_RESULT);
        assert!(results[1].is_error);
        assert_eq!(
            got[3],
            RequestMessage::User { text: SUMMARY_REQUEST.into(), attachments: vec![] }
        );
    }

    #[test]
    fn empty_assistant_messages_are_skipped_but_reasoning_alone_counts() {
        let mut r = msg(2, StoredRole::Assistant, "");
        r.reasoning = Some("thinking".into());
        r.reasoning_signature = Some("sig".into());
        let stored = vec![msg(1, StoredRole::User, "q"), r, msg(3, StoredRole::Assistant, "")];
        let got = build(&stored, None, RequestKind::Step);
        assert_eq!(got.len(), 2);
        assert_eq!(
            got[1],
            RequestMessage::Assistant {
                text: String::new(),
                reasoning: Some(("thinking".into(), Some("sig".into()))),
                calls: vec![]
            }
        );
    }
}
