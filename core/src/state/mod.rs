//! Layer 2, the state: what the engine holds between transitions, as enums with payloads
//! (SPEC 3, 4.2), and the buffer of the transition being computed (SPEC 7).
//!
//! Each SPEC phase is a variant carrying only its data: a waiting entry is `Preparing` or
//! `Prepared`; a session's lane is idle or holds one turn; a turn streams, runs tools, or
//! aborts. There is no flag whose value must agree with another field. Inside the folder, files
//! import downwards only: `submission` < `turn` < `session` < this file; `ledger` and
//! `transition` stand alone. The state imports only the alphabet.

use std::collections::{BTreeMap, VecDeque};

use crate::alphabet::{Config, MessageId, Millis, Seq, SessionId, TimerId, TimerPurpose, TurnId};

mod ledger;
mod session;
mod submission;
mod transition;
mod turn;

pub(crate) use ledger::{RunEntry, RunLedger};
pub(crate) use session::{
    Crossing, Gauges, ParentLink, PendingTitle, Session, Sessions, TitleState,
};
pub(crate) use submission::{Prep, SUMMARIES_WITHOUT_PROGRESS_MAX, Submission, Waiting};
pub(crate) use transition::Tx;
pub(crate) use turn::{
    Abort, Attempting, Budget, Call, CallState, LOOP_WINDOW_MAX, Lane, LastMessage, MessageState,
    Parts, Paused, Phase, Purpose, Reasoning, Summary, Turn, Watchdog,
};

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
pub(crate) struct State {
    pub(crate) config: Config,
    /// The time of the input being handled (the engine sets it before dispatch): what a
    /// deadline armed deep inside a transition counts from (the stream watchdog, SPEC 4.5).
    pub(crate) now: Millis,
    /// The next sequence to assign; every sequence seen so far is below it. Like every counter
    /// here it only grows, and only through a checked increment ([`State::bump`]).
    pub(crate) next_seq: Seq,
    pub(crate) next_message: u64,
    pub(crate) next_turn: u64,
    pub(crate) next_timer: u64,
    /// The counter that reached its maximum in this transition, if one did: the engine then
    /// fails for good with [`crate::HostError::Exhausted`] instead of wrapping (STYLE 4).
    pub(crate) exhausted: Option<&'static str>,
    /// Every RunId ever accepted (SPEC 4.1); grows with the ledger.
    pub(crate) runs: RunLedger,
    /// Cancel watermarks that still cover a sequence that can arrive (SPEC 4.10): only those
    /// at or above [`State::next_seq`]; at most one per session.
    pub(crate) watermarks: BTreeMap<SessionId, Seq>,
    /// Title requests not answered yet, by session (at most one per session; SPEC 4.11).
    pub(crate) titles: BTreeMap<SessionId, PendingTitle>,
    /// Cross-session work of the current transition; empty between transitions.
    pub(crate) crossings: VecDeque<Crossing>,
    /// Armed timers; at most one per aborting or backing-off turn or summary, one per streaming
    /// attempt (its watchdog), plus the shutdown deadline.
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

#[cfg(feature = "checker")]
clone_reusing!(State {
    config,
    now,
    next_seq,
    next_message,
    next_turn,
    next_timer,
    exhausted,
    runs,
    watermarks => crate::reuse::clone_map,
    titles => crate::reuse::clone_map,
    crossings,
    timers => crate::reuse::clone_map,
    closing,
    accepted,
    outcomes_decided,
    #[cfg(feature = "mutants")]
    poisoned => crate::reuse::clone_map,
});

/// Equal states have the same future whatever the time: `now` is only the time of the input
/// being handled, which the next input overwrites. For the model checker, which compares the
/// core a transition that only spends leaves with the core of its source (SPEC 10).
#[cfg(feature = "checker")]
impl PartialEq for State {
    fn eq(&self, other: &State) -> bool {
        // Destructured whole, so a field added to the state cannot be left out.
        let State {
            config,
            now: _,
            next_seq,
            next_message,
            next_turn,
            next_timer,
            exhausted,
            runs,
            watermarks,
            titles,
            crossings,
            timers,
            closing,
            accepted,
            outcomes_decided,
            #[cfg(feature = "mutants")]
            poisoned,
        } = self;
        #[cfg(feature = "mutants")]
        let poisoned_equal = *poisoned == other.poisoned;
        #[cfg(not(feature = "mutants"))]
        let poisoned_equal = true;
        *config == other.config
            && *next_seq == other.next_seq
            && *next_message == other.next_message
            && *next_turn == other.next_turn
            && *next_timer == other.next_timer
            && *exhausted == other.exhausted
            && *runs == other.runs
            && *watermarks == other.watermarks
            && *titles == other.titles
            && *crossings == other.crossings
            && *timers == other.timers
            && *closing == other.closing
            && *accepted == other.accepted
            && *outcomes_decided == other.outcomes_decided
            && poisoned_equal
    }
}

impl State {
    /// `value + 1`, checked: at the counter's maximum the value stays and the engine is marked
    /// exhausted (the transition is then discarded, so a wrapped or repeated id never leaves it).
    pub(crate) fn bump<T: Counter>(&mut self, value: T, counter: &'static str) -> T {
        value.checked_next().unwrap_or_else(|| {
            self.exhausted.get_or_insert(counter);
            value
        })
    }

    pub(crate) fn new_message(&mut self) -> MessageId {
        let id = MessageId(self.next_message);
        self.next_message = self.bump(self.next_message, "next_message");
        id
    }

    pub(crate) fn new_turn(&mut self) -> TurnId {
        let id = TurnId(self.next_turn);
        self.next_turn = self.bump(self.next_turn, "next_turn");
        id
    }

    /// The next sequence, assigned now (to a submission or a sub-agent's child).
    pub(crate) fn new_seq(&mut self, given: Option<Seq>) -> Seq {
        let seq = given.unwrap_or(self.next_seq);
        self.next_seq = Seq(self.bump(seq.0, "next_seq"));
        self.accepted = self.bump(self.accepted, "accepted");
        seq
    }

    /// Arms a timer in the state; the caller emits the `SetTimer`.
    pub(crate) fn new_timer(&mut self, deadline: Millis, purpose: TimerPurpose) -> TimerId {
        let id = TimerId(self.next_timer);
        self.next_timer = self.bump(self.next_timer, "next_timer");
        self.timers.insert(id, Timer { deadline, purpose });
        id
    }

    /// Number of unfinished submissions across all sessions.
    pub(crate) fn unfinished(&self) -> u64 {
        self.accepted - self.outcomes_decided
    }
}

/// An integer counter that grows by one at a time (engine-wide ids, per-turn steps, attempts).
pub(crate) trait Counter: Copy {
    /// `self + 1`, or `None` at the maximum.
    fn checked_next(self) -> Option<Self>;
}

impl Counter for u64 {
    fn checked_next(self) -> Option<u64> {
        self.checked_add(1)
    }
}

impl Counter for u32 {
    fn checked_next(self) -> Option<u32> {
        self.checked_add(1)
    }
}

/// Mutant `sticky_preparation_failure`: remembers that a preparation of `session` failed.
#[cfg(feature = "mutants")]
pub(crate) fn poison(st: &mut State, session: &SessionId, error: &str) {
    st.poisoned.insert(session.clone(), error.to_owned());
}

/// Without the feature nothing is remembered.
#[cfg(not(feature = "mutants"))]
pub(crate) fn poison(_: &mut State, _: &SessionId, _: &str) {}

/// Mutant `sticky_preparation_failure`: the remembered failure of `session`, if any.
#[cfg(feature = "mutants")]
pub(crate) fn poisoned(st: &State, session: &SessionId) -> Option<String> {
    st.poisoned.get(session).cloned()
}

/// Without the feature no session is poisoned.
#[cfg(not(feature = "mutants"))]
pub(crate) fn poisoned(_: &State, _: &SessionId) -> Option<String> {
    None
}
