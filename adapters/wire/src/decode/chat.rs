//! OpenAI chat completions (`data:` chunks, then `data: [DONE]`), and the compatible servers.
//!
//! Text from `delta.content`; reasoning from `delta.reasoning_content` (DeepSeek, llama.cpp,
//! vLLM, Z.ai) or `delta.reasoning` (OpenRouter, Groq); tool calls accumulated by `index`
//! (their id and name come once, the arguments in pieces) and complete at the finish reason
//! (or at `[DONE]` when none came); usage from the usage chunk (`stream_options.include_usage`;
//! the last one wins); a chunk with an `error` object is a mid-stream failure.

use std::collections::BTreeMap;

use serde::Deserialize;
use turnstile_core::{FinishReason, Usage};

use super::sink::{Sink, parse};
use crate::sse::Frame;

#[derive(Debug, Default)]
pub(super) struct Chat {
    calls: BTreeMap<u32, Call>,
    /// The finish reason, once it came (the usage chunk and `[DONE]` follow it).
    reason: Option<FinishReason>,
    usage: Option<Usage>,
}

#[derive(Debug, Default)]
struct Call {
    id: Option<String>,
    name: String,
    arguments: String,
    started: bool,
    done: bool,
}

#[derive(Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Option<Vec<Choice>>,
    #[serde(default)]
    usage: Option<ChatUsage>,
    #[serde(default)]
    error: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct Choice {
    #[serde(default)]
    index: Option<u32>,
    #[serde(default)]
    delta: Option<Delta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    reasoning_content: Option<String>,
    #[serde(default)]
    reasoning: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<ToolDelta>>,
}

#[derive(Deserialize)]
struct ToolDelta {
    #[serde(default)]
    index: Option<u32>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionDelta>,
}

#[derive(Deserialize)]
struct FunctionDelta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

#[derive(Deserialize)]
struct ChatUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens_details: Option<PromptDetails>,
    /// DeepSeek's name for the cached part of the prompt.
    #[serde(default)]
    prompt_cache_hit_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct PromptDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

impl Chat {
    pub(super) fn frame(&mut self, frame: &Frame, sink: &mut Sink<'_>) -> Result<(), String> {
        let data = frame.data.trim();
        if data == "[DONE]" {
            self.complete_calls(sink);
            sink.finish(self.reason.unwrap_or(FinishReason::Other), self.usage);
            return Ok(());
        }
        if data.is_empty() {
            return Ok(());
        }
        let chunk: Chunk = parse(data, "a chat completion chunk")?;
        if let Some(error) = chunk.error.filter(|e| !e.is_null()) {
            let kind = super::sink::str_of(&error, "type").or(super::sink::str_of(&error, "code"));
            let message = super::sink::str_of(&error, "message").or(error.as_str());
            sink.fail(crate::error::stream_error(kind, message));
            return Ok(());
        }
        if let Some(u) = chunk.usage {
            let prompt = u.prompt_tokens.unwrap_or(0);
            let cached = u
                .prompt_tokens_details
                .and_then(|d| d.cached_tokens)
                .or(u.prompt_cache_hit_tokens)
                .unwrap_or(0)
                .min(prompt);
            self.usage = Some(Usage {
                input_tokens: prompt - cached,
                output_tokens: u.completion_tokens.unwrap_or(0),
                cache_read_tokens: cached,
                ..Usage::default()
            });
        }
        for choice in chunk.choices.unwrap_or_default() {
            // One answer per request: `n` is never set, other choices are not ours.
            if choice.index.unwrap_or(0) != 0 {
                continue;
            }
            if let Some(delta) = choice.delta {
                self.delta(delta, sink);
            }
            if let Some(reason) = choice.finish_reason {
                self.reason = Some(map_finish(&reason));
                self.complete_calls(sink);
            }
        }
        Ok(())
    }

    fn delta(&mut self, delta: Delta, sink: &mut Sink<'_>) {
        if let Some(r) = delta.reasoning_content.as_deref().or(delta.reasoning.as_deref())
            && !r.is_empty()
        {
            sink.reasoning(r);
        }
        if let Some(text) = &delta.content {
            sink.text(text);
        }
        for td in delta.tool_calls.unwrap_or_default() {
            let index = match td.index {
                Some(i) => i,
                // Without an index: a new id is a new call, no id continues the last one.
                None => match &td.id {
                    Some(id) => self
                        .calls
                        .iter()
                        .find(|(_, c)| c.id.as_deref() == Some(id.as_str()))
                        .map_or_else(
                            || self.calls.keys().next_back().map_or(0, |k| k + 1),
                            |(k, _)| *k,
                        ),
                    None => self.calls.keys().next_back().copied().unwrap_or(0),
                },
            };
            let call = self.calls.entry(index).or_default();
            if call.done {
                continue;
            }
            if let Some(id) = td.id.filter(|id| !id.is_empty()) {
                call.id.get_or_insert(id);
            }
            if let Some(f) = td.function {
                if let Some(name) = f.name.filter(|n| !n.is_empty())
                    && call.name.is_empty()
                {
                    call.name = name;
                }
                if let Some(args) = f.arguments {
                    call.arguments.push_str(&args);
                }
            }
            if !call.started
                && !call.name.is_empty()
                && let Some(id) = &call.id
            {
                call.started = true;
                sink.tool_start(id, &call.name);
            }
        }
    }

    /// Every accumulated call is complete: the model has finished writing it.
    fn complete_calls(&mut self, sink: &mut Sink<'_>) {
        for (index, call) in &mut self.calls {
            if call.done || call.name.is_empty() {
                continue;
            }
            call.done = true;
            let id = call.id.clone().unwrap_or_else(|| format!("call_{index}"));
            if !call.started {
                call.started = true;
                sink.tool_start(&id, &call.name);
            }
            sink.tool_call(&id, &call.name, &call.arguments);
        }
    }

    /// The body ended: finished if a finish reason came (some servers omit `[DONE]`).
    pub(super) fn end_of_body(&mut self, sink: &mut Sink<'_>) -> bool {
        let Some(reason) = self.reason else { return false };
        self.complete_calls(sink);
        sink.finish(reason, self.usage);
        true
    }
}

fn map_finish(reason: &str) -> FinishReason {
    match reason {
        "stop" | "end_turn" | "eos" => FinishReason::Stop,
        "length" | "max_tokens" => FinishReason::Length,
        "tool_calls" | "function_call" => FinishReason::ToolCalls,
        "content_filter" => FinishReason::ContentFilter,
        _ => FinishReason::Other,
    }
}
