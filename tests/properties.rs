//! Property tests of the core over random host-protocol-valid input sequences: several
//! sessions, cancels and cancel_runs at every point, preparation failures, tool calls, stream
//! failures, late and duplicate replies, timers and shutdown. The harness runs the state checker
//! and the stream auditor after every input; a failure prints the trace and a replay command.

use proptest::prelude::*;
use turnstile_core::{
    CallId, Config, ErrorClass, FinishReason, Input, Millis, Mode, OutputKind, ProviderError,
    RunId, Seq, SessionId, StepEvent, StopTurn, Submit, TimerPurpose, ToolOutput, Usage,
};
use turnstile_tests::harness::Host;

/// An abstract host action; `pick` chooses among whatever IO is pending when it runs.
#[derive(Clone, Debug)]
enum Act {
    Submit { session: u8, run: Option<u8>, own: bool, empty: bool },
    Cancel { session: u8, up_to_newest_minus: Option<u8> },
    CancelRun { run: u8 },
    Clear { session: u8 },
    Shutdown,
    Prepare { pick: usize, fail: bool },
    Text { pick: usize },
    Call { pick: usize, id: u8 },
    Finish { pick: usize, reason: u8, tokens: u8 },
    SummaryEvent { pick: usize, kind: u8 },
    Summarize { session: u8 },
    AgentCall { pick: usize, id: u8, prompt: bool },
    CancelChild { pick: usize },
    Title { pick: usize, kind: u8 },
    FailStep { pick: usize, class: u8 },
    Reasoning { pick: usize, which: u8 },
    InputStart { pick: usize, id: u8 },
    BadCall { pick: usize, id: u8, unknown: bool },
    Refresh { pick: usize, ok: bool },
    ToolResult { pick: usize, stop: u8 },
    ToolStarted { pick: usize },
    Timer { pick: usize },
    Stale { pick: usize },
    Advance { ms: u16 },
}

fn act() -> impl Strategy<Value = Act> {
    prop_oneof![
        8 => (0u8..3, proptest::option::of(0u8..4), any::<bool>(), proptest::bool::weighted(0.05))
            .prop_map(|(session, run, own, empty)| Act::Submit { session, run, own, empty }),
        2 => (0u8..3, proptest::option::weighted(0.2, 0u8..3))
            .prop_map(|(session, up_to_newest_minus)| Act::Cancel { session, up_to_newest_minus }),
        2 => (0u8..5).prop_map(|run| Act::CancelRun { run }),
        1 => (0u8..3).prop_map(|session| Act::Clear { session }),
        1 => Just(Act::Shutdown),
        8 => (any::<usize>(), proptest::bool::weighted(0.15)).prop_map(|(pick, fail)| Act::Prepare { pick, fail }),
        3 => any::<usize>().prop_map(|pick| Act::Text { pick }),
        4 => (any::<usize>(), 0u8..6).prop_map(|(pick, id)| Act::Call { pick, id }),
        6 => (any::<usize>(), 0u8..6, 0u8..4).prop_map(|(pick, reason, tokens)| Act::Finish { pick, reason, tokens }),
        3 => (any::<usize>(), 0u8..6).prop_map(|(pick, kind)| Act::SummaryEvent { pick, kind }),
        1 => (0u8..3).prop_map(|session| Act::Summarize { session }),
        2 => (any::<usize>(), 0u8..4, proptest::bool::weighted(0.9)).prop_map(|(pick, id, prompt)| Act::AgentCall { pick, id, prompt }),
        1 => any::<usize>().prop_map(|pick| Act::CancelChild { pick }),
        2 => (any::<usize>(), 0u8..3).prop_map(|(pick, kind)| Act::Title { pick, kind }),
        3 => (any::<usize>(), 0u8..7).prop_map(|(pick, class)| Act::FailStep { pick, class }),
        2 => (any::<usize>(), 0u8..3).prop_map(|(pick, which)| Act::Reasoning { pick, which }),
        1 => (any::<usize>(), 0u8..4).prop_map(|(pick, id)| Act::InputStart { pick, id }),
        1 => (any::<usize>(), 0u8..4, any::<bool>()).prop_map(|(pick, id, unknown)| Act::BadCall { pick, id, unknown }),
        2 => (any::<usize>(), proptest::bool::weighted(0.8)).prop_map(|(pick, ok)| Act::Refresh { pick, ok }),
        6 => (any::<usize>(), 0u8..8).prop_map(|(pick, stop)| Act::ToolResult { pick, stop }),
        3 => any::<usize>().prop_map(|pick| Act::ToolStarted { pick }),
        2 => any::<usize>().prop_map(|pick| Act::Timer { pick }),
        3 => any::<usize>().prop_map(|pick| Act::Stale { pick }),
        2 => (0u16..3000).prop_map(|ms| Act::Advance { ms }),
    ]
}

fn session(n: u8) -> SessionId {
    SessionId::new(format!("s{n}"))
}

fn pick<T: Clone>(v: &[T], i: usize) -> Option<T> {
    (!v.is_empty()).then(|| v[i % v.len()].clone())
}

/// Applies one action; returns false when it had nothing to act on.
fn apply(h: &mut Host, a: &Act) -> bool {
    let input = match a {
        Act::Submit { session: s, run, own, empty } => {
            // The prompt depends on the run, so a repeated run id is sometimes the same call
            // (idempotent) and sometimes a different one (a conflict).
            let prompt =
                if *empty { String::new() } else { format!("p{}", run.map_or(9, |r| r % 2)) };
            let mut sub = Submit::new(session(*s).as_str(), prompt);
            sub.run_id = run.map(|r| RunId::new(format!("r{r}")));
            sub.mode = own.then_some(Mode::OwnTurn);
            Input::Submit(sub)
        }
        Act::Cancel { session: s, up_to_newest_minus } => {
            let newest = h.engine.newest_seq().map_or(0, |s| s.0);
            let up_to = up_to_newest_minus.map(|m| Seq(newest.saturating_sub(u64::from(m))));
            Input::Cancel { session: session(*s), up_to }
        }
        Act::CancelRun { run } => Input::CancelRun { run_id: RunId::new(format!("r{run}")) },
        Act::Clear { session: s } => Input::ClearQueue { session: session(*s) },
        Act::Shutdown => Input::Shutdown,
        Act::Prepare { pick: i, fail } => {
            let Some((session, seq)) = pick(&h.prepares, *i) else {
                return false;
            };
            if *fail {
                Input::PreparationFailed { session, seq, error: "no model".into() }
            } else {
                Input::Prepared { session, seq, setup: h.setup.clone() }
            }
        }
        Act::Text { pick: i } => {
            let Some(step) = pick(&h.steps, *i) else {
                return false;
            };
            Input::Step { step, event: StepEvent::TextDelta { text: "\ntext".into() } }
        }
        Act::Call { pick: i, id } => {
            let Some(step) = pick(&h.steps, *i) else {
                return false;
            };
            // A tool the host drops on abort, one left to finish, one left to finish once
            // its work began.
            let name = ["ls", "write", "edit"][usize::from(id % 3)];
            let event = StepEvent::ToolCall {
                id: CallId::new(format!("c{id}")),
                name: name.into(),
                input: "{}".into(),
            };
            Input::Step { step, event }
        }
        Act::Finish { pick: i, reason, tokens } => {
            let Some(step) = pick(&h.steps, *i) else {
                return false;
            };
            let reason = match reason {
                0 | 1 => FinishReason::ToolCalls,
                2 => FinishReason::Stop,
                3 => FinishReason::Length,
                4 => FinishReason::ContentFilter,
                _ => FinishReason::Other,
            };
            // The window is 1,000 tokens: 850 and 990 reach the threshold (a fifth left).
            let usage = [None, Some(100), Some(850), Some(990)][usize::from(*tokens)]
                .map(|input_tokens| Usage { input_tokens, output_tokens: 10, ..Usage::default() });
            Input::Step { step, event: StepEvent::Finished { reason, usage } }
        }
        Act::SummaryEvent { pick: i, kind } => {
            let Some(io) = pick(&h.summaries, *i) else { return false };
            let fail = |status| StepEvent::Failed {
                error: ProviderError {
                    status: Some(status),
                    message: "x".into(),
                    ..ProviderError::default()
                },
            };
            let event = match kind {
                0 => StepEvent::TextDelta { text: "summary".into() },
                1 | 2 => StepEvent::Finished {
                    reason: FinishReason::Stop,
                    usage: Some(Usage { output_tokens: 20, ..Usage::default() }),
                },
                3 => fail(400),
                4 => fail(503),
                _ => fail(401),
            };
            Input::Summary { io, event }
        }
        Act::Summarize { session: s } => Input::Summarize { session: session(*s) },
        Act::AgentCall { pick: i, id, prompt } => {
            let Some(step) = pick(&h.steps, *i) else { return false };
            let input = if *prompt { r#"{"prompt":"help"}"# } else { "{}" };
            let event = StepEvent::ToolCall {
                id: CallId::new(format!("a{id}")),
                name: "agent".into(),
                input: input.into(),
            };
            Input::Step { step, event }
        }
        Act::Title { pick: i, kind } => {
            let Some((session, seq)) = pick(&h.titles, *i) else { return false };
            let title = [None, Some("<think>x</think>".to_owned()), Some("Fix the bug".to_owned())]
                [usize::from(*kind)]
            .clone();
            let usage = Some(Usage { cost_micros: 3, ..Usage::default() });
            Input::TitleGenerated { session, seq, title, usage }
        }
        Act::CancelChild { pick: i } => {
            let Some(session) = pick(&h.children, *i) else { return false };
            Input::Cancel { session, up_to: None }
        }
        Act::FailStep { pick: i, class } => {
            let Some(step) = pick(&h.steps, *i) else { return false };
            let (class, status) = [
                (ErrorClass::Provider, Some(400)),
                (ErrorClass::Provider, Some(429)),
                (ErrorClass::Provider, Some(503)),
                (ErrorClass::Provider, Some(401)),
                (ErrorClass::Transport, None),
                (ErrorClass::Incomplete, None),
                (ErrorClass::Unauthorized, None),
            ][usize::from(*class)];
            let error =
                ProviderError { class, status, message: "x".into(), ..ProviderError::default() };
            Input::Step { step, event: StepEvent::Failed { error } }
        }
        Act::Reasoning { pick: i, which } => {
            let Some(step) = pick(&h.steps, *i) else { return false };
            let event = match which {
                0 => StepEvent::ReasoningStart,
                1 => StepEvent::ReasoningDelta { text: "hmm".into() },
                _ => StepEvent::ReasoningEnd { signature: Some("sig".into()) },
            };
            Input::Step { step, event }
        }
        Act::InputStart { pick: i, id } => {
            let Some(step) = pick(&h.steps, *i) else { return false };
            let event =
                StepEvent::ToolInputStart { id: CallId::new(format!("c{id}")), name: "ls".into() };
            Input::Step { step, event }
        }
        Act::BadCall { pick: i, id, unknown } => {
            let Some(step) = pick(&h.steps, *i) else { return false };
            let (name, input) = if *unknown { ("teleport", "{}") } else { ("ls", "{oops") };
            let event = StepEvent::ToolCall {
                id: CallId::new(format!("c{id}")),
                name: name.into(),
                input: input.into(),
            };
            Input::Step { step, event }
        }
        Act::Refresh { pick: i, ok } => {
            let Some(step) = pick(&h.refreshes, *i) else { return false };
            Input::CredentialsRefreshed { attempt: step, ok: *ok }
        }
        Act::ToolResult { pick: i, stop } => {
            let Some((call, _)) = pick(&h.tools, *i) else {
                return false;
            };
            let stop = match stop {
                0 => Some(StopTurn::PermissionDenied),
                1 => Some(StopTurn::HookHalt),
                _ => None,
            };
            Input::ToolResult {
                call,
                result: ToolOutput { content: "r".into(), is_error: false, stop },
            }
        }
        Act::ToolStarted { pick: i } => {
            let Some((call, _)) = pick(&h.tools, *i) else {
                return false;
            };
            Input::ToolStarted { call }
        }
        Act::Timer { pick: i } => {
            let timers: Vec<_> = h.timers.iter().map(|(t, d)| (*t, *d)).collect();
            let Some((timer, deadline)) = pick(&timers, *i) else {
                return false;
            };
            if deadline > h.now {
                h.now = deadline;
            }
            Input::TimerFired { timer }
        }
        Act::Stale { pick: i } => {
            let Some(old) = pick(&h.history, *i) else {
                return false;
            };
            // A replayed firing of a timer that is still armed must respect its deadline.
            if let Input::TimerFired { timer } = &old
                && let Some(deadline) = h.timers.get(timer).copied()
                && deadline > h.now
            {
                h.now = deadline;
            }
            old
        }
        Act::Advance { ms } => {
            h.advance(u64::from(*ms));
            return true;
        }
    };
    h.send(input);
    true
}

fn config() -> Config {
    Config { step_limit: 6, ..Config::default() }
}

/// Droppable tools, one left to finish (`write`), one left to finish once its work began
/// (`edit`), the agent tool, and a small context window.
fn setup() -> turnstile_core::Setup {
    let mut setup = turnstile_core::Setup::with_tools(&["ls", "grep", "bash", "agent"]);
    setup.tools.push(turnstile_core::ToolSpec::new("write").left_to_finish());
    setup.tools.push(turnstile_core::ToolSpec::new("edit").left_to_finish_once_started());
    setup.context_window = 1_000;
    setup
}

/// Whether `child` is a sub-agent session of `ancestor`, at any depth (`parents`: each child
/// session's parent, from the core's `ChildAccepted` writes).
fn descends(
    parents: &std::collections::BTreeMap<SessionId, SessionId>,
    child: &SessionId,
    ancestor: &SessionId,
) -> bool {
    let mut s = child;
    while let Some(p) = parents.get(s) {
        if p == ancestor {
            return true;
        }
        s = p;
    }
    false
}

fn run(acts: &[Act]) -> Host {
    let mut h = Host::new(config());
    h.setup = setup();
    for a in acts {
        apply(&mut h, a);
    }
    h
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 400,
        // Failing cases are saved beside the tests (the package root is the working directory).
        failure_persistence: Some(Box::new(proptest::test_runner::FileFailurePersistence::Direct(
            "proptest-regressions/properties.txt",
        ))),
        ..ProptestConfig::default()
    })]

    /// Every invariant holds after every input (checked inside the harness), and answering the
    /// pending IO with no new client input finishes every submission (I6).
    #[test]
    fn invariants_hold_and_every_submission_finishes(acts in proptest::collection::vec(act(), 1..80)) {
        let mut h = run(&acts);
        prop_assert!(h.drive_to_quiescence(5_000), "pending IO never settled");
        prop_assert_eq!(h.engine.unfinished(), 0);
        prop_assert_eq!(h.auditor.unfinished(), 0);
        let accepted = h.replies.iter().filter(|r| matches!(r, turnstile_core::Reply::Accepted { .. })).count();
        // A sub-agent's submission is accepted by the core itself, without a reply.
        let accepted = accepted + h.children.len();
        prop_assert_eq!(h.finished.len(), accepted, "exactly one completion per accepted submission");
    }

    /// SPEC 4.9: a cancel aborts exactly the running calls the host drops (never one left to
    /// finish, nor one left to finish once started whose work began), and arms the grace timer
    /// exactly when a call left to finish still runs in the turn it aborted; with none, the
    /// turn ends in the cancel's own transition.
    #[test]
    fn a_cancel_waits_only_for_calls_left_to_finish(acts in proptest::collection::vec(act(), 1..80)) {
        let mut h = Host::new(config());
        h.setup = setup();
        for a in &acts {
            let before = h.log.len();
            let began: Vec<turnstile_core::CallIo> =
                h.tools.iter().map(|(c, _)| c.clone()).filter(|c| h.engine.is_tool_started(c)).collect();
            apply(&mut h, a);
            if !matches!(a, Act::Cancel { .. } | Act::CancelRun { .. }) {
                continue;
            }
            let started: Vec<(turnstile_core::CallIo, String)> = h.log[..before]
                .iter()
                .filter_map(|o| match &o.kind {
                    OutputKind::RunTool { call, name, .. } => Some((call.clone(), name.clone())),
                    _ => None,
                })
                .collect();
            let name = |c: &turnstile_core::CallIo| started.iter().find(|(s, _)| s == c).map(|(_, n)| n.clone());
            for o in &h.log[before..] {
                match &o.kind {
                    OutputKind::AbortTool { call } => {
                        let tool = name(call);
                        let droppable = tool.as_deref() == Some("ls")
                            || (tool.as_deref() == Some("edit") && !began.contains(call));
                        prop_assert!(droppable, "only droppable calls are aborted, not {tool:?}");
                    }
                    OutputKind::SetTimer { purpose: TimerPurpose::CancelGrace { session, turn }, .. } => {
                        // The aborted turn's calls, and its sub-agents' (a child session's run
                        // belongs to the agent call of its parent's turn, SPEC 4.11).
                        let parents: std::collections::BTreeMap<SessionId, SessionId> = h.log.iter().filter_map(|o| match &o.kind {
                            OutputKind::Store(turnstile_core::StoreOp::ChildAccepted { session, parent, .. }) => Some((session.clone(), parent.clone())),
                            _ => None,
                        }).collect();
                        let ours = |c: &turnstile_core::CallIo| (c.session == *session && c.turn == *turn) || descends(&parents, &c.session, session);
                        let waits = h.tools.iter().any(|(c, n)| {
                            ours(c) && (n == "write" || (n == "edit" && began.contains(c)))
                        });
                        prop_assert!(waits, "a grace timer without a call left to finish running: timer {session}/{turn:?}, tools {:?}", h.tools);
                        let kept = h.tools.iter().filter(|(c, _)| ours(c));
                        for (c, n) in kept {
                            let finishes = n == "write" || (n == "edit" && began.contains(c));
                            prop_assert!(finishes, "the abort left the droppable call {n} running");
                        }
                    }
                    _ => {}
                }
            }
        }
    }

    /// I12: the same inputs give byte-identical outputs.
    #[test]
    fn the_same_inputs_give_identical_outputs(acts in proptest::collection::vec(act(), 1..60)) {
        let a = serde_json::to_string(&run(&acts).log).expect("json");
        let b = serde_json::to_string(&run(&acts).log).expect("json");
        prop_assert_eq!(a, b);
    }

    /// STYLE 4: host misuse is answered with an error and leaves the engine exactly as it was.
    #[test]
    fn host_misuse_changes_nothing(acts in proptest::collection::vec(act(), 1..40), which in 0u8..3) {
        let mut h = run(&acts);
        h.advance(10);
        h.send(Input::Submit(Submit::new("probe", "p")));
        let before = format!("{:?}", h.engine);
        let result = match which {
            0 => h.engine.handle(Millis(h.now.0 - 1), Input::Shutdown),
            1 => {
                let mut s = Submit::new("probe", "again");
                s.seq = Some(Seq(0)); // below every sequence an engine assigns
                h.engine.handle(h.now, Input::Submit(s))
            }
            _ => match h.timers.iter().find(|(_, d)| **d > h.now) {
                Some((t, _)) => h.engine.handle(h.now, Input::TimerFired { timer: *t }),
                // No timer to misuse: time going backwards instead (now is at least 10 ms).
                None => h.engine.handle(Millis(0), Input::Shutdown),
            },
        };
        prop_assert!(result.is_err());
        prop_assert!(h.engine.poll_output().is_none());
        prop_assert_eq!(before, format!("{:?}", h.engine));
    }
}
