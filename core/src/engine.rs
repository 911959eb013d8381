//! The engine (SPEC section 2): one input door ([`Engine::handle`]), one output door
//! ([`Engine::poll_output`]), the host-protocol checks, and the dispatch to the handlers.

use std::collections::{BTreeMap, VecDeque};

use crate::alphabet::{
    Acceptor, AttemptIo, Config, Fingerprint, HostError, Input, Millis, Output, RunId, Seq,
    SessionId, Start, Submit,
};
use crate::check::Violation;
use crate::lifecycle::acceptance;
use crate::lifecycle::cancel;
use crate::lifecycle::preparation;
use crate::lifecycle::retry;
use crate::lifecycle::shutdown;
use crate::lifecycle::step;
use crate::lifecycle::stream;
use crate::lifecycle::subagent;
use crate::lifecycle::summary;
use crate::lifecycle::timers;
use crate::lifecycle::title;
use crate::state::Tx;
use crate::state::{Closing, Lane, Sessions, State};
use crate::state::{RunEntry, RunLedger};

/// The sans-IO lifecycle engine of one workspace.
///
/// Methods by kind:
/// - **Drive**: [`Engine::handle`] (one input at a time, with the current time) and
///   [`Engine::poll_output`] (drain until `None` after every `handle`). These are the only
///   methods that change the engine.
/// - **Observe**: [`Engine::now`], [`Engine::next_deadline`], [`Engine::is_busy`],
///   [`Engine::queue_len`], [`Engine::unfinished`], [`Engine::is_stopped`], [`Engine::config`],
///   [`Engine::newest_seq`], [`Engine::run_session`], [`Engine::has_active_turn`].
///
/// Guarantees: the same `Config`, `Start` and input sequence give the same output sequence, byte
/// for byte (I12); every accepted submission gets exactly one [`crate::OutputKind::Finished`]
/// (I1); host misuse is answered with a [`HostError`] and leaves the engine unchanged.
#[derive(Debug)]
pub struct Engine {
    /// `Err` once the engine failed for good (a bug it detected in itself, or a counter at its
    /// maximum): it then refuses every input.
    pub(crate) state: Result<State, Failed>,
    /// The sessions with work, beside the rest of the state (see [`Sessions`]).
    pub(crate) sessions: Sessions,
    now: Millis,
    outputs: VecDeque<Output>,
    next_output: u64,
    /// The transition buffer, kept to reuse its allocation.
    tx: Tx,
}

impl Engine {
    /// An engine with this configuration, starting from the store's ledger.
    ///
    /// # Errors
    /// [`HostError::InvalidConfig`] (see [`Config::validate`]); [`HostError::InvalidStart`]
    /// naming the field: `next_seq` or `next_message` 0 or at `u64::MAX` (nothing could be
    /// assigned after it), or a run listed twice or not below `next_seq`.
    pub fn new(config: Config, start: Start) -> Result<Engine, HostError> {
        config.validate()?;
        let bad = |field, run_id, reason| Err(HostError::InvalidStart { field, run_id, reason });
        let next_seq = start.next_seq.unwrap_or(Seq(1));
        if next_seq.0 == 0 {
            // Sequence 0 would make "nothing accepted yet" and "everything up to 0" the same
            // watermark, and an idle cancel would cancel the first prompt (I10).
            return bad("next_seq", None, "must be at least 1");
        }
        if next_seq.0 == u64::MAX {
            return bad("next_seq", None, "must be below u64::MAX: no sequence could follow it");
        }
        let next_message = start.next_message.map_or(1, |m| m.0);
        if next_message == 0 || next_message == u64::MAX {
            return bad("next_message", None, "must be at least 1 and below u64::MAX");
        }
        let mut runs = RunLedger::default();
        for r in start.runs {
            if r.seq >= next_seq {
                return bad("runs", Some(r.run_id), "its sequence is not below next_seq");
            }
            if runs.get(&r.run_id).is_some() {
                return bad("runs", Some(r.run_id), "listed twice");
            }
            let entry = RunEntry {
                session: r.session,
                seq: r.seq,
                fingerprint: r.fingerprint,
                outcome: Some(r.outcome),
            };
            runs.insert(r.run_id, entry);
        }
        let state = State {
            config,
            next_seq,
            next_message,
            next_turn: 1,
            next_timer: 1,
            exhausted: None,
            runs,
            watermarks: BTreeMap::new(),
            timers: BTreeMap::new(),
            now: Millis(0),
            closing: Closing::Open,
            crossings: Default::default(),
            titles: Default::default(),
            accepted: 0,
            outcomes_decided: 0,
            #[cfg(feature = "mutants")]
            poisoned: BTreeMap::new(),
        };
        Ok(Engine {
            state: Ok(state),
            sessions: Sessions::default(),
            now: Millis(0),
            outputs: VecDeque::new(),
            next_output: 0,
            tx: Tx::default(),
        })
    }

    /// An independent copy of the whole engine, for exhaustive checkers that explore every
    /// continuation of a state (the model's breadth-first search). Only with the `checker`
    /// feature: a host never needs it, and exactly-once by move holds within each copy, since
    /// no submission is shared between them. The copy starts with an empty output queue; drain
    /// the original first.
    #[cfg(feature = "checker")]
    #[must_use]
    pub fn fork(&self) -> Engine {
        debug_assert!(self.outputs.is_empty(), "fork after draining the outputs");
        Engine {
            state: self.state.clone(),
            sessions: self.sessions.clone(),
            now: self.now,
            outputs: VecDeque::new(),
            next_output: self.next_output,
            tx: Tx::default(),
        }
    }

    /// Whether this engine and `other` are in the same state but for the current time and the
    /// outputs' numbering: fed the same inputs at the same times (after both clocks), they give
    /// the same outputs but for their numbers. False also when either failed for good. The
    /// model checker asks it of a transition the specification says only spends a budget (an
    /// idle cancel, a stale reply): the core it leaves must be the core it started from. Its
    /// paths feed inputs at times that differ with their lengths, so it relies, as its
    /// deduplication does, on the core deciding from the order of inputs and the deadlines it
    /// set, not from the clock's absolute value.
    #[cfg(feature = "checker")]
    #[must_use]
    pub fn same_future(&self, other: &Engine) -> bool {
        debug_assert!(self.outputs.is_empty() && other.outputs.is_empty(), "drained");
        match (&self.state, &other.state) {
            (Ok(mine), Ok(theirs)) => mine == theirs && self.sessions == other.sessions,
            _ => false,
        }
    }

    /// Makes `into` what [`Engine::fork`] would return, reusing the allocations `into` holds:
    /// its sessions, turns, queues and strings are written over in place where both engines
    /// have them. For checkers that step many short-lived copies. Drain both engines first.
    #[cfg(feature = "checker")]
    pub fn fork_into(&self, into: &mut Engine) {
        debug_assert!(self.outputs.is_empty(), "fork after draining the outputs");
        let Engine { state, sessions, now, outputs, next_output, tx } = into;
        state.clone_from(&self.state);
        sessions.clone_from(&self.sessions);
        *now = self.now;
        outputs.clear();
        *next_output = self.next_output;
        debug_assert_eq!(tx.len(), 0, "a transition's buffer is empty between transitions");
    }

    /// Feeds one input at time `now`. Drain [`Engine::poll_output`] afterwards.
    ///
    /// A stale or duplicate reply (I13) and a cancel that covers nothing (I10) are not errors:
    /// they produce no output.
    ///
    /// # Errors
    /// Host misuse ([`HostError::TimeWentBackwards`], [`HostError::TimerNotDue`],
    /// [`HostError::SequenceNotIncreasing`]) leaves the engine unchanged;
    /// [`HostError::Internal`] means the engine failed for good.
    pub fn handle(&mut self, now: Millis, input: Input) -> Result<(), HostError> {
        let st = self.state.as_mut().map_err(|f| f.error())?;
        check_protocol(st, self.now, now, &input)?;
        self.now = now;
        st.now = now;
        let (tx, ss) = (&mut self.tx, &mut self.sessions);
        dispatch(st, ss, tx, now, input);
        while let Some(c) = st.crossings.pop_front() {
            subagent::cross(st, ss, tx, now, c);
        }
        shutdown::finish_if_drained(st, ss, tx);
        // O(1) release check of exactly-once bookkeeping (STYLE 4): a bug fails the engine.
        let failure = if st.outcomes_decided > st.accepted {
            Some(Failure::Internal("more outcomes decided than submissions accepted"))
        } else if self.next_output.checked_add(self.tx.len() as u64).is_none() {
            Some(Failure::Exhausted("next_output"))
        } else {
            st.exhausted.map(Failure::Exhausted)
        };
        if let Some(why) = failure {
            // The transition is discarded: a wrapped or repeated number never leaves it.
            return Err(self.fail(why));
        }
        let (outputs, next) = (&mut self.outputs, &mut self.next_output);
        self.tx.finish(|kind| {
            outputs.push_back(Output { no: *next, kind });
            *next += 1; // checked above for the whole transition
        });
        #[cfg(debug_assertions)]
        if let Err(v) = check_invariants(self) {
            panic!("invariant violated after an input at {} ms: {v}", now.0);
        }
        Ok(())
    }

    /// Fails the engine for good with `why`, keeping its configuration.
    fn fail(&mut self, why: Failure) -> HostError {
        self.tx = Tx::default();
        let config = match &self.state {
            Ok(st) => st.config.clone(),
            Err(f) => f.config.clone(),
        };
        self.state = Err(Failed { config, why });
        why.error()
    }

    /// The next output, in SPEC section 7 order, or `None` when all are drained.
    #[must_use]
    pub fn poll_output(&mut self) -> Option<Output> {
        self.outputs.pop_front()
    }

    /// The time of the latest input.
    #[must_use]
    pub fn now(&self) -> Millis {
        self.now
    }

    /// The earliest deadline of an armed timer, if any: the host should wake then.
    #[must_use]
    pub fn next_deadline(&self) -> Option<Millis> {
        self.state.as_ref().ok()?.timers.values().map(|t| t.deadline).min()
    }

    /// True while the session has an active turn (including one aborting) or any waiting
    /// submission (SPEC 3 "Busy").
    #[must_use]
    pub fn is_busy(&self, session: &SessionId) -> bool {
        self.state.is_ok() && self.sessions.get(session).is_some()
    }

    /// True when this call runs and its work began: the host reported
    /// [`crate::Input::ToolStarted`] and no abort came first, so an abort now leaves the call
    /// to finish (SPEC 4.9). A host that holds a call's work until then
    /// ([`crate::OnAbort::FinishOnceStarted`]) begins it only when this is true right after
    /// that input; when false, the call was aborted and its work must never begin.
    #[must_use]
    pub fn is_tool_started(&self, call: &crate::alphabet::CallIo) -> bool {
        self.state.is_ok() && step::tool_started(&self.sessions, call)
    }

    /// The number of waiting submissions of a session. The core never drops one; a host may
    /// refuse new prompts above [`Config::queue_max`].
    #[must_use]
    pub fn queue_len(&self, session: &SessionId) -> usize {
        self.sessions.get(session).map_or(0, |s| s.queue.len())
    }

    /// The number of accepted submissions without an outcome.
    #[must_use]
    pub fn unfinished(&self) -> u64 {
        self.state.as_ref().map_or(0, |st| st.unfinished())
    }

    /// True once shutdown completed ([`crate::OutputKind::Stopped`] was emitted).
    #[must_use]
    pub fn is_stopped(&self) -> bool {
        self.state.as_ref().is_ok_and(|st| st.closing == Closing::Closed)
    }

    /// The configuration the engine was created with (also after it failed).
    #[must_use]
    pub fn config(&self) -> &Config {
        match &self.state {
            Ok(st) => &st.config,
            Err(f) => &f.config,
        }
    }

    /// The newest sequence assigned or entered, if any (a host with an external acceptor uses
    /// its own counter instead).
    #[must_use]
    pub fn newest_seq(&self) -> Option<Seq> {
        self.state.as_ref().ok().and_then(newest)
    }

    /// The session of an accepted run, if the RunId is known (from the ledger at start, or
    /// accepted since). A host routes a reply about a run (an idempotent resubmission, a RunId
    /// conflict) behind that session's earlier writes, so it never reveals a run that is not
    /// durable yet.
    #[must_use]
    pub fn run_session(&self, run_id: &RunId) -> Option<&SessionId> {
        self.state.as_ref().ok()?.runs.get(run_id).map(|e| &e.session)
    }

    /// The fingerprint of an accepted run's request (SPEC 4.1), if the RunId is known: what a
    /// host writes in the run's ledger row, so that a resubmission is compared with what the
    /// core compared, not with a second computation of it.
    #[must_use]
    pub fn run_fingerprint(&self, run_id: &RunId) -> Option<Fingerprint> {
        self.state.as_ref().ok()?.runs.get(run_id).map(|e| e.fingerprint)
    }

    /// True when the session has an active turn (not merely waiting submissions).
    #[must_use]
    pub fn has_active_turn(&self, session: &SessionId) -> bool {
        self.sessions.get(session).is_some_and(|s| matches!(s.lane, Lane::Turn(_)))
    }
}

/// Host-protocol checks, before any change (STYLE 4: misuse leaves the state untouched).
fn check_protocol(st: &State, last: Millis, now: Millis, input: &Input) -> Result<(), HostError> {
    if now < last {
        return Err(HostError::TimeWentBackwards { last, now });
    }
    match input {
        Input::TimerFired { timer } => match st.timers.get(timer) {
            Some(t) if t.deadline > now => {
                Err(HostError::TimerNotDue { timer: *timer, deadline: t.deadline, now })
            }
            _ => Ok(()),
        },
        Input::Prepared { setup, .. }
            if st.config.acceptor == Acceptor::External
                && setup.tool(crate::alphabet::AGENT_TOOL).is_some() =>
        {
            Err(HostError::WrongAcceptor {
                reason: "sub-agents take their sequences from the core; with an external acceptor the agent tool is not allowed",
            })
        }
        // An idempotent resubmission is answered with the existing run, whatever it brings.
        Input::Submit(s) if s.run_id.as_ref().is_some_and(|r| st.runs.get(r).is_some()) => Ok(()),
        Input::Submit(Submit { seq: Some(seq), .. }) | Input::Cancel { up_to: Some(seq), .. }
            if seq.0 == u64::MAX =>
        {
            Err(HostError::SequenceOutOfRange { seq: *seq })
        }
        Input::Submit(s) => match (st.config.acceptor, s.seq) {
            (Acceptor::Core, Some(_)) => Err(HostError::WrongAcceptor {
                reason: "the core assigns sequences; a submission must not bring one",
            }),
            (Acceptor::External, None) => Err(HostError::WrongAcceptor {
                reason: "an external acceptor assigns sequences; the submission has none",
            }),
            (Acceptor::External, Some(seq)) if seq < st.next_seq => {
                Err(HostError::SequenceNotIncreasing { seq, last: newest(st).unwrap_or(Seq(0)) })
            }
            _ => Ok(()),
        },
        Input::Cancel { up_to: Some(up_to), .. }
            if st.config.acceptor == Acceptor::Core && *up_to >= st.next_seq =>
        {
            Err(HostError::WatermarkAhead { up_to: *up_to, newest: newest(st) })
        }
        _ => Ok(()),
    }
}

/// The newest sequence seen, if any.
fn newest(st: &State) -> Option<Seq> {
    st.next_seq.0.checked_sub(1).filter(|n| *n > 0 || st.accepted > 0).map(Seq)
}

/// Routes an input to its handler (docs/architecture.md has the table).
fn dispatch(st: &mut State, ss: &mut Sessions, tx: &mut Tx, now: Millis, input: Input) {
    match input {
        Input::Submit(s) => acceptance::on_submit(st, ss, tx, s),
        Input::Cancel { session, up_to } => cancel::on_cancel(st, ss, tx, now, &session, up_to),
        Input::CancelRun { run_id } => cancel::on_cancel_run(st, ss, tx, now, &run_id),
        Input::ClearQueue { session } => cancel::on_clear_queue(st, ss, tx, &session),
        Input::Shutdown => shutdown::on_shutdown(st, ss, tx, now),
        Input::Prepared { session, seq, setup } => {
            preparation::on_prepared(st, ss, tx, &session, seq, setup)
        }
        Input::PreparationFailed { session, seq, error } => {
            preparation::on_preparation_failed(st, ss, tx, &session, seq, error);
        }
        Input::Step { step, event } => stream::on_step(st, ss, tx, now, step, event),
        Input::CredentialsRefreshed { attempt: AttemptIo::Step(io), ok } => {
            retry::on_refreshed(st, ss, tx, io, ok)
        }
        Input::CredentialsRefreshed { attempt: AttemptIo::Summary(io), ok } => {
            summary::on_refreshed(st, ss, tx, io, ok);
        }
        Input::Summarize { session } => summary::on_summarize(st, ss, tx, session),
        Input::TitleGenerated { session, seq, title, usage } => {
            title::on_title(st, ss, tx, session, seq, title, usage)
        }
        Input::Summary { io, event } => summary::on_summary(st, ss, tx, now, io, event),
        Input::ToolStarted { call } => step::on_tool_started(ss, &call),
        Input::ToolResult { call, result } => step::on_tool_result(st, ss, tx, call, result),
        Input::TimerFired { timer } => timers::on_timer(st, ss, tx, now, timer),
    }
}

/// An engine that failed for good: what it was configured with, and why it failed.
#[derive(Clone, Debug)]
pub(crate) struct Failed {
    config: Config,
    why: Failure,
}

impl Failed {
    /// The error every later input gets.
    fn error(&self) -> HostError {
        self.why.error()
    }

    /// The failure in words, for the state checker.
    pub(crate) fn describe(&self) -> String {
        self.why.error().to_string()
    }
}

/// Why an engine failed for good.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Failure {
    /// A bug the engine detected in itself (STYLE 4).
    Internal(&'static str),
    /// A counter reached its maximum (`next_message`, `next_seq`, ...): the next value would
    /// wrap or repeat, which no transition may emit.
    Exhausted(&'static str),
}

impl Failure {
    fn error(self) -> HostError {
        match self {
            Failure::Internal(what) => HostError::Internal(what),
            Failure::Exhausted(counter) => HostError::Exhausted { counter },
        }
    }
}

/// Checks the engine's state against the invariants of SPEC section 6 that a state shows:
/// queue order (I7), one lane per session (I3), that every unfinished submission waits for a
/// pending host request or timer (the local half of I6), and the bookkeeping behind
/// exactly-once (I1). O(size of the state): the engine calls it after every input in debug
/// builds; replay, the property tests, the model checker and the simulator call it too.
///
/// # Errors
/// The first [`Violation`] found; an engine that failed on an internal bug is one.
pub fn check_invariants(engine: &Engine) -> Result<(), Violation> {
    crate::check::check_state(engine.state.as_ref().map_err(Failed::describe), &engine.sessions)
}

#[cfg(test)]
#[allow(clippy::expect_used)]
mod tests {
    use super::*;
    use crate::alphabet::Submit;
    use crate::state::Prep;

    /// STYLE 7: the checker runs after every transition; a state corrupted behind the engine's
    /// back is caught at the next input (a debug panic), not silently carried on.
    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "I7: session s: queue not in acceptance order")]
    fn a_corrupted_state_is_caught_after_the_next_input() {
        let mut e = Engine::new(Config::default(), Start::default()).expect("start");
        for p in ["a", "b", "c"] {
            e.handle(Millis(0), Input::Submit(Submit::new("s", p))).expect("valid");
        }
        // The test-only hook: reach into the state and swap two queue entries.
        let st = e.state.as_mut().expect("running");
        let _ = st;
        let q = &mut e.sessions.get_mut(&SessionId::new("s")).expect("session").queue;
        q.swap(0, 1);
        assert_eq!(q[0].prep, Prep::Preparing);
        // Any input will do; this one changes nothing, so only the corruption is there to find.
        let _ =
            e.handle(Millis(1), Input::CancelRun { run_id: crate::alphabet::RunId::new("none") });
    }

    #[test]
    fn the_checker_reports_a_corruption_by_name() {
        let mut e = Engine::new(Config::default(), Start::default()).expect("start");
        e.handle(Millis(0), Input::Submit(Submit::new("s", "a"))).expect("valid");
        assert_eq!(check_invariants(&e), Ok(()));
        e.state.as_mut().expect("running").outcomes_decided += 1;
        let v = check_invariants(&e).expect_err("corrupted");
        assert_eq!(v.invariant, "I1");
    }

    /// STYLE 11: an engine can move to another thread, and outputs stay small.
    #[test]
    fn engine_is_send_and_outputs_stay_small() {
        fn send<T: Send>() {}
        send::<Engine>();
        assert!(std::mem::size_of::<Output>() <= 96, "{}", std::mem::size_of::<Output>());
        assert!(std::mem::size_of::<Input>() <= 128, "{}", std::mem::size_of::<Input>());
    }
}
