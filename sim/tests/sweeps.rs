//! Sweeps as tests (the madsim build: `RUSTFLAGS="--cfg madsim" CARGO_TARGET_DIR=target/madsim
//! cargo test -p turnstile-sim --release`): the built-in world, the regression seeds,
//! determinism, and the builder's parts a user's test relies on (their tools, checks, provider
//! behaviour, client mix and faults; a tool that breaks determinism named).
//!
//! `TURNSTILE_SIM_SEEDS` and `TURNSTILE_SIM_JOBS` resize the built-in world's sweep (CI and a
//! nightly hunt run the same test); the other tests fix their seeds.

#![cfg(madsim)]

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use turnstile_core::{CallId, FinishReason, Input, StepEvent, ToolOutput, ToolSpec};
use turnstile_host::{BoxFuture, ModelRequest, RequestMessage, Tool, ToolCall};
use turnstile_sim::rng::Rng;
use turnstile_sim::sweep::Sweep;
use turnstile_sim::world::{Act, Behaviour, Clients, Faults};

#[test]
fn the_built_in_world_passes_a_sweep() {
    let report = Sweep::new("built-in world").seeds(300).run();
    report.assert_passed();
    assert!(report.rerun >= 2, "the first seeds ran again: {}", report.line());
    let events: u64 = report.reports.iter().map(|r| r.events).sum();
    assert!(events > 10 * report.seeds, "the seeds did something: {events} inputs");
}

#[test]
fn the_regression_seeds_pass() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/regressions.txt");
    let text = std::fs::read_to_string(path).expect("sim/regressions.txt");
    let mut ran = 0;
    for (i, line) in text.lines().enumerate() {
        let entry = line.split('#').next().unwrap_or("").trim();
        if entry.is_empty() {
            continue;
        }
        let (seed, profile) = entry.split_once(' ').unwrap_or_else(|| panic!("line {}", i + 1));
        let seed: u64 = seed.parse().unwrap_or_else(|_| panic!("line {}: {seed:?}", i + 1));
        let faults = Faults::from_name(profile.trim()).expect("a profile");
        let r = Sweep::new("regressions").faults(faults).run_seed(seed, false);
        assert_eq!(r.violations, Vec::<String>::new(), "seed {seed} ({profile})");
        ran += 1;
    }
    assert!(ran >= 6, "{ran} regression seeds");
}

#[test]
fn a_seed_gives_the_same_trace_every_time_and_in_any_job() {
    let sweep = Sweep::new("determinism").ignore_environment();
    let hashes: BTreeSet<String> = (0..3).map(|_| sweep.run_seed(7, false).trace_hash).collect();
    assert_eq!(hashes.len(), 1, "{hashes:?}");
    // Which thread and in which order a seed runs changes nothing.
    let one = sweep.clone().seeds(12).jobs(1).determinism(0).run();
    let two = sweep.seeds(12).jobs(2).determinism(0).run();
    let hashes = |r: &turnstile_sim::sweep::SweepReport| {
        r.reports.iter().map(|s| (s.seed, s.trace_hash.clone())).collect::<Vec<_>>()
    };
    assert_eq!(hashes(&one), hashes(&two));
}

#[test]
fn the_library_and_the_command_run_the_same_world() {
    // `turnstile-sim seed N` and `Sweep::new(..).run_seed(N)` in another crate's test: one
    // world, one trace hash.
    for (seed, profile, faults) in [(3, "faults", Faults::ALL), (11, "calm", Faults::CALM)] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_turnstile-sim"))
            .args(["seed", &seed.to_string(), "--faults", profile])
            .output()
            .expect("turnstile-sim runs");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let command = text.lines().find_map(|l| l.strip_prefix("hash ")).expect("a hash line");
        let library = Sweep::new("same world").faults(faults).run_seed(seed, false).trace_hash;
        assert_eq!(library, command, "seed {seed} ({profile})");
    }
}

/// A tool that answers after a while.
struct Echo {
    calls: Arc<AtomicU64>,
}

impl Tool for Echo {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new("echo")
    }

    fn run(&self, call: ToolCall) -> BoxFuture<ToolOutput> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(30)).await;
            ToolOutput::ok(call.input)
        })
    }
}

/// The calls a seed's traces asked a tool to run.
fn runs_of(tool: &str, run: &turnstile_sim::world::Run<'_>) -> u64 {
    let outputs = run.traces.iter().flat_map(|t| &t.lines).flat_map(|(_, l)| l.expect.iter());
    let outputs = outputs.flatten();
    outputs.filter(|o| o["kind"]["type"] == "run_tool" && o["kind"]["name"] == tool).count() as u64
}

#[test]
fn a_users_tool_and_check_run_in_every_seed_and_a_failing_check_is_reported() {
    let seeds_with_calls = Arc::new(AtomicU64::new(0));
    let counted = seeds_with_calls.clone();
    let sweep = Sweep::new("echo").ignore_environment().seeds(40).determinism(1);
    let report = sweep
        .setup(move |world| {
            let calls = Arc::new(AtomicU64::new(0));
            world.tool(Echo { calls: calls.clone() }, |rng| format!("{{\"n\":{}}}", rng.below(9)));
            let counted = counted.clone();
            world.check("the traces and the tool agree", move |run| {
                let ran = calls.load(Ordering::Relaxed);
                if ran > 0 {
                    counted.fetch_add(1, Ordering::Relaxed);
                }
                // Every call the core asked for ran, unless a cancel or a crash got there first.
                let asked = runs_of("echo", run);
                if ran > asked {
                    return Err(format!("the tool ran {ran} times, the traces asked {asked}"));
                }
                if run.ledger.is_empty() {
                    return Err("the ledger is empty".to_owned());
                }
                Ok(())
            });
            world.check("no seed is divisible by 10", |run| {
                if run.seed % 10 == 0 { Err(format!("seed {}", run.seed)) } else { Ok(()) }
            });
        })
        .run();
    let failing: Vec<u64> = report.failures.iter().map(|f| f.seed).collect();
    assert_eq!(failing, [10, 20, 30, 40], "{}", report.failures());
    let first = &report.failures[0];
    assert_eq!(first.violations, ["check `no seed is divisible by 10`: seed 10"]);
    let rerun = "TURNSTILE_SIM_SEED=10 RUSTFLAGS=\"--cfg madsim\" CARGO_TARGET_DIR=target/madsim \
                 cargo test --release -p turnstile-sim --test sweeps -- \
                 a_users_tool_and_check_run_in_every_seed_and_a_failing_check_is_reported --exact";
    assert_eq!(first.rerun, rerun);
    let trace = first.trace.as_ref().expect("the trace is written");
    let text = std::fs::read_to_string(trace).expect("the trace file");
    turnstile_core::Trace::parse(&text).expect("a core trace");
    assert!(first.shrunk.starts_with("(the core's trace replays cleanly"), "{}", first.shrunk);
    assert!(report.failures().contains(&format!("core trace: {}", trace.display())));
    assert!(report.nondeterministic.is_empty(), "{:?}", report.nondeterministic);
    let with_calls = seeds_with_calls.load(Ordering::Relaxed);
    assert!(with_calls >= 5, "the model called the tool in {with_calls} of 40 seeds");
}

/// A script: the first request calls `echo`, the one after its result answers in text.
fn echo_then_text(_: &mut Rng, request: &ModelRequest) -> Vec<Act> {
    let finished = |reason| Act::Send(StepEvent::Finished { reason, usage: None });
    if matches!(request.messages.last(), Some(RequestMessage::ToolResults(_))) {
        return vec![
            Act::Wait(20),
            Act::Send(StepEvent::TextDelta { text: "done".into() }),
            finished(FinishReason::Stop),
        ];
    }
    let id = CallId::new("e1");
    vec![
        Act::Wait(10),
        Act::Send(StepEvent::ToolInputStart { id: id.clone(), name: "echo".into() }),
        Act::Send(StepEvent::ToolCall { id, name: "echo".into(), input: "{}".into() }),
        finished(FinishReason::ToolCalls),
    ]
}

#[test]
fn a_script_a_client_mix_and_no_faults_are_what_runs() {
    let submits_only = Clients {
        resubmit: 0,
        cancel: 0,
        cancel_run: 0,
        clear: 0,
        child: 0,
        summarize: 0,
        ..Clients::default()
    };
    let no_faults = Faults { store: false, crash: 0, outage: 0, early_shutdown: 0, stalls: false };
    let report = Sweep::new("scripted")
        .ignore_environment()
        .seeds(20)
        .provider(Behaviour::Scripted(Arc::new(echo_then_text)))
        .clients(submits_only)
        .faults(no_faults)
        .without_built_in_tools()
        .setup(|world| {
            world.tool(Echo { calls: Arc::default() }, |_| "{}".to_owned());
            world.check("only submissions, each a tool call then text", |run| {
                let inputs = run.traces.iter().flat_map(|t| &t.lines).map(|(_, l)| &l.input);
                let refused = inputs.filter(|i| {
                    matches!(
                        i,
                        Input::Cancel { .. }
                            | Input::CancelRun { .. }
                            | Input::ClearQueue { .. }
                            | Input::Summarize { .. }
                    )
                });
                if let Some(input) = refused.take(1).next() {
                    return Err(format!("the mix has no such command: {input:?}"));
                }
                let calls = runs_of("echo", run);
                let runs = run.ledger.len() as u64;
                if calls == 0 || calls > runs * 7 {
                    return Err(format!("{calls} echo calls for {runs} submissions"));
                }
                Ok(())
            });
        })
        .run();
    report.assert_passed();
    let mut outcomes = BTreeSet::new();
    for r in &report.reports {
        assert_eq!(r.faults.keys().filter(|k| *k != "Lagged").count(), 0, "{:?}", r.faults);
        outcomes.extend(r.outcomes.keys().cloned());
    }
    assert!(outcomes.contains("Completed"), "{outcomes:?}");
}

#[test]
fn the_recorded_streams_alone_pass() {
    let report = Sweep::new("recorded").ignore_environment().seeds(40);
    report.provider(Behaviour::Recorded).run().assert_passed();
}

/// A tool that keeps a count in a static: each run of a seed sees another count, so the
/// same seed gives another trace (a mutable global, as an unbiased `select!` would).
struct Counter;

static CALLS: AtomicU64 = AtomicU64::new(0);

impl Tool for Counter {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new("counter")
    }

    fn run(&self, _: ToolCall) -> BoxFuture<ToolOutput> {
        let n = CALLS.fetch_add(1, Ordering::Relaxed);
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(n % 50)).await;
            ToolOutput::ok(format!("call {n}"))
        })
    }
}

#[test]
fn a_tool_that_breaks_determinism_is_named() {
    let report = Sweep::new("counter")
        .ignore_environment()
        .seeds(4)
        .determinism(4)
        .without_built_in_tools()
        .setup(|world| {
            world.tool(Counter, |_| "{}".to_owned());
        })
        .run();
    assert!(!report.passed());
    assert!(report.failures.is_empty(), "{}", report.failures());
    let first = report.nondeterministic.first().expect("a seed that differs");
    assert!(first.contains("gave different traces"), "{first}");
    assert!(first.contains("Tool `counter` is the first to differ"), "{first}");
    assert!(report.line().contains("NOT deterministic"), "{}", report.line());
}

/// A tool that starts an OS thread, which the simulation refuses.
struct Threads;

impl Tool for Threads {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new("threads")
    }

    fn run(&self, _: ToolCall) -> BoxFuture<ToolOutput> {
        let joined = std::thread::spawn(|| 1).join().unwrap_or(0);
        Box::pin(async move { ToolOutput::ok(format!("{joined}")) })
    }
}

#[test]
fn a_tool_that_starts_a_thread_is_named() {
    let report = Sweep::new("threads")
        .ignore_environment()
        .seeds(6)
        .determinism(0)
        .without_built_in_tools()
        .setup(|world| {
            world.tool(Threads, |_| "{}".to_owned());
        })
        .run();
    let violations: Vec<&String> = report.failures.iter().flat_map(|f| &f.violations).collect();
    let named = violations.iter().find(|v| v.starts_with("tool `threads` panicked in call "));
    let named = named.unwrap_or_else(|| panic!("{}", report.failures()));
    assert!(named.contains("the way starting an OS thread fails"), "{named}");
}

/// A tool that races two ready branches in an unbiased `select!`: which one wins is drawn
/// from a generator outside the seed's (the workspace writes `biased;` in every `select!`).
struct Racer;

impl Tool for Racer {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new("racer")
    }

    fn run(&self, _: ToolCall) -> BoxFuture<ToolOutput> {
        Box::pin(async move {
            let pause = |ms| tokio::time::sleep(Duration::from_millis(ms));
            tokio::select! {
                () = std::future::ready(()) => pause(10).await,
                () = std::future::ready(()) => pause(40).await,
            }
            ToolOutput::ok("raced")
        })
    }
}

#[test]
fn a_tool_with_an_unbiased_select_is_named() {
    let report = Sweep::new("racer")
        .ignore_environment()
        .seeds(4)
        .determinism(4)
        .without_built_in_tools()
        .setup(|world| {
            world.tool(Racer, |_| "{}".to_owned());
        })
        .run();
    let first = report.nondeterministic.first().unwrap_or_else(|| panic!("{}", report.line()));
    assert!(first.contains("Tool `racer` is the first to differ"), "{first}");
}

/// A bug of the core's: the sweep's report shrinks the failing seed's core trace (the
/// `mutants` feature: `cargo test --release -p turnstile-sim --features mutants`).
#[cfg(feature = "mutants")]
#[test]
fn a_core_bug_is_reported_with_its_trace_shrunk() {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("sweeps-shrunk");
    let report = Sweep::new("cancel flag")
        .ignore_environment()
        .mutant("cancel_flag")
        .seeds(3)
        .determinism(0)
        .out(&dir)
        .run();
    let first = report.failures.first().unwrap_or_else(|| panic!("{}", report.line()));
    assert!(first.violations[0].starts_with("the core's trace fails replay"), "{first:?}");
    let min = dir.join(format!("seed-{}.min.jsonl", first.seed));
    assert!(first.shrunk.starts_with("shrunk to "), "{}", first.shrunk);
    assert!(first.shrunk.contains(&min.display().to_string()), "{}", first.shrunk);
    let shrunk = turnstile_core::Trace::parse(&std::fs::read_to_string(&min).expect("written"))
        .expect("a core trace");
    let full = std::fs::read_to_string(first.trace.as_ref().expect("the trace")).expect("read");
    assert!(shrunk.lines.len() < full.lines().count() - 1, "{} lines", shrunk.lines.len());
}
