//! Workspace-level test support for turnstile.
//!
//! - [`harness`]: a scripted host that drives the core, runs both invariant checkers after every
//!   input, and writes a replayable trace when anything fails.
//! - [`scenarios`]: the named lifecycle scenarios behind `traces/*.jsonl`.
//!
//! The integration tests (`lifecycle.rs`, `properties.rs`, `traces.rs`, ...) sit beside this file.
#![forbid(unsafe_code)]
#![allow(missing_docs, clippy::missing_panics_doc)]

pub mod harness;
pub mod scenarios;

/// The README's code blocks compile (run as doctests).
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
