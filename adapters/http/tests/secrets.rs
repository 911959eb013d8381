//! Keys never reach the store, the flight trace, the recordings or a logged error, even when
//! a server echoes the key back; and a recorded run replays offline to the same result.

use std::collections::BTreeMap;
use std::sync::Arc;

use turnstile_core::{Outcome, RunId, Submit};
use turnstile_host::{Flight, Host, HostConfig, ToolSet};
use turnstile_http::{HttpProvider, KeySource, ModelConfig, ProviderConfig};
use turnstile_testkit::fixtures::cases;
use turnstile_testkit::provider::{FakeProvider, Reply};
use turnstile_wire::recording::{Recording, request_meaning};
use turnstile_wire::{Api, MaxTokensField, Prices};

const KEY: &str = "sk-turnstile-secret-51c0ffee";

fn provider(base_url: &str) -> HttpProvider {
    let config = ProviderConfig {
        name: "test".into(),
        api: Api::OpenAiChat,
        base_url: base_url.to_owned(),
        key: KeySource::Command(vec!["echo".into(), KEY.into()]),
        headers: BTreeMap::new(),
        models: BTreeMap::new(),
    };
    let model = ModelConfig {
        name: "gpt-4o".into(),
        api_model: "gpt-4o".into(),
        context_window: 128_000,
        max_output_tokens: Some(4000),
        reasoning: None,
        images: false,
        max_tokens_field: MaxTokensField::MaxTokens,
        prices: Prices::default(),
    };
    HttpProvider::for_model(config, model)
        .unwrap()
        .with_system_prompt("You are a helpful assistant")
}

fn simple() -> Recording {
    cases()
        .into_iter()
        .find(|c| c.name == "TestOpenAICommon__openai-gpt-4o__simple_streaming")
        .unwrap()
}

#[tokio::test]
async fn the_key_reaches_the_server_and_nothing_else_and_the_recording_replays() {
    let case = simple();
    let title = case.exchanges[0].1.clone();
    let mut turns = vec![Reply::sse(&case.exchanges[0].1).in_pieces(3)];
    let echo = format!(
        r#"{{"error":{{"message":"Incorrect API key provided: {KEY}","type":"invalid_request_error"}}}}"#
    );
    turns.push(Reply::status(401, &[], &echo));
    turns.reverse();
    let server = FakeProvider::routing(move |req| {
        if req.is_title() {
            Reply::sse(&title).in_pieces(3)
        } else {
            turns.pop().unwrap_or_else(|| Reply::status(500, &[], ""))
        }
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let recordings = dir.path().join("recordings");
    let mut config = HostConfig::new(dir.path().join("store.db"));
    config.trace = Some(Flight::File(dir.path().join("flight.jsonl")));
    config.trace_outputs = true;
    let p = provider(&server.base_url).with_recordings(&recordings, "run").unwrap();
    assert!(!format!("{p:?}").contains(KEY));
    let host = Host::open(config, Arc::new(p), ToolSet::new()).await.unwrap();
    let prompt = case.request_for(0).unwrap().0.last_user_text().unwrap().to_owned();
    host.submit(Submit::new("s1", prompt.clone()).with_run_id("ok")).await.unwrap();
    let ok = host.wait(&RunId::new("ok")).await.unwrap();
    assert_eq!(ok.outcome, Outcome::Completed);
    // The second session's request is refused with an error text that echoes the key.
    host.submit(Submit::new("s2", "again").with_run_id("refused")).await.unwrap();
    let refused = host.wait(&RunId::new("refused")).await.unwrap();
    assert_eq!(refused.outcome, Outcome::Failed);
    assert_eq!(refused.error.as_ref().map(|e| e.title.as_str()), Some("Unauthorized"));
    assert!(!format!("{ok:?}{refused:?}").contains(KEY));
    host.shutdown().await.unwrap();
    // The echoed text reached the core (the trace has every input), without the key.
    let trace = std::fs::read_to_string(dir.path().join("flight.jsonl")).unwrap();
    assert!(trace.contains("Incorrect API key provided: <redacted>"), "{trace}");

    // The server got the key with every request.
    let requests = server.requests();
    assert!(requests.len() >= 3);
    assert!(requests.iter().all(|r| r.header("authorization") == Some(&format!("Bearer {KEY}"))));
    // Nothing written holds it: the store (and its journal), the trace, the recordings.
    let written = turnstile_testkit::local::files_under(dir.path());
    assert!(written.iter().any(|f| f.ends_with("store.db")));
    assert!(written.iter().any(|f| f.ends_with("flight.jsonl")));
    assert!(written.iter().filter(|f| f.starts_with(&recordings)).count() >= 6, "{written:?}");
    turnstile_testkit::local::assert_absent_under(dir.path(), KEY);

    // The recording of session s1 replays offline: the same answers to the same requests.
    let recorded = Recording::read(&recordings.join("openai-chat").join("run-s1")).unwrap();
    assert_eq!(recorded.exchanges.len(), 1);
    assert_eq!(recorded.exchanges[0].1, case.exchanges[0].1, "the bytes as received");
    assert_eq!(recorded.case.interactions[0].status, 200);
    assert!(
        recorded.case.interactions[0]
            .headers
            .iter()
            .all(|(k, _)| !k.eq_ignore_ascii_case("authorization"))
    );
    let titles = Recording::read(&recordings.join("openai-chat").join("run-titles")).unwrap();
    assert_eq!(titles.exchanges.len(), 2, "one title per new session");
    let replay = FakeProvider::replaying(&recorded, &titles.exchanges[0].1).await;
    let dir2 = tempfile::tempdir().unwrap();
    let host = Host::open(
        HostConfig::new(dir2.path().join("store.db")),
        Arc::new(provider(&replay.base_url)),
        ToolSet::new(),
    )
    .await
    .unwrap();
    host.submit(Submit::new("s1", prompt).with_run_id("ok")).await.unwrap();
    let again = host.wait(&RunId::new("ok")).await.unwrap();
    assert_eq!((again.outcome, again.text.clone()), (ok.outcome, ok.text.clone()));
    let sent = replay.steps();
    assert_eq!(
        request_meaning(Api::OpenAiChat, &sent[0]),
        request_meaning(Api::OpenAiChat, &recorded.exchanges[0].0)
    );
    host.shutdown().await.unwrap();
}
