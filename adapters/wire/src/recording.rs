//! The recordings format (SPEC 9 "Recordings"): one folder per exchange sequence, as the
//! recorded provider streams under `tests/fixtures/providers/` are laid out.
//!
//! - `case.json`: the API, the model, where it came from, and per interaction the method,
//!   path, status and content type ([`Case`]);
//! - `NN.request.json`: the request body the client sent in interaction NN;
//! - `NN.response.body`: the response body exactly as received.
//!
//! This module is the format only (no file IO); [`request_meaning`] is how a client's request
//! is compared with a recorded one: by the fields and values that matter, not byte for byte.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::Api;

/// `case.json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Case {
    /// The API's name ([`Api::name`]).
    pub api: String,
    /// The model the requests named.
    pub model: String,
    /// Where the recording came from (a test, a host's run).
    #[serde(default)]
    pub source: String,
    /// The interactions, in order.
    pub interactions: Vec<Interaction>,
}

/// One request and its response.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Interaction {
    /// The HTTP method.
    pub method: String,
    /// The request path.
    pub path: String,
    /// The response status.
    pub status: u16,
    /// The response's content type.
    #[serde(default)]
    pub content_type: String,
    /// True for a streamed response.
    #[serde(default)]
    pub streaming: bool,
    /// Response headers other than credentials and cookies, when recorded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<(String, String)>,
}

/// The file name of interaction `n`'s request body.
#[must_use]
pub fn request_file(n: usize) -> String {
    format!("{n:02}.request.json")
}

/// The file name of interaction `n`'s response body.
#[must_use]
pub fn response_file(n: usize) -> String {
    format!("{n:02}.response.body")
}

/// The headers a recording never keeps: credentials, cookies, and the provider's organisation
/// and project ids.
#[must_use]
pub fn is_secret_header(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    matches!(
        name.as_str(),
        "authorization" | "x-api-key" | "api-key" | "cookie" | "set-cookie" | "proxy-authorization"
    ) || name.starts_with("openai-organization")
        || name.starts_with("openai-project")
        || name.contains("token")
        || name.contains("secret")
}

/// What matters in a request body of `api`: the model, the conversation (roles, texts, tool
/// calls with their arguments as JSON values, tool results, thinking signatures), the tools
/// (names, descriptions, schemas) and streaming. Formatting, field order, the output limit,
/// cache markers and options are left out. Responses' reasoning items are left out too (a
/// client may or may not send them back; this project does).
#[must_use]
pub fn request_meaning(api: Api, body: &Value) -> Value {
    let tools: Vec<Value> = body["tools"]
        .as_array()
        .map(|t| t.iter().map(|t| tool_meaning(api, t)).collect())
        .unwrap_or_default();
    let conversation: Vec<Value> = match api {
        Api::OpenAiChat => list(&body["messages"]).map(chat_message).collect(),
        Api::OpenAiResponses => {
            list(&body["input"]).filter(|i| i["type"] != "reasoning").map(responses_item).collect()
        }
        Api::AnthropicMessages => {
            let system =
                list(&body["system"]).map(|b| json!({"role": "system", "text": b["text"]}));
            system.chain(list(&body["messages"]).flat_map(anthropic_message)).collect()
        }
    };
    json!({
        "model": body["model"],
        "stream": body["stream"],
        "conversation": conversation,
        "tools": tools,
    })
}

fn list(v: &Value) -> impl Iterator<Item = &Value> {
    v.as_array().into_iter().flatten()
}

/// A JSON text as a value (arguments are compared by meaning too).
fn parsed(v: &Value) -> Value {
    match v {
        Value::String(s) => serde_json::from_str(s).unwrap_or_else(|_| v.clone()),
        other => other.clone(),
    }
}

fn tool_meaning(api: Api, t: &Value) -> Value {
    let f = if api == Api::OpenAiChat { &t["function"] } else { t };
    let schema = if api == Api::AnthropicMessages { &t["input_schema"] } else { &f["parameters"] };
    json!({"name": f["name"], "description": f["description"], "schema": schema})
}

/// Text of a content that is a string or a list of text parts, without surrounding white
/// space (clients differ in what they keep of a whitespace-only answer).
fn text_of(content: &Value) -> Value {
    let text = match content {
        Value::Array(parts) => {
            parts.iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join("")
        }
        Value::String(s) => s.clone(),
        _ => String::new(),
    };
    Value::String(text.trim().to_owned())
}

fn chat_message(m: &Value) -> Value {
    let calls: Vec<Value> = list(&m["tool_calls"])
        .map(|c| json!({"id": c["id"], "name": c["function"]["name"], "input": parsed(&c["function"]["arguments"])}))
        .collect();
    json!({
        "role": m["role"],
        "text": text_of(&m["content"]),
        "reasoning": m["reasoning_content"],
        "calls": calls,
        "answers": m["tool_call_id"],
    })
}

fn responses_item(i: &Value) -> Value {
    match i["type"].as_str() {
        Some("function_call") => {
            json!({"role": "assistant", "call": {"id": i["call_id"], "name": i["name"], "input": parsed(&i["arguments"])}})
        }
        Some("function_call_output") => {
            json!({"role": "tool", "answers": i["call_id"], "text": i["output"]})
        }
        _ => {
            let role = if i["role"] == "developer" { json!("system") } else { i["role"].clone() };
            json!({"role": role, "text": text_of(&i["content"])})
        }
    }
}

fn anthropic_message(m: &Value) -> Vec<Value> {
    list(&m["content"])
        .map(|b| match b["type"].as_str() {
            Some("tool_use") => json!({"role": m["role"], "call": {"id": b["id"], "name": b["name"], "input": b["input"]}}),
            Some("tool_result") => json!({"role": "tool", "answers": b["tool_use_id"], "text": text_of(&b["content"])}),
            Some("thinking") => json!({"role": m["role"], "thinking": b["thinking"], "signature": b["signature"]}),
            _ => json!({"role": m["role"], "text": b["text"]}),
        })
        .collect()
}
