//! The command line: commands, options, and the help text that explains them.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

const ABOUT: &str = "An agent whose session lifecycle is checked: run prompts against a model \
with tools, and read back sessions and their history.";

const AFTER_HELP: &str = "\
Configuration: --config, else $TURNSTILE_CONFIG, else turnstile.toml in the project's root,
else ~/.config/turnstile/config.toml; the built-in catalogue knows OpenAI, Anthropic and
compatible providers. Keys come from the environment (OPENAI_API_KEY, ANTHROPIC_API_KEY, ...).
The store (sessions, history, the run ledger) is .turnstile/store.db in the project's root:
the nearest folder upward with .turnstile/ or turnstile.toml, else the repository's root (.git),
else the current directory. --store (or TURNSTILE_STORE) names another file, or a PostgreSQL
database: --store postgres://user@host:5432/agents. A session is named by its id or a unique prefix of it.

On a terminal, `turnstile` alone opens `turnstile chat`.

Examples:
  turnstile
  turnstile run \"Explain what src/main.rs does\"
  git diff | turnstile run -
  turnstile run --continue \"Now add a test for it\"
  turnstile sessions
  turnstile history 3f2a…
  turnstile serve";

/// The `turnstile` command.
#[derive(Debug, Parser)]
#[command(name = "turnstile", version, about = ABOUT, after_help = AFTER_HELP)]
pub struct Cli {
    /// The command; none on a terminal opens `turnstile chat`.
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Options every command takes.
    #[command(flatten)]
    pub global: Global,
}

/// Options every command takes.
#[derive(Debug, Args)]
pub struct Global {
    /// The configuration file (TOML).
    #[arg(long, global = true, value_name = "FILE", env = "TURNSTILE_CONFIG")]
    pub config: Option<PathBuf>,
    /// The store: a SQLite file, or a PostgreSQL database by its URL (postgres://user@host/db)
    /// [default: .turnstile/store.db in the project's root].
    #[arg(long, global = true, value_name = "FILE|URL", env = "TURNSTILE_STORE")]
    pub store: Option<String>,
    /// Log to stderr: -v info, -vv debug, -vvv trace (RUST_LOG refines it).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Log to this file instead of stderr (at info, or what -v says).
    #[arg(long, global = true, value_name = "FILE")]
    pub log_file: Option<PathBuf>,
}

/// What to do.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run one prompt to its end and print the answer.
    #[command(after_help = RUN_HELP)]
    Run(Run),
    /// List the sessions of the store, most recent first.
    #[command(after_help = "Example:\n  turnstile sessions --json | jq '.[0].id'")]
    Sessions(Sessions),
    /// Show a session's conversation, with its tool calls and their results.
    #[command(after_help = "Example:\n  turnstile history 3f2a… --json")]
    History(History),
    /// Serve the agent over HTTP, with an event stream that survives restarts.
    #[command(after_help = SERVE_HELP)]
    Serve(Serve),
    /// Talk to a session, prompt after prompt (without a terminal: one prompt per line of
    /// stdin, each run to its end; `/help` lists the commands).
    #[command(after_help = CHAT_HELP)]
    Chat(Chat),
    /// Run one engine behind JSON Lines on stdin and stdout, for hosts in other languages (the
    /// same as the `turnstile-driver` binary).
    #[command(after_help = DRIVER_HELP)]
    Driver(Driver),
}

const CHAT_HELP: &str = "\
On a terminal, the input line stays editable while the agent works:
  Enter       send; while a turn runs, steer it (the model reads the text at its next step)
  Alt-Enter   queue the text as a turn of its own, after the running one
  Escape      cancel the session's unfinished work (what you type next is not touched)
  Ctrl-C      as Escape while working; on an idle line: clear it, twice to leave
  Ctrl-D      leave (on an empty line)
  Up, Down    the prompts typed before (kept in the store's folder, chat_history)
A tool that needs approval asks in place: y (once), a (always in this session), n (deny).

Without a terminal, every line is a prompt, run to its end before the next line is read; its
answer goes to stdout, what went wrong to stderr, and nobody is asked (what needs approval is
denied). Either way a line that starts with / is a command: /new, /sessions, /resume ID (a
unique prefix is enough), /history, /clear (the waiting prompts), /summarize, /help, /quit.

Examples:
  turnstile chat --continue
  printf '%s\\n' 'What does src/main.rs do?' 'And its tests?' | turnstile chat
  turnstile chat --continue < questions.txt";

/// `turnstile chat`.
#[derive(Debug, Default, Args)]
pub struct Chat {
    /// The model, as `provider/model` [default: the configuration's `model`].
    #[arg(long, short, env = "TURNSTILE_MODEL", value_name = "PROVIDER/MODEL")]
    pub model: Option<String>,
    /// Continue this session (its id or a unique prefix of it) instead of a new one.
    #[arg(long, value_name = "ID", conflicts_with = "continue_")]
    pub session: Option<String>,
    /// Continue the most recent session.
    #[arg(long = "continue", short = 'c')]
    pub continue_: bool,
    /// Allow every tool call without asking (deny rules still hold).
    #[arg(long)]
    pub yolo: bool,
    /// The working directory the tools are confined to [default: the current one].
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
}

const DRIVER_HELP: &str = "\
Write a trace header first (the engine's configuration and start state), then one input per
line ({\"at\": ms, \"input\": {...}}); every line is answered with one JSON line: ready, outputs,
error (a bad line, naming its field; the engine goes on), refused (host misuse; nothing
changed), failed (the engine failed; exit status 70). A line with `expect` is compared
(mismatch), so a recorded trace piped in replays. docs/embedding.md walks through a session.

Exit status: 0 at the end of the input, 2 when the header is unusable, 70 when the engine
failed, 1 when reading or writing failed.

Examples:
  turnstile driver < tests/traces/cancel-active-turn-g01.jsonl
  my-host | turnstile driver --record run.jsonl";

/// `turnstile driver`.
#[derive(Debug, Args)]
pub struct Driver {
    /// Append every input handled, with its outputs, to this trace file (created or truncated).
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
}

const SERVE_HELP: &str = "\
Listens on 127.0.0.1:8700 by default. Every request needs `Authorization: Bearer <token>`:
the token is $TURNSTILE_SERVER_TOKEN, else the one in the token file, which the first start
generates (readable only by you) and prints once. The API is described by the OpenAPI
document at /v1/openapi.json; docs/server.md walks through it.

Permission asks become events on /v1/events that a client answers (POST /v1/asks/{id}); a
cancel withdraws them. SIGTERM or Ctrl-C shuts down: unfinished runs end interrupted and
their clients are told, then the server stops. A second signal exits at once.

--record DIR (or `[record] dir`) writes one flight trace of the server process, every session
in it, and every provider exchange into DIR; a restart takes the next free name
(flight-2.jsonl, ...) and never overwrites a recording. Read it with `turnstile-sim replay DIR`
and `turnstile-sim view DIR`.

Several servers (--member NAME) share one PostgreSQL store: each accepts prompts and cancels
for every session, one at a time owns a session and runs it, and when a server dies another
takes its sessions over within the lease (10 s) and a few seconds more. A client may use any
of them (`turnstile run --server URL1,URL2`). docs/server.md, \"Several servers\", explains it.

Examples:
  turnstile serve
  turnstile serve --listen 127.0.0.1:9000 --model anthropic/claude-sonnet-4
  turnstile serve --store postgres://agent@db/agents --member a --listen 127.0.0.1:8701
  turnstile serve --record recordings/today
  TOKEN=$(cat .turnstile/server-token)
  curl -H \"Authorization: Bearer $TOKEN\" -d '{\"prompt\":\"hi\"}' \\
       http://127.0.0.1:8700/v1/sessions/s1/prompts
  turnstile run --server http://127.0.0.1:8700 \"Explain src/main.rs\"";

/// `turnstile serve`.
#[derive(Debug, Args)]
pub struct Serve {
    /// The address to listen on [default: `[server] listen`, else 127.0.0.1:8700].
    #[arg(long, value_name = "ADDR", env = "TURNSTILE_LISTEN")]
    pub listen: Option<String>,
    /// The token file [default: `[server] token_file`, else server-token beside the store].
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Also allow browser requests from this origin (`scheme://host[:port]`); repeatable.
    #[arg(long, value_name = "ORIGIN")]
    pub allow_origin: Vec<String>,
    /// The model, as `provider/model` [default: the configuration's `model`].
    #[arg(long, short, env = "TURNSTILE_MODEL", value_name = "PROVIDER/MODEL")]
    pub model: Option<String>,
    /// Allow every call the permissions would ask about, instead of asking the clients.
    #[arg(long)]
    pub yolo: bool,
    /// The working directory the tools are confined to [default: the current directory].
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// Record this server process into this folder: one flight trace of every session and
    /// every provider exchange [default: `[record] dir`].
    #[arg(long, value_name = "DIR", conflicts_with = "member")]
    pub record: Option<PathBuf>,
    /// Serve as one of several servers over one PostgreSQL store, under this name (unique
    /// among them): every server accepts and cancels for every session, one owns each.
    #[arg(long, value_name = "NAME", env = "TURNSTILE_MEMBER")]
    pub member: Option<String>,
    /// With --member: how long a server holds a session without renewing it, in seconds
    /// [default: 10]. Another server takes a dead server's sessions after it.
    #[arg(long, value_name = "SECONDS", requires = "member", value_parser = lease_seconds)]
    pub lease: Option<std::time::Duration>,
}

/// A lease in seconds (decimals allowed): at least 0.5 s, at most an hour.
fn lease_seconds(text: &str) -> Result<std::time::Duration, String> {
    let secs: f64 = text
        .parse()
        .map_err(|_| format!("`{text}` is not a number of seconds"))?;
    if !(0.5..=3600.0).contains(&secs) {
        return Err(format!("{secs} s is outside 0.5 to 3600 seconds"));
    }
    Ok(std::time::Duration::from_secs_f64(secs))
}

const RUN_HELP: &str = "\
stdout gets the answer (the run's final text) and a newline, nothing else. On a terminal,
stderr shows the text as it streams and one line per tool call.

Exit status:
  0    completed
  3    completed, but stopped by a permission denial or a hook's halt
  1    failed (the provider, the transport, the step limit, a loop), or could not start
  130  cancelled (Ctrl-C)
  2    interrupted (shutdown, or the process stopped and a rerun found it interrupted)
  64   rejected (an empty prompt, a RunId used for another request), or bad usage

The first Ctrl-C cancels the run and waits for its end; a second exits at once.

Permissions: without --yolo, a call the configuration's [permissions] would ask about is
denied (nobody can be asked here), and the run ends with status 3.

Examples:
  turnstile run \"Fix the failing test in tests/parse.rs\"
  turnstile run --model openai/gpt-5 --yolo \"Run cargo fmt and commit\"
  echo \"Summarize README.md\" | turnstile run -
  turnstile run --continue \"Now add a test for it\"
  turnstile run --json \"List the TODOs\" | jq -c 'select(.type == \"tool_call\")'
  turnstile run --run-id nightly-42 \"...\"   # rerun after a crash: attaches to the same run
  turnstile run --server http://127.0.0.1:8700 \"...\"   # on a running `turnstile serve`
  turnstile run --server http://a:8700,http://b:8700 \"...\"   # several servers of one store
  turnstile run --record bug-42 \"...\"      # then: turnstile-sim replay bug-42

--record DIR writes the core's flight trace (DIR/flight.jsonl; a later process takes
flight-2.jsonl, ... and never overwrites one) and every provider exchange (DIR/providers/),
never an API key. `turnstile-sim replay DIR` replays it output for output, `turnstile-sim
view DIR` draws it, and `turnstile-sim replay DIR --save tests/traces/regressions/NAME.jsonl
--rule \"...\"` turns it into a regression trace. `[record] dir` in the configuration records
every run. Not with --server: a server records its runs itself (`turnstile serve --record`).

With --server, the run is the server's: Ctrl-C cancels it there (cancel_run), a lost
connection is resumed from the last event received, and the exit statuses are the same.
--model, --yolo and --cwd are the server's to choose and are refused.";

/// `turnstile run`.
#[derive(Debug, Args)]
pub struct Run {
    /// The prompt; `-` reads it from stdin.
    #[arg(required_unless_present = "print_system_prompt")]
    pub prompt: Option<String>,
    /// Print the system prompt a request would be sent with (the configured or default one,
    /// the tools, then the project's AGENTS.md or CLAUDE.md files from the repository's root
    /// down) and exit; nothing is run and no key is needed.
    #[arg(long, conflicts_with = "server")]
    pub print_system_prompt: bool,
    /// The model, as `provider/model` [default: the configuration's `model`].
    #[arg(long, short, env = "TURNSTILE_MODEL", value_name = "PROVIDER/MODEL")]
    pub model: Option<String>,
    /// Print the live events and, last, the run's completion as JSON Lines on stdout.
    #[arg(long)]
    pub json: bool,
    /// The run's id: a rerun with the same id and prompt attaches to the same run.
    #[arg(long, value_name = "ID")]
    pub run_id: Option<String>,
    /// Continue this session (its id, or a unique prefix of it); it must exist.
    #[arg(long, value_name = "ID", conflicts_with = "continue_")]
    pub session: Option<String>,
    /// Continue the most recent session.
    #[arg(long = "continue", short = 'c')]
    pub continue_: bool,
    /// Allow every call the permissions would ask about (deny rules still hold).
    #[arg(long)]
    pub yolo: bool,
    /// The working directory the tools are confined to [default: the current directory].
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// Run on a `turnstile serve` at this URL instead of in this process; several servers of
    /// one store as `URL1,URL2,...`: the run moves to the next when one cannot be reached.
    #[arg(long, value_name = "URL[,URL...]", env = "TURNSTILE_SERVER")]
    pub server: Option<String>,
    /// With --server: the file holding its token [default: $TURNSTILE_SERVER_TOKEN, else
    /// .turnstile/server-token when it exists].
    #[arg(long, value_name = "FILE", requires = "server")]
    pub token_file: Option<PathBuf>,
    /// Record the run into this folder: the core's flight trace and every provider exchange,
    /// for `turnstile-sim replay DIR` and `turnstile-sim view DIR` [default: `[record] dir`].
    #[arg(long, value_name = "DIR", conflicts_with = "server")]
    pub record: Option<PathBuf>,
}

/// `turnstile sessions`.
#[derive(Debug, Args)]
pub struct Sessions {
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Include sub-agent sessions.
    #[arg(long)]
    pub all: bool,
}

/// `turnstile history`.
#[derive(Debug, Args)]
pub struct History {
    /// The session: its id, or a unique prefix of it.
    pub session: String,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}
