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
mod config;
pub mod delta;
pub mod error;
pub mod feed;
pub mod listen;
mod routes;
mod server;

pub use asks::{Asks, PendingAsk};
pub use auth::{Token, TokenError, TokenSource};
pub use config::{Limits, OPENAPI, ServerConfig};
pub use error::ApiError;
pub use listen::{ConnectionLimits, FileLimitTooLow, connection_budget};
pub use server::Server;
