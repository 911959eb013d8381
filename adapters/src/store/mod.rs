//! The SQLite store (SPEC 4.12 and 9): sessions, messages, the run ledger; transactions,
//! recovery on open, the owner lock, fault injection for tests.
//!
//! Synchronous (rusqlite). The host calls it from blocking threads: one [`Store`] is the only
//! writer; [`Reader`]s are separate read connections (WAL lets them read while it writes).
//!
//! Layout: `schema` (versioned migrations), `apply` (one [`StoreOp`] as SQL), `recovery`
//! (ending what a stopped process left unfinished), `read` (queries), `faults` (injected
//! failures).

mod apply;
mod faults;
mod location;
mod read;
mod recovery;
mod schema;
#[cfg(test)]
mod tests;

use std::path::PathBuf;

use rusqlite::Connection;
use turnstile_core::{Attachment, Mode, RunId, Seq, SessionId, Start, StoreOp};

pub use faults::{Fault, Faults};
pub use location::{Location, MemoryDisk};
pub use read::{
    Reader, RunRow, RunState, SessionRow, StoredCall, StoredMessage, StoredResult, StoredRole,
};

use crate::record::{CompletionRecord, Cursor};

/// The error text of a second process opening a store that is in use (SPEC section 8).
pub const STORE_IN_USE: &str = "store is in use by another turnstile process";

/// How to open a store.
#[derive(Clone, Debug)]
pub struct StoreConfig {
    /// Where the database is: a file (the owner lock is `<path>.lock` beside it) or an
    /// in-memory disk (simulation and tests).
    pub location: Location,
    /// `PRAGMA synchronous`: `FULL` (default) makes every commit durable on power loss;
    /// `NORMAL` only on process crash.
    pub synchronous: Synchronous,
    /// Failures to inject (tests only; `None` in production).
    pub faults: Option<Faults>,
    /// The bug the host pretends to have (test builds with the `mutants` feature only).
    #[cfg(feature = "mutants")]
    pub mutant: Option<crate::HostMutant>,
}

impl StoreConfig {
    /// A durable store at this path, without injected faults.
    #[must_use]
    pub fn new(path: impl Into<PathBuf>) -> StoreConfig {
        StoreConfig::at(Location::File(path.into()))
    }

    /// A store on an in-memory disk, without injected faults: what the simulator uses (no
    /// file system, no fsync), with the same SQL, owner lock and recovery as a file.
    #[must_use]
    pub fn in_memory(disk: &MemoryDisk) -> StoreConfig {
        StoreConfig::at(Location::Memory(disk.clone()))
    }

    /// A store at `location`, without injected faults.
    #[must_use]
    pub fn at(location: Location) -> StoreConfig {
        StoreConfig {
            location,
            synchronous: Synchronous::Full,
            faults: None,
            #[cfg(feature = "mutants")]
            mutant: None,
        }
    }
}

/// SQLite's `synchronous` setting for the writer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Synchronous {
    /// Every commit is synced to disk (durable on power loss).
    #[default]
    Full,
    /// Synced at checkpoints only (durable on a process crash, not on power loss).
    Normal,
}

/// A failed store operation.
#[derive(Debug)]
pub enum StoreError {
    /// Another process owns the store ("store is in use by another turnstile process").
    InUse,
    /// SQLite failed (locked, disk full, read-only, corrupt, ...).
    Sqlite(rusqlite::Error),
    /// An injected failure (tests).
    Injected(String),
    /// The file system failed (the lock file).
    Io(std::io::Error),
    /// The database holds something this version cannot use (a newer schema, a row that does
    /// not parse: names the table, row and field), or a write does not fit what it holds (a
    /// ledger change for a sequence without a row or in the wrong state, an update of a message
    /// that does not exist, an op this store does not know: names the op and the row).
    Corrupt(String),
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreError::InUse => f.write_str(STORE_IN_USE),
            StoreError::Sqlite(e) => write!(f, "{e}"),
            StoreError::Injected(e) => write!(f, "{e}"),
            StoreError::Io(e) => write!(f, "{e}"),
            StoreError::Corrupt(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for StoreError {}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> StoreError {
        StoreError::Sqlite(e)
    }
}

/// A new submission's ledger row, written when the core accepts it (the host holds the
/// content; the core's `Reply::Accepted` names it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewRun {
    /// The session (created when unknown).
    pub session: SessionId,
    /// The sequence the core assigned.
    pub seq: Seq,
    /// The caller's RunId.
    pub run_id: Option<RunId>,
    /// The mode it runs in.
    pub mode: Mode,
    /// The prompt.
    pub prompt: String,
    /// The attachments.
    pub attachments: Vec<Attachment>,
}

/// One write of a transaction.
#[derive(Clone, Debug)]
pub enum Write {
    /// Insert a new submission's ledger row (state `waiting`), creating its session if needed.
    Accept(NewRun),
    /// A write the core asked for.
    Op(StoreOp),
}

impl Write {
    /// True for streamed content (text, reasoning or summary text appended): coalescible, so a
    /// transaction of only these may wait for the debounce window (SPEC 4.12).
    #[must_use]
    pub fn is_streamed(&self) -> bool {
        matches!(
            self,
            Write::Op(
                StoreOp::AppendText { .. }
                    | StoreOp::AppendReasoning { .. }
                    | StoreOp::SummaryText { .. }
            )
        )
    }
}

/// One transaction of one session: the writes between two `Commit`s of the core, in order.
#[derive(Clone, Debug)]
pub struct Txn {
    /// The session whose writes these are.
    pub session: SessionId,
    /// The writes, in the core's order.
    pub writes: Vec<Write>,
}

/// What opening a store found and did.
#[derive(Debug)]
pub struct Opened {
    /// The writer.
    pub store: Store,
    /// What the engine starts from: sequences and message ids above the store's maxima, and
    /// every run with a RunId and its outcome.
    pub start: Start,
    /// The submissions recovery ended `interrupted`, in cursor order.
    pub recovered: Vec<(Cursor, CompletionRecord)>,
}

/// The single writer of a store, holding the owner lock while it lives.
#[derive(Debug)]
pub struct Store {
    conn: rusqlite::Connection,
    config: StoreConfig,
    /// The newest ledger cursor committed (0 for none). Advanced only by a commit that
    /// succeeded, so a failed commit hands out the same cursors again.
    last_cursor: u64,
    /// Held for the store's life: the exclusive owner lock.
    _lock: location::OwnerLock,
}

/// Prepared statements kept per connection: every statement of `apply` and `recovery` fits.
const STATEMENT_CACHE: usize = 64;

impl Store {
    /// Opens (creating if needed) the store at `config.location`: takes the owner lock, migrates
    /// the schema, runs recovery (SPEC 4.12), and says what the engine starts from.
    ///
    /// A store whose lock another process (or another live `Store`) holds is not touched at
    /// all: no migration, no recovery over live work.
    ///
    /// # Errors
    /// [`StoreError::InUse`] when the lock is held; [`StoreError::Io`] when the lock file
    /// cannot be opened; [`StoreError::Corrupt`] for a schema newer than this code or rows that
    /// do not parse; SQLite errors.
    pub fn open(config: &StoreConfig) -> Result<Opened, StoreError> {
        let lock = config.location.lock()?;
        let mut conn = config.location.connect(true)?;
        conn.busy_timeout(read::BUSY_TIMEOUT)?;
        let want = config.location.journal_mode();
        let mode: String =
            conn.pragma_update_and_check(None, "journal_mode", want, |r| r.get(0))?;
        if !mode.eq_ignore_ascii_case(want) {
            return Err(StoreError::Corrupt(format!(
                "the store could not switch to {want} journaling (journal_mode is {mode})"
            )));
        }
        let synchronous = match config.synchronous {
            Synchronous::Full => "FULL",
            Synchronous::Normal => "NORMAL",
        };
        conn.pragma_update(None, "synchronous", synchronous)?;
        conn.pragma_update(None, "foreign_keys", true)?;
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        schema::migrate(&mut conn)?;
        let mut last_cursor = read::newest_cursor(&conn)?.0;
        let armed = crate::mutants::Armed::of(config);
        let recovered = recovery::recover(&mut conn, &mut last_cursor, armed)?;
        let start = read::start(&conn)?;
        let store = Store { conn, config: config.clone(), last_cursor, _lock: lock };
        Ok(Opened { store, start, recovered })
    }

    /// Group commit: applies every write of every transaction, in order, in one SQLite
    /// transaction, and commits it. All or nothing: on any error nothing is applied and no
    /// cursor is used up.
    ///
    /// Returns the cursor assigned to each [`StoreOp::LedgerOutcome`], in the order they
    /// appear. Publish a completion only after this returned `Ok` (SPEC 4.12).
    ///
    /// # Errors
    /// SQLite errors (`SQLITE_BUSY` when another connection holds the write lock past the busy
    /// timeout; the host retries with backoff); [`StoreError::Corrupt`] for a write that does
    /// not fit the store; injected faults.
    pub fn commit(&mut self, txns: &[Txn]) -> Result<Vec<Cursor>, StoreError> {
        let fault = self.config.faults.as_ref().and_then(Faults::on_commit);
        if let Some(f) = fault.filter(|f| !f.after_apply()) {
            return Err(f.error());
        }
        let result = apply_all(&self.conn, txns, self.last_cursor, fault);
        if !self.conn.is_autocommit() {
            // A failure after BEGIN (a write, an injected fault, COMMIT itself): undo it all,
            // so the next commit can begin. The rollback's own error adds nothing.
            let _ = self.conn.prepare_cached("ROLLBACK").and_then(|mut s| s.execute([]));
        }
        let cursors = result?;
        if let Some(last) = cursors.last() {
            self.last_cursor = last.0;
        }
        Ok(cursors)
    }

    /// A new read-only connection to the same database.
    ///
    /// # Errors
    /// SQLite errors.
    pub fn reader(&self) -> Result<Reader, StoreError> {
        Reader::open_at(&self.config.location)
    }

    /// Where the store is.
    #[must_use]
    pub fn location(&self) -> &Location {
        &self.config.location
    }

    /// Checkpoints the WAL into the database file (`wal_checkpoint(TRUNCATE)`) and closes the
    /// connection, releasing the owner lock.
    ///
    /// # Errors
    /// SQLite errors of the checkpoint or the close; the lock is released either way.
    pub fn close(self) -> Result<(), StoreError> {
        let Store { conn, _lock: lock, .. } = self;
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
        conn.close().map_err(|(_, e)| StoreError::Sqlite(e))?;
        drop(lock);
        Ok(())
    }
}

/// Applies and commits `txns` in one transaction; returns the cursors it assigned. On an error
/// the transaction is left open for the caller to roll back. BEGIN and COMMIT are cached
/// statements like every other, so a commit compiles nothing.
fn apply_all(
    conn: &Connection,
    txns: &[Txn],
    last_cursor: u64,
    fault: Option<Fault>,
) -> Result<Vec<Cursor>, StoreError> {
    conn.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
    let mut cursors = apply::Cursors { last: last_cursor, assigned: Vec::new() };
    for txn in txns {
        for w in &txn.writes {
            apply::write(conn, w, &mut cursors)?;
        }
    }
    if let Some(f) = fault {
        return Err(f.error());
    }
    conn.prepare_cached("COMMIT")?.execute([])?;
    Ok(cursors.assigned)
}
