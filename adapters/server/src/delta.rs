//! Message deltas: streamed text sent as what it appended, not as the whole message again.
//!
//! A message streams: every commit of its text (about every 33 ms while a model writes) is a
//! new state of the message. Sent whole each time, one answer of n bytes costs every client
//! O(n²) bytes. So when a new state differs from the last one the feed broadcast only by text
//! (and reasoning) appended at the end, the feed also gives the frame a `message_delta` form:
//! what was appended, on top of the state of `base_revision`.
//!
//! A stream sends the delta only when the state it last sent of that message is exactly that
//! base (the same message at the same revision is the same state: a revision is the commit
//! that last changed the row). Otherwise (a new or resumed stream, one that caught up from the
//! store, a client that asked for `deltas=false`) it sends the full `message` frame. A resume
//! always starts with full states, and a message's last state (its finish) is always a full
//! frame, since the finish is more than appended text.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use turnstile_core::{MessageId, SessionId};
use turnstile_host::store::StoredMessage;

/// The most open messages a feed or a stream keeps the last state of. Messages stay open
/// only while they stream, so this is far above what a host has at once; past it, the
/// oldest is forgotten and its next change goes out whole.
const OPEN_MAX: usize = 4096;

/// A `message_delta` event: what a message's new state appended to the state of
/// `base_revision`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageDelta {
    /// The message's session.
    pub session: SessionId,
    /// The store revision of the new state.
    pub revision: u64,
    /// The revision of the state this delta applies to: the last state of this message the
    /// same stream sent.
    pub base_revision: u64,
    /// The message's id.
    pub id: MessageId,
    /// Text appended to the message's text.
    pub text: String,
    /// Text appended to the reasoning (present when the new state has a reasoning section:
    /// the reasoning becomes the base's, or empty, followed by this).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
}

impl MessageDelta {
    /// Applies the delta to `base`, the message's state at `base_revision`.
    ///
    /// # Errors
    /// `base` is another message (its id differs): it is left as it was.
    pub fn apply(&self, base: &mut StoredMessage) -> Result<(), String> {
        if base.id != self.id {
            return Err(format!("the delta is for message {}, not {}", self.id, base.id));
        }
        base.text.push_str(&self.text);
        if let Some(r) = &self.reasoning {
            base.reasoning.get_or_insert_default().push_str(r);
        }
        Ok(())
    }
}

/// What `new` appended to `old`, when that is all that changed: the text appended and, when
/// `new` has a reasoning section, the reasoning appended. `None` when anything else differs
/// (a call, a result, the finish, a text that no longer starts with the old one, ...).
#[must_use]
pub(crate) fn appended<'a>(
    old: &StoredMessage,
    new: &'a StoredMessage,
) -> Option<(&'a str, Option<&'a str>)> {
    // Destructured whole, so that a field added to the message is a compile error here until
    // it is decided whether a delta may carry it.
    let StoredMessage {
        id,
        seq,
        role,
        text,
        attachments,
        synthetic,
        reasoning,
        reasoning_signature,
        reasoning_done,
        finish,
        calls,
        results,
    } = new;
    let same = *id == old.id
        && *seq == old.seq
        && *role == old.role
        && *attachments == old.attachments
        && *synthetic == old.synthetic
        && *reasoning_signature == old.reasoning_signature
        && *reasoning_done == old.reasoning_done
        && *finish == old.finish
        && *calls == old.calls
        && *results == old.results;
    if !same {
        return None;
    }
    let text = text.strip_prefix(old.text.as_str())?;
    let reasoning = match (&old.reasoning, reasoning) {
        (_, None) if old.reasoning.is_some() => return None,
        (_, None) => None,
        (None, Some(r)) => Some(r.as_str()),
        (Some(o), Some(r)) => Some(r.strip_prefix(o.as_str())?),
    };
    Some((text, reasoning))
}

/// Whether later states of the message may be deltas on top of this one: it is still being
/// written (a user message never streams).
fn streams(m: &StoredMessage) -> bool {
    m.finish.is_none() && m.role != turnstile_host::store::StoredRole::User
}

/// Inserts into a bounded map of open messages, forgetting the oldest (lowest revision) past
/// [`OPEN_MAX`].
fn remember<V>(open: &mut BTreeMap<MessageId, (u64, V)>, id: MessageId, revision: u64, v: V) {
    open.insert(id, (revision, v));
    if open.len() > OPEN_MAX
        && let Some(oldest) = open.iter().min_by_key(|(_, (r, _))| *r).map(|(id, _)| *id)
    {
        open.remove(&oldest);
    }
}

/// The feed's side: the last state it broadcast of every open message.
#[derive(Debug, Default)]
pub(crate) struct Broadcasted {
    open: BTreeMap<MessageId, (u64, StoredMessage)>,
}

impl Broadcasted {
    /// Records that the feed broadcasts `message` at `revision`; returns the delta from the
    /// state it broadcast before, when the new one only appended text.
    pub(crate) fn next(
        &mut self,
        session: &SessionId,
        revision: u64,
        message: &StoredMessage,
    ) -> Option<MessageDelta> {
        let delta = self.open.get(&message.id).and_then(|(base, old)| {
            let (text, reasoning) = appended(old, message)?;
            Some(MessageDelta {
                session: session.clone(),
                revision,
                base_revision: *base,
                id: message.id,
                text: text.to_owned(),
                reasoning: reasoning.map(str::to_owned),
            })
        });
        if streams(message) {
            remember(&mut self.open, message.id, revision, message.clone());
        } else {
            self.open.remove(&message.id);
        }
        delta
    }
}

/// What a message frame tells a stream about the message.
#[derive(Debug)]
pub(crate) struct Mark {
    /// The message.
    pub(crate) id: MessageId,
    /// The revision of the state the frame carries.
    pub(crate) revision: u64,
    /// Later frames may be deltas on top of this state.
    pub(crate) streams: bool,
    /// The frame as a delta: valid on top of the state of this revision.
    pub(crate) base: Option<u64>,
}

impl Mark {
    pub(crate) fn new(revision: u64, message: &StoredMessage, base: Option<u64>) -> Mark {
        Mark { id: message.id, revision, streams: streams(message), base }
    }
}

/// A stream's side: the revision of the last state it sent of every open message.
#[derive(Debug)]
pub(crate) struct Sent {
    open: BTreeMap<MessageId, (u64, ())>,
    /// False when the client asked for whole messages only (`deltas=false`).
    deltas: bool,
}

impl Sent {
    pub(crate) fn new(deltas: bool) -> Sent {
        Sent { open: BTreeMap::new(), deltas }
    }

    /// Whether to send the frame as its delta (else whole); records what the client has.
    pub(crate) fn as_delta(&mut self, mark: &Mark) -> bool {
        let have = self.open.get(&mark.id).map(|(r, ())| *r);
        let delta = self.deltas && mark.base.is_some() && mark.base == have;
        if mark.streams {
            remember(&mut self.open, mark.id, mark.revision, ());
        } else {
            self.open.remove(&mark.id);
        }
        delta
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use turnstile_host::store::StoredRole;

    fn message(text: &str, reasoning: Option<&str>) -> StoredMessage {
        StoredMessage {
            id: MessageId(7),
            seq: None,
            role: StoredRole::Assistant,
            text: text.to_owned(),
            attachments: Vec::new(),
            synthetic: false,
            reasoning: reasoning.map(str::to_owned),
            reasoning_signature: None,
            reasoning_done: false,
            finish: None,
            calls: Vec::new(),
            results: Vec::new(),
        }
    }

    #[test]
    fn only_appended_text_is_a_delta() {
        let old = message("Hello", None);
        assert_eq!(appended(&old, &message("Hello, wor", None)), Some((", wor", None)));
        assert_eq!(appended(&old, &message("Hello", Some("hm"))), Some(("", Some("hm"))));
        // A retry reset the text; a reasoning section went away; the message finished.
        assert_eq!(appended(&old, &message("Help", None)), None);
        assert_eq!(appended(&message("a", Some("r")), &message("a", None)), None);
        let mut finished = message("Hello!", None);
        finished.finish = Some(serde_json::json!({"reason": "end_turn"}));
        assert_eq!(appended(&old, &finished), None);
        let mut other = message("Hello!", None);
        other.id = MessageId(8);
        assert_eq!(appended(&old, &other), None);
    }

    #[test]
    fn a_delta_applied_to_its_base_gives_the_new_state() {
        let mut feed = Broadcasted::default();
        let session = SessionId::new("s");
        let states = [
            message("", None),
            message("The ", Some("think")),
            message("The answer", Some("thinking")),
            message("The answer is 42.", Some("thinking")),
        ];
        let mut client = states[0].clone();
        assert_eq!(feed.next(&session, 1, &states[0]), None, "the first state is whole");
        for (i, state) in states.iter().enumerate().skip(1) {
            let revision = i as u64 + 1;
            let delta = feed.next(&session, revision, state).expect("a delta");
            assert_eq!(delta.base_revision, revision - 1);
            delta.apply(&mut client).unwrap();
            assert_eq!(&client, state);
        }
        let mut finished = states[3].clone();
        finished.finish = Some(serde_json::json!({"reason": "end_turn"}));
        assert_eq!(feed.next(&session, 9, &finished), None, "the finish is whole");
        assert!(feed.open.is_empty(), "a finished message is forgotten");
    }

    #[test]
    fn a_stream_sends_a_delta_only_on_the_state_it_sent() {
        let mut sent = Sent::new(true);
        let m = message("a", None);
        assert!(!sent.as_delta(&Mark::new(3, &m, None)));
        assert!(sent.as_delta(&Mark::new(4, &m, Some(3))));
        // A base this stream never sent (it caught up from the store past it): whole.
        assert!(!sent.as_delta(&Mark::new(6, &m, Some(5))));
        assert!(sent.as_delta(&Mark::new(7, &m, Some(6))));
        // A client that asked for whole messages.
        let mut whole = Sent::new(false);
        assert!(!whole.as_delta(&Mark::new(3, &m, None)));
        assert!(!whole.as_delta(&Mark::new(4, &m, Some(3))));
    }

    #[test]
    fn open_messages_are_bounded() {
        let mut open = BTreeMap::new();
        for i in 0..=OPEN_MAX as u64 {
            remember(&mut open, MessageId(i + 1), i + 10, ());
        }
        assert_eq!(open.len(), OPEN_MAX);
        assert!(!open.contains_key(&MessageId(1)), "the oldest is forgotten");
    }
}
