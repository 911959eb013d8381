//! Session leases (SPEC 11): which host owns a session when several hosts share one store,
//! and the epoch that fences the owner's writes.
//!
//! These are the statements of the protocol the lease model checks (`model/src/lease/`,
//! `docs/verification.md`, "Several hosts"), written once in the SQL both stores share, with
//! the **database's clock** (never a host's) deciding expiry:
//! - [`take`] decides in one statement from the lease row as it is (an upsert whose update
//!   applies only to a free or expired row), grows the epoch and returns it: never from an
//!   earlier read, so two hosts that both saw an expired lease cannot both take it.
//! - [`renew`] and [`release`] change the row only for its holder at its epoch.
//! - [`fence`] runs first in an owner's writing transaction: it touches the row only for its
//!   holder at its epoch, so the transaction learns whether it may write, and on PostgreSQL
//!   it holds the row's lock until the commit, so a take waits for the commit instead of
//!   slipping in between the check and the writes.
//!
//! The member hosts' coordination (`cluster.rs`) runs take, renew and release; every commit
//! of a member runs the fence.

use super::error::StoreError;
use super::sql::{Arg, Db};

/// A lease's epoch: it grows at every take, so no two takes share one; the fencing token of
/// its holder's writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Epoch(pub(crate) u64);

/// The database's clock in milliseconds, in the shared SQL (PostgreSQL's statements read
/// `clock_timestamp()`: the time of the statement, not of its transaction's start).
const NOW_MS: &str = "CAST(unixepoch('subsec') * 1000 AS INTEGER)";

/// A lease row as it stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Holder {
    /// Its holder; `None` once released.
    pub(crate) owner: Option<String>,
    /// Its epoch.
    pub(crate) epoch: Epoch,
    /// Milliseconds until it expires by the database's clock (0 or less: expired).
    pub(crate) expires_in_ms: i64,
}

/// Takes `session`'s lease for `host` for `lease_ms` when it is free (no row, or released)
/// or expired; returns the new epoch, or `None` when another host holds it.
///
/// # Errors
/// The database's error.
pub(crate) fn take(
    db: &dyn Db,
    session: &str,
    host: &str,
    lease_ms: u64,
) -> Result<Option<Epoch>, StoreError> {
    let only_when =
        format!("WHERE session_leases.owner IS NULL OR session_leases.expires_ms <= {NOW_MS}");
    upsert(db, &only_when, session, host, lease_ms)
}

/// The mutant `member_stale_take`: takes the lease whatever the row says now (as a take
/// decided from an earlier read would), growing the epoch.
///
/// # Errors
/// The database's error.
pub(crate) fn take_without_looking(
    db: &dyn Db,
    session: &str,
    host: &str,
    lease_ms: u64,
) -> Result<Option<Epoch>, StoreError> {
    upsert(db, "", session, host, lease_ms)
}

/// Inserts the lease row, or updates it `only_when` the condition holds, growing the epoch;
/// returns the new epoch when it did.
fn upsert(
    db: &dyn Db,
    only_when: &str,
    session: &str,
    host: &str,
    lease_ms: u64,
) -> Result<Option<Epoch>, StoreError> {
    let sql = format!(
        "INSERT INTO session_leases (session, owner, epoch, expires_ms) \
         VALUES (?1, ?2, 1, {NOW_MS} + ?3) \
         ON CONFLICT (session) DO UPDATE SET owner = excluded.owner, \
         epoch = session_leases.epoch + 1, expires_ms = excluded.expires_ms \
         {only_when} RETURNING epoch"
    );
    let args = [Arg::from(session), Arg::from(host), Arg::Int(ms(lease_ms)?)];
    let epoch = db.scalar(&sql, &args)?;
    epoch.map(epoch_of).transpose()
}

/// Extends `session`'s lease by `lease_ms` from now, if `host` still holds it at `epoch`;
/// returns whether it did.
///
/// # Errors
/// The database's error.
pub(crate) fn renew(
    db: &dyn Db,
    session: &str,
    host: &str,
    epoch: Epoch,
    lease_ms: u64,
) -> Result<bool, StoreError> {
    let sql = format!(
        "UPDATE session_leases SET expires_ms = {NOW_MS} + ?4 \
         WHERE session = ?1 AND owner = ?2 AND epoch = ?3"
    );
    let args =
        [Arg::from(session), Arg::from(host), Arg::Int(int(epoch)?), Arg::Int(ms(lease_ms)?)];
    Ok(db.execute(&sql, &args)? == 1)
}

/// Gives `session`'s lease back, if `host` holds it at `epoch`: the next take grows the
/// epoch at once, without waiting for an expiry. Returns whether it did.
///
/// # Errors
/// The database's error.
pub(crate) fn release(
    db: &dyn Db,
    session: &str,
    host: &str,
    epoch: Epoch,
) -> Result<bool, StoreError> {
    for_holder(db, "owner = NULL", session, host, epoch)
}

/// Inside the caller's writing transaction, before its writes for `session`: whether `host`
/// still holds the lease at `epoch`. The row is touched (an update that changes nothing), so
/// on PostgreSQL its lock is held until the transaction ends and a take waits for it; SQLite's
/// writer holds the whole store already. When it answers `false`, the caller writes nothing
/// for the session and drops it.
///
/// # Errors
/// The database's error.
pub(crate) fn fence(
    db: &dyn Db,
    session: &str,
    host: &str,
    epoch: Epoch,
) -> Result<bool, StoreError> {
    for_holder(db, "epoch = epoch", session, host, epoch)
}

/// Sets `set` on `session`'s lease row if `host` holds it at `epoch`; returns whether it did.
fn for_holder(
    db: &dyn Db,
    set: &str,
    session: &str,
    host: &str,
    epoch: Epoch,
) -> Result<bool, StoreError> {
    let sql =
        format!("UPDATE session_leases SET {set} WHERE session = ?1 AND owner = ?2 AND epoch = ?3");
    Ok(db.execute(&sql, &[Arg::from(session), Arg::from(host), Arg::Int(int(epoch)?)])? == 1)
}

/// `session`'s lease row, if it was ever taken.
///
/// # Errors
/// The database's error.
pub(crate) fn holder(db: &dyn Db, session: &str) -> Result<Option<Holder>, StoreError> {
    let sql = format!(
        "SELECT owner, epoch, expires_ms - {NOW_MS} FROM session_leases WHERE session = ?1"
    );
    let Some(row) = db.row(&sql, &[Arg::from(session)])? else { return Ok(None) };
    Ok(Some(Holder {
        owner: row.opt_text(0)?,
        epoch: epoch_of(row.int(1)?)?,
        expires_in_ms: row.int(2)?,
    }))
}

fn epoch_of(value: i64) -> Result<Epoch, StoreError> {
    super::schema::uint(value, "a lease's epoch").map(Epoch)
}

fn int(epoch: Epoch) -> Result<i64, StoreError> {
    super::schema::int(epoch.0, "a lease's epoch")
}

fn ms(lease_ms: u64) -> Result<i64, StoreError> {
    super::schema::int(lease_ms, "a lease's length in milliseconds")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A connection of each store kind, migrated, for hosts that share it.
    enum Store {
        Sqlite(tempfile::TempDir),
        #[cfg(not(madsim))]
        Postgres(super::super::scratch::ScratchDatabase),
    }

    impl Store {
        fn connect(&self) -> Box<dyn Db + Send> {
            match self {
                Store::Sqlite(dir) => {
                    let mut c = rusqlite::Connection::open(dir.path().join("store.db")).unwrap();
                    c.busy_timeout(std::time::Duration::from_secs(10)).unwrap();
                    super::super::schema::migrate(&mut c).unwrap();
                    Box::new(c)
                }
                #[cfg(not(madsim))]
                Store::Postgres(db) => {
                    let c = super::super::postgres::PgConn::connect(db.url()).unwrap();
                    c.migrate().unwrap();
                    Box::new(c)
                }
            }
        }
    }

    fn sqlite() -> Store {
        Store::Sqlite(tempfile::tempdir().unwrap())
    }

    #[cfg(not(madsim))]
    fn postgres() -> Store {
        Store::Postgres(
            super::super::scratch::ScratchDatabase::create().unwrap_or_else(|e| panic!("{e}")),
        )
    }

    /// Taken once until released or expired by the database's clock; renewals, releases and
    /// fences only for the holder at its epoch; every take grows the epoch.
    fn the_lease_rules(store: &Store) {
        let (a, b) = (store.connect(), store.connect());
        let (a, b) = (a.as_ref(), b.as_ref());
        assert_eq!(holder(a, "s").unwrap(), None);
        let one = take(a, "s", "a", 60_000).unwrap().expect("a free lease is taken");
        assert_eq!(one, Epoch(1));
        // Held: another host's take, renewal, release and fence change nothing.
        assert_eq!(take(b, "s", "b", 60_000).unwrap(), None);
        assert!(!renew(b, "s", "b", one, 60_000).unwrap());
        assert!(!release(b, "s", "b", one).unwrap());
        assert!(!fence(b, "s", "b", one).unwrap());
        assert!(renew(a, "s", "a", one, 60_000).unwrap());
        assert!(fence(a, "s", "a", one).unwrap());
        let h = holder(b, "s").unwrap().unwrap();
        assert_eq!((h.owner.as_deref(), h.epoch), (Some("a"), one));
        assert!(h.expires_in_ms > 50_000 && h.expires_in_ms <= 60_000, "{h:?}");
        // Released: the next take grows the epoch at once; the old epoch fences nothing.
        assert!(release(a, "s", "a", one).unwrap());
        let two = take(b, "s", "b", 1).unwrap().expect("a released lease is taken");
        assert_eq!(two, Epoch(2));
        assert!(!fence(a, "s", "a", one).unwrap());
        assert!(!renew(a, "s", "a", one, 60_000).unwrap());
        // Expired by the database's clock: taken again; the stale holder's renewal, release
        // and fence are refused, though nobody else wrote in between.
        std::thread::sleep(std::time::Duration::from_millis(20));
        let three = take(a, "s", "a", 60_000).unwrap().expect("an expired lease is taken");
        assert_eq!(three, Epoch(3));
        assert!(!renew(b, "s", "b", two, 60_000).unwrap());
        assert!(!release(b, "s", "b", two).unwrap());
        assert!(!fence(b, "s", "b", two).unwrap());
        // Sessions do not share leases.
        assert_eq!(take(b, "t", "b", 60_000).unwrap(), Some(Epoch(1)));
    }

    #[test]
    fn sqlite_the_lease_rules() {
        the_lease_rules(&sqlite());
    }

    #[cfg(not(madsim))]
    #[test]
    #[ignore = "needs PostgreSQL: eval \"$(scripts/postgres.sh env)\", then --ignored"]
    fn postgres_the_lease_rules() {
        the_lease_rules(&postgres());
    }

    /// Hosts that all saw the lease free take it at once, on their own connections, round
    /// after round: exactly one wins each round, with the next epoch.
    #[cfg(not(madsim))]
    #[test]
    #[ignore = "needs PostgreSQL: eval \"$(scripts/postgres.sh env)\", then --ignored"]
    fn postgres_racing_takes_have_one_winner() {
        const HOSTS: usize = 4;
        const ROUNDS: u64 = 40;
        let store = postgres();
        // Migrated once, before the hosts connect (their migrations then only read the
        // version).
        drop(store.connect());
        let start = std::sync::Barrier::new(HOSTS);
        let wins: Vec<Vec<Epoch>> = std::thread::scope(|scope| {
            let hosts: Vec<_> = (0..HOSTS)
                .map(|i| {
                    let (store, start) = (&store, &start);
                    scope.spawn(move || {
                        let db = store.connect();
                        let name = format!("h{i}");
                        let mut won = Vec::new();
                        for _ in 0..ROUNDS {
                            start.wait();
                            let e = take(db.as_ref(), "s", &name, 60_000).unwrap();
                            // Everyone tried before the winner releases: the lease is free
                            // again when the next round starts.
                            start.wait();
                            if let Some(e) = e {
                                won.push(e);
                                assert!(release(db.as_ref(), "s", &name, e).unwrap());
                            }
                        }
                        won
                    })
                })
                .collect();
            hosts.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut all: Vec<Epoch> = wins.into_iter().flatten().collect();
        all.sort();
        assert_eq!(all, (1..=ROUNDS).map(Epoch).collect::<Vec<_>>(), "one winner a round");
    }

    /// An owner's fenced transaction holds off a take of its expired lease until it commits:
    /// the check and the writes it guards cannot be split by a takeover.
    #[cfg(not(madsim))]
    #[test]
    #[ignore = "needs PostgreSQL: eval \"$(scripts/postgres.sh env)\", then --ignored"]
    fn postgres_a_fenced_transaction_holds_off_a_take_until_it_commits() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let store = postgres();
        let (a, b) = (store.connect(), store.connect());
        let one = take(a.as_ref(), "s", "a", 50).unwrap().unwrap();
        a.begin_write().unwrap();
        assert!(fence(a.as_ref(), "s", "a", one).unwrap());
        // The lease expires while the owner's transaction is open.
        std::thread::sleep(std::time::Duration::from_millis(100));
        let committed = &AtomicBool::new(false);
        std::thread::scope(|scope| {
            let taker = scope.spawn(move || {
                let epoch = take(b.as_ref(), "s", "b", 60_000).unwrap();
                (epoch, committed.load(Ordering::SeqCst))
            });
            std::thread::sleep(std::time::Duration::from_millis(300));
            assert!(!taker.is_finished(), "the take waits for the fenced transaction");
            committed.store(true, Ordering::SeqCst);
            a.commit().unwrap();
            let (epoch, after) = taker.join().unwrap();
            assert_eq!(epoch, Some(Epoch(2)), "the expired lease is taken after the commit");
            assert!(after, "the take returned only after the owner's commit");
        });
        // The old owner's next transaction is fenced out.
        a.begin_write().unwrap();
        assert!(!fence(a.as_ref(), "s", "a", one).unwrap());
        a.rollback();
    }
}
