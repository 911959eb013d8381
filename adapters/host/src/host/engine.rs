//! The engine task: the one owner of the core engine of a store (SPEC 2, 4.12).
//!
//! It feeds inputs one at a time with the runtime's time, drains the outputs, and routes them:
//! replies to their callers (an acceptance through the session's worker, after its ledger row
//! is durable), timers to its own timer table, everything else to the worker that drives the
//! output's session. It never waits on IO, a worker or a subscriber; only the bounded inbox
//! applies back-pressure to whoever sends inputs.
//!
//! One engine per store keeps SPEC's engine-wide rules (sequences in acceptance order, RunIds,
//! sub-agents that span sessions) exactly as the core implements them; the core takes
//! microseconds per input, and the IO around it runs on the workers.
//!
//! It is also where the host logs what the core decided ("Logs" in the crate docs): every
//! output is looked at once as it is routed ([`Logs::output`]), with the RunId of
//! its submission, and a failure reported by an input is kept until the outputs of the same
//! transition say what became of it (a retry, a credential refresh, the end of the turn).
//! Logging reads the outputs and never changes what is done with them or in which order.

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;
use tracing::{debug, error, info, trace, warn};
use turnstile_core::{
    HostError, Input, Millis, OutputClass, OutputKind, Rejection, Reply, RunId, SessionId,
    StepEvent, StoreOp, Submit, TimerId, TimerPurpose,
};

use super::command::{Command, Msg, Submitted};
use super::command::{MemberMsg, Work};
use super::cores::{Cores, input_session};
use super::log::{self as named, Logs};
use super::worker::{Action, Lane, Routed, WorkerMsg};
use super::writer::WriteReq;
use crate::error::{InvalidRequest, Stopped, SubmitError};
use crate::events::{Hub, Update};
use crate::store::lease::Epoch;
use crate::store::{NewRun, Write};

/// Who waits for the reply of the input being handled.
enum Caller {
    None,
    /// A member fed its core a submission or command from the ledger (SPEC 11): the caller
    /// was answered by the host that wrote the row.
    Ledger,
    Submit(Submit, oneshot::Sender<Result<Submitted, SubmitError>>),
    Summarize(oneshot::Sender<Result<(), SubmitError>>),
}

pub(crate) struct EngineTask {
    /// The one engine of the store, or a member's engine per owned session.
    pub(crate) cores: Cores,
    pub(crate) started: Instant,
    pub(crate) inbox: mpsc::Receiver<Msg>,
    pub(crate) workers: Vec<mpsc::UnboundedSender<WorkerMsg>>,
    pub(crate) writer: mpsc::UnboundedSender<WriteReq>,
    pub(crate) hub: Arc<Hub>,
    pub(crate) health: watch::Receiver<Option<Stopped>>,
    /// Armed timers with their deadlines and purposes: at most one per aborting turn or backoff
    /// and one per streaming attempt (its watchdog, SPEC 4.5), plus the shutdown deadline.
    /// Keyed by the owned session whose engine armed it (a member's engines each number their
    /// timers), `None` for the one engine.
    pub(crate) timers: BTreeMap<(Option<SessionId>, TimerId), (Millis, TimerPurpose)>,
    /// The RunIds of unfinished submissions accepted by this engine, for the logs' `run_id`
    /// field; entered at acceptance, left at the submission's `Finished`.
    /// What the logs keep (the RunIds of unfinished submissions).
    pub(crate) logs: Logs,
    /// Last announced (busy, queue length) of sessions that are busy; idle ones are forgotten.
    pub(crate) known: BTreeMap<SessionId, (bool, usize)>,
    /// Callers of `shutdown`, answered when the engine stopped and everything is durable.
    pub(crate) stopping: Vec<oneshot::Sender<Result<(), Stopped>>>,
    /// The parent of every running sub-agent's child session: a child's outputs go through
    /// its parent's lane (see [`Lane`]). Entered at `ChildAccepted`, left after the transition
    /// in which the child finished.
    pub(crate) parents: BTreeMap<SessionId, SessionId>,
    /// The last step attempt started per session (its submission and attempt index), for the
    /// same update.
    pub(crate) attempts: BTreeMap<SessionId, (turnstile_core::Seq, u32)>,
}

impl EngineTask {
    pub(crate) async fn run(mut self) {
        loop {
            let due = self
                .timers
                .values()
                .map(|(d, _)| *d)
                .min()
                .map(|d| self.started + std::time::Duration::from_millis(d.0));
            tokio::select! {
                biased;
                changed = self.health.changed() => {
                    if changed.is_err() {
                        self.hub.stop(&Stopped::WriterEnded);
                        break;
                    }
                    if self.health.borrow().is_some() {
                        break;
                    }
                }
                _ = sleep_until(due), if due.is_some() => self.fire_due(),
                msg = self.inbox.recv() => match msg {
                    None => {
                        self.hub.stop(&Stopped::HandlesDropped);
                        break;
                    }
                    Some(msg) => self.on_msg(msg),
                },
            }
            if self.hub.stopped().is_some() {
                // The engine failed for good, or the store did.
                break;
            }
            if self.cores.is_stopped() && !self.stopping.is_empty() {
                self.finish_shutdown().await;
                return;
            }
        }
        self.abandon().await;
    }

    /// Ends without a clean shutdown: stops the workers (which abort their IO), lets the writer
    /// write what it holds and release the store, and answers everyone left. Whatever was not
    /// recorded is decided by the next start's recovery.
    async fn abandon(&mut self) {
        self.workers.clear();
        let (tx, rx) = oneshot::channel();
        if self.writer.send(WriteReq::Close(tx)).is_ok() {
            let _ = rx.await;
        }
        let why = self.hub.stopped().unwrap_or(Stopped::TaskEnded);
        if matches!(why, Stopped::HandlesDropped) {
            warn!(reason = %why, "host stopped");
        } else {
            error!(reason = %why, "host stopped");
        }
        for s in self.stopping.drain(..) {
            let _ = s.send(Err(why.clone()));
        }
    }

    fn now(&self) -> Millis {
        Millis(u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX))
    }

    fn fire_due(&mut self) {
        let now = self.now();
        let due: Vec<(Option<SessionId>, TimerId)> =
            self.timers.iter().filter(|(_, (d, _))| *d <= now).map(|(k, _)| k.clone()).collect();
        for key in due {
            let purpose = self.timers.remove(&key).map(|(_, purpose)| purpose);
            let (scope, timer) = key;
            trace!(timer = timer.0, ?purpose, "timer fired");
            self.transition(scope.as_ref(), Input::TimerFired { timer }, Caller::None, purpose);
        }
    }

    fn on_msg(&mut self, msg: Msg) {
        match msg {
            Msg::Input(input) => self.feed(input, Caller::None),
            Msg::Member(m) => self.on_member(m),
            Msg::Command(cmd) => match cmd {
                Command::Submit(submit, reply) => {
                    let run_id = submit.run_id.as_ref().map(RunId::as_str);
                    debug!(session = %submit.session, run_id, "submission received");
                    self.feed(Input::Submit(submit.clone()), Caller::Submit(submit, reply));
                }
                Command::Steer(mut submit, reply) => {
                    let session = submit.session.clone();
                    let running =
                        self.cores.engine_of(&session).is_some_and(|e| e.has_active_turn(&session));
                    if running {
                        // Folded at the running turn's next step (SPEC 4.3): a fold has no RunId.
                        submit.run_id = None;
                        submit.mode = Some(turnstile_core::Mode::Fold);
                    }
                    debug!(session = %session, running, "steer received");
                    self.feed(Input::Submit(submit.clone()), Caller::Submit(submit, reply));
                }
                Command::Cancel(session) => {
                    info!(session = %session, "cancel requested");
                    self.feed(Input::Cancel { session, up_to: None }, Caller::None)
                }
                Command::CancelRun(run_id) => {
                    info!(run_id = run_id.as_str(), "cancel_run requested");
                    self.feed(Input::CancelRun { run_id }, Caller::None)
                }
                Command::ClearQueue(session) => {
                    info!(session = %session, "clear_queue requested");
                    self.feed(Input::ClearQueue { session }, Caller::None)
                }
                Command::Summarize(session, reply) => {
                    info!(session = %session, "summarize requested");
                    self.feed(Input::Summarize { session }, Caller::Summarize(reply));
                }
                Command::IsBusy(session, reply) => {
                    let busy = self.cores.engine_of(&session).is_some_and(|e| e.is_busy(&session));
                    let _ = reply.send(busy);
                }
                Command::BeginWork(call, reply) => {
                    self.feed(Input::ToolStarted { call: call.clone() }, Caller::None);
                    let began = self.cores.is_tool_started(&call);
                    debug!(session = %call.session, call = call.call.as_str(), began, "tool work");
                    let _ = reply.send(began);
                }
                Command::Shutdown(reply) => {
                    info!("shutdown requested");
                    self.stopping.push(reply);
                    match self.cores.begin_shutdown() {
                        None if !self.cores.is_stopped() => {
                            self.feed(Input::Shutdown, Caller::None);
                        }
                        None => {}
                        Some(owned) => {
                            for session in owned {
                                self.transition(
                                    Some(&session),
                                    Input::Shutdown,
                                    Caller::None,
                                    None,
                                );
                            }
                        }
                    }
                }
            },
        }
    }

    /// One transition of an input that is not a timer's firing.
    fn feed(&mut self, input: Input, caller: Caller) {
        self.transition(None, input, caller, None);
    }

    /// A member's coordination (SPEC 11): a session taken, new work for it, or a session that
    /// is no longer this host's.
    fn on_member(&mut self, m: MemberMsg) {
        match m {
            MemberMsg::Adopt { session, epoch, next_message, work } => {
                if self.cores.adopt(&session, epoch, next_message) {
                    info!(session = %session, epoch = epoch.0, "session taken: its core starts");
                    self.feed_work(&session, work);
                }
            }
            MemberMsg::Feed { session, epoch, work } => {
                if self.cores.runs_at(&session, epoch) {
                    self.feed_work(&session, work);
                }
            }
            MemberMsg::Drop { session, epoch } => self.drop_session(&session, epoch),
            MemberMsg::ReleaseIfIdle { session, epoch, reply } => {
                let idle = self.cores.runs_at(&session, epoch)
                    && self
                        .cores
                        .engine_of(&session)
                        .is_some_and(|e| !e.is_busy(&session) && e.queue_len(&session) == 0);
                if idle {
                    self.cores.drop_session(&session, epoch);
                    self.forget(&session);
                    info!(session = %session, epoch = epoch.0, "idle session released");
                }
                let _ = reply.send(idle);
            }
        }
    }

    /// Feeds an owned session's core what was accepted for it, in the ledger's order. A
    /// command is marked applied after everything its transition wrote (with its last
    /// transaction, or alone): a crash before the mark is durable leaves it to be applied again
    /// by the next owner, which covers exactly what the first application did not make durable
    /// (the submissions at or below its watermark still waiting), so nothing it decided is
    /// lost, and nothing above its watermark is touched.
    fn feed_work(&mut self, session: &SessionId, work: Vec<Work>) {
        for w in work {
            match w {
                Work::Submit(run) => {
                    let input = Input::Submit(run.submit());
                    self.transition(Some(session), input, Caller::Ledger, None);
                }
                Work::Command(c) => {
                    use crate::store::cluster::CommandKind;
                    let id = c.id;
                    let input = match c.kind {
                        // A watermark of none: the session had nothing when it was cancelled.
                        CommandKind::Cancel => c.up_to.map(|up_to| Input::Cancel {
                            session: session.clone(),
                            up_to: Some(up_to),
                        }),
                        CommandKind::CancelRun(run_id) => Some(Input::CancelRun { run_id }),
                        CommandKind::ClearQueue => {
                            Some(Input::ClearQueue { session: session.clone() })
                        }
                        CommandKind::Summarize => {
                            Some(Input::Summarize { session: session.clone() })
                        }
                    };
                    info!(session = %session, command = c.id, up_to = c.up_to.map(|s| s.0), "command applied");
                    if let Some(input) = input {
                        self.transition(Some(session), input, Caller::Ledger, None);
                    }
                    self.send_now(session, Action::Closing(Write::CommandApplied(id)));
                }
            }
        }
    }

    /// Drops a session that is no longer this host's at `epoch`: its core and timers are
    /// forgotten and its worker aborts its IO and discards what it had not written (SPEC 11:
    /// nothing more is written for it).
    fn drop_session(&mut self, session: &SessionId, epoch: Epoch) {
        if !self.cores.drop_session(session, epoch) {
            return;
        }
        warn!(session = %session, epoch = epoch.0, "session dropped: its lease is no longer this host's");
        self.forget(session);
    }

    /// Forgets what the engine task kept for a session whose core is gone.
    fn forget(&mut self, session: &SessionId) {
        self.timers.retain(|(scope, _), _| scope.as_ref() != Some(session));
        self.known.remove(session);
        self.attempts.remove(session);
        let lane = Lane(session.clone());
        let w = self.worker_of(&lane);
        let _ = self.workers[w].send(WorkerMsg::Drop(lane));
    }

    /// Routes one action of `session` to its worker at once.
    fn send_now(&self, session: &SessionId, action: Action) {
        let mut batches: Vec<Vec<Routed>> = (0..self.workers.len()).map(|_| Vec::new()).collect();
        self.route(&mut batches, session.clone(), action);
        for (w, batch) in batches.into_iter().enumerate() {
            if !batch.is_empty() {
                let _ = self.workers[w].send(WorkerMsg::Actions(batch));
            }
        }
    }

    /// One transition: handle the input (in the engine of `scope`, or of the input's session),
    /// then route every output it produced. `fired` is the purpose of the timer whose firing
    /// the input reports (for the logs).
    fn transition(
        &mut self,
        scope: Option<&SessionId>,
        input: Input,
        mut caller: Caller,
        fired: Option<TimerPurpose>,
    ) {
        let now = self.now();
        // The key of the timers this transition arms: the session whose engine handles it.
        let timer_scope = match &self.cores {
            Cores::One(_) => None,
            Cores::Owned(_) => scope.or_else(|| input_session(&input)).cloned(),
        };
        let mut failure = self.logs.input(&input);
        // The idle timeout, when the input is the firing of a stream watchdog.
        let watchdog = matches!(fired, Some(TimerPurpose::StreamIdle { .. }))
            .then(|| self.cores.config().stream_idle_timeout_ms);
        // What a backoff armed in this transition retries after (SPEC 4.5), for the live
        // `Retrying` update.
        let failed = match &input {
            Input::Step { event: StepEvent::Failed { error }, .. } => Some(error.message.clone()),
            _ => watchdog.map(turnstile_core::stream_idle_message),
        };
        // A call whose arguments are not valid JSON is stored with `{}` (SPEC 4.4, the core's
        // decision, by the same test); what the model sent is kept beside it for people.
        let mut raw_input = match &input {
            Input::Step { step, event: StepEvent::ToolCall { id, input, .. } }
                if serde_json::from_str::<serde_json::Value>(input).is_err() =>
            {
                Some((step.session.clone(), id.clone(), input.clone()))
            }
            _ => None,
        };
        let outputs = match self.cores.handle(scope, now, input) {
            Ok(outputs) => outputs,
            Err(e) => {
                // Host misuse (a request that does not fit this engine, or a bug in this host)
                // leaves the engine unchanged; a failure (a bug in the core, a counter at its
                // maximum) fails it for good. Either way nothing was decided: tell the caller, and
                // stop on a failure.
                let failed = matches!(e, HostError::Internal(_) | HostError::Exhausted { .. });
                if failed {
                    error!(error = %e, "engine failed for good");
                } else {
                    warn!(error = %e, "engine refused an input");
                }
                let answer = if failed {
                    SubmitError::Stopped(Stopped::Engine(e.clone()))
                } else {
                    SubmitError::Invalid(InvalidRequest::Refused(e.clone()))
                };
                match caller {
                    Caller::Submit(_, reply) => drop(reply.send(Err(answer))),
                    Caller::Summarize(reply) => drop(reply.send(Err(answer))),
                    Caller::None | Caller::Ledger => {}
                }
                if failed {
                    self.hub.stop(&Stopped::Engine(e));
                }
                return;
            }
        };
        let mut batches: Vec<Vec<Routed>> = (0..self.workers.len()).map(|_| Vec::new()).collect();
        let mut touched: Vec<SessionId> = Vec::new();
        let mut ended: Vec<SessionId> = Vec::new();
        for out in outputs {
            if let Some(s) = out.kind.session()
                && !touched.contains(s)
            {
                touched.push(s.clone());
            }
            self.logs.output(&out.kind, now, &mut failure, watchdog);
            match out.kind {
                OutputKind::Reply(reply) => self.reply(reply, &mut caller, &mut batches),
                OutputKind::SetTimer { timer, deadline, purpose } => {
                    if let (TimerPurpose::Retry { session, .. }, Some(reason)) = (&purpose, &failed)
                    {
                        let delay_ms = deadline.0.saturating_sub(now.0);
                        self.retrying(&mut batches, session.clone(), delay_ms, reason);
                    }
                    self.timers.insert((timer_scope.clone(), timer), (deadline, purpose));
                }
                OutputKind::CancelTimer { timer } => {
                    self.timers.remove(&(timer_scope.clone(), timer));
                }
                OutputKind::Stopped => {}
                kind => {
                    let Some(session) = kind.session().cloned() else {
                        // Every output a host must answer or perform concerns a session.
                        debug_assert_eq!(kind.class(), OutputClass::MayIgnore, "{kind:?}");
                        continue;
                    };
                    if let OutputKind::Store(StoreOp::ChildAccepted { parent, .. }) = &kind {
                        self.parents.insert(session.clone(), parent.clone());
                    }
                    if matches!(kind, OutputKind::Finished(_)) {
                        ended.push(session.clone());
                    }
                    if let OutputKind::StartStep { step } = &kind {
                        self.attempts.insert(session.clone(), (step.seq, step.attempt));
                    }
                    let raw = match (&kind, &raw_input) {
                        (
                            OutputKind::Store(StoreOp::ToolCall { session: s, id, call, .. }),
                            Some((rs, rc, _)),
                        ) if s == rs && call == rc => raw_input.take().map(|(_, call, raw)| {
                            crate::store::Write::RawInput { message: *id, call, raw }
                        }),
                        _ => None,
                    };
                    self.route(&mut batches, session.clone(), Action::Output(kind));
                    if let Some(w) = raw {
                        // In the same transaction, right after the call's own write.
                        self.route(&mut batches, session, Action::Write(w));
                    }
                }
            }
        }
        // A finished child gets no output after its transition: only now is its lane forgotten,
        // so nothing of that transition can take another lane.
        for session in ended {
            self.parents.remove(&session);
            self.attempts.remove(&session);
        }
        for (w, batch) in batches.into_iter().enumerate() {
            if !batch.is_empty() {
                let _ = self.workers[w].send(WorkerMsg::Actions(batch));
            }
        }
        self.announce(touched);
    }

    fn reply(&mut self, reply: Reply, caller: &mut Caller, batches: &mut [Vec<Routed>]) {
        match (reply, std::mem::replace(caller, Caller::None)) {
            (Reply::Accepted { session, seq, run_id, mode }, Caller::Submit(submit, reply)) => {
                self.logs.accepted(&session, seq, run_id.as_ref(), mode);
                let submitted = Submitted {
                    session: session.clone(),
                    seq,
                    run_id: run_id.clone(),
                    mode: Some(mode),
                    existing: false,
                    outcome: None,
                };
                // The fingerprint the core compared, not a second computation of it.
                let fingerprint = run_id
                    .as_ref()
                    .and_then(|r| self.cores.engine_of(&session)?.run_fingerprint(r));
                let run = NewRun {
                    session: session.clone(),
                    seq,
                    run_id,
                    mode,
                    prompt: submit.prompt,
                    attachments: submit.attachments,
                    fingerprint,
                };
                self.route(batches, session, Action::Accept { run, submitted, reply });
            }
            // A reply about an existing run waits behind that run's session's earlier writes, so
            // it never reveals a run (or an outcome) that is not durable yet.
            (Reply::Existing { session, seq, run_id, outcome }, Caller::Submit(_, reply)) => {
                info!(
                    session = %session,
                    seq = seq.0,
                    run_id = run_id.as_str(),
                    outcome = outcome.map(named::outcome),
                    "resubmission answered with the existing run"
                );
                let result = Ok(Submitted {
                    session: session.clone(),
                    seq,
                    run_id: Some(run_id),
                    mode: None,
                    existing: true,
                    outcome,
                });
                self.route(batches, session, Action::Reply { reply, result });
            }
            (
                Reply::Rejected { error: Rejection::RunIdConflict(run_id) },
                Caller::Submit(submit, reply),
            ) => {
                let error = Rejection::RunIdConflict(run_id.clone());
                warn!(
                    session = %submit.session,
                    run_id = run_id.as_str(),
                    reason = %error,
                    "submission rejected"
                );
                let result = Err(SubmitError::Rejected(error));
                match self.cores.run_session(&run_id).cloned() {
                    Some(session) => self.route(batches, session, Action::Reply { reply, result }),
                    None => drop(reply.send(result)),
                }
            }
            (Reply::Rejected { error }, Caller::Submit(submit, reply)) => {
                warn!(
                    session = %submit.session,
                    run_id = submit.run_id.as_ref().map(RunId::as_str),
                    reason = %error,
                    "submission rejected"
                );
                let _ = reply.send(Err(SubmitError::Rejected(error)));
            }
            (Reply::Rejected { error }, Caller::Summarize(reply)) => {
                warn!(reason = %error, "summarize rejected");
                let _ = reply.send(Err(SubmitError::Rejected(error)));
            }
            (Reply::Summarizing { session }, Caller::Summarize(reply)) => {
                info!(session = %session, "summarization accepted");
                let _ = reply.send(Ok(()));
            }
            // A member's core was fed from the ledger: the host that wrote the row answered.
            (Reply::Accepted { session, seq, run_id, mode }, Caller::Ledger) => {
                self.logs.accepted(&session, seq, run_id.as_ref(), mode);
            }
            (Reply::Rejected { error }, Caller::Ledger) => {
                warn!(reason = %error, "a request from the ledger was refused");
            }
            (Reply::Summarizing { session }, Caller::Ledger) => {
                info!(session = %session, "summarization accepted");
            }
            (reply, other) => {
                debug_assert!(false, "a reply {reply:?} without its caller");
                *caller = other;
            }
        }
    }

    /// Queues `action` of `session` for the worker of its lane.
    fn route(&self, batches: &mut [Vec<Routed>], session: SessionId, action: Action) {
        let lane = Lane(self.parents.get(&session).unwrap_or(&session).clone());
        let w = self.worker_of(&lane);
        let fence = self.cores.fence_of(&session);
        batches[w].push(Routed { lane, session, action, fence });
    }

    /// The worker that drives `lane`: a stable hash, so a lane always goes to one task.
    fn worker_of(&self, lane: &Lane) -> usize {
        let h = lane.0.as_str().bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        usize::try_from(h % self.workers.len() as u64).unwrap_or(0)
    }

    /// Live updates for sessions whose busy state or queue length changed.
    /// Publishes a retry of `session`'s current step (the attempt that failed is the last one
    /// started), through the session's pipeline: after the failed attempt's writes.
    fn retrying(
        &self,
        batches: &mut [Vec<Routed>],
        session: SessionId,
        delay_ms: u64,
        reason: &str,
    ) {
        let Some(&(seq, attempt)) = self.attempts.get(&session) else { return };
        let update = Update::Retrying {
            session: session.clone(),
            seq,
            attempt: attempt.saturating_add(2),
            delay_ms,
            reason: reason.to_owned(),
        };
        self.route(batches, session, Action::Announce { hub: self.hub.clone(), update });
    }

    fn announce(&mut self, touched: Vec<SessionId>) {
        for session in touched {
            let now = self
                .cores
                .engine_of(&session)
                .map_or((false, 0), |e| (e.is_busy(&session), e.queue_len(&session)));
            let before = self.known.get(&session).copied().unwrap_or((false, 0));
            if now == before {
                continue;
            }
            if now.0 != before.0 {
                let _ = self
                    .hub
                    .updates
                    .send(Update::BusyChanged { session: session.clone(), busy: now.0 });
            }
            if now.1 != before.1 {
                let _ = self
                    .hub
                    .updates
                    .send(Update::QueueChanged { session: session.clone(), len: now.1 });
            }
            if now == (false, 0) {
                self.known.remove(&session);
            } else {
                self.known.insert(session, now);
            }
        }
    }

    /// The engine stopped: wait until every worker performed its outputs and the writer made
    /// them durable, close the store, and answer the callers of `shutdown`.
    async fn finish_shutdown(&mut self) {
        for w in &self.workers {
            let (tx, rx) = oneshot::channel();
            if w.send(WorkerMsg::Drain(tx)).is_ok() {
                let _ = rx.await;
            }
        }
        let (tx, rx) = oneshot::channel();
        let result = if self.writer.send(WriteReq::Close(tx)).is_ok() {
            rx.await.unwrap_or(Err(Stopped::WriterEnded))
        } else {
            Err(Stopped::WriterEnded)
        };
        let result = match (result, self.hub.stopped()) {
            (_, Some(why)) => Err(why),
            (r, None) => r,
        };
        match &result {
            Ok(()) => {
                info!("host shut down");
                self.hub.close();
            }
            Err(why) => error!(reason = %why, "shutdown failed"),
        }
        for s in self.stopping.drain(..) {
            let _ = s.send(result.clone());
        }
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

impl Drop for EngineTask {
    /// However the task ends (a panic included), nobody may be left waiting: unless the host
    /// shut down cleanly, every waiter hears that the engine stopped.
    fn drop(&mut self) {
        if !self.hub.is_closed() {
            self.hub.stop(&Stopped::TaskEnded);
        }
    }
}
