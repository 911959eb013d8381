//! `turnstile chat` without a terminal: every line of stdin a prompt run to its end, its
//! answer on stdout; slash commands; the conversation carries over from prompt to prompt.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::Write as _;
use std::process::Stdio;

use common::{Project, finish};
use turnstile_testkit::anthropic::text_stream;
use turnstile_testkit::provider::{FakeProvider, Reply};

/// Runs `turnstile chat ARGS` with `input` on stdin.
async fn chat(project: &Project, args: &[&str], input: &str) -> common::Done {
    let mut all = vec!["chat"];
    all.extend_from_slice(args);
    let mut command = project.command(&all);
    command.stdin(Stdio::piped());
    let mut child = command.spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    finish(child).await
}

/// The user messages a model request carried, in order.
fn user_texts(body: &serde_json::Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| {
            let c = &m["content"];
            c.as_str().map(str::to_owned).or_else(|| {
                c.as_array()?
                    .iter()
                    .find_map(|b| b["text"].as_str().map(str::to_owned))
            })
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn each_line_is_a_prompt_of_one_session_and_slash_commands_answer() {
    let provider = FakeProvider::anthropic(vec![
        Reply::sse(text_stream("Two files.")),
        Reply::sse(text_stream("One test.")),
        Reply::sse(text_stream("Fresh start.")),
    ])
    .await;
    let project = Project::new(&provider.base_url, "");
    let input = "What is here?\n\n/frobnicate\nAnd the tests?\n/history\n/sessions\n/new\nHello\n/quit\nnever read\n";
    let done = chat(&project, &[], input).await;
    assert_eq!(done.code, Some(0), "{done:?}");
    // The answers on stdout, in order, with the listings the commands asked for.
    let out = &done.stdout;
    let at = |s: &str| {
        out.find(s)
            .unwrap_or_else(|| panic!("{s:?} in stdout:\n{out}"))
    };
    assert!(
        at("Two files.") < at("One test.") && at("One test.") < at("Fresh start."),
        "{out}"
    );
    assert!(
        at("One test.") < at("session ") && at("session ") < at("ID  "),
        "{out}"
    );
    assert!(!out.contains("never read"));
    assert!(
        done.stderr.contains("unknown command /frobnicate"),
        "{}",
        done.stderr
    );
    assert!(done.stderr.contains("new session "), "{}", done.stderr);
    // The second prompt saw the first; /new started over; /quit ended it.
    let steps = provider.steps();
    assert_eq!(
        steps.len(),
        3,
        "one request per prompt, nothing after /quit"
    );
    assert_eq!(user_texts(&steps[1]), ["What is here?", "And the tests?"]);
    assert_eq!(user_texts(&steps[2]), ["Hello"]);
    let sessions = project.reader().activity(false).unwrap();
    assert_eq!(sessions.len(), 2, "two sessions: before and after /new");
}

#[tokio::test(flavor = "multi_thread")]
async fn resume_continues_a_session_by_a_prefix_of_its_id() {
    let provider = FakeProvider::anthropic(vec![
        Reply::sse(text_stream("First.")),
        Reply::sse(text_stream("Second.")),
    ])
    .await;
    let project = Project::new(&provider.base_url, "");
    let done = chat(&project, &[], "Remember 42.\n").await;
    assert_eq!(done.code, Some(0), "{done:?}");
    let id = project.reader().activity(false).unwrap()[0]
        .row
        .id
        .as_str()
        .to_owned();
    let input = format!("/resume {}\nWhat was the number?\n", &id[..8]);
    let done = chat(&project, &[], &input).await;
    assert_eq!(done.code, Some(0), "{done:?}");
    assert!(
        done.stderr.contains(&format!("resumed session {id}")),
        "{}",
        done.stderr
    );
    let steps = provider.steps();
    assert_eq!(
        user_texts(&steps[1]),
        ["Remember 42.", "What was the number?"]
    );
    // An unknown session is said, and the chat goes on in its own.
    let done = chat(&project, &[], "/resume nope\n").await;
    assert_eq!(done.code, Some(0));
    assert!(
        done.stderr.contains("/resume: no session `nope`"),
        "{}",
        done.stderr
    );
    // --session with an unknown id does not start.
    let done = chat(&project, &["--session", "nope"], "").await;
    assert_eq!(done.code, Some(64), "{done:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn no_command_without_a_terminal_says_what_to_do() {
    let project = Project::new("http://127.0.0.1:9", "");
    let done = project.run(&[]).await;
    assert_eq!(done.code, Some(64), "{done:?}");
    assert!(
        done.stderr.contains("no command given") && done.stderr.contains("turnstile chat"),
        "{}",
        done.stderr
    );
}
