//! The recorded traces under `traces/`: every one replays with every invariant checked after
//! every input and its outputs compared; the scenario traces are regenerated from
//! `scenarios.rs` and must match the committed files (set `TURNSTILE_BLESS=1` to rewrite them
//! after a deliberate change, then review the diff); malformed traces fail with their line.

use std::fs;
use std::path::{Path, PathBuf};

use turnstile_core::trace::Trace;
use turnstile_core::{bless, replay};
use turnstile_tests::harness::short;
use turnstile_tests::scenarios;

fn traces_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("traces")
}

fn trace_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).expect("traces directory") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            out.extend(trace_files(&path));
        } else if path.extension().is_some_and(|e| e == "jsonl") {
            out.push(path);
        }
    }
    out.sort();
    out
}

#[test]
fn scenario_traces_are_current() {
    let bless_mode = std::env::var_os("TURNSTILE_BLESS").is_some();
    let mut stale = Vec::new();
    for sc in scenarios::all() {
        let blessed = bless(&sc.trace()).unwrap_or_else(|e| panic!("scenario {}: {e}", sc.name));
        let text = blessed.to_jsonl();
        let path = traces_dir().join(format!("{}.jsonl", sc.name));
        if bless_mode {
            fs::write(&path, &text).expect("write trace");
        } else if fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
            stale.push(sc.name);
        }
    }
    assert!(
        stale.is_empty(),
        "these traces differ from what the core now produces: {stale:?}\n\
         if the change is deliberate: TURNSTILE_BLESS=1 cargo test -p turnstile-tests --test traces, then review git diff"
    );
}

#[test]
fn every_trace_replays_with_its_expected_outputs_and_outcomes() {
    let files = trace_files(&traces_dir());
    assert!(files.len() >= 45, "expected at least 45 traces, found {}", files.len());
    for path in files {
        let text = fs::read_to_string(&path).expect("read");
        let trace = Trace::parse(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let report = replay(&trace).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(
            report.compared,
            report.inputs,
            "{}: every line states its expected outputs",
            path.display()
        );
        assert!(
            trace.header.rule.as_deref().is_some_and(|r| !r.is_empty()),
            "{}: no rule",
            path.display()
        );
        let stem = path.file_stem().and_then(|s| s.to_str()).map(str::to_owned);
        assert_eq!(trace.header.name, stem, "{}: a trace is named after its file", path.display());
    }
}

#[test]
fn a_changed_expectation_is_reported_with_its_line() {
    let sc = scenarios::all()
        .into_iter()
        .find(|s| s.name == "cancel-active-turn-g01")
        .expect("scenario");
    let mut trace = bless(&sc.trace()).expect("bless");
    let (line, l) = trace
        .lines
        .iter_mut()
        .rev()
        .find(|(_, l)| l.expect.as_ref().is_some_and(|e| !e.is_empty()))
        .expect("outputs");
    let line = *line;
    let expect = l.expect.as_mut().expect("expectations");
    expect[0]["kind"]["type"] = serde_json::json!("stopped");
    let err = replay(&trace).expect_err("must differ").to_string();
    assert!(err.starts_with(&format!("line {line}: output 0 differs")), "{err}");
}

#[test]
fn a_wrong_expected_outcome_is_reported() {
    let sc = scenarios::all()
        .into_iter()
        .find(|s| s.name == "cancel-active-turn-g01")
        .expect("scenario");
    let mut trace = sc.trace();
    trace
        .header
        .expect_outcomes
        .as_mut()
        .expect("outcomes")
        .insert(turnstile_core::Seq(3), turnstile_core::Outcome::Failed);
    let err = replay(&trace).expect_err("must differ").to_string();
    assert_eq!(err, "submission 3: expected outcome Failed, got Some(Completed)");
}

#[test]
fn malformed_traces_fail_with_the_line_at_fault() {
    let good = fs::read_to_string(traces_dir().join("cancel-active-turn-g01.jsonl")).expect("read");
    let header = good.lines().next().expect("header");
    let cases = [
        ("", "line 1: empty trace: a header line is required"),
        ("{\"format\":\"x\",\"version\":1}\n", "line 1: header: format is \"x\""),
        (
            "{\"format\":\"turnstile-trace\",\"version\":9}\n",
            "line 1: header: version 9 is not supported",
        ),
    ];
    for (text, want) in cases {
        let err = Trace::parse(text).expect_err("malformed").to_string();
        assert!(err.starts_with(want), "{err}");
    }
    let truncated = format!("{header}\n{{\"at\":0,\"input\":{{\"type\":\"submit\",\"sess");
    assert!(
        Trace::parse(&truncated)
            .expect_err("truncated")
            .to_string()
            .starts_with("line 2: EOF while parsing")
    );
    let unknown_field =
        format!("{header}\n{{\"at\":0,\"input\":{{\"type\":\"shutdown\"}},\"extra\":1}}\n");
    let err = Trace::parse(&unknown_field).expect_err("unknown field").to_string();
    assert!(err.starts_with("line 2: unknown field `extra`"), "{err}");
    let bad_input = format!("{header}\n\n{{\"at\":0,\"input\":{{\"type\":\"launch\"}}}}\n");
    assert!(
        Trace::parse(&bad_input)
            .expect_err("unknown input")
            .to_string()
            .starts_with("line 3: unknown variant `launch`")
    );
}

/// The main scenarios' outputs, one line per input, as insta snapshots.
#[test]
fn main_scenarios_snapshot() {
    for name in [
        "admission-acceptance-order-g16",
        "fold-prefix-at-step-start-g09",
        "cancel-active-turn-g01",
        "cancel-grace-tool-reports-in-time",
        "clear-queue-leaves-active-turn-g07",
        "shutdown-interrupts-everything-g20",
        "turn-end-provider-error-g01",
        "watermark-external-acceptor-g08",
        "retries-one-outcome-g02",
        "refresh-then-retry-with-reset-g21",
        "summary-pause-resume-before-queue-g25",
        "summary-cancel-no-continuation-g03",
        "subagent-result-to-parent",
        "stream-invalid-json-and-unknown-tool-never-run",
    ] {
        let sc = scenarios::all().into_iter().find(|s| s.name == name).expect("scenario");
        let mut engine = turnstile_core::Engine::new((sc.config)(), (sc.start)()).expect("engine");
        let mut steps = Vec::new();
        for (_, l) in sc.trace().lines {
            let input = serde_json::to_value(&l.input).expect("json")["type"]
                .as_str()
                .unwrap_or("?")
                .to_owned();
            engine.handle(l.at, l.input).expect("valid");
            let mut outs = Vec::new();
            while let Some(o) = engine.poll_output() {
                outs.push(short(&o.kind));
            }
            steps.push(serde_json::json!({ "at": l.at.0, "input": input, "outputs": outs }));
        }
        insta::assert_yaml_snapshot!(name, steps);
    }
}

/// The JSON Schema beside the format doc names every input and output type the code has.
#[test]
fn the_schema_lists_every_input_and_output_type() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/trace-format.schema.json");
    let schema: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(path).expect("schema")).expect("json");
    let inputs: Vec<&str> = schema["$defs"]["Input"]["oneOf"]
        .as_array()
        .expect("oneOf")
        .iter()
        .map(|v| v["properties"]["type"]["const"].as_str().expect("const"))
        .collect();
    let mut seen = std::collections::BTreeSet::new();
    let mut outputs = std::collections::BTreeSet::new();
    for path in trace_files(&traces_dir()) {
        let trace = Trace::parse(&fs::read_to_string(&path).expect("read")).expect("parse");
        for (_, l) in &trace.lines {
            seen.insert(
                serde_json::to_value(&l.input).expect("json")["type"]
                    .as_str()
                    .expect("type")
                    .to_owned(),
            );
            for o in l.expect.iter().flatten() {
                outputs.insert(o["kind"]["type"].as_str().expect("type").to_owned());
            }
        }
    }
    for t in &seen {
        assert!(inputs.contains(&t.as_str()), "input type {t} is missing from the schema");
    }
    assert_eq!(inputs.len(), 14, "the schema lists {inputs:?}");
    let out_enum: Vec<&str> = schema["$defs"]["Output"]["properties"]["kind"]["properties"]["type"]
        ["enum"]
        .as_array()
        .expect("enum")
        .iter()
        .map(|v| v.as_str().expect("str"))
        .collect();
    for t in &outputs {
        assert!(out_enum.contains(&t.as_str()), "output type {t} is missing from the schema");
    }
}
