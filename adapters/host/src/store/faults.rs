//! Injected store failures (SPEC 4.12 fail-stop, SPEC 10 sim): a handle that tests and the
//! simulator program, consulted by every [`super::open::Store::commit`].
//!
//! The failures carry SQLite's real result codes and messages, so a host's error handling and
//! the "engine stopped: storage failure: `<error>`" text see exactly what a real failure gives.

use std::sync::{Arc, Mutex, PoisonError};

use rusqlite::ffi;

use super::error::StoreError;

/// A failure to inject into a commit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fault {
    /// Another connection holds the write lock: SQLITE_BUSY "database is locked". Nothing is
    /// applied.
    Locked,
    /// SQLITE_FULL "database or disk is full". Nothing is applied.
    DiskFull,
    /// SQLITE_READONLY "attempt to write a readonly database". Nothing is applied.
    ReadOnly,
    /// Every write is applied inside the transaction, then the commit fails with SQLITE_FULL
    /// "database or disk is full" instead of committing: the rollback path. Nothing stays
    /// applied.
    DiskFullAtCommit,
}

impl Fault {
    /// True when the fault strikes after the writes were applied, before COMMIT.
    #[must_use]
    pub fn after_apply(self) -> bool {
        matches!(self, Fault::DiskFullAtCommit)
    }

    /// The error the fault makes a commit return: a SQLite failure with the real code and
    /// message.
    #[must_use]
    pub fn error(self) -> StoreError {
        let (code, message) = match self {
            Fault::Locked => (ffi::SQLITE_BUSY, "database is locked"),
            Fault::DiskFull | Fault::DiskFullAtCommit => {
                (ffi::SQLITE_FULL, "database or disk is full")
            }
            Fault::ReadOnly => (ffi::SQLITE_READONLY, "attempt to write a readonly database"),
        };
        StoreError::Sqlite(rusqlite::Error::SqliteFailure(
            ffi::Error::new(code),
            Some(message.to_owned()),
        ))
    }
}

/// A cloneable handle to the failures a store injects. All clones share one program: a test
/// keeps a clone and re-programs it while the store runs.
///
/// The program: first the `fail_next` budget (the next `n` commits fail), then the
/// `fail_always` fault if set, else commits succeed. A `fail_burst` becomes the budget at once,
/// or, while injected failures are under way, after the next attempt that none fails.
#[derive(Clone, Debug, Default)]
pub struct Faults {
    inner: Arc<Mutex<Program>>,
}

/// What is programmed, and what happened.
#[derive(Debug, Default)]
struct Program {
    /// Commits left to fail with `next`.
    next_left: u32,
    /// The fault of the `fail_next` budget.
    next: Option<Fault>,
    /// The fault every commit gets once the budget is spent.
    always: Option<Fault>,
    /// Commits attempted (failed ones included).
    commits: u64,
    /// Commits an injected fault failed.
    injected: u64,
    /// Commit attempts failed by injected faults since the last one that was not.
    streak: u32,
    /// A burst waiting for the streak under way to end (see [`Faults::fail_burst`]).
    queued: Option<(u32, Fault)>,
    /// Several hosts: the coordination calls (takes, renewals, polls) fail with this, the
    /// commits not (a link of its own that broke).
    coordination: Option<Fault>,
}

impl Faults {
    /// The next `n` commits fail with `fault` (replacing an earlier `fail_next`).
    pub fn fail_next(&self, n: u32, fault: Fault) {
        let mut p = self.program();
        p.next_left = n;
        p.next = Some(fault);
    }

    /// A transient failure: the next `n` commits fail with `fault`, as with
    /// [`Faults::fail_next`], but never in the same streak as failures injected before. While
    /// the last commit attempt failed from an injected fault (the writer is retrying), the burst
    /// waits for the next attempt that no injected fault fails (the retry that succeeds), then
    /// begins; a burst already waiting is replaced.
    ///
    /// The host absorbs a short streak within its retry budget; bursts that land on the
    /// retries of one commit would add up to an outage (that is [`Faults::fail_always`]).
    pub fn fail_burst(&self, n: u32, fault: Fault) {
        let mut p = self.program();
        if p.streak > 0 {
            p.queued = Some((n, fault));
        } else {
            p.next_left = n;
            p.next = Some(fault);
        }
    }

    /// Every commit fails with `fault` (after any `fail_next` budget), until [`Faults::clear`].
    pub fn fail_always(&self, fault: Fault) {
        self.program().always = Some(fault);
    }

    /// No more injected failures. The counters are kept.
    pub fn clear(&self) {
        let mut p = self.program();
        p.next_left = 0;
        p.next = None;
        p.always = None;
        p.queued = None;
    }

    /// How many commits were attempted since the handle was made, failed ones included.
    #[must_use]
    pub fn commits(&self) -> u64 {
        self.program().commits
    }

    /// How many commits an injected fault failed.
    #[must_use]
    pub fn injected(&self) -> u64 {
        self.program().injected
    }

    /// Several hosts: the coordination calls (takes, renewals, polls, accepts) fail with
    /// `fault` until `None`, while the commits go on: one of the host's connections broke.
    pub fn cut_coordination(&self, fault: Option<Fault>) {
        self.program().coordination = fault;
    }

    /// The fault a coordination call fails with now: a partition between the host and the
    /// store ([`Faults::fail_always`]) cuts them off as it does the commits, and
    /// [`Faults::cut_coordination`] only them.
    #[must_use]
    pub fn always(&self) -> Option<Fault> {
        let p = self.program();
        p.always.or(p.coordination)
    }

    /// Called once per commit attempt: counts it and returns the fault it must suffer, if any.
    pub(super) fn on_commit(&self) -> Option<Fault> {
        let mut p = self.program();
        p.commits += 1;
        let fault = if p.next_left > 0 {
            p.next_left -= 1;
            p.next
        } else {
            p.always
        };
        if fault.is_some() {
            p.injected += 1;
            p.streak += 1;
        } else {
            p.streak = 0;
            if let Some((n, next)) = p.queued.take() {
                p.next_left = n;
                p.next = Some(next);
            }
        }
        fault
    }

    fn program(&self) -> std::sync::MutexGuard<'_, Program> {
        // A panic while holding the lock leaves a consistent program (every update is a few
        // plain assignments), so a poisoned lock is still usable.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_then_always_then_clear() {
        let f = Faults::default();
        let g = f.clone();
        assert_eq!(f.on_commit(), None);
        g.fail_next(2, Fault::Locked);
        g.fail_always(Fault::ReadOnly);
        assert_eq!(f.on_commit(), Some(Fault::Locked));
        assert_eq!(f.on_commit(), Some(Fault::Locked));
        assert_eq!(f.on_commit(), Some(Fault::ReadOnly));
        g.clear();
        assert_eq!(f.on_commit(), None);
        assert_eq!(g.commits(), 5);
        assert_eq!(g.injected(), 3);
    }

    /// Seeds 21503, 109025 and 153031: three bursts of 3 landed on the retries of one
    /// commit, nine failures in a row, the whole of the simulated host's 2 s retry budget.
    #[test]
    fn a_burst_during_a_failure_streak_waits_for_the_next_success() {
        let f = Faults::default();
        let attempt = || f.on_commit();
        f.fail_burst(3, Fault::DiskFull);
        assert_eq!(attempt(), Some(Fault::DiskFull));
        // Bursts while the writer retries: the last one waits, the one before it is replaced.
        f.fail_burst(2, Fault::ReadOnly);
        f.fail_burst(3, Fault::Locked);
        assert_eq!(attempt(), Some(Fault::DiskFull));
        assert_eq!(attempt(), Some(Fault::DiskFull));
        assert_eq!(attempt(), None, "the streak ends when its own burst is spent");
        for _ in 0..3 {
            assert_eq!(attempt(), Some(Fault::Locked));
        }
        assert_eq!(attempt(), None);
        // With no streak under way a burst begins at once, replacing a budget not yet used.
        f.fail_next(3, Fault::DiskFull);
        f.fail_burst(1, Fault::Locked);
        assert_eq!(attempt(), Some(Fault::Locked));
        assert_eq!(attempt(), None);
        // `clear` forgets a waiting burst too.
        f.fail_next(1, Fault::DiskFull);
        assert_eq!(attempt(), Some(Fault::DiskFull));
        f.fail_burst(3, Fault::Locked);
        f.clear();
        assert_eq!(attempt(), None);
        assert_eq!(attempt(), None);
    }

    #[test]
    fn errors_read_like_sqlite_errors() {
        let text = |f: Fault| f.error().to_string();
        assert_eq!(text(Fault::Locked), "database is locked");
        assert_eq!(text(Fault::DiskFull), "database or disk is full");
        assert_eq!(text(Fault::ReadOnly), "attempt to write a readonly database");
        let StoreError::Sqlite(rusqlite::Error::SqliteFailure(e, _)) = Fault::Locked.error() else {
            panic!("a SQLite failure");
        };
        assert_eq!(e.code, rusqlite::ErrorCode::DatabaseBusy);
        assert!(Fault::DiskFullAtCommit.after_apply() && !Fault::DiskFull.after_apply());
    }
}
