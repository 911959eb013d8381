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

/// A recorded case read from its folder: `case.json` and every interaction's request body
/// and response bytes.
#[derive(Clone, Debug)]
pub struct Recording {
    /// The folder's name.
    pub name: String,
    /// The API.
    pub api: Api,
    /// `case.json`.
    pub case: Case,
    /// Per interaction: the request body and the response bytes.
    pub exchanges: Vec<(Value, Vec<u8>)>,
}

impl Recording {
    /// Reads the case folder `dir`. This is the one function of the crate that touches the
    /// file system; the decoders and encoders never do.
    ///
    /// # Errors
    /// A file is missing or unreadable, `case.json` or a request is not valid JSON, or the
    /// API is unknown; the message names the file.
    pub fn read(dir: &std::path::Path) -> Result<Recording, String> {
        let read = |file: &str| {
            let path = dir.join(file);
            std::fs::read(&path).map_err(|e| format!("cannot read `{}`: {e}", path.display()))
        };
        let json = |file: &str| {
            let bytes = read(file)?;
            serde_json::from_slice::<Value>(&bytes)
                .map_err(|e| format!("`{}` is not valid JSON: {e}", dir.join(file).display()))
        };
        let case: Case = serde_json::from_value(json("case.json")?)
            .map_err(|e| format!("`{}`: {e}", dir.join("case.json").display()))?;
        let api = Api::from_name(&case.api).ok_or_else(|| {
            format!("`{}`: unknown api `{}`", dir.join("case.json").display(), case.api)
        })?;
        let exchanges = (0..case.interactions.len())
            .map(|n| Ok((json(&request_file(n))?, read(&response_file(n))?)))
            .collect::<Result<Vec<_>, String>>()?;
        let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        Ok(Recording { name, api, case, exchanges })
    }

    /// Every case folder under `root` (laid out `<api>/<case>/`), in path order.
    ///
    /// # Errors
    /// As [`Recording::read`], or `root` cannot be listed.
    pub fn read_all(root: &std::path::Path) -> Result<Vec<Recording>, String> {
        let list = |dir: &std::path::Path| -> Result<Vec<std::path::PathBuf>, String> {
            let mut out: Vec<_> = std::fs::read_dir(dir)
                .map_err(|e| format!("cannot list `{}`: {e}", dir.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.is_dir())
                .collect();
            out.sort();
            Ok(out)
        };
        let mut cases = Vec::new();
        for api in list(root)? {
            for dir in list(&api)? {
                cases.push(Recording::read(&dir)?);
            }
        }
        Ok(cases)
    }

    /// The request and target that reproduce interaction `n` of this recording: the recorded
    /// system prompt, user messages, tools, model and limits; from the second interaction on,
    /// the assistant message decoded from the previous response (with its reasoning state)
    /// and the tool results the recorded client sent. Replaying a recording against a
    /// provider, and comparing what a client sends with [`request_meaning`], start here.
    ///
    /// # Errors
    /// The first request has a message other than system or user, or a response does not
    /// decode.
    pub fn request_for(&self, n: usize) -> Result<(crate::ModelRequest, crate::Target), String> {
        use crate::{
            MaxTokensField, Reasoning, RequestKind, RequestMessage, RequestResult, Target, ToolDef,
        };
        let first = &self.exchanges[0].0;
        let meaning = request_meaning(self.api, first);
        let mut target = Target::new(first["model"].as_str().unwrap_or_default());
        let mut messages = Vec::new();
        for item in meaning["conversation"].as_array().into_iter().flatten() {
            let text = item["text"].as_str().unwrap_or_default().to_owned();
            match item["role"].as_str() {
                Some("system") => target.system = Some(text),
                Some("user") => messages.push(RequestMessage::User { text, attachments: vec![] }),
                other => {
                    return Err(format!("{}: a first request with a {other:?} message", self.name));
                }
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
            .into_iter()
            .flatten()
            .map(|t| {
                ToolDef::new(
                    t["name"].as_str().unwrap_or_default(),
                    t["description"].as_str().unwrap_or_default(),
                )
                .with_schema(t["schema"].clone())
            })
            .collect();
        for k in 1..=n {
            let events = crate::Decoder::decode_all(self.api, &self.exchanges[k - 1].1)
                .map_err(|e| format!("{} interaction {}: {e}", self.name, k - 1))?;
            messages.push(assistant_message(&events));
            let next = request_meaning(self.api, &self.exchanges[k].0);
            let results = next["conversation"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|i| i["role"] == "tool")
                .map(|i| RequestResult {
                    id: turnstile_core::CallId::new(i["answers"].as_str().unwrap_or_default()),
                    content: i["text"].as_str().unwrap_or_default().to_owned(),
                    is_error: false,
                })
                .collect();
            messages.push(RequestMessage::ToolResults(results));
        }
        let session = turnstile_core::SessionId::new("recording");
        Ok((crate::ModelRequest { session, kind: RequestKind::Step, messages, tools }, target))
    }
}

/// The assistant message a stream's events make, as the store would hold it: the text, the
/// reasoning with its state, the complete tool calls.
#[must_use]
pub fn assistant_message(events: &[crate::StepEvent]) -> crate::RequestMessage {
    use crate::StepEvent;
    let mut text = String::new();
    let mut reasoning: Option<(String, Option<String>)> = None;
    let mut calls = Vec::new();
    for e in events {
        match e {
            StepEvent::ReasoningStart => reasoning = Some((String::new(), None)),
            StepEvent::ReasoningDelta { text } => {
                if let Some(r) = reasoning.as_mut() {
                    r.0.push_str(text);
                }
            }
            StepEvent::ReasoningEnd { signature } => {
                if let Some(r) = reasoning.as_mut() {
                    r.1.clone_from(signature);
                }
            }
            StepEvent::TextDelta { text: t } => text.push_str(t),
            StepEvent::ToolCall { id, name, input } => calls.push(crate::RequestCall {
                id: id.clone(),
                name: name.clone(),
                input: input.clone(),
            }),
            _ => {}
        }
    }
    crate::RequestMessage::Assistant { text, reasoning, calls }
}
