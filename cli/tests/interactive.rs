//! `turnstile chat` on a terminal: the real binary in a pseudo-terminal (its own session, the pty
//! its controlling terminal) against the fake provider on 127.0.0.1, its screen read as a
//! terminal draws it. Keys are sent as a terminal sends them: `\r` Enter, `\x1b\r` Alt-Enter,
//! `\x1b` Escape, `\x03` Ctrl-C, `\x04` Ctrl-D.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{Read as _, Write as _};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::Project;
use portable_pty::{CommandBuilder, PtySize, native_pty_system};
use serde_json::json;
use turnstile_core::Outcome;
use turnstile_testkit::anthropic::{overloaded_event, text_opening, text_stream, tool_stream};
use turnstile_testkit::provider::{FakeProvider, Reply};

/// How long a screen may take to show what a test waits for.
const WAIT: Duration = Duration::from_secs(30);

/// The binary in a pseudo-terminal, and what its terminal shows.
struct Pty {
    child: Box<dyn portable_pty::Child + Send + Sync>,
    writer: Box<dyn std::io::Write + Send>,
    screen: Arc<Mutex<vt100::Parser>>,
    /// Kept open: the master's end closes the terminal.
    master: Box<dyn portable_pty::MasterPty + Send>,
}

impl Pty {
    /// `turnstile ARGS` in `project`, in a terminal `cols` columns wide and 60 rows high.
    fn spawn(project: &Project, args: &[&str], cols: u16) -> Pty {
        let rows = 60;
        let pair = native_pty_system()
            .openpty(PtySize {
                rows,
                cols,
                pixel_width: 0,
                pixel_height: 0,
            })
            .unwrap();
        let mut command = CommandBuilder::new(env!("CARGO_BIN_EXE_turnstile"));
        command.args(args);
        command.cwd(project.path());
        for name in [
            "TURNSTILE_CONFIG",
            "TURNSTILE_STORE",
            "TURNSTILE_MODEL",
            "RUST_LOG",
        ] {
            command.env_remove(name);
        }
        command.env("HOME", project.path());
        command.env_remove("XDG_CONFIG_HOME");
        command.env("TERM", "xterm-256color");
        let child = pair.slave.spawn_command(command).unwrap();
        drop(pair.slave);
        let nz = |n: u16| std::num::NonZero::new(n).unwrap();
        let screen = Arc::new(Mutex::new(vt100::Parser::new(nz(rows), nz(cols), 0)));
        let mut reader = pair.master.try_clone_reader().unwrap();
        let fed = screen.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                fed.lock().unwrap().process(&buf[..n]);
            }
        });
        let writer = pair.master.take_writer().unwrap();
        Pty {
            child,
            writer,
            screen,
            master: pair.master,
        }
    }

    /// Resizes the terminal (the process gets SIGWINCH) to `cols` columns.
    fn resize(&self, cols: u16) {
        let rows = self.screen.lock().unwrap().screen().size().0.get();
        let size = PtySize {
            rows,
            cols,
            pixel_width: 0,
            pixel_height: 0,
        };
        self.master.resize(size).unwrap();
        let nz = |n: u16| std::num::NonZero::new(n).unwrap();
        self.screen
            .lock()
            .unwrap()
            .screen_mut()
            .set_size(nz(rows), nz(cols));
    }

    /// What the terminal shows now (a line wrapped by the terminal is one line).
    fn shown(&self) -> String {
        self.screen.lock().unwrap().screen().contents()
    }

    /// The terminal's rows now, trailing blanks cut.
    fn rows(&self) -> Vec<String> {
        let parser = self.screen.lock().unwrap();
        let (_, cols) = parser.screen().size();
        parser
            .screen()
            .rows(0, cols.get())
            .map(|r| r.trim_end().to_owned())
            .collect()
    }

    /// Waits until the screen satisfies `ok`; panics with the screen after [`WAIT`].
    async fn wait(&self, what: &str, ok: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            let shown = self.shown();
            if ok(&shown) {
                return shown;
            }
            assert!(
                Instant::now() < deadline,
                "the screen never showed {what}:\n{shown}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until the screen shows `text`.
    async fn wait_for(&self, text: &str) -> String {
        self.wait(&format!("{text:?}"), |s| s.contains(text)).await
    }

    /// Sends keys, each write on its own (an Escape apart from what follows it).
    async fn send(&mut self, keys: &str) {
        self.writer.write_all(keys.as_bytes()).unwrap();
        self.writer.flush().unwrap();
        tokio::time::sleep(Duration::from_millis(150)).await;
    }

    /// Waits for the process to end; its exit status.
    async fn exit(mut self) -> u32 {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.exit_code();
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("the chat did not end:\n{}", self.shown());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// A tool call's stream whose end comes `ms` after its start (the step streams meanwhile).
fn slow_tool(id: &str, name: &str, input: &serde_json::Value, ms: u64) -> Reply {
    let bytes = tool_stream(id, name, input);
    let cut = bytes.windows(2).position(|w| w == b"\n\n").unwrap() + 2;
    Reply::Paced(vec![
        (0, bytes[..cut].to_vec()),
        (ms, bytes[cut..].to_vec()),
    ])
}

#[tokio::test(flavor = "multi_thread")]
async fn text_typed_while_a_step_streams_is_folded_into_the_next_request() {
    let provider = FakeProvider::anthropic(vec![
        slow_tool("t1", "ls", &json!({}), 4_000),
        Reply::sse(text_stream("Done looking.")),
    ])
    .await;
    let project = Project::new(&provider.base_url, "");
    std::fs::write(project.path().join("README.md"), "# hello\n").unwrap();
    let mut pty = Pty::spawn(&project, &["chat"], 100);
    pty.wait_for("Enter send").await;
    pty.send("What is here?\r").await;
    provider.wait_steps(1).await;
    pty.wait_for("working").await;
    pty.send("also read the README\r").await;
    pty.wait_for("(steering the running turn)").await;
    let shown = pty.wait_for("Done looking.").await;
    pty.wait("idle", |s| s.lines().any(|l| l.starts_with("idle")))
        .await;

    let steps = provider.steps();
    assert_eq!(steps.len(), 2, "{shown}");
    assert!(!steps[0].to_string().contains("also read the README"));
    assert!(
        steps[1].to_string().contains("also read the README"),
        "the steered text is in the next request: {}",
        steps[1]
    );
    assert!(shown.contains("→ ls"), "{shown}");

    // Ctrl-C clears a typed line, and twice on an empty idle line leaves.
    pty.send("half a thought").await;
    pty.wait_for("› half a thought").await;
    pty.send("\x03").await;
    pty.wait("the line cleared", |s| !s.contains("› half a thought"))
        .await;
    pty.send("\x03").await;
    pty.wait_for("Ctrl-C again to leave").await;
    pty.send("\x03").await;
    assert_eq!(pty.exit().await, 0);

    // The prompts typed are kept: the up arrow finds them in the next chat.
    let mut pty = Pty::spawn(&project, &["chat", "--continue"], 100);
    pty.wait_for("Enter send").await;
    pty.send("\x1b[A").await;
    pty.wait_for("› also read the README").await;
    pty.send("\x1b[A").await;
    pty.wait_for("› What is here?").await;
    pty.send("\x03").await; // clears the line
    pty.send("\x04").await;
    assert_eq!(pty.exit().await, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn escape_while_a_tool_runs_cancels_the_turn_and_the_next_prompt_runs() {
    let provider = FakeProvider::anthropic(vec![
        Reply::sse(tool_stream("t1", "bash", &json!({"command": "sleep 30"}))),
        Reply::sse(text_stream("Next answer.")),
    ])
    .await;
    let project = Project::new(&provider.base_url, "");
    let mut pty = Pty::spawn(&project, &["chat", "--yolo"], 100);
    pty.wait_for("Enter send").await;
    pty.send("run the long thing\r").await;
    pty.wait_for("running bash").await;
    pty.wait_for("Esc cancel").await;
    let started = Instant::now();
    pty.send("\x1b").await;
    // A second Escape while the cancel is under way changes nothing more.
    pty.send("\x1b").await;
    pty.wait_for("[cancelled]").await;
    assert!(
        started.elapsed() < Duration::from_secs(25),
        "the cancel did not wait for the 30 s command"
    );
    pty.send("and now?\r").await;
    let shown = pty.wait_for("Next answer.").await;
    assert!(
        shown.find("[cancelled]") < shown.find("› and now?"),
        "{shown}"
    );
    assert_eq!(provider.steps().len(), 2);
    pty.send("\x04").await;
    assert_eq!(pty.exit().await, 0);

    // The store agrees: the first turn cancelled, the second completed.
    let runs = project.reader().runs().unwrap();
    let ends: Vec<(String, Option<Outcome>)> = runs
        .iter()
        .map(|r| {
            (
                r.prompt.clone(),
                r.completion.as_ref().map(|(_, c)| c.outcome),
            )
        })
        .collect();
    assert_eq!(
        ends,
        [
            ("run the long thing".to_owned(), Some(Outcome::Cancelled)),
            ("and now?".to_owned(), Some(Outcome::Completed)),
        ]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_question_answered_always_is_not_asked_again_in_the_session() {
    let provider = FakeProvider::anthropic(vec![
        Reply::sse(tool_stream("t1", "bash", &json!({"command": "echo one"}))),
        Reply::sse(tool_stream("t2", "bash", &json!({"command": "echo two"}))),
        Reply::sse(text_stream("Both ran.")),
        Reply::sse(tool_stream(
            "t3",
            "write",
            &json!({"path": "new.txt", "content": "x"}),
        )),
    ])
    .await;
    let project = Project::new(&provider.base_url, "");
    let mut pty = Pty::spawn(&project, &["chat"], 100);
    pty.wait_for("Enter send").await;
    pty.send("run both\r").await;
    pty.wait_for("y once · a always").await;
    pty.wait_for("waiting for your answer").await;
    pty.send("a").await;
    let shown = pty.wait_for("Both ran.").await;
    assert_eq!(
        shown.matches("`bash` asks to run").count(),
        1,
        "asked once:\n{shown}"
    );
    assert!(shown.contains("allowed `bash` for this session"), "{shown}");
    let steps = provider.steps();
    assert!(steps[1].to_string().contains("one"), "{}", steps[1]);
    assert!(steps[2].to_string().contains("two"), "{}", steps[2]);

    // Another tool asks; Escape cancels the turn and withdraws the question at once.
    pty.send("now write a file\r").await;
    pty.wait_for("`write` asks to run").await;
    pty.wait_for("y once · a always").await;
    pty.send("\x1b").await;
    pty.wait_for("[cancelled]").await;
    pty.wait("the question gone", |s| !s.contains("y once · a always"))
        .await;
    assert!(!project.path().join("new.txt").exists());
    pty.send("\x04").await;
    assert_eq!(pty.exit().await, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_narrow_terminal_wraps_the_answer_and_cuts_the_bottom_rows() {
    let answer = "The quick brown fox jumps over the lazy dog and keeps running far away.";
    let provider = FakeProvider::anthropic(vec![Reply::sse(text_stream(answer))]).await;
    let project = Project::new(&provider.base_url, "");
    let mut pty = Pty::spawn(&project, &["chat"], 24);
    pty.wait_for("Enter send").await;
    pty.send("please describe the whole repository in detail\r")
        .await;
    pty.wait_for(answer).await;
    pty.wait("idle", |s| s.lines().any(|l| l.starts_with("idle")))
        .await;
    // A long line typed scrolls in the input row instead of wrapping it.
    pty.send("a second question that is long").await;
    let shown = pty.wait_for("is long").await;
    let rows = pty.rows();
    assert_eq!(
        rows.iter().filter(|r| r.starts_with("Enter send")).count(),
        1,
        "the footer is drawn once:\n{shown}"
    );
    assert_eq!(
        rows.iter().filter(|r| r.starts_with("idle")).count(),
        1,
        "the status line is drawn once:\n{shown}"
    );
    let input = rows.iter().rev().find(|r| r.starts_with("›")).unwrap();
    assert!(input.ends_with("is long"), "{input}");
    assert!(shown.contains("please describe the whole repository in detail"));

    // Wider again: the bottom rows are drawn whole, once.
    pty.resize(60);
    pty.wait("the whole footer", |s| {
        s.contains("Enter send · Ctrl-D leave · /help")
    })
    .await;
    let rows = pty.rows();
    assert_eq!(
        rows.iter().filter(|r| r.starts_with("Enter send")).count(),
        1,
        "{rows:#?}"
    );
    pty.send("\x03").await;
    pty.send("\x04").await;
    assert_eq!(pty.exit().await, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_status_line_counts_a_retry_down_and_then_shows_the_answer() {
    let mut failing = text_opening("Half an ans");
    failing.extend_from_slice(&overloaded_event());
    let provider = FakeProvider::anthropic(vec![
        Reply::sse(failing),
        Reply::sse(text_stream("The whole answer.")),
    ])
    .await;
    let project = Project::new(&provider.base_url, "retry_backoff = [3]");
    let mut pty = Pty::spawn(&project, &["chat"], 100);
    pty.wait_for("Enter send").await;
    pty.send("hello\r").await;
    pty.wait("the countdown", |s| {
        s.lines()
            .any(|l| l.starts_with("retrying in ") && l.contains(" s (Overloaded)"))
    })
    .await;
    let shown = pty.wait_for("The whole answer.").await;
    pty.wait("idle", |s| s.lines().any(|l| l.starts_with("idle")))
        .await;
    assert!(
        shown.contains("[retrying in 3 s (attempt 2): Overloaded]"),
        "{shown}"
    );
    pty.send("\x04").await;
    assert_eq!(pty.exit().await, 0);
}
