//! With stderr a terminal (a pseudo-terminal here), `run` shows the text as it streams and a
//! line per tool call, and a retry's reset restarts the text instead of appending the new
//! attempt to the failed one (G-11). stdout, a pipe, still gets only the answer.

mod common;

use std::io::Read as _;
use std::process::Stdio;

use common::Project;
use serde_json::json;
use turnstile_testkit::anthropic::{overloaded_event, text_opening, text_stream, tool_stream};
use turnstile_testkit::provider::{FakeProvider, Reply};

/// `turnstile run "What is here?"` with stderr a pseudo-terminal: how it ended, and what the
/// terminal showed.
async fn run_on_a_terminal(project: &Project) -> (common::Done, String) {
    let pty = nix::pty::openpty(None, None).unwrap();
    let mut command = project.command(&["run", "What is here?"]);
    command.stderr(Stdio::from(pty.slave));
    let child = command.spawn().unwrap();
    // The child holds the terminal's other end now; ours was moved into the command, which
    // is dropped here, so the terminal ends when the child exits.
    drop(command);
    let mut master = std::fs::File::from(pty.master);
    let screen = tokio::task::spawn_blocking(move || {
        let mut all = Vec::new();
        let mut buf = [0u8; 4096];
        // EIO once the child closed the last descriptor of the terminal.
        while let Ok(n) = master.read(&mut buf) {
            if n == 0 {
                break;
            }
            all.extend_from_slice(&buf[..n]);
        }
        String::from_utf8_lossy(&all).into_owned()
    });
    let done = common::finish(child).await;
    (done, screen.await.unwrap())
}

#[tokio::test(flavor = "multi_thread")]
async fn live_text_on_a_terminal_restarts_after_a_retry_reset() {
    let provider = FakeProvider::anthropic(vec![
        Reply::sse(tool_stream("toolu_1", "ls", &json!({}))),
        // Half an answer, committed (the pause is longer than the 33 ms debounce), then a
        // retryable error: the next attempt's text replaces it.
        Reply::Paced(vec![
            (0, text_opening("Half an ans")),
            (400, overloaded_event()),
        ]),
        Reply::sse(text_stream("The whole answer.")),
    ])
    .await;
    let project = Project::new(&provider.base_url, "");
    let (done, screen) = run_on_a_terminal(&project).await;
    assert_eq!(done.code, Some(0), "{done:?}\n{screen}");
    assert_eq!(
        done.stdout, "The whole answer.\n",
        "stdout is the answer only"
    );
    let at = |needle: &str| {
        screen
            .find(needle)
            .unwrap_or_else(|| panic!("{needle:?} in {screen:?}"))
    };
    let (tool, half, retry, restart, whole) = (
        at("→ ls {}"),
        at("Half an ans"),
        at("[retrying in"),
        at("[the answer restarts]"),
        at("The whole answer."),
    );
    assert!(
        tool < half && half < retry && retry < restart && restart < whole,
        "{screen:?}"
    );
    assert!(
        !screen.contains("Half an ansThe whole"),
        "the new attempt is not appended: {screen:?}"
    );
}

/// The failed attempt's text and its error arrive together (within the store's 33 ms
/// debounce): the text is shown before the retry line that retries it, not after it.
#[tokio::test(flavor = "multi_thread")]
async fn a_failed_attempts_text_comes_before_its_retry_line() {
    let mut failing = text_opening("Half an ans");
    failing.extend_from_slice(&overloaded_event());
    let provider = FakeProvider::anthropic(vec![
        Reply::sse(failing),
        Reply::sse(text_stream("The whole answer.")),
    ])
    .await;
    let project = Project::new(&provider.base_url, "retry_backoff = [0.3]");
    let (done, screen) = run_on_a_terminal(&project).await;
    assert_eq!(done.code, Some(0), "{done:?}\n{screen}");
    let at = |needle: &str| {
        screen
            .find(needle)
            .unwrap_or_else(|| panic!("{needle:?} in {screen:?}"))
    };
    let (half, retry, whole) = (
        at("Half an ans"),
        at("[retrying in 0.3 s (attempt 2): Overloaded]"),
        at("The whole answer."),
    );
    assert!(half < retry && retry < whole, "{screen:?}");
}
