//! Shutdown and dropped handles: the store released, recovery ends the rest.

use super::*;
use crate::common;

both_stores!(
    shutdown_interrupts_and_releases_the_store_and_a_second_host_is_refused,
    dropping_every_handle_releases_the_store_and_recovery_ends_the_rest,
);

async fn shutdown_interrupts_and_releases_the_store_and_a_second_host_is_refused(
    kind: common::Kind,
) {
    let dir = common::Scratch::new(kind);
    let c = config(&dir);
    let host = open(&c, hang()).await;
    let second = Host::open(c.clone(), Arc::new(hang()), ToolSet::new()).await;
    assert_eq!(
        second.expect_err("in use").to_string(),
        "store is in use by another turnstile process"
    );
    host.submit(Submit::new("s", "active").with_run_id("a")).await.expect("a");
    host.submit(Submit::new("s", "waiting").with_run_id("b")).await.expect("b");
    host.shutdown().await.expect("shutdown");
    let a = host.wait(&RunId::new("a")).await.expect("a");
    let b = host.wait(&RunId::new("b")).await.expect("b");
    assert_eq!((a.outcome, b.outcome), (Outcome::Interrupted, Outcome::Interrupted));
    assert_eq!(a.error.as_ref().map(|e| e.kind), Some(ErrorKind::Interrupted));
    let late = host.submit(Submit::new("s", "late")).await;
    assert_eq!(late, Err(SubmitError::Rejected(Rejection::WorkspaceClosing)));
    // SPEC 4.1's order holds with the engine gone: the submission's own faults come first.
    let empty = host.submit(Submit::new("s", "")).await;
    assert_eq!(empty, Err(SubmitError::Rejected(Rejection::PromptEmpty)));
    let child = host.submit(Submit::new("m1$$c1", "continue")).await;
    assert_eq!(
        child,
        Err(SubmitError::Rejected(Rejection::ChildSession(SessionId::new("m1$$c1"))))
    );
    assert_eq!(host.shutdown().await, Ok(()), "shutdown is idempotent");
    assert_eq!(host.is_busy(&SessionId::new("s")).await, Ok(false));
    host.cancel(&SessionId::new("s")).await.expect("a cancel after shutdown is a no-op");
    drop(host);
    let again = open(&c, echo()).await;
    legal(&again, "s").await;
    assert!(again.recovered().is_empty(), "a clean shutdown leaves nothing to recover");
    again.shutdown().await.expect("shutdown");
}

async fn dropping_every_handle_releases_the_store_and_recovery_ends_the_rest(kind: common::Kind) {
    let dir = common::Scratch::new(kind);
    let c = config(&dir);
    let host = open(&c, hang()).await;
    host.submit(Submit::new("s", "left running").with_run_id("r1")).await.expect("ok");
    drop(host);
    // The engine, workers and writer notice and release the store; retry the open briefly.
    let mut again = None;
    for _ in 0..200 {
        match Host::open(c.clone(), Arc::new(echo()), ToolSet::new()).await {
            Ok(h) => {
                again = Some(h);
                break;
            }
            Err(e) => {
                assert_eq!(e.to_string(), "store is in use by another turnstile process");
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    }
    let again = again.expect("the store was released after every handle was dropped");
    assert_eq!(
        again.wait(&RunId::new("r1")).await.expect("recovered").outcome,
        Outcome::Interrupted
    );
    again.shutdown().await.expect("shutdown");
}
