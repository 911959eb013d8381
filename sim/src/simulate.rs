//! The `sweep`, `seed` and `determinism` commands. They need the madsim build; without it they
//! say how to get it.

#[cfg(not(madsim))]
use std::path::Path;
#[cfg(not(madsim))]
use std::process::ExitCode;

#[cfg(not(madsim))]
fn needs_madsim() -> ExitCode {
    eprintln!(
        "error: the simulation runs under madsim; build it with\n  RUSTFLAGS=\"--cfg madsim\" \
         CARGO_TARGET_DIR=target/madsim cargo run --release -p turnstile-sim -- <command>"
    );
    ExitCode::from(2)
}

/// `sweep`.
#[cfg(not(madsim))]
pub fn sweep(_: u64, _: u64, _: usize, _: &str, _: &Path, _: Option<String>) -> ExitCode {
    needs_madsim()
}

/// `seed`.
#[cfg(not(madsim))]
pub fn seed(_: u64, _: &str, _: Option<&Path>, _: Option<String>) -> ExitCode {
    needs_madsim()
}

/// `regressions`.
#[cfg(not(madsim))]
pub fn regressions(_: &Path) -> ExitCode {
    needs_madsim()
}

/// `mutants`.
#[cfg(not(madsim))]
pub fn mutants(_: u64, _: &str, _: Option<&Path>) -> ExitCode {
    needs_madsim()
}

/// `determinism`.
#[cfg(not(madsim))]
pub fn determinism(_: u64, _: u64, _: &str) -> ExitCode {
    needs_madsim()
}

#[cfg(madsim)]
pub use with_madsim::{determinism, mutants, regressions, seed, sweep};

#[cfg(madsim)]
mod with_madsim {
    use std::collections::BTreeMap;
    use std::path::Path;
    use std::process::ExitCode;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::Instant;

    use indicatif::{ProgressBar, ProgressStyle};
    use turnstile_sim::sweep::run_seed;
    use turnstile_sim::world::{
        Profile, SeedReport, WorldConfig, hunted_mutant_names, mutant_names,
    };

    fn knobs(name: &str, mutant: Option<String>) -> Result<WorldConfig, ExitCode> {
        let profile = Profile::from_name(name).ok_or_else(|| {
            eprintln!("error: --faults {name}: unknown profile (use `calm` or `faults`)");
            ExitCode::from(2)
        })?;
        if let Some(m) = &mutant
            && !mutant_names().contains(&m.as_str())
        {
            eprintln!(
                "error: --mutant {m}: unknown (this build knows: {})",
                if mutant_names().is_empty() {
                    "none; build with --features mutants".to_owned()
                } else {
                    mutant_names().join(", ")
                }
            );
            return Err(ExitCode::from(2));
        }
        Ok(WorldConfig { profile, mutant })
    }

    /// `sweep`: seeds in parallel jobs, a progress bar, a summary, failing traces saved.
    pub fn sweep(
        seeds: u64,
        first: u64,
        jobs: usize,
        faults: &str,
        out: &Path,
        mutant: Option<String>,
    ) -> ExitCode {
        let knobs = match knobs(faults, mutant) {
            Ok(k) => k,
            Err(code) => return code,
        };
        let bar = ProgressBar::new(seeds);
        bar.set_style(
            ProgressStyle::with_template(
                "{elapsed_precise} [{bar:40}] {pos}/{len} seeds, {per_sec}, {msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
        let next = AtomicU64::new(first);
        let reports = Mutex::new(Vec::new());
        let failures = AtomicU64::new(0);
        let started = Instant::now();
        std::thread::scope(|scope| {
            for _ in 0..jobs.max(1) {
                scope.spawn(|| {
                    loop {
                        let seed = next.fetch_add(1, Ordering::Relaxed);
                        if seed >= first + seeds {
                            return;
                        }
                        let report = run_seed(seed, &knobs, false);
                        if !report.violations.is_empty() {
                            let n = failures.fetch_add(1, Ordering::Relaxed) + 1;
                            bar.set_message(format!("{n} failed"));
                        }
                        bar.inc(1);
                        reports
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .push(report);
                    }
                });
            }
        });
        bar.finish();
        let mut reports = reports.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
        reports.sort_by_key(|r| r.seed);
        summarize(&reports, seeds, first, jobs, faults, started.elapsed().as_secs_f64());
        let failed: Vec<&SeedReport> =
            reports.iter().filter(|r| !r.violations.is_empty()).collect();
        if failed.is_empty() {
            return ExitCode::SUCCESS;
        }
        if let Err(e) = std::fs::create_dir_all(out) {
            eprintln!("error: cannot create {}: {e}", out.display());
        }
        for r in failed {
            println!("\nFAIL seed {}: {}", r.seed, r.violations[0]);
            for v in r.violations.iter().skip(1).take(4) {
                println!("     also: {v}");
            }
            let mutant =
                knobs.mutant.as_deref().map_or(String::new(), |m| format!(" --mutant {m}"));
            let features = if mutant.is_empty() { "" } else { " --features mutants" };
            println!(
                "     rerun: RUSTFLAGS=\"--cfg madsim\" CARGO_TARGET_DIR=target/madsim cargo run --release -p turnstile-sim{features} -- seed {} --faults {faults}{mutant}",
                r.seed
            );
            if let Some(trace) = &r.trace {
                let path = out.join(format!("seed-{}.jsonl", r.seed));
                match std::fs::write(&path, trace) {
                    Ok(()) => println!("     core trace: {}", path.display()),
                    Err(e) => eprintln!("error: cannot write {}: {e}", path.display()),
                }
                shrink_saved(trace, &out.join(format!("seed-{}.min.jsonl", r.seed)));
            }
        }
        ExitCode::from(1)
    }

    /// Shrinks a failing seed's core trace when the core itself breaks an invariant on it.
    fn shrink_saved(text: &str, path: &Path) {
        let Ok(trace) = turnstile_core::Trace::parse(text) else { return };
        match turnstile_sim::shrink::shrink(&trace) {
            None => println!(
                "     (the core's trace replays cleanly: the failure is the host's; rerun the seed)"
            ),
            Some(s) => match std::fs::write(path, s.trace.to_jsonl()) {
                Ok(()) => println!(
                    "     shrunk to {} of {} inputs: {} ({})",
                    s.after,
                    s.before,
                    path.display(),
                    s.failure
                ),
                Err(e) => eprintln!("error: cannot write {}: {e}", path.display()),
            },
        }
    }

    fn summarize(
        reports: &[SeedReport],
        seeds: u64,
        first: u64,
        jobs: usize,
        faults: &str,
        secs: f64,
    ) {
        let failed = reports.iter().filter(|r| !r.violations.is_empty()).count();
        let mut outcomes: BTreeMap<&str, u64> = BTreeMap::new();
        let mut injected: BTreeMap<&str, u64> = BTreeMap::new();
        for r in reports {
            for (k, n) in &r.outcomes {
                *outcomes.entry(k).or_default() += n;
            }
            for (k, n) in &r.faults {
                *injected.entry(k).or_default() += n;
            }
        }
        let list = |m: &BTreeMap<&str, u64>| {
            if m.is_empty() {
                "none".to_owned()
            } else {
                m.iter().map(|(k, n)| format!("{k} {n}")).collect::<Vec<_>>().join(", ")
            }
        };
        let sim_s: f64 = reports.iter().map(|r| r.sim_ms as f64 / 1e3).sum();
        let events: u64 = reports.iter().map(|r| r.events).sum();
        println!(
            "seeds       {seeds} ({first}..={}), {jobs} jobs, profile {faults}",
            first + seeds - 1
        );
        println!("passed      {}", reports.len() - failed);
        println!("failed      {failed}");
        println!(
            "simulated   {sim_s:.1} s in all ({:.1} s per seed)",
            sim_s / reports.len().max(1) as f64
        );
        println!("events      {events} engine inputs");
        println!("outcomes    {}", list(&outcomes));
        println!("faults      {}", list(&injected));
        println!("wall        {secs:.1} s = {:.0} seeds/s", reports.len() as f64 / secs.max(1e-9));
    }

    /// `seed`: one seed, its report and trace hash (and its flight trace, when asked).
    pub fn seed(seed: u64, faults: &str, trace: Option<&Path>, mutant: Option<String>) -> ExitCode {
        let knobs = match knobs(faults, mutant) {
            Ok(k) => k,
            Err(code) => return code,
        };
        let r = run_seed(seed, &knobs, trace.is_some());
        if let (Some(path), Some(text)) = (trace, &r.trace)
            && let Err(e) = std::fs::write(path, text)
        {
            eprintln!("error: cannot write {}: {e}", path.display());
        }
        println!("seed {seed}: {} events, {:.1} s simulated", r.events, r.sim_ms as f64 / 1e3);
        println!("outcomes {:?}", r.outcomes);
        println!("hash {}", r.trace_hash);
        for v in &r.violations {
            println!("violation: {v}");
        }
        if r.violations.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) }
    }

    /// `regressions`: every listed seed must pass.
    pub fn regressions(path: &Path) -> ExitCode {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("error: {}: {e}", path.display());
                return ExitCode::from(2);
            }
        };
        let mut failed = 0;
        for (i, line) in text.lines().enumerate() {
            let entry = line.split('#').next().unwrap_or("").trim();
            if entry.is_empty() {
                continue;
            }
            let mut words = entry.split_whitespace();
            let (Some(seed), Some(profile), None) = (words.next(), words.next(), words.next())
            else {
                eprintln!(
                    "error: {} line {}: expected `<seed> <profile> # note`",
                    path.display(),
                    i + 1
                );
                return ExitCode::from(2);
            };
            let Ok(seed) = seed.parse::<u64>() else {
                eprintln!(
                    "error: {} line {}: seed {seed:?} is not a number",
                    path.display(),
                    i + 1
                );
                return ExitCode::from(2);
            };
            let knobs = match knobs(profile, None) {
                Ok(k) => k,
                Err(code) => return code,
            };
            let r = run_seed(seed, &knobs, false);
            match r.violations.first() {
                None => println!("ok    seed {seed} ({profile})"),
                Some(v) => {
                    failed += 1;
                    println!("FAIL  seed {seed} ({profile}): {v}");
                }
            }
        }
        if failed == 0 { ExitCode::SUCCESS } else { ExitCode::from(1) }
    }

    /// `mutants`: for each mutant, seeds until one fails; a table of what was found.
    pub fn mutants(seeds: u64, faults: &str, out: Option<&Path>) -> ExitCode {
        let names = hunted_mutant_names();
        if names.is_empty() {
            eprintln!("error: this build has no mutants; build with --features mutants");
            return ExitCode::from(2);
        }
        println!(
            "| mutant | found | seeds to find | seconds | shrunk core trace | first violation |"
        );
        println!("|---|---|---|---|---|---|");
        let mut missed = 0;
        for name in names {
            let knobs = match knobs(faults, Some(name.to_owned())) {
                Ok(k) => k,
                Err(code) => return code,
            };
            let started = Instant::now();
            let found = (1..=seeds).find_map(|seed| {
                let r = run_seed(seed, &knobs, false);
                r.violations.first().cloned().map(|v| (seed, v, r.trace))
            });
            let secs = started.elapsed().as_secs_f64();
            match found {
                Some((seed, v, trace)) => {
                    let v: String = v.chars().take(90).collect();
                    let shrunk = shrunk_length(trace.as_deref());
                    #[cfg(not(feature = "mutants"))]
                    let _ = out;
                    #[cfg(feature = "mutants")]
                    if let (Some(dir), Some(text)) = (out, trace.as_deref()) {
                        // Inputs a mutant's run produced may not fit the correct core (it
                        // refuses them): then there is no scenario to pin, only a note.
                        if let Err(e) = save_regression(dir, name, seed, faults, text) {
                            eprintln!("note: no regression trace for {name}: {e}");
                        }
                    }
                    println!(
                        "| `{name}` | yes | {seed} | {secs:.1} | {shrunk} | {} |",
                        v.replace('|', "/")
                    );
                }
                None => {
                    missed += 1;
                    println!("| `{name}` | **no** | > {seeds} | {secs:.1} | | |");
                }
            }
        }
        if missed == 0 { ExitCode::SUCCESS } else { ExitCode::from(1) }
    }

    /// How far the failing seed's core trace shrinks ("148 → 17 inputs"), or why it does not:
    /// a failure the core's replay does not show is the host's (its waiters, its store).
    fn shrunk_length(trace: Option<&str>) -> String {
        let Some(text) = trace else { return "no trace".to_owned() };
        match turnstile_core::Trace::parse(text) {
            Ok(t) => match turnstile_sim::shrink::shrink(&t) {
                Some(s) => format!("{} → {} inputs", s.before, s.after),
                None => "— (the core's replay passes: a host or client check)".to_owned(),
            },
            Err(e) => format!("unreadable trace: {e}"),
        }
    }

    #[cfg(feature = "mutants")]
    /// Writes `dir/sim-mutant-<name>.jsonl`: the failing seed's core trace shrunk, without the
    /// mutant, with the correct core's outputs. Nothing is written for a host mutant or a
    /// trace that does not shrink (the core's replay passes).
    fn save_regression(
        dir: &Path,
        name: &str,
        seed: u64,
        faults: &str,
        text: &str,
    ) -> Result<(), String> {
        let Some(mutant) = turnstile_core::Mutant::ALL.iter().find(|m| m.name() == name) else {
            return Ok(());
        };
        let trace = turnstile_core::Trace::parse(text).map_err(|e| format!("seed {seed}: {e}"))?;
        let Some(shrunk) = turnstile_sim::shrink::shrink(&trace) else { return Ok(()) };
        let mut pinned = shrunk.trace;
        pinned.header.config.mutant = None;
        let file = format!("sim-mutant-{name}");
        pinned.header.name = Some(file.clone());
        pinned.header.rule = Some(format!(
            "A scenario mutant `{name}` breaks ({}). Found by `turnstile-sim mutants` at seed \
             {seed} ({faults}), shrunk from {} to {} inputs; with the mutant: {}",
            mutant.explain(),
            shrunk.before,
            shrunk.after,
            shrunk.failure
        ));
        pinned.header.origin = Some(serde_json::json!({
            "recorded_by": "turnstile-sim mutants",
            "mutant": name,
            "seed": seed,
            "profile": faults,
        }));
        let blessed = turnstile_core::bless(&pinned)
            .map_err(|e| format!("{file}: the correct core fails it too: {e}"))?;
        let path = dir.join(format!("{file}.jsonl"));
        std::fs::write(&path, blessed.to_jsonl())
            .map_err(|e| format!("cannot write {}: {e}", path.display()))
    }

    /// `determinism`: each seed twice, in separate processes, same trace hash.
    pub fn determinism(seeds: u64, first: u64, faults: &str) -> ExitCode {
        let Ok(exe) = std::env::current_exe() else {
            eprintln!("error: cannot find this program to re-run it");
            return ExitCode::from(2);
        };
        let hash = |seed: u64| -> Option<String> {
            let out = std::process::Command::new(&exe)
                .args(["seed", &seed.to_string(), "--faults", faults])
                .output()
                .ok()?;
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            text.lines().find_map(|l| l.strip_prefix("hash ").map(str::to_owned))
        };
        let mut differ = 0;
        for seed in first..first + seeds {
            let (a, b) = (hash(seed), hash(seed));
            let same = a.is_some() && a == b;
            println!(
                "seed {seed}: {} {}",
                if same { "same" } else { "DIFFERENT" },
                a.as_deref().map_or("(no hash)", |h| &h[..16.min(h.len())])
            );
            if !same {
                differ += 1;
            }
        }
        println!("{} seeds, {differ} not deterministic", seeds);
        if differ == 0 { ExitCode::SUCCESS } else { ExitCode::from(1) }
    }
}
