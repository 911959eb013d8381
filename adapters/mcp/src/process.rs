//! A stdio server's process: the leader of its own process group, its stdin and stdout the MCP
//! connection, its stderr read as it comes. The whole group is killed when the server ends (so a
//! server started through `npx`, `uvx` or `sh -c` leaves no process behind), and when this is
//! dropped.

use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use process_wrap::tokio::{ChildWrapper, CommandWrap, ProcessGroup};
use tokio::process::{ChildStdin, ChildStdout};

use crate::stderr::StderrTail;

/// How long a failure's reason waits for the stderr pipe to close, so that the server's last
/// words are in.
const LAST_WORDS_WAIT: Duration = Duration::from_millis(500);

/// How long reaping a killed process may take.
const REAP_WAIT: Duration = Duration::from_secs(1);

/// A running stdio server.
pub(crate) struct Process {
    child: Box<dyn ChildWrapper>,
    /// Set once the leader has been waited for: its group id may be reused only after that, so
    /// a kill on drop is sent only before.
    reaped: bool,
    stderr: Option<StderrTail>,
}

impl Process {
    /// Starts `command` for server `server`, and returns it with the connection's two ends.
    pub(crate) fn spawn(
        server: &str,
        command: &[String],
        env: &std::collections::BTreeMap<String, String>,
        cwd: Option<&PathBuf>,
    ) -> Result<(Process, ChildStdout, ChildStdin), String> {
        let (program, args) = command.split_first().ok_or("`command` is empty")?;
        let mut cmd = CommandWrap::with_new(program, |c| {
            c.args(args).envs(env).stdin(Stdio::piped()).stdout(Stdio::piped());
            c.stderr(Stdio::piped());
            if let Some(dir) = cwd {
                c.current_dir(dir);
            }
        });
        cmd.wrap(ProcessGroup::leader());
        let mut child = cmd.spawn().map_err(|e| {
            let place = cwd.map(|d| format!(" in {d:?}")).unwrap_or_default();
            format!("could not run {program:?}{place}: {e}")
        })?;
        let (Some(stdin), Some(stdout)) = (child.stdin().take(), child.stdout().take()) else {
            return Err("its stdin or stdout could not be connected".into());
        };
        let stderr = child.stderr().take().map(|s| StderrTail::capture(server, s));
        Ok((Process { child, reaped: false, stderr }, stdout, stdin))
    }

    /// Waits for the leader to exit by itself.
    pub(crate) async fn exited(&mut self) -> Option<ExitStatus> {
        let status = self.child.wait().await.ok();
        self.reaped = true;
        status
    }

    /// Ends the server: waits up to `grace` for the leader to exit by itself (its stdin closed),
    /// then kills the whole group and reaps the leader. The status is the leader's if it exited
    /// by itself.
    pub(crate) async fn end(&mut self, grace: Duration) -> Option<ExitStatus> {
        let status = match tokio::time::timeout(grace, self.child.wait()).await {
            Ok(status) => {
                self.reaped = true;
                status.ok()
            }
            Err(_) => None,
        };
        // The group's other processes, or a leader that did not exit (none left: an error).
        let _ = self.child.start_kill();
        if !self.reaped && tokio::time::timeout(REAP_WAIT, self.child.wait()).await.is_ok() {
            self.reaped = true;
        }
        status
    }

    /// Kills the group's processes left after the leader exited (they may hold its stdout).
    pub(crate) fn kill_group(&mut self) {
        let _ = self.child.start_kill();
    }

    /// `reason`, with the leader's exit status and the end of its stderr (once the pipe closed,
    /// or after a short wait).
    pub(crate) async fn last_words(&self, reason: String, status: Option<ExitStatus>) -> String {
        let mut reason = match status {
            Some(status) => format!("{reason} ({status})"),
            None => reason,
        };
        if let Some(stderr) = &self.stderr {
            stderr.closed_within(LAST_WORDS_WAIT).await;
            let text = stderr.text();
            if !text.is_empty() {
                reason = format!("{reason}; its stderr ends with: {text}");
            }
        }
        reason
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if !self.reaped {
            let _ = self.child.start_kill();
        }
    }
}
