//! Host benchmark (not a timed test): run with `cargo bench -p turnstile-host --bench host`.
//!
//! Prints, on this machine, with the scripted provider and a durable store
//! (`synchronous=FULL`):
//! 1. the raw SQLite rate: small durable transactions per second, measured at the start and
//!    at the end of the run (the machine is shared and noisy: compare within one run);
//! 2. streamed deltas per second through core, debouncer and SQLite (providers that stream as
//!    fast as they can);
//! 3. SQLite writes per streamed message at a realistic pace, against the debounce windows;
//! 4. cancel-to-RunComplete latency with a provider that never answers (median, p99), and
//!    with a long droppable tool call running (the cancel must not wait for the grace);
//! 5. memory per idle session (resident set growth over many finished sessions);
//! 6. concurrently streaming sessions sustained while every held write commits within its
//!    window (p99 age at commit at most two windows), with group commit and without.
//!
//! `TURNSTILE_BENCH_QUICK=1` runs smaller sizes (a smoke run); `TURNSTILE_BENCH_SESSIONS=N`
//! runs only the group-commit point with N sessions (for profiling);
//! `TURNSTILE_BENCH_CHANGE_ORDER=1` runs only the change order's cost, three times.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use turnstile_core::{FinishReason, RunId, SessionId, StepEvent, Submit, Usage};
use turnstile_host::{
    Answer, BoxError, BoxFuture, EventSink, Host, HostConfig, ModelInfo, ModelRequest, Provider,
    Scripted, ScriptedProvider, ToolSet, WriterStats,
};

fn quick() -> bool {
    std::env::var_os("TURNSTILE_BENCH_QUICK").is_some()
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir().expect("scratch dir");
    if let Some(n) = std::env::var("TURNSTILE_BENCH_SESSIONS").ok().and_then(|n| n.parse().ok()) {
        // One sweep point with group commit (for profiling).
        let r = rt.block_on(streaming(dir.path(), n, true));
        println!(
            "{n} sessions: age p50 {} ms p99 {} ms, {:.0} deltas/s",
            r.p50, r.p99, r.deltas_per_s
        );
        return;
    }
    if std::env::var_os("TURNSTILE_BENCH_CHANGE_ORDER").is_some() {
        // Only the change order's cost (the store's triggers), three times.
        for _ in 0..3 {
            change_order_cost(dir.path());
        }
        return;
    }
    println!("# turnstile host benchmark ({} mode)", if quick() { "quick" } else { "full" });
    let raw_before = raw_sqlite(dir.path());
    println!("raw SQLite (FULL, WAL): {raw_before:.0} durable transactions/s");
    change_order_cost(dir.path());
    rt.block_on(async {
        throughput(dir.path()).await;
        paced_writes(dir.path()).await;
        cancel_latency(dir.path()).await;
        idle_memory(dir.path()).await;
        sweep(dir.path()).await;
    });
    let raw_after = raw_sqlite(dir.path());
    println!("raw SQLite (FULL, WAL) again: {raw_after:.0} durable transactions/s");
    let per_window = (raw_before.min(raw_after) * 0.033).floor();
    println!(
        "=> one transaction per session per 33 ms window would cap near {per_window:.0} streaming sessions"
    );
}

/// Small durable transactions per second on this disk: one row insert per commit for 1 s.
fn raw_sqlite(dir: &std::path::Path) -> f64 {
    let path = dir.join(format!("raw-{}.db", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let conn = rusqlite::Connection::open(&path).expect("open");
    conn.pragma_update(None, "journal_mode", "WAL").expect("wal");
    conn.pragma_update(None, "synchronous", "FULL").expect("full");
    conn.execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)").expect("table");
    let started = Instant::now();
    let mut n = 0u64;
    while started.elapsed() < Duration::from_secs(1) {
        conn.execute_batch("BEGIN").expect("begin");
        conn.execute("INSERT INTO t (v) VALUES (?1)", ["a small row"]).expect("insert");
        conn.execute_batch("COMMIT").expect("commit");
        n += 1;
    }
    n as f64 / started.elapsed().as_secs_f64()
}

/// What the change order's triggers (store migration 3) cost the statement streaming runs most:
/// appending text to a message. Two stores made by `Store::open`, one with its triggers
/// dropped (the baseline), the same appends in transactions of 100, without fsync (the
/// triggers cost CPU, not syncs).
fn change_order_cost(dir: &std::path::Path) {
    let appends = if quick() { 20_000 } else { 200_000 };
    let mut rates = Vec::new();
    for (name, drop_triggers) in
        [("with the triggers", false), ("triggers dropped (baseline)", true)]
    {
        let path = dir.join(format!("change-order-{drop_triggers}.db"));
        let _ = std::fs::remove_file(&path);
        let opened = turnstile_host::store::Store::open(&turnstile_host::StoreConfig::new(&path))
            .expect("open");
        opened.store.close().expect("close");
        let conn = rusqlite::Connection::open(&path).expect("open");
        conn.pragma_update(None, "synchronous", "OFF").expect("sync off");
        if drop_triggers {
            let names: Vec<String> = conn
                .prepare(
                    "SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE '%rev%'",
                )
                .expect("list")
                .query_map([], |r| r.get(0))
                .expect("list")
                .collect::<Result<_, _>>()
                .expect("list");
            assert_eq!(names.len(), 10, "the change order's triggers");
            for n in names {
                conn.execute_batch(&format!("DROP TRIGGER {n}")).expect("drop");
            }
        }
        conn.execute_batch(
            "BEGIN; INSERT INTO sessions (id, created) VALUES ('s', 1); \
             WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100) \
             INSERT INTO messages (id, session, role) SELECT i, 's', 'assistant' FROM n; COMMIT;",
        )
        .expect("messages");
        let started = Instant::now();
        // The store's own append statement (`apply.rs`), and without the change order the
        // statement it replaced.
        let sql = if drop_triggers {
            "UPDATE messages SET text = text || ?2 WHERE id = ?1 AND session = 's' AND role = 'assistant'"
        } else {
            "UPDATE messages SET text = text || ?2, \
             rev = (SELECT value FROM counters WHERE name = 'revision') \
             WHERE id = ?1 AND session = 's' AND role = 'assistant'"
        };
        let mut append = conn.prepare(sql).expect("prepare");
        for chunk in 0..appends / 100 {
            conn.execute_batch("BEGIN").expect("begin");
            conn.execute_batch("UPDATE counters SET value = value + 1 WHERE name = 'revision'")
                .expect("revision");
            for i in 0..100 {
                append.execute(rusqlite::params![i + 1, format!("t{chunk} ")]).expect("append");
            }
            conn.execute_batch("COMMIT").expect("commit");
        }
        let rate = appends as f64 / started.elapsed().as_secs_f64();
        println!("change order: {appends} text appends {name}: {rate:.0} appends/s");
        rates.push(rate);
    }
    println!(
        "=> the triggers cost {:.1} % of the append rate",
        (1.0 - rates[0] / rates[1]) * 100.0
    );
}

fn config(dir: &std::path::Path, name: &str) -> HostConfig {
    let path = dir.join(format!("{name}.db"));
    let _ = std::fs::remove_file(&path);
    let mut c = HostConfig::new(path);
    c.workers = 2;
    c
}

async fn open(c: HostConfig, p: ScriptedProvider) -> Host {
    Host::open(c, Arc::new(p), ToolSet::new()).await.expect("open")
}

fn finish() -> Scripted {
    Scripted::Event(StepEvent::Finished {
        reason: FinishReason::Stop,
        usage: Some(Usage { input_tokens: 100, output_tokens: 50, ..Usage::default() }),
    })
}

/// A message of `deltas` deltas, `every_ms` apart (0: as fast as the host takes them).
fn stream(deltas: usize, every_ms: u64) -> ScriptedProvider {
    ScriptedProvider::new(move |_, _| {
        let mut out = Vec::with_capacity(deltas * 2 + 1);
        for i in 0..deltas {
            if every_ms > 0 {
                out.push(Scripted::Wait(every_ms));
            }
            out.push(Scripted::Event(StepEvent::TextDelta { text: format!("tok{i} ") }));
        }
        out.push(finish());
        Answer(out)
    })
}

/// One run per session, submitted by concurrent clients spread evenly over `stagger`; returns
/// when every run finished.
async fn run_all(host: &Host, sessions: usize, stagger: Duration) {
    let mut clients = Vec::new();
    let started = tokio::time::Instant::now();
    for i in 0..sessions {
        let run = format!("r{i}");
        let h = host.clone();
        let at = started
            + stagger * u32::try_from(i).unwrap_or(0) / u32::try_from(sessions).unwrap_or(1);
        clients.push(tokio::spawn(async move {
            tokio::time::sleep_until(at).await;
            h.submit(Submit::new(format!("s{i}"), "go").with_run_id(&run)).await.expect("accepted");
            h.wait(&RunId::new(run)).await.expect("done")
        }));
    }
    for c in clients {
        c.await.expect("join");
    }
}

/// A provider that counts how many streams are open at once.
struct Counting {
    inner: ScriptedProvider,
    live: Arc<std::sync::atomic::AtomicUsize>,
    peak: Arc<std::sync::atomic::AtomicUsize>,
}

impl Provider for Counting {
    fn prepare(&self, s: &SessionId) -> BoxFuture<Result<ModelInfo, BoxError>> {
        self.inner.prepare(s)
    }
    fn stream(&self, request: ModelRequest, sink: EventSink) -> BoxFuture<()> {
        let inner = self.inner.stream(request, sink);
        let (live, peak) = (self.live.clone(), self.peak.clone());
        Box::pin(async move {
            let now = live.fetch_add(1, Ordering::Relaxed) + 1;
            peak.fetch_max(now, Ordering::Relaxed);
            inner.await;
            live.fetch_sub(1, Ordering::Relaxed);
        })
    }
    fn refresh_credentials(&self) -> BoxFuture<bool> {
        self.inner.refresh_credentials()
    }
    fn title(&self, prompt: String) -> BoxFuture<Result<(String, Option<Usage>), BoxError>> {
        self.inner.title(prompt)
    }
}

fn load(c: &std::sync::atomic::AtomicU64) -> u64 {
    c.load(Ordering::Relaxed)
}

async fn throughput(dir: &std::path::Path) {
    let (sessions, deltas) = if quick() { (10, 500) } else { (20, 5_000) };
    let host = open(config(dir, "throughput"), stream(deltas, 0)).await;
    let started = Instant::now();
    run_all(&host, sessions, Duration::ZERO).await;
    let secs = started.elapsed().as_secs_f64();
    let s = host.writer_stats();
    println!(
        "throughput: {sessions} sessions x {deltas} deltas in {secs:.2} s = {:.0} deltas/s; \
         {} SQLite commits, {} session transactions ({} streamed)",
        (sessions * deltas) as f64 / secs,
        load(&s.commits),
        load(&s.txns),
        load(&s.stream_txns),
    );
    host.shutdown().await.expect("shutdown");
}

async fn paced_writes(dir: &std::path::Path) {
    let (sessions, deltas, every) = if quick() { (5, 30, 20) } else { (20, 100, 20) };
    let host = open(config(dir, "paced"), stream(deltas, every)).await;
    run_all(&host, sessions, Duration::ZERO).await;
    let s = host.writer_stats();
    let per_message = load(&s.stream_txns) as f64 / sessions as f64;
    let windows = (deltas as u64 * every) as f64 / 33.0;
    println!(
        "writes per streamed message ({deltas} deltas, {every} ms apart, {:.1} windows of 33 ms): \
         {per_message:.1} streamed writes + {:.1} structural per message; {} deltas coalesced into {} streamed writes",
        windows,
        load(&s.durable_txns) as f64 / sessions as f64,
        load(&s.appends_in),
        load(&s.stream_txns),
    );
    host.shutdown().await.expect("shutdown");
}

async fn cancel_latency(dir: &std::path::Path) {
    // The baseline: the provider never answers, so the cancel aborts a stream.
    let hang = ScriptedProvider::new(|_, _| Answer::hang());
    let host = open(config(dir, "cancel"), hang).await;
    let lat = cancel_runs(&host, "provider never answers", |_| true).await;
    host.shutdown().await.expect("shutdown");
    // A long tool call the host drops on abort: the cancel must not wait for the 5 s grace.
    let started = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let tool = Parked { started: started.clone() };
    let calls = ScriptedProvider::new(|_, _| Answer::tool_call("c1", "bash", "{}"));
    let host = Host::open(config(dir, "cancel-tool"), Arc::new(calls), ToolSet::new().with(tool))
        .await
        .expect("open");
    let running = move |i: usize| started.load(Ordering::SeqCst) > i;
    let with_tool = cancel_runs(&host, "a droppable tool runs", running).await;
    host.shutdown().await.expect("shutdown");
    println!(
        "=> cancel with a droppable tool running: median {:.1}x the no-tool median",
        with_tool.as_secs_f64() / lat.as_secs_f64()
    );
}

/// A tool that never answers (dropped on abort, the default) and counts the calls it started.
struct Parked {
    started: Arc<std::sync::atomic::AtomicUsize>,
}

impl turnstile_host::Tool for Parked {
    fn spec(&self) -> turnstile_core::ToolSpec {
        turnstile_core::ToolSpec::new("bash")
    }
    fn run(&self, _: turnstile_host::ToolCall) -> BoxFuture<turnstile_core::ToolOutput> {
        self.started.fetch_add(1, Ordering::SeqCst);
        Box::pin(std::future::pending())
    }
}

/// Submits runs one at a time, waits until each is active and `ready(i)` holds, then measures
/// `cancel_run` to its RunComplete. Prints median, p99 and max; returns the median.
async fn cancel_runs(host: &Host, what: &str, ready: impl Fn(usize) -> bool) -> Duration {
    let runs = if quick() { 20 } else { 200 };
    let mut lat = Vec::with_capacity(runs);
    for i in 0..runs {
        let run = RunId::new(format!("r{i}"));
        host.submit(Submit::new(format!("s{}", i % 8), "go").with_run_id(run.as_str()))
            .await
            .expect("ok");
        loop {
            let r = run.clone();
            let state = host.read(move |rd| Ok(rd.run(&r)?.map(|x| x.state))).await.expect("read");
            if state == Some(turnstile_host::store::RunState::Active) && ready(i) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let started = Instant::now();
        host.cancel_run(&run).await.expect("cancel");
        let done = host.wait(&run).await.expect("done");
        lat.push(started.elapsed());
        assert_eq!(done.outcome, turnstile_core::Outcome::Cancelled);
    }
    lat.sort();
    let q = |p: f64| lat[((lat.len() as f64 * p).ceil() as usize).clamp(1, lat.len()) - 1];
    println!(
        "cancel_run to RunComplete ({runs} runs, {what}): median {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        q(0.5).as_secs_f64() * 1e3,
        q(0.99).as_secs_f64() * 1e3,
        lat[lat.len() - 1].as_secs_f64() * 1e3,
    );
    q(0.5)
}

/// Resident set size in bytes (Linux), or 0 where unknown.
fn rss() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm.split_whitespace().nth(1).and_then(|p| p.parse().ok()).unwrap_or(0);
    pages * 4096
}

async fn idle_memory(dir: &std::path::Path) {
    let sessions = if quick() { 500 } else { 5_000 };
    let host = open(config(dir, "idle"), stream(3, 0)).await;
    // Warm up allocators and caches with a first batch, then measure a second one.
    run_all(&host, 200, Duration::ZERO).await;
    let before = rss();
    let mut waits = Vec::new();
    for i in 0..sessions {
        let run = format!("idle{i}");
        host.submit(Submit::new(format!("idle-session-{i}"), "go").with_run_id(&run))
            .await
            .expect("ok");
        let h = host.clone();
        waits.push(tokio::spawn(async move { h.wait(&RunId::new(run)).await.expect("done") }));
    }
    for w in waits {
        w.await.expect("join");
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let busy = host.is_busy(&SessionId::new("idle-session-0")).await.expect("busy");
    let after = rss();
    println!(
        "memory per idle session: {:.0} bytes ({sessions} finished sessions, resident set {} -> {} KiB; \
         includes SQLite's page cache; busy: {busy}, waiters left: {})",
        after.saturating_sub(before) as f64 / sessions as f64,
        before / 1024,
        after / 1024,
        host.waiters(),
    );
    host.shutdown().await.expect("shutdown");
}

struct SweepResult {
    peak: usize,
    p50: u64,
    p99: u64,
    deltas_per_s: f64,
    commits_per_s: f64,
    secs: f64,
}

async fn streaming(dir: &std::path::Path, sessions: usize, group: bool) -> SweepResult {
    let (deltas, every) = (60, 40);
    let mut c = config(dir, &format!("sweep-{sessions}-{group}"));
    c.group_commit = group;
    let peak = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let provider =
        Counting { inner: stream(deltas, every), live: Arc::default(), peak: peak.clone() };
    let host = Host::open(c, Arc::new(provider), ToolSet::new()).await.expect("open");
    let started = Instant::now();
    run_all(&host, sessions, Duration::from_millis(500)).await;
    let secs = started.elapsed().as_secs_f64();
    let s: &WriterStats = host.writer_stats();
    let r = SweepResult {
        peak: peak.load(Ordering::Relaxed),
        p50: s.stream_age_quantile_ms(0.5).unwrap_or(0),
        p99: s.stream_age_quantile_ms(0.99).unwrap_or(0),
        deltas_per_s: (sessions * deltas) as f64 / secs,
        commits_per_s: load(&s.commits) as f64 / secs,
        secs,
    };
    host.shutdown().await.expect("shutdown");
    r
}

async fn sweep(dir: &std::path::Path) {
    println!(
        "concurrent streaming sessions (each 60 deltas 40 ms apart; sustained = p99 age of a held write at its durable commit <= 66 ms, two windows):"
    );
    for group in [false, true] {
        // Per-session commits are the baseline: they stop being sustained near the raw
        // SQLite rate times the window, so they are swept over smaller sizes.
        let sizes: &[usize] = match (quick(), group) {
            (true, _) => &[50, 200],
            (false, false) => &[25, 50, 100, 280],
            (false, true) => &[100, 280, 500, 1_000, 2_000, 2_500, 3_000],
        };
        for &n in sizes {
            let r = streaming(dir, n, group).await;
            let sustained = r.p99 <= 66;
            println!(
                "  {:<13} {n:>5} sessions ({:>5} streaming at once): age p50 {:>4} ms p99 {:>5} ms | {:>7.0} deltas/s, {:>5.0} commits/s, {:.1} s | {}",
                if group { "group commit" } else { "per session" },
                r.peak,
                r.p50,
                r.p99,
                r.deltas_per_s,
                r.commits_per_s,
                r.secs,
                if sustained { "sustained" } else { "NOT sustained" },
            );
            if !sustained {
                break;
            }
        }
    }
}
