//! The world's clients: each sends a few commands at random moments, by the weights of the
//! [`Clients`] mix, and waits for its runs; beside them a follower of the completion stream
//! and a slow live subscriber. What they saw is checked against the ledger after the seed.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use turnstile_core::{Mode, Rejection, RunId, Seq, SessionId, Submit};
use turnstile_host::{CompletionRecord, Cursor, Host, SubmitError, WaitError};

use crate::rng::Rng;

/// How many clients there are, what they talk to, and how often they send each command (the
/// weights are relative: each command draws one by its weight). A shutdown while the clients
/// are at work is a fault ([`crate::world::Faults::early_shutdown`]); the world always ends
/// with one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Clients {
    /// Clients working at once.
    pub clients: u64,
    /// Sessions they talk to (`s0`, `s1`, ...; `s0` has a small context window, so its
    /// turns pause for summaries).
    pub sessions: u64,
    /// Commands per client, at least and at most.
    pub commands: (u64, u64),
    /// A submission (60% with a RunId, some with [`Mode::OwnTurn`]), sometimes followed at
    /// once by one or two more (bursts, so queues form).
    pub submit: u64,
    /// A resubmission of one of the client's earlier submissions, byte-equal (idempotent) or
    /// changed (a RunId conflict); before the client's first submission, a summarize.
    pub resubmit: u64,
    /// `cancel` of a session.
    pub cancel: u64,
    /// `cancel_run` of a RunId some client may have used.
    pub cancel_run: u64,
    /// `clear_queue` of a session.
    pub clear: u64,
    /// A command about a sub-agent's child session: a cancel (only the child stops) or a
    /// submission, which must be refused (SPEC 4.1, 4.11).
    pub child: u64,
    /// A manual `summarize`.
    pub summarize: u64,
}

impl Default for Clients {
    /// The built-in mix: 3 clients, 3 sessions, 4 to 12 commands each; of every 100
    /// commands 55 submissions, 8 resubmissions, 13 cancels, 8 `cancel_run`s, 5 clears, 4
    /// child commands and 7 summarizes.
    fn default() -> Clients {
        Clients {
            clients: 3,
            sessions: 3,
            commands: (4, 12),
            submit: 55,
            resubmit: 8,
            cancel: 13,
            cancel_run: 8,
            clear: 5,
            child: 4,
            summarize: 7,
        }
    }
}

/// One command of a client, as drawn from the mix.
enum Command {
    Submit,
    Resubmit,
    Cancel,
    CancelRun,
    Clear,
    Child,
    Summarize,
}

impl Clients {
    /// Draws one command by the weights (a mix with no weight at all summarizes).
    fn draw(&self, rng: &mut Rng) -> Command {
        let weights = [
            (self.submit, Command::Submit),
            (self.resubmit, Command::Resubmit),
            (self.cancel, Command::Cancel),
            (self.cancel_run, Command::CancelRun),
            (self.clear, Command::Clear),
            (self.child, Command::Child),
        ];
        let total = weights.iter().map(|w| w.0).sum::<u64>() + self.summarize;
        let mut x = rng.below(total);
        for (w, command) in weights {
            if x < w {
                return command;
            }
            x -= w;
        }
        Command::Summarize
    }
}

/// What the clients saw.
#[derive(Debug, Default)]
pub(crate) struct Observed {
    /// Accepted runs and their sequences.
    pub(crate) accepted: BTreeMap<RunId, Seq>,
    /// Every answer `wait` gave, per run.
    pub(crate) results: BTreeMap<RunId, Vec<Result<CompletionRecord, WaitError>>>,
    /// Idempotent resubmissions answered with an existing run.
    pub(crate) existing: Vec<(RunId, Seq)>,
    /// Broken promises the clients saw as they happened.
    pub(crate) problems: Vec<String>,
}

pub(crate) type Log = Arc<Mutex<Observed>>;

/// The host clients talk to now: replaced when the simulated process crashes and restarts.
pub(crate) type Current = Arc<Mutex<Host>>;

pub(crate) fn now(current: &Current) -> Host {
    current.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
}

fn note(log: &Log, f: impl FnOnce(&mut Observed)) {
    f(&mut log.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
}

/// Follows the completion stream from the start, reconnecting (from its last cursor) to the
/// next incarnation after a crash, until the world is done and the stream ends.
pub(crate) async fn follow(
    current: Current,
    done: Arc<std::sync::atomic::AtomicBool>,
) -> Vec<(Cursor, CompletionRecord)> {
    let mut seen = Vec::new();
    let mut cursor = Cursor(0);
    loop {
        let mut stream = now(&current).completions(cursor);
        while let Ok(Some((c, record))) = stream.next().await {
            cursor = c;
            seen.push((c, record));
        }
        if done.load(std::sync::atomic::Ordering::Relaxed) {
            // One last read: everything recorded before the end.
            let mut rest = now(&current).completions(cursor);
            while let Ok(Some(entry)) = rest.next().await {
                seen.push(entry);
            }
            return seen;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A live subscriber that reads slowly: it must fall behind without holding anyone up.
/// Returns how many updates it was told it missed.
pub(crate) async fn slow_subscriber(
    current: Current,
    done: Arc<std::sync::atomic::AtomicBool>,
    mut rng: Rng,
) -> u64 {
    let mut lagged = 0;
    loop {
        let mut updates = now(&current).subscribe();
        while let Some(event) = updates.recv().await {
            if let turnstile_host::Event::Lagged { skipped } = event {
                lagged += skipped;
            }
            tokio::time::sleep(Duration::from_millis(rng.between(0, 400))).await;
        }
        if done.load(std::sync::atomic::Ordering::Relaxed) {
            return lagged;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// One client: a few commands at random moments.
pub(crate) async fn client(
    current: Current,
    mut rng: Rng,
    id: u64,
    log: Log,
    mix: Clients,
) -> Vec<tokio::task::JoinHandle<()>> {
    let mut waiters = Vec::new();
    let mut mine: Vec<Submit> = Vec::new();
    for n in 0..rng.between(mix.commands.0, mix.commands.1) {
        tokio::time::sleep(Duration::from_millis(rng.between(0, 1_500))).await;
        let host = now(&current);
        let session = SessionId::new(format!("s{}", rng.below(mix.sessions)));
        match mix.draw(&mut rng) {
            Command::Submit => {
                let mut submit = Submit::new(session.as_str(), format!("c{id} p{n}"));
                if rng.chance(60) {
                    submit = submit.with_run_id(format!("c{id}-r{n}"));
                } else if rng.chance(50) {
                    submit = submit.with_mode(Mode::OwnTurn);
                }
                if let Some(w) = submit_one(&current, submit.clone(), &log).await {
                    waiters.push(w);
                }
                mine.push(submit);
                // Bursts: a follow-up or two right away, so queues form.
                for k in 0..rng.below(3) {
                    let mut more = Submit::new(session.as_str(), format!("c{id} p{n} +{k}"));
                    if rng.chance(50) {
                        more = more.with_run_id(format!("c{id}-r{n}-{k}"));
                    }
                    if let Some(w) = submit_one(&current, more, &log).await {
                        waiters.push(w);
                    }
                }
            }
            Command::Resubmit if !mine.is_empty() => {
                // A byte-equal resubmission (idempotent) or a conflicting reuse of a RunId.
                let mut again = mine[rng.below(mine.len() as u64) as usize].clone();
                if rng.chance(30) {
                    again.prompt.push_str(" (changed)");
                }
                if let Some(w) = submit_one(&current, again, &log).await {
                    waiters.push(w);
                }
            }
            Command::Cancel => drop(host.cancel(&session).await),
            Command::CancelRun => {
                let (client, n) = (rng.below(mix.clients), rng.below(mix.commands.1));
                drop(host.cancel_run(&RunId::new(format!("c{client}-r{n}"))).await);
            }
            Command::Clear => drop(host.clear_queue(&session).await),
            Command::Child => child_command(&host, &mut rng, &log).await,
            Command::Resubmit | Command::Summarize => drop(host.summarize(&session).await),
        }
    }
    waiters
}

/// A command about a sub-agent's child session the store holds: a cancel (only the child
/// stops; its parent continues with the cancel text as the call's result) or a submission,
/// which is refused (SPEC 4.1, 4.11).
async fn child_command(host: &Host, rng: &mut Rng, log: &Log) {
    let sessions = host.read(|r| r.sessions()).await.unwrap_or_default();
    let children: Vec<SessionId> =
        sessions.into_iter().map(|s| s.id).filter(SessionId::is_child).collect();
    if children.is_empty() {
        return;
    }
    let child = children[rng.below(children.len() as u64) as usize].clone();
    if rng.chance(70) {
        drop(host.cancel(&child).await);
        return;
    }
    match host.submit(Submit::new(child.as_str(), "continue it")).await {
        Err(SubmitError::Rejected(Rejection::ChildSession(id))) if id == child => {}
        Err(SubmitError::Stopped(_)) => {}
        other => note(log, |o| {
            o.problems.push(format!("a submission to child session {child} got {other:?}"));
        }),
    }
}

/// Submits, records what was answered, and for a new run starts a waiter.
async fn submit_one(
    current: &Current,
    submit: Submit,
    log: &Log,
) -> Option<tokio::task::JoinHandle<()>> {
    let run_id = submit.run_id.clone();
    match now(current).submit(submit).await {
        Ok(s) if s.existing => {
            note(log, |o| {
                o.existing.push((s.run_id.clone().unwrap_or_else(|| RunId::new("")), s.seq))
            });
            None
        }
        Ok(s) => {
            let run_id = run_id?;
            note(log, |o| {
                o.accepted.insert(run_id.clone(), s.seq);
            });
            let (current, log) = (current.clone(), log.clone());
            Some(tokio::spawn(async move {
                // A crash of the host answers "engine stopped": wait again, on the restarted
                // host (its recovery decided the outcome). Never more than a few times.
                let mut got = now(&current).wait(&run_id).await;
                for _ in 0..20 {
                    if !matches!(got, Err(WaitError::Stopped(_))) {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    got = now(&current).wait(&run_id).await;
                }
                let host = now(&current);
                if let Ok(record) = &got {
                    // I9 as a client sees it: when the RunComplete arrives, the store already
                    // holds the text it reports.
                    if let Some(problem) = stored_text_differs(&host, record).await {
                        note(&log, |o| o.problems.push(format!("run {run_id}: {problem}")));
                    }
                }
                note(&log, |o| o.results.entry(run_id).or_default().push(got));
            }))
        }
        // Refused, invalid, stopped or unreadable: nothing to wait for.
        Err(_) => None,
    }
}

/// The difference between a RunComplete's text and its message as stored, if any.
async fn stored_text_differs(host: &Host, record: &CompletionRecord) -> Option<String> {
    let id = record.message_id?;
    let session = record.session.clone();
    let stored = host.read(move |r| r.messages(&session)).await.ok()?;
    let text = stored.iter().find(|m| m.id == id).map(|m| m.text.clone());
    (text.as_deref() != record.text.as_deref())
        .then(|| format!("its RunComplete says {:?} but the store holds {text:?}", record.text))
}
