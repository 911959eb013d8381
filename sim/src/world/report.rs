//! What one seed of the world did and what its checks found.

use std::collections::BTreeMap;

/// What one seed did and what its checks found.
#[derive(Clone, Debug, Default)]
pub struct SeedReport {
    /// The seed.
    pub seed: u64,
    /// Simulated time the world ran, in milliseconds.
    pub sim_ms: u64,
    /// Inputs the engine handled (the flight trace's lines).
    pub events: u64,
    /// Outcomes in the ledger, by kind.
    pub outcomes: BTreeMap<String, u64>,
    /// Faults injected, by kind.
    pub faults: BTreeMap<String, u64>,
    /// Broken promises; empty when the seed passed.
    pub violations: Vec<String>,
    /// SHA-256 of the flight trace: the same seed must give the same hash.
    pub trace_hash: String,
    /// The flight trace (the core's inputs), kept when the seed failed.
    pub trace: Option<String>,
}
