//! The provider's reasoning state, kept with the message and sent back on the next request.
//!
//! Anthropic's thinking blocks must come back unchanged, signature included (a redacted block
//! as its opaque `data`); OpenAI Responses' reasoning items come back with their encrypted
//! content, so a stateless (`store: false`) conversation keeps its reasoning. The core stores
//! one opaque string per message (the `signature` of `ReasoningEnd`); this crate puts there the
//! JSON form of a [`ReasoningState`]: the API it came from and the provider's items verbatim.
//! An encoder sends back only the state of its own API: another API's items would be refused.

use serde::{Deserialize, Serialize};

use crate::Api;

/// The reasoning items of one assistant message, as the provider sent them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReasoningState {
    /// The API's name ([`Api::name`]).
    pub api: String,
    /// The provider's items, verbatim (Anthropic content blocks of type `thinking` or
    /// `redacted_thinking`; Responses output items of type `reasoning`).
    pub items: Vec<serde_json::Value>,
}

impl ReasoningState {
    /// A state of `api` with these items.
    #[must_use]
    pub fn new(api: Api, items: Vec<serde_json::Value>) -> ReasoningState {
        ReasoningState { api: api.name().to_owned(), items }
    }

    /// The string the core keeps as the reasoning's signature.
    #[must_use]
    pub fn to_signature(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The items to send back to `api`, from a stored signature: none when the signature is
    /// absent, not a state of this crate, or of another API.
    #[must_use]
    pub fn items_for(signature: Option<&str>, api: Api) -> Vec<serde_json::Value> {
        signature
            .and_then(|s| serde_json::from_str::<ReasoningState>(s).ok())
            .filter(|s| s.api == api.name())
            .map(|s| s.items)
            .unwrap_or_default()
    }
}
