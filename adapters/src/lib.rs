//! # turnstile-adapters: the reference host (SPEC section 9)
//!
//! Real IO around the sans-IO core: a tokio host that feeds the engine and performs its
//! outputs, the SQLite store with the run ledger, and the event streams.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use turnstile_adapters::{Answer, Host, HostConfig, ScriptedProvider, ToolSet};
//! use turnstile_core::{Submit, Usage};
//!
//! let provider = ScriptedProvider::new(|_, _| Answer::streamed("hello", 2, 10, Usage::default()));
//! let host = Host::open(HostConfig::new("agent.db"), Arc::new(provider), ToolSet::new()).await?;
//! let run = host.submit(Submit::new("s1", "hi").with_run_id("r1")).await?;
//! let done = host.wait(run.run_id.as_ref().expect("a run id")).await?;
//! println!("{}", done.text.unwrap_or_default());
//! host.shutdown().await?;
//! # Ok(()) }
//! ```
//!
//! ## Layout
//!
//! | module | SPEC | what it owns |
//! |---|---|---|
//! | [`host`] | 9, 4.12 | the engine task, workers and store writer; the public API |
//! | [`store`] | 4.12, 9 | SQLite: schema, writes, recovery, reads, the owner lock |
//! | [`events`] | 9 | live updates, completion streams, waiters |
//! | [`provider`] | 9 | the provider trait, requests, the scripted provider |
//! | [`tool`] | 9 | the tool trait and tool sets |
//! | [`history`] | 4.9 | building a request from the stored history, with repairs |
//! | [`record`] | 5 | the completion record (RunComplete) and cursors |

#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod events;
pub mod history;
pub mod host;
#[cfg_attr(not(feature = "mutants"), allow(dead_code))]
mod mutants;
pub mod provider;
pub mod record;
mod rt;
pub use rt::panic_message;
pub mod store;
pub mod tool;

pub use events::{Completions, Event, Update, Updates, WaitError};
pub use host::{
    Flight, FlightBuffer, Host, HostConfig, OpenError, SubmitError, Submitted, WriterStats,
};
#[cfg(feature = "mutants")]
pub use mutants::HostMutant;
pub use provider::{
    Answer, EventSink, ModelInfo, ModelRequest, Provider, Scripted, ScriptedProvider,
};
pub use record::{CompletionRecord, Cursor};
pub use tool::{BoxFuture, EchoTool, Tool, ToolCall, ToolSet};
