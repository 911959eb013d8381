//! Hooks (SPEC 8, 9 "Tools"): commands the agent runs at four moments, each with one JSON
//! object on stdin, answering with their exit status.
//!
//! ```toml
//! [[hooks.pre_tool]]                      # before a tool call: may block it, halt the turn,
//! command = ["./scripts/check-call.sh"]   #   or pre-approve its permission
//! tools = "bash"                          # optional: a glob over tool names (default: all)
//! timeout_secs = 30                       # optional (default 60)
//! fail_closed = false                     # optional: a hook that cannot run blocks
//!
//! [[hooks.post_tool]]                     # after a call, seeing its result
//! command = ["./scripts/lint-after-edit.sh"]
//! tools = "edit"
//!
//! [[hooks.user_prompt_submit]]            # before a prompt is submitted: may block it
//! command = ["./scripts/check-prompt.sh"]
//!
//! [[hooks.stop]]                          # when a run has ended (its RunComplete)
//! command = ["./scripts/notify.sh"]
//! ```
//!
//! What each hook reads on stdin ([`HookInput`]): always `event`, `session_id` and `cwd`; for
//! `pre_tool` and `post_tool` also `call_id`, `tool_name` and `tool_input` (the arguments as
//! the tool reads them), for `post_tool` `tool_response` (`content`, `is_error`); for
//! `user_prompt_submit` `prompt`; for `stop` `run_id`, `outcome`, `stop_reason`, `text` and
//! `usage` (the run's RunComplete).
//!
//! | exit | `pre_tool` | `post_tool` | `user_prompt_submit` | `stop` |
//! |---|---|---|---|---|
//! | 0 | go on; stdout `{"decision":"allow"}` pre-approves the permission | go on | go on | - |
//! | 2 | block the call: its result is `Tool call blocked by hook. Reason: <stderr>`; the turn goes on | the model reads `Hook feedback: <stderr>` after the result | block the prompt: `Prompt blocked by hook. Reason: <stderr>` | - |
//! | 49 | halt the turn: `Turn halted by hook. Reason: <stderr>`; it ends `completed`, stop reason `hook_halt` | halt the turn the same way, after the result | block the prompt | - |
//! | other | the hook failed to run | failed | failed | failed |
//!
//! A hook that cannot start, exits with another status, or outlives its timeout (its process
//! group is then killed) **failed to run**: it is logged and things go on as if it were not
//! there, unless the hook is `fail_closed`, which then blocks (a `pre_tool` call, a
//! `user_prompt_submit` prompt; for the others it changes nothing). A `stop` hook only observes:
//! its exit status is logged, and the run's end does not wait for it beyond its timeout. Hooks
//! of one moment run in the order configured; the first that blocks or halts decides. `tools`
//! applies to `pre_tool` and `post_tool`. Sub-agents run no hooks (SPEC 4.11).

use std::time::Duration;

use globset::{Glob, GlobMatcher};
use serde::{Deserialize, Serialize};

use crate::process::{self, Ended};

/// A hook's timeout when it sets none.
pub const HOOK_TIMEOUT_DEFAULT: Duration = Duration::from_secs(60);
/// The exit status that blocks a call.
pub const EXIT_BLOCK: i32 = 2;
/// The exit status that halts the turn.
pub const EXIT_HALT: i32 = 49;
/// Bytes of a hook's stderr kept as the reason.
const REASON_MAX: usize = 2_000;

/// The `[hooks]` section as written.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct HooksFile {
    /// The hooks run before each tool call.
    #[serde(default)]
    pub pre_tool: Vec<HookFile>,
    /// The hooks run after each tool call, with its result.
    #[serde(default)]
    pub post_tool: Vec<HookFile>,
    /// The hooks run before a prompt is submitted.
    #[serde(default)]
    pub user_prompt_submit: Vec<HookFile>,
    /// The hooks run when a run has ended.
    #[serde(default)]
    pub stop: Vec<HookFile>,
}

/// One hook as written.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct HookFile {
    /// The program and its arguments.
    pub command: Vec<String>,
    /// The tools it sees, as a glob over names (absent: every tool).
    #[serde(default)]
    pub tools: Option<String>,
    /// Seconds it may take (absent: [`HOOK_TIMEOUT_DEFAULT`]).
    #[serde(default)]
    pub timeout_secs: Option<u64>,
    /// Whether a failure to run blocks the call.
    #[serde(default)]
    pub fail_closed: bool,
}

/// A hook that cannot be used as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HookError {
    /// Its section (`pre_tool`, `post_tool`, `user_prompt_submit`, `stop`).
    pub section: &'static str,
    /// Its position in that section, from 0.
    pub index: usize,
    /// What is wrong.
    pub reason: String,
}

impl std::fmt::Display for HookError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "hooks.{}[{}]: {}", self.section, self.index, self.reason)
    }
}

impl std::error::Error for HookError {}

/// One checked hook.
#[derive(Clone, Debug)]
pub struct Hook {
    command: Vec<String>,
    tools: Option<GlobMatcher>,
    timeout: Duration,
    fail_closed: bool,
}

/// What a hook receives on stdin: one JSON object; the fields of other moments are left out.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct HookInput {
    /// The moment: `pre_tool`, `post_tool`, `user_prompt_submit` or `stop`.
    pub event: String,
    /// The session.
    pub session_id: String,
    /// The working directory.
    pub cwd: String,
    /// The provider's call id (`pre_tool`, `post_tool`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// The tool's name (`pre_tool`, `post_tool`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
    /// The call's arguments as the tool reads them ([`crate::args::canonical`]) (`pre_tool`,
    /// `post_tool`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_input: Option<serde_json::Value>,
    /// The call's result: `content` and `is_error` (`post_tool`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_response: Option<serde_json::Value>,
    /// The prompt (`user_prompt_submit`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// The run's RunComplete: `run_id`, `outcome`, `stop_reason`, `text`, `usage`, ... (`stop`).
    #[serde(default, skip_serializing_if = "Option::is_none", flatten)]
    pub run: Option<serde_json::Map<String, serde_json::Value>>,
}

impl HookInput {
    /// The input of `event` for `session`, working in `cwd`; the caller fills in the rest.
    #[must_use]
    pub fn new(event: &str, session: &str, cwd: &std::path::Path) -> HookInput {
        HookInput {
            event: event.to_owned(),
            session_id: session.to_owned(),
            cwd: cwd.display().to_string(),
            ..HookInput::default()
        }
    }
}

/// What the hooks decided for one call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Go on to the permission gate.
    Proceed {
        /// A hook answered `{"decision":"allow"}`.
        approved: bool,
    },
    /// Do not run the call; the reason is the result's text.
    Block(String),
    /// Do not run the call and end the turn.
    Halt(String),
}

/// How one hook run ended.
enum Ran {
    Exited { code: i32, stdout: Vec<u8>, stderr: Vec<u8> },
    Failed(String),
}

/// The hooks of every moment, checked.
#[derive(Clone, Debug, Default)]
pub struct Hooks {
    /// Before each tool call ([`run_hooks`], in the gate).
    pub pre_tool: Vec<Hook>,
    /// After each tool call ([`post_tool`], in the gate).
    pub post_tool: Vec<Hook>,
    /// Before a prompt is submitted ([`user_prompt_submit`]).
    pub user_prompt_submit: Vec<Hook>,
    /// When a run has ended ([`stop`]).
    pub stop: Vec<Hook>,
}

impl Hooks {
    /// The hooks of a `[hooks]` section.
    ///
    /// # Errors
    /// The first hook with an empty command or a bad tool glob, named by section and index.
    pub fn new(file: &HooksFile) -> Result<Hooks, HookError> {
        Ok(Hooks {
            pre_tool: section("pre_tool", &file.pre_tool)?,
            post_tool: section("post_tool", &file.post_tool)?,
            user_prompt_submit: section("user_prompt_submit", &file.user_prompt_submit)?,
            stop: section("stop", &file.stop)?,
        })
    }
}

/// The checked hooks of one section.
fn section(name: &'static str, hooks: &[HookFile]) -> Result<Vec<Hook>, HookError> {
    hooks
        .iter()
        .enumerate()
        .map(|(index, h)| {
            let error = |reason: String| HookError { section: name, index, reason };
            if h.command.first().is_none_or(String::is_empty) {
                return Err(error("`command` is empty; give the program and its arguments".into()));
            }
            let tools = h
                .tools
                .as_deref()
                .map(|t| Glob::new(t).map(|g| g.compile_matcher()))
                .transpose()
                .map_err(|e| error(format!("`tools`: {}", e.kind())))?;
            Ok(Hook {
                command: h.command.clone(),
                tools,
                timeout: h.timeout_secs.map_or(HOOK_TIMEOUT_DEFAULT, Duration::from_secs),
                fail_closed: h.fail_closed,
            })
        })
        .collect()
}

impl Hook {
    /// The `pre_tool` hooks of a `[hooks]` section.
    ///
    /// # Errors
    /// As [`Hooks::new`].
    pub fn all(file: &HooksFile) -> Result<Vec<Hook>, HookError> {
        section("pre_tool", &file.pre_tool)
    }

    /// A hook running `command` for every tool, with this timeout, failing open.
    #[must_use]
    pub fn new(command: Vec<String>, timeout: Duration) -> Hook {
        Hook { command, tools: None, timeout, fail_closed: false }
    }

    /// The same hook, blocking the call when it fails to run.
    #[must_use]
    pub fn fail_closed(mut self) -> Hook {
        self.fail_closed = true;
        self
    }

    fn sees(&self, tool: &str) -> bool {
        self.tools.as_ref().is_none_or(|g| g.is_match(tool))
    }

    fn name(&self) -> String {
        self.command.join(" ")
    }

    async fn run(&self, input: &HookInput, cwd: &std::path::Path) -> Ran {
        let mut command = tokio::process::Command::new(&self.command[0]);
        command.args(&self.command[1..]).current_dir(cwd);
        let json = serde_json::to_vec(input).unwrap_or_default();
        match process::run(command, Some(&json), self.timeout, None).await {
            Ended::Exited { code: Some(code), stdout, stderr } => {
                Ran::Exited { code, stdout, stderr }
            }
            Ended::Exited { code: None, .. } => Ran::Failed("it was killed by a signal".into()),
            Ended::NotStarted(e) => Ran::Failed(format!("cannot start it: {e}")),
            Ended::Lost(e) => Ran::Failed(format!("cannot wait for it: {e}")),
            Ended::TimedOut => Ran::Failed(format!(
                "it did not finish within {} s and was killed",
                self.timeout.as_secs_f64()
            )),
        }
    }
}

/// What the hooks of one moment said, before each moment gives it its words.
enum Said {
    /// Every hook exited 0 (or failed open); `approved`: one printed `{"decision":"allow"}`.
    Proceed { approved: bool },
    /// A hook exited 2, with this reason.
    Block(String),
    /// A hook exited 49, with this reason.
    Halt(String),
    /// A `fail_closed` hook failed to run: its name and why.
    FailedClosed(String, String),
}

/// Runs the hooks that see `input.tool_name` (every hook, for a moment without a tool), in
/// order, until one blocks or halts.
async fn run_all(hooks: &[Hook], input: &HookInput, cwd: &std::path::Path) -> Said {
    let mut approved = false;
    let seen = hooks.iter().filter(|h| input.tool_name.as_deref().is_none_or(|t| h.sees(t)));
    for hook in seen {
        let why = match hook.run(input, cwd).await {
            Ran::Exited { code: 0, stdout, .. } => {
                approved |= approves(&stdout);
                continue;
            }
            Ran::Exited { code: EXIT_BLOCK, stderr, .. } => return Said::Block(reason(&stderr)),
            Ran::Exited { code: EXIT_HALT, stderr, .. } => return Said::Halt(reason(&stderr)),
            Ran::Exited { code, stderr, .. } => {
                format!("it exited with status {code}: {}", reason(&stderr))
            }
            Ran::Failed(why) => why,
        };
        tracing::warn!(hook = %hook.name(), event = input.event, fail_closed = hook.fail_closed, "hook failed to run: {why}");
        if hook.fail_closed {
            return Said::FailedClosed(hook.name(), why);
        }
    }
    Said::Proceed { approved }
}

/// Runs the `pre_tool` hooks that see `input.tool_name`, in order, and says what they decided.
pub async fn run_hooks(hooks: &[Hook], input: &HookInput, cwd: &std::path::Path) -> Verdict {
    match run_all(hooks, input, cwd).await {
        Said::Proceed { approved } => Verdict::Proceed { approved },
        Said::Block(why) => Verdict::Block(format!("Tool call blocked by hook. Reason: {why}")),
        Said::Halt(why) => Verdict::Halt(format!("Turn halted by hook. Reason: {why}")),
        Said::FailedClosed(name, why) => Verdict::Block(format!(
            "Tool call blocked by hook. Reason: the hook `{name}` failed to run ({why}) and is configured to fail closed"
        )),
    }
}

/// What the `post_tool` hooks add to a call's result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum After {
    /// Nothing.
    Nothing,
    /// Text the model reads after the result: `Hook feedback: <reason>`.
    Feedback(String),
    /// The turn ends after this result: `Turn halted by hook. Reason: <reason>`.
    Halt(String),
}

/// Runs the `post_tool` hooks that see `input.tool_name`, in order.
pub async fn post_tool(hooks: &[Hook], input: &HookInput, cwd: &std::path::Path) -> After {
    match run_all(hooks, input, cwd).await {
        Said::Proceed { .. } | Said::FailedClosed(..) => After::Nothing,
        Said::Block(why) => After::Feedback(format!("Hook feedback: {why}")),
        Said::Halt(why) => After::Halt(format!("Turn halted by hook. Reason: {why}")),
    }
}

/// Runs the `user_prompt_submit` hooks; `Err` with the words that refuse the prompt when one
/// blocks (exit 2 or 49, or a `fail_closed` hook that failed to run).
///
/// # Errors
/// `Prompt blocked by hook. Reason: <stderr>`.
pub async fn user_prompt_submit(
    hooks: &[Hook],
    input: &HookInput,
    cwd: &std::path::Path,
) -> Result<(), String> {
    match run_all(hooks, input, cwd).await {
        Said::Proceed { .. } => Ok(()),
        Said::Block(why) | Said::Halt(why) => Err(format!("Prompt blocked by hook. Reason: {why}")),
        Said::FailedClosed(name, why) => Err(format!(
            "Prompt blocked by hook. Reason: the hook `{name}` failed to run ({why}) and is configured to fail closed"
        )),
    }
}

/// Runs the `stop` hooks of a run that ended. They only observe: what they answer is logged.
pub async fn stop(hooks: &[Hook], input: &HookInput, cwd: &std::path::Path) {
    if let Said::Block(why) | Said::Halt(why) = run_all(hooks, input, cwd).await {
        tracing::info!(
            event = "stop",
            "a stop hook exited 2 or 49 (stop hooks only observe): {why}"
        );
    }
}

/// Whether stdout is `{"decision":"allow"}` (surrounding space allowed).
fn approves(stdout: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(stdout.trim_ascii())
        .ok()
        .and_then(|v| v.get("decision").and_then(|d| d.as_str().map(|d| d == "allow")))
        .unwrap_or(false)
}

/// A hook's stderr as a reason: trimmed, at most [`REASON_MAX`] bytes.
fn reason(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let text = text.trim();
    if text.is_empty() {
        return "(the hook wrote no reason on stderr)".into();
    }
    let mut end = text.len().min(REASON_MAX);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}
