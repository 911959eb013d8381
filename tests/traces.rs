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
    let cases = [
        ("", "line 1: empty trace: a header line is required"),
        ("{\"format\":\"x\",\"version\":1}\n", "line 1: header: format is \"x\""),
        (
            "{\"format\":\"turnstile-trace\",\"version\":9}\n",
            "line 1: header: version 9 is not supported",
        ),
        ("{\"format\":\"turnstile-trace\"}\n", "line 1: field \"version\" is missing"),
    ];
    for (text, want) in cases {
        let err = Trace::parse(text).expect_err("malformed").to_string();
        assert!(err.starts_with(want), "{err}");
    }
}

const HEADER: &str = r#"{"format":"turnstile-trace","version":1}"#;

/// Every kind of mistake in a trace is refused with its line and the path of the field, never
/// silently ignored (a misspelt field would otherwise make the trace mean something else, and
/// `bless` would delete it).
#[test]
fn every_misspelling_and_wrong_type_is_refused_with_its_path() {
    let step = r#"{"session":"s","seq":1,"turn":1,"step":0,"attempt":0}"#;
    let call = r#"{"session":"s","seq":1,"turn":1,"step":0,"call":"c1"}"#;
    let lines: &[(&str, &str)] = &[
        // The header, and every object under it.
        (
            r#"{"format":"turnstile-trace","version":1,"nmae":"x"}"#,
            r#"line 1: field "nmae" is not a known field; known here: config, expect_outcomes, format, name, origin, rule, start, version"#,
        ),
        (
            r#"{"format":"turnstile-trace","version":1,"config":{"cancel_grace":5}}"#,
            r#"line 1: field "config.cancel_grace" is not a known field"#,
        ),
        (
            r#"{"format":"turnstile-trace","version":1,"config":{"cancel_grace_ms":"5 s"}}"#,
            r#"line 1: field "config.cancel_grace_ms": expected an unsigned integer, found "5 s""#,
        ),
        (
            r#"{"format":"turnstile-trace","version":1,"config":{"acceptor":"them"}}"#,
            r#"line 1: field "config.acceptor": expected one of "core", "external", found "them""#,
        ),
        (
            r#"{"format":"turnstile-trace","version":1,"start":{"nextseq":4}}"#,
            r#"line 1: field "start.nextseq" is not a known field"#,
        ),
        (
            r#"{"format":"turnstile-trace","version":1,"start":{"runs":[{"run_id":"r","session":"s","seq":1,"fingerprint":"ab","outcome":"completed","extra":1}]}}"#,
            r#"line 1: field "start.runs[0].extra" is not a known field"#,
        ),
        (
            r#"{"format":"turnstile-trace","version":1,"expect_outcomes":{"1":"complete"}}"#,
            r#"line 1: field "expect_outcomes.1": expected one of"#,
        ),
        (
            r#"{"format":"turnstile-trace","version":1,"expect_outcomes":{"one":"completed"}}"#,
            r#"line 1: field "expect_outcomes.one" is not a sequence number"#,
        ),
        // A line and its input.
        (
            r#"{"at":"soon","input":{"type":"shutdown"}}"#,
            r#"line 2: field "at": expected an unsigned integer, found "soon""#,
        ),
        (
            r#"{"at":0,"inptu":{"type":"shutdown"}}"#,
            r#"line 2: field "inptu" is not a known field"#,
        ),
        (r#"{"at":0}"#, r#"line 2: field "input" is missing"#),
        (
            r#"{"at":0,"input":{"type":"shutdown"},"expected":[]}"#,
            r#"line 2: field "expected" is not a known field; known here: at, expect, expect_projection, input"#,
        ),
        (
            r#"{"at":0,"input":{"type":"shutdown","now":1}}"#,
            r#"line 2: field "input.now" is not a known field"#,
        ),
        (
            r#"{"at":0,"input":{"type":"launch"}}"#,
            r#"line 2: field "input.type": expected one of "submit", "cancel""#,
        ),
        (r#"{"at":0,"input":{"session":"s"}}"#, r#"line 2: field "input.type" is missing"#),
        (
            r#"{"at":0,"input":{"type":"cancel","session":"s","upto":3}}"#,
            r#"line 2: field "input.upto" is not a known field; known here: session, type, up_to"#,
        ),
        (
            r#"{"at":0,"input":{"type":"cancel","session":"s","up_to":"x"}}"#,
            r#"line 2: field "input.up_to": expected an unsigned integer or null, found "x""#,
        ),
        (
            r#"{"at":0,"input":{"type":"submit","session":"s","prompt":"p","runid":"r"}}"#,
            r#"line 2: field "input.runid" is not a known field"#,
        ),
        (
            r#"{"at":0,"input":{"type":"submit","session":"s","prompt":"p","mode":"folded"}}"#,
            r#"line 2: field "input.mode": expected "#,
        ),
        (
            r#"{"at":0,"input":{"type":"submit","session":"s","prompt":"p","attachments":[{"name":"a","media_type":"text/plain","content":"x","size":1}]}}"#,
            r#"line 2: field "input.attachments[0].size" is not a known field"#,
        ),
        (
            r#"{"at":0,"input":{"type":"submit","session":"s"}}"#,
            r#"line 2: field "input.prompt" is missing"#,
        ),
        (
            r#"{"at":0,"input":{"type":"prepared","session":"s","seq":1,"setup":{"tools":[{"name":"ls","abortable":false}]}}}"#,
            r#"line 2: field "input.setup.tools[0].abortable" is not a known field"#,
        ),
        (
            r#"{"at":0,"input":{"type":"prepared","session":"s","seq":1,"setup":{"tools":[{"name":"ls","on_abort":"wait"}]}}}"#,
            r#"line 2: field "input.setup.tools[0].on_abort": expected one of "drop", "finish", "finish_once_started", found "wait""#,
        ),
        (
            r#"{"at":0,"input":{"type":"prepared","session":"s","seq":1,"setup":{"window":5}}}"#,
            r#"line 2: field "input.setup.window" is not a known field"#,
        ),
        (
            &format!(
                r#"{{"at":0,"input":{{"type":"step","step":{step},"event":{{"kind":"text","text":"x"}}}}}}"#
            ),
            r#"line 2: field "input.event.kind": expected one of"#,
        ),
        (
            &format!(
                r#"{{"at":0,"input":{{"type":"step","step":{step},"event":{{"kind":"finished","reason":"stop","usage":{{"input":5}}}}}}}}"#
            ),
            r#"line 2: field "input.event.usage.input" is not a known field"#,
        ),
        (
            &format!(
                r#"{{"at":0,"input":{{"type":"step","step":{step},"event":{{"kind":"failed","error":{{"class":"provider","message":"x","retry_after_secs":3}}}}}}}}"#
            ),
            r#"line 2: field "input.event.error.retry_after_secs" is not a known field"#,
        ),
        (
            r#"{"at":0,"input":{"type":"step","step":{"session":"s","seq":1,"turn":1,"step":0,"atempt":0},"event":{"kind":"reasoning_start"}}}"#,
            r#"line 2: field "input.step.atempt" is not a known field"#,
        ),
        (
            &format!(
                r#"{{"at":0,"input":{{"type":"tool_result","call":{call},"result":{{"content":"x","error":true}}}}}}"#
            ),
            r#"line 2: field "input.result.error" is not a known field"#,
        ),
        (
            r#"{"at":0,"input":{"type":"tool_result","call":{"session":"s","seq":1,"turn":1,"step":0,"id":"c1"},"result":{"content":"x"}}}"#,
            r#"line 2: field "input.call.id" is not a known field"#,
        ),
        (
            r#"{"at":0,"input":{"type":"credentials_refreshed","attempt":{"of":"step","session":"s","seq":1,"turn":1,"step":0,"attempt":0,"try":1},"ok":true}}"#,
            r#"line 2: field "input.attempt.try" is not a known field"#,
        ),
        (
            r#"{"at":0,"input":{"type":"timer_fired","timer":"t1"}}"#,
            r#"line 2: field "input.timer": expected an unsigned integer, found "t1""#,
        ),
        // The expected outputs and projection are checked too.
        (
            r#"{"at":0,"input":{"type":"shutdown"},"expect":[{"no":0,"kind":{"type":"stoped"}}]}"#,
            r#"line 2: field "expect[0].kind.type": expected one of"#,
        ),
        (
            r#"{"at":0,"input":{"type":"shutdown"},"expect":[{"no":0,"kind":{"type":"stopped"},"extra":1}]}"#,
            r#"line 2: field "expect[0].extra" is not a known field"#,
        ),
        (
            r#"{"at":0,"input":{"type":"shutdown"},"expect":[{"no":0,"kind":{"type":"reply","reply":"accepted","session":"s","seq":1,"mode":"fold","sequence":1}}]}"#,
            r#"line 2: field "expect[0].kind.sequence" is not a known field"#,
        ),
        (
            r#"{"at":0,"input":{"type":"shutdown"},"expect":[{"no":0,"kind":{"type":"store","op":"flush","session":"s","now":true}}]}"#,
            r#"line 2: field "expect[0].kind.now" is not a known field"#,
        ),
        (
            r#"{"at":0,"input":{"type":"shutdown"},"expect_projection":{"stoped":true}}"#,
            r#"line 2: field "expect_projection.stoped" is not a known field"#,
        ),
    ];
    for (line, want) in lines {
        let text = if line.contains("\"format\"") {
            format!("{line}\n")
        } else {
            format!("{HEADER}\n{line}\n")
        };
        let err = Trace::parse(&text).expect_err(line).to_string();
        assert!(err.starts_with(want), "{line}\n  got:  {err}\n  want: {want}");
    }
}

#[test]
fn syntax_errors_and_invalid_utf8_name_their_line_and_column() {
    let truncated = format!("{HEADER}\n\n{{\"at\":0,\"input\":{{\"type\":\"submit\",\"sess");
    let err = Trace::parse(&truncated).expect_err("truncated").to_string();
    assert_eq!(err, "line 3, column 38: EOF while parsing a string");
    let broken = format!("{HEADER}\n{{\"at\":0,,\"input\":{{\"type\":\"shutdown\"}}}}\n");
    assert_eq!(
        Trace::parse(&broken).expect_err("syntax").to_string(),
        "line 2, column 9: key must be a string"
    );
    let mut bytes = format!(
        "{HEADER}\n{{\"at\":0,\"input\":{{\"type\":\"submit\",\"session\":\"s\",\"prompt\":\""
    )
    .into_bytes();
    bytes.extend_from_slice(&[0xff, 0xfe]);
    bytes.extend_from_slice(b"\"}}\n");
    let err = Trace::parse_bytes(&bytes).expect_err("utf-8").to_string();
    assert_eq!(err, "line 2, column 58: invalid UTF-8");
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

fn schema_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../core/trace-format.schema.json")
}

/// The committed JSON Schema is the one generated from the types (so the schema and the
/// parser cannot drift); `TURNSTILE_BLESS=1` rewrites it.
#[test]
fn the_committed_schema_is_generated_from_the_types() {
    let mut text =
        serde_json::to_string_pretty(&turnstile_core::trace::schema::generate()).expect("json");
    text.push('\n');
    if std::env::var_os("TURNSTILE_BLESS").is_some() {
        fs::write(schema_path(), &text).expect("write the schema");
    }
    assert!(
        fs::read_to_string(schema_path()).ok().as_deref() == Some(text.as_str()),
        "core/trace-format.schema.json is stale; regenerate it with\n  \
         TURNSTILE_BLESS=1 cargo test -p turnstile-tests --test traces\nthen review the diff"
    );
}

/// The reader walks the schema itself: every keyword the schema uses is one it implements.
#[test]
fn the_schema_uses_only_keywords_the_reader_implements() {
    fn walk(v: &serde_json::Value, bad: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(map) => {
                for (k, sub) in map {
                    if !turnstile_core::trace::schema::KEYWORDS.contains(&k.as_str()) {
                        bad.push(k.clone());
                    }
                    match k.as_str() {
                        "properties" | "$defs" => {
                            sub.as_object().into_iter().flatten().for_each(|(_, s)| walk(s, bad))
                        }
                        "patternProperties" => {
                            for (p, s) in sub.as_object().into_iter().flatten() {
                                if !turnstile_core::trace::schema::PATTERNS.contains(&p.as_str()) {
                                    bad.push(format!("pattern {p}"));
                                }
                                walk(s, bad);
                            }
                        }
                        "enum" | "const" | "default" => {}
                        _ => walk(sub, bad),
                    }
                }
            }
            serde_json::Value::Array(items) => items.iter().for_each(|s| walk(s, bad)),
            _ => {}
        }
    }
    let mut bad = Vec::new();
    walk(&turnstile_core::trace::schema::generate(), &mut bad);
    bad.sort();
    bad.dedup();
    assert!(bad.is_empty(), "keywords the trace reader does not implement: {bad:?}");
}

/// Every object the schema describes refuses unknown fields, and it names every input and
/// output type the committed traces use.
#[test]
fn the_schema_refuses_unknown_fields_and_lists_every_input_and_output_type() {
    let schema = turnstile_core::trace::schema::generate();
    fn objects(v: &serde_json::Value, at: &str, open: &mut Vec<String>) {
        if let Some(map) = v.as_object() {
            if map.contains_key("properties")
                && map.get("additionalProperties") != Some(&false.into())
            {
                open.push(at.to_owned());
            }
            for (k, sub) in map {
                objects(sub, &format!("{at}/{k}"), open);
            }
        } else if let Some(items) = v.as_array() {
            for (i, sub) in items.iter().enumerate() {
                objects(sub, &format!("{at}/{i}"), open);
            }
        }
    }
    let mut open = Vec::new();
    objects(&schema, "", &mut open);
    // The header's `origin` is free-form JSON by design; nothing else is open.
    assert!(open.is_empty(), "objects that accept unknown fields: {open:?}");
    // The tag of each variant: on the variant, or on every variant of a nested union (a
    // newtype variant around a tagged enum, like `reply` and `store`).
    fn tag(v: &serde_json::Value, key: &str) -> String {
        match v["properties"][key]["const"].as_str() {
            Some(t) => t.to_owned(),
            None => tag(&v["oneOf"][0], key),
        }
    }
    let consts = |def: &str, key: &str| -> Vec<String> {
        schema["$defs"][def]["oneOf"]
            .as_array()
            .unwrap_or_else(|| panic!("{def} is a union"))
            .iter()
            .map(|v| tag(v, key))
            .collect()
    };
    let inputs = consts("Input", "type");
    let outputs = consts("OutputKind", "type");
    assert_eq!(inputs.len(), 15, "the schema lists {inputs:?}");
    for path in trace_files(&traces_dir()) {
        let trace = Trace::parse(&fs::read_to_string(&path).expect("read")).expect("parse");
        for (_, l) in &trace.lines {
            let t = serde_json::to_value(&l.input).expect("json")["type"].clone();
            assert!(inputs.iter().any(|i| t == i.as_str()), "input type {t} is not in the schema");
            for o in l.expect.iter().flatten() {
                let t = &o["kind"]["type"];
                assert!(outputs.iter().any(|i| t == i.as_str()), "output {t} is not in the schema");
            }
        }
    }
}
