//! The protocol: what each host and the database may do, as actions on a [`World`], with the
//! ghost checks that judge every step (SPEC 11).
//!
//! A host's decisions are local (it reads its own memory and what it read of the database);
//! the database's transactions are atomic and check what SPEC 11 says they check. Between a
//! host sending a transaction and the database executing it, and between the execution and
//! the answer, anything else may happen: time passes, the host freezes, another host takes
//! the lease. That is where the late writes of a stale owner come from.

use std::fmt;

use super::state::{
    Db, Host, HostId, Lease, Local, Op, Outcome, Owned, Reply, Request, Row, Seq, Status, World,
    newest, seq,
};

/// A deliberate bug in the protocol, for the checker to find (SPEC 11 "Verification").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mutant {
    /// An owner's write commits without checking that the lease's epoch is still its own.
    NoEpochCheck,
    /// A takeover writes the epoch its earlier read implies instead of deciding from the row
    /// in its own transaction (the stale rescuer of riverqueue/river#1302).
    TakeoverFromStaleRead,
    /// A host whose deadline passes while its renewal is in flight goes on as if the renewal
    /// had come in time.
    RenewalPastDeadline,
    /// A cancel row is applied as "cancel what the core has now" instead of up to its
    /// watermark, so a covered submission fed later runs.
    WatermarkOutOfOrder,
    /// A takeover's recovery forgets the submissions still waiting: they never run.
    FailoverDropsWaiting,
    /// A takeover's recovery queues the interrupted turn again: it runs a second time.
    FailoverRunsTwice,
}

impl Mutant {
    /// Every mutant, in the order they are hunted.
    pub const ALL: &[Mutant] = &[
        Mutant::NoEpochCheck,
        Mutant::TakeoverFromStaleRead,
        Mutant::RenewalPastDeadline,
        Mutant::WatermarkOutOfOrder,
        Mutant::FailoverDropsWaiting,
        Mutant::FailoverRunsTwice,
    ];

    /// Its name on the command line.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Mutant::NoEpochCheck => "no_epoch_check",
            Mutant::TakeoverFromStaleRead => "takeover_from_stale_read",
            Mutant::RenewalPastDeadline => "renewal_past_deadline",
            Mutant::WatermarkOutOfOrder => "watermark_out_of_order",
            Mutant::FailoverDropsWaiting => "failover_drops_waiting",
            Mutant::FailoverRunsTwice => "failover_runs_twice",
        }
    }
}

/// The sizes of a check: how many hosts, how much work, how many faults, and the clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    /// Hosts.
    pub hosts: u8,
    /// Submissions accepted in all.
    pub submissions: u8,
    /// Session cancels accepted in all.
    pub cancels: u8,
    /// Host crashes in all (a crashed host restarts empty).
    pub crashes: u8,
    /// Host freezes in all (a frozen host wakes later).
    pub freezes: u8,
    /// Takes of the lease in all (each grows the epoch).
    pub takes: u8,
    /// The lease, in ticks of the database's clock.
    pub lease: u8,
    /// How much earlier than the lease a host's own deadline falls.
    pub margin: u8,
    /// A deliberate bug to find.
    pub mutant: Option<Mutant>,
}

impl Bounds {
    /// The state every check starts from: the hosts up, the session without work or owner.
    #[must_use]
    pub fn start(&self) -> World {
        World {
            db: Db { lease: Lease::FREE, subs: Vec::new(), cancels: Vec::new(), last_activated: 0 },
            hosts: (0..self.hosts).map(|_| Host::new()).collect(),
            crashes: self.crashes,
            takes: self.takes,
            freezes: self.freezes,
        }
    }

    /// A host's deadline after a take or renewal, counted from when it was sent.
    fn deadline(&self) -> u8 {
        self.lease - self.margin
    }

    fn is(&self, m: Mutant) -> bool {
        self.mutant == Some(m)
    }
}

/// One step of the system.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// The database's clock ticks.
    Tick,
    /// A host accepts a submission: its ledger row commits with the next sequence.
    Accept(HostId),
    /// A host accepts a session cancel: a cancel row with the newest sequence accepted.
    Cancel(HostId),
    /// A host that owns nothing reads the lease, finds it free or expired while the session
    /// has work, and sends a take.
    Try(HostId),
    /// An owner sends a renewal (at a third of the lease).
    Renew(HostId),
    /// The database executes the host's transaction.
    Execute(HostId),
    /// The host receives the database's answer.
    Receive(HostId),
    /// An owner's core is fed the submissions of the ledger it has not seen yet.
    Feed(HostId),
    /// An owner's core applies the next cancel row.
    ApplyCancel(HostId),
    /// An owner sends the outcome `cancelled` of a waiting submission its watermark covers.
    CancelWaiting(HostId, Seq),
    /// An owner sends the activation of the first waiting submission.
    Activate(HostId),
    /// An owner's running turn does something outside the database (a tool runs).
    Effect(HostId),
    /// An owner sends the outcome of its running turn.
    Finish(HostId),
    /// An idle owner sends the release of the lease.
    Release(HostId),
    /// An owner past its own deadline drops the session (it writes nothing more for it).
    Expire(HostId),
    /// A host is killed.
    Crash(HostId),
    /// A killed host starts again, empty.
    Restart(HostId),
    /// A host is stopped.
    Freeze(HostId),
    /// A stopped host runs again.
    Wake(HostId),
}

impl Action {
    /// The same action with its host renamed by `f`.
    #[must_use]
    pub fn renamed(self, f: impl Fn(HostId) -> HostId) -> Action {
        match self {
            Action::Tick => Action::Tick,
            Action::Accept(h) => Action::Accept(f(h)),
            Action::Cancel(h) => Action::Cancel(f(h)),
            Action::Try(h) => Action::Try(f(h)),
            Action::Renew(h) => Action::Renew(f(h)),
            Action::Execute(h) => Action::Execute(f(h)),
            Action::Receive(h) => Action::Receive(f(h)),
            Action::Feed(h) => Action::Feed(f(h)),
            Action::ApplyCancel(h) => Action::ApplyCancel(f(h)),
            Action::CancelWaiting(h, s) => Action::CancelWaiting(f(h), s),
            Action::Activate(h) => Action::Activate(f(h)),
            Action::Effect(h) => Action::Effect(f(h)),
            Action::Finish(h) => Action::Finish(f(h)),
            Action::Release(h) => Action::Release(f(h)),
            Action::Expire(h) => Action::Expire(f(h)),
            Action::Crash(h) => Action::Crash(f(h)),
            Action::Restart(h) => Action::Restart(f(h)),
            Action::Freeze(h) => Action::Freeze(f(h)),
            Action::Wake(h) => Action::Wake(f(h)),
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::Tick => write!(f, "the database's clock ticks"),
            Action::Accept(h) => write!(f, "h{h} accepts a submission"),
            Action::Cancel(h) => write!(f, "h{h} accepts a session cancel"),
            Action::Try(h) => write!(f, "h{h} reads the lease as takeable and sends a take"),
            Action::Renew(h) => write!(f, "h{h} sends a renewal"),
            Action::Execute(h) => write!(f, "the database executes h{h}'s transaction"),
            Action::Receive(h) => write!(f, "h{h} receives the answer"),
            Action::Feed(h) => write!(f, "h{h}'s core is fed the new submissions"),
            Action::ApplyCancel(h) => write!(f, "h{h}'s core applies the next cancel row"),
            Action::CancelWaiting(h, s) => write!(f, "h{h} sends `cancelled` for waiting #{s}"),
            Action::Activate(h) => write!(f, "h{h} sends the activation of its first waiting"),
            Action::Effect(h) => write!(f, "h{h}'s running turn runs a tool"),
            Action::Finish(h) => write!(f, "h{h} sends the outcome of its running turn"),
            Action::Release(h) => write!(f, "h{h} sends the release of the lease"),
            Action::Expire(h) => write!(f, "h{h} passes its deadline and drops the session"),
            Action::Crash(h) => write!(f, "h{h} is killed"),
            Action::Restart(h) => write!(f, "h{h} starts again"),
            Action::Freeze(h) => write!(f, "h{h} is stopped"),
            Action::Wake(h) => write!(f, "h{h} runs again"),
        }
    }
}

/// A broken guarantee (SPEC 11's invariants), found on a step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Violation {
    /// A write committed for a host that does not hold the lease at that epoch.
    FencedWrite {
        /// The writer.
        host: HostId,
        /// The epoch it wrote with.
        epoch: u8,
        /// The lease when it committed.
        lease: Lease,
    },
    /// A host acted for the session (ran a tool) while its lease was not current.
    ActedOutsideLease {
        /// The host.
        host: HostId,
        /// The epoch it believed it held.
        epoch: u8,
        /// The lease at that moment.
        lease: Lease,
    },
    /// A second outcome (a second RunComplete) for one submission.
    TwoOutcomes(Seq),
    /// A submission became active a second time.
    RunTwice(Seq),
    /// A submission became active before an earlier one, or beside a running one.
    NotFifo {
        /// The submission activated.
        seq: Seq,
        /// The last one activated before it.
        after: Seq,
    },
    /// A submission ran although a cancel row its owner applied covers it.
    CoveredRan {
        /// The submission.
        seq: Seq,
        /// The covering watermark.
        watermark: Seq,
    },
    /// A submission was cancelled that no cancel row covers.
    CancelledUncovered(Seq),
    /// From this state, with every host running and no fault, the submission never gets an
    /// outcome.
    Stuck(Seq),
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::FencedWrite { host, epoch, lease } => write!(
                f,
                "a write of h{host} at epoch {epoch} committed while the lease is {}",
                show(lease)
            ),
            Violation::ActedOutsideLease { host, epoch, lease } => {
                write!(f, "h{host} ran a tool at epoch {epoch} while the lease is {}", show(lease))
            }
            Violation::TwoOutcomes(s) => write!(f, "submission #{s} got a second outcome"),
            Violation::RunTwice(s) => write!(f, "submission #{s} became active a second time"),
            Violation::NotFifo { seq, after } => {
                write!(f, "submission #{seq} became active out of order (after #{after})")
            }
            Violation::CoveredRan { seq, watermark } => write!(
                f,
                "submission #{seq} ran although a cancel with watermark {watermark} covers it"
            ),
            Violation::CancelledUncovered(s) => {
                write!(f, "submission #{s} was cancelled by no cancel that covers it")
            }
            Violation::Stuck(s) => write!(
                f,
                "submission #{s} never gets an outcome, with every host running and no fault"
            ),
        }
    }
}

fn show(l: &Lease) -> String {
    match (l.owner, l.expires_in) {
        (Some(o), 0) => format!("h{o}'s at epoch {}, expired", l.epoch),
        (Some(o), n) => format!("h{o}'s at epoch {} for {n} more ticks", l.epoch),
        (None, _) => format!("free at epoch {}", l.epoch),
    }
}

/// Every action enabled in `w`, in a fixed order (the search is deterministic).
#[must_use]
pub fn enabled(b: &Bounds, w: &World) -> Vec<Action> {
    // The clock always runs (a tick after everything passed changes nothing).
    let mut out = vec![Action::Tick];
    for (i, h) in w.hosts.iter().enumerate() {
        let id = HostId::try_from(i).expect("a model's hosts fit a u8");
        host_actions(b, w, id, h, &mut out);
    }
    out
}

/// The actions of host `id` (all but the clock's).
fn host_actions(b: &Bounds, w: &World, id: HostId, h: &Host, out: &mut Vec<Action>) {
    let db = &w.db;
    match h.status {
        Status::Down => {
            out.push(Action::Restart(id));
            return;
        }
        Status::Frozen => {
            // Stopped: only what it already sent moves.
            if h.pending.is_some() {
                out.push(Action::Execute(id));
            }
            out.push(Action::Wake(id));
            if w.crashes > 0 {
                out.push(Action::Crash(id));
            }
            return;
        }
        Status::Up => {}
    }
    if db.subs.len() < usize::from(b.submissions) {
        out.push(Action::Accept(id));
    }
    if db.cancels.len() < usize::from(b.cancels) {
        out.push(Action::Cancel(id));
    }
    if h.pending.is_some() {
        out.push(Action::Execute(id));
    }
    if h.reply.is_some() {
        out.push(Action::Receive(id));
    }
    match &h.owned {
        None => {
            if !h.busy() && db.has_work() && db.lease_takeable() && w.takes > 0 {
                out.push(Action::Try(id));
            }
        }
        Some(o) => owner_actions(b, w, id, h, o, out),
    }
    if w.crashes > 0 {
        out.push(Action::Crash(id));
    }
    if w.freezes > 0 {
        out.push(Action::Freeze(id));
    }
}

/// What an owner may do: nothing for the session from its own deadline on (but drop it).
fn owner_actions(b: &Bounds, w: &World, id: HostId, h: &Host, o: &Owned, out: &mut Vec<Action>) {
    let db = &w.db;
    let renewing = matches!(h.pending, Some(Request::Renew { .. }))
        || matches!(h.reply, Some(Reply::Renewed { .. }));
    let in_time = o.deadline_in > 0 || (b.is(Mutant::RenewalPastDeadline) && renewing);
    if !in_time {
        out.push(Action::Expire(id));
        return;
    }
    if o.local.len() < db.subs.len() {
        out.push(Action::Feed(id));
    }
    if usize::from(o.applied) < db.cancels.len() {
        out.push(Action::ApplyCancel(id));
    }
    if let Some((_, aborting)) = o.active()
        && !aborting
    {
        out.push(Action::Effect(id));
    }
    if h.busy() {
        return;
    }
    // At a third of the lease (SPEC 11): not before, which only spends.
    if o.deadline_in <= b.deadline().saturating_sub(b.lease / 3) {
        out.push(Action::Renew(id));
    }
    for (i, l) in o.local.iter().enumerate() {
        if *l == Local::Waiting && seq(i) <= o.watermark {
            out.push(Action::CancelWaiting(id, seq(i)));
        }
    }
    match (o.active(), o.first_waiting()) {
        (Some(_), _) => out.push(Action::Finish(id)),
        (None, Some(s)) if s > o.watermark => out.push(Action::Activate(id)),
        _ => {}
    }
    if o.idle() && o.local.len() == db.subs.len() {
        out.push(Action::Release(id));
    }
}

/// The world after `a`, or the guarantee `a` broke.
///
/// # Errors
/// The violation the step commits.
///
/// # Panics
/// When `a` is not enabled in `w` (a bug of the caller).
pub fn apply(b: &Bounds, w: &World, a: Action) -> Result<World, Violation> {
    let mut w = w.clone();
    match a {
        Action::Tick => w.tick(),
        Action::Accept(_) => w.db.subs.push(Row::Waiting),
        Action::Cancel(_) => {
            w.db.cancels.push(newest(w.db.subs.len()));
        }
        Action::Try(h) => {
            w.takes -= 1;
            // The protocol decides from the row in the take's own transaction and keeps
            // nothing of this read; the mutant keeps the epoch it read, and trusts it.
            let stale_epoch = b.is(Mutant::TakeoverFromStaleRead).then_some(w.db.lease.epoch);
            let deadline_in = b.deadline();
            w.hosts[usize::from(h)].pending = Some(Request::Take { deadline_in, stale_epoch });
        }
        Action::Renew(h) => {
            let epoch = owned(&mut w, h).epoch;
            let deadline_in = b.deadline();
            w.hosts[usize::from(h)].pending = Some(Request::Renew { deadline_in, epoch });
        }
        Action::Execute(h) => execute(b, &mut w, h)?,
        Action::Receive(h) => receive(b, &mut w, h),
        Action::Feed(h) => {
            let rows = w.db.subs.len();
            owned(&mut w, h).local.resize(rows, Local::Waiting);
        }
        Action::ApplyCancel(h) => apply_cancel(b, &mut w, h),
        Action::CancelWaiting(h, s) => {
            send(&mut w, h, Op::Outcome(s, Outcome::Cancelled));
        }
        Action::Activate(h) => {
            let s = w.hosts[usize::from(h)].owned.as_ref().and_then(Owned::first_waiting);
            let s = s.expect("enabled: a submission waits");
            covered_check(&w, h, s)?;
            send(&mut w, h, Op::Activate(s));
        }
        Action::Effect(h) => effect_check(&w, h)?,
        Action::Finish(h) => {
            let o = w.hosts[usize::from(h)].owned.as_ref().expect("enabled: an owner");
            let (s, aborting) = o.active().expect("enabled: a running turn");
            if !aborting {
                covered_check(&w, h, s)?;
            }
            let outcome = if aborting { Outcome::Cancelled } else { Outcome::Completed };
            send(&mut w, h, Op::Outcome(s, outcome));
        }
        Action::Release(h) => send(&mut w, h, Op::Release),
        Action::Expire(h) => w.hosts[usize::from(h)].owned = None,
        Action::Crash(h) => {
            w.crashes -= 1;
            // Its connection is gone: what it sent and the database had not executed rolls
            // back; an answer it had not read is lost with it.
            w.hosts[usize::from(h)] = Host { status: Status::Down, ..Host::new() };
        }
        Action::Restart(h) => w.hosts[usize::from(h)] = Host::new(),
        Action::Freeze(h) => {
            w.freezes -= 1;
            w.hosts[usize::from(h)].status = Status::Frozen;
        }
        Action::Wake(h) => w.hosts[usize::from(h)].status = Status::Up,
    }
    Ok(w)
}

/// Owner `h`'s core applies its next cancel row: its watermark covers everything at or below
/// the row's, the running turn included, and what it is fed later.
fn apply_cancel(b: &Bounds, w: &mut World, h: HostId) {
    let cancels = w.db.cancels.clone();
    let o = owned(w, h);
    let row = cancels[usize::from(o.applied)];
    o.applied += 1;
    let fed = newest(o.local.len());
    let covers = if b.is(Mutant::WatermarkOutOfOrder) { row.min(fed) } else { row };
    o.watermark = o.watermark.max(covers);
    let watermark = o.watermark;
    for (i, l) in o.local.iter_mut().enumerate() {
        if let Local::Active { aborting } = l
            && seq(i) <= watermark
        {
            *aborting = true;
        }
    }
}

/// A tool of owner `h`'s running turn acts outside the database, where no epoch can fence
/// it: the host's lease must be current.
fn effect_check(w: &World, h: HostId) -> Result<(), Violation> {
    let o = w.hosts[usize::from(h)].owned.as_ref().expect("enabled: an owner");
    let lease = w.db.lease;
    if lease.owner == Some(h) && lease.epoch == o.epoch && lease.expires_in > 0 {
        Ok(())
    } else {
        Err(Violation::ActedOutsideLease { host: h, epoch: o.epoch, lease })
    }
}

fn owned(w: &mut World, h: HostId) -> &mut Owned {
    w.hosts[usize::from(h)].owned.as_mut().expect("enabled: an owner")
}

fn send(w: &mut World, h: HostId, op: Op) {
    let epoch = owned(w, h).epoch;
    w.hosts[usize::from(h)].pending = Some(Request::Write { op, epoch });
}

/// A submission about to run must not be covered by a cancel row its owner applied (a
/// watermark covers what reaches the core later too: SPEC 4.10).
fn covered_check(w: &World, h: HostId, s: Seq) -> Result<(), Violation> {
    let o = w.hosts[usize::from(h)].owned.as_ref().expect("enabled: an owner");
    let applied = &w.db.cancels[..usize::from(o.applied)];
    match applied.iter().find(|&&watermark| watermark >= s) {
        Some(&watermark) => Err(Violation::CoveredRan { seq: s, watermark }),
        None => Ok(()),
    }
}

/// The database executes host `h`'s transaction, atomically.
fn execute(b: &Bounds, w: &mut World, h: HostId) -> Result<(), Violation> {
    let host = &mut w.hosts[usize::from(h)];
    let request = host.pending.take().expect("enabled: a transaction was sent");
    let db = &mut w.db;
    let reply = match request {
        Request::Take { deadline_in, stale_epoch } => {
            // Decided from the row as it is now, in this transaction; the mutant trusts the
            // earlier read.
            let base = match stale_epoch {
                Some(read) => Some(read),
                None => db.lease_takeable().then_some(db.lease.epoch),
            };
            if let Some(base) = base {
                db.lease = Lease { owner: Some(h), epoch: base + 1, expires_in: b.lease };
                // Recovery for this session alone, in the same transaction: the turn that
                // was active ends `interrupted`; waiting ones stay queued.
                let interrupted = db.subs.iter().position(|r| *r == Row::Active);
                if let Some(i) = interrupted {
                    db.subs[i] = Row::Done(Outcome::Interrupted);
                }
                Reply::Taken { epoch: base + 1, deadline_in, interrupted: interrupted.map(seq) }
            } else {
                Reply::Refused
            }
        }
        Request::Renew { deadline_in, epoch } => {
            if db.lease.owner == Some(h) && db.lease.epoch == epoch {
                db.lease.expires_in = b.lease;
                Reply::Renewed { deadline_in }
            } else {
                Reply::Refused
            }
        }
        Request::Write { op, epoch } => {
            // It may come late: its host froze, or dropped the session, after sending it.
            let fenced = db.lease.epoch != epoch && !b.is(Mutant::NoEpochCheck);
            if fenced {
                Reply::Refused
            } else {
                commit_write(db, h, epoch, op)?;
                Reply::Written(op)
            }
        }
    };
    w.hosts[usize::from(h)].reply = Some(reply);
    Ok(())
}

/// A write that passed its epoch check, judged by the ghost checks.
fn commit_write(db: &mut Db, h: HostId, epoch: u8, op: Op) -> Result<(), Violation> {
    if db.lease.owner != Some(h) || db.lease.epoch != epoch {
        return Err(Violation::FencedWrite { host: h, epoch, lease: db.lease });
    }
    match op {
        Op::Activate(s) => {
            let i = usize::from(s - 1);
            match db.subs[i] {
                Row::Waiting => {}
                Row::Active | Row::Done(_) => return Err(Violation::RunTwice(s)),
            }
            if s <= db.last_activated || db.subs.contains(&Row::Active) {
                return Err(Violation::NotFifo { seq: s, after: db.last_activated });
            }
            db.subs[i] = Row::Active;
            db.last_activated = s;
        }
        Op::Outcome(s, outcome) => {
            let i = usize::from(s - 1);
            if matches!(db.subs[i], Row::Done(_)) {
                return Err(Violation::TwoOutcomes(s));
            }
            if outcome == Outcome::Cancelled && !db.cancels.iter().any(|&c| c >= s) {
                return Err(Violation::CancelledUncovered(s));
            }
            db.subs[i] = Row::Done(outcome);
        }
        Op::Release => db.lease.owner = None,
    }
    Ok(())
}

/// Host `h` receives its answer.
fn receive(b: &Bounds, w: &mut World, h: HostId) {
    let reply = w.hosts[usize::from(h)].reply.take().expect("enabled: an answer came");
    let db = &w.db;
    let host = &mut w.hosts[usize::from(h)];
    match reply {
        Reply::Taken { epoch, deadline_in, interrupted } => {
            // The new owner's core is fed the ledger as the take left it: what ended is
            // finished, what waits is queued in sequence order, and every cancel row is
            // applied (its watermark is the highest).
            let mut local: Vec<Local> = db
                .subs
                .iter()
                .map(|r| match r {
                    Row::Waiting if b.is(Mutant::FailoverDropsWaiting) => Local::Finished,
                    Row::Waiting => Local::Waiting,
                    Row::Active | Row::Done(_) => Local::Finished,
                })
                .collect();
            if let (Some(s), true) = (interrupted, b.is(Mutant::FailoverRunsTwice)) {
                local[usize::from(s - 1)] = Local::Waiting;
            }
            host.owned = Some(Owned {
                epoch,
                deadline_in,
                applied: u8::try_from(db.cancels.len()).expect("fits"),
                watermark: db.cancels.iter().copied().max().unwrap_or(0),
                local,
            });
        }
        Reply::Renewed { deadline_in } => {
            if let Some(o) = host.owned.as_mut() {
                // Counted from when the renewal was sent: the lease runs at least that long.
                o.deadline_in = o.deadline_in.max(deadline_in);
            }
        }
        Reply::Written(op) => {
            if let Some(o) = host.owned.as_mut() {
                match op {
                    Op::Activate(s) => {
                        let aborting = s <= o.watermark;
                        o.local[usize::from(s - 1)] = Local::Active { aborting };
                    }
                    Op::Outcome(s, _) => o.local[usize::from(s - 1)] = Local::Finished,
                    Op::Release => host.owned = None,
                }
            }
        }
        // Not (or no longer) the owner: drop the session, write nothing more.
        Reply::Refused => host.owned = None,
    }
}
