//! # turnstile: the agent you run from a terminal or a script
//!
//! `turnstile run "<prompt>"` runs one prompt to its end over the reference host, with the
//! built-in tools confined to the working directory; `turnstile sessions` and `turnstile
//! history` read the store back. `turnstile --help` explains each command with examples;
//! `docs/cli.md` has the `--json` schema and the exit statuses.
//!
//! | module | what it owns |
//! |---|---|
//! | `args` | the command line and its help |
//! | `setup` | configuration file, model, tools and gate, the store |
//! | `failure` | why a command stopped before its job, and its exit status |
//! | `finish` | a run's end: its exit status, why, its output, the `stop` hooks |
//! | `run` | `turnstile run`: submit, follow, Ctrl-C |
//! | `chat` | `turnstile chat` (and `turnstile` alone on a terminal): prompt after prompt |
//! | `live` | what a run shows while it works: stderr lines or JSON Lines |
//! | `serve` | `turnstile serve`: the host over HTTP until a signal |
//! | `remote` | `turnstile run --server URL`: the same run against a server |
//! | `record` | `--record DIR`: the flight trace and the provider exchanges of a process |
//! | `show` | `turnstile sessions` and `turnstile history` |
//! | `out` | stdout, whose reader may go away (`turnstile sessions \| head -1`) |

#![forbid(unsafe_code)]

mod args;
mod chat;
mod failure;
mod finish;
mod live;
mod out;
mod record;
mod remote;
mod run;
mod serve;
mod setup;
mod show;

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::Parser;

use failure::{EXIT_SETUP, EXIT_USAGE};

fn main() -> ExitCode {
    let cli = match args::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let status = if e.use_stderr() { EXIT_USAGE } else { 0 };
            let _ = e.print();
            return ExitCode::from(status);
        }
    };
    let command = match cli.command {
        Some(command) => command,
        None if std::io::stdin().is_terminal() && std::io::stdout().is_terminal() => {
            args::Command::Chat(args::Chat {
                model: std::env::var("TURNSTILE_MODEL").ok(),
                ..args::Chat::default()
            })
        }
        None => {
            eprintln!(
                "error: no command given; `turnstile --help` lists them (on a terminal, \
                 `turnstile` alone opens the chat; `turnstile chat` reads prompts from stdin)"
            );
            return ExitCode::from(EXIT_USAGE);
        }
    };
    // The driver is synchronous and speaks only JSON Lines: no runtime, no logs on stdout.
    if let args::Command::Driver(a) = &command {
        return driver(a);
    }
    if let Err(message) = logs(&cli.global) {
        eprintln!("error: {message}");
        return ExitCode::from(EXIT_USAGE);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::from(EXIT_SETUP);
        }
    };
    let result = runtime.block_on(async {
        match command {
            args::Command::Run(a) => run::run(&cli.global, a).await,
            // Blocking reads (a PostgreSQL client must not block a thread of the runtime).
            args::Command::Sessions(a) => {
                tokio::task::block_in_place(|| show::sessions(&cli.global, &a))
            }
            args::Command::History(a) => {
                tokio::task::block_in_place(|| show::history(&cli.global, &a))
            }
            args::Command::Serve(a) => serve::serve(&cli.global, a).await,
            args::Command::Chat(a) => chat::chat(&cli.global, a).await,
            args::Command::Driver(_) => Ok(0), // answered above, before the runtime
        }
    });
    // A tool's process or a provider's stream left behind must not hold the exit.
    runtime.shutdown_timeout(std::time::Duration::from_millis(200));
    match result {
        Ok(status) => ExitCode::from(status),
        Err(f) => {
            eprintln!("error: {}", f.message);
            ExitCode::from(f.status)
        }
    }
}

/// `turnstile driver`: the process driver (`turnstile-driver`) over stdin and stdout.
fn driver(a: &args::Driver) -> ExitCode {
    ExitCode::from(turnstile_driver::run_stdio(a.record.as_deref()))
}

/// Logs: nothing unless `-v` or `--log-file`; `RUST_LOG` refines the filter.
fn logs(global: &args::Global) -> Result<(), String> {
    use tracing_subscriber::EnvFilter;
    let level = match global.verbose {
        0 if global.log_file.is_none() => return Ok(()),
        0 | 1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(level));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(true);
    match &global.log_file {
        Some(path) => {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| format!("cannot open the log file `{}`: {e}", path.display()))?;
            builder
                .with_ansi(false)
                .with_writer(std::sync::Mutex::new(file))
                .init();
        }
        None => builder
            .with_ansi(std::io::stderr().is_terminal())
            .with_writer(std::io::stderr)
            .init(),
    }
    Ok(())
}
