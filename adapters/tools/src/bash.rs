//! `bash`: one shell command in the working directory, with a timeout, capped output, and its
//! whole process group killed on abort or timeout, so a cancel leaves no process behind.

use std::time::Duration;

use serde::Deserialize;
use serde_json::json;
use turnstile_core::{ToolOutput, ToolSpec};
use turnstile_host::{BoxFuture, Tool, ToolCall};
use turnstile_wire::ToolDef;

use crate::args;
use crate::process::{self, Ended};
use crate::workspace::Workspace;

/// The timeout when the call gives none.
pub const BASH_TIMEOUT_DEFAULT: Duration = Duration::from_secs(120);
/// The longest timeout a call may ask for.
pub const BASH_TIMEOUT_MAX: Duration = Duration::from_secs(600);
/// Bytes of output kept; the middle of a longer output is cut, with a note.
pub const BASH_OUTPUT_MAX: usize = 30_000;

/// Runs shell commands.
#[derive(Clone, Debug)]
pub struct Bash {
    /// The working directory (the command's current directory).
    pub workspace: Workspace,
    /// Where running commands' process groups are recorded, so that the next start kills
    /// those a killed host left running ([`crate::Reaper`]); `None`: not recorded.
    pub reaper: Option<crate::Reaper>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BashArgs {
    command: String,
    #[serde(default)]
    timeout_ms: Option<u64>,
}

impl Tool for Bash {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new("bash")
    }

    fn definition(&self) -> ToolDef {
        ToolDef::new(
            "bash",
            "Run a bash command in the working directory and return its exit status and output \
             (stdout and stderr, the middle cut when longer than 30,000 bytes). Timeout: 2 minutes \
             by default, at most 10. Commands do not keep state between calls.",
        )
        .with_schema(json!({
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The command."},
                "timeout_ms": {"type": "integer", "minimum": 1, "maximum": BASH_TIMEOUT_MAX.as_millis() as u64, "description": "The timeout in milliseconds (default 120000)."},
            },
            "required": ["command"],
            "additionalProperties": false,
        }))
    }

    fn run(&self, call: ToolCall) -> BoxFuture<ToolOutput> {
        let this = self.clone();
        Box::pin(async move {
            match args::parse(&this.definition(), &call.input) {
                Ok((a, ignored)) => ignored.annotate(this.bash(a).await),
                Err(invalid) => invalid,
            }
        })
    }
}

impl Bash {
    async fn bash(&self, a: BashArgs) -> ToolOutput {
        let timeout =
            a.timeout_ms.map_or(BASH_TIMEOUT_DEFAULT, Duration::from_millis).min(BASH_TIMEOUT_MAX);
        let mut command = tokio::process::Command::new("bash");
        command.arg("-c").arg(&a.command).current_dir(self.workspace.root());
        match process::run(command, None, timeout, self.reaper.as_ref()).await {
            Ended::Exited { code, stdout, stderr } => {
                let status =
                    code.map_or_else(|| "killed by a signal".to_owned(), |c| format!("exit {c}"));
                let text = format!("{status}\n{}", capped(&stdout, &stderr));
                if code == Some(0) { ToolOutput::ok(text) } else { ToolOutput::error(text) }
            }
            Ended::NotStarted(e) => ToolOutput::error(format!("cannot start bash: {e}")),
            Ended::Lost(e) => ToolOutput::error(format!("exit unknown ({e})")),
            Ended::TimedOut => ToolOutput::error(format!(
                "timed out after {} s; the command and everything it started were killed",
                timeout.as_secs_f64()
            )),
        }
    }
}

/// stdout then stderr, the middle cut beyond [`BASH_OUTPUT_MAX`] bytes with a note of how much.
fn capped(out: &[u8], err: &[u8]) -> String {
    let mut all = String::from_utf8_lossy(out).into_owned();
    if !err.is_empty() {
        all.push_str("\n[stderr]\n");
        all.push_str(&String::from_utf8_lossy(err));
    }
    if all.len() <= BASH_OUTPUT_MAX {
        return all;
    }
    let half = BASH_OUTPUT_MAX / 2;
    let mut head = half;
    while !all.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail = all.len() - half;
    while !all.is_char_boundary(tail) {
        tail += 1;
    }
    format!("{}\n[… {} bytes cut …]\n{}", &all[..head], tail - head, &all[tail..])
}
