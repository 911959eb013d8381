//! Workers: each drives the IO of the sessions routed to it (SPEC 4.12 order per session).
//!
//! A session always goes to the same worker, so one task performs all of its outputs, in the
//! core's order, through its **pipeline**: writes accumulate into the open transaction; a
//! `Commit` sends it to the store writer, and a structural one blocks the pipeline until it is
//! durable ("commit it now, before performing any later output that concerns the session"), so
//! a step starts only after its activation is durable and builds its request from the store.
//! A commit of only streamed text does not block: the writer debounces it. Independent
//! sessions on different workers proceed in parallel.
//!
//! A sub-agent's child session shares its parent's pipeline (its [`Lane`]): the child's end is
//! the parent's tool result, so the child's outcome is durable before the parent's result that
//! carries it, and a crash never leaves a parent that used a result its child's ledger row
//! does not have. Each session keeps its own open transaction inside the lane.
//!
//! IO runs in spawned tasks that report to the engine as inputs naming the IO exactly; an
//! abort drops the task (closing its stream), and a late report is ignored by the core. Each
//! task runs in a span naming its IO (`prepare`, `provider_stream`, `summary_stream`,
//! `tool_call`, `credential_refresh`, `title`), so what a provider or a tool logs is
//! attributed to its session and call.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};
use tokio::task::AbortHandle;
use tracing::{Instrument as _, Span, debug, debug_span, warn};
use turnstile_core::{
    AttemptIo, CallIo, ErrorClass, Input, OutputClass, OutputKind, ProviderError, Seq, SessionId,
    Setup, StepEvent, StepIo, SummaryIo, ToolOutput,
};

use super::command::{Msg, Submitted};
use super::writer::WriteReq;
use crate::error::SubmitError;
use crate::history;
use crate::mutants::HostMutant;
use crate::provider::{EngineTarget, EventSink, ModelRequest, Provider, RequestKind};
use crate::store::lease::Epoch;
use crate::store::{NewRun, Txn, Write};
use crate::tool::{ToolCall, ToolSet, WorkGate};

/// What the engine task hands a worker.
pub(crate) enum Action {
    /// An output of the core, for a session of this worker.
    Output(OutputKind),
    /// A new submission: write its ledger row, make it durable, then answer the caller.
    Accept {
        run: NewRun,
        submitted: Submitted,
        reply: oneshot::Sender<Result<Submitted, SubmitError>>,
    },
    /// Answer a caller once the session's earlier writes are durable.
    Reply {
        reply: oneshot::Sender<Result<Submitted, SubmitError>>,
        result: Result<Submitted, SubmitError>,
    },
    /// Publish a live update once the session's earlier outputs were performed (their
    /// transactions handed to the store writer): a retry is announced after the failed
    /// attempt's text, so a reader that flushes and reads the store on it sees that text.
    Announce { hub: Arc<crate::events::Hub>, update: crate::events::Update },
    /// A write of the host's own, into the session's open transaction.
    Write(Write),
    /// A write of the host's own that follows everything routed before it: into the session's
    /// open transaction when one is open (it commits with it), else in a transaction of its
    /// own, committed at once (a member's mark of an applied command).
    Closing(Write),
}

/// The pipeline a session's actions go through: the session's own, or for a sub-agent's
/// child session its parent's (sub-agents have depth 1, SPEC 4.11).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Lane(pub(crate) SessionId);

/// One action, with the session it concerns and the lane that orders it.
pub(crate) struct Routed {
    pub(crate) lane: Lane,
    pub(crate) session: SessionId,
    pub(crate) action: Action,
    /// A member's lease epoch for the session: its transactions are fenced with it.
    pub(crate) fence: Option<Epoch>,
}

/// A worker's inbox.
pub(crate) enum WorkerMsg {
    /// Actions for lanes of this worker, in the core's order.
    Actions(Vec<Routed>),
    /// What became of a structural transaction of a session in `lane`, written under `fence`.
    Committed { lane: Lane, fence: Option<Epoch>, result: super::writer::Acked },
    /// A member's session is no longer its own: abort its IO, discard what it did not write.
    Drop(Lane),
    /// Answer once every pipeline is empty, then end (shutdown).
    Drain(oneshot::Sender<()>),
}

/// What the IO tasks need.
pub(crate) struct Ctx {
    pub(crate) provider: Arc<dyn Provider>,
    pub(crate) tools: ToolSet,
    pub(crate) reader: crate::rt::Readers,
    /// Weak: IO tasks must not keep the engine alive once every `Host` handle is gone.
    pub(crate) inbox: mpsc::WeakSender<Msg>,
    pub(crate) writer: mpsc::UnboundedSender<WriteReq>,
    pub(crate) armed: crate::mutants::Armed,
    /// A member's: until when it acts for each session it holds; no IO starts past it.
    pub(crate) deadlines: Option<super::member::Deadlines>,
}

/// The running IO a later abort names.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum IoKey {
    Prepare(SessionId, Seq),
    Step(StepIo),
    Tool(CallIo),
    Refresh(AttemptIo),
    Summary(SummaryIo),
    Title(SessionId, Seq),
}

impl IoKey {
    /// The session the IO is for.
    fn session(&self) -> &SessionId {
        match self {
            IoKey::Prepare(s, _) | IoKey::Title(s, _) => s,
            IoKey::Step(step) => &step.session,
            IoKey::Tool(call) => &call.session,
            IoKey::Refresh(attempt) => attempt.session(),
            IoKey::Summary(io) => &io.session,
        }
    }
}

/// One lane's ordered work.
#[derive(Default)]
struct Pipeline {
    queue: VecDeque<(SessionId, Action)>,
    /// Each session's open transaction (the writes since its last `Commit`).
    open: BTreeMap<SessionId, Vec<Write>>,
    /// Waiting for a structural commit to be durable.
    blocked: bool,
    /// A member's lease epoch for the lane's sessions (a new take starts a new pipeline).
    fence: Option<Epoch>,
}

pub(crate) struct Worker {
    ctx: Arc<Ctx>,
    rx: mpsc::UnboundedReceiver<WorkerMsg>,
    /// For commit acknowledgements; weak, so the worker ends when the engine task is gone.
    me: mpsc::WeakUnboundedSender<WorkerMsg>,
    pipelines: BTreeMap<Lane, Pipeline>,
    io: BTreeMap<IoKey, AbortHandle>,
    /// Finished IO tasks are swept from `io` when it grows past this (then doubled), so the
    /// sweep stays amortised O(1) per task.
    sweep_at: usize,
    drains: Vec<oneshot::Sender<()>>,
}

impl Worker {
    pub(crate) fn new(
        ctx: Arc<Ctx>,
        rx: mpsc::UnboundedReceiver<WorkerMsg>,
        me: mpsc::UnboundedSender<WorkerMsg>,
    ) -> Worker {
        Worker {
            ctx,
            rx,
            me: me.downgrade(),
            pipelines: BTreeMap::new(),
            io: BTreeMap::new(),
            sweep_at: 1024,
            drains: Vec::new(),
        }
    }

    pub(crate) async fn run(mut self) {
        self.serve().await;
        // Nothing can report to the engine any more: stop every IO task (they hold the
        // writer's and the engine's senders).
        for (_, io) in std::mem::take(&mut self.io) {
            io.abort();
        }
    }

    async fn serve(&mut self) {
        while let Some(msg) = self.rx.recv().await {
            match msg {
                WorkerMsg::Actions(actions) => {
                    let mut touched: Vec<Lane> = Vec::new();
                    for Routed { lane, session, action, fence } in actions {
                        let p = self.pipelines.entry(lane.clone()).or_default();
                        p.fence = fence;
                        p.queue.push_back((session, action));
                        if touched.last() != Some(&lane) {
                            touched.push(lane);
                        }
                    }
                    for lane in touched {
                        self.advance(&lane);
                    }
                }
                WorkerMsg::Committed { lane, fence, result } => {
                    if self.pipelines.get(&lane).is_some_and(|p| p.fence != fence) {
                        // A commit of a session dropped since: the lane is another take's.
                    } else if !matches!(result, super::writer::Acked::Durable) {
                        // The store failed for good (the host is stopping: its waiters hear the
                        // stop from the hub), or the session's lease is gone (it is dropped):
                        // nothing more of this lane is written.
                        self.pipelines.remove(&lane);
                    } else if let Some(p) = self.pipelines.get_mut(&lane) {
                        p.blocked = false;
                        self.advance(&lane);
                    }
                }
                WorkerMsg::Drop(lane) => {
                    self.pipelines.remove(&lane);
                    let gone: Vec<IoKey> =
                        self.io.keys().filter(|k| k.session() == &lane.0).cloned().collect();
                    for key in gone {
                        self.abort(&key);
                    }
                }
                WorkerMsg::Drain(done) => self.drains.push(done),
            }
            if !self.drains.is_empty() && self.pipelines.is_empty() {
                // Shutdown: every output was performed and is durable; the worker ends.
                for d in self.drains.drain(..) {
                    let _ = d.send(());
                }
                return;
            }
            if self.io.len() > self.sweep_at {
                self.io.retain(|_, h| !h.is_finished());
                self.sweep_at = (self.io.len() * 2).max(1024);
            }
        }
    }

    /// Performs the lane's queued actions until one must wait for durability.
    fn advance(&mut self, lane: &Lane) {
        loop {
            let Some(p) = self.pipelines.get_mut(lane) else { return };
            if p.blocked {
                return;
            }
            let Some((session, next)) = p.queue.pop_front() else {
                if p.open.is_empty() {
                    self.pipelines.remove(lane);
                }
                return;
            };
            match next {
                Action::Reply { reply, result } => {
                    let _ = reply.send(result);
                }
                Action::Accept { run, submitted, reply } => {
                    p.open.entry(session.clone()).or_default().push(Write::Accept(run));
                    if self.ctx.armed.is(HostMutant::ReplyBeforeDurable) {
                        // The bug: the caller hears "accepted" before the row is durable.
                        let _ = reply.send(Ok(submitted));
                    } else {
                        let answer = Action::Reply { reply, result: Ok(submitted) };
                        p.queue.push_front((session.clone(), answer));
                    }
                    self.commit(lane, &session);
                }
                Action::Output(kind) => self.perform(lane, &session, kind),
                Action::Announce { hub, update } => {
                    let _ = hub.updates.send(update);
                }
                Action::Write(w) => p.open.entry(session).or_default().push(w),
                Action::Closing(w) => {
                    let open = p.open.get(&session).is_some_and(|ws| !ws.is_empty());
                    p.open.entry(session.clone()).or_default().push(w);
                    if !open {
                        self.commit(lane, &session);
                    }
                }
            }
        }
    }

    /// Ends the session's open transaction: streaming-only ones go to the debouncer,
    /// structural ones block the lane until durable.
    fn commit(&mut self, lane: &Lane, session: &SessionId) {
        let Some(p) = self.pipelines.get_mut(lane) else { return };
        let Some(writes) = p.open.remove(session) else { return };
        let streaming = writes.iter().all(Write::is_streamed);
        let fence = p.fence;
        let txn = Txn { session: session.clone(), writes, fence };
        let ack = if streaming {
            None
        } else {
            p.blocked = true;
            let (me, lane) = (self.me.clone(), lane.clone());
            let ack: super::writer::Ack = Box::new(move |result| {
                if let Some(me) = me.upgrade() {
                    let _ = me.send(WorkerMsg::Committed { lane, fence, result });
                }
            });
            Some(ack)
        };
        if self.ctx.writer.send(WriteReq::Txn { txn, ack }).is_err() {
            // The writer is gone (shutdown or failure): nothing more can be made durable.
            self.pipelines.remove(lane);
        }
    }

    fn perform(&mut self, lane: &Lane, session: &SessionId, kind: OutputKind) {
        let starts_io = matches!(
            kind,
            OutputKind::Prepare { .. }
                | OutputKind::StartStep { .. }
                | OutputKind::StartSummary { .. }
                | OutputKind::RunTool { .. }
                | OutputKind::RefreshCredentials { .. }
                | OutputKind::RequestTitle { .. }
        );
        if starts_io && !self.may_act(lane, session) {
            // A member past its own deadline for the session starts nothing (SPEC 11): the
            // session is being dropped, and its core with it.
            debug!(session = %session, "past the lease's deadline: no IO started");
            return;
        }
        match kind {
            OutputKind::Store(op) => {
                if let Some(p) = self.pipelines.get_mut(lane) {
                    p.open.entry(session.clone()).or_default().push(Write::Op(op));
                }
            }
            OutputKind::Commit { .. } => self.commit(lane, session),
            OutputKind::Prepare { session, seq } => {
                let span = debug_span!("prepare", session = %session, seq = seq.0);
                let task = prepare(self.ctx.clone(), session.clone(), seq);
                let (s, q) = (session.clone(), seq);
                let failed = move |why| Input::PreparationFailed { session: s, seq: q, error: why };
                self.spawn(IoKey::Prepare(session, seq), span, task, failed);
            }
            OutputKind::StartStep { step } => {
                let span = debug_span!(
                    "provider_stream",
                    session = %step.session,
                    seq = step.seq.0,
                    turn = step.turn.0,
                    step = step.step,
                    attempt = step.attempt,
                );
                let task = stream(self.ctx.clone(), Stream::Step(step.clone()));
                let failed = Stream::Step(step.clone());
                self.spawn(IoKey::Step(step), span, task, move |why| failed.input(panicked(why)));
            }
            OutputKind::StartSummary { io } => {
                let span = debug_span!(
                    "summary_stream",
                    session = %io.session,
                    summary = io.summary.0,
                    attempt = io.attempt,
                );
                let task = stream(self.ctx.clone(), Stream::Summary(io.clone()));
                let failed = Stream::Summary(io.clone());
                self.spawn(IoKey::Summary(io), span, task, move |why| failed.input(panicked(why)));
            }
            OutputKind::RunTool { call, name, input } => {
                let span = debug_span!(
                    "tool_call",
                    tool = %name,
                    call_id = call.call.as_str(),
                    session = %call.session,
                    seq = call.seq.0,
                );
                let task = run_tool(self.ctx.clone(), call.clone(), name, input);
                let c = call.clone();
                let failed = move |why: String| Input::ToolResult {
                    call: c,
                    result: ToolOutput {
                        content: format!("the tool failed: {why}"),
                        is_error: true,
                        stop: None,
                    },
                };
                self.spawn(IoKey::Tool(call), span, task, failed);
            }
            OutputKind::RefreshCredentials { attempt } => {
                let (seq, attempt_no) = super::log::attempt_fields(&attempt);
                let span = debug_span!(
                    "credential_refresh",
                    session = %attempt.session(),
                    seq = seq.map(|s| s.0),
                    attempt = attempt_no,
                );
                let ctx = self.ctx.clone();
                let (key, a) = (IoKey::Refresh(attempt.clone()), attempt.clone());
                let task = async move {
                    let ok = ctx.provider.refresh_credentials().await;
                    report(&ctx, Input::CredentialsRefreshed { attempt, ok }).await;
                };
                let failed = move |_| Input::CredentialsRefreshed { attempt: a, ok: false };
                self.spawn(key, span, task, failed);
            }
            OutputKind::RequestTitle { session, seq, prompt } => {
                // The prompt is content: it is not a field of the span.
                let span = debug_span!("title", session = %session, seq = seq.0);
                let ctx = self.ctx.clone();
                let key = IoKey::Title(session.clone(), seq);
                let s = session.clone();
                let task = async move {
                    let (title, usage) = match ctx.provider.title(prompt).await {
                        Ok((t, u)) => (Some(t), u),
                        Err(_) => (None, None),
                    };
                    report(&ctx, Input::TitleGenerated { session, seq, title, usage }).await;
                };
                let failed =
                    move |_| Input::TitleGenerated { session: s, seq, title: None, usage: None };
                self.spawn(key, span, task, failed);
            }
            OutputKind::AbortPreparation { session, seq } => {
                self.abort(&IoKey::Prepare(session, seq))
            }
            OutputKind::AbortStep { step } => self.abort(&IoKey::Step(step)),
            // The core aborts only calls of droppable tools (a tool left to finish is never
            // aborted, SPEC 4.9): drop the work at once; a result can no longer be reported.
            OutputKind::AbortTool { call } => self.abort(&IoKey::Tool(call)),
            OutputKind::AbortRefresh { attempt } => self.abort(&IoKey::Refresh(attempt)),
            OutputKind::AbortSummary { io } => self.abort(&IoKey::Summary(io)),
            OutputKind::AbortTitle { session, seq } => self.abort(&IoKey::Title(session, seq)),
            // Published by the store writer right after the commit that recorded it.
            OutputKind::Finished(_) => {}
            // Replies, timers and `Stopped` are the engine task's and never routed here; any other
            // kind this host does not know must be one a host may ignore (its class says so).
            other => debug_assert!(
                other.class() == OutputClass::MayIgnore
                    || matches!(
                        other,
                        OutputKind::Reply(_)
                            | OutputKind::SetTimer { .. }
                            | OutputKind::CancelTimer { .. }
                    ),
                "the host does not perform {other:?}"
            ),
        }
    }

    /// Whether this host may start IO for `session` now: always alone; for a member, while it
    /// holds the session's lease at the lane's epoch and its own deadline has not passed.
    fn may_act(&self, lane: &Lane, session: &SessionId) -> bool {
        let Some(deadlines) = &self.ctx.deadlines else { return true };
        let fence = self.pipelines.get(lane).and_then(|p| p.fence);
        deadlines.may_act(session, fence)
    }

    /// Runs one IO task in `span`. If it panics, `failed` turns the panic message into the
    /// input that reports the IO as failed, so the turn does not wait for it forever.
    fn spawn(
        &mut self,
        key: IoKey,
        span: Span,
        task: impl std::future::Future<Output = ()> + Send + 'static,
        failed: impl FnOnce(String) -> Input + Send + 'static,
    ) {
        let ctx = self.ctx.clone();
        let task = async move {
            if let Err(why) = crate::rt::catch_unwind(task).await {
                warn!(panic = %why, "an IO task panicked: reported as failed");
                report(&ctx, failed(why)).await;
            }
        };
        let handle = tokio::spawn(task.instrument(span)).abort_handle();
        if let Some(old) = self.io.insert(key, handle) {
            old.abort();
        }
    }

    fn abort(&mut self, key: &IoKey) {
        if let Some(h) = self.io.remove(key) {
            h.abort();
        }
    }
}

/// Prepares a submission: the model from the provider, the gauges and title from the store
/// (after every earlier write of the session, which the pipeline guarantees).
async fn prepare(ctx: Arc<Ctx>, session: SessionId, seq: Seq) {
    let info = ctx.provider.prepare(&session).await;
    let row = crate::rt::read(&ctx.reader, {
        let session = session.clone();
        move |r| r.session(&session)
    })
    .await;
    let input = match (info, row) {
        (Ok(info), Ok(row)) => {
            // The acceptance made the session's row durable before this; a missing one reads
            // as a new session.
            let (prompt_tokens, completion_tokens, titled) = row.map_or((0, 0, false), |r| {
                (r.prompt_tokens, r.completion_tokens, r.title.is_some())
            });
            let mut tools = ctx.tools.specs();
            if ctx.armed.is(HostMutant::AbortPolicyLost) {
                // The bug: the setup names the tools but not what an abort does to them, so
                // every call reads as droppable and one that must finish is cut off.
                tools.iter_mut().for_each(|t| t.on_abort = turnstile_core::OnAbort::Drop);
            }
            let setup = Setup {
                tools,
                context_window: info.context_window,
                prompt_tokens,
                completion_tokens,
                titled,
            };
            Input::Prepared { session, seq, setup }
        }
        (Err(error), _) => Input::PreparationFailed { session, seq, error: error.to_string() },
        (_, Err(error)) => Input::PreparationFailed { session, seq, error: error.to_string() },
    };
    report(&ctx, input).await;
}

/// Sends an IO result to the engine, unless the host is gone.
async fn report(ctx: &Ctx, input: Input) {
    if let Some(inbox) = ctx.inbox.upgrade() {
        let _ = inbox.send(Msg::Input(input)).await;
    }
}

/// Where a call asks the engine whether its work may begin ([`ToolCall::begin_work`]): the
/// engine task reports [`Input::ToolStarted`] and answers from the core, in order with any
/// abort, so an answer to an ask that arrives after a cancel can never run the call. With the
/// engine gone, no work begins.
fn work_gate(ctx: &Arc<Ctx>, call: &CallIo) -> WorkGate {
    let (inbox, call) = (ctx.inbox.clone(), call.clone());
    WorkGate::new(move || {
        let (inbox, call) = (inbox.clone(), call.clone());
        Box::pin(async move {
            let Some(inbox) = inbox.upgrade() else { return false };
            let (tx, rx) = oneshot::channel();
            if inbox.send(Msg::Command(super::command::Command::BeginWork(call, tx))).await.is_err()
            {
                return false;
            }
            rx.await.unwrap_or(false)
        })
    })
}

/// The failure a stream reports when its provider panicked: not retryable (a provider error
/// without a status), so the turn fails instead of panicking again.
fn panicked(why: String) -> StepEvent {
    StepEvent::Failed {
        error: ProviderError {
            class: ErrorClass::Provider,
            message: format!("the provider failed: {why}"),
            ..Default::default()
        },
    }
}

#[derive(Clone)]
enum Stream {
    Step(StepIo),
    Summary(SummaryIo),
}

impl Stream {
    fn session(&self) -> &SessionId {
        match self {
            Stream::Step(s) => &s.session,
            Stream::Summary(s) => &s.session,
        }
    }

    fn input(&self, event: StepEvent) -> Input {
        match self {
            Stream::Step(step) => Input::Step { step: step.clone(), event },
            Stream::Summary(io) => Input::Summary { io: io.clone(), event },
        }
    }
}

/// One model request: built from the store, streamed by the provider, each event reported.
/// A stream that ends without a finish is reported as such (retryable, SPEC 4.5); a finish
/// without usage gets SPEC 4.4's estimate.
async fn stream(ctx: Arc<Ctx>, which: Stream) {
    let session = which.session().clone();
    let failed = which.clone();
    let kind = match which {
        Stream::Step(_) => RequestKind::Step,
        Stream::Summary(_) => RequestKind::Summary,
    };
    let history = crate::rt::read(&ctx.reader, {
        let session = session.clone();
        move |r| {
            let summary = r.session(&session)?.and_then(|s| s.summary_message);
            Ok((r.messages(&session)?, summary))
        }
    })
    .await;
    let (stored, summary) = match history {
        Ok(h) => h,
        Err(e) => {
            let message = e.to_string();
            let error =
                ProviderError { class: ErrorClass::Transport, message, ..Default::default() };
            report(&ctx, which.input(StepEvent::Failed { error })).await;
            return;
        }
    };
    let tools = if ctx.armed.is(HostMutant::ChildOfferedAgent) {
        ctx.tools.definitions()
    } else {
        ctx.tools.definitions_for(&session)
    };
    let request =
        ModelRequest { session, kind, messages: history::build(&stored, summary, kind), tools };
    let ended = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let inbox = ctx.inbox.clone();
    let sink = EventSink::engine(EngineTarget {
        request: request.strings().map(str::to_owned).collect(),
        response: Vec::new(),
        ended: ended.clone(),
        deliver: Box::new(move |event| {
            let input = which.input(event);
            let inbox = inbox.clone();
            Box::pin(async move {
                match inbox.upgrade() {
                    Some(inbox) => inbox.send(Msg::Input(input)).await.is_ok(),
                    None => false,
                }
            })
        }),
    });
    ctx.provider.stream(request, sink).await;
    if ended.load(std::sync::atomic::Ordering::Relaxed) {
        return;
    }
    let error = ProviderError {
        class: ErrorClass::Incomplete,
        message: "the stream ended without a finish".to_owned(),
        ..Default::default()
    };
    report(&ctx, failed.input(StepEvent::Failed { error })).await;
}

/// Runs a tool call (in its `tool_call` span, which names the tool, the call and the session).
async fn run_tool(ctx: Arc<Ctx>, call: CallIo, name: String, input: String) {
    debug!("tool call started");
    let started = tokio::time::Instant::now();
    let result = match ctx.tools.get(&name) {
        Some(tool) => {
            let c = ToolCall::new(call.session.clone(), call.call.clone(), input)
                .with_work_gate(work_gate(&ctx, &call));
            tool.run(c).await
        }
        None => ToolOutput {
            content: turnstile_core::unknown_tool_result(&name),
            is_error: true,
            stop: None,
        },
    };
    let elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    debug!(is_error = result.is_error, elapsed_ms, "tool call finished");
    report(&ctx, Input::ToolResult { call, result }).await;
}
