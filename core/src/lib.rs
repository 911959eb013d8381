//! # turnstile-core: the sans-IO session lifecycle engine (SPEC section 2)
//!
//! An agent host receives prompts for sessions while earlier ones are still running, while users
//! cancel, while providers fail. This crate decides, for every prompt, who may run now, what
//! waits, what a cancel ends, and that each caller hears exactly one completion. It does no IO,
//! reads no clock, spawns no thread and draws no random number: the host feeds it one
//! [`Input`] at a time with the current time and performs the [`Output`]s it drains. The same
//! inputs always give byte-identical outputs (SPEC I12).
//!
//! ## A submission's life
//!
//! ```text
//!            Submit (acceptance::on_submit)
//!              │                      └─ refused, or cancelled on entry ──────────────┐
//!              ▼                                                                      │
//!   waiting: preparing ──Prepared──▶ prepared (queued while the lane is taken) ──────┤ folded at a step
//!              │ PreparationFailed          │ hand-off (admission::hand_off)          │ start (fold.rs),
//!              │                            ▼                                         │ cancel, shutdown
//!              │                         active ⇄ paused (a summary, SPEC 4.7)        │
//!              │                            │ cleanup::end_turn, summary's end        │
//!              ▼                            ▼                                         ▼
//!   done: completed · failed · cancelled · interrupted · folded   (outcome::decide, once)
//! ```
//!
//! One private function, `outcome::decide` (`outcome::fold` for a fold), consumes the
//! submission by value and builds its [`Completion`]; the handlers only choose the verdict.
//! In the state, a waiting submission is an entry of its session's queue (preparing or
//! prepared), an active one the owner of the session's turn, a paused one the owner kept by a
//! summary that resumes it. `docs/architecture.md` ("A submission's life") names the handler
//! behind each verdict and maps each state to the store's ledger and the model.
//!
//! Citations in these docs: "SPEC 4.9" or "SPEC I13" is that section or invariant of the
//! contract, `docs/spec.md` in the repository (its section numbers are stable); "G-01" is a
//! flaw of the reference design listed in its appendix, each with the trace that shows it is
//! absent here; "STYLE 4" is habit 4 of `docs/style.md`.
//!
//! ## Host protocol
//!
//! The host runs this loop; [`Engine`] has exactly two methods that change it.
//!
//! 1. Send one input with [`Engine::handle`]`(now, input)`: a client command (submit, cancel,
//!    cancel_run, clear_queue, summarize, shutdown), a reply to IO an output asked for, or a
//!    timer firing. `now` never goes backwards.
//! 2. Drain [`Engine::poll_output`] until `None`, acting on each output in order. Every output
//!    has a class ([`OutputKind::class`]):
//!    - [`OutputClass::MustAnswer`]: [`OutputKind::Prepare`], [`OutputKind::StartStep`],
//!      [`OutputKind::RunTool`], [`OutputKind::RefreshCredentials`],
//!      [`OutputKind::StartSummary`]: start the IO and, when it reports, send
//!      [`Input::Prepared`] / [`Input::PreparationFailed`], [`Input::Step`] events,
//!      [`Input::ToolResult`], [`Input::CredentialsRefreshed`], [`Input::Summary`] events,
//!      naming the IO exactly as the output did; [`OutputKind::SetTimer`]: send
//!      [`Input::TimerFired`] at or after the deadline ([`Engine::next_deadline`] is the
//!      earliest). A submission waits for these: dropping one hangs it forever.
//!    - [`OutputClass::MustPerform`]: [`OutputKind::Reply`]: answer the caller (after making an
//!      `Accepted` ledger row durable); [`OutputKind::Store`]: apply the write, in order per
//!      session; [`OutputKind::Commit`] ends a transaction (a commit of only streamed text may
//!      wait for the debounce window); [`OutputKind::Finished`]: publish the completion (and
//!      RunComplete) once its commit is durable.
//!    - [`OutputClass::MayIgnore`]: `Abort*` and [`OutputKind::CancelTimer`] stop IO the core
//!      no longer waits for (what still arrives is ignored); [`OutputKind::RequestTitle`] /
//!      [`OutputKind::AbortTitle`]: generate a title and send [`Input::TitleGenerated`] if you
//!      want one (nothing waits for it); [`OutputKind::Stopped`]: shutdown is complete.
//! 3. Wait for the next client command, IO result or deadline, and go to 1.
//!
//! The output enums are `#[non_exhaustive]`, so a host's `match` needs a catch-all arm: make it
//! check the class, never `_ => {}`, or a new output that must be answered would be dropped in
//! silence and its submission would wait forever.
//!
//! Any input is legal at any time. A reply for IO that was aborted, superseded, already
//! answered or never requested is ignored without output (I13). Host misuse returns a
//! [`HostError`] and changes nothing: time going backwards, a timer reported before its
//! deadline, a sequence where the core assigns them (or none where an external acceptor does),
//! a sequence that is not increasing, a cancel watermark naming the future, the `agent` tool
//! with an external acceptor. A detected internal bug returns [`HostError::Internal`], and a
//! counter at its maximum [`HostError::Exhausted`]; the engine then refuses all later input.
//!
//! ```
//! use turnstile_core::{
//!     Config, Engine, FinishReason, Input, Millis, OutputClass, OutputKind, Start, StepEvent, Submit,
//! };
//!
//! // This host answers every stream at once, so it turns the stream watchdog off (SPEC 4.5):
//! // with it on, each attempt's `SetTimer` must be answered too.
//! let config = Config { stream_idle_timeout_ms: 0, ..Config::default() };
//! let mut engine = Engine::new(config, Start::default())?;
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
//!             // This host keeps nothing: writes and replies have nowhere to go.
//!             OutputKind::Reply(_) | OutputKind::Store(_) | OutputKind::Commit { .. } => {}
//!             other if other.class() == OutputClass::MayIgnore => {}
//!             other => unimplemented!("this host does not handle {other:?}"),
//!         }
//!     }
//! }
//! assert_eq!(finished.len(), 1);
//! assert!(finished[0].is_run_complete());
//! # Ok::<(), turnstile_core::HostError>(())
//! ```
//!
//! ## Recovery: a host with its own store
//!
//! The core keeps nothing across a restart; the host's store does, and the next engine starts
//! from it (SPEC 4.12, `docs/spec.md`). `turnstile-host`' `store::recovery` is the
//! reference; `core/examples/sync_host.rs` does it in memory. On start, before the first input:
//!
//! 1. **Ledger.** Every row without an outcome (waiting, active or paused when the process
//!    stopped) gets the outcome `interrupted` (error kind `interrupted`, title
//!    [`INTERRUPTED_TITLE`], message [`RECOVERY_MESSAGE`]) and its RunComplete is published
//!    once, from the ledger (a waiter that subscribes later still learns it).
//! 2. **Messages.** Every assistant message without a finish gets finish `error` with the same
//!    title and message; every unfinished tool call gets input `{}`; every tool call without a
//!    result gets a written result with the text [`HISTORY_REPAIR_RESULT`]; a summary message
//!    that never finished is deleted. The history is then protocol-legal (I8).
//! 3. **[`Start`].** `next_seq` is one above the ledger's highest sequence (sequences continue
//!    over restarts); `next_message` is one above the highest message id the store ever
//!    assigned (ids are allocated by the core in [`StoreOp::UserMessage`],
//!    [`StoreOp::AssistantMessage`] and [`StoreOp::SummaryMessage`]; keep them, never reuse
//!    them); `runs` lists every ledger row with a RunId as a [`KnownRun`]: its session,
//!    sequence, [`Fingerprint::of`] the submission as accepted, and its outcome. A
//!    resubmission of a finished run is then answered with it, never run again.
//!
//! [`Engine::new`] refuses a start state it cannot continue from ([`HostError::InvalidStart`]
//! names the field).
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
//! | 3 | `lifecycle/` | the handlers, one module per SPEC concept: `acceptance` (4.1), `preparation` (4.1), `admission` (4.2, 4.6 hand-off), `fold` (4.3), `stream` (4.4), `retry` (4.5), `step` (4.4, 4.6), `loops` (4.8), `summary` (4.7), `subagent` (4.11), `title` (4.11), `cancel` (4.10), `shutdown` (4.10), `cleanup` (4.9), `outcome` (5: the one decider), `rules` (the pure rules they apply), `timers` (where a fired timer goes); a file calls only files on a lower floor (`lifecycle/mod.rs`) |
//! | 3 | `check/` | the invariants of SPEC 6 (the state checker and the stream [`Auditor`]) and the conformance [`projection`] of SPEC 7, written without the handlers |
//! | 4 | `engine.rs` | [`Engine`]: the two doors, the host-protocol checks, dispatch to the handlers |
//! | 5 | `trace/` | trace files and the flight recorder ([`trace`]), [`mod@replay`] and bless (SPEC 10) |
//!
//! Dependencies: `serde` (inputs, outputs and traces are data), `serde_json` (the trace format),
//! `sha2` (RunId fingerprints, loop signatures).

#![deny(missing_docs)]
#![forbid(unsafe_code)]
#![deny(clippy::unwrap_used, clippy::expect_used)]

#[macro_use]
mod reuse; // first: its macro is used by the modules below

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
    Millis, Mode, OnAbort, Outcome, Output, OutputClass, OutputKind, ProviderError, Rejection,
    Reply, RunId, RunUsage, Seq, SessionId, Setup, Start, StepEvent, StepIo, StopReason, StopTurn,
    StoreOp, Submit, SummaryIo, TimerId, TimerPurpose, ToolOutput, ToolSpec, TurnId, Usage,
};
pub use alphabet::{ids, input, outcome, output, text};
pub use check::{Auditor, Violation, projection};
pub use engine::{Engine, check_invariants};
pub use lifecycle::acceptance::validate;
pub use lifecycle::rules::{at_threshold, continuation, retry_delay_ms};
pub use lifecycle::stream::unknown_tool_result;
pub use lifecycle::subagent::{
    child_session_id, offered_to_sub_agent, parent_message, unusable_call_id,
};
pub use lifecycle::title::{clean_title, title_from_prompt};
pub use trace::replay::{self, ReplayFailure, ReplayReport, bless, replay};
pub use trace::{Recorder, Trace, TraceError, TraceHeader, TraceLine};
