//! The recorded cases and what the tests share about them.

use std::path::{Path, PathBuf};

use serde_json::Value;
use turnstile_wire::recording::{Case, request_file, request_meaning, response_file};
use turnstile_wire::turnstile_core::{CallId, StepEvent};
use turnstile_wire::{
    Api, Decoder, MaxTokensField, ModelRequest, Reasoning, RequestCall, RequestKind,
    RequestMessage, RequestResult, Target, ToolDef,
};

/// One recorded case.
#[derive(Debug)]
pub struct Recorded {
    pub name: String,
    pub api: Api,
    pub interactions: Vec<Exchange>,
}

#[derive(Debug, Default)]
pub struct Exchange {
    pub request: Value,
    pub response: Vec<u8>,
}

pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/providers")
}

/// Every case, in name order.
pub fn cases() -> Vec<Recorded> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    for api in std::fs::read_dir(fixtures()).expect("the fixtures folder") {
        let api = api.unwrap().path();
        if api.is_dir() {
            dirs.extend(std::fs::read_dir(&api).unwrap().map(|d| d.unwrap().path()));
        }
    }
    dirs.sort();
    dirs.iter()
        .map(|dir| {
            let case: Case =
                serde_json::from_slice(&std::fs::read(dir.join("case.json")).unwrap()).unwrap();
            let api = Api::from_name(&case.api).expect("a known API");
            let interactions = (0..case.interactions.len())
                .map(|n| Exchange {
                    request: serde_json::from_slice(
                        &std::fs::read(dir.join(request_file(n))).unwrap(),
                    )
                    .unwrap(),
                    response: std::fs::read(dir.join(response_file(n))).unwrap(),
                })
                .collect();
            let name = format!("{}__{}", case.api, dir.file_name().unwrap().to_string_lossy());
            Recorded { name, api, interactions }
        })
        .collect()
}

/// A valid event sequence: one reasoning section at most (start, deltas, end), a tool call
/// only after its start and once, exactly one terminal event, last.
pub fn check_sequence(events: &[StepEvent]) -> Result<(), String> {
    #[derive(PartialEq)]
    enum R {
        None,
        Open,
        Ended,
    }
    let mut reasoning = R::None;
    let mut started: Vec<&CallId> = Vec::new();
    let mut called: Vec<&CallId> = Vec::new();
    for (i, e) in events.iter().enumerate() {
        let last = i + 1 == events.len();
        match e {
            StepEvent::ReasoningStart if reasoning == R::None => reasoning = R::Open,
            StepEvent::ReasoningDelta { .. } if reasoning == R::Open => {}
            StepEvent::ReasoningEnd { .. } if reasoning == R::Open => reasoning = R::Ended,
            StepEvent::TextDelta { text } if !text.is_empty() && reasoning != R::Open => {}
            StepEvent::ToolInputStart { id, .. }
                if reasoning != R::Open && !started.contains(&id) =>
            {
                started.push(id);
            }
            StepEvent::ToolCall { id, input, .. }
                if started.contains(&id) && !called.contains(&id) && !input.is_empty() =>
            {
                called.push(id);
            }
            StepEvent::Finished { .. } if last && reasoning != R::Open => {}
            StepEvent::Failed { .. } if last => {}
            other => return Err(format!("event {i} out of place: {other:?} in {events:?}")),
        }
    }
    match events.last() {
        Some(StepEvent::Finished { .. } | StepEvent::Failed { .. }) => Ok(()),
        _ => Err(format!("no terminal event: {events:?}")),
    }
}

/// The request this crate should build for interaction `n` of a case, and its target: the
/// recorded system prompt, user messages and tools; for a second interaction, the assistant
/// message decoded from the first response and the recorded tool results.
pub fn request_from_recording(case: &Recorded, n: usize) -> (ModelRequest, Target) {
    let first = &case.interactions[0].request;
    let meaning = request_meaning(case.api, first);
    let mut target = Target::new(first["model"].as_str().unwrap());
    let mut messages = Vec::new();
    for item in meaning["conversation"].as_array().unwrap() {
        match item["role"].as_str() {
            Some("system") => target.system = Some(item["text"].as_str().unwrap().to_owned()),
            Some("user") => messages.push(RequestMessage::User {
                text: item["text"].as_str().unwrap().to_owned(),
                attachments: vec![],
            }),
            other => panic!("{}: a first request with a {other:?} message", case.name),
        }
    }
    target.max_output_tokens = ["max_tokens", "max_completion_tokens", "max_output_tokens"]
        .iter()
        .find_map(|k| first[k].as_u64());
    if first.get("max_completion_tokens").is_some() {
        target.max_tokens_field = MaxTokensField::MaxCompletionTokens;
    }
    target.reasoning = first["reasoning_effort"]
        .as_str()
        .or(first["reasoning"]["effort"].as_str())
        .map(|e| Reasoning::Effort(e.to_owned()))
        .or(first["thinking"]["budget_tokens"].as_u64().map(Reasoning::BudgetTokens));
    let tools = meaning["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            ToolDef::new(t["name"].as_str().unwrap(), t["description"].as_str().unwrap_or_default())
                .with_schema(t["schema"].clone())
        })
        .collect();
    if n == 1 {
        let events = Decoder::decode_all(case.api, &case.interactions[0].response).unwrap();
        messages.push(assistant(&events));
        let second = request_meaning(case.api, &case.interactions[1].request);
        let results = second["conversation"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| i["role"] == "tool")
            .map(|i| RequestResult {
                id: CallId::new(i["answers"].as_str().unwrap()),
                content: i["text"].as_str().unwrap().to_owned(),
                is_error: false,
            })
            .collect();
        messages.push(RequestMessage::ToolResults(results));
    }
    let request = ModelRequest {
        session: turnstile_wire::turnstile_core::SessionId::new("s"),
        kind: RequestKind::Step,
        messages,
        tools,
    };
    (request, target)
}

/// The assistant message a stream's events make.
pub fn assistant(events: &[StepEvent]) -> RequestMessage {
    let mut text = String::new();
    let mut reasoning: Option<(String, Option<String>)> = None;
    let mut calls = Vec::new();
    for e in events {
        match e {
            StepEvent::ReasoningStart => reasoning = Some((String::new(), None)),
            StepEvent::ReasoningDelta { text } => reasoning.as_mut().unwrap().0.push_str(text),
            StepEvent::ReasoningEnd { signature } => {
                reasoning.as_mut().unwrap().1.clone_from(signature)
            }
            StepEvent::TextDelta { text: t } => text.push_str(t),
            StepEvent::ToolCall { id, name, input } => {
                calls.push(RequestCall {
                    id: id.clone(),
                    name: name.clone(),
                    input: input.clone(),
                });
            }
            _ => {}
        }
    }
    RequestMessage::Assistant { text, reasoning, calls }
}
