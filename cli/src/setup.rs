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
//!
//! [record]                           # crate::record
//! dir = ".turnstile/recordings"
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;
use turnstile_host::store::{Location, StoreConfig};
use turnstile_host::{Host, HostConfig, OpenError, StoreError, ToolSet};
use turnstile_http::{Config, HttpProvider, KeySource};
use turnstile_tools::{Asker, Gate, Hooks, HooksFile, Permissions, PermissionsFile, Reaper};

use crate::args::Global;
use crate::failure::Failure;
use crate::record::Recording;

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
    #[serde(default)]
    record: RecordFile,
    /// Seconds an attempt may stream nothing before it fails and is retried; 0 disables.
    #[serde(default)]
    stream_idle_timeout: Option<u64>,
    /// Attempts per model request (1: never retry).
    #[serde(default)]
    retry_attempts: Option<u32>,
    /// Seconds before retry 1, 2, 3, ... (the last repeats).
    #[serde(default)]
    retry_backoff: Option<Vec<f64>>,
}

/// The longest configurable backoff before a retry, in seconds.
const BACKOFF_MAX_SECS: f64 = 3_600.0;

/// The engine's configuration from the file's top-level keys `stream_idle_timeout`,
/// `retry_attempts` and `retry_backoff` (each absent: SPEC's default, 300 s, 4 attempts,
/// 5, 10 and 20 s).
fn engine_config(agent: &AgentFile, file: &Path) -> Result<turnstile_core::Config, Failure> {
    let invalid = |key: &str, why: &str| {
        Failure::setup(format!(
            "invalid configuration `{}`: `{key}` {why}",
            file.display()
        ))
    };
    let mut engine = turnstile_core::Config::default();
    if let Some(secs) = agent.stream_idle_timeout {
        engine.stream_idle_timeout_ms = secs.saturating_mul(1_000);
    }
    if let Some(n) = agent.retry_attempts {
        if n == 0 {
            return Err(invalid(
                "retry_attempts",
                "must be at least 1 (1: never retry)",
            ));
        }
        engine.attempts_max = n;
    }
    if let Some(delays) = &agent.retry_backoff {
        if delays
            .iter()
            .any(|d| !d.is_finite() || *d < 0.0 || *d > BACKOFF_MAX_SECS)
        {
            return Err(invalid(
                "retry_backoff",
                "takes seconds from 0 to 3600, like [5, 10, 20]",
            ));
        }
        engine.retry_backoff_ms = delays
            .iter()
            .map(|d| (d * 1_000.0).round() as u64)
            .collect();
    }
    engine.validate().map_err(|e| match e {
        turnstile_core::HostError::InvalidConfig {
            field: "retry_backoff_ms",
            ..
        } => invalid(
            "retry_backoff",
            "must name at least one delay when retries are allowed",
        ),
        e => invalid("stream_idle_timeout", &e.to_string()),
    })?;
    Ok(engine)
}

/// `[record]`: record every run as `--record` does (`crate::record`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordFile {
    /// The recording folder, relative to the project's folder (none by default).
    #[serde(default, deserialize_with = "crate::record::folder")]
    pub dir: Option<PathBuf>,
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
    /// The most connections open at once (cut to the process's file limit).
    pub max_connections: Option<usize>,
    /// How long a request head may take to arrive, and a kept-alive connection may idle, in
    /// seconds.
    pub header_timeout_secs: Option<u64>,
    /// The bytes of events a stream may leave unread before it is ended (its client resumes).
    pub stream_backlog_bytes: Option<u64>,
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
    engine: turnstile_core::Config,
}

impl Loaded {
    /// The engine's configuration: `stream_idle_timeout`, `retry_attempts` and
    /// `retry_backoff` of the file over SPEC's defaults.
    #[must_use]
    pub fn engine(&self) -> &turnstile_core::Config {
        &self.engine
    }

    /// The `[server]` section.
    #[must_use]
    pub fn server(&self) -> &ServerFile {
        &self.agent.server
    }

    /// The `[record]` section.
    #[must_use]
    pub fn record(&self) -> &RecordFile {
        &self.agent.record
    }

    /// The recording folder: `flag` (`--record`), else `[record] dir`, relative to the
    /// project's folder (where the store's `.turnstile/` is: [`project_root`] of `cwd`).
    #[must_use]
    pub fn record_folder(&self, flag: Option<&Path>, cwd: &Path) -> Option<PathBuf> {
        flag.map(Path::to_owned).or_else(|| {
            let dir = self.record().dir.as_ref()?;
            Some(project_root(cwd).join(dir))
        })
    }
}

/// The configuration file: `--config` (or `TURNSTILE_CONFIG`), else `turnstile.toml` in the
/// project's root ([`project_root`] of `cwd`), else `~/.config/turnstile/config.toml`
/// (`$XDG_CONFIG_HOME` when set).
///
/// # Errors
/// A file given that cannot be read, or any file that is invalid (named, with the line).
pub fn load(global: &Global, cwd: &Path) -> Result<Loaded, Failure> {
    let (path, looked) = match &global.config {
        Some(p) => (Some(p.clone()), vec![p.clone()]),
        None => {
            let mut looked = vec![project_root(cwd).join("turnstile.toml")];
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
    let engine = match &path {
        Some(p) => engine_config(&agent, p)?,
        None => turnstile_core::Config::default(),
    };
    Ok(Loaded {
        path,
        looked,
        config,
        agent,
        engine,
    })
}

/// The project's root, where `turnstile.toml` and the store (`.turnstile/`) are: from `start`
/// upward, the nearest folder that has `.turnstile/` or `turnstile.toml`; a folder with `.git`
/// (a repository's root) ends the search and is the root when nothing nearer was found; with
/// neither, `start` itself. So `turnstile` finds the project's configuration and sessions
/// from any of its subfolders.
#[must_use]
pub fn project_root(start: &Path) -> PathBuf {
    for dir in start.ancestors() {
        if dir.join(".turnstile").is_dir() || dir.join("turnstile.toml").is_file() {
            return dir.to_owned();
        }
        if dir.join(".git").exists() {
            return dir.to_owned();
        }
    }
    start.to_owned()
}

/// Creates the store's folder, and when it is a `.turnstile` folder, a `.gitignore` in it
/// that ignores everything: the history, the run ledger and the server's token must never
/// land in a commit. An existing `.gitignore` is left as it is.
///
/// # Errors
/// The folder cannot be made.
pub fn store_dir(dir: &Path) -> std::io::Result<()> {
    if dir.as_os_str().is_empty() {
        return Ok(());
    }
    std::fs::create_dir_all(dir)?;
    let ignore = dir.join(".gitignore");
    if dir.file_name().is_some_and(|n| n == ".turnstile") && !ignore.exists() {
        // Best effort: a folder we cannot write into fails at the store's own write.
        let _ = std::fs::write(&ignore, "*\n");
    }
    Ok(())
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
        self.provider_with(model, cwd, true)
    }

    /// The provider as [`Loaded::provider`] finds it, without requiring its key: for showing
    /// what would be sent.
    ///
    /// # Errors
    /// No model, or an unknown model.
    pub fn provider_for_show(
        &self,
        model: Option<&str>,
        cwd: &Path,
    ) -> Result<HttpProvider, Failure> {
        self.provider_with(model, cwd, false)
    }

    fn provider_with(
        &self,
        model: Option<&str>,
        cwd: &Path,
        need_key: bool,
    ) -> Result<HttpProvider, Failure> {
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
            && need_key
            && !set(var)
        {
            return Err(Failure::setup(format!(
                "set {var} to use `{name}`, or configure a provider in {}",
                self.where_()
            )));
        }
        let p = HttpProvider::new(&self.config, Some(&name))
            .map_err(|e| Failure::setup(e.to_string()))?;
        // The project's AGENTS.md (or CLAUDE.md) files, from the repository's root down.
        let instructions = turnstile_http::prompt::project_instructions(cwd);
        Ok(p.with_working_dir(cwd.display().to_string())
            .with_project_instructions(instructions))
    }

    /// The configured hooks of every moment.
    ///
    /// # Errors
    /// A hook that cannot be used, named by its section and index.
    pub fn hooks(&self) -> Result<Hooks, Failure> {
        Hooks::new(&self.agent.hooks)
            .map_err(|e| Failure::setup(format!("invalid configuration {}: {e}", self.where_())))
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
        let hooks = self.hooks()?;
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
        let gate = Gate::new(permissions, hooks.pre_tool, asker, cwd)
            .with_post_tool(hooks.post_tool)
            .yolo(yolo);
        let gate = Arc::new(gate);
        Ok((gate.wrap(tools), gate))
    }
}

/// Where the store is, and this machine's folder for it.
#[derive(Clone, Debug)]
pub struct StoreAt {
    /// The store: a SQLite file, or a PostgreSQL database.
    pub location: Location,
    /// The folder of this machine's files of the store (the commands it left running, the
    /// server's token): the file's folder, or the project's `.turnstile/` for a database.
    pub folder: PathBuf,
}

impl StoreAt {
    /// The store as messages name it (a database's URL without its password).
    #[must_use]
    pub fn describe(&self) -> String {
        self.location.to_string()
    }
}

/// The store: `--store` (a file, or a `postgres://` URL), else `.turnstile/store.db` in the
/// project's root ([`project_root`] of `cwd`).
#[must_use]
pub fn store_at(global: &Global, cwd: &Path) -> StoreAt {
    let local = project_root(cwd).join(".turnstile");
    match global.store.as_deref().map(Location::parse) {
        Some(Location::File(path)) => {
            let folder = path.parent().filter(|d| !d.as_os_str().is_empty());
            let folder = folder.map_or_else(|| PathBuf::from("."), Path::to_path_buf);
            StoreAt {
                location: Location::File(path),
                folder,
            }
        }
        Some(location) => StoreAt {
            location,
            folder: local,
        },
        None => StoreAt {
            location: Location::File(local.join("store.db")),
            folder: local,
        },
    }
}

/// The reaper of `bash` commands' process groups for this store: `running/` in its folder.
/// One process owns a store, so one owns its folder.
#[must_use]
pub fn reaper(store: &StoreAt) -> Option<Reaper> {
    // The first thing that creates the store's folder: its `.gitignore` comes with it.
    if let Err(e) = store_dir(&store.folder) {
        tracing::warn!(store = %store.folder.display(), "cannot create the store's folder: {e}");
    }
    let dir = store.folder.join("running");
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

/// Opens the host on the store (creating its folder), with this provider and these tools,
/// recording into `recording` when given (its claimed trace is given back when the host does
/// not open), as one of several servers when `member` is given (SPEC 11).
///
/// # Errors
/// The folder cannot be made, or the store cannot be opened (in use by another process:
/// said so, with the file), or the recording cannot be written.
pub async fn open(
    store: &StoreAt,
    provider: HttpProvider,
    tools: ToolSet,
    recording: Option<&Recording>,
    engine: &turnstile_core::Config,
    member: Option<turnstile_host::MemberConfig>,
) -> Result<Host, Failure> {
    let mut config = HostConfig::with_store(StoreConfig::at(store.location.clone()));
    config.engine = engine.clone();
    config.member = member;
    let provider = match recording {
        None => provider,
        Some(r) => r
            .attach(provider, &mut config)
            .inspect_err(|_| r.release())?,
    };
    let opened = open_host(store, config, provider, tools).await;
    if let (Err(_), Some(r)) = (&opened, recording) {
        r.release();
    }
    opened
}

async fn open_host(
    store: &StoreAt,
    config: HostConfig,
    provider: HttpProvider,
    tools: ToolSet,
) -> Result<Host, Failure> {
    store_dir(&store.folder).map_err(|e| {
        Failure::setup(format!(
            "cannot create the store's folder `{}`: {e}",
            store.folder.display()
        ))
    })?;
    Host::open(config, Arc::new(provider), tools)
        .await
        .map_err(|e| {
            let detail = match (&e, &store.location) {
                (OpenError::Store(StoreError::InUse), Location::Postgres(_)) => {
                    " (another `turnstile` owns this database: wait for it, give another \
                     --store, or if it is a `turnstile serve`, run with --server URL)"
                }
                (OpenError::Store(StoreError::InUse), _) => {
                    " (another `turnstile` runs in this directory: wait for it, give --store, \
                     or if it is a `turnstile serve`, run with --server URL)"
                }
                _ => "",
            };
            Failure::setup(format!(
                "cannot open the store `{}`: {e}{detail}",
                store.describe()
            ))
        })
}

/// The working directory: `dir`, else the current one, made absolute.
///
/// # Errors
/// It cannot be read or does not exist.
pub fn working_dir(dir: Option<&std::path::Path>) -> Result<PathBuf, Failure> {
    let cwd = match dir {
        Some(d) => d.to_owned(),
        None => std::env::current_dir()
            .map_err(|e| Failure::setup(format!("cannot read the current directory: {e}")))?,
    };
    std::fs::canonicalize(&cwd).map_err(|e| {
        Failure::setup(format!(
            "cannot use `{}` as the working directory: {e}",
            cwd.display()
        ))
    })
}

/// The environment variable that configures the token (for the server and its clients).
pub const TOKEN_ENV: &str = "TURNSTILE_SERVER_TOKEN";

/// The token file in a store's folder (beside its file, or the project's `.turnstile/`).
#[must_use]
pub fn default_token_file(store: &StoreAt) -> PathBuf {
    store.folder.join("server-token")
}
