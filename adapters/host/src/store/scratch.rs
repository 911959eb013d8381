//! Throwaway PostgreSQL databases for tests: every test of the PostgreSQL store gets a
//! database of its own on the server that `TURNSTILE_TEST_POSTGRES` names, dropped when the
//! test ends (passed or not).

use std::sync::atomic::{AtomicU64, Ordering};

use postgres::{Client, NoTls};

/// The variable that names the PostgreSQL server the tests use (a URL of a database on it
/// that the tests may create databases from, e.g. `postgres://postgres@127.0.0.1:5432/turnstile`).
pub const TEST_POSTGRES: &str = "TURNSTILE_TEST_POSTGRES";

/// What a PostgreSQL test says when the server is not named.
pub const NO_TEST_POSTGRES: &str = "TURNSTILE_TEST_POSTGRES is not set: the PostgreSQL tests \
    need a server. Start a throwaway one (PostgreSQL's initdb and pg_ctl on PATH) with\n    \
    eval \"$(scripts/postgres.sh env)\"\nand run the tests again; `scripts/postgres.sh stop \
    <folder>` stops it.";

/// A database of its own for one test, created on the server of `TURNSTILE_TEST_POSTGRES` and
/// dropped (its connections ended) when this is dropped.
#[derive(Debug)]
pub struct ScratchDatabase {
    /// The URL the variable gave, where the database is created and dropped from.
    admin: String,
    name: String,
    url: String,
}

impl ScratchDatabase {
    /// Creates a new, empty database.
    ///
    /// # Errors
    /// [`NO_TEST_POSTGRES`] when the variable is not set; the server's error when it cannot be
    /// reached or refuses.
    pub fn create() -> Result<ScratchDatabase, String> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let admin = std::env::var(TEST_POSTGRES).map_err(|_| NO_TEST_POSTGRES.to_owned())?;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let name = format!(
            "turnstile_test_{}_{}_{nanos}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        off_runtime(|| {
            let mut client = Client::connect(&admin, NoTls)
                .map_err(|e| format!("{TEST_POSTGRES} ({admin}): cannot connect: {e}"))?;
            client
                .batch_execute(&format!("CREATE DATABASE {name}"))
                .map_err(|e| format!("{TEST_POSTGRES} ({admin}): cannot create a database: {e}"))
        })?;
        let url = with_database(&admin, &name);
        Ok(ScratchDatabase { admin, name, url })
    }

    /// The database's URL.
    #[must_use]
    pub fn url(&self) -> &str {
        &self.url
    }
}

impl Drop for ScratchDatabase {
    fn drop(&mut self) {
        off_runtime(|| {
            if let Ok(mut client) = Client::connect(&self.admin, NoTls) {
                let drop = format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name);
                let _ = client.batch_execute(&drop);
            }
        });
    }
}

/// Runs `f` on a thread of its own: the blocking client cannot run on an async runtime's
/// thread, and a test may create or drop a database from one.
fn off_runtime<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|s| s.spawn(f).join()).unwrap_or_else(|p| std::panic::resume_unwind(p))
}

/// `url` with its database replaced by `name` (its query, if any, kept).
fn with_database(url: &str, name: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("postgres", url));
    let (authority, tail) = rest.split_once('/').unwrap_or((rest, ""));
    let query = tail.split_once('?').map(|(_, q)| format!("?{q}")).unwrap_or_default();
    format!("{scheme}://{authority}/{name}{query}")
}

#[cfg(test)]
mod tests {
    use super::with_database;

    #[test]
    fn the_database_of_a_url_is_replaced() {
        assert_eq!(
            with_database("postgres://u:p@127.0.0.1:5432/turnstile", "t1"),
            "postgres://u:p@127.0.0.1:5432/t1"
        );
        assert_eq!(
            with_database("postgresql://u@h/db?sslmode=disable", "t2"),
            "postgresql://u@h/t2?sslmode=disable"
        );
        assert_eq!(with_database("postgres://u@h", "t3"), "postgres://u@h/t3");
    }
}
