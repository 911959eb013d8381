//! The store's one writer (SPEC 4.12, 11): opening it (the owner lock, migrations, recovery),
//! committing transactions in one database transaction, and its readers.

use turnstile_core::{SessionId, Start};

use super::cluster::{self};
use super::config::*;
use super::conn::{Conn, STATEMENT_CACHE};
use super::error::*;
use super::faults::*;
use super::lease;
use super::location::*;
#[cfg(not(madsim))]
use super::postgres;
use super::read::*;
use super::recovery;
use super::schema;
use super::sql::Db;
use super::txn::*;
use super::{apply, location, read};
use crate::record::{CompletionRecord, Cursor};

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
    pub(super) conn: Conn,
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
        let opening = |e| super::location::opening(&config.location, e);
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
                let mut conn = cluster::member_sqlite(config)?;
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
    audit: Option<&'a super::audit::Audit>,
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
        log_written(audit, txns, &fenced, revision);
    }
    Ok((Committed { cursors: cursors.assigned, fenced }, revision))
}

/// Logs every transaction a member's commit wrote, with its epoch or none: a member's write
/// without an epoch is a finding of the ghost log too.
fn log_written(audit: &super::audit::Audit, txns: &[Txn], fenced: &[usize], revision: u64) {
    for (i, txn) in txns.iter().enumerate() {
        if !fenced.contains(&i) && !txn.writes.is_empty() {
            audit.wrote(&txn.session, txn.fence, revision);
        }
    }
}
