//! The Responses body: stateless (`store: false`), reasoning items sent back with their
//! encrypted content.

use serde_json::{Value, json};

use super::body::{Part, user_parts};
use crate::Api;
use crate::reasoning::ReasoningState;
use crate::request::{ModelRequest, RequestMessage};
use crate::target::{Reasoning, Target};

pub(super) fn encode(request: &ModelRequest, target: &Target) -> Value {
    let mut input = Vec::new();
    if let Some(system) = &target.system {
        input.push(json!({"role": "developer", "content": system}));
    }
    for m in &request.messages {
        match m {
            RequestMessage::User { text, attachments } => {
                let content: Vec<Value> = user_parts(text, attachments, target)
                    .iter()
                    .map(|p| match p {
                        Part::Text(t) => json!({"type": "input_text", "text": t}),
                        Part::Image(a) => json!({
                            "type": "input_image",
                            "image_url": format!("data:{};base64,{}", a.media_type, a.content),
                        }),
                    })
                    .collect();
                input.push(json!({"role": "user", "content": content}));
            }
            RequestMessage::Assistant { text, reasoning, calls } => {
                let signature = reasoning.as_ref().and_then(|r| r.1.as_deref());
                input.extend(ReasoningState::items_for(signature, Api::OpenAiResponses));
                if !text.is_empty() {
                    input.push(json!({
                        "type": "message",
                        "role": "assistant",
                        "content": [{"type": "output_text", "text": text, "annotations": []}],
                    }));
                }
                for c in calls {
                    input.push(json!({
                        "type": "function_call",
                        "call_id": c.id.as_str(),
                        "name": c.name,
                        "arguments": c.input,
                    }));
                }
            }
            RequestMessage::ToolResults(results) => {
                for r in results {
                    input.push(json!({"type": "function_call_output", "call_id": r.id.as_str(), "output": r.content}));
                }
            }
        }
    }
    let mut body = super::body::body(target, "input", input);
    body.insert("store".into(), json!(false));
    if let Some(max) = target.max_output_tokens {
        body.insert("max_output_tokens".into(), json!(max));
    }
    if let Some(Reasoning::Effort(effort)) = &target.reasoning {
        body.insert("reasoning".into(), json!({"effort": effort, "summary": "auto"}));
        body.insert("include".into(), json!(["reasoning.encrypted_content"]));
    }
    super::body::tools(&mut body, request, json!("auto"), |_, t| {
        json!({
            "type": "function",
            "name": t.name,
            "description": t.description,
            "parameters": t.input_schema,
            "strict": false,
        })
    });
    Value::Object(body)
}
