//! The simulated world around the real host (SPEC 10 "Sim"): a seeded provider, tools,
//! clients that submit, cancel, clear and summarize at random moments, store faults, and the
//! checks that run after every seed.
//!
//! Everything random is drawn from [`Rng`]s forked from the seed; everything that waits waits on
//! the runtime's clock. Under madsim (`--cfg madsim`, see `crate::sweep`) a seed is therefore a
//! complete, reproducible world. The code compiles without madsim too, so the workspace's lints
//! cover it, but only the simulator runs it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sha2::{Digest, Sha256};
use turnstile_core::{
    AGENT_TOOL, CANCELLED_TOOL_RESULT, CallId, ErrorClass, FinishReason, Mode, NEW_AGENT_TITLE,
    NO_TEXT_OUTPUT, Outcome, ProviderError, Rejection, RunId, Seq, SessionId, StepEvent, StopTurn,
    Submit, ToolOutput, ToolSpec, Usage,
};
use turnstile_host::store::{
    Fault, Faults, Location, MemoryDisk, Reader, RunRow, RunState, Store, StoreConfig,
};
use turnstile_host::{
    BoxError, BoxFuture, CompletionRecord, Cursor, EventSink, Flight, FlightBuffer, Host,
    HostConfig, ModelInfo, ModelRequest, Provider, RequestKind, RequestMessage, SubmitError, Tool,
    ToolCall, ToolSet, WaitError,
};

use crate::rng::Rng;

/// Which faults a sweep injects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Profile {
    /// Provider and tool failures only.
    Calm,
    /// Also transient store failures (locked database, disk full) at random moments.
    Faults,
}

impl Profile {
    /// The profile with this name (`calm`, `faults`).
    #[must_use]
    pub fn from_name(name: &str) -> Option<Profile> {
        match name {
            "calm" => Some(Profile::Calm),
            "faults" => Some(Profile::Faults),
            _ => None,
        }
    }
}

/// How to build a world: the fault profile and, in builds with the `mutants` feature, the bug
/// the host or its core pretends to have (a name from the core's or the host's catalogue).
#[derive(Clone, Debug)]
pub struct WorldConfig {
    /// Which faults to inject.
    pub profile: Profile,
    /// The mutant to switch on, by name.
    pub mutant: Option<String>,
}

impl WorldConfig {
    /// Applies the mutant to the host's configuration.
    ///
    /// # Errors
    /// An unknown name, or a build without the `mutants` feature.
    fn arm(&self, config: &mut HostConfig) -> Result<(), String> {
        let Some(name) = &self.mutant else { return Ok(()) };
        #[cfg(feature = "mutants")]
        {
            if let Some(m) = turnstile_core::Mutant::ALL.iter().find(|m| m.name() == name) {
                config.engine.mutant = Some(*m);
                return Ok(());
            }
            if let Some(m) = turnstile_host::HostMutant::from_name(name) {
                config.store.mutant = Some(m);
                return Ok(());
            }
            Err(format!("unknown mutant {name}"))
        }
        #[cfg(not(feature = "mutants"))]
        {
            let _ = config;
            Err(format!("mutant {name}: this build has no mutants (build with --features mutants)"))
        }
    }
}

/// The names of every mutant this build can switch on (core's, then the host's).
#[must_use]
pub fn mutant_names() -> Vec<&'static str> {
    #[cfg(feature = "mutants")]
    {
        let core = turnstile_core::Mutant::ALL.iter().map(|m| m.name());
        core.chain(turnstile_host::HostMutant::ALL.iter().map(|m| m.name())).collect()
    }
    #[cfg(not(feature = "mutants"))]
    {
        Vec::new()
    }
}

/// The names of the mutants the hunt (`turnstile-sim mutants`) must find: the core's whose
/// scope holds the simulator (not those that need an external acceptor: the simulated host
/// lets the core assign sequences), then the host's.
#[must_use]
pub fn hunted_mutant_names() -> Vec<&'static str> {
    #[cfg(feature = "mutants")]
    {
        let core = turnstile_core::Mutant::ALL.iter().filter(|m| m.scope().contains(&"sim"));
        let core = core.map(|m| m.name());
        core.chain(turnstile_host::HostMutant::ALL.iter().map(|m| m.name())).collect()
    }
    #[cfg(not(feature = "mutants"))]
    {
        Vec::new()
    }
}

/// What one seed did and what its checks found.
#[derive(Clone, Debug, Default)]
pub struct SeedReport {
    /// The seed.
    pub seed: u64,
    /// Simulated time the world ran, in milliseconds.
    pub sim_ms: u64,
    /// Inputs the engine handled (the flight trace's lines).
    pub events: u64,
    /// Outcomes in the ledger, by kind.
    pub outcomes: BTreeMap<String, u64>,
    /// Faults injected, by kind.
    pub faults: BTreeMap<String, u64>,
    /// Broken promises; empty when the seed passed.
    pub violations: Vec<String>,
    /// SHA-256 of the flight trace: the same seed must give the same hash.
    pub trace_hash: String,
    /// The flight trace (the core's inputs), kept when the seed failed.
    pub trace: Option<String>,
}

/// A shared generator for the actors that draw in the order the runtime schedules them.
type Shared = Arc<Mutex<Rng>>;

fn draw<T>(rng: &Shared, f: impl FnOnce(&mut Rng) -> T) -> T {
    let mut r = rng.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    f(&mut r)
}

/// A seeded provider (its state is shared by every incarnation of the host): text, reasoning, tool calls (some with invalid JSON or unknown tools),
/// retryable and fatal errors with Retry-After, 401s, streams that hang and streams cut off.
pub struct SimProvider {
    rng: Shared,
    /// Preparations this provider failed, per session (a failed preparation must fail only its
    /// own submission: G-24).
    prep_failures: Arc<Mutex<BTreeMap<SessionId, u64>>>,
    /// Requests streamed so far: each request's text is tagged with its number, so a client
    /// can tell when a message mixes two attempts (a retry without its reset).
    requests: Arc<Mutex<u64>>,
    /// Requests of sub-agents that offered the `agent` tool (SPEC 4.11 allows none).
    agent_offered_to_child: Arc<Mutex<Vec<SessionId>>>,
}

impl Provider for SimProvider {
    fn prepare(&self, session: &SessionId) -> BoxFuture<Result<ModelInfo, BoxError>> {
        // Preparations take a while, so they finish out of acceptance order.
        let (fail, ms) = draw(&self.rng, |r| (r.chance(3), r.between(0, 400)));
        if fail {
            let mut failures =
                self.prep_failures.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            *failures.entry(session.clone()).or_default() += 1;
        }
        // One session has a small window, so summaries (pause and resume) happen.
        let context_window = if session.as_str() == "s0" { 2_500 } else { 100_000 };
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            if fail { Err("model unavailable".into()) } else { Ok(ModelInfo { context_window }) }
        })
    }

    fn stream(&self, request: ModelRequest, mut sink: EventSink) -> BoxFuture<()> {
        if request.session.is_child() && request.tools.iter().any(|t| t.name == AGENT_TOOL) {
            let mut seen = self
                .agent_offered_to_child
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            seen.push(request.session.clone());
        }
        let mut rng = draw(&self.rng, Rng::fork);
        let tag = {
            let mut n = self.requests.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            *n += 1;
            *n
        };
        Box::pin(async move {
            for event in answer(&mut rng, &request, tag) {
                match event {
                    Act::Wait(ms) => tokio::time::sleep(Duration::from_millis(ms)).await,
                    Act::Send(e) => {
                        if !sink.send(e).await {
                            return;
                        }
                    }
                    Act::Hang => std::future::pending::<()>().await,
                    Act::Cut => return,
                }
            }
        })
    }

    fn refresh_credentials(&self) -> BoxFuture<bool> {
        let (ok, ms) = draw(&self.rng, |r| (r.chance(80), r.between(0, 3_000)));
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            ok
        })
    }

    fn title(&self, prompt: String) -> BoxFuture<Result<(String, Option<Usage>), BoxError>> {
        let ok = draw(&self.rng, |r| r.chance(80));
        Box::pin(async move {
            if ok { Ok((format!("About {prompt}"), None)) } else { Err("no title".into()) }
        })
    }
}

enum Act {
    Wait(u64),
    Send(StepEvent),
    Hang,
    Cut,
}

fn usage(rng: &mut Rng) -> Usage {
    Usage {
        input_tokens: rng.between(100, 3_000),
        output_tokens: rng.between(10, 400),
        cost_micros: rng.between(0, 50),
        ..Usage::default()
    }
}

/// Streamed text, each word tagged with the request it came from (`q<request>w<i> `).
fn text(rng: &mut Rng, out: &mut Vec<Act>, tag: u64) {
    for i in 0..rng.between(1, 6) {
        out.push(Act::Wait(rng.between(1, 40)));
        out.push(Act::Send(StepEvent::TextDelta { text: format!("q{tag}w{i} ") }));
    }
}

fn failure(class: ErrorClass, status: Option<u16>, retry_after_ms: Option<u64>) -> Act {
    Act::Send(StepEvent::Failed {
        error: ProviderError {
            class,
            status,
            retry_after_ms,
            message: "simulated failure".to_owned(),
            ..ProviderError::default()
        },
    })
}

/// What the provider does for one request.
fn answer(rng: &mut Rng, request: &ModelRequest, tag: u64) -> Vec<Act> {
    let mut out = vec![Act::Wait(rng.between(1, 200))];
    if request.kind == RequestKind::Summary {
        // Summaries take a while (a long history): cancels land during them.
        out.push(Act::Wait(rng.between(300, 3_000)));
        if rng.chance(10) {
            out.push(failure(ErrorClass::Provider, Some(400), None));
        } else {
            text(rng, &mut out, tag);
            let usage = Usage { output_tokens: rng.between(50, 500), ..Usage::default() };
            let finish = StepEvent::Finished { reason: FinishReason::Stop, usage: Some(usage) };
            out.push(Act::Send(finish));
        }
        return out;
    }
    let after_tools = matches!(request.messages.last(), Some(RequestMessage::ToolResults(_)));
    match rng.below(100) {
        0..=17 if !after_tools || rng.chance(30) => {
            if rng.chance(30) {
                out.push(Act::Send(StepEvent::ReasoningStart));
                out.push(Act::Send(StepEvent::ReasoningDelta { text: "hmm".into() }));
                out.push(Act::Send(StepEvent::ReasoningEnd { signature: Some("sig".into()) }));
            }
            // Sub-agents where the request offers them (top-level sessions); now and then a
            // child calls `agent` anyway, which it was not offered (an unknown tool to it).
            let offered = request.tools.iter().any(|t| t.name == AGENT_TOOL);
            for i in 0..rng.between(1, 2) {
                let names = ["view", "view", "slow", "fail", "deny", "halt", "nope"];
                let mut name = names[rng.below(names.len() as u64) as usize];
                if rng.chance(if offered { 25 } else { 2 }) {
                    name = AGENT_TOOL;
                }
                let input = match (rng.below(10), name == AGENT_TOOL) {
                    (0, _) => "{bad".to_owned(),
                    (1, true) => "{}".to_owned(),
                    (_, true) => format!("{{\"prompt\":\"sub q{tag}\"}}"),
                    (_, false) => "{\"path\":\"x\"}".to_owned(),
                };
                let id = CallId::new(format!("c{}", rng.below(1_000) * 10 + i));
                out.push(Act::Send(StepEvent::ToolInputStart {
                    id: id.clone(),
                    name: name.into(),
                }));
                out.push(Act::Wait(rng.between(0, 20)));
                out.push(Act::Send(StepEvent::ToolCall { id, name: name.into(), input }));
            }
            // Sometimes a tool step fills the context: the turn pauses for a summary.
            let usage = rng.chance(30).then(|| usage(rng));
            let finish = StepEvent::Finished { reason: FinishReason::ToolCalls, usage };
            out.push(Act::Send(finish));
        }
        18..=24 => {
            text(rng, &mut out, tag);
            out.push(failure(ErrorClass::Provider, Some(429), Some(rng.between(10, 3_000))));
        }
        25..=27 => out.push(failure(ErrorClass::Provider, Some(503), None)),
        28..=30 => out.push(failure(ErrorClass::Transport, None, None)),
        31..=33 => {
            if rng.chance(50) {
                text(rng, &mut out, tag);
            }
            out.push(failure(ErrorClass::Unauthorized, Some(401), None));
        }
        34..=35 => out.push(failure(ErrorClass::Provider, Some(400), None)),
        36..=38 => {
            text(rng, &mut out, tag);
            out.push(Act::Hang);
        }
        39..=42 => {
            text(rng, &mut out, tag);
            out.push(Act::Cut);
        }
        // A real provider's recorded stream through the real decoder (whole, cut, stalled or
        // with a byte changed).
        43..=54 => out.extend(crate::recorded::answer(rng, tag).into_iter().map(|a| match a {
            crate::recorded::Act::Wait(ms) => Act::Wait(ms),
            crate::recorded::Act::Send(e) => Act::Send(e),
            crate::recorded::Act::Hang => Act::Hang,
        })),
        55..=59 => {
            // Slow but alive: gaps below the watchdog's 5 s, 6 to 16 s in all (SPEC 4.5).
            for i in 0..rng.between(3, 4) {
                out.push(Act::Wait(rng.between(2_000, 4_000)));
                out.push(Act::Send(StepEvent::TextDelta { text: format!("q{tag}s{i} ") }));
            }
            out.push(Act::Send(StepEvent::Finished { reason: FinishReason::Stop, usage: None }));
        }
        _ => {
            if rng.chance(20) {
                out.push(Act::Send(StepEvent::ReasoningStart));
                out.push(Act::Send(StepEvent::ReasoningDelta { text: "think".into() }));
                out.push(Act::Send(StepEvent::ReasoningEnd { signature: None }));
            }
            text(rng, &mut out, tag);
            let reason = if rng.chance(5) { FinishReason::Length } else { FinishReason::Stop };
            let finish = StepEvent::Finished { reason, usage: Some(usage(rng)) };
            out.push(Act::Send(finish));
        }
    }
    out
}

/// The world's tool that an abort must leave to finish ([`turnstile_core::OnAbort::Finish`]).
pub const LEFT_TO_FINISH: &str = "slow";

/// A simulated tool: `view` (sometimes slow), `slow` (slow, and a cancel must let it finish),
/// `fail` (an error result), `deny` and `halt` (results that stop the turn).
pub struct SimTool {
    name: &'static str,
    rng: Shared,
}

impl Tool for SimTool {
    fn spec(&self) -> ToolSpec {
        let spec = ToolSpec::new(self.name);
        if self.name == LEFT_TO_FINISH { spec.left_to_finish() } else { spec }
    }

    fn run(&self, call: ToolCall) -> BoxFuture<ToolOutput> {
        // Now and then a tool outlives the cancel grace (5 s): its result comes too late.
        let ms =
            draw(
                &self.rng,
                |r| if r.chance(15) { r.between(3_000, 9_000) } else { r.between(0, 300) },
            );
        let name = self.name;
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            match name {
                "fail" => ToolOutput { content: "it broke".into(), is_error: true, stop: None },
                "deny" => ToolOutput {
                    content: "denied".into(),
                    is_error: true,
                    stop: Some(StopTurn::PermissionDenied),
                },
                "halt" => ToolOutput {
                    content: "halted".into(),
                    is_error: true,
                    stop: Some(StopTurn::HookHalt),
                },
                _ => ToolOutput::ok(format!("viewed {}", call.input)),
            }
        })
    }
}

/// What the clients saw.
#[derive(Debug, Default)]
struct Observed {
    /// Accepted runs and their sequences.
    accepted: BTreeMap<RunId, Seq>,
    /// Every answer `wait` gave, per run.
    results: BTreeMap<RunId, Vec<Result<CompletionRecord, WaitError>>>,
    /// Idempotent resubmissions answered with an existing run.
    existing: Vec<(RunId, Seq)>,
    /// Broken promises the clients saw as they happened.
    problems: Vec<String>,
}

type Log = Arc<Mutex<Observed>>;

/// The host clients talk to now: replaced when the simulated process crashes and restarts.
type Current = Arc<Mutex<Host>>;

fn now(current: &Current) -> Host {
    current.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
}

fn note(log: &Log, f: impl FnOnce(&mut Observed)) {
    f(&mut log.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
}

/// Follows the completion stream from the start, reconnecting (from its last cursor) to the
/// next incarnation after a crash, until the world is done and the stream ends.
async fn follow(
    current: Current,
    done: Arc<std::sync::atomic::AtomicBool>,
) -> Vec<(Cursor, CompletionRecord)> {
    let mut seen = Vec::new();
    let mut cursor = Cursor(0);
    loop {
        let mut stream = now(&current).completions(cursor);
        while let Ok(Some((c, record))) = stream.next().await {
            cursor = c;
            seen.push((c, record));
        }
        if done.load(std::sync::atomic::Ordering::Relaxed) {
            // One last read: everything recorded before the end.
            let mut rest = now(&current).completions(cursor);
            while let Ok(Some(entry)) = rest.next().await {
                seen.push(entry);
            }
            return seen;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A live subscriber that reads slowly: it must fall behind without holding anyone up.
/// Returns how many updates it was told it missed.
async fn slow_subscriber(
    current: Current,
    done: Arc<std::sync::atomic::AtomicBool>,
    mut rng: Rng,
) -> u64 {
    let mut lagged = 0;
    loop {
        let mut updates = now(&current).subscribe();
        while let Some(event) = updates.recv().await {
            if let turnstile_host::Event::Lagged { skipped } = event {
                lagged += skipped;
            }
            tokio::time::sleep(Duration::from_millis(rng.between(0, 400))).await;
        }
        if done.load(std::sync::atomic::Ordering::Relaxed) {
            return lagged;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// One client: a few commands at random moments.
async fn client(
    current: Current,
    mut rng: Rng,
    id: u64,
    log: Log,
) -> Vec<tokio::task::JoinHandle<()>> {
    let mut waiters = Vec::new();
    let mut mine: Vec<Submit> = Vec::new();
    for n in 0..rng.between(4, 12) {
        tokio::time::sleep(Duration::from_millis(rng.between(0, 1_500))).await;
        let host = now(&current);
        let session = SessionId::new(format!("s{}", rng.below(3)));
        match rng.below(100) {
            0..=54 => {
                let mut submit = Submit::new(session.as_str(), format!("c{id} p{n}"));
                if rng.chance(60) {
                    submit = submit.with_run_id(format!("c{id}-r{n}"));
                } else if rng.chance(50) {
                    submit = submit.with_mode(Mode::OwnTurn);
                }
                if let Some(w) = submit_one(&current, submit.clone(), &log).await {
                    waiters.push(w);
                }
                mine.push(submit);
                // Bursts: a follow-up or two right away, so queues form.
                for k in 0..rng.below(3) {
                    let mut more = Submit::new(session.as_str(), format!("c{id} p{n} +{k}"));
                    if rng.chance(50) {
                        more = more.with_run_id(format!("c{id}-r{n}-{k}"));
                    }
                    if let Some(w) = submit_one(&current, more, &log).await {
                        waiters.push(w);
                    }
                }
            }
            55..=62 if !mine.is_empty() => {
                // A byte-equal resubmission (idempotent) or a conflicting reuse of a RunId.
                let mut again = mine[rng.below(mine.len() as u64) as usize].clone();
                if rng.chance(30) {
                    again.prompt.push_str(" (changed)");
                }
                if let Some(w) = submit_one(&current, again, &log).await {
                    waiters.push(w);
                }
            }
            63..=75 => drop(host.cancel(&session).await),
            76..=83 => {
                let run = RunId::new(format!("c{}-r{}", rng.below(3), rng.below(12)));
                drop(host.cancel_run(&run).await);
            }
            84..=88 => drop(host.clear_queue(&session).await),
            89..=92 => child_command(&host, &mut rng, &log).await,
            _ => drop(host.summarize(&session).await),
        }
    }
    waiters
}

/// A command about a sub-agent's child session the store holds: a cancel (only the child
/// stops; its parent continues with the cancel text as the call's result) or a submission,
/// which is refused (SPEC 4.1, 4.11).
async fn child_command(host: &Host, rng: &mut Rng, log: &Log) {
    let sessions = host.read(|r| r.sessions()).await.unwrap_or_default();
    let children: Vec<SessionId> =
        sessions.into_iter().map(|s| s.id).filter(SessionId::is_child).collect();
    if children.is_empty() {
        return;
    }
    let child = children[rng.below(children.len() as u64) as usize].clone();
    if rng.chance(70) {
        drop(host.cancel(&child).await);
        return;
    }
    match host.submit(Submit::new(child.as_str(), "continue it")).await {
        Err(SubmitError::Rejected(Rejection::ChildSession(id))) if id == child => {}
        Err(SubmitError::Stopped(_)) => {}
        other => note(log, |o| {
            o.problems.push(format!("a submission to child session {child} got {other:?}"));
        }),
    }
}

/// Submits, records what was answered, and for a new run starts a waiter.
async fn submit_one(
    current: &Current,
    submit: Submit,
    log: &Log,
) -> Option<tokio::task::JoinHandle<()>> {
    let run_id = submit.run_id.clone();
    match now(current).submit(submit).await {
        Ok(s) if s.existing => {
            note(log, |o| {
                o.existing.push((s.run_id.clone().unwrap_or_else(|| RunId::new("")), s.seq))
            });
            None
        }
        Ok(s) => {
            let run_id = run_id?;
            note(log, |o| {
                o.accepted.insert(run_id.clone(), s.seq);
            });
            let (current, log) = (current.clone(), log.clone());
            Some(tokio::spawn(async move {
                // A crash of the host answers "engine stopped": wait again, on the restarted
                // host (its recovery decided the outcome). Never more than a few times.
                let mut got = now(&current).wait(&run_id).await;
                for _ in 0..20 {
                    if !matches!(got, Err(WaitError::Stopped(_))) {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    got = now(&current).wait(&run_id).await;
                }
                let host = now(&current);
                if let Ok(record) = &got {
                    // I9 as a client sees it: when the RunComplete arrives, the store already
                    // holds the text it reports.
                    if let Some(problem) = stored_text_differs(&host, record).await {
                        note(&log, |o| o.problems.push(format!("run {run_id}: {problem}")));
                    }
                }
                note(&log, |o| o.results.entry(run_id).or_default().push(got));
            }))
        }
        // Refused, invalid, stopped or unreadable: nothing to wait for.
        Err(_) => None,
    }
}

/// The difference between a RunComplete's text and its message as stored, if any.
async fn stored_text_differs(host: &Host, record: &CompletionRecord) -> Option<String> {
    let id = record.message_id?;
    let session = record.session.clone();
    let stored = host.read(move |r| r.messages(&session)).await.ok()?;
    let text = stored.iter().find(|m| m.id == id).map(|m| m.text.clone());
    (text.as_deref() != record.text.as_deref())
        .then(|| format!("its RunComplete says {:?} but the store holds {text:?}", record.text))
}

/// The flight trace of each host incarnation, in order: owned by the caller, so that a seed
/// that panicked (a hang hits the time limit) still has the traces it recorded.
pub type Flights = Mutex<Vec<FlightBuffer>>;

/// The last flight trace recorded (see [`Flights`]).
#[must_use]
pub fn last_flight(flights: &Flights) -> Option<String> {
    flights.lock().unwrap_or_else(std::sync::PoisonError::into_inner).last().map(FlightBuffer::text)
}

/// Runs one world to its end inside the current (simulated) runtime, then checks it. The store
/// lives on `disk` and the flight traces in memory: both outlive a crashed host, as a disk
/// would, and the world touches no file.
pub async fn world(
    seed: u64,
    knobs: &WorldConfig,
    disk: &MemoryDisk,
    flights: &Flights,
    keep_trace: bool,
) -> SeedReport {
    let profile = knobs.profile;
    let mut rng = Rng::new(seed);
    let started = tokio::time::Instant::now();
    let mut report = SeedReport { seed, ..SeedReport::default() };
    let faults = Faults::default();
    let mut config = HostConfig::with_store(StoreConfig::in_memory(disk));
    config.workers = 2;
    // A failing store stops the host after 2 s of retries (an outage below).
    config.store_retry = Duration::from_secs(2);
    config.trace_outputs = true;
    config.engine.step_limit = 6;
    // The stream watchdog (SPEC 4.5) in simulated seconds: a hung stream is closed after 5 s of
    // silence and retried; the slow streams below pause for up to 4 s and must live.
    config.engine.stream_idle_timeout_ms = 5_000;
    config.store.faults = Some(faults.clone());
    // A small live-update buffer, so the slow subscriber below falls behind.
    config.updates_capacity = 16;
    if let Err(e) = knobs.arm(&mut config) {
        report.violations.push(e);
        return report;
    }
    let shared: Shared = Arc::new(Mutex::new(rng.fork()));
    let prep_failures: Arc<Mutex<BTreeMap<SessionId, u64>>> = Arc::default();
    let provider = SimProvider {
        rng: shared.clone(),
        prep_failures: prep_failures.clone(),
        requests: Arc::default(),
        agent_offered_to_child: Arc::default(),
    };
    let mut tools = ToolSet::new().with_agent();
    for name in ["view", "slow", "fail", "deny", "halt"] {
        tools = tools.with(SimTool { name, rng: shared.clone() });
    }
    let provider = Arc::new(provider);
    let launcher = Launcher { config: &config, flights, provider: &provider, tools: &tools };
    let mut incarnation = 1;
    let (host, node) = match launcher.open(incarnation).await {
        Ok(h) => h,
        Err(e) => {
            report.violations.push(format!("the host did not open: {e}"));
            return report;
        }
    };
    let current: Current = Arc::new(Mutex::new(host.clone()));
    drop(host);
    let log: Log = Arc::default();
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let follower = tokio::spawn(follow(current.clone(), done.clone()));
    let slow = tokio::spawn(slow_subscriber(current.clone(), done.clone(), rng.fork()));
    let mut clients = Vec::new();
    for id in 0..3 {
        clients.push(tokio::spawn(client(current.clone(), rng.fork(), id, log.clone())));
    }
    // Sometimes the host is shut down while clients are still at work: later submissions are
    // refused ("workspace closing"), and every waiter still gets exactly one answer.
    // Counts the starts and ends of host replacements (a crash, an outage): odd while one is
    // under way, so a shutdown that failed because its host went away can tell.
    let restarts = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let early = rng.chance(20).then(|| {
        let (current, ms, restarts) = (current.clone(), rng.between(0, 8_000), restarts.clone());
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            let before = restarts.load(std::sync::atomic::Ordering::Relaxed);
            let result = now(&current).shutdown().await;
            // A crash during the shutdown stops it half-way, as it would a real one.
            let after = restarts.load(std::sync::atomic::Ordering::Relaxed);
            let crashed = before % 2 == 1 || after != before;
            result.or_else(|e| if crashed { Ok(()) } else { Err(e) })
        })
    });
    if profile == Profile::Faults {
        // Transient faults: bursts of up to 3 failing commits, which the host must absorb
        // (a clean shutdown after them). A burst never lands on the retries of an earlier
        // one: chained on one commit they would outlast the retry budget, an outage.
        for _ in 0..rng.below(4) {
            tokio::time::sleep(Duration::from_millis(rng.between(0, 2_000))).await;
            let fault = if rng.chance(50) { Fault::Locked } else { Fault::DiskFull };
            faults.fail_burst(u32::try_from(rng.between(1, 3)).unwrap_or(1), fault);
            *report.faults.entry(format!("{fault:?}")).or_default() += 1;
        }
        if rng.chance(40) {
            // The process dies at a random moment and starts again on the same store.
            tokio::time::sleep(Duration::from_millis(rng.between(0, 6_000))).await;
            incarnation += 1;
            restarts.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let restarted = launcher.crash_and_restart(node, incarnation).await;
            restarts.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            match restarted {
                // One crash per seed: the new incarnation's node is not needed again.
                Ok((h, _node)) => {
                    *current.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = h;
                    *report.faults.entry("Crash".to_owned()).or_default() += 1;
                }
                Err(e) => {
                    report.violations.push(format!("restart after a crash failed: {e}"));
                }
            }
        } else if rng.chance(15) {
            // The disk fails for good: the host retries, stops (fail-stop, releasing the store)
            // and everyone waiting hears the stop; the disk comes back and a new host's
            // recovery decides. A host with nothing to write meanwhile never notices.
            tokio::time::sleep(Duration::from_millis(rng.between(0, 6_000))).await;
            restarts.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            faults.fail_always(Fault::DiskFull);
            let host = now(&current);
            let mut waited = 0;
            while host.stopped().is_none() && waited < 10_000 {
                tokio::time::sleep(Duration::from_millis(100)).await;
                waited += 100;
            }
            faults.clear();
            if host.stopped().is_some() {
                incarnation += 1;
                match launcher.open(incarnation).await {
                    Ok((h, _node)) => {
                        *current.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = h;
                        *report.faults.entry("Outage".to_owned()).or_default() += 1;
                    }
                    Err(e) => {
                        report.violations.push(format!("restart after an outage failed: {e}"))
                    }
                }
            }
            drop(host);
            restarts.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }
    let mut waiters = Vec::new();
    for c in clients {
        match c.await {
            Ok(w) => waiters.extend(w),
            Err(e) => report.violations.push(format!("a client panicked: {e}")),
        }
    }
    if let Some(early) = early {
        match early.await {
            Ok(Ok(())) => *report.faults.entry("EarlyShutdown".to_owned()).or_default() += 1,
            Ok(Err(e)) => report.violations.push(format!("an early shutdown failed: {e}")),
            Err(e) => report.violations.push(format!("the early shutdown panicked: {e}")),
        }
    }
    tokio::time::sleep(Duration::from_millis(rng.between(0, 3_000))).await;
    let host = now(&current);
    if let Err(e) = host.shutdown().await {
        report.violations.push(format!("shutdown failed: {e}"));
    }
    for w in waiters {
        if let Err(e) = w.await {
            report.violations.push(format!("a waiter panicked: {e}"));
        }
    }
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let followed = follower.await.unwrap_or_default();
    match slow.await {
        Ok(lagged) => *report.faults.entry("Lagged".to_owned()).or_default() += lagged,
        Err(e) => report.violations.push(format!("the slow subscriber panicked: {e}")),
    }
    report.sim_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    drop(host);
    drop(current);
    let observed =
        std::mem::take(&mut *log.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
    let prep_failures = std::mem::take(
        &mut *prep_failures.lock().unwrap_or_else(std::sync::PoisonError::into_inner),
    );
    check_store(&config.store.location, &observed, &prep_failures, &followed, &mut report);
    let offered = std::mem::take(
        &mut *provider
            .agent_offered_to_child
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    );
    if let Some(child) = offered.first() {
        let n = offered.len();
        report
            .violations
            .push(format!("{n} requests of sub-agents offered the agent tool (first: {child})"));
    }
    let traces = launcher.flights.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
    check_traces(&traces, &mut report, keep_trace);
    report
}

/// What every incarnation of the host is opened with: the same configuration, store, provider
/// and tools; only the flight trace is per incarnation (a restart starts a new engine).
struct Launcher<'a> {
    config: &'a HostConfig,
    /// The flight trace of each incarnation opened, in order.
    flights: &'a Flights,
    provider: &'a Arc<SimProvider>,
    tools: &'a ToolSet,
}

/// Where a host incarnation runs: its simulated node (nothing outside the simulator).
#[cfg(madsim)]
type Node = madsim::task::NodeId;
/// Where a host incarnation runs: its simulated node (nothing outside the simulator).
#[cfg(not(madsim))]
type Node = ();

impl Launcher<'_> {
    /// Opens the host's `n`-th incarnation. Under the simulator it runs on a node of its own,
    /// so a crash can kill exactly its tasks, as a process dying would.
    async fn open(&self, n: u32) -> Result<(Host, Node), String> {
        let mut config = self.config.clone();
        let flight = FlightBuffer::default();
        config.trace = Some(Flight::Memory(flight.clone()));
        self.flights.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(flight);
        let provider: Arc<dyn Provider> = self.provider.clone();
        let tools = self.tools.clone();
        #[cfg(madsim)]
        {
            let node =
                madsim::runtime::Handle::current().create_node().name(format!("host-{n}")).build();
            let opened = node.spawn(async move { Host::open(config, provider, tools).await }).await;
            let host = opened.map_err(|e| e.to_string())?.map_err(|e| e.to_string())?;
            Ok((host, node.id()))
        }
        #[cfg(not(madsim))]
        {
            let _ = n;
            Host::open(config, provider, tools).await.map(|h| (h, ())).map_err(|e| e.to_string())
        }
    }

    /// Kills the host's node (every task of the host stops where it is, as in a process crash)
    /// and opens incarnation `n` on the same store, which runs crash recovery.
    async fn crash_and_restart(&self, node: Node, n: u32) -> Result<(Host, Node), String> {
        #[cfg(madsim)]
        {
            madsim::runtime::Handle::current().kill(node);
            // Let the killed tasks go (their store handle and lock with them).
            tokio::time::sleep(Duration::from_millis(10)).await;
            self.open(n).await
        }
        #[cfg(not(madsim))]
        {
            let _ = (node, n);
            Err("crashes are simulated only under madsim".to_owned())
        }
    }
}

/// The store after a clean shutdown: intact, nothing to recover, histories legal, and the ledger
/// agrees with every answer a client was given.
fn check_store(
    location: &Location,
    observed: &Observed,
    prep_failures: &BTreeMap<SessionId, u64>,
    followed: &[(Cursor, CompletionRecord)],
    report: &mut SeedReport,
) {
    let v = &mut report.violations;
    v.extend(observed.problems.iter().cloned());
    // The store exactly as the last process left it: a reopen would run recovery, which repairs
    // what it finds and would hide it.
    let reader = match Reader::open_at(location) {
        Ok(r) => r,
        Err(e) => return v.push(format!("the store cannot be read: {e}")),
    };
    if let Err(e) = reader.integrity_check() {
        v.push(format!("integrity: {e}"));
    }
    let runs = reader.runs().unwrap_or_default();
    for row in &runs {
        if row.state != RunState::Finished {
            v.push(format!("seq {} is unfinished after shutdown", row.seq));
        }
        if let Some((_, record)) = &row.completion {
            let who = if row.session.is_child() { "sub-agent " } else { "" };
            *report.outcomes.entry(format!("{who}{:?}", record.outcome)).or_default() += 1;
        }
    }
    for s in reader.sessions().unwrap_or_default() {
        for p in reader.protocol_problems(&s.id).unwrap_or_default() {
            v.push(format!("session {}: {p}", s.id));
        }
    }
    // The completion stream is lossless and in ledger order, across restarts: the follower saw
    // every recorded outcome exactly once.
    let mut ledger: Vec<(Cursor, CompletionRecord)> =
        runs.iter().filter_map(|r| r.completion.clone()).collect();
    ledger.sort_by_key(|(c, _)| *c);
    if followed != ledger.as_slice() {
        let first = followed.iter().zip(&ledger).position(|(a, b)| a != b);
        v.push(format!(
            "the completion stream gave {} entries, the ledger holds {} (first difference at {first:?})",
            followed.len(),
            ledger.len()
        ));
    }
    // SPEC 4.11: a child session has its parent and title, and the parent's result for the
    // `agent` call is what the child's ledger row says the child ended with.
    for problem in sub_agent_problems(&reader, &runs) {
        v.push(problem);
    }
    // G-24: a failed preparation fails its own submission only.
    let mut prep_failed: BTreeMap<SessionId, u64> = BTreeMap::new();
    for row in &runs {
        let kind = row.completion.as_ref().and_then(|c| c.1.error.as_ref()).map(|e| e.kind);
        if kind == Some(turnstile_core::ErrorKind::Preparation) {
            *prep_failed.entry(row.session.clone()).or_default() += 1;
        }
    }
    for (session, n) in prep_failed {
        let failed = prep_failures.get(&session).copied().unwrap_or(0);
        if n > failed {
            v.push(format!("session {session}: {n} submissions failed preparation, the provider failed {failed}"));
        }
    }
    // A completed message holds one attempt's text only (a retry resets the content first).
    for row in &runs {
        let Some((_, record)) = &row.completion else { continue };
        let tags: std::collections::BTreeSet<&str> = record
            .text
            .as_deref()
            .unwrap_or("")
            .split_whitespace()
            .filter_map(|w| w.split_once('w').map(|(q, _)| q))
            .collect();
        if tags.len() > 1 {
            v.push(format!("seq {}: its text mixes requests {tags:?}", row.seq));
        }
    }
    for (run, seq) in &observed.accepted {
        let row = reader.run(run).ok().flatten();
        let recorded = row.as_ref().and_then(|r| r.completion.as_ref()).map(|c| &c.1);
        match (row.as_ref(), observed.results.get(run).map(Vec::as_slice)) {
            (None, _) => v.push(format!("accepted run {run} has no ledger row")),
            (Some(r), _) if r.seq != *seq => {
                v.push(format!("run {run}: accepted as {seq}, ledger says {}", r.seq))
            }
            (_, None | Some([])) => v.push(format!("run {run}: its waiter never got an answer")),
            (_, Some([Ok(got)])) if Some(got) == recorded => {}
            (_, Some([one])) => {
                v.push(format!("run {run}: waiter got {one:?}, ledger has {recorded:?}"))
            }
            (_, Some(many)) => v.push(format!("run {run}: its waiter got {} answers", many.len())),
        }
    }
    for (run, seq) in &observed.existing {
        if observed.accepted.get(run).is_some_and(|s| s != seq) {
            v.push(format!("resubmission of {run} answered with seq {seq}, accepted as another"));
        }
    }
    drop(reader);
    match Store::open(&StoreConfig::at(location.clone())) {
        Ok(opened) => {
            if !opened.recovered.is_empty() {
                let n = opened.recovered.len();
                v.push(format!("a clean shutdown left {n} submissions to recover"));
            }
            let _ = opened.store.close();
        }
        Err(e) => v.push(format!("the store did not reopen: {e}")),
    }
}

/// Every child session against its ledger row and its parent's result (SPEC 4.11). A result
/// the host wrote itself (`synthetic`: a repair after a crash) is not the child's to decide.
fn sub_agent_problems(reader: &Reader, runs: &[RunRow]) -> Vec<String> {
    let mut problems = Vec::new();
    for s in reader.sessions().unwrap_or_default().into_iter().filter(|s| s.id.is_child()) {
        let id = &s.id;
        if s.title.as_deref() != Some(NEW_AGENT_TITLE) {
            problems.push(format!("child session {id} is titled {:?}", s.title));
        }
        let Some(parent) = &s.parent else {
            problems.push(format!("child session {id} has no parent"));
            continue;
        };
        let rows: Vec<&RunRow> = runs.iter().filter(|r| &r.session == id).collect();
        let [row] = rows.as_slice() else {
            problems.push(format!("child session {id} has {} ledger rows", rows.len()));
            continue;
        };
        if row.run_id.is_some() {
            problems.push(format!("child session {id}: its submission has a RunId"));
        }
        let Some((_, record)) = &row.completion else { continue };
        let (message, call) = id.as_str().split_once("$$").unwrap_or_default();
        let stored = reader.messages(parent).unwrap_or_default();
        let result = stored
            .iter()
            .filter(|m| m.id.to_string() == message)
            .flat_map(|m| &m.results)
            .find(|r| r.call.as_str() == call);
        let Some(result) = result.filter(|r| !r.synthetic) else { continue };
        let text = record.text.clone().unwrap_or_default();
        let expected = match record.outcome {
            Outcome::Completed if text.is_empty() => (NO_TEXT_OUTPUT.to_owned(), true),
            Outcome::Completed => (text, false),
            Outcome::Failed => {
                let message = record.error.as_ref().map_or("", |e| e.message.as_str());
                (format!("Failed to generate response: {message}"), true)
            }
            _ => (CANCELLED_TOOL_RESULT.to_owned(), true),
        };
        if (result.content.clone(), result.is_error) != expected {
            problems.push(format!(
                "child session {id} ended {:?}, but its parent's result is {:?} (error {})",
                record.outcome, result.content, result.is_error
            ));
        }
    }
    problems
}

/// SPEC 4.7 read off the trace: a manual summarize is accepted only when the session has no
/// unfinished submission (the core's checkers see states, not this reply rule).
fn summaries_while_busy(trace: &turnstile_core::Trace) -> Vec<String> {
    let mut unfinished: BTreeMap<String, std::collections::BTreeSet<u64>> = BTreeMap::new();
    let mut problems = Vec::new();
    for (line, l) in &trace.lines {
        let outputs = l.expect.as_deref().unwrap_or(&[]);
        let kind = |o: &serde_json::Value| o.get("kind").cloned().unwrap_or_default();
        if let turnstile_core::Input::Summarize { session } = &l.input {
            let accepted = outputs.first().is_some_and(|o| kind(o)["reply"] == "summarizing");
            let busy = unfinished.get(session.as_str()).is_some_and(|s| !s.is_empty());
            if accepted && busy {
                problems.push(format!(
                    "line {line}: summarize of {session} accepted while it has unfinished submissions"
                ));
            }
        }
        for o in outputs {
            let k = kind(o);
            let (session, seq) = (k["session"].as_str().unwrap_or(""), k["seq"].as_u64());
            match (k["type"].as_str(), k["reply"].as_str(), k["op"].as_str(), seq) {
                (Some("reply"), Some("accepted"), _, Some(seq))
                | (Some("store"), _, Some("child_accepted"), Some(seq)) => {
                    unfinished.entry(session.to_owned()).or_default().insert(seq);
                }
                (Some("finished"), _, _, Some(seq)) => {
                    if let Some(s) = unfinished.get_mut(session) {
                        s.remove(&seq);
                    }
                }
                _ => {}
            }
        }
    }
    problems
}

/// SPEC 4.9 from the tool's side: a call of the tool that an abort must leave to finish
/// ([`LEFT_TO_FINISH`]) is never aborted, so the host never cuts it off half-way. (The core
/// aborts only what the setup says the host may drop: this checks that the host said it.)
fn finishing_calls_aborted(trace: &turnstile_core::Trace) -> Vec<String> {
    let mut finishing = std::collections::BTreeSet::new();
    let mut problems = Vec::new();
    for (line, l) in &trace.lines {
        for o in l.expect.as_deref().unwrap_or(&[]) {
            let k = &o["kind"];
            let call = (k["call"]["seq"].as_u64(), k["call"]["call"].as_str().map(str::to_owned));
            match k["type"].as_str() {
                Some("run_tool") if k["name"] == LEFT_TO_FINISH => {
                    finishing.insert(call);
                }
                Some("abort_tool") if finishing.contains(&call) => problems.push(format!(
                    "line {line}: call {:?} of `{LEFT_TO_FINISH}`, a tool an abort must leave to \
                     finish, was aborted (cut off half-way)",
                    call.1.unwrap_or_default()
                )),
                _ => {}
            }
        }
    }
    problems
}

/// Every incarnation's flight trace replays through the core: every invariant after every
/// input, and the outputs recorded are the outputs produced (I12). The hash covers them all.
fn check_traces(flights: &[FlightBuffer], report: &mut SeedReport, keep: bool) {
    let mut all = String::new();
    let mut failing = None;
    for flight in flights {
        let text = flight.text();
        if !check_trace(&text, report, &mut all) && failing.is_none() {
            failing = Some(text);
        }
    }
    report.trace_hash = Sha256::digest(all.as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
    if keep || !report.violations.is_empty() {
        // The first incarnation whose trace the core's replay rejects (what shrinking needs),
        // else the last one's.
        report.trace = failing.or_else(|| flights.last().map(FlightBuffer::text));
    }
}

/// Checks one incarnation's trace; false when the core's replay rejects it.
fn check_trace(text: &str, report: &mut SeedReport, all: &mut String) -> bool {
    all.push_str(text);
    match turnstile_core::Trace::parse(text) {
        Ok(trace) => {
            report.events += trace.lines.len() as u64;
            report.violations.extend(summaries_while_busy(&trace));
            report.violations.extend(finishing_calls_aborted(&trace));
            if let Err(e) = turnstile_core::replay(&trace) {
                report.violations.push(format!("the core's trace fails replay: {e}"));
                return false;
            }
            true
        }
        Err(e) => {
            report.violations.push(format!("the flight trace does not parse: {e}"));
            false
        }
    }
}
