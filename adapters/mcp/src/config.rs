//! The configuration of one MCP server, as the CLI's TOML file has it under `[mcp.<name>]`.
//!
//! ```toml
//! # A server run as a child process, speaking MCP over its stdin and stdout.
//! [mcp.files]
//! command = ["npx", "-y", "@modelcontextprotocol/server-filesystem", "/srv/notes"]
//! env = { NODE_ENV = "production" }   # added to turnstile's environment
//! cwd = "/srv"                        # the working directory (default: turnstile's)
//! timeout_secs = 30                   # per call (default 60)
//! startup_timeout_secs = 10           # handshake and tools/list (default 20)
//!
//! # A server reached over streamable HTTP.
//! [mcp.search]
//! url = "http://127.0.0.1:8931/mcp"
//! headers = { Authorization = "Bearer abc123" }
//! ```
//!
//! A server has exactly one of `command` (stdio) and `url` (streamable HTTP); `env` and `cwd`
//! go only with `command`, `headers` only with `url`. Any other key is an error, and so is an
//! empty `command`, a `url` that is not `http://` or `https://`, a header name or value HTTP
//! does not allow, or a timeout of 0.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

/// The timeout of one call when the configuration gives none, in seconds.
pub const DEFAULT_TIMEOUT_SECS: u64 = 60;
/// The time a server has to start (the MCP handshake and `tools/list`) when the configuration
/// gives none, in seconds.
pub const DEFAULT_STARTUP_TIMEOUT_SECS: u64 = 20;
/// The longest either timeout may be, in seconds (a day).
pub const MAX_TIMEOUT_SECS: u64 = 86_400;

/// One MCP server: how to reach it, and how long its calls and its start may take.
///
/// Deserialized from a table of the CLI's TOML file (see the [module docs](self) for an example;
/// unknown keys are refused); built in code with [`ServerConfig::stdio`] or
/// [`ServerConfig::http`]. [`connect_all`](crate::connect_all) starts it.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(try_from = "RawServerConfig")]
pub struct ServerConfig {
    /// How to reach the server.
    pub transport: Transport,
    /// How long one call may take before it gets an error result (and the server a
    /// cancellation), in seconds; from 1 to [`MAX_TIMEOUT_SECS`].
    pub timeout_secs: u64,
    /// How long the server has to start, in seconds (from 1 to [`MAX_TIMEOUT_SECS`]): the
    /// handshake and its tools list. A server not ready by then offers no tools.
    pub startup_timeout_secs: u64,
}

/// How a server is reached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Transport {
    /// A child process speaking MCP over its stdin and stdout (`command = [...]`). It runs as
    /// the leader of its own process group; the group is killed when the connection ends.
    /// Its stderr is read as it comes: the last lines appear in a failure's reason, and every
    /// chunk is a `tracing` debug event.
    Stdio {
        /// The program and its arguments (not run through a shell).
        command: Vec<String>,
        /// Variables added to the program's environment (turnstile's own are inherited).
        env: BTreeMap<String, String>,
        /// The program's working directory; turnstile's own when absent.
        cwd: Option<PathBuf>,
    },
    /// An MCP server at a streamable HTTP endpoint (`url = "..."`).
    Http {
        /// The endpoint, `http://` or `https://`.
        url: String,
        /// Headers sent with every request (for example `Authorization`).
        headers: BTreeMap<String, String>,
    },
}

impl ServerConfig {
    /// A server run as `command` (the program, then its arguments), with the default timeouts.
    #[must_use]
    pub fn stdio<S: Into<String>>(command: impl IntoIterator<Item = S>) -> ServerConfig {
        ServerConfig::with_transport(Transport::Stdio {
            command: command.into_iter().map(Into::into).collect(),
            env: BTreeMap::new(),
            cwd: None,
        })
    }

    /// A server at the streamable HTTP endpoint `url`, with the default timeouts.
    #[must_use]
    pub fn http(url: impl Into<String>) -> ServerConfig {
        ServerConfig::with_transport(Transport::Http { url: url.into(), headers: BTreeMap::new() })
    }

    fn with_transport(transport: Transport) -> ServerConfig {
        ServerConfig {
            transport,
            timeout_secs: DEFAULT_TIMEOUT_SECS,
            startup_timeout_secs: DEFAULT_STARTUP_TIMEOUT_SECS,
        }
    }

    /// The same server with this per-call timeout, in seconds.
    #[must_use]
    pub fn with_timeout_secs(mut self, secs: u64) -> ServerConfig {
        self.timeout_secs = secs;
        self
    }

    /// The same server with this startup timeout, in seconds.
    #[must_use]
    pub fn with_startup_timeout_secs(mut self, secs: u64) -> ServerConfig {
        self.startup_timeout_secs = secs;
        self
    }

    /// The same server with the variable `key` set to `value` in its environment (stdio only;
    /// ignored for HTTP).
    #[must_use]
    pub fn with_env(mut self, key: impl Into<String>, value: impl Into<String>) -> ServerConfig {
        if let Transport::Stdio { env, .. } = &mut self.transport {
            env.insert(key.into(), value.into());
        }
        self
    }

    /// The same server run in the working directory `dir` (stdio only; ignored for HTTP).
    #[must_use]
    pub fn with_cwd(mut self, dir: impl Into<PathBuf>) -> ServerConfig {
        if let Transport::Stdio { cwd, .. } = &mut self.transport {
            *cwd = Some(dir.into());
        }
        self
    }

    /// The same server with the header `name: value` sent with every request (HTTP only;
    /// ignored for stdio).
    #[must_use]
    pub fn with_header(
        mut self,
        name: impl Into<String>,
        value: impl Into<String>,
    ) -> ServerConfig {
        if let Transport::Http { headers, .. } = &mut self.transport {
            headers.insert(name.into(), value.into());
        }
        self
    }

    /// The per-call timeout.
    #[must_use]
    pub fn timeout(&self) -> Duration {
        Duration::from_secs(self.timeout_secs)
    }

    /// The startup timeout.
    #[must_use]
    pub fn startup_timeout(&self) -> Duration {
        Duration::from_secs(self.startup_timeout_secs)
    }

    /// Checks what deserialization checks: one of `command` or `url` (a non-empty command, an
    /// `http(s)://` URL, headers HTTP allows) and timeouts from 1 s to a day.
    ///
    /// # Errors
    /// The first problem, as a sentence naming the key.
    pub fn validate(&self) -> Result<(), String> {
        for (key, secs) in [
            ("timeout_secs", self.timeout_secs),
            ("startup_timeout_secs", self.startup_timeout_secs),
        ] {
            if !(1..=MAX_TIMEOUT_SECS).contains(&secs) {
                return Err(format!(
                    "`{key}` must be from 1 to {MAX_TIMEOUT_SECS} (a day): {secs}"
                ));
            }
        }
        match &self.transport {
            Transport::Stdio { command, .. } => match command.first() {
                None => Err("`command` must name a program: it is empty".into()),
                Some(program) if program.is_empty() => {
                    Err("`command` must name a program: its first item is empty".into())
                }
                Some(_) => Ok(()),
            },
            Transport::Http { url, headers } => {
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(format!("`url` must start with http:// or https://: {url:?}"));
                }
                for (name, value) in headers {
                    header(name, value)?;
                }
                Ok(())
            }
        }
    }
}

/// A header as rmcp's HTTP transport takes it.
pub(crate) fn header(
    name: &str,
    value: &str,
) -> Result<(http::HeaderName, http::HeaderValue), String> {
    let n = http::HeaderName::try_from(name)
        .map_err(|_| format!("`headers`: {name:?} is not a valid HTTP header name"))?;
    let v = http::HeaderValue::try_from(value).map_err(|_| {
        format!("`headers`: the value of {name:?} is not a valid HTTP header value")
    })?;
    Ok((n, v))
}

/// The table as written; [`ServerConfig`] is what it means once checked.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawServerConfig {
    command: Option<Vec<String>>,
    env: Option<BTreeMap<String, String>>,
    cwd: Option<PathBuf>,
    url: Option<String>,
    headers: Option<BTreeMap<String, String>>,
    timeout_secs: Option<u64>,
    startup_timeout_secs: Option<u64>,
}

impl TryFrom<RawServerConfig> for ServerConfig {
    type Error = String;

    fn try_from(raw: RawServerConfig) -> Result<ServerConfig, String> {
        let transport = match (raw.command, raw.url) {
            (Some(_), Some(_)) => {
                return Err("a server has either `command` (stdio) or `url` (streamable HTTP), \
                            not both"
                    .into());
            }
            (None, None) => {
                return Err("a server needs `command = [\"program\", \"arg\", ...]` (stdio) or \
                            `url = \"http://...\"` (streamable HTTP)"
                    .into());
            }
            (Some(command), None) => {
                if raw.headers.is_some() {
                    return Err("`headers` is for a `url` server; this one has `command`".into());
                }
                Transport::Stdio { command, env: raw.env.unwrap_or_default(), cwd: raw.cwd }
            }
            (None, Some(url)) => {
                if raw.env.is_some() || raw.cwd.is_some() {
                    return Err(
                        "`env` and `cwd` are for a `command` server; this one has `url`".into()
                    );
                }
                Transport::Http { url, headers: raw.headers.unwrap_or_default() }
            }
        };
        let config = ServerConfig {
            transport,
            timeout_secs: raw.timeout_secs.unwrap_or(DEFAULT_TIMEOUT_SECS),
            startup_timeout_secs: raw.startup_timeout_secs.unwrap_or(DEFAULT_STARTUP_TIMEOUT_SECS),
        };
        config.validate()?;
        Ok(config)
    }
}
