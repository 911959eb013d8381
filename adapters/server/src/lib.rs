//! # turnstile-server: the reference host over HTTP (SPEC 9 "Server")
//!
//! The API of `turnstile serve`: thin axum handlers over [`turnstile_host::Host`]'s public
//! API, a bearer token, and an event stream that survives reconnects and restarts.
//!
//! - **Acceptance is durable**: `202 Accepted` is sent only once the submission's ledger row
//!   is committed (the host's `submit` answers then). A resubmission with the same RunId and
//!   the same request answers the existing run; a different request with it is `409`.
//! - **Exactly-once completions**: the event stream's ids are positions in the ledger and the
//!   store's change order ([`feed`]); a client that reconnects with `Last-Event-ID`, also after
//!   the server was killed and restarted, gets every RunComplete it missed once, and the
//!   current state of every message and session that changed meanwhile.
//! - **Permission asks are events** ([`asks`]): answered with `POST /v1/asks/{id}`, withdrawn
//!   when a cancel aborts the call; a late answer is `409`.
//! - **A slow client slows nobody**: the engine never waits for a stream; a stream that falls
//!   behind reads what it missed from the store.
//! - **Who may call** ([`auth`]): a bearer token compared in constant time, never logged; a
//!   request with a browser `Origin` that is not allowed is refused.
//! - **Limits** ([`Limits`]): body size (`413`), prompt size, attachments, open streams.
//!
//! The routes and their JSON are in the OpenAPI 3.1 document [`OPENAPI`], served at
//! `GET /v1/openapi.json`; CI checks the running server against it.
//!
//! ```no_run
//! # async fn demo(host: turnstile_host::Host) -> std::io::Result<()> {
//! use turnstile_server::{Asks, Server, ServerConfig, Token};
//!
//! let token = Token::new("a-long-random-secret").expect("a usable token");
//! let server = Server::start(host, Asks::new(), ServerConfig::new(token)).await;
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8700").await?;
//! axum::serve(listener, server.router()).await
//! # }
//! ```

#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod asks;
pub mod auth;
pub mod delta;
pub mod error;
pub mod feed;
pub mod listen;
mod routes;

use std::sync::Arc;
use std::time::Duration;

pub use asks::{Asks, PendingAsk};
pub use auth::{Token, TokenError, TokenSource};
pub use error::ApiError;
pub use listen::{ConnectionLimits, FileLimitTooLow, connection_budget};
use turnstile_host::Host;

/// The OpenAPI 3.1 document of this API (served at `GET /v1/openapi.json`).
pub const OPENAPI: &str = include_str!("openapi.json");

/// The limits a request must keep (SPEC 9: 413 over the body limit).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The largest request body, in bytes (`413 payload_too_large` above it).
    pub body_bytes: usize,
    /// The longest prompt, in bytes (`400 prompt_too_long`).
    pub prompt_bytes: usize,
    /// The most attachments on one prompt (`400 too_many_attachments`).
    pub attachments: usize,
    /// The most event streams open at once (`503 too_many_streams` above it).
    pub streams: usize,
    /// The longest `wait` (a longer `timeout_ms` is cut to it).
    pub wait: Duration,
    /// The longest session id or RunId, in bytes (`400 invalid_id`).
    pub id_bytes: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            body_bytes: 8 << 20,
            prompt_bytes: 1 << 20,
            attachments: 16,
            streams: 2048,
            wait: Duration::from_secs(300),
            id_bytes: 256,
        }
    }
}

/// How the server behaves.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// The bearer token every request must carry.
    pub token: Token,
    /// Origins (`scheme://host[:port]`) whose requests are allowed; any other `Origin` is
    /// refused (none by default: only clients that are not browsers).
    pub allowed_origins: Vec<String>,
    /// The limits.
    pub limits: Limits,
    /// How often an idle event stream gets a heartbeat comment.
    pub heartbeat: Duration,
    /// Frames the feed keeps for streams that fall behind before they read the store.
    pub feed_capacity: usize,
    /// The bytes of frames one stream may leave unread before it is ended; its client resumes
    /// from its `Last-Event-ID`, reading what it missed from the store.
    pub stream_backlog_bytes: u64,
    /// What a connection may hold ([`Server::serve`]).
    pub connections: ConnectionLimits,
    /// Rows (messages and sessions, whole revisions) or RunCompletes a resumed stream reads
    /// from the store at a time ([`feed::CATCH_UP_PAGE`]): what a catch-up from far back holds.
    pub catch_up_page: usize,
    /// The `user_prompt_submit` hooks every prompt passes before it is submitted (a block is
    /// 400 `blocked_by_hook`).
    pub prompt_hooks: Vec<turnstile_tools::Hook>,
    /// Where hooks run.
    pub hooks_cwd: std::path::PathBuf,
}

impl ServerConfig {
    /// Defaults with this token.
    #[must_use]
    pub fn new(token: Token) -> ServerConfig {
        ServerConfig {
            token,
            allowed_origins: Vec::new(),
            limits: Limits::default(),
            heartbeat: Duration::from_secs(15),
            feed_capacity: 4096,
            stream_backlog_bytes: 16 << 20,
            connections: ConnectionLimits::default(),
            catch_up_page: feed::CATCH_UP_PAGE,
            prompt_hooks: Vec::new(),
            hooks_cwd: std::path::PathBuf::from("."),
        }
    }
}

/// A running server: the feed task and what the handlers share. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Server {
    pub(crate) inner: Arc<Inner>,
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) host: Host,
    pub(crate) asks: Asks,
    pub(crate) config: ServerConfig,
    pub(crate) feed: feed::Feed,
    pub(crate) streams: Arc<tokio::sync::Semaphore>,
    pub(crate) shutting_down: tokio::sync::watch::Sender<bool>,
}

impl Server {
    /// Starts the event feed over `host`. `asks` must be the [`Asker`](turnstile_tools::Asker)
    /// of the host's permission gate, so that its asks reach the clients.
    pub async fn start(host: Host, asks: Asks, config: ServerConfig) -> Server {
        let feed = feed::Feed::start(host.clone(), asks.clone(), config.feed_capacity).await;
        let streams = Arc::new(tokio::sync::Semaphore::new(config.limits.streams));
        let inner = Inner {
            host,
            asks,
            config,
            feed,
            streams,
            shutting_down: tokio::sync::watch::channel(false).0,
        };
        Server { inner: Arc::new(inner) }
    }

    /// The routes, behind the `Origin` check and the token.
    pub fn router(&self) -> axum::Router {
        routes::router(self.clone())
    }

    /// Serves the routes on `listener` with the configuration's connection limits
    /// ([`listen`]) until `shutdown` completes, then waits for the open connections to end
    /// (bound that wait: a client that stops reading keeps its connection).
    ///
    /// # Errors
    /// Accepting connections failed for good.
    pub async fn serve(
        &self,
        listener: tokio::net::TcpListener,
        shutdown: impl std::future::Future<Output = ()>,
    ) -> std::io::Result<()> {
        let limits = self.inner.config.connections.clone();
        listen::serve(listener, self.router(), limits, shutdown).await
    }

    /// Shuts the host down (SPEC 4.10): new prompts get `503 shutting_down`, every unfinished
    /// submission ends `interrupted` and its RunComplete reaches the streams, then the streams
    /// end. The HTTP server itself is stopped by the caller after this returns.
    ///
    /// # Errors
    /// Why the host stopped, when it stopped before or during the shutdown.
    pub async fn shutdown(&self) -> Result<(), turnstile_host::Stopped> {
        self.inner.shutting_down.send_replace(true);
        self.inner.host.shutdown().await
    }

    /// The host the server is over.
    #[must_use]
    pub fn host(&self) -> &Host {
        &self.inner.host
    }
}
