//! Running a sweep under madsim: one deterministic runtime per seed, in parallel jobs, then
//! the reruns that check determinism, then the failing seeds' traces written and shrunk.

use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use turnstile_host::store::MemoryDisk;

use super::{Failure, Plan, Sweep, SweepReport, TIME_LIMIT, first_difference};
use crate::world::{Flights, SeedReport, World, last_flight, world};

/// Failing seeds whose traces are written, shrunk and rerun (the rest are only listed).
const DETAILED: usize = 20;

impl Sweep {
    /// Runs one seed in its own simulated runtime and checks it; the flight trace is kept in
    /// the report when the seed failed, or always with `keep_trace`.
    #[must_use]
    pub fn run_seed(&self, seed: u64, keep_trace: bool) -> SeedReport {
        run_world(seed, &self.world, keep_trace)
    }

    /// Runs the sweep: every seed in parallel jobs (a progress bar on a terminal), then the
    /// first seeds again and every failing one, in this process, which must give the same
    /// traces; then writes each failing seed's core trace and its shrunk form. Prints the
    /// one-line summary on stderr.
    ///
    /// # Panics
    /// When a `TURNSTILE_SIM_*` number does not parse.
    #[must_use]
    pub fn run(&self) -> SweepReport {
        let plan = self.plan(|name| std::env::var(name).ok()).unwrap_or_else(|e| panic!("{e}"));
        let started = Instant::now();
        let reports = self.run_all(&plan);
        let mut report = SweepReport {
            name: self.name.clone(),
            first: plan.first,
            seeds: plan.seeds,
            jobs: plan.jobs,
            reports,
            failures: Vec::new(),
            nondeterministic: Vec::new(),
            rerun: 0,
            wall: std::time::Duration::ZERO,
        };
        self.rerun(&mut report);
        let rerun = self.rerun_template();
        for r in report.reports.iter().filter(|r| !r.violations.is_empty()) {
            let detailed = report.failures.len() < DETAILED;
            report.failures.push(failure(r, &rerun, detailed.then_some(plan.out.as_path())));
        }
        report.wall = started.elapsed();
        eprintln!("{}", report.line());
        report
    }

    /// Every seed of the plan, in parallel jobs, sorted by seed.
    fn run_all(&self, plan: &Plan) -> Vec<SeedReport> {
        let bar = ProgressBar::with_draw_target(Some(plan.seeds), ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template(
                "{elapsed_precise} [{bar:40}] {pos}/{len} seeds, {per_sec}, {msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
        bar.set_message(self.name.clone());
        let next = AtomicU64::new(plan.first);
        let failed = AtomicU64::new(0);
        let reports = Mutex::new(Vec::new());
        std::thread::scope(|scope| {
            for _ in 0..plan.jobs {
                scope.spawn(|| {
                    loop {
                        let seed = next.fetch_add(1, Ordering::Relaxed);
                        if seed >= plan.first + plan.seeds {
                            return;
                        }
                        // The first seeds keep their traces: the reruns compare with them.
                        let keep = plan.seeds == 1 || seed - plan.first < self.determinism;
                        let report = run_world(seed, &self.world, keep);
                        if !report.violations.is_empty() {
                            let n = failed.fetch_add(1, Ordering::Relaxed) + 1;
                            bar.set_message(format!("{}, {n} failed", self.name));
                        }
                        bar.inc(1);
                        let mut all =
                            reports.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                        all.push(report);
                    }
                });
            }
        });
        bar.finish_and_clear();
        let mut reports = reports.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
        reports.sort_by_key(|r| r.seed);
        reports
    }

    /// Reruns the first seeds (up to twice) and the first failing ones (once), here, one
    /// after another: a seed whose rerun's trace differs from its run in the sweep is not
    /// deterministic, and the report says where the two first differ.
    fn rerun(&self, report: &mut SweepReport) {
        let firsts = report.reports.iter().take(usize::try_from(self.determinism).unwrap_or(0));
        let firsts = firsts.map(|r| (r, 2));
        let failing = report.reports.iter().filter(|r| !r.violations.is_empty()).take(3);
        let mut checks: Vec<(&SeedReport, u32)> = firsts.chain(failing.map(|r| (r, 1))).collect();
        checks.sort_by_key(|(r, _)| r.seed);
        checks.dedup_by_key(|(r, _)| r.seed);
        let mut found = Vec::new();
        for (swept, times) in checks {
            for _ in 0..times {
                let again = run_world(swept.seed, &self.world, true);
                report.rerun += 1;
                if again.trace_hash == swept.trace_hash {
                    continue;
                }
                let place = match (swept.trace.as_deref(), again.trace.as_deref()) {
                    (Some(a), Some(b)) => first_difference(a, b),
                    _ => "(no trace kept)".to_owned(),
                };
                found.push(format!(
                    "seed {}: its run in the sweep and its rerun gave different traces ({} and \
                     {}), {place}",
                    swept.seed,
                    short(&swept.trace_hash),
                    short(&again.trace_hash)
                ));
                break;
            }
        }
        report.nondeterministic = found;
    }

    /// The rerun command, `{seed}` standing for the seed.
    fn rerun_template(&self) -> String {
        self.rerun.clone().unwrap_or_else(default_rerun)
    }
}

fn short(hash: &str) -> &str {
    &hash[..hash.len().min(12)]
}

/// `cargo test` of the test that called: its package, its test target and its name (libtest
/// names a test's thread after it), with the seed in `TURNSTILE_SIM_SEED`.
fn default_rerun() -> String {
    let package = std::env::var("CARGO_PKG_NAME").unwrap_or_else(|_| "<package>".to_owned());
    let exe = std::env::current_exe().ok();
    let stem = exe.as_deref().and_then(Path::file_stem).and_then(|s| s.to_str()).unwrap_or("");
    let target = stem.rsplit_once('-').map_or(stem, |(t, _)| t);
    let kind = if target == package.replace('-', "_") {
        "--lib".to_owned()
    } else {
        format!("--test {target}")
    };
    let test = std::thread::current().name().filter(|n| *n != "main").map(str::to_owned);
    let filter = test.map_or(String::new(), |t| format!(" -- {t} --exact"));
    format!(
        "TURNSTILE_SIM_SEED={{seed}} RUSTFLAGS=\"--cfg madsim\" CARGO_TARGET_DIR=target/madsim \
         cargo test --release -p {package} {kind}{filter}"
    )
}

/// A failing seed's entry; with `out`, its trace written there and shrunk.
pub(crate) fn failure(r: &SeedReport, rerun: &str, out: Option<&Path>) -> Failure {
    let mut f = Failure {
        seed: r.seed,
        violations: r.violations.clone(),
        rerun: rerun.replace("{seed}", &r.seed.to_string()),
        trace: None,
        shrunk: "(not written: only the first 20 failing seeds are)".to_owned(),
    };
    let (Some(out), Some(text)) = (out, &r.trace) else {
        if out.is_some() {
            f.shrunk = "(no core trace was kept)".to_owned();
        }
        return f;
    };
    if let Err(e) = std::fs::create_dir_all(out) {
        f.shrunk = format!("(cannot create {}: {e})", out.display());
        return f;
    }
    let path = out.join(format!("seed-{}.jsonl", r.seed));
    match std::fs::write(&path, text) {
        Ok(()) => f.trace = Some(path),
        Err(e) => f.shrunk = format!("(cannot write {}: {e})", path.display()),
    }
    if f.trace.is_some() {
        f.shrunk = shrink_saved(text, &out.join(format!("seed-{}.min.jsonl", r.seed)));
    }
    f
}

/// Shrinks a failing seed's core trace when the core itself breaks an invariant on it.
fn shrink_saved(text: &str, path: &Path) -> String {
    let trace = match turnstile_core::Trace::parse(text) {
        Ok(t) => t,
        Err(e) => return format!("(the core trace does not parse: {e})"),
    };
    match crate::shrink::shrink(&trace) {
        None => "(the core's trace replays cleanly: the failure is the host's, a client's or a \
                 check's; rerun the seed)"
            .to_owned(),
        Some(s) => match std::fs::write(path, s.trace.to_jsonl()) {
            Ok(()) => format!(
                "shrunk to {} of {} inputs: {} ({})",
                s.after,
                s.before,
                path.display(),
                s.failure
            ),
            Err(e) => format!("(cannot write {}: {e})", path.display()),
        },
    }
}

/// Runs one seed to its end in its own simulated runtime and checks it. A panic (a hang hits
/// the time limit, or a bug panics) becomes a violation.
fn run_world(seed: u64, knobs: &World, keep_trace: bool) -> SeedReport {
    // A seed that panicked may leave its runtime's tasks, and so its disk, behind: a rerun of
    // the same seed in this process (shrinking, a mutant hunt) takes the next free name.
    let pid = std::process::id();
    let mut disk = MemoryDisk::new(&format!("turnstile-sim-{pid}-{seed}"));
    for again in 1..64 {
        if disk.is_ok() {
            break;
        }
        disk = MemoryDisk::new(&format!("turnstile-sim-{pid}-{seed}-{again}"));
    }
    let disk = match disk {
        Ok(d) => d,
        Err(e) => return failed(seed, format!("cannot create the memory disk: {e}")),
    };
    let mut rt = madsim::runtime::Runtime::with_seed_and_config(seed, madsim::Config::default());
    rt.set_time_limit(TIME_LIMIT);
    let flights = Flights::default();
    let result = std::panic::catch_unwind(AssertUnwindSafe(|| {
        rt.block_on(world(seed, knobs, &disk, &flights, keep_trace))
    }));
    match result {
        Ok(report) => report,
        Err(payload) => {
            let why = crate::panic_message(payload.as_ref());
            let mut report =
                failed(seed, format!("panicked (a hang ends at the time limit): {why}"));
            // What the host did until then: the trace of the incarnation that hung.
            report.trace = last_flight(&flights);
            report
        }
    }
}

fn failed(seed: u64, why: String) -> SeedReport {
    SeedReport { seed, violations: vec![why], ..SeedReport::default() }
}
