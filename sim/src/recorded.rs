//! The simulated provider's recorded streams: real provider responses (the repository's
//! `tests/fixtures/providers/`) served through the real decoder of their API, so a sweep runs
//! the wire path production runs. Each answer takes a recorded body and sends it in seeded
//! pieces with seeded gaps, sometimes cut short (the stream ends without its terminal event),
//! stalled (nothing more arrives: only the core's watchdog, a cancel or a shutdown ends it),
//! or with a byte changed (a decoding error, reported as the HTTP provider reports it; or,
//! inside a text, another text that still decodes: the world's checks hold the store to what
//! was decoded, not to the recording).

use turnstile_core::{CallId, StepEvent};
use turnstile_wire::{Api, Decoder};

use crate::rng::Rng;
use crate::world::act::Act;

macro_rules! body {
    ($api:expr, $case:literal, $n:literal) => {
        (
            $api,
            include_bytes!(concat!(
                "../../tests/fixtures/providers/",
                $case,
                "/",
                $n,
                ".response.body"
            ))
            .as_slice(),
        )
    };
}

/// The recorded bodies the world serves: every API, text, reasoning and tool calls.
const BODIES: &[(Api, &[u8])] = &[
    body!(Api::OpenAiChat, "openai-chat/TestOpenAICommon__openai-gpt-4o__simple_streaming", "00"),
    body!(
        Api::OpenAiChat,
        "openai-chat/TestOpenAICommon__openai-gpt-4o__multi_tool_streaming",
        "00"
    ),
    body!(Api::OpenAiChat, "openai-chat/TestOpenAICommon__openai-gpt-4o__tool_streaming", "01"),
    body!(
        Api::OpenAiChat,
        "openai-chat/TestOpenAICompatibleThinking__zai-glm-4-7-flash__thinking-streaming",
        "00"
    ),
    body!(
        Api::OpenAiChat,
        "openai-chat/TestOpenAICompatibleCommon__groq-kimi-k2__tool_streaming",
        "00"
    ),
    body!(
        Api::OpenAiResponses,
        "openai-responses/TestOpenAIResponsesCommon__openai-gpt-5__simple_streaming",
        "00"
    ),
    body!(
        Api::OpenAiResponses,
        "openai-responses/TestOpenAIResponsesCommon__openai-gpt-5__multi_tool_streaming",
        "00"
    ),
    body!(
        Api::OpenAiResponses,
        "openai-responses/TestOpenAIResponsesCommon__openai-gpt-5__tool_streaming",
        "01"
    ),
    body!(
        Api::AnthropicMessages,
        "anthropic-messages/TestAnthropicCommon__claude-sonnet-4__simple_streaming",
        "00"
    ),
    body!(
        Api::AnthropicMessages,
        "anthropic-messages/TestAnthropicCommon__claude-sonnet-4__multi_tool_streaming",
        "00"
    ),
    body!(
        Api::AnthropicMessages,
        "anthropic-messages/TestAnthropicThinking__claude-sonnet-4__thinking-streaming",
        "00"
    ),
    body!(
        Api::AnthropicMessages,
        "anthropic-messages/TestAnthropicThinking__claude-sonnet-4__thinking-streaming",
        "01"
    ),
];

/// One answer from a recorded body. `tag` (the request's number) makes the recorded call ids
/// unique per request, as a real model's are.
pub fn answer(rng: &mut Rng, tag: u64) -> Vec<Act> {
    let (api, body) = BODIES[rng.below(BODIES.len() as u64) as usize];
    let mut body = body.to_vec();
    let variant = rng.below(100);
    let mut stall_at = None;
    match variant {
        // Cut: the body ends early (the decoder then reports a stream without its finish).
        0..=7 => body.truncate(rng.below(body.len() as u64) as usize),
        // Stalled: the stream stops arriving and the connection stays open.
        8..=12 => stall_at = Some(rng.below(body.len() as u64) as usize),
        // Mutated: one byte changed.
        13..=17 => {
            let i = rng.below(body.len() as u64) as usize;
            body[i] ^= 1 << rng.below(8);
        }
        _ => {}
    }
    let mut out = Vec::new();
    let mut decoder = Decoder::new(api);
    let mut events = Vec::new();
    let mut at = 0;
    while at < body.len() {
        let end = (at + rng.between(1, 2_000) as usize).min(body.len());
        let end = stall_at.map_or(end, |s| end.min(s.max(at + 1)));
        out.push(Act::Wait(rng.between(0, 30)));
        let fed = decoder.feed(&body[at..end], &mut events);
        at = end;
        if let Err(e) = fed {
            events.push(StepEvent::Failed { error: e.to_provider_error() });
        }
        out.extend(events.drain(..).map(|e| Act::Send(retag(e, tag))));
        if decoder.is_done() {
            return out;
        }
        if stall_at.is_some_and(|s| at >= s) {
            out.push(Act::Hang);
            return out;
        }
    }
    if let Err(e) = decoder.finish(&mut events) {
        events.push(StepEvent::Failed { error: e.to_provider_error() });
    }
    out.extend(events.drain(..).map(|e| Act::Send(retag(e, tag))));
    out
}

fn retag(event: StepEvent, tag: u64) -> StepEvent {
    let id = |id: CallId| CallId::new(format!("{}-q{tag}", id.as_str()));
    match event {
        StepEvent::ToolInputStart { id: i, name } => StepEvent::ToolInputStart { id: id(i), name },
        StepEvent::ToolCall { id: i, name, input } => {
            StepEvent::ToolCall { id: id(i), name, input }
        }
        other => other,
    }
}
