//! Errors that name what failed: the lock file, the store, the flight trace, stop reasons.

use super::*;
use crate::common;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_flight_recorder_writes_a_trace_that_replays() {
    let dir = common::Scratch::new(common::Kind::Sqlite);
    let mut c = config(&dir);
    let trace = dir.path().join("flight.jsonl");
    c.trace = Some(Flight::File(trace.clone()));
    c.trace_outputs = true;
    let host = open(&c, echo()).await;
    host.submit(Submit::new("s", "one").with_run_id("r1")).await.expect("ok");
    host.submit(Submit::new("s", "two")).await.expect("ok");
    host.wait(&RunId::new("r1")).await.expect("done");
    host.cancel(&SessionId::new("s")).await.expect("cancel");
    host.shutdown().await.expect("shutdown");
    let text = std::fs::read_to_string(&trace).expect("trace");
    let parsed = turnstile_core::Trace::parse(&text).expect("parses");
    assert!(parsed.lines.len() >= 6, "{} lines", parsed.lines.len());
    let report = turnstile_core::replay(&parsed).expect("replays with identical outputs");
    let _ = report;
}

/// The source chain of an error, outermost first, as text.
fn chain(e: &dyn std::error::Error) -> Vec<String> {
    let mut out = vec![e.to_string()];
    let mut next = e.source();
    while let Some(e) = next {
        out.push(e.to_string());
        next = e.source();
    }
    out
}

/// A store in a directory that does not exist: the error names the lock file (the first
/// thing opened) and what failed, and carries the OS error as its source.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_in_a_missing_directory_names_the_lock_file_and_the_action() {
    let dir = common::Scratch::new(common::Kind::Sqlite);
    let path = dir.path().join("missing").join("store.db");
    let lock = dir.path().join("missing").join("store.db.lock");
    let got = Host::open(HostConfig::new(&path), Arc::new(echo()), ToolSet::new()).await;
    let Err(OpenError::Store(StoreError::Io { path: at, action, source })) = &got else {
        panic!("an IO error: {:?}", got.err());
    };
    assert_eq!((at, *action), (&lock, "open the lock file"));
    assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
    let os = source.to_string();
    let e = got.expect_err("refused");
    let text = e.to_string();
    assert!(text.starts_with(&format!("cannot open the lock file {}: ", lock.display())), "{text}");
    let causes = chain(&e);
    assert_eq!(causes.len(), 3, "open error, store error, OS error: {causes:?}");
    assert_eq!(causes[2], os);
    // The store on its own says the same.
    let direct = Store::open(&StoreConfig::new(&path)).expect_err("no directory");
    assert_eq!(direct.to_string(), text);
}

/// A store below a regular file cannot be created (also for root, who may write anywhere): the
/// error names the lock file.
#[test]
fn a_store_below_a_file_names_the_lock_file() {
    let dir = common::Scratch::new(common::Kind::Sqlite);
    let file = dir.path().join("plain.txt");
    std::fs::write(&file, "not a directory").expect("write");
    let path = file.join("store.db");
    let err = Store::open(&StoreConfig::new(&path)).expect_err("not a directory");
    let lock = file.join("store.db.lock");
    assert!(
        matches!(&err, StoreError::Io { path: p, action: "open the lock file", .. } if *p == lock)
    );
    assert!(
        err.to_string().starts_with(&format!("cannot open the lock file {}: ", lock.display()))
    );
}

/// SQLite failing to open the database names the store's path: a directory where the database
/// file should be (the lock file beside it is fine), and a reader on a file that is missing.
#[test]
fn sqlite_open_failures_name_the_store() {
    let dir = common::Scratch::new(common::Kind::Sqlite);
    let path = dir.path().join("a-directory");
    std::fs::create_dir(&path).expect("mkdir");
    let err = Store::open(&StoreConfig::new(&path)).expect_err("a directory is no database");
    assert!(matches!(&err, StoreError::Open { path: p, .. } if *p == path), "{err:?}");
    let prefix = format!("cannot open the store {}: ", path.display());
    assert!(err.to_string().starts_with(&prefix), "{err}");
    assert!(std::error::Error::source(&err).is_some(), "SQLite's error is the source");

    let missing = dir.path().join("missing.db");
    let err = Reader::open(&missing).expect_err("no such file");
    assert!(matches!(&err, StoreError::Open { path: p, .. } if *p == missing), "{err:?}");
    let text = err.to_string();
    assert!(text.starts_with(&format!("cannot open the store {}: ", missing.display())), "{text}");

    // A file that is not a database: found when the first statement reads it.
    let junk = dir.path().join("junk.db");
    std::fs::write(&junk, vec![b'x'; 4096]).expect("write");
    let err = Store::open(&StoreConfig::new(&junk)).expect_err("not a database");
    assert!(matches!(&err, StoreError::Open { path: p, .. } if *p == junk), "{err:?}");
    assert!(err.to_string().contains("file is not a database"), "{err}");
}

/// The flight recorder's file in a directory that does not exist: the error names the trace
/// file and what failed, and nothing was started (the store's lock is free again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flight_trace_in_a_missing_directory_names_the_trace_file() {
    let dir = common::Scratch::new(common::Kind::Sqlite);
    let mut c = config(&dir);
    let trace = dir.path().join("missing").join("flight.jsonl");
    c.trace = Some(Flight::File(trace.clone()));
    let got = Host::open(c.clone(), Arc::new(echo()), ToolSet::new()).await;
    let Err(OpenError::Trace { path, action, source }) = &got else {
        panic!("a trace error: {:?}", got.err());
    };
    assert_eq!((path, *action), (&trace, "create the trace file"));
    assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
    let e = got.expect_err("refused");
    let text = e.to_string();
    assert!(text.starts_with(&format!("cannot create the trace file {}: ", trace.display())));
    assert_eq!(chain(&e).len(), 2, "the OS error is the source");
    c.trace = None;
    let host = open(&c, echo()).await;
    host.shutdown().await.expect("shutdown");
}

/// The texts of the stop reasons SPEC and the simulator rely on, and their sources.
#[test]
fn stop_reasons_keep_their_texts() {
    let disk_full = Stopped::Storage(Arc::new(Fault::DiskFull.error()));
    assert_eq!(disk_full.to_string(), "engine stopped: storage failure: database or disk is full");
    assert!(std::error::Error::source(&disk_full).is_some());
    assert_eq!(
        Stopped::HandlesDropped.to_string(),
        "engine stopped: every handle was dropped without shutdown"
    );
    assert_eq!(Stopped::TaskEnded.to_string(), "engine stopped: the engine task ended");
    assert_eq!(Stopped::WriterEnded.to_string(), "engine stopped: the store writer stopped");
    let engine = Stopped::Engine(HostError::Internal("a bug"));
    assert_eq!(engine.to_string(), "engine stopped: engine failed: internal error: a bug");
    assert_eq!(chain(&WaitError::Stopped(engine.clone())).len(), 3);
    assert_eq!(StoreError::InUse.to_string(), "store is in use by another turnstile process");
}

/// A store in a directory this process may not write to names the lock file and the action.
/// Root may write anywhere: then there is nothing to see, and the test says so.
#[cfg(unix)]
#[test]
fn a_store_in_a_read_only_directory_names_the_lock_file() {
    use std::os::unix::fs::PermissionsExt;
    let dir = common::Scratch::new(common::Kind::Sqlite);
    let locked = dir.path().join("read-only");
    std::fs::create_dir(&locked).expect("mkdir");
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o555)).expect("chmod");
    let writable = std::fs::write(locked.join("probe"), "").is_ok();
    let got = Store::open(&StoreConfig::new(locked.join("store.db")));
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    if writable {
        eprintln!("skipped: this process may write to a read-only directory (root)");
        return;
    }
    let err = got.expect_err("read-only");
    let lock = locked.join("store.db.lock");
    assert!(
        matches!(&err, StoreError::Io { path: p, action: "open the lock file", source }
        if *p == lock && source.kind() == std::io::ErrorKind::PermissionDenied),
        "{err:?}"
    );
    assert!(
        err.to_string().starts_with(&format!("cannot open the lock file {}: ", lock.display()))
    );
}
