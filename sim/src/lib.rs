//! # turnstile-sim: the deterministic simulation of the real host, and trace tooling
//!
//! - [`world`]: the simulated world around the real host (`turnstile-host`): a seeded
//!   provider and tools, clients that submit, cancel, clear and summarize at random moments,
//!   store faults, and the checks after every seed (SPEC 10 "Sim").
//! - `sweep` (only under `--cfg madsim`): one deterministic madsim runtime per seed.
//! - [`recorded`]: real recorded provider streams served through the real decoders.
//! - [`shrink`]: delta debugging of a failing core trace down to a minimal one.
//! - [`rng`]: the world's seeded randomness.
//!
//! The command `turnstile-sim` exposes `sweep`, `seed`, `mutants`, `determinism`, `shrink`,
//! `replay`, `bless` and `decode` (recorded provider bodies into the core events they become).
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

pub mod recorded;
pub mod shrink;
#[cfg(madsim)]
pub mod sweep;
pub mod view;
pub mod world;
