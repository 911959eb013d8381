//! Checks of the core's shape that reviewers would otherwise have to remember: every module
//! names its SPEC section, the folders are layers that import only downwards, functions stay
//! short, handlers state their preconditions, and there are no mutable globals.

use std::fs;
use std::path::{Path, PathBuf};

/// Functions allowed above 70 lines, with their length when listed. The list may only shrink.
const LONG_FN_ALLOWLIST: &[(&str, &str)] = &[];

const FN_LINES_MAX: usize = 70;

fn core_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../core/src")
}

/// Every `.rs` file under `core/src`, recursively, in path order.
fn core_sources() -> Vec<(PathBuf, String)> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in fs::read_dir(dir).expect("core/src") {
            let p = e.expect("entry").path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|e| e == "rs") {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    walk(&core_dir(), &mut files);
    files.sort();
    files.into_iter().map(|p| (p.clone(), fs::read_to_string(&p).expect("read"))).collect()
}

/// The core's layers, lowest first: a file may name (`crate::<layer>`) only its own layer or a
/// lower one. `lifecycle` and `check` share a rank and never name each other.
const LAYERS: &[(&str, u8)] = &[
    ("reuse", 0),
    ("alphabet", 1),
    ("state", 2),
    ("lifecycle", 3),
    ("check", 3),
    ("engine", 4),
    ("trace", 5),
];

/// The layer of a file under `core/src` (`lib.rs`, the root, has none).
fn layer_of(path: &Path) -> Option<&'static str> {
    let rel = path.strip_prefix(core_dir()).ok()?;
    let first = rel.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    LAYERS.iter().find(|(l, _)| *l == name).map(|(l, _)| *l)
}

fn rank(layer: &str) -> u8 {
    LAYERS.iter().find(|(l, _)| *l == layer).map_or(0, |(_, r)| *r)
}

/// Every `crate::<top>` or `crate::<top>::<file>` path in a file's code (comments and strings
/// removed), with its line number.
fn crate_paths(text: &str) -> Vec<(usize, String, Option<String>)> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let code = code_only(line);
        let mut rest = code.as_str();
        while let Some(pos) = rest.find("crate::") {
            let after = &rest[pos + "crate::".len()..];
            let word = |s: &str| -> String {
                s.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect()
            };
            let top = word(after);
            // `crate::state::turn::Turn` names the file `turn`; `crate::Engine::new` names none.
            let is_module = |w: &String| w.chars().next().is_some_and(|c| c.is_lowercase());
            let second = Some(&top)
                .filter(|t| is_module(t))
                .and_then(|_| after[top.len()..].strip_prefix("::").map(word))
                .filter(is_module);
            out.push((i + 1, top, second));
            rest = after;
        }
    }
    out
}

/// Removes string and char literals and line comments, so braces inside them do not count.
fn code_only(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                while let Some(d) = chars.next() {
                    match d {
                        '\\' => {
                            chars.next();
                        }
                        '"' => break,
                        _ => {}
                    }
                }
            }
            '\'' if chars.clone().nth(1) == Some('\'') => {
                chars.next();
                chars.next();
            }
            '/' if chars.peek() == Some(&'/') => break,
            _ => out.push(c),
        }
    }
    out
}

/// (name, first line, line count) of every `fn` with a body, by brace matching.
fn functions(text: &str) -> Vec<(String, usize, usize)> {
    let lines: Vec<String> = text.lines().map(code_only).collect();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let t = l.trim_start();
        let Some(pos) = t.find("fn ") else { continue };
        let head = &t[..pos];
        if !(head.is_empty()
            || head.ends_with("pub ")
            || head.ends_with("pub(crate) ")
            || head.ends_with("const "))
        {
            continue;
        }
        let name: String =
            t[pos + 3..].chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        let mut depth = 0i32;
        let mut opened = false;
        for (j, body) in lines.iter().enumerate().skip(i) {
            if !opened && body.contains(';') && !body.contains('{') {
                break; // a declaration without a body
            }
            for c in body.chars() {
                match c {
                    '{' => {
                        depth += 1;
                        opened = true;
                    }
                    '}' => depth -= 1,
                    _ => {}
                }
            }
            if opened && depth == 0 {
                out.push((name.clone(), i + 1, j - i + 1));
                break;
            }
        }
    }
    out
}

#[test]
fn every_core_module_opens_with_docs_naming_its_spec_section() {
    for (path, text) in core_sources() {
        let docs: String = text.lines().take_while(|l| l.starts_with("//!")).collect();
        assert!(
            docs.contains("SPEC"),
            "{} must open with //! docs naming its SPEC section",
            path.display()
        );
    }
}

#[test]
fn the_core_folders_are_layers_that_import_only_downwards() {
    let mut wrong = Vec::new();
    for (path, text) in core_sources() {
        let Some(me) = layer_of(&path) else { continue };
        for (line, top, _) in crate_paths(&text) {
            if rank(&top) == 0 {
                continue; // a root re-export such as `crate::Engine` in a doc example
            }
            if top != me && rank(&top) >= rank(me) {
                wrong.push(format!("{}:{line}: {me} imports {top}", path.display()));
            }
        }
    }
    assert!(wrong.is_empty(), "imports against the layers:\n{}", wrong.join("\n"));
}

#[test]
fn files_inside_a_layer_import_each_other_without_cycles() {
    // Every folder is ordered file by file, the handlers' (`lifecycle`) too: a handler calls
    // only handlers on a floor below it, and the pure rules are below them all.
    let mut edges: Vec<(String, String)> = Vec::new();
    for (path, text) in core_sources() {
        let Some(me) = layer_of(&path) else { continue };
        let file = path.file_stem().and_then(|f| f.to_str()).unwrap_or("?").to_owned();
        for (_, top, second) in crate_paths(&text) {
            if let Some(other) = second.filter(|o| top == me && *o != file) {
                edges.push((format!("{me}/{file}"), format!("{me}/{other}")));
            }
        }
    }
    edges.sort();
    edges.dedup();
    // Depth-first search for a cycle in the file graph.
    fn visit(
        n: &str,
        edges: &[(String, String)],
        path: &mut Vec<String>,
        done: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(pos) = path.iter().position(|p| p == n) {
            return Some(path[pos..].to_vec());
        }
        if done.iter().any(|d| d == n) {
            return None;
        }
        path.push(n.to_owned());
        for (_, to) in edges.iter().filter(|(from, _)| from == n) {
            if let Some(c) = visit(to, edges, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.push(n.to_owned());
        None
    }
    let mut done = Vec::new();
    for (from, _) in &edges {
        if let Some(cycle) = visit(from, &edges, &mut Vec::new(), &mut done) {
            panic!("an import cycle inside a layer: {}", cycle.join(" -> "));
        }
    }
    assert!(!edges.is_empty(), "the scanner found the imports between files");
}

#[test]
fn the_layer_scanner_sees_paths_and_ignores_comments() {
    let text = "use crate::state::turn::Turn; // crate::engine\nlet x = crate::Engine::new;";
    let paths = crate_paths(text);
    assert_eq!(
        paths,
        vec![(1, "state".to_owned(), Some("turn".to_owned())), (2, "Engine".to_owned(), None)]
    );
}

#[test]
fn only_the_decider_builds_a_completion() {
    // SPEC I1 by construction: `lifecycle/outcome.rs` consumes the submission and is the only
    // caller of the record's constructor (its fields are private to `alphabet/outcome.rs`).
    let mut callers = Vec::new();
    for (path, text) in core_sources() {
        let rel = path.strip_prefix(core_dir()).expect("under core/src").to_owned();
        let calls = text.lines().filter(|l| code_only(l).contains("Completion::record(")).count();
        if calls > 0 {
            callers.push(rel.display().to_string());
        }
    }
    assert_eq!(callers, vec!["lifecycle/outcome.rs".to_owned()]);
}

#[test]
fn core_functions_stay_under_the_line_limit() {
    let mut long = Vec::new();
    for (path, text) in core_sources() {
        let file = path.file_name().and_then(|f| f.to_str()).unwrap_or("?").to_owned();
        for (name, line, n) in functions(&text) {
            let allowed = LONG_FN_ALLOWLIST.iter().any(|(f, fun)| *f == file && *fun == name);
            if n > FN_LINES_MAX && !allowed {
                long.push(format!("{file}:{line} fn {name}: {n} lines"));
            }
        }
    }
    assert!(
        long.is_empty(),
        "functions above {FN_LINES_MAX} lines (split them):\n{}",
        long.join("\n")
    );
}

#[test]
fn the_scanner_measures_functions() {
    let text =
        "fn a() {\n    let s = \"}\";\n}\n\npub(crate) fn b(\n    x: u8,\n) -> u8 {\n    x\n}\n";
    assert_eq!(functions(text), vec![("a".to_owned(), 1, 3), ("b".to_owned(), 5, 5)]);
}

#[test]
fn handlers_state_their_preconditions() {
    let (mut handlers, mut asserts) = (0usize, 0usize);
    for (_, text) in core_sources() {
        let lines: Vec<&str> = text.lines().collect();
        for (name, line, n) in functions(&text) {
            if name.starts_with("on_") {
                handlers += 1;
                asserts += lines[line - 1..line - 1 + n]
                    .iter()
                    .filter(|l| l.contains("debug_assert"))
                    .count();
            }
        }
    }
    assert!(handlers >= 10, "found {handlers} on_* handlers");
    assert!(
        asserts >= 2 * handlers,
        "{asserts} debug_asserts over {handlers} handlers: at least two each on average"
    );
}

#[test]
fn the_core_has_no_mutable_globals_and_no_io() {
    for (path, text) in core_sources() {
        for (i, l) in text.lines().enumerate() {
            let code = code_only(l);
            for banned in [
                "static mut",
                "thread_local!",
                "std::fs",
                "std::net",
                "std::thread",
                "Instant::now",
                "SystemTime",
            ] {
                assert!(
                    !code.contains(banned),
                    "{}:{}: `{banned}` in the core",
                    path.display(),
                    i + 1
                );
            }
        }
    }
}

#[test]
fn every_allowed_panic_names_its_invariant() {
    for (path, text) in core_sources() {
        let lines: Vec<&str> = text.lines().collect();
        for (i, l) in lines.iter().enumerate() {
            if l.contains("allow(clippy::expect_used)") || l.contains("allow(clippy::unwrap_used)")
            {
                let in_tests = lines[..i].iter().any(|p| p.contains("#[cfg(test)]"));
                assert!(
                    in_tests || l.contains("invariant"),
                    "{}:{}: an allowed expect/unwrap needs a comment naming the invariant",
                    path.display(),
                    i + 1
                );
            }
        }
    }
}

fn repo_file(path: &str) -> String {
    let full = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path);
    fs::read_to_string(&full).unwrap_or_else(|e| panic!("{}: {e}", full.display()))
}

/// The entries of `const ALL: ... = &[ ... ];` in a mutant catalogue's source, counted by
/// their `Type::` prefix.
fn catalogue_len(source: &str, ty: &str) -> usize {
    let start = source.find("pub const ALL").expect("a catalogue");
    let end = start + source[start..].find("];").expect("its end");
    source[start..end].matches(&format!("{ty}::")).count()
}

/// Every number in `text` (whitespace collapsed, so a phrase may wrap) that stands where `{}`
/// stands in `phrase`.
fn numbers_in(text: &str, phrase: &str) -> Vec<usize> {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let (before, after) = phrase.split_once("{}").expect("a {} in the phrase");
    let mut found = Vec::new();
    let mut rest = flat.as_str();
    while let Some(i) = rest.find(before) {
        let tail = &rest[i + before.len()..];
        let digits: String = tail.chars().take_while(char::is_ascii_digit).collect();
        if !digits.is_empty() && tail[digits.len()..].starts_with(after) {
            found.push(digits.parse().expect("a number"));
        }
        rest = &rest[i + before.len()..];
    }
    found
}

/// The docs count the mutant catalogues as the code does (they drifted: 34, 38 and 39 for one
/// catalogue of 39).
#[test]
fn the_docs_count_the_mutants_the_catalogues_hold() {
    let core = catalogue_len(&repo_file("core/src/alphabet/mutants.rs"), "Mutant");
    let host = catalogue_len(&repo_file("adapters/host/src/mutants.rs"), "HostMutant");
    assert!(core >= 39 && host >= 6, "{core} {host}");
    let mut checked = 0;
    for (file, phrase, expected) in [
        ("README.md", "and {} mutants it finds", core),
        ("docs/architecture.md", "each of the {} mutants", core),
        ("docs/spec.md", "The catalogue has {} core mutants", core),
        ("docs/spec.md", "and {} host mutants", host),
        ("docs/verification.md", "of the core's {} (", core),
        ("docs/verification.md", "and the host's {}.", host),
        ("docs/verification.md", "of the {} hunts", core),
    ] {
        let found = numbers_in(&repo_file(file), phrase);
        assert!(!found.is_empty(), "{file}: no `{phrase}` any more: update this test");
        for n in found {
            assert_eq!(n, expected, "{file}: `{phrase}` says {n}, the code has {expected}");
            checked += 1;
        }
    }
    assert!(checked >= 7);
    #[cfg(feature = "mutants")]
    {
        let sim = turnstile_core::Mutant::ALL.iter().filter(|m| m.scope().contains(&"sim")).count();
        let text = repo_file("docs/verification.md");
        assert_eq!(numbers_in(&text, "finds all {} mutants in its scope"), [sim + host]);
        assert_eq!(numbers_in(&text, "its scope: {} of the core's"), [sim]);
    }
}

/// Every range of invariants the docs and the rustdoc name ("I1 to I14", "I1–I14") ends at
/// the last invariant the checkers report, which is the last one `docs/spec.md` defines.
#[test]
fn the_docs_name_the_invariants_the_checkers_report() {
    let reported = core_sources()
        .iter()
        .filter(|(p, _)| p.to_string_lossy().contains("/check/"))
        .flat_map(|(_, text)| {
            text.match_indices("\"I")
                .filter_map(|(i, _)| {
                    let digits: String =
                        text[i + 2..].chars().take_while(char::is_ascii_digit).collect();
                    (text[i + 2 + digits.len()..].starts_with('"'))
                        .then(|| digits.parse::<usize>().ok())
                        .flatten()
                })
                .collect::<Vec<_>>()
        })
        .max()
        .expect("the checkers name invariants");
    let spec = repo_file("docs/spec.md");
    let defined = (1..=reported + 1).filter(|n| spec.contains(&format!("- **I{n} "))).max();
    assert_eq!(defined, Some(reported), "docs/spec.md section 6 defines I1 to I{reported}");
    let mut texts: Vec<(String, String)> = ["README.md", "docs/architecture.md", "docs/spec.md"]
        .iter()
        .map(|f| ((*f).to_owned(), repo_file(f)))
        .collect();
    for entry in fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            texts.push((path.display().to_string(), fs::read_to_string(&path).unwrap()));
        }
    }
    texts.extend(core_sources().into_iter().map(|(p, t)| (p.display().to_string(), t)));
    let mut ranges = 0;
    for (file, text) in &texts {
        for phrase in ["I1 to I{}", "I1–I{}", "I1-I{}", "`\"I1\"` ... `\"I{}\"`"] {
            for n in numbers_in(text, phrase) {
                assert_eq!(
                    n, reported,
                    "{file}: `{phrase}` ends at I{n}, the checkers at I{reported}"
                );
                ranges += 1;
            }
        }
    }
    assert!(ranges >= 3, "the ranges were found ({ranges})");
}
