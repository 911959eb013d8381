//! Where every decoder puts its events (the [`Sink`] that keeps the sequence valid: one
//! reasoning section, a tool call started and completed once, exactly one terminal event,
//! last), and the small readers of a chunk's JSON they share.

use turnstile_core::{FinishReason, ProviderError, StepEvent, Usage};

use crate::Api;
use crate::reasoning::ReasoningState;

/// Where an API's decoder puts its events; it keeps the sequence valid.
pub(super) struct Sink<'a> {
    pub(super) common: &'a mut Common,
    pub(super) out: &'a mut Vec<StepEvent>,
}

impl Sink<'_> {
    /// Reasoning text (empty: only open the section).
    pub(super) fn reasoning(&mut self, text: &str) {
        if self.common.reasoning == Phase::None {
            self.out.push(StepEvent::ReasoningStart);
            self.common.reasoning = Phase::Open;
        }
        if self.common.reasoning == Phase::Open && !text.is_empty() {
            self.out.push(StepEvent::ReasoningDelta { text: text.to_owned() });
        }
    }

    /// A reasoning item of the provider's, to send back with the next request.
    pub(super) fn reasoning_item(&mut self, item: serde_json::Value) {
        if self.common.reasoning == Phase::None {
            self.reasoning("");
        }
        if self.common.reasoning == Phase::Open {
            self.common.reasoning_items.push(item);
        }
    }

    /// Other content begins (or the finish): an open reasoning section ends, and none can
    /// begin after it.
    pub(super) fn close_reasoning(&mut self) {
        if self.common.reasoning == Phase::None {
            self.common.reasoning = Phase::Ended;
        }
        if self.common.reasoning == Phase::Open {
            let items = std::mem::take(&mut self.common.reasoning_items);
            let signature = (!items.is_empty())
                .then(|| ReasoningState::new(self.common.api, items).to_signature());
            self.out.push(StepEvent::ReasoningEnd { signature });
            self.common.reasoning = Phase::Ended;
        }
    }

    pub(super) fn text(&mut self, text: &str) {
        if !text.is_empty() {
            self.close_reasoning();
            self.out.push(StepEvent::TextDelta { text: text.to_owned() });
        }
    }

    pub(super) fn tool_start(&mut self, id: &str, name: &str) {
        self.close_reasoning();
        if !self.common.started.insert(id.to_owned()) {
            return;
        }
        self.out.push(StepEvent::ToolInputStart {
            id: turnstile_core::CallId::new(id),
            name: name.to_owned(),
        });
    }

    pub(super) fn tool_call(&mut self, id: &str, name: &str, input: &str) {
        self.tool_start(id, name);
        if !self.common.called.insert(id.to_owned()) {
            return;
        }
        let input = if input.trim().is_empty() { "{}" } else { input };
        self.out.push(StepEvent::ToolCall {
            id: turnstile_core::CallId::new(id),
            name: name.to_owned(),
            input: input.to_owned(),
        });
    }

    pub(super) fn finish(&mut self, reason: FinishReason, usage: Option<Usage>) {
        self.close_reasoning();
        self.out.push(StepEvent::Finished { reason, usage });
        self.common.ended = true;
    }

    pub(super) fn fail(&mut self, error: ProviderError) {
        self.out.push(StepEvent::Failed { error });
        self.common.ended = true;
    }
}

/// Parses a chunk's JSON, naming what was expected on failure.
pub(super) fn parse<'a, T: serde::Deserialize<'a>>(data: &'a str, what: &str) -> Result<T, String> {
    serde_json::from_str(data).map_err(|e| format!("{what} is not valid JSON: {e}"))
}

/// A string field of a JSON object.
pub(super) fn str_of<'a>(v: &'a serde_json::Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(serde_json::Value::as_str)
}

/// A count field of a JSON object (absent, null or negative: 0).
pub(super) fn count_of(v: &serde_json::Value, key: &str) -> u64 {
    v.get(key).and_then(serde_json::Value::as_u64).unwrap_or(0)
}

/// What every API's decoder shares: where the sequence is, so the events stay valid.
#[derive(Debug)]
pub(super) struct Common {
    pub(super) api: Api,
    pub(super) reasoning: Phase,
    /// The provider's reasoning items seen so far, for the section's end.
    pub(super) reasoning_items: Vec<serde_json::Value>,
    /// Tool calls started and completed, by id: a repeated start or call (a replayed chunk)
    /// produces nothing.
    pub(super) started: std::collections::BTreeSet<String>,
    pub(super) called: std::collections::BTreeSet<String>,
    pub(super) ended: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Phase {
    None,
    Open,
    Ended,
}
