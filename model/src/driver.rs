//! The lockstep host: drives the real core with the concrete input that each abstract
//! [`Action`] stands for, checks the core's own invariant checkers after every input, and
//! projects the core's outputs (SPEC 7) for comparison with the specification's.
//!
//! Like any host, it learns the names of pending IO (step attempts, calls, timers) only from
//! the core's outputs, so an answer always names IO the core asked for, and a stale answer names
//! IO the core aborted, superseded or already had answered (SPEC I13).

use turnstile_core::projection::{Projection, Projector};
use turnstile_core::{
    AGENT_TOOL, AttemptIo, Auditor, CallId, CallIo, Config, Engine, ErrorClass, FinishReason,
    Input, Millis, Mode, Output, OutputKind, ProviderError, RunId, Seq, SessionId, Setup, Start,
    StepEvent, StepIo, StopReason, StopTurn, StoreOp, Submit, SummaryIo, TimerId, TimerPurpose,
    ToolOutput, ToolSpec, Usage,
};

use crate::spec::{
    Action, CHILD, Call, Failure, Kind, Lane, SESSION_NAMES, Spec, Status, Timer, Title, Tool,
    call_id, stop_reason,
};

/// The context window every preparation resolves (SPEC 4.7: the threshold is a fifth of it).
pub const CONTEXT_WINDOW: u64 = 100_000;
/// Input tokens of a step at the threshold, and of one below it.
const HIGH_TOKENS: u64 = 90_000;
const LOW_TOKENS: u64 = 1_000;

/// What went wrong in lockstep.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The core refused an input as host misuse, or failed.
    Host(String),
    /// The core's state or output stream broke an invariant (its public checkers).
    Violation(String),
    /// The host view has no IO for an action the specification offers.
    Unanswerable(String),
}

/// The names of the IO the core asked for, learned from its outputs. Per-lane arrays are
/// indexed like the specification's lanes: the two top-level sessions, then the child.
#[derive(Debug, Default, PartialEq)]
struct View {
    step: [Option<StepIo>; 3],
    summary: [Option<SummaryIo>; 3],
    /// Each session's running calls (the step's first and second, in the order they started).
    tool: [Vec<CallIo>; 3],
    refresh: [Option<AttemptIo>; 3],
    /// The sub-agent's session, named by the core when it started it (SPEC 4.11).
    child: Option<SessionId>,
    timers: Vec<(TimerId, Millis, Timer)>,
    stale_step: Option<StepIo>,
    late_tool: Option<CallIo>,
    dup_tool: Option<CallIo>,
    /// The running calls of the tool left to finish once started ([`ASKING_TOOL`]), as the
    /// core named them, until an abort drops one.
    asking: Vec<CallIo>,
    /// A call of that tool an abort dropped before its work began: a start is stale.
    late_started: Option<CallIo>,
    stale_timer: Option<TimerId>,
    stale_summary: Option<SummaryIo>,
    stale_refresh: Option<AttemptIo>,
    /// The submission each session's pending title request names.
    title: [Option<Seq>; 2],
    /// A title request that was answered or abandoned.
    stale_title: Option<(SessionId, Seq)>,
}

/// `clone_from` keeps the vectors' allocations ([`Lockstep::fork_into`]); both methods list
/// every field, so one added and not copied fails to compile.
impl Clone for View {
    fn clone(&self) -> View {
        let mut v = View::default();
        v.clone_from(self);
        v
    }

    fn clone_from(&mut self, source: &View) {
        let View {
            step,
            summary,
            tool,
            refresh,
            child,
            timers,
            stale_step,
            late_tool,
            dup_tool,
            asking,
            late_started,
            stale_timer,
            stale_summary,
            stale_refresh,
            title,
            stale_title,
        } = self;
        step.clone_from(&source.step);
        summary.clone_from(&source.summary);
        for (t, s) in tool.iter_mut().zip(&source.tool) {
            t.clone_from(s);
        }
        refresh.clone_from(&source.refresh);
        child.clone_from(&source.child);
        timers.clone_from(&source.timers);
        stale_step.clone_from(&source.stale_step);
        late_tool.clone_from(&source.late_tool);
        dup_tool.clone_from(&source.dup_tool);
        asking.clone_from(&source.asking);
        late_started.clone_from(&source.late_started);
        stale_timer.clone_from(&source.stale_timer);
        stale_summary.clone_from(&source.stale_summary);
        stale_refresh.clone_from(&source.stale_refresh);
        title.clone_from(&source.title);
        stale_title.clone_from(&source.stale_title);
    }
}

/// The core, its checkers and the host view, at one state of the exploration.
pub struct Lockstep {
    engine: Engine,
    auditor: Auditor,
    projector: Projector,
    view: View,
    now: Millis,
    /// The sessions' ids, made once.
    sessions: [SessionId; 2],
    /// The outputs of the step being checked; empty between steps (kept for its allocation).
    outs: Vec<Output>,
    /// A mutant of the checker itself: the digest also reads the clock, which differs between
    /// paths of different lengths, so the checker's divergence check must fire.
    #[cfg(feature = "mutants")]
    clock_in_digest: bool,
}

impl Lockstep {
    /// A fresh engine with this configuration.
    ///
    /// # Panics
    /// When the configuration is invalid (the checker's own configurations are valid).
    #[must_use]
    pub fn new(config: &Config) -> Lockstep {
        let engine = match Engine::new(config.clone(), Start::default()) {
            Ok(e) => e,
            Err(e) => panic!("the checker's engine configuration is invalid: {e}"),
        };
        Lockstep {
            engine,
            auditor: Auditor::new(&Start::default()),
            projector: Projector::default(),
            view: View::default(),
            now: Millis(0),
            sessions: SESSION_NAMES.map(SessionId::new),
            outs: Vec::new(),
            #[cfg(feature = "mutants")]
            clock_in_digest: false,
        }
    }

    /// This core with the clock in its digest ([`crate::Options::clock_in_digest`]): a mutant
    /// of the checker's own soundness check, which the check must find.
    #[cfg(feature = "mutants")]
    #[must_use]
    pub fn with_clock_in_digest(mut self, on: bool) -> Lockstep {
        self.clock_in_digest = on;
        self
    }

    /// An independent copy, for exploring another continuation.
    #[must_use]
    pub fn fork(&self) -> Lockstep {
        Lockstep {
            engine: self.engine.fork(),
            auditor: self.auditor.clone(),
            projector: self.projector.clone(),
            view: self.view.clone(),
            now: self.now,
            sessions: self.sessions.clone(),
            outs: Vec::new(),
            #[cfg(feature = "mutants")]
            clock_in_digest: self.clock_in_digest,
        }
    }

    /// Makes `into` a copy of this core, as [`Lockstep::fork`] would, reusing the allocations
    /// `into` already holds: the tree walk steps every transition in a copy it used before.
    pub fn fork_into(&self, into: &mut Lockstep) {
        let Lockstep {
            engine,
            auditor,
            projector,
            view,
            now,
            sessions,
            outs: _, // empty between steps in both
            #[cfg(feature = "mutants")]
            clock_in_digest,
        } = into;
        self.engine.fork_into(engine);
        auditor.clone_from(&self.auditor);
        projector.clone_from(&self.projector);
        view.clone_from(&self.view);
        *now = self.now;
        sessions.clone_from(&self.sessions);
        #[cfg(feature = "mutants")]
        {
            *clock_in_digest = self.clock_in_digest;
        }
    }

    /// Readies this core for another transition from `source` that only spends, after one
    /// such transition from `source` left this core's engine in `source`'s state but for the
    /// time ([`Lockstep::same_future`], which the caller checked): its auditor, projector and
    /// host view become `source`'s again where the transition changed them (an idle cancel
    /// leaves a watermark in the auditor). So the next transition is checked as it would be
    /// in a fresh copy of `source`, without copying the engine. The clock stays: it only moves
    /// forward, and the core decides from the order of inputs and the deadlines it set, not
    /// from the clock's value (what [`Lockstep::same_future`] relies on too).
    pub fn undo_spending(&mut self, source: &Lockstep) {
        debug_assert!(self.same_future(source), "only a core in its source's state");
        if self.auditor != source.auditor {
            self.auditor.clone_from(&source.auditor);
        }
        if self.projector != source.projector {
            self.projector.clone_from(&source.projector);
        }
        if self.view != source.view {
            self.view.clone_from(&source.view);
        }
    }

    /// Performs `action` (offered by `spec`, the state before it) on the core: returns the
    /// concrete input with its time and the projection of the core's outputs. Checks the
    /// transition (the [`Auditor`] over the outputs) and the state it reached
    /// ([`Lockstep::check_state`]).
    ///
    /// # Errors
    /// A [`Fault`] when the core refuses the input, breaks an invariant, or has no IO to answer.
    pub fn step(
        &mut self,
        spec: &Spec,
        action: Action,
    ) -> Result<(Millis, Input, Projection), Fault> {
        let stepped = self.step_unchecked(spec, action)?;
        self.check_state()?;
        Ok(stepped)
    }

    /// [`Lockstep::step`] without the state invariants: the checker runs those once per
    /// distinct state, when it expands the state, rather than on every transition into it.
    ///
    /// # Errors
    /// As [`Lockstep::step`], but never a state invariant.
    pub fn step_unchecked(
        &mut self,
        spec: &Spec,
        action: Action,
    ) -> Result<(Millis, Input, Projection), Fault> {
        let (at, input) = self.concrete(spec, action)?;
        // A debug-build engine asserts its own invariants and panics on a broken one (a mutant
        // does that): that is a violation to report, not a crash of the checker.
        let handled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.engine.handle(at, input.clone())
        }));
        match handled {
            Err(panic) => {
                return Err(Fault::Violation(format!(
                    "the engine panicked: {}",
                    panic_text(&panic)
                )));
            }
            Ok(r) => r.map_err(|e| Fault::Host(e.to_string()))?,
        }
        self.now = at;
        let mut outs = std::mem::take(&mut self.outs);
        outs.extend(std::iter::from_fn(|| self.engine.poll_output()));
        let checked = self.auditor.observe(&input, &outs).map(|()| {
            let projection = self.projector.project(&input, &outs);
            self.learn(&input, &outs);
            projection
        });
        outs.clear();
        self.outs = outs;
        let projection = checked.map_err(|v| Fault::Violation(v.to_string()))?;
        Ok((at, input, projection))
    }

    /// The core's state invariants (SPEC 6), through its public checker.
    ///
    /// # Errors
    /// [`Fault::Violation`] naming the broken invariant.
    pub fn check_state(&self) -> Result<(), Fault> {
        turnstile_core::check_invariants(&self.engine).map_err(|v| Fault::Violation(v.to_string()))
    }

    /// The concrete input (and its time) that `action` stands for in this state, without
    /// performing it.
    ///
    /// # Errors
    /// [`Fault::Unanswerable`] when the core asked for no IO the action could answer.
    pub fn concrete(&self, spec: &Spec, action: Action) -> Result<(Millis, Input), Fault> {
        let input = self.input(spec, action)?;
        Ok((self.time_for(&input), input))
    }

    /// Whether this core has the same future as `other` ([`Engine::same_future`]): its state
    /// is the same but for the time. The checker asks it of a transition that only spends
    /// ([`crate::spec::Spec::subsumes`]), whose target it does not explore: the core must be
    /// left as it was. The driver's own memory is not compared: the IO names it keeps for
    /// stale replies (a spent one is never sent again), and the auditor's history, which a
    /// covered transition extends only by an input that decided nothing (an idle cancel
    /// covers no submission, a stale reply is ignored).
    #[must_use]
    pub fn same_future(&self, other: &Lockstep) -> bool {
        self.engine.same_future(&other.engine)
    }

    /// A digest of what a host can observe of the core through its getters (unfinished
    /// submissions, stopped, newest sequence; per session busy, queue length, active turn, and
    /// how many of its running calls' work began).
    /// Two paths that reach the same specification state must leave equal digests; the checker
    /// compares them (the soundness condition of its deduplication).
    /// With `mirrored`, the sessions are read in the other order: the digest of the mirror
    /// image, which a state merged with its mirror is compared by (`Options::symmetry`).
    #[must_use]
    pub fn observable(&self, mirrored: bool) -> u64 {
        use std::hash::Hasher;
        let e = &self.engine;
        let mut h = crate::encode::KeyHasher::default();
        h.write_u64(e.unfinished());
        h.write_u64(u64::from(e.is_stopped()));
        h.write_u64(e.newest_seq().map_or(0, |q| q.0));
        let tools = &self.view.tool;
        let mut write = |id: &SessionId| {
            h.write_u64(u64::from(e.is_busy(id)));
            h.write_u64(e.queue_len(id) as u64);
            h.write_u64(u64::from(e.has_active_turn(id)));
            let calls = tools[index(id)].iter();
            h.write_u64(calls.filter(|c| e.is_tool_started(c)).count() as u64);
        };
        if mirrored {
            self.sessions.iter().rev().for_each(&mut write);
        } else {
            self.sessions.iter().for_each(&mut write);
        }
        #[cfg(feature = "mutants")]
        if self.clock_in_digest {
            h.write_u64(self.now.0);
        }
        h.finish()
    }

    /// Submissions the core still has unfinished.
    #[must_use]
    pub fn unfinished(&self) -> u64 {
        self.engine.unfinished()
    }

    fn time_for(&self, input: &Input) -> Millis {
        let next = Millis(self.now.0 + 1);
        match input {
            Input::TimerFired { timer } => {
                let due = self.view.timers.iter().find(|t| t.0 == *timer).map(|t| t.1);
                due.map_or(next, |d| Millis(d.0.max(next.0)))
            }
            _ => next,
        }
    }

    fn input(&self, spec: &Spec, action: Action) -> Result<Input, Fault> {
        let v = &self.view;
        let missing = |what: &str| Fault::Unanswerable(format!("{action:?}: no {what} pending"));
        let session = |s: u8| SESSION_NAMES[s as usize];
        // The driver's own ids: an id shared with the core's copy compares by pointer.
        let sid = |s: u8| self.sessions[s as usize].clone();
        let id = |s: u8| match s {
            CHILD => v.child.clone().ok_or_else(|| missing("sub-agent session")),
            s => Ok(sid(s)),
        };
        Ok(match action {
            Action::Submit { session: s, kind } => Input::Submit(submission(s, kind)),
            Action::Accept { .. } | Action::LookUp { .. } => {
                return Err(Fault::Unanswerable(format!(
                    "{action:?}: the external acceptor's assignment sends the core nothing"
                )));
            }
            Action::Arrive => {
                // The channel is in order: the oldest call in flight arrives first.
                let travels =
                    |s: &Status| matches!(s, Status::InFlight { .. } | Status::LookUp { .. });
                let n = (1..=spec.accepted)
                    .find(|&n| travels(&spec.subs[n as usize - 1].status))
                    .ok_or_else(|| missing("call in flight"))?;
                let sub = spec.subs[n as usize - 1];
                let mut submit = match (sub.status, sub.run, sub.mode) {
                    (Status::LookUp { same }, Some(r), _) => resubmission(sub.session, r, same),
                    (_, Some(r), _) => submission(sub.session, Kind::Run(r)),
                    (_, None, Mode::Fold) => submission(sub.session, Kind::Fold),
                    (_, None, Mode::OwnTurn) => submission(sub.session, Kind::Own),
                };
                submit.seq = Some(turnstile_core::Seq(u64::from(n)));
                Input::Submit(submit)
            }
            Action::Resubmit { run } | Action::Conflict { run } => {
                let s = spec.subs.iter().take(spec.accepted as usize).find(|x| x.run == Some(run));
                let s = s.ok_or_else(|| missing("run"))?.session;
                let same = matches!(action, Action::Resubmit { .. });
                Input::Submit(resubmission(s, run, same))
            }
            Action::Invalid => Input::Submit(Submit::new(session(0), "")),
            Action::SubmitChild => Input::Submit(Submit::new(id(CHILD)?.as_str(), "more")),
            Action::Cancel { session: s } => {
                // The core as acceptor knows the newest sequence; an external acceptor names
                // its own newest, which may not have reached the core yet (SPEC 4.10).
                let newest = spec.accepted > 0 && spec.budget.external;
                let up_to = newest.then(|| turnstile_core::Seq(u64::from(spec.accepted)));
                Input::Cancel { session: id(s)?, up_to }
            }
            Action::CancelRun { run } => Input::CancelRun { run_id: RunId::new(run_id(run)) },
            Action::Clear { session: s } => Input::ClearQueue { session: sid(s) },
            Action::Summarize { session: s } => Input::Summarize { session: sid(s) },
            Action::Shutdown => Input::Shutdown,
            Action::Prepared { seq } | Action::StalePrepared { seq } => {
                let s = spec.subs[seq as usize - 1].session;
                // The host reads the store: a title requested but not written is no title.
                let titled = spec.titles[s as usize] == Title::Titled;
                // The `agent` tool needs the core as acceptor (`docs/lifecycle-rules.md`).
                let setup = Setup { titled, ..setup(!spec.budget.external) };
                Input::Prepared { session: sid(s), seq: turnstile_core::Seq(u64::from(seq)), setup }
            }
            Action::Titled { session: s, generated } => {
                let seq = v.title[s as usize].ok_or_else(|| missing("title request"))?;
                let title = generated.then(|| "A title".to_owned());
                Input::TitleGenerated { session: sid(s), seq, title, usage: None }
            }
            Action::StaleTitle => {
                let (session, seq) = v.stale_title.clone().ok_or_else(|| missing("old title"))?;
                Input::TitleGenerated { session, seq, title: None, usage: None }
            }
            Action::PrepFailed { seq } | Action::StalePrepFailed { seq } => {
                Input::PreparationFailed {
                    session: sid(spec.subs[seq as usize - 1].session),
                    seq: turnstile_core::Seq(u64::from(seq)),
                    error: "no model".into(),
                }
            }
            Action::ToolCall { session: s, tool } => {
                let step = v.step[s as usize].clone().ok_or_else(|| missing("step"))?;
                // The step's first call, or its second once the first was streamed.
                let second =
                    matches!(spec.lanes[s as usize], Lane::Turn(t) if t.calls[0] != Call::None);
                let id = CallId::new(call_id(step_of(spec, s), u8::from(second)));
                let name = match tool {
                    Tool::Dropped => DROPPED_TOOL,
                    Tool::Finishes => FINISHING_TOOL,
                    Tool::Asks { .. } => ASKING_TOOL,
                };
                let name = name.into();
                let event = StepEvent::ToolCall { id, name, input: "{}".into() };
                Input::Step { step, event }
            }
            Action::AgentCall { session: s } => {
                let step = v.step[s as usize].clone().ok_or_else(|| missing("step"))?;
                let id = CallId::new(call_id(step_of(spec, s), 0));
                let (name, input) = (AGENT_TOOL.into(), r#"{"prompt":"look"}"#.into());
                Input::Step { step, event: StepEvent::ToolCall { id, name, input } }
            }
            Action::StepDone { session: s, high, odd } => {
                let step = v.step[s as usize].clone().ok_or_else(|| missing("step"))?;
                let streamed = matches!(spec.lanes[s as usize], Lane::Turn(t) if matches!(t.calls[0], Call::Streamed { .. } | Call::Agent { .. }));
                let tool_calls = streamed != odd;
                let reason = if tool_calls { FinishReason::ToolCalls } else { FinishReason::Stop };
                Input::Step { step, event: finished(reason, high) }
            }
            Action::StepFail { session: s, failure } => {
                let step = v.step[s as usize].clone().ok_or_else(|| missing("step"))?;
                Input::Step { step, event: StepEvent::Failed { error: provider_error(failure) } }
            }
            Action::ToolStarted { session: s, call: i } => {
                let id = call_id(step_of(spec, s), i);
                let call = v.tool[s as usize].iter().find(|c| c.call.as_str() == id);
                Input::ToolStarted { call: call.cloned().ok_or_else(|| missing("tool"))? }
            }
            Action::LateStarted => {
                let call = v.late_started.clone().ok_or_else(|| missing("withdrawn ask"))?;
                Input::ToolStarted { call }
            }
            Action::ToolResult { session: s, call: i, stop } => {
                let id = call_id(step_of(spec, s), i);
                let call = v.tool[s as usize].iter().find(|c| c.call.as_str() == id);
                let call = call.cloned().ok_or_else(|| missing("tool"))?;
                Input::ToolResult { call, result: tool_output(stop.then(|| stop_reason(i))) }
            }
            Action::Refreshed { session: s, ok } => {
                let attempt = v.refresh[s as usize].clone().ok_or_else(|| missing("refresh"))?;
                Input::CredentialsRefreshed { attempt, ok }
            }
            Action::SummaryDone { session: s } => {
                let io = v.summary[s as usize].clone().ok_or_else(|| missing("summary"))?;
                Input::Summary { io, event: finished(FinishReason::Stop, false) }
            }
            Action::SummaryFail { session: s, failure } => {
                let io = v.summary[s as usize].clone().ok_or_else(|| missing("summary"))?;
                Input::Summary { io, event: StepEvent::Failed { error: provider_error(failure) } }
            }
            Action::Fire { timer } => {
                let t = v.timers.iter().find(|t| t.2 == timer).ok_or_else(|| missing("timer"))?;
                Input::TimerFired { timer: t.0 }
            }
            Action::StaleStep => {
                let step = v.stale_step.clone().ok_or_else(|| missing("stale step"))?;
                Input::Step { step, event: finished(FinishReason::Stop, false) }
            }
            Action::LateTool => {
                let call = v.late_tool.clone().ok_or_else(|| missing("abandoned call"))?;
                Input::ToolResult { call, result: tool_output(None) }
            }
            Action::DuplicateTool => {
                let call = v.dup_tool.clone().ok_or_else(|| missing("answered call"))?;
                Input::ToolResult { call, result: tool_output(None) }
            }
            Action::StaleSummary => {
                let io = v.stale_summary.clone().ok_or_else(|| missing("retired summary"))?;
                Input::Summary { io, event: finished(FinishReason::Stop, false) }
            }
            Action::StaleRefresh => {
                let attempt = v.stale_refresh.clone().ok_or_else(|| missing("retired refresh"))?;
                Input::CredentialsRefreshed { attempt, ok: true }
            }
            Action::StaleTimer => {
                let timer = v.stale_timer.ok_or_else(|| missing("disarmed timer"))?;
                Input::TimerFired { timer }
            }
        })
    }

    /// Updates the host view from an input sent and the outputs it produced.
    fn learn(&mut self, input: &Input, outs: &[Output]) {
        let v = &mut self.view;
        match input {
            Input::Step { step, event: StepEvent::Finished { .. } | StepEvent::Failed { .. } } => {
                let s = index(&step.session);
                if v.step[s].as_ref() == Some(step) {
                    v.step[s] = None;
                    v.stale_step = Some(step.clone());
                }
            }
            Input::ToolResult { call, .. } => {
                let s = index(&call.session);
                if let Some(i) = v.tool[s].iter().position(|c| c == call) {
                    v.tool[s].remove(i);
                    v.dup_tool = Some(call.clone());
                }
            }
            Input::CredentialsRefreshed { attempt, .. } => {
                let s = index(attempt.session());
                if v.refresh[s].as_ref() == Some(attempt) {
                    v.refresh[s] = None;
                    v.stale_refresh = Some(attempt.clone());
                }
            }
            Input::Summary { io, event: StepEvent::Finished { .. } | StepEvent::Failed { .. } } => {
                let s = index(&io.session);
                if v.summary[s].as_ref() == Some(io) {
                    v.summary[s] = None;
                    v.stale_summary = Some(io.clone());
                }
            }
            Input::TitleGenerated { session, seq, .. } => {
                let s = index(session);
                if v.title[s] == Some(*seq) {
                    v.title[s] = None;
                    v.stale_title = Some((session.clone(), *seq));
                }
            }
            Input::TimerFired { timer } => {
                if let Some(i) = v.timers.iter().position(|t| t.0 == *timer) {
                    v.timers.remove(i);
                    v.stale_timer = Some(*timer);
                }
            }
            _ => {}
        }
        for o in outs {
            v.learn(&o.kind);
        }
    }
}

impl View {
    fn learn(&mut self, out: &OutputKind) {
        match out {
            OutputKind::Store(StoreOp::ChildAccepted { session, .. }) => {
                self.child = Some(session.clone());
            }
            OutputKind::StartStep { step } => {
                let s = index(&step.session);
                if let Some(old) = self.step[s].replace(step.clone()) {
                    self.stale_step = Some(old);
                }
            }
            OutputKind::AbortStep { step } => {
                let s = index(&step.session);
                if self.step[s].as_ref() == Some(step) {
                    self.step[s] = None;
                }
                self.stale_step = Some(step.clone());
            }
            OutputKind::StartSummary { io } => self.summary[index(&io.session)] = Some(io.clone()),
            OutputKind::AbortSummary { io } => {
                self.summary[index(&io.session)] = None;
                self.stale_summary = Some(io.clone());
            }
            OutputKind::RequestTitle { session, seq, .. } => {
                self.title[index(session)] = Some(*seq);
            }
            OutputKind::AbortTitle { session, seq } => {
                self.title[index(session)] = None;
                self.stale_title = Some((session.clone(), *seq));
            }
            OutputKind::RunTool { call, name, .. } => {
                let s = index(&call.session);
                // A new step's calls replace whatever an earlier step left (abandoned calls).
                self.tool[s].retain(|c| c.step == call.step && c.turn == call.turn);
                self.tool[s].push(call.clone());
                if name == ASKING_TOOL {
                    // As above: a session's new step forgets its earlier steps' calls.
                    let earlier = |c: &CallIo| {
                        c.session == call.session && (c.step != call.step || c.turn != call.turn)
                    };
                    self.asking.retain(|c| !earlier(c));
                    self.asking.push(call.clone());
                }
            }
            OutputKind::AbortTool { call } => {
                // A dropped call can never report: its result would be stale (SPEC 4.9, I13).
                let s = index(&call.session);
                if let Some(i) = self.tool[s].iter().position(|c| c == call) {
                    self.late_tool = Some(self.tool[s].remove(i));
                }
                // An asking call dropped before its work began: its start would be stale.
                if let Some(i) = self.asking.iter().position(|c| c == call) {
                    self.late_started = Some(self.asking.remove(i));
                }
            }
            OutputKind::RefreshCredentials { attempt } => {
                self.refresh[index(attempt.session())] = Some(attempt.clone());
            }
            OutputKind::AbortRefresh { attempt } => {
                self.refresh[index(attempt.session())] = None;
                self.stale_refresh = Some(attempt.clone());
            }
            OutputKind::SetTimer { timer, deadline, purpose } => {
                let t = match purpose {
                    TimerPurpose::Retry { session, .. } => Timer::Retry(index(session) as u8),
                    TimerPurpose::CancelGrace { session, .. } => Timer::Grace(index(session) as u8),
                    TimerPurpose::ShutdownDeadline => Timer::Deadline,
                    TimerPurpose::StreamIdle { session, .. } => {
                        Timer::Watchdog(index(session) as u8)
                    }
                    _ => return, // a purpose this checker does not model
                };
                self.timers.push((*timer, *deadline, t));
            }
            OutputKind::CancelTimer { timer } => {
                self.timers.retain(|t| t.0 != *timer);
                self.stale_timer = Some(*timer);
            }
            OutputKind::Store(StoreOp::ToolResult { session, call, synthetic: true, .. }) => {
                // Clean-up gave a running call its synthetic result: the tool was abandoned,
                // and its late result is stale.
                let s = index(session);
                if let Some(i) = self.tool[s].iter().position(|c| c.call == *call) {
                    self.late_tool = Some(self.tool[s].remove(i));
                }
            }
            _ => {}
        }
    }
}

fn panic_text(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into())
}

/// The lane of a session the core named: a top-level session's, or the child's.
fn index(session: &SessionId) -> usize {
    if session.is_child() {
        return CHILD as usize;
    }
    SESSION_NAMES.iter().position(|n| *n == session.as_str()).unwrap_or(0)
}

fn step_of(spec: &Spec, s: u8) -> u8 {
    match spec.lanes[s as usize] {
        Lane::Turn(t) => t.step,
        _ => 0,
    }
}

/// The submission a client makes of `kind` to session `s`.
fn submission(s: u8, kind: Kind) -> Submit {
    let session = SESSION_NAMES[s as usize];
    match kind {
        Kind::Fold => Submit::new(session, "fold").with_mode(Mode::Fold),
        Kind::Own => Submit::new(session, "own").with_mode(Mode::OwnTurn),
        // Asking for `fold` with a RunId checks that the RunId overrides it (SPEC 3).
        Kind::Run(r) => {
            Submit::new(session, run_prompt(r)).with_mode(Mode::Fold).with_run_id(run_id(r))
        }
    }
}

/// A call with the used RunId `r` to session `s`: the same call as its first (a look-up), or
/// a different one (a conflict).
fn resubmission(s: u8, r: u8, same: bool) -> Submit {
    let prompt = if same { run_prompt(r) } else { "other".into() };
    Submit::new(SESSION_NAMES[s as usize], prompt).with_mode(Mode::Fold).with_run_id(run_id(r))
}

/// The RunId of index `r`.
#[must_use]
pub fn run_id(r: u8) -> String {
    format!("r{r}")
}

fn run_prompt(r: u8) -> String {
    format!("run {r}")
}

/// The setup's tool whose calls the host drops on abort (SPEC 4.9).
pub const DROPPED_TOOL: &str = "ls";
/// The setup's tool whose calls an abort must leave to finish.
pub const FINISHING_TOOL: &str = "make";
/// The setup's tool whose calls an abort leaves to finish once their work began, and drops
/// before (a permission ask is withdrawn): [`Tool::Asks`].
pub const ASKING_TOOL: &str = "write";

/// The setup every preparation resolves: the three tools (and the `agent` tool when `agent`),
/// a known context window, a titled session (the driver says whether the session has its
/// title yet, SPEC 4.11).
#[must_use]
pub fn setup(agent: bool) -> Setup {
    let mut tools = vec![
        ToolSpec::new(DROPPED_TOOL),
        ToolSpec::new(FINISHING_TOOL).left_to_finish(),
        ToolSpec::new(ASKING_TOOL).left_to_finish_once_started(),
    ];
    if agent {
        tools.push(ToolSpec::new(AGENT_TOOL));
    }
    Setup { context_window: CONTEXT_WINDOW, titled: true, tools, ..Setup::default() }
}

fn finished(reason: FinishReason, high: bool) -> StepEvent {
    let input_tokens = if high { HIGH_TOKENS } else { LOW_TOKENS };
    let usage = Usage { input_tokens, output_tokens: 10, ..Usage::default() };
    StepEvent::Finished { reason, usage: Some(usage) }
}

fn provider_error(f: Failure) -> ProviderError {
    let (class, status) = match f {
        Failure::Retryable => (ErrorClass::Provider, 503),
        Failure::Fatal => (ErrorClass::Provider, 400),
        Failure::Auth => (ErrorClass::Unauthorized, 401),
    };
    ProviderError {
        class,
        status: Some(status),
        message: "refused".into(),
        ..ProviderError::default()
    }
}

fn tool_output(stop: Option<StopReason>) -> ToolOutput {
    let stop = stop.map(|r| match r {
        StopReason::HookHalt => StopTurn::HookHalt,
        _ => StopTurn::PermissionDenied,
    });
    ToolOutput { stop, ..ToolOutput::ok("done") }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::{fresh_core, successor};
    use crate::{Options, configs};

    /// Everything a core holds, as text: equal texts are equal cores.
    fn contents(c: &Lockstep) -> String {
        let (e, a, p, v, n, s) = (&c.engine, &c.auditor, &c.projector, &c.view, c.now, &c.sessions);
        #[cfg(feature = "mutants")]
        let s = (s, c.clock_in_digest);
        format!("{e:?} {a:?} {p:?} {v:?} {n:?} {s:?}")
    }

    /// After a transition that only spends, `undo_spending` leaves the core its source's copy
    /// but for the clock: the engine's state, and the auditor, projector and host view, so the
    /// tree walk can check the state's next such transition in it. On the first states of
    /// configurations with idle cancels, clears of empty queues, summarizes of busy sessions
    /// and stale replies of every kind, each spending transition in turn in one copy. It fails
    /// when the auditor keeps an idle cancel's watermark.
    #[test]
    fn a_core_undone_after_spending_is_its_source_but_for_the_clock() {
        use crate::search::{only_spends, step_in};
        let (mut undone, mut taught) = (0, 0);
        let mut actions = Vec::new();
        for name in ["wide", "faults", "calls-two", "titles", "agents", "acceptor"] {
            for (spec, source) in first_states(name, 1_500) {
                spec.actions(&mut actions);
                let mut work = source.fork();
                for &a in actions.iter().filter(|&&a| only_spends(&spec, a)) {
                    step_in(&spec, &mut work, a).expect("the correct core conforms");
                    assert!(work.same_future(&source), "{name}: {a:?} changed the engine");
                    let before = format!("{:?}", (&work.auditor, &work.projector, &work.view));
                    work.undo_spending(&source);
                    let after = format!("{:?}", (&work.auditor, &work.projector, &work.view));
                    let wanted =
                        format!("{:?}", (&source.auditor, &source.projector, &source.view));
                    assert_eq!(after, wanted, "{name}: {a:?} in {spec:?}");
                    taught += usize::from(before != wanted);
                    undone += 1;
                }
            }
        }
        assert!(undone >= 5_000, "only {undone} transitions that only spend");
        assert!(taught > 0, "no transition that only spends taught the copy anything");
    }

    /// The first `count` or more states of a breadth-first walk of configuration `name` (not
    /// deduplicated), each with its core.
    fn first_states(name: &str, count: usize) -> Vec<(Spec, Lockstep)> {
        let bounds = configs::named(name).expect("a named configuration");
        let mut states = vec![(Spec::new(bounds.budget), fresh_core(&bounds, &Options::default()))];
        let mut actions = Vec::new();
        let mut next = 0;
        while states.len() < count && next < states.len() {
            let (spec, core) = (states[next].0, states[next].1.fork());
            next += 1;
            spec.actions(&mut actions);
            for &a in &actions {
                if let Ok((s, Some(c))) = successor(&spec, Some(Box::new(core.fork())), a) {
                    states.push((s, *c));
                }
            }
        }
        states
    }

    /// `fork_into` over a core of another state gives exactly what `fork` gives, for the
    /// first states of configurations with turns, calls, summaries, titles, sub-agents and
    /// calls of the tool left to finish once started.
    #[test]
    fn a_copy_into_a_used_core_equals_a_fresh_copy() {
        let mut compared = 0;
        for name in ["default", "calls-two", "titles", "agents", "acceptor", "watchdog", "asks"] {
            let states = first_states(name, 600);
            let n = states.len();
            for i in 0..n {
                let mut used = states[(i * 7 + 3) % n].1.fork();
                states[i].1.fork_into(&mut used);
                assert_eq!(contents(&used), contents(&states[i].1.fork()), "{name}: state {i}");
                compared += 1;
            }
        }
        assert!(compared >= 3000, "only {compared} copies compared");
    }
}
