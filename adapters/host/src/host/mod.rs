//! The tokio host (SPEC 9): owns the engine of one store and performs its outputs.
//!
//! ```text
//!  clients ──Command──▶ ┌────────────┐ ──Action──▶ worker 0 ─┐  IO tasks (provider, tools)
//!  IO tasks ──Input──▶  │ engine task│ ──Action──▶ worker 1 ─┤──────┐  report Inputs ──▶ engine
//!                       └────────────┘                        │      │
//!                          timers                    Txn ─────▼──────┘
//!                                                   ┌─────────────┐  commit ▶ publish, ack
//!                                                   │ store writer│  (debounce, group commit)
//!                                                   └─────────────┘
//! ```
//!
//! - `config` — how to run a host ([`HostConfig`]) and the flight recorder's shelves.
//! - `command` — what the engine task hears: clients' commands, IO inputs, the member task.
//! - `engine` — the one task that owns the core engines: inputs in, outputs routed.
//! - `log` — what the engine task logs as it routes (the events' names and fields).
//! - `driver` — an engine, recording its flight trace or not.
//! - `cores` — which core decides a session: the store's one engine, or (a member of several
//!   hosts) an engine per owned session.
//! - `member` — a member's leases: take, renew, feed, drop and release its sessions.
//! - `worker` — per-session pipelines and IO; a session always goes to the same worker.
//! - `writer` — the store's one writer: debounce, group commit, publish after commit,
//!   fail-stop.
//!
//! Determinism under the simulator: every `select!` here is `biased;`, there is no mutable
//! global, no map iteration decides an order that reaches the engine (maps are `BTreeMap`s),
//! and time comes from the runtime.

mod command;
mod config;
mod cores;
mod driver;
mod engine;
mod log;
mod member;
mod worker;
mod writer;

use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, oneshot, watch};
use turnstile_core::{Mode, Rejection, RunId, Seq, SessionId, Submit};

pub use command::Submitted;
pub(crate) use command::{Command, Msg};
pub use config::{Flight, FlightBuffer, FlightShelf, HostConfig};
pub use member::MemberConfig;
pub use writer::WriterStats;

use crate::error::{InvalidRequest, OpenError, Stopped, SubmitError, WaitError};
use crate::events::{Completions, Hub, Updates};
use crate::provider::Provider;
use crate::record::{CompletionRecord, Cursor};
use crate::store::{Reader, RunState, Store, StoreError};
use crate::tool::ToolSet;

/// A running host. Cheap to clone; every clone talks to the same engine.
#[derive(Clone, Debug)]
pub struct Host {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    inbox: mpsc::Sender<Msg>,
    hub: Arc<Hub>,
    reader: crate::rt::Readers,
    stats: Arc<WriterStats>,
    /// The store writer, for `flush`. Weak: the writer ends when the engine task does.
    writer: mpsc::WeakUnboundedSender<writer::WriteReq>,
    recovered: Vec<(Cursor, CompletionRecord)>,
    /// A member's acceptor (SPEC 11); `None` for a host alone.
    member: Option<Acceptor>,
}

/// How a member accepts: submissions and commands go to the ledger, on a connection of their
/// own, and wake this host's member task.
#[derive(Debug)]
struct Acceptor {
    coordinator: Arc<Mutex<crate::store::cluster::Coordinator>>,
    /// This host's member task, woken at each accept (`None`: notifications are off).
    wake: Option<Arc<tokio::sync::Notify>>,
    /// Stops the listener thread when the host goes.
    listening: Arc<std::sync::atomic::AtomicBool>,
    /// Set by `shutdown`: this host accepts nothing more ("workspace closing").
    closing: std::sync::atomic::AtomicBool,
}

impl Acceptor {
    /// Runs a coordinator call on a blocking thread.
    async fn call<T: Send + 'static>(
        &self,
        f: impl FnOnce(&crate::store::cluster::Coordinator) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, SubmitError> {
        let c = self.coordinator.clone();
        let run = move || f(&c.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
        match crate::rt::blocking(run).await {
            Ok(Ok(t)) => Ok(t),
            Ok(Err(e)) | Err(e) => Err(SubmitError::Store(Arc::new(e))),
        }
    }

    /// Writes a command for the owner to apply (SPEC 11), and wakes this host's member task.
    async fn command(
        &self,
        session: Option<SessionId>,
        kind: crate::store::cluster::CommandKind,
    ) -> Result<(), SubmitError> {
        let wrote = self.call(move |c| c.command(session.as_ref(), &kind)).await?;
        if let (true, Some(wake)) = (wrote, &self.wake) {
            wake.notify_one();
        }
        Ok(())
    }
}

impl Drop for Acceptor {
    fn drop(&mut self) {
        self.listening.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

impl Host {
    /// Opens the store (taking its owner lock and running crash recovery), starts the engine
    /// from its ledger, and spawns the engine task, the workers and the store writer on the
    /// current runtime.
    ///
    /// # Errors
    /// [`OpenError::Store`]: the store is in use by another process ("store is in use by
    /// another turnstile process", and no recovery ran), its lock file or database cannot be
    /// opened (the error names the file), or it is unreadable; [`OpenError::Engine`]: the
    /// configuration or the ledger's start state is invalid; [`OpenError::Trace`]: the flight
    /// recorder's file cannot be created (the error names it).
    ///
    /// # Panics
    /// Only if opening the store panics (a bug), as if it ran on the caller's task.
    pub async fn open(
        config: HostConfig,
        provider: Arc<dyn Provider>,
        tools: ToolSet,
    ) -> Result<Host, OpenError> {
        if let Some(member) = &config.member {
            if matches!(config.trace, Some(Flight::File(_) | Flight::Memory(_))) {
                return Err(OpenError::Member(
                    "a member runs a core per owned session: its flight recorder is `Flight::Engines`, one trace each",
                ));
            }
            if tools.offers_agent() {
                return Err(OpenError::Member(
                    "sub-agents take their sequences from the core (SPEC 4.10), so a member does not offer the agent tool",
                ));
            }
            if member.host.is_empty() {
                return Err(OpenError::Member("a member needs a host name"));
            }
        }
        let store_config = config.store.clone();
        let reader_count = config.readers.max(1);
        let member_name = config.member.as_ref().map(|m| (m.host.clone(), m.idle_in_transaction()));
        // Opening and the first reads are blocking work (a PostgreSQL client must not block
        // a thread of the async runtime).
        let opening = move || -> Result<_, StoreError> {
            let opened = match &member_name {
                None => Opening::Alone(Box::new(Store::open(&store_config)?)),
                Some((host, idle)) => {
                    let (store, coordinator) = Store::open_member(&store_config, host, *idle)?;
                    let acceptor =
                        crate::store::cluster::Coordinator::open(&store_config, host, *idle)?;
                    Opening::Member(Box::new(Member { store, coordinator, acceptor }))
                }
            };
            let mut readers = Vec::new();
            for _ in 0..reader_count {
                readers.push(opened.store().reader()?);
            }
            // A read connection of their own for the workers (requests, preparation), so that
            // clients' reads do not queue behind them.
            let worker_reader = opened.store().reader()?;
            let newest = readers[0].newest_cursor()?;
            Ok((opened, readers, worker_reader, newest))
        };
        let (opened, readers, worker_reader, newest) = match crate::rt::blocking(opening).await {
            Ok(Ok(opened)) => opened,
            Ok(Err(e)) | Err(e) => {
                tracing::error!(error = %e, "the store could not be opened");
                return Err(e.into());
            }
        };
        let (store, cores, recovered, coordination) = match opened {
            Opening::Alone(opened) => {
                log_recovery(&opened.recovered, opened.start.runs.len());
                let cores = cores::Cores::One(driver::open(&config, &opened.start)?);
                (opened.store, cores, opened.recovered, None)
            }
            Opening::Member(m) => {
                let recording = match &config.trace {
                    Some(Flight::Engines(shelf)) => Some((shelf.clone(), config.trace_outputs)),
                    _ => None,
                };
                let cores = cores::Cores::owned(config.engine.clone(), recording);
                (m.store, cores, Vec::new(), Some((m.coordinator, m.acceptor)))
            }
        };
        let hub = Arc::new(Hub::new(newest, config.updates_capacity));
        hub.revised(store.revision());
        let stats = Arc::new(WriterStats::default());
        let (health_tx, health_rx) = watch::channel(None);
        let (write_tx, write_rx) = mpsc::unbounded_channel();
        let weak_writer = write_tx.downgrade();
        let armed = config.store.armed();
        let writer_config = writer::WriterConfig {
            debounce: config.debounce,
            armed,
            group_commit: config.group_commit,
            retry_for: config.store_retry,
        };
        let (fenced_tx, fenced_rx) = mpsc::unbounded_channel();
        let writer = writer::Writer::new(
            store,
            write_rx,
            writer_config,
            hub.clone(),
            stats.clone(),
            health_tx,
            coordination.is_some().then_some(fenced_tx),
        );
        tokio::spawn(writer.run());
        let (inbox_tx, inbox_rx) = mpsc::channel(config.inbox_capacity.max(1));
        let reader = crate::rt::Readers::new(readers);
        let deadlines =
            coordination.is_some().then(|| member::Deadlines::new(config.store.armed()));
        let ctx = Arc::new(worker::Ctx {
            provider,
            tools,
            reader: crate::rt::Readers::new(vec![worker_reader]),
            inbox: inbox_tx.downgrade(),
            writer: write_tx.clone(),
            armed,
            deadlines: deadlines.clone(),
        });
        let mut workers = Vec::new();
        for _ in 0..config.workers.max(1) {
            let (tx, rx) = mpsc::unbounded_channel();
            tokio::spawn(worker::Worker::new(ctx.clone(), rx, tx.clone()).run());
            workers.push(tx);
        }
        let member = match (coordination, &config.member) {
            (Some((coordinator, acceptor)), Some(member)) => {
                let wake = Arc::new(tokio::sync::Notify::new());
                let listening = Arc::new(std::sync::atomic::AtomicBool::new(false));
                #[cfg(not(madsim))]
                if let (true, crate::store::Location::Postgres(url)) =
                    (member.notifications, &config.store.location)
                {
                    // Without the listener the poll still finds everything, later.
                    if let Err(e) = member::listen(url.clone(), wake.clone(), listening.clone()) {
                        tracing::warn!(error = %e, "the notification listener could not start");
                    }
                }
                let task = member::Membership {
                    config: member.clone(),
                    coordinator: Arc::new(Mutex::new(coordinator)),
                    inbox: inbox_tx.downgrade(),
                    hub: hub.clone(),
                    wake: wake.clone(),
                    fenced: fenced_rx,
                    ended: hub.ended(),
                    armed: config.store.armed(),
                    deadlines: deadlines.clone().unwrap_or_default(),
                    stale: Vec::new(),
                    after_seq: 0,
                    after_command: 0,
                    after_cursor: newest,
                };
                tokio::spawn(task.run());
                Some(Acceptor {
                    coordinator: Arc::new(Mutex::new(acceptor)),
                    wake: member.notifications.then_some(wake),
                    listening,
                    closing: std::sync::atomic::AtomicBool::new(false),
                })
            }
            _ => None,
        };
        let task = engine::EngineTask {
            cores,
            started: tokio::time::Instant::now(),
            inbox: inbox_rx,
            workers,
            writer: write_tx,
            hub: hub.clone(),
            health: health_rx,
            timers: Default::default(),
            logs: Default::default(),
            known: Default::default(),
            stopping: Vec::new(),
            parents: Default::default(),
            attempts: Default::default(),
        };
        tokio::spawn(task.run());
        let inner =
            Inner { inbox: inbox_tx, hub, reader, stats, writer: weak_writer, recovered, member };
        Ok(Host { inner: Arc::new(inner) })
    }

    /// Sends a command to the engine task. After a clean shutdown the answer is SPEC 4.10's
    /// "workspace closing"; after a stop, the stop.
    async fn send(&self, cmd: Command) -> Result<(), SubmitError> {
        self.inner.inbox.send(Msg::Command(cmd)).await.map_err(|_| self.gone())
    }

    fn gone(&self) -> SubmitError {
        match self.ended() {
            Ok(()) => SubmitError::Rejected(Rejection::WorkspaceClosing),
            Err(why) => SubmitError::Stopped(why),
        }
    }

    /// For an engine task that is gone: `Ok` after a clean shutdown, else why it stopped.
    fn ended(&self) -> Result<(), Stopped> {
        if self.inner.hub.is_closed() { Ok(()) } else { Err(self.stop_reason()) }
    }

    /// A cancel-like command: after a clean shutdown nothing is unfinished, so it is a no-op.
    async fn send_cancel(&self, cmd: Command) -> Result<(), SubmitError> {
        match self.send(cmd).await {
            Err(SubmitError::Rejected(Rejection::WorkspaceClosing)) => Ok(()),
            other => other,
        }
    }

    fn stop_reason(&self) -> Stopped {
        // The engine task records why it ends before it goes (also when it panics), so the
        // fallback is for the task ending in a way that left no word.
        self.inner.hub.stopped().unwrap_or(Stopped::TaskEnded)
    }

    /// Hands a prompt to a session (SPEC 4.1). Answers once the submission's ledger row is
    /// durable: its sequence and RunId, or the existing run for a byte-equal resubmission.
    ///
    /// # Errors
    /// [`SubmitError::Rejected`] with SPEC section 8's text ("workspace closing" after a
    /// shutdown); [`SubmitError::Invalid`] ([`InvalidRequest::Refused`]) for a submission the
    /// engine refuses as misuse, such as one that brings its own sequence while the engine
    /// assigns them; [`SubmitError::Stopped`] when the host stopped.
    pub async fn submit(&self, submit: Submit) -> Result<Submitted, SubmitError> {
        if let Some(member) = &self.inner.member {
            return self.accept(member, submit).await;
        }
        // What the engine would refuse first, kept for when it is gone: SPEC 4.1's order
        // still holds then ("workspace closing" after the checks of the submission itself).
        let checked = turnstile_core::validate(&submit);
        let refused = |checked: Result<(), Rejection>| match checked {
            Err(rejection) => SubmitError::Rejected(rejection),
            Ok(()) => self.gone(),
        };
        let (tx, rx) = oneshot::channel();
        if self.send(Command::Submit(submit, tx)).await.is_err() {
            return Err(refused(checked));
        }
        rx.await.unwrap_or_else(|_| Err(refused(checked)))
    }

    /// Steers a running turn (SPEC 4.3): when the session has a turn running, the prompt is a
    /// submission without a RunId that folds into it at its next step (`mode` of the answer:
    /// `fold`; it ends `folded`, or runs as a turn of its own if the turn ends first, and has no
    /// RunComplete); when none runs, it is `submit` as given (`own_turn`, with its RunId).
    /// Decided in order with every other input, so no turn can start or end in between.
    ///
    /// # Errors
    /// As [`Host::submit`]; on one of several hosts, [`InvalidRequest::MembersOnly`] (the
    /// session's owner, not the accepting host, knows whether a turn runs).
    pub async fn steer(&self, submit: Submit) -> Result<Submitted, SubmitError> {
        if self.inner.member.is_some() {
            return Err(SubmitError::Invalid(InvalidRequest::MembersOnly("steer")));
        }
        let checked = turnstile_core::validate(&submit);
        let (tx, rx) = oneshot::channel();
        let refused = |checked: Result<(), Rejection>| match checked {
            Err(rejection) => SubmitError::Rejected(rejection),
            Ok(()) => self.gone(),
        };
        if self.send(Command::Steer(submit, tx)).await.is_err() {
            return Err(refused(checked));
        }
        rx.await.unwrap_or_else(|_| Err(refused(checked)))
    }

    /// A member's acceptance (SPEC 11): the submission's ledger row, written on this host
    /// and answered once durable; the session's owner (this host or another) runs it.
    async fn accept(&self, member: &Acceptor, submit: Submit) -> Result<Submitted, SubmitError> {
        use crate::store::cluster::Accepted;
        use std::sync::atomic::Ordering;
        turnstile_core::validate(&submit).map_err(SubmitError::Rejected)?;
        if submit.seq.is_some() {
            let reason = "the ledger assigns sequences; a submission must not bring one";
            let e = turnstile_core::HostError::WrongAcceptor { reason };
            return Err(SubmitError::Invalid(InvalidRequest::Refused(e)));
        }
        if let Some(why) = self.inner.hub.stopped() {
            return Err(SubmitError::Stopped(why));
        }
        if member.closing.load(Ordering::Relaxed) || self.inner.hub.is_closed() {
            return Err(SubmitError::Rejected(Rejection::WorkspaceClosing));
        }
        let mode =
            if submit.run_id.is_some() { Mode::OwnTurn } else { submit.mode.unwrap_or(Mode::Fold) };
        let row = submit.clone();
        match member.call(move |c| c.accept(&row, mode)).await? {
            Accepted::New(seq) => {
                tracing::info!(
                    session = %submit.session,
                    seq = seq.0,
                    run_id = submit.run_id.as_ref().map(RunId::as_str),
                    "submission accepted into the ledger"
                );
                if let Some(wake) = &member.wake {
                    wake.notify_one();
                }
                Ok(Submitted {
                    session: submit.session,
                    seq,
                    run_id: submit.run_id,
                    mode: Some(mode),
                    existing: false,
                    outcome: None,
                })
            }
            Accepted::Existing { session, seq, outcome } => Ok(Submitted {
                session,
                seq,
                run_id: submit.run_id,
                mode: None,
                existing: true,
                outcome,
            }),
            Accepted::Conflict => {
                let run_id = submit.run_id.unwrap_or_else(|| RunId::new(""));
                Err(SubmitError::Rejected(Rejection::RunIdConflict(run_id)))
            }
        }
    }

    /// Cancels the session's unfinished submissions accepted so far (SPEC 4.10).
    ///
    /// On a member of several hosts (SPEC 11), the cancel is a ledger row with the session's
    /// newest sequence as its watermark, which the session's owner applies.
    ///
    /// # Errors
    /// The host stopped; a member's ledger could not be written.
    pub async fn cancel(&self, session: &SessionId) -> Result<(), SubmitError> {
        if let Some(member) = &self.inner.member {
            let kind = crate::store::cluster::CommandKind::Cancel;
            return member.command(Some(session.clone()), kind).await;
        }
        self.send_cancel(Command::Cancel(session.clone())).await
    }

    /// Cancels exactly one run; a finished or unknown run is a no-op (SPEC 4.10).
    ///
    /// # Errors
    /// The host stopped; a member's ledger could not be written.
    pub async fn cancel_run(&self, run_id: &RunId) -> Result<(), SubmitError> {
        if let Some(member) = &self.inner.member {
            let kind = crate::store::cluster::CommandKind::CancelRun(run_id.clone());
            return member.command(None, kind).await;
        }
        self.send_cancel(Command::CancelRun(run_id.clone())).await
    }

    /// Ends every waiting submission of the session `cancelled`; the active turn goes on.
    ///
    /// # Errors
    /// The host stopped; a member's ledger could not be written.
    pub async fn clear_queue(&self, session: &SessionId) -> Result<(), SubmitError> {
        if let Some(member) = &self.inner.member {
            let kind = crate::store::cluster::CommandKind::ClearQueue;
            return member.command(Some(session.clone()), kind).await;
        }
        self.send_cancel(Command::ClearQueue(session.clone())).await
    }

    /// Whether this host is one of several over its store (SPEC 11, [`HostConfig::member`]).
    #[must_use]
    pub fn is_member(&self) -> bool {
        self.inner.member.is_some()
    }

    /// The acceptor of a member; a host alone has none.
    fn member(&self, what: &'static str) -> Result<&Acceptor, SubmitError> {
        self.inner.member.as_ref().ok_or(SubmitError::Invalid(InvalidRequest::NotAMember(what)))
    }

    /// Several hosts: shares a pending permission ask of one of this host's calls, so every
    /// host lists it and any host may answer it ([`Host::close_shared_ask`]). `body` is how
    /// clients see it (JSON).
    ///
    /// # Errors
    /// [`InvalidRequest::NotAMember`] on a host alone; [`SubmitError::Store`].
    pub async fn share_ask(
        &self,
        id: &str,
        session: &SessionId,
        body: String,
    ) -> Result<(), SubmitError> {
        let member = self.member("asks are shared only among several hosts")?;
        let (id, session) = (id.to_owned(), session.clone());
        member.call(move |c| c.open_ask(&id, &session, &body)).await
    }

    /// Several hosts: answers a shared ask with `answer` (JSON), or withdraws it (`None`). The
    /// store decides once: the first close wins, and later ones hear how it closed.
    ///
    /// # Errors
    /// [`InvalidRequest::NotAMember`] on a host alone; [`SubmitError::Store`].
    pub async fn close_shared_ask(
        &self,
        id: &str,
        answer: Option<String>,
    ) -> Result<crate::store::AskClosing, SubmitError> {
        let member = self.member("asks are shared only among several hosts")?;
        let id = id.to_owned();
        member.call(move |c| c.close_ask(&id, answer.as_deref())).await
    }

    /// Several hosts: the shared asks changed after revision `after`, in the order they
    /// changed (read again after each new revision, [`Host::revisions`]).
    ///
    /// # Errors
    /// [`InvalidRequest::NotAMember`] on a host alone; [`SubmitError::Store`].
    pub async fn shared_asks_after(
        &self,
        after: u64,
    ) -> Result<Vec<crate::store::AskRow>, SubmitError> {
        let member = self.member("asks are shared only among several hosts")?;
        member.call(move |c| c.asks_after(after)).await
    }

    /// Summarizes the session now (SPEC 4.7), unless it is busy.
    ///
    /// # Errors
    /// [`SubmitError::Rejected`] ("session is currently processing another request");
    /// [`SubmitError::Invalid`] with [`InvalidRequest::SessionNotFound`] ("session not found:
    /// `<id>`") for a session the store does not hold (there is nothing to summarize, and its
    /// summary message would belong to no session); [`SubmitError::Store`] when the store
    /// could not be read to tell; [`SubmitError::Stopped`].
    pub async fn summarize(&self, session: &SessionId) -> Result<(), SubmitError> {
        let s = session.clone();
        let known = self.read(move |r| Ok(r.session(&s)?.is_some())).await;
        match known {
            Ok(true) => {}
            Ok(false) => {
                return Err(SubmitError::Invalid(InvalidRequest::SessionNotFound(session.clone())));
            }
            Err(e) => return Err(SubmitError::Store(Arc::new(e))),
        }
        if let Some(member) = &self.inner.member {
            // The ledger says whether it is busy; the owner may still find it busy when the
            // request reaches it (and then logs the refusal).
            let s = session.clone();
            if member.call(move |c| c.has_work(&s)).await? {
                return Err(SubmitError::Rejected(Rejection::Busy));
            }
            let kind = crate::store::cluster::CommandKind::Summarize;
            return member.command(Some(session.clone()), kind).await;
        }
        let (tx, rx) = oneshot::channel();
        self.send(Command::Summarize(session.clone(), tx)).await?;
        rx.await.unwrap_or_else(|_| Err(self.gone()))
    }

    /// True while the session has an active turn, a summarization or anything waiting (SPEC 3).
    ///
    /// # Errors
    /// The host stopped.
    pub async fn is_busy(&self, session: &SessionId) -> Result<bool, SubmitError> {
        if let Some(member) = &self.inner.member {
            let s = session.clone();
            return member.call(move |c| c.has_work(&s)).await;
        }
        let (tx, rx) = oneshot::channel();
        match self.send(Command::IsBusy(session.clone(), tx)).await {
            // After a clean shutdown nothing is busy.
            Err(SubmitError::Rejected(Rejection::WorkspaceClosing)) => return Ok(false),
            other => other?,
        }
        rx.await.map_err(|_| self.gone())
    }

    /// The RunComplete of `run_id`, waiting for it if the run is unfinished: whether called
    /// before, during or long after the run, or after a restart (the ledger is read).
    ///
    /// # Errors
    /// [`WaitError::NotFound`] ("run not found: `<id>`") for a RunId never accepted, at once;
    /// [`WaitError::Stopped`] when the host stopped before the run finished;
    /// [`WaitError::Store`] when the ledger could not be read.
    pub async fn wait(&self, run_id: &RunId) -> Result<CompletionRecord, WaitError> {
        let row = self.read_run(run_id.clone()).await?;
        let Some(row) = row else { return Err(WaitError::NotFound(run_id.clone())) };
        if let Some((_, record)) = row.completion {
            return Ok(record);
        }
        self.wait_seq(row.seq).await
    }

    /// The completion of the submission with this sequence (with or without a RunId), waiting
    /// for it if unfinished.
    ///
    /// # Errors
    /// As [`Host::wait`], with [`WaitError::SeqNotFound`] ("run not found: seq `<n>`") for a
    /// sequence never accepted.
    pub async fn wait_seq(&self, seq: Seq) -> Result<CompletionRecord, WaitError> {
        // Register first, then read: a commit after the read wakes the waiter; a commit before
        // it is in the ledger. The guard forgets the waiter however this future ends.
        // Declared before the receiver, so it is dropped after it and sees the waiter gone.
        let _guard = WaitGuard { hub: &self.inner.hub, seq };
        // When stopped, the ledger may still hold the outcome: only an unfinished run is
        // answered with the stop.
        let rx = self.inner.hub.register(seq).ok();
        let row = self.read_seq(seq).await?;
        match (row, rx) {
            (None, _) => Err(WaitError::SeqNotFound(seq)),
            (Some(row), _) if row.state == RunState::Finished => {
                row.completion.map(|(_, r)| r).ok_or_else(|| {
                    WaitError::store(StoreError::Corrupt(format!(
                        "ledger row {seq} is finished without a completion"
                    )))
                })
            }
            (Some(_), None) => Err(WaitError::Stopped(self.stop_reason())),
            (Some(_), Some(rx)) => {
                rx.await.unwrap_or_else(|_| Err(WaitError::Stopped(self.stop_reason())))
            }
        }
    }

    async fn read_seq(&self, seq: Seq) -> Result<Option<crate::store::RunRow>, WaitError> {
        self.read(move |r| r.run_by_seq(seq)).await.map_err(WaitError::store)
    }

    async fn read_run(&self, run_id: RunId) -> Result<Option<crate::store::RunRow>, WaitError> {
        self.read(move |r| r.run(&run_id)).await.map_err(WaitError::store)
    }

    /// Live updates (lossy): messages changed, busy and queue changes, finished turns.
    #[must_use]
    pub fn subscribe(&self) -> Updates {
        Updates { rx: self.inner.hub.updates.subscribe(), ended: self.inner.hub.ended() }
    }

    /// The store's newest committed revision, as it advances: changed after every commit, once
    /// the commit is durable. What changed is read with
    /// [`Reader::changes`](crate::store::Reader::changes) (through [`Host::read`]); a
    /// receiver that looks rarely sees only the newest value, which loses nothing, because
    /// the changes are read from the store.
    #[must_use]
    pub fn revisions(&self) -> watch::Receiver<u64> {
        self.inner.hub.revisions()
    }

    /// Every completion recorded after `after`, in ledger order, then new ones as they commit
    /// (lossless; `Cursor(0)` for all).
    #[must_use]
    pub fn completions(&self, after: Cursor) -> Completions {
        Completions {
            reader: self.inner.reader.clone(),
            after,
            newest: self.inner.hub.newest(),
            ended: self.inner.hub.ended(),
            buffer: Default::default(),
        }
    }

    /// The outcomes crash recovery decided when this host opened its store.
    #[must_use]
    pub fn recovered(&self) -> &[(Cursor, CompletionRecord)] {
        &self.inner.recovered
    }

    /// The store writer's counters.
    #[must_use]
    pub fn writer_stats(&self) -> &WriterStats {
        &self.inner.stats
    }

    /// Completion waiters registered now.
    #[must_use]
    pub fn waiters(&self) -> usize {
        self.inner.hub.waiting()
    }

    /// Runs a query on the host's read connection (history, sessions, ledger), off the async
    /// threads. The connection reads committed data only; it also works after the host
    /// stopped or shut down.
    ///
    /// # Errors
    /// The query's [`StoreError`]; [`StoreError::Cancelled`] if the runtime is shutting down.
    ///
    /// # Panics
    /// If `f` panics, the panic is resumed here, as if `f` ran on the caller's task.
    pub async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Reader) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        crate::rt::read(&self.inner.reader, f).await
    }

    /// Shuts down (SPEC 4.10): new submissions are rejected ("workspace closing"), every
    /// unfinished submission ends `interrupted` (active ones after their clean-up or the 5 s
    /// deadline), everything is made durable, and the store is closed (releasing its lock).
    ///
    /// Idempotent: after a clean shutdown, it answers `Ok` again.
    ///
    /// # Errors
    /// Why the host stopped, when it stopped before or during the shutdown
    /// ([`Stopped::Storage`] also when the store could not be closed); the next start's
    /// recovery decides what was unfinished.
    pub async fn shutdown(&self) -> Result<(), Stopped> {
        if let Some(member) = &self.inner.member {
            member.closing.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        let (tx, rx) = oneshot::channel();
        if self.inner.inbox.send(Msg::Command(Command::Shutdown(tx))).await.is_err() {
            return self.ended();
        }
        rx.await.unwrap_or_else(|_| self.ended())
    }

    /// Writes every held (debounced) streamed write now and returns once everything sent to
    /// the store so far is durable: the flush-all of SPEC 9. After a clean shutdown
    /// everything is durable already, and it answers `Ok`.
    ///
    /// # Errors
    /// Why the host stopped, when it stopped before everything was durable.
    pub async fn flush(&self) -> Result<(), Stopped> {
        // The writer may be gone, or go while answering: after a clean shutdown everything is
        // durable already, so that is a success; otherwise the host stopped.
        let (tx, rx) = oneshot::channel();
        let Some(writer) = self.inner.writer.upgrade() else { return self.ended() };
        if writer.send(writer::WriteReq::Flush(tx)).is_err() {
            return self.ended();
        }
        drop(writer);
        rx.await.unwrap_or_else(|_| self.ended())
    }

    /// Why the host stopped, once it stopped (a storage failure, an engine failure, every
    /// handle dropped); `None` while it runs and after a clean shutdown.
    #[must_use]
    pub fn stopped(&self) -> Option<Stopped> {
        self.inner.hub.stopped()
    }
}

/// What opening the store gave: the store of a host alone (with its recovery), or a member's
/// writer and its two coordination connections (the member task's and the acceptor's).
enum Opening {
    Alone(Box<crate::store::Opened>),
    Member(Box<Member>),
}

/// A member's writer and its two coordination connections.
struct Member {
    store: Store,
    coordinator: crate::store::cluster::Coordinator,
    acceptor: crate::store::cluster::Coordinator,
}

impl Opening {
    fn store(&self) -> &Store {
        match self {
            Opening::Alone(o) => &o.store,
            Opening::Member(m) => &m.store,
        }
    }
}

/// Logs what crash recovery on open did: one event per submission it ended `interrupted`,
/// then the count.
fn log_recovery(recovered: &[(Cursor, CompletionRecord)], runs: usize) {
    for (_, r) in recovered {
        tracing::info!(
            session = %r.session,
            seq = r.seq.0,
            run_id = r.run_id.as_ref().map(RunId::as_str),
            activated = r.message_id.is_some(),
            "recovery: an unfinished submission ended interrupted"
        );
    }
    tracing::info!(interrupted = recovered.len(), known_runs = runs, "store opened; recovery done");
}

/// Forgets a registered waiter when the wait ends in any way (answered, failed, or the
/// caller's future dropped), so abandoned waits do not pile up.
struct WaitGuard<'a> {
    hub: &'a Hub,
    seq: Seq,
}

impl Drop for WaitGuard<'_> {
    fn drop(&mut self) {
        self.hub.prune(self.seq);
    }
}
