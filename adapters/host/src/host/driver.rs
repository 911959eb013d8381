//! The engine a host drives (SPEC 2), recording every input to a flight trace when one is
//! configured (`docs/trace-format.md`): the store's one engine, or a member's engine per owned
//! session, each with a trace of its own.

use std::fs::File;
use std::io::Write as _;

use tracing::warn;
use turnstile_core::{
    Config, Engine, HostError, Input, Millis, Output, Recorder, Start, TraceHeader,
};

use super::config::{Flight, FlightBuffer, FlightShelf, HostConfig};
use crate::error::OpenError;

/// The core engine, optionally recording every input to a trace (the flight recorder).
pub(crate) enum Driver {
    Plain(Box<Engine>),
    Recording { recorder: Box<Recorder>, sink: FlightSink },
}

/// Where the flight recorder's lines go.
pub(crate) enum FlightSink {
    File(File),
    Memory(FlightBuffer),
}

impl FlightSink {
    pub(crate) fn write(&mut self, text: &str) -> std::io::Result<()> {
        match self {
            FlightSink::File(f) => f.write_all(text.as_bytes()),
            FlightSink::Memory(b) => {
                b.push(text);
                Ok(())
            }
        }
    }
}

impl Driver {
    pub(crate) fn handle(&mut self, now: Millis, input: Input) -> Result<(), HostError> {
        match self {
            Driver::Plain(e) => e.handle(now, input),
            Driver::Recording { recorder, sink } => {
                let r = recorder.handle(now, input);
                // The trace is a debugging aid: a failed write is reported, not fatal.
                if let Err(e) = sink.write(&recorder.take_jsonl()) {
                    warn!(error = %e, "flight recorder write failed");
                }
                r
            }
        }
    }

    pub(crate) fn poll_output(&mut self) -> Option<Output> {
        match self {
            Driver::Plain(e) => e.poll_output(),
            Driver::Recording { recorder, .. } => recorder.poll_output(),
        }
    }

    pub(crate) fn engine(&self) -> &Engine {
        match self {
            Driver::Plain(e) => e,
            Driver::Recording { recorder, .. } => recorder.engine(),
        }
    }
}

/// The engine the host drives, recording every input to the flight trace when one is
/// configured (its header written before the host starts).
pub(super) fn open(config: &HostConfig, start: &Start) -> Result<Driver, OpenError> {
    let driver = match &config.trace {
        None => Driver::Plain(Box::new(
            Engine::new(config.engine.clone(), start.clone()).map_err(OpenError::Engine)?,
        )),
        Some(flight) => {
            let mut header = TraceHeader::new(config.engine.clone(), start.clone());
            header.origin = Some(serde_json::json!({ "recorded_by": "turnstile-host host" }));
            let recorder =
                Recorder::new(header, config.trace_outputs).map_err(OpenError::Engine)?;
            let sink = match flight {
                Flight::File(path) => {
                    let trace =
                        |action, source| OpenError::Trace { path: path.clone(), action, source };
                    let file = std::fs::File::create(path)
                        .map_err(|e| trace("create the trace file", e))?;
                    let mut sink = FlightSink::File(file);
                    sink.write(&recorder.header_jsonl())
                        .map_err(|e| trace("write the trace file", e))?;
                    sink
                }
                Flight::Memory(buffer) => {
                    buffer.push(&recorder.header_jsonl());
                    FlightSink::Memory(buffer.clone())
                }
                Flight::Engines(shelf) => {
                    let buffer = shelf.next();
                    buffer.push(&recorder.header_jsonl());
                    FlightSink::Memory(buffer)
                }
            };
            Driver::Recording { recorder: Box::new(recorder), sink }
        }
    };
    Ok(driver)
}

/// A member's engine for a session just taken, recording into a new buffer of `recording`'s
/// shelf when there is one.
pub(super) fn for_session(
    config: &Config,
    start: Start,
    recording: Option<&(FlightShelf, bool)>,
) -> Result<Driver, turnstile_core::HostError> {
    let Some((shelf, outputs)) = recording else {
        return Ok(Driver::Plain(Box::new(Engine::new(config.clone(), start)?)));
    };
    let mut header = TraceHeader::new(config.clone(), start);
    header.origin = Some(serde_json::json!({ "recorded_by": "turnstile-host member" }));
    let recorder = Recorder::new(header, *outputs)?;
    let buffer = shelf.next();
    buffer.push(&recorder.header_jsonl());
    Ok(Driver::Recording { recorder: Box::new(recorder), sink: FlightSink::Memory(buffer) })
}
