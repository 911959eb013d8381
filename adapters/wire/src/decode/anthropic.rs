//! Anthropic messages: `message_start`, content blocks (`text`, `thinking` with its signature,
//! `redacted_thinking`, `tool_use` with `input_json_delta`), `message_delta` with the stop
//! reason and the output usage, `message_stop`; `ping` is a keep-alive; an `error` event is a
//! mid-stream failure (`overloaded_error` is retryable).

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Value, json};
use turnstile_core::{FinishReason, Usage};

use super::sink::{Sink, count_of, parse, str_of};
use crate::sse::Frame;

#[derive(Debug, Default)]
pub(super) struct Anthropic {
    blocks: BTreeMap<u64, Block>,
    usage: Option<Usage>,
    stop_reason: Option<String>,
}

#[derive(Debug)]
enum Block {
    Text,
    Thinking { thinking: String, signature: String },
    Redacted { data: Value },
    Tool { id: String, name: String, json: String },
    Other,
}

#[derive(Deserialize)]
struct Event {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    message: Option<Value>,
    #[serde(default)]
    index: Option<u64>,
    #[serde(default)]
    content_block: Option<Value>,
    #[serde(default)]
    delta: Option<Value>,
    #[serde(default)]
    usage: Option<Value>,
    #[serde(default)]
    error: Option<Value>,
}

impl Anthropic {
    pub(super) fn frame(&mut self, frame: &Frame, sink: &mut Sink<'_>) -> Result<(), String> {
        let data = frame.data.trim();
        if data.is_empty() {
            return Ok(());
        }
        let event: Event = parse(data, "an Anthropic event")?;
        let index = event.index.unwrap_or(0);
        match event.kind.as_str() {
            "message_start" => {
                if let Some(u) = event.message.as_ref().and_then(|m| m.get("usage")) {
                    self.merge_usage(u);
                }
            }
            "content_block_start" => {
                let block = event.content_block.unwrap_or(Value::Null);
                let new = match str_of(&block, "type") {
                    Some("text") => {
                        sink.text(str_of(&block, "text").unwrap_or_default());
                        Block::Text
                    }
                    Some("thinking") => {
                        let thinking = str_of(&block, "thinking").unwrap_or_default().to_owned();
                        sink.reasoning(&thinking);
                        let signature = str_of(&block, "signature").unwrap_or_default().to_owned();
                        Block::Thinking { thinking, signature }
                    }
                    Some("redacted_thinking") => {
                        sink.reasoning("");
                        Block::Redacted { data: block.get("data").cloned().unwrap_or(Value::Null) }
                    }
                    Some("tool_use") => {
                        let id = str_of(&block, "id").unwrap_or_default().to_owned();
                        let name = str_of(&block, "name").unwrap_or_default().to_owned();
                        sink.tool_start(&id, &name);
                        Block::Tool { id, name, json: String::new() }
                    }
                    _ => Block::Other,
                };
                self.blocks.insert(index, new);
            }
            "content_block_delta" => {
                let delta = event.delta.unwrap_or(Value::Null);
                match (self.blocks.get_mut(&index), str_of(&delta, "type")) {
                    (Some(Block::Text), Some("text_delta")) => {
                        sink.text(str_of(&delta, "text").unwrap_or_default());
                    }
                    (Some(Block::Thinking { thinking, .. }), Some("thinking_delta")) => {
                        let text = str_of(&delta, "thinking").unwrap_or_default();
                        thinking.push_str(text);
                        sink.reasoning(text);
                    }
                    (Some(Block::Thinking { signature, .. }), Some("signature_delta")) => {
                        signature.push_str(str_of(&delta, "signature").unwrap_or_default());
                    }
                    (Some(Block::Tool { json, .. }), Some("input_json_delta")) => {
                        json.push_str(str_of(&delta, "partial_json").unwrap_or_default());
                    }
                    _ => {}
                }
            }
            "content_block_stop" => {
                match self.blocks.remove(&index) {
                    Some(Block::Thinking { thinking, signature }) => {
                        sink.reasoning_item(json!({"type": "thinking", "thinking": thinking, "signature": signature}));
                    }
                    Some(Block::Redacted { data }) => {
                        sink.reasoning_item(json!({"type": "redacted_thinking", "data": data}));
                    }
                    Some(Block::Tool { id, name, json }) => sink.tool_call(&id, &name, &json),
                    Some(Block::Text | Block::Other) | None => {}
                }
            }
            "message_delta" => {
                if let Some(reason) = event.delta.as_ref().and_then(|d| str_of(d, "stop_reason")) {
                    self.stop_reason = Some(reason.to_owned());
                }
                if let Some(u) = &event.usage {
                    self.merge_usage(u);
                }
            }
            "message_stop" => {
                let reason = match self.stop_reason.as_deref() {
                    Some("end_turn" | "stop_sequence") => FinishReason::Stop,
                    Some("max_tokens" | "model_context_window_exceeded") => FinishReason::Length,
                    Some("tool_use") => FinishReason::ToolCalls,
                    Some("refusal") => FinishReason::ContentFilter,
                    _ => FinishReason::Other,
                };
                sink.finish(reason, self.usage);
            }
            "error" => {
                let error = event.error.unwrap_or(Value::Null);
                sink.fail(crate::error::stream_error(
                    str_of(&error, "type"),
                    str_of(&error, "message"),
                ));
            }
            // `ping` and whatever a later version adds: no content.
            _ => {}
        }
        Ok(())
    }

    /// `message_start` has the input side; `message_delta` the cumulative output (and, in
    /// newer versions, the input side again): a field present in a later event wins.
    fn merge_usage(&mut self, u: &Value) {
        let usage = self.usage.get_or_insert_with(Usage::default);
        let set = |key: &str, field: &mut u64| {
            if u.get(key).is_some_and(Value::is_u64) {
                *field = count_of(u, key);
            }
        };
        set("input_tokens", &mut usage.input_tokens);
        set("output_tokens", &mut usage.output_tokens);
        set("cache_read_input_tokens", &mut usage.cache_read_tokens);
        set("cache_creation_input_tokens", &mut usage.cache_creation_tokens);
    }
}
