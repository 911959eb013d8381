//! Opening a store: the schema, the owner lock, memory disks, migrations, readers.

use super::*;

both_stores!(
    open_creates_the_schema_and_reopen_keeps_the_data,
    a_second_open_is_refused_and_runs_no_recovery_over_live_work,
    a_call_with_invalid_arguments_keeps_what_the_model_sent_beside_its_input,
    a_reader_cannot_write,
);

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
