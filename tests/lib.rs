//! Workspace-level integration tests of turnstile live beside this file (`traces.rs`, ...);
//! the recorded regression traces live in `traces/`. This library is empty: the package
//! exists so that `cargo test` runs the tests at the workspace's top level.
#![forbid(unsafe_code)]
