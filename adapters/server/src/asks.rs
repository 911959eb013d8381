//! Permission asks as events (SPEC 9 "Tools": in `serve` an ask is an event that a client
//! answers, and a cancel withdraws it).
//!
//! The gate's [`Asker`] is [`Asks`]: each ask gets an id, is kept as pending and announced
//! (`ask`); the call waits for an answer. Answering removes it (`ask_closed`, `answered`).
//! When the call is aborted (a cancel, a shutdown) the gate drops the ask's future, which
//! withdraws it (`ask_closed`, `withdrawn`). An answer to a closed ask is refused with 409;
//! one to an id never handed out with 404.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde::{Deserialize, Serialize};
use tokio::sync::{broadcast, oneshot};
use turnstile_core::{CallId, SessionId};
use turnstile_host::BoxFuture;
use turnstile_tools::{Answer, Ask, Asker};

/// How many closed asks are remembered (to answer a late answer with 409, not 404).
const CLOSED_KEPT: usize = 4096;

/// A pending ask, as clients see it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingAsk {
    /// Its id, to answer it.
    pub id: String,
    /// The calling session.
    pub session: SessionId,
    /// The tool.
    pub tool: String,
    /// The call's id.
    pub call_id: CallId,
    /// The call's arguments (JSON).
    pub input: serde_json::Value,
    /// What the call acts on (a command, a path), when it says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
}

/// Why an ask closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Closed {
    /// A client answered it.
    Answered,
    /// Its call was aborted (a cancel or a shutdown) before anyone answered.
    Withdrawn,
}

/// What happens to asks, for the event stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AskEvent {
    /// A new pending ask.
    Opened(PendingAsk),
    /// An ask is no longer pending.
    Closed {
        /// The ask.
        id: String,
        /// Why.
        why: Closed,
    },
}

/// Why an answer was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AnswerError {
    /// No ask with that id was ever handed out (or it was forgotten long ago).
    Unknown,
    /// It was answered or withdrawn already.
    Closed(Closed),
}

/// The registry of asks; the gate's [`Asker`]. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Asks {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    state: Mutex<State>,
    events: broadcast::Sender<AskEvent>,
}

#[derive(Debug, Default)]
struct State {
    /// Pending asks, oldest first, with where their answer goes (few at a time: a list).
    pending: Vec<(PendingAsk, oneshot::Sender<Answer>)>,
    /// Recently closed asks, oldest first.
    closed: VecDeque<(String, Closed)>,
}

impl State {
    fn take(&mut self, id: &str) -> Option<(PendingAsk, oneshot::Sender<Answer>)> {
        let at = self.pending.iter().position(|(a, _)| a.id == id)?;
        Some(self.pending.remove(at))
    }

    fn close(&mut self, id: String, why: Closed) {
        if self.closed.len() == CLOSED_KEPT {
            self.closed.pop_front();
        }
        self.closed.push_back((id, why));
    }
}

impl Default for Asks {
    fn default() -> Asks {
        Asks::new()
    }
}

impl Asks {
    /// An empty registry.
    #[must_use]
    pub fn new() -> Asks {
        Asks {
            inner: Arc::new(Inner {
                state: Mutex::new(State::default()),
                events: broadcast::channel(1024).0,
            }),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // The state is a map of channels; a panic elsewhere leaves it consistent.
        self.inner.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The pending asks, oldest first.
    #[must_use]
    pub fn pending(&self) -> Vec<PendingAsk> {
        self.state().pending.iter().map(|(a, _)| a.clone()).collect()
    }

    /// What happens from now on.
    #[must_use]
    pub fn subscribe(&self) -> broadcast::Receiver<AskEvent> {
        self.inner.events.subscribe()
    }

    /// Answers the ask `id`.
    ///
    /// # Errors
    /// [`AnswerError::Closed`] when it was answered or withdrawn; [`AnswerError::Unknown`].
    pub fn answer(&self, id: &str, answer: Answer) -> Result<(), AnswerError> {
        let mut st = self.state();
        match st.take(id) {
            Some((_, tx)) => {
                st.close(id.to_owned(), Closed::Answered);
                // Announced under the lock, so events go out in the order the registry changed.
                let _ = self
                    .inner
                    .events
                    .send(AskEvent::Closed { id: id.to_owned(), why: Closed::Answered });
                drop(st);
                // The call may have been aborted at this very moment: its withdrawal found
                // nothing pending, so this answer counts, and nobody reads it. Either way the
                // ask closed once.
                let _ = tx.send(answer);
                Ok(())
            }
            None => match st.closed.iter().find(|(c, _)| c == id) {
                Some((_, why)) => Err(AnswerError::Closed(*why)),
                None => Err(AnswerError::Unknown),
            },
        }
    }

    /// Withdraws `id` if it is still pending.
    fn withdraw(&self, id: &str) {
        let mut st = self.state();
        if st.take(id).is_some() {
            st.close(id.to_owned(), Closed::Withdrawn);
            let _ = self
                .inner
                .events
                .send(AskEvent::Closed { id: id.to_owned(), why: Closed::Withdrawn });
        }
    }
}

/// Withdraws its ask when dropped before the answer arrived (the call was aborted).
struct Withdraw {
    asks: Asks,
    id: String,
}

impl Drop for Withdraw {
    fn drop(&mut self) {
        self.asks.withdraw(&self.id);
    }
}

impl Asker for Asks {
    fn ask(&self, ask: Ask) -> BoxFuture<Answer> {
        let id = uuid::Uuid::new_v4().to_string();
        let input = serde_json::from_str(&ask.call.input)
            .unwrap_or(serde_json::Value::String(ask.call.input.clone()));
        let pending = PendingAsk {
            id: id.clone(),
            session: ask.session,
            tool: ask.tool,
            call_id: ask.call.call,
            input,
            subject: ask.subject,
        };
        let (tx, rx) = oneshot::channel();
        tracing::info!(ask = %id, session = %pending.session, tool = %pending.tool, "permission asked");
        {
            // Announced under the lock: no answer can be announced before its ask.
            let mut st = self.state();
            st.pending.push((pending.clone(), tx));
            let _ = self.inner.events.send(AskEvent::Opened(pending));
        }
        let guard = Withdraw { asks: self.clone(), id };
        Box::pin(async move {
            let answer = rx.await;
            // Answered (or the registry went away): nothing left to withdraw.
            drop(guard);
            answer.unwrap_or_else(|_| Answer::Deny("the server stopped before an answer".into()))
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use turnstile_host::ToolCall;

    fn ask(tool: &str) -> Ask {
        Ask {
            session: SessionId::new("s"),
            tool: tool.to_owned(),
            call: ToolCall::new(SessionId::new("s"), CallId::new("c1"), r#"{"command":"ls"}"#),
            subject: Some("ls".to_owned()),
        }
    }

    #[tokio::test]
    async fn an_answer_reaches_the_call_once_and_a_late_one_is_refused() {
        let asks = Asks::new();
        let mut events = asks.subscribe();
        let waiting = asks.ask(ask("bash"));
        let AskEvent::Opened(p) = events.recv().await.unwrap() else { panic!("opened") };
        assert_eq!(p.input["command"], "ls");
        assert_eq!(asks.pending().len(), 1);
        asks.answer(&p.id, Answer::Once).unwrap();
        assert_eq!(waiting.await, Answer::Once);
        assert_eq!(
            events.recv().await.unwrap(),
            AskEvent::Closed { id: p.id.clone(), why: Closed::Answered }
        );
        assert_eq!(asks.answer(&p.id, Answer::Once), Err(AnswerError::Closed(Closed::Answered)));
        assert_eq!(asks.answer("nope", Answer::Once), Err(AnswerError::Unknown));
        assert!(asks.pending().is_empty());
    }

    #[tokio::test]
    async fn dropping_the_call_withdraws_its_ask() {
        let asks = Asks::new();
        let mut events = asks.subscribe();
        let waiting = asks.ask(ask("edit"));
        let AskEvent::Opened(p) = events.recv().await.unwrap() else { panic!("opened") };
        drop(waiting);
        assert_eq!(
            events.recv().await.unwrap(),
            AskEvent::Closed { id: p.id.clone(), why: Closed::Withdrawn }
        );
        assert!(asks.pending().is_empty());
        assert_eq!(asks.answer(&p.id, Answer::Once), Err(AnswerError::Closed(Closed::Withdrawn)));
    }
}
