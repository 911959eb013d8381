//! The lines of a trace file (SPEC section 10): its header and its input lines, as
//! `docs/trace-format.md` specifies them; `schema.rs` derives the JSON Schema from these types.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::alphabet::{Config, Input, Millis, Outcome, Seq, Start};

/// The value of the header's `format` field.
pub const TRACE_FORMAT: &str = "turnstile-trace";
/// The trace format version this build reads and writes.
pub const TRACE_VERSION: u32 = 1;

/// The first line of a trace file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct TraceHeader {
    /// Always [`TRACE_FORMAT`].
    pub format: String,
    /// The format version, [`TRACE_VERSION`].
    pub version: u32,
    /// A short name, by convention the file name without `.jsonl`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The rule or flaw the trace pins down, in a sentence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// The engine configuration.
    #[serde(default)]
    pub config: Config,
    /// The engine's start state.
    #[serde(default)]
    pub start: Start,
    /// Where the trace came from: a seed and commit, a model counterexample, a recording.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<serde_json::Value>,
    /// The outcome each listed sequence must have when the trace ends (checked by replay).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect_outcomes: Option<BTreeMap<Seq, Outcome>>,
}

impl TraceHeader {
    /// A header for this configuration and start state.
    #[must_use]
    pub fn new(config: Config, start: Start) -> TraceHeader {
        TraceHeader {
            format: TRACE_FORMAT.to_owned(),
            version: TRACE_VERSION,
            name: None,
            rule: None,
            config,
            start,
            origin: None,
            expect_outcomes: None,
        }
    }
}

/// One input line.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct TraceLine {
    /// The input's time.
    pub at: Millis,
    /// The input.
    pub input: Input,
    /// The outputs this input must produce, in order, when present (`[]`: none at all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "Option<Vec<crate::alphabet::Output>>"))]
    pub expect: Option<Vec<serde_json::Value>>,
    /// The projection (SPEC 7, [`crate::projection`]) the outputs must have, when present: how
    /// a model counterexample states what the specification expected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect_projection: Option<crate::check::projection::Projection>,
}
