//! Every test-only mutant of the core (SPEC 10 "Mutants") is found by the checker, and its
//! counterexample trace reproduces the bug in the core's replay.
#![cfg(feature = "mutants")]

use turnstile_core::{Mutant, replay};
use turnstile_model::checker::describe;
use turnstile_model::mutants::{Hunt, hunt};
use turnstile_model::spec::Action;
use turnstile_model::{Options, Strategy, check, configs};

/// Half of the catalogue per test, so the two halves run on two cores.
fn hunt_half(parity: usize) {
    assert!(Mutant::ALL.len() >= 12);
    for &m in Mutant::ALL.iter().skip(parity).step_by(2) {
        let h = hunt(m, &Options::default());
        let name = h.found_by.unwrap_or_else(|| panic!("{} missed", m.name()));
        assert!(h.length >= 1, "{}: an empty counterexample", m.name());
        assert!(m.scope().contains(&"model"), "{} is hunted by the model checker", m.name());
        let mut bounds = configs::named(name).expect("a named configuration");
        bounds.config.mutant = Some(m);
        let r = check(&bounds, &Options::default(), &mut |_| {});
        // The tree walk stops where the frontier search does, with the same counts.
        let frontier = Options { strategy: Strategy::Frontier, ..Options::default() };
        let f = check(&bounds, &frontier, &mut |_| {});
        assert_eq!(
            (r.states, r.transitions, r.depth),
            (f.states, f.transitions, f.depth),
            "{}: the strategies stop at different places",
            m.name()
        );
        let c = r.counterexample.expect("found");
        let fc = f.counterexample.expect("the frontier search finds it too");
        assert_eq!((&c.path, &c.problem), (&fc.path, &fc.problem), "{}", m.name());
        assert_eq!(c.trace.header.config.mutant, Some(m), "the trace names its mutant");
        // The mutated engine may also panic on its own debug assertions: that reproduces too.
        let replayed = std::panic::catch_unwind(|| replay(&c.trace));
        assert!(
            !matches!(replayed, Ok(Ok(_))),
            "{}: the counterexample replays cleanly ({} lines)",
            m.name(),
            c.trace.lines.len()
        );
        // Without the mutant, the same inputs meet every expectation of the specification.
        let mut fixed = c.trace.clone();
        fixed.header.config.mutant = None;
        if let Err(e) = replay(&fixed) {
            panic!("{}: the correct core fails the counterexample: {e}", m.name());
        }
    }
}

#[test]
fn every_even_mutant_is_found_and_its_counterexample_replays_as_a_failure() {
    hunt_half(0);
}

#[test]
fn every_odd_mutant_is_found_and_its_counterexample_replays_as_a_failure() {
    hunt_half(1);
}

/// The symmetry reduction (`Options::symmetry`) loses no counterexample of the catalogue: on
/// every two-session configuration in which a mutant can show, a counterexample the full search
/// finds within its first states is found with the sessions' mirror images merged too, with a
/// path as short (the reduction merges only states whose futures mirror each other, so
/// breadth-first levels keep their depth).
#[test]
fn merging_mirror_images_loses_no_counterexample() {
    use turnstile_model::mutants::can_show;
    const CAP: u64 = 20_000;
    let mut compared = 0;
    for name in ["titles", "calls-two", "acceptor", "default"] {
        let mut bounds = configs::named(name).expect("a named configuration");
        assert_eq!(bounds.budget.sessions, 2, "{name} has mirror images");
        for &m in Mutant::ALL {
            if !can_show(m, &bounds) {
                continue;
            }
            bounds.config.mutant = Some(m);
            let run = |symmetry| {
                let options = Options { symmetry, max_states: Some(CAP), ..Options::default() };
                check(&bounds, &options, &mut |_| {})
            };
            let full = run(false);
            let Some(c) = full.counterexample else { continue };
            let reduced = run(true);
            let r = reduced.counterexample.unwrap_or_else(|| {
                panic!("{name}: {} is lost with the symmetry reduction", m.name())
            });
            assert_eq!(r.path.len(), c.path.len(), "{name}: {} found later", m.name());
            compared += 1;
        }
    }
    assert!(compared >= 20, "only {compared} counterexamples compared");
}

/// Hunts every mutant with the default options and with `without` (a reduction switched off):
/// each is found both ways, by the same configuration with a counterexample as short, and the
/// reduced hunt explores no more states.
fn with_and_without(without: &Options) -> Vec<(Hunt, Hunt)> {
    let hunts = Mutant::ALL.iter().map(|&m| (hunt(m, &Options::default()), hunt(m, without)));
    let hunts: Vec<(Hunt, Hunt)> = hunts.collect();
    for (with, full) in &hunts {
        let name = with.mutant.name();
        assert!(full.found_by.is_some(), "{name} is found without the reduction");
        assert_eq!((with.found_by, with.length), (full.found_by, full.length), "{name}");
        assert!(with.states <= full.states, "{name}");
    }
    hunts
}

/// Subsumption (`Options::subsumption`) loses no counterexample of the catalogue: every mutant
/// is found in the same configuration, with a path as short, when every transition that only
/// spends is explored too. A core that keeps something of an idle cancel (the boolean cancel
/// flag) changes its state on such a transition, and the checker then checks again without
/// subsumption, which follows the cancel to the submission it wrongly cancels.
#[test]
fn skipping_transitions_that_only_spend_loses_no_counterexample() {
    // The one mutant whose hunt checks again without subsumption: the boolean cancel flag,
    // which an idle cancel sets.
    let dropping = [Mutant::CancelFlag];
    let hunts = with_and_without(&Options { subsumption: false, ..Options::default() });
    for (with, full) in &hunts {
        let m = with.mutant;
        assert_eq!(with.subsumption_dropped, dropping.contains(&m), "{}", m.name());
        assert!(!full.subsumption_dropped, "{}", m.name());
    }
    let smaller = hunts.iter().filter(|(with, full)| with.states < full.states).count();
    assert!(smaller >= 34, "the subsumption made only {smaller} hunts smaller");
    let mut small = configs::named("small").expect("a named configuration");
    small.config.mutant = Some(Mutant::CancelFlag);
    let r = check(&small, &Options::default(), &mut |_| {});
    let changed = r.subsumption_dropped.expect("the idle cancel changed the mutant's state");
    assert_eq!(changed, [Action::Cancel { session: 0 }], "the first transition that changed it");
    let c = r.counterexample.expect("found");
    assert_eq!(c.path.len(), 2, "an idle cancel, then the submission it cancels: {:?}", c.path);
    let clean = check(&configs::named("small").expect("small"), &Options::default(), &mut |_| {});
    assert!(clean.subsumption_dropped.is_none() && clean.counterexample.is_none());
}

/// Forgetting what no rule reads (`Options::forgetting`: a finished submission's mode, counts,
/// outcome without a RunId, and session once no late reply can name it) loses no
/// counterexample of the catalogue: every mutant is found in the same configuration, with a
/// path as short, when finished submissions keep everything, and the search with forgetting
/// never explores more states.
#[test]
fn forgetting_what_no_rule_reads_loses_no_counterexample() {
    let hunts = with_and_without(&Options { forgetting: false, ..Options::default() });
    let smaller = hunts.iter().filter(|(with, full)| with.states < full.states).count();
    // Only the mutants found before any submission finished meet the same states.
    assert!(smaller >= 30, "forgetting made only {smaller} hunts smaller");
}

/// The checker's own soundness check can fail: with the lockstep clock in the core's digest (a
/// mutant of the checker), two paths of different lengths to one state leave different
/// digests, and both strategies report the first such transition, at the same place, with any
/// number of workers.
#[test]
fn a_core_that_depends_on_its_path_is_reported_by_both_strategies() {
    let bounds = configs::named("small").expect("small");
    let run = |strategy, jobs| {
        let options = Options { strategy, jobs, clock_in_digest: true, ..Options::default() };
        let r = check(&bounds, &options, &mut |_| {});
        let c = r.counterexample.expect("the divergence is found");
        (r.states, r.transitions, r.depth, c.path, describe(&c.problem))
    };
    let one = run(Strategy::Frontier, 1);
    assert!(one.4.contains("two paths to the same specification state"), "{}", one.4);
    for (strategy, jobs) in [(Strategy::Tree, 1), (Strategy::Tree, 2), (Strategy::Frontier, 2)] {
        assert_eq!(run(strategy, jobs), one, "{strategy:?} with {jobs} workers");
    }
}
