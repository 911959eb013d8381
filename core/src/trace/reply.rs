//! The process driver's replies (SPEC 12): the one JSON line `turnstile-driver` writes for each
//! line it reads. The vocabulary only, so the schema generator names it without depending on the
//! driver ([`crate::trace::driver`] is the state machine that produces them).

use serde::Serialize;
use serde_json::Value;

use crate::alphabet::{Output, OutputClass};

/// The exit status after a header the driver cannot start from (nothing to run).
pub const EXIT_BAD_HEADER: u8 = 2;
/// The exit status after the engine failed ([`crate::HostError::is_fatal`]).
pub const EXIT_ENGINE_FAILED: u8 = 70;

/// The one line the driver writes for each line it reads (blank lines get none).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum DriverReply {
    /// The header was read and the engine started.
    Ready {
        /// The 1-based line of the header.
        line: usize,
        /// The trace format the driver speaks, `turnstile-trace`.
        format: String,
        /// Its version.
        version: u32,
    },
    /// The input was handled: every output it produced, in order (possibly none).
    Outputs {
        /// The 1-based line of the input.
        line: usize,
        /// The outputs.
        outputs: Vec<Output>,
        /// Each output's class, in the same order: whether the host must answer it, must
        /// perform it, or may ignore it ([`OutputClass`]). A host's catch-all for an output kind
        /// it does not know checks this, and never drops one it must answer or perform.
        classes: Vec<OutputClass>,
        /// For a `tool_started` input only: whether the call's work may begin now
        /// ([`crate::Engine::is_tool_started`] right after it). Only a tool left to finish once
        /// started ([`crate::OnAbort::FinishOnceStarted`]) waits for this, and for it `false`
        /// means the call was aborted first and its work must never begin; for any other tool
        /// it is `false` (such a call's work began at `run_tool`).
        #[serde(skip_serializing_if = "Option::is_none")]
        tool_started: Option<bool>,
    },
    /// The input was handled, and the outputs differ from the line's `expect`.
    Mismatch {
        /// The 1-based line of the input.
        line: usize,
        /// The first differing output (0-based within the line).
        index: usize,
        /// What the line expected there (`null`: fewer outputs expected).
        expected: Option<Value>,
        /// Every output the engine produced.
        outputs: Vec<Output>,
        /// Each output's class, as in `outputs`.
        classes: Vec<OutputClass>,
    },
    /// The line is not a valid input (not UTF-8, not JSON, or not what the schema describes).
    /// The engine did not see it and goes on.
    Error {
        /// The 1-based line.
        line: usize,
        /// The field at fault by its path (`input.up_to`), when one is.
        #[serde(skip_serializing_if = "Option::is_none")]
        field: Option<String>,
        /// What is wrong, in the core's words.
        message: String,
    },
    /// The engine refused the input as host misuse ([`crate::HostError`]): nothing changed and
    /// it goes on.
    Refused {
        /// The 1-based line.
        line: usize,
        /// The error's kind ([`crate::HostError::code`]).
        code: String,
        /// The error, in the core's words.
        message: String,
    },
    /// The engine failed and accepts nothing more; the driver exits with
    /// [`EXIT_ENGINE_FAILED`].
    Failed {
        /// The 1-based line.
        line: usize,
        /// The error's kind ([`crate::HostError::code`]).
        code: String,
        /// The error, in the core's words.
        message: String,
    },
}
