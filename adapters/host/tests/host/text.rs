//! Streamed text: debounced writes, flush, durable before the RunComplete (I9).

use super::*;
use crate::common;

both_stores!(a_run_complete_is_published_after_its_text_is_durable,);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_deltas_are_debounced_into_few_writes() {
    let dir = common::Scratch::new(common::Kind::Sqlite);
    let provider = ScriptedProvider::new(|_, _| {
        let mut events = Vec::new();
        for i in 0..200 {
            events.push(Scripted::Wait(1));
            events.push(Scripted::Event(StepEvent::TextDelta { text: format!("{i} ") }));
        }
        events
            .push(Scripted::Event(StepEvent::Finished { reason: FinishReason::Stop, usage: None }));
        Answer(events)
    });
    let host = open(&config(&dir), provider).await;
    host.submit(Submit::new("s", "go").with_run_id("r")).await.expect("ok");
    let done = host.wait(&RunId::new("r")).await.expect("done");
    let expected: String = (0..200).map(|i| format!("{i} ")).collect();
    assert_eq!(done.text.as_deref(), Some(expected.as_str()));
    let stats = host.writer_stats();
    let appends = stats.appends_in.load(std::sync::atomic::Ordering::Relaxed);
    let txns = stats.txns.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(appends, 200, "every delta reached the writer");
    // 200 deltas over at least 200 ms with a 33 ms window: about 7 streaming writes, plus the
    // structural ones (acceptance, activation, finish, title, usage). Far below one per delta.
    assert!(txns < 40, "{txns} transactions for 200 deltas");
    host.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flush_writes_held_streamed_text_at_once() {
    let dir = common::Scratch::new(common::Kind::Sqlite);
    let mut c = config(&dir);
    // A debounce window far longer than the test: only a flush can write the text.
    c.debounce = Duration::from_secs(60);
    let provider = ScriptedProvider::new(|_, _| {
        Answer(vec![
            Scripted::Event(StepEvent::TextDelta { text: "held ".into() }),
            Scripted::Event(StepEvent::TextDelta { text: "text".into() }),
            Scripted::Hang,
        ])
    });
    let host = open(&c, provider).await;
    host.submit(Submit::new("s", "go").with_run_id("r")).await.expect("ok");
    let text = |host: Host| async move {
        host.read(|r| r.messages(&SessionId::new("s")))
            .await
            .expect("read")
            .iter()
            .filter(|m| m.role == turnstile_host::store::StoredRole::Assistant)
            .map(|m| m.text.clone())
            .collect::<String>()
    };
    let mut seen = String::new();
    for _ in 0..1_000 {
        host.flush().await.expect("flush");
        seen = text(host.clone()).await;
        if seen == "held text" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    assert_eq!(seen, "held text", "flush wrote the held deltas");
    host.shutdown().await.expect("shutdown");
    assert_eq!(host.flush().await, Ok(()), "after a clean shutdown everything is durable");
}

/// I9 through the host: when a RunComplete is published, its text is durable in the store,
/// even with a debounce window far longer than the turn (the final flush carries it).
async fn a_run_complete_is_published_after_its_text_is_durable(kind: common::Kind) {
    let dir = common::Scratch::new(kind);
    let mut c = config(&dir);
    c.debounce = Duration::from_secs(30);
    let provider = common::two_deltas_then_finish();
    let host = open(&c, provider).await;
    host.submit(Submit::new("s", "go").with_run_id("r")).await.expect("ok");
    let done = host.wait(&RunId::new("r")).await.expect("done");
    let stored = common::assistant_text(&host, "s").await;
    assert_eq!(Some(stored.as_str()), done.text.as_deref());
    host.shutdown().await.expect("shutdown");
}
