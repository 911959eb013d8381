//! From the command line and the configuration file to a running host: where the files are,
//! which model, which tools behind which gate.
//!
//! The configuration file is the providers' (see `turnstile_http::config`) plus the agent's
//! sections, read here:
//!
//! ```toml
//! [permissions]                      # turnstile_tools::permission
//! allow = ["bash(cargo test*)"]
//!
//! [[hooks.pre_tool]]                 # turnstile_tools::hook
//! command = ["./check.sh"]
//!
//! [mcp.docs]                         # turnstile_mcp
//! command = ["docs-mcp-server"]
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;
use turnstile_host::{Host, HostConfig, OpenError, StoreError, ToolSet};
use turnstile_http::{Config, HttpProvider, KeySource};
use turnstile_tools::{Asker, Gate, Hook, HooksFile, Permissions, PermissionsFile, Reaper};

use crate::Failure;
use crate::args::Global;

/// The models tried, in order, when the configuration names none: the first whose key is set.
const DEFAULT_MODELS: [(&str, &str); 2] = [
    ("ANTHROPIC_API_KEY", "anthropic/claude-sonnet-4"),
    ("OPENAI_API_KEY", "openai/gpt-5"),
];

/// The agent's sections of the configuration file (the providers' are read by
/// `turnstile_http`, which refuses any other unknown field).
#[derive(Debug, Default, Deserialize)]
struct AgentFile {
    #[serde(default)]
    permissions: PermissionsFile,
    #[serde(default)]
    hooks: HooksFile,
    #[serde(default)]
    mcp: BTreeMap<String, turnstile_mcp::ServerConfig>,
    #[serde(default)]
    server: ServerFile,
}

/// `[server]`: how `turnstile serve` listens and what it allows (every field optional).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerFile {
    /// The address to listen on (`127.0.0.1:8700` by default).
    pub listen: Option<String>,
    /// Where the token is kept (`server-token` beside the store by default).
    pub token_file: Option<PathBuf>,
    /// Origins whose browser requests are allowed (none by default).
    #[serde(default)]
    pub allowed_origins: Vec<String>,
    /// The largest request body, in bytes.
    pub max_body_bytes: Option<usize>,
    /// The longest prompt, in bytes.
    pub max_prompt_bytes: Option<usize>,
    /// The most attachments on one prompt.
    pub max_attachments: Option<usize>,
    /// The most event streams open at once.
    pub max_streams: Option<usize>,
}

/// Where the configuration was looked for and what it said.
pub struct Loaded {
    /// The file read, if one was found.
    pub path: Option<PathBuf>,
    /// The places looked at, for a "configure a provider in ..." message.
    pub looked: Vec<PathBuf>,
    /// Providers and models.
    pub config: Config,
    agent: AgentFile,
}

impl Loaded {
    /// The `[server]` section.
    #[must_use]
    pub fn server(&self) -> &ServerFile {
        &self.agent.server
    }
}

/// The configuration file: `--config` (or `TURNSTILE_CONFIG`), else `./turnstile.toml`, else
/// `~/.config/turnstile/config.toml` (`$XDG_CONFIG_HOME` when set).
///
/// # Errors
/// A file given that cannot be read, or any file that is invalid (named, with the line).
pub fn load(global: &Global, cwd: &Path) -> Result<Loaded, Failure> {
    let (path, looked) = match &global.config {
        Some(p) => (Some(p.clone()), vec![p.clone()]),
        None => {
            let mut looked = vec![cwd.join("turnstile.toml")];
            let home = std::env::var_os("XDG_CONFIG_HOME")
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")));
            if let Some(home) = home {
                looked.push(home.join("turnstile").join("config.toml"));
            }
            (looked.iter().find(|p| p.is_file()).cloned(), looked)
        }
    };
    let config = Config::load(path.as_deref()).map_err(|e| Failure::setup(e.to_string()))?;
    let agent = match &path {
        None => AgentFile::default(),
        Some(p) => {
            // Config::load read it a moment ago; a file that vanished since is an error too.
            let text = std::fs::read_to_string(p).map_err(|e| {
                Failure::setup(format!(
                    "cannot read the configuration `{}`: {e}",
                    p.display()
                ))
            })?;
            toml::from_str(&text).map_err(|e| {
                Failure::setup(format!(
                    "invalid configuration `{}`: {}",
                    p.display(),
                    e.to_string().trim_end()
                ))
            })?
        }
    };
    Ok(Loaded {
        path,
        looked,
        config,
        agent,
    })
}

impl Loaded {
    fn where_(&self) -> String {
        match &self.path {
            Some(p) => format!("`{}`", p.display()),
            None => self
                .looked
                .iter()
                .map(|p| format!("`{}`", p.display()))
                .collect::<Vec<_>>()
                .join(" or "),
        }
    }

    /// The provider for `--model` (or the configured one, or the first whose key is set),
    /// checked to have its key.
    ///
    /// # Errors
    /// No model, an unknown model, or a key that is not set: each says what to set and where.
    pub fn provider(&self, model: Option<&str>, cwd: &Path) -> Result<HttpProvider, Failure> {
        let set = |var: &str| std::env::var_os(var).is_some_and(|v| !v.is_empty());
        let name = match model
            .map(str::to_owned)
            .or_else(|| self.config.model.clone())
        {
            Some(name) => name,
            None => match DEFAULT_MODELS.iter().find(|(var, _)| set(var)) {
                Some((_, name)) => (*name).to_owned(),
                None => {
                    return Err(Failure::setup(format!(
                        "no model to talk to: set OPENAI_API_KEY or ANTHROPIC_API_KEY, or \
                         configure a provider and `model` in {}",
                        self.where_()
                    )));
                }
            },
        };
        let (provider, _) = self
            .config
            .resolve(Some(&name))
            .map_err(|e| Failure::setup(e.to_string()))?;
        if let KeySource::Env(var) = &provider.key
            && !set(var)
        {
            return Err(Failure::setup(format!(
                "set {var} to use `{name}`, or configure a provider in {}",
                self.where_()
            )));
        }
        let p = HttpProvider::new(&self.config, Some(&name))
            .map_err(|e| Failure::setup(e.to_string()))?;
        Ok(p.with_working_dir(cwd.display().to_string()))
    }

    /// The tools of a run in `cwd`: the built-ins and the MCP servers' tools, behind the gate
    /// (`yolo`: every ask is a yes; otherwise `asker` answers). Returns the gate too, for the
    /// denials it recorded. An MCP server that does not start is reported on stderr and offers
    /// no tools; the run goes on.
    ///
    /// # Errors
    /// An invalid permission rule or hook, or a working directory that is not one.
    pub async fn tools(
        &self,
        cwd: &Path,
        yolo: bool,
        reaper: Option<Reaper>,
        asker: Arc<dyn Asker>,
    ) -> Result<(ToolSet, Arc<Gate>), Failure> {
        let invalid = |e: &dyn std::fmt::Display| {
            Failure::setup(format!("invalid configuration {}: {e}", self.where_()))
        };
        let permissions = Permissions::new(&self.agent.permissions).map_err(|e| invalid(&e))?;
        let hooks = Hook::all(&self.agent.hooks).map_err(|e| invalid(&e))?;
        let mut tools = turnstile_tools::builtins(cwd, reaper).map_err(|e| {
            Failure::setup(format!(
                "cannot use `{}` as the working directory: {e}",
                cwd.display()
            ))
        })?;
        if !self.agent.mcp.is_empty() {
            let (mcp, failures) = turnstile_mcp::connect_all(&self.agent.mcp).await;
            for failure in failures {
                eprintln!("warning: {failure}; its tools are not offered");
            }
            tools = turnstile_mcp::add_tools(tools, mcp);
        }
        let gate = Arc::new(Gate::new(permissions, hooks, asker, cwd).yolo(yolo));
        Ok((gate.wrap(tools), gate))
    }
}

/// The store file: `--store`, else `.turnstile/store.db` under `cwd`.
#[must_use]
pub fn store_path(global: &Global, cwd: &Path) -> PathBuf {
    global
        .store
        .clone()
        .unwrap_or_else(|| cwd.join(".turnstile").join("store.db"))
}

/// The reaper of `bash` commands' process groups for this store: `running/` beside it. One
/// process owns a store, so one owns its folder.
#[must_use]
pub fn reaper(store: &Path) -> Option<Reaper> {
    let dir = store.parent().unwrap_or(Path::new(".")).join("running");
    match Reaper::new(&dir) {
        Ok(r) => Some(r),
        Err(e) => {
            tracing::warn!(dir = %dir.display(), "cannot record running commands: {e}");
            None
        }
    }
}

/// Kills the commands a killed process of this store left running (the store's lock is ours,
/// so they are nobody's), and says so on stderr. Call it right after [`open`], before any
/// tool of ours runs.
pub fn reap(reaper: Option<&Reaper>) {
    if let Some(reaper) = reaper {
        let killed = reaper.reap();
        if !killed.is_empty() {
            eprintln!(
                "note: killed {} command(s) a previous process of this store left running when \
                 it was killed",
                killed.len()
            );
        }
    }
}

/// Opens the host on the store (creating its folder), with this provider and these tools.
///
/// # Errors
/// The folder cannot be made, or the store cannot be opened (in use by another process:
/// said so, with the file).
pub async fn open(store: &Path, provider: HttpProvider, tools: ToolSet) -> Result<Host, Failure> {
    if let Some(dir) = store.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| {
            Failure::setup(format!(
                "cannot create the store's folder `{}`: {e}",
                dir.display()
            ))
        })?;
    }
    Host::open(HostConfig::new(store), Arc::new(provider), tools)
        .await
        .map_err(|e| {
            let detail = match &e {
                OpenError::Store(StoreError::InUse) => {
                    " (another `turnstile` runs in this directory: wait for it, give --store, \
                     or if it is a `turnstile serve`, run with --server URL)"
                }
                _ => "",
            };
            Failure::setup(format!(
                "cannot open the store `{}`: {e}{detail}",
                store.display()
            ))
        })
}
