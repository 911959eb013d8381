//! `turnstile run` end to end: the real binary against a provider server on 127.0.0.1, with
//! the real tools in a scratch working directory and the real store. Every exit status of
//! SPEC 9 comes from a real run.

mod common;

use common::{Project, last_results, protocol_legal};
use serde_json::json;
use turnstile_host::store::Reader;
use turnstile_testkit::anthropic::{recorded, text_stream, tool_stream};
use turnstile_testkit::provider::{FakeProvider, Reply};

const ALLOW: &str = "[permissions]\nallow = [\"edit\", \"bash(cat *)\"]\n";

#[tokio::test(flavor = "multi_thread")]
async fn a_run_views_edits_and_runs_a_command() {
    let provider = FakeProvider::anthropic(vec![
        Reply::sse(tool_stream(
            "toolu_1",
            "view",
            &json!({"path": "hello.txt"}),
        )),
        Reply::sse(tool_stream(
            "toolu_2",
            "edit",
            &json!({"path": "hello.txt", "old_string": "world", "new_string": "turnstile"}),
        )),
        Reply::sse(tool_stream(
            "toolu_3",
            "bash",
            &json!({"command": "cat hello.txt"}),
        )),
        Reply::sse(text_stream("Done: hello.txt now greets turnstile.")),
    ])
    .await;
    let project = Project::new(&provider.base_url, ALLOW);
    std::fs::write(project.path().join("hello.txt"), "hello world\n").unwrap();

    let done = project
        .run(&["run", "Make hello.txt greet turnstile"])
        .await;
    assert_eq!(done.code, Some(0), "{done:?}");
    assert_eq!(done.stdout, "Done: hello.txt now greets turnstile.\n");
    assert_eq!(
        done.stderr, "",
        "stderr is not a terminal: nothing live on it"
    );
    assert_eq!(
        std::fs::read_to_string(project.path().join("hello.txt")).unwrap(),
        "hello turnstile\n"
    );

    let steps = provider.steps();
    assert_eq!(steps.len(), 4, "one request per step");
    for s in &steps {
        protocol_legal(s).unwrap();
        let tools: Vec<&str> = s["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            tools,
            [
                "agent",
                "bash",
                "edit",
                "glob",
                "grep",
                "ls",
                "multiedit",
                "view",
                "write"
            ]
        );
    }
    let viewed = last_results(&steps[1]);
    assert!(viewed[0].1.contains("hello world"), "{viewed:?}");
    let ran = last_results(&steps[3]);
    assert_eq!(ran[0].0, "toolu_3");
    assert!(
        ran[0].1.contains("hello turnstile"),
        "the command ran on the edited file: {ran:?}"
    );

    // The store holds the conversation: the prompt, four steps, three results.
    let reader = Reader::open(&project.store()).unwrap();
    let sessions = reader.activity(false).unwrap();
    assert_eq!(sessions.len(), 1);
    assert_eq!(sessions[0].row.title.as_deref(), Some("A test title"));
    let messages = reader.messages(&sessions[0].row.id).unwrap();
    let results: usize = messages.iter().map(|m| m.results.len()).sum();
    assert_eq!((messages.len(), results), (5, 3));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_recorded_tool_stream_replays_and_an_unknown_tool_is_a_result() {
    let case = "TestAnthropicCommon__claude-sonnet-4__tool_streaming";
    let provider = FakeProvider::anthropic(vec![
        Reply::sse(recorded(case, 0)),
        Reply::sse(recorded(case, 1)),
    ])
    .await;
    let project = Project::new(&provider.base_url, "");
    let done = project
        .run(&["run", "What is the weather in Florence?"])
        .await;
    assert_eq!(done.code, Some(0), "{done:?}");
    assert!(
        done.stdout
            .starts_with("The current weather in Florence, Italy shows"),
        "{done:?}"
    );
    assert!(done.stdout.ends_with('\n') && !done.stdout.ends_with("\n\n"));
    let steps = provider.steps();
    assert_eq!(steps.len(), 2);
    protocol_legal(&steps[1]).unwrap();
    assert_eq!(
        last_results(&steps[1]),
        [(
            "toolu_01N2eM4V43kGCDkq2Lw7ChWQ".to_owned(),
            "tool not found: weather".to_owned()
        )]
    );
}

/// The JSON Lines of a `--json` run.
fn lines(stdout: &str) -> Vec<serde_json::Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn json_lines_show_a_retry_as_its_own_event_and_end_with_the_run_complete() {
    let overloaded =
        r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
    let provider = FakeProvider::anthropic(vec![
        Reply::json(529, &[("retry-after-ms", "50")], overloaded),
        Reply::sse(tool_stream("toolu_1", "ls", &json!({}))),
        Reply::sse(text_stream("Two files.")),
    ])
    .await;
    let project = Project::new(&provider.base_url, "");
    let done = project
        .run(&["run", "--json", "--run-id", "json-1", "What is here?"])
        .await;
    assert_eq!(done.code, Some(0), "{done:?}");
    let events = lines(&done.stdout);
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types.first(), Some(&"accepted"), "{types:?}");
    assert_eq!(types.last(), Some(&"run_complete"), "{types:?}");
    assert_eq!(types.iter().filter(|t| **t == "run_complete").count(), 1);
    // The run's usage: both steps' tokens as the provider reported them (100 input and 20
    // output tokens a step; the failed attempt reported none), at this model's prices (none).
    assert_eq!(
        events.last().unwrap()["usage"],
        json!({"prompt_tokens": 200, "completion_tokens": 40, "cost_micros": 0})
    );
    let retry = events
        .iter()
        .find(|e| e["type"] == "retry")
        .expect("a retry event");
    assert_eq!(
        (retry["attempt"].as_u64(), retry["delay_ms"].as_u64()),
        (Some(2), Some(50))
    );
    assert!(
        retry["reason"].as_str().unwrap().contains("Overloaded"),
        "{retry}"
    );
    let call = events
        .iter()
        .find(|e| e["type"] == "tool_call")
        .expect("a tool call");
    assert_eq!(
        (call["name"].as_str(), call["call"].as_str()),
        (Some("ls"), Some("toolu_1"))
    );
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "tool_result" && e["call"] == "toolu_1")
    );
    let text: String = events
        .iter()
        .filter(|e| e["type"] == "text")
        .map(|e| e["delta"].as_str().unwrap())
        .collect();
    assert!(text.ends_with("Two files."), "{text:?}");
    let end = events.last().unwrap();
    assert_eq!(end["run_id"], "json-1");
    assert_eq!(end["outcome"], "completed");
    assert_eq!(end["stop_reason"], "end_turn");
    assert_eq!(end["text"], "Two files.");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_denied_call_ends_the_run_with_status_3_and_says_why() {
    let provider = FakeProvider::anthropic(vec![
        Reply::sse(tool_stream(
            "toolu_1",
            "bash",
            &json!({"command": "make deploy"}),
        )),
        Reply::sse(text_stream("never asked")),
    ])
    .await;
    let project = Project::new(&provider.base_url, "");
    let done = project.run(&["run", "Deploy it"]).await;
    assert_eq!(done.code, Some(3), "{done:?}");
    assert_eq!(
        done.stdout, "Using bash.\n",
        "the answer is the last message's text"
    );
    assert!(
        done.stderr
            .contains("the run stopped: a tool call was denied"),
        "{}",
        done.stderr
    );
    assert!(
        done.stderr.contains("denied: `bash` on `make deploy`"),
        "{}",
        done.stderr
    );
    assert!(
        done.stderr.contains("--yolo"),
        "says how to allow it: {}",
        done.stderr
    );
    assert_eq!(provider.steps().len(), 1, "the denial ended the turn");

    // With --yolo the same call runs.
    let provider = FakeProvider::anthropic(vec![
        Reply::sse(tool_stream(
            "toolu_1",
            "bash",
            &json!({"command": "echo deployed"}),
        )),
        Reply::sse(text_stream("Deployed.")),
    ])
    .await;
    let project = Project::new(&provider.base_url, "");
    let done = project.run(&["run", "--yolo", "Deploy it"]).await;
    assert_eq!(
        (done.code, done.stdout.as_str()),
        (Some(0), "Deployed.\n"),
        "{done:?}"
    );
    assert!(last_results(&provider.steps()[1])[0].1.contains("deployed"));
}

#[tokio::test(flavor = "multi_thread")]
async fn hooks_block_a_call_or_halt_the_turn() {
    let block = "[[hooks.pre_tool]]\ncommand = [\"sh\", \"-c\", \"echo 'no listing' >&2; exit 2\"]\ntools = \"ls\"\n\
                 [[hooks.pre_tool]]\ncommand = [\"sh\", \"-c\", \"echo 'halt now' >&2; exit 49\"]\ntools = \"grep\"\n";
    let provider = FakeProvider::anthropic(vec![
        Reply::sse(tool_stream("toolu_1", "ls", &json!({}))),
        Reply::sse(tool_stream("toolu_2", "grep", &json!({"pattern": "x"}))),
        Reply::sse(text_stream("never asked")),
    ])
    .await;
    let project = Project::new(&provider.base_url, block);
    let done = project.run(&["run", "Look around"]).await;
    assert_eq!(done.code, Some(3), "{done:?}");
    assert!(
        done.stderr.contains("a hook halted the turn"),
        "{}",
        done.stderr
    );
    let steps = provider.steps();
    assert_eq!(
        steps.len(),
        2,
        "the block let the turn go on; the halt ended it"
    );
    assert_eq!(
        last_results(&steps[1]),
        [(
            "toolu_1".to_owned(),
            "Tool call blocked by hook. Reason: no listing".to_owned()
        )]
    );
    let reader = Reader::open(&project.store()).unwrap();
    let session = reader.activity(false).unwrap()[0].row.id.clone();
    let results: Vec<String> = reader
        .messages(&session)
        .unwrap()
        .iter()
        .flat_map(|m| m.results.iter().map(|r| r.content.clone()))
        .collect();
    assert_eq!(
        results.last().map(String::as_str),
        Some("Turn halted by hook. Reason: halt now")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_provider_error_fails_the_run_with_status_1() {
    let bad = r#"{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens is too large"}}"#;
    let provider = FakeProvider::anthropic(vec![Reply::json(400, &[], bad)]).await;
    let project = Project::new(&provider.base_url, "");
    let done = project.run(&["run", "Hi"]).await;
    assert_eq!(done.code, Some(1), "{done:?}");
    assert_eq!(done.stdout, "\n", "a failed run's text is empty");
    assert!(done.stderr.contains("the run failed: "), "{}", done.stderr);
    assert!(
        done.stderr.contains("max_tokens is too large"),
        "{}",
        done.stderr
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn rejected_runs_and_bad_usage_exit_64() {
    let provider = FakeProvider::anthropic(vec![Reply::sse(text_stream("First."))]).await;
    let project = Project::new(&provider.base_url, "");
    let done = project.run(&["run", ""]).await;
    assert_eq!(done.code, Some(64), "{done:?}");
    assert!(done.stderr.contains("prompt is empty"), "{}", done.stderr);

    assert_eq!(
        project
            .run(&["run", "--run-id", "r1", "First prompt"])
            .await
            .code,
        Some(0)
    );
    let done = project
        .run(&["run", "--run-id", "r1", "Another prompt"])
        .await;
    assert_eq!(done.code, Some(64), "{done:?}");
    assert!(
        done.stderr
            .contains("run id r1 is already used by a different request"),
        "{}",
        done.stderr
    );

    let done = project.run(&["run"]).await;
    assert_eq!(
        done.code,
        Some(64),
        "a missing prompt is bad usage: {done:?}"
    );
    let done = project
        .run(&["run", "--session", "a", "--continue", "x"])
        .await;
    assert_eq!(done.code, Some(64), "{done:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_prompt_can_come_from_stdin_and_a_session_continues() {
    use std::io::Write as _;
    let provider = FakeProvider::anthropic(vec![
        Reply::sse(text_stream("One.")),
        Reply::sse(text_stream("Two.")),
        Reply::sse(text_stream("Three.")),
    ])
    .await;
    let project = Project::new(&provider.base_url, "");
    let mut child = project
        .command(&["run", "-"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"the prompt from stdin\n")
        .unwrap();
    let done = common::finish(child).await;
    assert_eq!(
        (done.code, done.stdout.as_str()),
        (Some(0), "One.\n"),
        "{done:?}"
    );
    assert!(
        provider.steps()[0]["messages"]
            .to_string()
            .contains("the prompt from stdin")
    );

    let done = project.run(&["run", "--continue", "And then?"]).await;
    assert_eq!(
        (done.code, done.stdout.as_str()),
        (Some(0), "Two.\n"),
        "{done:?}"
    );
    let second = &provider.steps()[1];
    assert_eq!(
        second["messages"].as_array().unwrap().len(),
        3,
        "the first exchange, then this prompt"
    );

    let sessions = Reader::open(&project.store())
        .unwrap()
        .activity(false)
        .unwrap();
    assert_eq!(sessions.len(), 1, "--continue used the same session");
    let id = sessions[0].row.id.as_str().to_owned();
    let done = project.run(&["run", "--session", &id, "Last one"]).await;
    assert_eq!(
        (done.code, done.stdout.as_str()),
        (Some(0), "Three.\n"),
        "{done:?}"
    );
    assert_eq!(provider.steps()[2]["messages"].as_array().unwrap().len(), 5);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sub_agent_runs_without_the_agent_tool_and_without_hooks() {
    let block_ls = "[[hooks.pre_tool]]\ncommand = [\"sh\", \"-c\", \"echo blocked >&2; exit 2\"]\ntools = \"ls\"\n";
    let provider = FakeProvider::anthropic(vec![
        Reply::sse(tool_stream(
            "toolu_p",
            "agent",
            &json!({"prompt": "List the files"}),
        )),
        Reply::sse(tool_stream("toolu_c", "ls", &json!({}))),
        Reply::sse(text_stream("The child saw hello.txt.")),
        Reply::sse(text_stream("The sub-agent reports hello.txt.")),
    ])
    .await;
    let project = Project::new(&provider.base_url, block_ls);
    std::fs::write(project.path().join("hello.txt"), "hi\n").unwrap();
    let done = project.run(&["run", "Ask a sub-agent"]).await;
    assert_eq!(done.code, Some(0), "{done:?}");
    assert_eq!(done.stdout, "The sub-agent reports hello.txt.\n");
    let steps = provider.steps();
    assert_eq!(steps.len(), 4);
    let tools = |s: &serde_json::Value| -> Vec<String> {
        s["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    };
    assert!(tools(&steps[0]).contains(&"agent".to_owned()));
    assert!(
        !tools(&steps[1]).contains(&"agent".to_owned()),
        "depth 1: {:?}",
        tools(&steps[1])
    );
    let child_ls = last_results(&steps[2]);
    assert!(
        child_ls[0].1.contains("hello.txt"),
        "the child's ls ran, no hook: {child_ls:?}"
    );
    assert_eq!(
        last_results(&steps[3]),
        [("toolu_p".to_owned(), "The child saw hello.txt.".to_owned())],
        "the child's answer is the parent's tool result"
    );
    let done = project.run(&["sessions", "--all", "--json"]).await;
    let list: serde_json::Value = serde_json::from_str(&done.stdout).unwrap();
    let titles: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["title"].as_str())
        .collect();
    assert!(titles.contains(&"New Agent Session"), "{list}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_escape_from_the_working_directory_is_a_result_the_model_reads() {
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("written.txt");
    let provider = FakeProvider::anthropic(vec![
        Reply::sse(tool_stream(
            "toolu_1",
            "view",
            &json!({"path": "../outside.txt"}),
        )),
        Reply::sse(tool_stream(
            "toolu_2",
            "write",
            &json!({"path": target.display().to_string(), "content": "x"}),
        )),
        Reply::sse(tool_stream(
            "toolu_3",
            "view",
            &json!({"path": "link/secret.txt"}),
        )),
        Reply::sse(text_stream("I stayed inside.")),
    ])
    .await;
    std::fs::write(outside.path().join("secret.txt"), "SECRET").unwrap();
    let project = Project::new(&provider.base_url, "[permissions]\nallow = [\"write\"]\n");
    std::os::unix::fs::symlink(outside.path(), project.path().join("link")).unwrap();
    let done = project.run(&["run", "Read outside"]).await;
    assert_eq!(
        (done.code, done.stdout.as_str()),
        (Some(0), "I stayed inside.\n"),
        "{done:?}"
    );
    let steps = provider.steps();
    for (step, call) in [(1, "toolu_1"), (2, "toolu_2"), (3, "toolu_3")] {
        let results = last_results(&steps[step]);
        assert_eq!(results[0].0, call);
        assert!(results[0].1.starts_with("refused: "), "{results:?}");
        assert!(!results[0].1.contains("SECRET"), "{results:?}");
    }
    assert!(
        !target.exists(),
        "the absolute path outside was not written"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_other_hooks_see_the_prompt_the_result_and_the_runs_end() {
    // user_prompt_submit refuses prompts that mention a password; post_tool adds feedback after
    // `ls`; stop writes the RunComplete it read.
    let hooks = "[[hooks.user_prompt_submit]]\n\
                 command = [\"sh\", \"-c\", \"grep -q password && { echo 'no secrets' >&2; exit 2; }; exit 0\"]\n\
                 [[hooks.post_tool]]\ncommand = [\"sh\", \"-c\", \"echo 'now run the tests' >&2; exit 2\"]\ntools = \"ls\"\n\
                 [[hooks.stop]]\ncommand = [\"sh\", \"-c\", \"cat > stop.json\"]\n";
    let provider = FakeProvider::anthropic(vec![
        Reply::sse(tool_stream("toolu_1", "ls", &json!({}))),
        Reply::sse(text_stream("Listed.")),
    ])
    .await;
    let project = Project::new(&provider.base_url, hooks);
    let refused = project
        .run(&["run", "--json", "my password is hunter2"])
        .await;
    assert_eq!(refused.code, Some(64), "{refused:?}");
    assert!(
        refused
            .stdout
            .contains("Prompt blocked by hook. Reason: no secrets"),
        "{}",
        refused.stdout
    );
    assert!(
        provider.steps().is_empty(),
        "a refused prompt reaches no model"
    );
    assert!(
        !project.path().join("stop.json").exists(),
        "nothing ran, nothing stopped"
    );

    let done = project
        .run(&["run", "--run-id", "r1", "What is here?"])
        .await;
    assert_eq!(done.code, Some(0), "{done:?}");
    let steps = provider.steps();
    let result = &last_results(&steps[1])[0].1;
    assert!(
        result.ends_with("\n\nHook feedback: now run the tests"),
        "{result}"
    );
    let stop: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(project.path().join("stop.json")).unwrap())
            .unwrap();
    assert_eq!(
        (
            stop["event"].as_str(),
            stop["run_id"].as_str(),
            stop["outcome"].as_str()
        ),
        (Some("stop"), Some("r1"), Some("completed"))
    );
    assert_eq!(stop["text"], "Listed.");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_system_prompt_carries_the_projects_agents_md_and_can_be_printed() {
    let provider = FakeProvider::anthropic(vec![Reply::sse(text_stream("Noted."))]).await;
    let project = Project::new(&provider.base_url, "");
    std::fs::create_dir(project.path().join(".git")).unwrap();
    std::fs::write(project.path().join("AGENTS.md"), "Always answer in haiku.").unwrap();
    std::fs::create_dir(project.path().join("sub")).unwrap();
    std::fs::write(project.path().join("sub/CLAUDE.md"), "Tabs, not spaces.").unwrap();
    // Printed without a key and without running anything.
    let shown = project
        .run(&["run", "--print-system-prompt", "--cwd", "sub"])
        .await;
    assert_eq!(shown.code, Some(0), "{shown:?}");
    let text = &shown.stdout;
    assert!(text.contains("You are turnstile"), "{text}");
    assert!(
        text.contains("- glob:") && text.contains("- multiedit:"),
        "the tools: {text}"
    );
    let (outer, inner) = (
        text.find("Always answer in haiku.")
            .expect("the root's AGENTS.md"),
        text.find("Tabs, not spaces.").expect("sub/CLAUDE.md"),
    );
    assert!(outer < inner, "outermost first: {text}");
    assert!(provider.steps().is_empty());
    // A run sends the same.
    let done = project.run(&["run", "--cwd", "sub", "Hello"]).await;
    assert_eq!(done.code, Some(0), "{done:?}");
    let system = provider.steps()[0]["system"].to_string();
    assert!(
        system.contains("Always answer in haiku.") && system.contains("Tabs, not spaces."),
        "{system}"
    );
}
