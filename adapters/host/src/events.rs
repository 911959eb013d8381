//! Event streams (SPEC 9 "Events"): lossy live updates and lossless completions.
//!
//! - **Live updates** ([`Updates`]) go through a bounded broadcast. A subscriber that falls
//!   behind loses intermediate updates and receives [`Event::Lagged`] instead; it re-reads the
//!   store. The engine never waits for a subscriber.
//! - **Completions** are the run ledger itself: [`Completions`] reads the ledger from a cursor
//!   and then follows new commits, and `Host::wait` registers a waiter before reading the
//!   ledger, so an outcome is found whether the wait starts before, during or long after the
//!   run, or after a restart. Waiters are woken by the store writer right after the commit that
//!   records the outcome: nothing is published before it is durable.

use std::collections::{BTreeMap, VecDeque};

// The waiter registry is the host's one piece of state that threads race on: under
// `--cfg turnstile_loom` its lock is loom's, and `loom_tests` below explores every interleaving
// of a waiter, the publisher and a stop. (A cfg of our own: tokio reacts to `cfg(loom)`.)
#[cfg(turnstile_loom)]
use loom::sync::{Mutex, MutexGuard};
#[cfg(not(turnstile_loom))]
use std::sync::{Mutex, MutexGuard};

use tokio::sync::{broadcast, oneshot, watch};
use turnstile_core::{MessageId, Seq, SessionId};

use crate::error::{Stopped, WaitError};
use crate::record::{CompletionRecord, Cursor};

/// A live update (lossy: a slow subscriber may miss some and gets [`Event::Lagged`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Update {
    /// A message's stored content changed (a commit wrote to it).
    MessageUpdated {
        /// The session.
        session: SessionId,
        /// The message.
        message: MessageId,
    },
    /// The session became busy or idle (SPEC 3 "Busy").
    BusyChanged {
        /// The session.
        session: SessionId,
        /// Busy now.
        busy: bool,
    },
    /// The number of waiting submissions of the session changed.
    QueueChanged {
        /// The session.
        session: SessionId,
        /// Waiting submissions now.
        len: usize,
    },
    /// A model step's attempt failed and will be retried after a backoff (SPEC 4.5). Not a
    /// terminal error: the turn goes on with the next attempt, whose text replaces this one's.
    Retrying {
        /// The session.
        session: SessionId,
        /// The submission that owns the turn.
        seq: Seq,
        /// The attempt that will start, counted from 1 (the first retry is attempt 2).
        attempt: u32,
        /// How long until it starts, in milliseconds.
        delay_ms: u64,
        /// Why the failed attempt failed (the provider's message, or "stream idle for N s").
        reason: String,
    },
    /// A submission's outcome was recorded (durably) in the ledger.
    TurnFinished {
        /// Its position in the ledger's completion order.
        cursor: Cursor,
        /// The completion (the RunComplete when it has a RunId).
        record: CompletionRecord,
    },
}

/// What a live subscriber receives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// The next update.
    Update(Update),
    /// The subscriber fell behind and `skipped` updates were dropped for it; re-read the store.
    Lagged {
        /// How many updates it missed.
        skipped: u64,
    },
}

/// A live-update subscription (see [`crate::Host::subscribe`]).
#[derive(Debug)]
pub struct Updates {
    pub(crate) rx: broadcast::Receiver<Update>,
    pub(crate) ended: watch::Receiver<bool>,
}

impl Updates {
    /// The next event; `None` once the host has shut down (or stopped) and every update was
    /// received.
    pub async fn recv(&mut self) -> Option<Event> {
        let result = tokio::select! {
            biased;
            r = self.rx.recv() => r,
            _ = self.ended.wait_for(|ended| *ended) => return None,
        };
        match result {
            Ok(u) => Some(Event::Update(u)),
            Err(broadcast::error::RecvError::Lagged(skipped)) => Some(Event::Lagged { skipped }),
            Err(broadcast::error::RecvError::Closed) => None,
        }
    }
}

type Waiter = oneshot::Sender<Result<CompletionRecord, WaitError>>;

/// Completion waiters and the newest committed cursor, shared by the store writer (which
/// publishes) and every waiter.
///
/// Race-free by order: a waiter registers, then reads the ledger; the writer commits, then takes
/// the waiters. Whichever comes second sees the other's effect.
#[derive(Debug)]
pub(crate) struct Hub {
    waiters: Mutex<HubState>,
    newest: watch::Sender<Cursor>,
    /// The newest revision committed (the store's change order), set after each commit.
    revision: watch::Sender<u64>,
    /// True once the host shut down or stopped: streams end after what is recorded.
    ended: watch::Sender<bool>,
    pub(crate) updates: broadcast::Sender<Update>,
}

#[derive(Debug, Default)]
struct HubState {
    /// Waiters by submission; an entry exists only while someone waits for an unfinished one.
    by_seq: BTreeMap<Seq, Vec<Waiter>>,
    /// Set once the engine stopped (a storage failure, ...): what every waiter gets.
    stopped: Option<Stopped>,
    /// Set once a shutdown completed cleanly (everything durable, the store closed).
    closed: bool,
}

impl Hub {
    pub(crate) fn new(newest: Cursor, updates_capacity: usize) -> Hub {
        Hub {
            waiters: Mutex::new(HubState::default()),
            newest: watch::channel(newest).0,
            revision: watch::channel(0).0,
            ended: watch::channel(false).0,
            updates: broadcast::channel(updates_capacity.max(1)).0,
        }
    }

    fn state(&self) -> MutexGuard<'_, HubState> {
        // A poisoned lock means a panic while holding it; the state (a map of channels) is
        // still consistent, so keep going rather than cascade the panic.
        self.waiters.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Registers a waiter for `seq`, or says why none can be registered.
    pub(crate) fn register(
        &self,
        seq: Seq,
    ) -> Result<oneshot::Receiver<Result<CompletionRecord, WaitError>>, WaitError> {
        let mut st = self.state();
        if let Some(why) = &st.stopped {
            return Err(WaitError::Stopped(why.clone()));
        }
        let (tx, rx) = oneshot::channel();
        st.by_seq.entry(seq).or_default().push(tx);
        Ok(rx)
    }

    /// Forgets the waiters of `seq` that gave up (after a wait found the outcome itself).
    pub(crate) fn prune(&self, seq: Seq) {
        let mut st = self.state();
        if let Some(list) = st.by_seq.get_mut(&seq) {
            list.retain(|w| !w.is_closed());
            if list.is_empty() {
                st.by_seq.remove(&seq);
            }
        }
    }

    /// Called by the store writer after a commit recorded these outcomes.
    pub(crate) fn committed(&self, records: &[(Cursor, CompletionRecord)]) {
        let mut woken = Vec::new();
        {
            let mut st = self.state();
            for (_, r) in records {
                if let Some(list) = st.by_seq.remove(&r.seq) {
                    woken.push((list, r.clone()));
                }
            }
        }
        for (list, r) in woken {
            for w in list {
                let _ = w.send(Ok(r.clone()));
            }
        }
        if let Some((newest, _)) = records.iter().max_by_key(|(c, _)| *c) {
            self.newest.send_if_modified(|n| {
                let newer = *newest > *n;
                *n = (*n).max(*newest);
                newer
            });
        }
        for (cursor, record) in records {
            let _ =
                self.updates.send(Update::TurnFinished { cursor: *cursor, record: record.clone() });
        }
    }

    /// The engine stopped: every current and future waiter of an unfinished run gets why
    /// (the first reason given; a later one changes nothing).
    pub(crate) fn stop(&self, why: &Stopped) {
        let (why, waiters) = {
            let mut st = self.state();
            let why = st.stopped.get_or_insert_with(|| why.clone()).clone();
            (why, std::mem::take(&mut st.by_seq))
        };
        for w in waiters.into_values().flatten() {
            let _ = w.send(Err(WaitError::Stopped(why.clone())));
        }
        self.ended.send_replace(true);
    }

    /// Records that a shutdown completed cleanly.
    pub(crate) fn close(&self) {
        self.state().closed = true;
        self.ended.send_replace(true);
    }

    /// True once a shutdown completed cleanly.
    pub(crate) fn is_closed(&self) -> bool {
        self.state().closed
    }

    /// Why the engine stopped, once stopped.
    pub(crate) fn stopped(&self) -> Option<Stopped> {
        self.state().stopped.clone()
    }

    pub(crate) fn newest(&self) -> watch::Receiver<Cursor> {
        self.newest.subscribe()
    }

    /// Called by the store writer after every commit (and once at open) with the store's
    /// newest revision.
    pub(crate) fn revised(&self, revision: u64) {
        self.revision.send_if_modified(|r| {
            let newer = revision > *r;
            *r = (*r).max(revision);
            newer
        });
    }

    pub(crate) fn revisions(&self) -> watch::Receiver<u64> {
        self.revision.subscribe()
    }

    pub(crate) fn ended(&self) -> watch::Receiver<bool> {
        self.ended.subscribe()
    }

    /// Waiters currently registered (for tests and memory figures).
    pub(crate) fn waiting(&self) -> usize {
        self.state().by_seq.values().map(Vec::len).sum()
    }
}

/// A lossless stream of completions in ledger order, from a cursor (see
/// [`crate::Host::completions`]). It reads the ledger, so it survives restarts: reconnect with
/// the last cursor received and nothing is missed or repeated.
#[derive(Debug)]
pub struct Completions {
    pub(crate) reader: crate::rt::Readers,
    pub(crate) after: Cursor,
    pub(crate) newest: watch::Receiver<Cursor>,
    pub(crate) ended: watch::Receiver<bool>,
    pub(crate) buffer: VecDeque<(Cursor, CompletionRecord)>,
}

impl Completions {
    /// The next completion after the last one returned; waits for one. `None` when the host
    /// has shut down and every recorded completion was returned.
    ///
    /// # Errors
    /// [`WaitError::Store`]: the ledger could not be read; the stream stays usable (call
    /// again to retry from the same cursor).
    ///
    /// # Panics
    /// Only if reading the ledger panics (a bug), as if it ran on the caller's task.
    pub async fn next(&mut self) -> Result<Option<(Cursor, CompletionRecord)>, WaitError> {
        loop {
            if let Some(next) = self.buffer.pop_front() {
                self.after = next.0;
                return Ok(Some(next));
            }
            // Mark the newest cursor (and the end) seen *before* reading, so a commit (or the
            // end) after the read wakes us.
            self.newest.borrow_and_update();
            let ended = *self.ended.borrow_and_update();
            let after = self.after;
            let batch = crate::rt::read(&self.reader, move |r| r.completions_after(after, 256))
                .await
                .map_err(WaitError::store)?;
            if !batch.is_empty() {
                self.buffer.extend(batch);
                continue;
            }
            if ended {
                // Shut down or stopped, and everything recorded was returned.
                return Ok(None);
            }
            // Nothing new in the ledger: wait for the writer's next commit, or the end.
            tokio::select! {
                biased;
                r = self.newest.changed() => if r.is_err() { return Ok(None) },
                r = self.ended.changed() => if r.is_err() { return Ok(None) },
            }
        }
    }

    /// The cursor of the last completion returned (resume from it later).
    #[must_use]
    pub fn cursor(&self) -> Cursor {
        self.after
    }
}

#[cfg(all(test, turnstile_loom))]
mod loom_tests {
    //! `RUSTFLAGS="--cfg turnstile_loom" cargo test -p turnstile-host --lib --release loom`
    //! (its own target directory). Every interleaving of: a waiter that registers and then reads
    //! the ledger, a publisher that records the outcome in the ledger and then wakes waiters, and
    //! (in the second model) a stop. The promise: the waiter learns the outcome exactly once (or
    //! hears the stop), and is never left waiting with nothing to wake it.

    use loom::sync::{Arc, Mutex};
    use turnstile_core::{Outcome, Seq, SessionId};

    use super::Hub;
    use crate::error::{Stopped, WaitError};
    use crate::record::{CompletionRecord, Cursor};

    fn record() -> CompletionRecord {
        CompletionRecord {
            session: SessionId::new("s"),
            run_id: None,
            seq: Seq(1),
            outcome: Outcome::Completed,
            stop_reason: None,
            message_id: None,
            text: None,
            error: None,
            usage: turnstile_core::RunUsage::default(),
        }
    }

    #[test]
    fn loom_a_waiter_always_learns_the_outcome_once() {
        loom::model(|| {
            let hub = Arc::new(Hub::new(Cursor(0), 4));
            let ledger: Arc<Mutex<Option<CompletionRecord>>> = Arc::new(Mutex::new(None));
            let publisher = {
                let (hub, ledger) = (hub.clone(), ledger.clone());
                loom::thread::spawn(move || {
                    *ledger.lock().expect("ledger") = Some(record());
                    hub.committed(&[(Cursor(1), record())]);
                })
            };
            // The waiter: register first, then read the ledger (as `Host::wait_seq` does).
            let mut rx = hub.register(Seq(1)).expect("not stopped");
            let read = ledger.lock().expect("ledger").clone();
            publisher.join().expect("publisher");
            let woken = rx.try_recv().ok();
            match (read, woken) {
                (Some(r), _) => assert_eq!(r, record()),
                (None, Some(Ok(r))) => assert_eq!(r, record()),
                (None, other) => panic!("the waiter missed the outcome: {other:?}"),
            }
        });
    }

    #[test]
    fn loom_a_stop_answers_every_waiter_that_has_no_outcome() {
        loom::model(|| {
            let hub = Arc::new(Hub::new(Cursor(0), 4));
            let stopper = {
                let hub = hub.clone();
                loom::thread::spawn(move || hub.stop(&Stopped::HandlesDropped))
            };
            let registered = hub.register(Seq(1));
            stopper.join().expect("stopper");
            match registered {
                Err(WaitError::Stopped(why)) => assert_eq!(why, Stopped::HandlesDropped),
                Ok(mut rx) => match rx.try_recv() {
                    Ok(Err(WaitError::Stopped(_))) => {}
                    other => panic!("a waiter registered before the stop was not told: {other:?}"),
                },
                Err(other) => panic!("unexpected {other:?}"),
            }
        });
    }
}
