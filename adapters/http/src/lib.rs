//! # turnstile-http: LLM providers over HTTP (SPEC 9 "Providers", "Recordings")
//!
//! [`HttpProvider`] implements the host's [`turnstile_host::Provider`] for one configured
//! model of OpenAI chat completions (and the compatible servers), OpenAI Responses or
//! Anthropic messages. It is a thin transport: the request body, the decoding of the streamed
//! answer and the classification of errors are the sans-IO `turnstile-wire` crate's, which the
//! simulator runs too. This crate adds what needs the network and the machine: reqwest (with
//! rustls), API keys from the environment or a command, the configuration file with a
//! catalogue of common models and their prices, and recordings of every exchange.
//!
//! The simulator's build does not include this crate: madsim simulates no HTTP client, and
//! keeping the client out of the host crate is what lets the simulator run the real host.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use turnstile_host::{Host, HostConfig, ToolSet};
//! use turnstile_http::{Config, HttpProvider};
//!
//! let config = Config::load(Some("turnstile.toml".as_ref()))?;
//! let provider = HttpProvider::new(&config, Some("anthropic/claude-sonnet-4"))?;
//! let host = Host::open(HostConfig::new("agent.db"), Arc::new(provider), ToolSet::new()).await?;
//! # let _ = host; Ok(()) }
//! ```
//!
//! "SPEC n" cites section n of the contract, `docs/spec.md` in the repository.
//!
//! | module | what it owns |
//! |---|---|
//! | [`config`] | the TOML configuration over the built-in catalogue, and the environment |
//! | [`provider`] | the HTTP provider: send, stream, price, refresh, title |
//! | [`key`] | API keys, read when needed and never printed |
//! | [`record`] | recordings of every exchange |
//! | [`prompt`] | the default system prompt |

#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod config;
pub mod key;
pub mod prompt;
pub mod provider;
pub mod record;

pub use config::{Config, ConfigError, KeySource, ModelConfig, ProviderConfig};
pub use key::ApiKey;
pub use provider::{HttpProvider, SetupError};
pub use record::Recorder;
