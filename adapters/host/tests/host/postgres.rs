//! PostgreSQL only: dropped futures, lost connections (SPEC 11).

use super::*;
use crate::common;

/// Polls `fut` at most `polls` times (letting other tasks run between polls), then drops it;
/// true when it was dropped before it finished.
async fn drop_after<F: std::future::Future>(fut: F, polls: usize) -> bool {
    let mut fut = std::pin::pin!(fut);
    for _ in 0..polls {
        let poll = std::future::poll_fn(|cx| std::task::Poll::Ready(fut.as_mut().poll(cx))).await;
        if poll.is_ready() {
            return false;
        }
        tokio::task::yield_now().await;
    }
    true
}

/// Ends the connections of this test's database (the caller's own aside) that have this
/// `application_name` (any, with `None`), as the server does when it restarts or an
/// administrator ends them; first checks that the writer names its role. Returns how many.
async fn terminate(url: String, role: Option<&'static str>) -> i64 {
    tokio::task::spawn_blocking(move || {
        let mut admin = ::postgres::Client::connect(&url, ::postgres::NoTls).expect("connect");
        let roles: Vec<String> = admin
            .query(
                "SELECT application_name FROM pg_stat_activity \
                 WHERE datname = current_database() AND pid <> pg_backend_pid()",
                &[],
            )
            .expect("roles")
            .iter()
            .map(|r| r.get(0))
            .collect();
        assert!(roles.iter().any(|r| r == "turnstile writer"), "{roles:?}");
        admin
            .query_one(
                "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                 WHERE datname = current_database() AND pid <> pg_backend_pid() \
                 AND ($1::text IS NULL OR application_name = $1)) AS ended",
                &[&role],
            )
            .expect("terminate")
            .get(0)
    })
    .await
    .expect("join")
}

/// The connections to this test's database that are inside a transaction they left idle.
fn idle_in_transaction(url: &str) -> i64 {
    let mut client = ::postgres::Client::connect(url, ::postgres::NoTls).expect("connect");
    client
        .query_one(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE datname = current_database() AND pid <> pg_backend_pid() \
             AND state LIKE 'idle in transaction%'",
            &[],
        )
        .expect("pg_stat_activity")
        .get(0)
}

/// SPEC 11 "Cancellation-safe IO": a dropped future never leaves a connection inside a
/// transaction. Thousands of submissions, snapshot reads and cancels are dropped after every
/// number of polls their futures take (every await point of each), while runs stream; then
/// `pg_stat_activity` shows no connection of the database idle in a transaction, every
/// accepted run has exactly one RunComplete, and the history is legal. (The check is first
/// shown to find a connection left in a transaction on purpose.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: eval \"$(scripts/postgres.sh env)\", then --ignored"]
async fn postgres_dropped_futures_leave_no_connection_inside_a_transaction() {
    let dir = common::Scratch::new(common::Kind::Postgres);
    let url = dir.url().expect("a database").to_owned();
    // The check can fail: a connection left in a transaction is found.
    let left = url.clone();
    let found = tokio::task::spawn_blocking(move || {
        let mut open = ::postgres::Client::connect(&left, ::postgres::NoTls).expect("connect");
        open.batch_execute("BEGIN; SELECT 1").expect("begin");
        let found = idle_in_transaction(&left);
        drop(open);
        found
    })
    .await
    .expect("the control");
    assert_eq!(found, 1, "the check sees a connection idle in a transaction");

    let host = open(&config(&dir), echo()).await;
    let mut dropped = 0;
    for i in 0..1200_usize {
        let polls = i % 16;
        let session = SessionId::new(format!("s{}", i % 5));
        let submit = Submit::new(session.as_str(), "hi").with_run_id(format!("r{i}"));
        dropped += usize::from(drop_after(host.submit(submit), polls).await);
        let read = host.read(|r| r.changes(turnstile_host::store::Position::default(), 16));
        dropped += usize::from(drop_after(read, polls).await);
        if i % 3 == 0 {
            dropped += usize::from(drop_after(host.cancel(&session), polls).await);
        }
    }
    assert!(dropped >= 2000, "{dropped} futures dropped before they finished");
    // A dropped submission may still be accepted: the engine takes its inbox in order, so
    // once a last one, awaited, is accepted, every earlier one was decided.
    let last = Submit::new("s0", "the last").with_run_id("last");
    host.submit(last).await.expect("accepted");
    // Every accepted run ends, once (read again until no more were accepted meanwhile).
    let mut runs = host.read(|r| r.runs()).await.expect("runs");
    loop {
        for run in &runs {
            let id = run.run_id.clone().expect("a RunId");
            host.wait(&id).await.expect("finished");
        }
        host.flush().await.expect("flush");
        let again = host.read(|r| r.runs()).await.expect("runs");
        if again.len() == runs.len() {
            break;
        }
        runs = again;
    }
    let completions =
        host.read(|r| r.completions_after(Cursor(0), usize::MAX)).await.expect("completions");
    let mut ids: Vec<String> =
        completions.iter().filter_map(|(_, c)| c.run_id.as_ref().map(|r| r.to_string())).collect();
    let all = ids.len();
    ids.sort();
    ids.dedup();
    assert_eq!((ids.len(), all), (runs.len(), runs.len()), "one RunComplete per accepted run");
    for s in 0..5 {
        legal(&host, &format!("s{s}")).await;
    }
    let check = url.clone();
    let idle =
        tokio::task::spawn_blocking(move || idle_in_transaction(&check)).await.expect("check");
    assert_eq!(idle, 0, "a connection was left inside a transaction");
    host.shutdown().await.expect("shutdown");
}

/// SPEC 11 and 4.12 on PostgreSQL: a connection lost mid-turn (the server ends every backend
/// of the database, as a restart of the database does) is a store failure: the writes are
/// retried for the bounded time, then the engine stops and the waiter hears why, with
/// PostgreSQL's own message. Nothing was published that was not recorded, and the next start
/// (new connections) recovers the run `interrupted`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: eval \"$(scripts/postgres.sh env)\", then --ignored"]
async fn postgres_a_lost_connection_stops_the_engine_and_the_next_start_recovers() {
    let dir = common::Scratch::new(common::Kind::Postgres);
    let url = dir.url().expect("a database").to_owned();
    let mut c = config(&dir);
    c.store_retry = Duration::from_millis(300);
    let host = open(&c, hang()).await;
    host.submit(Submit::new("s", "stuck").with_run_id("r1")).await.expect("accepted");
    common::until_active(&host, "r1").await;
    let waiter = {
        let host = host.clone();
        tokio::spawn(async move { host.wait(&RunId::new("r1")).await })
    };
    let ended = terminate(url, None).await;
    assert!(ended >= 2, "the writer's and the readers' connections ended: {ended}");
    // The cancel's clean-up cannot be written: retried for 300 ms, then the engine stops.
    host.cancel(&SessionId::new("s")).await.expect("cancel");
    let got = waiter.await.expect("join");
    let Err(WaitError::Stopped(why)) = got else { panic!("the waiter heard {got:?}") };
    let Stopped::Storage(cause) = &why else { panic!("a storage failure: {why:?}") };
    assert!(matches!(**cause, StoreError::Postgres { .. }), "{cause:?}");
    assert!(why.to_string().starts_with("engine stopped: storage failure: PostgreSQL "), "{why}");
    let _ = host.shutdown().await;
    drop(host);
    let again = open(&c, echo()).await;
    let rec = again.wait(&RunId::new("r1")).await.expect("recovered");
    assert_eq!(rec.outcome, Outcome::Interrupted);
    assert_eq!(again.recovered().len(), 1);
    legal(&again, "s").await;
    again.shutdown().await.expect("shutdown");
}

/// A reader whose connection was lost (the server ended it: an idle timeout, a proxy, an
/// administrator) connects again at its next read; the host goes on, and only the writer's
/// loss stops it (the test above). `pg_stat_activity` names each connection's role.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: eval \"$(scripts/postgres.sh env)\", then --ignored"]
async fn postgres_a_reader_whose_connection_was_lost_connects_again() {
    let dir = common::Scratch::new(common::Kind::Postgres);
    let url = dir.url().expect("a database").to_owned();
    let host = open(&config(&dir), echo()).await;
    host.submit(Submit::new("s", "one").with_run_id("r1")).await.expect("accepted");
    host.wait(&RunId::new("r1")).await.expect("done");
    let ended = terminate(url, Some("turnstile reader")).await;
    assert!(ended >= 2, "every reader's connection ended: {ended}");
    // Reads (the ledger, a run's wait, the history) and new runs go on.
    let runs = host.read(|r| r.runs()).await.expect("a reader connected again");
    assert_eq!(runs.len(), 1);
    host.submit(Submit::new("s", "two").with_run_id("r2")).await.expect("accepted");
    let rec = host.wait(&RunId::new("r2")).await.expect("done");
    assert_eq!(rec.outcome, Outcome::Completed);
    legal(&host, "s").await;
    assert_eq!(host.stopped(), None);
    host.shutdown().await.expect("shutdown");
}
