//! `turnstile._native`: the turnstile core for Python (SPEC 12).
//!
//! A thin layer: inputs arrive as JSON text and are read with the core's strict reader (the
//! one the process driver uses, so an unknown field or a wrong type is named by its path in
//! the same words); outputs leave as JSON text, which the typed layer (`turnstile/__init__.py`,
//! `turnstile/types.py`) decodes into dataclasses. Errors are raised as the exception classes of
//! `turnstile.errors`, carrying the core's message, its error code and the field at fault.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::time::Instant;

use pyo3::prelude::*;
use turnstile_core::trace::driver::{Invalid, parse};
use turnstile_core::trace::output_value;
use turnstile_core::{CallIo, HostError, Input, Millis, Recorder, SessionId, Trace, TraceHeader};

/// Raises `turnstile.errors.<class>(*args)`.
fn raise<A>(py: Python<'_>, class: &str, args: A) -> PyErr
where
    A: for<'py> pyo3::call::PyCallArgs<'py>,
{
    let made = py
        .import("turnstile.errors")
        .and_then(|m| m.getattr(class))
        .and_then(|c| c.call1(args));
    match made {
        Ok(exception) => PyErr::from_value(exception),
        Err(e) => e,
    }
}

fn invalid(py: Python<'_>, e: Invalid) -> PyErr {
    raise(py, "InputError", (e.message, e.field))
}

fn host_error(py: Python<'_>, e: &HostError) -> PyErr {
    let class = if e.is_fatal() {
        "EngineFailed"
    } else {
        "HostError"
    };
    raise(py, class, (e.to_string(), e.code()))
}

fn json(py: Python<'_>, text: &str) -> PyResult<serde_json::Value> {
    serde_json::from_str(text).map_err(|e| {
        raise(
            py,
            "InputError",
            (format!("not JSON: {e}"), Option::<String>::None),
        )
    })
}

/// The engine, recording or not. One per `Engine` object, never moved: sizes do not matter.
#[allow(clippy::large_enum_variant)]
enum Core {
    Plain(turnstile_core::Engine),
    Recording(Recorder, BufWriter<File>),
}

/// One engine. Not shared between threads (a host drives its engine from one place).
#[pyclass(module = "turnstile._native", unsendable)]
struct Engine {
    core: Core,
}

impl Engine {
    fn engine(&self) -> &turnstile_core::Engine {
        match &self.core {
            Core::Plain(e) => e,
            Core::Recording(r, _) => r.engine(),
        }
    }
}

#[pymethods]
impl Engine {
    /// Starts an engine from a trace header's JSON (configuration and start state); with
    /// `record`, every input handled is appended to that trace file with its outputs.
    #[new]
    #[pyo3(signature = (header_json, record=None))]
    fn new(py: Python<'_>, header_json: &str, record: Option<PathBuf>) -> PyResult<Engine> {
        let header: TraceHeader =
            parse("TraceHeader", json(py, header_json)?).map_err(|e| invalid(py, e))?;
        let core = match record {
            None => turnstile_core::Engine::new(header.config, header.start)
                .map(Core::Plain)
                .map_err(|e| host_error(py, &e))?,
            Some(path) => {
                let recorder = Recorder::new(header, true).map_err(|e| host_error(py, &e))?;
                let mut file = BufWriter::new(File::create(&path)?);
                file.write_all(recorder.header_jsonl().as_bytes())?;
                file.flush()?;
                Core::Recording(recorder, file)
            }
        };
        Ok(Engine { core })
    }

    /// Handles one input (JSON text) at `now` milliseconds; then poll the outputs.
    fn handle(&mut self, py: Python<'_>, now: u64, input_json: &str) -> PyResult<()> {
        let input: Input = parse("Input", json(py, input_json)?).map_err(|e| invalid(py, e))?;
        let result = match &mut self.core {
            Core::Plain(e) => e.handle(Millis(now), input),
            Core::Recording(r, file) => {
                let result = r.handle(Millis(now), input);
                file.write_all(r.take_jsonl().as_bytes())?;
                file.flush()?;
                result
            }
        };
        result.map_err(|e| host_error(py, &e))
    }

    /// The next output as JSON text, or `None` when there is none.
    fn poll_output(&mut self) -> Option<String> {
        let next = match &mut self.core {
            Core::Plain(e) => e.poll_output(),
            Core::Recording(r, _) => r.poll_output(),
        };
        next.map(|o| output_value(&o).to_string())
    }

    /// The time of the newest input, in milliseconds.
    fn now(&self) -> u64 {
        self.engine().now().0
    }

    /// The earliest armed timer's deadline, in milliseconds.
    fn next_deadline(&self) -> Option<u64> {
        self.engine().next_deadline().map(|m| m.0)
    }

    /// Submissions accepted and not yet finished.
    fn unfinished(&self) -> u64 {
        self.engine().unfinished()
    }

    /// Whether the engine has stopped (after a shutdown, or a failure).
    fn is_stopped(&self) -> bool {
        self.engine().is_stopped()
    }

    /// Whether the session has a turn running.
    fn is_busy(&self, session: String) -> bool {
        self.engine().is_busy(&SessionId::new(session))
    }

    /// Whether a call's work may begin: it runs and the host reported `tool_started` before any
    /// abort (a tool left to finish once started begins only then). `call_json`: a `CallIo`.
    fn is_tool_started(&self, py: Python<'_>, call_json: &str) -> PyResult<bool> {
        let call: CallIo = parse("CallIo", json(py, call_json)?).map_err(|e| invalid(py, e))?;
        Ok(self.engine().is_tool_started(&call))
    }

    /// Submissions waiting in the session's queue.
    fn queue_len(&self, session: String) -> usize {
        self.engine().queue_len(&SessionId::new(session))
    }
}

/// Replays a trace file (the same check as `turnstile-sim replay`): every invariant after every
/// input, every expected output compared. Returns the report as JSON text.
#[pyfunction]
fn replay(py: Python<'_>, path: PathBuf) -> PyResult<String> {
    let bytes = std::fs::read(&path)?;
    let name = path.display().to_string();
    let trace = Trace::parse_bytes(&bytes)
        .map_err(|e| raise(py, "ReplayError", (format!("{name}: {e}"), e.line)))?;
    let report = turnstile_core::replay(&trace).map_err(|e| {
        let line = match &e {
            turnstile_core::ReplayFailure::Host { line, .. }
            | turnstile_core::ReplayFailure::Violation { line, .. }
            | turnstile_core::ReplayFailure::Mismatch { line, .. }
            | turnstile_core::ReplayFailure::Projection { line, .. } => Some(*line),
            turnstile_core::ReplayFailure::Outcome { .. } => None,
        };
        raise(py, "ReplayError", (format!("{name}: {e}"), line))
    })?;
    let outcomes: serde_json::Map<String, serde_json::Value> = report
        .outcomes
        .iter()
        .map(|(o, n)| (output_name(o), serde_json::Value::from(*n)))
        .collect();
    Ok(serde_json::json!({
        "inputs": report.inputs,
        "outputs": report.outputs,
        "outcomes": outcomes,
        "run_completes": report.run_completes,
        "unfinished": report.unfinished,
        "compared": report.compared,
        "output_hash": report.output_hash,
    })
    .to_string())
}

fn output_name(o: &turnstile_core::Outcome) -> String {
    serde_json::to_value(o)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| format!("{o:?}"))
}

/// Times the Rust core alone on a trace's inputs (handle, then drain the outputs), `reps`
/// times, and returns the best time in seconds: the baseline the benchmark sets the binding
/// and the driver beside.
#[pyfunction]
fn time_core(py: Python<'_>, path: PathBuf, reps: u32) -> PyResult<f64> {
    let bytes = std::fs::read(&path)?;
    let trace = Trace::parse_bytes(&bytes)
        .map_err(|e| raise(py, "ReplayError", (e.to_string(), e.line)))?;
    let mut best = f64::INFINITY;
    for _ in 0..reps.max(1) {
        let mut engine =
            turnstile_core::Engine::new(trace.header.config.clone(), trace.header.start.clone())
                .map_err(|e| host_error(py, &e))?;
        let inputs: Vec<(Millis, Input)> = trace
            .lines
            .iter()
            .map(|(_, l)| (l.at, l.input.clone()))
            .collect();
        let t0 = Instant::now();
        let mut n = 0u64;
        for (at, input) in inputs {
            engine.handle(at, input).map_err(|e| host_error(py, &e))?;
            while let Some(o) = engine.poll_output() {
                n += std::hint::black_box(o).no;
            }
        }
        std::hint::black_box(n);
        best = best.min(t0.elapsed().as_secs_f64());
    }
    Ok(best)
}

/// The module: `Engine`, `replay`, `time_core`, and the trace format's version.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Engine>()?;
    m.add_function(wrap_pyfunction!(replay, m)?)?;
    m.add_function(wrap_pyfunction!(time_core, m)?)?;
    m.add("TRACE_FORMAT", turnstile_core::trace::TRACE_FORMAT)?;
    m.add("TRACE_VERSION", turnstile_core::trace::TRACE_VERSION)?;
    Ok(())
}
