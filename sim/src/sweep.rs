//! Sweeps: a world and the seeds to run it over, from a test of the user's or from the
//! command line (SPEC 10 "Sim").
//!
//! [`Sweep`] is a small builder. Its defaults are the built-in world (the seeded provider,
//! the built-in tools, three clients, every fault) over 100 seeds on every core; a user adds
//! tools and checks per seed ([`Sweep::setup`]), a provider behaviour, a client mix and
//! faults. `Sweep::run` (under `--cfg madsim` only) runs the seeds in parallel, each in its
//! own deterministic runtime, then runs a few seeds again in the same process to check that
//! they give the same trace, and reports: for each failing seed its violations, the command
//! that reruns it, the core's trace and its shrunk form.
//!
//! ```no_run
//! use turnstile_sim::sweep::Sweep;
//! use turnstile_sim::world::Faults;
//! # use turnstile_core::{ToolOutput, ToolSpec};
//! # use turnstile_host::{BoxFuture, Tool, ToolCall};
//! # struct MyTool;
//! # impl Tool for MyTool {
//! #     fn spec(&self) -> ToolSpec { ToolSpec::new("my_tool") }
//! #     fn run(&self, call: ToolCall) -> BoxFuture<ToolOutput> {
//! #         Box::pin(async move { ToolOutput::ok(call.input) })
//! #     }
//! # }
//!
//! // In `#[test] fn my_tool_survives_cancels()` of a file that starts `#![cfg(madsim)]`.
//! let sweep = Sweep::new("my tool")
//!     .setup(|world| {
//!         // Once per seed: fresh state for the tool and the check that reads it.
//!         world.tool(MyTool, |rng| format!("{{\"n\":{}}}", rng.below(10)));
//!         world.check("nothing leaked", |run| {
//!             if run.ledger.is_empty() { Err("no submission".into()) } else { Ok(()) }
//!         });
//!     })
//!     .faults(Faults { crash: 0, ..Faults::ALL })
//!     .seeds(300);
//! #[cfg(madsim)]
//! sweep.run().assert_passed();
//! ```
//!
//! The environment overrides the code, so CI and a nightly hunt run the same test:
//! `TURNSTILE_SIM_SEEDS` (how many), `TURNSTILE_SIM_FIRST` (the first seed),
//! `TURNSTILE_SIM_JOBS` (parallel runtimes), `TURNSTILE_SIM_SEED` (this one seed only, to rerun
//! a failure) and `TURNSTILE_SIM_OUT` (where failing traces go).

use std::path::PathBuf;
use std::time::Duration;

use crate::world::{Behaviour, Clients, Faults, SeedReport, Setup, World};

/// Simulated time after which a seed counts as hung.
pub const TIME_LIMIT: Duration = Duration::from_secs(3_600);

/// A world and the seeds to sweep it over. See the module's documentation.
#[derive(Clone)]
pub struct Sweep {
    name: String,
    world: World,
    first: u64,
    seeds: u64,
    jobs: usize,
    out: Option<PathBuf>,
    determinism: u64,
    environment: bool,
    rerun: Option<String>,
}

impl Sweep {
    /// A sweep of the built-in world over seeds 1 to 100, on every core. `name` heads its
    /// report and names the directory of its failing traces.
    #[must_use]
    pub fn new(name: impl Into<String>) -> Sweep {
        let jobs = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
        Sweep {
            name: name.into(),
            world: World::default(),
            first: 1,
            seeds: 100,
            jobs,
            out: None,
            determinism: 2,
            environment: true,
            rerun: None,
        }
    }

    /// Adds to every seed's world (tools, checks): `setup` runs once per seed, inside the
    /// simulation, before the host opens. Several setups run in the order given.
    #[must_use]
    pub fn setup(mut self, setup: impl Fn(&mut Setup) + Send + Sync + 'static) -> Sweep {
        self.world.setups.push(std::sync::Arc::new(setup));
        self
    }

    /// Leaves out the built-in tools (`view`, `slow`, `fail`, `deny`, `halt`): the model then
    /// calls only the user's tools, sub-agents and an unknown tool.
    #[must_use]
    pub fn without_built_in_tools(mut self) -> Sweep {
        self.world.no_built_in_tools = true;
        self
    }

    /// How the provider answers (default: [`Behaviour::Seeded`]).
    #[must_use]
    pub fn provider(mut self, behaviour: Behaviour) -> Sweep {
        self.world.behaviour = behaviour;
        self
    }

    /// The clients and their mix of commands (default: [`Clients::default`]).
    #[must_use]
    pub fn clients(mut self, clients: Clients) -> Sweep {
        self.world.clients = clients;
        self
    }

    /// The faults (default: [`Faults::ALL`]).
    #[must_use]
    pub fn faults(mut self, faults: Faults) -> Sweep {
        self.world.faults = faults;
        self
    }

    /// Switches on a mutant of the core's or the host's catalogue, by name (a build with the
    /// `mutants` feature; otherwise every seed fails saying so).
    #[must_use]
    pub fn mutant(mut self, name: impl Into<String>) -> Sweep {
        self.world.mutant = Some(name.into());
        self
    }

    /// How many seeds (default 100).
    #[must_use]
    pub fn seeds(mut self, seeds: u64) -> Sweep {
        self.seeds = seeds;
        self
    }

    /// The first seed (default 1).
    #[must_use]
    pub fn first(mut self, first: u64) -> Sweep {
        self.first = first;
        self
    }

    /// Seeds run in parallel, one thread and one simulated runtime each (default: the cores).
    #[must_use]
    pub fn jobs(mut self, jobs: usize) -> Sweep {
        self.jobs = jobs.max(1);
        self
    }

    /// Where failing seeds' core traces are written (default: `turnstile-sim/<name>` in the
    /// system's temporary directory).
    #[must_use]
    pub fn out(mut self, dir: impl Into<PathBuf>) -> Sweep {
        self.out = Some(dir.into());
        self
    }

    /// How many of the first seeds run a second and a third time, in this process, to check
    /// that they give the same trace (default 2; failing seeds always rerun once).
    #[must_use]
    pub fn determinism(mut self, seeds: u64) -> Sweep {
        self.determinism = seeds;
        self
    }

    /// Ignores the `TURNSTILE_SIM_*` variables (the command line has its own flags).
    #[must_use]
    pub fn ignore_environment(mut self) -> Sweep {
        self.environment = false;
        self
    }

    /// The command printed to rerun a failing seed, `{seed}` standing for it (default: the
    /// `cargo test` of the calling test with `TURNSTILE_SIM_SEED`).
    #[must_use]
    pub fn rerun_command(mut self, template: impl Into<String>) -> Sweep {
        self.rerun = Some(template.into());
        self
    }

    /// The sweep's name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// What a sweep runs after the environment had its say.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Plan {
    first: u64,
    seeds: u64,
    jobs: usize,
    out: PathBuf,
}

impl Sweep {
    /// The seeds, jobs and output directory, the `TURNSTILE_SIM_*` variables (read with
    /// `var`) winning unless the sweep ignores them.
    ///
    /// # Errors
    /// A variable that is set but not a whole number (named with its value).
    #[cfg_attr(not(madsim), allow(dead_code))]
    fn plan(&self, var: impl Fn(&str) -> Option<String>) -> Result<Plan, String> {
        let number = |name: &str| -> Result<Option<u64>, String> {
            let Some(value) = var(name).filter(|_| self.environment) else { return Ok(None) };
            let n = value
                .trim()
                .parse()
                .map_err(|_| format!("{name}={value:?}: not a whole number"))?;
            Ok(Some(n))
        };
        let default_out = || std::env::temp_dir().join("turnstile-sim").join(dir_name(&self.name));
        let mut plan = Plan {
            first: number("TURNSTILE_SIM_FIRST")?.unwrap_or(self.first),
            seeds: number("TURNSTILE_SIM_SEEDS")?.unwrap_or(self.seeds),
            jobs: number("TURNSTILE_SIM_JOBS")?
                .map_or(self.jobs, |j| usize::try_from(j).unwrap_or(1))
                .max(1),
            out: self.out.clone().unwrap_or_else(default_out),
        };
        if let Some(seed) = number("TURNSTILE_SIM_SEED")? {
            (plan.first, plan.seeds) = (seed, 1);
        }
        if let Some(out) = var("TURNSTILE_SIM_OUT").filter(|_| self.environment) {
            plan.out = PathBuf::from(out);
        }
        Ok(plan)
    }
}

/// A name fit for a directory: letters, digits, `-` and `_`; the rest become `-`.
fn dir_name(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '-' }).collect()
}

/// A seed that failed: what broke, how to rerun it, and its core trace.
#[derive(Clone, Debug)]
pub struct Failure {
    /// The seed.
    pub seed: u64,
    /// Everything its checks found, first the first.
    pub violations: Vec<String>,
    /// The command that reruns it alone.
    pub rerun: String,
    /// Its core trace (the flight trace of the host incarnation that failed), when written.
    pub trace: Option<PathBuf>,
    /// What shrinking said: the shrunk trace's file and size, or why there is none.
    pub shrunk: String,
}

/// What a sweep found.
#[derive(Clone, Debug)]
pub struct SweepReport {
    /// The sweep's name.
    pub name: String,
    /// The first seed.
    pub first: u64,
    /// Seeds run.
    pub seeds: u64,
    /// Parallel jobs.
    pub jobs: usize,
    /// Every seed's report, by seed.
    pub reports: Vec<SeedReport>,
    /// The failing seeds (at most the first 20 are written and shrunk).
    pub failures: Vec<Failure>,
    /// Seeds whose rerun gave another trace, each with where the two runs first differ.
    pub nondeterministic: Vec<String>,
    /// Runs done again to check determinism (the first seeds up to twice, the first failing
    /// seeds once; a seed stops at its first rerun that differs).
    pub rerun: u64,
    /// Wall-clock time of the sweep.
    pub wall: Duration,
}

impl SweepReport {
    /// True when every seed passed and every rerun gave the same trace.
    #[must_use]
    pub fn passed(&self) -> bool {
        self.failures.is_empty() && self.nondeterministic.is_empty()
    }

    /// One line: the sweep, its seeds, what passed, and the time.
    #[must_use]
    pub fn line(&self) -> String {
        let last = (self.first + self.seeds).saturating_sub(1);
        let determinism = if self.nondeterministic.is_empty() {
            format!("{} reruns gave the same traces", self.rerun)
        } else {
            format!("{} seeds NOT deterministic", self.nondeterministic.len())
        };
        format!(
            "sweep `{}`: {} seeds ({}..={last}), {} jobs: {} passed, {} failed, {determinism}, {:.1} s",
            self.name,
            self.seeds,
            self.first,
            self.jobs,
            self.reports.len() - self.failures.len(),
            self.failures.len(),
            self.wall.as_secs_f64()
        )
    }

    /// The figures: seeds, simulated time, engine inputs, outcomes and faults by kind.
    #[must_use]
    pub fn summary(&self) -> String {
        let mut outcomes = std::collections::BTreeMap::<&str, u64>::new();
        let mut injected = std::collections::BTreeMap::<&str, u64>::new();
        for r in &self.reports {
            for (k, n) in &r.outcomes {
                *outcomes.entry(k).or_default() += n;
            }
            for (k, n) in &r.faults {
                *injected.entry(k).or_default() += n;
            }
        }
        let list = |m: &std::collections::BTreeMap<&str, u64>| {
            if m.is_empty() {
                "none".to_owned()
            } else {
                m.iter().map(|(k, n)| format!("{k} {n}")).collect::<Vec<_>>().join(", ")
            }
        };
        let sim_s: f64 = self.reports.iter().map(|r| r.sim_ms as f64 / 1e3).sum();
        let events: u64 = self.reports.iter().map(|r| r.events).sum();
        let per_seed = sim_s / self.reports.len().max(1) as f64;
        let secs = self.wall.as_secs_f64();
        let rate = self.reports.len() as f64 / secs.max(1e-9);
        [
            format!(
                "seeds       {} ({}..={}), {} jobs",
                self.seeds,
                self.first,
                (self.first + self.seeds).saturating_sub(1),
                self.jobs
            ),
            format!("passed      {}", self.reports.len() - self.failures.len()),
            format!("failed      {}", self.failures.len()),
            format!("simulated   {sim_s:.1} s in all ({per_seed:.1} s per seed)"),
            format!("events      {events} engine inputs"),
            format!("outcomes    {}", list(&outcomes)),
            format!("faults      {}", list(&injected)),
            format!(
                "reruns      {} runs, {} seeds not deterministic",
                self.rerun,
                self.nondeterministic.len()
            ),
            format!("wall        {secs:.1} s = {rate:.0} seeds/s"),
        ]
        .join("\n")
    }

    /// Each failing seed (its first five violations, the rerun command, its trace and the
    /// shrunk trace) and each seed that was not deterministic; empty when all passed.
    #[must_use]
    pub fn failures(&self) -> String {
        let mut out = String::new();
        for f in &self.failures {
            out.push_str(&format!("\nFAIL seed {}: {}\n", f.seed, f.violations[0]));
            for v in f.violations.iter().skip(1).take(4) {
                out.push_str(&format!("     also: {v}\n"));
            }
            if f.violations.len() > 5 {
                out.push_str(&format!("     ({} more)\n", f.violations.len() - 5));
            }
            out.push_str(&format!("     rerun: {}\n", f.rerun));
            if let Some(path) = &f.trace {
                out.push_str(&format!("     core trace: {}\n", path.display()));
            }
            out.push_str(&format!("     {}\n", f.shrunk));
        }
        for n in &self.nondeterministic {
            out.push_str(&format!("\nNOT DETERMINISTIC {n}\n"));
        }
        out
    }

    /// Panics with the one-line summary and every failure unless the sweep passed: the way a
    /// test ends.
    ///
    /// # Panics
    /// When a seed failed or a rerun gave another trace.
    #[track_caller]
    pub fn assert_passed(&self) {
        assert!(self.passed(), "{}\n{}", self.line(), self.failures());
    }
}

impl std::fmt::Display for SweepReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}\n{}", self.summary(), self.failures())
    }
}

/// Where two runs of a seed first differ, line by line, naming the tool of the call the line
/// is about when the trace says (its `run_tool` output).
#[must_use]
pub fn first_difference(a: &str, b: &str) -> String {
    let (la, lb): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
    let Some(i) = (0..la.len().max(lb.len())).find(|&i| la.get(i) != lb.get(i)) else {
        return "the kept traces are equal: an earlier host incarnation differs".to_owned();
    };
    let mut tools = std::collections::BTreeMap::new();
    for line in la.iter().take(i + 1).chain(lb.iter().take(i + 1)) {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else { continue };
        for o in v["expect"].as_array().into_iter().flatten() {
            let k = &o["kind"];
            if k["type"] == "run_tool"
                && let (Some(call), Some(name)) = (k["call"]["call"].as_str(), k["name"].as_str())
            {
                tools.insert(call.to_owned(), name.to_owned());
            }
        }
    }
    let about = |line: Option<&&str>| -> (String, Option<String>) {
        let Some(line) = line else { return ("nothing (the trace ended)".to_owned(), None) };
        let v: serde_json::Value = serde_json::from_str(line).unwrap_or_default();
        let input = &v["input"];
        let call = input["call"]["call"].as_str().map(str::to_owned);
        let tool = call.as_ref().and_then(|c| tools.get(c)).cloned();
        let what = format!("`{}` at {} ms", input["type"].as_str().unwrap_or("?"), v["at"]);
        let what = match (&call, &tool) {
            (Some(c), Some(t)) => format!("{what}, about call {c} of tool `{t}`"),
            (Some(c), None) => format!("{what}, about call {c}"),
            _ => what,
        };
        (what, tool)
    };
    let ((wa, ta), (wb, tb)) = (about(la.get(i)), about(lb.get(i)));
    let blame = match ta.or(tb) {
        Some(t) => format!(
            " Tool `{t}` is the first to differ: does it keep state between runs (a static), \
             race in an unbiased `select!`, or read time or randomness outside the runtime?"
        ),
        None => String::new(),
    };
    let (a, b) = (la.get(i).copied().unwrap_or(""), lb.get(i).copied().unwrap_or(""));
    format!(
        "at trace line {}: one run has {wa} ({}), the other {wb} ({}).{blame}",
        i + 1,
        excerpt(a, b),
        excerpt(b, a)
    )
}

/// `line` around where it first differs from `other`: 40 bytes before, 80 after.
fn excerpt(line: &str, other: &str) -> String {
    let at = line.bytes().zip(other.bytes()).position(|(x, y)| x != y);
    let at = at.unwrap_or(line.len().min(other.len()));
    let start = line.floor_char_boundary(at.saturating_sub(40));
    let end = line.ceil_char_boundary((at + 80).min(line.len()));
    format!("…{}…", &line[start..end])
}

#[cfg(madsim)]
mod run;
#[cfg(madsim)]
pub(crate) use run::failure;

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::{Plan, Sweep, first_difference};

    #[test]
    fn the_environment_overrides_the_code_unless_ignored() {
        let sweep = Sweep::new("my tool: v2").seeds(300).first(5).jobs(3).out("here");
        let none = |_: &str| None;
        let plan = Plan { first: 5, seeds: 300, jobs: 3, out: PathBuf::from("here") };
        assert_eq!(sweep.plan(none), Ok(plan.clone()));
        let env = |name: &str| match name {
            "TURNSTILE_SIM_SEEDS" => Some("20000".to_owned()),
            "TURNSTILE_SIM_JOBS" => Some(" 2 ".to_owned()),
            "TURNSTILE_SIM_OUT" => Some("there".to_owned()),
            _ => None,
        };
        let nightly = Plan { seeds: 20_000, jobs: 2, out: PathBuf::from("there"), ..plan.clone() };
        assert_eq!(sweep.plan(env), Ok(nightly));
        // One seed, to rerun a failure: it replaces the range.
        let rerun = |name: &str| (name == "TURNSTILE_SIM_SEED").then(|| "4711".to_owned());
        let one = Plan { first: 4711, seeds: 1, ..plan.clone() };
        assert_eq!(sweep.plan(rerun), Ok(one));
        let bad = |name: &str| (name == "TURNSTILE_SIM_SEEDS").then(|| "lots".to_owned());
        assert_eq!(
            sweep.plan(bad),
            Err("TURNSTILE_SIM_SEEDS=\"lots\": not a whole number".to_owned())
        );
        assert_eq!(sweep.clone().ignore_environment().plan(env), Ok(plan));
        // Without a directory of its own, the failing traces go to a temporary one named after
        // the sweep.
        let out = Sweep::new("my tool: v2").plan(none).map(|p| p.out);
        assert_eq!(out, Ok(std::env::temp_dir().join("turnstile-sim").join("my-tool--v2")));
    }

    #[test]
    fn the_first_difference_names_the_tool_of_its_call() {
        let setup = r#"{"at":0,"input":{"type":"submit"},"expect":[{"kind":{"type":"run_tool","name":"bank","call":{"call":"c7","seq":1}}}]}"#;
        let a = format!(
            "{setup}\n{}",
            r#"{"at":40,"input":{"type":"tool_result","call":{"call":"c7"}}}"#
        );
        let b = format!(
            "{setup}\n{}",
            r#"{"at":90,"input":{"type":"tool_result","call":{"call":"c7"}}}"#
        );
        let text = first_difference(&a, &b);
        assert!(text.starts_with("at trace line 2: one run has `tool_result` at 40 ms"), "{text}");
        assert!(text.contains(r#"(…{"at":40,"input""#), "{text}");
        assert!(text.contains("about call c7 of tool `bank`"), "{text}");
        assert!(text.contains("Tool `bank` is the first to differ"), "{text}");
        assert_eq!(
            first_difference("x\ny", "x\ny"),
            "the kept traces are equal: an earlier host incarnation differs"
        );
        let shorter = first_difference("x", "x\n{\"at\":1,\"input\":{\"type\":\"cancel\"}}");
        assert!(shorter.contains("one run has nothing (the trace ended)"), "{shorter}");
        assert!(!shorter.contains("Tool"), "{shorter}");
    }
}
