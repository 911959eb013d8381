//! Several hosts over one store in the simulator (SPEC 11): three real member hosts, each on a
//! simulated node of its own, over one SQLite store on an in-memory disk, with clients that
//! submit, cancel, `cancel_run` and clear through random hosts, while nodes are killed and
//! restarted, paused past their lease and resumed, cut off from the store for seconds, or lose
//! only the connection that takes and renews leases (their commits go on).
//!
//! The store's clock is the simulated one (SQLite reads the intercepted clock), so leases
//! expire in simulated time, and a seed is a complete, reproducible world. After every seed:
//! - **no write by a fenced epoch**: the store's ghost log ([`Audit`]) of every take and every
//!   commit a member made for a session, by revision: nothing committed for a session without
//!   an epoch, or at an epoch after a later epoch was taken;
//! - **every submission ends**, once (the ledger's rows are all finished when the world goes
//!   quiet), and **runs once** (at most one prompt message per submission);
//! - **turns in acceptance order** within each session;
//! - **a cancel covers what is at or below its watermark, never more**: every `cancelled`
//!   submission was named by a `cancel_run`, or is at or below the watermark of a cancel or a
//!   clear of its session;
//! - **one actor**: a model request, and the tool `act` (an effect no epoch can fence), start
//!   only on the host that holds their session's lease in the store;
//! - every session's history is protocol-legal, and every core's flight trace (one per take)
//!   replays with the core's invariants after every input and its outputs as recorded.
//!
//! `turnstile-sim members` sweeps seeds; `turnstile-sim members-mutants` hunts the several-hosts
//! mutants of the host (`HostMutant::MEMBERS`), each of which some seed must catch.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use turnstile_core::{Outcome, RunId, SessionId, Submit, Usage};
use turnstile_host::store::{
    Audit, Fault, Faults as StoreFaults, Location, MemoryDisk, Reader, RunState, StoreConfig,
    StoredRole,
};
use turnstile_host::{
    Answer, Flight, FlightShelf, Host, HostConfig, MemberConfig, ScriptedProvider, ToolSet,
};

use crate::rng::Rng;
use crate::world::SeedReport;

/// Member hosts in every world.
const HOSTS: usize = 3;
/// Sessions the clients share.
const SESSIONS: u64 = 3;
/// Client tasks.
const CLIENTS: u64 = 3;
/// Actions per client.
const ACTIONS: u64 = 10;

/// Where a member host runs: its simulated node (nothing outside the simulator).
#[cfg(madsim)]
type Node = madsim::task::NodeId;
#[cfg(not(madsim))]
type Node = ();

/// One member as the world sees it.
struct Member {
    name: String,
    host: Host,
    node: Node,
    /// Its link to the store: a partition is a fault on every call.
    link: StoreFaults,
    /// Paused (frozen): clients leave it alone until it resumes.
    paused: bool,
}

/// The hosts clients may use now.
type Reachable = Arc<Mutex<Vec<Option<Host>>>>;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The provider of the member `host`: the prompt says what the answer is (`quick`, `slow`,
/// `long` text, a call of the tool `act` first, or `flaky`: every other request fails with a
/// retryable error, so turns wait in backoffs). Like the tool, it notes a request made on a
/// host that does not hold the session's lease in the store.
fn provider(host: &str, disk: &MemoryDisk, outside: &Arc<Mutex<Vec<String>>>) -> ScriptedProvider {
    let (host, disk, outside) = (host.to_owned(), disk.clone(), outside.clone());
    ScriptedProvider::new(move |request, n| {
        use turnstile_host::RequestMessage;
        let owner = Reader::open_at(&Location::Memory(disk.clone()))
            .and_then(|r| r.owner(&request.session));
        if owner.as_ref().ok().and_then(Option::as_deref) != Some(host.as_str()) {
            lock(&outside).push(format!(
                "{host} sent a model request of session {} while the lease was {owner:?}",
                request.session
            ));
        }
        let turn = request.messages.iter().rposition(|m| matches!(m, RequestMessage::User { .. }));
        let turn = &request.messages[turn.unwrap_or(0)..];
        let prompt = turn.iter().find_map(|m| match m {
            RequestMessage::User { text, .. } => Some(text.clone()),
            _ => None,
        });
        let last = prompt.unwrap_or_default();
        let called = turn.iter().any(|m| matches!(m, RequestMessage::ToolResults(_)));
        if last.ends_with("tool") && !called {
            Answer::tool_call("a1", "act", "{}")
        } else if last.ends_with("flaky") && n % 2 == 0 {
            let error = turnstile_core::ProviderError {
                class: turnstile_core::ErrorClass::Transport,
                message: "the connection was reset".to_owned(),
                ..Default::default()
            };
            Answer(vec![turnstile_host::Scripted::Event(turnstile_core::StepEvent::Failed {
                error,
            })])
        } else if last.ends_with("long") {
            Answer::streamed("a long answer, written slowly", 12, 250, Usage::default())
        } else if last.ends_with("slow") {
            Answer::streamed("a slower answer", 5, 150, Usage::default())
        } else {
            Answer::streamed("quick", 2, 20, Usage::default())
        }
    })
}

/// The one tool, `act`: an effect no epoch can fence. It takes a while, and it notes when it
/// starts on a host that does not hold its session's lease in the store (SPEC 11: a host
/// starts nothing for a session past its own deadline, which is before the lease's end).
struct Act {
    host: String,
    disk: MemoryDisk,
    outside: Arc<Mutex<Vec<String>>>,
}

impl turnstile_host::Tool for Act {
    fn spec(&self) -> turnstile_core::ToolSpec {
        turnstile_core::ToolSpec::new("act")
    }

    fn run(
        &self,
        call: turnstile_host::ToolCall,
    ) -> turnstile_host::BoxFuture<turnstile_core::ToolOutput> {
        let owner = Reader::open_at(&Location::Memory(self.disk.clone()))
            .and_then(|r| r.owner(&call.session));
        if owner.as_ref().ok().and_then(Option::as_deref) != Some(self.host.as_str()) {
            lock(&self.outside).push(format!(
                "{} started a tool call of session {} while the lease was {owner:?}",
                self.host, call.session
            ));
        }
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            turnstile_core::ToolOutput::ok("acted")
        })
    }
}

/// What every member of a world shares: the store's ghost log and the cores' flight traces.
struct Shared {
    audit: Audit,
    flights: FlightShelf,
}

fn config(
    disk: &MemoryDisk,
    name: &str,
    link: &StoreFaults,
    shared: &Shared,
    mutant: Option<&str>,
) -> Result<HostConfig, String> {
    let audit = &shared.audit;
    let mut config = HostConfig::with_store(StoreConfig::in_memory(disk));
    // Every core of every member records its trace, with its outputs, which the core's
    // replay checks after the seed.
    config.trace = Some(Flight::Engines(shared.flights.clone()));
    config.trace_outputs = true;
    config.workers = 1;
    // A partition longer than this stops the host: the partitions below are shorter.
    config.store_retry = Duration::from_secs(8);
    config.store.faults = Some(link.clone());
    config.store.audit = Some(audit.clone());
    // Retries after 1 s and 2 s (not 5 s and 10 s): a backoff ends within a fault.
    config.engine.retry_backoff_ms = vec![1_000, 2_000];
    let mut m = MemberConfig::new(name);
    m.lease = Duration::from_secs(2);
    m.margin = Duration::from_millis(500);
    m.poll = Duration::from_millis(200);
    m.prefer_acceptor = Duration::from_millis(100);
    m.idle_release = Duration::from_secs(3);
    config.member = Some(m);
    if let Some(name) = mutant {
        #[cfg(feature = "mutants")]
        {
            let m = turnstile_host::HostMutant::from_name(name)
                .ok_or_else(|| format!("unknown mutant {name}"))?;
            config.store.mutant = Some(m);
        }
        #[cfg(not(feature = "mutants"))]
        {
            return Err(format!(
                "mutant {name}: this build has no mutants (build with --features mutants)"
            ));
        }
    }
    Ok(config)
}

/// Opens a member on a node of its own, with the tool `act`.
async fn open(
    config: HostConfig,
    name: &str,
    outside: &Arc<Mutex<Vec<String>>>,
) -> Result<(Host, Node), String> {
    let turnstile_host::store::Location::Memory(disk) = &config.store.location else {
        return Err("the simulated store is an in-memory disk".to_owned());
    };
    let provider = Arc::new(provider(name, disk, outside));
    let act = Act { host: name.to_owned(), disk: disk.clone(), outside: outside.clone() };
    let tools = ToolSet::new().with(act);
    #[cfg(madsim)]
    {
        let node = madsim::runtime::Handle::current().create_node().name(name.to_owned()).build();
        let opened = node.spawn(async move { Host::open(config, provider, tools).await }).await;
        let host = opened.map_err(|e| e.to_string())?.map_err(|e| e.to_string())?;
        Ok((host, node.id()))
    }
    #[cfg(not(madsim))]
    {
        let _ = name;
        Host::open(config, provider, tools).await.map(|h| (h, ())).map_err(|e| e.to_string())
    }
}

/// One client: submits, cancels, `cancel_run`s and clears through random reachable hosts.
async fn client(id: u64, mut rng: Rng, reachable: Reachable) {
    let mut mine: Vec<RunId> = Vec::new();
    for n in 0..ACTIONS {
        tokio::time::sleep(Duration::from_millis(rng.between(0, 700))).await;
        let host = {
            let hosts = lock(&reachable);
            let up: Vec<&Host> = hosts.iter().flatten().collect();
            if up.is_empty() {
                continue;
            }
            up[usize::try_from(rng.below(up.len() as u64)).unwrap_or(0)].clone()
        };
        let session = SessionId::new(format!("s{}", rng.below(SESSIONS)));
        // A call to a host that is cut off fails; one to a host that dies meanwhile may never
        // answer: the client gives up, as a real one would, after a while.
        let within = Duration::from_secs(5);
        match rng.below(100) {
            0..60 => {
                let kinds = ["quick", "slow", "long", "tool", "flaky"];
                let kind = kinds[usize::try_from(rng.below(5)).unwrap_or(0)];
                let run = RunId::new(format!("c{id}-{n}"));
                let submit = Submit::new(session.as_str(), format!("{run} {kind}"))
                    .with_run_id(run.as_str());
                if let Ok(Ok(_)) = tokio::time::timeout(within, host.submit(submit)).await {
                    mine.push(run);
                }
            }
            60..75 => drop(tokio::time::timeout(within, host.cancel(&session)).await),
            75..90 => {
                if !mine.is_empty() {
                    let run = &mine[usize::try_from(rng.below(mine.len() as u64)).unwrap_or(0)];
                    drop(tokio::time::timeout(within, host.cancel_run(run)).await);
                }
            }
            _ => drop(tokio::time::timeout(within, host.clear_queue(&session)).await),
        }
    }
}

/// Runs one world and checks it.
// Without madsim nothing runs a world (the code is compiled for the lints only).
#[cfg_attr(not(madsim), allow(dead_code))]
pub(crate) async fn world(seed: u64, mutant: Option<&str>, disk: &MemoryDisk) -> SeedReport {
    let mut rng = Rng::new(seed);
    let started = tokio::time::Instant::now();
    let mut report = SeedReport { seed, ..SeedReport::default() };
    let shared = Shared { audit: Audit::default(), flights: FlightShelf::default() };
    let outside: Arc<Mutex<Vec<String>>> = Arc::default();
    let mut members = Vec::new();
    for i in 0..HOSTS {
        let name = format!("h{i}");
        let link = StoreFaults::default();
        let opened = match config(disk, &name, &link, &shared, mutant) {
            Ok(c) => open(c, &name, &outside).await,
            Err(e) => Err(e),
        };
        match opened {
            Ok((host, node)) => members.push(Member { name, host, node, link, paused: false }),
            Err(e) => {
                report.violations.push(format!("{name} did not open: {e}"));
                return report;
            }
        }
    }
    let reachable: Reachable =
        Arc::new(Mutex::new(members.iter().map(|m| Some(m.host.clone())).collect()));
    let clients: Vec<_> =
        (0..CLIENTS).map(|id| tokio::spawn(client(id, rng.fork(), reachable.clone()))).collect();
    // Up to three faults, at random moments while the clients work.
    for _ in 0..rng.below(4) {
        tokio::time::sleep(Duration::from_millis(rng.between(200, 2_500))).await;
        let i = usize::try_from(rng.below(HOSTS as u64)).unwrap_or(0);
        if members[i].paused {
            continue;
        }
        match rng.below(4) {
            0 => {
                *report.faults.entry("Kill".to_owned()).or_default() += 1;
                lock(&reachable)[i] = None;
                kill(&members[i].node);
                tokio::time::sleep(Duration::from_millis(rng.between(10, 1_500))).await;
                let link = StoreFaults::default();
                let name = members[i].name.clone();
                let opened = match config(disk, &name, &link, &shared, mutant) {
                    Ok(c) => open(c, &name, &outside).await,
                    Err(e) => Err(e),
                };
                match opened {
                    Ok((host, node)) => {
                        lock(&reachable)[i] = Some(host.clone());
                        members[i] = Member { name, host, node, link, paused: false };
                    }
                    Err(e) => report.violations.push(format!("{name} did not open again: {e}")),
                }
            }
            1 => {
                *report.faults.entry("Pause".to_owned()).or_default() += 1;
                lock(&reachable)[i] = None;
                members[i].paused = true;
                pause(&members[i].node, true);
                // Past its lease (2 s), sometimes well past.
                tokio::time::sleep(Duration::from_millis(rng.between(2_500, 5_000))).await;
                pause(&members[i].node, false);
                members[i].paused = false;
                lock(&reachable)[i] = Some(members[i].host.clone());
            }
            2 => {
                // Only the connection that takes and renews breaks: the commits go on.
                *report.faults.entry("LeaseLink".to_owned()).or_default() += 1;
                members[i].link.cut_coordination(Some(Fault::Locked));
                tokio::time::sleep(Duration::from_millis(rng.between(1_500, 5_000))).await;
                members[i].link.cut_coordination(None);
            }
            _ => {
                *report.faults.entry("Partition".to_owned()).or_default() += 1;
                members[i].link.fail_always(Fault::Locked);
                tokio::time::sleep(Duration::from_millis(rng.between(500, 4_000))).await;
                members[i].link.clear();
            }
        }
    }
    for c in clients {
        if let Err(e) = c.await {
            report.violations.push(format!("a client panicked: {e}"));
        }
    }
    // The world goes quiet: every accepted submission must end (60 s of simulated time).
    let location = Location::Memory(disk.clone());
    for _ in 0..300 {
        let unfinished = Reader::open_at(&location)
            .and_then(|r| r.runs())
            .map(|runs| runs.iter().any(|r| r.state != RunState::Finished));
        if matches!(unfinished, Ok(false)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for m in &members {
        if let Err(e) = m.host.shutdown().await {
            report.violations.push(format!("{}: shutdown failed: {e}", m.name));
        }
    }
    report.sim_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    report.violations.extend(lock(&outside).drain(..));
    check(&location, &shared.audit, &mut report);
    // Every core's trace replays with the core's invariants after every input, and its
    // outputs as recorded; the hash of them all is the seed's (for determinism).
    let ledger = std::mem::take(&mut report.trace_hash);
    let (_, kept) = crate::world::checks::check_traces(&shared.flights.traces(), &mut report);
    report.trace_hash = format!("{}-{ledger}", report.trace_hash);
    if !report.violations.is_empty() {
        report.trace = kept;
    }
    report
}

fn kill(node: &Node) {
    #[cfg(madsim)]
    madsim::runtime::Handle::current().kill(*node);
    #[cfg(not(madsim))]
    let _ = node;
}

fn pause(node: &Node, paused: bool) {
    #[cfg(madsim)]
    {
        let handle = madsim::runtime::Handle::current();
        if paused { handle.pause(*node) } else { handle.resume(*node) }
    }
    #[cfg(not(madsim))]
    let _ = (node, paused);
}

/// The checks of a world that went quiet (see the module docs).
fn check(location: &Location, audit: &Audit, report: &mut SeedReport) {
    let v = &mut report.violations;
    v.extend(audit.fenced_writes());
    let reader = match Reader::open_at(location) {
        Ok(r) => r,
        Err(e) => return v.push(format!("the store cannot be read: {e}")),
    };
    let runs = reader.runs().unwrap_or_default();
    let commands = reader.commands().unwrap_or_default();
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    for run in &runs {
        let Some((cursor, record)) = &run.completion else {
            v.push(format!("seq {} ({}) never ended", run.seq, run.session));
            continue;
        };
        std::hash::Hash::hash(&(run.seq.0, cursor.0, format!("{:?}", record.outcome)), &mut hasher);
        *report.outcomes.entry(format!("{:?}", record.outcome)).or_default() += 1;
        if record.outcome == Outcome::Cancelled {
            let covered = commands.iter().any(|c| {
                c.session == run.session
                    && match c.kind.as_str() {
                        "cancel" | "clear_queue" => c.up_to.is_some_and(|w| run.seq <= w),
                        "cancel_run" => c.run_id == run.run_id,
                        _ => false,
                    }
            });
            if !covered {
                v.push(format!(
                    "seq {} ({}) ended cancelled, but no cancel covers it",
                    run.seq, run.session
                ));
            }
        }
    }
    for s in reader.sessions().unwrap_or_default() {
        for p in reader.protocol_problems(&s.id).unwrap_or_default() {
            v.push(format!("session {}: {p}", s.id));
        }
        let prompts: Vec<u64> = reader
            .messages(&s.id)
            .unwrap_or_default()
            .iter()
            .filter(|m| m.role == StoredRole::User && !m.synthetic)
            .filter_map(|m| m.seq.map(|q| q.0))
            .collect();
        let mut seen: BTreeMap<u64, usize> = BTreeMap::new();
        for q in &prompts {
            *seen.entry(*q).or_default() += 1;
        }
        for (q, n) in seen.iter().filter(|(_, n)| **n > 1) {
            v.push(format!("session {}: seq {q} ran {n} times", s.id));
        }
        if !prompts.windows(2).all(|w| w[0] <= w[1]) {
            v.push(format!("session {}: turns out of acceptance order: {prompts:?}", s.id));
        }
    }
    let (takes, _) = audit.counts();
    *report.faults.entry("Takes".to_owned()).or_default() += takes as u64;
    report.trace_hash = format!("{:016x}", std::hash::Hasher::finish(&hasher));
}

/// Runs one seed in its own simulated runtime.
#[cfg(madsim)]
#[must_use]
pub fn run_seed(seed: u64, mutant: Option<&str>) -> SeedReport {
    use std::panic::AssertUnwindSafe;
    let pid = std::process::id();
    let mut disk = MemoryDisk::new(&format!("turnstile-members-{pid}-{seed}"));
    for again in 1..64 {
        if disk.is_ok() {
            break;
        }
        disk = MemoryDisk::new(&format!("turnstile-members-{pid}-{seed}-{again}"));
    }
    let disk = match disk {
        Ok(d) => d,
        Err(e) => {
            return SeedReport {
                seed,
                violations: vec![format!("no memory disk: {e}")],
                ..SeedReport::default()
            };
        }
    };
    let mut rt = madsim::runtime::Runtime::with_seed_and_config(seed, madsim::Config::default());
    rt.set_time_limit(Duration::from_secs(600));
    let result =
        std::panic::catch_unwind(AssertUnwindSafe(|| rt.block_on(world(seed, mutant, &disk))));
    result.unwrap_or_else(|payload| SeedReport {
        seed,
        violations: vec![format!(
            "panicked (a hang ends at the time limit): {}",
            crate::panic_message(payload.as_ref())
        )],
        ..SeedReport::default()
    })
}

/// Runs seeds `first..first + seeds` in `jobs` threads; the reports sorted by seed. Stops early
/// (with the reports so far) once `stop_at_first` and a seed failed.
#[cfg(madsim)]
#[must_use]
pub fn sweep(
    first: u64,
    seeds: u64,
    jobs: usize,
    mutant: Option<&str>,
    stop_at_first: bool,
) -> Vec<SeedReport> {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let next = AtomicU64::new(first);
    let failed = AtomicBool::new(false);
    let reports = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..jobs.max(1) {
            scope.spawn(|| {
                loop {
                    let seed = next.fetch_add(1, Ordering::Relaxed);
                    if seed >= first + seeds || (stop_at_first && failed.load(Ordering::Relaxed)) {
                        return;
                    }
                    let report = run_seed(seed, mutant);
                    if !report.violations.is_empty() {
                        failed.store(true, Ordering::Relaxed);
                    }
                    lock(&reports).push(report);
                }
            });
        }
    });
    let mut reports = reports.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
    reports.sort_by_key(|r| r.seed);
    reports
}

/// A failing seed's report as a sweep's [`crate::sweep::Failure`]: its violations, the
/// command that reruns it, and (the first `detailed` ones) the core trace that failed, written
/// into `out` and shrunk, when a core's trace is what failed.
#[cfg(madsim)]
#[must_use]
pub fn failure(
    report: &SeedReport,
    mutant: Option<&str>,
    out: Option<&std::path::Path>,
) -> crate::sweep::Failure {
    let with = mutant.map(|m| format!(" --mutant {m}")).unwrap_or_default();
    let rerun = format!("turnstile-sim members --first {{seed}} --seeds 1{with}");
    crate::sweep::failure(report, &rerun, out)
}
