//! Events per second through the engine for an admission and cancel heavy mix and for a
//! streaming heavy mix (text deltas, reasoning, tool calls), each beside a baseline measured in
//! the same run: the least any per-session state machine must do per
//! event (look the session up in a hash map, update a counter, push one output).
//!
//! The streaming mix also runs with the stream watchdog off (SPEC 4.5; on is the default), on the
//! same inputs in the same run, with the outputs per input of each: the watchdog costs one
//! `SetTimer` and one `CancelTimer` per attempt and nothing per content event.
//!
//! Run: `cargo bench -p turnstile-core --bench lifecycle`. The input sequence is recorded once
//! by a scripted host (which answers every request the engine makes), then replayed into fresh
//! engines, so only `handle` plus draining `poll_output` is timed.

// The core's clippy.toml forbids clocks; a benchmark is the one place that must read one.
#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

use std::collections::HashMap;
use std::hint::black_box;
use std::time::{Duration, Instant};

use turnstile_core::{
    CallId, Config, Engine, FinishReason, Input, Millis, Mode, OutputKind, RunId, SessionId, Setup,
    Start, StepEvent, Submit, ToolOutput, Usage,
};

const SESSIONS: u64 = 64;
const ROUNDS: u64 = 4_000;

/// A deterministic mix: per round, a few submissions to a session (some with RunIds, some
/// folding), preparations, and then one of cancel, cancel_run, clear_queue or a normal finish.
fn record() -> Vec<(Millis, Input)> {
    let mut engine = Engine::new(Config::default(), Start::default()).expect("start");
    let mut inputs = Vec::new();
    let feed = |engine: &mut Engine,
                inputs: &mut Vec<(Millis, Input)>,
                now: Millis,
                first: Input| {
        let mut queue = vec![first];
        while let Some(input) = queue.pop() {
            inputs.push((now, input.clone()));
            engine.handle(now, input).expect("valid");
            while let Some(o) = engine.poll_output() {
                match o.kind {
                    OutputKind::Prepare { session, seq } => {
                        queue.push(Input::Prepared { session, seq, setup: Default::default() })
                    }
                    OutputKind::StartStep { step } if step.seq.0 % 3 == 0 => {
                        queue.push(Input::Step {
                            step,
                            event: StepEvent::Finished { reason: FinishReason::Stop, usage: None },
                        });
                    }
                    _ => {}
                }
            }
        }
    };
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for round in 0..ROUNDS {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let now = Millis(round);
        let session = SessionId::new(format!("session-{}", x % SESSIONS));
        for k in 0..3 {
            let mut s = Submit {
                session: session.clone(),
                ..Submit::new("", format!("prompt {round} {k}"))
            };
            if k == 0 {
                s.run_id = Some(RunId::new(format!("run-{round}")));
            } else if k == 2 {
                s.mode = Some(Mode::OwnTurn);
            }
            feed(&mut engine, &mut inputs, now, Input::Submit(s));
        }
        let closing = match x % 4 {
            0 => Input::Cancel { session: session.clone(), up_to: None },
            1 => Input::CancelRun { run_id: RunId::new(format!("run-{round}")) },
            2 => Input::ClearQueue { session: session.clone() },
            _ => Input::Cancel { session: SessionId::new("idle"), up_to: None },
        };
        feed(&mut engine, &mut inputs, now, closing);
    }
    inputs
}

/// A streaming heavy mix: every turn streams 3 steps of 24 text deltas and 2 tool calls each
/// (a reasoning section on the first), runs the tools, and ends; 16 sessions take turns.
fn record_streaming() -> Vec<(Millis, Input)> {
    let setup = Setup::with_tools(&["ls", "grep"]);
    let mut engine = Engine::new(Config::default(), Start::default()).expect("start");
    let mut inputs = Vec::new();
    let send =
        |engine: &mut Engine, inputs: &mut Vec<(Millis, Input)>, input: Input| -> Vec<OutputKind> {
            inputs.push((Millis(0), input.clone()));
            engine.handle(Millis(0), input).expect("valid");
            std::iter::from_fn(|| engine.poll_output()).map(|o| o.kind).collect()
        };
    for turn in 0..600u32 {
        let session = format!("stream-{}", turn % 16);
        let submit =
            Input::Submit(Submit::new(&session, format!("task {turn}")).with_mode(Mode::OwnTurn));
        let mut pending: Vec<OutputKind> = send(&mut engine, &mut inputs, submit);
        while let Some(out) = pending.pop() {
            let next: Vec<Input> = match out {
                OutputKind::Prepare { session, seq } => {
                    vec![Input::Prepared { session, seq, setup: setup.clone() }]
                }
                OutputKind::StartStep { step } => {
                    let ev = |event| Input::Step { step: step.clone(), event };
                    let mut evs = Vec::new();
                    if step.step == 0 {
                        evs.push(ev(StepEvent::ReasoningStart));
                        evs.push(ev(StepEvent::ReasoningDelta { text: "thinking it over".into() }));
                        evs.push(ev(StepEvent::ReasoningEnd { signature: Some("sig".into()) }));
                    }
                    for d in 0..24 {
                        evs.push(ev(StepEvent::TextDelta { text: format!("token {d} ") }));
                    }
                    let last = step.step == 2;
                    if !last {
                        for c in 0..2 {
                            let id = CallId::new(format!("call-{}-{c}", step.step));
                            evs.push(ev(StepEvent::ToolInputStart {
                                id: id.clone(),
                                name: "ls".into(),
                            }));
                            evs.push(ev(StepEvent::ToolCall {
                                id,
                                name: "ls".into(),
                                input: r#"{"path":"."}"#.into(),
                            }));
                        }
                    }
                    let reason = if last { FinishReason::Stop } else { FinishReason::ToolCalls };
                    let usage = Some(Usage {
                        input_tokens: 1_000,
                        output_tokens: 50,
                        cost_micros: 3,
                        ..Usage::default()
                    });
                    evs.push(ev(StepEvent::Finished { reason, usage }));
                    evs
                }
                OutputKind::RunTool { call, .. } => {
                    vec![Input::ToolResult { call, result: ToolOutput::ok("a.rs b.rs") }]
                }
                _ => Vec::new(),
            };
            for input in next {
                let mut outs = send(&mut engine, &mut inputs, input);
                outs.reverse();
                pending.extend(outs);
            }
        }
    }
    inputs
}

fn engine_run(inputs: &[(Millis, Input)]) -> u64 {
    engine_run_with(&Config::default(), inputs)
}

fn engine_run_with(config: &Config, inputs: &[(Millis, Input)]) -> u64 {
    let mut engine = Engine::new(config.clone(), Start::default()).expect("start");
    let mut outputs = 0u64;
    for (now, input) in inputs {
        engine.handle(*now, input.clone()).expect("valid");
        while let Some(o) = engine.poll_output() {
            outputs += black_box(o).no & 1;
        }
    }
    outputs
}

/// The least a per-session machine does per event: find the session, count, emit one output.
fn baseline_run(inputs: &[(Millis, Input)]) -> u64 {
    let mut sessions: HashMap<String, u64> = HashMap::new();
    let mut outputs: Vec<u64> = Vec::with_capacity(inputs.len());
    for (_, input) in inputs {
        let input = input.clone();
        let key = match &input {
            Input::Submit(s) => s.session.as_str(),
            Input::Cancel { session, .. }
            | Input::ClearQueue { session }
            | Input::Prepared { session, .. } => session.as_str(),
            Input::CancelRun { run_id } => run_id.as_str(),
            Input::Step { step, .. } => step.session.as_str(),
            _ => "other",
        };
        // Allocate a key only for a new session, as a real machine would.
        let count = match sessions.get_mut(key) {
            Some(c) => {
                *c += 1;
                *c
            }
            None => {
                sessions.insert(key.to_owned(), 1);
                1
            }
        };
        outputs.push(count);
        black_box(&input);
    }
    black_box(outputs.len() as u64)
}

/// Best of `reps` runs: the least disturbed by the shared machine.
fn best(reps: u32, f: impl Fn() -> u64) -> Duration {
    (0..reps)
        .map(|_| {
            let t = Instant::now();
            black_box(f());
            t.elapsed()
        })
        .min()
        .unwrap_or_default()
}

/// Prints one mix's figures: engine and baseline, interleaved so both see the same load.
fn measure(name: &str, inputs: &[(Millis, Input)], reps: u32) {
    let n = inputs.len() as f64;
    let (mut engine_best, mut base_best) = (Duration::MAX, Duration::MAX);
    for _ in 0..reps.min(3) {
        engine_best = engine_best.min(best(reps, || engine_run(inputs)));
        base_best = base_best.min(best(reps, || baseline_run(inputs)));
    }
    let engine_rate = n / engine_best.as_secs_f64();
    let base_rate = n / base_best.as_secs_f64();
    println!("{name}: {} events", inputs.len());
    println!("  engine   {:>12.0} events/s  ({:>7.1} ns/event)", engine_rate, 1e9 / engine_rate);
    println!("  baseline {:>12.0} events/s  ({:>7.1} ns/event)", base_rate, 1e9 / base_rate);
    println!("  ratio    {:>12.3} of baseline (target >= 0.200)", engine_rate / base_rate);
}

/// The outputs `inputs` produce with `config`, and how many of them the inputs that carry a
/// step's content events produced.
fn outputs_with(config: &Config, inputs: &[(Millis, Input)]) -> (u64, u64) {
    let mut engine = Engine::new(config.clone(), Start::default()).expect("start");
    let (mut all, mut content) = (0u64, 0u64);
    for (now, input) in inputs {
        let is_content = matches!(
            input,
            Input::Step { event, .. }
                if !matches!(event, StepEvent::Finished { .. } | StepEvent::Failed { .. })
        );
        engine.handle(*now, input.clone()).expect("valid");
        while engine.poll_output().is_some() {
            all += 1;
            content += u64::from(is_content);
        }
    }
    (all, content)
}

/// The streaming mix with the watchdog on (the default) and off, interleaved in one run.
fn measure_watchdog(inputs: &[(Millis, Input)], reps: u32) {
    let n = inputs.len() as f64;
    let off = Config { stream_idle_timeout_ms: 0, ..Config::default() };
    let on = Config::default();
    let (mut on_best, mut off_best) = (Duration::MAX, Duration::MAX);
    for _ in 0..reps.min(3) {
        on_best = on_best.min(best(reps, || engine_run_with(&on, inputs)));
        off_best = off_best.min(best(reps, || engine_run_with(&off, inputs)));
    }
    let (on_rate, off_rate) = (n / on_best.as_secs_f64(), n / off_best.as_secs_f64());
    let ((on_all, on_content), (off_all, off_content)) =
        (outputs_with(&on, inputs), outputs_with(&off, inputs));
    println!("streaming mix, stream watchdog on (300 s) and off: {} events", inputs.len());
    println!("  watchdog on  {on_rate:>12.0} events/s  ({:>7.1} ns/event)", 1e9 / on_rate);
    println!("  watchdog off {off_rate:>12.0} events/s  ({:>7.1} ns/event)", 1e9 / off_rate);
    println!("  on/off       {:>12.3}", on_rate / off_rate);
    println!(
        "  outputs      on {on_all}, off {off_all} (+{}); of content events: on {on_content}, off {off_content}",
        on_all - off_all
    );
}

/// Writes a mix as a trace file (default configuration and start state), the inputs the
/// bindings' benchmark (`bindings/python/bench/bench.py`) feeds the Python package and the
/// process driver.
fn write_trace(path: &std::path::Path, inputs: &[(Millis, Input)]) {
    use turnstile_core::{Trace, TraceHeader, TraceLine};
    let lines = inputs
        .iter()
        .enumerate()
        .map(|(i, (at, input))| {
            let line =
                TraceLine { at: *at, input: input.clone(), expect: None, expect_projection: None };
            (i + 2, line)
        })
        .collect();
    let trace = Trace { header: TraceHeader::new(Config::default(), Start::default()), lines };
    std::fs::write(path, trace.to_jsonl()).expect("write the trace");
    println!("wrote {} ({} inputs)", path.display(), inputs.len());
}

fn main() {
    // TURNSTILE_BENCH_WRITE=DIR writes both mixes as traces into DIR and measures nothing.
    if let Some(dir) = std::env::var_os("TURNSTILE_BENCH_WRITE") {
        let dir = std::path::Path::new(&dir);
        std::fs::create_dir_all(dir).expect("create the folder");
        write_trace(&dir.join("admission.jsonl"), &record());
        write_trace(&dir.join("streaming.jsonl"), &record_streaming());
        return;
    }
    // TURNSTILE_BENCH_REPS=1 makes a quick run for profilers; TURNSTILE_BENCH_MIX=admission or
    // =streaming runs one mix only.
    let reps =
        std::env::var("TURNSTILE_BENCH_REPS").ok().and_then(|r| r.parse().ok()).unwrap_or(15);
    let only = std::env::var("TURNSTILE_BENCH_MIX").unwrap_or_default();
    if only.is_empty() || only == "admission" {
        let name = format!("admission/cancel mix ({SESSIONS} sessions, {ROUNDS} rounds)");
        measure(&name, &record(), reps);
    }
    if only.is_empty() || only == "streaming" {
        let streaming = record_streaming();
        measure("streaming mix (16 sessions, 600 turns of 3 steps)", &streaming, reps);
        measure_watchdog(&streaming, reps);
    }
}
