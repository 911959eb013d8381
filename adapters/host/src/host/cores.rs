//! Which core decides a session's outcomes (SPEC 2, 11).
//!
//! - **One process:** one engine for the whole store ([`Cores::One`]), with the engine-wide
//!   rules exactly as the core implements them (sequences in acceptance order, sub-agents that
//!   span sessions).
//! - **A member of several hosts:** one engine per owned session ([`Cores::Owned`]), created
//!   at the take from what the take's recovery left (its waiting submissions are fed to it in
//!   sequence order, as an external acceptor's, SPEC 4.10) and dropped with everything it
//!   knew when the session is no longer this host's. A dropped session's state cannot leak
//!   into a later take, because the next take starts a new engine; and an engine decides only
//!   its session, so no other host's outcome can be decided here.

use std::collections::BTreeMap;

use turnstile_core::{
    Acceptor, CallIo, Config, Engine, HostError, Input, MessageId, Millis, Output, RunId,
    SessionId, Start,
};

use super::config::FlightShelf;
use super::driver::{self, Driver};
use crate::store::lease::Epoch;

/// The engines of a host.
pub(crate) enum Cores {
    /// One engine for the store.
    One(Driver),
    /// One engine per owned session.
    Owned(Owned),
}

/// The engines of a member host.
pub(crate) struct Owned {
    /// Every owned session's engine configuration (its acceptor external).
    config: Config,
    /// Where each engine records its flight trace (and whether with its outputs), if at all.
    recording: Option<(FlightShelf, bool)>,
    sessions: BTreeMap<SessionId, OwnedCore>,
    /// Shutdown was fed: no new session is adopted.
    shutting_down: bool,
}

/// One owned session's engine, and the lease it runs under.
pub(crate) struct OwnedCore {
    engine: Driver,
    epoch: Epoch,
}

/// The session an input concerns, when it names one (every input but a timer's firing,
/// `cancel_run` and shutdown).
pub(crate) fn input_session(input: &Input) -> Option<&SessionId> {
    match input {
        Input::Submit(s) => Some(&s.session),
        Input::Cancel { session, .. }
        | Input::ClearQueue { session }
        | Input::Summarize { session }
        | Input::Prepared { session, .. }
        | Input::PreparationFailed { session, .. }
        | Input::TitleGenerated { session, .. } => Some(session),
        Input::Step { step, .. } => Some(&step.session),
        Input::ToolStarted { call } | Input::ToolResult { call, .. } => Some(&call.session),
        Input::CredentialsRefreshed { attempt, .. } => Some(attempt.session()),
        Input::Summary { io, .. } => Some(&io.session),
        _ => None,
    }
}

impl Cores {
    /// A member's engines: none until a take.
    pub(crate) fn owned(mut config: Config, recording: Option<(FlightShelf, bool)>) -> Cores {
        config.acceptor = Acceptor::External;
        Cores::Owned(Owned { config, recording, sessions: BTreeMap::new(), shutting_down: false })
    }

    /// Feeds `input` to the engine of `scope` (or of the input's session): its outputs, in
    /// order. An input for a session this host does not own (a late report of IO that was
    /// aborted when the session was dropped) is ignored.
    ///
    /// # Errors
    /// The engine's [`HostError`].
    pub(crate) fn handle(
        &mut self,
        scope: Option<&SessionId>,
        now: Millis,
        input: Input,
    ) -> Result<Vec<Output>, HostError> {
        let driver: &mut Driver = match self {
            Cores::One(d) => d,
            Cores::Owned(o) => {
                let Some(session) = scope.or_else(|| input_session(&input)) else {
                    return Ok(Vec::new());
                };
                match o.sessions.get_mut(session) {
                    Some(core) => &mut core.engine,
                    None => return Ok(Vec::new()),
                }
            }
        };
        driver.handle(now, input)?;
        Ok(std::iter::from_fn(|| driver.poll_output()).collect())
    }

    /// The engine configuration (the same for every engine of this host).
    pub(crate) fn config(&self) -> &Config {
        match self {
            Cores::One(d) => d.engine().config(),
            Cores::Owned(o) => &o.config,
        }
    }

    /// The engine deciding `session`, if this host has one.
    pub(crate) fn engine_of(&self, session: &SessionId) -> Option<&Engine> {
        match self {
            Cores::One(d) => Some(d.engine()),
            Cores::Owned(o) => o.sessions.get(session).map(|c| c.engine.engine()),
        }
    }

    /// Whether the call's work may begin (its engine says so).
    pub(crate) fn is_tool_started(&self, call: &CallIo) -> bool {
        self.engine_of(&call.session).is_some_and(|e| e.is_tool_started(call))
    }

    /// The session of an accepted run the one engine knows (a member's acceptance is the
    /// ledger's, so it has none to look up).
    pub(crate) fn run_session(&self, run_id: &RunId) -> Option<&SessionId> {
        match self {
            Cores::One(d) => d.engine().run_session(run_id),
            Cores::Owned(_) => None,
        }
    }

    /// True once shutdown ended every engine's work.
    pub(crate) fn is_stopped(&self) -> bool {
        match self {
            Cores::One(d) => d.engine().is_stopped(),
            Cores::Owned(o) => {
                o.shutting_down && o.sessions.values().all(|c| c.engine.engine().is_stopped())
            }
        }
    }

    /// The sessions shutdown must be fed to: `None` for the one engine, else every owned
    /// session (and no session is adopted from now on).
    pub(crate) fn begin_shutdown(&mut self) -> Option<Vec<SessionId>> {
        match self {
            Cores::One(_) => None,
            Cores::Owned(o) => {
                o.shutting_down = true;
                Some(o.sessions.keys().cloned().collect())
            }
        }
    }

    /// Starts the engine of a session just taken at `epoch`; false (nothing started) when
    /// shutting down, when this is not a member, or when the engine cannot start.
    pub(crate) fn adopt(
        &mut self,
        session: &SessionId,
        epoch: Epoch,
        next_message: MessageId,
    ) -> bool {
        let Cores::Owned(o) = self else { return false };
        if o.shutting_down {
            return false;
        }
        let start = Start { next_seq: None, next_message: Some(next_message), runs: Vec::new() };
        let Ok(engine) = driver::for_session(&o.config, start, o.recording.as_ref()) else {
            return false;
        };
        o.sessions.insert(session.clone(), OwnedCore { engine, epoch });
        true
    }

    /// Forgets the session's engine if it runs at `epoch` (everything it knew goes with it);
    /// whether it did.
    pub(crate) fn drop_session(&mut self, session: &SessionId, epoch: Epoch) -> bool {
        match self {
            Cores::Owned(o) if o.sessions.get(session).is_some_and(|c| c.epoch == epoch) => {
                o.sessions.remove(session);
                true
            }
            _ => false,
        }
    }

    /// The epoch the session's writes are fenced with (`None` for the one engine).
    pub(crate) fn fence_of(&self, session: &SessionId) -> Option<Epoch> {
        match self {
            Cores::One(_) => None,
            Cores::Owned(o) => o.sessions.get(session).map(|c| c.epoch),
        }
    }

    /// The session's engine at `epoch`, if this host still runs it.
    pub(crate) fn runs_at(&self, session: &SessionId, epoch: Epoch) -> bool {
        matches!(self, Cores::Owned(o) if o.sessions.get(session).is_some_and(|c| c.epoch == epoch))
    }
}
