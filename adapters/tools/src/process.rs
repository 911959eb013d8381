//! Child processes for `bash` and the hooks: each leads its own process group, killed when
//! dropped, so an aborted call, a timeout or a cancel leaves no process behind.
//!
//! A host that is killed (SIGKILL, a power cut) kills nothing: its running commands' groups
//! live on. A [`Reaper`] records each running group in a folder, and the next start of the
//! host kills the groups a killed one left ([`Reaper::reap`]).

use std::path::{Path, PathBuf};
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
    reaper: Option<&Reaper>,
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
    let mut group = Group::of(&child, reaper);
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
struct Group {
    pgid: Option<nix::unistd::Pid>,
    /// The group's record in a [`Reaper`]'s folder, removed once the group is killed.
    record: Option<PathBuf>,
}

impl Group {
    /// The group led by `child` (started with `process_group(0)`), recorded by `reaper`.
    fn of(child: &tokio::process::Child, reaper: Option<&Reaper>) -> Group {
        let pgid = child.id().and_then(|id| i32::try_from(id).ok());
        let record = reaper.zip(pgid).and_then(|(r, pgid)| r.record(pgid));
        Group { pgid: pgid.map(nix::unistd::Pid::from_raw), record }
    }

    /// Kills every process of the group (once).
    fn kill(&mut self) {
        if let Some(pgid) = self.pgid.take() {
            // The group may be gone already; nothing to do then.
            let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
        }
        if let Some(record) = self.record.take() {
            let _ = std::fs::remove_file(record);
        }
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A folder of the process groups running commands lead, so that a host killed before it
/// could kill them has them killed at its next start.
///
/// Each record is a file named after the group's id holding its leader's start time (Linux:
/// `/proc/<pid>/stat`, in clock ticks since boot). A group is killed only when a process with
/// that id still exists and started at that time, so a reused id is never killed. Where the
/// start time cannot be read (no `/proc`), nothing is recorded and nothing is reaped.
#[derive(Clone, Debug)]
pub struct Reaper {
    dir: PathBuf,
}

impl Reaper {
    /// The reaper keeping its records in `dir` (created if needed). One host process owns a
    /// folder at a time: give each store its own (the CLI uses `running/` beside the store,
    /// whose owner lock makes it so).
    ///
    /// # Errors
    /// The folder cannot be created.
    pub fn new(dir: impl Into<PathBuf>) -> std::io::Result<Reaper> {
        let dir = dir.into();
        std::fs::create_dir_all(&dir)?;
        Ok(Reaper { dir })
    }

    /// Kills every recorded group whose leader still runs (the same process: same id, same
    /// start time) and forgets every record. Returns the ids of the groups killed.
    ///
    /// Call it once at start, before any command runs.
    pub fn reap(&self) -> Vec<i32> {
        let mut killed = Vec::new();
        let Ok(entries) = std::fs::read_dir(&self.dir) else { return killed };
        let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        paths.sort();
        for path in paths {
            let recorded = std::fs::read_to_string(&path).ok();
            let pgid =
                path.file_name().and_then(|n| n.to_str()).and_then(|n| n.parse::<i32>().ok());
            if let (Some(pgid), Some(recorded)) = (pgid, recorded)
                && start_time(pgid).is_some_and(|t| t.to_string() == recorded.trim())
                && nix::sys::signal::killpg(
                    nix::unistd::Pid::from_raw(pgid),
                    nix::sys::signal::Signal::SIGKILL,
                )
                .is_ok()
            {
                killed.push(pgid);
            }
            let _ = std::fs::remove_file(&path);
        }
        killed
    }

    /// Records the group `pgid`; `None` when its start time cannot be read or written.
    fn record(&self, pgid: i32) -> Option<PathBuf> {
        let started = start_time(pgid)?;
        let path = self.dir.join(pgid.to_string());
        std::fs::write(&path, started.to_string()).ok()?;
        Some(path)
    }
}

/// When process `pid` started, in clock ticks since boot (field 22 of `/proc/<pid>/stat`).
fn start_time(pid: i32) -> Option<u64> {
    let stat =
        std::fs::read_to_string(Path::new("/proc").join(pid.to_string()).join("stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: count after it.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}
