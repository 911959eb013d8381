//! The trace commands as a user runs them: `replay`, `bless`, `shrink` and `view` on good, bad
//! and missing input, and on a live run's recording folder (`replay --save` to make it a
//! regression trace), with their exit codes and messages.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn sim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_turnstile-sim")).args(args).output().expect("runs")
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn traces() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/traces")
}

fn copy_trace(name: &str, dir: &Path) -> PathBuf {
    let to = dir.join(name);
    std::fs::copy(traces().join(name), &to).expect("copy");
    to
}

#[test]
fn replay_of_a_directory_without_traces_is_an_error() {
    let dir = tempfile::tempdir().expect("dir");
    std::fs::write(dir.path().join("notes.txt"), "not a trace").expect("write");
    let o = sim(&["replay", dir.path().to_str().expect("utf-8")]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.starts_with("turnstile-sim: no trace files (*.jsonl) under "), "{err}");
    let o = sim(&["bless", dir.path().to_str().expect("utf-8")]);
    assert_eq!(o.status.code(), Some(2), "bless refuses it the same way");
}

#[test]
fn a_misspelt_field_is_refused_by_replay_and_bless_and_the_file_is_left_alone() {
    let dir = tempfile::tempdir().expect("dir");
    let path = copy_trace("cancel-run-exactly-one.jsonl", dir.path());
    let good = std::fs::read_to_string(&path).expect("read");
    let bad = good.replacen("\"run_id\":\"rb\"}", "\"runid\":\"rb\"}", 1);
    assert_ne!(bad, good, "the trace has a cancel_run to misspell");
    std::fs::write(&path, &bad).expect("write");
    let p = path.to_str().expect("utf-8");
    for cmd in ["replay", "bless"] {
        let o = sim(&[cmd, p]);
        let (_, err) = text(&o);
        assert_eq!(o.status.code(), Some(2), "{cmd}: {err}");
        assert!(err.contains("field \"input.runid\" is not a known field"), "{cmd}: {err}");
    }
    assert_eq!(std::fs::read_to_string(&path).expect("read"), bad, "bless wrote nothing");
}

#[test]
fn bless_takes_directories_and_rewrites_expected_outputs() {
    let dir = tempfile::tempdir().expect("dir");
    let nested = dir.path().join("nested");
    std::fs::create_dir(&nested).expect("mkdir");
    let path = copy_trace("fold-at-step-zero.jsonl", &nested);
    let stripped: String = std::fs::read_to_string(&path)
        .expect("read")
        .lines()
        .map(|l| {
            let mut v: serde_json::Value = serde_json::from_str(l).expect("json");
            if let Some(o) = v.as_object_mut() {
                o.remove("expect");
            }
            format!("{v}\n")
        })
        .collect();
    std::fs::write(&path, stripped).expect("write");
    let o = sim(&["bless", dir.path().to_str().expect("utf-8")]);
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
    let again = std::fs::read_to_string(&path).expect("read");
    assert!(again.contains("\"expect\":"), "the outputs are back");
    let o = sim(&["replay", path.to_str().expect("utf-8")]);
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
}

#[test]
fn shrink_says_when_a_trace_only_differs_from_its_expected_outputs() {
    let dir = tempfile::tempdir().expect("dir");
    let path = copy_trace("cancel-run-exactly-one.jsonl", dir.path());
    let good = std::fs::read_to_string(&path).expect("read");
    // Expect another session in one output: a mismatch, but no invariant breaks.
    let from = "{\"seq\":2,\"session\":\"s\",\"type\":\"prepare\"}";
    let bad = good.replacen(from, "{\"seq\":2,\"session\":\"t\",\"type\":\"prepare\"}", 1);
    assert_ne!(bad, good);
    std::fs::write(&path, &bad).expect("write");
    let o = sim(&["shrink", path.to_str().expect("utf-8")]);
    let (out, _) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("breaks no invariant, so there is nothing to shrink"), "{out}");
    assert!(out.contains("differs"), "names the mismatch: {out}");
    assert!(out.contains("bless"), "and the way out: {out}");
    let clean = copy_trace("fold-at-step-zero.jsonl", dir.path());
    let o = sim(&["shrink", clean.to_str().expect("utf-8")]);
    assert!(text(&o).0.contains("matches every expected output"), "{:?}", text(&o));
}

#[test]
fn an_unreadable_path_names_the_file_and_what_failed() {
    let o = sim(&["replay", "no/such/trace.jsonl"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        err.starts_with("turnstile-sim: no/such/trace.jsonl: cannot read the trace: "),
        "{err}"
    );
}

fn fixture(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/providers").join(path)
}

#[test]
fn decode_prints_the_core_events_of_a_recorded_body() {
    let body =
        fixture("openai-chat/TestOpenAICommon__openai-gpt-4o__simple_streaming/00.response.body");
    let out = sim(&["decode", "openai-chat", body.to_str().unwrap()]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines.first().unwrap().starts_with(r#"{"kind":"text_delta""#), "{stdout}");
    assert!(
        lines.last().unwrap().starts_with(r#"{"kind":"finished","reason":"stop","usage":"#),
        "{stdout}"
    );
    // Each line is an event as trace files hold it.
    for line in lines {
        let _: turnstile_core::StepEvent = serde_json::from_str(line).expect(line);
    }
}

#[test]
fn decode_names_the_byte_offset_of_a_broken_body_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.body");
    std::fs::write(&bad, "data: {\"choices\":[]}\n\ndata: {oops\n\n").unwrap();
    let out = sim(&["decode", "openai-chat", bad.to_str().unwrap()]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr.contains("bad.body: invalid openai-chat stream at byte 22: a chat completion chunk is not valid JSON"), "{stderr}");
    let out = sim(&["decode", "openai-chat", "/nonexistent/body"]);
    assert_eq!(out.status.code(), Some(2));
    let out = sim(&["decode", "grpc", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "an unknown API is a usage error");
}

/// A recording's folder as `turnstile run --record` leaves it: flight traces and the
/// providers' exchanges (which hold no `*.jsonl`).
fn recording(dir: &Path, names: &[&str]) -> PathBuf {
    let rec = dir.join("bug-42");
    let case = rec.join("providers/anthropic-messages/flight-s");
    std::fs::create_dir_all(&case).unwrap();
    std::fs::write(case.join("case.json"), "{}").unwrap();
    std::fs::write(case.join("00.response.body"), "event: ping\n\n").unwrap();
    for (i, name) in names.iter().enumerate() {
        let trace = if i == 0 { "fold-at-step-zero.jsonl" } else { "cancel-run-exactly-one.jsonl" };
        std::fs::copy(traces().join(trace), rec.join(name)).unwrap();
    }
    rec
}

#[test]
fn view_of_a_recording_draws_its_one_trace_and_names_them_when_there_are_several() {
    let dir = tempfile::tempdir().unwrap();
    let rec = recording(dir.path(), &["flight.jsonl"]);
    let o = Command::new(env!("CARGO_BIN_EXE_turnstile-sim"))
        .args(["view", "bug-42"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    assert!(out.starts_with("wrote bug-42.html ("), "{out}");
    let page = std::fs::read_to_string(dir.path().join("bug-42.html")).unwrap();
    assert!(page.contains("fold-at-step-zero"), "the trace's own name titles the page");

    std::fs::copy(traces().join("cancel-run-exactly-one.jsonl"), rec.join("flight-2.jsonl"))
        .unwrap();
    let o = sim(&["view", rec.to_str().unwrap()]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("holds 2 traces; view one of them by its file:"), "{err}");
    assert!(err.contains("flight-2.jsonl") && err.contains("flight.jsonl"), "{err}");

    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let o = sim(&["view", empty.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).1.contains("no trace files (*.jsonl) under"), "{:?}", text(&o));
}

#[test]
fn replay_save_takes_exactly_one_trace_and_a_rule() {
    let dir = tempfile::tempdir().unwrap();
    let rec = recording(dir.path(), &["flight.jsonl", "flight-2.jsonl"]);
    let r = rec.to_str().unwrap();
    let out = dir.path().join("saved.jsonl");
    let o = sim(&["replay", r, "--save", out.to_str().unwrap(), "--rule", "a rule"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("--save takes one trace, and"), "{err}");
    assert!(!out.exists(), "nothing saved");
    let o = sim(&["replay", r, "--save", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "--save without --rule is a usage error");
    assert!(text(&o).1.contains("--rule"), "{:?}", text(&o));

    // One trace of the folder, by its file: saved with its name and rule.
    let one = rec.join("flight.jsonl");
    let o = sim(&["replay", one.to_str().unwrap(), "--save", out.to_str().unwrap(), "--rule", "R"]);
    let (stdout, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{stdout}{err}");
    assert!(stdout.contains("saved ") && stdout.contains("each with its expected outputs"));
    let saved =
        turnstile_core::trace::Trace::parse(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(saved.header.name.as_deref(), Some("saved"));
    assert_eq!(saved.header.rule.as_deref(), Some("R"));
}

#[test]
fn a_recording_that_fails_now_is_saved_as_recorded_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let rec = recording(dir.path(), &["flight.jsonl"]);
    let path = rec.join("flight.jsonl");
    let good = std::fs::read_to_string(&path).unwrap();
    let bad = good.replacen(
        "\"expect\":[{\"kind\":{\"mode\":\"own_turn\"",
        "\"expect\":[{\"kind\":{\"mode\":\"fold\"",
        1,
    );
    assert_ne!(bad, good);
    std::fs::write(&path, &bad).unwrap();
    let out = dir.path().join("regression.jsonl");
    let o = sim(&["replay", rec.to_str().unwrap(), "--save", out.to_str().unwrap(), "--rule", "R"]);
    let (stdout, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{stdout}{err}");
    assert!(stdout.contains("FAIL") && stdout.contains("saved ") && stdout.contains("as recorded"));
    assert!(stdout.contains("turnstile-sim bless"), "{stdout}");
    let saved = std::fs::read_to_string(&out).unwrap();
    assert_eq!(saved.lines().skip(1).collect::<Vec<_>>(), bad.lines().skip(1).collect::<Vec<_>>());
}
