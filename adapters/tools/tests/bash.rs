//! `bash`: status and output, the output cap, and no process left behind by a timeout or an
//! abort (the whole process group is killed, background children included).

use std::time::{Duration, Instant};

use turnstile_core::{CallId, SessionId, ToolOutput};
use turnstile_host::{Tool, ToolCall};
use turnstile_tools::{Bash, Workspace};

fn bash() -> (tempfile::TempDir, Bash) {
    let dir = tempfile::tempdir().unwrap();
    let workspace = Workspace::new(dir.path()).unwrap();
    (dir, Bash { workspace, reaper: None })
}

fn call(input: serde_json::Value) -> ToolCall {
    ToolCall::new(SessionId::new("s"), CallId::new("c"), input.to_string())
}

async fn run(b: &Bash, input: serde_json::Value) -> ToolOutput {
    b.run(call(input)).await
}

/// True while any process of group `pgid` lives.
fn group_alive(pgid: i32) -> bool {
    nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pgid), None).is_ok()
}

/// Waits (5 s at most) for the command to have written its process group id.
async fn pgid_of(dir: &std::path::Path) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Ok(text) = std::fs::read_to_string(dir.join("pgid"))
            && let Ok(pgid) = text.trim().parse()
        {
            return pgid;
        }
        assert!(Instant::now() < deadline, "the command did not start");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn status_and_output_in_the_working_directory() {
    let (dir, b) = bash();
    std::fs::write(dir.path().join("f"), "content").unwrap();
    let out = run(&b, serde_json::json!({"command": "cat f; echo err >&2"})).await;
    assert_eq!((out.is_error, out.content.as_str()), (false, "exit 0\ncontent\n[stderr]\nerr\n"));
    let out = run(&b, serde_json::json!({"command": "exit 3"})).await;
    assert_eq!((out.is_error, out.content.as_str()), (true, "exit 3\n"));
}

#[tokio::test]
async fn long_output_is_cut_in_the_middle_with_a_note() {
    let (_dir, b) = bash();
    let out = run(
        &b,
        serde_json::json!({"command": "head -c 100000 /dev/zero | tr '\\0' a; echo; echo END"}),
    )
    .await;
    assert!(out.content.len() < 31_000, "{}", out.content.len());
    assert!(
        out.content.contains("bytes cut …]") && out.content.trim_end().ends_with("END"),
        "{}",
        &out.content[..80]
    );
}

#[tokio::test]
async fn a_timeout_kills_the_command_and_its_background_children() {
    let (dir, b) = bash();
    let cmd = "ps -o pgid= $$ > pgid; sleep 300 & sleep 300";
    let out = run(&b, serde_json::json!({"command": cmd, "timeout_ms": 300})).await;
    assert!(out.is_error && out.content.starts_with("timed out after 0.3 s"), "{out:?}");
    let pgid = pgid_of(dir.path()).await;
    gone(pgid, "the timeout").await;
}

/// Waits (5 s at most) until no process of group `pgid` is left; the signal was sent when the
/// call ended, the kernel and the reaping of orphans take a moment.
async fn gone(pgid: i32, after: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while group_alive(pgid) {
        assert!(Instant::now() < deadline, "a process of the group survived {after}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn an_abort_kills_the_command_and_its_background_children() {
    let (dir, b) = bash();
    let cmd = "ps -o pgid= $$ > pgid; sleep 300 & sleep 300";
    let running = b.run(call(serde_json::json!({"command": cmd})));
    let task = tokio::spawn(running);
    let pgid = pgid_of(dir.path()).await;
    assert!(group_alive(pgid));
    // The host aborts a call by dropping its future.
    task.abort();
    let _ = task.await;
    gone(pgid, "the abort").await;
}

#[tokio::test]
async fn a_reaper_kills_the_groups_a_killed_host_left_and_nothing_else() {
    let (dir, mut b) = bash();
    let records = tempfile::tempdir().unwrap();
    b.reaper = Some(turnstile_tools::Reaper::new(records.path()).unwrap());
    // A host killed mid-call neither drops nor finishes the call's future: forget it.
    let cmd = "ps -o pgid= $$ > pgid; sleep 300 & sleep 300";
    let mut call = Box::pin(b.run(call(serde_json::json!({"command": cmd}))));
    let poll = tokio::time::timeout(Duration::from_millis(300), &mut call).await;
    assert!(poll.is_err(), "still running");
    let pgid = pgid_of(dir.path()).await;
    std::mem::forget(call);
    assert!(group_alive(pgid));
    // A record of a live process with another start time (its id reused) is not killed.
    let me = std::process::id();
    std::fs::write(records.path().join(me.to_string()), "1").unwrap();

    let next = turnstile_tools::Reaper::new(records.path()).unwrap();
    assert_eq!(next.reap(), [pgid]);
    // The leader stays a zombie until this process, its parent, reaps it (a killed host's
    // children are reaped by init): wait until no member of the group still runs.
    let deadline = Instant::now() + Duration::from_secs(5);
    while running_members(pgid) > 0 {
        assert!(Instant::now() < deadline, "the group was killed");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(std::fs::read_dir(records.path()).unwrap().count(), 0, "every record is forgotten");
    assert!(next.reap().is_empty());
}

/// The processes of group `pgid` that are not zombies (from `/proc/<pid>/stat`: the state is
/// the first field after the command name, the group the third).
fn running_members(pgid: i32) -> usize {
    let Ok(entries) = std::fs::read_dir("/proc") else { return 0 };
    entries
        .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("stat")).ok())
        .filter(|stat| {
            let Some(close) = stat.rfind(')') else { return false };
            let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
            fields.get(2).and_then(|g| g.parse::<i32>().ok()) == Some(pgid)
                && fields.first() != Some(&"Z")
        })
        .count()
}
