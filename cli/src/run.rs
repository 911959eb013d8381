//! `turnstile run`: one prompt to its RunComplete (SPEC 9 "CLI").
//!
//! The run has its own RunId (`--run-id`, or a fresh one), so it waits for exactly its own
//! RunComplete (SPEC 5) and a rerun with the same id and prompt after a crash attaches to the
//! same run instead of starting a new one. The first Ctrl-C cancels the run with `cancel_run`
//! and keeps waiting for its RunComplete (`cancelled`, status 130); a second exits at once.

use std::io::{IsTerminal, Read as _};
use std::path::Path;
use std::sync::Arc;

use serde_json::json;
use turnstile_core::{Rejection, RunId, SessionId, Submit};
use turnstile_host::{CompletionRecord, Host, SubmitError};
use turnstile_tools::hook::{self, HookInput};
use turnstile_tools::{DenyAsks, Hooks};

use crate::args::{Global, Run};
use crate::failure::Failure;
use crate::finish::{rejected, report, run_stop_hooks, show};
use crate::live::{Follower, Show};
use crate::setup::working_dir;
use crate::{out, setup};

/// Runs `turnstile run`.
///
/// # Errors
/// What kept the run from starting, or from being waited for.
pub async fn run(global: &Global, a: Run) -> Result<u8, Failure> {
    if a.print_system_prompt {
        return print_system_prompt(global, &a).await;
    }
    let prompt = read_prompt(a.prompt.as_deref().unwrap_or_default())?;
    if prompt.trim().is_empty() {
        // The core refuses only an empty prompt; one of blanks (`echo "" | turnstile run -`)
        // says nothing either, and is refused the same way, before anything starts.
        return Err(rejected(a.json, &Rejection::PromptEmpty.to_string()));
    }
    if let Some(url) = a.server.clone() {
        return crate::remote::run(global, a, &url, prompt).await;
    }
    let cwd = working_dir(a.cwd.as_deref())?;
    let loaded = setup::load(global, &cwd)?;
    let provider = loaded.provider(a.model.as_deref(), &cwd)?;
    let store = setup::store_at(global, &cwd);
    let reaper = setup::reaper(&store);
    let (tools, gate) = loaded
        .tools(&cwd, a.yolo, reaper.clone(), Arc::new(DenyAsks))
        .await?;
    let recording = crate::record::claim(loaded.record_folder(a.record.as_deref(), &cwd))?;
    let host = setup::open(
        &store,
        provider,
        tools,
        recording.as_ref(),
        loaded.engine(),
        None,
    )
    .await?;
    if let Some(r) = recording.filter(|_| std::io::stderr().is_terminal()) {
        eprintln!("{}", r.describe());
    }
    // The store's lock is ours now: commands a killed run of this store left running are
    // killed before any of ours starts.
    setup::reap(reaper.as_ref());

    let hooks = loaded.hooks()?;
    let result = drive(&host, &a, prompt, &hooks, &cwd).await;
    // Whatever happened, the store is closed cleanly (a cancelled or failed run included).
    if let Err(e) = host.shutdown().await {
        tracing::warn!("the host stopped before its shutdown: {e}");
    }
    let (record, show) = result?;
    run_stop_hooks(&hooks.stop, &record, &cwd).await;
    let code = report(&record, show);
    if code != 0 && !out::is_closed() {
        for d in gate.denials() {
            let on = d.subject.map(|s| format!(" on `{s}`")).unwrap_or_default();
            eprintln!("  denied: `{}`{on}: {}", d.tool, d.why);
        }
    }
    Ok(code)
}

/// `turnstile run --print-system-prompt`: the system prompt of a request of this run, with the
/// tools it would offer (the MCP servers' included), on stdout.
async fn print_system_prompt(global: &Global, a: &Run) -> Result<u8, Failure> {
    let cwd = working_dir(a.cwd.as_deref())?;
    let loaded = setup::load(global, &cwd)?;
    let provider = loaded.provider_for_show(a.model.as_deref(), &cwd)?;
    let (tools, _) = loaded.tools(&cwd, false, None, Arc::new(DenyAsks)).await?;
    out::line(&provider.system_prompt(&tools.definitions()));
    Ok(0)
}

/// The prompt: the argument, or stdin for `-`.
fn read_prompt(arg: &str) -> Result<String, Failure> {
    if arg != "-" {
        return Ok(arg.to_owned());
    }
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .map_err(|e| Failure::usage(format!("cannot read the prompt from stdin: {e}")))?;
    Ok(text)
}

/// Submits and waits for the RunComplete, following the live events.
async fn drive(
    host: &Host,
    a: &Run,
    prompt: String,
    hooks: &Hooks,
    cwd: &Path,
) -> Result<(CompletionRecord, Show), Failure> {
    let session = session(host, a).await?;
    // `user_prompt_submit` hooks see the prompt first and may refuse it (as the engine would:
    // a `rejected` line, status 64).
    let input = HookInput {
        prompt: Some(prompt.clone()),
        ..HookInput::new("user_prompt_submit", session.as_str(), cwd)
    };
    if let Err(why) = hook::user_prompt_submit(&hooks.user_prompt_submit, &input, cwd).await {
        return Err(rejected(a.json, &why));
    }
    let run_id = RunId::new(
        a.run_id
            .clone()
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string()),
    );
    let show = show(a.json);
    // Subscribed before the submission, so no update of the run is missed.
    let follower = Follower::start(host.clone(), host.subscribe(), session.clone(), show);
    let submitted = match host
        .submit(Submit::new(session.as_str(), prompt).with_run_id(run_id.as_str()))
        .await
    {
        Ok(s) => s,
        Err(SubmitError::Rejected(r)) => {
            follower.stop().await;
            return Err(rejected(show == Show::Json, &r.to_string()));
        }
        Err(e) => {
            follower.stop().await;
            return Err(Failure::setup(format!("cannot submit the prompt: {e}")));
        }
    };
    if show == Show::Json {
        let accepted = json!({
            "type": "accepted", "session": submitted.session, "seq": submitted.seq,
            "run_id": run_id, "existing": submitted.existing,
        });
        out::line(&accepted.to_string());
    }
    if submitted.existing {
        tracing::info!(run_id = %run_id, "attached to the existing run");
    }
    let wait = host.wait(&run_id);
    tokio::pin!(wait);
    let mut cancelled = false;
    let record = loop {
        tokio::select! {
            biased;
            r = &mut wait => break r,
            () = out::closed(), if !cancelled => {
                // Nobody reads what the run prints: it ends as a Ctrl-C ends it, quietly.
                cancelled = true;
                if let Err(e) = host.cancel_run(&run_id).await {
                    tracing::warn!("cannot cancel the run: {e}");
                }
            }
            _ = tokio::signal::ctrl_c() => {
                if cancelled {
                    eprintln!("\nexiting without waiting; the run's end is recorded at the next start");
                    std::process::exit(130);
                }
                cancelled = true;
                eprintln!("\ncancelling the run (Ctrl-C again to exit at once)");
                if let Err(e) = host.cancel_run(&run_id).await {
                    tracing::warn!("cannot cancel the run: {e}");
                }
            }
        }
    };
    follower.stop().await;
    let record = record.map_err(|e| Failure::setup(format!("cannot wait for the run: {e}")))?;
    Ok((record, show))
}

/// The session: `--session` (an id of the store, or a unique prefix of one); the most recent
/// with `--continue`; a known `--run-id`'s; or a new one.
async fn session(host: &Host, a: &Run) -> Result<SessionId, Failure> {
    if let Some(given) = &a.session {
        return crate::show::resolve_in(host, given).await.map_err(|why| {
            Failure::usage(format!(
                "--session: {why}; to start a new session, leave out --session"
            ))
        });
    }
    // A rerun of a known RunId names that run's session, so that the same request attaches to
    // it (SPEC 4.1: a byte-equal resubmission answers the existing run).
    if let Some(run_id) = a.run_id.clone().filter(|_| !a.continue_) {
        let known = host
            .read(move |r| r.run(&RunId::new(run_id)))
            .await
            .map_err(|e| Failure::setup(format!("cannot read the run ledger: {e}")))?;
        if let Some(row) = known {
            return Ok(row.session);
        }
    }
    if !a.continue_ {
        return Ok(SessionId::new(uuid::Uuid::new_v4().to_string()));
    }
    let latest = host
        .read(|r| r.latest_session())
        .await
        .map_err(|e| Failure::setup(format!("cannot read the sessions: {e}")))?;
    latest.ok_or_else(|| {
        Failure::usage("--continue: there is no session yet in this store; run a prompt first")
    })
}
