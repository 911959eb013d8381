//! The engine's state: sessions, their queues and lanes, as enums with payloads (SPEC 3, 4.2).
//!
//! Each SPEC phase is a variant carrying only its data: a waiting entry is `Preparing` or
//! `Prepared`; a session's lane is idle or holds one turn; a turn streams, runs tools, or
//! aborts. There is no flag whose value must agree with another field.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::config::Config;
use crate::ids::{CallId, MessageId, Millis, RunId, Seq, SessionId, TimerId, TurnId};
use crate::input::{Attachment, Mode, Setup, StopTurn};
use crate::ledger::RunLedger;
use crate::output::TimerPurpose;

/// An accepted, unfinished submission. Deliberately not `Clone`: it lives in exactly one place
/// until [`crate::outcome`] consumes it (SPEC I1). The `checker` feature clones it only as part
/// of a whole-engine [`crate::Engine::fork`], where each copy still holds it once.
#[derive(Debug, PartialEq, Eq)]
#[cfg_attr(feature = "checker", derive(Clone))]
pub(crate) struct Submission {
    pub(crate) seq: Seq,
    pub(crate) session: SessionId,
    pub(crate) run_id: Option<RunId>,
    pub(crate) mode: Mode,
    pub(crate) prompt: String,
    /// Written with the submission's user message (then emptied); bounded by what the caller
    /// sent.
    pub(crate) attachments: Vec<Attachment>,
    /// Steps run so far, across resumed turns (the step limit counts them, SPEC 4.6).
    pub(crate) steps: u32,
    /// Summarizations not separated by a step that ended below the threshold (the no-progress
    /// guard of SPEC 4.7); at most [`SUMMARIES_WITHOUT_PROGRESS_MAX`].
    pub(crate) summaries: u32,
}

/// Summarizations without progress before the submission fails `context_window` (SPEC 8).
pub(crate) const SUMMARIES_WITHOUT_PROGRESS_MAX: u32 = 2;

/// Where a waiting submission is (SPEC 3 "Waiting").
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Prep {
    /// The host is preparing it.
    Preparing,
    /// Prepared, behind others or about to be admitted, with what the preparation resolved.
    Prepared(Setup),
}

impl Prep {
    pub(crate) fn is_prepared(&self) -> bool {
        matches!(self, Prep::Prepared(_))
    }
}

/// One entry of a session's queue.
#[derive(Debug, PartialEq, Eq)]
#[cfg_attr(feature = "checker", derive(Clone))]
pub(crate) struct Waiting {
    pub(crate) sub: Submission,
    pub(crate) prep: Prep,
}

/// A session with unfinished work. Sessions with none are dropped from the engine.
#[derive(Debug)]
#[cfg_attr(feature = "checker", derive(Clone))]
pub(crate) struct Session {
    pub(crate) id: SessionId,
    /// Waiting submissions in strictly ascending sequence order (SPEC 4.2). Bounded by
    /// [`Config::queue_max`]: a submission beyond it is still accepted (nothing accepted may be
    /// lost) but is reported by [`crate::Engine::queue_len`] so the host can push back.
    pub(crate) queue: VecDeque<Waiting>,
    /// The active turn or summarization, if any (SPEC I3: at most one).
    pub(crate) lane: Lane,
    /// The session's context gauges as the core last wrote them; `None` until a turn brings
    /// the stored values in its setup (SPEC 4.4, 4.7).
    pub(crate) gauges: Option<Gauges>,
    /// For a sub-agent session: the call of the parent's turn that waits for it (SPEC 4.11).
    pub(crate) parent: Option<ParentLink>,
    /// Whether the core asked for this session's title while it has been in memory.
    pub(crate) title: TitleState,
}

/// What the core knows of a session's title beyond the host's setup (SPEC 4.11).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum TitleState {
    /// Nothing: the setup of the activated submission says whether it has one.
    #[default]
    Unknown,
    /// Requested by the core: never again while the session is in memory.
    Requested,
}

/// The parent call a sub-agent session answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ParentLink {
    /// The call, named as a tool result for it would be.
    pub(crate) call: crate::input::CallIo,
}

/// A title request waiting for the host's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PendingTitle {
    /// The submission whose first activation asked for it.
    pub(crate) seq: Seq,
    /// Its prompt, the fallback title's source.
    pub(crate) prompt: String,
}

/// Work that crosses from one session to another within a transition (SPEC 4.11): a handler
/// holds one session at a time, so it queues these and the engine carries them out, in order,
/// before the transition ends.
#[derive(Debug)]
#[cfg_attr(feature = "checker", derive(Clone))]
pub(crate) enum Crossing {
    /// Start the sub-agent of an `agent` call in a new child session.
    StartChild { link: ParentLink, child: SessionId, seq: Seq, prompt: String, setup: Box<Setup> },
    /// A sub-agent ended: its parent's call gets this result.
    ChildEnded { link: ParentLink, result: crate::input::ToolOutput },
    /// The parent's turn was aborted: so is the sub-agent.
    AbortChild { child: SessionId, cause: Abort },
}

/// The context a session uses: `prompt_tokens + completion_tokens` (SPEC 4.4).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Gauges {
    pub(crate) prompt_tokens: u64,
    pub(crate) completion_tokens: u64,
}

impl Gauges {
    pub(crate) fn used(&self) -> u64 {
        self.prompt_tokens.saturating_add(self.completion_tokens)
    }
}

impl Session {
    /// An empty session.
    fn vacant(id: &SessionId) -> Session {
        let (queue, lane, title) = (VecDeque::new(), Lane::Idle, TitleState::Unknown);
        Session { id: id.clone(), queue, lane, gauges: None, parent: None, title }
    }

    /// True when the session has nothing unfinished (SPEC 3 "Busy" is the negation).
    pub(crate) fn is_idle(&self) -> bool {
        self.queue.is_empty() && matches!(self.lane, Lane::Idle)
    }
}

/// What occupies a session's single lane (SPEC I3).
#[derive(Debug, Default)]
#[cfg_attr(feature = "checker", derive(Clone))]
pub(crate) enum Lane {
    /// Nothing runs.
    #[default]
    Idle,
    /// A turn runs or is being aborted.
    Turn(Box<Turn>),
    /// The session summarizes (SPEC 4.7), as housekeeping or for a paused submission.
    Summary(Box<Summary>),
}

/// A summarization in progress (SPEC 4.7).
#[derive(Debug)]
#[cfg_attr(feature = "checker", derive(Clone))]
pub(crate) struct Summary {
    /// Numbered like turns; replies name it (I13).
    pub(crate) id: TurnId,
    pub(crate) purpose: Purpose,
    /// The summary message being written.
    pub(crate) message: MessageId,
    /// Streaming, backing off or waiting for credentials (the same rules as a step, SPEC 4.5).
    pub(crate) phase: Attempting,
    pub(crate) budget: Budget,
}

/// Why a session summarizes.
#[derive(Debug)]
#[cfg_attr(feature = "checker", derive(Clone))]
pub(crate) enum Purpose {
    /// After a submission ended, or on request: no submission depends on it.
    Housekeeping,
    /// A submission paused mid-turn; it resumes when the summary succeeds.
    Resume(Box<Paused>),
}

/// A submission paused for a summarization: not ended, not queued (SPEC 4.7).
#[derive(Debug)]
#[cfg_attr(feature = "checker", derive(Clone))]
pub(crate) struct Paused {
    pub(crate) sub: Submission,
    pub(crate) setup: Setup,
    /// The paused turn's last assistant message, reported if the submission ends while paused.
    pub(crate) last: crate::outcome::LastMessage,
}

/// The phases of an attempt that can be retried (a summary's; a turn's are in [`Phase`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Attempting {
    /// Waiting for the stream of this attempt.
    Streaming { attempt: u32 },
    /// The next attempt starts when `timer` fires.
    Backoff { next: u32, timer: TimerId },
    /// Waiting for the host's credential refresh of the refused attempt.
    Refreshing { attempt: u32 },
}

/// One activation of the agent loop for a submission (SPEC 3 "Turn").
#[derive(Debug)]
#[cfg_attr(feature = "checker", derive(Clone))]
pub(crate) struct Turn {
    pub(crate) owner: Submission,
    pub(crate) id: TurnId,
    /// What the owner's preparation resolved: tools, context window.
    pub(crate) setup: Setup,
    /// The current step, from 0.
    pub(crate) step: u32,
    /// The current step's assistant message (SPEC 5: the last one is reported).
    pub(crate) message: MessageId,
    /// That message's text so far.
    pub(crate) text: String,
    /// What the message holds besides text (the leading-newline rule and clean-up need it).
    pub(crate) parts: Parts,
    /// The current step's tool calls in the order the model sent them. Bounded by
    /// [`Config::calls_per_step_max`]: later calls are ignored like duplicates.
    pub(crate) calls: Vec<Call>,
    /// Every call id used in this turn (a repeated id is ignored, SPEC 4.4). Grows with the
    /// turn's calls, at most `calls_per_step_max` per step.
    pub(crate) seen: BTreeSet<CallId>,
    /// Retries and refreshes used by the current step (SPEC 4.5).
    pub(crate) budget: Budget,
    /// Loop-detection signatures of the turn's last steps, oldest first; at most
    /// [`LOOP_WINDOW_MAX`] (SPEC 4.8). `None` for a step without tool calls.
    pub(crate) window: VecDeque<Option<[u8; 32]>>,
    pub(crate) phase: Phase,
    /// Whether the current step's assistant message has its finish already.
    pub(crate) message_state: MessageState,
}

/// The loop-detection window: the last 10 steps of the submission (SPEC 4.8, section 8).
pub(crate) const LOOP_WINDOW_MAX: usize = 10;

/// What an assistant message holds besides its text.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Parts {
    /// True once any content part exists (text, reasoning or a tool call): from then on a
    /// leading "\n" of a text delta is kept (SPEC 4.4).
    pub(crate) any: bool,
    /// The reasoning section, which clean-up must close if the stream did not (SPEC 4.9).
    pub(crate) reasoning: Reasoning,
}

/// The reasoning section of an assistant message.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Reasoning {
    /// No reasoning.
    #[default]
    None,
    /// Started and not ended.
    Open,
    /// Ended.
    Ended,
}

/// Retries and credential refreshes used by the current step (SPEC 4.5).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Budget {
    /// Attempts made since the step started or since its last refresh (at most
    /// [`ATTEMPTS_MAX`]).
    pub(crate) attempts: u32,
    /// True once the step used its one credential refresh.
    pub(crate) refreshed: bool,
}

/// Attempts per step before a retryable error fails the submission (SPEC 8).
pub(crate) const ATTEMPTS_MAX: u32 = 4;
/// The backoff before retry 1, 2 and 3 (SPEC 4.5: 5, 10 and 20 s, no jitter).
pub(crate) const BACKOFF_MS: [u64; 3] = [5_000, 10_000, 20_000];
const _: () = assert!(BACKOFF_MS.len() as u32 == ATTEMPTS_MAX - 1);

/// Whether an assistant message still needs its finish (clean-up writes one if so, SPEC 4.9).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MessageState {
    /// Streaming into it; no finish yet.
    Open,
    /// Finished `tool_use`, or finished otherwise while the step's tools still run: rewritten
    /// if the turn ends by a cancel or a failure (SPEC 4.4, 4.9).
    ToolUse,
    /// Its final finish was written.
    Final,
}

impl Turn {
    /// The current step's assistant message and text, for the completion (SPEC 5).
    pub(crate) fn last_message(&self) -> crate::outcome::LastMessage {
        crate::outcome::LastMessage { id: self.message, text: self.text.clone() }
    }

    /// The IO name of the current step's attempt.
    pub(crate) fn step_io(&self, session: &SessionId, attempt: u32) -> crate::input::StepIo {
        crate::input::StepIo {
            session: session.clone(),
            seq: self.owner.seq,
            turn: self.id,
            step: self.step,
            attempt,
        }
    }

    /// The IO name of one of the current step's calls.
    pub(crate) fn call_io(&self, session: &SessionId, call: &CallId) -> crate::input::CallIo {
        crate::input::CallIo {
            session: session.clone(),
            seq: self.owner.seq,
            turn: self.id,
            step: self.step,
            call: call.clone(),
        }
    }
}

/// A tool call of the current step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Call {
    pub(crate) id: CallId,
    pub(crate) name: String,
    /// The arguments as stored (`{}` for an unfinished or invalid call).
    pub(crate) input: String,
    pub(crate) state: CallState,
}

/// Where a tool call is in its life (SPEC 4.4, 4.9).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CallState {
    /// Its input is still streaming (a `tool_input_start` without its `tool_call`).
    Unfinished,
    /// Complete, with valid JSON arguments; runs when the stream finishes.
    Complete,
    /// Complete, but its arguments were not valid JSON: stored as `{}`, never run.
    Invalid,
    /// Running: a `RunTool` was emitted.
    Running,
    /// An `agent` call: a sub-agent runs in `child` (SPEC 4.11); its end is the result.
    Delegated { child: SessionId },
    /// Its result was written: `output` feeds the loop signature, `stop` the turn's end.
    Reported { output: String, stop: Option<StopTurn> },
}

impl Call {
    /// True while the call waits for its result (a tool or a sub-agent runs).
    pub(crate) fn is_running(&self) -> bool {
        matches!(self.state, CallState::Running | CallState::Delegated { .. })
    }
}

/// What a turn is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Waiting for the model's stream of this attempt.
    Streaming { attempt: u32 },
    /// A retryable error: the next attempt starts when `timer` fires (SPEC 4.5).
    Backoff { next: u32, timer: TimerId },
    /// A 401: waiting for the host's credential refresh of the refused `attempt` (SPEC 4.5).
    Refreshing { attempt: u32 },
    /// The stream finished with tool calls; some are still running. `finish` is the step's
    /// mapped finish, needed once the last tool reports (SPEC 4.6).
    Tools { finish: crate::input::FinishReason },
    /// Aborted; clean-up waits for running tools or for the timer.
    Aborting { cause: Abort, grace: Option<TimerId> },
}

/// Why a turn was aborted: decides its outcome and its finish text (SPEC 4.9, 4.10).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Abort {
    /// cancel or cancel_run: the outcome is `cancelled`.
    Cancel,
    /// shutdown: the outcome is `interrupted`.
    Shutdown,
}

/// A timer the host has armed for the core.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Timer {
    pub(crate) deadline: Millis,
    pub(crate) purpose: TimerPurpose,
}

/// Whether the workspace accepts work (SPEC 4.10 shutdown).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Closing {
    /// Accepting submissions.
    Open,
    /// Shutdown began; `deadline` is armed while a turn is still aborting.
    Draining { deadline: Option<TimerId> },
    /// Shutdown finished; `Stopped` was emitted.
    Closed,
}

/// Everything the engine knows. Owned by [`crate::Engine`].
#[derive(Debug)]
#[cfg_attr(feature = "checker", derive(Clone))]
pub(crate) struct State {
    pub(crate) config: Config,
    /// The next sequence to assign; every sequence seen so far is below it.
    pub(crate) next_seq: Seq,
    pub(crate) next_message: u64,
    pub(crate) next_turn: u64,
    pub(crate) next_timer: u64,
    /// Every RunId ever accepted (SPEC 4.1); grows with the ledger.
    pub(crate) runs: RunLedger,
    /// Cancel watermarks that still cover a sequence that can arrive (SPEC 4.10): only those
    /// at or above [`State::next_seq`]; at most one per session.
    pub(crate) watermarks: BTreeMap<SessionId, Seq>,
    /// Title requests not answered yet, by session (at most one per session; SPEC 4.11).
    pub(crate) titles: BTreeMap<SessionId, PendingTitle>,
    /// Cross-session work of the current transition; empty between transitions.
    pub(crate) crossings: VecDeque<Crossing>,
    /// Armed timers; at most one per aborting turn plus the shutdown deadline.
    pub(crate) timers: BTreeMap<TimerId, Timer>,
    pub(crate) closing: Closing,
    /// Submissions accepted and outcomes decided in this engine's life (for the checker).
    pub(crate) accepted: u64,
    pub(crate) outcomes_decided: u64,
    /// Mutant `sticky_preparation_failure` only (SPEC 10): sessions whose preparation failed,
    /// with the error. One entry per such session; test builds only.
    #[cfg(feature = "mutants")]
    pub(crate) poisoned: BTreeMap<SessionId, String>,
}

impl State {
    pub(crate) fn new_message(&mut self) -> MessageId {
        let id = MessageId(self.next_message);
        self.next_message += 1;
        id
    }

    pub(crate) fn new_turn(&mut self) -> TurnId {
        let id = TurnId(self.next_turn);
        self.next_turn += 1;
        id
    }

    /// Arms a timer in the state; the caller emits the `SetTimer`.
    pub(crate) fn new_timer(&mut self, deadline: Millis, purpose: TimerPurpose) -> TimerId {
        let id = TimerId(self.next_timer);
        self.next_timer += 1;
        self.timers.insert(id, Timer { deadline, purpose });
        id
    }

    /// Number of unfinished submissions across all sessions.
    pub(crate) fn unfinished(&self) -> u64 {
        self.accepted - self.outcomes_decided
    }
}

/// The sessions with unfinished work, by id. Kept beside [`State`] rather than in it, so a
/// handler can hold one session and the rest of the state at once.
#[derive(Debug, Default)]
#[cfg_attr(feature = "checker", derive(Clone))]
pub(crate) struct Sessions {
    /// Ordered by [`SessionId`]'s deterministic order, so iteration never depends on a random
    /// seed. Holds only sessions with work: bounded by the unfinished submissions.
    map: BTreeMap<SessionId, Session>,
}

impl Sessions {
    /// Runs `f` on the session `id` (created empty when `create`), then forgets it if it has no
    /// unfinished work left: it is recreated by its next submission. `None` when the session is
    /// unknown and `create` is false.
    pub(crate) fn with<R>(
        &mut self,
        id: &SessionId,
        create: bool,
        f: impl FnOnce(&mut Session) -> R,
    ) -> Option<R> {
        if let Some(s) = self.map.get_mut(id) {
            let r = f(s);
            if s.is_idle() {
                self.map.remove(id);
            }
            return Some(r);
        }
        if !create {
            return None;
        }
        let mut s = Session::vacant(id);
        let r = f(&mut s);
        if !s.is_idle() {
            self.map.insert(id.clone(), s);
        }
        Some(r)
    }

    /// The session, if it has work.
    pub(crate) fn get(&self, id: &SessionId) -> Option<&Session> {
        self.map.get(id)
    }

    /// The ids of all sessions with work, in order (a copy: the caller may change sessions).
    pub(crate) fn ids(&self) -> Vec<SessionId> {
        self.map.keys().cloned().collect()
    }

    /// Every session with work, in order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&SessionId, &Session)> {
        self.map.iter()
    }

    /// True when no session has work.
    pub(crate) fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Test-only access for corrupting a session on purpose.
    #[cfg(test)]
    pub(crate) fn get_mut(&mut self, id: &SessionId) -> Option<&mut Session> {
        self.map.get_mut(id)
    }
}
