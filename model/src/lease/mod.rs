//! The lease and fencing protocol of several hosts over one database (SPEC 11), as an
//! executable specification with its own exhaustive checker.
//!
//! The lifecycle model ([`crate::spec`]) checks one engine; this one checks what keeps one
//! engine per session when several hosts share a database: who owns a session, how a host
//! that stalls is replaced, and why a host that wakes up late can write nothing. It models
//! one session (sessions do not share leases), a few hosts and the database:
//!
//! - **Hosts** accept submissions and cancels for the session ([`Action::Accept`],
//!   [`Action::Cancel`]), take its lease when it is free or expired and the session has
//!   work ([`Action::Try`], then the database decides), renew it, and while they own it feed
//!   their core the ledger and write its decisions. A host crashes (its memory and its
//!   connection are gone), restarts empty, freezes (it does nothing, but what it sent may
//!   still commit), and wakes.
//! - **The database** executes each transaction atomically, at any later moment
//!   ([`Action::Execute`]); the host hears the answer later still ([`Action::Receive`]). A
//!   take decides from the lease row as it is in its own transaction: free or expired by the
//!   database's clock, it grows the epoch and ends `interrupted` the turn that was active
//!   (recovery for this session alone). Every write carries the writer's epoch and is refused
//!   when the row has another.
//! - **A host's own deadline**: it starts nothing for the session from `sent + lease -
//!   margin` on, where `sent` is when its last successful take or renewal was sent. The
//!   database's expiry is at least `sent + lease`, so a host acts only while its lease is
//!   current, whatever the delays. Tools are the reason: they act outside the database, where
//!   no epoch can fence them ([`Action::Effect`]).
//!
//! What every step is judged by ([`Violation`]): a committed write comes from the lease's
//! holder at its epoch; a tool runs only under a current lease; one outcome per submission,
//! one activation, FIFO, one turn at a time; a cancel row covers exactly what is at or below
//! its watermark, also what reaches the owner's core later (SPEC 4.10); and from every state,
//! with every host running and no fault, every submission gets its outcome (liveness, so a
//! submission lost at a failover is found).
//!
//! [`Mutant`] lists the protocol's deliberate bugs; [`check`] must find each, with a shortest
//! counterexample. `turnstile-model lease` runs it; `docs/verification.md` ("Several hosts")
//! gives the sizes and figures.

mod check;
mod protocol;
pub mod state;

pub use check::{Counterexample, Report, check};
pub use protocol::{Action, Bounds, Mutant, Violation, apply, enabled};

/// The named sizes: `tiny` for the tests' exhaustive pass, `small` and `wide` (three hosts)
/// for CI and the mutant hunt. `docs/verification.md` has their figures.
#[must_use]
pub fn named(name: &str) -> Option<Bounds> {
    let small = Bounds {
        hosts: 2,
        submissions: 2,
        cancels: 1,
        crashes: 1,
        freezes: 1,
        takes: 3,
        lease: 3,
        margin: 1,
        mutant: None,
    };
    match name {
        "tiny" => Some(Bounds { submissions: 1, ..small }),
        "small" => Some(small),
        "wide" => Some(Bounds { hosts: 3, submissions: 1, ..small }),
        _ => None,
    }
}

/// The names [`named`] knows, each with what it is.
pub const NAMES: &[(&str, &str)] = &[
    ("tiny", "2 hosts, 1 submission, 1 cancel, 1 crash, 1 freeze, 3 takes, lease 3, margin 1"),
    ("small", "2 hosts, 2 submissions, 1 cancel, 1 crash, 1 freeze, 3 takes, lease 3, margin 1"),
    ("wide", "3 hosts, 1 submission, 1 cancel, 1 crash, 1 freeze, 3 takes, lease 3, margin 1"),
];
