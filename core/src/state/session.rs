//! A session with unfinished work, and the map of all of them (SPEC 3 "Session", "Busy").

use std::collections::{BTreeMap, VecDeque};

use crate::alphabet::{Seq, SessionId, Setup};
use crate::state::submission::Waiting;
use crate::state::turn::{Abort, Lane};

/// A session with unfinished work. Sessions with none are dropped from the engine.
#[derive(Debug)]
#[cfg_attr(feature = "checker", derive(PartialEq))]
pub(crate) struct Session {
    pub(crate) id: SessionId,
    /// Waiting submissions in strictly ascending sequence order (SPEC 4.2). Bounded by
    /// [`Config::queue_max`]: a submission beyond it is still accepted (nothing accepted may be
    /// lost) but is reported by [`crate::Engine::queue_len`] so the host can push back.
    pub(crate) queue: VecDeque<Waiting>,
    /// The active turn or summarization, if any (SPEC I3: at most one).
    pub(crate) lane: Lane,
    /// The session's context gauges as the core last wrote them; `None` until a turn brings
    /// the stored values in its setup (SPEC 4.4, 4.7).
    pub(crate) gauges: Option<Gauges>,
    /// For a sub-agent session: the call of the parent's turn that waits for it (SPEC 4.11).
    pub(crate) parent: Option<ParentLink>,
    /// Whether the core asked for this session's title while it has been in memory.
    pub(crate) title: TitleState,
}

#[cfg(feature = "checker")]
clone_reusing!(Session { id, queue => crate::reuse::clone_deque, lane, gauges, parent, title });

/// What the core knows of a session's title beyond the host's setup (SPEC 4.11).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum TitleState {
    /// Nothing: the setup of the activated submission says whether it has one.
    #[default]
    Unknown,
    /// Requested by the core: never again while the session is in memory.
    Requested,
}

/// The parent call a sub-agent session answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ParentLink {
    /// The call, named as a tool result for it would be.
    pub(crate) call: crate::alphabet::CallIo,
}

/// A title request waiting for the host's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PendingTitle {
    /// The submission whose first activation asked for it.
    pub(crate) seq: Seq,
    /// Its prompt, the fallback title's source.
    pub(crate) prompt: String,
}

/// Work that crosses from one session to another within a transition (SPEC 4.11): a handler
/// holds one session at a time, so it queues these and the engine carries them out, in order,
/// before the transition ends.
#[derive(Debug)]
#[cfg_attr(feature = "checker", derive(Clone, PartialEq))]
pub(crate) enum Crossing {
    /// Start the sub-agent of an `agent` call in a new child session.
    StartChild { link: ParentLink, child: SessionId, seq: Seq, prompt: String, setup: Box<Setup> },
    /// A sub-agent ended: its parent's call gets this result.
    ChildEnded { link: ParentLink, result: crate::alphabet::ToolOutput },
    /// The parent's turn was aborted: so is the sub-agent.
    AbortChild { child: SessionId, cause: Abort },
}

/// The context a session uses: `prompt_tokens + completion_tokens` (SPEC 4.4).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Gauges {
    pub(crate) prompt_tokens: u64,
    pub(crate) completion_tokens: u64,
}

impl Gauges {
    pub(crate) fn used(&self) -> u64 {
        self.prompt_tokens.saturating_add(self.completion_tokens)
    }
}

impl Session {
    /// An empty session.
    fn vacant(id: &SessionId) -> Session {
        let (queue, lane, title) = (VecDeque::new(), Lane::Idle, TitleState::Unknown);
        Session { id: id.clone(), queue, lane, gauges: None, parent: None, title }
    }

    /// True when the session has nothing unfinished (SPEC 3 "Busy" is the negation).
    pub(crate) fn is_idle(&self) -> bool {
        self.queue.is_empty() && matches!(self.lane, Lane::Idle)
    }
}

/// The sessions with unfinished work, by id. Kept beside [`State`] rather than in it, so a
/// handler can hold one session and the rest of the state at once.
#[derive(Debug, Default)]
#[cfg_attr(feature = "checker", derive(PartialEq))]
pub(crate) struct Sessions {
    /// Ordered by [`SessionId`]'s deterministic order, so iteration never depends on a random
    /// seed. Holds only sessions with work: bounded by the unfinished submissions. Boxed: a
    /// B-tree node has room for eleven entries, so inline sessions would make a map of one
    /// session (the common case, and the model checker's, which copies the engine on every
    /// transition) allocate eleven sessions' worth.
    map: BTreeMap<SessionId, Box<Session>>,
}

#[cfg(feature = "checker")]
clone_reusing!(Sessions { map => crate::reuse::clone_map });

impl Sessions {
    /// Runs `f` on the session `id` (created empty when `create`), then forgets it if it has no
    /// unfinished work left: it is recreated by its next submission. `None` when the session is
    /// unknown and `create` is false.
    pub(crate) fn with<R>(
        &mut self,
        id: &SessionId,
        create: bool,
        f: impl FnOnce(&mut Session) -> R,
    ) -> Option<R> {
        if let Some(s) = self.map.get_mut(id) {
            let r = f(s);
            if s.is_idle() {
                self.map.remove(id);
            }
            return Some(r);
        }
        if !create {
            return None;
        }
        let mut s = Box::new(Session::vacant(id));
        let r = f(&mut s);
        if !s.is_idle() {
            self.map.insert(id.clone(), s);
        }
        Some(r)
    }

    /// The session, if it has work.
    pub(crate) fn get(&self, id: &SessionId) -> Option<&Session> {
        self.map.get(id).map(|s| &**s)
    }

    /// The ids of all sessions with work, in order (a copy: the caller may change sessions).
    pub(crate) fn ids(&self) -> Vec<SessionId> {
        self.map.keys().cloned().collect()
    }

    /// Every session with work, in order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&SessionId, &Session)> {
        self.map.iter().map(|(id, s)| (id, &**s))
    }

    /// True when no session has work.
    pub(crate) fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Test-only access for corrupting a session on purpose.
    #[cfg(test)]
    pub(crate) fn get_mut(&mut self, id: &SessionId) -> Option<&mut Session> {
        self.map.get_mut(id).map(|s| &mut **s)
    }
}
