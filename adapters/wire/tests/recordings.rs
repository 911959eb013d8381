//! Every recorded provider stream of `tests/fixtures/providers/` through the real decoders and
//! encoders: the decoded events are a reviewed snapshot, the same however the bytes are split,
//! a valid sequence; and the request this crate builds for each interaction (the second one
//! carrying the decoded tool calls, reasoning and the tool results) means what the recorded
//! client sent.

use serde_json::Value;
use turnstile_wire::recording::request_meaning;
use turnstile_wire::turnstile_core::StepEvent;
use turnstile_wire::{Api, Decoder, MaxTokensField, ModelRequest, RequestKind, Target, encode};

use turnstile_testkit::fixtures::cases;
use turnstile_wire::decode::check_sequence;

fn decode_in_pieces(api: Api, body: &[u8], cuts: &[usize]) -> Vec<StepEvent> {
    let mut d = Decoder::new(api);
    let mut out = Vec::new();
    let mut at = 0;
    for &cut in cuts.iter().chain(std::iter::once(&body.len())) {
        d.feed(&body[at..cut], &mut out).expect("a recorded stream decodes");
        at = cut;
    }
    d.finish(&mut out).expect("a recorded stream decodes");
    out
}

#[test]
fn every_recorded_stream_decodes_to_its_snapshot_whatever_the_split() {
    let mut count = 0;
    for case in cases() {
        for (n, (_, body)) in case.exchanges.iter().enumerate() {
            let events = Decoder::decode_all(case.api, body).expect("a recorded stream decodes");
            check_sequence(&events).unwrap_or_else(|e| panic!("{} {n}: {e}", case.name));
            assert!(
                matches!(events.last(), Some(StepEvent::Finished { usage: Some(_), .. })),
                "{} {n}: every recording finished with usage",
                case.name
            );
            // Byte by byte, and cut in two at every byte (at 400 places for long bodies).
            let byte_by_byte: Vec<usize> = (1..body.len()).collect();
            assert_eq!(
                decode_in_pieces(case.api, body, &byte_by_byte),
                events,
                "{} {n}",
                case.name
            );
            let step = (body.len() / 400).max(1);
            for cut in (0..body.len()).step_by(step) {
                assert_eq!(
                    decode_in_pieces(case.api, body, &[cut]),
                    events,
                    "{} {n} cut {cut}",
                    case.name
                );
            }
            let lines: Vec<String> = events
                .iter()
                .map(|e| serde_json::to_string(e).expect("events serialize"))
                .collect();
            insta::assert_snapshot!(
                format!("{}__{}__{n:02}", case.api, case.name),
                lines.join("\n")
            );
            count += 1;
        }
    }
    assert_eq!(count, 34, "every recorded response was decoded");
}

#[test]
fn the_requests_built_for_each_interaction_mean_what_the_recorded_client_sent() {
    let mut compared = 0;
    for case in cases() {
        for n in 0..case.exchanges.len() {
            let recorded = &case.exchanges[n].0;
            let (request, target) = case.request_for(n).unwrap();
            let ours = encode(case.api, &request, &target);
            assert_eq!(
                request_meaning(case.api, &ours),
                request_meaning(case.api, recorded),
                "{} interaction {n}:\nours: {ours:#}",
                case.name
            );
            assert_eq!(ours["stream"], Value::Bool(true));
            compared += 1;
        }
    }
    assert_eq!(compared, 34);
}

#[test]
fn responses_reasoning_is_kept_and_sent_back_with_its_encrypted_content() {
    let case = cases()
        .into_iter()
        .find(|c| c.api == Api::OpenAiResponses && c.name.contains("Thinking"))
        .expect("the Responses thinking recording");
    let (request, target) = case.request_for(1).unwrap();
    let body = encode(case.api, &request, &target);
    let items: Vec<&Value> =
        body["input"].as_array().unwrap().iter().filter(|i| i["type"] == "reasoning").collect();
    assert_eq!(items.len(), 1, "{body:#}");
    assert!(items[0]["encrypted_content"].as_str().is_some_and(|s| s.len() > 100));
    assert!(
        body["include"].as_array().unwrap().contains(&Value::from("reasoning.encrypted_content"))
    );
    assert_eq!(body["store"], Value::Bool(false));
}

#[test]
fn anthropic_cache_markers_on_the_system_prompt_the_last_tool_and_the_newest_two_messages() {
    let case = cases()
        .into_iter()
        .find(|c| c.api == Api::AnthropicMessages && c.name.contains("multi_tool"))
        .expect("the Anthropic multi-tool recording");
    let (request, target) = case.request_for(1).unwrap();
    let body = encode(case.api, &request, &target);
    assert_eq!(body["system"][0]["cache_control"]["type"], "ephemeral");
    let tools = body["tools"].as_array().unwrap();
    assert!(tools.last().unwrap().get("cache_control").is_some());
    assert!(tools.iter().rev().skip(1).all(|t| t.get("cache_control").is_none()));
    let messages = body["messages"].as_array().unwrap();
    let marked: Vec<bool> = messages
        .iter()
        .map(|m| m["content"].as_array().unwrap().iter().any(|b| b.get("cache_control").is_some()))
        .collect();
    let n = marked.len();
    assert!(n >= 3, "{body:#}");
    assert!(marked[n - 1] && marked[n - 2] && !marked[..n - 2].iter().any(|m| *m), "{marked:?}");
}

#[test]
fn chat_output_limit_field_and_reasoning_effort_follow_the_target() {
    let request = ModelRequest {
        session: turnstile_wire::turnstile_core::SessionId::new("s"),
        kind: RequestKind::Step,
        messages: vec![],
        tools: vec![],
    };
    let mut target = Target::new("gpt-5");
    target.max_output_tokens = Some(100);
    target.max_tokens_field = MaxTokensField::MaxCompletionTokens;
    target.reasoning = Some(turnstile_wire::Reasoning::Effort("low".into()));
    let body = encode(Api::OpenAiChat, &request, &target);
    assert_eq!((body["max_completion_tokens"].as_u64(), body.get("max_tokens")), (Some(100), None));
    assert_eq!(body["reasoning_effort"], "low");
    assert!(body.get("tools").is_none(), "no tools, no tool_choice: {body}");
}
