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

mod apply;
mod changes;
mod cluster;
mod engine_turn;
mod open;
mod recovery;

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

pub(super) fn sid(s: &str) -> SessionId {
    SessionId::new(s)
}

fn new_run(session: &str, seq: u64, run_id: Option<&str>, prompt: &str) -> Write {
    accept(NewRun {
        session: sid(session),
        seq: Seq(seq),
        run_id: run_id.map(RunId::new),
        mode: if run_id.is_some() { Mode::OwnTurn } else { Mode::Fold },
        prompt: prompt.to_owned(),
        attachments: Vec::new(),
        fingerprint: None,
    })
}

/// A text attachment.
pub(super) fn text_attachment(name: &str, content: &str) -> Attachment {
    Attachment { name: name.into(), media_type: "text/plain".into(), content: content.into() }
}

/// A ledger row's write, with the fingerprint the core would give it (SPEC 4.1).
pub(super) fn accept(mut run: NewRun) -> Write {
    run.fingerprint = run.run_id.as_ref().map(|_| Fingerprint::of(&run.submit()));
    Write::Accept(run)
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
