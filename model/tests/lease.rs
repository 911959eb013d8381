//! The lease and fencing protocol (SPEC 11): the protocol passes its exhaustive check, and
//! the checker finds each of its mutants with a shortest counterexample.

use turnstile_model::lease::{self, Action, Bounds, Mutant, Violation};

fn small() -> Bounds {
    lease::named("small").expect("a named size")
}

fn hunt(m: Mutant) -> lease::Counterexample {
    let report = lease::check(&Bounds { mutant: Some(m), ..small() });
    report.counterexample.unwrap_or_else(|| panic!("{} was not found", m.name()))
}

fn shown(c: &lease::Counterexample) -> String {
    let mut text: Vec<String> = c.path.iter().map(ToString::to_string).collect();
    text.push(format!("=> {}", c.violation));
    text.join("\n")
}

/// `tiny` here (half a million states); CI checks `small` with the release build, and
/// `docs/verification.md` has both figures.
#[test]
fn the_protocol_passes_its_exhaustive_check() {
    let report = lease::check(&lease::named("tiny").unwrap());
    assert!(report.counterexample.is_none(), "{}", shown(report.counterexample.as_ref().unwrap()));
    // The size the docs state: a check that explored next to nothing could not fail.
    assert!(report.states > 500_000, "{} states", report.states);
}

/// Every mutant is found at `small`, by the check CI runs.
#[test]
fn every_mutant_is_found() {
    for &m in Mutant::ALL {
        hunt(m);
    }
}

#[test]
fn a_write_without_its_epoch_check_is_found() {
    let c = hunt(Mutant::NoEpochCheck);
    assert!(matches!(c.violation, Violation::FencedWrite { .. }), "{}", shown(&c));
    insta::assert_snapshot!(shown(&c));
}

#[test]
fn a_takeover_decided_from_a_stale_read_is_found() {
    let c = hunt(Mutant::TakeoverFromStaleRead);
    insta::assert_snapshot!(shown(&c));
}

#[test]
fn acting_past_the_deadline_while_a_renewal_is_in_flight_is_found() {
    let c = hunt(Mutant::RenewalPastDeadline);
    assert!(matches!(c.violation, Violation::ActedOutsideLease { .. }), "{}", shown(&c));
    insta::assert_snapshot!(shown(&c));
}

#[test]
fn a_watermark_applied_out_of_sequence_order_is_found() {
    let c = hunt(Mutant::WatermarkOutOfOrder);
    assert!(matches!(c.violation, Violation::CoveredRan { .. }), "{}", shown(&c));
    insta::assert_snapshot!(shown(&c));
}

#[test]
fn a_waiting_submission_dropped_at_failover_is_found() {
    let c = hunt(Mutant::FailoverDropsWaiting);
    assert!(matches!(c.violation, Violation::Stuck(_)), "{}", shown(&c));
    insta::assert_snapshot!(shown(&c));
}

#[test]
fn a_turn_run_twice_at_failover_is_found() {
    let c = hunt(Mutant::FailoverRunsTwice);
    assert!(
        matches!(c.violation, Violation::RunTwice(_) | Violation::TwoOutcomes(_)),
        "{}",
        shown(&c)
    );
    insta::assert_snapshot!(shown(&c));
}

/// The rules the checks rely on, step by step: a late write of a stale owner is refused, and
/// a host past its deadline runs nothing.
#[test]
fn a_late_write_after_a_takeover_is_refused_and_its_host_drops_the_session() {
    use lease::state::{Outcome, Row};
    let b = small();
    let mut w = b.start();
    let step = |w: &mut lease::state::World, a: Action| {
        assert!(lease::enabled(&b, w).contains(&a), "{a} is not enabled");
        *w = lease::apply(&b, w, a).unwrap_or_else(|v| panic!("{a}: {v}"));
    };
    // h0 takes the session and runs #1; it sends #1's outcome and freezes before it commits.
    for a in [Action::Accept(0), Action::Try(0), Action::Execute(0), Action::Receive(0)] {
        step(&mut w, a);
    }
    for a in [Action::Activate(0), Action::Execute(0), Action::Receive(0)] {
        step(&mut w, a);
    }
    step(&mut w, Action::Finish(0));
    step(&mut w, Action::Freeze(0));
    // Its lease runs out by the database's clock; h1 takes over and recovery interrupts #1.
    for _ in 0..b.lease {
        step(&mut w, Action::Tick);
    }
    for a in [Action::Try(1), Action::Execute(1), Action::Receive(1)] {
        step(&mut w, a);
    }
    assert_eq!((w.db.lease.owner, w.db.lease.epoch), (Some(1), 2));
    assert_eq!(w.db.subs, vec![Row::Done(Outcome::Interrupted)]);
    // The frozen host's outcome commits late: refused, #1 keeps its one outcome.
    step(&mut w, Action::Execute(0));
    assert_eq!(w.db.subs, vec![Row::Done(Outcome::Interrupted)]);
    // Woken past its deadline, h0 runs no tool; told it lost the lease, it drops the session.
    step(&mut w, Action::Wake(0));
    let now = lease::enabled(&b, &w);
    assert!(!now.contains(&Action::Effect(0)) && now.contains(&Action::Expire(0)), "{now:?}");
    step(&mut w, Action::Receive(0));
    assert!(w.hosts[0].owned.is_none());
}
