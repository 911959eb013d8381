//! The chat completions body.

use serde_json::{Map, Value, json};

use super::body::{Part, user_parts};
use crate::request::{ModelRequest, RequestMessage};
use crate::target::{MaxTokensField, Reasoning, Target};

pub(super) fn encode(request: &ModelRequest, target: &Target) -> Value {
    let mut messages = Vec::new();
    if let Some(system) = &target.system {
        messages.push(json!({"role": "system", "content": system}));
    }
    for m in &request.messages {
        match m {
            RequestMessage::User { text, attachments } => {
                let parts = user_parts(text, attachments, target);
                let content = if let [Part::Text(t)] = parts.as_slice() {
                    json!(t)
                } else {
                    Value::Array(
                        parts
                            .iter()
                            .map(|p| match p {
                                Part::Text(t) => json!({"type": "text", "text": t}),
                                Part::Image(a) => json!({
                                    "type": "image_url",
                                    "image_url": {"url": format!("data:{};base64,{}", a.media_type, a.content)},
                                }),
                            })
                            .collect(),
                    )
                };
                messages.push(json!({"role": "user", "content": content}));
            }
            RequestMessage::Assistant { text, reasoning, calls } => {
                let mut msg = Map::new();
                msg.insert("role".into(), json!("assistant"));
                if !text.is_empty() || calls.is_empty() {
                    msg.insert("content".into(), json!(text));
                }
                // The compatible servers' reasoning goes back as it came (the recorded clients
                // do the same; thinking models that call tools want it).
                if let Some((r, _)) = reasoning.as_ref().filter(|r| !r.0.is_empty()) {
                    msg.insert("reasoning_content".into(), json!(r));
                }
                if !calls.is_empty() {
                    let calls: Vec<Value> = calls
                        .iter()
                        .map(|c| {
                            json!({
                                "id": c.id.as_str(),
                                "type": "function",
                                "function": {"name": c.name, "arguments": c.input},
                            })
                        })
                        .collect();
                    msg.insert("tool_calls".into(), Value::Array(calls));
                }
                messages.push(Value::Object(msg));
            }
            RequestMessage::ToolResults(results) => {
                for r in results {
                    messages.push(json!({"role": "tool", "tool_call_id": r.id.as_str(), "content": r.content}));
                }
            }
        }
    }
    let mut body = super::body::body(target, "messages", messages);
    body.insert("stream_options".into(), json!({"include_usage": true}));
    if let Some(max) = target.max_output_tokens {
        let field = match target.max_tokens_field {
            MaxTokensField::MaxTokens => "max_tokens",
            MaxTokensField::MaxCompletionTokens => "max_completion_tokens",
        };
        body.insert(field.into(), json!(max));
    }
    if let Some(Reasoning::Effort(effort)) = &target.reasoning {
        body.insert("reasoning_effort".into(), json!(effort));
    }
    super::body::tools(&mut body, request, json!("auto"), |_, t| {
        json!({
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.input_schema},
        })
    });
    Value::Object(body)
}
