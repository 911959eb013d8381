//! Store scenarios (SPEC 4.4, 4.9, 4.11, 4.12, 5): each test opens a store in a scratch
//! directory, writes through `commit` and reads back through a `Reader`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use std::collections::{BTreeMap, VecDeque};

use serde_json::json;
use turnstile_core::{
    Attachment, CallId, Completion, Config, Engine, ErrorKind, Fingerprint, FinishReason, Input,
    MessageFinish, MessageId, Millis, Mode, Outcome, OutputKind, Reply, RunId, Seq, SessionId,
    Setup, Start, StepEvent, StoreOp, Submit, ToolOutput, TurnId, Usage,
};

use super::*;
use crate::record::{CompletionRecord, Cursor};
use turnstile_core::{HISTORY_REPAIR_RESULT, RECOVERY_MESSAGE};

// ---- helpers ---------------------------------------------------------------------------------

/// Which store a conformance test runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Sqlite,
    Postgres,
}

/// Where a test's store lives: a scratch directory (SQLite's file, and files the test writes)
/// and, for PostgreSQL, a scratch database.
pub(super) struct Scratch {
    dir: tempfile::TempDir,
    pub(super) database: Option<ScratchDatabase>,
}

impl Scratch {
    pub(super) fn new(kind: Kind) -> Scratch {
        let database = match kind {
            Kind::Sqlite => None,
            Kind::Postgres => Some(ScratchDatabase::create().unwrap_or_else(|e| panic!("{e}"))),
        };
        Scratch { dir: tempfile::tempdir().unwrap(), database }
    }

    fn kind(&self) -> Kind {
        if self.database.is_some() { Kind::Postgres } else { Kind::Sqlite }
    }

    fn path(&self) -> &std::path::Path {
        self.dir.path()
    }
}

pub(super) fn config(dir: &Scratch) -> StoreConfig {
    match &dir.database {
        Some(db) => StoreConfig::at(Location::Postgres(db.url().to_owned())),
        None => StoreConfig::new(dir.path().join("store.db")),
    }
}

fn open(dir: &Scratch) -> Opened {
    Store::open(&config(dir)).expect("open")
}

/// The conformance suite: each test once per store. The PostgreSQL ones need a server
/// (`TURNSTILE_TEST_POSTGRES`), so a plain `cargo test` leaves them out and CI runs them with
/// `-- --ignored store::tests::postgres`; without the variable they fail saying how to start
/// one.
macro_rules! both_stores {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $( #[test] fn $name() { super::$name(super::Kind::Sqlite) } )*
        }
        mod postgres {
            $(
                #[test]
                #[ignore = "needs PostgreSQL: eval \"$(scripts/postgres.sh env)\", then --ignored"]
                fn $name() { super::$name(super::Kind::Postgres) }
            )*
        }
    };
}
pub(super) use both_stores;

#[test]
fn a_url_is_a_postgres_store_and_anything_else_a_file() {
    let url = "postgres://agent@db.internal:5432/agents";
    assert!(matches!(StoreConfig::new(url).location, Location::Postgres(u) if u == url));
    assert!(matches!(Location::parse("postgresql://h/db"), Location::Postgres(_)));
    assert!(matches!(StoreConfig::new("a/store.db").location, Location::File(_)));
    assert!(matches!(Location::parse("postgres.db"), Location::File(_)));
    assert_eq!(redact("postgres://agent:secret@h:5432/db"), "postgres://agent:***@h:5432/db");
    assert_eq!(Location::Postgres("postgres://a:b@h/d".into()).to_string(), "postgres://a:***@h/d");
}

/// A PostgreSQL store whose schema is newer than this code is refused, as SQLite's is.
#[test]
#[ignore = "needs PostgreSQL: eval \"$(scripts/postgres.sh env)\", then --ignored"]
fn postgres_a_newer_schema_is_refused_with_a_clear_message() {
    let dir = Scratch::new(Kind::Postgres);
    let opened = open(&dir);
    drop(opened);
    let url = dir.database.as_ref().unwrap().url().to_owned();
    std::thread::spawn(move || {
        let mut c = ::postgres::Client::connect(&url, ::postgres::NoTls).unwrap();
        c.batch_execute("UPDATE schema_version SET version = 99").unwrap();
    })
    .join()
    .unwrap();
    let err = Store::open(&config(&dir)).expect_err("newer");
    assert_eq!(
        err.to_string(),
        "store schema version 99 is newer than this turnstile supports (7)"
    );
}

both_stores!(
    open_creates_the_schema_and_reopen_keeps_the_data,
    a_second_open_is_refused_and_runs_no_recovery_over_live_work,
    a_call_with_invalid_arguments_keeps_what_the_model_sent_beside_its_input,
    a_reader_cannot_write,
    every_op_is_applied_and_read_back,
    session_usage_sets_gauges_and_adds_cost_and_a_title_touches_nothing_else,
    a_group_commit_applies_several_sessions_in_one_transaction,
    writes_for_rows_the_store_does_not_hold_are_errors,
    an_injected_fault_before_or_after_applying_leaves_nothing_and_uses_no_cursor,
    recovery_ends_every_unfinished_submission_and_repairs_history,
    deleted_message_ids_are_never_handed_out_again,
    fingerprints_cover_attachments,
    protocol_problems_name_the_message_and_call,
    an_engine_turn_applied_commit_by_commit_is_protocol_legal,
    changes_name_exactly_what_each_commit_touched_and_resume_across_a_restart,
    changes_from_far_back_come_in_pages_of_whole_revisions,
    pages_of_messages_follow_write_order_and_refuse_a_foreign_cursor,
    the_end_of_a_summary_changes_its_session_so_streams_see_it_stop_summarizing,
);

pub(super) fn sid(s: &str) -> SessionId {
    SessionId::new(s)
}

fn new_run(session: &str, seq: u64, run_id: Option<&str>, prompt: &str) -> Write {
    Write::Accept(NewRun {
        session: sid(session),
        seq: Seq(seq),
        run_id: run_id.map(RunId::new),
        mode: if run_id.is_some() { Mode::OwnTurn } else { Mode::Fold },
        prompt: prompt.to_owned(),
        attachments: Vec::new(),
    })
}

pub(super) fn txn(session: &str, writes: Vec<Write>) -> Txn {
    Txn { session: sid(session), writes, fence: None }
}

pub(super) fn ops(session: &str, ops: Vec<StoreOp>) -> Txn {
    txn(session, ops.into_iter().map(Write::Op).collect())
}

pub(super) fn activated(session: &str, seq: u64) -> StoreOp {
    StoreOp::LedgerActivated { session: sid(session), seq: Seq(seq), turn: TurnId(1) }
}

pub(super) fn user(session: &str, seq: u64, id: u64, text: &str) -> StoreOp {
    StoreOp::UserMessage {
        session: sid(session),
        seq: Seq(seq),
        id: MessageId(id),
        text: text.to_owned(),
        attachments: Box::new([]),
        synthetic: false,
    }
}

pub(super) fn assistant(session: &str, seq: u64, id: u64) -> StoreOp {
    StoreOp::AssistantMessage {
        session: sid(session),
        seq: Seq(seq),
        id: MessageId(id),
        turn: TurnId(1),
        step: 0,
    }
}

fn text(session: &str, seq: u64, id: u64, t: &str) -> StoreOp {
    StoreOp::AppendText { session: sid(session), seq: Seq(seq), id: MessageId(id), text: t.into() }
}

pub(super) fn tool_call(session: &str, seq: u64, id: u64, call: &str) -> StoreOp {
    StoreOp::ToolCall {
        session: sid(session),
        seq: Seq(seq),
        id: MessageId(id),
        call: CallId::new(call),
        name: "view".into(),
        input: r#"{"path":"a"}"#.into(),
    }
}

fn tool_started(session: &str, seq: u64, id: u64, call: &str) -> StoreOp {
    StoreOp::ToolInputStarted {
        session: sid(session),
        seq: Seq(seq),
        id: MessageId(id),
        call: CallId::new(call),
        name: "view".into(),
    }
}

fn tool_result(session: &str, seq: u64, id: u64, call: &str, content: &str) -> StoreOp {
    StoreOp::ToolResult {
        session: sid(session),
        seq: Seq(seq),
        id: MessageId(id),
        call: CallId::new(call),
        content: content.into(),
        is_error: false,
        synthetic: false,
    }
}

fn finished(session: &str, seq: u64, id: u64, finish: MessageFinish) -> StoreOp {
    StoreOp::MessageFinished { session: sid(session), seq: Seq(seq), id: MessageId(id), finish }
}

/// A real completion (only the core builds them): the submission `seq` of `session`,
/// cancelled before it ran.
pub(super) fn cancelled(session: &str, seq: u64, run_id: Option<&str>) -> Completion {
    let start = Start { next_seq: Some(Seq(seq)), ..Start::default() };
    let mut engine = Engine::new(Config::default(), start).unwrap();
    let mut submit = Submit::new(session, "x");
    if let Some(r) = run_id {
        submit = submit.with_run_id(r);
    }
    engine.handle(Millis(0), Input::Submit(submit)).unwrap();
    while engine.poll_output().is_some() {}
    engine.handle(Millis(1), Input::Cancel { session: sid(session), up_to: None }).unwrap();
    let c = std::iter::from_fn(|| engine.poll_output())
        .find_map(|o| match o.kind {
            OutputKind::Finished(c) => Some(c),
            _ => None,
        })
        .unwrap();
    assert_eq!(c.seq(), Seq(seq));
    c
}

pub(super) fn outcome(c: Completion) -> StoreOp {
    StoreOp::LedgerOutcome { completion: c }
}

/// Everything a reader sees, for before/after comparisons.
fn dump(r: &Reader) -> (Vec<SessionRow>, Vec<RunRow>, Vec<Vec<StoredMessage>>) {
    let sessions = r.sessions().unwrap();
    let messages = sessions.iter().map(|s| r.messages(&s.id).unwrap()).collect();
    (sessions, r.runs().unwrap(), messages)
}

/// Counts statement compilations on `conn` from now on (SQLite calls the authorizer while
/// compiling, also when it re-compiles a cached statement whose plan depended on a bound value).
/// Counts statement compilations on a connection from now on: SQLite calls the authorizer
/// while it compiles a statement; a PostgreSQL connection counts the statements it prepares.
enum Compiles {
    Sqlite(std::sync::Arc<std::sync::atomic::AtomicU64>),
    Postgres(u64),
}

fn count_compiles(conn: &mut super::conn::Conn) -> Compiles {
    match conn {
        super::conn::Conn::Sqlite(conn) => {
            use rusqlite::hooks::{AuthContext, Authorization};
            let n = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
            let counter = n.clone();
            conn.authorizer(Some(move |_: AuthContext<'_>| {
                counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                Authorization::Allow
            }))
            .unwrap();
            Compiles::Sqlite(n)
        }
        super::conn::Conn::Postgres(conn) => Compiles::Postgres(conn.prepares()),
    }
}

impl Compiles {
    /// Compilations since the count started (or was reset).
    fn since(&self, conn: &super::conn::Conn) -> u64 {
        match (self, conn) {
            (Compiles::Sqlite(n), _) => n.load(std::sync::atomic::Ordering::Relaxed),
            (Compiles::Postgres(start), super::conn::Conn::Postgres(c)) => c.prepares() - start,
            _ => panic!("counted on another store's connection"),
        }
    }

    /// Counts from now on.
    fn reset(&mut self, conn: &super::conn::Conn) {
        match (self, conn) {
            (Compiles::Sqlite(n), _) => n.store(0, std::sync::atomic::Ordering::Relaxed),
            (Compiles::Postgres(start), super::conn::Conn::Postgres(c)) => *start = c.prepares(),
            _ => panic!("counted on another store's connection"),
        }
    }
}

fn sqlite_code(e: &StoreError) -> Option<rusqlite::ErrorCode> {
    match e {
        StoreError::Sqlite(rusqlite::Error::SqliteFailure(f, _)) => Some(f.code),
        _ => None,
    }
}

// ---- open, lock, schema ----------------------------------------------------------------------

fn open_creates_the_schema_and_reopen_keeps_the_data(kind: Kind) {
    let dir = Scratch::new(kind);
    let opened = open(&dir);
    assert_eq!(opened.start, Start::default(), "an empty store starts from nothing");
    assert!(opened.recovered.is_empty());
    let mut store = opened.store;
    let t = txn("s", vec![new_run("s", 1, Some("r1"), "hi"), Write::Op(activated("s", 1))]);
    store.commit(&[t, ops("s", vec![user("s", 1, 1, "hi")])]).unwrap();
    store.close().unwrap();
    if dir.kind() == Kind::Sqlite {
        assert!(!dir.path().join("store.db-wal").exists(), "close checkpoints and removes the WAL");
    }

    let opened = open(&dir);
    let reader = opened.store.reader().unwrap();
    let version = match dir.kind() {
        Kind::Sqlite => rusqlite::Connection::open(dir.path().join("store.db"))
            .unwrap()
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .unwrap(),
        Kind::Postgres => reader
            .db()
            .row("SELECT version FROM schema_version", &[])
            .unwrap()
            .unwrap()
            .int(0)
            .unwrap(),
    };
    assert_eq!(version, 7);
    assert_eq!(reader.messages(&sid("s")).unwrap()[0].text, "hi");
    let activity = reader.activity(false).unwrap();
    let messages = reader.messages(&sid("s")).unwrap().len() as u64;
    assert_eq!((activity.len(), activity[0].messages, activity[0].submissions), (1, messages, 1));
    assert!(activity[0].last_activity_ms.is_some_and(|t| t > 1_700_000_000_000), "{activity:?}");
    assert_eq!(reader.latest_session().unwrap(), Some(sid("s")));
    let run = reader.run(&RunId::new("r1")).unwrap().unwrap();
    assert_eq!((run.seq, run.mode, run.prompt.as_str()), (Seq(1), Mode::OwnTurn, "hi"));
    // It was active when the store closed: recovery ended it.
    assert_eq!(run.state, RunState::Finished);
    assert_eq!(opened.recovered.len(), 1);
    assert_eq!(reader.integrity_check(), Ok(()));
}

fn a_second_open_is_refused_and_runs_no_recovery_over_live_work(kind: Kind) {
    let dir = Scratch::new(kind);
    let mut first = open(&dir).store;
    first.commit(&[txn("s", vec![new_run("s", 1, Some("r1"), "hi")])]).unwrap();

    let err = Store::open(&config(&dir)).expect_err("the lock is held");
    assert!(matches!(err, StoreError::InUse));
    assert_eq!(err.to_string(), "store is in use by another turnstile process");
    assert_eq!(err.to_string(), STORE_IN_USE);
    let row = first.reader().unwrap().run(&RunId::new("r1")).unwrap().unwrap();
    assert_eq!(row.state, RunState::Waiting, "the refused open did not recover the live run");
    assert!(row.completion.is_none());

    drop(first);
    let opened = open(&dir);
    assert_eq!(opened.recovered.len(), 1, "the lock is released with the store");
}

#[test]
fn a_memory_disk_keeps_what_was_committed_across_stores_and_has_the_same_owner_lock() {
    let disk = MemoryDisk::new("store-tests-memory-keeps").unwrap();
    let config = StoreConfig::in_memory(&disk);
    let mut first = Store::open(&config).unwrap().store;
    let t = txn("s", vec![new_run("s", 1, Some("r1"), "hi"), Write::Op(activated("s", 1))]);
    first.commit(&[t, ops("s", vec![user("s", 1, 1, "hi")])]).unwrap();

    let err = Store::open(&config).expect_err("the lock is held");
    assert!(matches!(err, StoreError::InUse));
    let live = Reader::open_at(&config.location).unwrap();
    assert_eq!(live.run(&RunId::new("r1")).unwrap().unwrap().state, RunState::Active);

    // A crash: the store goes without closing; the disk keeps the committed rows.
    drop(first);
    let opened = Store::open(&config).unwrap();
    assert_eq!(opened.recovered.len(), 1, "recovery ran over the disk's rows");
    let reader = opened.store.reader().unwrap();
    assert_eq!(reader.messages(&sid("s")).unwrap()[0].text, "hi");
    assert_eq!(reader.run(&RunId::new("r1")).unwrap().unwrap().state, RunState::Finished);
    assert_eq!(reader.integrity_check(), Ok(()));
    assert_eq!(opened.store.location().to_string(), "memory:store-tests-memory-keeps");
    assert!(opened.store.location().file().is_none());
}

#[test]
fn a_memory_disk_name_is_checked_and_not_shared_by_two_live_disks() {
    let bad = MemoryDisk::new("a/b").expect_err("a slash");
    assert_eq!(
        bad.to_string(),
        "memory disk name \"a/b\": use letters, digits, '-', '_' and '.' only"
    );
    let disk = MemoryDisk::new("store-tests-memory-twice").unwrap();
    let err = MemoryDisk::new("store-tests-memory-twice").expect_err("a live, empty disk");
    assert!(err.to_string().ends_with("is already in use in this process"), "{err}");
    Store::open(&StoreConfig::in_memory(&disk)).unwrap();
    let err = MemoryDisk::new("store-tests-memory-twice").expect_err("the name holds a store");
    assert_eq!(
        err.to_string(),
        "memory disk \"store-tests-memory-twice\" is already in use in this process"
    );
    drop(disk);
    let again = MemoryDisk::new("store-tests-memory-twice").expect("the old disk is gone");
    assert_eq!(Store::open(&StoreConfig::in_memory(&again)).unwrap().start, Start::default());
}

#[test]
fn two_threads_creating_one_memory_disk_name_at_once_get_one_disk() {
    // The look for a mark and the mark are one transaction: before, two sweeps in one test
    // process that ran the same seed at the same moment could both get the disk, and so one
    // store, and each saw the other's runs.
    for round in 0..200 {
        let name = format!("store-tests-race-{round}");
        let barrier = std::sync::Barrier::new(2);
        let (a, b) = std::thread::scope(|s| {
            let try_one = || {
                barrier.wait();
                MemoryDisk::new(&name)
            };
            let (a, b) = (s.spawn(try_one), s.spawn(try_one));
            (a.join().unwrap(), b.join().unwrap())
        });
        assert_eq!(usize::from(a.is_ok()) + usize::from(b.is_ok()), 1, "round {round}");
    }
}

#[test]
fn a_newer_schema_is_refused_with_a_clear_message() {
    let dir = Scratch::new(Kind::Sqlite);
    open(&dir).store.close().unwrap();
    rusqlite::Connection::open(dir.path().join("store.db"))
        .unwrap()
        .pragma_update(None, "user_version", 99)
        .unwrap();
    let err = Store::open(&config(&dir)).expect_err("newer schema");
    assert!(matches!(err, StoreError::Corrupt(_)));
    assert_eq!(
        err.to_string(),
        "store schema version 99 is newer than this turnstile supports (7)"
    );
}

#[test]
fn a_version_1_store_is_migrated_to_version_2() {
    let dir = Scratch::new(Kind::Sqlite);
    {
        let conn = rusqlite::Connection::open(dir.path().join("store.db")).unwrap();
        conn.execute_batch(super::schema::MIGRATIONS[0]).unwrap();
        conn.execute_batch(
            "INSERT INTO sessions (id, created) VALUES ('old', 1); \
             INSERT INTO runs (seq, session, mode, prompt, state, outcome, completion, cursor) \
             VALUES (1, 'old', 'own_turn', 'hi', 'finished', 'completed', '{}', 1);",
        )
        .unwrap();
        conn.pragma_update(None, "user_version", 1).unwrap();
    }
    let opened = open(&dir);
    let reader = opened.store.reader().unwrap();
    let activity = reader.activity(false).unwrap();
    assert_eq!(activity.len(), 1);
    assert_eq!(activity[0].last_activity_ms, None, "a run from before version 2 has no times");
}

fn a_call_with_invalid_arguments_keeps_what_the_model_sent_beside_its_input(kind: Kind) {
    let dir = Scratch::new(kind);
    let mut store = open(&dir).store;
    let t = txn("s", vec![new_run("s", 1, None, "hi"), Write::Op(activated("s", 1))]);
    let bad = StoreOp::ToolCall {
        session: sid("s"),
        seq: Seq(1),
        id: MessageId(2),
        call: CallId::new("c1"),
        name: "view".into(),
        input: "{}".into(),
    };
    let raw = Write::RawInput {
        message: MessageId(2),
        call: CallId::new("c1"),
        raw: "{\"path\": \"a".into(),
    };
    let writes = vec![
        Write::Op(user("s", 1, 1, "hi")),
        Write::Op(assistant("s", 1, 2)),
        Write::Op(bad),
        raw,
        Write::Op(tool_call("s", 1, 2, "c2")),
    ];
    store.commit(&[t, txn("s", writes)]).unwrap();
    let reader = store.reader().unwrap();
    let calls = &reader.messages(&sid("s")).unwrap()[1].calls;
    assert_eq!(
        (calls[0].input.as_deref(), calls[0].raw_input.as_deref()),
        (Some("{}"), Some("{\"path\": \"a"))
    );
    assert_eq!(calls[1].raw_input, None);
    let json = serde_json::to_value(&calls[1]).unwrap();
    assert!(json.get("raw_input").is_none(), "absent, not null, when the arguments were JSON");
}

#[test]
fn store_and_reader_move_between_threads() {
    fn send<T: Send>() {}
    send::<Store>();
    send::<Reader>();
    send::<Faults>();
}

fn a_reader_cannot_write(kind: Kind) {
    let dir = Scratch::new(kind);
    let store = open(&dir).store;
    let reader = store.reader().unwrap();
    assert!(reader.db().execute("DELETE FROM runs", &[]).is_err());
}

// ---- applying writes -------------------------------------------------------------------------

fn every_op_is_applied_and_read_back(kind: Kind) {
    let dir = Scratch::new(kind);
    let mut store = open(&dir).store;
    let attachment =
        Attachment { name: "a.txt".into(), media_type: "text/plain".into(), content: "A".into() };
    let accept = Write::Accept(NewRun {
        session: sid("s"),
        seq: Seq(1),
        run_id: Some(RunId::new("r1")),
        mode: Mode::OwnTurn,
        prompt: "look".into(),
        attachments: vec![attachment.clone()],
    });
    let user_op = StoreOp::UserMessage {
        session: sid("s"),
        seq: Seq(1),
        id: MessageId(1),
        text: "look".into(),
        attachments: Box::new([attachment.clone()]),
        synthetic: false,
    };
    let step0 = vec![
        activated("s", 1),
        user_op,
        assistant("s", 1, 2),
        StoreOp::ReasoningStarted { session: sid("s"), seq: Seq(1), id: MessageId(2) },
        StoreOp::AppendReasoning {
            session: sid("s"),
            seq: Seq(1),
            id: MessageId(2),
            text: "hmm ".into(),
        },
        StoreOp::AppendReasoning {
            session: sid("s"),
            seq: Seq(1),
            id: MessageId(2),
            text: "ok".into(),
        },
        StoreOp::ReasoningEnded {
            session: sid("s"),
            seq: Seq(1),
            id: MessageId(2),
            signature: Some("sig".into()),
        },
        text("s", 1, 2, "Let me "),
        text("s", 1, 2, "look."),
        tool_started("s", 1, 2, "c1"),
        tool_call("s", 1, 2, "c1"),
        tool_call("s", 1, 2, "c2"),
        StoreOp::Flush { session: sid("s") },
    ];
    store.commit(&[txn("s", vec![accept]), ops("s", step0)]).unwrap();
    let results = vec![
        tool_result("s", 1, 2, "c2", "two"),
        StoreOp::ToolResult {
            session: sid("s"),
            seq: Seq(1),
            id: MessageId(2),
            call: CallId::new("c1"),
            content: "one failed".into(),
            is_error: true,
            synthetic: true,
        },
        finished("s", 1, 2, MessageFinish::ToolUse),
        // Step 1: a retry resets the streamed content before the second attempt.
        assistant("s", 1, 3),
        StoreOp::ReasoningStarted { session: sid("s"), seq: Seq(1), id: MessageId(3) },
        text("s", 1, 3, "broken"),
        tool_started("s", 1, 3, "c9"),
        StoreOp::MessageReset { session: sid("s"), seq: Seq(1), id: MessageId(3) },
        text("s", 1, 3, "Done."),
        finished("s", 1, 3, MessageFinish::Error { title: "T".into(), message: "M".into() }),
        outcome(cancelled("s", 1, Some("r1"))),
    ];
    let cursors = store.commit(&[ops("s", results)]).unwrap();
    assert_eq!(cursors, vec![Cursor(1)]);

    // Summaries: done, failed, deleted; a sub-agent; a pause; a title.
    let more = vec![
        StoreOp::SummaryMessage { session: sid("s"), id: MessageId(4) },
        StoreOp::SummaryText { session: sid("s"), id: MessageId(4), text: "wrong".into() },
        StoreOp::SummaryReset { session: sid("s"), id: MessageId(4) },
        StoreOp::SummaryText { session: sid("s"), id: MessageId(4), text: "the ".into() },
        StoreOp::SummaryText { session: sid("s"), id: MessageId(4), text: "summary".into() },
        StoreOp::SummaryDone { session: sid("s"), id: MessageId(4), completion_tokens: 77 },
        StoreOp::SummaryMessage { session: sid("s"), id: MessageId(5) },
        StoreOp::SummaryFailed {
            session: sid("s"),
            id: MessageId(5),
            title: "Summarization Error".into(),
            message: "boom".into(),
        },
        StoreOp::SummaryMessage { session: sid("s"), id: MessageId(6) },
        StoreOp::SummaryDeleted { session: sid("s"), id: MessageId(6) },
        StoreOp::Title { session: sid("s"), title: "Looking".into() },
    ];
    let child = "m2$$c2";
    let sub = vec![
        StoreOp::ChildAccepted {
            session: sid(child),
            seq: Seq(2),
            parent: sid("s"),
            parent_seq: Seq(1),
            prompt: "dig".into(),
            title: turnstile_core::NEW_AGENT_TITLE,
        },
        activated(child, 2),
        StoreOp::LedgerPaused { session: sid(child), seq: Seq(2) },
    ];
    assert_eq!(store.commit(&[ops("s", more), ops(child, sub)]).unwrap(), vec![]);

    let r = store.reader().unwrap();
    let m = r.messages(&sid("s")).unwrap();
    assert_eq!(m.len(), 5, "the deleted summary is gone: {m:#?}");
    assert_eq!(m[0].role, StoredRole::User);
    assert_eq!((m[0].id, m[0].seq, m[0].text.as_str()), (MessageId(1), Some(Seq(1)), "look"));
    assert_eq!(m[0].attachments, vec![attachment.clone()]);
    assert!(!m[0].synthetic && m[0].finish.is_none());

    let a = &m[1];
    assert_eq!(
        (a.role, a.id, a.text.as_str()),
        (StoredRole::Assistant, MessageId(2), "Let me look.")
    );
    assert_eq!(a.reasoning.as_deref(), Some("hmm ok"));
    assert_eq!(a.reasoning_signature.as_deref(), Some("sig"));
    assert!(a.reasoning_done);
    assert_eq!(a.finish, Some(json!({"reason": "tool_use"})));
    let call = |c: &str| StoredCall {
        call: CallId::new(c),
        name: "view".into(),
        input: Some(r#"{"path":"a"}"#.into()),
        finished: true,
        raw_input: None,
    };
    assert_eq!(a.calls, vec![call("c1"), call("c2")], "the started call was finished in place");
    assert_eq!(
        a.results,
        vec![
            StoredResult {
                call: CallId::new("c2"),
                content: "two".into(),
                is_error: false,
                synthetic: false
            },
            StoredResult {
                call: CallId::new("c1"),
                content: "one failed".into(),
                is_error: true,
                synthetic: true
            },
        ],
        "results in the order written"
    );

    let b = &m[2];
    assert_eq!(b.text, "Done.", "the reset cleared the failed attempt");
    assert_eq!((b.reasoning.as_deref(), b.reasoning_done), (None, false));
    assert!(b.calls.is_empty());
    assert_eq!(b.finish, Some(json!({"reason": "error", "title": "T", "message": "M"})));

    assert_eq!((m[3].role, m[3].text.as_str()), (StoredRole::Summary, "the summary"));
    assert_eq!(m[3].finish, Some(json!({"reason": "done"})));
    assert_eq!(m[3].seq, None);
    assert_eq!(
        m[4].finish,
        Some(json!({"reason": "error", "title": "Summarization Error", "message": "boom"}))
    );

    let s = r.session(&sid("s")).unwrap().unwrap();
    assert_eq!(s.title.as_deref(), Some("Looking"));
    assert_eq!(s.summary_message, Some(MessageId(4)));
    assert_eq!((s.prompt_tokens, s.completion_tokens), (0, 77));
    assert_eq!(s.parent, None);

    let c = r.session(&sid(child)).unwrap().unwrap();
    assert_eq!(c.parent, Some(sid("s")));
    assert_eq!(c.title.as_deref(), Some("New Agent Session"));
    assert_eq!(
        r.sessions().unwrap().iter().map(|s| s.id.clone()).collect::<Vec<_>>(),
        vec![sid("s"), sid(child)]
    );

    let run = r.run(&RunId::new("r1")).unwrap().unwrap();
    assert_eq!(run.state, RunState::Finished);
    assert_eq!(run.attachments, vec![attachment]);
    let (cursor, record) = run.completion.clone().unwrap();
    assert_eq!(cursor, Cursor(1));
    assert_eq!(record.outcome, Outcome::Cancelled);
    assert_eq!(record, CompletionRecord::from(&cancelled("s", 1, Some("r1"))));
    let child_run = r.run_by_seq(Seq(2)).unwrap().unwrap();
    assert_eq!(child_run.state, RunState::Paused);
    assert_eq!((child_run.run_id, child_run.mode), (None, Mode::OwnTurn));
    assert_eq!(child_run.prompt, "dig");
    assert_eq!(r.runs().unwrap().iter().map(|r| r.seq).collect::<Vec<_>>(), vec![Seq(1), Seq(2)]);
    assert_eq!(r.completions_after(Cursor(0), 10).unwrap(), vec![(Cursor(1), record)]);
    assert_eq!(r.completions_after(Cursor(1), 10).unwrap(), vec![]);
    assert_eq!(r.newest_cursor().unwrap(), Cursor(1));
    assert_eq!(r.protocol_problems(&sid("s")).unwrap(), Vec::<String>::new());
    assert_eq!(r.integrity_check(), Ok(()));
}

fn session_usage_sets_gauges_and_adds_cost_and_a_title_touches_nothing_else(kind: Kind) {
    let dir = Scratch::new(kind);
    let mut store = open(&dir).store;
    let child = "m1$$c1";
    let setup = vec![
        Write::Accept(NewRun {
            session: sid("p"),
            seq: Seq(1),
            run_id: None,
            mode: Mode::Fold,
            prompt: "x".into(),
            attachments: vec![],
        }),
        Write::Op(StoreOp::ChildAccepted {
            session: sid(child),
            seq: Seq(2),
            parent: sid("p"),
            parent_seq: Seq(1),
            prompt: "y".into(),
            title: "New Agent Session",
        }),
    ];
    store.commit(&[txn("p", setup)]).unwrap();
    let usage = |session: &str, p: Option<u64>, c: Option<u64>, cost, ancestor: Option<&str>| {
        StoreOp::SessionUsage {
            session: sid(session),
            seq: None,
            prompt_tokens: p,
            completion_tokens: c,
            cost_micros: cost,
            ancestor: ancestor.map(sid),
        }
    };
    store.commit(&[ops("p", vec![usage("p", Some(100), Some(10), 5, None)])]).unwrap();
    store.commit(&[ops("p", vec![usage("p", None, Some(20), 7, None)])]).unwrap();
    store.commit(&[ops(child, vec![usage(child, Some(50), None, 1000, Some("p"))])]).unwrap();
    let r = store.reader().unwrap();
    let p = r.session(&sid("p")).unwrap().unwrap();
    assert_eq!((p.prompt_tokens, p.completion_tokens, p.cost_micros), (100, 20, 1012));
    let c = r.session(&sid(child)).unwrap().unwrap();
    assert_eq!((c.prompt_tokens, c.completion_tokens, c.cost_micros), (50, 0, 1000));

    store
        .commit(&[ops("p", vec![StoreOp::Title { session: sid("p"), title: "T".into() }])])
        .unwrap();
    let after = r.session(&sid("p")).unwrap().unwrap();
    assert_eq!(after, SessionRow { title: Some("T".into()), ..p });

    let err = store
        .commit(&[ops("p", vec![usage("p", None, None, 1, Some("nobody"))])])
        .expect_err("a missing ancestor is an error");
    assert!(err.to_string().contains("nobody"), "{err}");
    assert_eq!(r.session(&sid("p")).unwrap().unwrap().cost_micros, 1012, "rolled back");
}

fn a_group_commit_applies_several_sessions_in_one_transaction(kind: Kind) {
    let dir = Scratch::new(kind);
    let mut store = open(&dir).store;
    let txns: Vec<Txn> = (1..=5)
        .map(|i| {
            let s = format!("s{i}");
            txn(&s, vec![new_run(&s, i, Some(&format!("r{i}")), "p"), Write::Op(activated(&s, i))])
        })
        .collect();
    assert_eq!(store.commit(&txns).unwrap(), vec![]);
    let outcomes: Vec<Txn> = (1..=5)
        .rev()
        .map(|i| {
            let s = format!("s{i}");
            ops(&s, vec![outcome(cancelled(&s, i, Some(&format!("r{i}"))))])
        })
        .collect();
    let cursors = store.commit(&outcomes).unwrap();
    assert_eq!(cursors, (1..=5).map(Cursor).collect::<Vec<_>>());
    let r = store.reader().unwrap();
    let by_cursor: Vec<Seq> =
        r.completions_after(Cursor(0), 100).unwrap().into_iter().map(|(_, c)| c.seq).collect();
    assert_eq!(
        by_cursor,
        vec![Seq(5), Seq(4), Seq(3), Seq(2), Seq(1)],
        "cursors follow write order"
    );
    assert_eq!(r.completions_after(Cursor(2), 2).unwrap().len(), 2, "the limit holds");

    // One bad write anywhere in the group undoes the whole group.
    let bad = vec![
        txn("s6", vec![new_run("s6", 6, None, "p")]),
        ops("s1", vec![outcome(cancelled("s1", 1, Some("r1")))]), // already finished
    ];
    let err = store.commit(&bad).expect_err("a second outcome for a run");
    assert!(err.to_string().contains("ledger row 1 is finished"), "{err}");
    assert!(r.run_by_seq(Seq(6)).unwrap().is_none());
    assert_eq!(r.newest_cursor().unwrap(), Cursor(5));
}

fn writes_for_rows_the_store_does_not_hold_are_errors(kind: Kind) {
    let dir = Scratch::new(kind);
    let mut store = open(&dir).store;
    let err = store.commit(&[ops("s", vec![outcome(cancelled("s", 9, None))])]).unwrap_err();
    assert_eq!(err.to_string(), "ledger_outcome: the ledger has no row for sequence 9");
    let err = store.commit(&[ops("s", vec![activated("s", 9)])]).unwrap_err();
    assert_eq!(err.to_string(), "ledger_activated: the ledger has no row for sequence 9");
    store.commit(&[txn("s", vec![new_run("s", 1, None, "p")])]).unwrap();
    let err = store.commit(&[ops("t", vec![activated("t", 1)])]).unwrap_err();
    assert_eq!(err.to_string(), "ledger_activated: ledger row 1 belongs to session s, not t");
    let err = store.commit(&[ops("s", vec![text("s", 1, 42, "x")])]).unwrap_err();
    assert_eq!(err.to_string(), "append_text: session s has no assistant message m42");
    let err = store
        .commit(&[ops("s", vec![StoreOp::LedgerPaused { session: sid("s"), seq: Seq(1) }])])
        .unwrap_err();
    assert_eq!(err.to_string(), "ledger_paused: ledger row 1 is waiting, expected active");
}

fn an_injected_fault_before_or_after_applying_leaves_nothing_and_uses_no_cursor(kind: Kind) {
    let dir = Scratch::new(kind);
    let faults = Faults::default();
    let cfg = StoreConfig { faults: Some(faults.clone()), ..config(&dir) };
    let mut store = Store::open(&cfg).unwrap().store;
    let r = store.reader().unwrap();
    store.commit(&[txn("s", vec![new_run("s", 1, Some("r1"), "p")])]).unwrap();
    let group = || {
        vec![
            txn("t", vec![new_run("t", 2, None, "q")]),
            ops("s", vec![outcome(cancelled("s", 1, Some("r1")))]),
        ]
    };
    for (fault, code, message) in [
        (Fault::Locked, rusqlite::ErrorCode::DatabaseBusy, "database is locked"),
        (Fault::DiskFull, rusqlite::ErrorCode::DiskFull, "database or disk is full"),
        (Fault::ReadOnly, rusqlite::ErrorCode::ReadOnly, "attempt to write a readonly database"),
        (Fault::DiskFullAtCommit, rusqlite::ErrorCode::DiskFull, "database or disk is full"),
    ] {
        faults.fail_next(1, fault);
        let err = store.commit(&group()).expect_err("injected");
        assert_eq!(sqlite_code(&err), Some(code), "{fault:?}");
        assert_eq!(err.to_string(), message);
        assert!(r.run_by_seq(Seq(2)).unwrap().is_none(), "{fault:?}: nothing applied");
        assert_eq!(r.run_by_seq(Seq(1)).unwrap().unwrap().state, RunState::Waiting);
        assert_eq!(r.newest_cursor().unwrap(), Cursor(0));
    }
    faults.fail_always(Fault::DiskFullAtCommit);
    assert!(store.commit(&group()).is_err());
    faults.clear();
    assert_eq!(store.commit(&group()).unwrap(), vec![Cursor(1)], "no cursor was used up");
    assert_eq!(faults.commits(), 7);
    assert_eq!(faults.injected(), 5);
    assert_eq!(r.integrity_check(), Ok(()));
}

#[test]
fn a_real_lock_conflict_is_sqlite_busy_and_the_store_stays_usable() {
    let dir = Scratch::new(Kind::Sqlite);
    let mut store = open(&dir).store;
    let other = rusqlite::Connection::open(dir.path().join("store.db")).unwrap();
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    let err = store.commit(&[txn("s", vec![new_run("s", 1, None, "p")])]).unwrap_err();
    assert_eq!(sqlite_code(&err), Some(rusqlite::ErrorCode::DatabaseBusy), "{err}");
    other.execute_batch("ROLLBACK").unwrap();
    store.commit(&[txn("s", vec![new_run("s", 1, None, "p")])]).unwrap();
}

// ---- recovery ----------------------------------------------------------------------------------

/// Leaves, then recovers: a waiting run; an active run with an unfinished message, unfinished
/// reasoning, a call with a result, a finished call without one and an orphan unfinished call;
/// a paused run with a partial summary; a finished run; an activated run without an assistant
/// message; an active sub-agent.
fn recovery_ends_every_unfinished_submission_and_repairs_history(kind: Kind) {
    let dir = Scratch::new(kind);
    let mut store = open(&dir).store;
    let child = "m2$$c2";
    let finish_end = MessageFinish::EndTurn;
    store
        .commit(&[
            txn("w", vec![new_run("w", 1, Some("rw"), "wait")]),
            txn(
                "a",
                vec![
                    new_run("a", 2, Some("ra"), "act"),
                    Write::Op(activated("a", 2)),
                    Write::Op(user("a", 2, 1, "act")),
                    Write::Op(assistant("a", 2, 2)),
                    Write::Op(StoreOp::ReasoningStarted {
                        session: sid("a"),
                        seq: Seq(2),
                        id: MessageId(2),
                    }),
                    Write::Op(text("a", 2, 2, "partial")),
                    Write::Op(tool_call("a", 2, 2, "c1")),
                    Write::Op(tool_result("a", 2, 2, "c1", "done")),
                    Write::Op(tool_call("a", 2, 2, "c2")),
                    Write::Op(tool_started("a", 2, 2, "c3")),
                ],
            ),
            txn(
                "p",
                vec![
                    new_run("p", 3, Some("rp"), "pause"),
                    Write::Op(activated("p", 3)),
                    Write::Op(user("p", 3, 3, "pause")),
                    Write::Op(assistant("p", 3, 4)),
                    Write::Op(text("p", 3, 4, "before the pause")),
                    Write::Op(tool_call("p", 3, 4, "c9")),
                    Write::Op(tool_result("p", 3, 4, "c9", "nine")),
                    Write::Op(finished("p", 3, 4, MessageFinish::ToolUse)),
                    Write::Op(StoreOp::LedgerPaused { session: sid("p"), seq: Seq(3) }),
                    Write::Op(StoreOp::SummaryMessage { session: sid("p"), id: MessageId(5) }),
                    Write::Op(StoreOp::SummaryText {
                        session: sid("p"),
                        id: MessageId(5),
                        text: "half".into(),
                    }),
                ],
            ),
            txn(
                "f",
                vec![
                    new_run("f", 4, Some("rf"), "fin"),
                    Write::Op(activated("f", 4)),
                    Write::Op(user("f", 4, 6, "fin")),
                    Write::Op(assistant("f", 4, 7)),
                    Write::Op(text("f", 4, 7, "all good")),
                    Write::Op(finished("f", 4, 7, finish_end)),
                    Write::Op(outcome(cancelled("f", 4, Some("rf")))),
                ],
            ),
            txn(
                "n",
                vec![
                    new_run("n", 5, None, "no message yet"),
                    Write::Op(activated("n", 5)),
                    Write::Op(user("n", 5, 8, "no message yet")),
                ],
            ),
            txn(
                child,
                vec![
                    Write::Op(StoreOp::ChildAccepted {
                        session: sid(child),
                        seq: Seq(6),
                        parent: sid("a"),
                        parent_seq: Seq(2),
                        prompt: "dig".into(),
                        title: "New Agent Session",
                    }),
                    Write::Op(activated(child, 6)),
                    Write::Op(user(child, 6, 9, "dig")),
                    Write::Op(assistant(child, 6, 10)),
                    Write::Op(text(child, 6, 10, "child text")),
                ],
            ),
        ])
        .unwrap();
    let before_f = store.reader().unwrap().messages(&sid("f")).unwrap();
    let problems = store.reader().unwrap().protocol_problems(&sid("a")).unwrap();
    assert_eq!(
        problems,
        vec![
            "message m2: assistant message has no finish",
            "message m2: tool call c2 has no result",
            "message m2: tool call c3 is unfinished",
            "message m2: tool call c3 has no result",
        ]
    );
    assert_eq!(
        store.reader().unwrap().protocol_problems(&sid("p")).unwrap(),
        vec!["message m5: summary message is unfinished"]
    );
    drop(store); // a crash: no close

    let opened = open(&dir);
    let rec = |session: &str, run_id: Option<&str>, seq, last: Option<(u64, &str)>| {
        CompletionRecord::recovered(
            sid(session),
            run_id.map(RunId::new),
            Seq(seq),
            last.map(|(id, t)| (MessageId(id), t.to_owned())),
        )
    };
    assert_eq!(
        opened.recovered,
        vec![
            (Cursor(2), rec("w", Some("rw"), 1, None)),
            (Cursor(3), rec("a", Some("ra"), 2, Some((2, "partial")))),
            (Cursor(4), rec("p", Some("rp"), 3, Some((4, "before the pause")))),
            (Cursor(5), rec("n", None, 5, Some((11, "")))),
            (Cursor(6), rec(child, None, 6, Some((10, "child text")))),
        ]
    );
    let (_, a) = &opened.recovered[1];
    assert_eq!(a.outcome, Outcome::Interrupted);
    let error = a.error.clone().unwrap();
    assert_eq!(error.kind, ErrorKind::Interrupted);
    assert_eq!(error.title, "Interrupted");
    assert_eq!(error.message, "The process stopped before this request finished.");
    assert_eq!(
        serde_json::to_value(a).unwrap(),
        json!({
            "session": "a", "run_id": "ra", "seq": 2, "outcome": "interrupted",
            "message_id": 2, "text": "partial",
            "error": {
                "kind": "interrupted",
                "title": "Interrupted",
                "message": "The process stopped before this request finished."
            }
        })
    );

    let r = opened.store.reader().unwrap();
    let interrupted = json!({
        "reason": "error",
        "title": "Interrupted",
        "message": "The process stopped before this request finished."
    });
    let m = r.messages(&sid("a")).unwrap();
    assert_eq!(m[1].finish, Some(interrupted.clone()));
    assert!(m[1].reasoning_done, "the reasoning section is closed");
    assert_eq!(m[1].text, "partial");
    assert!(m[1].calls.iter().all(|c| c.finished));
    assert_eq!(m[1].calls[2].input.as_deref(), Some("{}"), "the orphan call gets input {{}}");
    assert_eq!(m[1].calls[1].input.as_deref(), Some(r#"{"path":"a"}"#), "complete input kept");
    let repair = |c: &str| StoredResult {
        call: CallId::new(c),
        content: HISTORY_REPAIR_RESULT.into(),
        is_error: true,
        synthetic: true,
    };
    assert_eq!(
        m[1].results,
        vec![
            StoredResult {
                call: CallId::new("c1"),
                content: "done".into(),
                is_error: false,
                synthetic: false
            },
            repair("c2"),
            repair("c3"),
        ]
    );
    assert_eq!(m[0].finish, None, "user messages have no finish");

    let p = r.messages(&sid("p")).unwrap();
    assert_eq!(p.len(), 2, "the partial summary is deleted: {p:#?}");
    assert_eq!(p[1].finish, Some(json!({"reason": "tool_use"})), "a finished message is kept");
    assert_eq!(r.messages(&sid("f")).unwrap(), before_f, "a finished run is untouched");
    let n = r.messages(&sid("n")).unwrap();
    assert_eq!(n.len(), 2);
    assert_eq!(
        (n[1].id, n[1].role, n[1].seq),
        (MessageId(11), StoredRole::Assistant, Some(Seq(5)))
    );
    assert_eq!((n[1].text.as_str(), &n[1].finish), ("", &Some(interrupted.clone())));
    assert_eq!(r.messages(&sid(child)).unwrap()[1].finish, Some(interrupted));

    for s in r.sessions().unwrap() {
        assert_eq!(r.protocol_problems(&s.id).unwrap(), Vec::<String>::new(), "{}", s.id);
    }
    assert!(r.runs().unwrap().iter().all(|run| run.state == RunState::Finished));
    assert_eq!(r.run(&RunId::new("rf")).unwrap().unwrap().completion.unwrap().0, Cursor(1));
    assert_eq!(r.integrity_check(), Ok(()));
    assert_eq!(RECOVERY_MESSAGE, "The process stopped before this request finished.");

    // Start: sequences and message ids above the maxima; every RunId with its fingerprint.
    assert_eq!(opened.start.next_seq, Some(Seq(7)));
    assert_eq!(opened.start.next_message, Some(MessageId(12)));
    let known: BTreeMap<_, _> =
        opened.start.runs.iter().map(|k| (k.run_id.as_str().to_owned(), k)).collect();
    assert_eq!(known.len(), 4, "runs without a RunId are not listed");
    assert_eq!(known["rf"].outcome, Outcome::Cancelled);
    assert_eq!(known["ra"].outcome, Outcome::Interrupted);
    assert_eq!((known["ra"].seq, &known["ra"].session), (Seq(2), &sid("a")));
    assert_eq!(
        known["rw"].fingerprint,
        Fingerprint::of(&Submit::new("w", "wait").with_run_id("rw"))
    );

    // Idempotent: a second open finds nothing to do and changes nothing.
    let before = dump(&r);
    drop(r);
    drop(opened.store);
    let again = open(&dir);
    assert!(again.recovered.is_empty());
    assert_eq!(dump(&again.store.reader().unwrap()), before);
    assert_eq!(again.start.next_message, Some(MessageId(12)));

    // Cursors continue across the reopen.
    let mut store = again.store;
    store.commit(&[txn("z", vec![new_run("z", 7, None, "z")])]).unwrap();
    let cursors = store.commit(&[ops("z", vec![outcome(cancelled("z", 7, None))])]).unwrap();
    assert_eq!(cursors, vec![Cursor(7)]);
}

fn deleted_message_ids_are_never_handed_out_again(kind: Kind) {
    let dir = Scratch::new(kind);
    let mut store = open(&dir).store;
    store
        .commit(&[
            ops("s", vec![]),
            txn(
                "s",
                vec![
                    new_run("s", 1, None, "p"),
                    Write::Op(StoreOp::SummaryMessage { session: sid("s"), id: MessageId(40) }),
                    Write::Op(StoreOp::SummaryDeleted { session: sid("s"), id: MessageId(40) }),
                ],
            ),
        ])
        .unwrap();
    // And one deleted by recovery.
    store
        .commit(&[ops("s", vec![StoreOp::SummaryMessage { session: sid("s"), id: MessageId(41) }])])
        .unwrap();
    drop(store);
    let opened = open(&dir);
    assert!(opened.store.reader().unwrap().messages(&sid("s")).unwrap().is_empty());
    assert_eq!(opened.start.next_message, Some(MessageId(42)));
    assert_eq!(opened.start.next_seq, Some(Seq(2)));
    assert_eq!(opened.recovered.len(), 1);
}

fn fingerprints_cover_attachments(kind: Kind) {
    let dir = Scratch::new(kind);
    let mut store = open(&dir).store;
    let attachments = vec![Attachment {
        name: "f".into(),
        media_type: "image/png".into(),
        content: "AAA".into(),
    }];
    let run = NewRun {
        session: sid("s"),
        seq: Seq(3),
        run_id: Some(RunId::new("r")),
        mode: Mode::OwnTurn,
        prompt: "see".into(),
        attachments: attachments.clone(),
    };
    store.commit(&[txn("s", vec![Write::Accept(run)])]).unwrap();
    drop(store);
    let start = open(&dir).start;
    let mut submit = Submit::new("s", "see").with_run_id("r");
    submit.attachments = attachments;
    assert_eq!(start.runs[0].fingerprint, Fingerprint::of(&submit));
    assert_ne!(start.runs[0].fingerprint, Fingerprint::of(&Submit::new("s", "see")));
    assert_eq!(start.runs[0].outcome, Outcome::Interrupted);
}

fn protocol_problems_name_the_message_and_call(kind: Kind) {
    let dir = Scratch::new(kind);
    let mut store = open(&dir).store;
    store
        .commit(&[txn(
            "s",
            vec![
                new_run("s", 1, None, "p"),
                Write::Op(activated("s", 1)),
                Write::Op(user("s", 1, 1, "p")),
                Write::Op(assistant("s", 1, 2)),
                Write::Op(tool_call("s", 1, 2, "orphan")),
                Write::Op(tool_result("s", 1, 2, "stray", "x")),
                Write::Op(finished("s", 1, 2, MessageFinish::ToolUse)),
                Write::Op(assistant("s", 1, 3)),
            ],
        )])
        .unwrap();
    let problems = store.reader().unwrap().protocol_problems(&sid("s")).unwrap();
    assert_eq!(
        problems,
        vec![
            "message m2: tool call orphan has no result",
            "message m2: result for call stray has no tool call",
            "message m3: assistant message has no finish",
        ]
    );
}

// ---- an engine-produced transaction ---------------------------------------------------------

/// Drives the real engine through one turn with reasoning, a tool call and a second step, and
/// applies its writes exactly as a host does: grouped by `Commit`, the acceptance row first.
/// Drives one submission through an engine to its end, committing each `Commit` of the core as
/// one transaction: a turn with reasoning, text, a tool call and a second step.
fn drive_turn(engine: &mut Engine, store: &mut Store, submit: &Submit) -> (Vec<Completion>, u32) {
    let mut inbox = VecDeque::from([Input::Submit(submit.clone())]);
    let mut pending: BTreeMap<SessionId, Vec<Write>> = BTreeMap::new();
    let mut done = Vec::new();
    let mut commits = 0;
    let usage = Usage { input_tokens: 120, output_tokens: 30, cost_micros: 9, ..Usage::default() };
    while let Some(input) = inbox.pop_front() {
        engine.handle(Millis(0), input).unwrap();
        while let Some(out) = engine.poll_output() {
            match out.kind {
                OutputKind::Reply(Reply::Accepted { session, seq, run_id, mode }) => {
                    let run = NewRun {
                        session: session.clone(),
                        seq,
                        run_id,
                        mode,
                        prompt: submit.prompt.clone(),
                        attachments: submit.attachments.clone(),
                    };
                    // Durable before the reply is answered.
                    store
                        .commit(&[Txn { session, writes: vec![Write::Accept(run)], fence: None }])
                        .unwrap();
                }
                OutputKind::Prepare { session, seq } => inbox.push_back(Input::Prepared {
                    session,
                    seq,
                    setup: Setup::with_tools(&["view"]),
                }),
                OutputKind::StartStep { step } => {
                    let ev = |event| Input::Step { step: step.clone(), event };
                    let events = if step.step == 0 {
                        vec![
                            StepEvent::ReasoningStart,
                            StepEvent::ReasoningDelta { text: "think".into() },
                            StepEvent::ReasoningEnd { signature: Some("sig".into()) },
                            StepEvent::TextDelta { text: "Looking.".into() },
                            StepEvent::ToolInputStart {
                                id: CallId::new("c1"),
                                name: "view".into(),
                            },
                            StepEvent::ToolCall {
                                id: CallId::new("c1"),
                                name: "view".into(),
                                input: r#"{"path":"."}"#.into(),
                            },
                            StepEvent::Finished {
                                reason: FinishReason::ToolCalls,
                                usage: Some(usage),
                            },
                        ]
                    } else {
                        vec![
                            StepEvent::TextDelta { text: "Two files.".into() },
                            StepEvent::Finished { reason: FinishReason::Stop, usage: Some(usage) },
                        ]
                    };
                    inbox.extend(events.into_iter().map(ev));
                }
                OutputKind::RunTool { call, .. } => {
                    inbox.push_back(Input::ToolResult { call, result: ToolOutput::ok("a.rs b.rs") })
                }
                OutputKind::Store(op) => {
                    pending.entry(op.session().clone()).or_default().push(Write::Op(op));
                }
                OutputKind::Commit { session } => {
                    let writes = pending.remove(&session).unwrap_or_default();
                    store.commit(&[Txn { session, writes, fence: None }]).unwrap();
                    commits += 1;
                }
                OutputKind::Finished(c) => done.push(c),
                _ => {}
            }
        }
    }
    assert!(pending.values().all(Vec::is_empty), "every write was committed: {pending:?}");
    (done, commits)
}

fn an_engine_turn_applied_commit_by_commit_is_protocol_legal(kind: Kind) {
    let dir = Scratch::new(kind);
    let opened = open(&dir);
    let mut store = opened.store;
    let mut writer_compiles = count_compiles(&mut store.conn);
    let mut engine = Engine::new(Config::default(), opened.start).unwrap();
    let submit = Submit::new("s1", "list the files").with_run_id("r1");
    let (done, commits) = drive_turn(&mut engine, &mut store, &submit);
    assert!(commits >= 3);
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].outcome(), Outcome::Completed);

    let mut r = store.reader().unwrap();
    assert_eq!(r.protocol_problems(&sid("s1")).unwrap(), Vec::<String>::new());
    let run = r.run(&RunId::new("r1")).unwrap().unwrap();
    assert_eq!(run.state, RunState::Finished);
    assert_eq!(run.completion, Some((Cursor(1), CompletionRecord::from(&done[0]))));
    let m = r.messages(&sid("s1")).unwrap();
    let roles: Vec<StoredRole> = m.iter().map(|m| m.role).collect();
    assert_eq!(roles, vec![StoredRole::User, StoredRole::Assistant, StoredRole::Assistant]);
    assert_eq!(m[0].text, "list the files");
    assert_eq!(m[1].reasoning.as_deref(), Some("think"));
    assert_eq!(m[1].reasoning_signature.as_deref(), Some("sig"));
    assert_eq!(m[1].text, "Looking.");
    assert_eq!(m[1].calls[0].input.as_deref(), Some(r#"{"path":"."}"#));
    assert_eq!(m[1].results[0].content, "a.rs b.rs");
    assert_eq!(m[1].finish, Some(json!({"reason": "tool_use"})));
    assert_eq!(m[2].text, "Two files.");
    assert_eq!(m[2].finish, Some(json!({"reason": "end_turn"})));
    assert_eq!(done[0].text(), Some("Two files."));
    assert_eq!(done[0].message_id(), Some(m[2].id));
    let s = r.session(&sid("s1")).unwrap().unwrap();
    assert_eq!((s.prompt_tokens, s.completion_tokens, s.cost_micros), (120, 30, 18));
    assert_eq!(r.integrity_check(), Ok(()));

    // The same turn again, other values bound: every statement is already compiled and cached.
    // (A plan that depends on a bound value is compiled again at every rebinding: the cost the
    // host pays per step when a query is written that way.)
    let mut reader_compiles = count_compiles(&mut r.conn);
    for session in ["s1", "none"] {
        r.messages(&sid(session)).unwrap();
        r.session(&sid(session)).unwrap();
        r.run(&RunId::new(session)).unwrap();
    }
    writer_compiles.reset(&store.conn);
    reader_compiles.reset(&r.conn);
    let again = Submit::new("s2", "list them again").with_run_id("r2");
    let (done2, _) = drive_turn(&mut engine, &mut store, &again);
    assert_eq!(done2[0].outcome(), Outcome::Completed);
    for session in ["s2", "s1", "other"] {
        r.messages(&sid(session)).unwrap();
        r.session(&sid(session)).unwrap();
        r.run(&RunId::new(session)).unwrap();
    }
    let compiled = (writer_compiles.since(&store.conn), reader_compiles.since(&r.conn));
    assert_eq!(compiled, (0, 0), "writer, reader");
    drop(r);
    store.close().unwrap();

    // The restart hands the engine everything it needs to refuse a rerun of r1.
    let again = open(&dir);
    assert!(again.recovered.is_empty());
    assert_eq!(again.start.next_seq, Some(Seq(3)));
    assert_eq!(again.start.runs.len(), 2);
    assert_eq!(again.start.runs[0].fingerprint, Fingerprint::of(&submit));
    let mut engine = Engine::new(Config::default(), again.start).unwrap();
    engine.handle(Millis(0), Input::Submit(submit)).unwrap();
    let reply = engine.poll_output().unwrap();
    assert!(
        matches!(
            reply.kind,
            OutputKind::Reply(Reply::Existing {
                seq: Seq(1),
                outcome: Some(Outcome::Completed),
                ..
            })
        ),
        "{reply:?}"
    );
}

// ---- the change order (SPEC 9 "Server") --------------------------------------------------------

/// The messages and sessions a `changes` answer names, as `m<id>` and `s<id>`, in its order.
fn names(c: &Changes) -> Vec<String> {
    c.rows
        .iter()
        .map(|r| match r {
            Change::Message { message, .. } => format!("m{}", message.id.0),
            Change::Session(s) => format!("s{}", s.row.id),
        })
        .collect()
}

fn changes_name_exactly_what_each_commit_touched_and_resume_across_a_restart(kind: Kind) {
    let dir = Scratch::new(kind);
    let mut store = open(&dir).store;
    let reader = store.reader().unwrap();
    let start = reader.position().unwrap();
    assert_eq!(start.cursor, Cursor(0));
    // Revision 2: a submission of `a` is accepted and activated, with its messages.
    store
        .commit(&[txn(
            "a",
            vec![
                new_run("a", 1, Some("ra"), "hi"),
                Write::Op(activated("a", 1)),
                Write::Op(user("a", 1, 1, "hi")),
                Write::Op(assistant("a", 1, 2)),
            ],
        )])
        .unwrap();
    let after_a = reader.position().unwrap();
    assert_eq!(after_a.revision, store.revision() + 1);
    let c = reader.changes(start, 100).unwrap();
    assert_eq!(names(&c), ["m1", "m2", "sa"]);
    assert_eq!(c.now, after_a);
    let Change::Session(state) = &c.rows[2] else { panic!("a session") };
    assert_eq!((state.unfinished, state.waiting, state.messages), (1, 0, 2));
    assert!(state.busy());
    // Revision 3: `b` is accepted; `a` streams text. Only m2, a and b changed.
    store
        .commit(&[
            txn("b", vec![new_run("b", 2, Some("rb"), "other")]),
            ops("a", vec![text("a", 1, 2, "hel")]),
        ])
        .unwrap();
    let c = reader.changes(after_a, 100).unwrap();
    assert_eq!(names(&c), ["m2", "sb"], "streamed text changes the message, not its session");
    let after_b = c.now;
    // Revision 4: a tool call and its result change the message they belong to.
    store
        .commit(&[ops("a", vec![tool_call("a", 1, 2, "c1"), tool_result("a", 1, 2, "c1", "ok")])])
        .unwrap();
    let c = reader.changes(after_b, 100).unwrap();
    assert_eq!(names(&c), ["m2"]);
    let Change::Message { message, .. } = &c.rows[0] else { panic!("a message") };
    assert_eq!((message.text.as_str(), message.calls.len(), message.results.len()), ("hel", 1, 1));
    let before_crash = c.now;
    assert!(c.completions.is_empty());
    drop(reader);
    drop(store);
    // A restart: recovery ends both submissions interrupted and finishes m2, as a revision of
    // its own, so the position from before the crash sees exactly that.
    let opened = open(&dir);
    assert_eq!(opened.recovered.len(), 2);
    let reader = opened.store.reader().unwrap();
    let c = reader.changes(before_crash, 100).unwrap();
    assert_eq!(names(&c), ["m2", "sa", "sb"]);
    assert_eq!(c.completions.iter().map(|(k, _)| k.0).collect::<Vec<_>>(), [1, 2]);
    assert!(c.rows.iter().all(|r| r.revision() >= before_crash.revision));
    // The limit holds the completions back in order, and `more` says so.
    let first = reader.changes(before_crash, 1).unwrap();
    assert!(first.more);
    assert_eq!(first.completions.len(), 1);
    assert_eq!(first.now.cursor, Cursor(1));
    let rest = reader.changes(first.now, 1).unwrap();
    assert!(!rest.more);
    assert_eq!(rest.completions[0].0, Cursor(2));
    assert!(rest.rows.is_empty(), "the rows were all reported already");
    // Nothing changed after the newest position.
    let now = reader.position().unwrap();
    let c = reader.changes(now, 100).unwrap();
    assert!(c.rows.is_empty() && c.completions.is_empty());
    assert_eq!(c.now, now);
}

/// A catch-up from far back reads pages of whole revisions, no larger than the limit (but for
/// a single revision over it), and the completions only once every row is behind it: the
/// pages together are the answer read at once.
fn changes_from_far_back_come_in_pages_of_whole_revisions(kind: Kind) {
    let dir = Scratch::new(kind);
    let mut store = open(&dir).store;
    let reader = store.reader().unwrap();
    let start = reader.position().unwrap();
    for i in 1..=12_u64 {
        let s = format!("s{i}");
        let (user_id, reply_id) = (2 * i - 1, 2 * i);
        store
            .commit(&[txn(
                &s,
                vec![
                    new_run(&s, i, Some(&format!("r{i}")), "hi"),
                    Write::Op(activated(&s, i)),
                    Write::Op(user(&s, i, user_id, "hi")),
                    Write::Op(assistant(&s, i, reply_id)),
                ],
            )])
            .unwrap();
    }
    drop(reader);
    drop(store);
    // Recovery ends all twelve in one revision: 12 messages and 12 sessions, over the limit.
    let opened = open(&dir);
    assert_eq!(opened.recovered.len(), 12);
    let reader = opened.store.reader().unwrap();
    let whole = reader.changes(start, 1000).unwrap();
    assert!(!whole.more);
    let (mut rows, mut completions, mut at, mut pages) = (Vec::new(), Vec::new(), start, 0);
    loop {
        let page = reader.changes(at, 5).unwrap();
        pages += 1;
        let revisions: std::collections::BTreeSet<u64> =
            page.rows.iter().map(Change::revision).collect();
        assert!(page.rows.len() <= 5 || revisions.len() == 1, "a page of whole revisions");
        if !page.completions.is_empty() || !page.more {
            assert!(
                reader.changes(page.now, 1000).unwrap().rows.is_empty()
                    || page.completions.is_empty(),
                "completions only once every row is behind"
            );
        }
        rows.extend(names(&page));
        completions.extend(page.completions.iter().map(|(c, _)| c.0));
        at = page.now;
        if !page.more {
            break;
        }
    }
    assert!(pages > 3, "{pages} pages");
    assert_eq!(rows, names(&whole));
    assert_eq!(completions, whole.completions.iter().map(|(c, _)| c.0).collect::<Vec<_>>());
    assert_eq!(at, whole.now);
}

fn pages_of_messages_follow_write_order_and_refuse_a_foreign_cursor(kind: Kind) {
    let dir = Scratch::new(kind);
    let mut store = open(&dir).store;
    store
        .commit(&[txn(
            "a",
            vec![
                new_run("a", 1, None, "hi"),
                Write::Op(activated("a", 1)),
                Write::Op(user("a", 1, 1, "hi")),
                Write::Op(assistant("a", 1, 2)),
                Write::Op(assistant("a", 1, 3)),
            ],
        )])
        .unwrap();
    store
        .commit(&[txn(
            "b",
            vec![
                new_run("b", 2, None, "x"),
                Write::Op(activated("b", 2)),
                Write::Op(user("b", 2, 4, "x")),
            ],
        )])
        .unwrap();
    let reader = store.reader().unwrap();
    let ids =
        |page: Option<Vec<StoredMessage>>| page.unwrap().iter().map(|m| m.id.0).collect::<Vec<_>>();
    assert_eq!(ids(reader.messages_page(&sid("a"), None, 2).unwrap()), [1, 2]);
    assert_eq!(ids(reader.messages_page(&sid("a"), Some(MessageId(2)), 2).unwrap()), [3]);
    assert_eq!(
        ids(reader.messages_page(&sid("a"), Some(MessageId(3)), 2).unwrap()),
        Vec::<u64>::new()
    );
    assert_eq!(reader.messages_page(&sid("a"), Some(MessageId(4)), 2).unwrap(), None);
    assert_eq!(reader.session_state(&sid("nope")).unwrap(), None);
    assert_eq!(reader.session_state(&sid("b")).unwrap().unwrap().messages, 1);
}

fn the_end_of_a_summary_changes_its_session_so_streams_see_it_stop_summarizing(kind: Kind) {
    let dir = Scratch::new(kind);
    let mut store = open(&dir).store;
    store
        .commit(&[txn("s", vec![new_run("s", 1, None, "hi"), Write::Op(activated("s", 1))])])
        .unwrap();
    store
        .commit(&[ops("s", vec![StoreOp::SummaryMessage { session: sid("s"), id: MessageId(4) }])])
        .unwrap();
    let reader = store.reader().unwrap();
    assert!(reader.session_state(&sid("s")).unwrap().unwrap().summarizing);
    let before = reader.position().unwrap();
    store
        .commit(&[ops(
            "s",
            vec![StoreOp::SummaryFailed {
                session: sid("s"),
                id: MessageId(4),
                title: "t".into(),
                message: "m".into(),
            }],
        )])
        .unwrap();
    let c = reader.changes(before, 10).unwrap();
    assert_eq!(names(&c), ["m4", "ss"]);
    let Change::Session(state) = &c.rows[1] else { panic!("a session") };
    assert!(!state.summarizing);
}
