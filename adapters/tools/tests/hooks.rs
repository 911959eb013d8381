//! The hooks beyond `pre_tool`, run as real processes: `post_tool` (sees the result; exit 2 is
//! feedback the model reads, 49 halts the turn), `user_prompt_submit` (exit 2 or 49 refuses
//! the prompt; a `fail_closed` hook that cannot run refuses it too), `stop` (observes the run's
//! end), and the `[hooks]` sections with their errors named.

use std::sync::Arc;
use std::time::Duration;

use turnstile_core::{CallId, SessionId, StopTurn, ToolOutput, ToolSpec};
use turnstile_host::{BoxFuture, Tool, ToolCall, ToolSet};
use turnstile_tools::hook::{self, Hook, HookFile, HookInput};
use turnstile_tools::{DenyAsks, Gate, Hooks, HooksFile, Permissions, PermissionsFile};

/// A read-only tool (so no ask) answering with its input.
struct Echo;

impl Tool for Echo {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new("view")
    }

    fn run(&self, call: ToolCall) -> BoxFuture<ToolOutput> {
        Box::pin(async move { ToolOutput::ok(format!("read {}", call.input)) })
    }
}

fn sh(script: &str) -> Vec<String> {
    vec!["sh".into(), "-c".into(), script.into()]
}

fn hook(script: &str) -> Hook {
    Hook::new(sh(script), Duration::from_secs(10))
}

/// Runs `view` once behind a gate with these post-tool hooks, in `dir`.
async fn call_with_post_tool(dir: &std::path::Path, hooks: Vec<Hook>) -> ToolOutput {
    let permissions = Permissions::new(&PermissionsFile::default()).unwrap();
    let gate =
        Arc::new(Gate::new(permissions, vec![], Arc::new(DenyAsks), dir).with_post_tool(hooks));
    let tools = gate.wrap(ToolSet::new().with(Echo));
    let call = ToolCall::new(SessionId::new("s1"), CallId::new("c1"), r#"{"path":"a.rs"}"#);
    tools.get("view").unwrap().run(call).await
}

#[tokio::test]
async fn a_post_tool_hook_sees_the_result_and_its_exit_2_is_feedback_the_model_reads() {
    let dir = tempfile::tempdir().unwrap();
    let seen = dir.path().join("seen.json");
    let script = format!("cat > {}; echo 'run the tests next' >&2; exit 2", seen.display());
    let out = call_with_post_tool(dir.path(), vec![hook(&script)]).await;
    assert_eq!(out.content, "read {\"path\":\"a.rs\"}\n\nHook feedback: run the tests next");
    assert!(!out.is_error && out.stop.is_none(), "{out:?}");
    let input: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&seen).unwrap()).unwrap();
    assert_eq!(input["event"], "post_tool");
    assert_eq!(input["tool_name"], "view");
    assert_eq!(input["call_id"], "c1");
    assert_eq!(input["tool_input"], serde_json::json!({"path": "a.rs"}));
    assert_eq!(
        input["tool_response"],
        serde_json::json!({"content": "read {\"path\":\"a.rs\"}", "is_error": false})
    );
    assert!(input.get("prompt").is_none(), "other moments' fields are left out: {input}");
}

#[tokio::test]
async fn a_post_tool_hook_exiting_49_halts_the_turn_and_exit_0_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = call_with_post_tool(dir.path(), vec![hook("echo 'too far' >&2; exit 49")]).await;
    assert_eq!(out.stop, Some(StopTurn::HookHalt));
    assert!(out.content.ends_with("Turn halted by hook. Reason: too far"), "{out:?}");
    let out = call_with_post_tool(dir.path(), vec![hook("exit 0")]).await;
    assert_eq!(out.content, "read {\"path\":\"a.rs\"}");
    // A hook that fails to run changes nothing either (failing closed only blocks a call or a
    // prompt, and the call has run).
    let broken = Hook::new(sh("exit 5"), Duration::from_secs(10)).fail_closed();
    let out = call_with_post_tool(dir.path(), vec![broken]).await;
    assert_eq!(out.content, "read {\"path\":\"a.rs\"}");
}

fn prompt_input(dir: &std::path::Path, prompt: &str) -> HookInput {
    HookInput { prompt: Some(prompt.into()), ..HookInput::new("user_prompt_submit", "s1", dir) }
}

#[tokio::test]
async fn a_user_prompt_submit_hook_refuses_a_prompt_with_its_reason() {
    let dir = tempfile::tempdir().unwrap();
    let guard =
        hook(r#"grep -q password && { echo "no secrets in prompts" >&2; exit 2; }; exit 0"#);
    let hooks = [guard];
    let ok = prompt_input(dir.path(), "list the files");
    assert_eq!(hook::user_prompt_submit(&hooks, &ok, dir.path()).await, Ok(()));
    let secret = prompt_input(dir.path(), "my password is hunter2");
    assert_eq!(
        hook::user_prompt_submit(&hooks, &secret, dir.path()).await,
        Err("Prompt blocked by hook. Reason: no secrets in prompts".into())
    );
    // Fail closed: a hook that cannot run refuses; failing open, it is as if it were not there.
    let missing = || Hook::new(vec!["/nonexistent/hook".into()], Duration::from_secs(10));
    let closed = [missing().fail_closed()];
    let out = hook::user_prompt_submit(&closed, &prompt_input(dir.path(), "hi"), dir.path()).await;
    assert!(out.as_ref().is_err_and(|e| e.contains("configured to fail closed")), "{out:?}");
    let open = [missing()];
    let out = hook::user_prompt_submit(&open, &prompt_input(dir.path(), "hi"), dir.path()).await;
    assert_eq!(out, Ok(()));
}

#[tokio::test]
async fn a_stop_hook_reads_the_runs_end_and_only_observes() {
    let dir = tempfile::tempdir().unwrap();
    let seen = dir.path().join("stop.json");
    let hooks = [hook(&format!("cat > {}; exit 2", seen.display()))];
    let mut run = serde_json::Map::new();
    run.insert("run_id".into(), "r1".into());
    run.insert("outcome".into(), "completed".into());
    let input = HookInput { run: Some(run), ..HookInput::new("stop", "s1", dir.path()) };
    hook::stop(&hooks, &input, dir.path()).await; // exit 2 changes nothing: nothing to return
    let input: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&seen).unwrap()).unwrap();
    assert_eq!(
        (input["event"].as_str(), input["run_id"].as_str(), input["outcome"].as_str()),
        (Some("stop"), Some("r1"), Some("completed"))
    );
    assert_eq!(input["session_id"], "s1");
}

#[test]
fn every_section_is_read_and_a_bad_hook_is_named_by_its_section() {
    let one = |command: Vec<String>| HookFile {
        command,
        tools: None,
        timeout_secs: None,
        fail_closed: false,
    };
    let file = HooksFile {
        pre_tool: vec![one(sh("true"))],
        post_tool: vec![one(sh("true")), one(sh("true"))],
        user_prompt_submit: vec![one(sh("true"))],
        stop: vec![one(sh("true"))],
    };
    let hooks = Hooks::new(&file).unwrap();
    let counts = (
        hooks.pre_tool.len(),
        hooks.post_tool.len(),
        hooks.user_prompt_submit.len(),
        hooks.stop.len(),
    );
    assert_eq!(counts, (1, 2, 1, 1));
    let file = HooksFile { stop: vec![one(sh("true")), one(vec![])], ..HooksFile::default() };
    assert_eq!(
        Hooks::new(&file).unwrap_err().to_string(),
        "hooks.stop[1]: `command` is empty; give the program and its arguments"
    );
    let toml: HooksFile = toml::from_str(
        "[[post_tool]]\ncommand = [\"lint\"]\ntools = \"edit\"\n[[user_prompt_submit]]\ncommand = [\"check\"]\n",
    )
    .unwrap();
    assert_eq!((toml.post_tool.len(), toml.user_prompt_submit.len()), (1, 1));
}
