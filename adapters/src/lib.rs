//! # turnstile-adapters (empty for now)
//!
//! Will hold the reference host with real IO around `turnstile-core` (issue "Adapters"):
//! the tokio host, the SQLite store with the run ledger, the event streams, HTTP providers,
//! tools, the `turnstile` CLI and server. Nothing here works yet, and the crate exports no
//! items.
#![deny(missing_docs)]
#![forbid(unsafe_code)]
