//! Load benchmark of the HTTP API (not a timed test): run with
//! `cargo bench -p turnstile-server --bench load`.
//!
//! One real server on 127.0.0.1 (the router of `turnstile serve`, with its token check and
//! middleware, served by `Server::serve` as the CLI does: the connection cap, the header
//! timeout, `TCP_NODELAY`) over a real host and a durable SQLite
//! store in a scratch directory, and the scripted provider answering every turn with a short
//! text at once. In one run it prints:
//!
//! 1. prompts accepted per second: K keep-alive HTTP/1.1 clients POST prompts, each with a new
//!    RunId to a new session (so no run waits behind another in a session's queue), for a
//!    fixed time; `202` comes only once the ledger row is durable. Request latency p50/p99.
//!    Baseline: the same clients on `GET /v1/health` (same router, middleware and token),
//!    before and after.
//! 2. RunCompletes delivered to N concurrent event streams (`GET /v1/events`): M prompts
//!    paced one every 20 ms from one client, then B more in a burst from the K clients. The
//!    commit time of each RunComplete is when an in-process `Host::completions` subscriber
//!    (on a thread of its own) gets it; the delivery time is when a stream's client reads the
//!    chunk holding it. Latency p50/p99/max over every (RunComplete, stream) pair,
//!    deliveries per second, and a check that every stream got every RunComplete exactly
//!    once (the run panics after the table otherwise). Also counted, from the feed's own log
//!    event: how often a stream fell behind the broadcast and read the store instead.
//!    Baseline: N concurrent `GET /v1/health` on warm connections of the same server, the
//!    streams open.
//!
//! The clients run in this process on the same 2-thread runtime as the server: they share the
//! machine's cores, so every figure includes the clients' own work.
//!
//! Sizes: `TURNSTILE_LOAD_CLIENTS` (K, 16), `TURNSTILE_LOAD_SECS` (each timed phase, 3),
//! `TURNSTILE_LOAD_PROMPTS` (most prompts in phase 1, 20000), `TURNSTILE_LOAD_SUBSCRIBERS`
//! (N, 1000), `TURNSTILE_LOAD_RUNS` (M, 50), `TURNSTILE_LOAD_PACE_MS` (20),
//! `TURNSTILE_LOAD_BURST` (B, 200). Server settings: `TURNSTILE_LOAD_FEED_CAPACITY` (the
//! feed's broadcast, in frames; the default of `ServerConfig`), `TURNSTILE_LOAD_AXUM=1`
//! (served by plain `axum::serve` instead, as the CLI was before round 3: no cap, no header
//! timeout, Nagle's algorithm on).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark: a failure is a panic

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde::Deserialize;
use turnstile_core::Usage;
use turnstile_host::{Answer, Cursor, Host, HostConfig, ScriptedProvider, ToolSet};
use turnstile_server::{Asks, Server, ServerConfig, Token};
use turnstile_wire::sse::Framer;

const TOKEN: &str = "load-bench-token-0123456789";

fn env(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

struct Sizes {
    clients: usize,
    secs: u64,
    prompts: usize,
    subscribers: usize,
    runs: usize,
    burst: usize,
    pace: Duration,
    axum: bool,
    feed_capacity: Option<usize>,
}

fn main() {
    let sizes = Sizes {
        clients: env("TURNSTILE_LOAD_CLIENTS", 16).max(1),
        secs: env("TURNSTILE_LOAD_SECS", 3).max(1) as u64,
        prompts: env("TURNSTILE_LOAD_PROMPTS", 20_000).max(1),
        subscribers: env("TURNSTILE_LOAD_SUBSCRIBERS", 1000).max(1),
        runs: env("TURNSTILE_LOAD_RUNS", 50).max(1),
        burst: env("TURNSTILE_LOAD_BURST", 200).max(1),
        pace: Duration::from_millis(env("TURNSTILE_LOAD_PACE_MS", 20).max(1) as u64),
        axum: env("TURNSTILE_LOAD_AXUM", 0) == 1,
        feed_capacity: std::env::var("TURNSTILE_LOAD_FEED_CAPACITY")
            .ok()
            .and_then(|v| v.parse().ok()),
    };
    // Each stream and each concurrent health request is two sockets of this process (client
    // and server), plus the store, the runtime and the K clients.
    let files = 4 * sizes.subscribers + 2 * sizes.clients + 256;
    raise_open_files(files as u64);
    tracing::subscriber::set_global_default(LagCounter).expect("the lag counter");
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    let threads = std::thread::available_parallelism().map_or(0, std::num::NonZero::get);
    println!(
        "# turnstile-server load benchmark: {threads} cores, {threads} runtime threads shared by \
         server and clients; K={} clients, {} s phases, N={} streams, M={} paced runs, B={} \
         burst runs; feed capacity {} frames; served by {}",
        sizes.clients,
        sizes.secs,
        sizes.subscribers,
        sizes.runs,
        sizes.burst,
        sizes
            .feed_capacity
            .unwrap_or(ServerConfig::new(Token::new(TOKEN).expect("a token")).feed_capacity),
        if sizes.axum { "axum::serve (Nagle on)" } else { "Server::serve (as the CLI)" },
    );
    let started = Instant::now();
    rt.block_on(bench(&sizes));
    rt.shutdown_timeout(Duration::from_secs(2));
    println!("total time {:.1} s", started.elapsed().as_secs_f64());
}

/// Raises the soft limit of open files to `want` (up to the hard limit), or stops with a
/// message saying what to do.
fn raise_open_files(want: u64) {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).expect("getrlimit(RLIMIT_NOFILE)");
    if soft >= want {
        return;
    }
    assert!(
        hard >= want,
        "this run needs {want} open files and the hard limit is {hard}: raise it (`ulimit -Hn`) \
         or lower TURNSTILE_LOAD_SUBSCRIBERS"
    );
    setrlimit(Resource::RLIMIT_NOFILE, want, hard).expect("setrlimit(RLIMIT_NOFILE)");
    println!("raised the soft limit of open files from {soft} to {want}");
}

struct Running {
    server: Server,
    base: String,
    _dir: tempfile::TempDir,
    task: tokio::task::JoinHandle<()>,
}

async fn start(sizes: &Sizes) -> Running {
    let dir = tempfile::tempdir().expect("scratch dir");
    let provider =
        ScriptedProvider::new(|_, _| Answer::streamed("ok, done.", 1, 0, Usage::default()));
    let config = HostConfig::new(dir.path().join("store.db"));
    let host = Host::open(config, Arc::new(provider), ToolSet::new()).await.expect("open the host");
    let mut config = ServerConfig::new(Token::new(TOKEN).expect("a token"));
    config.limits.streams = config.limits.streams.max(sizes.subscribers + 64);
    // The N streams and the N concurrent health requests beside them, and the K clients.
    config.connections.max = 2 * sizes.subscribers + sizes.clients + 64;
    if let Some(c) = sizes.feed_capacity {
        config.feed_capacity = c;
    }
    let server = Server::start(host, Asks::new(), config).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("address"));
    let router = server.router();
    let serving = server.clone();
    let plain_axum = sizes.axum;
    let task = tokio::spawn(async move {
        if plain_axum {
            axum::serve(listener, router).await.expect("serve");
        } else {
            serving.serve(listener, std::future::pending()).await.expect("serve");
        }
    });
    Running { server, base, _dir: dir, task }
}

async fn bench(sizes: &Sizes) {
    let r = start(sizes).await;
    let clients: Vec<reqwest::Client> =
        (0..sizes.clients).map(|_| reqwest::Client::new()).collect();
    for c in &clients {
        health(c, &r.base).await; // opens each client's keep-alive connection
    }
    let secs = Duration::from_secs(sizes.secs);

    // 1. Prompts accepted per second, between two health baselines.
    let before = timed(&clients, &r.base, secs, usize::MAX, Load::Health).await;
    let position = r.server.host().read(|x| x.position()).await.expect("position");
    let mut completions = r.server.host().completions(position.cursor);
    let stats = r.server.host().writer_stats();
    let commits =
        || (stats.commits.load(Ordering::Relaxed), stats.durable_txns.load(Ordering::Relaxed));
    let c0 = commits();
    let prompts = timed(&clients, &r.base, secs, sizes.prompts, Load::Prompts).await;
    let c1 = commits();
    let load_end = Instant::now();
    let mut drained = 0;
    let drain_deadline = Instant::now() + Duration::from_secs(30);
    while drained < prompts.latencies.len() {
        let left = drain_deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, completions.next()).await {
            Ok(Ok(Some(_))) => drained += 1,
            other => panic!("{drained} of {} runs finished: {other:?}", prompts.latencies.len()),
        }
    }
    let drain = load_end.elapsed();
    drop(completions);
    let after = timed(&clients, &r.base, secs, usize::MAX, Load::Health).await;

    // 2. RunCompletes delivered to N streams.
    let fan = fan_out(&r, &clients, sizes).await;

    println!();
    println!("| measurement | figure | baseline, same run |");
    println!("|---|---|---|");
    println!(
        "| `POST /v1/sessions/{{s}}/prompts`, K={} clients, {} s | **{}/s** accepted; p50 {} p99 {} | `GET /v1/health`, same clients: {}/s, p50 {} p99 {} (before); {}/s, p50 {} p99 {} (after) |",
        sizes.clients,
        sizes.secs,
        thousands(prompts.rate()),
        ms(prompts.pct(0.5)),
        ms(prompts.pct(0.99)),
        thousands(before.rate()),
        ms(before.pct(0.5)),
        ms(before.pct(0.99)),
        thousands(after.rate()),
        ms(after.pct(0.5)),
        ms(after.pct(0.99)),
    );
    let (sqlite, txns) = (c1.0 - c0.0, c1.1 - c0.1);
    println!(
        "| the store during phase 1 | {}/s durable SQLite commits, {:.1} session transactions each ({} runs; the last RunComplete {} after the last acceptance) | |",
        thousands(sqlite as f64 / prompts.wall.as_secs_f64()),
        txns as f64 / sqlite.max(1) as f64,
        thousands(prompts.latencies.len() as f64),
        ms(drain),
    );
    for (what, d) in [
        (format!("paced, one every {} ms", sizes.pace.as_millis()), &fan.paced),
        (format!("in a burst from K={} clients", sizes.clients), &fan.burst),
    ] {
        println!(
            "| RunComplete commit to delivery, {} runs {what}, x {} streams | p50 {} p99 {} max **{}**; {} deliveries/s | {} concurrent `GET /v1/health`, streams open: p50 {} p99 {} max {} ({} for all) |",
            d.runs,
            sizes.subscribers,
            ms(d.pct(0.5)),
            ms(d.pct(0.99)),
            ms(d.pct(1.0)),
            thousands(d.deliveries_per_s),
            sizes.subscribers,
            ms(pct(&fan.health, 0.5)),
            ms(pct(&fan.health, 0.99)),
            ms(pct(&fan.health, 1.0)),
            ms(fan.health_wall),
        );
    }
    println!(
        "| events per stream | {} events for {} RunCompletes; {} streams opened in {} | |",
        fan.frames_per_stream,
        fan.paced.runs + fan.burst.runs,
        sizes.subscribers,
        ms(fan.open_wall),
    );
    for (what, d) in [("paced", &fan.paced), ("burst", &fan.burst)] {
        println!(
            "| exactly once, {what} | {} deliveries of {}: {} missing, {} duplicated; {} read before the commit clock saw the commit (by at most {}); streams fell behind the broadcast {} times ({} frames skipped, read from the store) | |",
            d.delivered,
            d.runs * sizes.subscribers,
            d.missing,
            d.duplicated,
            d.early,
            ms(d.earliest),
            d.lagged,
            d.skipped,
        );
    }
    println!("| RunCompletes of no submitted run | {} | |", fan.unknown);
    println!();

    let _ = r.server.shutdown().await;
    r.task.abort();
    for d in [&fan.paced, &fan.burst] {
        assert!(
            d.missing == 0 && d.duplicated == 0 && fan.unknown == 0,
            "every stream must get every RunComplete exactly once: {} missing, {} duplicated, {} unknown",
            d.missing,
            d.duplicated,
            fan.unknown
        );
    }
}

// ---- phase 1 -----------------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq)]
enum Load {
    Health,
    Prompts,
}

struct Timed {
    latencies: Vec<Duration>,
    wall: Duration,
}

impl Timed {
    fn rate(&self) -> f64 {
        self.latencies.len() as f64 / self.wall.as_secs_f64()
    }

    fn pct(&self, q: f64) -> Duration {
        pct(&self.latencies, q)
    }
}

/// Prompts use these numbers for distinct sessions and RunIds across phases.
static NEXT: AtomicUsize = AtomicUsize::new(0);

async fn health(c: &reqwest::Client, base: &str) {
    let resp = c.get(format!("{base}/v1/health")).bearer_auth(TOKEN).send().await.expect("send");
    assert_eq!(resp.status().as_u16(), 200);
    resp.bytes().await.expect("body");
}

async fn prompt(c: &reqwest::Client, base: &str, name: &str) {
    let resp = c
        .post(format!("{base}/v1/sessions/{name}/prompts"))
        .bearer_auth(TOKEN)
        .json(&serde_json::json!({"prompt": "say ok", "run_id": name}))
        .send()
        .await
        .expect("send");
    let status = resp.status().as_u16();
    let body = resp.bytes().await.expect("body");
    assert_eq!(status, 202, "{}", String::from_utf8_lossy(&body));
}

/// Every client sends requests one after another for `secs` (or until `most` were sent by
/// all); returns each request's latency.
async fn timed(
    clients: &[reqwest::Client],
    base: &str,
    secs: Duration,
    most: usize,
    load: Load,
) -> Timed {
    let started = Instant::now();
    let deadline = started + secs;
    let sent = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for c in clients {
        let (c, base, sent) = (c.clone(), base.to_owned(), sent.clone());
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            while Instant::now() < deadline && sent.fetch_add(1, Ordering::Relaxed) < most {
                let t = Instant::now();
                match load {
                    Load::Health => health(&c, &base).await,
                    Load::Prompts => {
                        let name = format!("load-{}", NEXT.fetch_add(1, Ordering::Relaxed));
                        prompt(&c, &base, &name).await;
                    }
                }
                lat.push(t.elapsed());
            }
            lat
        }));
    }
    let mut latencies = Vec::new();
    for t in tasks {
        latencies.extend(t.await.expect("client"));
    }
    let wall = started.elapsed();
    latencies.sort();
    Timed { latencies, wall }
}

// ---- phase 2 -----------------------------------------------------------------------------------

/// The figures of one delivery phase.
struct Delivery {
    runs: usize,
    latencies: Vec<Duration>,
    deliveries_per_s: f64,
    delivered: usize,
    missing: usize,
    duplicated: usize,
    /// Deliveries read before the commit clock saw their RunComplete, and by how much at most.
    early: usize,
    earliest: Duration,
    /// Times a stream fell behind the broadcast and read the store, and frames it skipped.
    lagged: usize,
    skipped: usize,
}

impl Delivery {
    fn pct(&self, q: f64) -> Duration {
        pct(&self.latencies, q)
    }
}

struct Fan {
    paced: Delivery,
    burst: Delivery,
    unknown: usize,
    frames_per_stream: usize,
    open_wall: Duration,
    health: Vec<Duration>,
    health_wall: Duration,
}

/// What one stream read: each RunComplete's cursor with the time its chunk arrived, and the
/// number of events of every kind.
struct Received {
    completes: Vec<(u64, Instant)>,
    frames: usize,
}

#[derive(Deserialize)]
struct RunCompleteCursor {
    cursor: u64,
}

/// The commit clock: a `Host::completions` subscriber on a thread and runtime of its own, so
/// that the time it takes is not queued behind the server's and the streams' tasks. Returns
/// when each of the next `m` RunCompletes after `after` reached it.
fn commit_clock(
    host: Host,
    after: Cursor,
    m: usize,
) -> tokio::sync::oneshot::Receiver<HashMap<u64, Instant>> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build();
        let rt = rt.expect("the commit clock's runtime");
        let at = rt.block_on(async move {
            let mut completions = host.completions(after);
            let mut at = HashMap::with_capacity(m);
            while at.len() < m {
                let next = completions.next().await.expect("ledger").expect("a completion");
                at.insert(next.0.0, Instant::now());
            }
            at
        });
        let _ = tx.send(at);
    });
    rx
}

async fn fan_out(r: &Running, clients: &[reqwest::Client], sizes: &Sizes) -> Fan {
    let n = sizes.subscribers;
    let (stop_tx, stop) = tokio::sync::watch::channel(false);
    let ready = Arc::new(AtomicUsize::new(0));
    let delivered = Arc::new(AtomicUsize::new(0));
    let streams = reqwest::Client::new();
    // At most 64 connections are being opened at once (the listen backlog is finite).
    let opening = Arc::new(tokio::sync::Semaphore::new(64));
    let open_start = Instant::now();
    let mut readers = Vec::with_capacity(n);
    for _ in 0..n {
        let (c, url) = (streams.clone(), format!("{}/v1/events", r.base));
        let (ready, delivered, opening, mut stop) =
            (ready.clone(), delivered.clone(), opening.clone(), stop.clone());
        readers.push(tokio::spawn(async move {
            let permit = opening.acquire_owned().await.expect("semaphore");
            let mut resp = c.get(url).bearer_auth(TOKEN).send().await.expect("open a stream");
            assert_eq!(resp.status().as_u16(), 200, "GET /v1/events");
            let mut framer = Framer::new();
            let mut out = Vec::new();
            let mut got = Received { completes: Vec::new(), frames: 0 };
            let mut permit = Some(permit);
            loop {
                let chunk = tokio::select! {
                    biased;
                    _ = stop.wait_for(|s| *s) => break,
                    chunk = resp.chunk() => chunk.expect("read the stream"),
                };
                let at = Instant::now();
                let Some(chunk) = chunk else { panic!("the event stream ended") };
                framer.feed(&chunk, &mut out).expect("SSE framing");
                for f in out.drain(..) {
                    match f.event.as_str() {
                        // The stream's first event: it is subscribed to the feed.
                        "asks" if permit.is_some() => {
                            drop(permit.take());
                            ready.fetch_add(1, Ordering::Relaxed);
                        }
                        "run_complete" => {
                            let rc: RunCompleteCursor =
                                serde_json::from_str(&f.data).expect("RunComplete JSON");
                            got.completes.push((rc.cursor, at));
                            delivered.fetch_add(1, Ordering::Relaxed);
                        }
                        _ => {}
                    }
                    got.frames += 1;
                }
            }
            got
        }));
    }
    let open_deadline = Instant::now() + Duration::from_secs(30);
    while ready.load(Ordering::Relaxed) < n {
        assert!(
            Instant::now() < open_deadline,
            "only {} of {n} streams opened in 30 s",
            ready.load(Ordering::Relaxed)
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let open_wall = open_start.elapsed();

    // Baseline: N concurrent health requests on warm connections, the streams open and idle.
    let (health, health_wall) = health_burst(&r.base, n).await;

    // Paced: one prompt every `pace` from one client; then a burst: M prompts from K clients.
    let lags = || (LAGGED.load(Ordering::Relaxed), SKIPPED.load(Ordering::Relaxed));
    let l0 = lags();
    let paced = submit_runs(r, &clients[..1], sizes.runs, Some(sizes.pace), n, &delivered).await;
    let l1 = lags();
    let burst = submit_runs(r, clients, sizes.burst, None, n, &delivered).await;
    let l2 = lags();
    stop_tx.send_replace(true);
    let mut got = Vec::with_capacity(n);
    for reader in readers {
        got.push(reader.await.expect("stream reader"));
    }
    let unknown = got
        .iter()
        .flat_map(|g| &g.completes)
        .filter(|(c, _)| !paced.contains_key(c) && !burst.contains_key(c))
        .count();
    Fan {
        paced: figures(&paced, &got, (l1.0 - l0.0, l1.1 - l0.1)),
        burst: figures(&burst, &got, (l2.0 - l1.0, l2.1 - l1.1)),
        unknown,
        frames_per_stream: got.iter().map(|g| g.frames).sum::<usize>() / n,
        open_wall,
        health,
        health_wall,
    }
}

/// Submits `m` prompts, each to a new session (one every `pace`, or as fast as `clients`
/// go), and waits until the `n` streams got their RunCompletes (10 s at most, then 300 ms more
/// for any duplicate). Returns the commit time of each.
async fn submit_runs(
    r: &Running,
    clients: &[reqwest::Client],
    m: usize,
    pace: Option<Duration>,
    n: usize,
    delivered: &AtomicUsize,
) -> HashMap<u64, Instant> {
    let expected = delivered.load(Ordering::Relaxed) + n * m;
    let position = r.server.host().read(|x| x.position()).await.expect("position");
    let committed = commit_clock(r.server.host().clone(), position.cursor, m);
    let sent = Arc::new(AtomicUsize::new(0));
    let mut submitters = Vec::new();
    for c in clients {
        let (c, base, sent) = (c.clone(), r.base.clone(), sent.clone());
        submitters.push(tokio::spawn(async move {
            let mut tick = pace.map(tokio::time::interval);
            while sent.fetch_add(1, Ordering::Relaxed) < m {
                if let Some(t) = &mut tick {
                    t.tick().await;
                }
                let name = format!("fan-{}", NEXT.fetch_add(1, Ordering::Relaxed));
                prompt(&c, &base, &name).await;
            }
        }));
    }
    for s in submitters {
        s.await.expect("submitter");
    }
    let commits = tokio::time::timeout(Duration::from_secs(30), committed)
        .await
        .expect("every run finished within 30 s")
        .expect("commit clock");
    let deadline = Instant::now() + Duration::from_secs(10);
    while delivered.load(Ordering::Relaxed) < expected && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    commits
}

/// Latency and exactly-once figures of the RunCompletes in `commits`, over every stream.
fn figures(
    commits: &HashMap<u64, Instant>,
    got: &[Received],
    (lagged, skipped): (usize, usize),
) -> Delivery {
    let first_commit = commits.values().min().copied().expect("a commit");
    let mut last_delivery = first_commit;
    let (mut missing, mut duplicated, mut early, mut earliest) = (0, 0, 0, Duration::ZERO);
    let mut latencies = Vec::new();
    for g in got {
        let mut seen: HashMap<u64, usize> = HashMap::with_capacity(commits.len());
        for &(cursor, at) in &g.completes {
            let Some(&commit) = commits.get(&cursor) else { continue };
            *seen.entry(cursor).or_default() += 1;
            if at < commit {
                early += 1;
                earliest = earliest.max(commit - at);
            }
            latencies.push(at.saturating_duration_since(commit));
            last_delivery = last_delivery.max(at);
        }
        missing += commits.keys().filter(|c| !seen.contains_key(c)).count();
        duplicated += seen.values().map(|k| k - 1).sum::<usize>();
    }
    latencies.sort();
    let span = last_delivery.saturating_duration_since(first_commit).as_secs_f64();
    Delivery {
        runs: commits.len(),
        deliveries_per_s: latencies.len() as f64 / span.max(1e-9),
        delivered: latencies.len(),
        latencies,
        missing,
        duplicated,
        early,
        earliest,
        lagged,
        skipped,
    }
}

/// `n` concurrent `GET /v1/health`: one round to open `n` connections, then a measured round
/// on them, all released at once.
async fn health_burst(base: &str, n: usize) -> (Vec<Duration>, Duration) {
    let client = reqwest::Client::new();
    let mut measured = (Vec::new(), Duration::ZERO);
    for round in 0..2 {
        let barrier = Arc::new(tokio::sync::Barrier::new(n + 1));
        let mut tasks = Vec::with_capacity(n);
        for _ in 0..n {
            let (c, base, barrier) = (client.clone(), base.to_owned(), barrier.clone());
            tasks.push(tokio::spawn(async move {
                barrier.wait().await;
                let t = Instant::now();
                health(&c, &base).await;
                t.elapsed()
            }));
        }
        barrier.wait().await;
        let started = Instant::now();
        let mut lat = Vec::with_capacity(n);
        for t in tasks {
            lat.push(t.await.expect("health request"));
        }
        lat.sort();
        if round == 1 {
            measured = (lat, started.elapsed());
        }
    }
    measured
}

// ---- the feed's fall-backs -----------------------------------------------------------------------

/// Times an event stream fell behind the feed's broadcast and read the store instead, and the
/// frames it skipped: counted from the feed's own log event (`event stream fell behind`).
static LAGGED: AtomicUsize = AtomicUsize::new(0);
static SKIPPED: AtomicUsize = AtomicUsize::new(0);

/// A `tracing` subscriber that only counts the feed's fall-backs to the store.
struct LagCounter;

struct Skipped(Option<u64>);

impl tracing::field::Visit for Skipped {
    fn record_u64(&mut self, field: &tracing::field::Field, value: u64) {
        if field.name() == "skipped" {
            self.0 = Some(value);
        }
    }

    fn record_debug(&mut self, _: &tracing::field::Field, _: &dyn std::fmt::Debug) {}
}

impl tracing::Subscriber for LagCounter {
    fn enabled(&self, metadata: &tracing::Metadata<'_>) -> bool {
        metadata.is_event() && metadata.target() == "turnstile_server::feed"
    }

    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }

    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}

    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}

    fn event(&self, event: &tracing::Event<'_>) {
        let mut skipped = Skipped(None);
        event.record(&mut skipped);
        if let Some(n) = skipped.0 {
            LAGGED.fetch_add(1, Ordering::Relaxed);
            SKIPPED.fetch_add(usize::try_from(n).unwrap_or(usize::MAX), Ordering::Relaxed);
        }
    }

    fn enter(&self, _: &tracing::span::Id) {}

    fn exit(&self, _: &tracing::span::Id) {}
}

// ---- figures -----------------------------------------------------------------------------------

fn pct(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> String {
    let v = d.as_secs_f64() * 1000.0;
    if v < 10.0 { format!("{v:.2} ms") } else { format!("{v:.0} ms") }
}

fn thousands(v: f64) -> String {
    let s = format!("{:.0}", v.max(0.0));
    let mut out = String::new();
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    out
}
