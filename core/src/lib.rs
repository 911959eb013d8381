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
//! One module per SPEC concept; `docs/architecture.md` maps every input and output to its
//! handler.
//!
//! | module | SPEC | what it owns |
//! |---|---|---|
//! | [`ids`] | 3 | identifiers and time |
//! | [`input`], [`output`] | 2, 7 | the alphabets |
//! | `engine` | 2 | the two doors, host-protocol checks, dispatch |
//! | `acceptance` | 4.1 | validation, sequences, RunId idempotency |
//! | `preparation` | 4.1 | prepared, failed |
//! | `admission` | 4.2, 4.6 | hand-off and step start |
//! | `fold` | 4.3 | folding the prepared prefix |
//! | `stream` | 4.4 | streaming into a step's message, the stream's end |
//! | `retry` | 4.5 | retries, backoff, credential refresh |
//! | `step` | 4.4, 4.6 | tool results, usage, the ends of a turn |
//! | `loops` | 4.8 | loop-detection signatures and window |
//! | `summary` | 4.7 | summarization: housekeeping, pause and resume, manual |
//! | `subagent` | 4.11 | sub-agents and cross-session work |
//! | `title` | 4.11 | session titles |
//! | `cancel` | 4.10 | cancel watermark, cancel_run, clear_queue, aborts |
//! | `shutdown` | 4.10 | shutdown, deadline, timers |
//! | `cleanup` | 4.9 | clean-up writes, end of a turn |
//! | [`outcome`] | 5 | the one decider and the completion record |
//! | `ledger` | 4.1 | RunIds and fingerprints |
//! | `transition` | 7 | canonical output order |
//! | [`invariants`] | 6 | state checker and stream auditor |
//! | [`trace`], [`mod@replay`] | 10 | trace files, flight recorder, replay |
//!
//! Dependencies: `serde` (inputs, outputs and traces are data), `serde_json` (the trace format),
//! `sha2` (RunId fingerprints, loop signatures).

#![deny(missing_docs)]
#![forbid(unsafe_code)]
#![deny(clippy::unwrap_used, clippy::expect_used)]

mod acceptance;
mod admission;
mod cancel;
mod cleanup;
mod config;
mod engine;
mod error;
mod fold;
pub mod ids;
pub mod input;
pub mod invariants;
mod ledger;
mod loops;
#[cfg_attr(not(feature = "mutants"), allow(dead_code, unused_macros))]
mod mutants;
pub mod outcome;
pub mod output;
mod preparation;
pub mod projection;
pub mod replay;
mod retry;
mod shutdown;
mod state;
mod step;
mod stream;
mod subagent;
mod summary;
mod title;
pub mod trace;
mod transition;

pub use acceptance::validate;
pub use cleanup::{
    CANCELED_FINISH, CANCELLED_TOOL_RESULT, FAILED_TOOL_RESULT, INTERRUPTED_TITLE, SHUTDOWN_FINISH,
};
pub use config::{Acceptor, Config, Start};
pub use engine::Engine;
pub use error::HostError;
pub use ids::{CallId, MessageId, Millis, RunId, Seq, SessionId, TimerId, TurnId};
pub use input::{
    Attachment, AttemptIo, CallIo, ErrorClass, FinishReason, Input, Mode, ProviderError, Setup,
    StepEvent, StepIo, StopTurn, Submit, SummaryIo, ToolOutput, ToolSpec, Usage,
};
pub use invariants::{Auditor, Violation, check_invariants};
pub use ledger::{Fingerprint, KnownRun};
#[cfg(feature = "mutants")]
pub use mutants::Mutant;
pub use outcome::{Completion, ErrorInfo, ErrorKind, Outcome, StopReason};
pub use output::{MessageFinish, Output, OutputKind, Rejection, Reply, StoreOp, TimerPurpose};
pub use preparation::PREPARATION_TITLE;
pub use replay::{ReplayFailure, ReplayReport, bless, replay};
pub use retry::{UNAUTHORIZED_TITLE, retry_delay_ms};
pub use step::{LOOP_MESSAGE, LOOP_TITLE, STEP_LIMIT_TITLE};
pub use stream::{INVALID_JSON_RESULT, unknown_tool_result};
pub use subagent::{
    AGENT_TOOL, NEW_AGENT_TITLE, NO_TEXT_OUTPUT, PROMPT_REQUIRED, child_session_id,
    offered_to_sub_agent, unusable_call_id,
};
pub use summary::{
    CONTEXT_WINDOW_MESSAGE, CONTEXT_WINDOW_TITLE, SUMMARIZATION_TITLE, SUMMARY_REQUEST,
    at_threshold, continuation,
};
pub use title::{UNTITLED, clean_title, title_from_prompt};
pub use trace::{Recorder, Trace, TraceError, TraceHeader, TraceLine};
