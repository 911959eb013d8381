//! Replay: re-runs a trace, checks every invariant after every input, and compares outputs when
//! the trace has them (SPEC section 10).

use std::collections::BTreeMap;
use std::fmt;

use sha2::{Digest, Sha256};

use crate::alphabet::{HostError, Input, Outcome, Output, OutputKind, Seq};
use crate::check::{Auditor, Violation};
use crate::engine::Engine;
use crate::engine::check_invariants;
use crate::trace::{Trace, TraceLine, output_value};

/// What a successful replay saw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplayReport {
    /// Inputs replayed.
    pub inputs: usize,
    /// Outputs produced.
    pub outputs: usize,
    /// Outcomes decided, by kind.
    pub outcomes: BTreeMap<Outcome, usize>,
    /// RunCompletes published.
    pub run_completes: usize,
    /// Submissions still unfinished at the end (a trace may stop mid-run).
    pub unfinished: u64,
    /// Lines whose outputs were compared.
    pub compared: usize,
    /// SHA-256 of every output's JSON, in order: equal hashes mean identical runs (I12).
    pub output_hash: String,
}

/// Why a replay failed, with the trace line at fault.
#[derive(Clone, Debug, PartialEq)]
pub enum ReplayFailure {
    /// The engine refused the input as host misuse.
    Host {
        /// The 1-based line.
        line: usize,
        /// The error.
        error: HostError,
    },
    /// An invariant broke after this input.
    Violation {
        /// The 1-based line.
        line: usize,
        /// The violation.
        violation: Violation,
    },
    /// The outputs differ from the expected ones at `index` (0-based within the line).
    Mismatch {
        /// The 1-based line.
        line: usize,
        /// The first differing output within the line.
        index: usize,
        /// What the trace expected there (`None`: fewer outputs expected).
        expected: Option<serde_json::Value>,
        /// What the engine produced (`None`: fewer outputs produced).
        actual: Option<serde_json::Value>,
    },
    /// The projected outputs (SPEC 7) differ from the line's `expect_projection`: the engine
    /// disagrees with the specification that wrote the trace.
    Projection {
        /// The 1-based line.
        line: usize,
        /// What the trace (the specification) expected.
        expected: Box<crate::check::projection::Projection>,
        /// What the engine's outputs project to.
        actual: Box<crate::check::projection::Projection>,
    },
    /// At the end, a submission's outcome differs from the header's `expect_outcomes`.
    Outcome {
        /// The submission.
        seq: Seq,
        /// The expected outcome.
        expected: Outcome,
        /// The outcome it got, if any.
        actual: Option<Outcome>,
    },
}

impl fmt::Display for ReplayFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let show = |v: &Option<serde_json::Value>| {
            v.as_ref().map_or_else(|| "nothing".to_owned(), |v| v.to_string())
        };
        match self {
            ReplayFailure::Host { line, error } => write!(f, "line {line}: host error: {error}"),
            ReplayFailure::Violation { line, violation } => {
                write!(f, "line {line}: invariant {violation}")
            }
            ReplayFailure::Mismatch { line, index, expected, actual } => write!(
                f,
                "line {line}: output {index} differs\n  expected: {}\n  actual:   {}",
                show(expected),
                show(actual)
            ),
            ReplayFailure::Projection { line, expected, actual } => {
                let json = |p: &crate::check::projection::Projection| {
                    serde_json::to_string(p).unwrap_or_else(|e| e.to_string())
                };
                write!(
                    f,
                    "line {line}: the engine disagrees with the specification\n  expected: {}\n  \
                     actual:   {}",
                    json(expected),
                    json(actual)
                )
            }
            ReplayFailure::Outcome { seq, expected, actual } => {
                write!(f, "submission {seq}: expected outcome {expected:?}, got {actual:?}")
            }
        }
    }
}

impl std::error::Error for ReplayFailure {}

/// Replays a trace.
///
/// # Errors
/// The first [`ReplayFailure`].
pub fn replay(trace: &Trace) -> Result<ReplayReport, ReplayFailure> {
    run(trace).map(|(report, _)| report)
}

/// Replays a trace and returns it with every line's `expect` replaced by the outputs actually
/// produced ("blessing" a new or changed trace). Invariants are still checked; existing
/// expectations are not.
///
/// # Errors
/// The first host error or violation.
pub fn bless(trace: &Trace) -> Result<Trace, ReplayFailure> {
    let mut stripped = trace.clone();
    for (_, l) in &mut stripped.lines {
        l.expect = None;
    }
    let (_, outputs) = run(&stripped)?;
    let mut blessed = trace.clone();
    for ((_, l), outs) in blessed.lines.iter_mut().zip(outputs) {
        l.expect = Some(outs.iter().map(output_value).collect());
    }
    Ok(blessed)
}

fn run(trace: &Trace) -> Result<(ReplayReport, Vec<Vec<Output>>), ReplayFailure> {
    let header_line = 1;
    let mut engine = Engine::new(trace.header.config.clone(), trace.header.start.clone())
        .map_err(|error| ReplayFailure::Host { line: header_line, error })?;
    let mut auditor = Auditor::new(&trace.header.start);
    let mut hasher = Sha256::new();
    let mut report = ReplayReport {
        inputs: 0,
        outputs: 0,
        outcomes: BTreeMap::new(),
        run_completes: 0,
        unfinished: 0,
        compared: 0,
        output_hash: String::new(),
    };
    let mut outcomes: BTreeMap<Seq, Outcome> = BTreeMap::new();
    let mut all = Vec::with_capacity(trace.lines.len());
    let mut projector = crate::check::projection::Projector::default();
    for (line, TraceLine { at, input, expect, expect_projection }) in &trace.lines {
        let line = *line;
        step(&mut engine, *at, input.clone())
            .map_err(|error| ReplayFailure::Host { line, error })?;
        let mut outs = Vec::new();
        while let Some(o) = engine.poll_output() {
            outs.push(o);
        }
        check_invariants(&engine)
            .map_err(|violation| ReplayFailure::Violation { line, violation })?;
        auditor
            .observe(input, &outs)
            .map_err(|violation| ReplayFailure::Violation { line, violation })?;
        let values: Vec<serde_json::Value> = outs.iter().map(output_value).collect();
        report.compared +=
            expectations(line, input, expect, expect_projection, &outs, &values, &mut projector)?;
        for (o, v) in outs.iter().zip(&values) {
            hasher.update(v.to_string().as_bytes());
            hasher.update(b"\n");
            if let OutputKind::Finished(c) = &o.kind {
                *report.outcomes.entry(c.outcome()).or_default() += 1;
                report.run_completes += usize::from(c.is_run_complete());
                outcomes.insert(c.seq(), c.outcome());
            }
        }
        report.inputs += 1;
        report.outputs += outs.len();
        all.push(outs);
    }
    for (seq, expected) in trace.header.expect_outcomes.iter().flatten() {
        let actual = outcomes.get(seq).copied();
        if actual != Some(*expected) {
            return Err(ReplayFailure::Outcome { seq: *seq, expected: *expected, actual });
        }
    }
    report.unfinished = engine.unfinished();
    report.output_hash = hex(&hasher.finalize());
    Ok((report, all))
}

/// Compares one line's outputs with what the line expects (outputs and/or their projection);
/// returns how many comparisons were made.
fn expectations(
    line: usize,
    input: &Input,
    expect: &Option<Vec<serde_json::Value>>,
    expect_projection: &Option<crate::check::projection::Projection>,
    outs: &[Output],
    values: &[serde_json::Value],
    projector: &mut crate::check::projection::Projector,
) -> Result<usize, ReplayFailure> {
    let mut compared = 0;
    if let Some(expected) = expect {
        compare(line, expected, values)?;
        compared += 1;
    }
    let projected = projector.project(input, outs);
    if let Some(expected) = expect_projection {
        if *expected != projected {
            return Err(ReplayFailure::Projection {
                line,
                expected: Box::new(expected.clone()),
                actual: Box::new(projected),
            });
        }
        compared += 1;
    }
    Ok(compared)
}

fn step(engine: &mut Engine, at: crate::alphabet::Millis, input: Input) -> Result<(), HostError> {
    engine.handle(at, input)
}

fn compare(
    line: usize,
    expected: &[serde_json::Value],
    actual: &[serde_json::Value],
) -> Result<(), ReplayFailure> {
    let n = expected.len().max(actual.len());
    for index in 0..n {
        let (e, a) = (expected.get(index), actual.get(index));
        if e != a {
            return Err(ReplayFailure::Mismatch {
                line,
                index,
                expected: e.cloned(),
                actual: a.cloned(),
            });
        }
    }
    Ok(())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
