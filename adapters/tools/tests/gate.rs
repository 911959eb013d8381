//! The gate: permission rules, asks and their memory, `--yolo`, and pre-tool hooks run as
//! real processes (exit 2 blocks, 49 halts, `{"decision":"allow"}` pre-approves, a hang is
//! killed and fails open unless the hook fails closed, sub-agents run none).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use turnstile_core::{CallId, SessionId, StopTurn, ToolOutput, ToolSpec};
use turnstile_host::{BoxFuture, Tool, ToolCall, ToolSet};
use turnstile_tools::hook::Hook;
use turnstile_tools::{Answer, Ask, Asker, DenyAsks, Gate, Permissions, PermissionsFile};

/// A tool that counts its runs.
#[derive(Clone)]
struct Counted {
    name: &'static str,
    runs: Arc<AtomicUsize>,
}

impl Tool for Counted {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(self.name)
    }

    fn run(&self, call: ToolCall) -> BoxFuture<ToolOutput> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move { ToolOutput::ok(format!("ran {}", call.input)) })
    }
}

/// An asker that answers from a script and records what it was asked.
struct Scripted {
    answer: Answer,
    asked: Mutex<Vec<Ask>>,
}

impl Asker for Scripted {
    fn ask(&self, ask: Ask) -> BoxFuture<Answer> {
        self.asked.lock().unwrap().push(ask);
        let answer = self.answer.clone();
        Box::pin(async move { answer })
    }
}

struct World {
    dir: tempfile::TempDir,
    tools: ToolSet,
    gate: Arc<Gate>,
    runs: Arc<AtomicUsize>,
}

fn rules(allow: &[&str], deny: &[&str]) -> Permissions {
    let own = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect();
    Permissions::new(&PermissionsFile { allow: own(allow), ask: vec![], deny: own(deny) }).unwrap()
}

fn world(permissions: Permissions, hooks: Vec<Hook>, asker: Arc<dyn Asker>, yolo: bool) -> World {
    let dir = tempfile::tempdir().unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    let gate = Arc::new(Gate::new(permissions, hooks, asker, dir.path()).yolo(yolo));
    let tools = ToolSet::new()
        .with(Counted { name: "bash", runs: runs.clone() })
        .with(Counted { name: "view", runs: runs.clone() })
        .with_agent();
    let tools = gate.wrap(tools);
    World { dir, tools, gate, runs }
}

impl World {
    async fn call_in(&self, session: &str, tool: &str, input: serde_json::Value) -> ToolOutput {
        let call = ToolCall::new(SessionId::new(session), CallId::new("call-1"), input.to_string());
        self.tools.get(tool).expect("a tool").run(call).await
    }

    async fn call(&self, tool: &str, input: serde_json::Value) -> ToolOutput {
        self.call_in("s1", tool, input).await
    }

    fn runs(&self) -> usize {
        self.runs.load(Ordering::SeqCst)
    }
}

fn sh(script: &str) -> Vec<String> {
    vec!["sh".into(), "-c".into(), script.into()]
}

fn hook(script: &str) -> Hook {
    Hook::new(sh(script), Duration::from_secs(10))
}

fn denied(out: &ToolOutput) -> bool {
    out.is_error && out.stop == Some(StopTurn::PermissionDenied)
}

#[tokio::test]
async fn rules_allow_and_deny_and_read_only_tools_run_by_default() {
    let w =
        world(rules(&["bash(git status*)"], &["bash(rm *)"]), vec![], Arc::new(DenyAsks), false);
    let out = w.call("bash", serde_json::json!({"command": "git status --short"})).await;
    assert_eq!(out, ToolOutput::ok(r#"ran {"command":"git status --short"}"#));
    let out = w.call("bash", serde_json::json!({"command": "rm -rf /"})).await;
    assert!(denied(&out), "{out:?}");
    assert!(out.content.contains("the rule `bash(rm *)`"), "{}", out.content);
    let out = w.call("view", serde_json::json!({"path": "a.txt"})).await;
    assert!(!out.is_error, "{out:?}");
    assert_eq!(w.runs(), 2, "the denied call did not run");
    let denials = w.gate.denials();
    assert_eq!(denials.len(), 1);
    assert_eq!(denials[0].subject.as_deref(), Some("rm -rf /"));
}

#[tokio::test]
async fn in_run_an_ask_is_a_denial_and_yolo_allows_it_but_not_a_deny_rule() {
    let w = world(Permissions::default(), vec![], Arc::new(DenyAsks), false);
    let out = w.call("bash", serde_json::json!({"command": "make"})).await;
    assert!(denied(&out), "{out:?}");
    assert!(out.content.contains("--yolo"), "says how to allow it: {}", out.content);
    assert_eq!(w.runs(), 0);

    let w = world(rules(&[], &["bash(rm *)"]), vec![], Arc::new(DenyAsks), true);
    assert!(!w.call("bash", serde_json::json!({"command": "make"})).await.is_error);
    assert!(denied(&w.call("bash", serde_json::json!({"command": "rm x"})).await));
    assert_eq!(w.runs(), 1);
}

#[tokio::test]
async fn a_yes_for_the_session_is_remembered_for_that_session_and_tool_only() {
    let asker = Arc::new(Scripted { answer: Answer::ForSession, asked: Mutex::default() });
    let w = world(Permissions::default(), vec![], asker.clone(), false);
    for _ in 0..3 {
        assert!(!w.call("bash", serde_json::json!({"command": "make"})).await.is_error);
    }
    assert_eq!(asker.asked.lock().unwrap().len(), 1, "asked once, then remembered");
    let first = asker.asked.lock().unwrap()[0].clone();
    assert_eq!((first.tool.as_str(), first.subject.as_deref()), ("bash", Some("make")));
    assert!(!w.call_in("s2", "bash", serde_json::json!({"command": "make"})).await.is_error);
    assert_eq!(asker.asked.lock().unwrap().len(), 2, "another session is asked again");
    assert_eq!(w.runs(), 4);

    let once = Arc::new(Scripted { answer: Answer::Once, asked: Mutex::default() });
    let w = world(Permissions::default(), vec![], once.clone(), false);
    for _ in 0..2 {
        assert!(!w.call("bash", serde_json::json!({"command": "make"})).await.is_error);
    }
    assert_eq!(once.asked.lock().unwrap().len(), 2, "a yes for one call is not remembered");
}

#[tokio::test]
async fn exit_2_blocks_the_call_and_the_turn_goes_on() {
    let w = world(
        rules(&["bash"], &[]),
        vec![hook("echo 'no pushing' >&2; exit 2")],
        Arc::new(DenyAsks),
        false,
    );
    let out = w.call("bash", serde_json::json!({"command": "git push"})).await;
    assert_eq!(out, ToolOutput::error("Tool call blocked by hook. Reason: no pushing"));
    assert_eq!(w.runs(), 0);
}

#[tokio::test]
async fn exit_49_halts_the_turn() {
    let w = world(
        rules(&["bash"], &[]),
        vec![hook("echo 'stop here' >&2; exit 49")],
        Arc::new(DenyAsks),
        false,
    );
    let out = w.call("bash", serde_json::json!({"command": "ls"})).await;
    assert_eq!(
        out,
        ToolOutput {
            content: "Turn halted by hook. Reason: stop here".into(),
            is_error: true,
            stop: Some(StopTurn::HookHalt),
        }
    );
    assert_eq!(w.runs(), 0);
}

#[tokio::test]
async fn a_hooks_allow_pre_approves_an_ask_but_not_a_deny_rule() {
    let allow = r#"echo '{"decision":"allow"}'"#;
    let w = world(rules(&[], &["bash(rm *)"]), vec![hook(allow)], Arc::new(DenyAsks), false);
    assert!(!w.call("bash", serde_json::json!({"command": "make"})).await.is_error);
    assert!(denied(&w.call("bash", serde_json::json!({"command": "rm x"})).await));
    // Without the hook's answer the same ask is a denial.
    let w = world(Permissions::default(), vec![hook("echo '{}'")], Arc::new(DenyAsks), false);
    assert!(denied(&w.call("bash", serde_json::json!({"command": "make"})).await));
}

#[tokio::test]
async fn the_hook_reads_the_call_as_json_on_stdin() {
    let w = world(rules(&["bash"], &[]), vec![hook("cat > input.json")], Arc::new(DenyAsks), false);
    assert!(!w.call("bash", serde_json::json!({"command": "make"})).await.is_error);
    let text = std::fs::read_to_string(w.dir.path().join("input.json")).unwrap();
    let input: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(input["event"], "pre_tool");
    assert_eq!(input["session_id"], "s1");
    assert_eq!(input["call_id"], "call-1");
    assert_eq!(input["tool_name"], "bash");
    assert_eq!(input["tool_input"], serde_json::json!({"command": "make"}));
    assert!(input["cwd"].as_str().is_some_and(|c| !c.is_empty()));
}

/// Waits (5 s at most) for the hook to have written its process group id.
async fn pgid_in(path: &std::path::Path) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Ok(text) = std::fs::read_to_string(path)
            && let Ok(pgid) = text.trim().parse()
        {
            return pgid;
        }
        assert!(Instant::now() < deadline, "the hook did not start");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn group_alive(pgid: i32) -> bool {
    nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pgid), None).is_ok()
}

async fn gone(pgid: i32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while group_alive(pgid) {
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    true
}

// The hook leads its own process group (`process_group(0)`), so its pid is the group id.
const HANG: &str = "echo $$ > pgid; sleep 300 & sleep 300";

#[tokio::test]
async fn a_hook_that_hangs_is_killed_and_fails_open() {
    let hang = Hook::new(sh(HANG), Duration::from_millis(300));
    let w = world(rules(&["bash"], &[]), vec![hang], Arc::new(DenyAsks), false);
    let out = w.call("bash", serde_json::json!({"command": "make"})).await;
    assert!(!out.is_error, "a hook that failed to run does not block: {out:?}");
    assert_eq!(w.runs(), 1);
    let pgid = pgid_in(&w.dir.path().join("pgid")).await;
    assert!(gone(pgid).await, "the hook's process group was killed");
}

#[tokio::test]
async fn a_fail_closed_hook_blocks_when_it_hangs_or_cannot_start() {
    let hang = Hook::new(sh(HANG), Duration::from_millis(300)).fail_closed();
    let w = world(rules(&["bash"], &[]), vec![hang], Arc::new(DenyAsks), false);
    let out = w.call("bash", serde_json::json!({"command": "make"})).await;
    assert!(out.is_error && out.stop.is_none(), "{out:?}");
    assert!(
        out.content.starts_with("Tool call blocked by hook. Reason: the hook"),
        "{}",
        out.content
    );
    assert!(out.content.contains("did not finish within 0.3 s"), "{}", out.content);

    let missing = vec!["/nonexistent/hook".to_owned()];
    let open = world(
        rules(&["bash"], &[]),
        vec![Hook::new(missing.clone(), Duration::from_secs(5))],
        Arc::new(DenyAsks),
        false,
    );
    assert!(!open.call("bash", serde_json::json!({"command": "make"})).await.is_error);
    let closed = world(
        rules(&["bash"], &[]),
        vec![Hook::new(missing, Duration::from_secs(5)).fail_closed()],
        Arc::new(DenyAsks),
        false,
    );
    let out = closed.call("bash", serde_json::json!({"command": "make"})).await;
    assert!(out.content.contains("cannot start it"), "{}", out.content);
    // Another exit status is a failure to run as well.
    let odd = world(rules(&["bash"], &[]), vec![hook("exit 7")], Arc::new(DenyAsks), false);
    assert!(!odd.call("bash", serde_json::json!({"command": "make"})).await.is_error);
}

#[tokio::test]
async fn an_aborted_call_kills_its_running_hook() {
    let hang = Hook::new(sh(HANG), Duration::from_secs(60));
    let w = world(rules(&["bash"], &[]), vec![hang], Arc::new(DenyAsks), false);
    let call = w.call("bash", serde_json::json!({"command": "make"}));
    // The host aborts a call by dropping its future.
    let aborted = tokio::time::timeout(Duration::from_millis(500), call).await;
    assert!(aborted.is_err(), "the hook was still running");
    let pgid = pgid_in(&w.dir.path().join("pgid")).await;
    assert!(gone(pgid).await, "dropping the call killed the hook's process group");
    assert_eq!(w.runs(), 0);
}

#[tokio::test]
async fn sub_agents_run_no_hooks_and_a_tools_glob_limits_a_hook() {
    let w = world(rules(&["bash"], &[]), vec![hook("exit 2")], Arc::new(DenyAsks), false);
    let out = w.call_in("parent-msg$$call-9", "bash", serde_json::json!({"command": "make"})).await;
    assert!(!out.is_error, "a child session runs no hooks: {out:?}");
    assert!(w.call("bash", serde_json::json!({"command": "make"})).await.is_error);

    let file = turnstile_tools::HooksFile {
        pre_tool: vec![turnstile_tools::hook::HookFile {
            command: sh("exit 2"),
            tools: Some("view".into()),
            timeout_secs: None,
            fail_closed: false,
        }],
        ..turnstile_tools::HooksFile::default()
    };
    let w = world(rules(&["bash"], &[]), Hook::all(&file).unwrap(), Arc::new(DenyAsks), false);
    assert!(!w.call("bash", serde_json::json!({"command": "make"})).await.is_error);
    assert!(w.call("view", serde_json::json!({"path": "a"})).await.is_error);
}

#[test]
fn a_hook_without_a_command_is_named() {
    let file = turnstile_tools::HooksFile {
        pre_tool: vec![turnstile_tools::hook::HookFile {
            command: vec![],
            tools: None,
            timeout_secs: None,
            fail_closed: false,
        }],
        ..turnstile_tools::HooksFile::default()
    };
    let e = Hook::all(&file).unwrap_err();
    assert_eq!(
        e.to_string(),
        "hooks.pre_tool[0]: `command` is empty; give the program and its arguments"
    );
}

/// The real built-in tools behind a gate with these rules and hooks, in a scratch working
/// directory with a secret `conf/.env` and a `src/a.rs`.
fn builtins_behind(
    permissions: Permissions,
    hooks: Vec<Hook>,
) -> (tempfile::TempDir, ToolSet, Arc<Gate>) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("conf")).unwrap();
    std::fs::write(dir.path().join("conf/.env"), "SECRET=s3cret\n").unwrap();
    std::fs::create_dir_all(dir.path().join("src")).unwrap();
    std::fs::write(dir.path().join("src/a.rs"), "fn a() {}\n").unwrap();
    let gate = Arc::new(Gate::new(permissions, hooks, Arc::new(DenyAsks), dir.path()));
    let tools = gate.wrap(turnstile_tools::builtins(dir.path(), None).unwrap());
    (dir, tools, gate)
}

async fn run(tools: &ToolSet, tool: &str, input: serde_json::Value) -> ToolOutput {
    let call = ToolCall::new(SessionId::new("s1"), CallId::new("call-1"), input.to_string());
    tools.get(tool).expect("a tool").run(call).await
}

#[tokio::test]
async fn a_deny_rule_on_path_catches_file_path_and_no_ignored_field_dodges_it() {
    let (dir, tools, gate) = builtins_behind(
        rules(&["edit(src/**)", "multiedit(src/**)"], &["view(conf/.env)", "multiedit(conf/**)"]),
        vec![],
    );
    for input in [
        serde_json::json!({"file_path": "conf/.env"}),
        serde_json::json!({"file_path": "conf/.env", "description": "Read the settings"}),
        // Read as sent, `command` would be the subject; the tool ignores it and reads `path`.
        serde_json::json!({"path": "conf/.env", "command": "ls"}),
        serde_json::json!({"file_path": "conf/.env", "command": "ls", "limit": "5"}),
    ] {
        let out = run(&tools, "view", input.clone()).await;
        assert!(denied(&out), "{input}: {out:?}");
        assert!(!out.content.contains("s3cret"), "{input}: {}", out.content);
        assert!(out.content.contains("the rule `view(conf/.env)`"), "{}", out.content);
    }
    assert!(gate.denials().iter().all(|d| d.subject.as_deref() == Some("conf/.env")));
    let out = run(
        &tools,
        "multiedit",
        serde_json::json!({"file_path": "conf/.env", "edits": [{"old_string": "s3cret", "new_string": "x"}]}),
    )
    .await;
    assert!(denied(&out), "{out:?}");
    assert_eq!(std::fs::read_to_string(dir.path().join("conf/.env")).unwrap(), "SECRET=s3cret\n");
    // Allow rules match `file_path` the same way (here an ask would be a denial).
    assert!(!run(&tools, "view", serde_json::json!({"file_path": "src/a.rs"})).await.is_error);
    let out = run(
        &tools,
        "edit",
        serde_json::json!({"file_path": "src/a.rs", "old_string": "fn a", "new_string": "fn b"}),
    )
    .await;
    assert_eq!(out, ToolOutput::ok("edited `src/a.rs`: replaced 1 place"));
    let out = run(
        &tools,
        "multiedit",
        serde_json::json!({"file_path": "src/a.rs", "edits": [{"old_string": "fn b", "new_string": "fn c"}]}),
    )
    .await;
    assert_eq!(out, ToolOutput::ok("edited `src/a.rs`: 1 edit, replaced 1 place"));
    // Without a rule, glob reads freely and multiedit asks (a denial in `run`).
    assert!(!run(&tools, "glob", serde_json::json!({"pattern": "**/*.rs"})).await.is_error);
    let out = run(
        &tools,
        "multiedit",
        serde_json::json!({"path": "other.rs", "edits": [{"old_string": "a", "new_string": "b"}]}),
    )
    .await;
    assert!(denied(&out) && out.content.contains("needs approval"), "{out:?}");
}

#[tokio::test]
async fn a_hook_sees_the_arguments_as_the_tool_reads_them() {
    let (dir, tools, _gate) =
        builtins_behind(Permissions::default(), vec![hook("cat > input.json")]);
    let out = run(
        &tools,
        "view",
        serde_json::json!({"file_path": "src/a.rs", "limit": "1", "description": "d"}),
    )
    .await;
    assert!(out.content.starts_with("(ignored unknown field `description`)\n"), "{out:?}");
    let text = std::fs::read_to_string(dir.path().join("input.json")).unwrap();
    let input: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(input["tool_input"], serde_json::json!({"path": "src/a.rs", "limit": 1}));
}
