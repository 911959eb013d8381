//! Trace files (SPEC section 10) and the flight recorder.
//!
//! A trace is JSON Lines: a header (format, version, configuration, start state, origin), then
//! one input per line with its time and, optionally, the outputs expected from it. The format
//! is specified in `docs/trace-format.md` with a JSON Schema beside it. Parsing works on
//! strings; reading files is the caller's business (the core does no IO).

use std::collections::VecDeque;
use std::fmt;

use serde::Serialize;
use serde_json::Value;

use crate::alphabet::{HostError, Input, Millis, Output};
use crate::engine::Engine;

pub mod driver;
pub mod format;
pub mod replay;
pub mod reply;
pub mod schema;

pub use format::{TRACE_FORMAT, TRACE_VERSION, TraceHeader, TraceLine};

/// A parsed trace.
#[derive(Clone, Debug, PartialEq)]
pub struct Trace {
    /// The header.
    pub header: TraceHeader,
    /// The input lines, with the file's line number (1-based) of each.
    pub lines: Vec<(usize, TraceLine)>,
}

/// A trace that could not be read, with the 1-based line (and, for a JSON syntax error or
/// invalid UTF-8, the 1-based column of that line) at fault.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceError {
    /// The line number (1-based).
    pub line: usize,
    /// The column within the line (1-based, in bytes), when the fault has one.
    pub column: Option<usize>,
    /// What is wrong there, naming the field by its path (`field "input.up_to": ...`).
    pub message: String,
}

impl TraceError {
    fn at(line: usize, message: impl Into<String>) -> TraceError {
        TraceError { line, column: None, message: message.into() }
    }
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.column {
            Some(c) => write!(f, "line {}, column {c}: {}", self.line, self.message),
            None => write!(f, "line {}: {}", self.line, self.message),
        }
    }
}

impl std::error::Error for TraceError {}

impl Trace {
    /// Parses a JSON Lines trace. Blank lines are skipped.
    ///
    /// # Errors
    /// As [`Trace::parse_bytes`].
    pub fn parse(text: &str) -> Result<Trace, TraceError> {
        Trace::parse_bytes(text.as_bytes())
    }

    /// Parses a JSON Lines trace from the bytes of a file. Blank lines are skipped. Every line
    /// is checked against the trace schema ([`schema`]) before it is read, so nothing it does
    /// not describe is accepted.
    ///
    /// # Errors
    /// A [`TraceError`] naming the first bad line: invalid UTF-8 (with its column), a JSON
    /// syntax error such as truncated JSON (with its column), a missing or malformed header, an
    /// unknown version, an unknown field anywhere (`field "input.runid" is not a known field;
    /// known here: ...`), a value of the wrong type (`field "at": expected an unsigned integer,
    /// found "soon"`), a missing field, an unknown input type.
    pub fn parse_bytes(bytes: &[u8]) -> Result<Trace, TraceError> {
        let schema = schema::Schema::embedded().map_err(|e| TraceError::at(1, e))?;
        let mut lines = Vec::new();
        for (i, raw) in bytes.split(|b| *b == b'\n').enumerate() {
            let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
            let text = std::str::from_utf8(raw).map_err(|e| TraceError {
                line: i + 1,
                column: Some(e.valid_up_to() + 1),
                message: "invalid UTF-8".to_owned(),
            })?;
            if !text.trim().is_empty() {
                lines.push((i + 1, text));
            }
        }
        let mut lines = lines.into_iter();
        let Some((n, first)) = lines.next() else {
            return Err(TraceError::at(1, "empty trace: a header line is required"));
        };
        let header = read_header(schema, n, first)?;
        let mut out = Vec::new();
        for (n, text) in lines {
            let value = json(n, text)?;
            schema.check("TraceLine", &value).map_err(|p| problem(n, p))?;
            let line: TraceLine =
                serde_json::from_value(value).map_err(|e| TraceError::at(n, e.to_string()))?;
            out.push((n, line));
        }
        Ok(Trace { header, lines: out })
    }

    /// The trace as JSON Lines text (header first, one input per line, trailing newline).
    #[must_use]
    pub fn to_jsonl(&self) -> String {
        let mut s = json_line(&self.header);
        for (_, l) in &self.lines {
            s.push_str(&json_line(l));
        }
        s
    }
}

/// The header line: format and version first (a reader refuses what it does not know), then
/// the schema, then the types.
fn read_header(schema: &schema::Schema, n: usize, text: &str) -> Result<TraceHeader, TraceError> {
    #[cfg_attr(not(feature = "mutants"), allow(unused_mut))]
    let mut value = json(n, text)?;
    let field = |k: &str| value.get(k).cloned();
    if let Some(f) = field("format")
        && f != TRACE_FORMAT
    {
        return Err(TraceError::at(n, format!("header: format is {f}, expected {TRACE_FORMAT:?}")));
    }
    if let Some(v) = field("version")
        && v != TRACE_VERSION
    {
        let why =
            format!("header: version {v} is not supported (this build reads {TRACE_VERSION})");
        return Err(TraceError::at(n, why));
    }
    // A test build reads the mutant a model counterexample names; the schema is a host's.
    #[cfg(feature = "mutants")]
    let mutant =
        value.get_mut("config").and_then(Value::as_object_mut).and_then(|c| c.remove("mutant"));
    schema.check("TraceHeader", &value).map_err(|p| problem(n, p))?;
    #[cfg(feature = "mutants")]
    if let (Some(m), Some(c)) = (mutant, value.get_mut("config").and_then(Value::as_object_mut)) {
        c.insert("mutant".to_owned(), m);
    }
    serde_json::from_value(value).map_err(|e| TraceError::at(n, format!("header: {e}")))
}

/// One line as JSON; a syntax error is reported at its column of this line.
fn json(n: usize, text: &str) -> Result<Value, TraceError> {
    serde_json::from_str(text).map_err(|e| {
        let message = e.to_string();
        // serde_json ends its message with " at line 1 column C": the line is ours.
        let message = match message.rfind(" at line ") {
            Some(i) => message[..i].to_owned(),
            None => message,
        };
        TraceError { line: n, column: Some(e.column()), message }
    })
}

fn problem(n: usize, p: schema::Problem) -> TraceError {
    TraceError::at(n, p.message)
}

/// One value as a JSON line. Serialising our own types cannot fail.
pub(crate) fn json_line<T: Serialize>(v: &T) -> String {
    #[allow(clippy::expect_used)] // invariant: every type here serialises (no non-string map keys)
    let mut s = serde_json::to_string(v).expect("trace types serialise");
    s.push('\n');
    s
}

/// An output as the JSON value a trace's `expect` holds.
#[must_use]
pub fn output_value(o: &Output) -> serde_json::Value {
    #[allow(clippy::expect_used)] // invariant: outputs serialise (no non-string map keys)
    serde_json::to_value(o).expect("outputs serialise")
}

/// A flight recorder: an [`Engine`] that writes every input it is given (and, optionally, the
/// outputs it produced) as trace lines, so any host can capture a run that `replay` reproduces.
#[derive(Debug)]
pub struct Recorder {
    engine: Engine,
    header: TraceHeader,
    with_outputs: bool,
    lines: Vec<TraceLine>,
    /// Lines already handed out by `take_jsonl` (their file line numbers come first).
    taken: usize,
    pending: VecDeque<Output>,
}

impl Recorder {
    /// A recording engine. With `with_outputs`, each line also records the outputs produced,
    /// so a replay compares them.
    ///
    /// # Errors
    /// As [`Engine::new`].
    pub fn new(header: TraceHeader, with_outputs: bool) -> Result<Recorder, HostError> {
        let engine = Engine::new(header.config.clone(), header.start.clone())?;
        Ok(Recorder {
            engine,
            header,
            with_outputs,
            lines: Vec::new(),
            taken: 0,
            pending: VecDeque::new(),
        })
    }

    /// As [`Engine::handle`]. The input is recorded unless the engine refused it as host misuse
    /// (which changes nothing); an input that broke the engine is recorded, so the recording
    /// reproduces the failure.
    ///
    /// # Errors
    /// As [`Engine::handle`].
    pub fn handle(&mut self, now: Millis, input: Input) -> Result<(), HostError> {
        match self.engine.handle(now, input.clone()) {
            Ok(()) => {}
            Err(e @ HostError::Internal(_)) => {
                self.lines.push(TraceLine {
                    at: now,
                    input,
                    expect: None,
                    expect_projection: None,
                });
                return Err(e);
            }
            Err(e) => return Err(e),
        }
        let mut expect = self.with_outputs.then(Vec::new);
        while let Some(o) = self.engine.poll_output() {
            if let Some(e) = &mut expect {
                e.push(output_value(&o));
            }
            self.pending.push_back(o);
        }
        self.lines.push(TraceLine { at: now, input, expect, expect_projection: None });
        Ok(())
    }

    /// As [`Engine::poll_output`].
    #[must_use]
    pub fn poll_output(&mut self) -> Option<Output> {
        self.pending.pop_front()
    }

    /// The recording engine, for its getters.
    #[must_use]
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The header line, to start a trace file with (a host that writes as it goes calls this
    /// once, then [`Recorder::take_jsonl`] after inputs).
    #[must_use]
    pub fn header_jsonl(&self) -> String {
        json_line(&self.header)
    }

    /// The input lines recorded since the last call, as JSON Lines, and forgets them: a host
    /// appends them to its trace file so the recorder's memory stays bounded.
    #[must_use]
    pub fn take_jsonl(&mut self) -> String {
        self.taken += self.lines.len();
        self.lines.drain(..).map(|l| json_line(&l)).collect()
    }

    /// The recording kept in memory (everything since the last [`Recorder::take_jsonl`]) as a
    /// trace.
    #[must_use]
    pub fn trace(&self) -> Trace {
        Trace {
            header: self.header.clone(),
            lines: self
                .lines
                .iter()
                .cloned()
                .enumerate()
                .map(|(i, l)| (self.taken + i + 2, l))
                .collect(),
        }
    }
}
