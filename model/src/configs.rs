//! The named bounded configurations the checker explores (SPEC section 10: "e.g. 2 sessions,
//! 4 submissions with and without RunId, 2 cancels, a cancel_run, a clear, a summarization, a
//! retry, a refresh, a preparation failure, late and duplicate replies, all orders of host
//! replies").

use turnstile_core::{Acceptor, Config};

use crate::spec::Budget;

/// A named configuration: the core's configuration and the specification's budgets.
#[derive(Clone, Debug)]
pub struct Bounds {
    /// The name on the command line.
    pub name: &'static str,
    /// What it is for.
    pub about: &'static str,
    /// The core's configuration (SPEC defaults).
    pub config: Config,
    /// How many of each choice the explored runs may make.
    pub budget: Budget,
    /// The distinct states this configuration has (measured; the progress bar's length, and a
    /// test checks the explorer still finds exactly this many).
    pub expected_states: u64,
}

const NONE: Budget = Budget {
    sessions: 2,
    untitled: 0,
    step_limit: 0,
    forgets: true,
    external: false,
    submits: 0,
    runs: 0,
    replays: 0,
    cancels: 0,
    cancel_runs: 0,
    clears: 0,
    summarizes: 0,
    shutdowns: 0,
    prep_failures: 0,
    tool_calls: 0,
    finishing: 0,
    asking: 0,
    second_calls: 0,
    stops: 0,
    highs: 0,
    retryable: 0,
    fatal: 0,
    auth: 0,
    refresh_failures: 0,
    stale: 0,
    odd_finishes: 0,
    stalls: 0,
    agents: 0,
};

/// Every kind of input SPEC 10 lists, on two sessions, with 3 submissions instead of its 4
/// (`spec10` has the 4, two with a RunId).
const WIDE: Budget = Budget {
    submits: 3,
    runs: 1,
    cancels: 2,
    cancel_runs: 1,
    clears: 1,
    summarizes: 1,
    retryable: 1,
    auth: 1,
    prep_failures: 1,
    stale: 2,
    ..NONE
};

/// The README's main job: two sessions and the faults that matter most across them.
const DEFAULT: Budget = Budget {
    submits: 3,
    runs: 1,
    cancels: 1,
    cancel_runs: 1,
    shutdowns: 1,
    prep_failures: 1,
    tool_calls: 1,
    finishing: 1,
    highs: 1,
    stale: 1,
    ..NONE
};

/// The core's configuration with an external acceptor (SPEC 4.1): everything else default.
fn external() -> Config {
    Config { acceptor: Acceptor::External, ..Config::default() }
}

/// Every named configuration.
#[must_use]
pub fn all() -> Vec<Bounds> {
    vec![
        Bounds {
            name: "small",
            about: "seconds: 1 session, 3 submissions (one with a RunId), resubmission, cancel, \
                    clear, manual summarize, a preparation failure, a tool call, a fatal error",
            config: Config::default(),
            expected_states: 17_941,
            budget: Budget {
                sessions: 1,
                submits: 3,
                runs: 1,
                replays: 1,
                cancels: 1,
                clears: 1,
                summarizes: 1,
                prep_failures: 1,
                tool_calls: 1,
                fatal: 1,
                ..NONE
            },
        },
        Bounds {
            name: "faults",
            about: "seconds: 1 session, 2 submissions (one with a RunId), resubmission (also \
                    during shutdown), cancel, cancel_run, shutdown, a tool call (dropped on \
                    abort, or left to finish) with a stop, a pause, a retry, a 401 and its \
                    refresh failing, stale replies",
            config: Config::default(),
            expected_states: 18_385,
            budget: Budget {
                sessions: 1,
                submits: 2,
                runs: 1,
                cancels: 1,
                cancel_runs: 1,
                shutdowns: 1,
                tool_calls: 1,
                finishing: 1,
                stops: 1,
                highs: 1,
                retryable: 1,
                auth: 1,
                refresh_failures: 1,
                stale: 1,
                replays: 1,
                ..NONE
            },
        },
        Bounds {
            name: "retries",
            about: "seconds: 1 session, 2 submissions, every attempt of a step (4), two 401s \
                    with a refresh between (a fresh budget), a cancel",
            config: Config::default(),
            expected_states: 4_652,
            budget: Budget {
                sessions: 1,
                submits: 2,
                cancels: 1,
                retryable: 5,
                auth: 2,
                highs: 1,
                ..NONE
            },
        },
        Bounds {
            name: "guard",
            about: "seconds: 1 session, 2 submissions, three tool steps at the threshold (two \
                    pauses, then the no-progress guard; one may call the tool left to finish), \
                    finish reasons that do not match the calls, a cancel",
            config: Config::default(),
            expected_states: 18_715,
            budget: Budget {
                sessions: 1,
                submits: 2,
                cancels: 1,
                tool_calls: 3,
                finishing: 1,
                highs: 3,
                odd_finishes: 2,
                stale: 1,
                ..NONE
            },
        },
        Bounds {
            name: "watchdog",
            about: "seconds: 1 session, 2 submissions (one with a RunId), the stream watchdog \
                    (SPEC 4.5): every attempt stalling (the 4th fails `transport`), a tool call \
                    that extends it, a retryable error and a summary whose attempts it watches \
                    too, cancel and shutdown racing it, a firing after its attempt ended, late \
                    events of an attempt it aborted",
            config: Config::default(),
            expected_states: 58_439,
            budget: Budget {
                sessions: 1,
                submits: 2,
                runs: 1,
                cancels: 1,
                shutdowns: 1,
                summarizes: 1,
                tool_calls: 1,
                highs: 1,
                retryable: 1,
                stalls: 4,
                stale: 2,
                ..NONE
            },
        },
        Bounds {
            name: "titles",
            about: "seconds: 2 untitled sessions (SPEC 4.11): the title requested at a \
                    session's first activation and answered at any time (generated or not, \
                    before or after the turn ends), never cancelled with the turn, abandoned by \
                    shutdown; 3 submissions (one with a RunId), a cancel, a tool call, stale \
                    answers",
            config: Config::default(),
            expected_states: 66_766,
            budget: Budget {
                untitled: 1,
                submits: 3,
                runs: 1,
                cancels: 1,
                shutdowns: 1,
                tool_calls: 1,
                stale: 1,
                ..NONE
            },
        },
        Bounds {
            name: "limits",
            about: "seconds: the step limit (SPEC 4.6, a limit of 2): 1 untitled session, 2 \
                    submissions, three tool steps, a pause at the threshold and its resumed \
                    turn (the count goes on), a stop result, a finish reason that does not \
                    match the calls, a cancel, shutdown",
            config: Config { step_limit: 2, ..Config::default() },
            expected_states: 3_394,
            budget: Budget {
                sessions: 1,
                untitled: 1,
                step_limit: 2,
                submits: 2,
                cancels: 1,
                shutdowns: 1,
                tool_calls: 3,
                highs: 1,
                stops: 1,
                odd_finishes: 1,
                stale: 1,
                ..NONE
            },
        },
        Bounds {
            name: "calls",
            about: "seconds: several tool calls per step (SPEC 4.4, 4.9): 1 session, 2 \
                    submissions (one with a RunId), two steps that may each call two tools \
                    (each dropped on abort, or left to finish), results in any order, two stop \
                    results (SPEC 4.6's precedence), a cancel, shutdown, late and duplicate \
                    results",
            config: Config::default(),
            expected_states: 15_710,
            budget: Budget {
                sessions: 1,
                submits: 2,
                runs: 1,
                cancels: 1,
                shutdowns: 1,
                tool_calls: 2,
                second_calls: 2,
                finishing: 2,
                stops: 2,
                stale: 2,
                ..NONE
            },
        },
        Bounds {
            name: "calls-two",
            about: "seconds: two sessions whose steps call two tools at once: 2 submissions, \
                    a cancel, shutdown (its deadline over both sessions' calls left to finish), \
                    a stop result, a late result",
            config: Config::default(),
            expected_states: 45_504,
            budget: Budget {
                submits: 2,
                cancels: 1,
                shutdowns: 1,
                tool_calls: 2,
                second_calls: 2,
                finishing: 2,
                stops: 1,
                stale: 1,
                ..NONE
            },
        },
        Bounds {
            name: "asks",
            about: "seconds: a tool left to finish once started (SPEC 4.9): 1 session, 2 \
                    submissions (one with a RunId), two steps that may each call two tools, one \
                    call of which may wait for a person's answer before its work begins \
                    (dropped by an abort until the host reports the start, left to finish \
                    after), a result without a start (the ask denied), a stop result, cancel, \
                    cancel_run, shutdown, a start after the ask was withdrawn, late results",
            config: Config::default(),
            expected_states: 56_692,
            budget: Budget {
                sessions: 1,
                submits: 2,
                runs: 1,
                cancels: 1,
                cancel_runs: 1,
                shutdowns: 1,
                tool_calls: 2,
                second_calls: 2,
                finishing: 2,
                asking: 1,
                stops: 1,
                stale: 2,
                ..NONE
            },
        },
        Bounds {
            name: "agents",
            about: "seconds: a sub-agent (SPEC 4.11): 1 session, 2 submissions (one with a \
                    RunId), an `agent` call whose child runs its own steps and a tool call \
                    (dropped on abort, or left to finish), cancel(child) against cancel(parent) \
                    and cancel_run, a fatal error, shutdown, a submission to the child, the \
                    child's cost on its parent, stale replies",
            config: Config::default(),
            expected_states: 9_844,
            budget: Budget {
                sessions: 1,
                submits: 2,
                runs: 1,
                replays: 1,
                cancels: 2,
                cancel_runs: 1,
                shutdowns: 1,
                tool_calls: 1,
                finishing: 1,
                fatal: 1,
                stale: 1,
                agents: 1,
                ..NONE
            },
        },
        Bounds {
            name: "agents-two",
            about: "seconds: a sub-agent beside a second session: 2 sessions, 2 submissions \
                    (one with a RunId), an `agent` call whose child takes a sequence between \
                    the sessions' submissions, a tool call (dropped on abort, or left to \
                    finish), cancel(child), cancel(parent) and cancel of the other session, \
                    shutdown over three lanes (the oldest sequence first), stale replies",
            config: Config::default(),
            expected_states: 39_766,
            budget: Budget {
                submits: 2,
                runs: 1,
                replays: 1,
                cancels: 2,
                cancel_runs: 1,
                prep_failures: 1,
                shutdowns: 1,
                tool_calls: 1,
                finishing: 1,
                stale: 1,
                agents: 1,
                ..NONE
            },
        },
        Bounds {
            name: "default",
            about: "seconds, the one CI checks: 2 sessions, 3 submissions (one with a RunId), \
                    a cancel, a cancel_run, shutdown, a preparation failure, a tool call \
                    (dropped on abort, or left to finish), a summarization, stale replies",
            config: Config::default(),
            expected_states: 151_776,
            budget: DEFAULT,
        },
        Bounds {
            name: "wide",
            about: "seconds: every input SPEC 10 lists, with 3 submissions instead of its 4: 2 \
                    sessions, 3 submissions (one with a RunId), 2 cancels, a cancel_run, a \
                    clear, a summarization, a retry, a refresh, a preparation failure, 2 stale \
                    replies",
            config: Config::default(),
            expected_states: 652_007,
            budget: WIDE,
        },
        Bounds {
            name: "spec10",
            about: "minutes (eight with the core in lockstep, four with --symmetry): the size \
                    SPEC 10 names, 2 sessions, 4 submissions (two with a RunId), 2 cancels, a \
                    cancel_run, a clear, a summarization, a retry, a refresh, a preparation \
                    failure, 2 stale replies",
            config: Config::default(),
            expected_states: 18_840_495,
            budget: Budget { submits: 4, runs: 2, ..WIDE },
        },
        Bounds {
            name: "nightly",
            about: "seconds: the default configuration plus a retryable error (backoff, reset, \
                    retry) on two sessions",
            config: Config::default(),
            expected_states: 543_484,
            budget: Budget { retryable: 1, ..DEFAULT },
        },
        Bounds {
            name: "acceptor",
            about: "seconds: an external acceptor (SPEC 4.10): 2 sessions, 3 submissions (one \
                    with a RunId) in flight to the core while 2 cancels (their watermarks ahead \
                    of the core), a cancel_run, a clear and shutdown overtake them, a \
                    preparation failure",
            config: external(),
            expected_states: 51_315,
            budget: Budget {
                external: true,
                submits: 3,
                runs: 1,
                cancels: 2,
                cancel_runs: 1,
                clears: 1,
                shutdowns: 1,
                prep_failures: 1,
                ..NONE
            },
        },
        Bounds {
            name: "acceptor-lookup",
            about: "seconds: an external acceptor with 2 sessions, 3 submissions (one with a \
                    RunId), a RunId look-up it numbers like a submission (the same call or a \
                    conflict: a gap in the sequences the core sees, so a submission above a \
                    watermark arrives while it is held), 2 cancels, a cancel_run, shutdown",
            config: external(),
            expected_states: 144_813,
            budget: Budget {
                external: true,
                submits: 3,
                runs: 1,
                replays: 1,
                cancels: 2,
                cancel_runs: 1,
                shutdowns: 1,
                ..NONE
            },
        },
        Bounds {
            name: "acceptor-turn",
            about: "seconds: an external acceptor with 1 session, 4 submissions (one with a \
                    RunId) arriving while a turn runs, 2 cancels, a cancel_run, shutdown, a tool \
                    call (dropped on abort, or left to finish: arrivals during the cancel grace)",
            config: external(),
            expected_states: 120_683,
            budget: Budget {
                external: true,
                sessions: 1,
                submits: 4,
                runs: 1,
                cancels: 2,
                cancel_runs: 1,
                shutdowns: 1,
                tool_calls: 1,
                finishing: 1,
                ..NONE
            },
        },
        Bounds {
            name: "acceptor-flight",
            about: "seconds: an external acceptor with 2 sessions and 4 submissions, all of \
                    them in flight at once, 2 cancels, shutdown, a preparation failure",
            config: external(),
            expected_states: 89_601,
            budget: Budget {
                external: true,
                submits: 4,
                cancels: 2,
                shutdowns: 1,
                prep_failures: 1,
                ..NONE
            },
        },
    ]
}

/// The configuration with this name.
#[must_use]
pub fn named(name: &str) -> Option<Bounds> {
    all().into_iter().find(|b| b.name == name)
}
