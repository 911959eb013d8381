//! Layer 1, the alphabet: everything that crosses the boundary between the engine and its host
//! (SPEC sections 2, 3, 5, 7 and 8).
//!
//! Identifiers and time, the inputs a host sends, the outputs it drains, the completion record,
//! the configuration and start state, host-misuse errors, the exact strings, and (test builds)
//! the mutant catalogue. Nothing here knows the engine's state; every other layer imports it.

pub(crate) mod config;
pub(crate) mod error;
pub mod ids;
pub mod input;
#[cfg_attr(not(feature = "mutants"), allow(dead_code, unused_macros))]
pub(crate) mod mutants;
pub mod outcome;
pub mod output;
pub(crate) mod run;
pub mod text;

pub use config::{Acceptor, Config, Start};
pub use error::HostError;
pub use ids::{CallId, MessageId, Millis, RunId, Seq, SessionId, TimerId, TurnId};
pub use input::{
    Attachment, AttemptIo, CallIo, ErrorClass, FinishReason, Input, Mode, OnAbort, ProviderError,
    Setup, StepEvent, StepIo, StopTurn, Submit, SummaryIo, ToolOutput, ToolSpec, Usage,
};
#[cfg(feature = "mutants")]
pub use mutants::Mutant;
pub use outcome::{Completion, ErrorInfo, ErrorKind, Outcome, RunUsage, StopReason};
pub use output::{
    MessageFinish, Output, OutputClass, OutputKind, Rejection, Reply, StoreOp, TimerPurpose,
};
pub use run::{Fingerprint, KnownRun};
pub use text::*;
