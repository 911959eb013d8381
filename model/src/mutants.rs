//! Runs the checker against each of the core's test-only mutants (SPEC section 10
//! "Mutants"): every mutant must be found. Only with the `mutants` feature.

use std::time::Instant;

use turnstile_core::Mutant;

use crate::checker::describe;
use crate::{Bounds, Options, check, configs};

/// The configurations tried, in order, until one finds the mutant: the cheapest first. The
/// step limit's, the titles', the several calls', the sub-agents' and the asking tool's come
/// after the five that find the older mutants; the external acceptor's after the
/// core-acceptor ones that find every other mutant, but before `default`, the slowest (a
/// mutant that needs an external acceptor exhausts every configuration before its own).
pub const HUNT: [&str; 16] = [
    "small",
    "faults",
    "retries",
    "guard",
    "watchdog",
    "limits",
    "titles",
    "calls",
    "calls-two",
    "agents",
    "asks",
    "acceptor",
    "acceptor-lookup",
    "acceptor-turn",
    "acceptor-flight",
    "default",
];

/// What hunting one mutant found.
#[derive(Clone, Debug)]
pub struct Hunt {
    /// The mutant.
    pub mutant: Mutant,
    /// The configuration that found it, if any did.
    pub found_by: Option<&'static str>,
    /// The shortest counterexample's length (inputs).
    pub length: usize,
    /// What the checker reported.
    pub problem: String,
    /// Time to find it (or to exhaust every configuration), in seconds.
    pub seconds: f64,
    /// Distinct states explored, over all configurations tried.
    pub states: u64,
    /// Whether a check of the hunt started again without subsumption (a transition that only
    /// spends changed the mutant's state: [`crate::Report::subsumption_dropped`]).
    pub subsumption_dropped: bool,
}

/// Whether `mutant` can make any difference in a configuration: the external acceptor's bugs
/// live in code that only an external acceptor reaches (watermarks ahead of the core), the
/// titles' only where a session has no title, the step limit's only under a limit, those of
/// several calls per step only where a step can call two tools, the sub-agents' only where a
/// step can call the `agent` tool, the asking tool's only where a step can call it. Elsewhere
/// the mutated core is the correct one, so exploring it again would only cost time.
#[must_use]
pub fn can_show(mutant: Mutant, bounds: &Bounds) -> bool {
    let b = &bounds.budget;
    match mutant {
        Mutant::WatermarkDroppedEarly
        | Mutant::CoveredLateSubmissionRuns
        | Mutant::WatermarkOffByOne
        | Mutant::WatermarkIgnoresSequence => b.external,
        Mutant::TitleCancelledWithTurn | Mutant::TitleRequestedAgain => b.untitled > 0,
        Mutant::StepLimitPerTurn | Mutant::StepLimitAfterEnd => b.step_limit > 0,
        Mutant::SyntheticFirstOnly
        | Mutant::StepEndsAtFirstResult
        | Mutant::AbortStopsAtFinishingCall
        | Mutant::FirstCallAbortPolicy => b.second_calls > 0,
        Mutant::ChildCostTwice
        | Mutant::CascadeMissesChild
        | Mutant::ChildCancelCancelsParent
        | Mutant::ChildResultLostWhileAborting => b.agents > 0,
        Mutant::StartedIgnored => b.asking > 0,
        _ => true,
    }
}

/// Hunts one mutant through [`HUNT`] with `options`, skipping the configurations it cannot
/// show in ([`can_show`]).
#[must_use]
pub fn hunt(mutant: Mutant, options: &Options) -> Hunt {
    let started = Instant::now();
    let (mut states, mut dropped) = (0, false);
    for name in HUNT {
        let Some(mut bounds) = configs::named(name) else { continue };
        if !can_show(mutant, &bounds) {
            continue;
        }
        bounds.config.mutant = Some(mutant);
        let report = check(&bounds, options, &mut |_| {});
        states += report.states;
        dropped |= report.subsumption_dropped.is_some();
        if let Some(c) = report.counterexample {
            return Hunt {
                mutant,
                found_by: Some(name),
                length: c.path.len(),
                problem: describe(&c.problem),
                seconds: started.elapsed().as_secs_f64(),
                states,
                subsumption_dropped: dropped,
            };
        }
    }
    Hunt {
        mutant,
        found_by: None,
        length: 0,
        problem: String::new(),
        seconds: started.elapsed().as_secs_f64(),
        states,
        subsumption_dropped: dropped,
    }
}
