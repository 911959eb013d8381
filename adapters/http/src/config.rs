//! Configuration: providers and their models, from a TOML file over the built-in catalogue,
//! with the environment on top (SPEC 9 "Providers", "CLI").
//!
//! ```toml
//! model = "anthropic/claude-sonnet-4"          # the default model: provider/model
//! system_prompt = "You are ..."                # optional; the default is for a coding agent
//!
//! [providers.anthropic]                        # overrides the catalogue's fields it sets
//! api_key_command = ["pass", "show", "anthropic"]
//!
//! [providers.local]
//! api = "openai-chat"                          # openai-chat | openai-responses | anthropic-messages
//! base_url = "http://127.0.0.1:8080/v1"
//! api_key_env = "LOCAL_KEY"                    # optional: no key, no auth header
//! headers = { "X-Title" = "turnstile" }
//!
//! [providers.local.models."qwen3"]            # replaces a catalogue model of the same name
//! model = "Qwen/Qwen3-32B"                     # the name the API expects (default: the key)
//! context_window = 32768                       # 0 or absent: unknown, never summarizes
//! max_output_tokens = 8192
//! reasoning_effort = "high"                    # or thinking_budget = 4000 (Anthropic)
//! images = false
//! max_tokens_field = "max_completion_tokens"  # chat completions: which field takes the limit
//! price = { input = 0.2, output = 0.6, cache_read = 0.02, cache_write = 0.0 }  # per million tokens
//! ```
//!
//! Environment: `TURNSTILE_MODEL` replaces `model`; `TURNSTILE_<PROVIDER>_BASE_URL` (the
//! provider's name upper-cased, `-` as `_`) replaces a provider's base URL; keys come from the
//! variable a provider names in `api_key_env`, or from its `api_key_command`'s output. A key is
//! never part of the configuration itself, so it cannot be written anywhere with it.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use turnstile_wire::{Api, MaxTokensField, Prices, Reasoning, Target};

/// The built-in catalogue, in the configuration file's format.
pub const CATALOGUE: &str = include_str!("catalogue.toml");

/// Where a configuration came from, for error messages.
fn origin_name(path: Option<&Path>) -> String {
    path.map_or_else(|| "the built-in catalogue".to_owned(), |p| format!("`{}`", p.display()))
}

/// A configuration file as written.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    system_prompt: Option<String>,
    #[serde(default)]
    providers: BTreeMap<String, ProviderFile>,
    // The agent's sections (`[permissions]`, `[hooks]`, `[mcp.<name>]`, `[server]`, `[record]`):
    // read by the CLI, which owns them; accepted here so that every other unknown field is
    // still an error with its line.
    #[serde(default, rename = "permissions")]
    _permissions: Option<toml::Value>,
    #[serde(default, rename = "hooks")]
    _hooks: Option<toml::Value>,
    #[serde(default, rename = "mcp")]
    _mcp: Option<toml::Value>,
    #[serde(default, rename = "server")]
    _server: Option<toml::Value>,
    #[serde(default, rename = "record")]
    _record: Option<toml::Value>,
    // The engine's keys, read by the CLI too: the stream watchdog and the retry budget.
    #[serde(default, rename = "stream_idle_timeout")]
    _stream_idle_timeout: Option<toml::Value>,
    #[serde(default, rename = "retry_attempts")]
    _retry_attempts: Option<toml::Value>,
    #[serde(default, rename = "retry_backoff")]
    _retry_backoff: Option<toml::Value>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProviderFile {
    #[serde(default)]
    api: Option<String>,
    #[serde(default)]
    base_url: Option<String>,
    #[serde(default)]
    api_key_env: Option<String>,
    #[serde(default)]
    api_key_command: Option<Vec<String>>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    models: BTreeMap<String, ModelFile>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelFile {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    context_window: u64,
    #[serde(default)]
    max_output_tokens: Option<u64>,
    #[serde(default)]
    reasoning_effort: Option<String>,
    #[serde(default)]
    thinking_budget: Option<u64>,
    #[serde(default)]
    images: bool,
    #[serde(default)]
    max_tokens_field: Option<String>,
    #[serde(default)]
    price: Option<PriceFile>,
}

#[derive(Clone, Copy, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct PriceFile {
    #[serde(default)]
    input: f64,
    #[serde(default)]
    output: f64,
    #[serde(default)]
    cache_read: f64,
    #[serde(default)]
    cache_write: f64,
}

/// The resolved configuration: every provider, checked.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// The default model (`provider/model`), if one is set.
    pub model: Option<String>,
    /// The system prompt, if configured (else the default, [`crate::prompt`]).
    pub system_prompt: Option<String>,
    /// Providers by name.
    pub providers: BTreeMap<String, ProviderConfig>,
}

/// One provider: an API at a base URL, how to authenticate, and its models.
#[derive(Clone, Debug, PartialEq)]
pub struct ProviderConfig {
    /// The provider's name in the configuration.
    pub name: String,
    /// The wire API.
    pub api: Api,
    /// The base URL (the API's path is appended: `/chat/completions`, `/responses`,
    /// `/messages`).
    pub base_url: String,
    /// Where the key comes from.
    pub key: KeySource,
    /// Extra headers sent with every request.
    pub headers: BTreeMap<String, String>,
    /// Models by name.
    pub models: BTreeMap<String, ModelConfig>,
}

/// Where a provider's key comes from. The key itself is read when a request needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeySource {
    /// No key (a local server).
    None,
    /// The environment variable with this name.
    Env(String),
    /// The first line of this command's output (program and arguments).
    Command(Vec<String>),
}

/// One model of a provider.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelConfig {
    /// The model's name in the configuration.
    pub name: String,
    /// The name the API expects.
    pub api_model: String,
    /// The context window in tokens; 0 when unknown (SPEC 4.7: never summarizes).
    pub context_window: u64,
    /// The maximum output tokens, when set.
    pub max_output_tokens: Option<u64>,
    /// Reasoning effort or thinking budget.
    pub reasoning: Option<Reasoning>,
    /// Whether it takes images.
    pub images: bool,
    /// Chat completions' output-limit field.
    pub max_tokens_field: MaxTokensField,
    /// Prices per million tokens, in millionths of the currency unit.
    pub prices: Prices,
}

impl ModelConfig {
    /// The encoder's target for this model with `system` as the system prompt.
    #[must_use]
    pub fn target(&self, system: Option<String>) -> Target {
        Target {
            model: self.api_model.clone(),
            system,
            max_output_tokens: self.max_output_tokens,
            reasoning: self.reasoning.clone(),
            images: self.images,
            max_tokens_field: self.max_tokens_field,
        }
    }
}

/// A configuration that cannot be used. Every variant names the file (or the built-in
/// catalogue) and, where there is one, the field.
#[derive(Debug)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not valid TOML or has a field of the wrong type or an unknown field (the
    /// message names the line, the column and the field).
    Parse {
        /// Where.
        origin: String,
        /// The parser's message.
        message: String,
    },
    /// A field has a value that cannot work.
    Invalid {
        /// Where.
        origin: String,
        /// The field, as a dotted path (`providers.local.api`).
        field: String,
        /// What is wrong.
        reason: String,
    },
    /// The model asked for is not configured.
    UnknownModel {
        /// What was asked for.
        name: String,
        /// The configured models (`provider/model`).
        known: Vec<String>,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Read { path, source } => {
                write!(f, "cannot read the configuration `{}`: {source}", path.display())
            }
            ConfigError::Parse { origin, message } => {
                write!(f, "invalid configuration {origin}: {}", message.trim_end())
            }
            ConfigError::Invalid { origin, field, reason } => {
                write!(f, "invalid configuration {origin}: `{field}` {reason}")
            }
            ConfigError::UnknownModel { name, known } => {
                write!(f, "model `{name}` is not configured (known: {})", known.join(", "))
            }
        }
    }
}

impl std::error::Error for ConfigError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ConfigError::Read { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl Config {
    /// The built-in catalogue alone.
    ///
    /// # Panics
    /// Never: a test parses the catalogue.
    #[must_use]
    pub fn catalogue() -> Config {
        Config::from_layers(&[(None, CATALOGUE)], &|_| None)
            .expect("the built-in catalogue is valid")
    }

    /// The catalogue, then the file at `path` (when given), then the environment.
    ///
    /// # Errors
    /// The file cannot be read or is invalid ([`ConfigError`] names it, and the field).
    pub fn load(path: Option<&Path>) -> Result<Config, ConfigError> {
        let text = match path {
            Some(p) => Some(
                std::fs::read_to_string(p)
                    .map_err(|source| ConfigError::Read { path: p.to_owned(), source })?,
            ),
            None => None,
        };
        let mut layers = vec![(None, CATALOGUE)];
        if let (Some(p), Some(t)) = (path, text.as_deref()) {
            layers.push((Some(p), t));
        }
        Config::from_layers(&layers, &|name| std::env::var(name).ok())
    }

    /// The catalogue and a configuration text (as if read from `origin`), with `env` as the
    /// environment; what [`Config::load`] does, without reading anything.
    ///
    /// # Errors
    /// As [`Config::load`].
    pub fn from_text(
        origin: &Path,
        text: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        Config::from_layers(&[(None, CATALOGUE), (Some(origin), text)], env)
    }

    fn from_layers(
        layers: &[(Option<&Path>, &str)],
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        let mut merged = File::default();
        // Where each provider's fields were last set, for error messages.
        let mut origins: BTreeMap<String, String> = BTreeMap::new();
        for (path, text) in layers {
            let origin = origin_name(*path);
            let file: File = toml::from_str(text).map_err(|e| ConfigError::Parse {
                origin: origin.clone(),
                message: e.to_string(),
            })?;
            if file.model.is_some() {
                merged.model = file.model;
            }
            if file.system_prompt.is_some() {
                merged.system_prompt = file.system_prompt;
            }
            for (name, p) in file.providers {
                origins.insert(name.clone(), origin.clone());
                let into = merged.providers.entry(name).or_default();
                into.api = p.api.or(into.api.take());
                into.base_url = p.base_url.or(into.base_url.take());
                if p.api_key_env.is_some() || p.api_key_command.is_some() {
                    into.api_key_env = p.api_key_env;
                    into.api_key_command = p.api_key_command;
                }
                into.headers.extend(p.headers);
                into.models.extend(p.models);
            }
        }
        if let Some(model) = env("TURNSTILE_MODEL").filter(|m| !m.is_empty()) {
            merged.model = Some(model);
        }
        let mut providers = BTreeMap::new();
        for (name, p) in merged.providers {
            let origin = origins.remove(&name).unwrap_or_default();
            let invalid = |field: &str, reason: String| ConfigError::Invalid {
                origin: origin.clone(),
                field: format!("providers.{name}{field}"),
                reason,
            };
            let api_name = p.api.ok_or_else(|| invalid(".api", "is missing".into()))?;
            let api = Api::from_name(&api_name).ok_or_else(|| {
                invalid(
                    ".api",
                    format!(
                        "is `{api_name}`; expected one of {}",
                        Api::ALL.map(Api::name).join(", ")
                    ),
                )
            })?;
            let env_url = format!("TURNSTILE_{}_BASE_URL", name.to_uppercase().replace('-', "_"));
            let base_url = env(&env_url)
                .or(p.base_url)
                .ok_or_else(|| invalid(".base_url", "is missing".into()))?;
            if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
                return Err(invalid(
                    ".base_url",
                    format!("is `{base_url}`; expected an http:// or https:// URL"),
                ));
            }
            let key = match (p.api_key_env, p.api_key_command) {
                (Some(_), Some(_)) => {
                    return Err(invalid(
                        "",
                        "sets both `api_key_env` and `api_key_command`; keep one".into(),
                    ));
                }
                (Some(var), None) if var.is_empty() => {
                    return Err(invalid(".api_key_env", "is empty".into()));
                }
                (Some(var), None) => KeySource::Env(var),
                (None, Some(cmd)) if cmd.is_empty() => {
                    return Err(invalid(
                        ".api_key_command",
                        "is empty; give the program and its arguments".into(),
                    ));
                }
                (None, Some(cmd)) => KeySource::Command(cmd),
                (None, None) => KeySource::None,
            };
            let mut models = BTreeMap::new();
            for (model_name, m) in p.models {
                let field = |f: &str| format!(".models.{model_name}.{f}");
                let reasoning = match (m.reasoning_effort, m.thinking_budget) {
                    (Some(_), Some(_)) => {
                        return Err(invalid(
                            &field("thinking_budget"),
                            "is set with `reasoning_effort`; keep one".into(),
                        ));
                    }
                    (Some(e), None) => Some(Reasoning::Effort(e)),
                    (None, Some(b)) => Some(Reasoning::BudgetTokens(b)),
                    (None, None) => None,
                };
                let max_tokens_field = match m.max_tokens_field.as_deref() {
                    None | Some("max_tokens") => MaxTokensField::MaxTokens,
                    Some("max_completion_tokens") => MaxTokensField::MaxCompletionTokens,
                    Some(other) => {
                        return Err(invalid(
                            &field("max_tokens_field"),
                            format!(
                                "is `{other}`; expected `max_tokens` or `max_completion_tokens`"
                            ),
                        ));
                    }
                };
                let price = m.price.unwrap_or_default();
                let mut prices = [0_u64; 4];
                for (slot, (what, value)) in prices.iter_mut().zip([
                    ("input", price.input),
                    ("output", price.output),
                    ("cache_read", price.cache_read),
                    ("cache_write", price.cache_write),
                ]) {
                    if !(value.is_finite() && value >= 0.0) {
                        return Err(invalid(
                            &field(&format!("price.{what}")),
                            format!("is {value}; expected a price of 0 or more"),
                        ));
                    }
                    *slot = (value * 1_000_000.0).round() as u64;
                }
                let config = ModelConfig {
                    api_model: m.model.unwrap_or_else(|| model_name.clone()),
                    name: model_name.clone(),
                    context_window: m.context_window,
                    max_output_tokens: m.max_output_tokens,
                    reasoning,
                    images: m.images,
                    max_tokens_field,
                    prices: Prices {
                        input: prices[0],
                        output: prices[1],
                        cache_read: prices[2],
                        cache_write: prices[3],
                    },
                };
                models.insert(model_name, config);
            }
            providers.insert(
                name.clone(),
                ProviderConfig { name, api, base_url, key, headers: p.headers, models },
            );
        }
        Ok(Config { model: merged.model, system_prompt: merged.system_prompt, providers })
    }

    /// Every configured model as `provider/model`, in order.
    #[must_use]
    pub fn model_names(&self) -> Vec<String> {
        self.providers
            .values()
            .flat_map(|p| p.models.keys().map(move |m| format!("{}/{m}", p.name)))
            .collect()
    }

    /// The provider and model `name` (`provider/model`) names; with `None`, the default
    /// model. A model a provider does not list is still usable by its full name
    /// (`openrouter/some/model`): it gets no context window and no prices.
    ///
    /// # Errors
    /// No such provider, or no name and no default.
    pub fn resolve(
        &self,
        name: Option<&str>,
    ) -> Result<(ProviderConfig, ModelConfig), ConfigError> {
        let unknown = |name: &str| ConfigError::UnknownModel {
            name: name.to_owned(),
            known: self.model_names(),
        };
        let name = name
            .or(self.model.as_deref())
            .ok_or_else(|| unknown("(none: set `model` or TURNSTILE_MODEL)"))?;
        let (provider, model) = name.split_once('/').ok_or_else(|| unknown(name))?;
        let p = self.providers.get(provider).ok_or_else(|| unknown(name))?;
        let m = p.models.get(model).cloned().unwrap_or_else(|| ModelConfig {
            name: model.to_owned(),
            api_model: model.to_owned(),
            context_window: 0,
            max_output_tokens: None,
            reasoning: None,
            images: false,
            max_tokens_field: MaxTokensField::MaxTokens,
            prices: Prices::default(),
        });
        if model.is_empty() {
            return Err(unknown(name));
        }
        Ok((p.clone(), m))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str, env: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let env: Vec<(String, String)> =
            env.iter().map(|(a, b)| ((*a).into(), (*b).into())).collect();
        Config::from_text(Path::new("turnstile.toml"), text, &move |k| {
            env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
        })
    }

    #[test]
    fn the_catalogue_is_valid_and_resolves() {
        let c = Config::catalogue();
        let (p, m) = c.resolve(Some("anthropic/claude-sonnet-4")).unwrap();
        assert_eq!(p.api, Api::AnthropicMessages);
        assert_eq!(m.api_model, "claude-sonnet-4-20250514");
        assert_eq!(m.prices.input, 3_000_000);
        assert_eq!(p.key, KeySource::Env("ANTHROPIC_API_KEY".into()));
        let (_, m) = c.resolve(Some("openrouter/qwen/qwen3-coder")).unwrap();
        assert_eq!((m.api_model.as_str(), m.context_window), ("qwen/qwen3-coder", 0));
    }

    #[test]
    fn a_file_overrides_fields_and_the_environment_overrides_the_file() {
        let c = load(
            "model = \"anthropic/claude-sonnet-4\"\n[providers.anthropic]\napi_key_command = [\"echo\", \"k\"]\n[providers.anthropic.models.\"claude-sonnet-4\"]\ncontext_window = 1000\n",
            &[("TURNSTILE_MODEL", "openai/gpt-5"), ("TURNSTILE_ANTHROPIC_BASE_URL", "http://127.0.0.1:9/v1")],
        )
        .unwrap();
        assert_eq!(c.model.as_deref(), Some("openai/gpt-5"));
        let (p, m) = c.resolve(Some("anthropic/claude-sonnet-4")).unwrap();
        assert_eq!(p.base_url, "http://127.0.0.1:9/v1");
        assert_eq!(p.key, KeySource::Command(vec!["echo".into(), "k".into()]));
        assert_eq!(p.headers.get("anthropic-version").map(String::as_str), Some("2023-06-01"));
        assert_eq!((m.context_window, m.prices.input), (1000, 0), "a model is replaced whole");
    }

    #[test]
    fn errors_name_the_file_the_line_and_the_field() {
        let e = load("[providers.x]\napi = \"openai-chat\"\nbase_url = 3\n", &[])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("turnstile.toml") && e.contains("line 3") && e.contains("base_url"),
            "{e}"
        );
        let e = load("[providers.x]\napi = \"openai-chat\"\nbase_ur = \"http://h\"\n", &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown field `base_ur`"), "{e}");
        let e = load("[providers.x]\napi = \"grpc\"\nbase_url = \"http://h\"\n", &[])
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "invalid configuration `turnstile.toml`: `providers.x.api` is `grpc`; expected one of openai-chat, openai-responses, anthropic-messages"
        );
        let e = load("[providers.x]\napi = \"openai-chat\"\nbase_url = \"h\"\n", &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("`providers.x.base_url` is `h`"), "{e}");
        let e = load("[providers.x]\napi = \"openai-chat\"\nbase_url = \"http://h\"\n[providers.x.models.m]\nprice = { input = -1.0 }\n", &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("`providers.x.models.m.price.input` is -1"), "{e}");
        let e = load("", &[]).unwrap().resolve(Some("nope/x")).unwrap_err().to_string();
        assert!(
            e.starts_with("model `nope/x` is not configured (known: anthropic/claude-3-5-haiku"),
            "{e}"
        );
    }
}
