//! The regression traces the mutant hunt wrote (`turnstile-sim mutants --out`,
//! `tests/traces/regressions/sim-mutant-<name>.jsonl`): each replays cleanly on the correct core
//! (its outputs compared), and each still breaks an invariant with its mutant switched on, so
//! it pins the scenario that bug breaks.

#![cfg(feature = "mutants")]

use std::path::{Path, PathBuf};

use turnstile_core::{Mutant, ReplayFailure, Trace, replay};

fn regressions() -> Vec<(PathBuf, Mutant)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/traces/regressions");
    let mut found = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("the regressions directory") {
        let path = entry.expect("entry").path();
        let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default().to_owned();
        let Some(name) = stem.strip_prefix("sim-mutant-") else { continue };
        let mutant = Mutant::ALL
            .iter()
            .copied()
            .find(|m| m.name() == name)
            .unwrap_or_else(|| panic!("{}: no mutant is named {name}", path.display()));
        found.push((path, mutant));
    }
    found.sort();
    found
}

fn load(path: &Path) -> Trace {
    let text = std::fs::read_to_string(path).expect("read");
    Trace::parse(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn every_mutant_regression_passes_without_its_mutant_and_breaks_an_invariant_with_it() {
    let all = regressions();
    assert!(all.len() >= 10, "the hunt's regression traces are here: {}", all.len());
    for (path, mutant) in all {
        let mut trace = load(&path);
        assert_eq!(trace.header.config.mutant, None, "{}", path.display());
        replay(&trace).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        trace.header.config.mutant = Some(mutant);
        for (_, line) in &mut trace.lines {
            line.expect = None;
        }
        // A debug build's engine asserts its invariants itself: a panic naming one counts.
        let result = std::panic::catch_unwind(|| replay(&trace));
        match result {
            Ok(Err(ReplayFailure::Violation { .. })) => {}
            Err(panic) => {
                let why = turnstile_sim::panic_message(panic.as_ref());
                assert!(why.contains("invariant violated"), "{}: {why}", path.display());
            }
            Ok(other) => {
                panic!("{}: with {} replay gives {other:?}", path.display(), mutant.name())
            }
        }
    }
}
