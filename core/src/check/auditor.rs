//! The stream auditor: SPEC section 6 over the input and output stream alone.

use std::collections::{BTreeMap, BTreeSet};

use super::sorted::{SortedMap, SortedSet};

use crate::alphabet::{
    AttemptIo, CallId, CallIo, Input, MessageFinish, MessageId, Outcome, Output, OutputKind, Reply,
    RunId, Seq, SessionId, Start, StepEvent, StepIo, StoreOp, SummaryIo, TimerId, TimerPurpose,
    TurnId,
};

use super::{Violation, fail};

/// What the auditor knows of one accepted submission.
#[derive(Debug, PartialEq, Eq)]
struct Sub {
    session: SessionId,
    run_id: Option<RunId>,
    activated: bool,
    user_message: bool,
    outcome: Option<Outcome>,
    /// The outcome a cancel, clear or shutdown decided for it (I4).
    claimed: Option<Outcome>,
    /// Paused for a summarization (activated, not running).
    paused: bool,
    /// For a sub-agent: the submission whose turn started it.
    parent_seq: Option<Seq>,
}

clone_reusing!(Sub {
    session,
    run_id,
    activated,
    user_message,
    outcome,
    claimed,
    paused,
    parent_seq
});

/// What the auditor knows of an assistant message's finish.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Finish {
    None,
    /// `tool_use`: may still become `end_turn` when a result stops the turn (SPEC 4.4).
    ToolUse,
    /// Another finish the stream gave: a cancel or a failure while the step's tools still run
    /// replaces it with `canceled` or `error` (SPEC 4.4, 4.9).
    Stream,
    /// `canceled` or `error`: never rewritten.
    Final,
}

/// Which unfinished submissions a cancel-like input covers.
type Covers = Box<dyn Fn(Seq, &Sub) -> bool>;

/// One record of a session's message history, for I8.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Record {
    User,
    Assistant { id: MessageId, finished: Finish, reasoning_open: bool },
    Call { id: MessageId, call: CallId, finished: bool },
    Result { id: MessageId, call: CallId },
}

/// Records a message-level write in the session's history for the I8 check at turn end.
fn record_message(log: &mut Vec<Record>, op: &StoreOp) -> Result<(), Violation> {
    match op {
        StoreOp::AssistantMessage { id, .. } => {
            log.push(Record::Assistant { id: *id, finished: Finish::None, reasoning_open: false });
        }
        StoreOp::ToolInputStarted { id, call, .. } => {
            log.push(Record::Call { id: *id, call: call.clone(), finished: false });
        }
        StoreOp::ToolCall { id, call, .. } => {
            let open = log.iter_mut().find(|r| matches!(r, Record::Call { id: m, call: c, finished: false } if m == id && c == call));
            match open {
                Some(Record::Call { finished, .. }) => *finished = true,
                _ => log.push(Record::Call { id: *id, call: call.clone(), finished: true }),
            }
        }
        StoreOp::ToolResult { id, call, .. } => {
            log.push(Record::Result { id: *id, call: call.clone() })
        }
        StoreOp::ReasoningStarted { id, .. } | StoreOp::ReasoningEnded { id, .. } => {
            let start = matches!(op, StoreOp::ReasoningStarted { .. });
            match find(log, *id).map(|i| &mut log[i]) {
                Some(Record::Assistant { reasoning_open, .. }) if *reasoning_open != start => {
                    *reasoning_open = start
                }
                _ => {
                    return fail(
                        "I8",
                        format!("message {id}: reasoning started twice or ended unstarted"),
                    );
                }
            }
        }
        StoreOp::MessageReset { id, .. } => {
            // The attempt's content is gone: its calls and reasoning leave the history.
            log.retain(|r| !matches!(r, Record::Call { id: m, .. } if m == id));
            if let Some(Record::Assistant { reasoning_open, finished, .. }) =
                find(log, *id).map(|i| &mut log[i])
            {
                if *finished != Finish::None {
                    return fail("I8", format!("message {id} reset after its finish"));
                }
                *reasoning_open = false;
            }
        }
        StoreOp::MessageFinished { id, finish, .. } => record_finish(log, *id, finish)?,
        _ => {}
    }
    Ok(())
}

/// How each `(session, seq)` item of a set orders against `(session, seq)`, to find one
/// without copying the session's id into a key.
fn pair<'a>(
    session: &'a SessionId,
    seq: Seq,
) -> impl FnMut(&(SessionId, Seq)) -> std::cmp::Ordering + 'a {
    move |(s, q)| s.cmp(session).then(q.cmp(&seq))
}

/// Checks the input/output stream of one engine against SPEC section 6, knowing nothing of the
/// engine's internals. Feed it every transition with [`Auditor::observe`].
///
/// Two auditors are equal when they hold the same knowledge of the stream, so they judge
/// every continuation alike (a checker that steps one copy through several transitions tells
/// with it whether a transition taught the copy anything).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Auditor {
    subs: SortedMap<Seq, Sub>,
    newest: Option<Seq>,
    /// RunIds whose RunComplete was published, in this life or before the start.
    completed_runs: SortedSet<RunId>,
    runs: SortedMap<RunId, Seq>,
    watermarks: SortedMap<SessionId, Seq>,
    prepares: SortedSet<(SessionId, Seq)>,
    /// Sessions flushed in the current transition (SPEC I9: flush before completion).
    flushed: SortedSet<SessionId>,
    /// Submissions whose usage was written in the current transition (SPEC 4.4, 4.11: once
    /// per step or summary, so a cost is added once).
    used: SortedSet<Seq>,
    steps: SortedSet<StepIo>,
    refreshes: SortedSet<AttemptIo>,
    summaries: SortedSet<SummaryIo>,
    /// Title requests not answered (not counted as pending IO: no submission waits on them).
    titles: SortedSet<(SessionId, Seq)>,
    /// Sessions summarizing now, with the summary's id (I3 counts a summary like a turn).
    summarizing: SortedMap<SessionId, TurnId>,
    /// The paused submission of a session, which must be the next one activated there (I11).
    paused: SortedMap<SessionId, Seq>,
    /// Running tool calls whose result is awaited. An `AbortTool` removes one: the host drops
    /// it, so a result that still arrives is stale (I13); a call left to finish is never
    /// aborted and stays here until it reports or its turn ends.
    tools: SortedSet<CallIo>,
    timers: SortedSet<TimerId>,
    /// Armed stream watchdogs (SPEC 4.5): the session whose attempt each watches, and whether
    /// a content event of that session's attempt arrived since the timer was armed.
    watchdogs: SortedMap<TimerId, (SessionId, bool)>,
    /// The newest message, turn and timer ids assigned (I14: each strictly increases, from
    /// the start state's `next_message` on).
    ids: Ids,
    last_user: SortedMap<SessionId, Seq>,
    last_activation: SortedMap<SessionId, Seq>,
    history: SortedMap<SessionId, Vec<Record>>,
    dirty: SortedSet<SessionId>,
    stopped: bool,
}

clone_reusing!(Auditor {
    subs,
    newest,
    completed_runs,
    runs,
    watermarks,
    prepares,
    flushed,
    used,
    steps,
    refreshes,
    summaries,
    titles,
    summarizing,
    paused,
    tools,
    timers,
    watchdogs,
    ids,
    last_user,
    last_activation,
    history,
    dirty,
    stopped,
});

/// The identifiers the auditor saw assigned (I14). Within one transition the core emits ids in
/// SPEC 7's order, not in the order it assigned them (a parent's grace timer can follow its
/// child's), so the rule is per transition: every id assigned is new, and above every id of
/// the transitions before.
#[derive(Debug, Default, PartialEq, Eq)]
struct Ids {
    /// The newest message, turn and timer id before this transition (message: from
    /// `Start::next_message - 1`).
    before: [u64; 3],
    /// The ids assigned in this transition, by kind.
    this: SortedSet<(usize, u64)>,
}

clone_reusing!(Ids { before, this });

const MESSAGE: usize = 0;
const TURN: usize = 1;
const TIMER: usize = 2;
const ID_NAMES: [&str; 3] = ["message", "turn", "timer"];

impl Ids {
    /// I14: an id this transition assigns is new and above every one assigned before it.
    fn fresh(&mut self, kind: usize, id: u64) -> Result<(), Violation> {
        let (what, newest) = (ID_NAMES[kind], self.before[kind]);
        if id <= newest {
            return fail("I14", format!("{what} id {id} is not above the newest one, {newest}"));
        }
        if !self.this.insert((kind, id)) {
            return fail("I14", format!("{what} id {id} was assigned twice in one transition"));
        }
        Ok(())
    }

    /// The transition ended: its ids are now the newest.
    fn end_transition(&mut self) {
        for (kind, id) in std::mem::take(&mut self.this) {
            self.before[kind] = self.before[kind].max(id);
        }
    }
}

impl Auditor {
    /// An auditor for an engine started from `start`.
    #[must_use]
    pub fn new(start: &Start) -> Auditor {
        let mut a = Auditor::default();
        a.ids.before[MESSAGE] = start.next_message.map_or(0, |m| m.0.saturating_sub(1));
        for r in &start.runs {
            a.completed_runs.insert(r.run_id.clone());
            a.runs.insert(r.run_id.clone(), r.seq);
        }
        a
    }

    /// The number of accepted submissions without an outcome.
    #[must_use]
    pub fn unfinished(&self) -> usize {
        self.subs.values().filter(|s| s.outcome.is_none()).count()
    }

    /// Number of host requests and timers still pending (I6: nonzero while anything is
    /// unfinished).
    #[must_use]
    pub fn pending_io(&self) -> usize {
        self.prepares.len()
            + self.steps.len()
            + self.refreshes.len()
            + self.summaries.len()
            + self.tools.len()
            + self.timers.len()
    }

    /// Checks one transition: the input and every output it produced.
    ///
    /// # Errors
    /// The first [`Violation`] found.
    pub fn observe(&mut self, input: &Input, outputs: &[Output]) -> Result<(), Violation> {
        if self.is_stale(input) && !outputs.is_empty() {
            return fail("I13", format!("a stale reply produced {} outputs", outputs.len()));
        }
        let fired = self.watch(input);
        self.take_reply(input);
        let mut claimed = self.claim(input);
        // A cancel of a turn covers the sub-agents that turn started (SPEC 4.10, I4).
        if matches!(input, Input::Cancel { .. } | Input::CancelRun { .. }) {
            for (seq, s) in &mut self.subs {
                if s.outcome.is_none()
                    && s.claimed.is_none()
                    && s.parent_seq.is_some_and(|p| claimed.contains(&p))
                {
                    s.claimed = Some(Outcome::Cancelled);
                    claimed.push(*seq);
                }
            }
        }
        self.flushed.clear();
        self.used.clear();
        for o in outputs {
            self.output(o)?;
        }
        self.ids.end_transition();
        if let Some(watched) = fired {
            Self::judge_watchdog(&watched, outputs)?;
        }
        // A cancel, clear or shutdown ends the waiting submissions it covers at once (SPEC 4.10).
        if let Some(seq) = claimed
            .iter()
            .find(|q| self.subs.get(q).is_some_and(|s| !s.activated && s.outcome.is_none()))
        {
            return fail(
                "I4",
                format!(
                    "waiting submission {seq} was covered but not ended in the same transition"
                ),
            );
        }
        if !self.dirty.is_empty() {
            return fail(
                "I9",
                format!("writes of {:?} left uncommitted at the end of a transition", self.dirty),
            );
        }
        if self.unfinished() > 0 && self.pending_io() == 0 {
            return fail("I6", "a submission is unfinished and nothing is pending");
        }
        Ok(())
    }

    /// SPEC 4.5: a content event of a session's attempt marks its watchdog; a watchdog's firing
    /// is returned with its mark, for [`Auditor::judge_watchdog`].
    fn watch(&mut self, input: &Input) -> Option<(SessionId, bool)> {
        let (session, event) = match input {
            Input::TimerFired { timer } => return self.watchdogs.remove(timer),
            Input::Step { step, event } if self.steps.contains(step) => (&step.session, event),
            Input::Summary { io, event } if self.summaries.contains(io) => (&io.session, event),
            _ => return None,
        };
        let content = match event {
            StepEvent::TextDelta { text } | StepEvent::ReasoningDelta { text } => !text.is_empty(),
            StepEvent::Failed { .. } => false,
            _ => true,
        };
        if content {
            for w in self.watchdogs.values_mut().filter(|w| w.0 == *session) {
                w.1 = true;
            }
        }
        None
    }

    /// SPEC 4.5: a watchdog that fires fails its attempt (an abort of the session's stream)
    /// exactly when no content event arrived since it was armed; otherwise it is re-armed.
    fn judge_watchdog(watched: &(SessionId, bool), outputs: &[Output]) -> Result<(), Violation> {
        let (session, content) = watched;
        let aborted = outputs.iter().any(|o| match &o.kind {
            OutputKind::AbortStep { step } => step.session == *session,
            OutputKind::AbortSummary { io } => io.session == *session,
            _ => false,
        });
        let rearmed = outputs.iter().any(|o| {
            matches!(&o.kind, OutputKind::SetTimer { purpose: TimerPurpose::StreamIdle { session: s, .. }, .. } if s == session)
        });
        match (content, aborted, rearmed) {
            (true, true, _) => fail(
                "SPEC 4.5",
                format!(
                    "the watchdog failed the attempt of session {session} although content arrived"
                ),
            ),
            (false, false, _) => fail(
                "SPEC 4.5",
                format!(
                    "the watchdog of session {session} fired on a stalled attempt and did not fail it"
                ),
            ),
            (true, false, false) => fail(
                "SPEC 4.5",
                format!(
                    "the watchdog of session {session} fired on a live attempt and was not re-armed"
                ),
            ),
            _ => Ok(()),
        }
    }

    fn is_stale(&self, input: &Input) -> bool {
        match input {
            Input::Prepared { seq, .. } | Input::PreparationFailed { seq, .. } => {
                !self.prepares.iter().any(|p| p.1 == *seq && matches!(input, Input::Prepared { session, .. } | Input::PreparationFailed { session, .. } if *session == p.0))
            }
            Input::Step { step, .. } => !self.steps.contains(step),
            Input::CredentialsRefreshed { attempt, .. } => !self.refreshes.contains(attempt),
            Input::Summary { io, .. } => !self.summaries.contains(io),
            Input::TitleGenerated { session, seq, .. } => !self.titles.contains_by(pair(session, *seq)),
            Input::ToolResult { call, .. } => !self.tools.contains(call),
            Input::TimerFired { timer } => !self.timers.contains(timer),
            _ => false,
        }
    }

    /// A reply consumes the request it answers.
    fn take_reply(&mut self, input: &Input) {
        match input {
            Input::Prepared { session, seq, .. }
            | Input::PreparationFailed { session, seq, .. } => {
                self.prepares.remove_by(pair(session, *seq));
            }
            Input::Step { step, event: StepEvent::Finished { .. } | StepEvent::Failed { .. } } => {
                self.steps.remove(step);
            }
            Input::ToolResult { call, .. } => {
                self.tools.remove(call);
            }
            Input::CredentialsRefreshed { attempt, .. } => {
                self.refreshes.remove(attempt);
            }
            Input::TitleGenerated { session, seq, .. } => {
                self.titles.remove_by(pair(session, *seq));
            }
            Input::Summary { io, event: StepEvent::Finished { .. } | StepEvent::Failed { .. } } => {
                self.summaries.remove(io);
            }
            Input::TimerFired { timer } => {
                self.timers.remove(timer);
            }
            _ => {}
        }
    }

    /// Records which submissions a cancel, clear or shutdown decides (I4, I10).
    /// Returns the sequences this input claimed.
    fn claim(&mut self, input: &Input) -> Vec<Seq> {
        let (session, covers): (Option<&SessionId>, Covers) = match input {
            Input::Cancel { session, up_to } => {
                let wm = up_to.or(self.newest).unwrap_or(Seq(0));
                let e = self.watermarks.get_or_insert_with(session, || wm);
                *e = (*e).max(wm);
                (Some(session), Box::new(move |seq, _| seq <= wm))
            }
            Input::CancelRun { run_id } => {
                let target = self.runs.get(run_id).copied();
                (None, Box::new(move |seq, _| Some(seq) == target))
            }
            Input::ClearQueue { session } => (Some(session), Box::new(|_, s: &Sub| !s.activated)),
            Input::Shutdown => {
                let mut claimed = Vec::new();
                for (seq, s) in
                    self.subs.iter_mut().filter(|(_, s)| s.outcome.is_none() && s.claimed.is_none())
                {
                    s.claimed = Some(Outcome::Interrupted);
                    claimed.push(*seq);
                }
                return claimed;
            }
            _ => return Vec::new(),
        };
        let mut claimed = Vec::new();
        for (seq, s) in &mut self.subs {
            if s.outcome.is_none()
                && s.claimed.is_none()
                && session.is_none_or(|x| *x == s.session)
                && covers(*seq, s)
            {
                s.claimed = Some(Outcome::Cancelled);
                claimed.push(*seq);
            }
        }
        claimed
    }

    fn sub(&mut self, seq: Seq, what: &str) -> Result<&mut Sub, Violation> {
        match self.subs.get_mut(&seq) {
            Some(s) => Ok(s),
            None => fail("I2", format!("{what} for submission {seq}, which was never accepted")),
        }
    }

    fn output(&mut self, o: &Output) -> Result<(), Violation> {
        if self.io_ended(&o.kind) {
            return Ok(());
        }
        match &o.kind {
            OutputKind::Reply(r) => self.reply(r),
            OutputKind::Prepare { session, seq } => {
                self.must_be_live(*seq, "a preparation")?;
                self.prepares.insert((session.clone(), *seq));
                Ok(())
            }
            OutputKind::StartStep { step } => {
                self.must_be_live(step.seq, "a step")?;
                self.steps.insert(step.clone());
                Ok(())
            }
            OutputKind::RefreshCredentials { attempt } => {
                if let AttemptIo::Step(step) = attempt {
                    self.must_be_live(step.seq, "a credential refresh")?;
                }
                self.refreshes.insert(attempt.clone());
                Ok(())
            }
            OutputKind::StartSummary { io } => self.start_summary(io),
            OutputKind::RequestTitle { session, seq, .. } => {
                self.titles.insert((session.clone(), *seq));
                Ok(())
            }
            OutputKind::RunTool { call, .. } => {
                self.must_be_live(call.seq, "a tool")?;
                self.tools.insert(call.clone());
                Ok(())
            }
            OutputKind::SetTimer { timer, purpose, .. } => {
                self.ids.fresh(TIMER, timer.0)?;
                self.timers.insert(*timer);
                if let TimerPurpose::StreamIdle { session, .. } = purpose {
                    if self.watchdogs.values().any(|w| w.0 == *session) {
                        return fail(
                            "SPEC 4.5",
                            format!("a second watchdog armed in session {session}"),
                        );
                    }
                    self.watchdogs.insert(*timer, (session.clone(), false));
                }
                Ok(())
            }
            OutputKind::Store(op) => self.store(op),
            OutputKind::Commit { session } => {
                self.dirty.remove(session);
                Ok(())
            }
            OutputKind::Finished(c) => self.finished(c),
            OutputKind::AbortPreparation { .. }
            | OutputKind::AbortStep { .. }
            | OutputKind::AbortRefresh { .. }
            | OutputKind::AbortTitle { .. }
            | OutputKind::AbortSummary { .. }
            | OutputKind::AbortTool { .. }
            | OutputKind::CancelTimer { .. } => Ok(()), // handled by io_ended
            OutputKind::Stopped => {
                if self.stopped || self.unfinished() > 0 {
                    return fail("I6", "Stopped twice or with unfinished submissions");
                }
                self.stopped = true;
                Ok(())
            }
        }
    }

    /// An abort or a disarmed timer: the IO it names is no longer pending. Returns false for
    /// any other output.
    fn io_ended(&mut self, kind: &OutputKind) -> bool {
        match kind {
            OutputKind::AbortPreparation { session, seq } => {
                self.prepares.remove_by(pair(session, *seq))
            }
            OutputKind::AbortStep { step } => self.steps.remove(step),
            OutputKind::AbortRefresh { attempt } => self.refreshes.remove(attempt),
            OutputKind::AbortTitle { session, seq } => self.titles.remove_by(pair(session, *seq)),
            OutputKind::AbortSummary { io } => self.summaries.remove(io),
            OutputKind::CancelTimer { timer } => {
                self.watchdogs.remove(timer);
                self.timers.remove(timer)
            }
            OutputKind::AbortTool { call } => self.tools.remove(call),
            _ => return false,
        };
        true
    }

    /// I5: nothing starts for a submission that is finished or that a cancel decided.
    fn must_be_live(&mut self, seq: Seq, what: &str) -> Result<(), Violation> {
        let s = self.sub(seq, what)?;
        if s.outcome.is_some() || s.claimed.is_some() {
            return fail(
                "I5",
                format!("{what} started for submission {seq} after its outcome was decided"),
            );
        }
        if s.paused {
            return fail(
                "I3",
                format!("{what} started for submission {seq} while it is paused for a summary"),
            );
        }
        Ok(())
    }

    fn reply(&mut self, r: &Reply) -> Result<(), Violation> {
        let Reply::Accepted { session, seq, run_id, .. } = r else {
            return Ok(());
        };
        self.accept(session, *seq, run_id.as_ref(), None)
    }

    /// A new submission: from a client (a reply) or a sub-agent (a child's ledger row).
    fn accept(
        &mut self,
        session: &SessionId,
        seq: Seq,
        run_id: Option<&RunId>,
        parent_seq: Option<Seq>,
    ) -> Result<(), Violation> {
        let seq = &seq;
        if self.newest.is_some_and(|n| *seq <= n) {
            return fail("I7", format!("sequence {seq} assigned after {:?}", self.newest));
        }
        self.newest = Some(*seq);
        if let Some(r) = run_id
            && self.runs.insert(r.clone(), *seq).is_some()
        {
            return fail("I1", format!("run {r} accepted twice"));
        }
        let covered = self.watermarks.get(session).is_some_and(|wm| seq <= wm);
        let sub = Sub {
            session: session.clone(),
            run_id: run_id.cloned(),
            activated: false,
            user_message: false,
            outcome: None,
            claimed: covered.then_some(Outcome::Cancelled),
            paused: false,
            parent_seq,
        };
        self.subs.insert(*seq, sub);
        Ok(())
    }

    fn store(&mut self, op: &StoreOp) -> Result<(), Violation> {
        let session = op.session();
        if let StoreOp::ChildAccepted { seq, parent_seq, .. } = op {
            self.accept(session, *seq, None, Some(*parent_seq))?;
        }
        if let StoreOp::SessionUsage { seq: Some(seq), ancestor, .. } = op {
            self.usage(*seq, ancestor.as_ref())?;
        }
        if let Some(seq) = op.seq() {
            let s = self.sub(seq, "a write")?;
            if s.outcome.is_some() {
                return fail("I9", format!("a write for submission {seq} after its completion"));
            }
        }
        self.dirty.insert_cloned(session);
        let log = self.history.get_or_insert_with(session, Vec::new);
        match op {
            StoreOp::UserMessage { id, .. }
            | StoreOp::AssistantMessage { id, .. }
            | StoreOp::SummaryMessage { id, .. } => {
                self.ids.fresh(MESSAGE, id.0)?;
            }
            StoreOp::LedgerActivated { turn, .. } => self.ids.fresh(TURN, turn.0)?,
            _ => {}
        }
        match op {
            StoreOp::LedgerActivated { seq, .. } => self.activated(session, *seq)?,
            StoreOp::LedgerPaused { seq, .. } => {
                self.paused.insert(session.clone(), *seq);
                self.sub(*seq, "a pause")?.paused = true;
            }
            StoreOp::UserMessage { seq, synthetic: true, .. } => {
                log.push(Record::User);
                self.must_be_activated(*seq)?;
            }
            StoreOp::UserMessage { seq, .. } => {
                if self.last_user.get(session).is_some_and(|l| l >= seq) {
                    return fail(
                        "I7",
                        format!("session {session}: user message of {seq} out of order"),
                    );
                }
                log.push(Record::User);
                self.last_user.insert(session.clone(), *seq);
                self.sub(*seq, "a user message")?.user_message = true;
            }
            StoreOp::SummaryDone { .. }
            | StoreOp::SummaryFailed { .. }
            | StoreOp::SummaryDeleted { .. } => {
                self.summarizing.remove(session);
            }
            StoreOp::LedgerOutcome { .. } | StoreOp::ChildAccepted { .. } => {}
            StoreOp::Flush { session } => {
                self.flushed.insert_cloned(session);
            }
            _ => {
                record_message(log, op)?;
                if let Some(seq) = op.seq() {
                    self.must_be_activated(seq)?;
                }
            }
        }
        Ok(())
    }

    /// SPEC 4.4 and 4.11: one input ends at most one step or summary of a submission, so its
    /// usage is written at most once in a transition (a second write adds the cost twice); a
    /// sub-agent's write adds the same cost to its parent, and no other write names an
    /// ancestor.
    fn usage(&mut self, seq: Seq, ancestor: Option<&SessionId>) -> Result<(), Violation> {
        if !self.used.insert(seq) {
            return fail(
                "SPEC 4.11",
                format!(
                    "submission {seq}'s usage written twice in one transition: its cost is added twice"
                ),
            );
        }
        let parent = match self.sub(seq, "a usage write")?.parent_seq {
            // A parent the auditor forgot (it ended first) is not checked.
            Some(p) => match self.subs.get(&p) {
                Some(p) => Some(&p.session),
                None => return Ok(()),
            },
            None => None,
        };
        if parent != ancestor {
            return fail(
                "SPEC 4.11",
                format!(
                    "submission {seq}'s usage adds its cost to {ancestor:?}, not to its parent {parent:?}"
                ),
            );
        }
        Ok(())
    }

    /// I3 (one turn or summary per session), I7 (own turns in acceptance order) and I11 (a
    /// paused submission resumes before anything queued) at an activation.
    fn activated(&mut self, session: &SessionId, seq: Seq) -> Result<(), Violation> {
        if let Some((other, _)) = self.subs.iter().find(|(q, s)| {
            s.session == *session && s.activated && s.outcome.is_none() && **q != seq
        }) {
            return fail(
                "I3",
                format!("session {session} activates {seq} while {other} is active or paused"),
            );
        }
        if self.summarizing.contains_key(session) {
            return fail("I3", format!("session {session} activates {seq} while it summarizes"));
        }
        match self.paused.get(session).copied() {
            Some(p) if p != seq => {
                return fail("I11", format!("session {session} activates {seq} before paused {p}"));
            }
            Some(_) => {
                self.paused.remove(session);
                self.sub(seq, "a resume")?.paused = false;
                return Ok(());
            }
            None => {}
        }
        if self.last_activation.get(session).is_some_and(|l| *l >= seq) {
            return fail(
                "I7",
                format!("session {session} activates {seq} out of acceptance order"),
            );
        }
        self.last_activation.insert(session.clone(), seq);
        self.sub(seq, "an activation")?.activated = true;
        Ok(())
    }

    /// I3: a summary starts only where no turn runs (a paused submission does not run).
    fn start_summary(&mut self, io: &SummaryIo) -> Result<(), Violation> {
        let session = &io.session;
        if let Some(seq) = self.paused.get(session).copied() {
            let s = self.sub(seq, "a summary")?;
            if s.outcome.is_some() || s.claimed.is_some() {
                return fail(
                    "I5",
                    format!("a summary started for paused {seq} after its outcome was decided"),
                );
            }
        }
        if let Some((seq, _)) = self
            .subs
            .iter()
            .find(|(_, s)| s.session == *session && s.activated && !s.paused && s.outcome.is_none())
        {
            return fail("I3", format!("session {session} summarizes while {seq} is active"));
        }
        if self
            .summarizing
            .insert(session.clone(), io.summary)
            .is_some_and(|other| other != io.summary)
        {
            return fail("I3", format!("session {session} starts a second summary while one runs"));
        }
        self.summaries.insert(io.clone());
        Ok(())
    }

    /// I9: a submission that never became active writes no message.
    fn must_be_activated(&mut self, seq: Seq) -> Result<(), Violation> {
        if !self.sub(seq, "a message write")?.activated {
            return fail(
                "I9",
                format!("submission {seq} writes a message without being activated"),
            );
        }
        Ok(())
    }

    fn finished(&mut self, c: &crate::alphabet::Completion) -> Result<(), Violation> {
        let seq = c.seq();
        if self.dirty.contains(c.session()) {
            return fail(
                "I9",
                format!("completion of {seq} published before its writes were committed"),
            );
        }
        let s = self.sub(seq, "a completion")?;
        if s.outcome.is_some() {
            return fail("I1", format!("submission {seq} got a second outcome"));
        }
        if s.run_id.as_ref() != c.run_id() || s.session != *c.session() {
            return fail("I2", format!("completion of {seq} names another run or session"));
        }
        let (claimed, user_message, activated) = (s.claimed, s.user_message, s.activated);
        if let Some(r) = c.run_id()
            && !self.completed_runs.insert_cloned(r)
        {
            return fail("I1", format!("second RunComplete for run {r}"));
        }
        match claimed {
            Some(claim) if claim != c.outcome() => {
                return fail(
                    "I4",
                    format!(
                        "submission {seq} ended {:?}, but a cancel or shutdown decided {claim:?}",
                        c.outcome()
                    ),
                );
            }
            None if c.outcome() == Outcome::Cancelled => {
                return fail(
                    "I4",
                    format!("submission {seq} ended cancelled though no cancel covered it (I10)"),
                );
            }
            _ => {}
        }
        let folded = c.outcome() == Outcome::Folded;
        if folded != (user_message && !activated) {
            return fail(
                "I9",
                format!("submission {seq}: folded outcome without exactly a folded user message"),
            );
        }
        if activated && !self.flushed.contains(c.session()) {
            return fail("I9", format!("completion of {seq} published without the final flush"));
        }
        if c.message_id().is_some() != activated || c.text().is_some() != activated {
            return fail("I9", format!("submission {seq}: message_id/text present iff activated"));
        }
        let wants_error = matches!(c.outcome(), Outcome::Failed | Outcome::Interrupted);
        if c.error().is_some() != wants_error {
            return fail(
                "I1",
                format!("submission {seq}: error present iff failed or interrupted"),
            );
        }
        if activated {
            // The session is the submission's (I2 above).
            self.check_history(c.session())?;
        }
        self.forget(c.session(), seq, c.outcome());
        Ok(())
    }

    /// A finished submission's IO is over and it is no longer paused.
    fn forget(&mut self, session: &SessionId, seq: Seq, outcome: Outcome) {
        self.steps.retain(|x| x.seq != seq);
        self.refreshes.retain(|x| !matches!(x, AttemptIo::Step(io) if io.seq == seq));
        self.tools.retain(|x| x.seq != seq);
        self.prepares.retain(|p| p.1 != seq);
        if self.paused.get(session) == Some(&seq) {
            self.paused.remove(session);
        }
        if let Some(sub) = self.subs.get_mut(&seq) {
            sub.outcome = Some(outcome);
        }
    }

    /// I8 at a turn end: every assistant message finished, every call with exactly one result,
    /// no user message between a call's message and its result.
    fn check_history(&mut self, session: &SessionId) -> Result<(), Violation> {
        let log = self.history.remove(session).unwrap_or_default();
        let mut results: BTreeMap<(MessageId, &CallId), usize> = BTreeMap::new();
        let mut open_calls: BTreeSet<(MessageId, &CallId)> = BTreeSet::new();
        let mut since_user_ok: BTreeSet<MessageId> = BTreeSet::new();
        for r in &log {
            match r {
                Record::User => since_user_ok.clear(),
                Record::Assistant { id, finished, reasoning_open } => {
                    if *finished == Finish::None || *reasoning_open {
                        return fail(
                            "I8",
                            format!(
                                "session {session}: message {id} unfinished or reasoning open at turn end"
                            ),
                        );
                    }
                    // Only the latest assistant message takes results: a new one closes the
                    // previous one's (SPEC 4.9: results follow their call's message).
                    since_user_ok.clear();
                    since_user_ok.insert(*id);
                }
                Record::Call { id, call, finished } => {
                    if !finished {
                        return fail(
                            "I8",
                            format!("session {session}: call {call} unfinished at turn end"),
                        );
                    }
                    open_calls.insert((*id, call));
                }
                Record::Result { id, call } => {
                    if !since_user_ok.contains(id) || !open_calls.contains(&(*id, call)) {
                        return fail(
                            "I8",
                            format!(
                                "session {session}: result of {call} precedes or is separated from its call"
                            ),
                        );
                    }
                    *results.entry((*id, call)).or_default() += 1;
                }
            }
        }
        for c in &open_calls {
            if results.get(c) != Some(&1) {
                return fail(
                    "I8",
                    format!("session {session}: call {} has {:?} results", c.1, results.get(c)),
                );
            }
        }
        if results.keys().any(|k| !open_calls.contains(k)) {
            return fail("I8", format!("session {session}: a result without its call"));
        }
        Ok(())
    }
}

/// The newest assistant record with this id.
fn find(log: &[Record], m: MessageId) -> Option<usize> {
    log.iter()
        .rev()
        .position(|r| matches!(r, Record::Assistant { id, .. } if *id == m))
        .map(|p| log.len() - 1 - p)
}

/// A message's finish (I8): once, except that `tool_use` may become another finish, and a
/// stream's finish may become `canceled` or `error` while the step's tools still run.
fn record_finish(
    log: &mut [Record],
    id: MessageId,
    finish: &MessageFinish,
) -> Result<(), Violation> {
    let ends = matches!(finish, MessageFinish::Canceled { .. } | MessageFinish::Error { .. });
    let new = match finish {
        MessageFinish::ToolUse => Finish::ToolUse,
        _ if ends => Finish::Final,
        _ => Finish::Stream,
    };
    match find(log, id).map(|i| &mut log[i]) {
        Some(Record::Assistant { finished, .. })
            if *finished == Finish::None
                || (*finished == Finish::ToolUse && *finish != MessageFinish::ToolUse)
                || (*finished == Finish::Stream && ends) =>
        {
            *finished = new;
        }
        _ => return fail("I8", format!("message {id} finished twice or never created")),
    }
    Ok(())
}
