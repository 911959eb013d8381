//! `--record DIR` end to end (SPEC 10: a live run replayed): the real `turnstile run` and
//! `turnstile serve` against the test provider on 127.0.0.1 record into a folder; the core
//! replays the flight trace to the same outputs byte for byte; the real `turnstile-sim` replays
//! the folder, draws it, refuses a tampered copy, and saves it as a regression trace that the
//! trace suite would accept. No file the runs wrote holds the API key, though the provider
//! echoes it back. A later process never overwrites a recording.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{Done, Project, Served};
use serde_json::{Value, json};
use turnstile_core::trace::Trace;
use turnstile_core::{Outcome, bless, replay};
use turnstile_testkit::anthropic::{text_stream, tool_stream};
use turnstile_testkit::provider::{FakeProvider, Reply};
use turnstile_wire::recording::Recording;

/// The key the provider is configured with (`TURNSTILE_TEST_KEY`), which nothing may write.
const KEY: &str = "sk-test-recorded-key-7c41e9d2";
const TOKEN: &str = "record-e2e-token-93b1";
const API: &str = "anthropic-messages";

/// A configuration for the test provider with a key from the environment, plus `extra`.
fn keyed_project(base_url: &str, extra: &str) -> Project {
    Project::with_config(&format!(
        "model = \"test/claude\"\n{extra}\n\n[providers.test]\napi = \"{API}\"\n\
         base_url = \"{base_url}\"\napi_key_env = \"TURNSTILE_TEST_KEY\"\n\n\
         [providers.test.models.claude]\nmodel = \"claude-sonnet-4-20250514\"\n\
         context_window = 200000\n"
    ))
}

/// `turnstile ARGS` in the project with the key set, to its end.
async fn turnstile(project: &Project, args: &[&str]) -> Done {
    let mut c = project.command(args);
    c.env("TURNSTILE_TEST_KEY", KEY);
    common::finish(c.spawn().unwrap()).await
}

/// The `turnstile-sim` binary, built beside `turnstile` by `cargo test --workspace`.
fn sim_binary() -> PathBuf {
    common::built("turnstile-sim", "cargo build -p turnstile-sim")
}

/// `turnstile-sim ARGS` in `dir`.
fn sim(dir: &Path, args: &[&str]) -> Done {
    let out = Command::new(sim_binary())
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    Done {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// No file under `dir` (the recording, the store and its journal, the logs) holds the key.
fn assert_no_key(dir: &Path) {
    turnstile_testkit::local::assert_absent_under(dir, KEY);
}

/// The case folders of the recording's provider exchanges, by name.
fn cases(rec: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(rec.join("providers").join(API))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// The trace's inputs as JSON.
fn inputs(trace: &Trace) -> Vec<Value> {
    trace
        .lines
        .iter()
        .map(|(_, l)| serde_json::to_value(&l.input).unwrap())
        .collect()
}

/// The flight trace at `path` replays with every line's outputs compared, and blessing it
/// (recording the outputs the core produces now) gives back the file byte for byte.
fn replays_byte_for_byte(path: &Path) -> Trace {
    let text = std::fs::read_to_string(path).unwrap();
    let trace = Trace::parse(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let report = replay(&trace).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(report.inputs > 0);
    assert_eq!(
        report.compared,
        report.inputs,
        "{}: every line was recorded with its outputs",
        path.display()
    );
    assert_eq!(
        bless(&trace).unwrap().to_jsonl(),
        text,
        "{}",
        path.display()
    );
    trace
}

#[tokio::test(flavor = "multi_thread")]
async fn a_recorded_run_replays_byte_for_byte_is_drawn_and_becomes_a_regression_trace() {
    // The provider is overloaded first and echoes the key in its error, then calls `view`.
    let echo = format!(
        r#"{{"type":"error","error":{{"type":"overloaded_error","message":"Overloaded for key {KEY}"}}}}"#
    );
    let provider = FakeProvider::anthropic(vec![
        Reply::json(529, &[("retry-after-ms", "20")], &echo),
        Reply::sse(tool_stream(
            "toolu_rec1",
            "view",
            &json!({"path": "hello.txt"}),
        )),
        Reply::sse(text_stream("hello.txt says hello world.")),
    ])
    .await;
    let project = keyed_project(&provider.base_url, "");
    std::fs::write(project.path().join("hello.txt"), "hello world\n").unwrap();
    let prompt = "What does hello.txt say?";

    let done = turnstile(&project, &["run", "--record", "rec", prompt]).await;
    assert_eq!(done.code, Some(0), "{done:?}");
    assert_eq!(done.stdout, "hello.txt says hello world.\n");
    assert!(
        !done.stderr.contains("recording:") && !done.stderr.contains(KEY),
        "stderr is not a terminal: where it records is not said there: {done:?}"
    );
    let rec = project.path().join("rec");

    // The layout: the flight trace, and the session's exchanges as the provider saw them.
    let session = cases(&rec)
        .into_iter()
        .find(|c| c != "flight-titles")
        .expect("a case of the session");
    assert!(session.starts_with("flight-"), "{session}");
    let case = Recording::read(&rec.join("providers").join(API).join(&session)).unwrap();
    let statuses: Vec<u16> = case.case.interactions.iter().map(|i| i.status).collect();
    assert_eq!(statuses, [529, 200, 200]);
    assert!(
        case.exchanges[0].0["messages"].to_string().contains(prompt),
        "the request as sent"
    );
    let echoed = String::from_utf8_lossy(&case.exchanges[0].1).into_owned();
    assert!(echoed.contains("Overloaded for key <redacted>"), "{echoed}");
    assert_no_key(project.path());

    // The core replays the flight trace to the very outputs it produced live.
    let flight = rec.join("flight.jsonl");
    let trace = replays_byte_for_byte(&flight);
    let all = inputs(&trace);
    let run_session = session.strip_prefix("flight-").unwrap();
    assert!(
        all.iter()
            .any(|i| i["type"] == "submit" && i["prompt"] == prompt && i["session"] == run_session),
        "{all:?}"
    );
    assert!(
        all.iter()
            .any(|i| i["event"]["kind"] == "tool_call" && i["event"]["name"] == "view"),
        "{all:?}"
    );
    assert!(all.iter().any(|i| i["type"] == "tool_result"), "{all:?}");
    assert!(
        all.iter().any(|i| i["event"]["kind"] == "failed"),
        "the overloaded attempt: {all:?}"
    );
    assert_eq!(
        replay(&trace).unwrap().outcomes.get(&Outcome::Completed),
        Some(&1)
    );

    // `turnstile-sim replay DIR` finds the trace in the recording and replays it.
    let replayed = sim(project.path(), &["replay", "rec"]);
    assert_eq!(replayed.code, Some(0), "{replayed:?}");
    assert!(
        replayed.stdout.starts_with("ok    rec/flight.jsonl  ("),
        "{replayed:?}"
    );
    assert!(
        replayed.stdout.contains("1 passed, 0 failed"),
        "{replayed:?}"
    );

    // A recording whose outputs differ from the core's fails (status 1), with its line.
    let tampered = project.path().join("tampered");
    std::fs::create_dir(&tampered).unwrap();
    let text = std::fs::read_to_string(&flight).unwrap();
    let changed = text.replacen("\"outcome\":\"completed\"", "\"outcome\":\"failed\"", 1);
    assert_ne!(changed, text, "the trace records the run's outcome");
    std::fs::write(tampered.join("flight.jsonl"), changed).unwrap();
    let failed = sim(project.path(), &["replay", "tampered"]);
    assert_eq!(failed.code, Some(1), "{failed:?}");
    assert!(
        failed.stdout.contains("FAIL  tampered/flight.jsonl") && failed.stdout.contains("differs"),
        "{failed:?}"
    );

    // `turnstile-sim view DIR` draws it: the page holds the session's inputs.
    let viewed = sim(project.path(), &["view", "rec"]);
    assert_eq!(viewed.code, Some(0), "{viewed:?}");
    assert!(viewed.stdout.starts_with("wrote rec.html ("), "{viewed:?}");
    let page = std::fs::read_to_string(project.path().join("rec.html")).unwrap();
    for needle in [prompt, run_session, "toolu_rec1", "\"tool_result\""] {
        assert!(page.contains(needle), "the page shows {needle}");
    }
    assert!(!page.contains(KEY));

    // One command makes it a regression trace that the trace suite accepts.
    let regressions = project.path().join("traces").join("regressions");
    std::fs::create_dir_all(&regressions).unwrap();
    let out = "traces/regressions/live-view-after-overload.jsonl";
    let rule = "SPEC 4.5: an overloaded first attempt is retried, then a view call runs";
    let saved = sim(
        project.path(),
        &["replay", "rec", "--save", out, "--rule", rule],
    );
    assert_eq!(saved.code, Some(0), "{saved:?}");
    assert!(
        saved.stdout.contains(&format!("saved {out} (")),
        "{saved:?}"
    );
    let text = std::fs::read_to_string(project.path().join(out)).unwrap();
    let regression = Trace::parse(&text).unwrap();
    assert_eq!(
        regression.header.name.as_deref(),
        Some("live-view-after-overload")
    );
    assert_eq!(regression.header.rule.as_deref(), Some(rule));
    assert_eq!(
        regression.header.origin.as_ref().unwrap()["saved_from"],
        "rec/flight.jsonl"
    );
    let report = replay(&regression).unwrap();
    assert_eq!(report.compared, report.inputs);
    let body = |t: &str| t.lines().skip(1).map(str::to_owned).collect::<Vec<_>>();
    assert_eq!(
        body(&text),
        body(&std::fs::read_to_string(&flight).unwrap()),
        "every line as recorded"
    );
    let again = sim(
        project.path(),
        &["replay", "rec", "--save", out, "--rule", rule],
    );
    assert_eq!(again.code, Some(2), "{again:?}");
    assert!(
        again
            .stderr
            .contains("exists; a regression trace is never overwritten"),
        "{again:?}"
    );
    assert_eq!(
        std::fs::read_to_string(project.path().join(out)).unwrap(),
        text
    );

    // A second run into the same folder takes the next name and leaves the first alone.
    let first = std::fs::read(&flight).unwrap();
    let done = turnstile(
        &project,
        &["run", "--record", "rec", "--continue", "And now?"],
    )
    .await;
    assert_eq!(done.code, Some(0), "{done:?}");
    assert_eq!(std::fs::read(&flight).unwrap(), first);
    let second = replays_byte_for_byte(&rec.join("flight-2.jsonl"));
    assert!(
        inputs(&second)
            .iter()
            .any(|i| i["prompt"] == "And now?" && i["session"] == run_session),
        "the continued session"
    );
    assert!(
        cases(&rec).contains(&format!("flight-2-{run_session}")),
        "{:?}",
        cases(&rec)
    );
    let both = sim(project.path(), &["replay", "rec"]);
    assert_eq!(both.code, Some(0), "{both:?}");
    assert!(both.stdout.contains("2 passed, 0 failed"), "{both:?}");
    let which = sim(project.path(), &["view", "rec"]);
    assert_eq!(which.code, Some(2), "{which:?}");
    assert!(
        which.stderr.contains("rec holds 2 traces") && which.stderr.contains("rec/flight-2.jsonl"),
        "{which:?}"
    );
    assert_no_key(project.path());
}

#[tokio::test(flavor = "multi_thread")]
async fn the_configuration_records_every_run_and_a_bad_folder_is_named_with_its_line() {
    let provider = FakeProvider::anthropic(vec![Reply::sse(text_stream("Hi."))]).await;
    let project = keyed_project(&provider.base_url, "[record]\ndir = \"recordings\"");
    let done = turnstile(&project, &["run", "Say hi"]).await;
    assert_eq!(done.code, Some(0), "{done:?}");
    replays_byte_for_byte(&project.path().join("recordings/flight.jsonl"));
    // --record wins over the file.
    let done = turnstile(&project, &["run", "--record", "other", "Say hi"]).await;
    assert_eq!(done.code, Some(0), "{done:?}");
    replays_byte_for_byte(&project.path().join("other/flight.jsonl"));
    assert!(!project.path().join("recordings/flight-2.jsonl").exists());
    // Not with --server: the server records its own runs.
    let refused = turnstile(
        &project,
        &[
            "run",
            "--record",
            "x",
            "--server",
            "http://127.0.0.1:9",
            "hi",
        ],
    )
    .await;
    assert_eq!(refused.code, Some(64), "{refused:?}");
    assert!(refused.stderr.contains("--record"), "{refused:?}");

    for (value, says) in [
        ("7", "invalid type: integer `7`, expected a string"),
        ("\"\"", "`dir` is empty"),
    ] {
        let bad = keyed_project(&provider.base_url, &format!("[record]\ndir = {value}"));
        let done = turnstile(&bad, &["run", "Say hi"]).await;
        assert_eq!(done.code, Some(1), "{done:?}");
        let config = bad.config.display().to_string();
        for needle in [config.as_str(), "line 3", "dir = ", says] {
            assert!(done.stderr.contains(needle), "{needle}: {done:?}");
        }
    }
    let unknown = keyed_project(&provider.base_url, "[record]\nfolder = \"x\"");
    let done = turnstile(&unknown, &["run", "Say hi"]).await;
    assert_eq!(done.code, Some(1), "{done:?}");
    assert!(done.stderr.contains("unknown field `folder`"), "{done:?}");
}

/// `turnstile serve --record rec` of `project` on `port`, with the test's key and token.
async fn serve_recorded(project: &Project, port: u16) -> Served {
    let env = [("TURNSTILE_TEST_KEY", KEY)];
    Served::start(project, port, &["--record", "rec"], Some(TOKEN), &env).await
}

/// Submits `prompt` to `session` as run `run` and waits for its RunComplete.
async fn prompt_and_wait(port: u16, session: &str, run: &str, prompt: &str) -> Value {
    let http = reqwest::Client::new();
    let base = format!("http://127.0.0.1:{port}/v1");
    let r = http
        .post(format!("{base}/sessions/{session}/prompts"))
        .bearer_auth(TOKEN)
        .json(&json!({"prompt": prompt, "run_id": run}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 202);
    let waited: Value = http
        .get(format!("{base}/runs/{run}/wait?timeout_ms=30000"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(waited["finished"], true, "{waited}");
    waited["run_complete"].clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_recorded_server_keeps_its_sessions_in_one_trace_and_a_restart_takes_a_new_one() {
    let provider =
        FakeProvider::anthropic(vec![Reply::sse(text_stream("Hello from the server."))]).await;
    let project = keyed_project(&provider.base_url, "");
    let port = common::free_port();
    let server = serve_recorded(&project, port).await;
    for (session, run) in [("s1", "r1"), ("s2", "r2")] {
        let complete = prompt_and_wait(port, session, run, &format!("Hello {session}")).await;
        assert_eq!(complete["outcome"], "completed", "{complete}");
    }
    // A run that cannot open the store gives its claimed name back.
    let refused = turnstile(&project, &["run", "--record", "rec", "hi"]).await;
    assert_eq!(refused.code, Some(1), "{refused:?}");
    assert!(refused.stderr.contains("store is in use"), "{refused:?}");
    assert!(!project.path().join("rec/flight-2.jsonl").exists());
    let stopped = server.stop(nix::sys::signal::Signal::SIGTERM).await;
    assert_eq!(stopped.code, Some(0), "{stopped:?}");
    assert!(
        stopped
            .stderr
            .contains("recording: the flight trace `rec/flight.jsonl`"),
        "{stopped:?}"
    );
    let rec = project.path().join("rec");
    let trace = replays_byte_for_byte(&rec.join("flight.jsonl"));
    let all = inputs(&trace);
    for session in ["s1", "s2"] {
        assert!(
            all.iter()
                .any(|i| i["type"] == "submit" && i["prompt"] == format!("Hello {session}")),
            "{all:?}"
        );
        assert!(
            cases(&rec).contains(&format!("flight-{session}")),
            "{:?}",
            cases(&rec)
        );
    }
    assert!(
        all.iter().any(|i| i["type"] == "shutdown"),
        "the SIGTERM's shutdown is the last input"
    );

    // A restart records into a new trace; the first is left as it was.
    let first = std::fs::read(rec.join("flight.jsonl")).unwrap();
    let server = serve_recorded(&project, port).await;
    let complete = prompt_and_wait(port, "s1", "r3", "Again").await;
    assert_eq!(complete["outcome"], "completed", "{complete}");
    let stopped = server.stop(nix::sys::signal::Signal::SIGTERM).await;
    assert_eq!(stopped.code, Some(0), "{stopped:?}");
    assert!(stopped.stderr.contains("rec/flight-2.jsonl"), "{stopped:?}");
    assert_eq!(std::fs::read(rec.join("flight.jsonl")).unwrap(), first);
    replays_byte_for_byte(&rec.join("flight-2.jsonl"));
    assert!(cases(&rec).contains(&"flight-2-s1".to_owned()));
    let replayed = sim(project.path(), &["replay", "rec"]);
    assert_eq!(replayed.code, Some(0), "{replayed:?}");
    assert!(
        replayed.stdout.contains("2 passed, 0 failed"),
        "{replayed:?}"
    );
    assert_no_key(project.path());
}
