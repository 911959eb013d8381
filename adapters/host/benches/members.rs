//! Several hosts over one PostgreSQL store (SPEC 11), side by side with one host (not a timed
//! test): run with `cargo bench -p turnstile-host --bench members` and a PostgreSQL server in
//! `TURNSTILE_TEST_POSTGRES` (`eval "$(scripts/postgres.sh env)"` starts a throwaway one).
//! Every host runs in this process, each in a fresh database of that server.
//!
//! Prints:
//! 1. **cancel to RunComplete** while the provider is silent: on a host alone (the baseline:
//!    the cancel goes straight to its core), on the member that owns the session, on another
//!    member (which writes a command row; the owner hears of it by a notification), and on
//!    another member with notifications off (the owner finds it at its next poll, 1 s, and
//!    the other member hears of the outcome at its own); then while the provider streams (a
//!    delta every 20 ms, so the owner also commits streamed text), on a host alone and on
//!    another member; p50 and p99;
//! 2. **coordination cost**: the same runs through a host alone, one member, and three members
//!    (prompts sent round robin): PostgreSQL writing transactions (transaction ids the server
//!    handed out) and this process's CPU seconds per RunComplete, with the ratio of three
//!    members to a host alone.
//!
//! `TURNSTILE_BENCH_QUICK=1` runs fewer samples.

use std::sync::Arc;
use std::time::{Duration, Instant};

use turnstile_core::{RunId, SessionId, Submit, Usage};
use turnstile_host::store::{Location, ScratchDatabase, StoreConfig};
use turnstile_host::{Answer, Host, HostConfig, MemberConfig, Scripted, ScriptedProvider, ToolSet};

fn quick() -> bool {
    std::env::var_os("TURNSTILE_BENCH_QUICK").is_some()
}

/// Hangs on "stall"; streams 500 deltas 20 ms apart (10 s) on "stream"; answers anything else
/// with three deltas 20 ms apart.
fn provider() -> ScriptedProvider {
    ScriptedProvider::new(|request, _| {
        if request.strings().last() == Some("stall") {
            Answer(vec![Scripted::Hang])
        } else if request.strings().last() == Some("stream") {
            Answer::streamed(&"word ".repeat(500), 500, 20, Usage::default())
        } else {
            Answer::streamed("a short answer", 3, 20, Usage::default())
        }
    })
}

fn config(db: &ScratchDatabase, member: Option<(&str, bool)>) -> HostConfig {
    let mut c = HostConfig::with_store(StoreConfig::at(Location::Postgres(db.url().to_owned())));
    c.workers = 2;
    c.member = member.map(|(name, notifications)| {
        let mut m = MemberConfig::new(name);
        m.notifications = notifications;
        m
    });
    c
}

async fn open(config: HostConfig) -> Host {
    Host::open(config, Arc::new(provider()), ToolSet::new()).await.expect("open")
}

fn quantile(sorted: &[Duration], q: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[i.min(sorted.len() - 1)].as_secs_f64() * 1000.0
}

/// Waits until the run is its session's active turn (its activation is durable).
async fn until_active(host: &Host, run: &str) {
    let run = RunId::new(run);
    loop {
        let r = run.clone();
        let state = host.read(move |rd| Ok(rd.run(&r)?.map(|x| x.state))).await.expect("read");
        if state == Some(turnstile_host::store::RunState::Active) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Cancel latencies: `samples` turns of `prompt` started on `owner` (which owns their
/// sessions), each cancelled through `via` once it has been active for 100 ms.
async fn cancels(
    owner: &Host,
    via: &Host,
    prompt: &str,
    samples: usize,
    tag: &str,
) -> Vec<Duration> {
    let mut took = Vec::with_capacity(samples);
    for i in 0..samples {
        let (session, run) = (format!("{tag}{i}"), format!("{tag}-r{i}"));
        owner.submit(Submit::new(&session, prompt).with_run_id(&run)).await.expect("accepted");
        until_active(owner, &run).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        let s = SessionId::new(&session);
        let held = owner.read(move |r| r.owner(&s)).await.expect("read");
        assert!(held.is_none() || held.as_deref() == Some("a"), "{session} is owned by {held:?}");
        let asked = Instant::now();
        via.cancel(&SessionId::new(&session)).await.expect("cancel");
        let done = via.wait(&RunId::new(&run)).await.expect("done");
        took.push(asked.elapsed());
        assert_eq!(done.outcome, turnstile_core::Outcome::Cancelled);
    }
    took.sort();
    took
}

/// This process's CPU time (user and system) so far, from `/proc/self/stat` (in ticks of
/// 10 ms, Linux's fixed USER_HZ).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The fields after the command name, which is in parentheses.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 of the line: 12 and 13 after the name.
    (ticks(11) + ticks(12)) / 100.0
}

/// Transaction ids the server has handed out so far (one per writing transaction).
fn xids(db: &ScratchDatabase) -> i64 {
    // A blocking client: off the runtime's threads.
    tokio::task::block_in_place(|| {
        let mut c = postgres::Client::connect(db.url(), postgres::NoTls).expect("connect");
        let row = c.query_one("SELECT CAST(txid_current() AS BIGINT)", &[]).expect("txid");
        row.get(0)
    })
}

/// Runs `sessions` x `per_session` prompts through `hosts` (round robin) to their ends;
/// returns writing transactions and CPU seconds per RunComplete.
async fn cost(
    db: &ScratchDatabase,
    hosts: &[Host],
    sessions: usize,
    per_session: usize,
) -> (f64, f64) {
    let (x0, c0) = (xids(db), cpu_seconds());
    let mut clients = Vec::new();
    for s in 0..sessions {
        let hosts = hosts.to_vec();
        clients.push(tokio::spawn(async move {
            for k in 0..per_session {
                let host = &hosts[(s + k) % hosts.len()];
                let run = format!("c{s}-{k}");
                host.submit(Submit::new(format!("c{s}"), "go").with_run_id(&run))
                    .await
                    .expect("ok");
                host.wait(&RunId::new(&run)).await.expect("done");
            }
        }));
    }
    for c in clients {
        c.await.expect("join");
    }
    let runs = (sessions * per_session) as f64;
    // `xids` itself takes one transaction id.
    let writes = (xids(db) - x0 - 1) as f64;
    (writes / runs, (cpu_seconds() - c0) / runs)
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
    println!(
        "# turnstile several-hosts benchmark ({} mode)",
        if quick() { "quick" } else { "full" }
    );
    let samples = if quick() { 20 } else { 100 };
    rt.block_on(async {
        println!("## cancel to RunComplete, the provider silent or streaming ({samples} cancels each)");
        let alone_db = ScratchDatabase::create().unwrap_or_else(|e| panic!("{e}"));
        let alone = open(config(&alone_db, None)).await;
        let db = ScratchDatabase::create().unwrap_or_else(|e| panic!("{e}"));
        let owner = open(config(&db, Some(("a", true)))).await;
        let other = open(config(&db, Some(("b", true)))).await;
        let quiet_db = ScratchDatabase::create().unwrap_or_else(|e| panic!("{e}"));
        let quiet_owner = open(config(&quiet_db, Some(("a", false)))).await;
        let quiet_other = open(config(&quiet_db, Some(("b", false)))).await;
        for round in 0..2 {
            for (name, took) in [
                ("a host alone (baseline)", cancels(&alone, &alone, "stall", samples, &format!("a{round}")).await),
                ("on the owning member", cancels(&owner, &owner, "stall", samples, &format!("o{round}")).await),
                ("on another host", cancels(&owner, &other, "stall", samples, &format!("n{round}")).await),
                (
                    "on another host, no notifications",
                    cancels(&quiet_owner, &quiet_other, "stall", samples, &format!("q{round}")).await,
                ),
                (
                    "streaming: a host alone (baseline)",
                    cancels(&alone, &alone, "stream", samples, &format!("sa{round}")).await,
                ),
                (
                    "streaming: on another host",
                    cancels(&owner, &other, "stream", samples, &format!("sn{round}")).await,
                ),
            ] {
                println!(
                    "  round {round} {name:<36} p50 {:>7.1} ms  p99 {:>7.1} ms",
                    quantile(&took, 0.5),
                    quantile(&took, 0.99)
                );
            }
        }
        for h in [alone, owner, other, quiet_owner, quiet_other] {
            h.shutdown().await.expect("shutdown");
        }

        let (sessions, per) = if quick() { (8, 5) } else { (16, 10) };
        println!(
            "## coordination cost: {} runs ({sessions} sessions x {per}), 3 deltas 20 ms apart each",
            sessions * per
        );
        for round in 0..2 {
            let mut alone_cost = (0.0, 0.0);
            for (name, members) in [("a host alone", 0), ("one member", 1), ("three members", 3)] {
                let db = ScratchDatabase::create().unwrap_or_else(|e| panic!("{e}"));
                let mut hosts = Vec::new();
                if members == 0 {
                    hosts.push(open(config(&db, None)).await);
                }
                for i in 0..members {
                    hosts.push(open(config(&db, Some((&format!("h{i}"), true)))).await);
                }
                let (writes, cpu) = cost(&db, &hosts, sessions, per).await;
                for h in hosts {
                    h.shutdown().await.expect("shutdown");
                }
                if members == 0 {
                    alone_cost = (writes, cpu);
                }
                println!(
                    "  round {round} {name:<14} {writes:>5.1} writing transactions and {:>6.2} ms CPU per RunComplete ({:.2}x and {:.2}x a host alone)",
                    cpu * 1000.0,
                    writes / alone_cost.0,
                    cpu / alone_cost.1,
                );
            }
        }
    });
}
