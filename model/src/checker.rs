//! The exhaustive breadth-first checker (SPEC section 10 "Model").
//!
//! It explores every state of the specification reachable within a configuration's budgets,
//! each exactly once (deduplicated by its packed [`Key`](crate::encode::Key)), level by level, so the first problem
//! found has a shortest path; with [`Options::subsumption`], but for the states reached by a
//! transition that only spends, whose futures are their source's ([`Spec::subsumes`](crate::spec::Spec::subsumes)): such
//! a transition is checked, and its target is not explored. On every explored state and every
//! transition it checks:
//! - **conformance**: the core, driven in lockstep along the same path, produces the same
//!   projection (SPEC 7) as the specification on every explored transition;
//! - **the core's invariants** (SPEC 6): its public `check_invariants` and `Auditor` after every
//!   input;
//! - **I6 liveness**, as SPEC defines it: every state with an unfinished submission offers a
//!   host reply (a state not explored because its source subsumes it offers the host replies
//!   its source offers: no host reply is spent), and the graph of host replies has no cycle
//!   (a transition that only spends is no host reply), so answering the pending requests
//!   in any order without client input always reaches a state where every submission has an
//!   outcome (every maximal path is finite and ends where nothing is pending);
//! - the specification's own assertions (an outcome decided twice panics in [`Spec`](crate::spec::Spec)).
//!
//! The core checked at a state is the one driven along its shortest path ([`Lockstep::fork`](crate::driver::Lockstep::fork)
//! at every expanded state); a state reached again along another path is not explored again,
//! which is sound because conformance makes the core's observable behaviour a function of the
//! specification state (the checker compares the cores' digests to make sure). Where that core
//! is kept until its state is expanded is the [`Strategy`]: beside each frontier state here,
//! or rebuilt along the tree of shortest paths after a first pass without it
//! (`model/src/tree.rs`).

use std::time::Instant;

pub use crate::search::{Counterexample, Problem, Report, describe};
use crate::search::{changed_by_spending, explore};
use crate::{Bounds, Options, Progress, Strategy};

/// Explores `bounds` and reports.
///
/// With the core in lockstep, [`Options::strategy`] says how: [`Strategy::Tree`] explores the
/// specification first and then checks the core along the tree of shortest paths
/// (`model/src/tree.rs`); [`Strategy::Frontier`] keeps a copy of the core beside every frontier
/// state of one breadth-first search. Both give the same report.
///
/// The breadth-first search is level by level, a batch of chunks at a time: `options.jobs`
/// workers expand the chunks (the specification's successors, the core in lockstep,
/// conformance), the transitions' targets are resolved in the shards of the visited set
/// (`model/src/visited.rs`), and the calling thread numbers new states in frontier order. Any
/// number of workers gives the same report (states, transitions, depth, the same shortest
/// counterexample); only the seconds differ.
#[must_use]
pub fn check(bounds: &Bounds, options: &Options, progress: &mut dyn FnMut(Progress)) -> Report {
    let started = Instant::now();
    let remembering;
    let bounds = match options.forgetting {
        true => bounds,
        false => {
            let budget = crate::spec::Budget { forgets: false, ..bounds.budget };
            remembering = Bounds { budget, ..bounds.clone() };
            &remembering
        }
    };
    let report = check_once(bounds, options, started, progress);
    let changed = match report.counterexample {
        Some(c) if c.problem == changed_by_spending() => c.path,
        _ => return report,
    };
    // The core does not treat a transition that only spends as the specification does: only
    // the search that follows such transitions can say whether it ever shows. The seconds
    // are both searches'.
    let without = Options { subsumption: false, ..options.clone() };
    let mut report = check_once(bounds, &without, started, progress);
    report.subsumption_dropped = Some(changed);
    report
}

fn check_once(
    bounds: &Bounds,
    options: &Options,
    started: Instant,
    progress: &mut dyn FnMut(Progress),
) -> Report {
    if options.conformance && options.strategy == Strategy::Tree {
        return crate::tree::check(bounds, options, started, progress);
    }
    let (search, found, truncated) = explore(bounds, options, false, progress);
    let mut report = search.report(started, found);
    report.truncated = truncated;
    report
}
