//! The real `turnstile-driver` binary, as a host in another language runs it: every recorded
//! trace piped through it gives the outputs the Rust core gives, line for line; bad lines are
//! answered and the engine goes on; a failed engine ends the process with status 70; the flight
//! recording replays.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;
use turnstile_core::trace::output_value;
use turnstile_core::{Engine, Trace};

fn driver(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_turnstile-driver"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the driver");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin)
        .expect("write");
    child.wait_with_output().expect("wait")
}

fn replies(out: &Output) -> Vec<Value> {
    String::from_utf8(out.stdout.clone())
        .expect("utf-8")
        .lines()
        .map(|l| serde_json::from_str(l).expect("every reply is one JSON line"))
        .collect()
}

/// Every trace under `tests/traces/`, its subfolders included.
fn traces() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in fs::read_dir(dir).expect("a trace folder") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|x| x == "jsonl") {
                out.push(path);
            }
        }
    }
    let mut paths = Vec::new();
    walk(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/traces"),
        &mut paths,
    );
    paths.sort();
    assert!(
        paths.len() > 90,
        "the recorded traces are where they should be"
    );
    assert!(
        paths
            .iter()
            .any(|p| p.to_string_lossy().contains("regressions"))
    );
    paths
}

/// The outputs of every line, from the Rust core directly.
fn rust_outputs(trace: &Trace) -> Vec<Vec<Value>> {
    let mut engine =
        Engine::new(trace.header.config.clone(), trace.header.start.clone()).expect("start");
    trace
        .lines
        .iter()
        .map(|(_, l)| {
            engine
                .handle(l.at, l.input.clone())
                .expect("a recorded trace replays");
            std::iter::from_fn(|| engine.poll_output())
                .map(|o| output_value(&o))
                .collect()
        })
        .collect()
}

#[test]
fn every_trace_replays_through_the_driver_as_in_the_rust_core() {
    for path in traces() {
        let name = path
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        let bytes = fs::read(&path).expect("read");
        let trace = Trace::parse_bytes(&bytes).expect("parse");
        let out = driver(&[], &bytes);
        assert!(out.status.success(), "{name}: exit {:?}", out.status);
        let replies = replies(&out);
        assert_eq!(replies[0]["type"], "ready", "{name}");
        let expected = rust_outputs(&trace);
        assert_eq!(
            replies.len(),
            trace.lines.len() + 1,
            "{name}: one reply per line"
        );
        for ((reply, (line, _)), want) in replies[1..].iter().zip(&trace.lines).zip(&expected) {
            assert_eq!(reply["type"], "outputs", "{name} line {line}: {reply}");
            assert_eq!(reply["line"], *line, "{name}: replies name the file's line");
            assert_eq!(
                reply["outputs"].as_array().expect("outputs"),
                want,
                "{name} line {line}: the driver and the core differ"
            );
        }
    }
}

const HEADER: &str = r#"{"format":"turnstile-trace","version":1}"#;

#[test]
fn a_bad_line_is_answered_with_its_field_and_the_engine_goes_on() {
    let input = [
        HEADER,
        r#"{"at":0,"input":{"type":"submit","session":"s","prompt":"a","runid":"r"}}"#,
        "[1, 2",
        r#"{"at":10,"input":{"type":"submit","session":"s","prompt":"a","run_id":"r"}}"#,
        r#"{"at":5,"input":{"type":"cancel","session":"s"}}"#,
        r#"{"at":10,"input":{"type":"cancel","session":"s"}}"#,
    ]
    .join("\n");
    let out = driver(&[], input.as_bytes());
    assert!(out.status.success());
    let r = replies(&out);
    assert_eq!(r.len(), 6);
    assert_eq!(r[1]["type"], "error");
    assert_eq!(r[1]["line"], 2);
    assert_eq!(r[1]["field"], "input.runid");
    assert!(
        r[1]["message"]
            .as_str()
            .is_some_and(|m| m.contains("not a known field")),
        "{}",
        r[1]
    );
    assert_eq!(r[2]["type"], "error");
    assert!(
        r[2]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("column ")),
        "{}",
        r[2]
    );
    assert_eq!(r[3]["type"], "outputs");
    assert_eq!(r[3]["outputs"][0]["kind"]["run_id"], "r");
    // Host misuse is refused and changes nothing: the cancel after it still finds the run.
    assert_eq!(r[4]["type"], "refused");
    assert_eq!(r[4]["code"], "time_went_backwards");
    assert_eq!(r[5]["type"], "outputs");
    assert!(
        r[5]["outputs"].to_string().contains("cancelled"),
        "{}",
        r[5]
    );
}

#[test]
fn an_unusable_header_ends_with_status_2() {
    let out = driver(&[], br#"{"format":"turnstile-trace","version":2}"#);
    assert_eq!(out.status.code(), Some(2));
    let r = replies(&out);
    assert_eq!(r[0]["type"], "error");
    assert!(
        r[0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("version 2")),
        "{}",
        r[0]
    );
}

#[test]
fn a_failed_engine_ends_with_status_70_after_saying_why() {
    let input = [
        r#"{"format":"turnstile-trace","version":1,"start":{"next_seq":18446744073709551614}}"#,
        r#"{"at":0,"input":{"type":"submit","session":"s","prompt":"a"}}"#,
        r#"{"at":0,"input":{"type":"submit","session":"s","prompt":"b"}}"#,
        r#"{"at":0,"input":{"type":"submit","session":"s","prompt":"c"}}"#,
    ]
    .join("\n");
    let out = driver(&[], input.as_bytes());
    assert_eq!(out.status.code(), Some(70));
    let r = replies(&out);
    assert_eq!(r.len(), 3, "nothing after the failure is read");
    assert_eq!(r[2]["type"], "failed");
    assert_eq!(r[2]["code"], "exhausted");
}

#[test]
fn a_line_whose_expectation_differs_is_a_mismatch() {
    let input = [
        HEADER,
        r#"{"at":0,"input":{"type":"submit","session":"s","prompt":"a"},"expect":[]}"#,
    ]
    .join("\n");
    let r = replies(&driver(&[], input.as_bytes()));
    assert_eq!(r[1]["type"], "mismatch");
    assert_eq!(r[1]["index"], 0);
    assert_eq!(r[1]["outputs"][0]["kind"]["type"], "reply");
}

#[test]
fn the_flight_recording_replays_with_the_same_outputs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let record = dir.path().join("flight.jsonl");
    let path = traces()
        .into_iter()
        .find(|p| p.ends_with("cancel-active-turn-g01.jsonl"));
    let path = path.expect("the trace");
    let bytes = fs::read(&path).expect("read");
    let out = driver(&["--record", record.to_str().expect("utf-8")], &bytes);
    assert!(out.status.success());
    let recorded = Trace::parse_bytes(&fs::read(&record).expect("the recording")).expect("parse");
    let original = Trace::parse_bytes(&bytes).expect("parse");
    assert_eq!(recorded.lines.len(), original.lines.len());
    let a = turnstile_core::replay(&recorded).expect("the recording replays");
    let b = turnstile_core::replay(&original).expect("the trace replays");
    assert_eq!(a.output_hash, b.output_hash);
    assert!(
        a.compared == recorded.lines.len(),
        "every recorded line carries its outputs"
    );
}

#[test]
fn help_explains_the_protocol_with_examples() {
    let out = Command::new(env!("CARGO_BIN_EXE_turnstile-driver"))
        .arg("--help")
        .output()
        .expect("run");
    let text = String::from_utf8(out.stdout).expect("utf-8");
    for word in [
        "JSON Lines",
        "ready",
        "outputs",
        "refused",
        "failed",
        "--record",
        "Examples:",
    ] {
        assert!(text.contains(word), "--help mentions {word}:\n{text}");
    }
}

/// The fenced block after an HTML comment marker in `docs/embedding.md`.
fn doc_block(doc: &str, marker: &str) -> String {
    let start = doc
        .find(marker)
        .unwrap_or_else(|| panic!("docs/embedding.md has {marker}"));
    let rest = &doc[start..];
    let open = rest
        .find("```json\n")
        .expect("a json block after the marker")
        + "```json\n".len();
    let len = rest[open..].find("```").expect("the block ends");
    rest[open..open + len].to_owned()
}

#[test]
fn the_worked_session_in_the_docs_is_what_the_driver_answers() {
    let doc =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/embedding.md"))
            .expect("docs/embedding.md");
    let input = doc_block(&doc, "<!-- driver-session:in -->");
    let expected = doc_block(&doc, "<!-- driver-session:out -->");
    let out = driver(&[], input.as_bytes());
    assert!(out.status.success());
    let actual = String::from_utf8(out.stdout).expect("utf-8");
    assert_eq!(
        actual, expected,
        "docs/embedding.md's worked session is stale"
    );
}
