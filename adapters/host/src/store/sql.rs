//! The SQL both stores speak (SPEC 11 "One store contract, two stores").
//!
//! Every statement of the store (the writes of a transaction in `apply`, recovery, the
//! queries of `read` and `changes`) is written once, in the SQL that SQLite and PostgreSQL
//! share, and runs over a [`Db`]: a connection of either store. So the transaction rules of
//! SPEC 4.12 live in one place, and a store cannot differ from the other by a statement
//! written twice.
//!
//! The shared SQL: positional parameters `?1`, `?2`, ... (a PostgreSQL connection turns them
//! into `$1`, `$2`, ... when it prepares a statement, once per statement); integers are 64-bit
//! (`INTEGER` in SQLite, `BIGINT` in PostgreSQL, and `CAST(... AS INTEGER)` is read as
//! `BIGINT` there); flags are integers 0 and 1 in both; `unixepoch('subsec')` is the database's
//! clock in seconds. What a store does differently (its schema's DDL, its lock, its
//! integrity check, the journal) stays in its own module.

use std::borrow::Cow;

use super::error::StoreError;

/// A value bound to a statement's parameter.
#[derive(Clone, Debug)]
pub(crate) enum Arg<'a> {
    /// A 64-bit integer.
    Int(i64),
    /// An integer or NULL.
    OptInt(Option<i64>),
    /// Text.
    Text(Cow<'a, str>),
    /// Text or NULL.
    OptText(Option<Cow<'a, str>>),
}

impl Arg<'_> {
    /// A flag, stored as 0 or 1.
    pub(crate) fn flag(b: bool) -> Arg<'static> {
        Arg::Int(i64::from(b))
    }
}

impl<'a> From<&'a str> for Arg<'a> {
    fn from(s: &'a str) -> Arg<'a> {
        Arg::Text(Cow::Borrowed(s))
    }
}

impl<'a> From<&&'a str> for Arg<'a> {
    fn from(s: &&'a str) -> Arg<'a> {
        Arg::Text(Cow::Borrowed(s))
    }
}

impl<'a> From<&'a String> for Arg<'a> {
    fn from(s: &'a String) -> Arg<'a> {
        Arg::Text(Cow::Borrowed(s))
    }
}

impl From<String> for Arg<'_> {
    fn from(s: String) -> Self {
        Arg::Text(Cow::Owned(s))
    }
}

impl From<i64> for Arg<'_> {
    fn from(n: i64) -> Self {
        Arg::Int(n)
    }
}

impl From<u32> for Arg<'_> {
    fn from(n: u32) -> Self {
        Arg::Int(i64::from(n))
    }
}

impl From<&u32> for Arg<'_> {
    fn from(n: &u32) -> Self {
        Arg::Int(i64::from(*n))
    }
}

impl From<bool> for Arg<'_> {
    fn from(b: bool) -> Self {
        Arg::flag(b)
    }
}

impl From<&bool> for Arg<'_> {
    fn from(b: &bool) -> Self {
        Arg::flag(*b)
    }
}

impl From<Option<i64>> for Arg<'_> {
    fn from(n: Option<i64>) -> Self {
        Arg::OptInt(n)
    }
}

impl<'a> From<Option<&'a str>> for Arg<'a> {
    fn from(s: Option<&'a str>) -> Arg<'a> {
        Arg::OptText(s.map(Cow::Borrowed))
    }
}

impl<'a> From<&'a Option<String>> for Arg<'a> {
    fn from(s: &'a Option<String>) -> Arg<'a> {
        Arg::OptText(s.as_deref().map(Cow::Borrowed))
    }
}

impl From<Option<String>> for Arg<'_> {
    fn from(s: Option<String>) -> Self {
        Arg::OptText(s.map(Cow::Owned))
    }
}

/// `[Arg::from(a), Arg::from(b), ...]`.
macro_rules! args {
    ($($a:expr),* $(,)?) => { [$($crate::store::sql::Arg::from($a)),*] };
}
pub(crate) use args;

/// `vec![Arg::from(a), Arg::from(b), ...]`.
macro_rules! argv {
    ($($a:expr),* $(,)?) => { vec![$($crate::store::sql::Arg::from($a)),*] };
}
pub(crate) use argv;

/// One value of a row read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Cell {
    /// NULL.
    Null,
    /// An integer (a flag or a `bool` result reads as 0 or 1).
    Int(i64),
    /// Text.
    Text(String),
}

/// One row read, its values in the statement's column order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Row(pub(crate) Vec<Cell>);

impl Row {
    fn cell(&self, i: usize) -> Result<&Cell, StoreError> {
        self.0.get(i).ok_or_else(|| StoreError::Corrupt(format!("a row has no column {i}")))
    }

    fn wrong(&self, i: usize, want: &str) -> StoreError {
        StoreError::Corrupt(format!("column {i} is not {want}: {:?}", self.0.get(i)))
    }

    /// An integer column.
    pub(crate) fn int(&self, i: usize) -> Result<i64, StoreError> {
        match self.cell(i)? {
            Cell::Int(n) => Ok(*n),
            _ => Err(self.wrong(i, "an integer")),
        }
    }

    /// An integer column that may be NULL.
    pub(crate) fn opt_int(&self, i: usize) -> Result<Option<i64>, StoreError> {
        match self.cell(i)? {
            Cell::Int(n) => Ok(Some(*n)),
            Cell::Null => Ok(None),
            Cell::Text(_) => Err(self.wrong(i, "an integer or NULL")),
        }
    }

    /// A flag column (0 or 1; anything else but 0 is true, as SQLite reads it).
    pub(crate) fn flag(&self, i: usize) -> Result<bool, StoreError> {
        Ok(self.int(i)? != 0)
    }

    /// A text column.
    pub(crate) fn text(&self, i: usize) -> Result<String, StoreError> {
        match self.cell(i)? {
            Cell::Text(s) => Ok(s.clone()),
            _ => Err(self.wrong(i, "text")),
        }
    }

    /// A text column that may be NULL.
    pub(crate) fn opt_text(&self, i: usize) -> Result<Option<String>, StoreError> {
        match self.cell(i)? {
            Cell::Text(s) => Ok(Some(s.clone())),
            Cell::Null => Ok(None),
            Cell::Int(_) => Err(self.wrong(i, "text or NULL")),
        }
    }
}

/// A connection of either store: runs the shared SQL.
///
/// Statements are prepared once per connection and kept (the text is the key).
pub(crate) trait Db {
    /// Runs a statement; returns the number of rows it changed.
    ///
    /// # Errors
    /// The database's error.
    fn execute(&self, sql: &str, args: &[Arg<'_>]) -> Result<usize, StoreError>;

    /// Runs statements in order, as one batch (a PostgreSQL connection sends them together);
    /// returns the rows each changed, up to the first that failed, and that failure.
    fn execute_all(&self, stmts: &[(&str, &[Arg<'_>])]) -> (Vec<usize>, Option<StoreError>) {
        let mut counts = Vec::with_capacity(stmts.len());
        for (sql, args) in stmts {
            match self.execute(sql, args) {
                Ok(n) => counts.push(n),
                Err(e) => return (counts, Some(e)),
            }
        }
        (counts, None)
    }

    /// Runs a query; returns every row.
    ///
    /// # Errors
    /// The database's error.
    fn rows(&self, sql: &str, args: &[Arg<'_>]) -> Result<Vec<Row>, StoreError>;

    /// Runs a query; returns its first row, if any.
    ///
    /// # Errors
    /// The database's error.
    fn row(&self, sql: &str, args: &[Arg<'_>]) -> Result<Option<Row>, StoreError> {
        Ok(self.rows(sql, args)?.into_iter().next())
    }

    /// The first column of the first row, as an integer: `None` for no row or NULL (what
    /// `max(...)` and one counter read answer).
    ///
    /// # Errors
    /// The database's error; [`StoreError::Corrupt`] when the column is text.
    fn scalar(&self, sql: &str, args: &[Arg<'_>]) -> Result<Option<i64>, StoreError> {
        Ok(self.row(sql, args)?.map(|r| r.opt_int(0)).transpose()?.flatten())
    }

    /// Starts a writing transaction (SQLite takes the write lock at once).
    ///
    /// # Errors
    /// The database's error.
    fn begin_write(&self) -> Result<(), StoreError>;

    /// Starts a reading transaction: every query until [`Db::end`] sees one snapshot.
    ///
    /// # Errors
    /// The database's error.
    fn begin_read(&self) -> Result<(), StoreError>;

    /// Commits the transaction.
    ///
    /// # Errors
    /// The database's error (the transaction is then still open: roll it back).
    fn commit(&self) -> Result<(), StoreError>;

    /// Ends a transaction without its changes, if one is open; never fails (a connection
    /// whose rollback fails is broken, and its next statement says so).
    fn rollback(&self);

    /// Notifies the listeners of `channel` with `payload` when the transaction commits
    /// (PostgreSQL's `NOTIFY`; several hosts in one process, on SQLite, poll instead).
    ///
    /// # Errors
    /// The database's error.
    fn notify(&self, channel: &str, payload: &str) -> Result<(), StoreError> {
        let _ = (channel, payload);
        Ok(())
    }
}

/// Runs `f` in one reading snapshot of `db`.
///
/// # Errors
/// `f`'s error, or the database's.
pub(crate) fn in_snapshot<T>(
    db: &dyn Db,
    f: impl FnOnce() -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    db.begin_read()?;
    match f().and_then(|t| db.commit().map(|()| t)) {
        Ok(t) => Ok(t),
        Err(e) => {
            // Also when the commit itself failed (a connection lost at that moment): the
            // transaction is over either way, and the connection must say so, or it never
            // connects again.
            db.rollback();
            Err(e)
        }
    }
}

// ---- SQLite ----

impl rusqlite::ToSql for Arg<'_> {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::{ToSqlOutput, ValueRef};
        Ok(match self {
            Arg::Int(n) | Arg::OptInt(Some(n)) => ToSqlOutput::Borrowed(ValueRef::Integer(*n)),
            Arg::Text(s) | Arg::OptText(Some(s)) => {
                ToSqlOutput::Borrowed(ValueRef::Text(s.as_bytes()))
            }
            Arg::OptInt(None) | Arg::OptText(None) => ToSqlOutput::Borrowed(ValueRef::Null),
        })
    }
}

impl Db for rusqlite::Connection {
    fn execute(&self, sql: &str, args: &[Arg<'_>]) -> Result<usize, StoreError> {
        Ok(self.prepare_cached(sql)?.execute(rusqlite::params_from_iter(args))?)
    }

    fn rows(&self, sql: &str, args: &[Arg<'_>]) -> Result<Vec<Row>, StoreError> {
        use rusqlite::types::ValueRef;
        let mut stmt = self.prepare_cached(sql)?;
        let columns = stmt.column_count();
        let mut rows = stmt.query(rusqlite::params_from_iter(args))?;
        let mut out = Vec::new();
        while let Some(r) = rows.next()? {
            let mut cells = Vec::with_capacity(columns);
            for i in 0..columns {
                cells.push(match r.get_ref(i)? {
                    ValueRef::Null => Cell::Null,
                    ValueRef::Integer(n) => Cell::Int(n),
                    ValueRef::Text(t) => Cell::Text(String::from_utf8_lossy(t).into_owned()),
                    other => {
                        return Err(StoreError::Corrupt(format!(
                            "column {i} holds a {} value, which the store never writes",
                            other.data_type()
                        )));
                    }
                });
            }
            out.push(Row(cells));
        }
        Ok(out)
    }

    fn begin_write(&self) -> Result<(), StoreError> {
        self.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
        Ok(())
    }

    fn begin_read(&self) -> Result<(), StoreError> {
        self.prepare_cached("BEGIN")?.execute([])?;
        Ok(())
    }

    fn commit(&self) -> Result<(), StoreError> {
        self.prepare_cached("COMMIT")?.execute([])?;
        Ok(())
    }

    fn rollback(&self) {
        if !self.is_autocommit() {
            let _ = self.prepare_cached("ROLLBACK").and_then(|mut s| s.execute([]));
        }
    }
}
