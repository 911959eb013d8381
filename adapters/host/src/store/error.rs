//! What a failed store operation says (SPEC 8): [`StoreError`], each variant keeping its cause.

use std::path::PathBuf;

/// The error text of a second process opening a store that is in use (SPEC section 8).
pub const STORE_IN_USE: &str = "store is in use by another turnstile process";

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
