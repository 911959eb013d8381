//! A stdio server's stderr, read as it comes (a server blocks when the pipe is full): every
//! chunk is a `tracing` debug event, and the last [`STDERR_TAIL_MAX`] bytes are kept for the
//! reason of a failure.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::sync::watch;

/// Bytes of a server's stderr kept: the end of it.
pub(crate) const STDERR_TAIL_MAX: usize = 2_000;

/// The end of a server's stderr, and whether the pipe has closed.
#[derive(Clone, Debug)]
pub(crate) struct StderrTail {
    tail: Arc<Mutex<Vec<u8>>>,
    closed: watch::Receiver<bool>,
}

impl StderrTail {
    /// Starts reading `stderr` of server `server` until it closes.
    pub(crate) fn capture(server: &str, mut stderr: tokio::process::ChildStderr) -> StderrTail {
        let tail = Arc::new(Mutex::new(Vec::new()));
        let (closed_tx, closed) = watch::channel(false);
        let (server, kept) = (server.to_owned(), tail.clone());
        tokio::spawn(async move {
            let mut buf = [0u8; 4096];
            while let Ok(n @ 1..) = stderr.read(&mut buf).await {
                let chunk = &buf[..n];
                tracing::debug!(server = %server, "MCP server stderr: {}", String::from_utf8_lossy(chunk).trim_end());
                let mut t = kept.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                t.extend_from_slice(chunk);
                let excess = t.len().saturating_sub(STDERR_TAIL_MAX);
                t.drain(..excess);
            }
            closed_tx.send_replace(true);
        });
        StderrTail { tail, closed }
    }

    /// Waits (at most `wait`) for the pipe to close, so that a server's last words are in.
    pub(crate) async fn closed_within(&self, wait: Duration) {
        let mut closed = self.closed.clone();
        let _ = tokio::time::timeout(wait, closed.wait_for(|c| *c)).await;
    }

    /// The kept end as text, trimmed; starting at a line when the start was cut.
    pub(crate) fn text(&self) -> String {
        let t = self.tail.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let text = String::from_utf8_lossy(&t);
        let text = if t.len() >= STDERR_TAIL_MAX {
            text.split_once('\n').map_or(&*text, |(_, rest)| rest)
        } else {
            &text
        };
        text.trim().to_owned()
    }
}
