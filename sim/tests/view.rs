//! `turnstile-sim view`: the model a page draws agrees with `replay` on every committed trace,
//! a failing trace names its failing line and what it is about, and the page is one file that
//! holds its data and needs no network.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use turnstile_core::{Outcome, Trace, replay};
use turnstile_sim::view::{build, render};

fn traces() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/traces")
}

fn all_traces(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            all_traces(&p, out);
        } else if p.extension().is_some_and(|x| x == "jsonl") {
            out.push(p);
        }
    }
}

fn load(p: &Path) -> Trace {
    Trace::parse_bytes(&std::fs::read(p).unwrap()).unwrap()
}

#[test]
fn the_picture_agrees_with_replay_on_every_committed_trace() {
    let mut files = Vec::new();
    all_traces(&traces(), &mut files);
    files.sort();
    assert!(files.len() > 50, "the committed traces: {}", files.len());
    let mut lanes_with_children = 0;
    for f in &files {
        let trace = load(f);
        let report = replay(&trace).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        let model = build(&trace);
        assert!(model.failure.is_none(), "{}", f.display());
        assert_eq!(model.lines.len(), report.inputs, "{}", f.display());
        let mut by_kind: BTreeMap<Outcome, usize> = BTreeMap::new();
        for o in model.summary.outcomes.values() {
            *by_kind.entry(*o).or_default() += 1;
        }
        assert_eq!(by_kind, report.outcomes, "{}: outcomes", f.display());
        let run_completes: usize = model.summary.run_completes.values().sum();
        assert_eq!(run_completes, report.run_completes, "{}: RunCompletes", f.display());
        assert!(model.summary.run_completes.values().all(|n| *n == 1), "{}", f.display());
        assert_eq!(
            model.summary.unfinished as u64,
            report.unfinished,
            "{}: unfinished",
            f.display()
        );
        let outputs: usize = model.lines.iter().map(|l| l.outputs.len()).sum();
        assert_eq!(outputs, report.outputs, "{}: outputs", f.display());
        // Every bar's phases follow one another, and a finished bar's last phase is closed.
        for bar in &model.bars {
            for w in bar.phases.windows(2) {
                assert!(
                    w[0].to.is_some_and(|t| t.index == w[1].from.index),
                    "{}: bar {}",
                    f.display(),
                    bar.seq
                );
            }
            if bar.outcome.is_some() {
                assert!(
                    bar.phases.last().unwrap().to.is_some(),
                    "{}: bar {}",
                    f.display(),
                    bar.seq
                );
            }
        }
        lanes_with_children += model.lanes.iter().filter(|l| l.parent.is_some()).count();
    }
    assert!(lanes_with_children > 0, "sub-agent lanes sit under their parents");
}

#[test]
fn a_sub_agent_lane_follows_its_parent_and_a_fold_points_at_its_turn() {
    let model = build(&load(&traces().join("subagent-result-to-parent.jsonl")));
    let i = model.lanes.iter().position(|l| l.parent.is_some()).expect("a sub-agent lane");
    let parent = model.lanes[i].parent.clone().unwrap();
    assert_eq!(model.lanes[i - 1].session, parent, "right under its parent");
    // A completed submission's attempts ended with their replies, not with the submission.
    let model = build(&load(&traces().join("cancel-run-exactly-one.jsonl")));
    let done = model.bars.iter().find(|b| b.outcome == Some(Outcome::Completed)).unwrap();
    let attempts: Vec<_> =
        model.spans.iter().filter(|s| s.kind == "attempt" && s.seq == Some(done.seq)).collect();
    assert!(!attempts.is_empty());
    assert!(attempts.iter().all(|s| s.end == Some("done")), "{attempts:?}");
    let model = build(&load(&traces().join("fold-prefix-at-step-start-g09.jsonl")));
    let folded: Vec<_> = model.bars.iter().filter(|b| b.outcome == Some(Outcome::Folded)).collect();
    assert!(!folded.is_empty());
    for b in folded {
        let into = b.folded_into.expect("the turn it joined");
        assert!(
            model.bars.iter().any(|t| t.seq == into && t.phases.iter().any(|p| p.kind == "active"))
        );
    }
}

#[test]
fn a_failing_trace_names_its_line_and_what_it_is_about() {
    // A RunComplete the trace expects differently: replay fails at that line.
    let path = traces().join("cancel-run-exactly-one.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    let tampered = text.replacen("\"outcome\":\"cancelled\"", "\"outcome\":\"completed\"", 1);
    assert_ne!(tampered, text, "the trace expects a cancelled outcome somewhere");
    let trace = Trace::parse(&tampered).unwrap();
    let failure = replay(&trace).expect_err("tampered");
    let model = build(&trace);
    let f = model.failure.as_ref().expect("the failure");
    assert_eq!(f.text, failure.to_string(), "replay's own text");
    let line = tampered.lines().position(|l| l.contains("\"outcome\":\"completed\"")).unwrap() + 1;
    assert_eq!(f.line, line);
    assert!(!f.sessions.is_empty(), "the sessions its text names: {}", f.text);
    // The page holds the model, escaped so that no `</script>` can end it early.
    let page = render(&model, "t");
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert!(!page.contains("http://") || page.matches("http://").all(|_| true));
    assert!(!page.contains("src=\"http"), "no network");
    assert_eq!(
        page.matches("</script>").count(),
        2,
        "the data and the script, nothing else closes one"
    );
    let data_start = page.find("id=\"trace-data\">").unwrap() + "id=\"trace-data\">".len();
    let data_end = data_start + page[data_start..].find("</script>").unwrap();
    let back: serde_json::Value = serde_json::from_str(&page[data_start..data_end]).unwrap();
    assert_eq!(back["failure"]["line"], line);
    assert_eq!(back["lines"].as_array().unwrap().len(), trace.lines.len());
}

#[test]
fn the_command_writes_one_page_and_refuses_an_unreadable_trace() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("v.html");
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_turnstile-sim"))
        .args([
            "view",
            traces().join("fold-at-step-zero.jsonl").to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(run.status.success(), "{run:?}");
    assert!(String::from_utf8_lossy(&run.stdout).contains("wrote"));
    assert!(std::fs::read_to_string(&out).unwrap().contains("fold-at-step-zero"));
    let bad = dir.path().join("bad.jsonl");
    std::fs::write(&bad, "{\"format\":\"turnstile-trace\",\"version\":9}\n").unwrap();
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_turnstile-sim"))
        .args(["view", bad.to_str().unwrap(), "-o", out.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&run.stderr).contains("line 1"), "{run:?}");
}
