//! # turnstile-sim: the deterministic simulation of the real host, and trace tooling
//!
//! - [`world`]: the simulated world around the real host (`turnstile-adapters`): a seeded
//!   provider and tools, clients that submit, cancel, clear and summarize at random moments,
//!   store faults, and the checks after every seed (SPEC 10 "Sim").
//! - `sweep` (only under `--cfg madsim`): one deterministic madsim runtime per seed.
//! - [`shrink`]: delta debugging of a failing core trace down to a minimal one.
//! - [`rng`]: the world's seeded randomness.
//!
//! The command `turnstile-sim` exposes `sweep`, `seed`, `mutants`, `determinism`, `shrink`,
//! `replay` and `bless`.
//!
//! "SPEC n" cites section n of the contract, `docs/spec.md` in the repository; "G-nn" a flaw of
//! the reference design from its appendix.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod rng;
pub mod shrink;
#[cfg(madsim)]
pub mod sweep;
pub mod world;
