//! A connection of either store, owned (SPEC 11's two stores): what the writer, a reader and a
//! member's coordinator hold, and how a member opens SQLite for the tests of several hosts.

#[cfg(not(madsim))]
use super::postgres;
use super::sql::Db;

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
pub(super) const STATEMENT_CACHE: usize = 64;
