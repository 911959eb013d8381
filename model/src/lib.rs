//! # turnstile-model
//!
//! An independent executable specification of the turnstile lifecycle (SPEC sections 4 to 7)
//! and an exhaustive checker of the core against it (SPEC section 10 "Model"). "SPEC n" cites
//! section n of the contract, `docs/spec.md` in the repository; "G-nn" a flaw of the reference
//! design from its appendix.
//!
//! - [`spec`]: the specification, a small naive state machine written from SPEC over an
//!   abstract version of the core's input alphabet; its module docs map every SPEC rule to it.
//! - [`action`] and [`state`]: its alphabet and its state types.
//! - [`driver`]: the lockstep host that drives the real core with the concrete inputs.
//! - [`checker`]: the breadth-first explorer, with conformance, the core's invariants, I6
//!   liveness, and shortest counterexamples written as trace files.
//! - [`encode`]: the compact, exact state encoding.
//! - [`configs`]: the named bounded configurations (`small`, `faults`, `default`, `nightly`).
//! - `mutants` (with the `mutants` feature): hunts each of the core's test-only mutants.
//!
//! `turnstile-model check` runs it from the command line; `docs/verification.md` explains what
//! it covers and what it found.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod action;
pub mod checker;
pub mod configs;
pub mod driver;
pub mod encode;
#[cfg(feature = "mutants")]
pub mod mutants;
pub mod spec;
pub mod state;

pub use checker::{Counterexample, Problem, Report, check};
pub use configs::Bounds;

/// How to run a check.
#[derive(Clone, Debug)]
pub struct Options {
    /// Drive the core in lockstep and compare (the point of the checker; off only to measure
    /// the specification's exploration alone).
    pub conformance: bool,
    /// Stop after this many distinct states (the report then covers a prefix of the space).
    pub max_states: Option<u64>,
    /// Worker threads expanding each level (1: all on the calling thread). The report is the
    /// same for any number; see [`check`].
    pub jobs: usize,
    /// Merge each state with its mirror image, the same state with the two sessions' roles
    /// swapped ([`spec::Spec::mirrored`]): a reduction that is sound when the core treats
    /// sessions alike, as SPEC does (no rule depends on a session's name). Only configurations
    /// with two sessions have mirror images. Off by default.
    pub symmetry: bool,
}

impl Default for Options {
    /// Conformance on, no limit, one worker per available core.
    fn default() -> Options {
        let jobs = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        Options { conformance: true, max_states: None, jobs, symmetry: false }
    }
}

/// Where a running check is, for a progress bar.
#[derive(Clone, Copy, Debug)]
pub struct Progress {
    /// Distinct states so far.
    pub states: u64,
    /// Transitions so far.
    pub transitions: u64,
    /// The current breadth-first level.
    pub depth: u32,
}
