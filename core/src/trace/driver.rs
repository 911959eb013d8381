//! The process driver's protocol (SPEC 12): one engine behind JSON Lines, so a host in any
//! language embeds the core by running `turnstile-driver` and writing lines to it.
//!
//! Pure like the rest of the core: a line of bytes goes in, one [`DriverReply`] comes out. The binary
//! only pumps stdin and stdout through a [`Driver`]; the Python package reads its inputs with
//! [`parse`], so every language gets the same strict reading and the same error words.
//!
//! The lines a host writes are a trace file's (`docs/trace-format.md`): a [`TraceHeader`] first,
//! then one [`TraceLine`] per input. So a recorded trace piped into the driver replays, and a
//! line's `expect`, when present, is compared with what the engine produced.

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::alphabet::Output;
use crate::engine::Engine;
pub use crate::trace::reply::DriverReply;
use crate::trace::{
    Recorder, TRACE_FORMAT, TRACE_VERSION, TraceHeader, TraceLine, output_value, schema,
};

pub use crate::trace::reply::{EXIT_BAD_HEADER, EXIT_ENGINE_FAILED};

/// A value that is not what the trace schema describes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invalid {
    /// The field at fault by its path (`input.up_to`), when one is.
    pub field: Option<String>,
    /// What is wrong (`field "input.up_to": expected an unsigned integer, found "x"`).
    pub message: String,
}

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Invalid {}

/// Reads a JSON value as the schema's definition `def` (`Input`, `Config`, `Start`,
/// `TraceHeader`, `TraceLine`, ...): checked against the schema first, so an unknown field or a
/// wrong type is named by its path, then deserialised.
///
/// # Errors
/// An [`Invalid`] naming the field.
pub fn parse<T: DeserializeOwned>(def: &str, value: Value) -> Result<T, Invalid> {
    let schema = schema::Schema::embedded().map_err(|message| Invalid { field: None, message })?;
    schema.check(def, &value).map_err(|p| Invalid { field: p.field, message: p.message })?;
    serde_json::from_value(value).map_err(|e| Invalid { field: None, message: e.to_string() })
}

/// What the driver tells its pump to do after a line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Read the next line.
    Continue,
    /// Write the reply, then exit with this status.
    Exit(u8),
}

/// One engine behind the JSON Lines protocol. Feed it every line of the input, in order.
#[derive(Debug)]
pub struct Driver {
    core: Option<Core>,
    record: bool,
    /// Lines read so far (blank ones included: replies name the file's line numbers).
    line: usize,
    /// Flight-recorder text not yet taken by [`Driver::take_flight`].
    flight: String,
}

// One per driver, made once and never moved: the variants' sizes do not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
enum Core {
    Plain(Engine),
    Recording(Recorder),
}

impl Driver {
    /// A driver waiting for its header. With `record`, it keeps a flight recording of every
    /// input it handled, with its outputs ([`Driver::take_flight`]).
    #[must_use]
    pub fn new(record: bool) -> Driver {
        Driver { core: None, record, line: 0, flight: String::new() }
    }

    /// Reads one line (without its newline). Returns the reply to write, or `None` for a blank
    /// line, and what to do next.
    pub fn read(&mut self, raw: &[u8]) -> (Option<DriverReply>, Next) {
        self.line += 1;
        let line = self.line;
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        let text = match std::str::from_utf8(raw) {
            Ok(t) => t,
            Err(e) => {
                let message = format!("invalid UTF-8 at column {}", e.valid_up_to() + 1);
                return self.bad(line, None, message);
            }
        };
        if text.trim().is_empty() {
            return (None, Next::Continue);
        }
        if self.core.is_none() {
            return self.start(line, text);
        }
        let value: Value = match serde_json::from_str(text) {
            Ok(v) => v,
            Err(e) => return self.bad(line, None, syntax(&e)),
        };
        match parse::<TraceLine>("TraceLine", value) {
            Ok(l) => self.handle(line, l),
            Err(Invalid { field, message }) => self.bad(line, field, message),
        }
    }

    /// The flight recording written since the last call (the header first), as trace lines to
    /// append to a file; empty without `record`.
    pub fn take_flight(&mut self) -> String {
        if let Some(Core::Recording(r)) = &mut self.core {
            self.flight.push_str(&r.take_jsonl());
        }
        std::mem::take(&mut self.flight)
    }

    /// The engine, once started.
    #[must_use]
    pub fn engine(&self) -> Option<&Engine> {
        match &self.core {
            None => None,
            Some(Core::Plain(e)) => Some(e),
            Some(Core::Recording(r)) => Some(r.engine()),
        }
    }

    /// A line before the engine runs is an error the driver cannot go on from; after, the
    /// engine goes on.
    fn bad(
        &self,
        line: usize,
        field: Option<String>,
        message: String,
    ) -> (Option<DriverReply>, Next) {
        let next = if self.core.is_none() { Next::Exit(EXIT_BAD_HEADER) } else { Next::Continue };
        (Some(DriverReply::Error { line, field, message }), next)
    }

    fn start(&mut self, line: usize, text: &str) -> (Option<DriverReply>, Next) {
        let schema = match schema::Schema::embedded() {
            Ok(s) => s,
            Err(message) => return self.bad(line, None, message),
        };
        let header: TraceHeader = match super::read_header(schema, line, text) {
            Ok(h) => h,
            Err(e) => {
                let message = match e.column {
                    Some(c) => format!("header: column {c}: {}", e.message),
                    None => e.message,
                };
                return self.bad(line, None, message);
            }
        };
        let started = if self.record {
            Recorder::new(header, true).map(|r| {
                self.flight.push_str(&r.header_jsonl());
                Core::Recording(r)
            })
        } else {
            Engine::new(header.config, header.start).map(Core::Plain)
        };
        match started {
            Ok(core) => {
                self.core = Some(core);
                let ready = DriverReply::Ready {
                    line,
                    format: TRACE_FORMAT.to_owned(),
                    version: TRACE_VERSION,
                };
                (Some(ready), Next::Continue)
            }
            Err(e) => {
                let reply =
                    DriverReply::Error { line, field: None, message: format!("header: {e}") };
                (Some(reply), Next::Exit(EXIT_BAD_HEADER))
            }
        }
    }

    fn handle(&mut self, line: usize, l: TraceLine) -> (Option<DriverReply>, Next) {
        let Some(core) = &mut self.core else { return (None, Next::Continue) };
        let started_call = match &l.input {
            crate::alphabet::Input::ToolStarted { call } => Some(call.clone()),
            _ => None,
        };
        let result = match core {
            Core::Plain(e) => e.handle(l.at, l.input),
            Core::Recording(r) => r.handle(l.at, l.input),
        };
        if let Err(e) = result {
            let (code, message) = (e.code().to_owned(), e.to_string());
            return if e.is_fatal() {
                (Some(DriverReply::Failed { line, code, message }), Next::Exit(EXIT_ENGINE_FAILED))
            } else {
                (Some(DriverReply::Refused { line, code, message }), Next::Continue)
            };
        }
        let mut outputs = Vec::new();
        loop {
            let next = match core {
                Core::Plain(e) => e.poll_output(),
                Core::Recording(r) => r.poll_output(),
            };
            let Some(o) = next else { break };
            outputs.push(o);
        }
        let classes = outputs.iter().map(|o| o.kind.class()).collect();
        let engine = match core {
            Core::Plain(e) => &*e,
            Core::Recording(r) => r.engine(),
        };
        let tool_started = started_call.map(|call| engine.is_tool_started(&call));
        let reply = match l.expect.as_deref().and_then(|e| first_difference(e, &outputs)) {
            Some((index, expected)) => {
                DriverReply::Mismatch { line, index, expected, outputs, classes }
            }
            None => DriverReply::Outputs { line, outputs, classes, tool_started },
        };
        (Some(reply), Next::Continue)
    }
}

/// The first output that differs from `expected`, with what was expected there.
fn first_difference(expected: &[Value], outputs: &[Output]) -> Option<(usize, Option<Value>)> {
    let n = expected.len().max(outputs.len());
    (0..n).find_map(|i| {
        let want = expected.get(i);
        let got = outputs.get(i).map(output_value);
        (want != got.as_ref()).then(|| (i, want.cloned()))
    })
}

/// A JSON syntax error without serde's own "at line 1" (the line is the driver's).
fn syntax(e: &serde_json::Error) -> String {
    let message = e.to_string();
    let message = message.rfind(" at line ").map_or(message.as_str(), |i| &message[..i]);
    format!("column {}: {message}", e.column())
}

/// The reply as one JSON line (with its newline).
#[must_use]
pub fn reply_line(reply: &DriverReply) -> String {
    super::json_line(reply)
}

#[cfg(test)]
#[allow(clippy::expect_used)]
mod tests {
    use super::*;

    fn run(lines: &[&str]) -> Vec<(Value, Next)> {
        let mut d = Driver::new(false);
        lines
            .iter()
            .filter_map(|l| {
                let (reply, next) = d.read(l.as_bytes());
                reply.map(|r| (serde_json::to_value(r).expect("json"), next))
            })
            .collect()
    }

    const HEADER: &str = r#"{"format":"turnstile-trace","version":1}"#;

    #[test]
    fn a_header_then_inputs_gives_one_reply_each() {
        let r = run(&[
            HEADER,
            "",
            r#"{"at":0,"input":{"type":"submit","session":"s","prompt":"hi","run_id":"r1"}}"#,
        ]);
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].0["type"], "ready");
        assert_eq!(r[1].0["type"], "outputs");
        assert_eq!(r[1].0["line"], 3, "blank lines count: replies name the file's lines");
        assert_eq!(r[1].0["outputs"][0]["kind"]["type"], "reply");
        assert_eq!(r[1].0["classes"], serde_json::json!(["must_perform", "must_answer"]));
    }

    #[test]
    fn a_bad_line_names_its_field_and_the_engine_goes_on() {
        let r = run(&[
            HEADER,
            r#"{"at":0,"input":{"type":"cancel","session":"s","up_to":"x"}}"#,
            r#"{"at":0,"input":{"type":"submit","session":"s","prompt":"hi"}}"#,
            "{not json",
        ]);
        assert_eq!(r[1].0["type"], "error");
        assert_eq!(r[1].0["field"], "input.up_to");
        assert!(r[1].0["message"].as_str().is_some_and(|m| m.contains("input.up_to")));
        assert_eq!(r[1].1, Next::Continue);
        assert_eq!(r[2].0["type"], "outputs");
        assert_eq!(r[3].0["type"], "error");
        assert!(r[3].0.get("field").is_none());
    }

    #[test]
    fn misuse_is_refused_and_changes_nothing() {
        let r = run(&[
            HEADER,
            r#"{"at":10,"input":{"type":"submit","session":"s","prompt":"a"}}"#,
            r#"{"at":5,"input":{"type":"submit","session":"s","prompt":"b"}}"#,
        ]);
        assert_eq!(r[2].0["type"], "refused");
        assert_eq!(r[2].0["code"], "time_went_backwards");
        assert_eq!(r[2].1, Next::Continue);
    }

    #[test]
    fn a_bad_header_ends_the_driver() {
        let r = run(&[r#"{"format":"turnstile-trace","version":9}"#]);
        assert_eq!(r[0].0["type"], "error");
        assert_eq!(r[0].1, Next::Exit(EXIT_BAD_HEADER));
        let r = run(&[r#"{"format":"turnstile-trace","version":1,"start":{"next_seq":0}}"#]);
        assert_eq!(r[0].1, Next::Exit(EXIT_BAD_HEADER));
        assert!(r[0].0["message"].as_str().is_some_and(|m| m.contains("next_seq")));
    }

    #[test]
    fn a_tool_started_reply_says_whether_the_work_may_begin() {
        let call = r#"{"session":"s","seq":1,"turn":1,"step":0,"call":"c1"}"#;
        let step = r#"{"session":"s","seq":1,"turn":1,"step":0,"attempt":0}"#;
        let tools = r#"[{"name":"w","on_abort":"finish_once_started"}]"#;
        let lines = [
            HEADER.to_owned(),
            r#"{"at":0,"input":{"type":"submit","session":"s","prompt":"a","run_id":"r"}}"#.into(),
            format!(
                r#"{{"at":0,"input":{{"type":"prepared","session":"s","seq":1,"setup":{{"tools":{tools}}}}}}}"#
            ),
            format!(
                r#"{{"at":0,"input":{{"type":"step","step":{step},"event":{{"kind":"tool_call","id":"c1","name":"w","input":"{{}}"}}}}}}"#
            ),
            format!(
                r#"{{"at":0,"input":{{"type":"step","step":{step},"event":{{"kind":"finished","reason":"tool_calls"}}}}}}"#
            ),
            format!(r#"{{"at":2,"input":{{"type":"tool_started","call":{call}}}}}"#),
            r#"{"at":2,"input":{"type":"cancel","session":"s"}}"#.into(),
            format!(r#"{{"at":3,"input":{{"type":"tool_started","call":{call}}}}}"#),
        ];
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        let r = run(&refs);
        assert!(r.iter().all(|(v, _)| v["type"] != "error"), "{r:?}");
        assert!(r[4].0.get("tool_started").is_none(), "only a tool_started reply says it");
        assert_eq!(r[5].0["tool_started"], true);
        // After the cancel the call is left to finish: still started.
        assert_eq!(r[7].0["tool_started"], true);

        // Aborted before it started: its work must never begin.
        let mut early = refs.clone();
        early.swap(5, 6);
        let r = run(&early);
        assert_eq!(r[6].0["tool_started"], false);
    }

    #[test]
    fn an_expectation_that_differs_is_a_mismatch() {
        let r = run(&[
            HEADER,
            r#"{"at":0,"input":{"type":"submit","session":"s","prompt":"a"},"expect":[]}"#,
        ]);
        assert_eq!(r[1].0["type"], "mismatch");
        assert_eq!(r[1].0["index"], 0);
        assert_eq!(r[1].0["expected"], Value::Null);
    }

    #[test]
    fn the_flight_recording_replays() {
        let mut d = Driver::new(true);
        for l in [
            HEADER,
            r#"{"at":0,"input":{"type":"submit","session":"s","prompt":"a","run_id":"r"}}"#,
            r#"{"at":1,"input":{"type":"cancel","session":"s","up_to":1}}"#,
        ] {
            d.read(l.as_bytes());
        }
        let text = d.take_flight();
        assert_eq!(text.lines().count(), 3);
        let trace = crate::Trace::parse(&text).expect("parse");
        let report = crate::replay(&trace).expect("replay");
        assert_eq!(report.compared, 2);
        assert!(d.take_flight().is_empty());
    }
}
