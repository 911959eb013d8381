//! Provider and tool failures: reset and refresh, preparation, panics, the watchdog.

use super::*;
use crate::common;

both_stores!(a_retried_step_resets_its_content_and_a_refresh_retries_with_fresh_credentials,);

async fn a_retried_step_resets_its_content_and_a_refresh_retries_with_fresh_credentials(
    kind: common::Kind,
) {
    let dir = common::Scratch::new(kind);
    // Each prompt's first request fails once: "retry" with a short retry-after, "auth" with 401.
    let failed = Arc::new(std::sync::Mutex::new(std::collections::BTreeSet::new()));
    let provider = ScriptedProvider::new(move |req, _| {
        let prompt = req.last_user_text().unwrap_or("").to_owned();
        let first = failed.lock().expect("set").insert(prompt.clone());
        match (prompt.as_str(), first) {
            ("retry", true) => Answer(vec![
                Scripted::Event(StepEvent::TextDelta { text: "partial ".into() }),
                Scripted::Event(StepEvent::Failed {
                    error: turnstile_core::ProviderError {
                        status: Some(503),
                        retry_after_ms: Some(20),
                        message: "overloaded".into(),
                        ..Default::default()
                    },
                }),
            ]),
            ("auth", true) => Answer(vec![
                Scripted::Event(StepEvent::TextDelta { text: "stale ".into() }),
                Scripted::Event(StepEvent::Failed {
                    error: turnstile_core::ProviderError {
                        class: turnstile_core::ErrorClass::Unauthorized,
                        status: Some(401),
                        message: "expired".into(),
                        ..Default::default()
                    },
                }),
            ]),
            _ => Answer::streamed("fine", 2, 1, usage()),
        }
    });
    let counter = provider.clone();
    let host = open(&config(&dir), provider).await;
    host.submit(Submit::new("s", "retry").with_run_id("r")).await.expect("ok");
    let done = host.wait(&RunId::new("r")).await.expect("done");
    assert_eq!(done.outcome, Outcome::Completed);
    assert_eq!(done.text.as_deref(), Some("fine"), "the failed attempt's text was reset");
    host.submit(Submit::new("s", "auth").with_run_id("a")).await.expect("ok");
    let done = host.wait(&RunId::new("a")).await.expect("done");
    assert_eq!((done.outcome, done.text.as_deref()), (Outcome::Completed, Some("fine")));
    assert_eq!(counter.requests(), 4, "each prompt: one failed attempt, one retry");
    legal(&host, "s").await;
    host.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_refresh_fails_the_run_and_a_failed_preparation_only_its_own() {
    let dir = common::Scratch::new(common::Kind::Sqlite);
    let provider = ScriptedProvider::new(|_, _| Answer::failure(401, "expired"))
        .with_refresh(false)
        .with_prepare(|s| {
            if s.as_str() == "broken" {
                Err("no model for you".into())
            } else {
                Ok(Default::default())
            }
        });
    let host = open(&config(&dir), provider).await;
    host.submit(Submit::new("broken", "x").with_run_id("p")).await.expect("ok");
    host.submit(Submit::new("s", "x").with_run_id("u")).await.expect("ok");
    let p = host.wait(&RunId::new("p")).await.expect("p");
    assert_eq!(p.outcome, Outcome::Failed);
    assert_eq!(
        p.error.as_ref().map(|e| (e.kind, e.message.as_str())),
        Some((ErrorKind::Preparation, "no model for you"))
    );
    assert!(p.message_id.is_none(), "never activated");
    let u = host.wait(&RunId::new("u")).await.expect("u");
    assert_eq!(
        u.error.as_ref().map(|e| (e.kind, e.title.as_str())),
        Some((ErrorKind::Unauthorized, "Unauthorized"))
    );
    legal(&host, "s").await;
    host.shutdown().await.expect("shutdown");
}

/// A tool that panics: the host must report it as a failed call, not hang the turn.
struct Boom;

impl turnstile_host::Tool for Boom {
    fn spec(&self) -> turnstile_core::ToolSpec {
        turnstile_core::ToolSpec::new("boom")
    }
    fn run(
        &self,
        _: turnstile_host::ToolCall,
    ) -> turnstile_host::tool::BoxFuture<turnstile_core::ToolOutput> {
        Box::pin(async { panic!("the tool exploded") })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_tool_or_provider_fails_its_call_instead_of_hanging_the_turn() {
    let dir = common::Scratch::new(common::Kind::Sqlite);
    let provider = ScriptedProvider::new(|req, _| match req.messages.last() {
        Some(turnstile_host::provider::RequestMessage::ToolResults(r)) => {
            Answer::streamed(&format!("after: {}", r[0].content), 1, 1, usage())
        }
        _ if req.last_user_text() == Some("provider") => panic!("the provider exploded"),
        _ => Answer::tool_call("c1", "boom", "{}"),
    });
    let host = Host::open(config(&dir), Arc::new(provider), ToolSet::new().with(Boom))
        .await
        .expect("open");
    host.submit(Submit::new("s", "tool").with_run_id("t")).await.expect("ok");
    let done = tokio::time::timeout(Duration::from_secs(10), host.wait(&RunId::new("t")))
        .await
        .expect("the turn ended")
        .expect("done");
    assert_eq!(done.text.as_deref(), Some("after: the tool failed: the tool exploded"));
    // The scripted provider panics while building its answer, inside `stream`, before any
    // future exists: that too must end the turn, as a non-retryable provider failure.
    host.submit(Submit::new("s", "provider").with_run_id("p")).await.expect("ok");
    let p = tokio::time::timeout(Duration::from_secs(10), host.wait(&RunId::new("p")))
        .await
        .expect("the turn ended")
        .expect("done");
    assert_eq!(p.error.as_ref().map(|e| e.kind), Some(ErrorKind::Provider), "{p:?}");
    legal(&host, "s").await;
    host.shutdown().await.expect("shutdown");
}

/// A provider that counts the streams it opened and the ones the host closed (dropped).
struct Counted {
    inner: ScriptedProvider,
    closed: Arc<std::sync::atomic::AtomicU64>,
}

/// Counts a stream as closed when the host drops it.
struct Closed(Arc<std::sync::atomic::AtomicU64>);

impl Drop for Closed {
    fn drop(&mut self) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

impl turnstile_host::Provider for Counted {
    fn prepare(
        &self,
        session: &SessionId,
    ) -> turnstile_host::BoxFuture<Result<turnstile_host::ModelInfo, turnstile_host::BoxError>>
    {
        self.inner.prepare(session)
    }

    fn stream(
        &self,
        request: turnstile_host::ModelRequest,
        sink: turnstile_host::EventSink,
    ) -> turnstile_host::BoxFuture<()> {
        let guard = Closed(self.closed.clone());
        let stream = self.inner.stream(request, sink);
        Box::pin(async move {
            let _guard = guard;
            stream.await;
        })
    }

    fn refresh_credentials(&self) -> turnstile_host::BoxFuture<bool> {
        self.inner.refresh_credentials()
    }

    fn title(
        &self,
        prompt: String,
    ) -> turnstile_host::BoxFuture<Result<(String, Option<Usage>), turnstile_host::BoxError>> {
        self.inner.title(prompt)
    }
}

/// SPEC 4.5 through the host: a stream that sends one delta and then nothing (the connection
/// open) is failed by the core's watchdog after the idle timeout, and the host closes it on the
/// abort; each retry stalls too, so after the last attempt the run ends `failed`, kind
/// `transport`. Virtual time (paused, advanced by the runtime): 1 s of idle timeout and the
/// backoffs of 5, 10 and 20 s.
#[tokio::test(start_paused = true)]
async fn a_stalled_stream_is_closed_by_the_watchdog_and_fails_transport_after_the_retries() {
    let dir = common::Scratch::new(common::Kind::Sqlite);
    let mut c = config(&dir);
    c.engine.stream_idle_timeout_ms = 1_000;
    let scripted = ScriptedProvider::new(|_, _| {
        Answer(vec![Scripted::Event(StepEvent::TextDelta { text: "one ".into() }), Scripted::Hang])
    });
    let closed = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let provider = Counted { inner: scripted.clone(), closed: closed.clone() };
    let host = Host::open(c, Arc::new(provider), ToolSet::new()).await.expect("open");
    let started = tokio::time::Instant::now();
    host.submit(Submit::new("s", "go").with_run_id("r")).await.expect("ok");
    let done = host.wait(&RunId::new("r")).await.expect("done");
    assert_eq!(done.outcome, Outcome::Failed, "{done:?}");
    let e = done.error.as_ref().expect("an error");
    assert_eq!(
        (e.kind, e.title.as_str(), e.message.as_str()),
        (ErrorKind::Transport, "Stream Transport Error", "stream idle for 1 s")
    );
    assert_eq!(scripted.requests(), 4, "every attempt of the step");
    assert!(started.elapsed() >= Duration::from_secs(35), "after the backoffs");
    host.flush().await.expect("flush");
    assert_eq!(
        closed.load(std::sync::atomic::Ordering::Relaxed),
        4,
        "the host closed every stalled stream"
    );
    legal(&host, "s").await;
    host.shutdown().await.expect("shutdown");
}
