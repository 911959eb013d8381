//! The simulated world around the real host (SPEC 10 "Sim"): a seeded provider, tools,
//! clients that submit, cancel, clear and summarize at random moments, store faults, and the
//! checks that run after every seed.
//!
//! Everything random is drawn from [`Rng`]s forked from the seed; everything that waits waits on
//! the runtime's clock. Under madsim (`--cfg madsim`, see `crate::sweep`) a seed is therefore a
//! complete, reproducible world. The code compiles without madsim too, so the workspace's lints
//! cover it, but only the simulator runs it.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sha2::{Digest, Sha256};
use turnstile_adapters::provider::{RequestKind, RequestMessage};
use turnstile_adapters::store::{Fault, Faults, RunState, Store, StoreConfig, Synchronous};
use turnstile_adapters::tool::BoxFuture;
use turnstile_adapters::{
    CompletionRecord, EventSink, Host, HostConfig, ModelInfo, ModelRequest, Provider, SubmitError,
    Tool, ToolCall, ToolSet, WaitError,
};
use turnstile_core::{
    CallId, ErrorClass, FinishReason, Mode, ProviderError, RunId, Seq, SessionId, StepEvent,
    StopTurn, Submit, ToolOutput, ToolSpec, Usage,
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

/// A seeded provider: text, reasoning, tool calls (some with invalid JSON or unknown tools),
/// retryable and fatal errors with Retry-After, 401s, streams that hang and streams cut off.
pub struct SimProvider {
    rng: Shared,
}

impl Provider for SimProvider {
    fn prepare(&self, session: &SessionId) -> BoxFuture<Result<ModelInfo, String>> {
        let fail = draw(&self.rng, |r| r.chance(3));
        // One session has a small window, so summaries (pause and resume) happen.
        let context_window = if session.as_str() == "s0" { 4_000 } else { 100_000 };
        Box::pin(async move {
            if fail {
                Err("model unavailable".to_owned())
            } else {
                Ok(ModelInfo { context_window })
            }
        })
    }

    fn stream(&self, request: ModelRequest, mut sink: EventSink) -> BoxFuture<()> {
        let mut rng = draw(&self.rng, Rng::fork);
        Box::pin(async move {
            for event in answer(&mut rng, &request) {
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

    fn title(&self, prompt: String) -> BoxFuture<Result<(String, Option<Usage>), String>> {
        let ok = draw(&self.rng, |r| r.chance(80));
        Box::pin(async move {
            if ok { Ok((format!("About {prompt}"), None)) } else { Err("no title".to_owned()) }
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

fn text(rng: &mut Rng, out: &mut Vec<Act>) {
    for i in 0..rng.between(1, 6) {
        out.push(Act::Wait(rng.between(1, 40)));
        out.push(Act::Send(StepEvent::TextDelta { text: format!("w{i} ") }));
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
fn answer(rng: &mut Rng, request: &ModelRequest) -> Vec<Act> {
    let mut out = vec![Act::Wait(rng.between(1, 200))];
    if request.kind == RequestKind::Summary {
        if rng.chance(10) {
            out.push(failure(ErrorClass::Provider, Some(400), None));
        } else {
            text(rng, &mut out);
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
            for i in 0..rng.between(1, 2) {
                let name = ["view", "view", "fail", "deny", "halt", "nope"][rng.below(6) as usize];
                let input = if rng.chance(10) { "{bad" } else { "{\"path\":\"x\"}" };
                let id = CallId::new(format!("c{}", rng.below(1_000) * 10 + i));
                out.push(Act::Send(StepEvent::ToolInputStart {
                    id: id.clone(),
                    name: name.into(),
                }));
                out.push(Act::Wait(rng.between(0, 20)));
                out.push(Act::Send(StepEvent::ToolCall {
                    id,
                    name: name.into(),
                    input: input.into(),
                }));
            }
            let finish = StepEvent::Finished { reason: FinishReason::ToolCalls, usage: None };
            out.push(Act::Send(finish));
        }
        18..=24 => {
            text(rng, &mut out);
            out.push(failure(ErrorClass::Provider, Some(429), Some(rng.between(10, 3_000))));
        }
        25..=27 => out.push(failure(ErrorClass::Provider, Some(503), None)),
        28..=30 => out.push(failure(ErrorClass::Transport, None, None)),
        31..=33 => out.push(failure(ErrorClass::Unauthorized, Some(401), None)),
        34..=35 => out.push(failure(ErrorClass::Provider, Some(400), None)),
        36..=38 => {
            text(rng, &mut out);
            out.push(Act::Hang);
        }
        39..=42 => {
            text(rng, &mut out);
            out.push(Act::Cut);
        }
        _ => {
            if rng.chance(20) {
                out.push(Act::Send(StepEvent::ReasoningStart));
                out.push(Act::Send(StepEvent::ReasoningDelta { text: "think".into() }));
                out.push(Act::Send(StepEvent::ReasoningEnd { signature: None }));
            }
            text(rng, &mut out);
            let reason = if rng.chance(5) { FinishReason::Length } else { FinishReason::Stop };
            let finish = StepEvent::Finished { reason, usage: Some(usage(rng)) };
            out.push(Act::Send(finish));
        }
    }
    out
}

/// A simulated tool: `view` (slow), `fail` (an error result), `deny` and `halt` (results that
/// stop the turn).
pub struct SimTool {
    name: &'static str,
    rng: Shared,
}

impl Tool for SimTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec { name: self.name.to_owned(), interactive: false }
    }

    fn run(&self, call: ToolCall) -> BoxFuture<ToolOutput> {
        let ms = draw(&self.rng, |r| r.between(0, 300));
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
}

type Log = Arc<Mutex<Observed>>;

fn note(log: &Log, f: impl FnOnce(&mut Observed)) {
    f(&mut log.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
}

/// One client: a few commands at random moments.
async fn client(host: Host, mut rng: Rng, id: u64, log: Log) -> Vec<tokio::task::JoinHandle<()>> {
    let mut waiters = Vec::new();
    let mut mine: Vec<Submit> = Vec::new();
    for n in 0..rng.between(4, 12) {
        tokio::time::sleep(Duration::from_millis(rng.between(0, 1_500))).await;
        let session = SessionId::new(format!("s{}", rng.below(3)));
        match rng.below(100) {
            0..=54 => {
                let mut submit = Submit::new(session.as_str(), format!("c{id} p{n}"));
                if rng.chance(60) {
                    submit = submit.with_run_id(format!("c{id}-r{n}"));
                } else if rng.chance(50) {
                    submit = submit.with_mode(Mode::OwnTurn);
                }
                if let Some(w) = submit_one(&host, submit.clone(), &log).await {
                    waiters.push(w);
                }
                mine.push(submit);
            }
            55..=62 if !mine.is_empty() => {
                // A byte-equal resubmission (idempotent) or a conflicting reuse of a RunId.
                let mut again = mine[rng.below(mine.len() as u64) as usize].clone();
                if rng.chance(30) {
                    again.prompt.push_str(" (changed)");
                }
                if let Some(w) = submit_one(&host, again, &log).await {
                    waiters.push(w);
                }
            }
            63..=75 => drop(host.cancel(&session).await),
            76..=83 => {
                let run = RunId::new(format!("c{}-r{}", rng.below(3), rng.below(12)));
                drop(host.cancel_run(&run).await);
            }
            84..=90 => drop(host.clear_queue(&session).await),
            _ => drop(host.summarize(&session).await),
        }
    }
    waiters
}

/// Submits, records what was answered, and for a new run starts a waiter.
async fn submit_one(host: &Host, submit: Submit, log: &Log) -> Option<tokio::task::JoinHandle<()>> {
    let run_id = submit.run_id.clone();
    match host.submit(submit).await {
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
            let (host, log) = (host.clone(), log.clone());
            Some(tokio::spawn(async move {
                let got = host.wait(&run_id).await;
                note(&log, |o| o.results.entry(run_id).or_default().push(got));
            }))
        }
        Err(SubmitError::Rejected(_) | SubmitError::Stopped(_) | SubmitError::Invalid(_)) => None,
    }
}

/// Runs one world to its end inside the current (simulated) runtime, then checks it.
pub async fn world(seed: u64, profile: Profile, dir: &Path, keep_trace: bool) -> SeedReport {
    let mut rng = Rng::new(seed);
    let started = tokio::time::Instant::now();
    let mut report = SeedReport { seed, ..SeedReport::default() };
    let trace_path = dir.join("flight.jsonl");
    let faults = Faults::default();
    let mut config = HostConfig::new(dir.join("store.db"));
    config.workers = 2;
    config.trace = Some(trace_path.clone());
    config.trace_outputs = true;
    config.engine.step_limit = 6;
    config.store.synchronous = Synchronous::Normal;
    config.store.faults = Some(faults.clone());
    let shared: Shared = Arc::new(Mutex::new(rng.fork()));
    let provider = SimProvider { rng: shared.clone() };
    let mut tools = ToolSet::new();
    for name in ["view", "fail", "deny", "halt"] {
        tools = tools.with(SimTool { name, rng: shared.clone() });
    }
    let host = match Host::open(config, Arc::new(provider), tools).await {
        Ok(h) => h,
        Err(e) => {
            report.violations.push(format!("the host did not open: {e}"));
            return report;
        }
    };
    let log: Log = Arc::default();
    let mut clients = Vec::new();
    for id in 0..3 {
        clients.push(tokio::spawn(client(host.clone(), rng.fork(), id, log.clone())));
    }
    if profile == Profile::Faults {
        for _ in 0..rng.below(4) {
            tokio::time::sleep(Duration::from_millis(rng.between(0, 2_000))).await;
            let fault = if rng.chance(50) { Fault::Locked } else { Fault::DiskFull };
            faults.fail_next(u32::try_from(rng.between(1, 3)).unwrap_or(1), fault);
            *report.faults.entry(format!("{fault:?}")).or_default() += 1;
        }
    }
    let mut waiters = Vec::new();
    for c in clients {
        match c.await {
            Ok(w) => waiters.extend(w),
            Err(e) => report.violations.push(format!("a client panicked: {e}")),
        }
    }
    tokio::time::sleep(Duration::from_millis(rng.between(0, 3_000))).await;
    if let Err(e) = host.shutdown().await {
        report.violations.push(format!("shutdown failed: {e}"));
    }
    for w in waiters {
        if let Err(e) = w.await {
            report.violations.push(format!("a waiter panicked: {e}"));
        }
    }
    report.sim_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    drop(host);
    let observed =
        std::mem::take(&mut *log.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
    check_store(dir, &observed, &mut report);
    check_trace(&trace_path, &mut report, keep_trace);
    report
}

/// The store after a clean shutdown: intact, nothing to recover, histories legal, and the ledger
/// agrees with every answer a client was given.
fn check_store(dir: &Path, observed: &Observed, report: &mut SeedReport) {
    let opened = match Store::open(&StoreConfig::new(dir.join("store.db"))) {
        Ok(o) => o,
        Err(e) => return report.violations.push(format!("the store did not reopen: {e}")),
    };
    let v = &mut report.violations;
    if !opened.recovered.is_empty() {
        v.push(format!("a clean shutdown left {} submissions to recover", opened.recovered.len()));
    }
    let reader = match opened.store.reader() {
        Ok(r) => r,
        Err(e) => return v.push(format!("no reader: {e}")),
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
            *report.outcomes.entry(format!("{:?}", record.outcome)).or_default() += 1;
        }
    }
    for s in reader.sessions().unwrap_or_default() {
        for p in reader.protocol_problems(&s.id).unwrap_or_default() {
            v.push(format!("session {}: {p}", s.id));
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
    let _ = opened.store.close();
}

/// The flight trace replays through the core: every invariant after every input, and the
/// outputs recorded are the outputs produced (I12).
fn check_trace(path: &Path, report: &mut SeedReport, keep: bool) {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => return report.violations.push(format!("no flight trace: {e}")),
    };
    report.trace_hash =
        Sha256::digest(text.as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
    match turnstile_core::Trace::parse(&text) {
        Ok(trace) => {
            report.events = trace.lines.len() as u64;
            if let Err(e) = turnstile_core::replay(&trace) {
                report.violations.push(format!("the core's trace fails replay: {e}"));
            }
        }
        Err(e) => report.violations.push(format!("the flight trace does not parse: {e}")),
    }
    if keep || !report.violations.is_empty() {
        report.trace = Some(text);
    }
}
