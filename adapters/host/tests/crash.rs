//! Crash recovery (SPEC 4.12): a child process runs a host with streaming turns and is killed
//! with SIGKILL at many points; reopening the store must pass SQLite's integrity check, give
//! every accepted RunId exactly one RunComplete (the one already published, if any), and leave
//! every history protocol-legal.
//!
//! The child is this test binary itself, re-run on the ignored test `crash_child` with the
//! store path in `TURNSTILE_CRASH_STORE`. It prints `accepted <run>` after each acceptance
//! (the reply comes only after the ledger row is durable) and `done <run> <outcome>` after each
//! completion it heard.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use turnstile_core::HISTORY_REPAIR_RESULT;
use turnstile_core::{CallId, FinishReason, RunId, StepEvent, Submit, Usage};
use turnstile_host::provider::RequestMessage;
use turnstile_host::store::{Location, RunState, Store, StoreConfig};
use turnstile_host::{Answer, EchoTool, Host, HostConfig, Scripted, ScriptedProvider, ToolSet};

const ENV: &str = "TURNSTILE_CRASH_STORE";

/// Kill points: the child is killed this many milliseconds after it started, one run each.
const KILL_AFTER_MS: [u64; 16] =
    [30, 45, 60, 75, 90, 110, 130, 150, 175, 200, 230, 260, 300, 350, 400, 460];

#[test]
#[ignore = "run by `killed_at_many_points_recovery_keeps_every_promise` as a child process"]
fn crash_child() {
    let Ok(path) = std::env::var(ENV) else { return };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async move {
        let provider = ScriptedProvider::new(|req, n| {
            let after_tools = matches!(req.messages.last(), Some(RequestMessage::ToolResults(_)));
            if n % 5 == 4 {
                // Some steps fail and retry, so crashes also land in backoffs and resets.
                return Answer::failure(503, "overloaded");
            }
            if n % 3 == 1 && !after_tools {
                // Some steps reason, then call two tools that take a while: crashes land
                // between a call and its result.
                let call = |id: &str, input: &str| {
                    Scripted::Event(StepEvent::ToolCall {
                        id: CallId::new(id),
                        name: "view".into(),
                        input: input.into(),
                    })
                };
                return Answer(vec![
                    Scripted::Event(StepEvent::ReasoningStart),
                    Scripted::Event(StepEvent::ReasoningDelta { text: "thinking".into() }),
                    Scripted::Wait(2),
                    Scripted::Event(StepEvent::ReasoningEnd { signature: Some("sig".into()) }),
                    Scripted::Event(StepEvent::ToolInputStart {
                        id: CallId::new("c1"),
                        name: "view".into(),
                    }),
                    call("c1", "{}"),
                    call("c2", "{\"p\":1}"),
                    Scripted::Event(StepEvent::Finished {
                        reason: FinishReason::ToolCalls,
                        usage: None,
                    }),
                ]);
            }
            let text = format!("answer to {}", req.last_user_text().unwrap_or(""));
            Answer::streamed(
                &text,
                12,
                3,
                Usage { input_tokens: 3, output_tokens: 2, ..Usage::default() },
            )
        });
        // A file path, or a PostgreSQL database's URL.
        let mut config = HostConfig::with_store(StoreConfig::at(Location::parse(&path)));
        config.workers = 2;
        let tools = ToolSet::new().with(EchoTool { name: "view".into(), delay_ms: 15 });
        let host = Host::open(config, Arc::new(provider), tools).await.expect("open");
        let mut handles = Vec::new();
        for i in 0.. {
            let session = format!("s{}", i % 3);
            let run = format!("run-{}-{i}", std::process::id());
            let submit = Submit::new(&session, format!("prompt {i}")).with_run_id(&run);
            if host.submit(submit).await.is_err() {
                break;
            }
            println!("accepted {run}");
            let h = host.clone();
            handles.push(tokio::spawn(async move {
                if let Ok(done) = h.wait(&RunId::new(&run)).await {
                    println!("done {run} {:?}", done.outcome);
                }
            }));
            if i % 4 == 3 {
                let _ = host.cancel(&turnstile_core::SessionId::new(&session)).await;
            }
            tokio::time::sleep(Duration::from_millis(7)).await;
        }
    });
}

/// Child mode of `a_second_process_is_refused_and_runs_no_recovery`: tries to open the store
/// and prints what happened.
#[test]
#[ignore = "run by `a_second_process_is_refused_and_runs_no_recovery` as a child process"]
fn open_child() {
    let Ok(path) = std::env::var(OPEN_ENV) else { return };
    match Store::open(&StoreConfig::new(&path)) {
        Ok(_) => println!("opened"),
        Err(e) => println!("refused: {e}"),
    }
}

const OPEN_ENV: &str = "TURNSTILE_OPEN_STORE";

/// Held by every test that spawns child processes while it owns a store. A child forked by
/// one test holds a copy of every descriptor of this process until it execs (close-on-exec
/// acts only then), the other test's owner lock included: under load that window can be
/// long enough for the lock to outlive its store's shutdown, the likely cause of "released
/// after shutdown" failing once (never reproduced in 25 runs under load, alone). Tests that
/// spawn run one at a time.
static SPAWNING: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn spawning() -> std::sync::MutexGuard<'static, ()> {
    // A test that failed while holding it leaves it poisoned; the others still run.
    SPAWNING.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// SPEC 4.12: one process owns a store; a second one is refused with the exact text and runs
/// no recovery over live work.
#[test]
fn a_second_process_is_refused_and_runs_no_recovery() {
    let _alone = spawning();
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("owned.db");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let provider = ScriptedProvider::new(|_, _| Answer::hang());
    let host = rt
        .block_on(Host::open(HostConfig::new(&path), Arc::new(provider), ToolSet::new()))
        .expect("open");
    rt.block_on(host.submit(Submit::new("s", "live").with_run_id("live"))).expect("accepted");
    let exe = std::env::current_exe().expect("test binary");
    // The child's whole output and exit status, so that a failure says what the child saw.
    let second_process = || {
        let out = Command::new(&exe)
            .args(["--exact", "open_child", "--ignored", "--nocapture", "--test-threads=1"])
            .env(OPEN_ENV, &path)
            .stderr(Stdio::piped())
            .output()
            .expect("child");
        let (stdout, stderr) =
            (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        format!("{stdout}\n(exit: {}; stderr: {stderr})", out.status)
    };
    let stdout = second_process();
    assert!(
        stdout.contains("refused: store is in use by another turnstile process"),
        "the second process was not refused: {stdout}"
    );
    let row = rt.block_on(host.read(|r| r.run(&RunId::new("live")))).expect("read").expect("row");
    assert_ne!(row.state, RunState::Finished, "the second process ran recovery over live work");
    rt.block_on(host.shutdown()).expect("shutdown");
    let after = second_process();
    assert!(after.contains("opened"), "released after shutdown: {after}");
}

#[test]
fn killed_at_many_points_recovery_keeps_every_promise() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("crash.db").display().to_string();
    let totals = rounds(&KILL_AFTER_MS, &path, |at| StoreConfig::new(at));
    // The kills must have landed mid-run for the test to mean anything.
    assert!(totals.recovered > 0, "no kill left an unfinished submission to recover: {totals:?}");
    assert!(totals.repaired > 0, "no kill landed between a tool call and its result: {totals:?}");
}

/// The same with the store in PostgreSQL (SPEC 11): a process killed at any point leaves a
/// database that the next start recovers with every promise kept.
#[test]
#[ignore = "needs PostgreSQL: eval \"$(scripts/postgres.sh env)\", then --ignored"]
fn postgres_killed_at_many_points_recovery_keeps_every_promise() {
    let db = turnstile_host::store::ScratchDatabase::create().unwrap_or_else(|e| panic!("{e}"));
    let totals =
        rounds(&KILL_AFTER_MS, db.url(), |at| StoreConfig::at(Location::Postgres(at.to_owned())));
    assert!(totals.recovered > 0, "no kill left an unfinished submission to recover: {totals:?}");
    assert!(totals.repaired > 0, "no kill landed between a tool call and its result: {totals:?}");
}

/// The crash test finds the store-level mutant in its scope (SPEC 10): a recovery that leaves
/// tool calls without results fails the protocol-legal check after some kill.
#[cfg(feature = "mutants")]
#[test]
fn the_crash_test_finds_a_recovery_that_leaves_calls_without_results() {
    let armed = |path: &str| {
        let mut c = StoreConfig::new(path);
        c.mutant = Some(turnstile_host::HostMutant::RecoveryLeavesOrphans);
        c
    };
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("crash.db").display().to_string();
    let caught = std::panic::catch_unwind(|| rounds(&KILL_AFTER_MS, &path, armed));
    let payload = caught.expect_err("the mutant went unnoticed by every round");
    let message = payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_default();
    assert!(message.contains("no result"), "failed for another reason: {message}");
}

/// Runs a child host killed at each point, checking the store after each kill (opened with
/// `store`, which runs recovery). Panics on the first broken promise.
fn rounds(kills: &[u64], path: &str, store: impl Fn(&str) -> StoreConfig) -> Totals {
    let _alone = spawning();
    let exe = std::env::current_exe().expect("test binary");
    let mut accepted: Vec<String> = Vec::new();
    let mut heard: BTreeMap<String, String> = BTreeMap::new();
    let mut totals = Totals::default();
    for (round, kill_after) in kills.iter().enumerate() {
        let mut child = Command::new(&exe)
            .args(["--exact", "crash_child", "--ignored", "--nocapture", "--test-threads=1"])
            .env(ENV, path)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("child");
        let stdout = child.stdout.take().expect("stdout");
        let reader = std::thread::spawn(move || {
            BufReader::new(stdout).lines().map_while(Result::ok).collect::<Vec<String>>()
        });
        std::thread::sleep(Duration::from_millis(*kill_after));
        child.kill().expect("SIGKILL");
        child.wait().expect("reaped");
        for line in reader.join().expect("reader") {
            let mut parts = line.split_whitespace();
            match (parts.next(), parts.next(), parts.next()) {
                (Some("accepted"), Some(run), None) => accepted.push(run.to_owned()),
                (Some("done"), Some(run), Some(outcome)) => {
                    assert!(
                        heard.insert(run.to_owned(), outcome.to_owned()).is_none(),
                        "{run} heard twice"
                    );
                }
                _ => {}
            }
        }
        check(&store(path), &accepted, &heard, round, &mut totals);
        eprintln!(
            "round {round}: killed after {kill_after} ms; {} accepted, {} heard so far; {totals:?}",
            accepted.len(),
            heard.len()
        );
    }
    assert!(
        accepted.len() >= kills.len(),
        "the child accepted too little to test anything: {}",
        accepted.len()
    );
    assert!(!heard.is_empty(), "no run finished before a kill: the kill points are too early");
    totals
}

/// What the rounds' recoveries found, to show the kills landed where they matter.
#[derive(Debug, Default)]
struct Totals {
    /// Submissions recovery ended `interrupted`.
    recovered: usize,
    /// Tool results recovery wrote because the process died between a call and its result.
    repaired: usize,
}

/// Opens the store (running recovery) and checks every promise of SPEC 4.12 and section 5.
fn check(
    config: &StoreConfig,
    accepted: &[String],
    heard: &BTreeMap<String, String>,
    round: usize,
    totals: &mut Totals,
) {
    let opened = Store::open(config).expect("reopen after kill");
    totals.recovered += opened.recovered.len();
    let reader = opened.store.reader().expect("reader");
    reader.integrity_check().unwrap_or_else(|e| panic!("round {round}: integrity: {e}"));
    let runs = reader.runs().expect("runs");
    let mut cursors = std::collections::BTreeSet::new();
    for row in &runs {
        assert_eq!(
            row.state,
            RunState::Finished,
            "round {round}: seq {} unfinished after recovery",
            row.seq
        );
        let (cursor, record) = row.completion.clone().expect("a finished row has its completion");
        assert!(cursors.insert(cursor), "round {round}: cursor {cursor:?} used twice");
        assert_eq!(record.seq, row.seq);
        assert_eq!(record.run_id, row.run_id);
    }
    for run in accepted {
        let row = reader
            .run(&RunId::new(run))
            .expect("read")
            .unwrap_or_else(|| panic!("round {round}: accepted {run} has no ledger row"));
        let (_, record) = row.completion.expect("finished");
        if let Some(outcome) = heard.get(run) {
            assert_eq!(
                &format!("{:?}", record.outcome),
                outcome,
                "round {round}: {run} was published as {outcome} but recorded otherwise"
            );
        }
    }
    let mut repaired = 0;
    for s in reader.sessions().expect("sessions") {
        let problems = reader.protocol_problems(&s.id).expect("read");
        assert!(problems.is_empty(), "round {round}: session {}: {problems:?}", s.id);
        for m in reader.messages(&s.id).expect("messages") {
            repaired += m.results.iter().filter(|r| r.content == HISTORY_REPAIR_RESULT).count();
        }
    }
    // Repairs accumulate across rounds in the same store: count the new ones.
    totals.repaired = totals.repaired.max(repaired);
    let max_seq = runs.iter().map(|r| r.seq).max();
    // A kill before the child accepted anything (a loaded machine starts it late) leaves an
    // empty ledger: nothing to continue above.
    assert!(
        max_seq.is_none() || opened.start.next_seq > max_seq,
        "round {round}: sequences continue above the ledger: start {:?}, ledger max {max_seq:?}, {} rows",
        opened.start.next_seq,
        runs.len()
    );
    drop(reader);
    opened.store.close().expect("close");
}
