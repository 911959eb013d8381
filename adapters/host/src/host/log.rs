//! The engine task's logs (see "Logs" in the crate docs): what each input reported and what
//! the core made of it, one event per output as it is routed ([`Logs`]), and the names of the
//! values the events carry. Nothing here changes what the engine task does.
//!
//! Field values are the store's and the RunComplete's snake_case names, so a log line reads
//! like the ledger: `outcome=completed`, `mode=own_turn`, `stop_reason=end_turn`.

use std::collections::BTreeMap;

use tracing::{debug, info, warn};
use turnstile_core::{
    ErrorClass, Input, Millis, OutputKind, RunId, Seq, SessionId, StepEvent, StopReason, StoreOp,
    TimerPurpose,
};

pub(crate) use crate::store::{mode_text as mode, outcome_text as outcome};

pub(crate) fn stop_reason(reason: StopReason) -> &'static str {
    match reason {
        StopReason::EndTurn => "end_turn",
        StopReason::MaxTokens => "max_tokens",
        StopReason::ContentFilter => "content_filter",
        StopReason::PermissionDenied => "permission_denied",
        StopReason::HookHalt => "hook_halt",
    }
}

pub(crate) fn error_class(class: ErrorClass) -> &'static str {
    match class {
        ErrorClass::Provider => "provider",
        ErrorClass::Transport => "transport",
        ErrorClass::Unauthorized => "unauthorized",
        ErrorClass::Incomplete => "incomplete",
    }
}

/// Why an attempt failed, kept from the input that reported it (or from the watchdog's
/// verdict) until the transition's outputs say what the core made of it: a retry, a credential
/// refresh, or the end of the turn.
#[derive(Debug)]
pub(crate) struct Failure {
    /// The step's sequence (none for a summary).
    pub(crate) seq: Option<turnstile_core::Seq>,
    /// The step within the turn (none for a summary).
    pub(crate) step: Option<u32>,
    /// The attempt that failed, from 0.
    pub(crate) attempt: u32,
    pub(crate) class: &'static str,
    pub(crate) status: Option<u16>,
    /// The error text (never a prompt or message content: the provider's or the host's
    /// description of the failure).
    pub(crate) reason: String,
}

pub(crate) fn error_kind(kind: turnstile_core::ErrorKind) -> String {
    use turnstile_core::ErrorKind;
    let name = match kind {
        ErrorKind::Preparation => "preparation",
        ErrorKind::Provider => "provider",
        ErrorKind::Unauthorized => "unauthorized",
        ErrorKind::Transport => "transport",
        ErrorKind::Summarization => "summarization",
        ErrorKind::ContextWindow => "context_window",
        ErrorKind::LoopDetected => "loop_detected",
        ErrorKind::StepLimit => "step_limit",
        ErrorKind::Interrupted => "interrupted",
        // A kind newer than this host: its Debug name.
        other => return format!("{other:?}"),
    };
    name.to_owned()
}

/// The sequence (of a step; none for a summary) and the attempt number, from 0, of the
/// attempt a credential refresh is for.
pub(crate) fn attempt_fields(
    attempt: &turnstile_core::AttemptIo,
) -> (Option<turnstile_core::Seq>, u32) {
    match attempt {
        turnstile_core::AttemptIo::Step(s) => (Some(s.seq), s.attempt),
        turnstile_core::AttemptIo::Summary(s) => (None, s.attempt),
    }
}

/// The target of the engine task's events: the task that decides what they say, whichever
/// file writes them (`RUST_LOG=turnstile_host::host::engine=debug` keeps working).
const ENGINE: &str = "turnstile_host::host::engine";

/// What the logs keep between events: the RunIds of unfinished submissions, so that every
/// event of a submission names its RunId.
#[derive(Debug, Default)]
pub(crate) struct Logs {
    run_ids: BTreeMap<Seq, RunId>,
}

impl Logs {
    /// The RunId of an unfinished submission, when it has one.
    fn run_id(&self, seq: Seq) -> Option<&str> {
        self.run_ids.get(&seq).map(RunId::as_str)
    }

    /// Logs what an input reports, and returns the failure it reports, if any: what the core
    /// makes of it is known only from the outputs of its transition ([`Self::output`]).
    pub(crate) fn input(&self, input: &Input) -> Option<Failure> {
        let failure = |seq, step, attempt, error: &turnstile_core::ProviderError| Failure {
            seq,
            step,
            attempt,
            class: error_class(error.class),
            status: error.status,
            reason: error.message.clone(),
        };
        match input {
            Input::Step { step, event: StepEvent::Failed { error } } => {
                Some(failure(Some(step.seq), Some(step.step), step.attempt, error))
            }
            Input::Summary { io, event: StepEvent::Failed { error } } => {
                Some(failure(None, None, io.attempt, error))
            }
            Input::Prepared { session, seq, setup } => {
                debug!(
                    target: ENGINE,
                    session = %session,
                    seq = seq.0,
                    run_id = self.run_id(*seq),
                    tools = setup.tools.len(),
                    context_window = setup.context_window,
                    "submission prepared"
                );
                None
            }
            Input::CredentialsRefreshed { attempt, ok } => {
                let (seq, attempt_no) = attempt_fields(attempt);
                let run_id = seq.and_then(|s| self.run_id(s));
                let session = attempt.session();
                let seq = seq.map(|s| s.0);
                if *ok {
                    info!(
                        target: ENGINE,
                        session = %session,
                        seq,
                        run_id,
                        attempt = attempt_no,
                        ok,
                        "credential refresh ended"
                    );
                } else {
                    warn!(
                        target: ENGINE,
                        session = %session,
                        seq,
                        run_id,
                        attempt = attempt_no,
                        ok,
                        "credential refresh ended"
                    );
                }
                None
            }
            _ => None,
        }
    }

    /// Logs one output as it is routed. `failure` is the failure the transition's input
    /// reported (or the watchdog's verdict, when `watchdog` is the idle timeout: the input was
    /// Logs one output as it is routed. `failure` is the failure the transition's input
    /// reported (or the watchdog's verdict, when `watchdog` is the idle timeout: the input was
    /// the firing of a stream watchdog).
    pub(crate) fn output(
        &mut self,
        kind: &OutputKind,
        now: Millis,
        failure: &mut Option<Failure>,
        watchdog: Option<u64>,
    ) {
        match kind {
            OutputKind::Store(_) => self.ledger(kind),
            OutputKind::SetTimer { .. } => self.timer(kind, now, failure),
            OutputKind::Finished(c) => self.finished(c),
            OutputKind::Stopped => {
                debug!(target: ENGINE, "engine stopped: no submission is unfinished")
            }
            _ => self.io(kind, failure, watchdog),
        }
    }

    /// A ledger or summary write the core decided.
    fn ledger(&self, kind: &OutputKind) {
        match kind {
            OutputKind::Store(StoreOp::LedgerActivated { session, seq, turn }) => {
                info!(
                    target: ENGINE,
                    session = %session,
                    seq = seq.0,
                    run_id = self.run_id(*seq),
                    turn = turn.0,
                    "turn activated"
                );
            }
            OutputKind::Store(StoreOp::ChildAccepted {
                session, seq, parent, parent_seq, ..
            }) => {
                info!(
                    target: ENGINE,
                    session = %session,
                    seq = seq.0,
                    parent = %parent,
                    parent_seq = parent_seq.0,
                    "sub-agent submission accepted"
                );
            }
            OutputKind::Store(StoreOp::LedgerPaused { session, seq }) => {
                info!(
                    target: ENGINE,
                    session = %session,
                    seq = seq.0,
                    run_id = self.run_id(*seq),
                    "submission paused for a summarization"
                );
            }
            OutputKind::Store(StoreOp::SummaryDone { session, .. }) => {
                info!(session = %session, "summarization done");
            }
            OutputKind::Store(StoreOp::SummaryFailed { session, title, message, .. }) => {
                warn!(
                    target: ENGINE,
                    session = %session,
                    error_title = %title,
                    error_message = %message,
                    "summarization failed"
                );
            }
            _ => {}
        }
    }

    /// The start or the end of some IO: a preparation, an attempt, a tool call, a refresh.
    fn io(&self, kind: &OutputKind, failure: &mut Option<Failure>, watchdog: Option<u64>) {
        match kind {
            OutputKind::Prepare { session, seq } => {
                debug!(
                    target: ENGINE,
                    session = %session,
                    seq = seq.0,
                    run_id = self.run_id(*seq),
                    "preparing submission"
                );
            }
            OutputKind::AbortTool { call } => {
                debug!(
                    target: ENGINE,
                    session = %call.session,
                    seq = call.seq.0,
                    run_id = self.run_id(call.seq),
                    call_id = call.call.as_str(),
                    "tool call aborted"
                );
            }
            OutputKind::AbortPreparation { session, seq } => {
                debug!(
                    target: ENGINE,
                    session = %session,
                    seq = seq.0,
                    run_id = self.run_id(*seq),
                    "preparation aborted"
                );
            }
            OutputKind::AbortRefresh { attempt } => {
                let (seq, attempt_no) = attempt_fields(attempt);
                let run_id = seq.and_then(|s| self.run_id(s));
                debug!(
                    target: ENGINE,
                    session = %attempt.session(),
                    seq = seq.map(|s| s.0),
                    run_id,
                    attempt = attempt_no,
                    "credential refresh aborted"
                );
            }
            OutputKind::RefreshCredentials { attempt } => {
                let (seq, attempt_no) = attempt_fields(attempt);
                let run_id = seq.and_then(|s| self.run_id(s));
                let f = failure.take();
                warn!(
                    target: ENGINE,
                    session = %attempt.session(),
                    seq = seq.map(|s| s.0),
                    run_id,
                    attempt = attempt_no,
                    status = f.as_ref().and_then(|f| f.status),
                    reason = f.as_ref().map(|f| f.reason.as_str()),
                    "the provider refused the credentials: waiting for a refresh"
                );
            }
            OutputKind::StartStep { .. }
            | OutputKind::StartSummary { .. }
            | OutputKind::AbortStep { .. }
            | OutputKind::AbortSummary { .. } => self.attempt(kind, failure, watchdog),
            _ => {}
        }
    }

    /// An attempt of a step or a summary started or closed (by the stream watchdog, when
    /// `watchdog` is its idle timeout: the attempt's failure is then the watchdog's).
    fn attempt(&self, kind: &OutputKind, failure: &mut Option<Failure>, watchdog: Option<u64>) {
        match kind {
            OutputKind::AbortStep { .. } | OutputKind::AbortSummary { .. }
                if let Some(timeout_ms) = watchdog =>
            {
                *failure = self.watchdog_fired(kind, timeout_ms);
            }
            OutputKind::StartStep { step } => {
                debug!(
                    target: ENGINE,
                    session = %step.session,
                    seq = step.seq.0,
                    run_id = self.run_id(step.seq),
                    turn = step.turn.0,
                    step = step.step,
                    attempt = step.attempt,
                    "provider attempt started"
                );
            }
            OutputKind::StartSummary { io } => {
                debug!(
                    target: ENGINE,
                    session = %io.session,
                    summary = io.summary.0,
                    attempt = io.attempt,
                    "summary attempt started"
                );
            }
            OutputKind::AbortStep { step } => {
                debug!(
                    target: ENGINE,
                    session = %step.session,
                    seq = step.seq.0,
                    run_id = self.run_id(step.seq),
                    step = step.step,
                    attempt = step.attempt,
                    "provider attempt aborted"
                );
            }
            OutputKind::AbortSummary { io } => {
                debug!(
                    target: ENGINE,
                    session = %io.session,
                    summary = io.summary.0,
                    attempt = io.attempt,
                    "summary attempt aborted"
                );
            }
            _ => {}
        }
    }

    /// A timer armed: a retry after a failed attempt, a cancel's grace, the shutdown's deadline.
    fn timer(&self, kind: &OutputKind, now: Millis, failure: &mut Option<Failure>) {
        match kind {
            OutputKind::SetTimer {
                deadline,
                purpose: TimerPurpose::Retry { session, turn },
                ..
            } => {
                let f = failure.take();
                let seq = f.as_ref().and_then(|f| f.seq);
                warn!(
                    target: ENGINE,
                    session = %session,
                    seq = seq.map(|s| s.0),
                    run_id = seq.and_then(|s| self.run_id(s)),
                    turn = turn.0,
                    step = f.as_ref().and_then(|f| f.step),
                    attempt = f.as_ref().map(|f| f.attempt),
                    class = f.as_ref().map(|f| f.class),
                    status = f.as_ref().and_then(|f| f.status),
                    reason = f.as_ref().map(|f| f.reason.as_str()),
                    delay_ms = deadline.0.saturating_sub(now.0),
                    "provider attempt failed: retrying"
                );
            }
            OutputKind::SetTimer {
                deadline,
                purpose: TimerPurpose::CancelGrace { session, turn },
                ..
            } => {
                debug!(
                    target: ENGINE,
                    session = %session,
                    turn = turn.0,
                    grace_ms = deadline.0.saturating_sub(now.0),
                    "turn aborting: waiting for its IO to end"
                );
            }
            OutputKind::SetTimer { deadline, purpose: TimerPurpose::ShutdownDeadline, .. } => {
                debug!(
                    target: ENGINE,
                    deadline_ms = deadline.0.saturating_sub(now.0),
                    "shutdown: waiting for active turns to end"
                );
            }
            _ => {}
        }
    }

    /// A submission's outcome; its RunId is forgotten.
    fn finished(&mut self, c: &turnstile_core::Completion) {
        let run_id = c.run_id().map(RunId::as_str);
        let (session, seq, outcome) = (c.session(), c.seq().0, outcome(c.outcome()));
        let stop_reason = c.stop_reason().map(stop_reason);
        match c.error() {
            Some(e) if c.outcome() == turnstile_core::Outcome::Failed => warn!(
                target: ENGINE,
                session = %session,
                seq,
                run_id,
                outcome,
                error_kind = error_kind(e.kind),
                error_title = %e.title,
                error_message = %e.message,
                "submission finished"
            ),
            Some(e) => info!(
                target: ENGINE,
                session = %session,
                seq,
                run_id,
                outcome,
                error_kind = error_kind(e.kind),
                error_title = %e.title,
                "submission finished"
            ),
            None => {
                info!(
                    target: ENGINE,
                    session = %session,
                    seq,
                    run_id,
                    outcome,
                    stop_reason,
                    "submission finished"
                )
            }
        }
        self.run_ids.remove(&c.seq());
    }

    /// The stream watchdog closed an idle attempt: logged, and its failure (SPEC 4.5: a
    /// retryable transport error) is what the transition's retry or end then reports.
    fn watchdog_fired(&self, kind: &OutputKind, timeout_ms: u64) -> Option<Failure> {
        match kind {
            OutputKind::AbortStep { step } => {
                warn!(
                    target: ENGINE,
                    session = %step.session,
                    seq = step.seq.0,
                    run_id = self.run_id(step.seq),
                    step = step.step,
                    attempt = step.attempt,
                    idle_timeout_ms = timeout_ms,
                    "stream watchdog fired: the attempt was idle and is closed"
                );
                Some(Failure {
                    seq: Some(step.seq),
                    step: Some(step.step),
                    attempt: step.attempt,
                    class: error_class(turnstile_core::ErrorClass::Transport),
                    status: None,
                    reason: turnstile_core::stream_idle_message(timeout_ms),
                })
            }
            OutputKind::AbortSummary { io } => {
                warn!(
                    target: ENGINE,
                    session = %io.session,
                    summary = io.summary.0,
                    attempt = io.attempt,
                    idle_timeout_ms = timeout_ms,
                    "stream watchdog fired: the summary attempt was idle and is closed"
                );
                Some(Failure {
                    seq: None,
                    step: None,
                    attempt: io.attempt,
                    class: error_class(turnstile_core::ErrorClass::Transport),
                    status: None,
                    reason: turnstile_core::stream_idle_message(timeout_ms),
                })
            }
            _ => None,
        }
    }

    /// Logs an acceptance the core decided, and keeps its RunId for the logs of its life.
    pub(crate) fn accepted(
        &mut self,
        session: &SessionId,
        seq: Seq,
        run_id: Option<&RunId>,
        mode: turnstile_core::Mode,
    ) {
        if let Some(run_id) = run_id {
            self.run_ids.insert(seq, run_id.clone());
        }
        info!(
            target: ENGINE,
            session = %session,
            seq = seq.0,
            run_id = run_id.map(RunId::as_str),
            mode = self::mode(mode),
            "submission accepted"
        );
    }
}
