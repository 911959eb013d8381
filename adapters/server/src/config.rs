//! How a server is configured: its API document, the limits a request must keep, and the
//! feed's and the streams' sizes.

use std::time::Duration;

use crate::auth::Token;
use crate::feed;
use crate::listen::ConnectionLimits;

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
    /// What a connection may hold ([`Server::serve`](crate::Server::serve)).
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
