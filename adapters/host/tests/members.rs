//! Several hosts over one store (SPEC 11), in one process: submissions accepted on any host
//! run once, on the session's owner, in order; every host answers `wait` and streams every
//! completion; a cancel accepted on a host that does not own the session reaches the owner's
//! core as a watermark. Each test runs on SQLite (members in one process) and PostgreSQL
//! (ignored without a server). Killing and freezing owners needs processes: the CLI's tests
//! do that (`cli/tests/members.rs`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{Kind, Scratch};
use turnstile_core::{Outcome, RunId, SessionId, Submit};
use turnstile_host::record::Cursor;
use turnstile_host::{
    Answer, Host, HostConfig, MemberConfig, OpenError, Scripted, ScriptedProvider, ToolSet, Usage,
};

both_stores!(
    submissions_accepted_anywhere_run_once_in_order_and_every_host_answers,
    a_cancel_on_a_host_that_does_not_own_the_session_ends_its_running_turn_only,
    a_member_refuses_what_it_cannot_offer,
    a_members_streamed_text_is_written_under_its_epoch,
    a_summarize_on_a_host_that_does_not_own_the_session_reaches_its_owner,
    a_full_host_leaves_new_work_to_a_host_with_room_and_idle_sessions_are_given_back,
);

/// A member named `name` with a short lease, so a test does not wait long.
fn member(dir: &Scratch, name: &str) -> HostConfig {
    member_with(dir, name, true)
}

/// The same, woken by notifications or (`false`) finding everything by its poll alone.
fn member_with(dir: &Scratch, name: &str, notifications: bool) -> HostConfig {
    let mut config = HostConfig::with_store(dir.store());
    let mut m = MemberConfig::new(name);
    m.lease = Duration::from_secs(3);
    m.margin = Duration::from_secs(1);
    m.poll = Duration::from_millis(100);
    m.prefer_acceptor = Duration::from_millis(200);
    m.notifications = notifications;
    config.member = Some(m);
    config.workers = 2;
    config
}

/// A provider that hangs on a prompt "stall" and answers any other at once.
fn stalls_on_request() -> ScriptedProvider {
    ScriptedProvider::new(|request, _| {
        if request.strings().last() == Some("stall") {
            Answer(vec![Scripted::Hang])
        } else {
            Answer::streamed("done", 2, 1, Usage::default())
        }
    })
}

async fn hosts(dir: &Scratch, n: usize, provider: &ScriptedProvider) -> Vec<Host> {
    hosts_with(dir, n, provider, true).await
}

async fn hosts_with(
    dir: &Scratch,
    n: usize,
    provider: &ScriptedProvider,
    notifications: bool,
) -> Vec<Host> {
    let mut hosts = Vec::new();
    for i in 0..n {
        let config = member_with(dir, &format!("h{i}"), notifications);
        let host = Host::open(config, Arc::new(provider.clone()), ToolSet::new()).await;
        hosts.push(host.unwrap_or_else(|e| panic!("member h{i}: {e}")));
    }
    hosts
}

/// Waits on `host` for `run`, bounded.
async fn wait(host: &Host, run: &str) -> turnstile_host::record::CompletionRecord {
    let run_id = RunId::new(run);
    let waited = tokio::time::timeout(Duration::from_secs(30), host.wait(&run_id));
    waited.await.unwrap_or_else(|_| panic!("{run} never finished")).unwrap()
}

/// Without a single notification (every one lost), the poll finds everything: slower, never
/// lost.
async fn submissions_accepted_anywhere_run_once_in_order_and_every_host_answers(kind: Kind) {
    let dir = Scratch::new(kind);
    let hosts = hosts_with(&dir, 3, &stalls_on_request(), false).await;
    for i in 0..6 {
        let submit =
            Submit::new(format!("s{}", i % 2), format!("p{i}")).with_run_id(format!("r{i}"));
        let got = hosts[i % 3].submit(submit).await.unwrap();
        assert!(!got.existing);
    }
    // A resubmission on another host is answered with the existing run.
    let again = hosts[2].submit(Submit::new("s0", "p0").with_run_id("r0")).await.unwrap();
    assert!(again.existing);
    for i in 0..6 {
        let run = format!("r{i}");
        let first = wait(&hosts[0], &run).await;
        assert_eq!(first.outcome, Outcome::Completed, "{run}: {first:?}");
        assert_eq!(first.text.as_deref(), Some("done"));
        for h in &hosts[1..] {
            assert_eq!(wait(h, &run).await, first, "every host answers the same");
        }
    }
    // Every host's completion stream has each run once, and each session's in order.
    for (n, host) in hosts.iter().enumerate() {
        let mut stream = host.completions(Cursor(0));
        let mut seen: Vec<(SessionId, RunId)> = Vec::new();
        while seen.len() < 6 {
            let next = tokio::time::timeout(Duration::from_secs(30), stream.next()).await;
            let next = next.unwrap_or_else(|_| panic!("h{n}'s stream stopped"));
            let (_, record) = next.unwrap().expect("a completion");
            seen.push((record.session.clone(), record.run_id.clone().unwrap()));
        }
        for s in ["s0", "s1"] {
            let runs: Vec<&str> =
                seen.iter().filter(|(x, _)| x.as_str() == s).map(|(_, r)| r.as_str()).collect();
            let want: Vec<String> =
                (0..6).filter(|i| format!("s{}", i % 2) == s).map(|i| format!("r{i}")).collect();
            assert_eq!(runs, want, "h{n}: {s} in acceptance order, each once");
        }
    }
    for h in &hosts {
        h.shutdown().await.unwrap();
    }
}

/// Streamed text held for coalescing and written by the debounce, not by a structural
/// commit, carries the owner's epoch like every other write of the session (SPEC 11). Until
/// the real-process test's audit found it, the debounce wrote it without one: an owner that
/// had lost the session could still write its text.
async fn a_members_streamed_text_is_written_under_its_epoch(kind: Kind) {
    let dir = Scratch::new(kind);
    let audit = turnstile_host::store::Audit::default();
    let mut config = member(&dir, "h0");
    config.store.audit = Some(audit.clone());
    // Ten pieces 60 ms apart: each is held past the 33 ms debounce and written by it.
    let provider = ScriptedProvider::new(|_, _| {
        Answer::streamed(
            "one two three four five six seven eight nine ten",
            10,
            60,
            Usage::default(),
        )
    });
    let host = Host::open(config, Arc::new(provider), ToolSet::new()).await.unwrap();
    host.submit(Submit::new("s", "p").with_run_id("r")).await.unwrap();
    assert_eq!(wait(&host, "r").await.outcome, Outcome::Completed);
    let debounced = host.writer_stats().stream_txns.load(std::sync::atomic::Ordering::Relaxed);
    assert!(debounced > 0, "the debounce wrote nothing");
    host.shutdown().await.unwrap();
    let (takes, writes) = audit.counts();
    assert!(takes >= 1 && writes > 3, "{takes} takes, {writes} writes");
    assert_eq!(audit.fenced_writes(), Vec::<String>::new());
}

async fn a_cancel_on_a_host_that_does_not_own_the_session_ends_its_running_turn_only(kind: Kind) {
    let dir = Scratch::new(kind);
    let hosts = hosts(&dir, 3, &stalls_on_request()).await;
    hosts[0].submit(Submit::new("s", "stall").with_run_id("r1")).await.unwrap();
    common::until_active(&hosts[1], "r1").await;
    assert!(hosts[2].is_busy(&SessionId::new("s")).await.unwrap());
    // The acceptor owns the session; the cancel comes through another host.
    hosts[2].cancel(&SessionId::new("s")).await.unwrap();
    let done = wait(&hosts[1], "r1").await;
    assert_eq!(done.outcome, Outcome::Cancelled, "{done:?}");
    // The watermark covers what was accepted before the cancel, never what comes after.
    hosts[1].submit(Submit::new("s", "after").with_run_id("r2")).await.unwrap();
    assert_eq!(wait(&hosts[2], "r2").await.outcome, Outcome::Completed);
    // cancel_run through a third host, for a run another host accepted.
    hosts[2].submit(Submit::new("s", "stall").with_run_id("r3")).await.unwrap();
    common::until_active(&hosts[0], "r3").await;
    hosts[1].cancel_run(&RunId::new("r3")).await.unwrap();
    assert_eq!(wait(&hosts[0], "r3").await.outcome, Outcome::Cancelled);
    for h in &hosts {
        h.shutdown().await.unwrap();
    }
}

/// The session's holder, as the store has it now (`None`: free or expired).
async fn owner(host: &Host, session: &str) -> Option<String> {
    let s = SessionId::new(session);
    host.read(move |r| r.owner(&s)).await.unwrap()
}

/// Polls `host`'s store (10 s at most) until `ok` holds of what `read` returns.
async fn until<T: Send + std::fmt::Debug + 'static>(
    host: &Host,
    read: impl Fn(&turnstile_host::store::Reader) -> T + Clone + Send + 'static,
    ok: impl Fn(&T) -> bool,
) -> T {
    let mut last = None;
    for _ in 0..500 {
        let read = read.clone();
        let got = host.read(move |r| Ok(read(r))).await.unwrap();
        if ok(&got) {
            return got;
        }
        last = Some(got);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("not within 10 s; last: {last:?}");
}

/// `summarize` sent to a host that does not own the session is a command row the owner's core
/// applies (SPEC 11): the session gets its summary.
async fn a_summarize_on_a_host_that_does_not_own_the_session_reaches_its_owner(kind: Kind) {
    let dir = Scratch::new(kind);
    let hosts = hosts(&dir, 3, &stalls_on_request()).await;
    hosts[0].submit(Submit::new("s", "p").with_run_id("r1")).await.unwrap();
    assert_eq!(wait(&hosts[0], "r1").await.outcome, Outcome::Completed);
    let holder = owner(&hosts[0], "s").await.expect("the session is owned");
    // The hosts are h0, h1, h2: the next one does not own it.
    let other = (holder[1..].parse::<usize>().unwrap() + 1) % hosts.len();
    hosts[other].summarize(&SessionId::new("s")).await.unwrap();
    let s = SessionId::new("s");
    let row = until(
        &hosts[other],
        move |r| r.session(&s).unwrap().expect("the session's row"),
        |row| row.summary_message.is_some(),
    )
    .await;
    assert!(row.summary_message.is_some());
    for h in &hosts {
        h.shutdown().await.unwrap();
    }
}

/// Placement (SPEC 11): a host that owns its `max_owned` sessions takes no more, so new work
/// goes to a host with room, even work the full host accepted; a session idle for
/// `idle_release` is given back.
async fn a_full_host_leaves_new_work_to_a_host_with_room_and_idle_sessions_are_given_back(
    kind: Kind,
) {
    let dir = Scratch::new(kind);
    let provider = Arc::new(stalls_on_request());
    let mut hosts = Vec::new();
    for name in ["h0", "h1"] {
        let mut config = member(&dir, name);
        let m = config.member.as_mut().unwrap();
        m.max_owned = 1;
        m.idle_release = Duration::from_secs(2);
        hosts.push(Host::open(config, provider.clone(), ToolSet::new()).await.unwrap());
    }
    // h0 accepts a turn that never ends: it owns that session, and has no room left.
    hosts[0].submit(Submit::new("busy", "stall").with_run_id("r1")).await.unwrap();
    common::until_active(&hosts[0], "r1").await;
    assert_eq!(owner(&hosts[0], "busy").await.as_deref(), Some("h0"));
    // Work h0 accepts for another session runs on h1.
    hosts[0].submit(Submit::new("other", "p").with_run_id("r2")).await.unwrap();
    assert_eq!(wait(&hosts[0], "r2").await.outcome, Outcome::Completed);
    assert_eq!(owner(&hosts[0], "other").await.as_deref(), Some("h1"));
    // Idle, it is given back; the busy one is kept.
    let s = SessionId::new("other");
    until(&hosts[1], move |r| r.owner(&s).unwrap(), Option::is_none).await;
    assert_eq!(owner(&hosts[0], "busy").await.as_deref(), Some("h0"));
    hosts[1].cancel(&SessionId::new("busy")).await.unwrap();
    assert_eq!(wait(&hosts[1], "r1").await.outcome, Outcome::Cancelled);
    for h in &hosts {
        h.shutdown().await.unwrap();
    }
}

async fn a_member_refuses_what_it_cannot_offer(kind: Kind) {
    let dir = Scratch::new(kind);
    let provider = Arc::new(stalls_on_request());
    let agent = Host::open(member(&dir, "a"), provider.clone(), ToolSet::new().with_agent()).await;
    assert!(matches!(agent, Err(OpenError::Member(_))), "{agent:?}");
    let mut unnamed = member(&dir, "a");
    unnamed.member.as_mut().unwrap().host.clear();
    let unnamed = Host::open(unnamed, provider.clone(), ToolSet::new()).await;
    assert_eq!(unnamed.unwrap_err().to_string(), "several hosts: a member needs a host name");
    let host = Host::open(member(&dir, "a"), provider, ToolSet::new()).await.unwrap();
    let own_seq =
        host.submit(Submit { seq: Some(turnstile_core::Seq(7)), ..Submit::new("s", "x") });
    assert!(own_seq.await.is_err());
    host.shutdown().await.unwrap();
    let closed = host.submit(Submit::new("s", "late")).await.unwrap_err();
    assert_eq!(closed.to_string(), "workspace closing");
}

/// A PostgreSQL cluster of this test's own (`scripts/postgres.sh`), to restart.
struct Cluster {
    dir: tempfile::TempDir,
    url: String,
}

impl Cluster {
    fn script() -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/postgres.sh")
    }

    fn start() -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let out = std::process::Command::new("bash")
            .arg(Cluster::script())
            .arg("start")
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let url = String::from_utf8(out.stdout).unwrap().trim().to_owned();
        Cluster { dir, url }
    }

    /// Cuts every connection at once (an immediate stop, as a crash) and starts again.
    fn restart(&self) {
        let out = std::process::Command::new("bash")
            .arg(Cluster::script())
            .arg("restart")
            .arg(self.dir.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = std::process::Command::new("bash")
            .arg(Cluster::script())
            .arg("stop")
            .arg(self.dir.path())
            .output();
    }
}

/// A restart of the database itself: the members' connections are cut mid-turn; they connect
/// again, take their sessions again, and nothing accepted is lost: the cut turn ends once
/// (completed or interrupted), a prompt accepted after the restart runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL's programs (scripts/postgres.sh starts a cluster of its own)"]
async fn postgres_a_restart_of_the_database_loses_nothing_accepted() {
    let cluster = tokio::task::block_in_place(Cluster::start);
    let store = turnstile_host::store::StoreConfig::at(turnstile_host::store::Location::Postgres(
        cluster.url.clone(),
    ));
    let provider = ScriptedProvider::new(|request, _| {
        if request.strings().last() == Some("slowly") {
            Answer::streamed("a long answer written slowly", 20, 100, Usage::default())
        } else {
            Answer::streamed("done", 2, 1, Usage::default())
        }
    });
    let mut hosts = Vec::new();
    for i in 0..2 {
        let mut config = HostConfig::with_store(store.clone());
        let mut m = MemberConfig::new(format!("h{i}"));
        m.lease = Duration::from_secs(2);
        m.margin = Duration::from_millis(500);
        m.poll = Duration::from_millis(100);
        config.member = Some(m);
        config.workers = 2;
        hosts.push(Host::open(config, Arc::new(provider.clone()), ToolSet::new()).await.unwrap());
    }
    hosts[0].submit(Submit::new("s", "slowly").with_run_id("r1")).await.unwrap();
    common::until_active(&hosts[1], "r1").await;
    tokio::task::block_in_place(|| cluster.restart());
    // A client retries a prompt the restart refused.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while let Err(e) = hosts[1].submit(Submit::new("s", "after").with_run_id("r2")).await {
        assert!(tokio::time::Instant::now() < deadline, "never accepted again: {e}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let first = wait(&hosts[1], "r1").await;
    assert!(matches!(first.outcome, Outcome::Completed | Outcome::Interrupted), "{first:?}");
    assert_eq!(wait(&hosts[0], "r2").await.outcome, Outcome::Completed);
    for (n, host) in hosts.iter().enumerate() {
        let mut stream = host.completions(Cursor(0));
        let mut seen = Vec::new();
        while let Ok(Ok(Some((_, r)))) =
            tokio::time::timeout(Duration::from_millis(1500), stream.next()).await
        {
            seen.push(r.run_id.unwrap().as_str().to_owned());
        }
        assert_eq!(seen, ["r1", "r2"], "h{n}: each run once");
        assert_eq!(host.stopped(), None, "h{n} goes on");
    }
    for h in &hosts {
        h.shutdown().await.unwrap();
    }
}

/// A member's flight recorder (`Flight::Engines`): one trace per take's core, each replaying
/// through the core with its outputs as recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_members_cores_record_one_trace_each_that_replays() {
    let dir = Scratch::new(Kind::Sqlite);
    let shelf = turnstile_host::FlightShelf::default();
    let provider = stalls_on_request();
    let mut hosts = Vec::new();
    for i in 0..2 {
        let mut config = member(&dir, &format!("h{i}"));
        config.trace = Some(turnstile_host::Flight::Engines(shelf.clone()));
        config.trace_outputs = true;
        hosts.push(Host::open(config, Arc::new(provider.clone()), ToolSet::new()).await.unwrap());
    }
    hosts[0].submit(Submit::new("s1", "one").with_run_id("r1")).await.unwrap();
    hosts[1].submit(Submit::new("s2", "two").with_run_id("r2")).await.unwrap();
    assert_eq!(wait(&hosts[1], "r1").await.outcome, Outcome::Completed);
    assert_eq!(wait(&hosts[0], "r2").await.outcome, Outcome::Completed);
    for h in &hosts {
        h.shutdown().await.unwrap();
    }
    let traces = shelf.traces();
    assert_eq!(traces.len(), 2, "one core a session");
    for t in traces {
        let trace = turnstile_core::Trace::parse(&t.text()).expect("parses");
        let report = turnstile_core::replay(&trace).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((report.run_completes, report.compared > 0), (1, true), "{report:?}");
    }
    // A member records per engine, not into one file.
    let mut single = member(&dir, "h9");
    single.trace = Some(turnstile_host::Flight::Memory(turnstile_host::FlightBuffer::default()));
    let refused = Host::open(single, Arc::new(provider), ToolSet::new()).await;
    assert!(matches!(refused, Err(OpenError::Member(_))), "{refused:?}");
}
