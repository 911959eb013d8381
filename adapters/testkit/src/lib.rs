//! # turnstile-testkit: what the adapters' tests share
//!
//! One of each, so that the suites of both stores (and tests with several hosts) drive the same
//! pieces:
//!
//! - [`provider`]: a fake LLM provider, a real HTTP/1.1 server that answers each request with a
//!   scripted [`provider::Reply`] (a stream, an error, a stream paced in time, a cut, a stall)
//!   and keeps what it was sent and when each connection was closed.
//! - [`events`]: a client of the server's event stream (`GET /v1/events`) that resumes with
//!   `Last-Event-ID`, keeps every event it read across its connections and counts the
//!   RunCompletes per run.
//! - [`anthropic`]: Anthropic message streams built in the recorded streams' exact shape, for
//!   the fake provider to send.
//! - [`fixtures`]: the repository's recorded provider cases.
//! - [`local`]: a free port, a binary the workspace built, the files a run left and whether
//!   a secret is in any of them.
//!
//! What every piece guarantees: it uses real sockets on 127.0.0.1 only (nothing leaves the
//! machine), and every wait a test makes through it is bounded: it panics (or answers `None`)
//! after a stated time instead of hanging the suite.
//!
//! A dev-dependency only: it panics where a test would (a failed read of a fixture, a stream
//! that is not UTF-8), since a panic is how a test fails.

#![deny(missing_docs)]
#![forbid(unsafe_code)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test kit: a failure is a panic

pub mod anthropic;
pub mod events;
pub mod fixtures;
pub mod local;
pub mod provider;
