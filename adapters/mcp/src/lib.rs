//! # turnstile-mcp: the tools of MCP servers as turnstile tools (SPEC 9 "Tools")
//!
//! Each server configured under `[mcp.<name>]` ([`ServerConfig`]) is started (a child process
//! over stdio, or a streamable HTTP endpoint), with the MCP handshake and `tools/list` within
//! its startup timeout. Each of its tools becomes an [`McpTool`] named `mcp_<server>_<tool>`
//! ([`name`]), with the server's description and input schema. A server that fails to start
//! offers no tools and is reported as a [`StartFailure`]; one that fails or dies later gives
//! its calls an error result, never a hang; an aborted call sends MCP's cancellation.
//!
//! Built on rmcp, the official Rust MCP SDK.
//!
//! ```no_run
//! # async fn demo() -> Result<(), toml::de::Error> {
//! use std::collections::BTreeMap;
//! use turnstile_mcp::ServerConfig;
//!
//! let servers: BTreeMap<String, ServerConfig> = toml::from_str(
//!     r#"
//!     [files]
//!     command = ["npx", "-y", "@modelcontextprotocol/server-filesystem", "."]
//!     "#,
//! )?;
//! let (tools, failures) = turnstile_mcp::connect_all(&servers).await;
//! for failure in &failures {
//!     eprintln!("turnstile: {failure}");
//! }
//! let set = turnstile_mcp::add_tools(turnstile_host::ToolSet::new(), tools);
//! # let _ = set; Ok(()) }
//! ```

#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod config;
mod connect;
mod connection;
pub mod name;
mod process;
mod stderr;
mod tool;

pub use config::{
    DEFAULT_STARTUP_TIMEOUT_SECS, DEFAULT_TIMEOUT_SECS, MAX_TIMEOUT_SECS, ServerConfig, Transport,
};
pub use connect::{StartFailure, connect, connect_all};
pub use name::{TOOL_NAME_MAX, tool_name};
pub use tool::McpTool;

/// `set` with `tools` added (a tool replaces one of the same name, as [`ToolSet::with`] does).
///
/// [`ToolSet::with`]: turnstile_host::ToolSet::with
#[must_use]
pub fn add_tools(
    set: turnstile_host::ToolSet,
    tools: impl IntoIterator<Item = McpTool>,
) -> turnstile_host::ToolSet {
    tools.into_iter().fold(set, turnstile_host::ToolSet::with)
}
