//! `turnstile-driver`: the turnstile core behind JSON Lines on stdin and stdout.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

/// One turnstile engine behind JSON Lines, for hosts in any language.
///
/// Write a trace header first (the engine's configuration and start state), then one input per
/// line; the driver answers every line with one JSON line: `ready` for the header, `outputs`
/// for an input (every output it produced, in order), `error` for a line that is not a valid
/// input (naming the line and the field; the engine goes on), `refused` for host misuse
/// (nothing changed; the engine goes on), `failed` when the engine itself failed (the driver
/// then exits with status 70). A line that carries `expect` is compared, and a difference is
/// answered `mismatch`, so a recorded trace piped in replays.
///
/// The lines are a trace file's (docs/trace-format.md); the replies are described by the
/// `DriverReply` definition of core/trace-format.schema.json. docs/embedding.md walks through a session.
#[derive(Parser, Debug)]
#[command(
    name = "turnstile-driver",
    version,
    after_help = "Examples:\n  \
      # A session: the header, then a prompt at 0 ms\n  \
      printf '%s\\n' '{\"format\":\"turnstile-trace\",\"version\":1}' \\\n    \
      '{\"at\":0,\"input\":{\"type\":\"submit\",\"session\":\"s\",\"prompt\":\"hi\",\"run_id\":\"r1\"}}' \\\n    \
      | turnstile-driver\n\n  \
      # Replay a recorded trace, comparing every line's expected outputs\n  \
      turnstile-driver < tests/traces/cancel-active-turn-g01.jsonl\n\n  \
      # Keep a flight recording that `turnstile-sim replay` reproduces\n  \
      my-host | turnstile-driver --record run.jsonl\n\n\
      Exit status: 0 at the end of the input, 2 when the header is unusable, 70 when the engine \
      failed, 1 when reading or writing failed."
)]
struct Args {
    /// Append every input handled, with its outputs, to this trace file (created or truncated).
    #[arg(long, value_name = "FILE")]
    record: Option<PathBuf>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    ExitCode::from(turnstile_driver::run_stdio(args.record.as_deref()))
}
