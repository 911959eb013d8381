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

/// `members`.
#[cfg(not(madsim))]
pub fn members(_: u64, _: u64, _: usize, _: Option<&str>, _: &Path) -> ExitCode {
    needs_madsim()
}

/// `members-mutants`.
#[cfg(not(madsim))]
pub fn members_mutants(_: u64) -> ExitCode {
    needs_madsim()
}

#[cfg(madsim)]
pub use with_madsim::{determinism, members, members_mutants, mutants, regressions, seed, sweep};

#[cfg(madsim)]
mod with_madsim {
    use std::path::Path;
    use std::process::ExitCode;
    use std::time::Instant;

    use turnstile_sim::sweep::Sweep;
    use turnstile_sim::world::{Faults, hunted_mutant_names, mutant_names};

    /// The built-in world with the named fault profile and mutant, as `turnstile-sim` runs it
    /// (its flags, not the `TURNSTILE_SIM_*` variables, say what to run).
    fn knobs(name: &str, mutant: Option<String>) -> Result<Sweep, ExitCode> {
        let faults = Faults::from_name(name).ok_or_else(|| {
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
        let features = if mutant.is_some() { " --features mutants" } else { "" };
        let flag = mutant.as_deref().map_or(String::new(), |m| format!(" --mutant {m}"));
        let mut sweep = Sweep::new("built-in world").faults(faults).ignore_environment();
        sweep = sweep.rerun_command(format!(
            "RUSTFLAGS=\"--cfg madsim\" CARGO_TARGET_DIR=target/madsim cargo run --release -p \
             turnstile-sim{features} -- seed {{seed}} --faults {name}{flag}"
        ));
        Ok(match mutant {
            Some(m) => sweep.mutant(m),
            None => sweep,
        })
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
        let sweep = match knobs(faults, mutant) {
            Ok(k) => k,
            Err(code) => return code,
        };
        let report = sweep.seeds(seeds).first(first).jobs(jobs).out(out).run();
        println!("{}\nprofile     {faults}", report.summary());
        print!("{}", report.failures());
        if report.passed() { ExitCode::SUCCESS } else { ExitCode::from(1) }
    }

    /// `seed`: one seed, its report and trace hash (and its flight trace, when asked).
    pub fn seed(seed: u64, faults: &str, trace: Option<&Path>, mutant: Option<String>) -> ExitCode {
        let sweep = match knobs(faults, mutant) {
            Ok(k) => k,
            Err(code) => return code,
        };
        let r = sweep.run_seed(seed, trace.is_some());
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
            let sweep = match knobs(profile, None) {
                Ok(k) => k,
                Err(code) => return code,
            };
            let r = sweep.run_seed(seed, false);
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
    /// `members`: a sweep of several hosts over one store.
    pub fn members(
        seeds: u64,
        first: u64,
        jobs: usize,
        mutant: Option<&str>,
        out: &Path,
    ) -> ExitCode {
        let started = Instant::now();
        let reports = turnstile_sim::members::sweep(first, seeds, jobs, mutant, false);
        let failed: Vec<_> = reports.iter().filter(|r| !r.violations.is_empty()).collect();
        // Determinism: the first seeds again, in this process, must end the same way (the
        // ledger's hash: every outcome and its cursor).
        let mut differ = Vec::new();
        for r in reports.iter().take(3) {
            let again = turnstile_sim::members::run_seed(r.seed, mutant);
            if again.trace_hash != r.trace_hash || again.violations != r.violations {
                differ.push(r.seed);
            }
        }
        for seed in &differ {
            eprintln!("seed {seed} is not deterministic: a second run ended differently");
        }
        let mut faults: std::collections::BTreeMap<&str, u64> = Default::default();
        let mut outcomes: std::collections::BTreeMap<&str, u64> = Default::default();
        for r in &reports {
            for (k, n) in &r.faults {
                *faults.entry(k.as_str()).or_default() += n;
            }
            for (k, n) in &r.outcomes {
                *outcomes.entry(k.as_str()).or_default() += n;
            }
        }
        for (n, r) in failed.iter().enumerate() {
            let f = turnstile_sim::members::failure(r, mutant, (n < 20).then_some(out));
            eprintln!("seed {} failed:", r.seed);
            for v in r.violations.iter().take(5) {
                eprintln!("  {v}");
            }
            eprintln!("  rerun: {}", f.rerun);
            if let Some(trace) = &f.trace {
                eprintln!("  core trace: {} {}", trace.display(), f.shrunk);
            }
        }
        let inputs: u64 = reports.iter().map(|r| r.events).sum();
        eprintln!(
            "members: {} of {} seeds passed in {:.1} s ({} rerun alike; {inputs} core inputs replayed); faults {faults:?}; outcomes {outcomes:?}",
            reports.len() - failed.len(),
            reports.len(),
            started.elapsed().as_secs_f64(),
            reports.len().min(3) - differ.len(),
        );
        if failed.is_empty() && differ.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) }
    }

    /// `members-mutants`: each several-hosts mutant must fail a seed.
    pub fn members_mutants(seeds: u64) -> ExitCode {
        #[cfg(feature = "mutants")]
        let names: Vec<&str> =
            turnstile_host::HostMutant::MEMBERS.iter().map(|m| m.name()).collect();
        #[cfg(not(feature = "mutants"))]
        let names: Vec<&str> = Vec::new();
        if names.is_empty() {
            eprintln!("error: this build has no mutants; build with --features mutants");
            return ExitCode::from(2);
        }
        println!("| mutant | found | seeds to find | seconds | first violation |");
        println!("|---|---|---|---|---|");
        let mut missed = 0;
        for name in names {
            let started = Instant::now();
            let reports = turnstile_sim::members::sweep(1, seeds, 2, Some(name), true);
            let found = reports.iter().find(|r| !r.violations.is_empty());
            match found {
                Some(r) => println!(
                    "| `{name}` | yes | {} | {:.1} | {} |",
                    r.seed,
                    started.elapsed().as_secs_f64(),
                    r.violations[0].replace('|', "/")
                ),
                None => {
                    missed += 1;
                    println!(
                        "| `{name}` | **no** | {seeds}+ | {:.1} | |",
                        started.elapsed().as_secs_f64()
                    );
                }
            }
        }
        if missed == 0 { ExitCode::SUCCESS } else { ExitCode::from(1) }
    }

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
            let sweep = match knobs(faults, Some(name.to_owned())) {
                Ok(k) => k,
                Err(code) => return code,
            };
            let started = Instant::now();
            let found = (1..=seeds).find_map(|seed| {
                let r = sweep.run_seed(seed, false);
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
