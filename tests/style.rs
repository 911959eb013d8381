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
        // Only qualifiers may come before `fn` (not `impl Fn(..) -> ..`, not a `fn` pointer).
        let head = &t[..pos];
        let qualifiers = ["pub", "pub(crate)", "pub(super)", "const", "async", "unsafe"];
        if !head.split_whitespace().all(|w| qualifiers.contains(&w)) {
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
    if let Some(cycle) = circle(&edges) {
        panic!("an import cycle inside a layer: {}", cycle.join(" -> "));
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

/// Every crate of the workspace with sources of its own, by folder.
const CRATES: &[&str] = &[
    "core",
    "model",
    "sim",
    "cli",
    "adapters/wire",
    "adapters/host",
    "adapters/http",
    "adapters/tools",
    "adapters/mcp",
    "adapters/server",
    "adapters/testkit",
    "bindings/driver",
    "bindings/python",
    "examples/sweep-your-tool",
];

/// Functions of the crates other than the core allowed above 70 lines: (file, function, its
/// length when listed). The list may only shrink: a listed function may not grow, and one
/// that is now short enough must leave the list.
const LONG_FN_EXCEPTIONS: &[(&str, &str, usize)] = &[
    ("model/src/configs.rs", "all", 381),
    ("model/src/driver.rs", "input", 166),
    ("model/src/driver.rs", "learn", 89),
    ("model/src/encode.rs", "encode", 78),
    ("model/src/spec.rs", "apply", 120),
    ("sim/src/members.rs", "world", 113),
    ("sim/src/view/model.rs", "output", 123),
    ("sim/src/world/checks.rs", "check_store", 118),
    ("sim/src/world/mod.rs", "world", 98),
    ("cli/src/remote.rs", "run", 155),
    ("cli/src/remote.rs", "on_frame", 73),
    ("cli/src/remote.rs", "follow", 77),
    ("cli/src/run.rs", "drive", 80),
    ("cli/src/serve.rs", "serve", 196),
    ("adapters/wire/src/decode/anthropic.rs", "frame", 102),
    ("adapters/wire/src/decode/responses.rs", "frame", 94),
    ("adapters/wire/src/encode/anthropic.rs", "encode", 98),
    ("adapters/wire/src/encode/chat.rs", "encode", 80),
    ("adapters/host/src/host/engine.rs", "on_msg", 71),
    ("adapters/host/src/host/engine.rs", "transition", 132),
    ("adapters/host/src/host/engine.rs", "reply", 98),
    ("adapters/host/src/host/mod.rs", "open", 168),
    ("adapters/host/src/host/worker.rs", "perform", 134),
    ("adapters/host/src/host/writer.rs", "write_batch", 72),
    ("adapters/host/src/store/apply.rs", "op_", 272),
    ("adapters/host/src/store/read.rs", "load_messages", 84),
    ("adapters/host/src/store/tests/apply.rs", "every_op_is_applied_and_read_back", 201),
    (
        "adapters/host/src/store/tests/recovery.rs",
        "recovery_ends_every_unfinished_submission_and_repairs_history",
        225,
    ),
    ("adapters/host/src/store/tests/engine_turn.rs", "drive_turn", 78),
    (
        "adapters/host/src/store/tests/engine_turn.rs",
        "an_engine_turn_applied_commit_by_commit_is_protocol_legal",
        80,
    ),
    (
        "adapters/host/src/store/tests/changes.rs",
        "changes_name_exactly_what_each_commit_touched_and_resume_across_a_restart",
        72,
    ),
    ("adapters/http/src/config.rs", "from_layers", 149),
    ("adapters/http/src/provider.rs", "send", 143),
    ("adapters/server/src/routes.rs", "prompt", 81),
    ("adapters/server/src/routes.rs", "events", 71),
];

/// Every `.rs` file under a crate's `src`, in path order, with its text.
fn crate_sources(krate: &str) -> Vec<(PathBuf, String)> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = fs::read_dir(dir) else { return };
        for e in entries {
            let p = e.expect("entry").path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|e| e == "rs") {
                out.push(p);
            }
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(krate).join("src");
    let mut files = Vec::new();
    walk(&root, &mut files);
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let rel = p.strip_prefix(&root).expect("under src").to_owned();
            let text = fs::read_to_string(&p).expect("read");
            (rel, text)
        })
        .collect()
}

/// The module path of a file under `src` (`store/mod.rs` and `store.rs` are `store`; the crate
/// roots are the empty path).
fn module_of(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> =
        rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    let last = parts.pop().unwrap_or_default();
    let stem = last.strip_suffix(".rs").unwrap_or(&last).to_owned();
    if parts.first().is_some_and(|p| p == "bin") {
        // `src/bin/x.rs` is a crate root of its own.
        return vec![format!("bin:{stem}")];
    }
    let root = parts.is_empty() && (stem == "lib" || stem == "main");
    if stem != "mod" && !root {
        parts.push(stem);
    }
    parts
}

/// The files of one crate as a graph: an edge `a -> b` when `a` names an item of `b` through
/// `crate::`, `super::` or `self::`, or a module it declares (`mod b;` then `b::`). A path is
/// resolved to the deepest module that is a file.
fn file_graph(krate: &str) -> Vec<(String, String)> {
    let files = crate_sources(krate);
    let modules: Vec<(Vec<String>, String)> =
        files.iter().map(|(rel, _)| (module_of(rel), rel.to_string_lossy().into_owned())).collect();
    let file_of = |path: &[String]| -> Option<String> {
        (0..=path.len()).rev().find_map(|n| {
            modules.iter().find(|(m, _)| m.as_slice() == &path[..n]).map(|(_, f)| f.clone())
        })
    };
    let word = |s: &str| -> String {
        s.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect()
    };
    let mut edges = Vec::new();
    for (rel, text) in &files {
        let me = module_of(rel);
        let name = rel.to_string_lossy().into_owned();
        let children: Vec<String> = text
            .lines()
            .filter_map(|l| {
                let l = l.trim_start();
                let l = l.strip_prefix("pub(crate) ").or(l.strip_prefix("pub ")).unwrap_or(l);
                l.strip_prefix("mod ").map(&word)
            })
            .collect();
        // A re-export (`pub use`) hands names on without using them, and a test module
        // inside the file (`super` is then the file itself) is not the file's code.
        let body = match text.find("\nmod tests {") {
            Some(i) => &text[..text[..i].rfind("#[cfg(test)]").unwrap_or(i)],
            None => text.as_str(),
        };
        let mut in_reexport = false;
        for line in body.lines() {
            let code = code_only(line);
            let t = code.trim_start();
            if t.starts_with("pub use ") || t.starts_with("pub(crate) use ") {
                in_reexport = true;
            }
            if in_reexport {
                in_reexport = !code.contains(';');
                continue;
            }
            for segs in paths_in(&code) {
                let path: Option<Vec<String>> = match segs.first().map(String::as_str) {
                    Some("crate") => Some(segs[1..].to_vec()),
                    Some("super") => {
                        let mut base = me.clone();
                        // A file's `super` is its folder's module; `mod.rs`'s is one up.
                        let is_mod = rel.file_name().is_some_and(|f| f == "mod.rs");
                        if !is_mod || base.len() > 1 {
                            base.pop();
                        }
                        let mut rest = &segs[1..];
                        while rest.first().is_some_and(|s| s == "super") {
                            base.pop();
                            rest = &rest[1..];
                        }
                        Some(base.into_iter().chain(rest.iter().cloned()).collect())
                    }
                    Some("self") => Some(me.iter().chain(segs[1..].iter()).cloned().collect()),
                    Some(first) if children.iter().any(|c| c == first) => {
                        Some(me.iter().chain(segs.iter()).cloned().collect())
                    }
                    _ => None,
                };
                let Some(target) = path.and_then(|p| file_of(&p)) else { continue };
                if target != name {
                    edges.push((name.clone(), target));
                }
            }
        }
    }
    edges.sort();
    edges.dedup();
    edges
}

/// The paths in a line of code (`a::b::c`), with a brace group after a path expanded one level
/// (`crate::{out, setup::Global}` is `crate::out` and `crate::setup::Global`).
fn paths_in(code: &str) -> Vec<Vec<String>> {
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    let chars: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if !is_word(chars[i]) || (i > 0 && (is_word(chars[i - 1]) || chars[i - 1] == ':')) {
            i += 1;
            continue;
        }
        // A path starts here: words joined by `::`.
        let mut segs = Vec::new();
        let mut j = i;
        loop {
            let start = j;
            while j < chars.len() && is_word(chars[j]) {
                j += 1;
            }
            segs.push(chars[start..j].iter().collect::<String>());
            if chars.get(j) == Some(&':') && chars.get(j + 1) == Some(&':') {
                j += 2;
                if chars.get(j) == Some(&'{') {
                    let end =
                        chars[j..].iter().position(|c| *c == '}').map_or(chars.len(), |e| j + e);
                    let group: String = chars[j + 1..end].iter().collect();
                    for item in group.split(',') {
                        let item: Vec<String> = item
                            .trim()
                            .split("::")
                            .map(|w| w.chars().take_while(|c| is_word(*c)).collect())
                            .filter(|w: &String| !w.is_empty() && w != "self")
                            .collect();
                        out.push(segs.iter().cloned().chain(item).collect());
                    }
                    j = end;
                    break;
                }
                continue;
            }
            break;
        }
        if segs.len() > 1 {
            out.push(segs);
        }
        i = j.max(i + 1);
    }
    out
}

/// A circle in a graph, if it has one.
fn circle(edges: &[(String, String)]) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        edges: &[(String, String)],
        path: &mut Vec<String>,
        done: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(pos) = path.iter().position(|p| p == n) {
            let mut c = path[pos..].to_vec();
            c.push(n.to_owned());
            return Some(c);
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
    edges.iter().find_map(|(from, _)| visit(from, edges, &mut Vec::new(), &mut done))
}

/// Every crate's files stand on floors: no two files import each other, directly or around a
/// circle, so each file can be read knowing only the ones below it. A folder's `mod.rs` only
/// names its files and hands their names on; a file that took a name from it would stand
/// both above and below it.
#[test]
fn every_crate_s_files_import_each_other_without_circles() {
    let mut problems = Vec::new();
    for krate in CRATES {
        // Every circle, each named once: one of its edges is set aside and the search goes on.
        let mut edges = file_graph(krate);
        while let Some(c) = circle(&edges) {
            problems.push(format!("{krate}/src: {}", c.join(" -> ")));
            edges.retain(|(a, b)| !(a == &c[0] && b == &c[1]));
        }
    }
    assert!(problems.is_empty(), "import circles between files:\n{}", problems.join("\n"));
}

#[test]
fn the_file_graph_resolves_crate_super_and_child_paths() {
    let edges = file_graph("adapters/host");
    let has = |a: &str, b: &str| edges.iter().any(|(x, y)| x == a && y == b);
    assert!(has("store/read.rs", "store/error.rs"), "super::error::StoreError");
    assert!(has("host/mod.rs", "store/mod.rs"), "crate::store::Store");
    assert!(!has("store/mod.rs", "store/read.rs"), "pub use read::Reader only hands it on");
    assert_eq!(
        paths_in("use crate::{out, setup::Global}; let x = super::a::b(c::d);"),
        vec![
            vec!["crate".to_owned(), "out".into()],
            vec!["crate".into(), "setup".into(), "Global".into()],
            vec!["super".into(), "a".into(), "b".into()],
            vec!["c".into(), "d".into()],
        ]
    );
    let cycle = circle(&[
        ("a".to_owned(), "b".to_owned()),
        ("b".to_owned(), "c".to_owned()),
        ("c".to_owned(), "a".to_owned()),
    ]);
    assert_eq!(cycle, Some(vec!["a".into(), "b".into(), "c".into(), "a".into()]));
}

/// Every crate's functions stay under the line limit, but for today's exceptions, which may
/// only shrink.
#[test]
fn every_crate_s_functions_stay_under_the_line_limit() {
    let mut long = Vec::new();
    let mut seen = Vec::new();
    for krate in CRATES.iter().filter(|k| **k != "core") {
        for (rel, text) in crate_sources(krate) {
            let file = format!("{krate}/src/{}", rel.to_string_lossy());
            for (name, line, n) in functions(&text) {
                if n <= FN_LINES_MAX {
                    continue;
                }
                let listed =
                    LONG_FN_EXCEPTIONS.iter().find(|(f, fun, _)| *f == file && *fun == name);
                match listed {
                    Some((_, _, max)) if n <= *max => seen.push((file.clone(), name)),
                    Some((_, _, max)) => {
                        long.push(format!("{file}:{line} fn {name}: {n} lines, listed at {max}"))
                    }
                    None => long.push(format!("{file}:{line} fn {name}: {n} lines")),
                }
            }
        }
    }
    assert!(
        long.is_empty(),
        "functions above {FN_LINES_MAX} lines (split them; the exceptions may not grow):\n{}",
        long.join("\n")
    );
    let stale: Vec<String> = LONG_FN_EXCEPTIONS
        .iter()
        .filter(|(f, fun, _)| !seen.iter().any(|(sf, sfun)| sf == f && sfun == fun))
        .map(|(f, fun, _)| format!("{f} fn {fun}"))
        .collect();
    assert!(stale.is_empty(), "no longer long (take them off the list):\n{}", stale.join("\n"));
}
