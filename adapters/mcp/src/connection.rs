//! A started server's connection: what its tools share, and the task that notices when it
//! ends (the process exited, the HTTP connection closed) and records why.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::ClientConfig;
use rmcp::service::{
    Peer, QuitReason, RoleClient, RunningService, RunningServiceCancellationToken,
};
use tokio::sync::watch;

use crate::process::Process;

/// How long a stdio server has to exit by itself once its stdin is closed (the connection
/// ended, or the handshake failed), before its process group is killed.
pub(crate) const EXIT_WAIT: Duration = Duration::from_secs(2);

/// How long a failed call waits, beyond [`EXIT_WAIT`], for the reason its connection ended.
const REASON_WAIT: Duration = Duration::from_secs(1);

pub(crate) type Service = RunningService<RoleClient, ClientConfig>;

/// What an rmcp error comes down to: the message of its last source (rmcp's own messages
/// name its transports' Rust types), or its own message when it has none.
pub(crate) fn innermost(error: &(dyn std::error::Error + 'static)) -> String {
    let mut last = error;
    while let Some(source) = last.source() {
        last = source;
    }
    last.to_string()
}

/// A started server's connection, shared by its tools; dropping the last closes it.
pub(crate) struct Connection {
    /// The server's name.
    pub(crate) server: String,
    /// The per-call timeout, in seconds.
    pub(crate) timeout_secs: u64,
    /// True for a stdio server (its process is the connection), false over HTTP.
    pub(crate) stdio: bool,
    /// Sends requests and notifications.
    pub(crate) peer: Peer<RoleClient>,
    /// Why the connection ended, once it has.
    stopped: watch::Receiver<Option<String>>,
    /// Ends the connection when this is dropped.
    stop: Option<RunningServiceCancellationToken>,
}

impl Connection {
    /// The connection of `service` (to `process` for a stdio server), with a task that records
    /// why it ends and ends the process.
    pub(crate) fn watch(
        server: String,
        timeout_secs: u64,
        service: Service,
        process: Option<Process>,
    ) -> Arc<Connection> {
        let (stopped_tx, stopped) = watch::channel(None);
        let peer = service.peer().clone();
        let stop = Some(service.cancellation_token());
        let name = server.clone();
        let stdio = process.is_some();
        tokio::spawn(async move {
            let (reason, by_us) = match process {
                Some(process) => watch_process(service, process, &stopped_tx).await,
                None => {
                    let quit = service.waiting().await;
                    (quit_reason(&quit), matches!(quit, Ok(QuitReason::Cancelled)))
                }
            };
            if !by_us {
                tracing::warn!(server = %name, reason = %reason, "MCP server stopped");
            }
            stopped_tx.send_replace(Some(reason));
        });
        Arc::new(Connection { server, timeout_secs, stdio, peer, stopped, stop })
    }

    /// Why the connection ended, if it has.
    pub(crate) fn stopped(&self) -> Option<String> {
        if let Some(reason) = self.stopped.borrow().clone() {
            return Some(reason);
        }
        self.peer.is_transport_closed().then(|| "its connection closed".to_owned())
    }

    /// Why the connection ended, waiting a little for the reason when it has just ended; `None`
    /// when it is still open.
    pub(crate) async fn stop_reason(&self) -> Option<String> {
        let mut stopped = self.stopped.clone();
        let wait = EXIT_WAIT + REASON_WAIT;
        match tokio::time::timeout(wait, stopped.wait_for(Option::is_some)).await {
            Ok(Ok(reason)) => reason.clone(),
            _ => self.stopped(),
        }
    }
}

/// Why a connection ended, as its loop tells.
fn quit_reason(quit: &Result<QuitReason, tokio::task::JoinError>) -> String {
    match quit {
        Ok(QuitReason::Cancelled) => "turnstile closed the connection".to_owned(),
        Ok(QuitReason::Closed) => "its connection closed".to_owned(),
        Ok(other) => format!("its connection ended ({other:?})"),
        Err(e) => format!("its connection failed: {e}"),
    }
}

/// Runs until the stdio server's connection or its process ends, then ends the other; returns
/// why, and whether turnstile closed it. A process that exits first has its reason published
/// at once, before the connection's loop is stopped, so that the calls it fails can tell why.
async fn watch_process(
    service: Service,
    mut process: Process,
    stopped: &watch::Sender<Option<String>>,
) -> (String, bool) {
    enum First {
        Connection(Result<QuitReason, tokio::task::JoinError>),
        Process(Option<std::process::ExitStatus>),
    }
    let stop = service.cancellation_token();
    let waiting = service.waiting();
    tokio::pin!(waiting);
    let first = tokio::select! {
        biased;
        quit = &mut waiting => First::Connection(quit),
        status = process.exited() => First::Process(status),
    };
    match first {
        First::Connection(quit) => {
            // Its stdin is closed: a server exits by itself then, or is killed after a while.
            let status = process.end(EXIT_WAIT).await;
            let by_us = matches!(quit, Ok(QuitReason::Cancelled));
            let reason = if status.is_some() { "it exited".to_owned() } else { quit_reason(&quit) };
            (process.last_words(reason, status).await, by_us)
        }
        First::Process(status) => {
            process.kill_group();
            let reason = process.last_words("it exited".to_owned(), status).await;
            stopped.send_replace(Some(reason.clone()));
            stop.cancel();
            let _ = waiting.await;
            (reason, false)
        }
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            stop.cancel();
        }
    }
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("server", &self.server)
            .field("timeout_secs", &self.timeout_secs)
            .field("stopped", &self.stopped())
            .finish_non_exhaustive()
    }
}
