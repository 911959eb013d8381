//! The executable specification: SPEC sections 4 and 5 as a small, naive state machine over an
//! abstract version of the core's input alphabet.
//!
//! Written from SPEC, not from the core's code. Message contents, usage numbers and costs are
//! abstracted away; everything that decides outcomes, RunCompletes and ordering is kept. How
//! each rule maps here:
//!
//! | SPEC | here |
//! |---|---|
//! | 4.1 acceptance, RunId idempotency (also during shutdown), the empty-prompt validation | `Spec::submit`, `Spec::resubmit` |
//! | 4.1 preparation and its failure | `Prepared` / `PrepFailed` in `Spec::apply` |
//! | 4.2 admission in acceptance order | `Spec::admit`: only the queue's head, only when prepared and the lane is idle |
//! | 4.3 folding at every step start | `Spec::start_step` |
//! | 4.4 steps, any finish reason; up to two tool calls per step (`Budget::second_calls`), ids `c<step>` and `c<step>b`, each its own tool ([`Tool`]: dropped on abort, left to finish, or left to finish once started); all start when the stream finishes, report in any order, and the step ends with its last result | [`Turn::calls`], `ToolCall`, `StepDone`, `Spec::tool_result` |
//! | 4.6 case 1 with several stop results (the first call's a permission denial, the second's a hook halt): the first of the step's calls in streaming order that asked to stop names the reason, whatever order the results came in | `Spec::tool_result`, [`stop_reason`] |
//! | 4.5 retries (4 attempts) and one refresh per step | [`Attempt`], `StepFail`, `Refreshed`, the retry timer |
//! | 4.5 the stream watchdog: one timer per attempt of a step or summary, armed at its start, disarmed at its end; content moves it without an output; a firing without content since it was armed aborts the attempt and fails it as a retryable transport error (the 4th: `failed`, `transport`) | `Timer::Watchdog`, `Attempt::content`, `Spec::watchdog_fired`, the `stalls` budget |
//! | 4.6 ends of a turn and the hand-off | `Spec::step_ended` (precedence, the no-progress guard), `Spec::end_turn` |
//! | 4.6 the step limit (`Budget::step_limit`, the core's `Config::step_limit`): counted per submission across its resumed turns ([`Sub::steps`]), after a stop result and before every other end; a failure that replaces only a finish that was not final, then housekeeping at the threshold | `Spec::step_ended` |
//! | 4.7 summarization, pause, resume, manual | `Spec::summary_done`, `Spec::summary_failed`, `Summarize` |
//! | 4.9 clean-up and the cancel grace: every droppable running call is aborted (each call by its own tool's policy), the calls left to finish are waited for until the last reports or the grace (the deadline) fires; at clean-up every call without a result gets its synthetic result, after the real ones, in streaming order; a result for an aborted or abandoned call is stale | `Spec::abort_turn`, `Spec::cleanup`, `Spec::synthesize`, `LateTool` |
//! | 4.9 a tool left to finish once started (`Budget::asking`, [`Tool::Asks`]): its running call may wait before its work begins (a permission ask); the host reports the start (`ToolStarted`, no output) only while the step's tools run and the call runs unstarted, and its result may come without one (the ask denied); until then an abort drops the call like a droppable one (`AbortTool`, nothing waits, a start that still comes is stale), after it the abort leaves it to finish | `Call::left_to_finish`, `Call::dropped_by_abort`, `ToolStarted`, `Spec::abort_turn`, `LateStarted` |
//! | 4.10 cancel, cancel_run, clear_queue, shutdown | `Spec::cancel_sub`, `Clear`, `Spec::shutdown` |
//! | 4.1 and 4.10 an external acceptor (`Budget::external`): it numbers every call (`Accept`, and `LookUp` for a used RunId, which leaves a gap in what the core sees), the calls reach the core in order (`Arrive`, a pending host reply for I6); a cancel reaches it at once, naming the acceptor's newest sequence, and covers the session's calls still in flight, which end `cancelled` on entry; nothing numbered after it is covered, and a watermark is never dropped while something it covers can arrive | [`Status::InFlight`], `Spec::accept`, `Spec::arrive`, `Spec::cancel` |
//! | 4.11 titles (`Budget::untitled`): requested at a session's first activation when it has none and none is pending, answered whenever the host likes (generated or not: the same write), never waited for and never cancelled with the turn; shutdown abandons a pending request and writes the prompt's title | [`Title`], `Spec::admit`, `Titled`, `Spec::abandon_title` |
//! | 4.11 sub-agents (`Budget::agents`): an `agent` call (a top-level step's only call) starts, when the stream finishes, a turn in the child session ([`CHILD`]): the child submission takes the next sequence, no RunId, no preparation, never queued, no title; its steps are any turn's (tools, retries, failures, the watchdog), but make one call each and never summarize; each step's usage write adds its cost to the parent in the same write (a [`Rec::Cost`] naming the parent); the child's end, whatever its outcome, is the parent's call's result, written as reported; cancel(child) ends only the child and the parent goes on; an abort of the parent (cancel, cancel_run, shutdown) aborts the child, and waits for its end up to the grace or the deadline, where the parent goes first and the child's end is stale; a submission to the child is refused | [`Child`], `Call::Agent`, `Spec::delegate`, `Spec::child_ended`, `Spec::abort_turn` |
//! | 5 the completion contract | `Spec::decide` and `publish`, the only places an outcome is set (`publish` panics on a second decision) |
//! | I13 stale replies | the `Stale*` actions, `LateTool`, `DuplicateTool` and `LateStarted`: allowed when such IO exists, and change nothing (a watchdog firing after its attempt ended, a late event of an attempt it aborted, a start of a call whose ask an abort withdrew) |
//!
//! Not modelled (the core's own tests and traces cover them): a sub-agent's text (which result
//! text its end gives) and an `agent` call without a prompt or beside another call, more than
//! one sub-agent per exploration, a title's cost (abstracted with all costs), loop detection (it
//! needs 10 steps), more than two tool calls per step (and unfinished calls, invalid JSON,
//! repeated ids, unknown tools: SPEC 4.4's synthetic results at the stream's end), validation
//! other than the empty prompt, streaming text and
//! reasoning (the step's tool call is the content event that extends the watchdog; a summary
//! streams no content here, so its watchdog can only stall), the watchdog's timeout (the
//! default, 300 s; time itself is abstract: a firing's verdict depends only on whether content
//! arrived since the timer was armed, never on the clock), and usage numbers. With an external
//! acceptor the model keeps no watermark: each call in flight knows whether a cancel covers it,
//! which is what the watermark decides; its lifetime is the core's own invariant checker's.
//! Left out with an external acceptor: the empty prompt (validation is the same with either
//! acceptor) and an acceptor that skips sequences on its own (a RunId look-up makes the gap).
//!
//! Each transition also says what the core must output, as a [`Projection`] (SPEC 7): the model
//! writes the records of a session in the order SPEC 4.9, 4.12 and 7 prescribe.

use turnstile_core::projection::{FinishP, Io, Projection, Rec, Record, ReplyP, TimerP, Why};
use turnstile_core::{ErrorKind, Mode, Outcome, Seq, StopReason};

pub use crate::action::{Action, Failure, Kind, Timer};
pub use crate::state::{
    Attempt, AttemptPhase, Budget, Call, Cause, Child, Closing, Lane, Status, Sub, Summary, Title,
    Tool, Turn, TurnPhase,
};

/// Sessions the model knows, by index; their ids are these names.
pub const SESSION_NAMES: [&str; 2] = ["a", "b"];
/// The lane of the sub-agent's child session (SPEC 4.11), after the two top-level ones. Its id
/// is the core's `m<message>$$c<step>`; a projection names it `$$c<step>` ([`Child`]).
pub const CHILD: u8 = 2;
/// Lanes: the two top-level sessions, then the child.
pub const LANES: u8 = 3;
/// Submissions the model can hold (sequences 1 to this).
pub const MAX_SUBS: usize = 6;
/// RunIds the model can use, by index; their ids are `r0`, `r1`, ...
pub const MAX_RUNS: usize = 3;
/// Attempts per step or summary before the failure is final (SPEC 4.5, section 8).
pub const ATTEMPTS: u8 = 4;
/// Summarizations without progress before a submission fails `context_window` (SPEC 4.7).
pub const PAUSES_WITHOUT_PROGRESS: u8 = 2;

/// The whole specification state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Spec {
    /// Submissions by sequence - 1; the first `accepted` are real.
    pub subs: [Sub; MAX_SUBS],
    /// How many sequences were assigned: by the core at acceptance, or by an external acceptor
    /// (then the newest may still be in flight, and some never become submissions of the core:
    /// [`Status::InFlight`], [`Status::LookUp`], [`Status::Answered`]).
    pub accepted: u8,
    /// Lanes by session index; the last is the child's ([`CHILD`]).
    pub lanes: [Lane; 3],
    /// Shutdown's progress.
    pub closing: Closing,
    /// What is left to choose.
    pub budget: Budget,
    /// Whether a stale reply of each kind could be sent: step, late tool, duplicate tool, timer,
    /// summary, refresh, title, late start.
    pub stale: [bool; 8],
    /// The sessions' titles (SPEC 4.11).
    pub titles: [Title; 2],
    /// The sub-agent, once the `agent` call started it (at most one per exploration).
    pub child: Option<Child>,
}

const STALE_STEP: usize = 0;
const LATE_TOOL: usize = 1;
const DUP_TOOL: usize = 2;
const STALE_TIMER: usize = 3;
const STALE_SUMMARY: usize = 4;
const STALE_REFRESH: usize = 5;
const STALE_TITLE: usize = 6;
const LATE_STARTED: usize = 7;

/// The call id of the model's step `step`'s first call (`call` 0) or second (`call` 1).
#[must_use]
pub fn call_id(step: u8, call: u8) -> String {
    // Without the formatting machinery for the one-digit steps every configuration uses: the
    // checker names calls on most transitions.
    let mut id = String::with_capacity(4);
    id.push('c');
    match char::from_digit(u32::from(step), 10) {
        Some(digit) => id.push(digit),
        None => id.push_str(&step.to_string()),
    }
    if call != 0 {
        id.push('b');
    }
    id
}

/// The stop reason of a stop result of the step's call `call` (the model's first call is
/// denied permission, its second halted by a hook: SPEC 4.6 case 1 has both).
#[must_use]
pub fn stop_reason(call: u8) -> StopReason {
    if call == 0 { StopReason::PermissionDenied } else { StopReason::HookHalt }
}

/// Collects the projected outputs of one transition, or nothing (exploration without
/// conformance).
#[derive(Debug, Default)]
pub struct Emit {
    /// Whether to collect.
    pub on: bool,
    /// The collected projection (canonicalized by [`Emit::finish`]).
    pub p: Projection,
    /// The state's sub-agent, which names the child session (kept by [`Spec::apply`]).
    child: Option<Child>,
}

impl Emit {
    /// Collects a transition's projection when `on`, else nothing.
    #[must_use]
    pub fn new(on: bool) -> Emit {
        Emit { on, ..Emit::default() }
    }

    fn rec(&mut self, session: u8, rec: Rec) {
        if self.on {
            let session = name(self.child, session);
            self.p.records.push(Record { session, rec });
        }
    }

    fn io(&mut self, io: Io) {
        if self.on {
            self.p.io.push(io);
        }
    }

    fn reply(&mut self, r: ReplyP) {
        if self.on {
            self.p.reply = Some(r);
        }
    }

    /// The canonical projection of the transition.
    #[must_use]
    pub fn finish(mut self) -> Projection {
        self.p.canonicalize();
        self.p
    }
}

/// A session's name in a projection: a top-level session's id, or the child's label
/// (`$$<call id>`, as the core's projection names a sub-agent session).
fn name(child: Option<Child>, session: u8) -> String {
    match (session, child) {
        (CHILD, Some(c)) => format!("$${}", call_id(c.step, 0)),
        (CHILD, None) => unreachable!("the child session is named once the sub-agent starts"),
        (s, _) => SESSION_NAMES[s as usize].to_owned(),
    }
}

/// True for a call an aborted turn waits for: one left to finish (of the tool left to finish,
/// or of the one left to finish once started, after its work began), or a sub-agent, whose end
/// (aborted with its parent) is the call's result (SPEC 4.9, 4.11).
fn holds(c: Call) -> bool {
    c.left_to_finish() || c == Call::Agent { running: true }
}

/// True for a call that has no result yet while its step's tools run.
fn pending(c: Call) -> bool {
    matches!(c, Call::Running { .. } | Call::Agent { running: true })
}

fn seq(n: u8) -> Seq {
    Seq(u64::from(n))
}

impl Spec {
    /// The initial state with this budget.
    ///
    #[must_use]
    pub fn new(budget: Budget) -> Spec {
        let sub = Sub {
            session: 0,
            mode: Mode::Fold,
            run: None,
            status: Status::Done(Outcome::Completed),
            pauses: 0,
            steps: 0,
        };
        let title = if budget.untitled > 0 { Title::Untitled } else { Title::Titled };
        Spec {
            subs: [sub; MAX_SUBS],
            accepted: 0,
            lanes: [Lane::Idle; 3],
            closing: Closing::Open,
            budget,
            stale: [false; 8],
            titles: [title; 2],
            child: None,
        }
    }

    fn name(&self, s: u8) -> String {
        name(self.child, s)
    }

    /// The mirror image: the same state with sessions `a` and `b` swapped (their submissions,
    /// lanes and titles, and a sub-agent's parent). Sequences, RunIds, budgets and stale flags
    /// are the system's, not a session's, and stay. SPEC's rules never depend on a session's
    /// name, so a state and its mirror have mirrored futures: the checker may explore one of
    /// the two (`Options::symmetry`).
    #[must_use]
    pub fn mirrored(&self) -> Spec {
        let swap = |s: u8| match s {
            0 => 1,
            1 => 0,
            other => other,
        };
        let mut m = *self;
        for sub in m.subs.iter_mut().take(m.accepted as usize) {
            sub.session = swap(sub.session);
        }
        m.lanes.swap(0, 1);
        m.titles.swap(0, 1);
        if let Some(c) = &mut m.child {
            c.parent = swap(c.parent);
        }
        // A forgotten session stays forgotten in the mirror image.
        m.forget();
        m
    }

    /// Whether every future of `smaller` is one of this state's, and `smaller` is not this
    /// state: it is this state with less left to choose (budgets spent, stale replies that can
    /// no longer be sent) and what that makes it forget ([`Spec::spent`]). A transition into
    /// such a state (an idle cancel, a clear of an empty queue, a stale reply: it spends and
    /// changes nothing else) leads nowhere its source does not, so the checker need not
    /// explore its target (`Options::subsumption`). No rule reads a budget that can be spent
    /// beyond whether anything is left of it (the fixed parts, such as the sessions and the
    /// step limit, must be equal), nor a stale flag beyond whether it is set; the test
    /// `a_state_with_less_left_to_choose_has_no_other_future` checks that on the first states
    /// and on random deep states of every configuration.
    #[must_use]
    pub fn subsumes(&self, smaller: &Spec) -> bool {
        // What spending and forgetting leave alone (all but the budgets, the stale flags and
        // the submissions) must be equal: most transitions change it, and this says so at
        // once (the comparison with `spent` below says it too).
        let kept = |s: &Spec| (s.accepted, s.lanes, s.closing, s.titles, s.child);
        if kept(self) != kept(smaller) {
            return false;
        }
        let fewer_stale =
            self.stale.iter().zip(&smaller.stale).all(|(&mine, &theirs)| mine || !theirs);
        // Not this state itself: a spending transition tells so by its budget at once.
        let itself =
            (smaller.budget, smaller.stale) == (self.budget, self.stale) && smaller == self;
        !itself
            && smaller.budget.within(&self.budget)
            && fewer_stale
            && self.spent(smaller.budget, smaller.stale) == *smaller
    }

    /// Whether the transition by `a` into `next` only spends, so the checker need not explore
    /// `next` (`Options::subsumption`): this state subsumes `next`, and the transition is not a
    /// cancel sent to an external acceptor's core. Such a cancel names a watermark (SPEC
    /// 4.10), which the core may hold while it cannot tell whether something it covers can
    /// still arrive (whose calls travel, whether a refused arrival used a sequence up), and the
    /// specification leaves the watermark's lifetime to the core's own checks.
    #[must_use]
    pub fn only_spends(&self, a: Action, next: &Spec) -> bool {
        let watermark = self.budget.external && matches!(a, Action::Cancel { .. });
        !watermark && self.subsumes(next)
    }

    /// This state with `budget` left and only the `stale` replies possible instead of its
    /// own, and what that makes it forget (the session of the newest ended submission, once
    /// no stale reply is left).
    #[must_use]
    pub fn spent(&self, budget: Budget, stale: [bool; 8]) -> Spec {
        let mut less = *self;
        less.budget = budget;
        less.stale = stale;
        less.forget();
        less
    }

    fn timer_p(&self, t: Timer) -> TimerP {
        match t {
            Timer::Retry(s) => TimerP::Retry { session: self.name(s) },
            Timer::Grace(s) => TimerP::Grace { session: self.name(s) },
            Timer::Deadline => TimerP::Deadline,
            Timer::Watchdog(s) => TimerP::Watchdog { session: self.name(s) },
        }
    }

    fn sub(&self, n: u8) -> &Sub {
        &self.subs[n as usize - 1]
    }

    fn sub_mut(&mut self, n: u8) -> &mut Sub {
        &mut self.subs[n as usize - 1]
    }

    /// The accepted sequences, ascending.
    fn seqs(&self) -> impl DoubleEndedIterator<Item = u8> + use<> {
        1..=self.accepted
    }

    /// True when the core holds the submission and it has no outcome yet (what the core's
    /// `unfinished` counts: not one still in flight from an external acceptor).
    #[must_use]
    pub fn unfinished(&self, n: u8) -> bool {
        matches!(
            self.sub(n).status,
            Status::Preparing | Status::Prepared | Status::Active | Status::Paused
        )
    }

    fn in_flight(&self, n: u8) -> bool {
        matches!(self.sub(n).status, Status::InFlight { .. })
    }

    /// The oldest call on its way from the external acceptor to the core, if any.
    fn next_arrival(&self) -> Option<u8> {
        let travels =
            |n| matches!(self.sub(n).status, Status::InFlight { .. } | Status::LookUp { .. });
        self.seqs().find(|&n| travels(n))
    }

    /// True when any submission has no outcome yet, including one still in flight from an
    /// external acceptor (SPEC I6: its arrival is pending, and it must end too).
    #[must_use]
    pub fn any_unfinished(&self) -> bool {
        self.seqs().any(|n| self.unfinished(n) || self.in_flight(n))
    }

    fn waiting(&self, n: u8) -> bool {
        matches!(self.sub(n).status, Status::Preparing | Status::Prepared)
    }

    /// The session's waiting submissions in sequence order (SPEC 4.2 queue).
    fn queue(&self, s: u8) -> Vec<u8> {
        self.seqs().filter(|&n| self.sub(n).session == s && self.waiting(n)).collect()
    }

    fn run_seq(&self, run: u8) -> Option<u8> {
        self.seqs().find(|&n| self.sub(n).run == Some(run))
    }

    /// SPEC 3 "Busy": an active turn (aborting included), a summarization, or a waiting entry.
    #[must_use]
    pub fn busy(&self, s: u8) -> bool {
        self.lanes[s as usize] != Lane::Idle || !self.queue(s).is_empty()
    }

    /// Every action the host protocol allows in this state, in a fixed order.
    pub fn actions(&self, out: &mut Vec<Action>) {
        out.clear();
        self.client_actions(out);
        self.host_actions(out);
        self.stale_actions(out);
    }

    fn client_actions(&self, out: &mut Vec<Action>) {
        let b = &self.budget;
        // With an external acceptor a client's submission goes to the acceptor instead.
        let submit = |session, kind| match b.external {
            false => Action::Submit { session, kind },
            true => Action::Accept { session, kind },
        };
        // A streamed `agent` call holds the slot its child submission takes when the stream
        // finishes.
        let agent =
            |l: &Lane| matches!(l, Lane::Turn(t) if t.calls[0] == Call::Agent { running: false });
        let held = self.lanes.iter().filter(|l| agent(l)).count();
        let free = (self.accepted as usize) + held < MAX_SUBS;
        for session in 0..b.sessions {
            if b.submits > 0 && free {
                out.push(submit(session, Kind::Fold));
                out.push(submit(session, Kind::Own));
                let fresh = (0..MAX_RUNS as u8).find(|&r| self.run_seq(r).is_none());
                if let (Some(run), true) = (fresh, b.runs > 0) {
                    out.push(submit(session, Kind::Run(run)));
                }
            }
            if b.cancels > 0 {
                out.push(Action::Cancel { session });
            }
            if b.clears > 0 {
                out.push(Action::Clear { session });
            }
            if b.summarizes > 0 {
                out.push(Action::Summarize { session });
            }
        }
        for run in 0..MAX_RUNS as u8 {
            if self.run_seq(run).is_some() {
                if b.replays > 0 && !b.external {
                    out.push(Action::Resubmit { run });
                    out.push(Action::Conflict { run });
                }
                if b.replays > 0 && b.external && (self.accepted as usize) < MAX_SUBS {
                    out.push(Action::LookUp { run, same: true });
                    out.push(Action::LookUp { run, same: false });
                }
                if b.cancel_runs > 0 {
                    out.push(Action::CancelRun { run });
                }
            }
        }
        // Validation is the same with either acceptor: the empty prompt only with the core's.
        if b.replays > 0 && !b.external {
            out.push(Action::Invalid);
        }
        // cancel(child) while the sub-agent runs (SPEC 4.11); a submission to the child
        // session is refused once it exists (SPEC 4.1).
        if b.cancels > 0 && matches!(self.lanes[CHILD as usize], Lane::Turn(_)) {
            out.push(Action::Cancel { session: CHILD });
        }
        if b.replays > 0 && self.child.is_some() {
            out.push(Action::SubmitChild);
        }
        if b.shutdowns > 0 && self.closing == Closing::Open {
            out.push(Action::Shutdown);
        }
    }

    fn host_actions(&self, out: &mut Vec<Action>) {
        let b = &self.budget;
        if self.next_arrival().is_some() {
            out.push(Action::Arrive);
        }
        for n in self.seqs() {
            if self.sub(n).status == Status::Preparing {
                out.push(Action::Prepared { seq: n });
                if b.prep_failures > 0 {
                    out.push(Action::PrepFailed { seq: n });
                }
            }
        }
        for session in 0..LANES {
            match self.lanes[session as usize] {
                Lane::Turn(t) => self.turn_actions(session, t, out),
                Lane::Summary(sm) => self.summary_actions(session, sm.attempt, out),
                Lane::Idle => {}
            }
        }
        if self.closing == (Closing::Draining { deadline: true }) {
            out.push(Action::Fire { timer: Timer::Deadline });
        }
        // A title request is answered whenever the host likes: nothing waits for it.
        for session in 0..2u8 {
            if let Title::Requested { .. } = self.titles[session as usize] {
                out.push(Action::Titled { session, generated: true });
                out.push(Action::Titled { session, generated: false });
            }
        }
    }

    fn turn_actions(&self, session: u8, t: Turn, out: &mut Vec<Action>) {
        let b = &self.budget;
        match t.phase {
            TurnPhase::Step(a) => self.attempt_actions(session, a, out, |out| {
                // The first call, then (a budget apart) a second after it; a sub-agent makes
                // one call per step.
                let first = t.calls[0] == Call::None && b.tool_calls > 0;
                let second = matches!(t.calls, [Call::Streamed { .. }, Call::None])
                    && b.second_calls > 0
                    && session != CHILD;
                if first || second {
                    out.push(Action::ToolCall { session, tool: Tool::Dropped });
                    if b.finishing > 0 {
                        out.push(Action::ToolCall { session, tool: Tool::Finishes });
                    }
                    if b.asking > 0 {
                        let tool = Tool::Asks { started: false };
                        out.push(Action::ToolCall { session, tool });
                    }
                }
                // An `agent` call, a top-level step's only one (sub-agents are not offered the
                // tool: depth 1); the child submission takes the next sequence.
                let slot = (self.accepted as usize) < MAX_SUBS;
                if t.calls[0] == Call::None && b.agents > 0 && session != CHILD && slot {
                    out.push(Action::AgentCall { session });
                }
                out.push(Action::StepDone { session, high: false, odd: false });
                if b.highs > 0 {
                    out.push(Action::StepDone { session, high: true, odd: false });
                }
                if b.odd_finishes > 0 {
                    out.push(Action::StepDone { session, high: false, odd: true });
                }
                self.failures(
                    session,
                    |session, failure| Action::StepFail { session, failure },
                    out,
                );
            }),
            TurnPhase::Tool => {
                // The running calls report in any order; an asking call's work may begin
                // first, or never (its ask denied, its result comes without work).
                for call in 0..2u8 {
                    if let Call::Running { tool } = t.calls[call as usize] {
                        if tool == (Tool::Asks { started: false }) {
                            out.push(Action::ToolStarted { session, call });
                        }
                        out.push(Action::ToolResult { session, call, stop: false });
                        if b.stops > 0 {
                            out.push(Action::ToolResult { session, call, stop: true });
                        }
                    }
                }
            }
            TurnPhase::Aborting { grace, .. } => {
                // Only calls left to finish still report (a dropped one is stale, I13); what
                // they say no longer decides anything.
                for call in 0..2u8 {
                    if t.calls[call as usize].left_to_finish() {
                        out.push(Action::ToolResult { session, call, stop: false });
                    }
                }
                if grace {
                    out.push(Action::Fire { timer: Timer::Grace(session) });
                }
            }
        }
    }

    fn summary_actions(&self, session: u8, a: Attempt, out: &mut Vec<Action>) {
        self.attempt_actions(session, a, out, |out| {
            out.push(Action::SummaryDone { session });
            let fail = |session, failure| Action::SummaryFail { session, failure };
            self.failures(session, fail, out);
        });
    }

    /// The replies an attempt (a step's or a summary's) waits for: its stream's events, the
    /// retry timer, or the credential refresh (SPEC 4.5, the same rules for both).
    fn attempt_actions(
        &self,
        session: u8,
        a: Attempt,
        out: &mut Vec<Action>,
        stream: impl FnOnce(&mut Vec<Action>),
    ) {
        match a.phase {
            AttemptPhase::Streaming => {
                stream(out);
                // SPEC 4.5: the watchdog may fire whenever the attempt streams; without content
                // since it was armed, that fails the attempt (a stall, from the budget).
                if a.content || self.budget.stalls > 0 {
                    out.push(Action::Fire { timer: Timer::Watchdog(session) });
                }
            }
            AttemptPhase::Backoff => out.push(Action::Fire { timer: Timer::Retry(session) }),
            AttemptPhase::Refreshing => self.refresh_actions(session, out),
        }
    }

    fn failures(&self, session: u8, f: impl Fn(u8, Failure) -> Action, out: &mut Vec<Action>) {
        let b = &self.budget;
        for (left, failure) in
            [(b.retryable, Failure::Retryable), (b.fatal, Failure::Fatal), (b.auth, Failure::Auth)]
        {
            if left > 0 {
                out.push(f(session, failure));
            }
        }
    }

    fn refresh_actions(&self, session: u8, out: &mut Vec<Action>) {
        out.push(Action::Refreshed { session, ok: true });
        if self.budget.refresh_failures > 0 {
            out.push(Action::Refreshed { session, ok: false });
        }
    }

    fn stale_actions(&self, out: &mut Vec<Action>) {
        if self.budget.stale == 0 {
            return;
        }
        // A preparation reply is stale for a submission that ended and for one that is past its
        // preparation but still running or queued: one of each (the newest) covers both cases
        // without offering several transitions to the same successor.
        // A sub-agent's submission has no preparation to answer late.
        let prepared = |n: u8| self.sub(n).session != CHILD;
        let ended = self.newest_ended();
        let past = self.seqs().rev().filter(|&n| prepared(n)).find(|&n| {
            matches!(self.sub(n).status, Status::Prepared | Status::Active | Status::Paused)
        });
        for n in [ended, past].into_iter().flatten() {
            out.push(Action::StalePrepared { seq: n });
            out.push(Action::StalePrepFailed { seq: n });
        }
        let kinds = [
            Action::StaleStep,
            Action::LateTool,
            Action::DuplicateTool,
            Action::StaleTimer,
            Action::StaleSummary,
            Action::StaleRefresh,
            Action::StaleTitle,
            Action::LateStarted,
        ];
        for (i, a) in kinds.into_iter().enumerate() {
            if self.stale[i] {
                out.push(a);
            }
        }
    }

    /// The newest ended submission that is not a sub-agent's: the one a late preparation
    /// reply for an ended submission names ([`Spec::stale_actions`]), whose session
    /// [`Spec::forget`] therefore keeps.
    fn newest_ended(&self) -> Option<u8> {
        self.seqs()
            .rev()
            .filter(|&n| self.sub(n).session != CHILD)
            .find(|&n| matches!(self.sub(n).status, Status::Done(_)))
    }

    /// Applies an action that `Spec::actions` offered, writing what the core must output.
    pub fn apply(&mut self, a: Action, e: &mut Emit) {
        e.child = self.child;
        match a {
            Action::Submit { session, kind } => self.submit(session, kind, e),
            Action::Accept { session, kind } => self.accept(session, kind),
            Action::Arrive => self.arrive(e),
            Action::Resubmit { run } => {
                self.budget.replays -= 1;
                self.resubmit(run, true, e);
            }
            Action::Conflict { run } => {
                self.budget.replays -= 1;
                self.resubmit(run, false, e);
            }
            Action::LookUp { run, same } => {
                self.budget.replays -= 1;
                let Some(first) = self.run_seq(run) else { unreachable!("a used RunId") };
                let session = self.sub(first).session;
                self.accepted += 1;
                let status = Status::LookUp { same };
                *self.sub_mut(self.accepted) =
                    Sub { session, mode: Mode::Fold, run: Some(run), status, pauses: 0, steps: 0 };
            }
            Action::Invalid => {
                self.budget.replays -= 1;
                e.reply(ReplyP::Rejected { why: Why::PromptEmpty });
            }
            Action::SubmitChild => {
                self.budget.replays -= 1;
                e.reply(ReplyP::Rejected { why: Why::ChildSession });
            }
            Action::AgentCall { session } => {
                self.budget.agents -= 1;
                let t = self.turn_mut(session);
                t.calls[0] = Call::Agent { running: false };
                if let TurnPhase::Step(a) = &mut t.phase {
                    a.content = true;
                }
                let (owner, step) = (t.owner, t.step);
                e.rec(session, Rec::ToolCall { seq: seq(owner), call: call_id(step, 0) });
            }
            Action::Cancel { session } => self.cancel(session, e),
            Action::CancelRun { run } => {
                self.budget.cancel_runs -= 1;
                if let Some(n) = self.run_seq(run) {
                    self.cancel_sub(n, e);
                    self.admit(self.sub(n).session, e);
                }
            }
            Action::Clear { session } => {
                self.budget.clears -= 1;
                for n in self.queue(session) {
                    self.drop_waiting(n, Outcome::Cancelled, e);
                }
            }
            Action::Summarize { session } => self.summarize(session, e),
            Action::Shutdown => self.shutdown(e),
            Action::Prepared { seq: n } => {
                self.sub_mut(n).status = Status::Prepared;
                self.admit(self.sub(n).session, e);
            }
            Action::PrepFailed { seq: n } => {
                self.budget.prep_failures -= 1;
                self.decide(n, Outcome::Failed, Some(ErrorKind::Preparation), None, e);
                self.admit(self.sub(n).session, e);
            }
            Action::ToolCall { session, tool } => {
                let t = *self.turn_mut(session);
                let call = u8::from(t.calls[0] != Call::None);
                match call {
                    0 => self.budget.tool_calls -= 1,
                    _ => self.budget.second_calls -= 1,
                }
                match tool {
                    Tool::Dropped => {}
                    Tool::Finishes => self.budget.finishing -= 1,
                    Tool::Asks { .. } => self.budget.asking -= 1,
                }
                let t = self.turn_mut(session);
                t.calls[call as usize] = Call::Streamed { tool };
                // Content: the watchdog's deadline moves, with no output (SPEC 4.5).
                if let TurnPhase::Step(a) = &mut t.phase {
                    a.content = true;
                }
                let (owner, step) = (t.owner, t.step);
                e.rec(session, Rec::ToolCall { seq: seq(owner), call: call_id(step, call) });
            }
            Action::StepDone { session, high, odd } => self.step_done(session, high, odd, e),
            Action::StepFail { session, failure } => self.step_failed(session, failure, e),
            Action::ToolStarted { session, call } => {
                // The work begins: from now on an abort leaves the call to finish. The core
                // writes nothing and starts nothing (the host runs the work it held).
                let c = &mut self.turn_mut(session).calls[call as usize];
                debug_assert_eq!(*c, Call::Running { tool: Tool::Asks { started: false } });
                *c = Call::Running { tool: Tool::Asks { started: true } };
            }
            Action::ToolResult { session, call, stop } => self.tool_result(session, call, stop, e),
            Action::Refreshed { session, ok } => self.refreshed(session, ok, e),
            Action::SummaryDone { session } => self.summary_done(session, e),
            Action::SummaryFail { session, failure } => self.summary_fail(session, failure, e),
            Action::Fire { timer } => self.fire(timer, e),
            Action::Titled { session, .. } => {
                // The title write changes only the title; its text is abstracted (SPEC 4.11).
                self.stale[STALE_TITLE] = true;
                self.titles[session as usize] = Title::Titled;
                e.rec(session, Rec::Title);
            }
            Action::StalePrepared { .. }
            | Action::StalePrepFailed { .. }
            | Action::StaleSummary
            | Action::StaleRefresh
            | Action::StaleStep
            | Action::LateTool
            | Action::DuplicateTool
            | Action::LateStarted
            | Action::StaleTimer
            | Action::StaleTitle => self.budget.stale -= 1,
        }
        self.forget();
    }

    /// Sets what no rule reads any more to one value, so that states that differ only there
    /// are met as one (`docs/verification.md`, "What a finished submission forgets"): besides
    /// what a finished submission forgets when it ends ([`Sub::finished`]), the session of a
    /// finished submission without a RunId, except the newest finished one a late preparation
    /// reply may still name ([`Spec::stale_actions`]) and a sub-agent's (which no such reply
    /// names).
    ///
    /// The stale flags are kept even once no stale reply is left to send: forgetting them
    /// too merges states that a core bug in state the specification does not keep can tell
    /// apart (the mutant `watermark_ignores_sequence` was then found 3 inputs later).
    fn forget(&mut self) {
        if !self.budget.forgets {
            return;
        }
        let named = if self.budget.stale > 0 { self.newest_ended() } else { None };
        let done = |s: &Sub| matches!(s.status, Status::Done(_));
        for n in self.seqs() {
            let sub = self.sub_mut(n);
            if done(sub) && sub.run.is_none() && sub.session != CHILD && Some(n) != named {
                sub.session = 0;
            }
        }
    }

    fn turn_mut(&mut self, session: u8) -> &mut Turn {
        match &mut self.lanes[session as usize] {
            Lane::Turn(t) => t,
            other => unreachable!("no turn in session {session}: {other:?}"),
        }
    }

    // ---- 4.1 acceptance ---------------------------------------------------------------------

    fn submit(&mut self, session: u8, kind: Kind, e: &mut Emit) {
        self.spend_submission(kind);
        if self.closing != Closing::Open {
            e.reply(ReplyP::Rejected { why: Why::WorkspaceClosing });
            return;
        }
        let n = self.assign(session, kind, Status::Preparing);
        self.enter(n, e);
    }

    fn spend_submission(&mut self, kind: Kind) {
        self.budget.submits -= 1;
        if let Kind::Run(_) = kind {
            self.budget.runs -= 1;
        }
    }

    /// The next sequence, for a submission of `kind` to `session`.
    fn assign(&mut self, session: u8, kind: Kind, status: Status) -> u8 {
        let (mode, run) = match kind {
            Kind::Fold => (Mode::Fold, None),
            Kind::Own => (Mode::OwnTurn, None),
            Kind::Run(r) => (Mode::OwnTurn, Some(r)),
        };
        self.accepted += 1;
        let n = self.accepted;
        *self.sub_mut(n) = Sub { session, mode, run, status, pauses: 0, steps: 0 };
        n
    }

    /// The core accepts submission `n`: the reply, then its preparation.
    fn enter(&mut self, n: u8, e: &mut Emit) {
        let Sub { mode, run, .. } = *self.sub(n);
        e.reply(ReplyP::Accepted { seq: seq(n), run: run.is_some(), mode });
        self.sub_mut(n).status = Status::Preparing;
        e.io(Io::Prepare { seq: seq(n) });
    }

    /// SPEC 4.1 with an external acceptor: the acceptor assigns the sequence, and the
    /// submission travels to the core. The core sees nothing, so nothing is output; closing
    /// is the core's to check when it arrives.
    fn accept(&mut self, session: u8, kind: Kind) {
        self.spend_submission(kind);
        self.assign(session, kind, Status::InFlight { covered: false });
    }

    /// The oldest call in flight reaches the core (SPEC 4.1, 4.10), in SPEC 4.1's order. A
    /// look-up of a RunId the core knows is answered with the run or the conflict (also during
    /// shutdown) and accepts nothing. Then "workspace closing": after shutdown began a new
    /// submission is rejected, covered or not. Otherwise the core accepts it; if a cancel made
    /// after its acceptance covers it, it ends `cancelled` on entry: no preparation, no
    /// message, its outcome and RunComplete in the same transition.
    fn arrive(&mut self, e: &mut Emit) {
        let Some(n) = self.next_arrival() else { unreachable!("offered with a call in flight") };
        let covered = match self.sub(n).status {
            Status::InFlight { covered } => covered,
            Status::LookUp { same } => {
                self.sub_mut(n).status = Status::Answered;
                let Some(run) = self.sub(n).run else { unreachable!("a look-up has a RunId") };
                let Some(first) = self.run_seq(run) else { unreachable!("a used RunId") };
                // A run whose submission the core refused is unknown to it: this call is new,
                // and refused for the same reason (shutdown never ends).
                if self.sub(first).status == Status::Answered {
                    e.reply(ReplyP::Rejected { why: Why::WorkspaceClosing });
                } else {
                    self.resubmit(run, same, e);
                }
                return;
            }
            other => unreachable!("{other:?} is not in flight"),
        };
        if self.closing != Closing::Open {
            self.sub_mut(n).status = Status::Answered;
            e.reply(ReplyP::Rejected { why: Why::WorkspaceClosing });
            return;
        }
        if covered {
            let Sub { mode, run, .. } = *self.sub(n);
            e.reply(ReplyP::Accepted { seq: seq(n), run: run.is_some(), mode });
            self.decide(n, Outcome::Cancelled, None, None, e);
        } else {
            self.enter(n, e);
        }
    }

    /// A call with a used RunId is a look-up, not a new submission: it answers the existing
    /// run (or the conflict) during shutdown too (SPEC 4.10 "RunId look-ups still answer").
    fn resubmit(&mut self, run: u8, same: bool, e: &mut Emit) {
        let Some(n) = self.run_seq(run) else { unreachable!("offered only for a used RunId") };
        if !same {
            e.reply(ReplyP::Rejected { why: Why::RunIdConflict });
            return;
        }
        let outcome = match self.sub(n).status {
            Status::Done(o) => Some(o),
            _ => None,
        };
        e.reply(ReplyP::Existing { seq: seq(n), outcome });
    }

    // ---- 5 the completion contract ------------------------------------------------------------

    /// The one place an outcome is decided. Writes the ledger outcome and publishes it; an
    /// activated submission's clean-up writes and flush come first (the callers write them).
    fn decide(
        &mut self,
        n: u8,
        outcome: Outcome,
        error: Option<ErrorKind>,
        stop: Option<StopReason>,
        e: &mut Emit,
    ) {
        let session = self.sub(n).session;
        e.rec(session, Rec::LedgerOutcome { seq: seq(n), outcome });
        self.publish(n, outcome, error, stop, e);
    }

    /// Sets the outcome and publishes it (after its ledger write).
    fn publish(
        &mut self,
        n: u8,
        outcome: Outcome,
        error: Option<ErrorKind>,
        stop: Option<StopReason>,
        e: &mut Emit,
    ) {
        let forgets = self.budget.forgets;
        let sub = self.sub_mut(n);
        assert!(!matches!(sub.status, Status::Done(_)), "outcome of {n} decided twice");
        let (session, run) = (sub.session, sub.run.is_some());
        *sub = match forgets {
            true => sub.finished(outcome),
            false => Sub { status: Status::Done(outcome), ..*sub },
        };
        e.rec(session, Rec::Completed { seq: seq(n), outcome, run, error, stop });
    }

    /// A waiting submission ends without ever running: no message, its preparation aborted.
    fn drop_waiting(&mut self, n: u8, outcome: Outcome, e: &mut Emit) {
        if self.sub(n).status == Status::Preparing {
            e.io(Io::AbortPreparation { seq: seq(n) });
        }
        let error = (outcome == Outcome::Interrupted).then_some(ErrorKind::Interrupted);
        self.decide(n, outcome, error, None, e);
    }

    // ---- 4.2 admission, 4.3 folding, 4.4 steps ------------------------------------------------

    /// The hand-off: the queue's head becomes active if it is prepared and the lane is idle.
    fn admit(&mut self, s: u8, e: &mut Emit) {
        if self.closing != Closing::Open || self.lanes[s as usize] != Lane::Idle {
            return;
        }
        let Some(&head) = self.queue(s).first() else { return };
        if self.sub(head).status != Status::Prepared {
            return;
        }
        self.sub_mut(head).status = Status::Active;
        e.rec(s, Rec::Activated { seq: seq(head) });
        e.rec(s, Rec::User { seq: seq(head), synthetic: false });
        // SPEC 4.11: a first activation in a session without a title (and none requested)
        // requests one; the turn does not wait for it.
        if self.titles[s as usize] == Title::Untitled {
            self.titles[s as usize] = Title::Requested { seq: head };
            e.io(Io::RequestTitle { session: self.name(s), seq: seq(head) });
        }
        self.start_step(s, head, 0, e);
    }

    /// A step starts: the prepared `fold` prefix of the queue folds in, then the assistant
    /// message and the first attempt.
    fn start_step(&mut self, s: u8, owner: u8, step: u8, e: &mut Emit) {
        let mut folded = Vec::new();
        for n in self.queue(s) {
            let sub = self.sub(n);
            if sub.status != Status::Prepared || sub.mode != Mode::Fold {
                break;
            }
            e.rec(s, Rec::User { seq: seq(n), synthetic: false });
            e.rec(s, Rec::LedgerOutcome { seq: seq(n), outcome: Outcome::Folded });
            folded.push(n);
        }
        e.rec(s, Rec::Assistant { seq: seq(owner), step: u32::from(step) });
        // A fold's outcome is published once the transaction holding its user message (and
        // the step's assistant message) is written (SPEC 4.12).
        for n in folded {
            self.publish(n, Outcome::Folded, None, None, e);
        }
        e.io(Io::StartStep { seq: seq(owner), step: u32::from(step), attempt: 0 });
        e.io(Io::SetTimer { timer: self.timer_p(Timer::Watchdog(s)) });
        let phase = TurnPhase::Step(Attempt::fresh());
        let calls = [Call::None; 2];
        let turn = Turn { owner, step, calls, high: false, tool_use: false, phase };
        self.lanes[s as usize] = Lane::Turn(turn);
    }

    fn step_done(&mut self, s: u8, high: bool, odd: bool, e: &mut Emit) {
        if high {
            self.budget.highs -= 1;
        }
        if odd {
            self.budget.odd_finishes -= 1;
        }
        self.stale[STALE_STEP] = true;
        self.cancel_timer(Timer::Watchdog(s), e);
        let t = self.turn_mut(s);
        let streamed = matches!(t.calls[0], Call::Streamed { .. } | Call::Agent { .. });
        // The finish the stream gave: `tool_calls` exactly when a call was streamed, unless odd.
        t.tool_use = streamed != odd;
        // Sub-agents do not summarize (`docs/lifecycle-rules.md`): the threshold changes
        // nothing in the child.
        t.high = high && s != CHILD;
        let (owner, step, tool_use) = (t.owner, t.step, t.tool_use);
        let finish = if tool_use { FinishP::ToolUse } else { FinishP::EndTurn };
        e.rec(s, Rec::Finish { seq: seq(owner), finish });
        if let (CHILD, Some(c)) = (s, self.child) {
            // SPEC 4.11: the step's cost is added to the parent in the same usage write.
            let ancestor = Some(self.name(c.parent));
            e.rec(s, Rec::Cost { seq: Some(seq(owner)), ancestor });
        }
        if streamed {
            // Every complete call runs, whatever the finish reason (SPEC 4.4): all of the
            // step's calls start together, once the stream has finished.
            let t = self.turn_mut(s);
            t.phase = TurnPhase::Tool;
            let mut delegates = false;
            for (i, c) in t.calls.iter_mut().enumerate() {
                match *c {
                    Call::Streamed { tool } => {
                        *c = Call::Running { tool };
                        e.io(Io::RunTool { seq: seq(owner), call: call_id(step, i as u8) });
                    }
                    Call::Agent { running: false } => {
                        *c = Call::Agent { running: true };
                        delegates = true;
                    }
                    _ => {}
                }
            }
            if delegates {
                self.delegate(s, step, e);
            }
        } else {
            self.step_ended(s, None, e);
        }
    }

    /// A running call reports, then the hand-off after a clean-up it allowed.
    fn tool_result(&mut self, s: u8, call: u8, stop: bool, e: &mut Emit) {
        if stop {
            self.budget.stops -= 1;
        }
        self.stale[DUP_TOOL] = true;
        self.report(s, call, stop, e);
        self.admit_after(s, e);
    }

    /// The hand-off after an aborted turn's clean-up in session `s`, which a result may have
    /// allowed; the child's end may also have allowed its parent's.
    fn admit_after(&mut self, s: u8, e: &mut Emit) {
        self.admit(s, e);
        if let (CHILD, Some(c)) = (s, self.child) {
            self.admit(c.parent, e);
        }
    }

    /// A call's result (a tool's, or a sub-agent's end); written as reported. The step (or
    /// the aborted turn's wait) ends only with the last result it waits for (SPEC 4.4, 4.9).
    /// An aborted turn's clean-up runs here; the caller hands off.
    fn report(&mut self, s: u8, call: u8, stop: bool, e: &mut Emit) {
        let t = self.turn_mut(s);
        t.calls[call as usize] = Call::Done { stop };
        let t = *t;
        let id = call_id(t.step, call);
        e.rec(s, Rec::ToolResult { seq: seq(t.owner), call: id, synthetic: false });
        match t.phase {
            TurnPhase::Aborting { cause, grace } => {
                // Only the calls left to finish and a sub-agent are waited for; a dropped call
                // cannot report.
                if t.calls.iter().any(|c| holds(*c)) {
                    return;
                }
                if grace {
                    self.cancel_timer(Timer::Grace(s), e);
                }
                self.cleanup(s, cause, e);
            }
            _ if t.calls.iter().any(|c| pending(*c)) => {}
            _ => {
                // SPEC 4.6 case 1 with several stop results: the first of the step's calls
                // (in the order they were streamed) that asked to stop names the reason
                // (`docs/lifecycle-rules.md`, "Several tool calls in a step").
                let stopped = (0..2u8)
                    .find(|&i| t.calls[i as usize] == Call::Done { stop: true })
                    .map(stop_reason);
                // A stop result turns `tool_use` into `end_turn`: the model is not called again.
                if stopped.is_some() && t.tool_use {
                    e.rec(s, Rec::Finish { seq: seq(t.owner), finish: FinishP::EndTurn });
                }
                self.step_ended(s, stopped, e);
            }
        }
    }

    /// SPEC 4.6 and 4.7 after a step ended normally (its tools reported). `stopped`: a tool
    /// result asked to stop the turn, for this reason; otherwise the step's finish decides.
    fn step_ended(&mut self, s: u8, stopped: Option<StopReason>, e: &mut Emit) {
        let t = *self.turn_mut(s);
        let n = t.owner;
        let continues = stopped.is_none() && t.tool_use;
        let guard_trips = t.high && self.sub(n).pauses >= PAUSES_WITHOUT_PROGRESS;
        if !t.high {
            self.sub_mut(n).pauses = 0;
        }
        // SPEC 4.6 case 2: the step limit counts the submission's steps across its resumed
        // turns, and comes after a stop result and before every other end.
        let limit = self.budget.step_limit;
        if limit > 0 {
            let sub = self.sub_mut(n);
            sub.steps = (sub.steps + 1).min(limit);
        }
        let limited = limit > 0 && self.sub(n).steps >= limit;
        if let Some(stop) = stopped {
            self.end_turn(s, n, Outcome::Completed, None, Some(stop), e);
        } else if limited {
            // Failed, then housekeeping at the threshold like any end (SPEC 4.7). The failure
            // replaces a finish that was not final yet: `tool_use`, or any finish of a step
            // whose tools ran; a finish that ended the turn stays (`docs/lifecycle-rules.md`,
            // "Clean-up order" and "A finish is final only when the turn is over").
            if t.tool_use || t.calls[0] != Call::None {
                e.rec(s, Rec::Finish { seq: seq(n), finish: FinishP::Error });
            }
            self.end_turn(s, n, Outcome::Failed, Some(ErrorKind::StepLimit), None, e);
        } else if !continues {
            let stop = Some(StopReason::EndTurn);
            self.end_turn(s, n, Outcome::Completed, None, stop, e);
        } else if guard_trips {
            self.fail_turn(s, ErrorKind::ContextWindow, e);
            return;
        } else if t.high {
            self.pause(s, n, e);
            return;
        } else {
            self.start_step(s, n, t.step + 1, e);
            return;
        }
        if t.high {
            self.start_summary(s, None, e);
        } else {
            self.admit(s, e);
        }
    }

    /// A turn ends (not a pause): flush, ledger outcome, completion; the caller hands off.
    fn end_turn(
        &mut self,
        s: u8,
        n: u8,
        outcome: Outcome,
        error: Option<ErrorKind>,
        stop: Option<StopReason>,
        e: &mut Emit,
    ) {
        e.rec(s, Rec::Flush);
        self.lanes[s as usize] = Lane::Idle;
        self.decide(n, outcome, error, stop, e);
        if s == CHILD {
            self.child_ended(e);
        }
    }

    // ---- 4.11 sub-agents ----------------------------------------------------------------------

    /// The parent's `agent` call of step `step` starts its sub-agent (SPEC 4.11): the child
    /// submission takes the next sequence, has no RunId and no preparation, is never queued,
    /// and its turn starts at once in the child session: the child's record, the ledger
    /// activation and the user message, then step 0 (SPEC 7's hand-off order). No title is
    /// requested: a sub-agent session keeps "New Agent Session".
    fn delegate(&mut self, parent: u8, step: u8, e: &mut Emit) {
        self.accepted += 1;
        let n = self.accepted;
        let status = Status::Active;
        let (mode, run) = (Mode::OwnTurn, None);
        *self.sub_mut(n) = Sub { session: CHILD, mode, run, status, pauses: 0, steps: 0 };
        self.child = Some(Child { parent, step, seq: n });
        e.child = self.child;
        e.rec(CHILD, Rec::ChildAccepted { seq: seq(n) });
        e.rec(CHILD, Rec::Activated { seq: seq(n) });
        e.rec(CHILD, Rec::User { seq: seq(n), synthetic: false });
        self.start_step(CHILD, n, 0, e);
    }

    /// The sub-agent's turn ended (its outcome is decided): the end is its parent's call's
    /// result (the child's text, its failure, or the cancel text: SPEC 4.11), written as a
    /// reported result. Stale when the parent's turn no longer waits for it: its grace or the
    /// shutdown deadline ended it first, and the call got its synthetic result then.
    fn child_ended(&mut self, e: &mut Emit) {
        let Some(c) = self.child else { unreachable!("a child session has its sub-agent") };
        if let Lane::Turn(t) = self.lanes[c.parent as usize]
            && t.calls[0] == (Call::Agent { running: true })
        {
            self.report(c.parent, 0, false, e);
        }
    }

    /// A paused submission ends with its summary (SPEC 4.7, 4.10): its last assistant message
    /// gets this finish in place of `tool_use`, then the flush and the outcome.
    fn end_paused(
        &mut self,
        s: u8,
        n: u8,
        finish: FinishP,
        outcome: Outcome,
        error: Option<ErrorKind>,
        e: &mut Emit,
    ) {
        e.rec(s, Rec::Finish { seq: seq(n), finish });
        self.end_turn(s, n, outcome, error, None, e);
    }

    /// The turn fails (provider, unauthorized, context window): clean-up, then the hand-off.
    fn fail_turn(&mut self, s: u8, kind: ErrorKind, e: &mut Emit) {
        let t = *self.turn_mut(s);
        self.synthesize(s, t, e);
        e.rec(s, Rec::Finish { seq: seq(t.owner), finish: FinishP::Error });
        self.end_turn(s, t.owner, Outcome::Failed, Some(kind), None, e);
        self.admit(s, e);
    }

    /// SPEC 4.9: every call of the current step without a result gets a synthetic one, after
    /// the real results, in the order the calls were streamed (`docs/lifecycle-rules.md`,
    /// "Several tool calls in a step").
    fn synthesize(&mut self, s: u8, t: Turn, e: &mut Emit) {
        for (i, c) in t.calls.iter().enumerate() {
            if matches!(c, Call::Streamed { .. } | Call::Running { .. } | Call::Agent { .. }) {
                if matches!(c, Call::Running { .. }) {
                    self.stale[LATE_TOOL] = true;
                }
                let call = call_id(t.step, i as u8);
                e.rec(s, Rec::ToolResult { seq: seq(t.owner), call, synthetic: true });
            }
        }
    }

    // ---- 4.5 retries and credentials ----------------------------------------------------------

    fn spend(&mut self, failure: Failure) {
        let b = &mut self.budget;
        match failure {
            Failure::Retryable => b.retryable -= 1,
            Failure::Fatal => b.fatal -= 1,
            Failure::Auth => b.auth -= 1,
        }
    }

    /// What SPEC 4.5 does with a failed attempt: `Ok(next phase)` to keep trying, `Err(kind)`
    /// when the failure is final.
    fn after_failure(a: Attempt, failure: Failure) -> Result<AttemptPhase, ErrorKind> {
        match failure {
            Failure::Retryable if a.used < ATTEMPTS => Ok(AttemptPhase::Backoff),
            Failure::Retryable | Failure::Fatal => Err(ErrorKind::Provider),
            Failure::Auth if !a.refreshed => Ok(AttemptPhase::Refreshing),
            Failure::Auth => Err(ErrorKind::Unauthorized),
        }
    }

    fn step_failed(&mut self, s: u8, failure: Failure, e: &mut Emit) {
        self.spend(failure);
        self.stale[STALE_STEP] = true;
        self.cancel_timer(Timer::Watchdog(s), e);
        let t = *self.turn_mut(s);
        let TurnPhase::Step(a) = t.phase else {
            unreachable!("a failure is offered while streaming")
        };
        match Spec::after_failure(a, failure) {
            Ok(phase) => {
                self.turn_mut(s).phase = TurnPhase::Step(Attempt { phase, ..a });
                self.attempt_waits(s, Some(t), a, phase, e);
            }
            Err(kind) => self.fail_turn(s, kind, e),
        }
    }

    /// The outputs of an attempt that now backs off or waits for a refresh.
    fn attempt_waits(&self, s: u8, t: Option<Turn>, a: Attempt, p: AttemptPhase, e: &mut Emit) {
        match p {
            AttemptPhase::Backoff => e.io(Io::SetTimer { timer: self.timer_p(Timer::Retry(s)) }),
            AttemptPhase::Refreshing => e.io(Io::Refresh {
                session: self.name(s),
                seq: t.map(|t| seq(t.owner)),
                attempt: u32::from(a.number),
            }),
            AttemptPhase::Streaming => unreachable!("not a wait"),
        }
    }

    fn refreshed(&mut self, s: u8, ok: bool, e: &mut Emit) {
        self.stale[STALE_REFRESH] = true;
        if !ok {
            self.budget.refresh_failures -= 1;
        }
        match self.lanes[s as usize] {
            Lane::Turn(t) => {
                let TurnPhase::Step(a) = t.phase else { unreachable!("refreshing") };
                if !ok {
                    self.fail_turn(s, ErrorKind::Unauthorized, e);
                    return;
                }
                let a = Attempt { refreshed: true, ..a }.next(true);
                self.retry_step(s, t, a, e);
            }
            Lane::Summary(sm) => {
                if !ok {
                    self.summary_failed(s, sm, e);
                    return;
                }
                let a = Attempt { refreshed: true, ..sm.attempt }.next(true);
                self.retry_summary(s, sm, a, e);
            }
            Lane::Idle => unreachable!("refreshing"),
        }
    }

    /// The next attempt of a step: the content reset, then the stream (SPEC 4.5).
    fn retry_step(&mut self, s: u8, t: Turn, a: Attempt, e: &mut Emit) {
        e.rec(s, Rec::Reset { seq: seq(t.owner) });
        let step = u32::from(t.step);
        e.io(Io::StartStep { seq: seq(t.owner), step, attempt: u32::from(a.number) });
        e.io(Io::SetTimer { timer: self.timer_p(Timer::Watchdog(s)) });
        let calls = [Call::None; 2];
        self.lanes[s as usize] = Lane::Turn(Turn { calls, phase: TurnPhase::Step(a), ..t });
    }

    /// Stops waiting for a refresh; an answer that still arrives is stale.
    fn abort_refresh(&mut self, e: &mut Emit, io: Io) {
        self.stale[STALE_REFRESH] = true;
        e.io(io);
    }

    /// Disarms a timer; a firing that still arrives is stale.
    fn cancel_timer(&mut self, t: Timer, e: &mut Emit) {
        self.stale[STALE_TIMER] = true;
        e.io(Io::CancelTimer { timer: self.timer_p(t) });
    }

    fn fire(&mut self, timer: Timer, e: &mut Emit) {
        self.stale[STALE_TIMER] = true;
        match timer {
            Timer::Retry(s) => match self.lanes[s as usize] {
                Lane::Turn(t) => {
                    let TurnPhase::Step(a) = t.phase else { unreachable!("backing off") };
                    self.retry_step(s, t, a.next(false), e);
                }
                Lane::Summary(sm) => self.retry_summary(s, sm, sm.attempt.next(false), e),
                Lane::Idle => unreachable!("backing off"),
            },
            Timer::Watchdog(s) => self.watchdog_fired(s, e),
            Timer::Grace(s) => {
                let t = *self.turn_mut(s);
                let TurnPhase::Aborting { cause, .. } = t.phase else { unreachable!("aborting") };
                self.cleanup(s, cause, e);
                self.admit_after(s, e);
            }
            Timer::Deadline => {
                self.closing = Closing::Draining { deadline: false };
                // A parent before its child (SPEC 7: by the oldest unfinished sequence): the
                // parent's call gets its synthetic result, and the child's end is stale.
                for s in 0..LANES {
                    if let Lane::Turn(t) = self.lanes[s as usize] {
                        let TurnPhase::Aborting { cause, grace } = t.phase else {
                            unreachable!("only aborting turns remain while draining")
                        };
                        if grace {
                            self.cancel_timer(Timer::Grace(s), e);
                        }
                        self.cleanup_only(s, cause, e);
                    }
                }
                self.maybe_stopped(e);
            }
        }
    }

    /// SPEC 4.5: the watchdog of session `s`'s streaming attempt fires. After content it
    /// watches on (one new deadline); otherwise the attempt stalled: its stream is aborted and
    /// it fails as a retryable transport error, within the attempt budget (4 attempts), then
    /// the turn fails `transport` (a summary fails as summaries do).
    fn watchdog_fired(&mut self, s: u8, e: &mut Emit) {
        let (a, t) = match self.lanes[s as usize] {
            Lane::Turn(t) => match t.phase {
                TurnPhase::Step(a) => (a, Some(t)),
                _ => unreachable!("watched while streaming"),
            },
            Lane::Summary(sm) => (sm.attempt, None),
            Lane::Idle => unreachable!("watched while streaming"),
        };
        if a.content {
            e.io(Io::SetTimer { timer: self.timer_p(Timer::Watchdog(s)) });
            let a = Attempt { content: false, ..a };
            match &mut self.lanes[s as usize] {
                Lane::Turn(t) => t.phase = TurnPhase::Step(a),
                Lane::Summary(sm) => sm.attempt = a,
                Lane::Idle => {}
            }
            return;
        }
        self.budget.stalls -= 1;
        let backoff = a.used < ATTEMPTS;
        let a = Attempt { phase: AttemptPhase::Backoff, ..a };
        match t {
            Some(t) => {
                self.stale[STALE_STEP] = true;
                let attempt = u32::from(a.number);
                e.io(Io::AbortStep { seq: seq(t.owner), step: u32::from(t.step), attempt });
                if backoff {
                    self.turn_mut(s).phase = TurnPhase::Step(a);
                    self.attempt_waits(s, Some(t), a, AttemptPhase::Backoff, e);
                } else {
                    self.fail_turn(s, ErrorKind::Transport, e);
                }
            }
            None => {
                self.stale[STALE_SUMMARY] = true;
                e.io(Io::AbortSummary { session: self.name(s), attempt: u32::from(a.number) });
                let sm = self.summary(s);
                if backoff {
                    self.lanes[s as usize] = Lane::Summary(Summary { attempt: a, ..sm });
                    self.attempt_waits(s, None, a, AttemptPhase::Backoff, e);
                } else {
                    self.summary_failed(s, sm, e);
                }
            }
        }
    }

    // ---- 4.7 summarization --------------------------------------------------------------------

    fn pause(&mut self, s: u8, n: u8, e: &mut Emit) {
        let sub = self.sub_mut(n);
        sub.status = Status::Paused;
        sub.pauses += 1;
        e.rec(s, Rec::Paused { seq: seq(n) });
        self.start_summary(s, Some(n), e);
    }

    fn start_summary(&mut self, s: u8, resume: Option<u8>, e: &mut Emit) {
        e.rec(s, Rec::SummaryStarted);
        e.io(Io::StartSummary { session: self.name(s), attempt: 0 });
        e.io(Io::SetTimer { timer: self.timer_p(Timer::Watchdog(s)) });
        self.lanes[s as usize] = Lane::Summary(Summary { resume, attempt: Attempt::fresh() });
    }

    fn summarize(&mut self, s: u8, e: &mut Emit) {
        self.budget.summarizes -= 1;
        if self.closing != Closing::Open {
            e.reply(ReplyP::Rejected { why: Why::WorkspaceClosing });
        } else if self.busy(s) {
            e.reply(ReplyP::Rejected { why: Why::Busy });
        } else {
            e.reply(ReplyP::Summarizing);
            self.start_summary(s, None, e);
        }
    }

    fn summary(&self, s: u8) -> Summary {
        match self.lanes[s as usize] {
            Lane::Summary(sm) => sm,
            other => unreachable!("no summary in {s}: {other:?}"),
        }
    }

    fn summary_done(&mut self, s: u8, e: &mut Emit) {
        self.stale[STALE_SUMMARY] = true;
        self.cancel_timer(Timer::Watchdog(s), e);
        e.rec(s, Rec::SummaryDone);
        let sm = self.summary(s);
        self.lanes[s as usize] = Lane::Idle;
        match sm.resume {
            Some(n) => {
                // SPEC 4.7: the same submission resumes before anything queued, with the
                // synthetic continuation message.
                self.sub_mut(n).status = Status::Active;
                e.rec(s, Rec::Activated { seq: seq(n) });
                e.rec(s, Rec::User { seq: seq(n), synthetic: true });
                self.start_step(s, n, 0, e);
            }
            None => self.admit(s, e),
        }
    }

    fn summary_fail(&mut self, s: u8, failure: Failure, e: &mut Emit) {
        self.spend(failure);
        self.stale[STALE_SUMMARY] = true;
        self.cancel_timer(Timer::Watchdog(s), e);
        let sm = self.summary(s);
        match Spec::after_failure(sm.attempt, failure) {
            Ok(phase) => {
                let attempt = Attempt { phase, ..sm.attempt };
                self.lanes[s as usize] = Lane::Summary(Summary { attempt, ..sm });
                self.attempt_waits(s, None, sm.attempt, phase, e);
            }
            Err(_) => self.summary_failed(s, sm, e),
        }
    }

    /// The summary failed for good: the paused submission fails `summarization`; housekeeping
    /// fails nobody.
    fn summary_failed(&mut self, s: u8, sm: Summary, e: &mut Emit) {
        e.rec(s, Rec::SummaryFailed);
        self.lanes[s as usize] = Lane::Idle;
        if let Some(n) = sm.resume {
            let kind = Some(ErrorKind::Summarization);
            self.end_paused(s, n, FinishP::Error, Outcome::Failed, kind, e);
        }
        self.admit(s, e);
    }

    fn retry_summary(&mut self, s: u8, sm: Summary, a: Attempt, e: &mut Emit) {
        e.rec(s, Rec::SummaryReset);
        e.io(Io::StartSummary { session: self.name(s), attempt: u32::from(a.number) });
        e.io(Io::SetTimer { timer: self.timer_p(Timer::Watchdog(s)) });
        self.lanes[s as usize] = Lane::Summary(Summary { attempt: a, ..sm });
    }

    /// A summary stops (cancel, shutdown): its IO aborted, the partial summary deleted.
    fn abort_summary(&mut self, s: u8, sm: Summary, e: &mut Emit) {
        let a = sm.attempt;
        match a.phase {
            AttemptPhase::Streaming => {
                self.stale[STALE_SUMMARY] = true;
                e.io(Io::AbortSummary { session: self.name(s), attempt: u32::from(a.number) });
                self.cancel_timer(Timer::Watchdog(s), e);
            }
            AttemptPhase::Backoff => self.cancel_timer(Timer::Retry(s), e),
            AttemptPhase::Refreshing => self.abort_refresh(
                e,
                Io::AbortRefresh { session: self.name(s), seq: None, attempt: u32::from(a.number) },
            ),
        }
        e.rec(s, Rec::SummaryDeleted);
        self.lanes[s as usize] = Lane::Idle;
    }

    // ---- 4.9 clean-up, 4.10 cancel ------------------------------------------------------------

    fn cancel(&mut self, s: u8, e: &mut Emit) {
        self.budget.cancels -= 1;
        // The watermark is the newest sequence accepted when the cancel was made: it covers
        // every unfinished submission of the session. With the core as acceptor nothing it
        // covers can arrive later; with an external one, the session's submissions still in
        // flight are covered too and end `cancelled` when they arrive. Nothing accepted after
        // the cancel is covered, and with nothing unfinished it changes nothing (I4, I10).
        for sub in self.subs.iter_mut().take(self.accepted as usize) {
            if let (true, Status::InFlight { covered }) = (sub.session == s, &mut sub.status) {
                *covered = true;
            }
        }
        // A housekeeping summary stops too (it belongs to no submission); as an abort, its
        // records come before the decided submissions' (SPEC 7).
        if let Lane::Summary(sm @ Summary { resume: None, .. }) = self.lanes[s as usize] {
            self.abort_summary(s, sm, e);
        }
        for n in self.seqs() {
            if self.sub(n).session == s && self.unfinished(n) {
                self.cancel_sub(n, e);
            }
        }
        self.admit(s, e);
    }

    /// Cancels one unfinished submission (SPEC 4.10): waiting ones end at once, a paused one's
    /// summary stops, an active turn aborts (its outcome comes at clean-up). The caller hands
    /// off afterwards, once every decision of the transition is made.
    fn cancel_sub(&mut self, n: u8, e: &mut Emit) {
        let s = self.sub(n).session;
        match self.sub(n).status {
            Status::Preparing | Status::Prepared => self.drop_waiting(n, Outcome::Cancelled, e),
            Status::Paused => {
                let sm = self.summary(s);
                self.abort_summary(s, sm, e);
                self.end_paused(s, n, FinishP::Canceled, Outcome::Cancelled, None, e);
            }
            Status::Active => self.abort_turn(s, Cause::Cancel, e),
            // Finished, or unknown to the core (yet, or ever): a no-op (SPEC 4.10).
            Status::Done(_)
            | Status::InFlight { .. }
            | Status::LookUp { .. }
            | Status::Answered => {}
        }
    }

    /// Aborts the session's turn: its IO stops. Every running call of the tool the host drops
    /// is aborted and can never report, and so is every running call of the tool left to
    /// finish once started whose work has not begun (its ask is withdrawn; it is dropped from
    /// then on); each call decides by its own tool's policy. When no call left to finish runs,
    /// clean-up runs now, as it does with no call running; otherwise the calls left to finish
    /// (not aborted: they run to their end; an asking call's once its work began) hold
    /// clean-up back, until the last of them reports or the grace timer (cancel) or the
    /// shutdown deadline fires (SPEC 4.9). The dropped calls get their synthetic results at
    /// clean-up, with the others.
    fn abort_turn(&mut self, s: u8, cause: Cause, e: &mut Emit) {
        let t = *self.turn_mut(s);
        let owner = seq(t.owner);
        match t.phase {
            TurnPhase::Aborting { .. } => return, // the first abort's cause stands
            TurnPhase::Step(a) => self.stop_attempt(s, t, a, e),
            TurnPhase::Tool => {}
        }
        for (i, c) in t.calls.iter().enumerate() {
            if c.dropped_by_abort() {
                self.stale[LATE_TOOL] = true;
                e.io(Io::AbortTool { seq: owner, call: call_id(t.step, i as u8) });
            }
            if *c == (Call::Running { tool: Tool::Asks { started: false } }) {
                // Its ask is withdrawn: an answer that still comes is stale (I13), and the
                // call is dropped like any other.
                self.stale[LATE_STARTED] = true;
                self.turn_mut(s).calls[i] = Call::Running { tool: Tool::Dropped };
            }
        }
        if !t.calls.iter().any(|c| holds(*c)) {
            self.cleanup(s, cause, e);
            return;
        }
        let waiting = self.turn_mut(s);
        waiting.phase = TurnPhase::Aborting { cause, grace: false };
        // A stop a result asked for decides nothing any more (the abort's end does).
        for c in &mut waiting.calls {
            if let Call::Done { stop } = c {
                *stop = false;
            }
        }
        // A sub-agent is aborted with its parent (SPEC 4.11, I4). When nothing holds it, it
        // ends now, and its end is the call's result, which may end this turn's wait too.
        if t.calls[0] == (Call::Agent { running: true }) {
            self.abort_turn(CHILD, cause, e);
        }
        // Still waiting: a cancel's wait is bounded by the grace timer (SPEC 4.9).
        if let Lane::Turn(w) = &mut self.lanes[s as usize]
            && w.owner == t.owner
            && cause == Cause::Cancel
        {
            w.phase = TurnPhase::Aborting { cause, grace: true };
            e.io(Io::SetTimer { timer: self.timer_p(Timer::Grace(s)) });
        }
    }

    /// Clean-up of an aborted turn (SPEC 4.9), then shutdown's end if draining; the caller hands
    /// off.
    fn cleanup(&mut self, s: u8, cause: Cause, e: &mut Emit) {
        self.cleanup_only(s, cause, e);
        if let Closing::Draining { deadline } = self.closing {
            let aborting = self.lanes.iter().any(|l| matches!(l, Lane::Turn(_)));
            if deadline && !aborting {
                self.cancel_timer(Timer::Deadline, e);
                self.closing = Closing::Draining { deadline: false };
            }
            self.maybe_stopped(e);
        }
    }

    fn cleanup_only(&mut self, s: u8, cause: Cause, e: &mut Emit) {
        let t = *self.turn_mut(s);
        self.synthesize(s, t, e);
        let (finish, outcome, error) = match cause {
            Cause::Cancel => (FinishP::Canceled, Outcome::Cancelled, None),
            Cause::Shutdown => {
                (FinishP::Interrupted, Outcome::Interrupted, Some(ErrorKind::Interrupted))
            }
        };
        e.rec(s, Rec::Finish { seq: seq(t.owner), finish });
        self.end_turn(s, t.owner, outcome, error, None, e);
    }

    // ---- 4.10 shutdown ------------------------------------------------------------------------

    fn shutdown(&mut self, e: &mut Emit) {
        self.budget.shutdowns -= 1;
        self.closing = Closing::Draining { deadline: false };
        // A parent before its child (SPEC 7): the parent's abort aborts its sub-agent first.
        for s in 0..LANES {
            // A housekeeping summary belongs to no submission: as an abort, its deletion comes
            // before any write of a submission (SPEC 7).
            if let Lane::Summary(sm @ Summary { resume: None, .. }) = self.lanes[s as usize] {
                self.abort_summary(s, sm, e);
            }
            if s != CHILD {
                self.abandon_title(s, e);
            }
            // The lane first: its aborts come before any decision, and its submission is the
            // session's oldest (admission follows acceptance order).
            match self.lanes[s as usize] {
                Lane::Idle => {}
                Lane::Summary(sm) => {
                    self.abort_summary(s, sm, e);
                    if let Some(n) = sm.resume {
                        let (finish, kind) = (FinishP::Interrupted, Some(ErrorKind::Interrupted));
                        self.end_paused(s, n, finish, Outcome::Interrupted, kind, e);
                    }
                }
                // Its clean-up cannot end the shutdown early: later sessions still have work.
                Lane::Turn(_) => self.abort_turn(s, Cause::Shutdown, e),
            }
            for n in self.queue(s) {
                self.drop_waiting(n, Outcome::Interrupted, e);
            }
        }
        if self.lanes.iter().any(|l| matches!(l, Lane::Turn(_))) {
            e.io(Io::SetTimer { timer: self.timer_p(Timer::Deadline) });
            self.closing = Closing::Draining { deadline: true };
        } else {
            self.maybe_stopped(e);
        }
    }

    /// Shutdown abandons a pending title request (SPEC 4.11: nothing waits for a title): its
    /// generation is aborted and the prompt's title written at once, as a write of the
    /// submission that requested it. That submission is the session's oldest with writes in
    /// this transition (it was activated, so everything older has ended), so the title comes
    /// first (`docs/lifecycle-rules.md`).
    fn abandon_title(&mut self, s: u8, e: &mut Emit) {
        if let Title::Requested { seq: n } = self.titles[s as usize] {
            self.stale[STALE_TITLE] = true;
            self.titles[s as usize] = Title::Titled;
            e.io(Io::AbortTitle { session: self.name(s), seq: seq(n) });
            e.rec(s, Rec::Title);
        }
    }

    /// Stops the IO of a step's attempt: its stream, its backoff timer or its refresh wait.
    fn stop_attempt(&mut self, s: u8, t: Turn, a: Attempt, e: &mut Emit) {
        let (owner, attempt) = (seq(t.owner), u32::from(a.number));
        match a.phase {
            AttemptPhase::Streaming => {
                self.stale[STALE_STEP] = true;
                e.io(Io::AbortStep { seq: owner, step: u32::from(t.step), attempt });
                self.cancel_timer(Timer::Watchdog(s), e);
            }
            AttemptPhase::Backoff => self.cancel_timer(Timer::Retry(s), e),
            AttemptPhase::Refreshing => {
                let io = Io::AbortRefresh { session: self.name(s), seq: Some(owner), attempt };
                self.abort_refresh(e, io);
            }
        }
    }

    fn maybe_stopped(&mut self, e: &mut Emit) {
        // The core stops once nothing it holds is unfinished: it cannot wait for submissions
        // in flight that it does not know (they are rejected when they arrive).
        let unfinished = self.seqs().any(|n| self.unfinished(n));
        if self.closing == (Closing::Draining { deadline: false }) && !unfinished {
            let idle = self.lanes.iter().all(|l| *l == Lane::Idle);
            if idle {
                self.closing = Closing::Closed;
                if e.on {
                    e.p.stopped = true;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::call_id;

    #[test]
    fn call_ids_name_the_step_and_the_second_call() {
        assert_eq!(call_id(0, 0), "c0");
        assert_eq!(call_id(3, 1), "c3b");
        assert_eq!(call_id(12, 0), "c12");
        assert_eq!(call_id(255, 1), "c255b");
    }
}
