//! What an encoder needs besides the request: the model, the system prompt and the limits of
//! the model the session runs on.

/// The model a request goes to and how to ask it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// The model name the API expects.
    pub model: String,
    /// The system prompt (none: the request has no system message).
    pub system: Option<String>,
    /// The maximum output tokens; `None` lets the API choose (Anthropic requires a value and
    /// gets 4,096 then).
    pub max_output_tokens: Option<u64>,
    /// Reasoning effort or thinking budget, for the models that take one.
    pub reasoning: Option<Reasoning>,
    /// Whether the model takes images; when it does not, an image attachment becomes a note.
    pub images: bool,
    /// Which field carries the output limit on chat completions.
    pub max_tokens_field: MaxTokensField,
}

impl Target {
    /// A target for `model` with no system prompt, no limits, no reasoning, images allowed.
    #[must_use]
    pub fn new(model: impl Into<String>) -> Target {
        Target {
            model: model.into(),
            system: None,
            max_output_tokens: None,
            reasoning: None,
            images: true,
            max_tokens_field: MaxTokensField::MaxTokens,
        }
    }
}

/// How much a model should reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reasoning {
    /// OpenAI's `reasoning_effort` / `reasoning.effort` (`minimal`, `low`, `medium`, `high`).
    Effort(String),
    /// Anthropic's extended thinking with this budget of tokens.
    BudgetTokens(u64),
}

/// The chat completions field of the output limit: the compatible servers take `max_tokens`;
/// OpenAI's reasoning models refuse it and want `max_completion_tokens`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MaxTokensField {
    /// `max_tokens`.
    #[default]
    MaxTokens,
    /// `max_completion_tokens`.
    MaxCompletionTokens,
}
