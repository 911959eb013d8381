//! What an integrity check reports (`Reader::integrity_check`),
//! for either store: SQLite's own checks, or references that name no row.

use super::error::StoreError;

/// Why `Reader::integrity_check` did not pass.
#[derive(Debug, PartialEq)]
pub enum IntegrityError {
    /// The checks ran and found problems (at least one), in the order SQLite reported them.
    /// Displayed joined with "; ".
    Damaged(Vec<IntegrityProblem>),
    /// The checks could not run: "integrity check failed: `<error>`".
    Check(StoreError),
}

impl std::fmt::Display for IntegrityError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IntegrityError::Damaged(problems) => {
                for (i, p) in problems.iter().enumerate() {
                    if i > 0 {
                        f.write_str("; ")?;
                    }
                    write!(f, "{p}")?;
                }
                Ok(())
            }
            IntegrityError::Check(e) => write!(f, "integrity check failed: {e}"),
        }
    }
}

impl std::error::Error for IntegrityError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            IntegrityError::Damaged(_) => None,
            IntegrityError::Check(e) => Some(e),
        }
    }
}

/// One problem an integrity check found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IntegrityProblem {
    /// A line of `PRAGMA integrity_check` other than "ok" (damaged pages, indexes, ...), as
    /// SQLite wrote it.
    Damage(String),
    /// A row of `PRAGMA foreign_key_check`: a row whose reference names nothing. Displayed
    /// "foreign key violation: `<table>` row `<rowid>` references missing `<parent>`".
    ForeignKey {
        /// The table of the row.
        table: String,
        /// Its rowid (`None` for a table without rowids).
        rowid: Option<i64>,
        /// The table the reference should find a row in.
        parent: String,
    },
}

impl std::fmt::Display for IntegrityProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IntegrityProblem::Damage(line) => f.write_str(line),
            IntegrityProblem::ForeignKey { table, rowid, parent } => {
                let row = rowid.map_or_else(|| "?".to_owned(), |n| n.to_string());
                write!(f, "foreign key violation: {table} row {row} references missing {parent}")
            }
        }
    }
}
