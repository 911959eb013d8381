//! Permission asks as events (SPEC 9 "Tools": in `serve` an ask is an event that a client
//! answers, and a cancel withdraws it).
//!
//! The gate's [`Asker`] is [`Asks`]: each ask gets an id, is kept as pending and announced
//! (`ask`); the call waits for an answer. Answering removes it (`ask_closed`, `answered`).
//! When the call is aborted (a cancel, a shutdown) the gate drops the ask's future, which
//! withdraws it (`ask_closed`, `withdrawn`). An answer to a closed ask is refused with 409;
//! one to an id never handed out with 404.
//!
//! **Several servers** (SPEC 11, [`Asks::share`]): an ask is also a row of the store, so every
//! server lists it and streams its opening and closing, and a client may answer it on any
//! server. The store decides once whether an ask was answered or withdrawn (the first close
//! wins); the server whose call waits learns of an answer given elsewhere from the store, as
//! each server learns of the others' asks: by reading the asks changed after each new revision.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::{broadcast, oneshot};
use turnstile_core::{CallId, SessionId};
use turnstile_host::store::{AskClosing, AskState};
use turnstile_host::{BoxFuture, Host};
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
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AnswerError {
    /// No ask with that id was ever handed out (or it was forgotten long ago).
    Unknown,
    /// It was answered or withdrawn already.
    Closed(Closed),
    /// Several servers: the store, which decides, could not be reached (the error's text).
    Unavailable(String),
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
    /// Several servers: the member host whose store shares the asks.
    shared: std::sync::OnceLock<Host>,
}

#[derive(Debug, Default)]
struct State {
    /// Pending asks, oldest first, with where their answer goes: a call of this server's, or
    /// (`None`) another server's, which learns of its answer from the store.
    pending: Vec<(PendingAsk, Option<oneshot::Sender<Answer>>)>,
    /// Recently closed asks, oldest first, with the answer (as the store keeps it) when one
    /// was given here.
    closed: VecDeque<(String, Closed, Option<String>)>,
}

impl State {
    fn take(&mut self, id: &str) -> Option<(PendingAsk, Option<oneshot::Sender<Answer>>)> {
        let at = self.pending.iter().position(|(a, _)| a.id == id)?;
        Some(self.pending.remove(at))
    }

    fn close(&mut self, id: String, why: Closed, answer: Option<String>) {
        if self.closed.len() == CLOSED_KEPT {
            self.closed.pop_front();
        }
        self.closed.push_back((id, why, answer));
    }

    fn closed(&self, id: &str) -> Option<&(String, Closed, Option<String>)> {
        self.closed.iter().find(|(c, _, _)| c == id)
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
                shared: std::sync::OnceLock::new(),
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

    /// Shares the asks with the other servers of `host`'s store, when `host` is one of several
    /// (SPEC 11; nothing changes for a server alone): from now on every ask of this server is
    /// also a row of the store, the other servers' asks are listed and streamed here, and
    /// [`Asks::answer_anywhere`] answers any of them. Call it once, right after the host opened.
    pub fn share(&self, host: &Host) {
        if !host.is_member() || self.inner.shared.set(host.clone()).is_err() {
            return;
        }
        tokio::spawn(follow_store(self.clone(), host.clone()));
    }

    /// Answers the ask `id`, on any server: the store decides for several servers, this
    /// registry for a server alone ([`Asks::answer`]).
    ///
    /// # Errors
    /// As [`Asks::answer`]; [`AnswerError::Unavailable`] when the store cannot be reached.
    pub async fn answer_anywhere(&self, id: &str, answer: Answer) -> Result<(), AnswerError> {
        let Some(host) = self.inner.shared.get() else { return self.answer(id, answer) };
        let text = answer_json(&answer);
        match host.close_shared_ask(id, Some(text.clone())).await {
            Ok(AskClosing::Closed) => {
                self.closed_here(id, Closed::Answered, Some(answer));
                Ok(())
            }
            Ok(AskClosing::Already(state)) => Err(AnswerError::Closed(closed_of(state))),
            // Not in the store yet: an ask of this server whose row is on its way. Decided
            // here; the row is closed the same way once written (see `Asker::ask`).
            Ok(AskClosing::Unknown) if self.is_mine(id) => {
                let answered = self.answer(id, answer);
                let (host, id) = (host.clone(), id.to_owned());
                tokio::spawn(async move { close_row(&host, &id, Some(text)).await });
                answered
            }
            Ok(AskClosing::Unknown) => Err(AnswerError::Unknown),
            Err(e) => Err(AnswerError::Unavailable(e.to_string())),
        }
    }

    /// Whether `id` is a pending ask of this server's own call.
    fn is_mine(&self, id: &str) -> bool {
        self.state().pending.iter().any(|(a, tx)| a.id == id && tx.is_some())
    }

    /// Closes `id` here as the store decided: its call (if it is this server's) gets the
    /// answer, the clients hear it closed. Nothing when it is not pending here.
    fn closed_here(&self, id: &str, why: Closed, answer: Option<Answer>) {
        let mut st = self.state();
        let Some((_, tx)) = st.take(id) else {
            if st.closed(id).is_none() {
                st.close(id.to_owned(), why, None);
            }
            return;
        };
        st.close(id.to_owned(), why, None);
        let _ = self.inner.events.send(AskEvent::Closed { id: id.to_owned(), why });
        drop(st);
        if let (Some(tx), Some(answer)) = (tx, answer) {
            let _ = tx.send(answer);
        }
    }

    /// Another server's ask, pending: listed and announced here.
    fn opened_elsewhere(&self, ask: PendingAsk) {
        let mut st = self.state();
        if st.pending.iter().any(|(a, _)| a.id == ask.id) || st.closed(&ask.id).is_some() {
            return;
        }
        st.pending.push((ask.clone(), None));
        let _ = self.inner.events.send(AskEvent::Opened(ask));
    }

    /// Answers the ask `id`.
    ///
    /// With several servers, use [`Asks::answer_anywhere`]: this decides here alone.
    ///
    /// # Errors
    /// [`AnswerError::Closed`] when it was answered or withdrawn; [`AnswerError::Unknown`].
    pub fn answer(&self, id: &str, answer: Answer) -> Result<(), AnswerError> {
        let mut st = self.state();
        match st.take(id) {
            Some((_, tx)) => {
                st.close(id.to_owned(), Closed::Answered, Some(answer_json(&answer)));
                // Announced under the lock, so events go out in the order the registry changed.
                let _ = self
                    .inner
                    .events
                    .send(AskEvent::Closed { id: id.to_owned(), why: Closed::Answered });
                drop(st);
                // The call may have been aborted at this very moment: its withdrawal found
                // nothing pending, so this answer counts, and nobody reads it. Either way the
                // ask closed once.
                if let Some(tx) = tx {
                    let _ = tx.send(answer);
                }
                Ok(())
            }
            None => match st.closed(id) {
                Some((_, why, _)) => Err(AnswerError::Closed(*why)),
                None => Err(AnswerError::Unknown),
            },
        }
    }

    /// Withdraws `id` if it is still pending (and, with several servers, its row).
    fn withdraw(&self, id: &str) {
        let mut st = self.state();
        if st.take(id).is_some() {
            st.close(id.to_owned(), Closed::Withdrawn, None);
            let _ = self
                .inner
                .events
                .send(AskEvent::Closed { id: id.to_owned(), why: Closed::Withdrawn });
            if let Some(host) = self.inner.shared.get() {
                let (host, id) = (host.clone(), id.to_owned());
                tokio::spawn(async move { close_row(&host, &id, None).await });
            }
        }
    }

    /// How `id` closed here, if it did, with its answer when it was given here.
    fn closed_as(&self, id: &str) -> Option<(Closed, Option<String>)> {
        self.state().closed(id).map(|(_, why, answer)| (*why, answer.clone()))
    }
}

/// The answer as the store keeps it (the request's vocabulary).
fn answer_json(answer: &Answer) -> String {
    match answer {
        Answer::Once => json!({"answer": "once"}),
        Answer::ForSession => json!({"answer": "session"}),
        Answer::Deny(message) => json!({"answer": "deny", "message": message}),
    }
    .to_string()
}

/// The answer a stored one is; an unreadable one denies (nobody can run a call on it).
fn answer_of(text: &str) -> Answer {
    let v: serde_json::Value = serde_json::from_str(text).unwrap_or_default();
    match v["answer"].as_str() {
        Some("once") => Answer::Once,
        Some("session") => Answer::ForSession,
        _ => Answer::Deny(v["message"].as_str().unwrap_or("the user denied this call").to_owned()),
    }
}

fn closed_of(state: AskState) -> Closed {
    match state {
        AskState::Withdrawn => Closed::Withdrawn,
        AskState::Answered | AskState::Pending => Closed::Answered,
    }
}

/// Closes an ask's row (answered with `answer`, or withdrawn); a failure is logged: the row
/// then stays pending until its server closes it.
async fn close_row(host: &Host, id: &str, answer: Option<String>) {
    if let Err(e) = host.close_shared_ask(id, answer).await {
        tracing::warn!(ask = %id, error = %e, "closing a shared ask failed");
    }
}

/// Several servers: follows the asks of the store, from each new revision on.
async fn follow_store(asks: Asks, host: Host) {
    let mut revisions = host.revisions();
    let mut after = 0;
    loop {
        match host.shared_asks_after(after).await {
            Ok(rows) => {
                for row in rows {
                    after = after.max(row.rev);
                    match row.state {
                        AskState::Pending => match serde_json::from_str::<PendingAsk>(&row.body) {
                            Ok(ask) => asks.opened_elsewhere(ask),
                            Err(e) => {
                                tracing::warn!(ask = %row.id, error = %e, "a shared ask does not parse")
                            }
                        },
                        AskState::Answered => {
                            let answer = row.answer.as_deref().map(answer_of);
                            asks.closed_here(&row.id, Closed::Answered, answer);
                        }
                        AskState::Withdrawn => asks.closed_here(&row.id, Closed::Withdrawn, None),
                    }
                }
            }
            Err(e) => tracing::warn!(error = %e, "reading the shared asks failed"),
        }
        if revisions.changed().await.is_err() {
            return;
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
        if let Some(host) = self.inner.shared.get() {
            // Shared with the other servers. If it closed here while its row was on its way
            // (answered on this server, or its call aborted), the row is closed the same way.
            let (asks, host, ask) = (self.clone(), host.clone(), pending.clone());
            tokio::spawn(async move {
                let body = serde_json::to_string(&ask).unwrap_or_default();
                if let Err(e) = host.share_ask(&ask.id, &ask.session, body).await {
                    tracing::warn!(ask = %ask.id, error = %e, "sharing an ask failed: only this server lists it");
                    return;
                }
                match asks.closed_as(&ask.id) {
                    Some((Closed::Withdrawn, _)) => close_row(&host, &ask.id, None).await,
                    Some((Closed::Answered, answer)) => close_row(&host, &ask.id, answer).await,
                    None => {}
                }
            });
        }
        {
            // Announced under the lock: no answer can be announced before its ask.
            let mut st = self.state();
            st.pending.push((pending.clone(), Some(tx)));
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
