//! Where a store lives: a file (production), or an in-memory database that outlives the stores
//! opened on it (the simulator, tests). Both give the same SQL, the same owner lock semantics
//! and the same recovery; only durability differs (memory lasts as long as its [`MemoryDisk`]).

use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use rusqlite::config::DbConfig;
use rusqlite::{Connection, OpenFlags};

use super::error::StoreError;

/// Where a store's database is.
#[derive(Clone, Debug)]
pub enum Location {
    /// A database file; the owner lock is `<path>.lock` beside it. Journaled with WAL, so
    /// readers read while the writer writes.
    File(PathBuf),
    /// An in-memory database of this process (SQLite's `memdb` VFS), shared by every
    /// connection opened on the same [`MemoryDisk`]. A simulated crash kills the host but not
    /// the disk, so what was committed is there for the next `Store::open`, as on a real disk.
    Memory(MemoryDisk),
    /// A PostgreSQL database, by its URL (`postgres://user@host:port/database`, or
    /// `postgresql://...`). Its owner lock is an advisory lock held by the writer's
    /// connection.
    Postgres(String),
}

impl Location {
    /// Where a user named a store: a `postgres://` or `postgresql://` URL is PostgreSQL,
    /// anything else a file path (SQLite).
    #[must_use]
    pub fn parse(text: &str) -> Location {
        if is_postgres_url(text) {
            Location::Postgres(text.to_owned())
        } else {
            Location::File(PathBuf::from(text))
        }
    }

    /// The file, for a file store.
    #[must_use]
    pub fn file(&self) -> Option<&Path> {
        match self {
            Location::File(p) => Some(p),
            Location::Memory(_) | Location::Postgres(_) => None,
        }
    }

    /// Opens a connection to the database (creating it when `create`).
    ///
    /// # Errors
    /// [`StoreError::Open`] naming the file (an in-memory disk: [`StoreError::Sqlite`]).
    pub(crate) fn connect(&self, create: bool) -> Result<Connection, StoreError> {
        let mut flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_URI;
        if create {
            flags |= OpenFlags::SQLITE_OPEN_CREATE;
        }
        let opening = |e| opening(self, e);
        let conn = match self {
            Location::File(path) => Connection::open_with_flags(path, flags).map_err(opening)?,
            // The memdb database exists while the disk's own connection holds it open.
            Location::Memory(disk) => {
                Connection::open_with_flags(&disk.inner.uri, flags).map_err(opening)?
            }
            Location::Postgres(url) => {
                return Err(StoreError::Corrupt(format!("{}: not a SQLite store", redact(url))));
            }
        };
        // The query planner stability guarantee: a plan never depends on a bound value, so a
        // cached statement is compiled once, not again at every rebinding (SQLite re-compiles
        // such statements otherwise, e.g. `... WHERE session = ?1 ORDER BY ord`).
        conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true).map_err(opening)?;
        Ok(conn)
    }

    /// The journal mode a writer sets: WAL for files; memdb databases journal in memory.
    pub(crate) fn journal_mode(&self) -> &'static str {
        match self {
            Location::File(_) | Location::Postgres(_) => "WAL",
            Location::Memory(_) => "MEMORY",
        }
    }

    /// Takes the exclusive owner lock: a second live `Store` on the same location, in this or
    /// (for files) another process, gets [`StoreError::InUse`].
    pub(crate) fn lock(&self) -> Result<OwnerLock, StoreError> {
        match self {
            Location::File(path) => lock_file(path).map(OwnerLock::File),
            Location::Memory(disk) => {
                if disk.inner.owned.swap(true, Ordering::AcqRel) {
                    return Err(StoreError::InUse);
                }
                Ok(OwnerLock::Memory(disk.clone()))
            }
            Location::Postgres(url) => Err(StoreError::Corrupt(format!(
                "{}: a PostgreSQL store's lock is its connection's",
                redact(url)
            ))),
        }
    }
}

/// True for a `postgres://` or `postgresql://` URL.
#[must_use]
pub fn is_postgres_url(text: &str) -> bool {
    let lower = text.trim_start().to_ascii_lowercase();
    lower.starts_with("postgres://") || lower.starts_with("postgresql://")
}

/// A database URL without its password, for messages and logs.
#[must_use]
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_owned() };
    let (authority, path) = rest.split_once('/').map_or((rest, None), |(a, p)| (a, Some(p)));
    let authority = match authority.rsplit_once('@') {
        Some((user, host)) => match user.split_once(':') {
            Some((name, _password)) => format!("{name}:***@{host}"),
            None => format!("{user}@{host}"),
        },
        None => authority.to_owned(),
    };
    match path {
        Some(p) => format!("{scheme}://{authority}/{p}"),
        None => format!("{scheme}://{authority}"),
    }
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Location::File(p) => write!(f, "{}", p.display()),
            Location::Memory(disk) => write!(f, "memory:{}", disk.inner.name),
            Location::Postgres(url) => f.write_str(&redact(url)),
        }
    }
}

/// The application id a live memory disk writes into its database's header ("tstl").
const DISK_MARK: i64 = 0x7473_746c;

/// An in-memory database that lives as long as any clone of this handle: what a simulated
/// disk is. Every [`Location::Memory`] of the same disk reaches the same database.
#[derive(Clone)]
pub struct MemoryDisk {
    inner: Arc<DiskInner>,
}

struct DiskInner {
    name: String,
    uri: String,
    /// Keeps the database alive between stores (memdb frees it with its last connection).
    _holder: Mutex<Connection>,
    /// The owner lock of the stores opened on it.
    owned: AtomicBool,
}

impl MemoryDisk {
    /// A new, empty in-memory database named `name` (letters, digits, `-`, `_` and `.`).
    /// The name is process-wide in SQLite, so it must not be in use by another live disk.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`] for a bad name or a name whose database already holds data
    /// (another live disk); SQLite errors.
    pub fn new(name: &str) -> Result<MemoryDisk, StoreError> {
        let valid = !name.is_empty()
            && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if !valid {
            return Err(StoreError::Corrupt(format!(
                "memory disk name {name:?}: use letters, digits, '-', '_' and '.' only"
            )));
        }
        let uri = format!("file:/{name}?vfs=memdb");
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_URI;
        let holder = Connection::open_with_flags(&uri, flags)?;
        // A live disk marks its database (the header's application id), so a second disk of
        // the same name is refused even before a store was opened on the first. The look and
        // the mark are one write transaction: two threads creating the same name at once
        // cannot both see it unmarked.
        holder.busy_timeout(std::time::Duration::from_secs(5))?;
        holder.execute_batch("BEGIN IMMEDIATE")?;
        let id: i64 = holder.pragma_query_value(None, "application_id", |r| r.get(0))?;
        let objects: i64 =
            holder.query_row("SELECT count(*) FROM sqlite_schema", [], |r| r.get(0))?;
        if id != 0 || objects != 0 {
            holder.execute_batch("ROLLBACK")?;
            return Err(StoreError::Corrupt(format!(
                "memory disk {name:?} is already in use in this process"
            )));
        }
        holder.pragma_update(None, "application_id", DISK_MARK)?;
        holder.execute_batch("COMMIT")?;
        Ok(MemoryDisk {
            inner: Arc::new(DiskInner {
                name: name.to_owned(),
                uri,
                _holder: Mutex::new(holder),
                owned: AtomicBool::new(false),
            }),
        })
    }

    /// The disk's name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.inner.name
    }
}

impl std::fmt::Debug for MemoryDisk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryDisk").field("name", &self.inner.name).finish_non_exhaustive()
    }
}

/// The owner lock a [`super::open::Store`] holds for its life; released when dropped (also when
/// a simulated crash drops the host).
#[derive(Debug)]
pub(crate) enum OwnerLock {
    /// The locked `<path>.lock` file (the lock lasts while the file is open).
    File(#[allow(dead_code)] File),
    /// The disk whose `owned` flag this lock set.
    Memory(MemoryDisk),
}

impl Drop for OwnerLock {
    fn drop(&mut self) {
        if let OwnerLock::Memory(disk) = self {
            disk.inner.owned.store(false, Ordering::Release);
        }
    }
}

/// Takes the exclusive owner lock `<path>.lock`.
fn lock_file(path: &Path) -> Result<File, StoreError> {
    let mut lock_path = path.as_os_str().to_owned();
    lock_path.push(".lock");
    let file =
        OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&lock_path);
    let io = |action, source| StoreError::Io { path: PathBuf::from(&lock_path), action, source };
    let file = file.map_err(|e| io("open the lock file", e))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(TryLockError::WouldBlock) => Err(StoreError::InUse),
        Err(TryLockError::Error(e)) => Err(io("lock the lock file", e)),
    }
}

/// The error of opening or setting up a connection at `location`: [`StoreError::Open`]
/// naming the file, or for an in-memory disk (which has no path) [`StoreError::Sqlite`].
pub(crate) fn opening(location: &Location, source: rusqlite::Error) -> StoreError {
    match location {
        Location::File(path) => StoreError::Open { path: path.clone(), source },
        Location::Memory(_) | Location::Postgres(_) => StoreError::Sqlite(source),
    }
}
