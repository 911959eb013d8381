//! A recorded trace made into a regression trace (SPEC 10: "replaying recorded bug traces"):
//! what `turnstile-sim replay DIR --save FILE --rule TEXT` writes.
//!
//! The trace suite (`tests/traces.rs`) replays every `*.jsonl` under `tests/traces/` and
//! requires of each a `name` equal to its file's name, a `rule`, and expected outputs on every
//! line. A flight trace of a live run (`turnstile run --record DIR`) has its outputs already
//! (the host records them), so it needs only the first two: [`regression`] sets them, keeps
//! every line as recorded, and notes in `origin` where the trace came from. A line recorded
//! without outputs gets the ones the core produces now, when the trace replays.

use std::io::Write as _;
use std::path::Path;

use turnstile_core::trace::Trace;

/// `trace`, named `name`, pinning down `rule`, with `saved_from` (where it was read) added to
/// its origin. Lines keep their expected outputs; when a line has none and the trace replays
/// without breaking an invariant, every line gets the outputs the core produces now.
#[must_use]
pub fn regression(trace: &Trace, saved_from: &Path, name: &str, rule: &str) -> Trace {
    let mut saved = trace.clone();
    if saved.lines.iter().any(|(_, l)| l.expect.is_none())
        && let Ok(blessed) = turnstile_core::bless(&saved)
    {
        saved = blessed;
    }
    saved.header.name = Some(name.to_owned());
    saved.header.rule = Some(rule.to_owned());
    let from = serde_json::Value::String(saved_from.display().to_string());
    saved.header.origin = Some(match saved.header.origin.take() {
        Some(serde_json::Value::Object(mut origin)) => {
            origin.insert("saved_from".to_owned(), from);
            serde_json::Value::Object(origin)
        }
        Some(other) => serde_json::json!({ "recorded": other, "saved_from": from }),
        None => serde_json::json!({ "saved_from": from }),
    });
    saved
}

/// Writes [`regression`] of `trace` (read from `saved_from`) to `out`, named after `out`'s
/// file name, and returns what was written. `out` is never overwritten.
///
/// # Errors
/// `out` does not end in `.jsonl` (the suite would not replay it) or exists, `rule` is empty,
/// or the file cannot be written; the message names the file.
pub fn save(trace: &Trace, saved_from: &Path, out: &Path, rule: &str) -> Result<Trace, String> {
    if rule.trim().is_empty() {
        return Err("--rule is empty: say in a sentence what the trace pins down".to_owned());
    }
    let name = match out.file_stem().and_then(|s| s.to_str()) {
        Some(name) if out.extension().is_some_and(|e| e == "jsonl") && !name.is_empty() => name,
        _ => {
            return Err(format!(
                "{}: a regression trace is a `<name>.jsonl` file (the trace suite replays \
                 every *.jsonl under tests/traces/)",
                out.display()
            ));
        }
    };
    let saved = regression(trace, saved_from, name, rule);
    let mut file =
        std::fs::OpenOptions::new().write(true).create_new(true).open(out).map_err(|e| match e
            .kind()
        {
            std::io::ErrorKind::AlreadyExists => format!(
                "{} exists; a regression trace is never overwritten: choose another name, or \
                 remove it first",
                out.display()
            ),
            _ => format!("{}: cannot create the trace: {e}", out.display()),
        })?;
    file.write_all(saved.to_jsonl().as_bytes())
        .map_err(|e| format!("{}: cannot write the trace: {e}", out.display()))?;
    Ok(saved)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trace() -> Trace {
        let text = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/traces/fold-at-step-zero.jsonl"),
        )
        .unwrap();
        let mut trace = Trace::parse(&text).unwrap();
        trace.header.name = None;
        trace.header.rule = None;
        trace.header.origin = Some(serde_json::json!({"recorded_by": "turnstile-host host"}));
        trace
    }

    #[test]
    fn the_saved_trace_is_named_after_its_file_keeps_its_lines_and_says_where_it_came_from() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("fold-live.jsonl");
        let t = trace();
        let saved = save(&t, Path::new("rec"), &out, "SPEC 4.3: a fold at step 0").unwrap();
        assert_eq!(saved.header.name.as_deref(), Some("fold-live"));
        assert_eq!(saved.header.rule.as_deref(), Some("SPEC 4.3: a fold at step 0"));
        assert_eq!(
            saved.header.origin,
            Some(serde_json::json!({"recorded_by": "turnstile-host host", "saved_from": "rec"}))
        );
        let text = std::fs::read_to_string(&out).unwrap();
        let lines = |t: &str| t.lines().skip(1).map(str::to_owned).collect::<Vec<_>>();
        assert_eq!(lines(&text), lines(&t.to_jsonl()), "every line as recorded");
        let report = turnstile_core::replay(&Trace::parse(&text).unwrap()).unwrap();
        assert_eq!(report.compared, report.inputs);

        let again = save(&t, Path::new("rec"), &out, "another rule").unwrap_err();
        assert!(again.contains("exists; a regression trace is never overwritten"), "{again}");
        assert_eq!(std::fs::read_to_string(&out).unwrap(), text, "left alone");
        let txt = save(&t, Path::new("rec"), &dir.path().join("x.txt"), "r").unwrap_err();
        assert!(txt.contains("is a `<name>.jsonl` file"), "{txt}");
        let empty = save(&t, Path::new("rec"), &dir.path().join("y.jsonl"), " ").unwrap_err();
        assert!(empty.starts_with("--rule is empty"), "{empty}");
    }

    #[test]
    fn lines_recorded_without_outputs_get_the_cores() {
        let mut t = trace();
        for (_, l) in &mut t.lines {
            l.expect = None;
        }
        let saved = regression(&t, Path::new("rec"), "n", "r");
        assert!(saved.lines.iter().all(|(_, l)| l.expect.is_some()));
        assert_eq!(saved.lines, trace().lines);
    }
}
