//! What every API's request body is made of: the body's frame (model, conversation, streaming),
//! the tools offered, a user message's parts and a call's arguments as JSON.

use serde_json::Value;
use turnstile_core::Attachment;

use crate::request::ModelRequest;
use crate::target::Target;

/// The body every API starts from: the model, the conversation under `key`, streaming on.
pub(super) fn body(
    target: &Target,
    key: &str,
    conversation: Vec<Value>,
) -> serde_json::Map<String, Value> {
    let mut body = serde_json::Map::new();
    body.insert("model".into(), Value::from(target.model.clone()));
    body.insert(key.into(), Value::Array(conversation));
    body.insert("stream".into(), Value::Bool(true));
    body
}

/// The request's tools as `tool` writes each (with its index), and the choice left to the
/// model; nothing when the request offers no tool (an empty list is refused by some servers).
pub(super) fn tools(
    body: &mut serde_json::Map<String, Value>,
    request: &ModelRequest,
    choice: Value,
    tool: impl Fn(usize, &crate::ToolDef) -> Value,
) {
    if !request.tools.is_empty() {
        let list = request.tools.iter().enumerate().map(|(i, t)| tool(i, t)).collect();
        body.insert("tools".into(), list);
        body.insert("tool_choice".into(), choice);
    }
}

/// A user message's parts, in the order every API sends them.
pub(super) enum Part<'a> {
    Text(String),
    Image(&'a Attachment),
}

/// The text (with text attachments inline) and the images of a user message.
pub(super) fn user_parts<'a>(
    text: &str,
    attachments: &'a [Attachment],
    target: &Target,
) -> Vec<Part<'a>> {
    let mut full = text.to_owned();
    let mut images = Vec::new();
    for a in attachments {
        if a.is_text() {
            full.push_str(&format!("\n\n<file name=\"{}\">\n{}\n</file>", a.name, a.content));
        } else if a.media_type.starts_with("image/") && target.images {
            images.push(Part::Image(a));
        } else {
            full.push_str(&format!(
                "\n\n[attachment {} ({}) not sent: the model does not take it]",
                a.name, a.media_type
            ));
        }
    }
    let mut parts = vec![Part::Text(full)];
    parts.extend(images);
    parts
}

/// A tool call's arguments as a JSON object (Anthropic and the request comparisons need a
/// value; what the model wrote is valid JSON, and the core stores `{}` for what was not).
pub(super) fn arguments(input: &str) -> Value {
    serde_json::from_str::<Value>(input)
        .ok()
        .filter(Value::is_object)
        .unwrap_or_else(|| Value::Object(serde_json::Map::new()))
}
