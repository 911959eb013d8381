//! # turnstile-wire: the sans-IO wire layer of the providers (SPEC 9 "Providers")
//!
//! Three wire APIs cover almost every model people use: OpenAI chat completions (and the
//! servers compatible with it: llama.cpp, vLLM, Ollama, Groq, xAI, OpenRouter, DeepSeek, ...),
//! OpenAI Responses, and Anthropic messages. This crate is the part of a provider that needs no
//! network:
//!
//! - [`encode()`] turns a provider-neutral [`ModelRequest`] into the API's JSON body;
//! - a [`Decoder`] turns the response's bytes, in chunks of any size, into the core's
//!   [`StepEvent`]s: reasoning, text, tool calls, then exactly one `Finished` (with usage and
//!   the finish reason) or `Failed`;
//! - [`classify`] turns an HTTP error answer (status, headers, body) into the core's
//!   [`ProviderError`]. The wire layer only classifies; the core decides about retries,
//!   credential refreshes and outcomes (SPEC 4.5).
//!
//! Nothing here does IO, reads a clock or holds a runtime: the same bytes give the same events,
//! so the HTTP transport, the simulator and the fuzzer run exactly the same decoder.
//!
//! ```
//! use turnstile_wire::{Api, Decoder};
//! use turnstile_wire::turnstile_core::StepEvent;
//!
//! let body = b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
//! let mut decoder = Decoder::new(Api::OpenAiChat);
//! let mut events = Vec::new();
//! for piece in body.chunks(7) {
//!     decoder.feed(piece, &mut events)?;
//! }
//! decoder.finish(&mut events)?;
//! assert_eq!(events[0], StepEvent::TextDelta { text: "Hi".into() });
//! assert!(matches!(events[1], StepEvent::Finished { .. }));
//! # Ok::<(), turnstile_wire::DecodeError>(())
//! ```
//!
//! "SPEC n" cites section n of the contract, `docs/spec.md` in the repository.
//!
//! ## Layout
//!
//! | module | what it owns |
//! |---|---|
//! | [`request`] | the provider-neutral request the host builds from the store |
//! | [`target`] | what an encoder needs besides the request: model, system prompt, limits |
//! | [`sse`] | server-sent events framing, split-safe |
//! | [`decode`] | the decoder of each API and the rules they share |
//! | [`mod@encode`] | the request body of each API |
//! | [`error`] | HTTP errors and headers into [`ProviderError`] |
//! | [`reasoning`] | the provider's reasoning state kept between requests |
//! | [`recording`] | the recordings format and requests compared by meaning |
//! | [`price`] | a step's cost from its usage |

#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub use turnstile_core;

pub mod decode;
pub mod encode;
pub mod error;
pub mod price;
pub mod reasoning;
pub mod recording;
pub mod request;
pub mod sse;
pub mod target;

pub use decode::{DecodeError, Decoder, not_a_stream};
pub use encode::encode;
pub use error::{Headers, classify, incomplete, transport};
pub use price::Prices;
pub use reasoning::ReasoningState;
pub use request::{ModelRequest, RequestCall, RequestKind, RequestMessage, RequestResult, ToolDef};
pub use target::{MaxTokensField, Reasoning, Target};
pub use turnstile_core::{ProviderError, StepEvent, Usage};

/// The three wire APIs, named as recordings name them (`case.json`'s `api`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Api {
    /// `POST /v1/chat/completions` (`openai-chat`), and every server compatible with it.
    OpenAiChat,
    /// `POST /v1/responses` (`openai-responses`).
    OpenAiResponses,
    /// `POST /v1/messages` (`anthropic-messages`).
    AnthropicMessages,
}

impl Api {
    /// Every API, in a fixed order.
    pub const ALL: [Api; 3] = [Api::OpenAiChat, Api::OpenAiResponses, Api::AnthropicMessages];

    /// The name recordings and configuration use.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Api::OpenAiChat => "openai-chat",
            Api::OpenAiResponses => "openai-responses",
            Api::AnthropicMessages => "anthropic-messages",
        }
    }

    /// The API with this name, if it is one.
    #[must_use]
    pub fn from_name(name: &str) -> Option<Api> {
        Api::ALL.into_iter().find(|a| a.name() == name)
    }

    /// The request path under the provider's base URL (which ends in `/v1` by convention).
    #[must_use]
    pub fn path(self) -> &'static str {
        match self {
            Api::OpenAiChat => "/chat/completions",
            Api::OpenAiResponses => "/responses",
            Api::AnthropicMessages => "/messages",
        }
    }
}

impl std::fmt::Display for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
