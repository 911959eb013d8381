//! The simulated world around the real host (SPEC 10 "Sim"): a provider, tools, clients that
//! submit, cancel, clear and summarize at random moments, faults, and the checks that run
//! after every seed.
//!
//! A world is one configuration of it: which faults ([`Faults`]), which client mix
//! ([`Clients`]), how the provider answers ([`Behaviour`]), which tools (the built-in ones and
//! the user's, added per seed through a [`Setup`]) and which checks of the user's run beside
//! the built-in ones. The `turnstile-sim` command runs the built-in world (the default
//! configuration); [`crate::sweep::Sweep`] builds it and others.
//!
//! Everything random is drawn from [`Rng`]s forked from the seed; everything that waits waits on
//! the runtime's clock. Under madsim (`--cfg madsim`, see `crate::sweep`) a seed is therefore a
//! complete, reproducible world. The code compiles without madsim too, so the workspace's lints
//! cover it, but only the simulator runs it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use turnstile_core::SessionId;
use turnstile_host::store::{Fault, Faults as StoreFaults, MemoryDisk, StoreConfig};
use turnstile_host::{Flight, FlightBuffer, Host, HostConfig, Provider, Tool, ToolSet};

use crate::rng::Rng;

pub mod act;
pub mod checks;
pub mod clients;
pub mod provider;
pub mod report;
pub mod tools;

pub use act::Act;
pub use checks::Run;
use checks::{Check, check_store, check_traces, user_checks};
pub use clients::Clients;
use clients::{Current, Log, client, follow, now, slow_subscriber};
use provider::{Answers, Callable, Shared, SimProvider};
pub use provider::{Behaviour, InputGen, Script};
pub use report::SeedReport;
pub use tools::LEFT_TO_FINISH;
use tools::{BUILT_IN, Guarded, Panics, SimTool};

/// Which faults a world injects, per seed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Faults {
    /// Transient store failures (a locked database, a full disk): up to 3 bursts of up to 3
    /// failing commits, which the host must absorb by retrying.
    pub store: bool,
    /// Percent of seeds in which the host's process dies once at a random moment (every task
    /// of it stops where it is) and a new one starts on the same store (crash recovery).
    pub crash: u64,
    /// Percent of the seeds without a crash in which the disk fails for good: the host stops
    /// (fail-stop) and everyone waiting hears it; the disk comes back and a new host recovers.
    pub outage: u64,
    /// Percent of seeds in which the host is shut down while clients are still at work (later
    /// submissions are refused; every waiter still gets exactly one answer).
    pub early_shutdown: u64,
    /// Whether provider streams may stall (nothing more arrives: only the stream watchdog, a
    /// cancel or a shutdown ends them); without, a stall is a cut stream.
    pub stalls: bool,
}

impl Faults {
    /// Provider and tool failures only (and early shutdowns, and stalls): `--faults calm`.
    pub const CALM: Faults =
        Faults { store: false, crash: 0, outage: 0, early_shutdown: 20, stalls: true };
    /// Everything: store failures, a crash in 40% of seeds, an outage in 15% of the rest,
    /// early shutdowns, stalls (`--faults faults`, the default).
    pub const ALL: Faults =
        Faults { store: true, crash: 40, outage: 15, early_shutdown: 20, stalls: true };

    /// The profile with this name: `calm` ([`Faults::CALM`]) or `faults` ([`Faults::ALL`]).
    #[must_use]
    pub fn from_name(name: &str) -> Option<Faults> {
        match name {
            "calm" => Some(Faults::CALM),
            "faults" => Some(Faults::ALL),
            _ => None,
        }
    }
}

impl Default for Faults {
    /// [`Faults::ALL`].
    fn default() -> Faults {
        Faults::ALL
    }
}

/// What the user adds to one seed's world: tools (with how the provider draws their calls'
/// input) and checks that run after the seed, beside the built-in ones. A setup runs once per
/// seed, inside the simulation, so a tool and the check of its effects can share fresh state.
pub struct Setup {
    seed: u64,
    tools: Vec<(Arc<dyn Tool>, InputGen)>,
    checks: Vec<Check>,
}

impl Setup {
    /// The seed this world runs.
    #[must_use]
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Offers `tool` to the model. The provider's tool calls name it like the other tools;
    /// `input` draws each call's arguments (JSON text) from the request's generator. A panic
    /// in the tool is a violation naming it and the call.
    pub fn tool(
        &mut self,
        tool: impl Tool,
        input: impl Fn(&mut Rng) -> String + Send + Sync + 'static,
    ) -> &mut Setup {
        self.tools.push((Arc::new(tool), Arc::new(input)));
        self
    }

    /// Runs `test` after the seed, on the store the last host left, the ledger and the core's
    /// traces ([`Run`]). An `Err` is a violation: ``check `NAME`: ERROR``.
    pub fn check(
        &mut self,
        name: impl Into<String>,
        test: impl FnOnce(&Run<'_>) -> Result<(), String> + Send + 'static,
    ) -> &mut Setup {
        self.checks.push(Check { name: name.into(), test: Box::new(test) });
        self
    }
}

/// A setup of the user's (see [`Setup`]).
pub(crate) type SetupFn = Arc<dyn Fn(&mut Setup) + Send + Sync>;

/// One configuration of the simulated world. `World::default()` is the built-in world that
/// `turnstile-sim sweep` runs.
#[derive(Clone, Default)]
pub(crate) struct World {
    pub(crate) faults: Faults,
    pub(crate) clients: Clients,
    pub(crate) behaviour: Behaviour,
    /// True when the built-in tools (`view`, `slow`, `fail`, `deny`, `halt`) are left out.
    pub(crate) no_built_in_tools: bool,
    pub(crate) setups: Vec<SetupFn>,
    /// The mutant to switch on, by name (a build with the `mutants` feature).
    pub(crate) mutant: Option<String>,
}

impl World {
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

    /// The tools of one seed and what the provider's calls may name: the built-in tools (with
    /// `view` twice as likely), the user's, and an unknown tool.
    fn tools(
        &self,
        user: Vec<(Arc<dyn Tool>, InputGen)>,
        rng: &Shared,
        panics: &Panics,
    ) -> (ToolSet, Vec<Callable>) {
        let mut tools = ToolSet::new().with_agent();
        let mut callable = Vec::new();
        if !self.no_built_in_tools {
            for name in BUILT_IN {
                tools = tools.with(SimTool { name, rng: rng.clone() });
            }
            let names = ["view", "view", "slow", "fail", "deny", "halt"];
            callable.extend(names.map(|n| Callable { name: n.to_owned(), input: None }));
        }
        for (tool, input) in user {
            let name = tool.spec().name;
            tools = tools.with(Guarded { tool, panics: panics.clone() });
            callable.push(Callable { name, input: Some(input) });
        }
        callable.push(Callable { name: "nope".to_owned(), input: None });
        (tools, callable)
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

/// The flight trace of each host incarnation, in order: owned by the caller, so that a seed
/// that panicked (a hang hits the time limit) still has the traces it recorded.
pub type Flights = Mutex<Vec<FlightBuffer>>;

/// The last flight trace recorded (see [`Flights`]).
#[must_use]
pub fn last_flight(flights: &Flights) -> Option<String> {
    flights.lock().unwrap_or_else(std::sync::PoisonError::into_inner).last().map(FlightBuffer::text)
}

/// The host's configuration in every world: 2 workers, short store retries, the step limit,
/// the stream watchdog in simulated seconds, store faults injectable, a small update buffer.
fn host_config(disk: &MemoryDisk, faults: &StoreFaults) -> HostConfig {
    let mut config = HostConfig::with_store(StoreConfig::in_memory(disk));
    config.workers = 2;
    // A failing store stops the host after 2 s of retries (an outage below).
    config.store_retry = Duration::from_secs(2);
    config.trace_outputs = true;
    config.engine.step_limit = 6;
    // The stream watchdog (SPEC 4.5) in simulated seconds: a hung stream is closed after 5 s of
    // silence and retried; the slow streams pause for up to 4 s and must live.
    config.engine.stream_idle_timeout_ms = 5_000;
    config.store.faults = Some(faults.clone());
    // A small live-update buffer, so the slow subscriber falls behind.
    config.updates_capacity = 16;
    config
}

/// Runs one world to its end inside the current (simulated) runtime, then checks it. The store
/// lives on `disk` and the flight traces in memory: both outlive a crashed host, as a disk
/// would, and the world touches no file (unless a tool of the user's does).
// Without madsim nothing runs a world (the code is compiled for the lints only).
#[cfg_attr(not(madsim), allow(dead_code))]
pub(crate) async fn world(
    seed: u64,
    knobs: &World,
    disk: &MemoryDisk,
    flights: &Flights,
    keep_trace: bool,
) -> SeedReport {
    let mut rng = Rng::new(seed);
    let started = tokio::time::Instant::now();
    let mut report = SeedReport { seed, ..SeedReport::default() };
    let store_faults = StoreFaults::default();
    let mut config = host_config(disk, &store_faults);
    if let Err(e) = knobs.arm(&mut config) {
        report.violations.push(e);
        return report;
    }
    let mut setup = Setup { seed, tools: Vec::new(), checks: Vec::new() };
    for f in &knobs.setups {
        f(&mut setup);
    }
    let shared: Shared = Arc::new(Mutex::new(rng.fork()));
    let panics = Panics::default();
    let (tools, callable) = knobs.tools(std::mem::take(&mut setup.tools), &shared, &panics);
    let answers =
        Answers { behaviour: knobs.behaviour.clone(), callable, stalls: knobs.faults.stalls };
    let provider = Arc::new(SimProvider {
        rng: shared.clone(),
        answers,
        prep_failures: Arc::default(),
        streamed: Arc::default(),
        agent_offered_to_child: Arc::default(),
    });
    let launcher = Launcher {
        config: &config,
        flights,
        provider: &provider,
        tools: &tools,
        restarts: Arc::default(),
    };
    let (host, node) = match launcher.open(1).await {
        Ok(h) => h,
        Err(e) => {
            report.violations.push(format!("the host did not open: {e}"));
            return report;
        }
    };
    let current: Current = Arc::new(Mutex::new(host));
    let log: Log = Arc::default();
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let follower = tokio::spawn(follow(current.clone(), done.clone()));
    let slow = tokio::spawn(slow_subscriber(current.clone(), done.clone(), rng.fork()));
    let mut clients = Vec::new();
    for id in 0..knobs.clients.clients {
        let mix = knobs.clients;
        clients.push(tokio::spawn(client(current.clone(), rng.fork(), id, log.clone(), mix)));
    }
    let mut faults = Faulting { launcher: &launcher, current: &current, incarnation: 1, node };
    let early = faults.early_shutdown(&mut rng, knobs.faults.early_shutdown);
    faults.inject(&mut rng, knobs.faults, &store_faults, &mut report).await;
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
    let ended = Ended { observed, followed, provider: &provider, panics, checks: setup.checks };
    ended.check(&config, launcher.flights, &mut report, keep_trace);
    report
}

/// What the world saw by its end, to check.
struct Ended<'a> {
    observed: clients::Observed,
    followed: Vec<(turnstile_host::Cursor, turnstile_host::CompletionRecord)>,
    provider: &'a SimProvider,
    panics: Panics,
    checks: Vec<Check>,
}

impl Ended<'_> {
    /// The built-in checks (store, clients, sub-agents, traces), then the user's.
    fn check(self, config: &HostConfig, flights: &Flights, report: &mut SeedReport, keep: bool) {
        let take = |m: &Mutex<Vec<String>>| {
            std::mem::take(&mut *m.lock().unwrap_or_else(std::sync::PoisonError::into_inner))
        };
        let prep_failures: BTreeMap<SessionId, u64> = std::mem::take(
            &mut *self
                .provider
                .prep_failures
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        let location = &config.store.location;
        let streamed = std::mem::take(
            &mut *self.provider.streamed.lock().unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        check_store(location, &self.observed, &streamed, &prep_failures, &self.followed, report);
        let offered: Vec<SessionId> = std::mem::take(
            &mut *self
                .provider
                .agent_offered_to_child
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        if let Some(child) = offered.first() {
            let n = offered.len();
            report.violations.push(format!(
                "{n} requests of sub-agents offered the agent tool (first: {child})"
            ));
        }
        report.violations.extend(take(&self.panics));
        let traces = flights.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        let (parsed, kept) = check_traces(&traces, report);
        user_checks(location, self.checks, &parsed, report);
        if keep || !report.violations.is_empty() {
            report.trace = kept;
        }
    }
}

/// The faults of one seed, as they happen to the host.
struct Faulting<'a> {
    launcher: &'a Launcher<'a>,
    current: &'a Current,
    incarnation: u32,
    node: Node,
}

impl Faulting<'_> {
    /// Sometimes the host is shut down while clients are still at work. The task tells a
    /// shutdown that failed because a crash took its host away (then it is no failure).
    fn early_shutdown(
        &self,
        rng: &mut Rng,
        percent: u64,
    ) -> Option<tokio::task::JoinHandle<Result<(), turnstile_host::Stopped>>> {
        let restarts = self.launcher.restarts.clone();
        let current = self.current.clone();
        rng.chance(percent).then(|| {
            let ms = rng.between(0, 8_000);
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(ms)).await;
                let before = restarts.load(std::sync::atomic::Ordering::Relaxed);
                let result = now(&current).shutdown().await;
                // A crash during the shutdown stops it half-way, as it would a real one.
                let after = restarts.load(std::sync::atomic::Ordering::Relaxed);
                let crashed = before % 2 == 1 || after != before;
                result.or_else(|e| if crashed { Ok(()) } else { Err(e) })
            })
        })
    }

    /// Store bursts, then a crash or an outage, as `faults` says.
    async fn inject(
        &mut self,
        rng: &mut Rng,
        faults: Faults,
        store: &StoreFaults,
        report: &mut SeedReport,
    ) {
        if faults.store {
            // Transient faults: bursts of up to 3 failing commits, which the host must absorb
            // (a clean shutdown after them). A burst never lands on the retries of an earlier
            // one: chained on one commit they would outlast the retry budget, an outage.
            for _ in 0..rng.below(4) {
                tokio::time::sleep(Duration::from_millis(rng.between(0, 2_000))).await;
                let fault = if rng.chance(50) { Fault::Locked } else { Fault::DiskFull };
                store.fail_burst(u32::try_from(rng.between(1, 3)).unwrap_or(1), fault);
                *report.faults.entry(format!("{fault:?}")).or_default() += 1;
            }
        }
        if faults.crash == 0 && faults.outage == 0 {
            return;
        }
        if rng.chance(faults.crash) {
            self.crash(rng, report).await;
        } else if rng.chance(faults.outage) {
            self.outage(rng, store, report).await;
        }
    }

    /// The process dies at a random moment and starts again on the same store.
    async fn crash(&mut self, rng: &mut Rng, report: &mut SeedReport) {
        let restarts = &self.launcher.restarts;
        tokio::time::sleep(Duration::from_millis(rng.between(0, 6_000))).await;
        self.incarnation += 1;
        restarts.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let restarted = self.launcher.crash_and_restart(&self.node, self.incarnation).await;
        restarts.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        match restarted {
            // One crash per seed: the new incarnation's node is not needed again.
            Ok((h, _node)) => {
                *self.current.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = h;
                *report.faults.entry("Crash".to_owned()).or_default() += 1;
            }
            Err(e) => report.violations.push(format!("restart after a crash failed: {e}")),
        }
    }

    /// The disk fails for good: the host retries, stops (fail-stop, releasing the store) and
    /// everyone waiting hears the stop; the disk comes back and a new host's recovery decides.
    /// A host with nothing to write meanwhile never notices.
    async fn outage(&mut self, rng: &mut Rng, store: &StoreFaults, report: &mut SeedReport) {
        let restarts = &self.launcher.restarts;
        tokio::time::sleep(Duration::from_millis(rng.between(0, 6_000))).await;
        restarts.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        store.fail_always(Fault::DiskFull);
        let host = now(self.current);
        let mut waited = 0;
        while host.stopped().is_none() && waited < 10_000 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            waited += 100;
        }
        store.clear();
        if host.stopped().is_some() {
            self.incarnation += 1;
            match self.launcher.open(self.incarnation).await {
                Ok((h, _node)) => {
                    *self.current.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = h;
                    *report.faults.entry("Outage".to_owned()).or_default() += 1;
                }
                Err(e) => report.violations.push(format!("restart after an outage failed: {e}")),
            }
        }
        drop(host);
        restarts.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// What every incarnation of the host is opened with: the same configuration, store, provider
/// and tools; only the flight trace is per incarnation (a restart starts a new engine).
struct Launcher<'a> {
    config: &'a HostConfig,
    /// The flight trace of each incarnation opened, in order.
    flights: &'a Flights,
    provider: &'a Arc<SimProvider>,
    tools: &'a ToolSet,
    /// Counts the starts and ends of host replacements (a crash, an outage): odd while one is
    /// under way, so a shutdown that failed because its host went away can tell.
    restarts: Arc<std::sync::atomic::AtomicU32>,
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
    async fn crash_and_restart(&self, node: &Node, n: u32) -> Result<(Host, Node), String> {
        #[cfg(madsim)]
        {
            madsim::runtime::Handle::current().kill(*node);
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
