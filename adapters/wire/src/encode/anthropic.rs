//! The Anthropic messages body: thinking blocks sent back unchanged, tool results in the user
//! message after their calls, and cache-control markers on the system prompt, the last tool
//! and the newest two messages (SPEC 4.9).

use serde_json::{Value, json};

use super::body::{Part, arguments, user_parts};
use crate::Api;
use crate::reasoning::ReasoningState;
use crate::request::{ModelRequest, RequestMessage};
use crate::target::{Reasoning, Target};

/// Anthropic requires `max_tokens`; this is sent when the model's is not configured.
pub const DEFAULT_MAX_TOKENS: u64 = 4_096;

fn ephemeral() -> Value {
    json!({"type": "ephemeral"})
}

pub(super) fn encode(request: &ModelRequest, target: &Target) -> Value {
    // (role, content blocks); consecutive messages of one role are joined, since the API wants
    // them alternating and a folded prompt can follow tool results.
    let mut messages: Vec<(&str, Vec<Value>)> = Vec::new();
    let mut push = |role: &'static str, blocks: Vec<Value>| {
        if blocks.is_empty() {
            return;
        }
        match messages.last_mut() {
            Some((r, b)) if *r == role => b.extend(blocks),
            _ => messages.push((role, blocks)),
        }
    };
    for m in &request.messages {
        match m {
            RequestMessage::User { text, attachments } => {
                let blocks = user_parts(text, attachments, target)
                    .iter()
                    .map(|p| match p {
                        Part::Text(t) => json!({"type": "text", "text": t}),
                        Part::Image(a) => json!({
                            "type": "image",
                            "source": {"type": "base64", "media_type": a.media_type, "data": a.content},
                        }),
                    })
                    .collect();
                push("user", blocks);
            }
            RequestMessage::Assistant { text, reasoning, calls } => {
                let signature = reasoning.as_ref().and_then(|r| r.1.as_deref());
                let mut blocks = ReasoningState::items_for(signature, Api::AnthropicMessages);
                if !text.is_empty() {
                    blocks.push(json!({"type": "text", "text": text}));
                }
                for c in calls {
                    blocks.push(json!({
                        "type": "tool_use",
                        "id": c.id.as_str(),
                        "name": c.name,
                        "input": arguments(&c.input),
                    }));
                }
                push("assistant", blocks);
            }
            RequestMessage::ToolResults(results) => {
                let blocks = results
                    .iter()
                    .map(|r| {
                        let mut block = json!({
                            "type": "tool_result",
                            "tool_use_id": r.id.as_str(),
                            "content": [{"type": "text", "text": r.content}],
                        });
                        if r.is_error {
                            block["is_error"] = json!(true);
                        }
                        block
                    })
                    .collect();
                push("user", blocks);
            }
        }
    }
    let n = messages.len();
    let messages: Vec<Value> = messages
        .into_iter()
        .enumerate()
        .map(|(i, (role, mut blocks))| {
            if i + 2 >= n
                && let Some(last) = blocks.iter_mut().rev().find(|b| is_cacheable(b))
            {
                last["cache_control"] = ephemeral();
            }
            json!({"role": role, "content": blocks})
        })
        .collect();
    let mut body = super::body::body(target, "messages", messages);
    body.insert("max_tokens".into(), json!(target.max_output_tokens.unwrap_or(DEFAULT_MAX_TOKENS)));
    if let Some(system) = &target.system {
        body.insert(
            "system".into(),
            json!([{"type": "text", "text": system, "cache_control": ephemeral()}]),
        );
    }
    if let Some(Reasoning::BudgetTokens(budget)) = target.reasoning {
        body.insert("thinking".into(), json!({"type": "enabled", "budget_tokens": budget}));
    }
    let last = request.tools.len().saturating_sub(1);
    super::body::tools(&mut body, request, json!({"type": "auto"}), |i, t| {
        let mut tool =
            json!({"name": t.name, "description": t.description, "input_schema": t.input_schema});
        if i == last {
            tool["cache_control"] = ephemeral();
        }
        tool
    });
    Value::Object(body)
}

/// Thinking blocks cannot carry a cache-control marker.
fn is_cacheable(block: &Value) -> bool {
    !matches!(block.get("type").and_then(Value::as_str), Some("thinking" | "redacted_thinking"))
}
