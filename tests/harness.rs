//! A scripted host for the tests: drives an [`Engine`], runs the state checker and the
//! stream auditor after every input, tracks the IO the engine asked for, and on any failure
//! prints the trace so far so it can be replayed with `turnstile-sim replay`.
//!
//! A [`Host::lenient`] host records every failure in [`Host::violations`] instead, and goes on:
//! for engines that are expected to break the rules (the mutants of SPEC 10).

use std::collections::BTreeMap;

use turnstile_core::trace::{Trace, TraceHeader, TraceLine};
use turnstile_core::{
    AttemptIo, Auditor, CallId, CallIo, Completion, Config, Engine, ErrorClass, FinishReason,
    Input, Millis, Outcome, Output, OutputKind, ProviderError, Reply, Seq, SessionId, Setup, Start,
    StepEvent, StepIo, StoreOp, Submit, SummaryIo, TimerId, TimerPurpose, ToolOutput, ToolSpec,
    Usage, check_invariants,
};

/// The engine with its checkers and the host's view of pending IO.
pub struct Host {
    pub engine: Engine,
    pub auditor: Auditor,
    pub header: TraceHeader,
    pub now: Millis,
    /// Every output, in order.
    pub log: Vec<Output>,
    /// Every input sent, as trace lines.
    pub lines: Vec<TraceLine>,
    /// Preparations requested and not answered or aborted.
    pub prepares: Vec<(SessionId, Seq)>,
    /// Steps started and not finished or aborted.
    pub steps: Vec<StepIo>,
    /// Credential refreshes requested and not answered or aborted.
    pub refreshes: Vec<AttemptIo>,
    /// Summary attempts started and not finished or aborted.
    pub summaries: Vec<SummaryIo>,
    /// What `prepare` answers with (a standard tool set, and a session that has a title so
    /// that no title request clutters tests about other rules).
    pub setup: Setup,
    /// Tools started and not answered. An aborted one is dropped (it never reports); one left
    /// to finish stays until it reports or its turn ends.
    pub tools: Vec<(CallIo, String)>,
    /// Armed timers.
    pub timers: BTreeMap<TimerId, Millis>,
    /// Every IO ever requested, for stale replies.
    pub history: Vec<Input>,
    pub finished: BTreeMap<Seq, Completion>,
    /// Title requests not answered.
    pub titles: Vec<(SessionId, Seq)>,
    /// Sub-agent sessions the engine started.
    pub children: Vec<SessionId>,
    pub replies: Vec<Reply>,
    /// Lenient mode: failures are recorded in `violations` instead of panicking.
    pub lenient: bool,
    /// What a lenient host saw go wrong (engine panics and host errors, state and stream
    /// invariants, second completions), in order.
    pub violations: Vec<String>,
}

/// The setup `prepare` answers with: a standard tool set and a session that has a title (so
/// that no title request clutters tests about other rules). `write` and `edit` are left to
/// finish when their turn is aborted (SPEC 4.9); the host drops the other tools' calls.
pub fn standard_setup() -> Setup {
    let mut setup = Setup { titled: true, ..Setup::with_tools(&["ls", "grep", "bash", "view"]) };
    setup.tools.extend(["write", "edit"].map(|n| ToolSpec::new(n).left_to_finish()));
    setup
}

impl Host {
    pub fn new(config: Config) -> Host {
        Host::with_start(config, Start::default())
    }

    pub fn with_start(config: Config, start: Start) -> Host {
        let header = TraceHeader::new(config.clone(), start.clone());
        Host {
            engine: Engine::new(config, start.clone()).expect("valid start"),
            auditor: Auditor::new(&start),
            header,
            now: Millis(0),
            log: Vec::new(),
            lines: Vec::new(),
            prepares: Vec::new(),
            steps: Vec::new(),
            refreshes: Vec::new(),
            summaries: Vec::new(),
            setup: standard_setup(),
            tools: Vec::new(),
            timers: BTreeMap::new(),
            history: Vec::new(),
            finished: BTreeMap::new(),
            children: Vec::new(),
            titles: Vec::new(),
            replies: Vec::new(),
            lenient: false,
            violations: Vec::new(),
        }
    }

    /// A host that records failures in [`Host::violations`] and goes on instead of panicking.
    /// The engine's own end-of-input invariant panic (debug builds) is caught too: it comes
    /// after the transition's outputs were queued, so they are still drained. Its message is
    /// kept off stderr.
    pub fn lenient(config: Config) -> Host {
        quiet_invariant_panics();
        Host { lenient: true, ..Host::new(config) }
    }

    /// The failures that make outputs meaningless, unlike a broken invariant: a panic inside a
    /// transition (a `debug_assert!` of the engine) or a host error.
    pub fn crashes(&self) -> Vec<&String> {
        self.violations.iter().filter(|v| v.starts_with("crash: ")).collect()
    }

    /// The trace of everything sent so far.
    pub fn trace(&self) -> Trace {
        Trace {
            header: self.header.clone(),
            lines: self.lines.iter().cloned().enumerate().map(|(i, l)| (i + 2, l)).collect(),
        }
    }

    /// Lenient: records `what`; otherwise panics with the trace (see [`Host::die`]).
    fn fault(&mut self, what: String) {
        if self.lenient {
            self.violations.push(what);
        } else {
            self.die(what)
        }
    }

    fn die(&self, what: String) -> ! {
        let path =
            std::env::temp_dir().join(format!("turnstile-failure-{}.jsonl", std::process::id()));
        let _ = std::fs::write(&path, self.trace().to_jsonl());
        panic!(
            "{what}\ntrace written to {} — replay it with: cargo run -p turnstile-sim -- replay {}",
            path.display(),
            path.display()
        );
    }

    /// Sends one input at the current time; checks both checkers; returns its outputs.
    pub fn send(&mut self, input: Input) -> Vec<Output> {
        self.lines.push(TraceLine {
            at: self.now,
            input: input.clone(),
            expect: None,
            expect_projection: None,
        });
        // The engine asserts its invariants in debug builds; catch that panic to save the trace.
        let now = self.now;
        let engine = &mut self.engine;
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            engine.handle(now, input.clone())
        })) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => self.fault(format!("crash: host error: {e}")),
            Err(panic) => {
                let what = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_else(|| "engine panicked".to_owned());
                if what.starts_with(ENGINE_INVARIANT_PANIC) {
                    self.fault(what)
                } else {
                    self.fault(format!("crash: {what}"))
                }
            }
        }
        let mut outs = Vec::new();
        while let Some(o) = self.engine.poll_output() {
            outs.push(o);
        }
        if let Err(v) = check_invariants(&self.engine) {
            self.fault(format!("state invariant {v}"));
        }
        if let Err(v) = self.auditor.observe(&input, &outs) {
            self.fault(format!("stream invariant {v}"));
        }
        self.take_reply(&input);
        for o in &outs {
            self.track(o);
        }
        self.log.extend(outs.iter().cloned());
        outs
    }

    fn take_reply(&mut self, input: &Input) {
        match input {
            Input::Prepared { seq, .. } | Input::PreparationFailed { seq, .. } => {
                self.prepares.retain(|p| p.1 != *seq)
            }
            Input::Step { step, event: StepEvent::Finished { .. } | StepEvent::Failed { .. } } => {
                self.steps.retain(|s| s != step);
            }
            Input::ToolResult { call, .. } => self.tools.retain(|t| t.0 != *call),
            Input::CredentialsRefreshed { attempt, .. } => self.refreshes.retain(|s| s != attempt),
            Input::TitleGenerated { session, seq, .. } => {
                self.titles.retain(|t| t != &(session.clone(), *seq))
            }
            Input::Summary { io, event: StepEvent::Finished { .. } | StepEvent::Failed { .. } } => {
                self.summaries.retain(|s| s != io);
            }
            Input::TimerFired { timer } => {
                self.timers.remove(timer);
            }
            _ => {}
        }
    }

    fn track(&mut self, o: &Output) {
        match &o.kind {
            OutputKind::Reply(r) => self.replies.push(r.clone()),
            OutputKind::Prepare { session, seq } => {
                self.prepares.push((session.clone(), *seq));
                self.history.push(Input::Prepared {
                    session: session.clone(),
                    seq: *seq,
                    setup: Default::default(),
                });
            }
            OutputKind::AbortPreparation { seq, .. } => self.prepares.retain(|p| p.1 != *seq),
            OutputKind::StartStep { step } => {
                self.steps.push(step.clone());
                self.history.push(Input::Step {
                    step: step.clone(),
                    event: StepEvent::Finished { reason: FinishReason::Stop, usage: None },
                });
            }
            OutputKind::AbortStep { step } => self.steps.retain(|s| s != step),
            OutputKind::RefreshCredentials { attempt } => {
                self.refreshes.push(attempt.clone());
                self.history
                    .push(Input::CredentialsRefreshed { attempt: attempt.clone(), ok: true });
            }
            OutputKind::AbortRefresh { attempt } => self.refreshes.retain(|s| s != attempt),
            OutputKind::StartSummary { io } => {
                self.summaries.push(io.clone());
                let event = StepEvent::Finished { reason: FinishReason::Stop, usage: None };
                self.history.push(Input::Summary { io: io.clone(), event });
            }
            OutputKind::AbortSummary { io } => self.summaries.retain(|s| s != io),
            OutputKind::Store(StoreOp::ChildAccepted { session, .. }) => {
                self.children.push(session.clone())
            }
            OutputKind::RequestTitle { session, seq, .. } => {
                self.titles.push((session.clone(), *seq));
                self.history.push(Input::TitleGenerated {
                    session: session.clone(),
                    seq: *seq,
                    title: None,
                    usage: None,
                });
            }
            OutputKind::AbortTitle { session, seq } => {
                self.titles.retain(|t| t != &(session.clone(), *seq))
            }
            OutputKind::AbortTool { call } => self.tools.retain(|t| t.0 != *call),
            OutputKind::RunTool { call, name, .. } => {
                self.tools.push((call.clone(), name.clone()));
                self.history
                    .push(Input::ToolResult { call: call.clone(), result: ToolOutput::ok("late") });
            }
            OutputKind::SetTimer { timer, deadline, .. } => {
                self.timers.insert(*timer, *deadline);
                self.history.push(Input::TimerFired { timer: *timer });
            }
            OutputKind::CancelTimer { timer } => {
                self.timers.remove(timer);
            }
            OutputKind::Finished(c) => {
                if let Some(first) = self.finished.insert(c.seq(), c.clone()) {
                    self.finished.insert(c.seq(), first); // a lenient host keeps the first
                    self.fault(format!("second completion for {}", c.seq()));
                }
                // A finished submission's IO is gone; leftover tool handles are stale now.
                self.tools.retain(|t| t.0.seq != c.seq());
                self.steps.retain(|s| s.seq != c.seq());
                self.refreshes.retain(|s| !matches!(s, AttemptIo::Step(io) if io.seq == c.seq()));
            }
            _ => {}
        }
    }

    pub fn advance(&mut self, ms: u64) {
        self.now = self.now.plus_ms(ms);
    }

    /// Submits and returns the accepted sequence (panics on a rejection).
    pub fn submit(&mut self, submit: Submit) -> Seq {
        let outs = self.send(Input::Submit(submit));
        match &outs.first().map(|o| &o.kind) {
            Some(OutputKind::Reply(Reply::Accepted { seq, .. })) => *seq,
            other => panic!("expected acceptance, got {other:?}"),
        }
    }

    pub fn session_of(&self, seq: Seq) -> SessionId {
        self.prepares
            .iter()
            .find(|p| p.1 == seq)
            .map(|p| p.0.clone())
            .or_else(|| self.steps.iter().find(|s| s.seq == seq).map(|s| s.session.clone()))
            .unwrap_or_else(|| panic!("no pending IO for {seq}"))
    }

    pub fn prepare(&mut self, seq: Seq) -> Vec<Output> {
        let session = self.session_of(seq);
        let setup = self.setup.clone();
        self.send(Input::Prepared { session, seq, setup })
    }

    pub fn fail_preparation(&mut self, seq: Seq, error: &str) -> Vec<Output> {
        let session = self.session_of(seq);
        self.send(Input::PreparationFailed { session, seq, error: error.to_owned() })
    }

    /// The live step of the turn owned by `seq`.
    pub fn step_of(&self, seq: Seq) -> StepIo {
        self.steps
            .iter()
            .find(|s| s.seq == seq)
            .cloned()
            .unwrap_or_else(|| panic!("no live step for {seq}"))
    }

    pub fn stream(&mut self, seq: Seq, event: StepEvent) -> Vec<Output> {
        let step = self.step_of(seq);
        self.send(Input::Step { step, event })
    }

    pub fn text(&mut self, seq: Seq, text: &str) -> Vec<Output> {
        self.stream(seq, StepEvent::TextDelta { text: text.to_owned() })
    }

    pub fn tool_call(&mut self, seq: Seq, id: &str, name: &str) -> Vec<Output> {
        self.stream(
            seq,
            StepEvent::ToolCall {
                id: CallId::new(id),
                name: name.to_owned(),
                input: "{}".to_owned(),
            },
        )
    }

    pub fn finish(&mut self, seq: Seq, reason: FinishReason) -> Vec<Output> {
        self.stream(seq, StepEvent::Finished { reason, usage: None })
    }

    pub fn fail_step(&mut self, seq: Seq, class: ErrorClass) -> Vec<Output> {
        let error = ProviderError { class, message: "boom".to_owned(), ..ProviderError::default() };
        self.stream(seq, StepEvent::Failed { error })
    }

    pub fn tool_result(&mut self, seq: Seq, call: &str, result: ToolOutput) -> Vec<Output> {
        let io = self.call_io(seq, call);
        self.send(Input::ToolResult { call: io, result })
    }

    /// Reports that the work of a running call begins ([`Input::ToolStarted`]: a person
    /// answered its ask) and returns whether the engine lets it begin.
    pub fn tool_started(&mut self, seq: Seq, call: &str) -> bool {
        let io = self.call_io(seq, call);
        let out = self.send(Input::ToolStarted { call: io.clone() });
        assert!(out.is_empty(), "ToolStarted produces no output: {out:?}");
        self.engine.is_tool_started(&io)
    }

    /// The IO name of a running call (panics when there is none: the test is wrong).
    pub fn call_io(&self, seq: Seq, call: &str) -> CallIo {
        self.tools
            .iter()
            .find(|t| t.0.seq == seq && t.0.call.as_str() == call)
            .map(|t| t.0.clone())
            .unwrap_or_else(|| panic!("no running tool {call} for {seq}"))
    }

    /// One tool step whose usage reports `input_tokens` of context: a call to `ls`, the stream's
    /// `tool_calls` finish with that usage, and the tool's result. With a small context window
    /// this is how a test reaches the summarization threshold mid-turn.
    pub fn tool_step_using(&mut self, seq: Seq, call: &str, input_tokens: u64) -> Vec<Output> {
        self.tool_call(seq, call, "ls");
        let usage = Some(Usage { input_tokens, ..Usage::default() });
        self.stream(seq, StepEvent::Finished { reason: FinishReason::ToolCalls, usage });
        self.tool_result(seq, call, ToolOutput::ok("x"))
    }

    /// A complete `agent` call with these JSON arguments, and the stream's `tool_calls` finish.
    pub fn agent_call(&mut self, seq: Seq, call: &str, input: &str) -> Vec<Output> {
        let event = StepEvent::ToolCall {
            id: CallId::new(call),
            name: "agent".into(),
            input: input.into(),
        };
        self.stream(seq, event);
        self.finish(seq, FinishReason::ToolCalls)
    }

    /// The first running summary finishes with this many output tokens.
    pub fn summary_done(&mut self, output_tokens: u64) -> Vec<Output> {
        let io = self.summaries.first().cloned().expect("a summary runs");
        let usage = Some(Usage { output_tokens, ..Usage::default() });
        self.send(Input::Summary {
            io,
            event: StepEvent::Finished { reason: FinishReason::Stop, usage },
        })
    }

    /// The newest stream watchdog timer the engine armed (SPEC 4.5), armed or not any more.
    pub fn watchdog(&self) -> Option<TimerId> {
        self.log.iter().rev().find_map(|o| match &o.kind {
            OutputKind::SetTimer { timer, purpose: TimerPurpose::StreamIdle { .. }, .. } => {
                Some(*timer)
            }
            _ => None,
        })
    }

    /// Advances to the earliest armed timer and fires it.
    pub fn fire_next_timer(&mut self) -> Vec<Output> {
        let (timer, deadline) = self
            .timers
            .iter()
            .min_by_key(|(_, d)| **d)
            .map(|(t, d)| (*t, *d))
            .expect("an armed timer");
        if deadline > self.now {
            self.now = deadline;
        }
        self.send(Input::TimerFired { timer })
    }

    pub fn outcome(&self, seq: Seq) -> Option<Outcome> {
        self.finished.get(&seq).map(Completion::outcome)
    }

    /// Answers pending IO (preparations succeed, steps end with `stop`, tools succeed, timers
    /// fire) until nothing is pending, within `max` inputs. Returns false when it ran out.
    pub fn drive_to_quiescence(&mut self, max: usize) -> bool {
        for _ in 0..max {
            if let Some((session, seq)) = self.prepares.first().cloned() {
                let setup = self.setup.clone();
                self.send(Input::Prepared { session, seq, setup });
            } else if let Some(attempt) = self.refreshes.first().cloned() {
                self.send(Input::CredentialsRefreshed { attempt, ok: true });
            } else if let Some((session, seq)) = self.titles.first().cloned() {
                let title = Some("A generated title".to_owned());
                self.send(Input::TitleGenerated { session, seq, title, usage: None });
            } else if let Some(io) = self.summaries.first().cloned() {
                let usage = Some(Usage { output_tokens: 100, ..Usage::default() });
                self.send(Input::Summary {
                    io,
                    event: StepEvent::Finished { reason: FinishReason::Stop, usage },
                });
            } else if let Some(step) = self.steps.first().cloned() {
                self.send(Input::Step {
                    step,
                    event: StepEvent::Finished { reason: FinishReason::Stop, usage: None },
                });
            } else if let Some((call, _)) = self.tools.first().cloned() {
                self.send(Input::ToolResult { call, result: ToolOutput::ok("ok") });
            } else if !self.timers.is_empty() {
                self.fire_next_timer();
            } else {
                return true;
            }
        }
        false
    }

    /// The kinds of the outputs, as short names (for snapshots).
    pub fn kinds(outs: &[Output]) -> Vec<String> {
        outs.iter().map(|o| short(&o.kind)).collect()
    }
}

/// How the engine's own invariant panic (debug builds, end of `handle`) begins.
const ENGINE_INVARIANT_PANIC: &str = "invariant violated after an input";

/// Keeps the engine's end-of-input invariant panics off stderr (lenient hosts catch them);
/// every other panic still reaches the previous hook.
fn quiet_invariant_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let msg = info.payload().downcast_ref::<String>().map(String::as_str);
            if !msg.is_some_and(|m| m.starts_with(ENGINE_INVARIANT_PANIC)) {
                previous(info);
            }
        }));
    });
}

/// A one-line description of an output, for snapshots and assertions.
pub fn short(k: &OutputKind) -> String {
    let v = serde_json::to_value(k).expect("serialises");
    let ty = v["type"].as_str().unwrap_or("?").to_owned();
    match k {
        OutputKind::Reply(r) => format!(
            "reply {}",
            serde_json::to_value(r).expect("json")["reply"].as_str().unwrap_or("?")
        ),
        OutputKind::Store(op) => {
            let v = serde_json::to_value(op).expect("json");
            let seq = op.seq().map(|s| format!(" #{s}")).unwrap_or_default();
            format!("store {}{seq}", v["op"].as_str().unwrap_or("?"))
        }
        OutputKind::Finished(c) => format!(
            "finished #{} {:?}{}",
            c.seq(),
            c.outcome(),
            if c.is_run_complete() { " +RunComplete" } else { "" }
        ),
        OutputKind::Prepare { seq, .. } | OutputKind::AbortPreparation { seq, .. } => {
            format!("{ty} #{seq}")
        }
        OutputKind::StartStep { step } | OutputKind::AbortStep { step } => {
            format!(
                "{ty} #{} turn {} step {} attempt {}",
                step.seq, step.turn.0, step.step, step.attempt
            )
        }
        OutputKind::RunTool { call, .. } | OutputKind::AbortTool { call } => {
            format!("{ty} #{} {}", call.seq, call.call)
        }
        _ => ty,
    }
}
