//! How fast the checker explores, beside a baseline measured in the same run (the machine is
//! shared and noisy, so only the ratio is comparable between runs).
//!
//! - **explorer**: the `default` configuration, specification only (no lockstep): distinct
//!   states per second of the breadth-first search with its exact deduplication.
//! - **lockstep**: `default` again with the core driven on every transition, the core's
//!   invariant checkers and the projection comparison, with one worker and with two (the same
//!   report; only the seconds differ), by the tree walk (the default strategy), and with two
//!   workers by the frontier search it replaced.
//! - **the full space**: the states `default` has without any reduction (finished submissions
//!   keep everything, transitions that only spend lead to states of their own, no symmetry),
//!   counted by the explorer alone. "Full space per second" divides them by the seconds of
//!   the lockstep check on two workers: how fast the default check, with its sound reductions
//!   (`docs/verification.md`), checks every state of that space with the core in lockstep.
//! - **`small` without reductions**: the lockstep check on two workers of `small` with neither
//!   reduction, every state of its space explored and checked with the core: the
//!   configuration and the kind of state the model's first throughput figures (and the target
//!   of 250,000 states per second on two cores) were measured on.
//! - **baseline**: the irreducible work of any explicit-state checker of the same size: a
//!   breadth-first search over 16^5 = 1,048,576 synthetic states with 5 successors each, keyed
//!   by the same 32-byte keys in the same visited map.
//!
//! Run: `cargo bench -p turnstile-model --bench explore` (env `TURNSTILE_BENCH_REPS`, default 3).

use std::collections::HashMap;
use std::time::Instant;

// As in the `turnstile-model` binary (see model/Cargo.toml).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use turnstile_model::encode::BuildKeyHasher;
use turnstile_model::{Options, Strategy, check, configs};

fn baseline() -> (u64, f64) {
    let started = Instant::now();
    let mut visited: HashMap<[u8; 32], u32, BuildKeyHasher> = HashMap::default();
    let root = [0u8; 5];
    let key = |s: &[u8; 5]| {
        let mut k = [0u8; 32];
        k[..5].copy_from_slice(s);
        k
    };
    visited.insert(key(&root), 0);
    let mut frontier = vec![root];
    while !frontier.is_empty() {
        let mut next = Vec::new();
        for s in frontier.drain(..) {
            for i in 0..5 {
                if s[i] < 15 {
                    let mut t = s;
                    t[i] += 1;
                    let len = visited.len() as u32;
                    if *visited.entry(key(&t)).or_insert(len) == len {
                        next.push(t);
                    }
                }
            }
        }
        frontier = next;
    }
    (visited.len() as u64, started.elapsed().as_secs_f64())
}

fn main() {
    let reps: usize =
        std::env::var("TURNSTILE_BENCH_REPS").ok().and_then(|v| v.parse().ok()).unwrap_or(3);
    let default = configs::named("default").expect("default");
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let small = configs::named("small").expect("small");
    println!("{cores} cores available; every column but the one named `small` checks `default`");
    println!(
        "| rep | explorer, 1 worker | lockstep, 1 worker | lockstep, 2 workers | 2 workers / 1 | transitions per second, 2 workers | frontier, 2 workers | full space | full space per second, 2 workers | `small` without reductions, 2 workers | baseline | explorer / baseline | lockstep 2 workers / baseline |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    let run = |options: Options| check(&default, &options, &mut |_| {});
    for rep in 1..=reps {
        let e = run(Options { conformance: false, jobs: 1, ..Options::default() });
        let one = run(Options { jobs: 1, ..Options::default() });
        let two = run(Options { jobs: 2, ..Options::default() });
        let old = run(Options { jobs: 2, strategy: Strategy::Frontier, ..Options::default() });
        let full = run(Options {
            conformance: false,
            subsumption: false,
            forgetting: false,
            jobs: 1,
            ..Options::default()
        });
        let plain =
            Options { subsumption: false, forgetting: false, jobs: 2, ..Options::default() };
        let plain = check(&small, &plain, &mut |_| {});
        let (b_states, b_secs) = baseline();
        for r in [&e, &one, &two, &old, &full, &plain] {
            let clean = r.counterexample.is_none() && r.subsumption_dropped.is_none();
            assert!(clean, "{} passes", r.config);
        }
        assert_eq!((one.states, one.transitions), (two.states, two.transitions));
        assert_eq!((old.states, old.transitions), (two.states, two.transitions));
        assert!(full.states > two.states);
        let b = b_states as f64 / b_secs;
        let covered = full.states as f64 / two.seconds.max(1e-9);
        let transitions = two.transitions as f64 / two.seconds.max(1e-9);
        println!(
            "| {rep} | {:.0} ({} states, {:.2} s) | {:.0} ({} states, {:.2} s) | {:.0} ({:.2} s) | {:.2} | {transitions:.0} ({} transitions) | {:.0} ({:.2} s) | {} states | {covered:.0} | {:.0} ({} states, {:.2} s) | {:.0} | {:.2} | {:.3} |",
            e.states_per_second(),
            e.states,
            e.seconds,
            one.states_per_second(),
            one.states,
            one.seconds,
            two.states_per_second(),
            two.seconds,
            two.states_per_second() / one.states_per_second(),
            two.transitions,
            old.states_per_second(),
            old.seconds,
            full.states,
            plain.states_per_second(),
            plain.states,
            plain.seconds,
            b,
            e.states_per_second() / b,
            two.states_per_second() / b
        );
    }
}
