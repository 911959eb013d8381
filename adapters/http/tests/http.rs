//! The HTTP provider against a real HTTP server on 127.0.0.1: every recorded case replayed
//! through reqwest and the real decoders, the requests compared by meaning with the recorded
//! ones, a whole tool turn run through the host, the error paths made by the tests, and a
//! cancel closing the connection.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use turnstile_core::{ErrorClass, ProviderError, StepEvent, Submit};
use turnstile_host::{BoxFuture, EventSink, Host, HostConfig, Provider, Tool, ToolCall, ToolSet};
use turnstile_http::{HttpProvider, KeySource, ModelConfig, ProviderConfig};
use turnstile_testkit::fixtures::cases;
use turnstile_testkit::provider::{Captured, FakeProvider, Reply};
use turnstile_wire::recording::{Recording, request_meaning};
use turnstile_wire::{Api, Decoder, ModelRequest, Prices, Target, ToolDef};

/// The key the tests' providers use: it must reach the server, and nothing else.
pub const KEY: &str = "sk-turnstile-test-7f3a9c2e";

fn provider(api: Api, base_url: &str, target: &Target) -> HttpProvider {
    let model = ModelConfig {
        name: "m".into(),
        api_model: target.model.clone(),
        context_window: 200_000,
        max_output_tokens: target.max_output_tokens,
        reasoning: target.reasoning.clone(),
        images: false,
        max_tokens_field: target.max_tokens_field,
        prices: Prices {
            input: 3_000_000,
            output: 15_000_000,
            cache_read: 300_000,
            cache_write: 0,
        },
    };
    let config = ProviderConfig {
        name: "test".into(),
        api,
        base_url: base_url.to_owned(),
        key: KeySource::Command(vec!["echo".into(), KEY.into()]),
        headers: BTreeMap::from([("x-test".to_owned(), "1".to_owned())]),
        models: BTreeMap::new(),
    };
    HttpProvider::for_model(config, model)
        .expect("a client")
        .with_system_prompt(target.system.clone().unwrap_or_default())
}

/// One stream of `request` through `provider`: its events.
async fn stream(provider: &HttpProvider, request: ModelRequest) -> Vec<StepEvent> {
    let (sink, mut rx) = EventSink::channel(100_000);
    provider.stream(request, sink).await;
    let mut out = Vec::new();
    while let Ok(e) = rx.try_recv() {
        out.push(e);
    }
    out
}

fn priced(events: Vec<StepEvent>, prices: Prices) -> Vec<StepEvent> {
    events
        .into_iter()
        .map(|e| match e {
            StepEvent::Finished { reason, usage } => {
                StepEvent::Finished { reason, usage: usage.map(|u| prices.priced(u)) }
            }
            other => other,
        })
        .collect()
}

/// The text a recorded body streams.
fn text_of(api: Api, body: &[u8]) -> String {
    Decoder::decode_all(api, body)
        .unwrap()
        .into_iter()
        .filter_map(|e| match e {
            StepEvent::TextDelta { text } => Some(text),
            _ => None,
        })
        .collect()
}

fn auth_of(api: Api, r: &Captured) -> Option<String> {
    match api {
        Api::AnthropicMessages => r.header("x-api-key").map(str::to_owned),
        _ => r.header("authorization").map(|v| v.trim_start_matches("Bearer ").to_owned()),
    }
}

#[tokio::test]
async fn every_recorded_case_through_http_decodes_as_recorded_and_sends_what_was_recorded() {
    let prices =
        Prices { input: 3_000_000, output: 15_000_000, cache_read: 300_000, cache_write: 0 };
    let mut checked = 0;
    for case in cases() {
        let server = FakeProvider::start(
            case.exchanges.iter().map(|(_, b)| Reply::sse(b).in_pieces(3)).collect(),
        )
        .await;
        let (_, target) = case.request_for(0).unwrap();
        let p = provider(case.api, &server.base_url, &target);
        for (n, (recorded, body)) in case.exchanges.iter().enumerate() {
            let (request, _) = case.request_for(n).unwrap();
            let events = stream(&p, request).await;
            let expected = priced(Decoder::decode_all(case.api, body).unwrap(), prices);
            assert_eq!(events, expected, "{} {n}", case.name);
            let sent = &server.requests()[n];
            assert_eq!(sent.path, format!("/v1{}", case.api.path()), "{}", case.name);
            assert_eq!(
                request_meaning(case.api, &sent.body),
                request_meaning(case.api, recorded),
                "{} {n}",
                case.name
            );
            assert_eq!(auth_of(case.api, sent).as_deref(), Some(KEY), "{}", case.name);
            assert_eq!(sent.header("x-test"), Some("1"), "extra headers are sent");
            checked += 1;
        }
    }
    assert_eq!(checked, 34);
}

/// A tool that answers as the recorded tool did.
struct Recorded {
    def: ToolDef,
    answers: Vec<(String, String)>,
}

impl Tool for Recorded {
    fn spec(&self) -> turnstile_core::ToolSpec {
        turnstile_core::ToolSpec::new(self.def.name.clone())
    }
    fn definition(&self) -> ToolDef {
        self.def.clone()
    }
    fn run(&self, call: ToolCall) -> BoxFuture<turnstile_core::ToolOutput> {
        let answer =
            self.answers.iter().find(|(id, _)| id == call.call.as_str()).map(|a| a.1.clone());
        Box::pin(async move {
            turnstile_core::ToolOutput::ok(answer.unwrap_or_else(|| "no answer".into()))
        })
    }
}

fn simple_case(api: Api) -> Recording {
    cases().into_iter().find(|c| c.api == api && c.name.contains("simple_streaming")).unwrap()
}

#[tokio::test]
async fn a_whole_tool_turn_runs_through_the_host_for_each_api() {
    for api in Api::ALL {
        let case = cases()
            .into_iter()
            .find(|c| c.api == api && c.name.contains("__tool_streaming"))
            .expect("a tool case per API");
        let title = simple_case(api).exchanges[0].1.clone();
        let server = FakeProvider::replaying(&case, &title).await;
        let (first, target) = case.request_for(0).unwrap();
        let (second, _) = case.request_for(1).unwrap();
        let turnstile_wire::RequestMessage::ToolResults(results) = second.messages.last().unwrap()
        else {
            panic!("a second request ends with tool results")
        };
        let answers: Vec<(String, String)> =
            results.iter().map(|r| (r.id.as_str().to_owned(), r.content.clone())).collect();
        let mut tools = ToolSet::new();
        for def in &first.tools {
            tools = tools.with(Recorded { def: def.clone(), answers: answers.clone() });
        }
        let dir = tempfile::tempdir().unwrap();
        let p = provider(api, &server.base_url, &target);
        let host =
            Host::open(HostConfig::new(dir.path().join("s.db")), Arc::new(p), tools).await.unwrap();
        let prompt = first.last_user_text().unwrap().to_owned();
        host.submit(Submit::new("s1", prompt).with_run_id("r1")).await.unwrap();
        let done = host.wait(&turnstile_core::RunId::new("r1")).await.unwrap();
        let text = text_of(api, &case.exchanges[1].1);
        assert_eq!(done.outcome, turnstile_core::Outcome::Completed, "{}: {done:?}", case.name);
        assert_eq!(done.text.as_deref().map(str::trim), Some(text.trim()), "{}", case.name);
        let sent = server.steps();
        assert_eq!(sent.len(), 2, "{}", case.name);
        for (n, (sent, (recorded, _))) in sent.iter().zip(&case.exchanges).enumerate() {
            assert_eq!(
                request_meaning(api, sent),
                request_meaning(api, recorded),
                "{} {n}: {sent:#}",
                case.name,
            );
        }
        host.shutdown().await.unwrap();
    }
}

/// A minimal request for the error paths.
fn request() -> ModelRequest {
    ModelRequest {
        session: turnstile_core::SessionId::new("s"),
        kind: turnstile_wire::RequestKind::Step,
        messages: vec![turnstile_wire::RequestMessage::User {
            text: "hi".into(),
            attachments: vec![],
        }],
        tools: vec![],
    }
}

async fn one(reply: Reply, api: Api) -> Vec<StepEvent> {
    let server = FakeProvider::start(vec![reply]).await;
    stream(&provider(api, &server.base_url, &Target::new("m")), request()).await
}

fn failure(events: &[StepEvent]) -> ProviderError {
    match events {
        [.., StepEvent::Failed { error }] => error.clone(),
        other => panic!("no failure: {other:?}"),
    }
}

#[tokio::test]
async fn http_errors_are_classified_and_the_core_decides() {
    let e = failure(
        &one(
            Reply::status(
                401,
                &[],
                r#"{"error":{"message":"Incorrect API key","type":"invalid_request_error"}}"#,
            ),
            Api::OpenAiChat,
        )
        .await,
    );
    assert!(e.is_unauthorized(), "{e:?}");
    assert_eq!(
        e.message,
        "Incorrect API key (the key of provider `test` came from the command `echo <redacted>`)",
        "the provider's message, where the key came from, and never the key"
    );
    let e = failure(&one(Reply::status(403, &[], "{}"), Api::OpenAiChat).await);
    assert!(!e.is_unauthorized() && !e.is_retryable(), "403 is not the auth signal: {e:?}");
    for status in [408, 409, 500, 529] {
        let e = failure(&one(Reply::status(status, &[], ""), Api::AnthropicMessages).await);
        assert!(e.is_retryable(), "{status}: {e:?}");
        assert_eq!(e.status, Some(status));
    }
    let e = failure(
        &one(
            Reply::status(429, &[("retry-after-ms", "1200"), ("retry-after", "9")], ""),
            Api::OpenAiChat,
        )
        .await,
    );
    assert_eq!((e.header_delay_ms(), e.retry_after), (Some(1200), Some(9000)));
    let e = failure(&one(Reply::status(429, &[("retry-after", "7")], ""), Api::OpenAiChat).await);
    assert_eq!(e.header_delay_ms(), Some(7000));
    let in_10s =
        httpdate::fmt_http_date(std::time::SystemTime::now() + std::time::Duration::from_secs(10));
    let e =
        failure(&one(Reply::status(429, &[("retry-after", &in_10s)], ""), Api::OpenAiChat).await);
    let delay = e.header_delay_ms().expect("a date delay");
    assert!((8_000..=10_000).contains(&delay), "{delay}");
    let e = failure(
        &one(Reply::status(400, &[("x-should-retry", "true")], ""), Api::OpenAiResponses).await,
    );
    assert!(e.is_retryable());
    let e = failure(
        &one(Reply::status(502, &[], "<html>Bad Gateway</html>"), Api::OpenAiResponses).await,
    );
    assert_eq!(e.message, "HTTP 502: <html>Bad Gateway</html>");
    let e = failure(
        &one(
            Reply::status(
                529,
                &[],
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
            ),
            Api::AnthropicMessages,
        )
        .await,
    );
    assert_eq!((e.title.as_deref(), e.message.as_str()), (Some("overloaded error"), "Overloaded"));
}

#[tokio::test]
async fn broken_streams_fail_retryably_and_unknown_events_are_ignored() {
    let case = simple_case(Api::AnthropicMessages);
    let body = case.exchanges[0].1.clone();
    // Cut mid-event: the connection closes inside a chunk of the chunked body.
    let e = failure(
        &one(Reply::Cut { body: body.clone(), bytes: body.len() / 2 }, Api::AnthropicMessages)
            .await,
    );
    assert_eq!(e.class, ErrorClass::Transport, "{e:?}");
    assert!(e.is_retryable());
    // Invalid JSON in a chunk.
    let e = failure(
        &one(
            Reply::sse(b"event: ping\ndata: {\"type\": \"ping\"}\n\ndata: {not json\n\n")
                .in_pieces(3),
            Api::AnthropicMessages,
        )
        .await,
    );
    assert_eq!(e.class, ErrorClass::Transport);
    assert!(e.message.starts_with("invalid anthropic-messages stream at byte 36"), "{}", e.message);
    // A mid-stream error event: overloaded is retryable.
    let events = one(
        Reply::sse(b"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n").in_pieces(3),
        Api::AnthropicMessages,
    )
    .await;
    assert!(failure(&events).is_retryable());
    // An unknown event type is not content: the stream still finishes as recorded.
    let mut with_unknown = b"event: brand_new\ndata: {\"type\":\"brand_new\",\"x\":1}\n\n".to_vec();
    with_unknown.extend_from_slice(&body);
    let events = one(Reply::sse(&with_unknown).in_pieces(3), Api::AnthropicMessages).await;
    let expected = Decoder::decode_all(Api::AnthropicMessages, &body).unwrap();
    assert_eq!(events.len(), expected.len());
    assert!(matches!(events.last(), Some(StepEvent::Finished { .. })));
    // No terminal event: the body ends cleanly but without `message_stop`.
    let cut = &body[..body.windows(18).position(|w| w == b"event: message_sto").unwrap()];
    let e = failure(&one(Reply::sse(cut).in_pieces(3), Api::AnthropicMessages).await);
    assert_eq!(
        (e.class, e.message.as_str()),
        (ErrorClass::Incomplete, "stream ended without a finish")
    );
    // Nobody listening: a transport error.
    let port = turnstile_testkit::local::free_port();
    let p = provider(Api::OpenAiChat, &format!("http://127.0.0.1:{port}/v1"), &Target::new("m"));
    let e = failure(&stream(&p, request()).await);
    assert_eq!(e.class, ErrorClass::Transport, "{e:?}");
}

#[tokio::test]
async fn a_cancel_closes_the_connection_at_once() {
    let server = FakeProvider::routing(|req| {
        if req.is_title() { Reply::status(500, &[], "") } else { Reply::Hang }
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let p = provider(Api::OpenAiChat, &server.base_url, &Target::new("m"));
    let host = Host::open(HostConfig::new(dir.path().join("s.db")), Arc::new(p), ToolSet::new())
        .await
        .unwrap();
    host.submit(Submit::new("s1", "hang please").with_run_id("r1")).await.unwrap();
    // The turn's request is the one that stays open: wait until its head was sent.
    let index = loop {
        server.wait_requests(1).await;
        let requests = server.requests();
        if let Some(i) = requests.iter().position(|r| !r.is_title()) {
            break i;
        }
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    };
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let cancelled_at = Instant::now();
    host.cancel_run(&turnstile_core::RunId::new("r1")).await.unwrap();
    let closed_at = server.wait_closed(index).await.expect("the client closed the connection");
    let done = host.wait(&turnstile_core::RunId::new("r1")).await.unwrap();
    assert_eq!(done.outcome, turnstile_core::Outcome::Cancelled);
    // A figure, not an assertion on time (docs/performance.md).
    eprintln!("cancel to socket closed: {:?}", closed_at.saturating_duration_since(cancelled_at));
    host.shutdown().await.unwrap();
}

#[tokio::test]
async fn preparation_resolves_the_model_and_fails_clearly_without_a_key() {
    let server = FakeProvider::start(vec![]).await;
    let p = provider(Api::OpenAiChat, &server.base_url, &Target::new("m"));
    let info = p.prepare(&turnstile_core::SessionId::new("s")).await.unwrap();
    assert_eq!(info.context_window, 200_000);
    let config = ProviderConfig {
        name: "nokey".into(),
        api: Api::OpenAiChat,
        base_url: server.base_url.clone(),
        key: KeySource::Env("TURNSTILE_TEST_UNSET_KEY_VARIABLE".into()),
        headers: BTreeMap::new(),
        models: BTreeMap::new(),
    };
    let model = turnstile_http::Config::catalogue().resolve(Some("openai-chat/gpt-4o")).unwrap().1;
    let p = HttpProvider::for_model(config, model).unwrap();
    let e = p.prepare(&turnstile_core::SessionId::new("s")).await.unwrap_err();
    assert_eq!(
        e.to_string(),
        "no API key for provider `nokey`: set the environment variable TURNSTILE_TEST_UNSET_KEY_VARIABLE"
    );
    assert!(server.requests().is_empty(), "nothing was sent");
}

#[tokio::test]
async fn a_title_is_the_streamed_text_with_its_priced_usage() {
    let case = simple_case(Api::AnthropicMessages);
    let server = FakeProvider::start(vec![Reply::sse(&case.exchanges[0].1).in_pieces(3)]).await;
    let p = provider(Api::AnthropicMessages, &server.base_url, &Target::new("claude"));
    let (title, usage) = p.title("What is the weather?".into()).await.unwrap();
    let expected = text_of(Api::AnthropicMessages, &case.exchanges[0].1);
    assert_eq!(title, expected);
    let usage = usage.expect("usage");
    assert!(usage.cost_micros > 0, "priced: {usage:?}");
    let sent = &server.requests()[0].body;
    assert!(sent["system"][0]["text"].as_str().unwrap().starts_with("Write a short title"));
    assert!(sent.get("tools").is_none() && sent.get("thinking").is_none(), "{sent}");
}

/// A host on the server at `base_url` with a 1 s stream watchdog and a flight trace in memory
/// (outputs too).
async fn watched_host(
    base_url: &str,
    dir: &std::path::Path,
) -> (Host, turnstile_host::FlightBuffer) {
    let flight = turnstile_host::FlightBuffer::default();
    let mut config = HostConfig::new(dir.join("s.db"));
    config.engine.stream_idle_timeout_ms = 1_000;
    config.trace = Some(turnstile_host::Flight::Memory(flight.clone()));
    config.trace_outputs = true;
    let p = provider(Api::OpenAiChat, base_url, &Target::new("m"));
    (Host::open(config, Arc::new(p), ToolSet::new()).await.unwrap(), flight)
}

#[tokio::test]
async fn headers_then_nothing_the_watchdog_closes_the_stream_and_the_retry_succeeds() {
    let case = simple_case(Api::OpenAiChat);
    let good = case.exchanges[0].1.clone();
    let mut turns = 0;
    let server = FakeProvider::routing(move |req| {
        if req.is_title() {
            return Reply::status(500, &[], "");
        }
        turns += 1;
        if turns == 1 { Reply::Hang } else { Reply::sse(&good).in_pieces(3) }
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let (host, flight) = watched_host(&server.base_url, dir.path()).await;
    host.submit(Submit::new("s1", "hello").with_run_id("r1")).await.unwrap();
    let done = host.wait(&turnstile_core::RunId::new("r1")).await.unwrap();
    assert_eq!(done.outcome, turnstile_core::Outcome::Completed, "{done:?}");
    let expected = text_of(Api::OpenAiChat, &case.exchanges[0].1);
    assert_eq!(done.text.as_deref(), Some(expected.as_str()));
    // The stalled attempt's connection was closed by the client when the watchdog fired.
    let stalled = server.requests().iter().position(|r| !r.is_title()).unwrap();
    assert!(server.wait_closed(stalled).await.is_some());
    assert_eq!(server.steps().len(), 2, "one retry");
    let trace = flight.text();
    assert!(
        trace.contains(r#""timer":"stream_idle""#) && trace.contains(r#""timer":"retry""#),
        "{trace}"
    );
    host.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_server_that_never_accepts_is_cut_by_the_watchdog_and_cancel_run_ends_the_wait() {
    // Bound and listening, never accepting: the kernel completes the handshake and takes the
    // request, and nothing ever answers.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
    let dir = tempfile::tempdir().unwrap();
    let (host, flight) = watched_host(&base_url, dir.path()).await;
    host.submit(Submit::new("s1", "hello").with_run_id("r1")).await.unwrap();
    // Wait (20 s at most) until the watchdog failed the first attempt and a retry is armed.
    let deadline = Instant::now() + std::time::Duration::from_secs(20);
    while !flight.text().contains(r#""timer":"retry""#) {
        assert!(Instant::now() < deadline, "no retry after the stall: {}", flight.text());
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    host.cancel_run(&turnstile_core::RunId::new("r1")).await.unwrap();
    let done = host.wait(&turnstile_core::RunId::new("r1")).await.unwrap();
    assert_eq!(done.outcome, turnstile_core::Outcome::Cancelled);
    host.shutdown().await.unwrap();
    drop(listener);
}

/// A provider of `api` at `base_url` whose key comes from `key`.
fn provider_keyed(api: Api, base_url: &str, key: KeySource) -> HttpProvider {
    let target = Target::new("m");
    let model = ModelConfig {
        name: "m".into(),
        api_model: "m".into(),
        context_window: 200_000,
        max_output_tokens: None,
        reasoning: None,
        images: false,
        max_tokens_field: target.max_tokens_field,
        prices: Prices::default(),
    };
    let config = ProviderConfig {
        name: "test".into(),
        api,
        base_url: base_url.to_owned(),
        key,
        headers: BTreeMap::new(),
        models: BTreeMap::new(),
    };
    HttpProvider::for_model(config, model).expect("a client").with_system_prompt("s")
}

/// Runs one prompt on a host over `provider` to its RunComplete.
async fn run_once(provider: HttpProvider) -> turnstile_host::CompletionRecord {
    let dir = tempfile::tempdir().unwrap();
    let mut config = HostConfig::new(dir.path().join("s.db"));
    config.engine.stream_idle_timeout_ms = 0;
    let host = Host::open(config, Arc::new(provider), ToolSet::new()).await.unwrap();
    host.submit(Submit::new("s1", "hello").with_run_id("r1")).await.unwrap();
    let run = turnstile_core::RunId::new("r1");
    let wait = host.wait(&run);
    let done = tokio::time::timeout(std::time::Duration::from_secs(4), wait)
        .await
        .expect("over in less than the first backoff (5 s): no retry")
        .unwrap();
    host.shutdown().await.unwrap();
    done
}

/// A 200 answer that can never become an event stream (a proxy's HTML page, a whole JSON
/// body) fails at once, with what arrived, and is not retried: before, it was decoded as an
/// empty stream, "stream ended without a finish", and retried for 35 s.
#[tokio::test]
async fn a_200_that_is_not_an_event_stream_names_what_arrived_and_is_not_retried() {
    let page = "<!DOCTYPE html>\n<html><head><title>Sign in to the proxy</title></head></html>";
    let html = Reply::Body {
        status: 200,
        headers: vec![("content-type".into(), "text/html; charset=utf-8".into())],
        body: page.as_bytes().to_vec(),
        pieces: 2,
    };
    let e = failure(&one(html.clone(), Api::OpenAiChat).await);
    assert!(!e.is_retryable() && e.class == ErrorClass::Provider, "{e:?}");
    assert!(
        e.message.contains("`text/html; charset=utf-8`")
            && e.message.contains("<!DOCTYPE html> <html><head><title>Sign in"),
        "{}",
        e.message
    );
    let json = Reply::Body {
        status: 200,
        headers: vec![("content-type".into(), "application/json".into())],
        body: br#"{"id":"msg_1","type":"message","content":[{"type":"text","text":"Hi"}]}"#
            .to_vec(),
        pieces: 1,
    };
    let e = failure(&one(json, Api::AnthropicMessages).await);
    assert!(!e.is_retryable());
    assert!(e.message.contains("`application/json`") && e.message.contains("msg_1"), "{e:?}");
    // A stream without a content type is still decoded.
    let case = simple_case(Api::AnthropicMessages);
    let bare =
        Reply::Body { status: 200, headers: vec![], body: case.exchanges[0].1.clone(), pieces: 5 };
    let events = one(bare, Api::AnthropicMessages).await;
    assert!(matches!(events.last(), Some(StepEvent::Finished { .. })), "{events:?}");
    // Through the host: one request, and the run fails with the message at once.
    let server = FakeProvider::routing(move |_| html.clone()).await;
    let done = run_once(provider(Api::OpenAiChat, &server.base_url, &Target::new("m"))).await;
    assert_eq!(done.outcome, turnstile_core::Outcome::Failed);
    let error = done.error.expect("an error");
    assert!(error.message.contains("text/html"), "{error:?}");
    assert_eq!(server.steps().len(), 1, "not retried");
}

/// A refused key: the failure keeps the provider's message and says which variable the key
/// came from (a refresh cannot change a variable, so it fails at once).
#[tokio::test]
async fn a_refused_key_says_what_the_provider_said_and_where_the_key_came_from() {
    let refused =
        r#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error"}}"#;
    let server = FakeProvider::routing(move |_| Reply::status(401, &[], refused)).await;
    // Cargo sets this variable for every test process: a key that is always there.
    let key = KeySource::Env("CARGO_PKG_NAME".into());
    let done = run_once(provider_keyed(Api::OpenAiChat, &server.base_url, key)).await;
    assert_eq!(done.outcome, turnstile_core::Outcome::Failed);
    let error = done.error.expect("an error");
    assert_eq!(error.title, "Unauthorized");
    assert!(error.message.starts_with("The credential refresh failed."), "{error:?}");
    assert!(
        error.message.contains("Incorrect API key provided")
            && error.message.contains("came from CARGO_PKG_NAME"),
        "{error:?}"
    );
}
