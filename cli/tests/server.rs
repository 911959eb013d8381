//! `turnstile serve` and `turnstile run --server` as real processes (SPEC 9 "Server", "CLI"):
//! a provider server on 127.0.0.1 replaying recorded streams, the server, and clients over
//! HTTP. A kill -9 of the server mid-turn and a restart: every client that reconnects gets
//! exactly one RunComplete per RunId (`interrupted` for the killed turn), and `run --server`
//! exits 2. SIGTERM tells the clients before the server goes; Ctrl-C of `run --server` cancels
//! the server's run (G-12). The token is never logged.

mod common;

use std::collections::BTreeMap;
use std::process::Child;
use std::time::{Duration, Instant};

use common::{Project, Served};
use nix::sys::signal::Signal;
use serde_json::{Value, json};
use turnstile_testkit::anthropic::{paced_text, recorded, text_stream, tool_stream};
use turnstile_testkit::events::{Events, data, is_run_complete};
use turnstile_testkit::provider::{FakeProvider, Reply};

const TOKEN: &str = "e2e-secret-token-5f0c1d";
/// How these tests run the server: logging at debug to `server.log`.
const SERVE_ARGS: &[&str] = &["-vv", "--log-file", "server.log"];
const TOOL_CASE: &str = "TestAnthropicCommon__claude-sonnet-4__tool_streaming";

async fn post(base: &str, path: &str, body: Value) -> (u16, Value) {
    let r = reqwest::Client::new()
        .post(format!("{base}{path}"))
        .bearer_auth(TOKEN)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

async fn get(base: &str, path: &str) -> (u16, Value) {
    let r = reqwest::Client::new()
        .get(format!("{base}{path}"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

fn run_server(project: &Project, base: &str, args: &[&str]) -> Child {
    let mut all = vec!["run", "--server", base];
    all.extend_from_slice(args);
    let mut c = project.command(&all);
    c.env("TURNSTILE_SERVER_TOKEN", TOKEN);
    c.spawn().unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn run_against_a_server_replays_a_recorded_tool_stream_and_prints_the_answer() {
    let provider = FakeProvider::anthropic(vec![
        Reply::sse(recorded(TOOL_CASE, 0)),
        Reply::sse(recorded(TOOL_CASE, 1)),
    ])
    .await;
    let project = Project::new(&provider.base_url, "");
    let port = common::free_port();
    let served = Served::start(&project, port, SERVE_ARGS, Some(TOKEN), &[]).await;
    let done = common::finish(run_server(
        &project,
        &served.base,
        &[
            "--json",
            "--run-id",
            "w1",
            "What is the weather in Florence?",
        ],
    ))
    .await;
    assert_eq!(done.code, Some(0), "{done:?}");
    let lines: Vec<Value> = done
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["type"], "accepted");
    let kinds: Vec<&str> = lines.iter().map(|l| l["type"].as_str().unwrap()).collect();
    assert!(
        kinds.contains(&"tool_call") && kinds.contains(&"tool_result"),
        "{kinds:?}"
    );
    let last = lines.last().unwrap();
    assert_eq!(
        (last["type"].as_str(), last["outcome"].as_str()),
        (Some("run_complete"), Some("completed"))
    );
    assert!(
        last["text"]
            .as_str()
            .unwrap()
            .starts_with("The current weather in Florence, Italy shows")
    );
    // Without --json: exactly the text and a newline on stdout; the same RunId attaches.
    let again = common::finish(run_server(
        &project,
        &served.base,
        &["--run-id", "w1", "What is the weather in Florence?"],
    ))
    .await;
    assert_eq!(again.code, Some(0), "{again:?}");
    assert_eq!(
        again.stdout,
        format!("{}\n", last["text"].as_str().unwrap())
    );
    assert_eq!(
        provider.steps().len(),
        2,
        "the rerun attached to the finished run"
    );
    // Options that are the server's are refused.
    let refused = common::finish(run_server(
        &project,
        &served.base,
        &["--model", "x/y", "hi"],
    ))
    .await;
    assert_eq!(refused.code, Some(64), "{refused:?}");
    let stopped = served.stop(Signal::SIGTERM).await;
    assert_eq!(stopped.code, Some(0), "{stopped:?}");
    let log = std::fs::read_to_string(project.path().join("server.log")).unwrap();
    assert!(
        log.contains("submission accepted"),
        "debug logs were written"
    );
    assert!(
        !log.contains(TOKEN) && !stopped.stderr.contains(TOKEN),
        "the token is never logged"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_kill_9_mid_turn_and_a_restart_give_each_client_one_run_complete_per_run() {
    kill_9_mid_turn_and_restart(false).await;
}

/// The same over a PostgreSQL store (SPEC 11): the event ids are the database's positions.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs PostgreSQL: eval \"$(scripts/postgres.sh env)\", then --ignored"]
async fn postgres_a_kill_9_mid_turn_and_a_restart_give_each_client_one_run_complete_per_run() {
    kill_9_mid_turn_and_restart(true).await;
}

async fn kill_9_mid_turn_and_restart(postgres: bool) {
    let provider = FakeProvider::anthropic(vec![
        Reply::sse(recorded(TOOL_CASE, 0)),
        Reply::sse(recorded(TOOL_CASE, 1)),
        Reply::Hang,
        Reply::sse(text_stream("after the restart")),
    ])
    .await;
    let mut project = Project::new(&provider.base_url, "");
    if postgres {
        project = project.on_postgres();
    }
    let port = common::free_port();
    let mut served = Served::start(&project, port, SERVE_ARGS, Some(TOKEN), &[]).await;
    let base = served.base.clone();
    // Two listeners from the start; the first run completes before the kill.
    let mut early = Events::connect(&base, TOKEN, None).await;
    early.read_until(|f| f.event == "asks").await;
    let mut late = Events::connect(&base, TOKEN, None).await;
    late.read_until(|f| f.event == "asks").await;
    let (status, v) = post(
        &base,
        "/v1/sessions/s1/prompts",
        json!({"prompt": "What is the weather in Florence?", "run_id": "r1"}),
    )
    .await;
    assert_eq!(status, 202, "{v}");
    assert!(late.read_until(|f| is_run_complete(f, "r1")).await);
    // `early` keeps only its first position: it will resume from before r1.
    let early_resume = early.frames()[0].id.clone();
    // The second run is mid-turn (the provider hangs) when the server is killed.
    let client = run_server(
        &project,
        &base,
        &[
            "--json",
            "--run-id",
            "r2",
            "--session",
            "s1",
            "Think for a long time",
        ],
    );
    provider.wait_steps(3).await;
    assert!(late.read_until(|f| f.event == "session").await);
    served.kill9();
    assert!(
        !late.read_until(|_| false).await,
        "the stream ended with the server"
    );
    let served = Served::start(&project, port, SERVE_ARGS, Some(TOKEN), &[]).await;
    // The listener resumes from its last event id; `early` from before r1.
    late.reconnect().await;
    assert!(late.read_until(|f| is_run_complete(f, "r2")).await);
    let mut early = Events::connect(&base, TOKEN, early_resume.as_deref()).await;
    assert!(early.read_until(|f| is_run_complete(f, "r2")).await);
    // A moment more for anything that should not come.
    let _ = tokio::time::timeout(
        Duration::from_millis(500),
        late.read_until(|f| f.event == "run_complete"),
    )
    .await;
    let _ = tokio::time::timeout(
        Duration::from_millis(500),
        early.read_until(|f| f.event == "run_complete"),
    )
    .await;
    let want: BTreeMap<String, (usize, String)> = [
        ("r1".to_owned(), (1, "completed".to_owned())),
        ("r2".to_owned(), (1, "interrupted".to_owned())),
    ]
    .into();
    assert_eq!(
        late.run_completes(),
        want,
        "the listener that reconnected after the restart"
    );
    assert_eq!(
        early.run_completes(),
        want,
        "the listener that resumed from before r1"
    );
    // The `run --server` client reconnected too, and exits 2 for the interrupted run.
    let done = common::finish(client).await;
    assert_eq!(done.code, Some(2), "{done:?}");
    let last: Value = serde_json::from_str(done.stdout.lines().last().unwrap()).unwrap();
    assert_eq!(
        (last["run_id"].as_str(), last["outcome"].as_str()),
        (Some("r2"), Some("interrupted"))
    );
    assert_eq!(
        last["error"]["message"],
        "The process stopped before this request finished."
    );
    let runs = done
        .stdout
        .lines()
        .filter(|l| l.contains("\"run_complete\""))
        .count();
    assert_eq!(runs, 1, "{}", done.stdout);
    // The session goes on on the restarted server.
    let (status, _) = post(
        &base,
        "/v1/sessions/s1/prompts",
        json!({"prompt": "and now?", "run_id": "r3"}),
    )
    .await;
    assert_eq!(status, 202);
    let (_, v) = get(&base, "/v1/runs/r3/wait?timeout_ms=20000").await;
    assert_eq!(
        (
            v["run_complete"]["outcome"].as_str(),
            v["run_complete"]["text"].as_str()
        ),
        (Some("completed"), Some("after the restart"))
    );
    drop(served);
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_ends_the_unfinished_runs_interrupted_and_tells_the_clients() {
    let provider = FakeProvider::anthropic(vec![Reply::Hang]).await;
    let project = Project::new(&provider.base_url, "");
    let served = Served::start(&project, common::free_port(), SERVE_ARGS, Some(TOKEN), &[]).await;
    let client = run_server(
        &project,
        &served.base,
        &["--json", "--run-id", "t1", "Think"],
    );
    provider.wait_steps(1).await;
    let stopped = served.stop(Signal::SIGTERM).await;
    assert_eq!(stopped.code, Some(0), "{stopped:?}");
    assert!(
        stopped.stderr.contains("shutting down"),
        "{}",
        stopped.stderr
    );
    let done = common::finish(client).await;
    assert_eq!(done.code, Some(2), "{done:?}");
    let last: Value = serde_json::from_str(done.stdout.lines().last().unwrap()).unwrap();
    assert_eq!(last["outcome"], "interrupted");
    assert_eq!(
        last["error"]["message"], "Interrupted by shutdown",
        "{last}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn ctrl_c_or_sigterm_of_run_server_cancels_the_run_on_the_server() {
    let provider = FakeProvider::anthropic(vec![Reply::Hang]).await;
    let project = Project::new(&provider.base_url, "");
    let served = Served::start(&project, common::free_port(), SERVE_ARGS, Some(TOKEN), &[]).await;
    for (n, signal) in [Signal::SIGINT, Signal::SIGTERM].into_iter().enumerate() {
        let run_id = format!("c{n}");
        let client = run_server(&project, &served.base, &["--run-id", &run_id, "Think"]);
        provider.wait_steps(n + 1).await;
        common::signal(client.id(), signal);
        let done = common::finish(client).await;
        assert_eq!(done.code, Some(130), "{signal}: {done:?}");
        assert!(
            done.stderr.contains("cancelling the run on the server"),
            "{signal}: {}",
            done.stderr
        );
        let (_, run) = get(&served.base, &format!("/v1/runs/{run_id}")).await;
        assert_eq!(
            (
                run["state"].as_str(),
                run["run_complete"]["outcome"].as_str()
            ),
            (Some("finished"), Some("cancelled")),
            "{signal}: {run}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_generated_token_is_shown_once_kept_private_and_found_by_clients() {
    let provider = FakeProvider::anthropic(vec![Reply::sse(text_stream("hi back"))]).await;
    let project = Project::new(&provider.base_url, "");
    let port = common::free_port();
    let first = Served::start(&project, port, SERVE_ARGS, None, &[]).await;
    let path = project.path().join(".turnstile").join("server-token");
    let token = std::fs::read_to_string(&path).unwrap().trim().to_owned();
    assert_eq!(token.len(), 64);
    {
        use std::os::unix::fs::PermissionsExt as _;
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }
    // A client in the project finds the token file by itself.
    let mut c = project.command(&["run", "--server", &first.base, "hello"]);
    c.env_remove("TURNSTILE_SERVER_TOKEN");
    let done = common::finish(c.spawn().unwrap()).await;
    assert_eq!(
        (done.code, done.stdout.as_str()),
        (Some(0), "hi back\n"),
        "{done:?}"
    );
    let stopped = first.stop(Signal::SIGTERM).await;
    assert!(
        stopped.stderr.contains(&token),
        "the first start shows the token: {}",
        stopped.stderr
    );
    let second = Served::start(&project, port, SERVE_ARGS, None, &[]).await;
    let stopped = second.stop(Signal::SIGINT).await;
    assert!(
        !stopped.stderr.contains(&token),
        "later starts do not: {}",
        stopped.stderr
    );
    let log = std::fs::read_to_string(project.path().join("server.log")).unwrap();
    assert!(!log.contains(&token), "the token is never logged");
}

/// One call per built-in tool and one MCP tool, each with an effect that shows if it ran.
fn asking_calls() -> Vec<(&'static str, Value)> {
    vec![
        ("view", json!({"path": "notes.txt"})),
        ("ls", json!({"path": "."})),
        ("grep", json!({"pattern": "old"})),
        ("write", json!({"path": "written.txt", "content": "new"})),
        (
            "edit",
            json!({"path": "notes.txt", "old_string": "old", "new_string": "new"}),
        ),
        ("bash", json!({"command": "touch made-by-bash"})),
        ("mcp_test_echo", json!({"text": "x"})),
    ]
}

/// SPEC 4.9, 4.10 (the safety rule): a cancel withdraws the pending ask of every tool at once,
/// whatever the tool's abort policy, and an answer after it is refused (409) and runs nothing.
/// Before the fix, `write` and `edit` kept their ask, the RunComplete came after the 5 s grace,
/// and a late `once` wrote the file. SIGTERM withdraws an ask the same way.
#[tokio::test(flavor = "multi_thread")]
async fn a_cancel_withdraws_every_ask_and_a_late_answer_is_refused_and_runs_nothing() {
    let calls = asking_calls();
    let replies = calls
        .iter()
        .enumerate()
        .map(|(i, (tool, input))| Reply::sse(tool_stream(&format!("toolu_{i}"), tool, input)))
        .chain([Reply::sse(tool_stream("toolu_w", "write", &calls[3].1))])
        .collect();
    let provider = FakeProvider::anthropic(replies).await;
    let config = format!(
        "[permissions]\nask = [\"*\"]\n\n[mcp.test]\ncommand = [\"{}\"]\n",
        common::mcp_test_server().display()
    );
    let project = Project::new(&provider.base_url, &config);
    std::fs::write(project.path().join("notes.txt"), "old text\n").unwrap();
    let served = Served::start(&project, common::free_port(), SERVE_ARGS, Some(TOKEN), &[]).await;
    let base = served.base.clone();
    let mut events = Events::connect(&base, TOKEN, None).await;
    for (i, (tool, _)) in calls.iter().enumerate() {
        let (session, run) = (format!("s{i}"), format!("r{i}"));
        let (status, v) = post(
            &base,
            &format!("/v1/sessions/{session}/prompts"),
            json!({"prompt": format!("use {tool}"), "run_id": run}),
        )
        .await;
        assert_eq!(status, 202, "{v}");
        let ask = events.next_event("ask").await;
        assert_eq!(ask["tool"], *tool, "{ask}");
        let id = ask["id"].as_str().unwrap().to_owned();
        let cancel = if i % 2 == 0 {
            format!("/v1/runs/{run}/cancel")
        } else {
            format!("/v1/sessions/{session}/cancel")
        };
        assert_eq!(post(&base, &cancel, json!({})).await.0, 202);
        let from = events.frames().len();
        assert!(events.read_until(|f| is_run_complete(f, &run)).await);
        let after = &events.frames()[from..];
        let withdrawn = after.iter().position(|f| {
            f.event == "ask_closed" && data(f)["id"] == id && data(f)["why"] == "withdrawn"
        });
        assert!(
            withdrawn.is_some(),
            "{tool}: no ask_closed before the RunComplete"
        );
        assert_eq!(
            data(after.last().unwrap())["outcome"],
            "cancelled",
            "{tool}"
        );
        let (_, pending) = get(&base, "/v1/asks").await;
        assert_eq!(pending["asks"], json!([]), "{tool}");
        let (status, v) = post(&base, &format!("/v1/asks/{id}"), json!({"answer": "once"})).await;
        assert_eq!(
            (status, v["error"]["code"].as_str()),
            (409, Some("ask_closed")),
            "{tool}: {v}"
        );
    }
    // SIGTERM while `write` asks: the ask is withdrawn and the run ends interrupted.
    let (status, _) = post(
        &base,
        "/v1/sessions/sw/prompts",
        json!({"prompt": "use write", "run_id": "rw"}),
    )
    .await;
    assert_eq!(status, 202);
    let ask = events.next_event("ask").await;
    let stopped = served.stop(Signal::SIGTERM).await;
    assert_eq!(stopped.code, Some(0), "{stopped:?}");
    events.read_until(|_| false).await;
    assert!(
        events
            .frames()
            .iter()
            .any(|f| f.event == "ask_closed" && data(f)["id"] == ask["id"]),
        "SIGTERM withdrew the ask"
    );
    assert_eq!(events.run_completes()["rw"], (1, "interrupted".to_owned()));
    tokio::time::sleep(Duration::from_millis(200)).await;
    let p = project.path();
    assert!(
        !p.join("written.txt").exists(),
        "write ran after the cancel"
    );
    assert!(
        !p.join("made-by-bash").exists(),
        "bash ran after the cancel"
    );
    assert_eq!(
        std::fs::read_to_string(p.join("notes.txt")).unwrap(),
        "old text\n"
    );
}

/// A served project whose model calls `write` on `t.txt` (which asks, without `--yolo`).
async fn serving_a_model_that_writes_t_txt() -> (FakeProvider, Project, Served) {
    let provider = FakeProvider::anthropic(vec![Reply::sse(tool_stream(
        "toolu_1",
        "write",
        &json!({"path": "t.txt", "content": "hi"}),
    ))])
    .await;
    let project = Project::new(&provider.base_url, "");
    let served = Served::start(&project, common::free_port(), SERVE_ARGS, Some(TOKEN), &[]).await;
    (provider, project, served)
}

/// SPEC 9: `run --server` shows the server's ask (a JSON Line) and, with no terminal to ask
/// on, denies it at once, as a local `run` does: the run completes stopped by the denial
/// (status 3) instead of hanging.
#[tokio::test(flavor = "multi_thread")]
async fn run_server_without_a_terminal_shows_the_ask_and_denies_it() {
    let (_provider, project, served) = serving_a_model_that_writes_t_txt().await;
    let client = run_server(&project, &served.base, &["--json", "Write t.txt"]);
    let done = common::finish(client).await;
    assert_eq!(done.code, Some(3), "{done:?}");
    let lines: Vec<Value> = done
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let ask = lines
        .iter()
        .find(|l| l["type"] == "ask")
        .expect("an ask line");
    assert_eq!(
        (ask["tool"].as_str(), ask["subject"].as_str()),
        (Some("write"), Some("t.txt"))
    );
    let answered = lines
        .iter()
        .find(|l| l["type"] == "ask_answered")
        .expect("the answer");
    assert_eq!(
        (answered["id"].clone(), answered["answer"].as_str()),
        (ask["id"].clone(), Some("deny"))
    );
    let last = lines.last().unwrap();
    assert_eq!(
        (last["outcome"].as_str(), last["stop_reason"].as_str()),
        (Some("completed"), Some("permission_denied")),
        "{last}"
    );
    assert!(!project.path().join("t.txt").exists());
}

/// A client that attaches to a run (the same RunId) whose ask is pending already hears of it
/// from the `asks` event that opens its stream, and denies it without a terminal. Before the
/// fix, that event's list was read from the wrong place and the client waited forever.
#[tokio::test(flavor = "multi_thread")]
async fn run_server_attaching_to_a_run_takes_the_ask_already_pending() {
    let (_provider, project, served) = serving_a_model_that_writes_t_txt().await;
    let prompt = "Write t.txt";
    let (status, v) = post(
        &served.base,
        "/v1/sessions/s1/prompts",
        json!({"prompt": prompt, "run_id": "a1"}),
    )
    .await;
    assert_eq!(status, 202, "{v}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while get(&served.base, "/v1/asks").await.1["asks"]
        .as_array()
        .is_none_or(Vec::is_empty)
    {
        assert!(Instant::now() < deadline, "the ask is pending");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let client = run_server(
        &project,
        &served.base,
        &["--json", "--run-id", "a1", prompt],
    );
    let done = common::finish(client).await;
    assert_eq!(done.code, Some(3), "{done:?}");
    let lines: Vec<Value> = done
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        lines
            .iter()
            .any(|l| l["type"] == "ask" && l["tool"] == "write"),
        "{lines:?}"
    );
    assert!(!project.path().join("t.txt").exists());
}

/// The server sends streamed text as `message_delta` events on top of what it sent; the
/// client rebuilds the answer from them and shows each piece as it comes (a client that
/// ignored them would see only the first and the final state).
#[tokio::test(flavor = "multi_thread")]
async fn run_server_shows_a_streamed_answer_piece_by_piece_from_deltas() {
    let answer: String = (0..30).map(|i| format!("word{i} ")).collect();
    let answer = answer.trim_end().to_owned();
    let provider = FakeProvider::anthropic(vec![Reply::Paced(paced_text(&answer, 60))]).await;
    let project = Project::new(&provider.base_url, "");
    let served = Served::start(&project, common::free_port(), SERVE_ARGS, Some(TOKEN), &[]).await;
    let mut events = Events::connect(&served.base, TOKEN, None).await;
    let client = run_server(&project, &served.base, &["--json", "Count"]);
    let done = common::finish(client).await;
    assert_eq!(done.code, Some(0), "{done:?}");
    let lines: Vec<Value> = done
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let texts: Vec<&str> = lines
        .iter()
        .filter(|l| l["type"] == "text")
        .map(|l| l["delta"].as_str().unwrap())
        .collect();
    assert_eq!(texts.concat(), answer);
    assert!(texts.len() >= 10, "30 words 60 ms apart: {texts:?}");
    assert_eq!(lines.last().unwrap()["text"], answer.as_str());
    // The server did send deltas.
    let mut deltas = 0;
    events
        .read_until(|f| {
            deltas += usize::from(f.event == "message_delta");
            f.event == "run_complete"
        })
        .await;
    assert!(deltas >= 10, "{deltas} message_delta events");
}

/// SPEC 9: on a terminal, `run --server` asks the server's question and sends the answer
/// typed: `y` runs the call once, and the run goes on to its answer.
#[tokio::test(flavor = "multi_thread")]
async fn run_server_on_a_terminal_asks_and_a_yes_runs_the_call() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let provider = FakeProvider::anthropic(vec![
        Reply::sse(tool_stream(
            "toolu_1",
            "write",
            &json!({"path": "t.txt", "content": "hi"}),
        )),
        Reply::sse(text_stream("Wrote it.")),
    ])
    .await;
    let project = Project::new(&provider.base_url, "");
    let served = Served::start(&project, common::free_port(), SERVE_ARGS, Some(TOKEN), &[]).await;
    // `script` gives the client a pseudo-terminal and passes what the test types to it.
    let command = format!(
        "{} run --server {} 'Write t.txt'",
        env!("CARGO_BIN_EXE_turnstile"),
        served.base
    );
    let mut child = tokio::process::Command::new("script")
        .args(["-q", "-e", "-c", &command, "/dev/null"])
        .current_dir(project.path())
        .env("TURNSTILE_SERVER_TOKEN", TOKEN)
        .env("HOME", project.path())
        .env_remove("RUST_LOG")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("script (util-linux) runs");
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut screen = String::new();
    let mut buf = [0u8; 4096];
    let deadline = Instant::now() + Duration::from_secs(30);
    while !screen.contains("May `write` run on `t.txt`?") {
        assert!(
            Instant::now() < deadline,
            "no question on the terminal: {screen}"
        );
        let n = tokio::time::timeout(Duration::from_secs(30), stdout.read(&mut buf))
            .await
            .expect("terminal output")
            .unwrap();
        assert!(n > 0, "the terminal closed: {screen}");
        screen.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    stdin.write_all(b"y\n").await.unwrap();
    stdin.flush().await.unwrap();
    let mut rest = String::new();
    tokio::time::timeout(Duration::from_secs(30), stdout.read_to_string(&mut rest))
        .await
        .expect("the run ends")
        .unwrap();
    let status = child.wait().await.unwrap();
    screen.push_str(&rest);
    assert_eq!(status.code(), Some(0), "{screen}");
    assert!(screen.contains("Wrote it."), "{screen}");
    assert_eq!(
        std::fs::read_to_string(project.path().join("t.txt")).unwrap(),
        "hi"
    );
}

/// A file limit too low to serve is refused at start, with a message that says how to raise
/// it (the server keeps descriptors for its store, tools and providers).
#[tokio::test(flavor = "multi_thread")]
async fn a_file_limit_too_low_to_serve_is_refused_at_start() {
    let provider = FakeProvider::anthropic(vec![Reply::sse(text_stream("hi"))]).await;
    let project = Project::new(&provider.base_url, "");
    let serve = format!(
        "ulimit -n 100 && exec {} serve --listen 127.0.0.1:{}",
        env!("CARGO_BIN_EXE_turnstile"),
        common::free_port()
    );
    let mut command = std::process::Command::new("sh");
    command
        .args(["-c", &serve])
        .current_dir(project.path())
        .env("HOME", project.path())
        .env("TURNSTILE_SERVER_TOKEN", TOKEN)
        .env_remove("RUST_LOG")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let done = common::finish(command.spawn().unwrap()).await;
    assert_eq!(done.code, Some(1), "{done:?}");
    assert!(
        done.stderr.contains("may open only 100 files") && done.stderr.contains("ulimit -n"),
        "{}",
        done.stderr
    );
}
