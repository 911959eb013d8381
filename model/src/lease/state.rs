//! The lease model's state: the database (the truth every host shares) and each host (what it
//! believes, what it sent, what was answered).
//!
//! Times are ticks of the database's clock, kept as what is left from now (0: passed). A
//! host's monotonic clock runs at the same rate (the margin covers drift), so a host's
//! deadline is kept in database ticks too: only differences of a host's own clock ever
//! matter, and those are equal. Nothing compares a time but with now, so two states whose
//! times differ only in what has passed are one, and the clock needs no bound.

/// A host, numbered from 0.
pub type HostId = u8;

/// A submission's sequence in its session, from 1 (the database hands them out).
pub type Seq = u8;

/// How a submission ended (the RunComplete's outcome, as far as this protocol cares).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Outcome {
    /// Its turn ran to the end.
    Completed,
    /// A cancel row covered it.
    Cancelled,
    /// Its owner was lost while it was active; a takeover's recovery ended it.
    Interrupted,
}

/// A submission's row in the ledger.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Row {
    /// Accepted, not started.
    Waiting,
    /// Its turn is running on the owner that activated it.
    Active,
    /// Ended, with its one RunComplete.
    Done(Outcome),
}

/// The session's lease row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Lease {
    /// Its holder; `None` while free (never taken, or released).
    pub owner: Option<HostId>,
    /// Grows by one at every take: a fencing token no two takes share.
    pub epoch: u8,
    /// Ticks until it expires by the database's clock (0: expired, it may be taken).
    pub expires_in: u8,
}

/// The shared database: one session's lease, its ledger, and the checker's ghost records.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Db {
    /// The session's lease.
    pub lease: Lease,
    /// The session's submissions, by sequence (index `seq - 1`).
    pub subs: Vec<Row>,
    /// The session's cancel rows in commit order: each is its watermark, the newest sequence
    /// accepted when it committed.
    pub cancels: Vec<Seq>,
    /// Ghost: the sequence of the last activation (0: none yet), for FIFO.
    pub last_activated: Seq,
}

impl Lease {
    /// The lease of a session nobody took yet.
    pub const FREE: Lease = Lease { owner: None, epoch: 0, expires_in: 0 };
}

impl Db {
    /// Whether the session has a submission without an outcome.
    #[must_use]
    pub fn has_work(&self) -> bool {
        self.subs.iter().any(|r| !matches!(r, Row::Done(_)))
    }

    /// Whether the lease may be taken now: free, or past its expiry by the database's clock.
    #[must_use]
    pub fn lease_takeable(&self) -> bool {
        self.lease.owner.is_none() || self.lease.expires_in == 0
    }
}

/// Whether a host runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Status {
    /// Running.
    Up,
    /// Stopped (SIGSTOP, a long pause): it does nothing, but what it sent may still commit.
    Frozen,
    /// Killed: its memory and its connection are gone (an open transaction rolls back).
    Down,
}

/// What an owner's core knows of a submission it was fed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Local {
    /// Waiting in the core's queue.
    Waiting,
    /// Its turn runs here; `aborting` once a cancel covers it.
    Active {
        /// A cancel covers it: its end is `cancelled`.
        aborting: bool,
    },
    /// Ended (its outcome written, or ended before this host owned the session).
    Finished,
}

/// What a host holds while it owns the session.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Owned {
    /// The lease epoch it took.
    pub epoch: u8,
    /// Ticks until its own deadline: it starts nothing for the session from then on.
    pub deadline_in: u8,
    /// Cancel rows applied to its core, in commit order.
    pub applied: u8,
    /// Its core's cancel watermark (SPEC 4.10): everything at or below it is cancelled.
    pub watermark: Seq,
    /// What its core knows of each submission fed to it (index `seq - 1`); its length is how
    /// many were fed.
    pub local: Vec<Local>,
}

impl Owned {
    /// The turn running here, if any.
    #[must_use]
    pub fn active(&self) -> Option<(Seq, bool)> {
        self.local.iter().enumerate().find_map(|(i, l)| match l {
            Local::Active { aborting } => Some((seq(i), *aborting)),
            _ => None,
        })
    }

    /// The first submission waiting in the core's queue.
    #[must_use]
    pub fn first_waiting(&self) -> Option<Seq> {
        self.local.iter().position(|l| *l == Local::Waiting).map(seq)
    }

    /// Whether nothing fed to it is unfinished.
    #[must_use]
    pub fn idle(&self) -> bool {
        self.local.iter().all(|l| *l == Local::Finished)
    }
}

/// The sequence of the submission at index `i`.
#[must_use]
pub fn seq(i: usize) -> Seq {
    Seq::try_from(i + 1).expect("a model's submissions fit a u8")
}

/// The newest sequence of `n` submissions (0: none).
#[must_use]
pub fn newest(n: usize) -> Seq {
    Seq::try_from(n).expect("a model's submissions fit a u8")
}

/// A write an owner makes for the session (in a transaction that checks its epoch).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Op {
    /// A waiting submission becomes the active turn.
    Activate(Seq),
    /// A submission ends, with its RunComplete.
    Outcome(Seq, Outcome),
    /// The lease is given back (the session is idle here).
    Release,
}

/// A transaction a host sent that the database has not executed yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Request {
    /// Take the lease.
    Take {
        /// Ticks until the deadline it gives its host if it succeeds: the lease minus the
        /// margin from when it was sent.
        deadline_in: u8,
        /// The epoch the host read before it tried, kept only by a take that decides from
        /// that read (the mutant [`crate::lease::Mutant::TakeoverFromStaleRead`]); the
        /// protocol's take decides from the row in its own transaction and keeps nothing.
        stale_epoch: Option<u8>,
    },
    /// Extend the lease.
    Renew {
        /// As for a take: counted from when it was sent.
        deadline_in: u8,
        /// The epoch it holds.
        epoch: u8,
    },
    /// An owner's write, with the epoch it holds (checked by the transaction).
    Write {
        /// What it writes.
        op: Op,
        /// The epoch it holds.
        epoch: u8,
    },
}

/// The database's answer, not yet received.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reply {
    /// The lease is the host's at `epoch`; recovery ended `interrupted` the turn that was
    /// active, if one was.
    Taken {
        /// The new epoch.
        epoch: u8,
        /// The deadline it gives, counted from when the take was sent.
        deadline_in: u8,
        /// The turn recovery interrupted.
        interrupted: Option<Seq>,
    },
    /// Extended.
    Renewed {
        /// The deadline it gives, counted from when the renewal was sent.
        deadline_in: u8,
    },
    /// The write committed.
    Written(Op),
    /// The lease is not (or no longer) this host's: nothing was written.
    Refused,
}

/// A host.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Host {
    /// Whether it runs.
    pub status: Status,
    /// The session, while it believes it owns it.
    pub owned: Option<Owned>,
    /// A transaction it sent, not executed yet (one at a time).
    pub pending: Option<Request>,
    /// An answer it has not received yet.
    pub reply: Option<Reply>,
}

impl Host {
    /// A host that just started.
    #[must_use]
    pub fn new() -> Host {
        Host { status: Status::Up, owned: None, pending: None, reply: None }
    }

    /// Whether a transaction of its is in flight (sent, or answered but not received).
    #[must_use]
    pub fn busy(&self) -> bool {
        self.pending.is_some() || self.reply.is_some()
    }
}

impl World {
    /// One tick of the database's clock: every time left shrinks by one.
    pub fn tick(&mut self) {
        let down = |t: &mut u8| *t = t.saturating_sub(1);
        down(&mut self.db.lease.expires_in);
        for h in &mut self.hosts {
            if let Some(o) = &mut h.owned {
                down(&mut o.deadline_in);
            }
            match &mut h.pending {
                Some(Request::Take { deadline_in, .. } | Request::Renew { deadline_in, .. }) => {
                    down(deadline_in);
                }
                Some(Request::Write { .. }) | None => {}
            }
            match &mut h.reply {
                Some(Reply::Taken { deadline_in, .. } | Reply::Renewed { deadline_in }) => {
                    down(deadline_in);
                }
                Some(Reply::Written(_) | Reply::Refused) | None => {}
            }
        }
    }
}

impl Default for Host {
    fn default() -> Host {
        Host::new()
    }
}

/// The whole system: the database, the hosts, and what the bounds let still happen.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct World {
    /// The database.
    pub db: Db,
    /// The hosts.
    pub hosts: Vec<Host>,
    /// Crashes still allowed.
    pub crashes: u8,
    /// Takes still allowed (each grows the epoch, which would grow without end).
    pub takes: u8,
    /// Freezes still allowed.
    pub freezes: u8,
}

/// A renaming of the hosts: `to[h]` is host `h`'s new number.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Renaming {
    to: Vec<HostId>,
}

impl Renaming {
    /// Every renaming of `n` hosts.
    #[must_use]
    pub fn all(n: usize) -> Vec<Renaming> {
        let mut out = Vec::new();
        let mut to: Vec<HostId> = (0..n).map(|h| HostId::try_from(h).expect("fits")).collect();
        permute(&mut to, 0, &mut out);
        out
    }

    /// Host `h`'s new number.
    #[must_use]
    pub fn apply(&self, h: HostId) -> HostId {
        self.to[usize::from(h)]
    }

    /// The host whose new number is `h`.
    #[must_use]
    pub fn invert(&self, h: HostId) -> HostId {
        let i = self.to.iter().position(|&t| t == h).expect("a renaming is a permutation");
        HostId::try_from(i).expect("fits")
    }
}

fn permute(to: &mut Vec<HostId>, k: usize, out: &mut Vec<Renaming>) {
    if k == to.len() {
        out.push(Renaming { to: to.clone() });
        return;
    }
    for i in k..to.len() {
        to.swap(k, i);
        permute(to, k + 1, out);
        to.swap(k, i);
    }
}

impl World {
    /// The same world with host `h` numbered `r.apply(h)`.
    #[must_use]
    pub fn renamed(&self, r: &Renaming) -> World {
        let mut w = self.clone();
        for (old, host) in self.hosts.iter().enumerate() {
            w.hosts[usize::from(r.apply(HostId::try_from(old).expect("fits")))] = host.clone();
        }
        w.db.lease.owner = w.db.lease.owner.map(|o| r.apply(o));
        w
    }

    /// The same world with the hosts numbered in a canonical order.
    ///
    /// Hosts are interchangeable (no rule reads a host's number but to name it), so a world
    /// and its renamings have the same futures up to the names: the checker explores one of
    /// them. Hosts are ordered by their state, the lease's holder first among equals (a
    /// host's state names no host, so every renaming of a world gets the same form).
    #[must_use]
    pub fn canonical(&self) -> World {
        let not_holder = |i: usize| self.db.lease.owner != Some(HostId::try_from(i).expect("fits"));
        let mut order: Vec<usize> = (0..self.hosts.len()).collect();
        order.sort_by_key(|&i| (&self.hosts[i], not_holder(i)));
        let mut to = vec![0; self.hosts.len()];
        for (new, &old) in order.iter().enumerate() {
            to[old] = HostId::try_from(new).expect("fits");
        }
        self.renamed(&Renaming { to })
    }
}
