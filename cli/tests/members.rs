//! Several `turnstile serve` over one PostgreSQL store (SPEC 11), as real processes: clients
//! submit, cancel and clear through random servers while the owner of a running session is killed
//! (SIGKILL) or frozen (SIGSTOP) past its lease at a random moment, round after round. Checked
//! at the clients and in the database:
//! - every run has exactly one RunComplete on every event stream: one on each server (resumed
//!   on the same server when it comes back), one that moves to another server when its own
//!   dies, and one read from the start on each server at the end;
//! - the running turn of a lost owner ends `interrupted` on another server, and the
//!   submissions waiting behind it run there in order;
//! - no committed write by a fenced epoch: every transaction that wrote a session's messages
//!   or outcomes also held the session's lease at its epoch (a test-only audit trigger records
//!   both), so a frozen owner that wakes up writes nothing;
//! - every session's history is protocol-legal, and no connection is left idle inside a
//!   transaction.
//!
//! The choices (servers, commands, the moment of the loss) come from a seed printed at the
//! start; `TURNSTILE_MEMBER_SEED=N` makes them again. Bounded for CI (6 rounds);
//! `TURNSTILE_MEMBER_ROUNDS=100` runs a longer one (`TURNSTILE_MEMBER_LEASE=10` with the
//! servers' default lease), and the failover times it prints are the figures of
//! `docs/performance.md`. Needs a server (`TURNSTILE_TEST_POSTGRES`): `cargo test
//! -- --ignored postgres` runs it.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::{Project, Served};
use nix::sys::signal::Signal;
use serde_json::{Value, json};
use turnstile_core::SessionId;
use turnstile_testkit::anthropic::{paced_text, text_stream};
use turnstile_testkit::events::Events;
use turnstile_testkit::provider::{FakeProvider, Reply};

const TOKEN: &str = "several-servers-test-token";

/// The lease the servers run with (seconds): short, so failovers are quick;
/// `TURNSTILE_MEMBER_LEASE` sets another (the default of a server is 10).
fn lease() -> String {
    std::env::var("TURNSTILE_MEMBER_LEASE").unwrap_or_else(|_| "2".to_owned())
}

/// One `turnstile serve --member NAME`.
struct Server {
    name: String,
    port: u16,
    served: Served,
    frozen: bool,
}

impl Server {
    async fn start(project: &Project, name: &str, port: u16) -> Server {
        let log = format!("{name}.log");
        let lease = lease();
        let args = [
            "--member",
            name,
            "--lease",
            &lease,
            "--yolo",
            "-vv",
            "--log-file",
            &log,
        ];
        let served = Served::start(project, port, &args, Some(TOKEN), &[]).await;
        Server {
            name: name.to_owned(),
            port,
            served,
            frozen: false,
        }
    }

    fn base(&self) -> String {
        self.served.base.clone()
    }

    fn alive(&self) -> bool {
        self.served.is_running() && !self.frozen
    }

    fn kill9(&mut self) {
        self.served.kill9();
    }

    fn freeze(&mut self) {
        common::signal(self.served.pid(), Signal::SIGSTOP);
        self.frozen = true;
    }

    fn thaw(&mut self) {
        common::signal(self.served.pid(), Signal::SIGCONT);
        self.frozen = false;
    }
}

async fn post(base: &str, path: &str, body: Value) -> (u16, Value) {
    let request = reqwest::Client::new()
        .post(format!("{base}{path}"))
        .json(&body);
    answer(request.timeout(Duration::from_secs(10))).await
}

async fn get(base: &str, path: &str) -> (u16, Value) {
    let request = reqwest::Client::new().get(format!("{base}{path}"));
    answer(request.timeout(Duration::from_secs(40))).await
}

/// The status and JSON body of a request with the token; `(0, null)` when nobody answered.
async fn answer(request: reqwest::RequestBuilder) -> (u16, Value) {
    match request.bearer_auth(TOKEN).send().await {
        Ok(r) => {
            let status = r.status().as_u16();
            (status, r.json().await.unwrap_or(Value::Null))
        }
        Err(_) => (0, Value::Null),
    }
}

/// A server that answers now: the `n`th alive one, round robin.
fn pick(servers: &[Server], n: usize) -> &Server {
    let alive: Vec<&Server> = servers.iter().filter(|s| s.alive()).collect();
    alive[n % alive.len()]
}

/// The run's RunComplete, waited for on any server that answers (60 s at most).
async fn outcome(servers: &[Server], run: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut n = 0;
    loop {
        let base = pick(servers, n).base();
        let (status, body) = get(&base, &format!("/v1/runs/{run}/wait?timeout_ms=5000")).await;
        if status == 200 && body["finished"] == true {
            return body["run_complete"]["outcome"].as_str().unwrap().to_owned();
        }
        assert!(
            Instant::now() < deadline,
            "{run} never finished: {status} {body}"
        );
        n += 1;
    }
}

/// Waits until the run is its session's active turn.
async fn until_active(servers: &[Server], run: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, body) = get(&pick(servers, 0).base(), &format!("/v1/runs/{run}")).await;
        if body["state"] == "active" {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{run} never became active: {body}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Reads what the stream has now, moving it to another server when its own is gone.
async fn drain(events: &mut Events, on: &mut usize, servers: &[Server]) {
    loop {
        if !servers[*on].alive() {
            *on = servers.iter().position(Server::alive).unwrap();
            events.reconnect_to(&servers[*on].base()).await;
        }
        match events.next_within(Duration::from_millis(300)).await {
            Some(_) => {}
            // Quiet, and the connection lives: everything so far was read.
            None if events.is_open() => return,
            None => {
                *on = (*on + 1) % servers.len();
                while !servers[*on].alive() {
                    *on = (*on + 1) % servers.len();
                }
                events.reconnect_to(&servers[*on].base()).await;
            }
        }
    }
}

/// Reads what a stream pinned to one server has now: nothing while the server is down or
/// frozen; resumed on the same server once it is back.
async fn drain_pinned(events: &mut Events, server: &Server) {
    while server.alive() {
        match events.next_within(Duration::from_millis(300)).await {
            Some(_) => {}
            None if events.is_open() => return,
            None => events.reconnect().await,
        }
    }
}

/// Every expected run exactly once on `stream`, with the outcome its clients saw, and no
/// other run.
fn assert_each_once(
    stream: &str,
    seen: &BTreeMap<String, (usize, String)>,
    expected: &BTreeMap<String, String>,
) {
    for (run, want) in expected {
        let (count, got) = seen.get(run).cloned().unwrap_or_default();
        assert_eq!(
            (count, got.as_str()),
            (1, want.as_str()),
            "{run} on {stream}"
        );
    }
    assert_eq!(seen.len(), expected.len(), "{stream}: {seen:?}");
}

/// A test-only audit in the database: each transaction that touches a session's lease row
/// (a take, a renewal, a fence, a release) and each that writes a session's messages, changes
/// its runs (accepting a run inserts it, which is not an owner's write) or its session row's
/// usage, title or summary, by transaction id. Written by triggers, so it sees every such
/// committed write, whoever made it; a transaction that wrote a session both fenced and not
/// (one group commit) counts as fenced.
const FENCE_AUDIT: &str = "
CREATE TABLE fence_audit (txid BIGINT NOT NULL, session TEXT NOT NULL, what TEXT NOT NULL);
CREATE FUNCTION fence_audit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- The column naming the session is the trigger's argument; a deleted row is OLD.
    INSERT INTO fence_audit
        VALUES (txid_current(), to_jsonb(COALESCE(NEW, OLD)) ->> TG_ARGV[0], TG_TABLE_NAME);
    RETURN NULL;
END $$;
CREATE TRIGGER fence_audit AFTER INSERT OR UPDATE ON session_leases
    FOR EACH ROW EXECUTE FUNCTION fence_audit('session');
CREATE TRIGGER fence_audit AFTER INSERT OR UPDATE OR DELETE ON messages
    FOR EACH ROW EXECUTE FUNCTION fence_audit('session');
CREATE TRIGGER fence_audit AFTER UPDATE ON runs
    FOR EACH ROW EXECUTE FUNCTION fence_audit('session');
CREATE TRIGGER fence_audit
    AFTER UPDATE OF title, prompt_tokens, completion_tokens, cost_micros, summary_message
    ON sessions FOR EACH ROW EXECUTE FUNCTION fence_audit('id');
";

/// The audit's verdict: how many transactions wrote for a session, and up to five that did
/// so without holding the session's lease in the same transaction. A fence matches only the
/// holder at its epoch and keeps the lease row locked until the commit, so a write beside a
/// fence is a write of the current epoch; a write without one is a fenced epoch's.
fn unfenced_writes(db: &mut postgres::Client) -> (i64, Vec<String>) {
    let writes: i64 = db
        .query_one(
            "SELECT count(DISTINCT (txid, session)) FROM fence_audit \
             WHERE what <> 'session_leases'",
            &[],
        )
        .unwrap()
        .get(0);
    let unfenced = db
        .query(
            "SELECT DISTINCT w.txid, w.session, w.what FROM fence_audit w \
             WHERE w.what <> 'session_leases' AND NOT EXISTS ( \
                 SELECT 1 FROM fence_audit l WHERE l.what = 'session_leases' \
                 AND l.txid = w.txid AND l.session = w.session) \
             LIMIT 5",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| {
            let (txid, session, what): (i64, String, String) = (r.get(0), r.get(1), r.get(2));
            format!("transaction {txid} wrote {what} of {session}")
        })
        .collect();
    (writes, unfenced)
}

/// The seed of this run's choices: `TURNSTILE_MEMBER_SEED`, or the clock's.
fn seed() -> u64 {
    std::env::var("TURNSTILE_MEMBER_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
            now.map_or(0, |d| d.as_nanos() as u64)
        })
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs PostgreSQL: eval \"$(scripts/postgres.sh env)\", then --ignored"]
async fn postgres_three_servers_lose_owners_to_sigkill_and_sigstop_and_every_run_completes_once() {
    let rounds: usize = std::env::var("TURNSTILE_MEMBER_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(6);
    let seed = seed();
    eprintln!("seed {seed} (TURNSTILE_MEMBER_SEED={seed} makes the same choices)");
    let mut dice = fastrand::Rng::with_seed(seed);
    let provider = FakeProvider::routing(|c| {
        if c.is_title() {
            Reply::sse(text_stream("A title"))
        } else {
            // About three seconds of text: long enough to lose its owner midway, also when
            // the moment of the loss comes late on a loaded machine.
            Reply::Paced(paced_text(
                "one two three four five six seven eight nine ten eleven twelve thirteen \
                 fourteen fifteen sixteen seventeen eighteen nineteen twenty ",
                150,
            ))
        }
    })
    .await;
    let project = Project::new(&provider.base_url, "").on_postgres();
    let mut servers = Vec::new();
    for i in 0..3 {
        servers.push(Server::start(&project, &format!("h{i}"), common::free_port()).await);
    }
    let url = project.database.as_ref().unwrap().url().to_owned();
    // A blocking client lives inside `block_in_place` only (its drop blocks too).
    let connect = || postgres::Client::connect(&url, postgres::NoTls).unwrap();
    tokio::task::block_in_place(|| connect().batch_execute(FENCE_AUDIT).unwrap());
    let mut events = Events::connect(&servers[0].base(), TOKEN, None).await;
    let mut on = 0;
    let mut pinned = Vec::new();
    for s in &servers {
        pinned.push(Events::connect(&s.base(), TOKEN, None).await);
    }
    // The first rounds see every command once, and a kill and a freeze; then all is chance.
    // A session cancel may end the turn before its owner is lost, so it comes third or
    // fourth: the first two rounds lose an owner of a running turn.
    let mut extras = vec![0, 1, 2, 3];
    dice.shuffle(&mut extras);
    let cancel_at = extras.iter().position(|&e| e == 3).unwrap();
    if cancel_at < 2 {
        extras.swap(cancel_at, 2 + dice.usize(..2));
    }
    let mut failovers = Vec::new();
    let mut losses = [0_usize; 2];
    let mut failed_over = [0_usize; 2];
    let mut expected: BTreeMap<String, String> = BTreeMap::new();
    for round in 0..rounds {
        let session = format!("s{}", round % 2);
        let runs: Vec<String> = (0..3).map(|k| format!("r{round}-{k}")).collect();
        for run in &runs {
            let base = pick(&servers, dice.usize(..3)).base();
            let path = format!("/v1/sessions/{session}/prompts");
            let (status, body) = post(&base, &path, json!({"prompt": run, "run_id": run})).await;
            assert_eq!(status, 202, "{run}: {body}");
        }
        until_active(&servers, &runs[0]).await;
        // Through a random server: nothing; a cancel_run of the last one; a clear of the
        // queue (both waiting ones); a cancel of the session (everything so far, the running
        // turn too).
        let extra = extras
            .get(round)
            .copied()
            .unwrap_or_else(|| dice.usize(..4));
        let base = pick(&servers, dice.usize(..3)).base();
        let sent = match extra {
            1 => Some(format!("/v1/runs/{}/cancel", runs[2])),
            2 => Some(format!("/v1/sessions/{session}/clear")),
            3 => Some(format!("/v1/sessions/{session}/cancel")),
            _ => None,
        };
        if let Some(path) = sent {
            let (status, body) = post(&base, &path, json!({})).await;
            assert_eq!(status, 202, "{path}: {body}");
        }
        // The owner of the running turn dies or freezes past its lease, at a random moment
        // of the turn's first half.
        tokio::time::sleep(Duration::from_millis(dice.u64(..600))).await;
        let owner = tokio::task::block_in_place(|| {
            project.reader().owner(&SessionId::new(&session)).unwrap()
        });
        let killed = match round {
            0 => true,
            1 => false,
            _ => dice.bool(),
        };
        let lost_at = Instant::now();
        // A cancel of the session may have ended the turn (and let the owner go) already.
        let victim = owner.and_then(|o| servers.iter().position(|s| s.name == o));
        if let Some(v) = victim {
            if killed {
                servers[v].kill9();
            } else {
                servers[v].freeze();
            }
            losses[usize::from(!killed)] += 1;
        }
        let first = outcome(&servers, &runs[0]).await;
        let want_first: &[&str] = if extra == 3 {
            &["cancelled", "interrupted"]
        } else {
            &["interrupted"]
        };
        assert!(
            want_first.contains(&first.as_str()),
            "{} lost its owner: {first}",
            runs[0]
        );
        if victim.is_some() && first == "interrupted" {
            failovers.push(lost_at.elapsed());
            failed_over[usize::from(!killed)] += 1;
        }
        if let Some(v) = victim {
            if killed {
                let (name, port) = (servers[v].name.clone(), servers[v].port);
                servers[v] = Server::start(&project, &name, port).await;
            } else {
                servers[v].thaw();
            }
        }
        expected.insert(runs[0].clone(), first);
        let wants = match extra {
            0 => ["completed", "completed"],
            1 => ["completed", "cancelled"],
            _ => ["cancelled", "cancelled"],
        };
        for (run, want) in runs[1..].iter().zip(wants) {
            assert_eq!(
                outcome(&servers, run).await,
                want,
                "{run} after the takeover"
            );
            expected.insert(run.clone(), want.into());
        }
        drain(&mut events, &mut on, &servers).await;
        for (stream, server) in pinned.iter_mut().zip(&servers) {
            drain_pinned(stream, server).await;
        }
    }
    // A server's stream hears of another server's outcome by a notification or, at the
    // latest, its next poll (1 s): read until every run was seen on every stream, then a
    // while longer, so a second RunComplete would be seen too.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        drain(&mut events, &mut on, &servers).await;
        for (stream, server) in pinned.iter_mut().zip(&servers) {
            drain_pinned(stream, server).await;
        }
        let all_seen = std::iter::once(&events)
            .chain(&pinned)
            .all(|e| expected.keys().all(|r| e.run_completes().contains_key(r)));
        if all_seen || Instant::now() > deadline {
            break;
        }
    }
    let settle = Instant::now() + Duration::from_millis(1500);
    while Instant::now() < settle {
        drain(&mut events, &mut on, &servers).await;
        for (stream, server) in pinned.iter_mut().zip(&servers) {
            drain_pinned(stream, server).await;
        }
    }

    // Every run: exactly one RunComplete on every stream, with the outcome its clients saw;
    // also on a stream read from the start on each server.
    assert_each_once("the moving stream", &events.run_completes(), &expected);
    for (stream, server) in pinned.iter().zip(&servers) {
        let name = format!("{}'s stream", server.name);
        assert_each_once(&name, &stream.run_completes(), &expected);
    }
    for server in &servers {
        let mut replay = Events::connect(&server.base(), TOKEN, Some("0-0")).await;
        while replay
            .next_within(Duration::from_millis(500))
            .await
            .is_some()
        {}
        let name = format!("{}'s stream from the start", server.name);
        assert_each_once(&name, &replay.run_completes(), &expected);
    }

    // The database: every submission finished, each session's history protocol-legal and
    // its turns in acceptance order, no write by a fenced epoch, no connection idle inside a
    // transaction.
    tokio::task::block_in_place(|| {
        let reader = project.reader();
        let runs = reader.runs().unwrap();
        assert_eq!(runs.len(), expected.len());
        assert!(runs.iter().all(|r| r.completion.is_some()), "{runs:?}");
        for s in ["s0", "s1"] {
            let session = SessionId::new(s);
            assert_eq!(
                reader.protocol_problems(&session).unwrap(),
                Vec::<String>::new()
            );
            let seqs: Vec<u64> = reader
                .messages(&session)
                .unwrap()
                .iter()
                .filter_map(|m| m.seq.map(|q| q.0))
                .collect();
            assert!(
                seqs.windows(2).all(|w| w[0] <= w[1]),
                "{s}: turns out of order: {seqs:?}"
            );
        }
        let mut db = connect();
        let (writes, unfenced) = unfenced_writes(&mut db);
        assert!(writes > 0, "the audit saw no write");
        assert_eq!(unfenced, Vec::<String>::new(), "writes without their lease");
        let idle: i64 = db
            .query_one(
                "SELECT count(*) FROM pg_stat_activity \
                 WHERE datname = current_database() AND state = 'idle in transaction'",
                &[],
            )
            .unwrap()
            .get(0);
        assert_eq!(idle, 0, "a connection was left inside a transaction");
    });

    // Every server still up shuts down cleanly.
    for s in servers {
        let name = s.name.clone();
        let done = s.served.stop(Signal::SIGTERM).await;
        assert_eq!(done.code, Some(0), "{name}: {done:?}");
    }
    assert!(
        failed_over.iter().all(|&n| n > 0),
        "a killed and a frozen owner each failed over: {failed_over:?}"
    );
    let mut ms: Vec<u128> = failovers.iter().map(Duration::as_millis).collect();
    ms.sort_unstable();
    let p99 = ms[((ms.len() - 1) * 99).div_ceil(100)];
    eprintln!(
        "failover (owner lost to its interrupted RunComplete on another server), {} \
         failovers in {rounds} rounds ({} kills, {} freezes), lease {} s: p50 {} ms, \
         p99 {p99} ms, max {} ms",
        ms.len(),
        losses[0],
        losses[1],
        lease(),
        ms[ms.len() / 2],
        ms[ms.len() - 1]
    );
}

/// `turnstile run --server URL1,URL2`: a first server that cannot be reached is passed over,
/// and when the server the run talks to dies (owning the run's session), the run hears its
/// `interrupted` RunComplete from the next one (status 2).
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs PostgreSQL: eval \"$(scripts/postgres.sh env)\", then --ignored"]
async fn postgres_run_moves_to_the_next_server_when_its_own_dies() {
    let provider = FakeProvider::routing(|c| {
        if c.is_title() {
            Reply::sse(text_stream("A title"))
        } else if c.body.to_string().contains("slowly") {
            Reply::Paced(paced_text(
                "one two three four five six seven eight nine ten ",
                300,
            ))
        } else {
            Reply::sse(text_stream("Quick answer."))
        }
    })
    .await;
    let project = Project::new(&provider.base_url, "").on_postgres();
    let mut servers = Vec::new();
    for i in 0..2 {
        servers.push(Server::start(&project, &format!("h{i}"), common::free_port()).await);
    }
    let run = |urls: String, prompt: &str| {
        let mut c = project.command(&["run", "--server", &urls, prompt]);
        c.env("TURNSTILE_SERVER_TOKEN", TOKEN);
        c.spawn().unwrap()
    };
    // Nobody listens on the first URL: the run goes to the second.
    let dead = format!("http://127.0.0.1:{}", common::free_port());
    let done = common::finish(run(format!("{dead},{}", servers[1].base()), "Hi")).await;
    assert_eq!(
        (done.code, done.stdout.as_str()),
        (Some(0), "Quick answer.\n"),
        "{done:?}"
    );
    // The run's server accepts it, so it owns its session; it dies mid-turn.
    let urls = format!("{},{}", servers[0].base(), servers[1].base());
    let child = run(urls, "Answer slowly");
    provider.wait_steps(2).await;
    servers[0].kill9();
    let done = common::finish(child).await;
    assert_eq!(done.code, Some(2), "interrupted: {done:?}");
    assert!(done.stderr.contains("interrupted"), "{}", done.stderr);
}

/// The README's "Run it on several machines" block, run as it is written: a local PostgreSQL
/// of its own, three servers sharing one token, a run, the first server killed, a run that
/// continues the same session on another server, and everything stopped.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs PostgreSQL's programs: eval \"$(scripts/postgres.sh env)\", then --ignored"]
async fn postgres_the_readme_s_several_machines_block_runs_as_written() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    let section = &readme[readme
        .find("## Run it on several machines")
        .expect("the section")..];
    let start = section.find("```sh\n").expect("its block") + "```sh\n".len();
    let block = &section[start..start + section[start..].find("```").unwrap()];
    let provider = FakeProvider::routing(|c| {
        if c.is_title() {
            Reply::sse(text_stream("A title"))
        } else if c.body.to_string().contains("Go on") {
            Reply::sse(text_stream("Second answer."))
        } else {
            Reply::sse(text_stream("First answer."))
        }
    })
    .await;
    let project = Project::new(&provider.base_url, "");
    let scripts = project.path().join("scripts");
    std::fs::create_dir(&scripts).unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/postgres.sh");
    std::fs::copy(script, scripts.join("postgres.sh")).unwrap();
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_turnstile"))
        .parent()
        .unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // The block as written, after a clean-up for when it fails midway: its servers and its
    // database stopped, so nothing holds the ports or the output.
    let clean_up = "trap 'set +e; kill $(jobs -p) 2>/dev/null; wait; \
                    [ -n \"$D\" ] && scripts/postgres.sh stop \"$D\" >/dev/null 2>&1' EXIT\n";
    let (out, err) = (
        project.path().join("out.txt"),
        project.path().join("err.txt"),
    );
    let mut c = tokio::process::Command::new("bash");
    c.args(["-e", "-c", &format!("{clean_up}{block}")])
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .current_dir(project.path())
        .env("PATH", path)
        .env("HOME", project.path())
        .env_remove("TURNSTILE_CONFIG")
        .env_remove("TURNSTILE_STORE")
        .env_remove("TURNSTILE_SERVER_TOKEN")
        .env_remove("TURNSTILE_MODEL")
        .env_remove("RUST_LOG")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    let mut child = c.spawn().unwrap();
    let status = tokio::time::timeout(Duration::from_secs(120), child.wait()).await;
    let (stdout, stderr) = (
        std::fs::read_to_string(&out).unwrap(),
        std::fs::read_to_string(&err).unwrap(),
    );
    let status = status
        .unwrap_or_else(|_| panic!("the block did not end within 2 minutes\n{stdout}\n{stderr}"))
        .unwrap();
    assert!(status.success(), "{status:?}\n{stdout}\n{stderr}");
    // The servers may print too: the runs' answers come in order.
    let first = stdout
        .find("First answer.\n")
        .expect("the first run's answer");
    assert!(
        stdout[first..].contains("Second answer.\n"),
        "{stdout}\n{stderr}"
    );
    // The second run continued the first one's session.
    let requests = provider.requests();
    let last = requests.iter().rev().find(|r| !r.is_title()).unwrap();
    assert!(
        last.body.to_string().contains("First answer."),
        "{}",
        last.body
    );
}
