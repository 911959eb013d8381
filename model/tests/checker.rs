//! The checker's own tests: the bounded configurations pass with the core in lockstep, the
//! state encoding is exact, and a real disagreement comes back as a shortest trace that the
//! core's replay reproduces.

use std::collections::{HashMap, HashSet, VecDeque};

use turnstile_core::projection::Rec;
use turnstile_core::trace::Trace;
use turnstile_core::{Acceptor, Mode, Outcome, ReplayFailure, replay};
use turnstile_model::checker::describe;
use turnstile_model::configs::{self, Bounds};
use turnstile_model::encode::{Key, encode};
use turnstile_model::spec::{Action, CHILD, Emit, Kind, Spec, Status};
use turnstile_model::state::{Budget, Sub};
use turnstile_model::{Options, Problem, Strategy, check};

fn bounds(name: &str) -> Bounds {
    configs::named(name).unwrap_or_else(|| panic!("no configuration {name}"))
}

fn assert_passes(name: &str, at_least: u64) {
    let r = check(&bounds(name), &Options::default(), &mut |_| {});
    if let Some(c) = &r.counterexample {
        panic!("{name}: {} after {:?}", describe(&c.problem), c.path);
    }
    assert!(r.states >= at_least, "{name} explored only {} states", r.states);
    assert_eq!(r.states, bounds(name).expected_states, "{name}: update `expected_states`");
    // The core treats every transition that only spends as the specification does.
    assert_eq!(r.subsumption_dropped, None, "{name}: a transition that only spends changed it");
    assert!(r.transitions > r.states, "every state has a successor or is final");
}

#[test]
fn the_small_configuration_conforms_everywhere() {
    assert_passes("small", 15_000);
}

#[test]
fn the_faults_configuration_conforms_everywhere() {
    assert_passes("faults", 15_000);
}

#[test]
fn the_retries_and_guard_configurations_conform_everywhere() {
    assert_passes("retries", 4_000);
    assert_passes("guard", 15_000);
}

/// The stream watchdog (SPEC 4.5): every attempt of a step and of a summary stalled in turn,
/// the fourth failing the submission `transport`, against retries, cancel, shutdown, firings
/// after the attempt ended and late events of an aborted attempt. The other configurations
/// arm and disarm it, and re-arm it after content; only this one spends stalls.
#[test]
fn the_watchdog_configuration_conforms_everywhere() {
    assert_passes("watchdog", 50_000);
}

#[test]
fn the_external_acceptor_configurations_conform_everywhere() {
    for name in ["acceptor", "acceptor-lookup", "acceptor-turn", "acceptor-flight"] {
        assert_passes(name, 50_000);
    }
}

/// The specification and the core agree on who assigns sequences, in every configuration.
#[test]
fn every_configuration_gives_both_sides_the_same_acceptor() {
    for b in configs::all() {
        let external = b.config.acceptor == Acceptor::External;
        assert_eq!(b.budget.external, external, "{}", b.name);
    }
}

/// SPEC 4.10 with an external acceptor, in the specification itself: a cancel covers what the
/// acceptor numbered before it, also what is still in flight and arrives afterwards (cancelled
/// on entry, after the first covered arrival too), and nothing numbered after it.
#[test]
fn a_cancel_covers_exactly_what_the_external_acceptor_numbered_before_it() {
    let mut spec = Spec::new(bounds("acceptor-flight").budget);
    let fold = |session| Action::Accept { session, kind: Kind::Fold };
    let path = [fold(0), fold(1), fold(0), Action::Cancel { session: 0 }, fold(0)];
    let arrivals = [Action::Arrive; 4];
    let mut cancelled = Vec::new();
    for a in path.into_iter().chain(arrivals) {
        let mut offered = Vec::new();
        spec.actions(&mut offered);
        assert!(offered.contains(&a), "{a:?} is offered");
        let mut emit = Emit::new(true);
        spec.apply(a, &mut emit);
        for r in emit.finish().records {
            if let Rec::Completed { seq, outcome: Outcome::Cancelled, .. } = r.rec {
                cancelled.push(seq.0);
            }
        }
    }
    let status: Vec<Status> = spec.subs[..4].iter().map(|s| s.status).collect();
    // A finished submission without a RunId keeps no outcome (`Sub::finished`): the ones the
    // cancel ended are the ones whose cancelled completion it published.
    let done = Status::Done(Outcome::Completed);
    // #2 is another session's; #4 came after the cancel.
    assert_eq!(status, [done, Status::Preparing, done, Status::Preparing]);
    assert_eq!(cancelled, [1, 3], "the cancel published the outcomes of #1 and #3");
}

/// A finished submission keeps only what a later rule reads (`Sub::finished`, `Spec::forget`),
/// so the search may meet states that differ in the rest as one: on the first states of every
/// configuration, changing what a finished submission forgot (its outcome without a RunId, its
/// mode, its counts, and its session unless a late reply may name it) changes neither the
/// actions offered nor any transition's projection, and the successors differ in that
/// submission's forgotten parts alone.
#[test]
fn a_finished_submission_keeps_only_what_a_later_rule_reads() {
    const STATES: usize = 4_000;
    let outcomes = [
        Outcome::Completed,
        Outcome::Failed,
        Outcome::Cancelled,
        Outcome::Interrupted,
        Outcome::Folded,
    ];
    let mut compared = 0;
    for b in configs::all() {
        let root = Spec::new(b.budget);
        let mut seen = HashSet::from([root]);
        let mut queue = VecDeque::from([root]);
        let mut actions = Vec::new();
        while let Some(s) = queue.pop_front() {
            s.actions(&mut actions);
            for n in 0..usize::from(s.accepted) {
                let sub = s.subs[n];
                let Status::Done(outcome) = sub.status else { continue };
                assert_eq!(
                    sub,
                    sub.finished(outcome),
                    "{}: #{} keeps what it forgot",
                    b.name,
                    n + 1
                );
                // With a RunId the outcome is kept (a resubmission's reply reads it).
                let forgotten = if sub.run.is_some() { &[][..] } else { &outcomes[..] };
                let variants = forgotten.iter().map(|&o| Sub { status: Status::Done(o), ..sub });
                // The newest finished one a late preparation reply may name keeps its session.
                let named = s.budget.stale > 0
                    && (n + 1..usize::from(s.accepted)).all(|m| {
                        let later = s.subs[m];
                        later.session == CHILD || !matches!(later.status, Status::Done(_))
                    });
                let forgets_session = sub.run.is_none() && sub.session != CHILD && !named;
                assert!(
                    !forgets_session || sub.session == 0,
                    "{}: #{} keeps its session",
                    b.name,
                    n + 1
                );
                let sessions = if forgets_session { &[1][..] } else { &[][..] };
                let variants = variants.chain([
                    Sub { mode: Mode::Fold, ..sub },
                    Sub { pauses: 2, ..sub },
                    Sub { steps: 1, ..sub },
                ]);
                let variants =
                    variants.chain(sessions.iter().map(|&session| Sub { session, ..sub }));
                for v in variants.filter(|v| *v != sub) {
                    let mut t = s;
                    t.subs[n] = v;
                    let mut offered = Vec::new();
                    t.actions(&mut offered);
                    assert_eq!(offered, actions, "{}: #{} as {v:?} in {s:?}", b.name, n + 1);
                    for &a in &actions {
                        let (mut s2, mut t2) = (s, t);
                        let (mut es, mut et) = (Emit::new(true), Emit::new(true));
                        s2.apply(a, &mut es);
                        t2.apply(a, &mut et);
                        assert_eq!(es.finish(), et.finish(), "{}: {a:?} from {t:?}", b.name);
                        let (kept, other) = (s2.subs[n], t2.subs[n]);
                        assert!(matches!(other.status, Status::Done(_)) && other.run == kept.run);
                        s2.subs[n] = other;
                        assert_eq!(s2, t2, "{}: {a:?} from {t:?}", b.name);
                        compared += 1;
                    }
                }
            }
            assert_eq!(s.mirrored().mirrored(), s, "{}: the mirror of the mirror", b.name);
            for &a in &actions {
                let mut next = s;
                next.apply(a, &mut Emit::default());
                // The driver builds a late preparation reply from the session of the newest
                // ended submission: that one keeps its session (a reply to another session
                // would be a no-op for the core too, so only this catches forgetting it).
                let newest_ended = (0..usize::from(next.accepted)).rev().find(|&m| {
                    let sub = next.subs[m];
                    sub.session != CHILD && matches!(sub.status, Status::Done(_))
                });
                if let Some(m) = newest_ended.filter(|_| next.budget.stale > 0) {
                    assert_eq!(next.subs[m].session, s.subs[m].session, "{}: {a:?}", b.name);
                }
                if seen.len() < STATES && seen.insert(next) {
                    queue.push_back(next);
                }
            }
        }
    }
    assert!(compared > 10_000, "only {compared} transitions compared");
}

/// A state with less left to choose has no future its source lacks (`Spec::subsumes`), so the
/// checker need not explore a transition that only spends: on the first states of every
/// configuration and on the states of random walks through it, spending one of any budget, or
/// making one stale reply impossible, gives a state the original subsumes, which offers only
/// actions the original offers, each with the same projection and into a state the
/// original's successor subsumes or is, and which is stuck (I6) only where the original is.
#[test]
fn a_state_with_less_left_to_choose_has_no_other_future() {
    const STATES: usize = 4_000;
    const WALKS: usize = 200;
    let (mut compared, mut only_spend, mut deepest) = (0, 0, 0);
    for (n, b) in configs::all().iter().enumerate() {
        let root = Spec::new(b.budget);
        let mut seen = HashSet::from([root]);
        let mut queue = VecDeque::from([root]);
        let mut actions = Vec::new();
        while let Some(s) = queue.pop_front() {
            compared += has_no_other_future(b.name, &s);
            s.actions(&mut actions);
            for &a in &actions {
                let mut next = s;
                next.apply(a, &mut Emit::default());
                if s.subsumes(&next) {
                    only_spend += 1;
                    continue; // the checker does not explore it either
                }
                if seen.len() < STATES && seen.insert(next) {
                    queue.push_back(next);
                }
            }
        }
        // Deeper states than the first thousands: seeded random walks to the end.
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64 ^ n as u64;
        for _ in 0..WALKS {
            let (mut s, mut depth) = (root, 0);
            loop {
                s.actions(&mut actions);
                if actions.is_empty() {
                    break;
                }
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                s.apply(actions[(seed % actions.len() as u64) as usize], &mut Emit::default());
                depth += 1;
                compared += has_no_other_future(b.name, &s);
            }
            deepest = deepest.max(depth);
        }
    }
    assert!(compared > 100_000, "only {compared} transitions compared");
    assert!(only_spend > 1_000, "only {only_spend} transitions that only spend");
    assert!(deepest >= 20, "the walks went only {deepest} deep");
}

/// Checks `a_state_with_less_left_to_choose_has_no_other_future` at `s`: every state with
/// one thing less left to choose. Returns the transitions compared.
fn has_no_other_future(name: &str, s: &Spec) -> usize {
    let spend: [fn(&mut Budget) -> &mut u8; 23] = [
        |b| &mut b.submits,
        |b| &mut b.runs,
        |b| &mut b.replays,
        |b| &mut b.cancels,
        |b| &mut b.cancel_runs,
        |b| &mut b.clears,
        |b| &mut b.summarizes,
        |b| &mut b.shutdowns,
        |b| &mut b.prep_failures,
        |b| &mut b.tool_calls,
        |b| &mut b.finishing,
        |b| &mut b.asking,
        |b| &mut b.second_calls,
        |b| &mut b.stops,
        |b| &mut b.highs,
        |b| &mut b.retryable,
        |b| &mut b.fatal,
        |b| &mut b.auth,
        |b| &mut b.refresh_failures,
        |b| &mut b.stale,
        |b| &mut b.odd_finishes,
        |b| &mut b.stalls,
        |b| &mut b.agents,
    ];
    let mut smaller = Vec::new();
    for field in spend {
        let mut budget = s.budget;
        let left = field(&mut budget);
        if *left > 0 {
            *left -= 1;
            smaller.push(s.spent(budget, s.stale));
        }
    }
    for k in (0..s.stale.len()).filter(|&k| s.stale[k]) {
        let mut stale = s.stale;
        stale[k] = false;
        smaller.push(s.spent(s.budget, stale));
    }
    let (mut actions, mut fewer) = (Vec::new(), Vec::new());
    s.actions(&mut actions);
    // I6 holds there when it holds here: a host reply is not spent.
    let answers = |offered: &[Action]| offered.iter().any(|a| !a.is_client() && !a.is_stale());
    let stuck = |spec: &Spec, offered: &[Action]| spec.any_unfinished() && !answers(offered);
    let mut compared = 0;
    for t in smaller {
        assert!(s.subsumes(&t), "{name}: {s:?} subsumes {t:?}");
        assert!(!t.subsumes(s), "{name}: not the other way round");
        t.actions(&mut fewer);
        assert!(stuck(s, &actions) || !stuck(&t, &fewer), "{name}: {t:?} stuck");
        for &a in &fewer {
            assert!(actions.contains(&a), "{name}: {a:?} from {t:?}, not from {s:?}");
            let (mut s2, mut t2) = (*s, t);
            let (mut es, mut et) = (Emit::new(true), Emit::new(true));
            s2.apply(a, &mut es);
            t2.apply(a, &mut et);
            assert_eq!(es.finish(), et.finish(), "{name}: {a:?} from {t:?}");
            assert!(s2 == t2 || s2.subsumes(&t2), "{name}: {a:?} from {t:?}");
            compared += 1;
        }
    }
    compared
}

/// Titles (SPEC 4.11) and the step limit (SPEC 4.6) conform everywhere, and the step limit
/// the specification counts is the core's.
#[test]
fn the_titles_and_step_limit_configurations_conform_everywhere() {
    assert_passes("limits", 3_000);
    assert_passes("titles", 60_000);
    for b in configs::all() {
        assert_eq!(u32::from(b.budget.step_limit), b.config.step_limit, "{}", b.name);
    }
}

/// Several tool calls per step (SPEC 4.4, 4.9): two calls with their own abort policies,
/// results in any order and late, two stops, on one session and on two at once.
#[test]
fn the_calls_configurations_conform_everywhere() {
    assert_passes("calls", 15_000);
    assert_passes("calls-two", 40_000);
}

/// A tool left to finish once started (SPEC 4.9): an abort drops its call until the host
/// reports that the work began, and leaves it to finish after; a start after the abort is
/// stale; beside calls of the other tools, results in any order, one without a start.
#[test]
fn the_asks_configuration_conforms_everywhere() {
    assert_passes("asks", 50_000);
}

/// SPEC 4.9 for a call left to finish once started, in the specification and the core in
/// lockstep: a cancel before the host reported the start withdraws the ask (`AbortTool`) and
/// ends the turn at once, and a start that comes after it changes nothing; a cancel after the
/// start leaves the call to finish, waiting up to the grace, and its result ends the turn.
#[test]
fn a_cancel_drops_an_asking_call_until_its_work_began_and_waits_for_it_after() {
    use turnstile_core::projection::Io;
    use turnstile_model::driver::Lockstep;
    use turnstile_model::spec::Tool;
    let b = bounds("asks");
    let asks = Tool::Asks { started: false };
    let start = [
        Action::Submit { session: 0, kind: Kind::Own },
        Action::Prepared { seq: 1 },
        Action::ToolCall { session: 0, tool: asks },
        Action::StepDone { session: 0, high: false, odd: false },
    ];
    // The projections of `rest` after `start`, each checked against the core's.
    let run = |rest: &[Action]| {
        let (mut spec, mut core) = (Spec::new(b.budget), Lockstep::new(&b.config));
        let mut projections = Vec::new();
        for &a in start.iter().chain(rest) {
            let mut offered = Vec::new();
            spec.actions(&mut offered);
            assert!(offered.contains(&a), "{a:?} is offered in {spec:?}");
            let (_, _, actual) = core.step(&spec, a).unwrap_or_else(|f| panic!("{a:?}: {f:?}"));
            let mut e = Emit::new(true);
            spec.apply(a, &mut e);
            let p = e.finish();
            assert_eq!(p, actual, "the core agrees after {a:?}");
            projections.push(p);
        }
        projections.split_off(start.len())
    };
    let aborts = |p: &turnstile_core::projection::Projection| {
        p.io.iter().filter(|io| matches!(io, Io::AbortTool { .. })).count()
    };
    let withdrawn = run(&[Action::Cancel { session: 0 }, Action::LateStarted]);
    assert_eq!(aborts(&withdrawn[0]), 1, "the ask is withdrawn: {:?}", withdrawn[0]);
    assert_eq!(completions(withdrawn[0].clone()), [(1, Outcome::Cancelled)], "at once");
    assert_eq!(withdrawn[1], Default::default(), "a late start is stale (I13)");
    let started = run(&[
        Action::ToolStarted { session: 0, call: 0 },
        Action::Cancel { session: 0 },
        Action::ToolResult { session: 0, call: 0, stop: false },
    ]);
    assert_eq!(started[0], Default::default(), "a start has no output");
    assert_eq!(aborts(&started[1]), 0, "the work began: left to finish");
    assert!(started[1].io.iter().any(|io| matches!(io, Io::SetTimer { .. })), "the grace");
    assert_eq!(completions(started[1].clone()), [], "the cancel waits for the call");
    assert_eq!(completions(started[2].clone()), [(1, Outcome::Cancelled)], "its result ends it");
}

/// Sub-agents (SPEC 4.11): the child's turn, its end as the parent's tool result, cancel(child)
/// against cancel(parent) and cancel_run, the child's cost on its parent.
#[test]
fn the_agents_configuration_conforms_everywhere() {
    assert_passes("agents", 9_000);
}

/// A sub-agent beside a second session (`agents-two`; CI checks it with the core in lockstep in
/// a release build): the specification's whole space is explored here.
#[test]
fn the_agents_two_configuration_is_explored_whole() {
    let options = Options { conformance: false, ..Options::default() };
    let r = check(&bounds("agents-two"), &options, &mut |_| {});
    assert!(r.counterexample.is_none());
    assert_eq!(r.states, bounds("agents-two").expected_states);
}

/// The child takes the next sequence when its parent's stream finishes, after a submission to
/// the other session made meanwhile; a cancel of the other session touches neither parent nor
/// child. The core agrees with the specification on every step.
#[test]
fn a_child_takes_its_sequence_after_the_other_session_and_its_cancel_spares_both() {
    use turnstile_model::driver::Lockstep;
    use turnstile_model::spec::{CHILD, Lane};
    let b = bounds("agents-two");
    let (mut spec, mut core) = (Spec::new(b.budget), Lockstep::new(&b.config));
    let mut ended = Vec::new();
    for a in [
        Action::Submit { session: 0, kind: Kind::Own },
        Action::Prepared { seq: 1 },
        Action::AgentCall { session: 0 },
        Action::Submit { session: 1, kind: Kind::Own },
        Action::StepDone { session: 0, high: false, odd: false },
        Action::Prepared { seq: 2 },
        Action::Cancel { session: 1 },
    ] {
        let mut offered = Vec::new();
        spec.actions(&mut offered);
        assert!(offered.contains(&a), "{a:?} is offered");
        let (_, _, actual) = core.step(&spec, a).unwrap_or_else(|f| panic!("{a:?}: {f:?}"));
        let mut e = Emit::new(true);
        spec.apply(a, &mut e);
        let p = e.finish();
        assert_eq!(p, actual, "the core agrees after {a:?}");
        ended.extend(completions(p));
    }
    let child = spec.child.expect("the sub-agent started");
    assert_eq!((child.parent, child.seq), (0, 3), "the child's sequence follows b's");
    assert_eq!(ended, [(2, Outcome::Cancelled)], "b's submission, and only it, ended");
    assert_eq!(spec.subs[0].status, Status::Active, "the parent runs on");
    assert!(matches!(spec.lanes[CHILD as usize], Lane::Turn(_)), "the child runs on");
}

/// SPEC 4.11 in the specification itself: cancel(child) ends only the child, with the cancel
/// text as the parent's result, and the parent goes on to its next step; a cancel of the
/// parent ends both in one transition.
#[test]
fn a_cancel_of_the_child_spares_the_parent_and_one_of_the_parent_ends_both() {
    use turnstile_model::spec::{CHILD, Lane};
    let start = [
        Action::Submit { session: 0, kind: Kind::Own },
        Action::Prepared { seq: 1 },
        Action::AgentCall { session: 0 },
        Action::StepDone { session: 0, high: false, odd: false },
    ];
    // The state after `last`, and the outcomes `last` published.
    let run = |last: Action| {
        let mut spec = Spec::new(bounds("agents").budget);
        let mut ended = Vec::new();
        for a in start.into_iter().chain([last]) {
            let mut offered = Vec::new();
            spec.actions(&mut offered);
            assert!(offered.contains(&a), "{a:?} is offered");
            let mut e = Emit::new(true);
            spec.apply(a, &mut e);
            ended = completions(e.finish());
        }
        (spec, ended)
    };
    let (spec, ended) = run(Action::Cancel { session: CHILD });
    assert_eq!(ended, [(2, Outcome::Cancelled)], "the child");
    assert_eq!(spec.subs[0].status, Status::Active, "the parent goes on");
    assert!(matches!(spec.lanes[0], Lane::Turn(t) if t.step == 1), "{:?}", spec.lanes[0]);
    let (spec, mut ended) = run(Action::Cancel { session: 0 });
    ended.sort_by_key(|e| e.0);
    assert_eq!(ended, [(1, Outcome::Cancelled), (2, Outcome::Cancelled)], "parent and child");
    assert_eq!(spec.lanes, [Lane::Idle; 3]);
}

/// The outcomes a transition published, by sequence (a finished submission without a RunId
/// keeps no outcome in the state: `Sub::finished`).
fn completions(p: turnstile_core::projection::Projection) -> Vec<(u64, Outcome)> {
    p.records
        .into_iter()
        .filter_map(|r| match r.rec {
            Rec::Completed { seq, outcome, .. } => Some((seq.0, outcome)),
            _ => None,
        })
        .collect()
}

/// Merging mirror images (`Options::symmetry`) keeps the verdict of a two-session
/// configuration with about half its states, and is the same for any number of workers;
/// with one session there is nothing to merge.
#[test]
fn the_symmetry_reduction_passes_with_about_half_the_states() {
    let run = |name: &str, jobs: usize| {
        let options = Options { symmetry: true, jobs, ..Options::default() };
        check(&bounds(name), &options, &mut |_| {})
    };
    let reduced = run("calls-two", 2);
    assert!(reduced.counterexample.is_none(), "{:?}", reduced.counterexample.map(|c| c.path));
    let full = bounds("calls-two").expected_states;
    assert!(reduced.states * 2 >= full && reduced.states * 10 <= full * 6, "{}", reduced.states);
    let one = run("calls-two", 1);
    assert_eq!(
        (one.states, one.transitions, one.depth),
        (reduced.states, reduced.transitions, reduced.depth)
    );
    assert_eq!(run("calls", 2).states, bounds("calls").expected_states, "one session");
}

/// A state and its mirror image are distinct states with one key under the symmetry, and the
/// mirror of the mirror is the state.
#[test]
fn a_mirror_image_swaps_the_sessions_and_shares_the_canonical_key() {
    use turnstile_model::encode::canonical;
    let mut spec = Spec::new(bounds("calls-two").budget);
    for a in [Action::Submit { session: 0, kind: Kind::Own }, Action::Prepared { seq: 1 }] {
        spec.apply(a, &mut Emit::default());
    }
    let mirror = spec.mirrored();
    assert_ne!(mirror, spec);
    assert_eq!(mirror.subs[0].session, 1);
    assert_eq!(mirror.lanes[1], spec.lanes[0]);
    assert_eq!(mirror.mirrored(), spec);
    assert_eq!(canonical(&mirror).0, canonical(&spec).0);
    assert_ne!(encode(&mirror), encode(&spec));
}

/// The packed key is exact: over a whole explored space, equal keys mean equal states.
#[test]
fn the_state_encoding_is_injective() {
    assert_injective("faults", 70_000);
    // Every status of a call from an external acceptor: in flight (covered or not), a look-up
    // (same call or conflict), answered without acceptance.
    assert_injective("acceptor-lookup", 150_000);
    // Two calls per step in every state a call can be in, with both sessions' turns at once.
    assert_injective("calls", 60_000);
    assert_injective("calls-two", 100_000);
    // A sub-agent: the parent's `agent` call, the child's lane and submission, after its end.
    assert_injective("agents", 70_000);
    // A call left to finish once started, streamed and running (started or not), whose codes
    // are read with its turn's phase.
    assert_injective("asks", 50_000);
}

fn assert_injective(name: &str, at_least: usize) {
    let root = Spec::new(bounds(name).budget);
    let mut seen: HashMap<Key, Spec> = HashMap::new();
    let mut distinct: HashSet<Spec> = HashSet::new();
    let mut stack = vec![root];
    let mut actions = Vec::new();
    while let Some(s) = stack.pop() {
        let key = encode(&s);
        if let Some(other) = seen.get(&key) {
            assert_eq!(*other, s, "two states share the key {key:?}");
            continue;
        }
        seen.insert(key, s);
        assert!(distinct.insert(s));
        s.actions(&mut actions);
        for &a in &actions {
            let mut next = s;
            next.apply(a, &mut Emit::default());
            stack.push(next);
        }
    }
    assert_eq!(seen.len(), distinct.len());
    assert!(seen.len() > at_least, "{name}: explored {}", seen.len());
}

/// A core configured against SPEC (auto-summarize off) disagrees with the specification: the
/// checker reports the shortest path, and the trace it writes fails the core's replay at its
/// last line.
#[test]
fn a_disagreement_becomes_a_shortest_trace_that_replay_reproduces() {
    let mut b = bounds("faults");
    b.config.auto_summarize = false;
    let r = check(&b, &Options::default(), &mut |_| {});
    let c = r.counterexample.expect("the disagreement is found");
    assert!(matches!(c.problem, Problem::Disagreement { .. }), "{:?}", c.problem);
    // Submit, prepare, and a step at the threshold: the shortest way to need a summary.
    assert_eq!(c.path.len(), 3, "{:?}", c.path);
    assert!(matches!(c.path[2], Action::StepDone { high: true, .. }), "{:?}", c.path);
    let mut text = serde_json::to_string(&c.trace.header).expect("header");
    for (_, line) in &c.trace.lines {
        text.push('\n');
        text.push_str(&serde_json::to_string(line).expect("line"));
    }
    let parsed = Trace::parse(&text).expect("the written trace parses");
    match replay(&parsed) {
        Err(ReplayFailure::Projection { line, .. }) => assert_eq!(line, 4, "the last input"),
        other => panic!("replay should fail on the projection, got {other:?}"),
    }
}

/// The same trace with the core configured as SPEC says replays cleanly: the expectation is
/// the specification's, not an artefact of the writer.
#[test]
fn counterexample_expectations_hold_for_a_conforming_core() {
    let mut b = bounds("faults");
    b.config.auto_summarize = false;
    let c = check(&b, &Options::default(), &mut |_| {}).counterexample.expect("found");
    let mut trace = c.trace;
    trace.header.config.auto_summarize = true;
    replay(&trace).expect("the conforming core meets every expectation");
}

#[test]
fn the_default_configuration_is_large_enough() {
    // The exploration alone (no lockstep): the README's main job explores over 150,000 states
    // (each a class of states that differ only in what no rule reads any more, none reached
    // only by spending).
    let r = check(
        &bounds("default"),
        &Options { conformance: false, ..Options::default() },
        &mut |_| {},
    );
    assert!(r.counterexample.is_none());
    assert!(r.states >= 150_000, "default explores {} states", r.states);
    assert_eq!(r.states, bounds("default").expected_states);
}

/// The README names the configurations `turnstile-model list` prints, in its order.
#[test]
fn the_readme_lists_every_configuration() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
        .expect("README.md");
    let line = readme
        .lines()
        .skip_while(|l| !l.contains("(`list` shows them:"))
        .take(3)
        .collect::<Vec<_>>()
        .join(" ");
    let listed: Vec<&str> = line
        .split("shows them:")
        .nth(1)
        .and_then(|rest| rest.split(';').next())
        .expect("the README's list of configurations")
        .split(',')
        .map(|n| n.trim().trim_matches('`'))
        .collect();
    let names: Vec<&str> = configs::all().iter().map(|b| b.name).collect();
    assert_eq!(listed, names, "update the README's `list` line");
}

/// The parallel search gives the sequential search's report, and the tree walk the frontier
/// search's: the same states, transitions, depth, and the same shortest counterexample, for
/// any number of workers.
#[test]
fn any_number_of_workers_and_either_strategy_give_the_same_report() {
    let report = |b: &Bounds, jobs: usize, strategy: Strategy| {
        let r = check(b, &Options { jobs, strategy, ..Options::default() }, &mut |_| {});
        let path = r.counterexample.as_ref().map(|c| (c.path.clone(), describe(&c.problem)));
        (r.states, r.transitions, r.depth, r.truncated, path)
    };
    let runs =
        [(1, Strategy::Tree), (2, Strategy::Tree), (3, Strategy::Tree), (2, Strategy::Frontier)];
    let guard = bounds("guard");
    let one = report(&guard, 1, Strategy::Frontier);
    assert!(one.4.is_none(), "guard passes");
    for (jobs, strategy) in runs {
        assert_eq!(report(&guard, jobs, strategy), one, "guard, {strategy:?}, {jobs} workers");
    }
    // A failing check stops at the same first problem, whoever expanded it.
    let mut broken = bounds("faults");
    broken.config.auto_summarize = false;
    let one = report(&broken, 1, Strategy::Frontier);
    assert!(one.4.is_some(), "the disagreement is found");
    for (jobs, strategy) in runs {
        let r = report(&broken, jobs, strategy);
        assert_eq!(r, one, "faults without auto-summarize, {strategy:?}, {jobs} workers");
    }
    // A search stopped by a state limit covers the same prefix.
    let capped = |jobs, strategy| {
        let options = Options { jobs, strategy, max_states: Some(5_000), ..Options::default() };
        let r = check(&bounds("calls-two"), &options, &mut |_| {});
        (r.states, r.transitions, r.depth, r.truncated, r.counterexample.is_some())
    };
    let one = capped(1, Strategy::Frontier);
    assert!(one.3 && !one.4, "stopped early, no problem: {one:?}");
    for (jobs, strategy) in runs {
        assert_eq!(capped(jobs, strategy), one, "calls-two to 5,000 states, {strategy:?}");
    }
}
