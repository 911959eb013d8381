//! Several hosts over one store (SPEC 11), at the store's level: members that accept
//! anywhere, commands with their watermark, a take that recovers one session alone, fenced
//! commits, and placement's choice of unowned sessions. Each test runs on both stores: SQLite
//! members in one process, and PostgreSQL (ignored without a server, as the conformance
//! suite is).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use turnstile_core::{MessageId, Mode, Outcome, RunId, Seq, Submit};

use super::{
    Kind, Scratch, activated, assistant, both_stores, cancelled, config, outcome, sid, tool_call,
    user,
};
use crate::record::Cursor;
use crate::store::cluster::{Accepted, CommandKind, Coordinator};
use crate::store::lease::Epoch;
use crate::store::{Reader, RunState, Store, StoreError, Txn, Write};

both_stores!(
    members_accept_anywhere_in_one_sequence_and_answer_resubmissions,
    commands_carry_the_sessions_watermark,
    a_take_recovers_only_the_started_submission_and_leaves_the_waiting_ones_queued,
    a_stale_owners_commit_is_left_out_and_everything_else_is_written,
    unowned_sessions_prefer_their_acceptor_and_an_expired_lease_is_anyones,
);

/// A member host of the scratch store.
struct Member {
    store: Store,
    coordinator: Coordinator,
}

fn member(dir: &Scratch, host: &str) -> Member {
    let idle = std::time::Duration::from_secs(5);
    let (store, coordinator) = Store::open_member(&config(dir), host, idle).expect("open a member");
    Member { store, coordinator }
}

fn reader(dir: &Scratch) -> Reader {
    Reader::open_at(&config(dir).location).unwrap()
}

fn prompt(session: &str, text: &str) -> Submit {
    Submit::new(session, text)
}

fn fenced(session: &str, epoch: Epoch, writes: Vec<Write>) -> Txn {
    Txn { session: sid(session), writes, fence: Some(epoch) }
}

fn members_accept_anywhere_in_one_sequence_and_answer_resubmissions(kind: Kind) {
    let dir = Scratch::new(kind);
    let (a, b) = (member(&dir, "a"), member(&dir, "b"));
    let (fold, own) = (Mode::Fold, Mode::OwnTurn);
    assert_eq!(a.coordinator.accept(&prompt("s1", "one"), fold).unwrap(), Accepted::New(Seq(1)));
    assert_eq!(b.coordinator.accept(&prompt("s2", "two"), fold).unwrap(), Accepted::New(Seq(2)));
    let with_run = prompt("s1", "three").with_run_id("r1");
    assert_eq!(b.coordinator.accept(&with_run, own).unwrap(), Accepted::New(Seq(3)));
    // The same RunId and content on the other host: the existing run, unfinished.
    assert_eq!(
        a.coordinator.accept(&with_run, own).unwrap(),
        Accepted::Existing { session: sid("s1"), seq: Seq(3), outcome: None }
    );
    let other = prompt("s1", "something else").with_run_id("r1");
    assert_eq!(a.coordinator.accept(&other, own).unwrap(), Accepted::Conflict);
    // Every row is waiting, in one sequence, with the host that accepted it.
    let polled = b.coordinator.poll(0, 0, Cursor(0)).unwrap();
    let seen: Vec<(u64, &str, &str)> =
        polled.waiting.iter().map(|w| (w.seq.0, w.session.as_str(), w.prompt.as_str())).collect();
    assert_eq!(seen, [(1, "s1", "one"), (2, "s2", "two"), (3, "s1", "three")]);
    assert_eq!(polled.waiting[2].run_id, Some(RunId::new("r1")));
    assert_eq!(polled.waiting[2].submit().seq, Some(Seq(3)));
    assert_eq!(polled.newest_seq, 3);
    let accepted_by: Vec<Option<String>> = run_column(&dir, "accepted_by");
    assert_eq!(accepted_by, [Some("a".into()), Some("b".into()), Some("b".into())]);
    // A poll from the newest position finds nothing new.
    let later = a.coordinator.poll(3, polled.newest_command, Cursor(0)).unwrap();
    assert!(later.waiting.is_empty() && later.commands.is_empty());
}

fn commands_carry_the_sessions_watermark(kind: Kind) {
    let dir = Scratch::new(kind);
    let (a, b) = (member(&dir, "a"), member(&dir, "b"));
    a.coordinator.accept(&prompt("s", "one"), Mode::Fold).unwrap();
    a.coordinator.accept(&prompt("s", "two").with_run_id("r2"), Mode::OwnTurn).unwrap();
    assert!(b.coordinator.command(Some(&sid("s")), &CommandKind::Cancel).unwrap());
    a.coordinator.accept(&prompt("s", "three"), Mode::Fold).unwrap();
    // A cancel_run names its run's session; an unknown run writes nothing.
    assert!(b.coordinator.command(None, &CommandKind::CancelRun(RunId::new("r2"))).unwrap());
    assert!(!b.coordinator.command(None, &CommandKind::CancelRun(RunId::new("nope"))).unwrap());
    // A session without submissions: a watermark of none.
    assert!(a.coordinator.command(Some(&sid("idle")), &CommandKind::ClearQueue).unwrap());
    let polled = a.coordinator.poll(0, 0, Cursor(0)).unwrap();
    let seen: Vec<(u64, &str, CommandKind, Option<u64>)> = polled
        .commands
        .iter()
        .map(|c| (c.id, c.session.as_str(), c.kind.clone(), c.up_to.map(|s| s.0)))
        .collect();
    assert_eq!(
        seen,
        [
            (1, "s", CommandKind::Cancel, Some(2)),
            (2, "s", CommandKind::CancelRun(RunId::new("r2")), Some(3)),
            (3, "idle", CommandKind::ClearQueue, None),
        ]
    );
    assert_eq!(polled.newest_command, 3);
    // An owner that applied a command marks it in its own (fenced) transaction: it is no
    // longer pending, for a poll or for the next take.
    let mut a = a;
    let taken = a.coordinator.take(&sid("s"), 60_000).unwrap().expect("free");
    assert_eq!(taken.commands.len(), 2);
    let txn = fenced("s", taken.epoch, vec![Write::CommandApplied(1)]);
    assert_eq!(a.store.commit_fenced(&[txn]).unwrap().fenced, Vec::<usize>::new());
    let ids: Vec<u64> =
        b.coordinator.poll(0, 0, Cursor(0)).unwrap().commands.iter().map(|c| c.id).collect();
    assert_eq!(ids, [2, 3]);
}

fn a_take_recovers_only_the_started_submission_and_leaves_the_waiting_ones_queued(kind: Kind) {
    let dir = Scratch::new(kind);
    let (mut a, b) = (member(&dir, "a"), member(&dir, "b"));
    a.coordinator.accept(&prompt("s", "first").with_run_id("r1"), Mode::OwnTurn).unwrap();
    a.coordinator.accept(&prompt("s", "second").with_run_id("r2"), Mode::OwnTurn).unwrap();
    a.coordinator.accept(&prompt("t", "elsewhere"), Mode::Fold).unwrap();
    // `a` takes `s` with a lease that is over at once, and starts its first submission: a
    // user message, an assistant message with a tool call and no result.
    let first = a.coordinator.take(&sid("s"), 0).unwrap().expect("free");
    assert_eq!(first.epoch, Epoch(1));
    assert!(first.recovered.is_empty());
    let waiting: Vec<u64> = first.waiting.iter().map(|w| w.seq.0).collect();
    assert_eq!(waiting, [1, 2]);
    let m = first.next_message.0;
    assert!(m >= 1 << 32, "a take's ids are a block of their own: {m}");
    let started = vec![
        Write::Op(activated("s", 1)),
        Write::Op(user("s", 1, m, "first")),
        Write::Op(assistant("s", 1, m + 1)),
        Write::Op(tool_call("s", 1, m + 1, "c1")),
    ];
    a.store.commit_fenced(&[fenced("s", first.epoch, started)]).unwrap();
    // `b` takes it over: the started submission ends interrupted with its last message, its
    // call gets the repair result, and the waiting one is handed over, still waiting.
    let second = b.coordinator.take(&sid("s"), 60_000).unwrap().expect("expired");
    assert_eq!(second.epoch, Epoch(2));
    assert!(second.next_message.0 >= m + (1 << 32), "blocks never overlap");
    let recovered: Vec<(Cursor, u64, Outcome, Option<MessageId>)> =
        second.recovered.iter().map(|(c, r)| (*c, r.seq.0, r.outcome, r.message_id)).collect();
    assert_eq!(recovered, [(Cursor(1), 1, Outcome::Interrupted, Some(MessageId(m + 1)))]);
    let waiting: Vec<u64> = second.waiting.iter().map(|w| w.seq.0).collect();
    assert_eq!(waiting, [2]);
    let r = reader(&dir);
    let states: Vec<(u64, RunState)> =
        r.runs().unwrap().iter().map(|x| (x.seq.0, x.state)).collect();
    assert_eq!(states, [(1, RunState::Finished), (2, RunState::Waiting), (3, RunState::Waiting)]);
    let messages = r.messages(&sid("s")).unwrap();
    let finish = messages[1].finish.as_ref().expect("finished by recovery");
    assert_eq!(finish["reason"], "error", "{finish}");
    assert_eq!(messages[1].results.len(), 1, "the call got its repair result");
    // A lease held and not expired is not taken; only its holder at its epoch renews it.
    assert!(a.coordinator.take(&sid("s"), 60_000).unwrap().is_none());
    assert!(!a.coordinator.renew(&sid("s"), first.epoch, 60_000).unwrap());
    assert!(b.coordinator.renew(&sid("s"), second.epoch, 60_000).unwrap());
    // The other session was not touched.
    assert!(b.coordinator.has_work(&sid("t")).unwrap());
}

fn a_stale_owners_commit_is_left_out_and_everything_else_is_written(kind: Kind) {
    let dir = Scratch::new(kind);
    let (mut a, mut b) = (member(&dir, "a"), member(&dir, "b"));
    a.coordinator.accept(&prompt("s", "one").with_run_id("r1"), Mode::OwnTurn).unwrap();
    a.coordinator.accept(&prompt("t", "two").with_run_id("r2"), Mode::OwnTurn).unwrap();
    let stale = a.coordinator.take(&sid("s"), 0).unwrap().expect("free");
    let t = a.coordinator.take(&sid("t"), 60_000).unwrap().expect("free");
    let now = b.coordinator.take(&sid("s"), 60_000).unwrap().expect("expired");
    // One commit of `a`: its stale transaction for `s` is left out, its `t` one is written,
    // and its cursor continues the ledger's as the other host left it.
    let batch = [
        fenced("s", stale.epoch, vec![Write::Op(outcome(cancelled("s", 1, Some("r1"))))]),
        fenced("t", t.epoch, vec![Write::Op(outcome(cancelled("t", 2, Some("r2"))))]),
    ];
    let committed = a.store.commit_fenced(&batch).unwrap();
    assert_eq!(committed.fenced, [0]);
    assert_eq!(committed.cursors, [Cursor(1)]);
    let r = reader(&dir);
    let states: Vec<(u64, RunState)> =
        r.runs().unwrap().iter().map(|x| (x.seq.0, x.state)).collect();
    assert_eq!(states, [(1, RunState::Waiting), (2, RunState::Finished)]);
    // The owner at the current epoch writes, and its cursor follows `a`'s.
    let mine = fenced("s", now.epoch, vec![Write::Op(outcome(cancelled("s", 1, Some("r1"))))]);
    let committed = b.store.commit_fenced(&[mine]).unwrap();
    assert_eq!((committed.fenced.len(), committed.cursors), (0, vec![Cursor(2)]));
    // Both outcomes are in every host's poll, in cursor order.
    let polled = a.coordinator.poll(0, 0, Cursor(0)).unwrap();
    let seen: Vec<(Cursor, u64)> = polled.completions.iter().map(|(c, r)| (*c, r.seq.0)).collect();
    assert_eq!(seen, [(Cursor(1), 2), (Cursor(2), 1)]);
    assert!(polled.revision > 0);
}

fn unowned_sessions_prefer_their_acceptor_and_an_expired_lease_is_anyones(kind: Kind) {
    let dir = Scratch::new(kind);
    let (a, b) = (member(&dir, "a"), member(&dir, "b"));
    a.coordinator.accept(&prompt("s", "one"), Mode::Fold).unwrap();
    let long = 3_600_000;
    assert_eq!(a.coordinator.unowned(10, long).unwrap(), [sid("s")]);
    assert!(b.coordinator.unowned(10, long).unwrap().is_empty(), "left to its acceptor");
    assert_eq!(b.coordinator.unowned(10, 0).unwrap(), [sid("s")], "after the preference");
    // Held: nobody's candidate. Expired: anyone's at once.
    let held = a.coordinator.take(&sid("s"), long).unwrap().expect("free");
    assert!(a.coordinator.unowned(10, 0).unwrap().is_empty());
    assert!(a.coordinator.release(&sid("s"), held.epoch).unwrap());
    a.coordinator.take(&sid("s"), 0).unwrap().expect("released");
    assert_eq!(b.coordinator.unowned(10, long).unwrap(), [sid("s")]);
    // A command waiting for an owner is work too, and the limit is kept.
    b.coordinator.command(Some(&sid("quiet")), &CommandKind::Summarize).unwrap();
    assert_eq!(b.coordinator.unowned(10, long).unwrap(), [sid("quiet"), sid("s")]);
    assert_eq!(b.coordinator.unowned(1, long).unwrap(), [sid("quiet")]);
}

/// A member and a single-process host never share a PostgreSQL store: the members share
/// its lock, a single process holds it alone.
#[test]
#[ignore = "needs PostgreSQL: eval \"$(scripts/postgres.sh env)\", then --ignored"]
fn postgres_members_and_a_single_process_host_exclude_each_other() {
    let dir = Scratch::new(Kind::Postgres);
    let (a, b) = (member(&dir, "a"), member(&dir, "b"));
    assert!(matches!(Store::open(&config(&dir)), Err(StoreError::InUse)));
    drop((a, b));
    let single = Store::open(&config(&dir)).expect("no member left");
    let idle = std::time::Duration::from_secs(5);
    assert!(matches!(Store::open_member(&config(&dir), "a", idle), Err(StoreError::InUse)));
    drop(single);
}

/// Members that start at once on a new database migrate one at a time: every one opens
/// (the README's three servers once failed here, two of them on tables created twice).
#[test]
#[ignore = "needs PostgreSQL: eval \"$(scripts/postgres.sh env)\", then --ignored"]
fn postgres_members_opening_at_once_on_a_new_database_all_open() {
    for _ in 0..5 {
        let dir = Scratch::new(Kind::Postgres);
        let start = std::sync::Barrier::new(4);
        let opened: Vec<Result<(), String>> = std::thread::scope(|s| {
            let opens: Vec<_> = (0..4)
                .map(|i| {
                    let (dir, start) = (&dir, &start);
                    s.spawn(move || {
                        start.wait();
                        let idle = std::time::Duration::from_secs(5);
                        Store::open_member(&config(dir), &format!("h{i}"), idle)
                            .map(drop)
                            .map_err(|e| e.to_string())
                    })
                })
                .collect();
            opens.into_iter().map(|o| o.join().unwrap()).collect()
        });
        assert!(opened.iter().all(Result::is_ok), "{opened:?}");
    }
}

/// One text column of every ledger row, in sequence order.
fn run_column(dir: &Scratch, column: &str) -> Vec<Option<String>> {
    let r = reader(dir);
    let sql = format!("SELECT {column} FROM runs ORDER BY seq");
    r.db().rows(&sql, &[]).unwrap().iter().map(|row| row.opt_text(0).unwrap()).collect()
}

/// Members racing on separate connections: every writer advances the change order first, so
/// sequences come out dense and in commit order, whoever accepts.
#[test]
#[ignore = "needs PostgreSQL: eval \"$(scripts/postgres.sh env)\", then --ignored"]
fn postgres_racing_accepts_hand_out_dense_sequences_in_commit_order() {
    let dir = Scratch::new(Kind::Postgres);
    let hosts: Vec<Member> = (0..4).map(|i| member(&dir, &format!("h{i}"))).collect();
    let first = member(&dir, "reader");
    std::thread::scope(|s| {
        for (i, m) in hosts.into_iter().enumerate() {
            s.spawn(move || {
                for n in 0..25 {
                    let session = format!("s{}", n % 3);
                    let text = format!("{i}-{n}");
                    let got = m.coordinator.accept(&prompt(&session, &text), Mode::Fold).unwrap();
                    assert!(matches!(got, Accepted::New(_)), "{got:?}");
                }
            });
        }
    });
    let polled = first.coordinator.poll(0, 0, Cursor(0)).unwrap();
    let seqs: Vec<u64> = polled.waiting.iter().map(|w| w.seq.0).collect();
    assert_eq!(seqs, (1..=100).collect::<Vec<u64>>());
    // Each host's own submissions are in its order of acceptance.
    for i in 0..4 {
        let mine: Vec<u32> = polled
            .waiting
            .iter()
            .filter_map(|w| w.prompt.strip_prefix(&format!("{i}-")).map(|n| n.parse().unwrap()))
            .collect();
        assert_eq!(mine, (0..25).collect::<Vec<u32>>());
    }
}

/// A hint per committed transaction that others must hear of: one notification for each
/// accept and command and for a commit with outcomes, none for a conflict or a rollback.
#[test]
#[ignore = "needs PostgreSQL: eval \"$(scripts/postgres.sh env)\", then --ignored"]
fn postgres_every_accept_command_and_outcome_notifies_once() {
    let dir = Scratch::new(Kind::Postgres);
    let url = dir.database.as_ref().unwrap().url().to_owned();
    let (listening_tx, listening_rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
    let listener = std::thread::spawn(move || {
        let mut c = ::postgres::Client::connect(&url, ::postgres::NoTls).unwrap();
        c.batch_execute("LISTEN turnstile").unwrap();
        listening_tx.send(()).unwrap();
        use fallible_iterator::FallibleIterator as _;
        let mut heard = Vec::new();
        loop {
            let mut n = c.notifications();
            let mut it = n.timeout_iter(std::time::Duration::from_millis(200));
            while let Some(note) = it.next().unwrap() {
                heard.push(note.payload().to_owned());
            }
            if stop_rx.try_recv().is_ok() {
                return heard;
            }
        }
    });
    listening_rx.recv().unwrap();
    let mut a = member(&dir, "a");
    a.coordinator.accept(&prompt("s", "one").with_run_id("r1"), Mode::OwnTurn).unwrap();
    let conflict = prompt("s", "other").with_run_id("r1");
    assert_eq!(a.coordinator.accept(&conflict, Mode::OwnTurn).unwrap(), Accepted::Conflict);
    a.coordinator.command(Some(&sid("s")), &CommandKind::Cancel).unwrap();
    let taken = a.coordinator.take(&sid("s"), 60_000).unwrap().expect("free");
    let done = fenced("s", taken.epoch, vec![Write::Op(outcome(cancelled("s", 1, Some("r1"))))]);
    a.store.commit_fenced(&[done]).unwrap();
    // Give the last notification time to arrive, then stop listening.
    std::thread::sleep(std::time::Duration::from_millis(500));
    stop_tx.send(()).unwrap();
    let heard = listener.join().unwrap();
    assert_eq!(heard.len(), 3, "{heard:?}");
    let revisions: Vec<u64> = heard.iter().map(|p| p.parse().unwrap()).collect();
    assert!(revisions.windows(2).all(|w| w[0] < w[1]), "{revisions:?}");
}

/// The simulator's ghost check: a write of an epoch after a later take is reported, and so are
/// a write without an epoch and a take that does not grow its session's epoch; writes at the
/// current epoch are fine.
#[test]
fn the_audit_reports_a_write_by_a_fenced_epoch() {
    let audit = super::Audit::default();
    let (s, t) = (sid("s"), sid("t"));
    audit.took(&s, Epoch(1), 1);
    audit.wrote(&s, Some(Epoch(1)), 2);
    audit.took(&t, Epoch(1), 3);
    audit.took(&s, Epoch(2), 4);
    audit.wrote(&s, Some(Epoch(2)), 5);
    audit.wrote(&t, Some(Epoch(1)), 6);
    assert_eq!(audit.fenced_writes(), Vec::<String>::new());
    audit.wrote(&s, Some(Epoch(1)), 7);
    audit.took(&t, Epoch(1), 8);
    audit.wrote(&t, None, 9);
    assert_eq!(
        audit.fenced_writes(),
        [
            "session s: a write of epoch 1 committed at revision 7, after epoch 2 was taken at 4",
            "session t: epoch 1 taken at revision 8 after epoch 1 at 3",
            "session t: a write without an epoch committed at revision 9",
        ]
    );
    assert_eq!(audit.counts(), (4, 5));
}

/// A real stale owner's commit, logged by the store itself: the audit sees the fenced one
/// left out, and a mutant-free store never logs a write by a fenced epoch.
#[test]
fn the_store_logs_takes_and_fenced_commits() {
    let dir = Scratch::new(Kind::Sqlite);
    let audit = super::Audit::default();
    let mut cfg = config(&dir);
    cfg.audit = Some(audit.clone());
    let idle = std::time::Duration::from_secs(5);
    let (mut a, ca) = Store::open_member(&cfg, "a", idle).unwrap();
    let (_, cb) = Store::open_member(&cfg, "b", idle).unwrap();
    ca.accept(&prompt("s", "one").with_run_id("r1"), Mode::OwnTurn).unwrap();
    let stale = ca.take(&sid("s"), 0).unwrap().unwrap();
    cb.take(&sid("s"), 60_000).unwrap().unwrap();
    let late = fenced("s", stale.epoch, vec![Write::Op(outcome(cancelled("s", 1, Some("r1"))))]);
    assert_eq!(a.commit_fenced(&[late]).unwrap().fenced, [0]);
    assert_eq!(audit.counts(), (2, 0), "two takes, no write");
    assert!(audit.fenced_writes().is_empty());
}
