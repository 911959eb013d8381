//! A child process's whole group, killed when dropped: how `bash` and the hooks make sure an
//! aborted call, a timeout or a cancel leaves no process behind.

/// Kills the process group when dropped (or at [`Group::kill`]). An aborted call's future is
/// dropped, and this with it.
pub(crate) struct Group(Option<nix::unistd::Pid>);

impl Group {
    /// The group led by `child` (started with `process_group(0)`).
    pub(crate) fn of(child: &tokio::process::Child) -> Group {
        Group(child.id().and_then(|id| i32::try_from(id).ok()).map(nix::unistd::Pid::from_raw))
    }

    /// Kills every process of the group (once).
    pub(crate) fn kill(&mut self) {
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
