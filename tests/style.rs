//! Checks of the core's shape that reviewers would otherwise have to remember (STYLE.md):
//! every module names its SPEC section, functions stay short, handlers state their
//! preconditions, and there are no mutable globals.

use std::fs;
use std::path::{Path, PathBuf};

/// Functions allowed above 70 lines, with their length when listed. The list may only shrink.
const LONG_FN_ALLOWLIST: &[(&str, &str)] = &[];

const FN_LINES_MAX: usize = 70;

fn core_sources() -> Vec<(PathBuf, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../core/src");
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .expect("core/src")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .collect();
    files.sort();
    files.into_iter().map(|p| (p.clone(), fs::read_to_string(&p).expect("read"))).collect()
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
