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
//!   liveness, and shortest counterexamples written as trace files; `tree` (private): the
//!   default [`Strategy`], the core checked along the explored tree of shortest paths.
//! - [`encode`]: the compact, exact state encoding.
//! - [`configs`]: the named bounded configurations (`small`, `faults`, `default`, `nightly`).
//! - `mutants` (with the `mutants` feature): hunts each of the core's test-only mutants.
//! - [`lease`]: the lease and fencing protocol of several hosts over one database (SPEC 11),
//!   a specification of its own with its own exhaustive checker and mutants.
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
pub mod lease;
#[cfg(feature = "mutants")]
pub mod mutants;
mod search;
pub mod spec;
pub mod state;
mod tree;
mod visited;

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
    /// Explore no state the source of its transition subsumes ([`spec::Spec::subsumes`]): a
    /// transition that only spends (an idle cancel, a clear of an empty queue, a stale reply)
    /// is checked with the core like any other, and the core it leaves must be in its
    /// source's state but for the time ([`driver::Lockstep::same_future`]); its target is not
    /// explored, since its futures are all its source's. When the core's state changed, the
    /// check starts again without subsumption ([`Report::subsumption_dropped`]). On by
    /// default; off, the search is many times larger and finds the same problems.
    pub subsumption: bool,
    /// Let a finished submission forget what no rule reads any more (its mode, its counts,
    /// its outcome without a RunId, its session once no late reply can name it:
    /// [`state::Sub::finished`], `docs/verification.md`, "What a finished submission forgets"), so
    /// states that differ only there are met as one. On by default; off, the search is two
    /// to four times larger and finds the same problems (a test hunts every mutant both ways).
    pub forgetting: bool,
    /// How a lockstep check keeps the core of the states still to expand. The report is the
    /// same for both.
    pub strategy: Strategy,
    /// A mutant of the checker itself, for its tests: the core's observable digest also reads
    /// the lockstep clock, which differs between paths of different lengths to one state, so
    /// the check that every path leaves the same digest must fail.
    #[cfg(feature = "mutants")]
    pub clock_in_digest: bool,
}

/// How a check with the core in lockstep holds the core's state for the states it has still
/// to expand. Both check the same transitions with the same copy of the core (the one reached
/// along each state's shortest path, the first in breadth-first order) and give the same
/// report, counterexample included; they differ in memory and speed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Strategy {
    /// Explore the specification first, keeping every transition's target (4 bytes), then
    /// walk the tree of shortest paths depth-first with the core, a few copies of it alive
    /// per worker: memory grows by a few bytes per transition instead of a core per frontier
    /// state, and the copies stay in the cache.
    #[default]
    Tree,
    /// One breadth-first search with a copy of the core beside every frontier state (1.4 KB
    /// each). Kept as the reference the tree walk is tested against.
    Frontier,
}

impl Default for Options {
    /// Conformance on, no limit, one worker per available core.
    fn default() -> Options {
        let jobs = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        Options {
            conformance: true,
            max_states: None,
            jobs,
            symmetry: false,
            subsumption: true,
            forgetting: true,
            strategy: Strategy::default(),
            #[cfg(feature = "mutants")]
            clock_in_digest: false,
        }
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
    /// With [`Strategy::Tree`]: states whose core checks are done (the second pass; 0 while
    /// the specification is explored).
    pub checked: u64,
}
