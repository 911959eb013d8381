//! Store failures: retried when transient, a stop and recovery when persistent.

use super::*;
use crate::common;

both_stores!(
    a_transient_store_failure_is_retried_and_loses_nothing,
    a_persistent_store_failure_stops_the_engine_and_recovery_decides_on_restart,
    after_a_storage_failure_finished_runs_are_still_answered_by_sequence,
);

async fn a_transient_store_failure_is_retried_and_loses_nothing(kind: common::Kind) {
    let dir = common::Scratch::new(kind);
    let mut c = config(&dir);
    let faults = common::faulty(&mut c);
    let host = open(&c, echo()).await;
    host.submit(Submit::new("s", "warm").with_run_id("r0")).await.expect("ok");
    host.wait(&RunId::new("r0")).await.expect("done");
    faults.fail_next(3, Fault::Locked);
    host.submit(Submit::new("s", "through failures").with_run_id("r1"))
        .await
        .expect("accepted after retries");
    let done = host.wait(&RunId::new("r1")).await.expect("done");
    assert_eq!(done.outcome, Outcome::Completed);
    assert!(host.writer_stats().retries.load(std::sync::atomic::Ordering::Relaxed) >= 3);
    legal(&host, "s").await;
    host.shutdown().await.expect("shutdown");
}

/// Seeds 21503, 109025 and 153031 of the simulation: bursts of failures that each fit the
/// retry budget must not add up to a stop when a later one lands on the retries of an earlier
/// one. A shutdown during the retries waits for them and then finishes cleanly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shutdown_during_store_retries_succeeds_when_each_burst_fits_the_retry_budget() {
    let dir = common::Scratch::new(common::Kind::Sqlite);
    let mut c = config(&dir);
    // The simulated world's budget: attempts at 0, 10, 30, 70, ..., 1270 and 2000 ms, so up
    // to 8 failures in a row are absorbed and a 9th stops the host.
    c.store_retry = Duration::from_secs(2);
    let faults = common::faulty(&mut c);
    let host = open(&c, hang()).await;
    host.submit(Submit::new("s", "active").with_run_id("a")).await.expect("a");
    host.submit(Submit::new("s", "waiting").with_run_id("b")).await.expect("b");
    common::until_active(&host, "a").await;
    // The shutdown's writes fail 4 times (150 ms of retries) ...
    faults.fail_next(4, Fault::Locked);
    let shutdown = {
        let host = host.clone();
        tokio::spawn(async move { host.shutdown().await })
    };
    // ... and a second burst of 6 arrives during them (from the 3rd failure to the 5th
    // attempt: a window of 120 ms). Chained, 9 or 10 failures in a row would stop the host;
    // each burst on its own is absorbed.
    while faults.injected() < 3 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    faults.fail_burst(6, Fault::DiskFull);
    assert_eq!(shutdown.await.expect("join"), Ok(()), "each burst fits the retry budget");
    assert_eq!(host.stopped(), None);
    let a = host.wait(&RunId::new("a")).await.expect("a");
    let b = host.wait(&RunId::new("b")).await.expect("b");
    assert_eq!((a.outcome, b.outcome), (Outcome::Interrupted, Outcome::Interrupted));
    drop(host);
    faults.clear();
    let again = open(&c, echo()).await;
    legal(&again, "s").await;
    assert!(again.recovered().is_empty(), "a clean shutdown leaves nothing to recover");
    again.shutdown().await.expect("shutdown");
}

async fn a_persistent_store_failure_stops_the_engine_and_recovery_decides_on_restart(
    kind: common::Kind,
) {
    let dir = common::Scratch::new(kind);
    let mut c = config(&dir);
    c.store_retry = Duration::from_millis(300);
    let faults = common::faulty(&mut c);
    let host = open(&c, hang()).await;
    host.submit(Submit::new("s", "stuck").with_run_id("r1")).await.expect("accepted");
    common::until_active(&host, "r1").await;
    faults.fail_always(Fault::DiskFull);
    let waiter = {
        let host = host.clone();
        tokio::spawn(async move { host.wait(&RunId::new("r1")).await })
    };
    // The cancel's clean-up cannot be written: retried for 300 ms, then the engine stops.
    host.cancel(&SessionId::new("s")).await.expect("cancel");
    let got = waiter.await.expect("join");
    let expected = "engine stopped: storage failure: database or disk is full";
    let Err(WaitError::Stopped(why)) = got else { panic!("the waiter heard {got:?}") };
    assert_eq!(why.to_string(), expected);
    // The stop carries the store's error itself, as the cause.
    let Stopped::Storage(cause) = &why else { panic!("a storage failure: {why:?}") };
    assert!(matches!(**cause, StoreError::Sqlite(_)), "{cause:?}");
    let source = std::error::Error::source(&why).expect("the store error is the source");
    assert_eq!(source.to_string(), "database or disk is full");
    assert_eq!(host.stopped(), Some(why.clone()));
    let late = host.submit(Submit::new("s", "after")).await;
    assert_eq!(late, Err(SubmitError::Stopped(why.clone())));
    assert_eq!(late.expect_err("stopped").to_string(), expected);
    assert_eq!(host.flush().await, Err(why.clone()));
    let _ = host.shutdown().await;
    drop(host);
    // Nothing was published that was not recorded: the ledger still has the run unfinished,
    // and the next start's recovery decides it.
    faults.clear();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let again = open(&c, echo()).await;
    let rec = again.wait(&RunId::new("r1")).await.expect("recovered");
    assert_eq!(rec.outcome, Outcome::Interrupted);
    assert_eq!(again.recovered().len(), 1);
    legal(&again, "s").await;
    again.shutdown().await.expect("shutdown");
}

async fn after_a_storage_failure_finished_runs_are_still_answered_by_sequence(kind: common::Kind) {
    let dir = common::Scratch::new(kind);
    let mut c = config(&dir);
    c.store_retry = Duration::from_millis(100);
    let faults = common::faulty(&mut c);
    let host = open(&c, echo()).await;
    let r0 = host.submit(Submit::new("s", "done before").with_run_id("r0")).await.expect("ok");
    host.wait(&RunId::new("r0")).await.expect("done");
    faults.fail_always(Fault::ReadOnly);
    let stuck = host.submit(Submit::new("s", "never durable")).await;
    assert!(matches!(stuck, Err(SubmitError::Stopped(_))), "{stuck:?}");
    assert_eq!(host.wait_seq(r0.seq).await.expect("recorded").outcome, Outcome::Completed);
    assert_eq!(host.wait(&RunId::new("r0")).await.expect("recorded").outcome, Outcome::Completed);
}
