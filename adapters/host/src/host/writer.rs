//! The store writer (SPEC 4.12): the one task that writes to SQLite.
//!
//! - **Debounce.** A transaction of only streamed text (`AppendText`, `AppendReasoning`,
//!   `SummaryText`) is held per session and coalesced (consecutive appends to one message
//!   become one append) until its window (33 ms by default) has passed since its first write,
//!   or until a structural transaction of the same session arrives, which carries it first.
//! - **Group commit.** Everything ready is written in one SQLite transaction: the next batch is
//!   whatever arrived while the previous commit was syncing. Each session's transactions keep
//!   their order, and each is inside one physical transaction, so SPEC 4.12's "in the same
//!   transaction" rules hold.
//! - **Publish after commit.** Right after a commit, the outcomes it recorded wake their waiters
//!   and go to the completion stream ([`crate::events`]); the structural transactions' senders
//!   are acknowledged, which lets their sessions' later outputs proceed.
//! - **Fail-stop.** A failed commit is retried with backoff (10 ms doubling to 1 s) for a
//!   bounded time (30 s by default) while nothing else is written; if it still fails, the host
//!   stops: "engine stopped: storage failure: `<error>`".

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;
use tracing::{error, warn};
use turnstile_core::{MessageId, SessionId, StoreOp};

use crate::error::Stopped;
use crate::events::{Hub, Update};
use crate::mutants::HostMutant;
use crate::record::{CompletionRecord, Cursor};
use crate::store::lease::Epoch;
use crate::store::{Committed, Store, Txn, Write};

/// Where the acknowledgement of a structural transaction goes: the worker driving the session.
pub(crate) type Ack = Box<dyn FnOnce(Acked) + Send>;

/// What became of a structural transaction.
#[derive(Clone, Debug)]
pub(crate) enum Acked {
    /// It is durable.
    Durable,
    /// Several hosts: its lease is no longer its writer's, so it was not written; the session
    /// is dropped (its pipeline with it).
    Fenced,
    /// The store failed for good: the host stops (every waiter hears why from the hub).
    Failed,
}

/// A request to the writer.
pub(crate) enum WriteReq {
    /// One transaction of one session. `ack: None` marks a streaming-only (coalescible) one.
    Txn { txn: Txn, ack: Option<Ack> },
    /// Write everything held now (debounced streams too) and answer once it is durable.
    Flush(oneshot::Sender<Result<(), Stopped>>),
    /// Flush, checkpoint and close the store; answer with the result.
    Close(oneshot::Sender<Result<(), Stopped>>),
}

/// Counters of the writer's work (benchmarks, tests).
#[derive(Debug)]
pub struct WriterStats {
    /// Physical SQLite transactions committed.
    pub commits: AtomicU64,
    /// Logical (per-session) transactions written.
    pub txns: AtomicU64,
    /// Individual writes applied (after coalescing).
    pub writes: AtomicU64,
    /// Streamed appends received before coalescing.
    pub appends_in: AtomicU64,
    /// Commits that failed and were retried.
    pub retries: AtomicU64,
    /// Logical transactions of only streamed text, released by the debouncer.
    pub stream_txns: AtomicU64,
    /// Structural logical transactions (acknowledged when durable).
    pub durable_txns: AtomicU64,
    /// How long held streamed writes waited from their first write until their commit was
    /// durable: a histogram in 1 ms buckets, the last bucket counting everything longer.
    stream_age_ms: Box<[AtomicU64]>,
}

/// Buckets of the streamed-write age histogram (1 ms each; the last holds longer ages).
const AGE_BUCKETS: usize = 2_001;

impl Default for WriterStats {
    fn default() -> WriterStats {
        WriterStats {
            commits: AtomicU64::new(0),
            txns: AtomicU64::new(0),
            writes: AtomicU64::new(0),
            appends_in: AtomicU64::new(0),
            retries: AtomicU64::new(0),
            stream_txns: AtomicU64::new(0),
            durable_txns: AtomicU64::new(0),
            stream_age_ms: (0..AGE_BUCKETS).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

impl WriterStats {
    fn record_age(&self, age: Duration) {
        let ms = usize::try_from(age.as_millis()).unwrap_or(usize::MAX).min(AGE_BUCKETS - 1);
        self.stream_age_ms[ms].fetch_add(1, Ordering::Relaxed);
    }

    /// The `q` quantile (0.0 to 1.0) of the age of streamed writes at their commit, in whole
    /// milliseconds (rounded up to the bucket's end); `None` before any streamed write.
    #[must_use]
    pub fn stream_age_quantile_ms(&self, q: f64) -> Option<u64> {
        let counts: Vec<u64> =
            self.stream_age_ms.iter().map(|c| c.load(Ordering::Relaxed)).collect();
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return None;
        }
        // The rank of the quantile, from 1; float-to-int `as` saturates.
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (ms, c) in counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Some(ms as u64 + 1);
            }
        }
        Some(AGE_BUCKETS as u64)
    }
}

/// Writer settings.
#[derive(Clone, Copy, Debug)]
pub(crate) struct WriterConfig {
    pub(crate) debounce: Duration,
    pub(crate) armed: crate::mutants::Armed,
    /// One SQLite transaction for everything ready (true), or one per session transaction
    /// (false: the baseline the group commit is measured against).
    pub(crate) group_commit: bool,
    pub(crate) retry_for: Duration,
}

/// A session's held streaming writes.
struct Held {
    since: Instant,
    writes: Vec<Write>,
    /// A member's lease epoch they were written under.
    fence: Option<Epoch>,
}

pub(crate) struct Writer {
    store: Option<Store>,
    rx: mpsc::UnboundedReceiver<WriteReq>,
    config: WriterConfig,
    hub: Arc<Hub>,
    stats: Arc<WriterStats>,
    /// Set to why the host stops when the store failed for good.
    health: watch::Sender<Option<Stopped>>,
    held: BTreeMap<SessionId, Held>,
    /// The held sessions by the time their first held write arrived: the debounce deadlines
    /// in order, so the next one is found without scanning every held session.
    due: BTreeSet<(Instant, SessionId)>,
    /// Transactions to write next, with their acknowledgement and, when they carry held
    /// streamed writes, when the first of those was written.
    ready: Vec<(Txn, Option<Ack>, Option<Instant>)>,
    /// Callers of a flush, answered after the next write.
    flushed: Vec<oneshot::Sender<Result<(), Stopped>>>,
    /// A member's: where a session goes whose commit its fence left out (SPEC 11).
    fenced: Option<mpsc::UnboundedSender<(SessionId, Epoch)>>,
}

impl Writer {
    pub(crate) fn new(
        store: Store,
        rx: mpsc::UnboundedReceiver<WriteReq>,
        config: WriterConfig,
        hub: Arc<Hub>,
        stats: Arc<WriterStats>,
        health: watch::Sender<Option<Stopped>>,
        fenced: Option<mpsc::UnboundedSender<(SessionId, Epoch)>>,
    ) -> Writer {
        Writer {
            fenced,
            store: Some(store),
            rx,
            config,
            hub,
            stats,
            health,
            held: BTreeMap::new(),
            due: BTreeSet::new(),
            ready: Vec::new(),
            flushed: Vec::new(),
        }
    }

    pub(crate) async fn run(mut self) {
        loop {
            // Release what is due now even when the timer has not fired yet: under load the
            // runtime's timer wheel is polled late, and the window is a promise.
            self.release_due();
            if !self.ready.is_empty() {
                self.write_ready().await;
            }
            let due = self.due.first().map(|(since, _)| *since + self.config.debounce);
            tokio::select! {
                biased;
                _ = sleep_until(due), if due.is_some() => self.release_due(),
                req = self.rx.recv() => match req {
                    None => { self.release_all(); self.write_ready().await; return; }
                    Some(req) => {
                        if let Some(close) = self.take(req) {
                            self.release_all();
                            self.write_ready().await;
                            let result = self.close();
                            let _ = close.send(result);
                            return;
                        }
                        // Group commit: take everything that is already waiting.
                        while let Ok(req) = self.rx.try_recv() {
                            if let Some(close) = self.take(req) {
                                self.release_all();
                                self.write_ready().await;
                                let _ = close.send(self.close());
                                return;
                            }
                        }
                    }
                },
            }
            self.write_ready().await;
        }
    }

    /// Files one request; returns the sender of a close request.
    fn take(&mut self, req: WriteReq) -> Option<oneshot::Sender<Result<(), Stopped>>> {
        match req {
            WriteReq::Txn { txn, ack: None } => self.hold(txn),
            WriteReq::Txn { mut txn, ack: Some(ack) } => {
                let mut since = None;
                let overtakes = self.config.armed.is(HostMutant::StructuralOvertakesHeld);
                // The bug `structural_overtakes_held` leaves the held writes for later.
                let held = if overtakes { None } else { self.held.remove(&txn.session) };
                if let Some(held) = &held {
                    self.due.remove(&(held.since, txn.session.clone()));
                }
                // Held writes of a dropped take never join a later take's transaction.
                if let Some(held) = held.filter(|h| h.fence == txn.fence) {
                    let mut writes = held.writes;
                    writes.append(&mut txn.writes);
                    txn.writes = writes;
                    since = Some(held.since);
                }
                self.ready.push((txn, Some(ack), since));
            }
            WriteReq::Flush(done) => {
                self.release_all();
                self.flushed.push(done);
            }
            WriteReq::Close(done) => return Some(done),
        }
        None
    }

    /// Holds a streaming transaction, coalescing consecutive appends to the same message.
    fn hold(&mut self, txn: Txn) {
        let now = Instant::now();
        if let Some(old) = self.held.get(&txn.session).filter(|h| h.fence != txn.fence) {
            // Held writes of a dropped take are discarded, never written under a new one.
            self.due.remove(&(old.since, txn.session.clone()));
            self.held.remove(&txn.session);
        }
        let due = &mut self.due;
        let fence = txn.fence;
        let held = self.held.entry(txn.session).or_insert_with_key(|session| {
            due.insert((now, session.clone()));
            Held { since: now, writes: Vec::new(), fence }
        });
        for w in txn.writes {
            self.stats.appends_in.fetch_add(1, Ordering::Relaxed);
            if let (Some(last), Write::Op(next)) = (held.writes.last_mut(), &w)
                && coalesce(last, next)
            {
                continue;
            }
            held.writes.push(w);
        }
    }

    fn release_due(&mut self) {
        let Some(first) = self.due.first() else { return };
        let now = Instant::now();
        if first.0 + self.config.debounce > now {
            return;
        }
        while let Some((since, session)) = self.due.pop_first() {
            if since + self.config.debounce > now {
                self.due.insert((since, session));
                break;
            }
            if let Some(h) = self.held.remove(&session) {
                // Held writes keep their epoch: a member's every write is fenced (SPEC 11).
                // The bug `member_held_unfenced` writes them without it.
                let unfenced = self.config.armed.is(HostMutant::MemberHeldUnfenced);
                let fence = if unfenced { None } else { h.fence };
                self.ready.push((Txn { session, writes: h.writes, fence }, None, Some(h.since)));
            }
        }
    }

    fn release_all(&mut self) {
        self.due.clear();
        for (session, h) in std::mem::take(&mut self.held) {
            self.ready.push((
                Txn { session, writes: h.writes, fence: h.fence },
                None,
                Some(h.since),
            ));
        }
    }

    /// Commits everything ready as one transaction (or one per session transaction without
    /// group commit), then publishes and acknowledges.
    async fn write_ready(&mut self) {
        if self.config.group_commit {
            let ready = std::mem::take(&mut self.ready);
            self.write_batch(ready).await;
        } else {
            for one in std::mem::take(&mut self.ready) {
                self.write_batch(vec![one]).await;
            }
        }
        let result = match self.health.borrow().clone() {
            Some(why) => Err(why),
            None => Ok(()),
        };
        for f in self.flushed.drain(..) {
            let _ = f.send(result.clone());
        }
    }

    /// Commits one batch (retrying, then failing stop), then publishes and acknowledges.
    async fn write_batch(&mut self, batch: Vec<(Txn, Option<Ack>, Option<Instant>)>) {
        if batch.is_empty() {
            return;
        }
        let mut txns = Vec::with_capacity(batch.len());
        let mut acks = Vec::with_capacity(batch.len());
        let mut since = Vec::new();
        for (txn, ack, first) in batch {
            txns.push(txn);
            acks.push(ack);
            since.extend(first);
        }
        let early = self.config.armed.is(HostMutant::PublishBeforeCommit);
        if early {
            // The bug: outcomes are published before the commit that records them.
            let provisional: Vec<Cursor> = (0..outcome_count(&txns)).map(|_| Cursor(0)).collect();
            self.hub.committed(&outcomes(&txns, &provisional));
        }
        let result = self.commit_with_retry(txns).await;
        match result {
            Ok((mut txns, committed)) => {
                let cursors = committed.cursors;
                // What the fence left out was not written: nothing of it is published or
                // acknowledged (the session is dropped, and its pipeline with it).
                for &i in committed.fenced.iter().rev() {
                    let txn = txns.remove(i);
                    if let Some(ack) = acks.remove(i) {
                        ack(Acked::Fenced);
                    }
                    if let (Some(tx), Some(epoch)) = (&self.fenced, txn.fence) {
                        let _ = tx.send((txn.session, epoch));
                    }
                }
                let now = Instant::now();
                for first in since {
                    self.stats.record_age(now.saturating_duration_since(first));
                }
                let durable = acks.iter().filter(|a| a.is_some()).count() as u64;
                self.stats.commits.fetch_add(1, Ordering::Relaxed);
                self.stats.txns.fetch_add(txns.len() as u64, Ordering::Relaxed);
                self.stats.durable_txns.fetch_add(durable, Ordering::Relaxed);
                self.stats.stream_txns.fetch_add(txns.len() as u64 - durable, Ordering::Relaxed);
                let writes: usize = txns.iter().map(|t| t.writes.len()).sum();
                self.stats.writes.fetch_add(writes as u64, Ordering::Relaxed);
                if !early {
                    self.hub.committed(&outcomes(&txns, &cursors));
                }
                if let Some(store) = &self.store {
                    self.hub.revised(store.revision());
                }
                announce(&self.hub, &txns);
                for ack in acks.into_iter().flatten() {
                    ack(Acked::Durable);
                }
            }
            Err(why) => {
                // Fail-stop: nothing more will be written. Release the store (and its owner
                // lock) at once, so the next start's recovery can decide the outcomes.
                error!(
                    reason = %why,
                    txns = acks.len(),
                    "store write failed for good: fail-stop, the host stops"
                );
                self.store = None;
                self.hub.stop(&why);
                self.health.send_replace(Some(why.clone()));
                for ack in acks.into_iter().flatten() {
                    ack(Acked::Failed);
                }
            }
        }
    }

    /// Commits, retrying with backoff for the configured time. The error is why the host
    /// stops ("engine stopped: storage failure: <error>").
    async fn commit_with_retry(
        &mut self,
        mut txns: Vec<Txn>,
    ) -> Result<(Vec<Txn>, Committed), Stopped> {
        if let Some(why) = self.health.borrow().clone() {
            return Err(why);
        }
        let started = Instant::now();
        let mut delay = Duration::from_millis(10);
        // This batch's retries so far (for the logs).
        let mut retry = 0_u32;
        loop {
            // The store is gone only after a failure, which answered above.
            let Some(mut store) = self.store.take() else { return Err(Stopped::WriterEnded) };
            let joined = crate::rt::blocking(move || {
                // A panicking commit loses the store (released without a commit) and stops
                // the host, with or without the simulator.
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    store.commit_fenced(&txns)
                }));
                r.map(|r| (store, txns, r))
                    .map_err(|payload| crate::rt::panic_message(payload.as_ref()))
            })
            .await;
            let (store, back, result) = match joined {
                Ok(Ok(parts)) => parts,
                Ok(Err(panicked)) => return Err(Stopped::WriterPanicked(panicked)),
                Err(e) => return Err(Stopped::storage(e)),
            };
            self.store = Some(store);
            txns = back;
            match result {
                Ok(cursors) => return Ok((txns, cursors)),
                Err(e) if started.elapsed() < self.config.retry_for => {
                    self.stats.retries.fetch_add(1, Ordering::Relaxed);
                    retry += 1;
                    let left = self.config.retry_for.saturating_sub(started.elapsed());
                    warn!(
                        error = %e,
                        retry,
                        delay_ms = u64::try_from(delay.min(left).as_millis()).unwrap_or(u64::MAX),
                        txns = txns.len(),
                        "store write failed: retrying"
                    );
                    tokio::time::sleep(delay.min(left)).await;
                    delay = (delay * 2).min(Duration::from_secs(1));
                }
                Err(e) => {
                    warn!(error = %e, txns = txns.len(), "store write failed: no retry time left");
                    return Err(Stopped::storage(e));
                }
            }
        }
    }

    fn close(&mut self) -> Result<(), Stopped> {
        match self.store.take() {
            Some(store) => store.close().map_err(|e| {
                error!(error = %e, "the store could not be closed");
                Stopped::storage(e)
            }),
            None => Ok(()),
        }
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Appends `next` to `last` when both append to the same message; true when it did.
fn coalesce(last: &mut Write, next: &StoreOp) -> bool {
    match (last, next) {
        (
            Write::Op(StoreOp::AppendText { id: a, text, .. }),
            StoreOp::AppendText { id: b, text: more, .. },
        )
        | (
            Write::Op(StoreOp::AppendReasoning { id: a, text, .. }),
            StoreOp::AppendReasoning { id: b, text: more, .. },
        )
        | (
            Write::Op(StoreOp::SummaryText { id: a, text, .. }),
            StoreOp::SummaryText { id: b, text: more, .. },
        ) if a == b => {
            text.push_str(more);
            true
        }
        _ => false,
    }
}

/// The number of outcomes a batch records.
fn outcome_count(txns: &[Txn]) -> usize {
    txns.iter()
        .flat_map(|t| &t.writes)
        .filter(|w| matches!(w, Write::Op(StoreOp::LedgerOutcome { .. })))
        .count()
}

/// The outcomes a batch recorded, with the cursors the store assigned, in order.
fn outcomes(txns: &[Txn], cursors: &[Cursor]) -> Vec<(Cursor, CompletionRecord)> {
    let completions = txns.iter().flat_map(|t| &t.writes).filter_map(|w| match w {
        Write::Op(StoreOp::LedgerOutcome { completion }) => {
            Some(CompletionRecord::from(completion))
        }
        _ => None,
    });
    debug_assert_eq!(outcome_count(txns), cursors.len(), "one cursor per recorded outcome");
    cursors.iter().copied().zip(completions).collect()
}

/// Live updates for the messages a batch wrote to (one per message and transaction).
fn announce(hub: &Hub, txns: &[Txn]) {
    if hub.updates.receiver_count() == 0 {
        return;
    }
    for t in txns {
        let mut seen: Vec<MessageId> = Vec::new();
        for w in &t.writes {
            if let Some(id) = message_of(w)
                && !seen.contains(&id)
            {
                seen.push(id);
                let _ = hub
                    .updates
                    .send(Update::MessageUpdated { session: t.session.clone(), message: id });
            }
        }
    }
}

fn message_of(w: &Write) -> Option<MessageId> {
    let Write::Op(op) = w else { return None };
    match op {
        StoreOp::UserMessage { id, .. }
        | StoreOp::AssistantMessage { id, .. }
        | StoreOp::ReasoningStarted { id, .. }
        | StoreOp::AppendReasoning { id, .. }
        | StoreOp::ReasoningEnded { id, .. }
        | StoreOp::ToolInputStarted { id, .. }
        | StoreOp::MessageReset { id, .. }
        | StoreOp::AppendText { id, .. }
        | StoreOp::ToolCall { id, .. }
        | StoreOp::ToolResult { id, .. }
        | StoreOp::MessageFinished { id, .. }
        | StoreOp::SummaryMessage { id, .. }
        | StoreOp::SummaryText { id, .. }
        | StoreOp::SummaryReset { id, .. }
        | StoreOp::SummaryDone { id, .. }
        | StoreOp::SummaryFailed { id, .. }
        | StoreOp::SummaryDeleted { id, .. } => Some(*id),
        _ => None,
    }
}
