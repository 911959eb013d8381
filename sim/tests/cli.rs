//! The trace commands as a user runs them: `replay`, `bless` and `shrink` on good, bad and
//! missing input, with their exit codes and messages.

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
