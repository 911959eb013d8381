//! Longer random runs than the exhaustive bounds allow (proptest-state-machine): the
//! specification is the reference machine, the core (driven in lockstep) the system under
//! test. Every step must project to what the specification says (SPEC 7), and the core's own
//! invariant checkers run after every input.

use proptest::prelude::*;
use proptest::sample::select;
use proptest_state_machine::{ReferenceStateMachine, StateMachineTest, prop_state_machine};
use turnstile_core::Config;
use turnstile_model::driver::Lockstep;
use turnstile_model::spec::{Action, Budget, Emit, Spec};

/// Budgets far beyond the exhaustive configurations: six submissions, several pauses (the
/// no-progress guard), retries up to the last attempt, repeated refreshes, stalled attempts
/// (the stream watchdog) on both sessions.
const WIDE: Budget = Budget {
    sessions: 2,
    external: false,
    // Untitled sessions: title requests and their answers at any moment (SPEC 4.11).
    untitled: 1,
    step_limit: 0,
    forgets: true,
    submits: 6,
    runs: 3,
    replays: 3,
    cancels: 3,
    cancel_runs: 2,
    clears: 2,
    summarizes: 2,
    shutdowns: 1,
    prep_failures: 2,
    tool_calls: 8,
    finishing: 4,
    // Calls left to finish once started: a start reported or not, an abort before or after.
    asking: 4,
    // Steps with two calls, results in any order, two stops (SPEC 4.6's precedence).
    second_calls: 4,
    stops: 2,
    highs: 5,
    retryable: 5,
    fatal: 1,
    auth: 3,
    refresh_failures: 1,
    stale: 4,
    odd_finishes: 3,
    stalls: 5,
    // One sub-agent (SPEC 4.11): its turn, cancel(child) against cancel(parent).
    agents: 1,
};

struct Reference;

/// One generated step: an action the specification offers, or `None` once it offers nothing
/// (every budget spent and every submission finished), which changes nothing on either side.
type Step = Option<Action>;

fn offered(state: &Spec) -> Vec<Action> {
    let mut actions = Vec::new();
    state.actions(&mut actions);
    actions
}

impl ReferenceStateMachine for Reference {
    type State = Spec;
    type Transition = Step;

    fn init_state() -> BoxedStrategy<Spec> {
        Just(Spec::new(WIDE)).boxed()
    }

    fn transitions(state: &Spec) -> BoxedStrategy<Step> {
        let actions = offered(state);
        if actions.is_empty() {
            return Just(None).boxed();
        }
        // Host replies four times as likely as client commands, so runs get deep (pauses,
        // retries) instead of spending every client budget first; shutdown is rare.
        let mut weighted = Vec::new();
        for a in actions {
            let weight = match a {
                Action::Shutdown => 1,
                a if a.is_client() => 2,
                _ => 8,
            };
            weighted.extend(std::iter::repeat_n(Some(a), weight));
        }
        select(weighted).boxed()
    }

    fn preconditions(state: &Spec, step: &Step) -> bool {
        let actions = offered(state);
        match step {
            Some(a) => actions.contains(a),
            None => actions.is_empty(),
        }
    }

    fn apply(mut state: Spec, step: &Step) -> Spec {
        if let Some(a) = step {
            state.apply(*a, &mut Emit::default());
        }
        state
    }
}

struct Core {
    lockstep: Lockstep,
    shadow: Spec,
}

impl StateMachineTest for Core {
    type SystemUnderTest = Core;
    type Reference = Reference;

    fn init_test(state: &Spec) -> Core {
        Core { lockstep: Lockstep::new(&Config::default()), shadow: *state }
    }

    fn apply(mut sut: Core, after: &Spec, step: Step) -> Core {
        let Some(action) = step else { return sut };
        let before = sut.shadow;
        let mut emit = Emit::new(true);
        sut.shadow.apply(action, &mut emit);
        assert_eq!(sut.shadow, *after, "the reference and its shadow agree");
        let expected = emit.finish();
        match sut.lockstep.step(&before, action) {
            Ok((_, input, actual)) => assert_eq!(
                actual, expected,
                "the core disagrees with the specification on {action:?} (input {input:?})"
            ),
            Err(fault) => panic!("{action:?}: {fault:?}"),
        }
        sut
    }

    fn check_invariants(sut: &Core, state: &Spec) {
        let unfinished = (1..=state.accepted).filter(|&n| state.unfinished(n)).count() as u64;
        assert_eq!(sut.lockstep.unfinished(), unfinished, "the same submissions are unfinished");
    }
}

prop_state_machine! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]
    #[test]
    fn the_core_follows_the_specification_on_long_runs(sequential 1..100 => Core);
}
