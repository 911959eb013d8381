//! What a new user trips over, each with the real binary: a reader that closes stdout early
//! (`| head -1`), a blank prompt from stdin, a model's paragraph-long title, a mistyped
//! `--session`, a run from a subfolder of the project, the stream watchdog and the retry
//! budget set in the configuration, a retry wait that said nothing off a terminal, and
//! `history` for calls that never ran.

mod common;

use std::io::{BufRead as _, BufReader};
use std::process::Stdio;

use common::Project;
use serde_json::{Value, json};
use turnstile_testkit::anthropic::{text_opening, text_stream, tool_stream, tool_stream_raw};
use turnstile_testkit::provider::{FakeProvider, Reply};

/// `turnstile ARGS` in `project` with a stdout whose reader is already gone.
async fn with_stdout_closed(project: &Project, args: &[&str]) -> common::Done {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let mut command = project.command(args);
    command.stdout(Stdio::from(writer));
    let child = command.spawn().unwrap();
    drop(command);
    common::finish(child).await
}

/// The JSON of `turnstile ARGS` (which must succeed).
async fn json_of(project: &Project, args: &[&str]) -> Value {
    let done = project.run(args).await;
    assert_eq!(done.code, Some(0), "{args:?}: {done:?}");
    serde_json::from_str(&done.stdout).unwrap_or_else(|e| panic!("{e}: {}", done.stdout))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_closed_stdout_ends_a_listing_and_a_run_quietly() {
    let provider = FakeProvider::anthropic(vec![
        Reply::sse(text_stream("One.")),
        // The second run: text after a pause (the reader is gone by then), then a long wait.
        Reply::Paced(vec![
            (300, text_opening("Half")),
            (
                30_000,
                b"event: ping\ndata: {\"type\":\"ping\"}\n\n".to_vec(),
            ),
        ]),
    ])
    .await;
    let project = Project::new(&provider.base_url, "");
    assert_eq!(project.run(&["run", "Say one"]).await.code, Some(0));
    let id = json_of(&project, &["sessions", "--json"]).await[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    for args in [
        &["sessions"][..],
        &["sessions", "--json"],
        &["history", &id],
        &["history", &id, "--json"],
        &["run", "--help"],
    ] {
        let done = with_stdout_closed(&project, args).await;
        assert_eq!(
            (done.code, done.stderr.as_str()),
            (Some(0), ""),
            "{args:?}: no panic, nothing said"
        );
    }

    // `run --json | head -1`: the reader takes the first line and goes.
    let (reader, writer) = std::io::pipe().unwrap();
    let mut command = project.command(&["run", "--json", "Say two"]);
    command.stdout(Stdio::from(writer));
    let child = command.spawn().unwrap();
    drop(command);
    let first = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        BufReader::new(reader).read_line(&mut line).unwrap();
        line
    })
    .await
    .unwrap();
    assert!(first.contains(r#""type":"accepted""#), "{first}");
    let started = std::time::Instant::now();
    let done = common::finish(child).await;
    assert_eq!(
        (done.code, done.stderr.as_str()),
        (Some(130), ""),
        "cancelled as by Ctrl-C, quietly: {done:?}"
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(20),
        "not the 30 s stream"
    );
    let accepted: Value = serde_json::from_str(&first).unwrap();
    let run_id = turnstile_core::RunId::new(accepted["run_id"].as_str().unwrap());
    let row = turnstile_host::store::Reader::open(&project.store())
        .unwrap()
        .run(&run_id)
        .unwrap()
        .expect("the run is in the ledger");
    let (_, record) = row.completion.expect("it finished");
    assert_eq!(record.outcome, turnstile_core::Outcome::Cancelled);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_blank_prompt_from_stdin_is_refused_as_an_empty_argument_is() {
    use std::io::Write as _;
    let provider = FakeProvider::anthropic(vec![Reply::sse(text_stream("Never."))]).await;
    let project = Project::new(&provider.base_url, "");
    for input in [&b"\n"[..], b"", b"  \n\t \n"] {
        let mut child = project
            .command(&["run", "-"])
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(input).unwrap();
        let done = common::finish(child).await;
        assert_eq!(done.code, Some(64), "{input:?}: {done:?}");
        assert!(
            done.stderr
                .contains("the run was rejected: prompt is empty"),
            "{done:?}"
        );
    }
    for prompt in ["", "   "] {
        let done = project.run(&["run", "--json", prompt]).await;
        assert_eq!(done.code, Some(64), "{prompt:?}: {done:?}");
        assert_eq!(
            done.stdout,
            "{\"message\":\"prompt is empty\",\"type\":\"rejected\"}\n"
        );
    }
    assert!(provider.steps().is_empty(), "nothing was sent");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_title_from_the_model_is_cut_to_fifty_and_so_is_the_column() {
    let long = "A very long title that a chatty model wrote ".repeat(7);
    assert!(long.chars().count() > 279);
    let provider = FakeProvider::titled(
        vec![Reply::sse(text_stream("Done."))],
        Reply::sse(text_stream(&long)),
    )
    .await;
    let project = Project::new(&provider.base_url, "");
    assert_eq!(project.run(&["run", "Name this"]).await.code, Some(0));
    let sessions = json_of(&project, &["sessions", "--json"]).await;
    let title = sessions[0]["title"].as_str().unwrap();
    assert_eq!(title.chars().count(), 50, "{title}");
    assert!(title.ends_with('…') && title.starts_with("A very long title"));
    let done = project.run(&["sessions"]).await;
    let widest = done
        .stdout
        .lines()
        .map(|l| l.chars().count())
        .max()
        .unwrap();
    assert!(widest < 130, "{widest} columns:\n{}", done.stdout);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unknown_session_is_refused_and_a_unique_prefix_names_one() {
    let provider = FakeProvider::anthropic(vec![
        Reply::sse(text_stream("One.")),
        Reply::sse(text_stream("Two.")),
    ])
    .await;
    let project = Project::new(&provider.base_url, "");
    assert_eq!(project.run(&["run", "Say one"]).await.code, Some(0));
    let id = json_of(&project, &["sessions", "--json"]).await[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let done = project
        .run(&["run", "--session", "no-such-session", "Hello?"])
        .await;
    assert_eq!(done.code, Some(64), "{done:?}");
    assert!(
        done.stderr.contains("no session `no-such-session`")
            && done.stderr.contains("leave out --session"),
        "{done:?}"
    );
    assert_eq!(provider.steps().len(), 1, "nothing was sent");

    let prefix = &id[..8];
    let done = project.run(&["run", "--session", prefix, "Say two"]).await;
    assert_eq!(
        (done.code, done.stdout.as_str()),
        (Some(0), "Two.\n"),
        "{done:?}"
    );
    let sessions = json_of(&project, &["sessions", "--json"]).await;
    assert_eq!(sessions.as_array().unwrap().len(), 1, "the same session");
    let history = json_of(&project, &["history", prefix, "--json"]).await;
    assert_eq!(history["session"]["id"], id.as_str());
    let done = project.run(&["history", "zz-typo"]).await;
    assert_eq!(done.code, Some(64), "{done:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_project_is_found_from_a_subfolder_and_its_store_is_ignored_by_git() {
    let provider = FakeProvider::anthropic(vec![Reply::sse(text_stream("From below."))]).await;
    let project = Project::new(&provider.base_url, "");
    let sub = project.path().join("src").join("deep");
    std::fs::create_dir_all(&sub).unwrap();
    let done = project
        .command(&["run", "Where am I?"])
        .current_dir(&sub)
        .output()
        .unwrap();
    assert_eq!(
        done.status.code(),
        Some(0),
        "the project's turnstile.toml: {}",
        String::from_utf8_lossy(&done.stderr)
    );
    assert!(project.store().exists(), "the store is the project's");
    assert!(!sub.join(".turnstile").exists());
    let ignore = project.path().join(".turnstile").join(".gitignore");
    assert_eq!(std::fs::read_to_string(&ignore).unwrap(), "*\n");
    let listed = project
        .command(&["sessions", "--json"])
        .current_dir(&sub)
        .output()
        .unwrap();
    let sessions: Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(sessions.as_array().unwrap().len(), 1, "{sessions}");

    // Without .turnstile/ or turnstile.toml: the repository's root.
    let repo = tempfile::tempdir().unwrap();
    std::fs::create_dir(repo.path().join(".git")).unwrap();
    let inner = repo.path().join("crates").join("a");
    std::fs::create_dir_all(&inner).unwrap();
    let done = project
        .command(&["sessions"])
        .current_dir(&inner)
        .output()
        .unwrap();
    let root = std::fs::canonicalize(repo.path()).unwrap();
    let said = String::from_utf8_lossy(&done.stderr);
    assert!(
        said.contains(&format!(
            "{}",
            root.join(".turnstile").join("store.db").display()
        )) || said.contains(&format!(
            "{}",
            repo.path().join(".turnstile").join("store.db").display()
        )),
        "{said}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_watchdog_and_the_retry_budget_come_from_the_configuration_and_retries_are_logged() {
    let provider = FakeProvider::anthropic(vec![Reply::Hang]).await;
    let project = Project::new(
        &provider.base_url,
        "stream_idle_timeout = 1\nretry_attempts = 2\nretry_backoff = [0.2]",
    );
    let started = std::time::Instant::now();
    let done = project.run(&["run", "Hello?"]).await;
    assert_eq!(done.code, Some(1), "{done:?}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(20),
        "1 s, not 300"
    );
    assert_eq!(provider.steps().len(), 2, "two attempts: {done:?}");
    assert!(
        done.stderr
            .contains("turnstile: retrying in 0.2 s (attempt 2): stream idle for 1 s"),
        "a retry is said off a terminal: {done:?}"
    );
    assert!(done.stderr.contains("stream idle for 1 s"), "{done:?}");

    let bad = Project::new(&provider.base_url, "retry_attempts = 0");
    let done = bad.run(&["run", "Hello?"]).await;
    assert_eq!(done.code, Some(1), "{done:?}");
    assert!(
        done.stderr.contains("`retry_attempts` must be at least 1"),
        "{done:?}"
    );
    let bad = Project::new(&provider.base_url, "retry_backoff = [-1]");
    let done = bad.run(&["run", "Hello?"]).await;
    assert!(done.stderr.contains("`retry_backoff`"), "{done:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn history_says_why_a_call_never_ran_and_keeps_what_the_model_sent() {
    let provider = FakeProvider::anthropic(vec![
        Reply::sse(tool_stream_raw("toolu_bad", "view", r#"{"path": "src/ma"#)),
        Reply::sse(tool_stream(
            "toolu_gone",
            "teleport",
            &json!({"to": "mars"}),
        )),
        Reply::sse(text_stream("Done.")),
    ])
    .await;
    let project = Project::new(&provider.base_url, "");
    assert_eq!(project.run(&["run", "Look"]).await.code, Some(0));
    let id = json_of(&project, &["sessions", "--json"]).await[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let done = project.run(&["history", &id]).await;
    let text = done.stdout;
    assert!(
        text.contains(r#"→ view {"path": "src/ma   (not valid JSON: stored as {})"#),
        "what the model sent, not `{{}}`:\n{text}"
    );
    assert!(
        text.contains("✗ (not run: its arguments were not valid JSON) Tool call failed"),
        "{text}"
    );
    assert!(
        text.contains("✗ (not run: no such tool) tool not found: teleport"),
        "{text}"
    );
    assert!(!text.contains("clean-up or recovery"), "{text}");
    let history = json_of(&project, &["history", &id, "--json"]).await;
    let assistant = &history["messages"][1];
    assert_eq!(assistant["calls"][0]["raw_input"], r#"{"path": "src/ma"#);
    assert_eq!(assistant["calls"][0]["input"], json!({}));
    assert_eq!(assistant["results"][0]["cause"], "invalid_json");
    assert_eq!(
        history["messages"][2]["results"][0]["cause"],
        "tool_not_found"
    );
}
