//! stdout, whose reader may go away: `turnstile sessions | head -1` closes the pipe after one
//! line. `println!` panics then ("Broken pipe", exit status 101); [`line()`] notes instead that
//! stdout is closed, and every later line is dropped. A listing ends quietly; a run is
//! cancelled as by Ctrl-C and waited for, since nobody reads what it prints
//! ([`closed`] wakes it), and exits with its status without a word on stderr.

use std::io::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::Notify;

/// Set once a write to stdout failed: its reader is gone.
static CLOSED: AtomicBool = AtomicBool::new(false);
/// Wakes whoever waits in [`closed`].
static WAKE: Notify = Notify::const_new();

/// Writes `text` and a newline to stdout; false (and nothing written) once stdout is closed.
pub fn line(text: &str) -> bool {
    if is_closed() {
        return false;
    }
    let mut out = std::io::stdout().lock();
    let written = writeln!(out, "{text}").and_then(|()| out.flush());
    if written.is_err() {
        // A broken pipe, or any other reason stdout cannot take more: the same for us.
        CLOSED.store(true, Ordering::SeqCst);
        WAKE.notify_waiters();
        return false;
    }
    true
}

/// True once a write to stdout failed.
pub fn is_closed() -> bool {
    CLOSED.load(Ordering::SeqCst)
}

/// Completes once stdout is closed (at once if it is already).
pub async fn closed() {
    loop {
        let woken = WAKE.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        if is_closed() {
            return;
        }
        woken.await;
    }
}
