//! The specification's state types (SPEC section 3): submissions, lanes, turns, summaries,
//! attempts, shutdown's progress, and the budgets that bound an exploration. Plain `Copy` data,
//! so a state is copied whole for every explored transition.

use turnstile_core::{Mode, Outcome};

/// Where a submission is (SPEC 3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    /// Waiting: the host prepares it.
    Preparing,
    /// Waiting: prepared, behind others or about to run.
    Prepared,
    /// It owns its session's turn.
    Active,
    /// Its turn stopped for a summarization and will resume.
    Paused,
    /// Ended, with this outcome.
    Done(Outcome),
    /// External acceptor only: the acceptor assigned its sequence and it is on its way to the
    /// core, which does not know it yet (SPEC 4.10). `covered` once a cancel of its session
    /// was made after its acceptance: it then ends `cancelled` on entry.
    InFlight {
        /// Whether a cancel covers it.
        covered: bool,
    },
    /// External acceptor only: a call with a used RunId (the same call when `same`, a
    /// different one otherwise) in flight. The acceptor cannot tell it from a new submission
    /// and numbers it; the core answers it without accepting it (SPEC 4.1), so the sequence
    /// never reaches the core as a submission: a gap in the sequences the core sees.
    LookUp {
        /// The same call, byte for byte (else a conflict).
        same: bool,
    },
    /// External acceptor only: it reached the core and was answered without being accepted:
    /// a RunId look-up, or a submission that arrived after shutdown began ("workspace
    /// closing", SPEC 4.1 validation). It has no outcome; the acceptor reports the answer.
    Answered,
}

/// One accepted submission; its sequence is its index + 1.
///
/// A finished one keeps only what a later rule reads ([`Sub::finished`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Sub {
    /// The session's index.
    pub session: u8,
    /// The mode it runs in.
    pub mode: Mode,
    /// Its RunId's index.
    pub run: Option<u8>,
    /// Where it is.
    pub status: Status,
    /// Summarizations not separated by a step below the threshold (SPEC 4.7 guard).
    pub pauses: u8,
    /// Steps it ended, across its resumed turns (SPEC 4.6: the step limit counts per
    /// submission); counted only under a step limit, and never past it.
    pub steps: u8,
}

impl Sub {
    /// The submission once it ended with `outcome`, keeping only what a later rule reads: its
    /// session (a late preparation reply names the newest ended submission), its
    /// RunId, and with a RunId its outcome (a resubmission's `Existing` reply, SPEC 4.1). Its
    /// mode, its counts and, without a RunId, its outcome are set to one value: nothing can
    /// ask for them any more (the engine keeps no more of it either), so states that differ only
    /// there have the same future, and the search meets them as one (the configurations
    /// keep an eighth to a half of their states; `docs/verification.md`, "What a finished
    /// submission forgets").
    #[must_use]
    pub fn finished(self, outcome: Outcome) -> Sub {
        let outcome = if self.run.is_some() { outcome } else { Outcome::Completed };
        Sub { mode: Mode::OwnTurn, status: Status::Done(outcome), pauses: 0, steps: 0, ..self }
    }
}

/// A session's title (SPEC 4.11).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Title {
    /// None yet: the session's next first activation requests one.
    Untitled,
    /// Requested at the first activation of this submission, not written yet (nothing waits
    /// for it, and a cancel does not stop it).
    Requested {
        /// The submission.
        seq: u8,
    },
    /// Written (generated, or the prompt's).
    Titled,
}

/// Which of the setup's three tools a call calls, so what an abort does to it (SPEC 4.9): each
/// call of a step has its own tool, so its own policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Tool {
    /// The tool the host drops on abort: an abort aborts its running call (`AbortTool`), which
    /// can then never report. While a turn aborts, every call an abort dropped is
    /// `Running { tool: Dropped }`, a call of [`Tool::Asks`] whose work had not begun too.
    Dropped,
    /// The tool an abort must leave to finish: its running call is not aborted, and clean-up
    /// waits for its result up to the cancel grace or the shutdown deadline.
    Finishes,
    /// The tool left to finish once started: its call may wait before its work begins (a
    /// person's answer to a permission ask), and that wait is droppable. Until the host reports
    /// that the work began (`ToolStarted`), an abort drops the call as it drops
    /// [`Tool::Dropped`]'s; once `started`, an abort leaves it to finish as [`Tool::Finishes`]'s.
    /// Its result may also come without a start (the ask was denied: no work).
    Asks {
        /// True once the host reported that the call's work began (only while it runs).
        started: bool,
    },
}

/// One tool call of the current step (a step makes at most two: [`Turn::calls`]), of one of
/// the setup's tools ([`Tool`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Call {
    /// None streamed.
    None,
    /// Streamed, not running (the stream has not finished; a call of [`Tool::Asks`] is never
    /// `started` here).
    Streamed {
        /// Its tool.
        tool: Tool,
    },
    /// Running.
    Running {
        /// Its tool (and, for [`Tool::Asks`], whether its work began).
        tool: Tool,
    },
    /// A call of the `agent` tool (SPEC 4.11; only a top-level step's only call): streamed
    /// (`running` false), then, once the stream finished, its sub-agent runs in the child
    /// session, whose end is the call's result.
    Agent {
        /// True while the sub-agent runs.
        running: bool,
    },
    /// It has its result (while aborting, a dropped call stays `Running { tool: Dropped }`:
    /// aborted, it can never report, and clean-up gives it the synthetic result).
    Done {
        /// True when the result asked to stop the turn; kept until the step's last result,
        /// which judges the step (SPEC 4.6 case 1). Always false while the turn aborts.
        stop: bool,
    },
}

impl Call {
    /// True for a running call an abort leaves to finish (SPEC 4.9): one of
    /// [`Tool::Finishes`], or of [`Tool::Asks`] once its work began.
    #[must_use]
    pub fn left_to_finish(self) -> bool {
        matches!(self, Call::Running { tool: Tool::Finishes | Tool::Asks { started: true } })
    }

    /// True for a running call an abort drops (SPEC 4.9): one of [`Tool::Dropped`], or of
    /// [`Tool::Asks`] whose work has not begun (its ask is withdrawn).
    #[must_use]
    pub fn dropped_by_abort(self) -> bool {
        matches!(self, Call::Running { tool: Tool::Dropped | Tool::Asks { started: false } })
    }
}

/// Retries and the refresh of one step or summary (SPEC 4.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Attempt {
    /// The attempt's number: names the IO, never reused.
    pub number: u8,
    /// Attempts used from the current budget (a refresh gives a fresh one).
    pub used: u8,
    /// Whether this step already refreshed its credentials.
    pub refreshed: bool,
    /// What the attempt waits for.
    pub phase: AttemptPhase,
    /// While it streams: whether an event with content arrived since its watchdog was armed
    /// (SPEC 4.5: the watchdog then fires into a new deadline instead of failing it).
    pub content: bool,
}

/// What an attempt waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AttemptPhase {
    /// The provider's stream.
    Streaming,
    /// The retry timer.
    Backoff,
    /// The host's credential refresh.
    Refreshing,
}

impl Attempt {
    pub(crate) fn fresh() -> Attempt {
        Attempt {
            number: 0,
            used: 1,
            refreshed: false,
            phase: AttemptPhase::Streaming,
            content: false,
        }
    }

    /// The next attempt after a backoff or a refresh.
    pub(crate) fn next(self, fresh_budget: bool) -> Attempt {
        let used = if fresh_budget { 1 } else { self.used + 1 };
        let phase = AttemptPhase::Streaming;
        Attempt { number: self.number + 1, used, phase, content: false, ..self }
    }
}

/// Why a turn aborts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Cause {
    /// cancel or cancel_run.
    Cancel,
    /// shutdown.
    Shutdown,
}

/// What a turn does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TurnPhase {
    /// A model step's attempt (streaming, backing off or refreshing).
    Step(Attempt),
    /// The step's tools run.
    Tool,
    /// Aborted; waits for its running calls left to finish until the grace timer (cancel) or
    /// the deadline.
    Aborting {
        /// Why.
        cause: Cause,
        /// True while the cancel-grace timer is armed.
        grace: bool,
    },
}

/// An active turn (SPEC 3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Turn {
    /// The owning submission's sequence.
    pub owner: u8,
    /// The step within the turn.
    pub step: u8,
    /// The current step's tool calls, in the order they were streamed: the first, then a
    /// second one (SPEC 4.4); a second is streamed only after a first.
    pub calls: [Call; 2],
    /// True when the current step ended at the summarization threshold.
    pub high: bool,
    /// True when the current step's finish maps to `tool_use` (the turn would continue).
    pub tool_use: bool,
    /// What it does.
    pub phase: TurnPhase,
}

/// A summarization (SPEC 4.7).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Summary {
    /// The paused submission it runs for; `None` for housekeeping.
    pub resume: Option<u8>,
    /// Its attempt.
    pub attempt: Attempt,
}

/// A session's single lane (SPEC I3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Lane {
    /// Nothing runs.
    Idle,
    /// A turn.
    Turn(Turn),
    /// A summarization.
    Summary(Summary),
}

/// Shutdown's progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Closing {
    /// Accepting.
    Open,
    /// Rejecting; `deadline` while the shutdown deadline is armed.
    Draining {
        /// Whether the deadline timer is armed.
        deadline: bool,
    },
    /// Stopped was emitted.
    Closed,
}

/// How many of each nondeterministic choice a configuration allows (bounds the state space).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Budget {
    /// Sessions clients may use (1 or 2); never spent.
    pub sessions: u8,
    /// Who assigns sequences (SPEC 4.1, `Config::acceptor`): false for the core, true for an
    /// external acceptor whose submissions reach the core in order, after any cancel made
    /// meanwhile (SPEC 4.10). Never spent; it must match the core's configuration.
    pub external: bool,
    /// 1: the sessions start without a title, so their first activation requests one (SPEC
    /// 4.11); 0: every preparation says the session has one. Never spent.
    pub untitled: u8,
    /// The core's step limit (SPEC 4.6, `Config::step_limit`; 0 unlimited). Never spent; it
    /// must match the core's configuration.
    pub step_limit: u8,
    /// Whether a finished submission forgets what no rule reads ([`Sub::finished`],
    /// `Spec::forget`): true in every named configuration; false only to explore the space
    /// without that reduction (`Options::forgetting`). Never spent.
    pub forgets: bool,
    /// Submissions (accepted or rejected for closing).
    pub submits: u8,
    /// Submissions with a RunId among them.
    pub runs: u8,
    /// Resubmissions, conflicts and invalid prompts together.
    pub replays: u8,
    /// cancel(session).
    pub cancels: u8,
    /// cancel_run.
    pub cancel_runs: u8,
    /// clear_queue.
    pub clears: u8,
    /// Manual summarize.
    pub summarizes: u8,
    /// Shutdown (0 or 1).
    pub shutdowns: u8,
    /// Preparation failures.
    pub prep_failures: u8,
    /// Steps' first tool calls streamed.
    pub tool_calls: u8,
    /// Among them and the second calls, calls of the tool an abort must leave to finish
    /// ([`Tool::Finishes`]; the others are dropped, or ask).
    pub finishing: u8,
    /// Among them and the second calls, calls of the tool left to finish once started
    /// ([`Tool::Asks`]: dropped by an abort until the host reports that its work began).
    pub asking: u8,
    /// Steps that stream a second tool call after their first (SPEC 4.4: several calls per
    /// step, each with its own result).
    pub second_calls: u8,
    /// Tool results that stop the turn.
    pub stops: u8,
    /// Steps at the summarization threshold.
    pub highs: u8,
    /// Retryable provider failures (steps and summaries).
    pub retryable: u8,
    /// Fatal provider failures.
    pub fatal: u8,
    /// 401s.
    pub auth: u8,
    /// Failed credential refreshes.
    pub refresh_failures: u8,
    /// Stale replies.
    pub stale: u8,
    /// Finish reasons that do not match the step's calls.
    pub odd_finishes: u8,
    /// Attempts the stream watchdog fails: no event with content for the idle timeout
    /// (SPEC 4.5). A watchdog firing after content arrived is offered without a budget.
    pub stalls: u8,
    /// Calls of the `agent` tool (0 or 1, SPEC 4.11): a top-level step's only call starts a
    /// sub-agent in the child session. Needs the core as acceptor.
    pub agents: u8,
}

impl Budget {
    /// Whether this budget has at most what `other` has left of every choice, with the same
    /// fixed parts (sessions, acceptor, titles, step limit, forgetting): a state with it can choose only
    /// what a state with `other` can ([`crate::spec::Spec::subsumes`]).
    #[must_use]
    pub fn within(&self, other: &Budget) -> bool {
        // Destructured whole, so a new budget cannot be left out of the comparison.
        let Budget {
            sessions,
            external,
            untitled,
            step_limit,
            forgets,
            submits,
            runs,
            replays,
            cancels,
            cancel_runs,
            clears,
            summarizes,
            shutdowns,
            prep_failures,
            tool_calls,
            finishing,
            asking,
            second_calls,
            stops,
            highs,
            retryable,
            fatal,
            auth,
            refresh_failures,
            stale,
            odd_finishes,
            stalls,
            agents,
        } = *self;
        let fixed = (sessions, external, untitled, step_limit, forgets)
            == (other.sessions, other.external, other.untitled, other.step_limit, other.forgets);
        let spent = [
            (submits, other.submits),
            (runs, other.runs),
            (replays, other.replays),
            (cancels, other.cancels),
            (cancel_runs, other.cancel_runs),
            (clears, other.clears),
            (summarizes, other.summarizes),
            (shutdowns, other.shutdowns),
            (prep_failures, other.prep_failures),
            (tool_calls, other.tool_calls),
            (finishing, other.finishing),
            (asking, other.asking),
            (second_calls, other.second_calls),
            (stops, other.stops),
            (highs, other.highs),
            (retryable, other.retryable),
            (fatal, other.fatal),
            (auth, other.auth),
            (refresh_failures, other.refresh_failures),
            (stale, other.stale),
            (odd_finishes, other.odd_finishes),
            (stalls, other.stalls),
            (agents, other.agents),
        ];
        fixed && spent.iter().all(|(mine, theirs)| mine <= theirs)
    }
}

/// The sub-agent the one `agent` call of an exploration started (SPEC 4.11): its parent's
/// session and the step of the call, which names the child session (`$$c<step>` in a
/// projection).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Child {
    /// The calling session.
    pub parent: u8,
    /// The step of the parent's turn whose call started it.
    pub step: u8,
    /// The child submission's sequence.
    pub seq: u8,
}
