//! The store (SPEC 4.12, 9 and 11): sessions, messages, the run ledger; transactions,
//! recovery on open, the owner lock, fault injection for tests; in SQLite (a file, or an
//! in-memory disk) or in PostgreSQL, by its [`Location`].
//!
//! Blocking (rusqlite; tokio-postgres on a connection's own runtime). The host calls it from
//! blocking threads: one [`Store`] is the only writer; [`Reader`]s are separate read
//! connections (WAL, or PostgreSQL's snapshots, let them read while it writes).
//!
//! Layout: `open` (the [`Store`] itself: opening, the owner lock, commits), `config`
//! ([`StoreConfig`]), `error` ([`StoreError`]), `txn` (a transaction as the host hands it
//! over), `sql` (the SQL both stores share, and the connection of either as a `Db`),
//! `schema` (SQLite's versioned migrations), `postgres` (PostgreSQL's migrations, lock and
//! connection), `apply` (one [`StoreOp`](turnstile_core::StoreOp) as SQL, planned into one batch per commit),
//! `recovery` (ending what a stopped process left unfinished), `read` and `changes`
//! (queries), `integrity` (what an integrity check reports), `lease` (the lease statements of
//! several hosts, SPEC 11), `cluster` (what a member host writes and reads besides its owned
//! sessions' writes: accepts, commands, takes, polls), `faults` (injected failures), `scratch`
//! (throwaway PostgreSQL databases for tests). This file only names them and hands their
//! public names on: no file of the folder imports it.

mod apply;
mod audit;
mod changes;
pub(crate) mod cluster;
mod config;
mod conn;
mod error;
mod faults;
mod integrity;
pub(crate) mod lease;
mod location;
mod open;
#[cfg(not(madsim))]
mod postgres;
mod read;
mod recovery;
mod schema;
#[cfg(not(madsim))]
mod scratch;
pub(crate) mod sql;
mod txn;
// The ledger's names of modes and outcomes, which the logs use too.
pub(crate) use schema::{mode_text, outcome_text};
#[cfg(test)]
mod tests;

pub use audit::Audit;
pub use changes::{Change, Changes, Position, SessionState};
pub use cluster::{AskClosing, AskRow, AskState};
pub use config::{StoreConfig, Synchronous};
pub use error::{STORE_IN_USE, StoreError};
pub use faults::{Fault, Faults};
pub use integrity::{IntegrityError, IntegrityProblem};
pub use location::{Location, MemoryDisk, is_postgres_url, redact};
pub(crate) use open::Committed;
pub use open::{Opened, Store};
pub use read::{
    Reader, RunRow, RunState, SessionActivity, SessionRow, StoredCall, StoredCommand,
    StoredMessage, StoredResult, StoredRole,
};
#[cfg(not(madsim))]
pub use scratch::{NO_TEST_POSTGRES, ScratchDatabase, TEST_POSTGRES};
pub(crate) use txn::{NewRun, Txn, Write};
