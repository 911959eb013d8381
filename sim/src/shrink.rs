//! Shrinking a failing core trace to a minimal one (delta debugging over its inputs).
//!
//! A candidate keeps a subset of the input lines, in order and at their times, without expected
//! outputs; it still fails when replaying it breaks the same invariant (SPEC 6 name) as the
//! original. Candidates that make the engine refuse an input (say, a timer fired before a
//! deadline it now has) do not count. The classic ddmin loop removes chunks of halving size,
//! then single lines, until no line can go.

use turnstile_core::{ReplayFailure, Trace, TraceLine, replay};

/// A shrunk trace and what it reproduces.
#[derive(Clone, Debug)]
pub struct Shrunk {
    /// The minimal trace (its header names the invariant it breaks).
    pub trace: Trace,
    /// The failure it reproduces, as replay reports it.
    pub failure: String,
    /// Input lines before and after.
    pub before: usize,
    /// Input lines kept.
    pub after: usize,
    /// Replays tried.
    pub tries: usize,
}

/// The invariant a replay broke, if it broke one.
fn broken(trace: &Trace) -> Option<(&'static str, String)> {
    match replay(trace) {
        Err(e @ ReplayFailure::Violation { .. }) => {
            let ReplayFailure::Violation { violation, .. } = &e else { return None };
            Some((violation.invariant, e.to_string()))
        }
        _ => None,
    }
}

fn candidate(trace: &Trace, keep: &[usize]) -> Trace {
    let lines = keep
        .iter()
        .enumerate()
        .map(|(i, &k)| {
            let l = &trace.lines[k].1;
            let line = TraceLine {
                at: l.at,
                input: l.input.clone(),
                expect: None,
                expect_projection: None,
            };
            (i + 2, line)
        })
        .collect();
    Trace { header: trace.header.clone(), lines }
}

/// Shrinks `trace` when its replay (outputs not compared) breaks an invariant; `None` when it
/// does not (the failure is not the core's: rerun the seed instead).
#[must_use]
pub fn shrink(trace: &Trace) -> Option<Shrunk> {
    let all: Vec<usize> = (0..trace.lines.len()).collect();
    let (key, _) = broken(&candidate(trace, &all))?;
    let mut tries = 1;
    let mut fails = |keep: &[usize]| {
        tries += 1;
        broken(&candidate(trace, keep)).is_some_and(|(k, _)| k == key)
    };
    let mut keep = all;
    let mut n = 2;
    while keep.len() >= 2 {
        let chunk = keep.len().div_ceil(n);
        let mut reduced = false;
        for start in (0..keep.len()).step_by(chunk) {
            let rest: Vec<usize> = keep[..start]
                .iter()
                .chain(keep[(start + chunk).min(keep.len())..].iter())
                .copied()
                .collect();
            if !rest.is_empty() && fails(&rest) {
                keep = rest;
                n = (n - 1).max(2);
                reduced = true;
                break;
            }
        }
        if !reduced {
            if n >= keep.len() {
                break;
            }
            n = (n * 2).min(keep.len());
        }
    }
    let mut trace_out = candidate(trace, &keep);
    let failure = broken(&trace_out).map(|(_, f)| f).unwrap_or_default();
    trace_out.header.rule = Some(format!("reproduces: {failure}"));
    Some(Shrunk { trace: trace_out, failure, before: trace.lines.len(), after: keep.len(), tries })
}

#[cfg(all(test, feature = "mutants"))]
mod tests {
    use turnstile_core::{
        Config, Input, Millis, Mutant, Seq, SessionId, Setup, Start, Submit, TraceHeader,
    };

    use super::*;

    /// A trace that breaks I10 under the mutant `cancel_flag` (an idle cancel cancels the next
    /// prompt), buried in unrelated inputs.
    fn noisy() -> Trace {
        let config = Config { mutant: Some(Mutant::CancelFlag), ..Config::default() };
        let mut lines = Vec::new();
        let mut push = |at: u64, input: Input| {
            lines.push((
                lines.len() + 2,
                TraceLine { at: Millis(at), input, expect: None, expect_projection: None },
            ))
        };
        push(0, Input::Submit(Submit::new("a", "noise 1")));
        push(
            1,
            Input::Prepared { session: SessionId::new("a"), seq: Seq(1), setup: Setup::default() },
        );
        push(2, Input::Submit(Submit::new("b", "noise 2")));
        push(3, Input::Cancel { session: SessionId::new("s"), up_to: None });
        push(4, Input::Submit(Submit::new("s", "the victim")));
        push(5, Input::Submit(Submit::new("a", "noise 3")));
        push(
            6,
            Input::Prepared { session: SessionId::new("b"), seq: Seq(2), setup: Setup::default() },
        );
        push(7, Input::Shutdown);
        Trace { header: TraceHeader::new(config, Start::default()), lines }
    }

    #[test]
    fn a_failing_trace_shrinks_to_the_inputs_that_matter() {
        let shrunk = shrink(&noisy())
            .unwrap_or_else(|| panic!("the mutant breaks no invariant: {:?}", replay(&noisy())));
        assert_eq!(shrunk.before, 8);
        assert!(shrunk.after <= 3, "kept {} lines: {:?}", shrunk.after, shrunk.trace.lines);
        assert!(replay(&shrunk.trace).is_err(), "the shrunk trace still fails");
        assert!(shrunk.trace.header.rule.as_deref().is_some_and(|r| r.starts_with("reproduces: ")));
    }

    #[test]
    fn a_passing_trace_is_not_shrunk() {
        let mut t = noisy();
        t.header.config.mutant = None;
        assert!(shrink(&t).is_none());
    }
}
