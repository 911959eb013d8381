//! # turnstile-sim
//!
//! For now: the trace tooling that the command `turnstile-sim` exposes (`replay`, `bless`).
//! The deterministic simulation of the real host under madsim, sweeps and shrinking come with
//! the issue "Sim".
#![deny(missing_docs)]
#![forbid(unsafe_code)]
