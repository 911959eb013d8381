//! A member of several hosts over one store (SPEC 11): the task that takes, renews, feeds
//! and gives back the sessions this host owns.
//!
//! It follows the rules the lease model checks (`model/src/lease/`), one for one:
//! - **Take** a session with work whose lease is free or expired, up to
//!   [`MemberConfig::max_owned`], oldest work first; a free session whose work another host
//!   accepted a moment ago is left to that host for [`MemberConfig::prefer_acceptor`]. The
//!   take's transaction recovers the session and returns its waiting submissions and pending
//!   commands, which start the session's core (`cores.rs`).
//! - **Renew** at a third of the lease. The host's own deadline is the lease minus
//!   [`MemberConfig::margin`], counted from when its take or last renewal was **sent**; past
//!   it, the session is dropped (nothing more starts or is written for it) before the lease
//!   can expire. A renewal that finds another epoch drops the session at once, and so does a
//!   commit that its fence left out (the writer reports it here).
//! - **Feed** the owned sessions' cores what was accepted for them anywhere, in the ledger's
//!   order; publish other hosts' outcomes to this host's waiters and streams.
//! - **Release** a session idle for [`MemberConfig::idle_release`].
//!
//! It wakes on a notification (PostgreSQL's `LISTEN`, on a thread of its own), on this host's
//! own accepts, and at least every [`MemberConfig::poll`]: a lost notification delays, never
//! loses.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, mpsc, oneshot, watch};
use tokio::time::Instant;
use tracing::{debug, info, warn};
use turnstile_core::SessionId;

use super::command::{MemberMsg, Msg, Work};
use crate::events::Hub;
use crate::record::Cursor;
use crate::store::NewRun;
use crate::store::StoreError;
use crate::store::cluster::{CommandRow, Coordinator, Taken};
use crate::store::lease::Epoch;

/// How a host takes part in several hosts over one store (SPEC 11).
#[derive(Clone, Debug)]
pub struct MemberConfig {
    /// This host's name: unique among the hosts of the store (a lease names its holder).
    pub host: String,
    /// How long a take or renewal holds a lease, by the database's clock (default 10 s).
    pub lease: Duration,
    /// How long before the lease ends a host stops acting for a session it could not renew
    /// (default 2 s): room for a pause between the host's clock and the database's.
    pub margin: Duration,
    /// At most this many sessions owned at once (default 256).
    pub max_owned: usize,
    /// An owned session with nothing to do for this long is given back (default 30 s).
    pub idle_release: Duration,
    /// The longest wait between two looks at the ledger (default 1 s; notifications wake
    /// the host sooner).
    pub poll: Duration,
    /// How long a free session's new work is left to the host that accepted it (default
    /// 500 ms).
    pub prefer_acceptor: Duration,
    /// Wake at once on other hosts' notifications (PostgreSQL's `LISTEN`) and on this host's
    /// own accepts (default). Off, the host finds everything by its poll alone: what a test
    /// that loses every notification runs.
    pub notifications: bool,
}

impl MemberConfig {
    /// SPEC defaults for a host named `host`.
    #[must_use]
    pub fn new(host: impl Into<String>) -> MemberConfig {
        MemberConfig {
            host: host.into(),
            lease: Duration::from_secs(10),
            margin: Duration::from_secs(2),
            max_owned: 256,
            idle_release: Duration::from_secs(30),
            poll: Duration::from_secs(1),
            prefer_acceptor: Duration::from_millis(500),
            notifications: true,
        }
    }

    /// How long after its take or renewal was sent the host still acts for a session.
    fn acting(&self) -> Duration {
        self.lease.saturating_sub(self.margin)
    }

    /// How long the database lets a connection of this host sit inside a transaction: half
    /// of the time it acts under a lease, so a frozen host never holds the change order's
    /// row (which every writer takes) long enough to keep a takeover waiting past the lease.
    pub(crate) fn idle_in_transaction(&self) -> Duration {
        (self.acting() / 2).max(Duration::from_millis(100))
    }
}

/// Puts submissions and commands in the order they were accepted: a command comes right
/// after the submissions at or below its watermark, as it committed (every writer of the
/// store commits one at a time, `store/cluster.rs`), and commands keep their own order.
pub(crate) fn in_ledger_order(
    runs: Vec<NewRun>,
    commands: Vec<CommandRow>,
    armed: crate::mutants::Armed,
) -> Vec<Work> {
    // The bug `member_watermark_out_of_order`: the commands after every submission of the
    // batch, a cancel covering all of them (its watermark ignored).
    let out_of_order = armed.is(crate::mutants::HostMutant::MemberWatermarkOutOfOrder);
    let newest = runs.iter().map(|r| r.seq).max();
    let commands = commands.into_iter().map(|mut c| {
        if out_of_order && c.kind == crate::store::cluster::CommandKind::Cancel {
            c.up_to = c.up_to.max(newest);
        }
        c
    });
    let place = |c: &CommandRow| if out_of_order { u64::MAX } else { c.up_to.map_or(0, |s| s.0) };
    let mut work: Vec<((u64, u8, u64), Work)> = runs
        .into_iter()
        .map(|r| ((r.seq.0, 0, 0), Work::Submit(r)))
        .chain(commands.map(|c| ((place(&c), 1, c.id), Work::Command(c))))
        .collect();
    work.sort_by_key(|(key, _)| *key);
    work.into_iter().map(|(_, w)| w).collect()
}

/// A lease this host holds.
struct Lease {
    epoch: Epoch,
    /// When the take or the last renewal that succeeded was sent.
    sent: Instant,
    /// The newest sequence and command fed to the core.
    fed_seq: u64,
    fed_command: u64,
    /// When work was last fed (or the session taken).
    active: Instant,
}

/// Until when this host acts for each session it holds (its own deadline: the lease minus the
/// margin, from when the take or the last renewal was sent), shared with the workers, which
/// start no IO for a session past it (SPEC 11: "from then on it starts nothing"), whatever
/// the order in which a host's tasks run after a pause.
#[derive(Clone, Debug, Default)]
pub(crate) struct Deadlines {
    map: Arc<Mutex<BTreeMap<SessionId, (Epoch, Instant)>>>,
    armed: crate::mutants::Armed,
}

impl Deadlines {
    pub(crate) fn new(armed: crate::mutants::Armed) -> Deadlines {
        Deadlines { map: Arc::default(), armed }
    }

    fn map(&self) -> std::sync::MutexGuard<'_, BTreeMap<SessionId, (Epoch, Instant)>> {
        self.map.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn set(&self, session: &SessionId, epoch: Epoch, until: Instant) {
        self.map().insert(session.clone(), (epoch, until));
    }

    fn forget(&self, session: &SessionId) {
        self.map().remove(session);
    }

    /// Whether IO may start for `session` under the lease epoch `fence` now (always for a host
    /// alone, `fence` `None`).
    pub(crate) fn may_act(&self, session: &SessionId, fence: Option<Epoch>) -> bool {
        let Some(epoch) = fence else { return true };
        // The bug `member_acts_past_deadline`: the epoch is checked, the deadline not.
        let late_too = self.armed.is(crate::mutants::HostMutant::MemberActsPastDeadline);
        self.map()
            .get(session)
            .is_some_and(|(e, until)| *e == epoch && (late_too || Instant::now() < *until))
    }
}

/// The member task.
pub(crate) struct Membership {
    pub(crate) config: MemberConfig,
    pub(crate) coordinator: Arc<Mutex<Coordinator>>,
    /// Weak: the task must not keep the engine alive once every handle is gone.
    pub(crate) inbox: mpsc::WeakSender<Msg>,
    pub(crate) hub: Arc<Hub>,
    /// Notifications and this host's own accepts.
    pub(crate) wake: Arc<Notify>,
    /// Sessions whose commit the writer's fence left out.
    pub(crate) fenced: mpsc::UnboundedReceiver<(SessionId, Epoch)>,
    /// The host's end (a shutdown or a stop).
    pub(crate) ended: watch::Receiver<bool>,
    /// The bug the host pretends to have (tests and the simulator).
    pub(crate) armed: crate::mutants::Armed,
    /// Until when this host acts for each held session (shared with the workers).
    pub(crate) deadlines: Deadlines,
    /// The mutant `member_stale_take`'s previous look for unowned sessions.
    pub(crate) stale: Vec<SessionId>,
    /// Where the ledger was read up to.
    pub(crate) after_seq: u64,
    pub(crate) after_command: u64,
    pub(crate) after_cursor: Cursor,
}

impl Membership {
    pub(crate) async fn run(mut self) {
        let mut owned: BTreeMap<SessionId, Lease> = BTreeMap::new();
        let mut ended = self.ended.clone();
        loop {
            let next = self.next_round(&owned);
            let wake = self.wake.clone();
            tokio::select! {
                biased;
                () = until_ended(&mut ended) => break,
                Some((session, epoch)) = self.fenced.recv() => {
                    if owned.get(&session).is_some_and(|l| l.epoch == epoch) {
                        owned.remove(&session);
                        self.deadlines.forget(&session);
                        warn!(session = %session, epoch = epoch.0, "a commit found another epoch: session dropped");
                        self.tell(MemberMsg::Drop { session, epoch }).await;
                    }
                    continue;
                }
                () = wake.notified() => {}
                () = tokio::time::sleep_until(next) => {}
            }
            if !self.round(&mut owned).await {
                break;
            }
        }
        // Give back every lease still held: another host need not wait for their expiry.
        for (session, lease) in owned {
            self.deadlines.forget(&session);
            let _ = self.call(move |c| c.release(&session, lease.epoch)).await;
        }
    }

    /// When the next round is due: the next renewal or deadline, or the poll interval.
    fn next_round(&self, owned: &BTreeMap<SessionId, Lease>) -> Instant {
        let now = Instant::now();
        owned
            .values()
            .map(|l| l.sent + self.config.lease / 3)
            .fold(now + self.config.poll, Instant::min)
            .max(now)
    }

    /// Runs a coordinator call on a blocking thread.
    async fn call<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Coordinator) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let c = self.coordinator.clone();
        crate::rt::blocking(move || f(&c.lock().unwrap_or_else(std::sync::PoisonError::into_inner)))
            .await?
    }

    /// Sends to the engine task; false once it is gone.
    async fn tell(&self, m: MemberMsg) -> bool {
        match self.inbox.upgrade() {
            Some(inbox) => inbox.send(Msg::Member(m)).await.is_ok(),
            None => false,
        }
    }

    /// One round: deadlines, renewals, the ledger's news, takes, releases. False once the
    /// engine task is gone.
    async fn round(&mut self, owned: &mut BTreeMap<SessionId, Lease>) -> bool {
        let acting = self.config.acting();
        let lease_ms = u64::try_from(self.config.lease.as_millis()).unwrap_or(u64::MAX);
        // Past its deadline a session is dropped before anything else is done for it.
        let now = Instant::now();
        // The bug `member_acts_past_deadline`: nothing is dropped for being late.
        let keeps_deadline = !self.armed.is(crate::mutants::HostMutant::MemberActsPastDeadline);
        let late: Vec<SessionId> = owned
            .iter()
            .filter(|(_, l)| keeps_deadline && l.sent + acting <= now)
            .map(|(s, _)| s.clone())
            .collect();
        for session in late {
            if let Some(l) = owned.remove(&session) {
                self.deadlines.forget(&session);
                warn!(session = %session, epoch = l.epoch.0, "lease not renewed in time: session dropped");
                if !self.tell(MemberMsg::Drop { session, epoch: l.epoch }).await {
                    return false;
                }
            }
        }
        // Renewals at a third of the lease.
        let due: Vec<(SessionId, Epoch)> = owned
            .iter()
            .filter(|(_, l)| l.sent + self.config.lease / 3 <= now)
            .map(|(s, l)| (s.clone(), l.epoch))
            .collect();
        for (session, epoch) in due {
            let sent = Instant::now();
            let s = session.clone();
            match self.call(move |c| c.renew(&s, epoch, lease_ms)).await {
                Ok(true) => {
                    if let Some(l) = owned.get_mut(&session) {
                        l.sent = sent;
                        self.deadlines.set(&session, epoch, sent + acting);
                    }
                }
                Ok(false) => {
                    owned.remove(&session);
                    self.deadlines.forget(&session);
                    warn!(session = %session, epoch = epoch.0, "lease lost: session dropped");
                    if !self.tell(MemberMsg::Drop { session, epoch }).await {
                        return false;
                    }
                }
                // Tried again next round; the deadline drops the session if it stays so.
                Err(e) => warn!(session = %session, error = %e, "lease renewal failed"),
            }
        }
        if !self.poll(owned).await {
            return false;
        }
        self.take(owned).await && self.release_idle(owned).await
    }

    /// Reads what changed: other hosts' outcomes go to this host's waiters and streams, and
    /// the owned sessions' cores are fed their new work.
    async fn poll(&mut self, owned: &mut BTreeMap<SessionId, Lease>) -> bool {
        let (seq, command, cursor) = (self.after_seq, self.after_command, self.after_cursor);
        let polled = match self.call(move |c| c.poll(seq, command, cursor)).await {
            Ok(p) => p,
            Err(e) => {
                warn!(error = %e, "reading the ledger failed");
                return true;
            }
        };
        if let Some((last, _)) = polled.completions.last() {
            self.after_cursor = *last;
            self.hub.committed(&polled.completions);
        }
        self.hub.revised(polled.revision);
        self.after_seq = self.after_seq.max(polled.newest_seq);
        self.after_command = self.after_command.max(polled.newest_command);
        let mut news: BTreeMap<SessionId, (Vec<NewRun>, Vec<CommandRow>)> = BTreeMap::new();
        for run in polled.waiting {
            if owned.get(&run.session).is_some_and(|l| run.seq.0 > l.fed_seq) {
                news.entry(run.session.clone()).or_default().0.push(run);
            }
        }
        for command in polled.commands {
            if owned.get(&command.session).is_some_and(|l| command.id > l.fed_command) {
                news.entry(command.session.clone()).or_default().1.push(command);
            }
        }
        for (session, (runs, commands)) in news {
            let Some(l) = owned.get_mut(&session) else { continue };
            l.fed_seq = runs.iter().map(|r| r.seq.0).fold(l.fed_seq, u64::max);
            l.fed_command = commands.iter().map(|c| c.id).fold(l.fed_command, u64::max);
            l.active = Instant::now();
            let (epoch, work) = (l.epoch, in_ledger_order(runs, commands, self.armed));
            if !self.tell(MemberMsg::Feed { session, epoch, work }).await {
                return false;
            }
        }
        true
    }

    /// Takes sessions with work and no live owner while there is room.
    async fn take(&mut self, owned: &mut BTreeMap<SessionId, Lease>) -> bool {
        let room = self.config.max_owned.saturating_sub(owned.len());
        if room == 0 {
            return true;
        }
        let prefer = u64::try_from(self.config.prefer_acceptor.as_millis()).unwrap_or(u64::MAX);
        let mut unowned = match self.call(move |c| c.unowned(room, prefer)).await {
            Ok(u) => u,
            Err(e) => {
                warn!(error = %e, "looking for sessions to take failed");
                return true;
            }
        };
        if self.armed.is(crate::mutants::HostMutant::MemberStaleTake) {
            // The bug: the sessions to take come from the previous round's look.
            unowned = std::mem::replace(&mut self.stale, unowned);
        }
        let lease_ms = u64::try_from(self.config.lease.as_millis()).unwrap_or(u64::MAX);
        for session in unowned {
            if owned.contains_key(&session) {
                continue;
            }
            let sent = Instant::now();
            let s = session.clone();
            let taken = match self.call(move |c| c.take(&s, lease_ms)).await {
                Ok(Some(t)) => t,
                // Another host was first.
                Ok(None) => continue,
                Err(e) => {
                    warn!(session = %session, error = %e, "taking a session failed");
                    continue;
                }
            };
            let Taken { epoch, next_message, recovered, waiting, commands, .. } = taken;
            debug!(session = %session, epoch = epoch.0, recovered = recovered.len(), "lease taken");
            for (_, r) in &recovered {
                info!(
                    session = %r.session,
                    seq = r.seq.0,
                    run_id = r.run_id.as_ref().map(|x| x.as_str()),
                    "takeover: an unfinished submission ended interrupted"
                );
            }
            self.hub.committed(&recovered);
            let lease = Lease {
                epoch,
                sent,
                fed_seq: waiting.iter().map(|r| r.seq.0).max().unwrap_or(0),
                fed_command: commands.iter().map(|c| c.id).max().unwrap_or(0),
                active: Instant::now(),
            };
            self.deadlines.set(&session, epoch, sent + self.config.acting());
            owned.insert(session.clone(), lease);
            let work = in_ledger_order(waiting, commands, self.armed);
            if !self.tell(MemberMsg::Adopt { session, epoch, next_message, work }).await {
                return false;
            }
        }
        true
    }

    /// Gives back sessions that had nothing to do for a while.
    async fn release_idle(&mut self, owned: &mut BTreeMap<SessionId, Lease>) -> bool {
        let now = Instant::now();
        let quiet: Vec<(SessionId, Epoch)> = owned
            .iter()
            .filter(|(_, l)| l.active + self.config.idle_release <= now)
            .map(|(s, l)| (s.clone(), l.epoch))
            .collect();
        for (session, epoch) in quiet {
            let (tx, rx) = oneshot::channel();
            let asked = MemberMsg::ReleaseIfIdle { session: session.clone(), epoch, reply: tx };
            if !self.tell(asked).await {
                return false;
            }
            if rx.await.unwrap_or(false) {
                owned.remove(&session);
                self.deadlines.forget(&session);
                let s = session.clone();
                if let Err(e) = self.call(move |c| c.release(&s, epoch)).await {
                    // It expires by itself.
                    warn!(session = %session, error = %e, "releasing a lease failed");
                }
            } else if let Some(l) = owned.get_mut(&session) {
                l.active = now;
            }
        }
        true
    }
}

/// Returns once the host ended (a shutdown or a stop).
async fn until_ended(ended: &mut watch::Receiver<bool>) {
    // The guard `wait_for` returns is dropped here, before anything else is awaited.
    let _ = ended.wait_for(|e| *e).await.is_ok();
}

/// Wakes `wake` at every notification on the store's channel, from a thread of its own with
/// a connection of its own (connecting again after a failure), until `stop` is set.
#[cfg(not(madsim))]
pub(crate) fn listen(
    url: String,
    wake: Arc<Notify>,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    use fallible_iterator::FallibleIterator as _;
    use std::sync::atomic::Ordering;
    std::thread::Builder::new().name("turnstile-listen".into()).spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            let client = postgres::Client::connect(&url, postgres::NoTls).and_then(|mut c| {
                c.batch_execute(&format!("LISTEN {}", crate::store::cluster::CHANNEL))?;
                Ok(c)
            });
            let mut client = match client {
                Ok(c) => c,
                Err(e) => {
                    debug!(error = %e, "the listener could not connect: the poll goes on");
                    std::thread::sleep(Duration::from_secs(1));
                    continue;
                }
            };
            // Anything may have been missed while not listening.
            wake.notify_one();
            loop {
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                let heard = client.notifications().timeout_iter(Duration::from_millis(250)).next();
                match heard {
                    Ok(Some(_)) => {
                        // One wake is enough for any number of notifications: take the rest
                        // that arrived without waiting.
                        while let Ok(Some(_)) = client.notifications().iter().next() {}
                        wake.notify_one();
                    }
                    Ok(None) => {}
                    Err(e) => {
                        debug!(error = %e, "the listener lost its connection");
                        break;
                    }
                }
            }
        }
    })
}
