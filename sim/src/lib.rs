//! # turnstile-sim: the deterministic simulation of the real host, and trace tooling
//!
//! - [`sweep`]: [`Sweep`](sweep::Sweep), a builder of sweeps for a test of your own: the
//!   built-in world, or one with your tools, provider behaviour, client mix, faults and
//!   checks; `run` (under `--cfg madsim`) runs its seeds in parallel, one deterministic madsim
//!   runtime each, and reports each failing seed with its rerun command, its core trace and
//!   the trace shrunk.
//! - [`world`]: the simulated world around the real host (`turnstile-host`): a provider, tools,
//!   clients that submit, cancel, clear and summarize at random moments, faults, and the
//!   checks after every seed (SPEC 10 "Sim").
//! - [`members`]: several member hosts over one store on simulated nodes (SPEC 11), with
//!   kills, pauses past the lease and partitions from the store.
//! - [`recorded`]: real recorded provider streams served through the real decoders.
//! - [`shrink`]: delta debugging of a failing core trace down to a minimal one.
//! - [`regression`]: a recorded trace (a live run's flight trace) made into a regression trace
//!   for `tests/traces/`.
//! - [`rng`]: the world's seeded randomness.
//!
//! A sweep in a test of your own (a file that starts `#![cfg(madsim)]`, run with
//! `RUSTFLAGS="--cfg madsim" CARGO_TARGET_DIR=target/madsim cargo test --release`):
//!
//! ```no_run
//! use turnstile_sim::sweep::Sweep;
//!
//! let sweep = Sweep::new("built-in world").seeds(200);
//! #[cfg(madsim)]
//! sweep.run().assert_passed();
//! ```
//!
//! `docs/verification.md` ("Sweeps in your own tests") and the example crate
//! `examples/sweep-your-tool` show a tool of your own with a check of its own.
//!
//! The command `turnstile-sim` exposes `sweep`, `seed`, `mutants`, `members` and
//! `members-mutants` (several hosts over one store), `determinism`, `shrink`,
//! `replay` (also of a live run's recording, `turnstile run --record DIR`, and `--save` to make
//! it a regression trace), `bless`, `view` and `decode` (recorded provider bodies into the core
//! events they become).
//!
//! "SPEC n" cites section n of the contract, `docs/spec.md` in the repository; "G-nn" a flaw of
//! the reference design from its appendix.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod rng;

/// The message of a panic's payload (`panic!` with a literal or a formatted string), or "a
/// panic without a message": how a seed or a replay that panicked is reported.
#[must_use]
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_owned()
    }
}

pub mod members;
pub mod recorded;
pub mod regression;
pub mod shrink;
pub mod sweep;
pub mod view;
pub mod world;
