//! Pre-tool hooks (SPEC 8, 9 "Tools"): commands that see a call before it runs and may block
//! it, halt the turn, or pre-approve its permission.
//!
//! ```toml
//! [[hooks.pre_tool]]
//! command = ["./scripts/check-call.sh"]   # argv, run in the working directory
//! tools = "bash"                          # optional: a glob over tool names (default: all)
//! timeout_secs = 30                       # optional (default 60)
//! fail_closed = false                     # optional: a hook that cannot run blocks the call
//! ```
//!
//! The hook gets the call as one JSON object on stdin ([`HookInput`]: `event`, `session_id`,
//! `call_id`, `tool_name`, `tool_input`, `cwd`; `tool_input` as the tool reads it, so `path`
//! when the model sent `file_path`) and answers with its exit status:
//!
//! | exit | meaning |
//! |---|---|
//! | 0 | go on; stdout `{"decision":"allow"}` pre-approves the permission (an ask becomes a yes) |
//! | 2 | block the call: its result is `Tool call blocked by hook. Reason: <stderr>`; the turn goes on |
//! | 49 | halt the turn: `Turn halted by hook. Reason: <stderr>`; it ends `completed`, stop reason `hook_halt` |
//! | other | the hook failed to run |
//!
//! A hook that cannot start, exits with another status, or outlives its timeout (its process
//! group is then killed) **failed to run**: the call goes on as if the hook were not there,
//! unless the hook is `fail_closed`, which blocks the call instead. Hooks run in the order
//! configured; the first that blocks or halts decides. Sub-agents run no hooks (SPEC 4.11).

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
    /// Its position in `hooks.pre_tool`, from 0.
    pub index: usize,
    /// What is wrong.
    pub reason: String,
}

impl std::fmt::Display for HookError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "hooks.pre_tool[{}]: {}", self.index, self.reason)
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

/// What a hook receives on stdin.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct HookInput {
    /// Always `pre_tool`.
    pub event: String,
    /// The calling session.
    pub session_id: String,
    /// The provider's call id.
    pub call_id: String,
    /// The tool's name.
    pub tool_name: String,
    /// The call's arguments as the tool reads them ([`crate::args::canonical`]).
    pub tool_input: serde_json::Value,
    /// The working directory.
    pub cwd: String,
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

impl Hook {
    /// The hooks of a `[hooks]` section.
    ///
    /// # Errors
    /// The first hook with an empty command or a bad tool glob.
    pub fn all(file: &HooksFile) -> Result<Vec<Hook>, HookError> {
        file.pre_tool
            .iter()
            .enumerate()
            .map(|(index, h)| {
                let error = |reason: String| HookError { index, reason };
                if h.command.first().is_none_or(String::is_empty) {
                    return Err(error(
                        "`command` is empty; give the program and its arguments".into(),
                    ));
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

/// Runs the hooks that see `input.tool_name`, in order, and says what they decided.
pub async fn run_hooks(hooks: &[Hook], input: &HookInput, cwd: &std::path::Path) -> Verdict {
    let mut approved = false;
    for hook in hooks.iter().filter(|h| h.sees(&input.tool_name)) {
        match hook.run(input, cwd).await {
            Ran::Exited { code: 0, stdout, .. } => {
                approved |= approves(&stdout);
            }
            Ran::Exited { code: EXIT_BLOCK, stderr, .. } => {
                return Verdict::Block(format!(
                    "Tool call blocked by hook. Reason: {}",
                    reason(&stderr)
                ));
            }
            Ran::Exited { code: EXIT_HALT, stderr, .. } => {
                return Verdict::Halt(format!("Turn halted by hook. Reason: {}", reason(&stderr)));
            }
            Ran::Exited { code, stderr, .. } => {
                let why = format!("it exited with status {code}: {}", reason(&stderr));
                if let Some(v) = failed(hook, &why) {
                    return v;
                }
            }
            Ran::Failed(why) => {
                if let Some(v) = failed(hook, &why) {
                    return v;
                }
            }
        }
    }
    Verdict::Proceed { approved }
}

/// A hook that failed to run: logged; a block when it fails closed.
fn failed(hook: &Hook, why: &str) -> Option<Verdict> {
    tracing::warn!(hook = %hook.name(), fail_closed = hook.fail_closed, "pre-tool hook failed to run: {why}");
    hook.fail_closed.then(|| {
        Verdict::Block(format!(
            "Tool call blocked by hook. Reason: the hook `{}` failed to run ({why}) and is configured to fail closed",
            hook.name()
        ))
    })
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
