//! `turnstile-model`: exhaustively check the core against the specification.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use turnstile_model::checker::describe;
use turnstile_model::{Bounds, Options, Progress, Report, Strategy, check, configs};

// See model/Cargo.toml: allocation dominates the lockstep check's profile.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Exhaustive model checking of the turnstile core (SPEC section 10).
///
/// Explores every state of the executable specification within a named configuration's bounds,
/// drives the real core along every explored transition, and checks conformance (SPEC 7), the
/// core's invariants (SPEC 6) and liveness (I6). A problem is written as a trace file that
/// `turnstile-sim replay` reproduces.
#[derive(Parser)]
#[command(name = "turnstile-model", version, about, long_about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Explore a configuration and print distinct states, transitions, depth, seconds, states
    /// per second and the verdict. Exit status: 0 passed, 1 a problem was found (its trace is
    /// written), 2 bad arguments.
    Check {
        /// The configuration (see `turnstile-model list`).
        #[arg(long, default_value = "default")]
        config: String,
        /// Explore the specification alone, without driving the core (measures the explorer).
        #[arg(long)]
        no_conformance: bool,
        /// Stop after this many distinct states.
        #[arg(long)]
        max_states: Option<u64>,
        /// Worker threads (default: one per available core). The verdict, the counts and the
        /// counterexample are the same for any number.
        #[arg(long, short = 'j')]
        jobs: Option<usize>,
        /// Where to write a counterexample trace.
        #[arg(long, default_value = "model-counterexample.jsonl")]
        out: PathBuf,
        /// Switch on one of the core's test-only mutants (needs `--features mutants`).
        #[arg(long)]
        mutant: Option<String>,
        /// Merge each state with its mirror image (the two sessions swapped): about half the
        /// states of a two-session configuration, sound when the core treats sessions alike
        /// (docs/verification.md, "Symmetry"). Changes the counts, not the verdict.
        #[arg(long)]
        symmetry: bool,
        /// Explore every transition that only spends (an idle cancel, a clear of an empty
        /// queue, a stale reply) as a state of its own, instead of comparing the core it
        /// leaves with its source's (docs/verification.md, "Transitions that only spend").
        /// Many times the states; the same verdict.
        #[arg(long)]
        no_subsumption: bool,
        /// Keep everything a finished submission was (its mode, its counts, its outcome
        /// without a RunId, its session), instead of forgetting what no rule reads any more
        /// (docs/verification.md, "What a finished submission forgets"). Two to four times
        /// the states; the same verdict. With `--no-subsumption` too, the states counted are
        /// the whole space the specification has.
        #[arg(long)]
        no_forgetting: bool,
        /// How the core in lockstep is kept for the states still to expand: `tree` explores
        /// the specification first, then walks its tree of shortest paths with the core (a few
        /// copies per worker); `frontier` keeps a copy beside every state of the breadth-first
        /// frontier (1.4 KB each). The same report; `tree` is faster and needs a fraction of
        /// the memory.
        #[arg(long, value_enum, default_value_t = Strategy::Tree)]
        strategy: Strategy,
    },
    /// List the named configurations.
    List,
    /// Check the lease and fencing protocol of several hosts over one database (SPEC 11):
    /// every state of a named size, each step judged, liveness from every state. Prints the
    /// counts and the verdict, and a problem's shortest path. Exit status: 0 passed, 1 a
    /// problem was found (or, with `--mutants`, a mutant was missed), 2 bad arguments.
    ///
    /// Examples:
    ///   turnstile-model lease
    ///   turnstile-model lease --size small --mutant no_epoch_check
    ///   turnstile-model lease --mutants
    Lease {
        /// The size: `tiny` (2 hosts, 1 submission), `small` (2 hosts, 2 submissions) or
        /// `wide` (3 hosts, 1 submission).
        #[arg(long, default_value = "small")]
        size: String,
        /// Switch on one of the protocol's deliberate bugs (see `--mutants` for the names).
        #[arg(long, conflicts_with = "mutants")]
        mutant: Option<String>,
        /// Hunt every deliberate bug of the protocol at the size and print a table: each must
        /// be found.
        #[arg(long)]
        mutants: bool,
    },
    /// Run the checker against every test-only mutant of the core and print, per mutant:
    /// found or missed, the configuration that found it, the shortest counterexample's length
    /// and the time to find it. Exit status 1 when any mutant is missed. Needs a build with
    /// `--features mutants`.
    Mutants {
        /// Hunt without the subsumption of transitions that only spend (see `check
        /// --no-subsumption`), to compare the counterexamples' lengths.
        #[arg(long)]
        no_subsumption: bool,
        /// Hunt without letting finished submissions forget (see `check --no-forgetting`),
        /// to compare the counterexamples' lengths.
        #[arg(long)]
        no_forgetting: bool,
    },
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::List => {
            for b in configs::all() {
                println!("{:<8} {}", b.name, b.about);
            }
            ExitCode::SUCCESS
        }
        Command::Lease { size, mutant, mutants } => lease(&size, mutant.as_deref(), mutants),
        Command::Mutants { no_subsumption, no_forgetting } => mutants(&Options {
            subsumption: !no_subsumption,
            forgetting: !no_forgetting,
            ..Options::default()
        }),
        Command::Check {
            config,
            no_conformance,
            max_states,
            jobs,
            out,
            mutant,
            symmetry,
            no_subsumption,
            no_forgetting,
            strategy,
        } => {
            let Some(mut bounds) = configs::named(&config) else {
                eprintln!("unknown configuration {config:?}; `turnstile-model list` shows them");
                return ExitCode::from(2);
            };
            if let Err(e) = apply_mutant(&mut bounds, mutant.as_deref()) {
                eprintln!("{e}");
                return ExitCode::from(2);
            }
            let conformance = !no_conformance;
            let subsumption = !no_subsumption;
            let mut options = Options {
                conformance,
                max_states,
                symmetry,
                subsumption,
                forgetting: !no_forgetting,
                strategy,
                ..Options::default()
            };
            options.jobs = jobs.unwrap_or(options.jobs).max(1);
            let report = run(&bounds, &options);
            print_report(&report, options.conformance);
            finish(&report, &out, mutant.is_some())
        }
    }
}

#[cfg(feature = "mutants")]
fn apply_mutant(bounds: &mut Bounds, name: Option<&str>) -> Result<(), String> {
    let Some(name) = name else { return Ok(()) };
    let m = turnstile_core::Mutant::ALL.iter().find(|m| m.name() == name);
    bounds.config.mutant = Some(*m.ok_or_else(|| format!("unknown mutant {name:?}"))?);
    Ok(())
}

#[cfg(not(feature = "mutants"))]
fn apply_mutant(_: &mut Bounds, name: Option<&str>) -> Result<(), String> {
    match name {
        None => Ok(()),
        Some(_) => Err("mutants exist only in a build with `--features mutants`".into()),
    }
}

#[cfg(feature = "mutants")]
fn mutants(options: &Options) -> ExitCode {
    // A mutant makes a debug-build engine panic on its own assertions; the checker reports
    // that as a violation, so the panic messages would only be noise here.
    std::panic::set_hook(Box::new(|_| {}));
    println!("| mutant | scope | found | by | length | seconds | states | what the checker saw |");
    println!("|---|---|---|---|---|---|---|---|");
    let mut missed = 0;
    for &m in turnstile_core::Mutant::ALL {
        let h = turnstile_model::mutants::hunt(m, options);
        missed += usize::from(h.found_by.is_none());
        println!(
            "| `{}` | {} | {} | {} | {} | {:.2} | {} | {} |",
            m.name(),
            m.scope().join(", "),
            if h.found_by.is_some() { "found" } else { "MISSED" },
            h.found_by.unwrap_or("-"),
            h.length,
            h.seconds,
            h.states,
            h.problem
        );
    }
    if missed == 0 { ExitCode::SUCCESS } else { ExitCode::from(1) }
}

#[cfg(not(feature = "mutants"))]
fn mutants(_: &Options) -> ExitCode {
    eprintln!("mutants exist only in a build with `--features mutants`");
    ExitCode::from(2)
}

fn lease(size: &str, mutant: Option<&str>, hunt: bool) -> ExitCode {
    use turnstile_model::lease::{self, Mutant};
    let Some(mut bounds) = lease::named(size) else {
        let names: Vec<&str> = lease::NAMES.iter().map(|(n, _)| *n).collect();
        eprintln!("unknown size {size:?}; the sizes are {}", names.join(", "));
        return ExitCode::from(2);
    };
    if hunt {
        println!("| mutant | found | length | seconds | states | what the checker saw |");
        println!("|---|---|---|---|---|---|");
        let mut missed = 0;
        for &m in Mutant::ALL {
            let r = lease::check(&lease::Bounds { mutant: Some(m), ..bounds });
            let (found, length, what) = match &r.counterexample {
                Some(c) => ("found", c.path.len(), c.violation.to_string()),
                None => ("MISSED", 0, String::new()),
            };
            missed += usize::from(r.counterexample.is_none());
            println!(
                "| `{}` | {found} | {length} | {:.2} | {} | {what} |",
                m.name(),
                r.seconds,
                r.states
            );
        }
        return if missed == 0 { ExitCode::SUCCESS } else { ExitCode::from(1) };
    }
    if let Some(name) = mutant {
        let Some(&m) = Mutant::ALL.iter().find(|m| m.name() == name) else {
            let names: Vec<&str> = Mutant::ALL.iter().map(|m| m.name()).collect();
            eprintln!("unknown mutant {name:?}; the mutants are {}", names.join(", "));
            return ExitCode::from(2);
        };
        bounds.mutant = Some(m);
    }
    let r = lease::check(&bounds);
    let about = lease::NAMES.iter().find(|(n, _)| *n == size).map_or("", |(_, a)| a);
    println!("size               {size} ({about})");
    println!("distinct states    {}", r.states);
    println!("transitions        {}", r.transitions);
    println!("depth              {}", r.depth);
    println!("seconds            {:.2}", r.seconds);
    let Some(c) = r.counterexample else {
        println!("verdict            pass");
        return ExitCode::SUCCESS;
    };
    println!("verdict            FAIL: {}", c.violation);
    println!("shortest path      {} steps", c.path.len());
    for (i, a) in c.path.iter().enumerate() {
        println!("  {:>2}. {a}", i + 1);
    }
    ExitCode::from(1)
}

fn run(bounds: &Bounds, options: &Options) -> Report {
    // The bar's length is the configuration's measured size; it grows if the space does.
    let bar = ProgressBar::new(bounds.expected_states);
    bar.set_style(
        ProgressStyle::with_template(
            "[{elapsed_precise}] {bar:40} {pos}/{len} states ({percent}%) {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut tick = |p: Progress| {
        if p.states > bar.length().unwrap_or(0) {
            bar.set_length(p.states);
        }
        if p.checked == 0 {
            bar.set_position(p.states);
            bar.set_message(format!("{} transitions, depth {}", p.transitions, p.depth));
        } else {
            // The second pass of `--strategy tree`: the core along the explored states.
            bar.set_position(p.checked);
            bar.set_message(format!("checked with the core ({} transitions)", p.transitions));
        }
    };
    let report = check(bounds, options, &mut tick);
    bar.finish_and_clear();
    report
}

fn print_report(r: &Report, conformance: bool) {
    println!("configuration      {}", r.config);
    println!("conformance        {}", if conformance { "on (core in lockstep)" } else { "off" });
    println!("distinct states    {}", r.states);
    println!("transitions        {}", r.transitions);
    println!("depth              {}", r.depth);
    println!("seconds            {:.2}", r.seconds);
    println!("states per second  {:.0}", r.states_per_second());
    if let Some(path) = &r.subsumption_dropped {
        println!(
            "subsumption        dropped: a transition that only spends changed the core's \
             state (after {path:?}), so every such transition's target was explored"
        );
    }
    match &r.counterexample {
        None if r.truncated => {
            println!(
                "verdict            no problem in the explored prefix (stopped by --max-states)"
            )
        }
        None => println!("verdict            pass"),
        Some(c) => {
            println!("verdict            FAIL: {}", describe(&c.problem));
            println!("shortest path      {} actions", c.path.len());
        }
    }
}

fn finish(r: &Report, out: &Path, mutant: bool) -> ExitCode {
    let Some(c) = &r.counterexample else { return ExitCode::SUCCESS };
    for (i, a) in c.path.iter().enumerate() {
        println!("  {:>2}. {a:?}", i + 1);
    }
    if let turnstile_model::Problem::Disagreement { expected, actual } = &c.problem {
        println!("  expected: {}", json(expected));
        println!("  actual:   {}", json(actual));
    }
    match write_trace(&c.trace, out) {
        Ok(()) => {
            // A mutant's trace names it in its configuration: only a mutants build reads it.
            let features = if mutant { " --features turnstile-core/mutants" } else { "" };
            println!(
                "counterexample     {} (reproduce: cargo run -p turnstile-sim{features} -- replay {})",
                out.display(),
                out.display()
            );
        }
        Err(e) => eprintln!("could not write {}: {e}", out.display()),
    }
    ExitCode::from(1)
}

fn json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_else(|e| e.to_string())
}

fn write_trace(t: &turnstile_core::trace::Trace, out: &Path) -> std::io::Result<()> {
    let mut text = serde_json::to_string(&t.header).map_err(std::io::Error::other)?;
    text.push('\n');
    for (_, line) in &t.lines {
        text.push_str(&serde_json::to_string(line).map_err(std::io::Error::other)?);
        text.push('\n');
    }
    std::fs::write(out, text)
}
