//! `turnstile serve`: the host over HTTP (SPEC 9 "Server"), until SIGTERM or Ctrl-C.
//!
//! On a signal the server shuts the host down first (new prompts get 503, every unfinished
//! submission ends `interrupted` and its RunComplete reaches the event streams), then stops
//! listening. A second signal exits at once; the next start's recovery decides what was left.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use turnstile_server::{Asks, Server, ServerConfig, Token, TokenSource};

use crate::args::{Global, Serve};
use crate::failure::Failure;
use crate::setup::{self, TOKEN_ENV, default_token_file};

/// The address `serve` listens on without `--listen` or `[server] listen`.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8700";

/// How long connections may take to close once the host has shut down.
const GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// Runs the `stop` hooks for every run that ends from now on, in the order they end.
fn follow_stops(host: &turnstile_host::Host, hooks: Vec<turnstile_tools::Hook>, cwd: PathBuf) {
    let host = host.clone();
    tokio::spawn(async move {
        let newest = match host.read(|r| r.newest_cursor()).await {
            Ok(c) => c,
            Err(e) => return tracing::warn!("stop hooks not run: cannot read the store: {e}"),
        };
        let mut completions = host.completions(newest);
        while let Ok(Some((_, record))) = completions.next().await {
            if record.is_run_complete() {
                crate::finish::run_stop_hooks(&hooks, &record, &cwd).await;
            }
        }
    });
}

/// Runs `turnstile serve`.
///
/// # Errors
/// What kept the server from starting: the configuration, the store, the token, the address.
pub async fn serve(global: &Global, a: Serve) -> Result<u8, Failure> {
    let cwd = crate::setup::working_dir(a.cwd.as_deref())?;
    let loaded = setup::load(global, &cwd)?;
    let file = loaded.server().clone();
    let listen = a
        .listen
        .clone()
        .or(file.listen.clone())
        .unwrap_or_else(|| DEFAULT_LISTEN.to_owned());
    let addr: SocketAddr = listen.parse().map_err(|e| {
        Failure::usage(format!(
            "--listen: `{listen}` is not an address like {DEFAULT_LISTEN}: {e}"
        ))
    })?;
    let provider = loaded.provider(a.model.as_deref(), &cwd)?;
    let store = setup::store_at(global, &cwd);
    let reaper = setup::reaper(&store);
    let asks = Asks::new();
    let (tools, _gate) = loaded
        .tools(&cwd, a.yolo, reaper.clone(), Arc::new(asks.clone()))
        .await?;
    let (token, source) = match std::env::var(TOKEN_ENV) {
        Ok(text) if !text.is_empty() => (
            Token::new(&text).map_err(|e| Failure::setup(format!("{TOKEN_ENV}: {e}")))?,
            TokenSource::Configured,
        ),
        _ => {
            let path = a
                .token_file
                .clone()
                .or(file.token_file.clone())
                .unwrap_or_else(|| default_token_file(&store));
            Token::load_or_generate(&path).map_err(|e| Failure::setup(e.to_string()))?
        }
    };
    let member = match &a.member {
        None => None,
        Some(_) if !matches!(store.location, turnstile_host::store::Location::Postgres(_)) => {
            return Err(Failure::usage(
                "--member needs a PostgreSQL store (--store postgres://...): several servers \
                 share one database, and a SQLite file is one process's",
            ));
        }
        Some(name) => {
            let mut m = turnstile_host::MemberConfig::new(name);
            if let Some(lease) = a.lease {
                m.lease = lease;
                m.margin = lease / 5;
            }
            Some(m)
        }
    };
    let recording = match &member {
        // A member's recording would be one trace per session: not offered (`--record`
        // conflicts with `--member`, and `[record] dir` is left out).
        Some(_) => None,
        None => crate::record::claim(loaded.record_folder(a.record.as_deref(), &cwd))?,
    };
    // A member offers no sub-agents: they take their sequences from the core (SPEC 4.10).
    let tools = if member.is_some() {
        tools.without_agent()
    } else {
        tools
    };
    let host = setup::open(
        &store,
        provider,
        tools,
        recording.as_ref(),
        loaded.engine(),
        member,
    )
    .await?;
    setup::reap(reaper.as_ref());
    if let Some(r) = &recording {
        eprintln!("{}", r.describe());
    }
    let recovered = host.recovered().len();
    let mut config = ServerConfig::new(token.clone());
    config.allowed_origins = file
        .allowed_origins
        .iter()
        .chain(&a.allow_origin)
        .cloned()
        .collect();
    if let Some(n) = file.max_body_bytes {
        config.limits.body_bytes = n;
    }
    if let Some(n) = file.max_prompt_bytes {
        config.limits.prompt_bytes = n;
    }
    if let Some(n) = file.max_attachments {
        config.limits.attachments = n;
    }
    if let Some(n) = file.max_streams {
        config.limits.streams = n;
    }
    if let Some(n) = file.stream_backlog_bytes {
        config.stream_backlog_bytes = n;
    }
    if let Some(secs) = file.header_timeout_secs {
        config.connections.header_timeout = std::time::Duration::from_secs(secs.max(1));
    }
    let wanted = file.max_connections.unwrap_or(config.connections.max);
    config.connections.max = match turnstile_server::connection_budget(wanted) {
        Ok(n) => n,
        Err(e) => {
            let _ = host.shutdown().await;
            return Err(Failure::setup(e.to_string()));
        }
    };
    // Streams hold their connections: leave room for the requests that are not streams.
    let streams_max = config.connections.max - config.connections.max / 4;
    if config.limits.streams > streams_max {
        config.limits.streams = streams_max;
    }
    let hooks = loaded.hooks()?;
    config.prompt_hooks = hooks.user_prompt_submit;
    config.hooks_cwd = cwd.clone();
    if !hooks.stop.is_empty() {
        if a.member.is_some() {
            // Every member hears every run's end: each would run the hooks again.
            eprintln!("warning: [[hooks.stop]] is not run by several servers (--member)");
        } else {
            follow_stops(&host, hooks.stop, cwd.clone());
        }
    }
    // Several servers list and answer one another's asks (nothing changes for one alone).
    asks.share(&host);
    let server = Server::start(host.clone(), asks, config).await;
    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(l) => l,
        Err(e) => {
            let _ = host.shutdown().await;
            return Err(Failure::setup(format!("cannot listen on {addr}: {e}")));
        }
    };
    let bound = listener.local_addr().map_or(addr, |a| a);
    eprintln!("turnstile serve: listening on http://{bound}");
    if !bound.ip().is_loopback() {
        eprintln!(
            "warning: {} is reachable from other machines, over plain HTTP: the token is the \
             only protection; put a TLS proxy in front",
            bound.ip()
        );
    }
    match &source {
        TokenSource::Generated(path) => eprintln!(
            "token: {} (generated into `{}`, readable only by you; shown this once)",
            token.expose(),
            path.display()
        ),
        TokenSource::File(path) => eprintln!("token: in `{}`", path.display()),
        TokenSource::Configured => eprintln!("token: from {TOKEN_ENV}"),
    }
    if recovered > 0 {
        eprintln!(
            "recovery: {recovered} unfinished submission(s) of the last process ended interrupted"
        );
    }
    let stopping = server.clone();
    let (done_tx, mut done_rx) = tokio::sync::watch::channel(false);
    let shutdown = async move {
        wait_for_signal().await;
        eprintln!("shutting down: unfinished runs end interrupted (a second signal exits at once)");
        tokio::spawn(async {
            wait_for_signal().await;
            eprintln!("exiting without waiting; the next start recovers what was unfinished");
            std::process::exit(1);
        });
        if let Err(e) = stopping.shutdown().await {
            eprintln!("warning: the host stopped before its shutdown: {e}");
        }
        done_tx.send_replace(true);
    };
    let serving = server.serve(listener, shutdown);
    // Once the host is down every stream ends; a client that stopped reading keeps its
    // connection open, so the graceful wait has a deadline.
    let served = tokio::select! {
        biased;
        served = serving => served,
        () = async {
            let _ = done_rx.wait_for(|d| *d).await;
            tokio::time::sleep(GRACE).await;
        } => {
            eprintln!("some clients did not disconnect within {} s; stopping anyway", GRACE.as_secs());
            Ok(())
        }
    };
    if let Err(e) = host.shutdown().await {
        tracing::warn!("the host stopped before its shutdown: {e}");
    }
    served.map_err(|e| Failure::setup(format!("the server failed: {e}")))?;
    eprintln!("turnstile serve: stopped");
    Ok(0)
}

/// SIGTERM or SIGINT.
async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    biased;
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
