//! Live updates and the completion stream: cursors, lagging subscribers, retries announced.

use super::*;
use crate::common;

both_stores!(completions_stream_from_a_cursor_is_lossless_and_resumable,);

async fn completions_stream_from_a_cursor_is_lossless_and_resumable(kind: common::Kind) {
    let dir = common::Scratch::new(kind);
    let c = config(&dir);
    let host = open(&c, echo()).await;
    let mut all = host.completions(Cursor(0));
    for i in 0..5 {
        host.submit(Submit::new("s", format!("p{i}")).with_run_id(format!("r{i}")))
            .await
            .expect("ok");
    }
    let mut got = Vec::new();
    for _ in 0..5 {
        let (cursor, record) = all.next().await.expect("read").expect("one");
        got.push((cursor, record.run_id.expect("run id").to_string()));
    }
    assert_eq!(
        got.iter().map(|g| g.1.as_str()).collect::<Vec<_>>(),
        ["r0", "r1", "r2", "r3", "r4"]
    );
    assert!(got.windows(2).all(|w| w[0].0 < w[1].0));
    host.shutdown().await.expect("shutdown");
    drop(host);
    // Resume after the second, after a restart.
    let host = open(&c, echo()).await;
    let mut rest = host.completions(got[1].0);
    let (_, third) = rest.next().await.expect("read").expect("one");
    assert_eq!(third.run_id, Some(RunId::new("r2")));
    host.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_subscriber_gets_lagged_and_never_blocks_the_engine() {
    let dir = common::Scratch::new(common::Kind::Sqlite);
    let mut c = config(&dir);
    c.updates_capacity = 4;
    let host = open(&c, echo()).await;
    let mut slow = host.subscribe();
    for i in 0..5 {
        host.submit(Submit::new("s", format!("p{i}")).with_run_id(format!("r{i}")))
            .await
            .expect("ok");
    }
    for i in 0..5 {
        host.wait(&RunId::new(format!("r{i}"))).await.expect("done");
    }
    let first = slow.recv().await.expect("event");
    assert!(matches!(first, Event::Lagged { skipped } if skipped > 0), "{first:?}");
    let mut finished = 0;
    while let Ok(Some(e)) = tokio::time::timeout(Duration::from_millis(50), slow.recv()).await {
        if matches!(e, Event::Update(Update::TurnFinished { .. })) {
            finished += 1;
        }
    }
    assert!(finished <= 4, "only the newest updates are kept");
    host.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_end_after_shutdown_and_abandoned_waits_leave_nothing_behind() {
    let dir = common::Scratch::new(common::Kind::Sqlite);
    let host = open(&config(&dir), hang()).await;
    let mut updates = host.subscribe();
    let mut completions = host.completions(Cursor(0));
    host.submit(Submit::new("s", "x").with_run_id("r1")).await.expect("ok");
    let abandoned =
        tokio::time::timeout(Duration::from_millis(20), host.wait(&RunId::new("r1"))).await;
    assert!(abandoned.is_err(), "the provider hangs, so the wait timed out");
    assert_eq!(host.waiters(), 0, "an abandoned wait leaves no waiter behind");
    host.shutdown().await.expect("shutdown");
    let (_, only) = completions.next().await.expect("read").expect("the interrupted run");
    assert_eq!(only.outcome, Outcome::Interrupted);
    assert_eq!(completions.next().await.expect("read"), None, "the stream ends after shutdown");
    let ended = tokio::time::timeout(Duration::from_secs(5), async {
        while updates.recv().await.is_some() {}
    })
    .await;
    assert!(ended.is_ok(), "live updates end after shutdown");
}

/// The live `Retrying` update until the run's end: (attempt, delay_ms, reason) of each.
async fn retries_until_done(updates: &mut turnstile_host::Updates) -> Vec<(u32, u64, String)> {
    let mut seen = Vec::new();
    while let Some(event) = updates.recv().await {
        match event {
            turnstile_host::Event::Update(turnstile_host::Update::Retrying {
                attempt,
                delay_ms,
                reason,
                ..
            }) => seen.push((attempt, delay_ms, reason)),
            turnstile_host::Event::Update(turnstile_host::Update::TurnFinished { .. }) => break,
            _ => {}
        }
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_is_announced_live_with_its_attempt_delay_and_reason() {
    let dir = common::Scratch::new(common::Kind::Sqlite);
    // The first attempt fails with a retry-after; the second hangs until the stream watchdog
    // (1 s here) fails it; the third answers.
    let provider = ScriptedProvider::new(|_, n| match n {
        0 => Answer(vec![Scripted::Event(StepEvent::Failed {
            error: turnstile_core::ProviderError {
                status: Some(503),
                retry_after_ms: Some(30),
                message: "overloaded".into(),
                ..Default::default()
            },
        })]),
        1 => Answer::hang(),
        _ => Answer::streamed("fine", 2, 1, usage()),
    });
    let mut c = config(&dir);
    c.engine.stream_idle_timeout_ms = 1_000;
    let host = open(&c, provider).await;
    let mut updates = host.subscribe();
    host.submit(Submit::new("s", "go").with_run_id("r")).await.expect("ok");
    let retries = retries_until_done(&mut updates).await;
    assert_eq!(retries.len(), 2, "{retries:?}");
    assert_eq!(retries[0], (2, 30, "overloaded".to_owned()));
    assert_eq!((retries[1].0, retries[1].2.as_str()), (3, "stream idle for 1 s"));
    assert_eq!(retries[1].1, 10_000, "the second retry waits the second backoff (SPEC 8)");
    let done = host.wait(&RunId::new("r")).await.expect("done");
    assert_eq!((done.outcome, done.text.as_deref()), (Outcome::Completed, Some("fine")));
    host.shutdown().await.expect("shutdown");
}
