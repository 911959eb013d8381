//! OpenAI Responses (`POST /v1/responses`): typed events, each with its `type`.
//!
//! Output items: `reasoning` (summary text deltas become the reasoning section; the item with
//! its encrypted content is kept and sent back), `message` (output text deltas), and
//! `function_call` (argument deltas by item id, complete at the item's `done`). The response
//! ends with `response.completed` (finish `tool_calls` when it called a function, else `stop`),
//! `response.incomplete` (the reason: `max_output_tokens` is `length`), or `response.failed`;
//! a top-level `error` event is a mid-stream failure. Usage with cached tokens comes with the
//! final response.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;
use turnstile_core::{FinishReason, Usage};

use super::sink::{Sink, count_of, parse, str_of};
use crate::sse::Frame;

#[derive(Debug, Default)]
pub(super) struct Responses {
    /// Function calls by item id: call id, name, arguments so far.
    calls: BTreeMap<String, (String, String, String)>,
    called: bool,
    /// Reasoning text was shown: a later summary part is separated by a blank line.
    reasoning_text: bool,
}

#[derive(Deserialize)]
struct Event {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    item: Option<Value>,
    #[serde(default)]
    item_id: Option<String>,
    #[serde(default)]
    delta: Option<String>,
    #[serde(default)]
    response: Option<Value>,
    #[serde(default)]
    code: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

impl Responses {
    pub(super) fn frame(&mut self, frame: &Frame, sink: &mut Sink<'_>) -> Result<(), String> {
        let data = frame.data.trim();
        if data.is_empty() || data == "[DONE]" {
            return Ok(());
        }
        let event: Event = parse(data, "a Responses event")?;
        match event.kind.as_str() {
            "response.output_item.added" => {
                let item = event.item.unwrap_or(Value::Null);
                match str_of(&item, "type") {
                    Some("reasoning") => sink.reasoning(""),
                    Some("function_call") => {
                        let item_id = str_of(&item, "id").unwrap_or_default().to_owned();
                        let call_id = str_of(&item, "call_id").unwrap_or(&item_id).to_owned();
                        let name = str_of(&item, "name").unwrap_or_default().to_owned();
                        let args = str_of(&item, "arguments").unwrap_or_default().to_owned();
                        sink.tool_start(&call_id, &name);
                        self.calls.insert(item_id, (call_id, name, args));
                    }
                    Some("message") => sink.close_reasoning(),
                    _ => {}
                }
            }
            "response.reasoning_summary_part.added" if self.reasoning_text => {
                sink.reasoning("\n\n")
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                let delta = event.delta.unwrap_or_default();
                self.reasoning_text |= !delta.is_empty();
                sink.reasoning(&delta);
            }
            "response.output_text.delta" | "response.refusal.delta" => {
                sink.text(&event.delta.unwrap_or_default());
            }
            "response.function_call_arguments.delta" => {
                if let Some(call) = event.item_id.and_then(|id| self.calls.get_mut(&id)) {
                    call.2.push_str(&event.delta.unwrap_or_default());
                }
            }
            "response.output_item.done" => {
                let item = event.item.unwrap_or(Value::Null);
                match str_of(&item, "type") {
                    Some("reasoning") => sink.reasoning_item(item),
                    Some("function_call") => {
                        let item_id = str_of(&item, "id").unwrap_or_default();
                        let (call_id, name, args) = match self.calls.remove(item_id) {
                            Some(c) => c,
                            None => {
                                let call_id =
                                    str_of(&item, "call_id").unwrap_or(item_id).to_owned();
                                let name = str_of(&item, "name").unwrap_or_default().to_owned();
                                sink.tool_start(&call_id, &name);
                                (call_id, name, String::new())
                            }
                        };
                        // The item's own arguments are the whole text; the deltas are a preview.
                        let args = str_of(&item, "arguments").map_or(args, str::to_owned);
                        self.called = true;
                        sink.tool_call(&call_id, &name, &args);
                    }
                    _ => {}
                }
            }
            "response.completed" | "response.incomplete" => {
                let response = event.response.unwrap_or(Value::Null);
                let reason = if event.kind == "response.completed" {
                    if self.called { FinishReason::ToolCalls } else { FinishReason::Stop }
                } else {
                    match response.pointer("/incomplete_details/reason").and_then(Value::as_str) {
                        Some("max_output_tokens") => FinishReason::Length,
                        Some("content_filter") => FinishReason::ContentFilter,
                        _ => FinishReason::Other,
                    }
                };
                sink.finish(reason, response.get("usage").filter(|u| u.is_object()).map(usage));
            }
            "response.failed" => {
                let error = event.response.as_ref().and_then(|r| r.get("error")).cloned();
                let error = error.unwrap_or(Value::Null);
                sink.fail(crate::error::stream_error(
                    str_of(&error, "code"),
                    str_of(&error, "message"),
                ));
            }
            "error" => {
                sink.fail(crate::error::stream_error(
                    event.code.as_deref(),
                    event.message.as_deref(),
                ));
            }
            _ => {}
        }
        Ok(())
    }
}

fn usage(u: &Value) -> Usage {
    let input = count_of(u, "input_tokens");
    let cached =
        u.get("input_tokens_details").map_or(0, |d| count_of(d, "cached_tokens")).min(input);
    Usage {
        input_tokens: input - cached,
        output_tokens: count_of(u, "output_tokens"),
        cache_read_tokens: cached,
        ..Usage::default()
    }
}
