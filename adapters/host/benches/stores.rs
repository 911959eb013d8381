//! The two stores side by side (not a timed test): run with
//! `cargo bench -p turnstile-host --bench stores` and a PostgreSQL server in
//! `TURNSTILE_TEST_POSTGRES` (`eval "$(scripts/postgres.sh env)"` starts a throwaway one).
//!
//! Prints, for SQLite (a file, `synchronous=FULL`, WAL) and PostgreSQL (a database of its own
//! on that server, default durability), measured in the same run, interleaved:
//! 1. raw durable transactions per second (one small row per commit, for 1 s);
//! 2. accept latency: the time from `submit` to its durable answer (the 202 of the server),
//!    p50 and p99 over many submissions from concurrent clients while sessions stream;
//! 3. streaming sessions sustained: each streams 60 deltas 40 ms apart; a size is sustained
//!    while every held write commits within two 33 ms windows (p99 age at commit <= 66 ms);
//!    with the durable transactions per second the writer made at that size.
//!
//! `TURNSTILE_BENCH_QUICK=1` runs smaller sizes.

use std::sync::Arc;
use std::time::{Duration, Instant};

use turnstile_core::{FinishReason, RunId, StepEvent, Submit, Usage};
use turnstile_host::store::{Location, ScratchDatabase, StoreConfig};
use turnstile_host::{Answer, Host, HostConfig, Scripted, ScriptedProvider, ToolSet};

fn quick() -> bool {
    std::env::var_os("TURNSTILE_BENCH_QUICK").is_some()
}

/// Where one store of the run lives.
enum Store {
    Sqlite(tempfile::TempDir),
    Postgres,
}

impl Store {
    fn name(&self) -> &'static str {
        match self {
            Store::Sqlite(_) => "SQLite",
            Store::Postgres => "PostgreSQL",
        }
    }

    /// A fresh, empty store (and what keeps a database alive until the measure ends).
    fn fresh(&self, name: &str) -> (StoreConfig, Option<ScratchDatabase>) {
        match self {
            Store::Sqlite(dir) => {
                let path = dir.path().join(format!("{name}.db"));
                let _ = std::fs::remove_file(&path);
                (StoreConfig::new(path), None)
            }
            Store::Postgres => {
                let db = ScratchDatabase::create().unwrap_or_else(|e| panic!("{e}"));
                (StoreConfig::at(Location::Postgres(db.url().to_owned())), Some(db))
            }
        }
    }
}

fn main() {
    if std::env::var_os(turnstile_host::store::TEST_POSTGRES).is_none() {
        eprintln!("{}", turnstile_host::store::NO_TEST_POSTGRES);
        std::process::exit(2);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let stores = [Store::Sqlite(tempfile::tempdir().expect("scratch dir")), Store::Postgres];
    println!("# turnstile stores benchmark ({} mode)", if quick() { "quick" } else { "full" });
    println!("## raw durable transactions per second (one small row per commit)");
    for round in 0..2 {
        for s in &stores {
            println!("  {:<10} round {round}: {:.0}/s", s.name(), raw(s));
        }
    }
    println!("## accept latency while 200 sessions stream (submit to its durable answer)");
    for s in &stores {
        let (p50, p99) = rt.block_on(accept_latency(s));
        println!("  {:<10} p50 {:.2} ms, p99 {:.2} ms", s.name(), p50, p99);
    }
    println!(
        "## streaming sessions (60 deltas 40 ms apart each, group commit; sustained = p99 age of a held write at commit <= 66 ms)"
    );
    let sizes: &[usize] = if quick() { &[100, 400] } else { &[100, 280, 500, 1_000, 2_000] };
    for s in &stores {
        for &n in sizes {
            let r = rt.block_on(streaming(s, n));
            let sustained = r.p99 <= 66;
            println!(
                "  {:<10} {n:>5} sessions: age p50 {:>4} ms p99 {:>5} ms | {:>5.0} durable transactions/s | {}",
                s.name(),
                r.p50,
                r.p99,
                r.commits_per_s,
                if sustained { "sustained" } else { "NOT sustained" },
            );
            if !sustained {
                break;
            }
        }
    }
}

/// One small row per durable commit for 1 s.
fn raw(store: &Store) -> f64 {
    let (config, db) = store.fresh("raw");
    let started;
    let mut n = 0u64;
    match (&config.location, &db) {
        (Location::File(path), _) => {
            let conn = rusqlite::Connection::open(path).expect("open");
            conn.pragma_update(None, "journal_mode", "WAL").expect("wal");
            conn.pragma_update(None, "synchronous", "FULL").expect("full");
            conn.execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)").expect("table");
            started = Instant::now();
            while started.elapsed() < Duration::from_secs(1) {
                conn.execute_batch("BEGIN").expect("begin");
                conn.execute("INSERT INTO t (v) VALUES (?1)", ["a small row"]).expect("insert");
                conn.execute_batch("COMMIT").expect("commit");
                n += 1;
            }
        }
        (_, Some(db)) => {
            let mut c = postgres::Client::connect(db.url(), postgres::NoTls).expect("connect");
            c.batch_execute("CREATE TABLE t (id BIGSERIAL PRIMARY KEY, v TEXT)").expect("table");
            let insert = c.prepare("INSERT INTO t (v) VALUES ($1)").expect("prepare");
            started = Instant::now();
            while started.elapsed() < Duration::from_secs(1) {
                c.batch_execute("BEGIN").expect("begin");
                c.execute(&insert, &[&"a small row"]).expect("insert");
                c.batch_execute("COMMIT").expect("commit");
                n += 1;
            }
        }
        _ => unreachable!("a store is a file or a database"),
    }
    n as f64 / started.elapsed().as_secs_f64()
}

/// A message of `deltas` deltas, `every_ms` apart.
fn stream(deltas: usize, every_ms: u64) -> ScriptedProvider {
    ScriptedProvider::new(move |_, _| {
        let mut out = Vec::with_capacity(deltas * 2 + 1);
        for i in 0..deltas {
            out.push(Scripted::Wait(every_ms));
            out.push(Scripted::Event(StepEvent::TextDelta { text: format!("tok{i} ") }));
        }
        out.push(Scripted::Event(StepEvent::Finished {
            reason: FinishReason::Stop,
            usage: Some(Usage { input_tokens: 100, output_tokens: 50, ..Usage::default() }),
        }));
        Answer(out)
    })
}

async fn open(config: StoreConfig) -> Host {
    let mut c = HostConfig::with_store(config);
    c.workers = 2;
    Host::open(c, Arc::new(stream(60, 40)), ToolSet::new()).await.expect("open")
}

/// Submits one run per session from concurrent clients spread over `stagger`; returns each
/// submission's time to its durable answer, once every run finished.
async fn run_all(host: &Host, sessions: usize, stagger: Duration) -> Vec<Duration> {
    let mut clients = Vec::new();
    let started = tokio::time::Instant::now();
    for i in 0..sessions {
        let run = format!("r{i}");
        let h = host.clone();
        let at = started
            + stagger * u32::try_from(i).unwrap_or(0) / u32::try_from(sessions).unwrap_or(1);
        clients.push(tokio::spawn(async move {
            tokio::time::sleep_until(at).await;
            let asked = Instant::now();
            h.submit(Submit::new(format!("s{i}"), "go").with_run_id(&run)).await.expect("accepted");
            let accepted = asked.elapsed();
            h.wait(&RunId::new(run)).await.expect("done");
            accepted
        }));
    }
    let mut latencies = Vec::with_capacity(sessions);
    for c in clients {
        latencies.push(c.await.expect("join"));
    }
    latencies
}

fn quantile(sorted: &[Duration], q: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[i.min(sorted.len() - 1)].as_secs_f64() * 1000.0
}

async fn accept_latency(store: &Store) -> (f64, f64) {
    let (config, _db) = store.fresh("accept");
    let host = open(config).await;
    let sessions = if quick() { 100 } else { 200 };
    let mut latencies = run_all(&host, sessions, Duration::from_millis(1_000)).await;
    host.shutdown().await.expect("shutdown");
    latencies.sort();
    (quantile(&latencies, 0.5), quantile(&latencies, 0.99))
}

struct Streamed {
    p50: u64,
    p99: u64,
    commits_per_s: f64,
}

async fn streaming(store: &Store, sessions: usize) -> Streamed {
    let (config, _db) = store.fresh(&format!("stream-{sessions}"));
    let host = open(config).await;
    let started = Instant::now();
    run_all(&host, sessions, Duration::from_millis(500)).await;
    let secs = started.elapsed().as_secs_f64();
    let s = host.writer_stats();
    let r = Streamed {
        p50: s.stream_age_quantile_ms(0.5).unwrap_or(0),
        p99: s.stream_age_quantile_ms(0.99).unwrap_or(0),
        commits_per_s: s.commits.load(std::sync::atomic::Ordering::Relaxed) as f64 / secs,
    };
    host.shutdown().await.expect("shutdown");
    r
}
