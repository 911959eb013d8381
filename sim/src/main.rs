//! `turnstile-sim`: the simulation sweep of the real host under madsim, its determinism check,
//! and trace replay.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod simulate;
use turnstile_core::trace::Trace;
use turnstile_core::{ReplayFailure, ReplayReport, bless, replay};

/// Deterministic replay of turnstile trace files.
#[derive(Parser)]
#[command(name = "turnstile-sim", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run seeds of the simulated world around the real host (provider, tools, clients, store
    /// faults), checking after each: the core's invariants over its flight trace, what clients
    /// saw (one answer per waiter, equal to the ledger), and the store (integrity, legal
    /// histories). Prints a progress bar and a summary; failing seeds' traces go to `--out`.
    /// Needs the madsim build: `RUSTFLAGS="--cfg madsim" CARGO_TARGET_DIR=target/madsim cargo
    /// run --release -p turnstile-sim -- sweep`. Exit status: 0 all passed, 1 a seed failed.
    Sweep {
        /// How many seeds (the default takes about a minute on two cores).
        #[arg(long, default_value_t = 2_000)]
        seeds: u64,
        /// The first seed.
        #[arg(long, default_value_t = 1)]
        first: u64,
        /// Seeds run in parallel (one thread and one simulated runtime each).
        #[arg(long, default_value_t = 2)]
        jobs: usize,
        /// Fault profile: `calm` (provider and tool failures) or `faults` (also store failures).
        #[arg(long, default_value = "faults")]
        faults: String,
        /// Where failing seeds' flight traces are written.
        #[arg(long, default_value = "sim-failures")]
        out: PathBuf,
        /// Switch on a mutant of the core's or the host's catalogue (`--features mutants`).
        #[arg(long)]
        mutant: Option<String>,
    },
    /// Run seeds of several hosts over one store (SPEC 11): three member hosts on simulated
    /// nodes, clients submitting, cancelling and clearing through random hosts, nodes killed,
    /// paused past their lease and cut off from the store. Checked after each: no write by a
    /// fenced epoch, every submission ended once and ran once, turns in order, every cancelled
    /// submission covered by a cancel, legal histories (madsim build). Exit status: 0 all
    /// passed, 1 a seed failed (its violations are printed).
    Members {
        /// How many seeds.
        #[arg(long, default_value_t = 200)]
        seeds: u64,
        /// The first seed.
        #[arg(long, default_value_t = 1)]
        first: u64,
        /// Seeds run in parallel.
        #[arg(long, default_value_t = 2)]
        jobs: usize,
        /// Switch on a mutant of several hosts (`--features mutants`).
        #[arg(long)]
        mutant: Option<String>,
        /// Where failing seeds' core traces (the one that failed replay) and their shrunk
        /// forms are written.
        #[arg(long, default_value = "sim-failures")]
        out: PathBuf,
    },
    /// Hunt the several-hosts mutants (`--features mutants`): for each, seeds until one fails,
    /// then a table. Exit status 1 when a mutant went unnoticed.
    MembersMutants {
        /// Seeds tried per mutant before it counts as unnoticed.
        #[arg(long, default_value_t = 200)]
        seeds: u64,
    },
    /// Shrink a trace whose replay breaks an invariant (SPEC 6) to a minimal one (delta
    /// debugging over its inputs): the result breaks the same invariant with as few inputs as
    /// possible. Expected outputs are not compared while shrinking, so a trace that only
    /// differs from its expected outputs has nothing to shrink (the command says so). Save the
    /// result under `tests/traces/regressions/` (named after the rule it pins), fix the bug,
    /// then `bless` it. Exit status: 0 shrunk, 1 the trace breaks no invariant, 2 unreadable.
    Shrink {
        /// The trace file.
        path: PathBuf,
        /// Where to write the minimal trace (default: beside it, `<name>.min.jsonl`).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Re-run the seeds listed in a regression file (`<seed> <profile> # note` per line) and
    /// require each to pass (madsim build). Exit status: 0 all passed, 1 one failed, 2 the file
    /// is malformed (the line is named).
    Regressions {
        /// The list, by convention `sim/regressions.txt`.
        path: PathBuf,
    },
    /// Hunt every mutant (a build with `--features mutants`): sweep seeds for each until one
    /// fails, and print a table (found, seeds and seconds to find, the length of the failing
    /// core trace shrunk, the first violation). Exit status 1 when a mutant went unnoticed.
    Mutants {
        /// Seeds tried per mutant before it counts as unnoticed (the rarest is found near 1,300).
        #[arg(long, default_value_t = 2_000)]
        seeds: u64,
        /// Fault profile, as for `sweep`.
        #[arg(long, default_value = "faults")]
        faults: String,
        /// Write a regression trace for each core mutant whose failing seed's core trace
        /// shrinks: `sim-mutant-<name>.jsonl`, the shrunk inputs with the correct core's
        /// outputs (a scenario the mutant breaks; `tests/traces/regressions/` keeps them).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Run one seed and print its report and trace hash (madsim build).
    Seed {
        /// The seed.
        seed: u64,
        /// Fault profile, as for `sweep`.
        #[arg(long, default_value = "faults")]
        faults: String,
        /// Write the core's flight trace of the run here.
        #[arg(long)]
        trace: Option<PathBuf>,
        /// Switch on a mutant, as for `sweep`.
        #[arg(long)]
        mutant: Option<String>,
    },
    /// Check determinism: run each seed twice, each run in its own process, and compare the
    /// flight traces' hashes (madsim build). Exit status 1 when a seed differs.
    Determinism {
        /// How many seeds.
        #[arg(long, default_value_t = 8)]
        seeds: u64,
        /// The first seed.
        #[arg(long, default_value_t = 1)]
        first: u64,
        /// Fault profile, as for `sweep`.
        #[arg(long, default_value = "faults")]
        faults: String,
    },
    /// Re-run trace files through the core, checking every invariant after every input and
    /// comparing outputs where the trace states them. Directories are searched for `*.jsonl`
    /// (recursively); one with no trace is an error. A recording of a live run (`turnstile run
    /// --record DIR`, `turnstile serve --record DIR`) is such a directory: its flight traces
    /// (`flight.jsonl`, `flight-2.jsonl`, ...) are its only `*.jsonl` files, recorded with
    /// their outputs, so each replays output for output. A trace must match the trace schema
    /// exactly: an unknown field anywhere is refused with its line and path.
    /// Exit status: 0 all passed, 1 an invariant or an output differed, 2 a file could not be
    /// read (or a directory holds no trace, or `--save` could not write).
    ///
    /// Examples: `turnstile-sim replay tests/traces`, `turnstile-sim replay bug-42`,
    /// `turnstile-sim replay bug-42 --save tests/traces/regressions/cancel-during-retry.jsonl
    /// --rule "SPEC 4.10: a cancel during a backoff ends the run cancelled"`
    Replay {
        /// Trace files or directories.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Also save the one trace replayed (a recording with one flight trace, or a file) as a
        /// regression trace: named after the file, with `--rule`, and every line's expected
        /// outputs. An existing file is never overwritten. A trace that fails now is saved as
        /// recorded (exit status 1): fix the bug, then `bless` it.
        #[arg(long, value_name = "FILE.jsonl", requires = "rule")]
        save: Option<PathBuf>,
        /// With `--save`: the rule the regression trace pins down, in a sentence.
        #[arg(long, value_name = "TEXT", requires = "save")]
        rule: Option<String>,
    },
    /// Rewrite trace files with the outputs the core produces now (after review of a deliberate
    /// behaviour change). Invariants are still checked; a violation leaves the file untouched.
    /// Directories are searched as for `replay`. Exit status: as for `replay` (0 all blessed,
    /// 1 an invariant broke, 2 a file could not be read or written).
    ///
    /// Example: `turnstile-sim bless tests/traces/regressions`
    Bless {
        /// Trace files or directories.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
    },
    /// Draw a trace as a timeline in one self-contained HTML file (no network; open it from
    /// disk in any browser): one lane per session, each submission's phases, attempts and tool
    /// calls, cancels, clears, shutdown, timers, commits and RunCompletes. A click shows the
    /// input, its outputs, its line and the core's state there; a trace whose replay fails
    /// opens at the failing line with replay's text. A directory is a recording of a live run
    /// (`turnstile run --record DIR`): its one flight trace is drawn (a folder with several
    /// names them; view one by its file). Exit status: 0 written (also for a trace that fails:
    /// the page shows why), 2 the trace could not be read or the page written.
    ///
    /// Examples: `turnstile-sim view tests/traces/fold-at-step-zero.jsonl -o fold.html`,
    /// `turnstile-sim view bug-42` (writes `bug-42.html`)
    View {
        /// The trace file, or a recording's directory.
        trace: PathBuf,
        /// Where to write the page [default: the trace's (or the directory's) name with
        /// `.html`, here].
        #[arg(short, long)]
        out: Option<PathBuf>,
    },
    /// Decode recorded response bodies (`NN.response.body` of a recording) with the real
    /// decoder of their API, printing the core events they become as JSON Lines: the `event`
    /// objects of the trace format, one per line, the terminal `finished` or `failed` last.
    /// With several files, each is preceded by a `# FILE` line. Exit status: 0 all decoded, 1
    /// a body is not the API's format (the byte offset is named), 2 a file could not be read.
    ///
    /// Example: `turnstile-sim decode anthropic-messages tests/fixtures/providers/anthropic-messages/*/00.response.body`
    Decode {
        /// The wire API, as `case.json` names it.
        #[arg(value_parser = ["openai-chat", "openai-responses", "anthropic-messages"])]
        api: String,
        /// Response bodies.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Replay { paths, save, rule } => match (save, rule) {
            (Some(save), Some(rule)) => replay_and_save(&paths, &save, &rule),
            _ => replay_all(&paths),
        },
        Command::View { trace, out } => view_file(&trace, out),
        Command::Bless { paths } => bless_all(&paths),
        Command::Sweep { seeds, first, jobs, faults, out, mutant } => {
            simulate::sweep(seeds, first, jobs, &faults, &out, mutant)
        }
        Command::Seed { seed, faults, trace, mutant } => {
            simulate::seed(seed, &faults, trace.as_deref(), mutant)
        }
        Command::Mutants { seeds, faults, out } => {
            simulate::mutants(seeds, &faults, out.as_deref())
        }
        Command::Members { seeds, first, jobs, mutant, out } => {
            simulate::members(seeds, first, jobs, mutant.as_deref(), &out)
        }
        Command::MembersMutants { seeds } => simulate::members_mutants(seeds),
        Command::Shrink { path, out } => shrink_file(&path, out),
        Command::Regressions { path } => simulate::regressions(&path),
        Command::Determinism { seeds, first, faults } => {
            simulate::determinism(seeds, first, &faults)
        }
        Command::Decode { api, files } => decode_all(&api, &files),
    }
}

/// `decode`: every file's events on stdout, the first decoding error on stderr.
fn decode_all(api: &str, files: &[PathBuf]) -> ExitCode {
    use std::io::Write;
    let Some(api) = turnstile_wire::Api::from_name(api) else { return ExitCode::from(2) };
    let mut stdout = std::io::stdout().lock();
    for file in files {
        let bytes = match std::fs::read(file) {
            Ok(b) => b,
            Err(e) => {
                eprintln!("{}: cannot read the body: {e}", file.display());
                return ExitCode::from(2);
            }
        };
        if files.len() > 1 {
            let _ = writeln!(stdout, "# {}", file.display());
        }
        let mut decoder = turnstile_wire::Decoder::new(api);
        let mut events = Vec::new();
        let result = decoder.feed(&bytes, &mut events).and_then(|()| decoder.finish(&mut events));
        for event in &events {
            let _ = writeln!(stdout, "{}", serde_json::to_string(event).unwrap_or_default());
        }
        if let Err(e) = result {
            let _ = stdout.flush();
            eprintln!("{}: {e}", file.display());
            return ExitCode::from(1);
        }
    }
    ExitCode::SUCCESS
}

/// The trace files named by `paths`: files as given, directories searched recursively for
/// `*.jsonl` in name order. A directory with no trace under it is an error, not a pass.
fn expand(paths: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let found = traces_under(p)?;
            if found.is_empty() {
                return Err(format!("no trace files (*.jsonl) under {}", p.display()));
            }
            out.extend(found);
        } else {
            out.push(p.clone());
        }
    }
    Ok(out)
}

fn traces_under(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: cannot list the directory: {e}", dir.display()))?;
    let mut sub: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    sub.sort();
    let mut out = Vec::new();
    for q in sub {
        if q.is_dir() {
            out.extend(traces_under(&q)?);
        } else if q.extension().is_some_and(|e| e == "jsonl") {
            out.push(q);
        }
    }
    Ok(out)
}

fn load(path: &Path) -> Result<Trace, String> {
    let bytes = std::fs::read(path)
        .map_err(|e| format!("{}: cannot read the trace: {e}", path.display()))?;
    Trace::parse_bytes(&bytes).map_err(|e| format!("{}: {e}", path.display()))
}

/// The files of `paths`, or the exit status 2 after saying why not.
fn files_or_exit(paths: &[PathBuf]) -> Result<Vec<PathBuf>, ExitCode> {
    expand(paths).map_err(|e| {
        eprintln!("turnstile-sim: {e}");
        ExitCode::from(2)
    })
}

/// What a trace command did with one file.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Done {
    Passed,
    Failed,
    Unreadable,
}

/// Tallies of a trace command over its files.
#[derive(Default)]
struct Tally {
    files: usize,
    passed: usize,
    failed: usize,
    unreadable: usize,
}

impl Tally {
    /// The exit status `replay` and `bless` share: 2 when a file could not be read or written
    /// (or a directory holds no trace), 1 when a trace failed, 0 otherwise.
    fn status(&self) -> ExitCode {
        match (self.unreadable, self.failed) {
            (0, 0) => ExitCode::SUCCESS,
            (0, _) => ExitCode::from(1),
            _ => ExitCode::from(2),
        }
    }
}

/// Reads every trace file under `paths` strictly and hands each to `each`; an unreadable file
/// is reported and counted.
fn over_traces(
    paths: &[PathBuf],
    mut each: impl FnMut(&Path, Trace) -> Done,
) -> Result<Tally, ExitCode> {
    let files = files_or_exit(paths)?;
    let mut tally = Tally { files: files.len(), ..Tally::default() };
    for path in &files {
        let done = match load(path) {
            Ok(trace) => each(path, trace),
            Err(e) => {
                eprintln!("turnstile-sim: {e}");
                Done::Unreadable
            }
        };
        match done {
            Done::Passed => tally.passed += 1,
            Done::Failed => tally.failed += 1,
            Done::Unreadable => tally.unreadable += 1,
        }
    }
    Ok(tally)
}

/// Prints one trace's line of `replay`'s report.
fn print_replay(path: &Path, replayed: &Result<ReplayReport, ReplayFailure>) -> Done {
    match replayed {
        Ok(r) => {
            println!(
                "ok    {}  ({} inputs, {} outputs, {} compared, hash {})",
                path.display(),
                r.inputs,
                r.outputs,
                r.compared,
                &r.output_hash[..12]
            );
            Done::Passed
        }
        Err(e) => {
            println!("FAIL  {}\n      {}", path.display(), indent(e));
            Done::Failed
        }
    }
}

fn replay_all(paths: &[PathBuf]) -> ExitCode {
    let (mut inputs, mut outputs, mut completions) = (0usize, 0usize, 0usize);
    let tally = over_traces(paths, |path, trace| {
        let replayed = replay(&trace);
        if let Ok(r) = &replayed {
            inputs += r.inputs;
            outputs += r.outputs;
            completions += r.outcomes.values().sum::<usize>();
        }
        print_replay(path, &replayed)
    });
    let tally = match tally {
        Ok(t) => t,
        Err(code) => return code,
    };
    println!(
        "\nreplayed {} traces: {inputs} inputs, {outputs} outputs, {completions} outcomes decided",
        tally.files
    );
    println!("{} passed, {} failed", tally.passed, tally.failed);
    if tally.unreadable > 0 {
        println!("{} unreadable", tally.unreadable);
    }
    tally.status()
}

fn view_file(path: &Path, out: Option<PathBuf>) -> ExitCode {
    let (path, stem) = match view_target(path) {
        Ok(target) => target,
        Err(e) => {
            eprintln!("turnstile-sim: {e}");
            return ExitCode::from(2);
        }
    };
    let path = path.as_path();
    let trace = match load(path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("turnstile-sim: {e}");
            return ExitCode::from(2);
        }
    };
    let out = out.unwrap_or_else(|| PathBuf::from(format!("{stem}.html")));
    let model = turnstile_sim::view::build(&trace);
    let page = turnstile_sim::view::render(&model, &stem);
    if let Err(e) = std::fs::write(&out, page) {
        eprintln!("turnstile-sim: cannot write `{}`: {e}", out.display());
        return ExitCode::from(2);
    }
    println!(
        "wrote {} ({} inputs, {} lanes, {} submissions)",
        out.display(),
        model.lines.len(),
        model.lanes.len(),
        model.bars.len()
    );
    if let Some(f) = &model.failure {
        println!(
            "replay fails at line {}; the page opens there:
  {}",
            f.line,
            f.text.replace('\n', "\n  ")
        );
    }
    ExitCode::SUCCESS
}

/// The trace `view` draws and the name of its page: a file and its stem, or a recording's one
/// flight trace and the directory's name.
fn view_target(path: &Path) -> Result<(PathBuf, String), String> {
    let name = |p: &Path| p.file_stem().map(|s| s.to_string_lossy().into_owned());
    if !path.is_dir() {
        return Ok((path.to_owned(), name(path).unwrap_or_else(|| "trace".into())));
    }
    let mut found = traces_under(path)?;
    match found.len() {
        0 => Err(format!("no trace files (*.jsonl) under {}", path.display())),
        1 => {
            let dir = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned());
            Ok((found.remove(0), name(&dir).unwrap_or_else(|| "recording".into())))
        }
        n => Err(format!(
            "{} holds {n} traces; view one of them by its file:\n  {}",
            path.display(),
            found.iter().map(|f| f.display().to_string()).collect::<Vec<_>>().join("\n  ")
        )),
    }
}

/// `replay --save`: replays the one trace `paths` name, then writes it as a regression trace.
/// Exit status: replay's (0 passed, 1 failed: saved as recorded), 2 when nothing was saved.
fn replay_and_save(paths: &[PathBuf], out: &Path, rule: &str) -> ExitCode {
    let files = match files_or_exit(paths) {
        Ok(f) => f,
        Err(code) => return code,
    };
    let [path] = files.as_slice() else {
        eprintln!(
            "turnstile-sim: --save takes one trace, and {} hold {}:\n  {}\nreplay one of them \
             by its file",
            paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "),
            files.len(),
            files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>().join("\n  ")
        );
        return ExitCode::from(2);
    };
    let trace = match load(path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("turnstile-sim: {e}");
            return ExitCode::from(2);
        }
    };
    let done = print_replay(path, &replay(&trace));
    let saved = match turnstile_sim::regression::save(&trace, path, out, rule) {
        Ok(saved) => saved,
        Err(e) => {
            eprintln!("turnstile-sim: {e}");
            return ExitCode::from(2);
        }
    };
    if done == Done::Passed {
        println!(
            "saved {} ({} inputs, each with its expected outputs); `cargo test -p \
             turnstile-tests --test traces` replays it with the others",
            out.display(),
            saved.lines.len()
        );
        ExitCode::SUCCESS
    } else {
        println!(
            "saved {} as recorded; it fails now (above). Once the bug is fixed: turnstile-sim \
             bless {}, and review its outputs",
            out.display(),
            out.display()
        );
        ExitCode::from(1)
    }
}

fn shrink_file(path: &Path, out: Option<PathBuf>) -> ExitCode {
    let trace = match load(path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("turnstile-sim: {e}");
            return ExitCode::from(2);
        }
    };
    let Some(shrunk) = turnstile_sim::shrink::shrink(&trace) else {
        // Say what the trace does fail with, if anything: shrinking minimises an invariant
        // break, not a difference from the outputs a trace expects.
        match replay(&trace) {
            Ok(_) => println!(
                "{}: its replay breaks no invariant and matches every expected output; \
                 nothing to shrink (shrink minimises a trace that breaks an invariant)",
                path.display()
            ),
            Err(e) => println!(
                "{}: its replay breaks no invariant, so there is nothing to shrink (shrink \
                 minimises a trace that breaks an invariant). It fails otherwise:\n  {}\n\
                 If that difference is a deliberate change, bless the trace: \
                 turnstile-sim bless {}",
                path.display(),
                e.to_string().replace('\n', "\n  "),
                path.display()
            ),
        }
        return ExitCode::from(1);
    };
    let out = out.unwrap_or_else(|| path.with_extension("min.jsonl"));
    if let Err(e) = std::fs::write(&out, shrunk.trace.to_jsonl()) {
        eprintln!("turnstile-sim: {}: cannot write the shrunk trace: {e}", out.display());
        return ExitCode::from(2);
    }
    println!(
        "shrunk {} inputs to {} in {} replays: {}",
        shrunk.before,
        shrunk.after,
        shrunk.tries,
        out.display()
    );
    println!("it breaks the same invariant: {}", shrunk.failure);
    println!(
        "replay: cargo run -p turnstile-sim{} -- replay {}",
        features(&shrunk.trace),
        out.display()
    );
    ExitCode::SUCCESS
}

/// The cargo features a trace's replay needs (a mutant in its configuration).
fn features(trace: &Trace) -> &'static str {
    let json = serde_json::to_value(&trace.header.config).unwrap_or_default();
    if json.get("mutant").is_some_and(|m| !m.is_null()) { " --features mutants" } else { "" }
}

fn indent(e: &ReplayFailure) -> String {
    e.to_string().replace('\n', "\n      ")
}

fn bless_all(paths: &[PathBuf]) -> ExitCode {
    let tally = over_traces(paths, |path, trace| {
        let blessed = match bless(&trace) {
            Ok(t) => t,
            Err(e) => {
                println!("FAIL  {} (left untouched)\n      {}", path.display(), indent(&e));
                return Done::Failed;
            }
        };
        match std::fs::write(path, blessed.to_jsonl()) {
            Ok(()) => {
                println!("blessed {}", path.display());
                Done::Passed
            }
            Err(e) => {
                eprintln!("turnstile-sim: {}: cannot write the trace: {e}", path.display());
                Done::Unreadable
            }
        }
    });
    match tally {
        Ok(t) => t.status(),
        Err(code) => code,
    }
}
