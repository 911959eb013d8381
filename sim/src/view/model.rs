//! What a view of a trace shows, computed by replaying it through the core: one lane per
//! session, one bar per submission with its phases, the attempts and tool calls inside it, and
//! the marks (cancels, clears, shutdown, timers, commits, RunCompletes) across the lanes.
//!
//! The page only draws this model; the model is built here, from the core's own outputs, so
//! that it can be checked against `replay` (`Summary`) and cannot disagree with the checker.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;
use turnstile_core::input::{Input, StepEvent};
use turnstile_core::output::{OutputKind, Reply, StoreOp};
use turnstile_core::{Engine, MessageId, Outcome, Seq, SessionId, Trace};

/// The whole view of one trace.
#[derive(Debug, Serialize)]
pub struct Model {
    /// The trace's name and rule, when its header has them.
    pub name: Option<String>,
    /// The rule it pins down.
    pub rule: Option<String>,
    /// The trace file's lines: header first (its file line 1), then one per input.
    pub lines: Vec<LineView>,
    /// Sessions in the order they appeared; sub-agents right after their parent.
    pub lanes: Vec<Lane>,
    /// One per submission.
    pub bars: Vec<Bar>,
    /// Attempts, tool calls and summaries, inside their submission's bar.
    pub spans: Vec<Span>,
    /// Point events.
    pub marks: Vec<Mark>,
    /// Where replay failed, if it did.
    pub failure: Option<Failure>,
    /// What the picture says, for checking against `replay`.
    pub summary: Summary,
}

/// One input line.
#[derive(Debug, Serialize)]
pub struct LineView {
    /// The 1-based line of the file.
    pub line: usize,
    /// The input's time.
    pub at: u64,
    /// The input, as JSON.
    pub input: Value,
    /// The outputs it produced, as JSON.
    pub outputs: Vec<Value>,
    /// The core's state after it.
    pub state: Value,
}

/// One session's lane.
#[derive(Debug, Serialize)]
pub struct Lane {
    /// The session.
    pub session: SessionId,
    /// The calling session of a sub-agent.
    pub parent: Option<SessionId>,
}

/// One phase of a submission's life.
#[derive(Clone, Debug, Serialize)]
pub struct Phase {
    /// `waiting`, `preparing`, `queued`, `active` or `paused`.
    pub kind: &'static str,
    /// Where it started (line index into `lines`, time).
    pub from: Point,
    /// Where it ended; `None` when the trace ended first.
    pub to: Option<Point>,
}

/// A point of the timeline: an index into `lines` and its time.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Point {
    /// The index into `lines` (the input that caused it).
    pub index: usize,
    /// Its time.
    pub at: u64,
}

/// One submission.
#[derive(Debug, Serialize)]
pub struct Bar {
    /// Its sequence.
    pub seq: Seq,
    /// Its session.
    pub session: SessionId,
    /// Its RunId.
    pub run_id: Option<String>,
    /// Its phases, in order.
    pub phases: Vec<Phase>,
    /// How it ended.
    pub outcome: Option<Outcome>,
    /// The submission whose turn it was folded into.
    pub folded_into: Option<Seq>,
    /// True when its end was a RunComplete.
    pub run_complete: bool,
}

/// An attempt, a tool call or a summary.
#[derive(Debug, Serialize)]
pub struct Span {
    /// `attempt`, `tool` or `summary`.
    pub kind: &'static str,
    /// Its session.
    pub session: SessionId,
    /// Its submission (none for a summary).
    pub seq: Option<Seq>,
    /// What it was: "step 0 attempt 1", a tool's name.
    pub label: String,
    /// When it started.
    pub from: Point,
    /// When it ended (`None`: the trace ended first).
    pub to: Option<Point>,
    /// How it ended: `done`, `failed`, `aborted`.
    pub end: Option<&'static str>,
}

/// A point event.
#[derive(Debug, Serialize)]
pub struct Mark {
    /// `cancel`, `cancel_run`, `clear`, `shutdown`, `rejected`, `commit`, `timer_set`,
    /// `timer_fired`, `timer_cancelled`, `run_complete`, `outcome`.
    pub kind: &'static str,
    /// The session it is about (none: every lane).
    pub session: Option<SessionId>,
    /// Where.
    pub at: Point,
    /// What to write beside it.
    pub label: String,
}

/// Where replay failed.
#[derive(Debug, Serialize)]
pub struct Failure {
    /// The 1-based line of the file.
    pub line: usize,
    /// Replay's own text.
    pub text: String,
    /// The sessions and sequences the text names.
    pub sessions: Vec<SessionId>,
    /// The sequences the text names.
    pub seqs: Vec<Seq>,
}

/// What the picture says.
#[derive(Debug, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    /// Each finished submission's outcome.
    pub outcomes: BTreeMap<Seq, Outcome>,
    /// RunCompletes per RunId.
    pub run_completes: BTreeMap<String, usize>,
    /// Submissions not finished when the trace ends.
    pub unfinished: usize,
    /// The lanes, in order.
    pub lanes: Vec<SessionId>,
}

/// Builds the model of `trace` by replaying it (stopping at an input the engine refuses).
#[must_use]
pub fn build(trace: &Trace) -> Model {
    let mut b = Builder::default();
    let failure = turnstile_core::replay(trace).err().map(|f| b.failure_of(trace, &f));
    if let Ok(mut engine) = Engine::new(trace.header.config.clone(), trace.header.start.clone()) {
        for (index, (line, l)) in trace.lines.iter().enumerate() {
            let point = Point { index, at: l.at.0 };
            b.input(&l.input, point);
            b.replies(&l.input, point);
            let refused = engine.handle(l.at, l.input.clone()).is_err();
            let mut outputs = Vec::new();
            while let Some(o) = engine.poll_output() {
                outputs.push(turnstile_core::trace::output_value(&o));
                b.output(&o.kind, point);
            }
            b.after_input(&l.input, point);
            let input = serde_json::to_value(&l.input).unwrap_or(Value::Null);
            let touched = touched(&input, &outputs);
            let state = state(&engine, &touched);
            b.lines.push(LineView { line: *line, at: l.at.0, input, outputs, state });
            if refused {
                break;
            }
        }
    }
    let summary = b.summary();
    Model {
        name: trace.header.name.clone(),
        rule: trace.header.rule.clone(),
        lines: b.lines,
        lanes: b.lanes,
        bars: b.bars.into_values().collect(),
        spans: b.spans,
        marks: b.marks,
        failure,
        summary,
    }
}

/// The sessions an input and its outputs name (their `session` fields, at any depth).
fn touched(input: &Value, outputs: &[Value]) -> Vec<SessionId> {
    fn walk(v: &Value, out: &mut Vec<SessionId>) {
        match v {
            Value::Object(m) => {
                if let Some(Value::String(s)) = m.get("session") {
                    let s = SessionId::new(s);
                    if !out.contains(&s) {
                        out.push(s);
                    }
                }
                m.values().for_each(|v| walk(v, out));
            }
            Value::Array(a) => a.iter().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(input, &mut out);
    outputs.iter().for_each(|o| walk(o, &mut out));
    out
}

/// The core's state after an input, as the public API shows it: the engine's gauges and the
/// sessions the input and its outputs are about (all of them would make a long trace's page
/// quadratic).
fn state(engine: &Engine, sessions: &[SessionId]) -> Value {
    let sessions: serde_json::Map<String, Value> = sessions
        .iter()
        .map(|s| {
            (
                s.as_str().to_owned(),
                serde_json::json!({
                    "busy": engine.is_busy(s),
                    "active_turn": engine.has_active_turn(s),
                    "queued": engine.queue_len(s),
                }),
            )
        })
        .collect();
    serde_json::json!({
        "now": engine.now().0,
        "unfinished": engine.unfinished(),
        "newest_seq": engine.newest_seq(),
        "next_deadline": engine.next_deadline().map(|d| d.0),
        "stopped": engine.is_stopped(),
        "sessions": sessions,
    })
}

#[derive(Default)]
struct Builder {
    lines: Vec<LineView>,
    lanes: Vec<Lane>,
    bars: BTreeMap<Seq, Bar>,
    spans: Vec<Span>,
    marks: Vec<Mark>,
    /// Which session wrote each assistant message (a sub-agent's id names one).
    message_session: BTreeMap<MessageId, SessionId>,
    /// The active submission of each session.
    active: BTreeMap<SessionId, Seq>,
    /// The newest sequence accepted (a cancel's watermark).
    newest: Option<Seq>,
}

impl Builder {
    fn lane(&mut self, session: &SessionId) {
        if self.lanes.iter().any(|l| &l.session == session) {
            return;
        }
        let parent = turnstile_core::parent_message(session)
            .and_then(|m| self.message_session.get(&m).cloned());
        let lane = Lane { session: session.clone(), parent: parent.clone() };
        // A sub-agent's lane goes after its parent's (and the parent's other children).
        match parent.and_then(|p| {
            self.lanes.iter().rposition(|l| l.session == p || l.parent.as_ref() == Some(&p))
        }) {
            Some(at) => self.lanes.insert(at + 1, lane),
            None => self.lanes.push(lane),
        }
    }

    fn bar(&mut self, session: &SessionId, seq: Seq, point: Point) -> &mut Bar {
        self.lane(session);
        self.newest = self.newest.max(Some(seq));
        self.bars.entry(seq).or_insert_with(|| Bar {
            seq,
            session: session.clone(),
            run_id: None,
            phases: vec![Phase { kind: "waiting", from: point, to: None }],
            outcome: None,
            folded_into: None,
            run_complete: false,
        })
    }

    fn phase(&mut self, session: &SessionId, seq: Seq, kind: &'static str, point: Point) {
        let bar = self.bar(session, seq, point);
        if bar.outcome.is_some() {
            return;
        }
        if let Some(last) = bar.phases.last_mut() {
            if last.kind == kind {
                return;
            }
            last.to = Some(point);
        }
        bar.phases.push(Phase { kind, from: point, to: None });
    }

    fn mark(&mut self, kind: &'static str, session: Option<&SessionId>, at: Point, label: String) {
        self.marks.push(Mark { kind, session: session.cloned(), at, label });
    }

    fn close_span(&mut self, at: Point, end: &'static str, matches: impl Fn(&Span) -> bool) {
        if let Some(s) = self.spans.iter_mut().rev().find(|s| s.to.is_none() && matches(s)) {
            s.to = Some(at);
            s.end = Some(end);
        }
    }

    fn input(&mut self, input: &Input, at: Point) {
        match input {
            Input::Cancel { session, up_to } => {
                let w = up_to
                    .or(self.newest)
                    .map_or("nothing accepted".to_owned(), |s| format!("≤ {s}"));
                self.lane(session);
                self.mark("cancel", Some(session), at, format!("cancel {w}"));
            }
            Input::CancelRun { run_id } => {
                self.mark("cancel_run", None, at, format!("cancel_run {run_id}"));
            }
            Input::ClearQueue { session } => {
                self.lane(session);
                self.mark("clear", Some(session), at, "clear_queue".to_owned());
            }
            Input::Shutdown => self.mark("shutdown", None, at, "shutdown".to_owned()),
            Input::TimerFired { timer } => {
                self.mark("timer_fired", None, at, format!("timer {} fired", timer.0));
            }
            _ => {}
        }
    }

    /// What a reply to an IO ends: its attempt, tool call or summary, at this input (before
    /// the outputs it causes, which may end the whole submission).
    fn replies(&mut self, input: &Input, at: Point) {
        match input {
            Input::Step { step, event } => {
                let end = match event {
                    StepEvent::Finished { .. } => Some("done"),
                    StepEvent::Failed { .. } => Some("failed"),
                    _ => None,
                };
                if let Some(end) = end {
                    let label = attempt_label(step.step, step.attempt);
                    let (session, seq) = (step.session.clone(), step.seq);
                    self.close_span(at, end, |s| {
                        s.kind == "attempt"
                            && s.session == session
                            && s.seq == Some(seq)
                            && s.label == label
                    });
                }
            }
            Input::Summary { io, event: StepEvent::Finished { .. } | StepEvent::Failed { .. } } => {
                let session = io.session.clone();
                self.close_span(at, "done", |s| s.kind == "summary" && s.session == session);
            }
            Input::ToolResult { call, .. } => {
                let label_call = call.call.as_str().to_owned();
                let session = call.session.clone();
                self.close_span(at, "done", |s| {
                    s.kind == "tool"
                        && s.session == session
                        && s.label.ends_with(&format!("({label_call})"))
                });
            }
            _ => {}
        }
    }

    /// What an input changed once its outputs are known: a preparation's end (unless the
    /// outputs activated the submission at once).
    fn after_input(&mut self, input: &Input, at: Point) {
        match input {
            Input::Prepared { session, seq, .. }
            | Input::PreparationFailed { session, seq, .. }
                if self
                    .bars
                    .get(seq)
                    .is_some_and(|b| b.phases.last().is_some_and(|p| p.kind == "preparing")) =>
            {
                self.phase(session, *seq, "queued", at);
            }
            _ => {}
        }
    }

    fn output(&mut self, kind: &OutputKind, at: Point) {
        match kind {
            OutputKind::Reply(Reply::Accepted { session, seq, run_id, .. }) => {
                let bar = self.bar(session, *seq, at);
                bar.run_id = run_id.as_ref().map(|r| r.as_str().to_owned());
            }
            OutputKind::Reply(Reply::Rejected { error }) => {
                self.mark("rejected", None, at, format!("rejected: {error}"));
            }
            OutputKind::Prepare { session, seq } => self.phase(session, *seq, "preparing", at),
            OutputKind::Store(op) => self.store(op, at),
            OutputKind::Commit { session } => {
                self.lane(session);
                self.mark("commit", Some(session), at, "commit".to_owned());
            }
            OutputKind::StartStep { step } => {
                self.bar(&step.session, step.seq, at);
                self.spans.push(Span {
                    kind: "attempt",
                    session: step.session.clone(),
                    seq: Some(step.seq),
                    label: attempt_label(step.step, step.attempt),
                    from: at,
                    to: None,
                    end: None,
                });
            }
            OutputKind::AbortStep { step } => {
                let label = attempt_label(step.step, step.attempt);
                let (session, seq) = (step.session.clone(), step.seq);
                self.close_span(at, "aborted", |s| {
                    s.kind == "attempt"
                        && s.session == session
                        && s.seq == Some(seq)
                        && s.label == label
                });
            }
            OutputKind::RunTool { call, name, .. } => {
                self.spans.push(Span {
                    kind: "tool",
                    session: call.session.clone(),
                    seq: Some(call.seq),
                    label: format!("{name} ({})", call.call.as_str()),
                    from: at,
                    to: None,
                    end: None,
                });
            }
            OutputKind::AbortTool { call } => {
                let c = call.call.as_str().to_owned();
                let session = call.session.clone();
                self.close_span(at, "aborted", |s| {
                    s.kind == "tool" && s.session == session && s.label.ends_with(&format!("({c})"))
                });
            }
            OutputKind::StartSummary { io } => {
                self.lane(&io.session);
                self.spans.push(Span {
                    kind: "summary",
                    session: io.session.clone(),
                    seq: None,
                    label: format!("summary attempt {}", io.attempt),
                    from: at,
                    to: None,
                    end: None,
                });
            }
            OutputKind::AbortSummary { io } => {
                let session = io.session.clone();
                self.close_span(at, "aborted", |s| s.kind == "summary" && s.session == session);
            }
            OutputKind::SetTimer { timer, deadline, purpose } => {
                let what = serde_json::to_value(purpose)
                    .ok()
                    .and_then(|v| v.get("type").and_then(Value::as_str).map(str::to_owned))
                    .unwrap_or_else(|| format!("{purpose:?}"));
                self.mark(
                    "timer_set",
                    None,
                    at,
                    format!("timer {} ({what}) for {} ms", timer.0, deadline.0),
                );
            }
            OutputKind::CancelTimer { timer } => {
                self.mark("timer_cancelled", None, at, format!("timer {} cancelled", timer.0));
            }
            OutputKind::Finished(c) => {
                let session = c.session().clone();
                let seq = c.seq();
                let folded_into = (c.outcome() == Outcome::Folded)
                    .then(|| self.active.get(&session).copied())
                    .flatten();
                let bar = self.bar(&session, seq, at);
                if let Some(last) = bar.phases.last_mut() {
                    last.to = Some(at);
                }
                bar.outcome = Some(c.outcome());
                bar.folded_into = folded_into;
                bar.run_complete = c.is_run_complete();
                if bar.run_id.is_none() {
                    bar.run_id = c.run_id().map(|r| r.as_str().to_owned());
                }
                let outcome = serde_json::to_value(c.outcome())
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default();
                let label = match c.run_id() {
                    Some(r) => format!("RunComplete {r}: {outcome}"),
                    None => format!("{seq}: {outcome}"),
                };
                let kind = if c.is_run_complete() { "run_complete" } else { "outcome" };
                self.mark(kind, Some(&session), at, label);
                for s in self.spans.iter_mut().filter(|s| s.seq == Some(seq) && s.to.is_none()) {
                    s.to = Some(at);
                    s.end = Some("aborted");
                }
                if self.active.get(&session) == Some(&seq) {
                    self.active.remove(&session);
                }
            }
            _ => {}
        }
    }

    fn store(&mut self, op: &StoreOp, at: Point) {
        match op {
            StoreOp::LedgerActivated { session, seq, .. } => {
                self.active.insert(session.clone(), *seq);
                self.phase(session, *seq, "active", at);
            }
            StoreOp::LedgerPaused { session, seq, .. } => self.phase(session, *seq, "paused", at),
            StoreOp::AssistantMessage { session, id, .. } => {
                self.message_session.insert(*id, session.clone());
            }
            _ => {}
        }
    }

    fn failure_of(&mut self, trace: &Trace, f: &turnstile_core::ReplayFailure) -> Failure {
        use turnstile_core::ReplayFailure as F;
        let last = trace.lines.last().map_or(1, |(l, _)| *l);
        let line = match f {
            F::Host { line, .. }
            | F::Violation { line, .. }
            | F::Mismatch { line, .. }
            | F::Projection { line, .. } => *line,
            F::Outcome { .. } => last,
        };
        let text = f.to_string();
        let mut sessions = Vec::new();
        let mut seqs = Vec::new();
        for (_, l) in &trace.lines {
            if let Ok(v) = serde_json::to_value(&l.input)
                && let Some(s) = v.get("session").and_then(Value::as_str)
                && !s.is_empty()
                && mentions(&text, s)
            {
                let s = SessionId::new(s);
                if !sessions.contains(&s) {
                    sessions.push(s);
                }
            }
        }
        if let F::Outcome { seq, .. } = f {
            seqs.push(*seq);
        }
        for marker in ["seq ", "submission "] {
            for (i, _) in text.match_indices(marker) {
                let digits: String =
                    text[i + marker.len()..].chars().take_while(char::is_ascii_digit).collect();
                if let Ok(n) = digits.parse::<u64>()
                    && !seqs.contains(&Seq(n))
                {
                    seqs.push(Seq(n));
                }
            }
        }
        Failure { line, text, sessions, seqs }
    }

    fn summary(&self) -> Summary {
        let mut s = Summary {
            lanes: self.lanes.iter().map(|l| l.session.clone()).collect(),
            ..Summary::default()
        };
        for bar in self.bars.values() {
            match bar.outcome {
                Some(o) => {
                    s.outcomes.insert(bar.seq, o);
                }
                None => s.unfinished += 1,
            }
            if bar.run_complete
                && let Some(r) = &bar.run_id
            {
                *s.run_completes.entry(r.clone()).or_default() += 1;
            }
        }
        s
    }
}

fn attempt_label(step: u32, attempt: u32) -> String {
    format!("step {step} attempt {attempt}")
}

/// True when `text` names `word` as a whole word (a session id inside the text).
fn mentions(text: &str, word: &str) -> bool {
    text.match_indices(word).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + word.len()..].chars().next();
        let edge = |c: Option<char>| c.is_none_or(|c| !c.is_alphanumeric() && c != '_' && c != '-');
        edge(before) && edge(after)
    })
}
