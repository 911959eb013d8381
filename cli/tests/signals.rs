//! Ctrl-C and kill -9 of a real `turnstile run`: the first Ctrl-C cancels the run and waits for
//! its RunComplete (status 130, no process of the `bash` tool left), a second exits at once;
//! after a kill -9, a rerun with the same RunId attaches to the recovered run (status 2) and
//! `--continue` sends the provider a repaired, protocol-legal history.

mod common;

use std::time::Duration;

use common::{Project, group_gone, number_in, protocol_legal};
use nix::sys::signal::Signal;
use serde_json::json;
use turnstile_testkit::anthropic::{text_stream, tool_stream};
use turnstile_testkit::provider::{FakeProvider, Reply};

/// A command that writes its process group id (the shell leads its group), then runs for five
/// minutes.
const LONG: &str = "echo $$ > pgid; sleep 300";

#[tokio::test(flavor = "multi_thread")]
async fn the_first_ctrl_c_cancels_the_run_and_kills_the_tool() {
    let provider = FakeProvider::anthropic(vec![
        Reply::sse(tool_stream("toolu_1", "bash", &json!({"command": LONG}))),
        Reply::sse(text_stream("never asked")),
    ])
    .await;
    let project = Project::new(&provider.base_url, "");
    let child = project.spawn(&["run", "--yolo", "--json", "Wait a long time"]);
    let pid = child.id();
    let pgid = number_in(&project.path().join("pgid")).await;
    common::signal(pid, Signal::SIGINT);
    let done = common::finish(child).await;
    assert_eq!(done.code, Some(130), "{done:?}");
    let last: serde_json::Value =
        serde_json::from_str(done.stdout.lines().last().unwrap()).unwrap();
    assert_eq!(
        (last["type"].as_str(), last["outcome"].as_str()),
        (Some("run_complete"), Some("cancelled"))
    );
    assert!(
        done.stderr.contains("cancelling the run"),
        "{}",
        done.stderr
    );
    assert!(
        group_gone(pgid).await,
        "the bash tool's process group was killed"
    );
    assert_eq!(provider.steps().len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_second_ctrl_c_exits_at_once() {
    // `write` is left to finish on a cancel once its work began (SPEC 4.9), and this one
    // blocks: its file is a named pipe that the test holds open without writing, so the
    // cancelled run would wait out its 5 s grace. The second Ctrl-C does not wait.
    let provider = FakeProvider::anthropic(vec![Reply::sse(tool_stream(
        "toolu_1",
        "write",
        &json!({"path": "pipe", "content": "b"}),
    ))])
    .await;
    let project = Project::new(&provider.base_url, "[permissions]\nallow = [\"write\"]\n");
    let pipe = project.path().join("pipe");
    let made = std::process::Command::new("mkfifo")
        .arg(&pipe)
        .status()
        .unwrap();
    assert!(made.success(), "mkfifo");
    let child = project.spawn(&["run", "Write the pipe"]);
    let pid = child.id();
    // The write's work began once it opened the pipe to read it: a writer can open it then.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let held = loop {
        use std::os::unix::fs::OpenOptionsExt as _;
        let open = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(nix::libc::O_NONBLOCK)
            .open(&pipe);
        if let Ok(f) = open {
            break f;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the write never began"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    common::signal(pid, Signal::SIGINT);
    tokio::time::sleep(Duration::from_millis(300)).await;
    common::signal(pid, Signal::SIGINT);
    let done = common::finish(child).await;
    drop(held);
    assert_eq!(done.code, Some(130), "{done:?}");
    assert!(
        done.stderr.contains("exiting without waiting"),
        "{}",
        done.stderr
    );
    assert_eq!(done.stdout, "", "no RunComplete was waited for");
}

#[tokio::test(flavor = "multi_thread")]
async fn after_a_kill_9_the_run_is_interrupted_and_the_next_turn_gets_a_repaired_history() {
    let provider = FakeProvider::anthropic(vec![
        Reply::sse(tool_stream("toolu_1", "bash", &json!({"command": LONG}))),
        Reply::sse(text_stream("The command was interrupted.")),
    ])
    .await;
    let project = Project::new(&provider.base_url, "");
    let args = [
        "run",
        "--yolo",
        "--run-id",
        "crash-1",
        "Run the long command",
    ];
    let child = project.spawn(&args);
    let pgid = number_in(&project.path().join("pgid")).await;
    // The run records the group right after it spawned it; the shell may write its pid first.
    let record = project
        .path()
        .join(".turnstile")
        .join("running")
        .join(pgid.to_string());
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !record.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the run did not record its command"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    common::signal(child.id(), Signal::SIGKILL);
    let done = common::finish(child).await;
    assert_eq!(done.code, None, "killed by a signal");
    // A SIGKILLed host cannot kill its tool's process group: the command runs on.
    assert!(
        common::group_alive(pgid),
        "the command outlived the killed run"
    );

    // The same request again attaches to the run, which recovery ended `interrupted`; the
    // new run, owner of the store, first kills the command the killed one left running.
    let done = project.run(&args).await;
    assert!(
        group_gone(pgid).await,
        "the next start killed the orphaned command"
    );
    assert!(
        done.stderr
            .contains("killed 1 command(s) a previous process of this store left running"),
        "{}",
        done.stderr
    );
    assert_eq!(done.code, Some(2), "{done:?}");
    assert!(
        done.stderr
            .contains("The process stopped before this request finished."),
        "{}",
        done.stderr
    );
    assert_eq!(
        provider.steps().len(),
        1,
        "attaching asked the provider nothing"
    );

    let done = project.run(&["run", "--continue", "What happened?"]).await;
    assert_eq!(done.code, Some(0), "{done:?}");
    assert_eq!(done.stdout, "The command was interrupted.\n");
    let steps = provider.steps();
    assert_eq!(steps.len(), 2);
    protocol_legal(&steps[1]).unwrap();
    let messages = steps[1]["messages"].as_array().unwrap();
    let repaired = messages
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .find(|b| b["type"] == "tool_result")
        .unwrap_or_else(|| {
            panic!(
                "the interrupted call has a result: {}",
                steps[1]["messages"]
            )
        });
    assert_eq!(repaired["tool_use_id"], "toolu_1");
    assert!(
        repaired
            .to_string()
            .contains("tool call was interrupted and did not produce a result"),
        "{repaired}"
    );
    assert!(
        messages
            .last()
            .unwrap()
            .to_string()
            .contains("What happened?"),
        "the new prompt comes last"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_store_in_use_is_named() {
    let provider = FakeProvider::anthropic(vec![Reply::Hang]).await;
    let project = Project::new(&provider.base_url, "");
    let first = project.spawn(&["run", "Hang"]);
    // The first run started: its step reached the provider.
    provider.wait_steps(1).await;
    let done = project.run(&["run", "Another"]).await;
    assert_eq!(done.code, Some(1), "{done:?}");
    assert!(
        done.stderr
            .contains("store is in use by another turnstile process"),
        "{}",
        done.stderr
    );
    assert!(
        done.stderr.contains(".turnstile/store.db"),
        "names the file: {}",
        done.stderr
    );
    common::signal(first.id(), Signal::SIGINT);
    assert_eq!(common::finish(first).await.code, Some(130));
}
