//! The provider-neutral model request (SPEC 9 "Providers"): what the host builds from the store,
//! after SPEC 4.9's repairs, and what every wire API's encoder turns into its own JSON body.

use serde::{Deserialize, Serialize};
use turnstile_core::{Attachment, CallId, SessionId};

/// What a request is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RequestKind {
    /// One step of a turn.
    Step,
    /// A summarization (the last message is the summary request, SPEC 4.7).
    Summary,
}

/// A provider-neutral model request, built from the store after every earlier write of the
/// session was applied, with SPEC 4.9's repairs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelRequest {
    /// The session.
    pub session: SessionId,
    /// Step or summary.
    pub kind: RequestKind,
    /// The conversation, oldest first.
    pub messages: Vec<RequestMessage>,
    /// The tools the model may call, in name order.
    pub tools: Vec<ToolDef>,
}

impl ModelRequest {
    /// Every string of the request, for SPEC 4.4's usage estimate (role names, texts,
    /// reasoning, tool names, inputs, ids, outputs).
    pub fn strings(&self) -> impl Iterator<Item = &str> {
        self.messages.iter().flat_map(RequestMessage::strings)
    }

    /// The text of the newest user message, if any (handy for scripted providers).
    #[must_use]
    pub fn last_user_text(&self) -> Option<&str> {
        self.messages.iter().rev().find_map(|m| match m {
            RequestMessage::User { text, .. } => Some(text.as_str()),
            _ => None,
        })
    }
}

/// A tool as the model sees it: its name, what it does, and the JSON schema of its input.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolDef {
    /// The name the model calls it by.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// The JSON schema of its input (an object schema).
    pub input_schema: serde_json::Value,
}

impl ToolDef {
    /// A tool with this name and description whose input is any JSON object.
    #[must_use]
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> ToolDef {
        ToolDef {
            name: name.into(),
            description: description.into(),
            input_schema: serde_json::json!({"type": "object", "properties": {}}),
        }
    }

    /// The same tool with this input schema.
    #[must_use]
    pub fn with_schema(mut self, input_schema: serde_json::Value) -> ToolDef {
        self.input_schema = input_schema;
        self
    }
}

/// One message of a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RequestMessage {
    /// A user message (also the session's summary, relabelled, SPEC 4.9).
    User {
        /// The text.
        text: String,
        /// Attached files.
        attachments: Vec<Attachment>,
    },
    /// An assistant message with its reasoning and tool calls.
    Assistant {
        /// The text.
        text: String,
        /// The reasoning section and the provider's signature of it (for this crate's
        /// decoders, a [`crate::ReasoningState`] in its JSON form).
        reasoning: Option<(String, Option<String>)>,
        /// The tool calls, in order.
        calls: Vec<RequestCall>,
    },
    /// The results of the previous assistant message's calls, one per call, in call order.
    ToolResults(Vec<RequestResult>),
}

impl RequestMessage {
    fn strings(&self) -> Box<dyn Iterator<Item = &str> + '_> {
        match self {
            RequestMessage::User { text, attachments } => Box::new(
                std::iter::once("user")
                    .chain(std::iter::once(text.as_str()))
                    .chain(attachments.iter().map(|a| a.content.as_str())),
            ),
            RequestMessage::Assistant { text, reasoning, calls } => Box::new(
                ["assistant", text.as_str()]
                    .into_iter()
                    .chain(reasoning.iter().map(|r| r.0.as_str()))
                    .chain(calls.iter().flat_map(|c| {
                        [c.id.as_str(), c.name.as_str(), c.input.as_str()].into_iter()
                    })),
            ),
            RequestMessage::ToolResults(results) => Box::new(std::iter::once("tool").chain(
                results.iter().flat_map(|r| [r.id.as_str(), r.content.as_str()].into_iter()),
            )),
        }
    }
}

/// A tool call in a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestCall {
    /// The call id.
    pub id: CallId,
    /// The tool.
    pub name: String,
    /// The arguments (JSON text; `{}` after a repair).
    pub input: String,
}

/// A tool result in a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestResult {
    /// The call it answers.
    pub id: CallId,
    /// The result text.
    pub content: String,
    /// True for an error result.
    pub is_error: bool,
}
