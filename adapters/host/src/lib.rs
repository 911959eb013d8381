//! # turnstile-host: the reference host (SPEC section 9)
//!
//! Real IO around the sans-IO core: a tokio host that feeds the engine and performs its
//! outputs, the SQLite store with the run ledger, and the event streams.
//!
//! "SPEC n" cites section n of the contract, `docs/spec.md` in the repository.
//!
//! One dependency is enough: the core is re-exported as [`turnstile_core`], and everything a
//! [`Provider`] or a [`Tool`] names in its signatures (the request types, the event sink, the
//! core's step events, tool specs and outputs) is re-exported at this crate's root.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use turnstile_host::turnstile_core::Submit;
//! use turnstile_host::{Answer, Host, HostConfig, ScriptedProvider, ToolSet, Usage};
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
//! ## Errors
//!
//! Every error is a type of [`error`] or [`store`] that names its cause as a value and chains
//! it through [`std::error::Error::source`]; `Display` gives SPEC section 8's texts. Why a
//! host stopped is a [`Stopped`], shared by every waiter; an IO error names the file and what
//! was being done with it ("cannot open the lock file `<path>`: ...").
//!
//! ## Layout
//!
//! | module | SPEC | what it owns |
//! |---|---|---|
//! | [`host`] | 9, 4.12 | the engine task, workers and store writer; the public API |
//! | [`error`] | 8, 9 | the host's errors: open, submit, wait, stop |
//! | [`store`] | 4.12, 9 | SQLite: schema, writes, recovery, reads, the owner lock |
//! | [`events`] | 9 | live updates, completion streams, waiters |
//! | [`provider`] | 9 | the provider trait, requests, the scripted provider |
//! | [`tool`] | 9 | the tool trait and tool sets |
//! | [`record`] | 5 | the completion record (RunComplete) and cursors |
//!
//! Internal: `history` (4.9) builds a request from the stored history, with its repairs.
//!
//! `examples/reference_host.rs` is a whole program on the host: submit, wait, live updates,
//! the completion stream, a stop without shutdown, a restart and `wait` on an old RunId.

#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub use turnstile_core;
pub use turnstile_wire;

pub mod error;
pub mod events;
mod history;
pub mod host;
#[cfg_attr(not(feature = "mutants"), allow(dead_code))]
mod mutants;
pub mod provider;
pub mod record;
mod rt;
pub mod store;
pub mod tool;

pub use error::{InvalidRequest, OpenError, Stopped, SubmitError, WaitError};
pub use events::{Completions, Event, Update, Updates};
pub use host::{Flight, FlightBuffer, Host, HostConfig, Submitted, WriterStats};
#[cfg(feature = "mutants")]
pub use mutants::HostMutant;
pub use provider::{
    Answer, BoxError, EventSink, ModelInfo, ModelRequest, Provider, RequestCall, RequestKind,
    RequestMessage, RequestResult, Scripted, ScriptedProvider, ToolDef,
};
pub use record::{CompletionRecord, Cursor};
pub use store::{IntegrityError, StoreConfig, StoreError};
pub use tool::{BoxFuture, EchoTool, Tool, ToolCall, ToolSet, agent_definition};
/// The core's types that [`Provider`] and [`Tool`] name in their signatures (with the types of
/// their fields), so that implementing either needs no other import.
pub use turnstile_core::{
    Attachment, CallId, ErrorClass, FinishReason, OnAbort, ProviderError, SessionId, StepEvent,
    StopTurn, ToolOutput, ToolSpec, Usage,
};
