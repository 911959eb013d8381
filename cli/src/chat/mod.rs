//! `turnstile chat`: a session you talk to, prompt after prompt, over the same host, store and
//! configuration as `turnstile run`.
//!
//! On a terminal (stdin and stdout both), the chat is [`interactive`]: the input line stays
//! editable while the agent works, Enter steers, Alt-Enter queues, Escape cancels, and the
//! tools' permission questions are asked in place. Without one (a pipe or a file), each line
//! read is a prompt that runs to its end before the next line is read, its answer on stdout.
//! Either way a line starting with `/` is a command ([`slash`]).
//!
//! | module | what it owns |
//! |---|---|
//! | `interactive` | the loop on a terminal: keys, questions, the host's updates |
//! | `editor` | the input line and what a key asks for (pure) |
//! | `history` | the prompt history, kept in the store's folder |
//! | `status` | the status line (pure) |
//! | `screen` | the terminal: lines scroll up, the bottom rows are redrawn in place |
//! | `slash` | the slash commands (pure) |
//! | `command` | what a slash command does, against the host |

pub mod command;
pub mod editor;
pub mod history;
pub mod interactive;
pub mod screen;
pub mod slash;
pub mod status;

use std::io::IsTerminal;
use std::path::Path;
use std::sync::Arc;

use tokio::io::{AsyncBufReadExt, BufReader};
use turnstile_core::{RunId, SessionId, Submit};
use turnstile_host::{Host, SubmitError};
use turnstile_tools::hook::{self, HookInput};
use turnstile_tools::{DenyAsks, Hooks};

use crate::args::{Chat, Global};
use crate::failure::Failure;
use crate::live::{Follower, Show};
use crate::{out, setup};
use slash::{Said, Slash, Typed};

/// Runs `turnstile chat`.
///
/// # Errors
/// What kept the chat from starting: the configuration, the store, an unknown `--session`.
pub async fn chat(global: &Global, a: Chat) -> Result<u8, Failure> {
    let on_terminal = std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
    let cwd = crate::setup::working_dir(a.cwd.as_deref())?;
    let loaded = setup::load(global, &cwd)?;
    let provider = loaded.provider(a.model.as_deref(), &cwd)?;
    let store = setup::store_at(global, &cwd);
    let reaper = setup::reaper(&store);
    // On a terminal the questions are asked in place; without one nobody can answer them.
    let (asker, asks): (Arc<dyn turnstile_tools::Asker>, _) = if on_terminal {
        let (asker, asks) = interactive::ScreenAsker::new();
        (Arc::new(asker), Some(asks))
    } else {
        (Arc::new(DenyAsks), None)
    };
    let (tools, _gate) = loaded.tools(&cwd, a.yolo, reaper.clone(), asker).await?;
    let hooks = loaded.hooks()?;
    let host = setup::open(&store, provider, tools, None, loaded.engine(), None).await?;
    setup::reap(reaper.as_ref());
    let result = match (first_session(&host, &a).await, asks) {
        (Ok(session), Some(asks)) => {
            let setting = interactive::Setting {
                host: &host,
                hooks: &hooks,
                cwd: &cwd,
                history: &store.folder.join("chat_history"),
            };
            interactive::run(setting, session, asks).await
        }
        (Ok(session), None) => lines(&host, session, &hooks, &cwd).await,
        (Err(e), _) => Err(e),
    };
    if let Err(e) = host.shutdown().await {
        tracing::warn!("the host stopped before its shutdown: {e}");
    }
    result
}

/// The session the chat starts in: `--session` (an id or a unique prefix), `--continue` (the
/// most recent), else a new one.
async fn first_session(host: &Host, a: &Chat) -> Result<SessionId, Failure> {
    if let Some(given) = &a.session {
        return crate::show::resolve_in(host, given).await.map_err(|why| {
            Failure::usage(format!(
                "--session: {why}; to start a new session, leave out --session"
            ))
        });
    }
    if a.continue_ {
        let latest = host
            .read(|r| r.latest_session())
            .await
            .map_err(|e| Failure::setup(format!("cannot read the sessions: {e}")))?;
        return latest.ok_or_else(|| {
            Failure::usage("--continue: there is no session yet in this store; start one")
        });
    }
    Ok(command::new_session())
}

/// The chat without a terminal: one line at a time, each prompt run to its end.
async fn lines(
    host: &Host,
    mut session: SessionId,
    hooks: &Hooks,
    cwd: &Path,
) -> Result<u8, Failure> {
    let mut input = BufReader::new(tokio::io::stdin()).lines();
    loop {
        let line = match input.next_line().await {
            Ok(Some(line)) => line,
            Ok(None) => return Ok(0),
            Err(e) => return Err(Failure::setup(format!("cannot read stdin: {e}"))),
        };
        match Typed::read(&line) {
            Typed::Prompt(p) if p.trim().is_empty() => {}
            Typed::Prompt(p) => prompt(host, &session, p, hooks, cwd).await?,
            Typed::Command(Slash::Quit) => return Ok(0),
            Typed::Command(c) => {
                for said in command::command(host, &mut session, c).await {
                    match said {
                        Said::Out(line) => {
                            out::line(&line);
                        }
                        Said::Note(line) => eprintln!("{line}"),
                    }
                }
            }
            Typed::Wrong(why) => eprintln!("error: {why}"),
        }
        if out::is_closed() {
            return Ok(0);
        }
    }
}

/// One prompt, run to its end: its answer on stdout, why it did not simply complete on
/// stderr. Ctrl-C cancels it (the chat goes on).
async fn prompt(
    host: &Host,
    session: &SessionId,
    text: String,
    hooks: &Hooks,
    cwd: &Path,
) -> Result<(), Failure> {
    let input = HookInput {
        prompt: Some(text.clone()),
        ..HookInput::new("user_prompt_submit", session.as_str(), cwd)
    };
    if let Err(why) = hook::user_prompt_submit(&hooks.user_prompt_submit, &input, cwd).await {
        eprintln!("error: {why}");
        return Ok(());
    }
    let run_id = RunId::new(uuid::Uuid::new_v4().to_string());
    let show = if std::io::stderr().is_terminal() {
        Show::Terminal
    } else {
        Show::Nothing
    };
    let follower = Follower::start(host.clone(), host.subscribe(), session.clone(), show);
    match host
        .submit(Submit::new(session.as_str(), text).with_run_id(run_id.as_str()))
        .await
    {
        Ok(_) => {}
        Err(SubmitError::Rejected(r)) => {
            follower.stop().await;
            eprintln!("error: {r}");
            return Ok(());
        }
        Err(e) => {
            follower.stop().await;
            return Err(Failure::setup(format!("cannot submit the prompt: {e}")));
        }
    }
    let wait = host.wait(&run_id);
    tokio::pin!(wait);
    let record = loop {
        tokio::select! {
            biased;
            r = &mut wait => break r,
            _ = tokio::signal::ctrl_c() => {
                if let Err(e) = host.cancel_run(&run_id).await {
                    tracing::warn!("cannot cancel the run: {e}");
                }
            }
        }
    };
    follower.stop().await;
    let record = record.map_err(|e| Failure::setup(format!("cannot wait for the run: {e}")))?;
    crate::finish::run_stop_hooks(&hooks.stop, &record, cwd).await;
    crate::finish::report(&record, Show::Nothing);
    Ok(())
}
