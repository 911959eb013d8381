//! `turnstile-sim`: replay trace files (and, with the simulation issue, run sweeps).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use turnstile_core::trace::Trace;
use turnstile_core::{ReplayFailure, bless, replay};

/// Deterministic replay of turnstile trace files.
#[derive(Parser)]
#[command(name = "turnstile-sim", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Re-run trace files through the core, checking every invariant after every input and
    /// comparing outputs where the trace states them. Directories are searched for `*.jsonl`.
    /// Exit status: 0 all passed, 1 an invariant or an output differed, 2 a file could not be read.
    Replay {
        /// Trace files or directories.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
    },
    /// Rewrite trace files with the outputs the core produces now (after review of a deliberate
    /// behaviour change). Invariants are still checked; a violation leaves the file untouched.
    Bless {
        /// Trace files.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
    },
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Replay { paths } => replay_all(&paths),
        Command::Bless { paths } => bless_all(&paths),
    }
}

fn expand(paths: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let entries = std::fs::read_dir(p).map_err(|e| format!("{}: {e}", p.display()))?;
            let mut sub: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
            sub.sort();
            let nested: Vec<PathBuf> = sub
                .into_iter()
                .filter(|q| q.is_dir() || q.extension().is_some_and(|e| e == "jsonl"))
                .collect();
            out.extend(expand(&nested)?);
        } else {
            out.push(p.clone());
        }
    }
    Ok(out)
}

fn load(path: &PathBuf) -> Result<Trace, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    Trace::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
}

fn replay_all(paths: &[PathBuf]) -> ExitCode {
    let files = match expand(paths) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let (mut passed, mut failed, mut unreadable) = (0usize, 0usize, 0usize);
    let (mut inputs, mut outputs, mut completions) = (0usize, 0usize, 0usize);
    for path in &files {
        let trace = match load(path) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("error: {e}");
                unreadable += 1;
                continue;
            }
        };
        match replay(&trace) {
            Ok(r) => {
                passed += 1;
                inputs += r.inputs;
                outputs += r.outputs;
                completions += r.outcomes.values().sum::<usize>();
                println!(
                    "ok    {}  ({} inputs, {} outputs, {} compared, hash {})",
                    path.display(),
                    r.inputs,
                    r.outputs,
                    r.compared,
                    &r.output_hash[..12]
                );
            }
            Err(e) => {
                failed += 1;
                println!("FAIL  {}\n      {}", path.display(), indent(&e));
            }
        }
    }
    println!(
        "\nreplayed {} traces: {inputs} inputs, {outputs} outputs, {completions} outcomes decided",
        files.len()
    );
    println!("{passed} passed, {failed} failed");
    if unreadable > 0 {
        println!("{unreadable} unreadable");
        return ExitCode::from(2);
    }
    if failed > 0 { ExitCode::from(1) } else { ExitCode::SUCCESS }
}

fn indent(e: &ReplayFailure) -> String {
    e.to_string().replace('\n', "\n      ")
}

fn bless_all(paths: &[PathBuf]) -> ExitCode {
    let mut status = ExitCode::SUCCESS;
    for path in paths {
        let result =
            load(path).and_then(|t| bless(&t).map_err(|e| format!("{}: {e}", path.display())));
        match result.and_then(|t| {
            std::fs::write(path, t.to_jsonl()).map_err(|e| format!("{}: {e}", path.display()))
        }) {
            Ok(()) => println!("blessed {}", path.display()),
            Err(e) => {
                eprintln!("error: {e}");
                status = ExitCode::from(1);
            }
        }
    }
    status
}
