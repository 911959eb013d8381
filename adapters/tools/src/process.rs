//! Child processes for `bash` and the hooks: each leads its own process group, killed when
//! dropped, so an aborted call, a timeout or a cancel leaves no process behind.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// How a child run with [`run`] ended.
pub(crate) enum Ended {
    /// It exited (or was killed by a signal: no code), with all it wrote.
    Exited { code: Option<i32>, stdout: Vec<u8>, stderr: Vec<u8> },
    /// It could not be started.
    NotStarted(std::io::Error),
    /// Waiting for it failed.
    Lost(std::io::Error),
    /// It outlived `timeout`; its group was killed.
    TimedOut,
}

/// Runs `command` in a process group of its own, writing `input` to its stdin (none: stdin is
/// `/dev/null`) and reading stdout and stderr to their ends, for `timeout` at most. Whatever it
/// left running in its group is killed when it ends, at the timeout, or when this future is
/// dropped.
pub(crate) async fn run(
    mut command: tokio::process::Command,
    input: Option<&[u8]>,
    timeout: Duration,
) -> Ended {
    command
        .stdin(if input.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let mut child = match command.spawn() {
        Ok(c) => c,
        Err(e) => return Ended::NotStarted(e),
    };
    let mut group = Group::of(&child);
    let (mut stdin, mut stdout, mut stderr) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take());
    let work = async {
        let write = async {
            if let (Some(s), Some(bytes)) = (stdin.as_mut(), input) {
                // A child that does not read its input is not an error.
                let _ = s.write_all(bytes).await;
            }
            // Closed, so the child sees the end of its input.
            drop(stdin.take());
        };
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let read_out = async {
            if let Some(s) = stdout.as_mut() {
                let _ = s.read_to_end(&mut out).await;
            }
        };
        let read_err = async {
            if let Some(s) = stderr.as_mut() {
                let _ = s.read_to_end(&mut err).await;
            }
        };
        tokio::join!(write, read_out, read_err);
        (child.wait().await, out, err)
    };
    let ended = match tokio::time::timeout(timeout, work).await {
        Ok((Ok(status), stdout, stderr)) => Ended::Exited { code: status.code(), stdout, stderr },
        Ok((Err(e), _, _)) => Ended::Lost(e),
        Err(_) => Ended::TimedOut,
    };
    group.kill();
    ended
}

/// Kills the process group when dropped (or at [`Group::kill`]). An aborted call's future is
/// dropped, and this with it.
struct Group(Option<nix::unistd::Pid>);

impl Group {
    /// The group led by `child` (started with `process_group(0)`).
    fn of(child: &tokio::process::Child) -> Group {
        Group(child.id().and_then(|id| i32::try_from(id).ok()).map(nix::unistd::Pid::from_raw))
    }

    /// Kills every process of the group (once).
    fn kill(&mut self) {
        if let Some(pgid) = self.0.take() {
            // The group may be gone already; nothing to do then.
            let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
        }
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        self.kill();
    }
}
