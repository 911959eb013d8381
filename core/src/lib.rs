//! # turnstile-core: the sans-IO session lifecycle engine (SPEC section 2)
//!
//! An agent host receives prompts for sessions while earlier ones are still running, while users
//! cancel, while providers fail. This crate decides, for every prompt, who may run now, what
//! waits, what a cancel ends, and that each caller hears exactly one completion. It does no IO,
//! reads no clock, spawns no thread and draws no random number: the host feeds it one
//! [`Input`] at a time with the current time and performs the [`Output`]s it drains. The same
//! inputs always give byte-identical outputs (SPEC I12).
//!
//! ## Host protocol
//!
//! The host runs this loop; [`Engine`] has exactly two methods that change it.
//!
//! 1. Send one input with [`Engine::handle`]`(now, input)`: a client command (submit, cancel,
//!    cancel_run, clear_queue, summarize, shutdown), a reply to IO an output asked for, or a
//!    timer firing. `now` never goes backwards.
//! 2. Drain [`Engine::poll_output`] until `None`, acting on each output in order:
//!    - [`OutputKind::Reply`]: answer the caller (after making an `Accepted` ledger row durable);
//!    - [`OutputKind::Store`]: apply the write, in order per session; [`OutputKind::Commit`]
//!      ends a transaction (a commit of only streamed text may wait for the debounce window);
//!    - [`OutputKind::Prepare`], [`OutputKind::StartStep`], [`OutputKind::RunTool`],
//!      [`OutputKind::RefreshCredentials`], [`OutputKind::StartSummary`],
//!      [`OutputKind::RequestTitle`]: start the IO and, when it reports, send
//!      [`Input::Prepared`] / [`Input::PreparationFailed`], [`Input::Step`] events,
//!      [`Input::ToolResult`], [`Input::CredentialsRefreshed`], [`Input::Summary`] events,
//!      [`Input::TitleGenerated`], naming the IO exactly as the output did;
//!    - `Abort*`: stop that IO; replies that still arrive are ignored, so sending them is fine;
//!    - [`OutputKind::SetTimer`] / [`OutputKind::CancelTimer`]: arm or disarm; send
//!      [`Input::TimerFired`] at or after the deadline ([`Engine::next_deadline`] is the
//!      earliest);
//!    - [`OutputKind::Finished`]: publish the completion (and RunComplete) once its commit is
//!      durable; [`OutputKind::Stopped`]: shutdown is complete.
//! 3. Wait for the next client command, IO result or deadline, and go to 1.
//!
//! Any input is legal at any time. A reply for IO that was aborted, superseded, already
//! answered or never requested is ignored without output (I13). Host misuse returns a
//! [`HostError`] and changes nothing: time going backwards, a timer reported before its
//! deadline, a sequence where the core assigns them (or none where an external acceptor does),
//! a sequence that is not increasing, a cancel watermark naming the future, the `agent` tool
//! with an external acceptor. A detected internal bug
//! returns [`HostError::Internal`] and the engine refuses all later input.
//!
//! ```
//! use turnstile_core::{Config, Engine, FinishReason, Input, Millis, OutputKind, Start, StepEvent, Submit};
//!
//! let mut engine = Engine::new(Config::default(), Start::default())?;
//! let mut inbox = vec![Input::Submit(Submit::new("s1", "hello").with_run_id("r1"))];
//! let mut finished = Vec::new();
//! while let Some(input) = inbox.pop() {
//!     engine.handle(Millis(0), input)?;
//!     while let Some(out) = engine.poll_output() {
//!         match out.kind {
//!             OutputKind::Prepare { session, seq } => inbox.push(Input::Prepared { session, seq, setup: Default::default() }),
//!             OutputKind::StartStep { step } => inbox.push(Input::Step {
//!                 step,
//!                 event: StepEvent::Finished { reason: FinishReason::Stop, usage: None },
//!             }),
//!             OutputKind::Finished(c) => finished.push(c),
//!             _ => {} // a real host applies writes, arms timers, ...
//!         }
//!     }
//! }
//! assert_eq!(finished.len(), 1);
//! assert!(finished[0].is_run_complete());
//! # Ok::<(), turnstile_core::HostError>(())
//! ```
//!
//! ## Layout
//!
//! The folders are layers; a file imports only its own layer or a lower one (checked by
//! `tests/style.rs`, which also forbids import cycles between the files of a layer other than
//! the handlers). `docs/architecture.md` maps every input and output to its handler.
//!
//! | layer | folder | what it owns |
//! |---|---|---|
//! | 1 | `alphabet/` | what crosses the host boundary: [`ids`] and time, [`input`]s, [`output`]s, the [`outcome`] and its completion record, `Config` and `Start`, `HostError`, the exact strings of SPEC 8 ([`text`]), the mutant catalogue (test builds) |
//! | 2 | `state/` | what the engine holds: submissions and queue entries, turns with their calls and phases, summaries, sessions, the run ledger, timers; `Tx`, the transition buffer that puts outputs in SPEC 7 order |
//! | 3 | `lifecycle/` | the handlers, one module per SPEC concept: `acceptance` (4.1), `preparation` (4.1), `admission` (4.2, 4.6 hand-off), `fold` (4.3), `stream` (4.4), `retry` (4.5), `step` (4.4, 4.6), `loops` (4.8), `summary` (4.7), `subagent` (4.11), `title` (4.11), `cancel` (4.10), `shutdown` (4.10), `cleanup` (4.9), `outcome` (5: the one decider); they may call each other |
//! | 3 | `check/` | the invariants of SPEC 6 (the state checker and the stream [`Auditor`]) and the conformance [`projection`] of SPEC 7, written without the handlers |
//! | 4 | `engine.rs` | [`Engine`]: the two doors, the host-protocol checks, dispatch to the handlers |
//! | 5 | `trace/` | trace files and the flight recorder ([`trace`]), [`mod@replay`] and bless (SPEC 10) |
//!
//! Dependencies: `serde` (inputs, outputs and traces are data), `serde_json` (the trace format),
//! `sha2` (RunId fingerprints, loop signatures).

#![deny(missing_docs)]
#![forbid(unsafe_code)]
#![deny(clippy::unwrap_used, clippy::expect_used)]

mod alphabet;
mod check;
mod engine;
mod lifecycle;
mod state;
pub mod trace;

#[cfg(feature = "mutants")]
pub use alphabet::Mutant;
pub use alphabet::text::*;
pub use alphabet::{
    Acceptor, Attachment, AttemptIo, CallId, CallIo, Completion, Config, ErrorClass, ErrorInfo,
    ErrorKind, Fingerprint, FinishReason, HostError, Input, KnownRun, MessageFinish, MessageId,
    Millis, Mode, OnAbort, Outcome, Output, OutputKind, ProviderError, Rejection, Reply, RunId,
    Seq, SessionId, Setup, Start, StepEvent, StepIo, StopReason, StopTurn, StoreOp, Submit,
    SummaryIo, TimerId, TimerPurpose, ToolOutput, ToolSpec, TurnId, Usage,
};
pub use alphabet::{ids, input, outcome, output, text};
pub use check::{Auditor, Violation, projection};
pub use engine::{Engine, check_invariants};
pub use lifecycle::acceptance::validate;
pub use lifecycle::retry::retry_delay_ms;
pub use lifecycle::stream::unknown_tool_result;
pub use lifecycle::subagent::{child_session_id, offered_to_sub_agent, unusable_call_id};
pub use lifecycle::summary::{at_threshold, continuation};
pub use lifecycle::title::{clean_title, title_from_prompt};
pub use trace::replay::{self, ReplayFailure, ReplayReport, bless, replay};
pub use trace::{Recorder, Trace, TraceError, TraceHeader, TraceLine};
