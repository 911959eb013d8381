//! The store (SPEC 4.12, 9 and 11): sessions, messages, the run ledger; transactions,
//! recovery on open, the owner lock, fault injection for tests; in SQLite (a file, or an
//! in-memory disk) or in PostgreSQL, by its [`Location`].
//!
//! Blocking (rusqlite; tokio-postgres on a connection's own runtime). The host calls it from
//! blocking threads: one [`Store`] is the only writer; [`Reader`]s are separate read
//! connections (WAL, or PostgreSQL's snapshots, let them read while it writes).
//!
//! Layout: `sql` (the SQL both stores share, and the connection of either as a `Db`),
//! `schema` (SQLite's versioned migrations), `postgres` (PostgreSQL's migrations, lock and
//! connection), `apply` (one [`StoreOp`] as SQL, planned into one batch per commit),
//! `recovery` (ending what a stopped process left unfinished), `read` and `changes`
//! (queries), `integrity` (what an integrity check reports), `lease` (the lease statements of
//! several hosts, SPEC 11), `cluster` (what a member host writes and reads besides its owned
//! sessions' writes: accepts, commands, takes, polls), `faults` (injected failures), `scratch` (throwaway PostgreSQL databases for
//! tests).

mod apply;
mod changes;
pub(crate) mod cluster;
mod faults;
mod integrity;
pub(crate) mod lease;
mod location;
#[cfg(not(madsim))]
mod postgres;
mod read;
mod recovery;
mod schema;
#[cfg(not(madsim))]
mod scratch;
pub(crate) mod sql;
// The ledger's names of modes and outcomes, which the logs use too.
pub(crate) use schema::{mode_text, outcome_text};
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_cluster;

use std::path::PathBuf;

use sql::Db;
use turnstile_core::{Attachment, CallId, MessageId, Mode, RunId, Seq, SessionId, Start, StoreOp};

pub use changes::{Change, Changes, Position, SessionState};
pub use cluster::{AskClosing, AskRow, AskState, Audit};
pub use faults::{Fault, Faults};
pub use integrity::{IntegrityError, IntegrityProblem};
pub use location::{Location, MemoryDisk, is_postgres_url, redact};
pub use read::{
    Reader, RunRow, RunState, SessionActivity, SessionRow, StoredCall, StoredCommand,
    StoredMessage, StoredResult, StoredRole,
};
#[cfg(not(madsim))]
pub use scratch::{NO_TEST_POSTGRES, ScratchDatabase, TEST_POSTGRES};

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
    /// Several hosts: the ghost log of takes and fenced commits that the simulator checks
    /// (`None` in production).
    pub audit: Option<cluster::Audit>,
    /// The bug the host pretends to have (test builds with the `mutants` feature only).
    #[cfg(feature = "mutants")]
    pub mutant: Option<crate::HostMutant>,
}

impl StoreConfig {
    /// The mutant this configuration switches on (none without the `mutants` feature).
    pub(crate) fn armed(&self) -> crate::mutants::Armed {
        #[cfg(feature = "mutants")]
        {
            crate::mutants::Armed::with(self.mutant)
        }
        #[cfg(not(feature = "mutants"))]
        {
            crate::mutants::Armed::default()
        }
    }

    /// A durable store at this path, without injected faults; a `postgres://` (or
    /// `postgresql://`) URL given as the path is that PostgreSQL database
    /// ([`Location::parse`]).
    #[must_use]
    pub fn new(path: impl Into<PathBuf>) -> StoreConfig {
        let path = path.into();
        match path.to_str() {
            Some(text) if is_postgres_url(text) => {
                StoreConfig::at(Location::Postgres(text.to_owned()))
            }
            _ => StoreConfig::at(Location::File(path)),
        }
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
            audit: None,
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
///
/// Every variant that wraps a lower error returns it from [`std::error::Error::source`].
/// Equality (for tests and for comparing answers) compares SQLite errors by code and message,
/// and IO errors by their path, action and [`std::io::ErrorKind`].
#[derive(Debug)]
#[non_exhaustive]
pub enum StoreError {
    /// Another process owns the store ("store is in use by another turnstile process").
    InUse,
    /// The database file could not be opened or set up: "cannot open the store `<path>`:
    /// `<sqlite error>`" (no such file for a reader, a directory, not a database, no
    /// permission).
    Open {
        /// The database file.
        path: PathBuf,
        /// SQLite's error.
        source: rusqlite::Error,
    },
    /// SQLite failed on an open store (locked, disk full, read-only, corrupt, ...).
    Sqlite(rusqlite::Error),
    /// PostgreSQL failed, or could not be reached: "PostgreSQL `<database>`: `<error>`" (the
    /// database's own message, with its SQLSTATE code, when the server sent one).
    Postgres {
        /// Where the database is (its URL without the password).
        database: String,
        /// What failed.
        message: String,
        /// The SQLSTATE code the server sent, if any (`40001`, `57P01`, ...).
        code: Option<String>,
    },
    /// The file system failed: "cannot `<action>` `<path>`: `<error>`", for example "cannot
    /// open the lock file /data/agent.db.lock: Permission denied (os error 13)".
    Io {
        /// The file the action was on.
        path: PathBuf,
        /// What was being done, as a verb phrase ("open the lock file", "lock the lock file").
        action: &'static str,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The database holds something this version cannot use (a newer schema, a row that does
    /// not parse: names the table, row and field), or a write does not fit what it holds (a
    /// ledger change for a sequence without a row or in the wrong state, an update of a message
    /// that does not exist, an op this store does not know: names the op and the row).
    Corrupt(String),
    /// The call never ran: the async runtime shut down before its blocking thread started it
    /// (only a host whose runtime is going away sees this).
    Cancelled,
}

impl StoreError {
    /// The error of opening or setting up a connection at `location`: [`StoreError::Open`]
    /// naming the file, or for an in-memory disk (which has no path) [`StoreError::Sqlite`].
    pub(crate) fn opening(location: &Location, source: rusqlite::Error) -> StoreError {
        match location {
            Location::File(path) => StoreError::Open { path: path.clone(), source },
            Location::Memory(_) | Location::Postgres(_) => StoreError::Sqlite(source),
        }
    }
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreError::InUse => f.write_str(STORE_IN_USE),
            StoreError::Open { path, source } => {
                write!(f, "cannot open the store {}: {source}", path.display())
            }
            StoreError::Sqlite(e) => write!(f, "{e}"),
            StoreError::Postgres { database, message, code } => match code {
                Some(code) => write!(f, "PostgreSQL {database}: {message} (SQLSTATE {code})"),
                None => write!(f, "PostgreSQL {database}: {message}"),
            },
            StoreError::Io { path, action, source } => {
                write!(f, "cannot {action} {}: {source}", path.display())
            }
            StoreError::Corrupt(e) => f.write_str(e),
            StoreError::Cancelled => {
                f.write_str("the store call did not run: the runtime is shutting down")
            }
        }
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StoreError::Open { source, .. } | StoreError::Sqlite(source) => Some(source),
            StoreError::Io { source, .. } => Some(source),
            StoreError::InUse
            | StoreError::Postgres { .. }
            | StoreError::Corrupt(_)
            | StoreError::Cancelled => None,
        }
    }
}

impl PartialEq for StoreError {
    fn eq(&self, other: &StoreError) -> bool {
        match (self, other) {
            (StoreError::InUse, StoreError::InUse)
            | (StoreError::Cancelled, StoreError::Cancelled) => true,
            (StoreError::Open { path: p, source: a }, StoreError::Open { path: q, source: b }) => {
                p == q && a == b
            }
            (StoreError::Sqlite(a), StoreError::Sqlite(b)) => a == b,
            (
                StoreError::Postgres { database: d, message: m, code: c },
                StoreError::Postgres { database: e, message: n, code: k },
            ) => d == e && m == n && c == k,
            (
                StoreError::Io { path: p, action: x, source: a },
                StoreError::Io { path: q, action: y, source: b },
            ) => p == q && x == y && a.kind() == b.kind(),
            (StoreError::Corrupt(a), StoreError::Corrupt(b)) => a == b,
            _ => false,
        }
    }
}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> StoreError {
        StoreError::Sqlite(e)
    }
}

/// A new submission's ledger row, written when the core accepts it (the host holds the
/// content; the core's `Reply::Accepted` names it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct NewRun {
    /// The session (created when unknown).
    pub(crate) session: SessionId,
    /// The sequence the core assigned.
    pub(crate) seq: Seq,
    /// The caller's RunId.
    pub(crate) run_id: Option<RunId>,
    /// The mode it runs in.
    pub(crate) mode: Mode,
    /// The prompt.
    pub(crate) prompt: String,
    /// The attachments.
    pub(crate) attachments: Vec<Attachment>,
}

/// One write of a transaction.
#[derive(Clone, Debug)]
pub(crate) enum Write {
    /// Insert a new submission's ledger row (state `waiting`), creating its session if needed.
    Accept(NewRun),
    /// Several hosts: the owner's core was fed this command row (SPEC 11), so a later take
    /// does not feed it again.
    CommandApplied(u64),
    /// A write the core asked for.
    Op(StoreOp),
    /// The host's own, right after the core's `ToolCall` write of a call whose arguments were
    /// not valid JSON: what the model sent, kept beside the `{}` the core stored as the call's
    /// input (SPEC 4.4), for a person reading the history (never sent to a model).
    RawInput {
        /// The assistant message holding the call.
        message: MessageId,
        /// The call.
        call: CallId,
        /// The arguments as the model sent them.
        raw: String,
    },
}

impl Write {
    /// True for streamed content (text, reasoning or summary text appended): coalescible, so a
    /// transaction of only these may wait for the debounce window (SPEC 4.12).
    #[must_use]
    pub(crate) fn is_streamed(&self) -> bool {
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
pub(crate) struct Txn {
    /// The session whose writes these are.
    pub(crate) session: SessionId,
    /// The writes, in the core's order.
    pub(crate) writes: Vec<Write>,
    /// Several hosts: the epoch of the lease its writer holds the session under. The commit
    /// writes the transaction only if the lease is still the writer's at that epoch (SPEC
    /// 11's fencing); `None` for a store of one process.
    pub(crate) fence: Option<lease::Epoch>,
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
    conn: Conn,
    config: StoreConfig,
    /// The newest ledger cursor committed (0 for none). Advanced only by a commit that
    /// succeeded, so a failed commit hands out the same cursors again.
    last_cursor: u64,
    /// The newest revision committed (SPEC 9's change order; see `schema`). Advanced only by
    /// a commit that succeeded.
    revision: u64,
    /// Held for the store's life: the exclusive owner lock (a PostgreSQL store's is held by
    /// its connection).
    _lock: Option<location::OwnerLock>,
    /// Several hosts: this host's name. The store is then shared: cursors are read from the
    /// ledger inside each commit, other hosts' revisions come between this one's, and each
    /// transaction with a fence is written only under its lease.
    member: Option<String>,
}

/// What a commit wrote.
#[derive(Debug, Default)]
pub(crate) struct Committed {
    /// The cursor of each outcome it recorded, in order.
    pub(crate) cursors: Vec<Cursor>,
    /// The transactions it left out because their lease is no longer theirs (indexes into
    /// the batch, ascending).
    pub(crate) fenced: Vec<usize>,
}

/// A connection of one of the two stores.
#[derive(Debug)]
pub(crate) enum Conn {
    /// SQLite (a file or an in-memory disk).
    Sqlite(rusqlite::Connection),
    /// PostgreSQL (boxed: a connection with its statement cache is large, and the store
    /// holds one for its life).
    #[cfg(not(madsim))]
    Postgres(Box<postgres::PgConn>),
}

impl Conn {
    /// The connection as the shared SQL's [`Db`].
    pub(crate) fn db(&self) -> &dyn Db {
        match self {
            Conn::Sqlite(c) => c,
            #[cfg(not(madsim))]
            Conn::Postgres(c) => c.as_ref(),
        }
    }
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
    /// [`StoreError::InUse`] when the lock is held; [`StoreError::Io`] naming the lock file
    /// when it cannot be opened or locked; [`StoreError::Open`] naming the database file when
    /// SQLite cannot open it (or it is not a database); [`StoreError::Corrupt`] for a schema
    /// newer than this code or rows that do not parse; SQLite errors.
    pub fn open(config: &StoreConfig) -> Result<Opened, StoreError> {
        if let Location::Postgres(url) = &config.location {
            return Store::open_postgres(config, url);
        }
        let lock = config.location.lock()?;
        let mut conn = config.location.connect(true)?;
        // The first statements read the file: a file that is not a database fails here, and
        // the error names the file.
        let opening = |e| StoreError::opening(&config.location, e);
        conn.busy_timeout(read::BUSY_TIMEOUT).map_err(opening)?;
        let want = config.location.journal_mode();
        let mode: String = conn
            .pragma_update_and_check(None, "journal_mode", want, |r| r.get(0))
            .map_err(opening)?;
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
        Store::recover(Conn::Sqlite(conn), config, Some(lock))
    }

    /// Opens a PostgreSQL store: its owner lock is an advisory lock of the writer's
    /// connection, taken before anything else.
    #[cfg(not(madsim))]
    fn open_postgres(config: &StoreConfig, url: &str) -> Result<Opened, StoreError> {
        let conn = Box::new(postgres::PgConn::connect(url)?);
        conn.lock_owner()?;
        conn.migrate()?;
        Store::recover(Conn::Postgres(conn), config, None)
    }

    #[cfg(madsim)]
    fn open_postgres(_: &StoreConfig, url: &str) -> Result<Opened, StoreError> {
        Err(StoreError::Corrupt(format!("{url}: the simulator's build has no PostgreSQL store")))
    }

    /// Runs recovery on a migrated store it owns, and says what the engine starts from.
    fn recover(
        conn: Conn,
        config: &StoreConfig,
        lock: Option<location::OwnerLock>,
    ) -> Result<Opened, StoreError> {
        let db = conn.db();
        let mut last_cursor = read::newest_cursor(db)?.0;
        let recovered = recovery::recover(db, &mut last_cursor, config.armed())?;
        let start = read::start(db)?;
        let store = Store::assemble(conn, config, lock, None)?;
        Ok(Opened { store, start, recovered })
    }

    /// The store over `conn` as the database stands: its newest cursor and revision.
    fn assemble(
        conn: Conn,
        config: &StoreConfig,
        lock: Option<location::OwnerLock>,
        member: Option<String>,
    ) -> Result<Store, StoreError> {
        let db = conn.db();
        let last_cursor = read::newest_cursor(db)?.0;
        let revision = read::revision(db)?;
        Ok(Store { conn, config: config.clone(), last_cursor, revision, _lock: lock, member })
    }

    /// Opens the store as one of several hosts named `host` (SPEC 11): migrates it, and runs no
    /// recovery (each take recovers its session). On PostgreSQL its connections connect again
    /// when lost, and the server ends one that sits inside a transaction for longer than
    /// `idle`. Returns the writer of the sessions this host
    /// will own and the coordination connection ([`cluster::Coordinator`]).
    ///
    /// A PostgreSQL store's members share its owner lock, so a single-process host cannot open
    /// the store while members run, nor a member while a single-process host does. A SQLite
    /// store's members must be in one process (its lock file is not taken).
    ///
    /// # Errors
    /// [`StoreError::InUse`] when a single-process host holds the store; as [`Store::open`].
    pub(crate) fn open_member(
        config: &StoreConfig,
        host: &str,
        idle: std::time::Duration,
    ) -> Result<(Store, cluster::Coordinator), StoreError> {
        let conn = match &config.location {
            #[cfg(not(madsim))]
            Location::Postgres(url) => {
                let conn = Box::new(postgres::PgConn::connect_member(url, idle)?);
                conn.lock_member()?;
                conn.migrate()?;
                Conn::Postgres(conn)
            }
            #[cfg(madsim)]
            Location::Postgres(url) => {
                return Err(StoreError::Corrupt(format!(
                    "{url}: the simulator's build has no PostgreSQL store"
                )));
            }
            Location::File(_) | Location::Memory(_) => {
                let mut conn = member_sqlite(config)?;
                schema::migrate(&mut conn)?;
                Conn::Sqlite(conn)
            }
        };
        let coordinator = cluster::Coordinator::open(config, host, idle)?;
        let store = Store::assemble(conn, config, None, Some(host.to_owned()))?;
        Ok((store, coordinator))
    }

    /// [`Store::commit_fenced`]'s cursors alone (tests of a store of one process).
    #[cfg(test)]
    pub(crate) fn commit(&mut self, txns: &[Txn]) -> Result<Vec<Cursor>, StoreError> {
        self.commit_fenced(txns).map(|c| c.cursors)
    }

    /// Group commit: applies every write of every transaction, in order, in one transaction,
    /// and commits it. All or nothing: on any error nothing is applied and no cursor is used
    /// up.
    ///
    /// Returns the cursor assigned to each [`StoreOp::LedgerOutcome`], in the order they
    /// appear, and (several hosts, SPEC 11) the transactions their fences left out: a
    /// transaction whose lease is no longer its writer's at its epoch is not written, and
    /// everything else is. Publish a completion only after this returned `Ok` (SPEC 4.12).
    ///
    /// # Errors
    /// SQLite errors (`SQLITE_BUSY` when another connection holds the write lock past the busy
    /// timeout; the host retries with backoff); PostgreSQL's; [`StoreError::Corrupt`] for a
    /// write that does not fit the store; injected faults.
    pub(crate) fn commit_fenced(&mut self, txns: &[Txn]) -> Result<Committed, StoreError> {
        let fault = self.config.faults.as_ref().and_then(Faults::on_commit);
        if let Some(f) = fault.filter(|f| !f.after_apply()) {
            return Err(f.error());
        }
        let db = self.conn.db();
        let last = (self.last_cursor, self.revision);
        let member = self.member.as_deref().map(|host| Membership {
            host,
            armed: self.config.armed(),
            audit: self.config.audit.as_ref(),
        });
        let result = apply_all(db, txns, last, fault, member);
        if result.is_err() {
            // A failure after BEGIN (a write, an injected fault, COMMIT itself): undo it all,
            // so the next commit can begin. The rollback's own error adds nothing.
            db.rollback();
        }
        let (committed, revision) = result?;
        self.revision = revision;
        if let Some(last) = committed.cursors.last() {
            self.last_cursor = last.0;
        }
        Ok(committed)
    }

    /// The newest revision committed: every row a commit changed carries its revision.
    #[must_use]
    pub fn revision(&self) -> u64 {
        self.revision
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
        match conn {
            Conn::Sqlite(conn) => {
                conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
                conn.close().map_err(|(_, e)| StoreError::Sqlite(e))?;
            }
            // Closing the connection releases its advisory lock.
            #[cfg(not(madsim))]
            Conn::Postgres(conn) => drop(conn),
        }
        drop(lock);
        Ok(())
    }
}

/// A SQLite connection of a member host (several members in one process share the file).
///
/// # Errors
/// The file cannot be opened or set up.
fn member_sqlite(config: &StoreConfig) -> Result<rusqlite::Connection, StoreError> {
    let conn = config.location.connect(true)?;
    let opening = |e| StoreError::opening(&config.location, e);
    conn.busy_timeout(read::BUSY_TIMEOUT).map_err(opening)?;
    conn.pragma_update(None, "journal_mode", config.location.journal_mode()).map_err(opening)?;
    conn.pragma_update(None, "foreign_keys", true)?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    Ok(conn)
}

/// Applies and commits `txns` in one transaction; returns the cursors it assigned and its
/// revision. On an error the transaction is left open for the caller to roll back. BEGIN and
/// COMMIT are cached statements like every other, so a commit compiles nothing.
///
/// A member of several hosts (`member`, its name) shares the store: its cursors continue the
/// ledger's as this transaction finds it (every writer advances the revision first, so no
/// other commit runs between that read and this commit), and each transaction with a fence is
/// written only if its lease is still this host's at that epoch (`lease::fence`, which holds
/// the lease row until the commit, so no take slips in between).
/// What a member's commit needs besides the writes: its name, its mutant, its ghost log.
struct Membership<'a> {
    host: &'a str,
    armed: crate::mutants::Armed,
    audit: Option<&'a cluster::Audit>,
}

fn apply_all(
    db: &dyn Db,
    txns: &[Txn],
    (last_cursor, last_revision): (u64, u64),
    fault: Option<Fault>,
    member: Option<Membership<'_>>,
) -> Result<(Committed, u64), StoreError> {
    db.begin_write()?;
    let revision = schema::bump_revision(db)?;
    let last_cursor = match member {
        Some(_) => read::newest_cursor(db)?.0,
        None if revision != last_revision + 1 => {
            // Another writer committed to this store: the owner lock was bypassed.
            return Err(StoreError::Corrupt(format!(
                "the store's revision is {revision}, expected {}: another process wrote to it",
                last_revision + 1
            )));
        }
        None => last_cursor,
    };
    let mut fenced = Vec::new();
    if let Some(m) = &member {
        let mut checked: Vec<(&SessionId, lease::Epoch, bool)> = Vec::new();
        for (i, txn) in txns.iter().enumerate() {
            let Some(epoch) = txn.fence else { continue };
            let known = checked.iter().find(|(s, e, _)| *s == &txn.session && *e == epoch);
            let holds = match known {
                Some((_, _, holds)) => *holds,
                // The bug: the epoch is not checked.
                None if m.armed.is(crate::mutants::HostMutant::MemberNoFence) => true,
                None => {
                    let holds = lease::fence(db, txn.session.as_str(), m.host, epoch)?;
                    checked.push((&txn.session, epoch, holds));
                    holds
                }
            };
            if !holds {
                fenced.push(i);
            }
        }
    }
    let mut cursors = apply::Cursors { last: last_cursor, assigned: Vec::new() };
    let mut plan = apply::Plan::new();
    for (i, txn) in txns.iter().enumerate() {
        if fenced.contains(&i) {
            continue;
        }
        for w in &txn.writes {
            apply::write(&mut plan, w, &mut cursors)?;
        }
    }
    plan.run(db)?;
    if let Some(f) = fault {
        return Err(f.error());
    }
    if member.is_some() && !cursors.assigned.is_empty() {
        // The other hosts' waiters and streams hear of these outcomes now, not at their poll.
        db.notify(cluster::CHANNEL, &revision.to_string())?;
    }
    db.commit()?;
    if let Some(audit) = member.as_ref().and_then(|m| m.audit) {
        for (i, txn) in txns.iter().enumerate() {
            if let (Some(epoch), false) = (txn.fence, fenced.contains(&i)) {
                audit.wrote(&txn.session, epoch, revision);
            }
        }
    }
    Ok((Committed { cursors: cursors.assigned, fenced }, revision))
}
