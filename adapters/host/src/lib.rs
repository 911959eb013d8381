//! # turnstile-host: the reference host (SPEC section 9)
//!
//! Real IO around the sans-IO core: a tokio host that feeds the engine and performs its
//! outputs, the store (SQLite, or PostgreSQL by a `postgres://` URL) with the run ledger, and
//! the event streams.
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
//! ## Logs
//!
//! The host emits [`tracing`] events and spans; nothing is written unless the application
//! installs a subscriber (for example `tracing-subscriber`'s `fmt` with
//! `RUST_LOG=turnstile_host=info`). The targets are the modules: `turnstile_host::host` (open),
//! `turnstile_host::host::engine` (what the core decided, logged as each output is routed),
//! `turnstile_host::host::worker` (IO tasks) and `turnstile_host::host::writer` (the store).
//! Wherever they are known, events carry `session`, `seq` and `run_id` as fields.
//!
//! - INFO: `submission accepted` (`mode`), `resubmission answered with the existing run`,
//!   `turn activated` (`turn`), `submission finished` (`outcome`, `stop_reason`, or
//!   `error_kind` and `error_title`: WARN with `error_message` when the outcome is `failed`),
//!   `sub-agent submission accepted` (`parent`, `parent_seq`), `cancel requested`,
//!   `cancel_run requested`, `clear_queue requested`, `summarize requested`,
//!   `shutdown requested`, `host shut down`, `credential refresh ended` (`ok`; WARN when
//!   false), `summarization accepted`, `submission paused for a summarization`,
//!   `summarization done`, `recovery: an unfinished submission ended interrupted` and `store
//!   opened; recovery done` (`interrupted`, `known_runs`).
//! - WARN: `submission rejected` (`reason`: SPEC 8's text), `summarize rejected`, `provider
//!   attempt failed: retrying` (`step`, `attempt`, `class`, `status`, `reason`, `delay_ms`),
//!   `the provider refused the credentials: waiting for a refresh`, `stream watchdog fired:
//!   the attempt was idle and is closed` (`idle_timeout_ms`), `store write failed: retrying`
//!   (`error`, `retry`, `delay_ms`) and `store write failed: no retry time left`,
//!   `summarization failed`, `an IO task panicked: reported as failed` (`panic`), `engine
//!   refused an input` (host misuse), `flight recorder write failed`.
//! - ERROR: `store write failed for good: fail-stop, the host stops` (`reason`), `host
//!   stopped` (`reason`; WARN when every handle was dropped), `shutdown failed`, `engine
//!   failed for good`, `the store could not be opened`, `the store could not be closed`.
//! - DEBUG: `submission received`, `preparing submission`, `submission prepared`, `provider
//!   attempt started` (`turn`, `step`, `attempt`, from 0 as in the trace), `summary attempt
//!   started`, the aborts (`provider attempt aborted`, `tool call aborted` with `call_id`,
//!   ...), the cancel grace and the shutdown deadline, `tool call started` and `tool call
//!   finished` (`is_error`, `elapsed_ms`). TRACE: `timer fired`.
//!
//! Every IO task runs in a DEBUG span naming it, so what a provider or a tool logs is
//! attributed: `prepare`, `provider_stream` and `summary_stream` (`attempt`), `tool_call`
//! (`tool`, `call_id`, `session`, `seq`), `credential_refresh`, `title`.
//!
//! Never logged, at any level: a key or credential (the host never holds one), and content:
//! prompts, the model's text and reasoning, tool inputs and results, titles. Error texts
//! (a provider's, the store's, SPEC 8's) are logged; they describe a failure, not a message.
//!
//! ## Layout
//!
//! | module | SPEC | what it owns |
//! |---|---|---|
//! | [`host`] | 9, 4.12 | the engine task, workers and store writer; the public API |
//! | [`error`] | 8, 9 | the host's errors: open, submit, wait, stop |
//! | [`store`] | 4.12, 9, 11 | SQLite and PostgreSQL: schema, writes, recovery, reads, the owner lock |
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
pub use host::{
    Flight, FlightBuffer, FlightShelf, Host, HostConfig, MemberConfig, Submitted, WriterStats,
};
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
