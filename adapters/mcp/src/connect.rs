//! Starting servers: the process or the HTTP endpoint, the MCP handshake and `tools/list`,
//! within the startup timeout; a server that fails gives a [`StartFailure`], never an error
//! that stops the others.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::{ClientInitializeError, RoleClient};
use rmcp::transport::common::client_side_sse::ExponentialBackoff;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{IntoTransport, StreamableHttpClientTransport};
use tokio::time::Instant;

use crate::config::{ServerConfig, Transport, header};
use crate::connection::{Connection, EXIT_WAIT, Service, innermost};
use crate::name::Names;
use crate::process::Process;
use crate::tool::McpTool;

/// A server that did not start: it offers no tools. Its [`Display`](std::fmt::Display) is a
/// sentence for the user: "MCP server `name` did not start: reason".
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StartFailure {
    /// The server's name (its key under `[mcp]`).
    pub server: String,
    /// Why: the command that could not run, the handshake that failed or timed out, with the
    /// end of the server's stderr when it wrote any.
    pub reason: String,
}

impl std::fmt::Display for StartFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MCP server `{}` did not start: {}", self.server, self.reason)
    }
}

impl std::error::Error for StartFailure {}

/// Starts every configured server at once (each within its startup timeout) and returns the
/// tools of those that started, then the failures of those that did not, both in server name
/// order (and each server's tools in the order of its `tools/list`).
///
/// A server that fails (a command that cannot run, a process that exits, a handshake that
/// fails or does not finish in time, an invalid configuration) offers no tools and does not
/// stop the others. A server stays connected while any of its tools lives: dropping the last
/// one closes the connection (and kills a stdio server's process group). Tool names follow
/// [`crate::name`]; the tools can be added to a set with [`crate::add_tools`].
///
/// Must be called within a tokio runtime, which then runs each connection.
pub async fn connect_all(
    configs: &BTreeMap<String, ServerConfig>,
) -> (Vec<McpTool>, Vec<StartFailure>) {
    // A JoinSet: dropping this future (the host gave up) aborts the starts still under way.
    let mut starts = tokio::task::JoinSet::new();
    let mut ids = HashMap::new();
    for (name, config) in configs {
        let handle = starts.spawn(start(name.clone(), config.clone()));
        ids.insert(handle.id(), name.clone());
    }
    let mut done = BTreeMap::new();
    while let Some(joined) = starts.join_next_with_id().await {
        let (name, result) = match joined {
            Ok((id, result)) => (ids[&id].clone(), result),
            Err(e) => {
                let name = ids[&e.id()].clone();
                let reason = format!("its start failed: {e}");
                (name.clone(), Err(StartFailure { server: name, reason }))
            }
        };
        done.insert(name, result);
    }
    let (mut tools, mut failures) = (Vec::new(), Vec::new());
    let mut names = Names::default();
    for (_, result) in done {
        match result {
            Ok(started) => tools.extend(started.offer(&mut names)),
            Err(failure) => {
                tracing::debug!(server = %failure.server, reason = %failure.reason, "MCP server did not start");
                failures.push(failure);
            }
        }
    }
    (tools, failures)
}

/// Starts one server, as [`connect_all`] does, and returns its tools.
///
/// # Errors
/// The server did not start.
pub async fn connect(name: &str, config: &ServerConfig) -> Result<Vec<McpTool>, StartFailure> {
    let started = start(name.to_owned(), config.clone()).await?;
    Ok(started.offer(&mut Names::default()))
}

/// A server that started: its connection and the tools it listed.
struct Started {
    connection: Arc<Connection>,
    tools: Vec<rmcp::model::Tool>,
}

impl Started {
    /// Its tools under their offered names.
    fn offer(self, names: &mut Names) -> Vec<McpTool> {
        let server = &self.connection.server;
        let mut offered = Vec::new();
        for tool in self.tools {
            match names.claim(server, &tool.name) {
                Some(name) => {
                    tracing::debug!(server = %server, tool = %tool.name, offered = %name, "MCP tool");
                    offered.push(McpTool::new(self.connection.clone(), name, tool));
                }
                None => {
                    tracing::warn!(server = %server, tool = %tool.name, "MCP tool listed twice: offered once");
                }
            }
        }
        offered
    }
}

async fn start(server: String, config: ServerConfig) -> Result<Started, StartFailure> {
    let fail = |reason: String| StartFailure { server: server.clone(), reason };
    config.validate().map_err(fail)?;
    let deadline = Instant::now() + config.startup_timeout();
    let secs = config.startup_timeout_secs;
    let (service, tools, process) = match &config.transport {
        Transport::Stdio { command, env, cwd } => {
            let (mut process, stdout, stdin) =
                Process::spawn(&server, command, env, cwd.as_ref()).map_err(fail)?;
            match handshake((stdout, stdin), deadline, secs).await {
                Ok((service, tools)) => (service, tools, Some(process)),
                Err(failed) => {
                    // A server that failed the handshake has likely exited: give it a moment,
                    // for its exit status; one that timed out is killed at once.
                    let grace = if failed.timed_out { Duration::ZERO } else { EXIT_WAIT };
                    let status = process.end(grace).await;
                    let reason = match status {
                        Some(_) => format!("it exited during {}", failed.phase),
                        None => failed.reason,
                    };
                    return Err(fail(process.last_words(reason, status).await));
                }
            }
        }
        Transport::Http { url, headers } => {
            let mut custom = HashMap::new();
            for (name, value) in headers {
                let (n, v) = header(name, value).map_err(fail)?;
                custom.insert(n, v);
            }
            let mut config =
                StreamableHttpClientTransportConfig::with_uri(url.as_str()).custom_headers(custom);
            config.retry_config = Arc::new(http_retries());
            let transport = StreamableHttpClientTransport::from_config(config);
            let (service, tools) =
                handshake(transport, deadline, secs).await.map_err(|f| fail(f.reason))?;
            (service, tools, None)
        }
    };
    tracing::debug!(server = %server, tools = tools.len(), "MCP server started");
    let connection = Connection::watch(server, config.timeout_secs, service, process);
    Ok(Started { connection, tools })
}

/// How often a streamable HTTP response stream that broke is reopened before its call fails
/// ("the connection closed before the call was answered"): twice, at once and then after the
/// server's SSE `retry` interval if it gave one (3 s for rmcp's servers), else 0.2 s. rmcp's
/// default reopens forever, which would leave a call to a server that died waiting for its
/// timeout.
fn http_retries() -> ExponentialBackoff {
    let mut retries = ExponentialBackoff::default();
    retries.max_times = Some(2);
    retries.base_duration = Duration::from_millis(100);
    retries.max_delay = Some(Duration::from_secs(1));
    retries
}

/// The client as servers see it: turnstile, asking for no client capabilities (no sampling,
/// roots or elicitation; such requests from a server are refused).
fn client_config() -> ClientConfig {
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("turnstile", env!("CARGO_PKG_VERSION")),
    )
}

/// Why a handshake failed.
struct HandshakeFailed {
    reason: String,
    /// The step that failed: "the MCP handshake" or "tools/list".
    phase: &'static str,
    timed_out: bool,
}

/// The MCP handshake (`initialize`) and the whole `tools/list`, by `deadline`.
async fn handshake<T, E, A>(
    transport: T,
    deadline: Instant,
    secs: u64,
) -> Result<(Service, Vec<rmcp::model::Tool>), HandshakeFailed>
where
    T: IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let phase = "the MCP handshake";
    let failed = |reason: String, phase, timed_out| HandshakeFailed { reason, phase, timed_out };
    let service = match tokio::time::timeout_at(deadline, client_config().serve(transport)).await {
        Err(_) => return Err(failed(format!("no answer to {phase} within {secs} s"), phase, true)),
        Ok(Err(ClientInitializeError::TransportError { error, .. })) => {
            return Err(failed(format!("{phase} failed: {}", innermost(&error)), phase, false));
        }
        Ok(Err(e)) => {
            return Err(failed(format!("{phase} failed: {}", innermost(&e)), phase, false));
        }
        Ok(Ok(service)) => service,
    };
    let offers_tools = service.peer_info().is_some_and(|info| info.capabilities.tools.is_some());
    if !offers_tools {
        return Ok((service, Vec::new()));
    }
    let phase = "tools/list";
    match tokio::time::timeout_at(deadline, service.list_all_tools()).await {
        Err(_) => Err(failed(format!("no answer to {phase} within {secs} s"), phase, true)),
        Ok(Err(e)) => Err(failed(format!("{phase} failed: {}", innermost(&e)), phase, false)),
        Ok(Ok(tools)) => Ok((service, tools)),
    }
}
