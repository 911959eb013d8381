//! The file tools in a scratch working directory: what each returns, every escape refused
//! with a result (never a host error), and an edit refused for a file changed since viewed.

use turnstile_core::{CallId, SessionId, ToolOutput};
use turnstile_host::{Tool, ToolCall};
use turnstile_tools::{Edit, Ls, Seen, View, Workspace, Write};

struct Tools {
    dir: tempfile::TempDir,
    view: View,
    write: Write,
    edit: Edit,
    ls: Ls,
}

fn tools() -> Tools {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("src")).unwrap();
    std::fs::write(dir.path().join("src/lib.rs"), "fn a() {}\nfn b() {}\nfn a() {}\n").unwrap();
    std::fs::write(dir.path().join(".gitignore"), "target/\n").unwrap();
    std::fs::create_dir(dir.path().join("target")).unwrap();
    std::fs::write(dir.path().join("target/big"), "x").unwrap();
    let workspace = Workspace::new(dir.path()).unwrap();
    let seen = Seen::default();
    Tools {
        view: View { workspace: workspace.clone(), seen: seen.clone() },
        write: Write { workspace: workspace.clone(), seen: seen.clone() },
        edit: Edit { workspace: workspace.clone(), seen },
        ls: Ls { workspace },
        dir,
    }
}

async fn call(tool: &dyn Tool, session: &str, input: serde_json::Value) -> ToolOutput {
    tool.run(ToolCall::new(SessionId::new(session), CallId::new("c"), input.to_string())).await
}

#[tokio::test]
async fn view_numbers_lines_and_pages() {
    let t = tools();
    let out = call(&t.view, "s", serde_json::json!({"path": "src/lib.rs"})).await;
    assert!(!out.is_error);
    assert_eq!(out.content, "     1\tfn a() {}\n     2\tfn b() {}\n     3\tfn a() {}\n");
    let out =
        call(&t.view, "s", serde_json::json!({"path": "src/lib.rs", "offset": 1, "limit": 1}))
            .await;
    assert_eq!(out.content, "     2\tfn b() {}\n(lines 2-2 of 3; use offset 2 for more)\n");
    // Any offset and limit a model sends: past the end is said, never an overflow.
    let huge = serde_json::json!({"path": "src/lib.rs", "offset": 2, "limit": u64::MAX});
    let out = call(&t.view, "s", huge).await;
    assert_eq!(out.content, "     3\tfn a() {}\n");
    let past = serde_json::json!({"path": "src/lib.rs", "offset": u64::MAX, "limit": u64::MAX});
    let out = call(&t.view, "s", past).await;
    assert!(out.content.contains("is past its end"), "{out:?}");
    let out = call(&t.view, "s", serde_json::json!({"path": "src"})).await;
    assert!(out.is_error && out.content.contains("is a directory"), "{out:?}");
    // An unknown field is ignored and named (tests/args.rs has every lenient rule).
    let out = call(&t.view, "s", serde_json::json!({"path": "src/lib.rs", "nope": 1})).await;
    assert!(
        !out.is_error && out.content.starts_with("(ignored unknown field `nope`)\n"),
        "{out:?}"
    );
}

#[tokio::test]
async fn edit_needs_a_view_a_unique_match_and_an_unchanged_file() {
    let t = tools();
    let edit = |old: &str, new: &str| serde_json::json!({"path": "src/lib.rs", "old_string": old, "new_string": new});
    let out = call(&t.edit, "s", edit("fn b() {}", "fn c() {}")).await;
    assert!(out.is_error && out.content.contains("has not been viewed in this session"), "{out:?}");
    call(&t.view, "s", serde_json::json!({"path": "src/lib.rs"})).await;
    let out = call(&t.edit, "s", edit("fn z() {}", "x")).await;
    assert!(out.is_error && out.content.contains("was not found"), "{out:?}");
    let out = call(&t.edit, "s", edit("fn a() {}", "x")).await;
    assert!(out.is_error && out.content.contains("matches 2 places"), "{out:?}");
    let out = call(&t.edit, "s", edit("fn b() {}", "fn c() {}")).await;
    assert_eq!(out.content, "edited `src/lib.rs`: replaced 1 place");
    // Its own edit does not make the file stale; someone else's change does.
    let out = call(&t.edit, "s", edit("fn c() {}", "fn d() {}")).await;
    assert!(!out.is_error, "{out:?}");
    std::fs::write(t.dir.path().join("src/lib.rs"), "changed by a person\n").unwrap();
    let out = call(&t.edit, "s", edit("changed", "x")).await;
    assert!(
        out.is_error && out.content.contains("changed on disk since it was last viewed"),
        "{out:?}"
    );
    // Another session has not seen the file.
    let out = call(&t.edit, "other", edit("changed", "x")).await;
    assert!(out.is_error && out.content.contains("has not been viewed"), "{out:?}");
}

#[tokio::test]
async fn write_creates_and_replaces_only_what_was_viewed() {
    let t = tools();
    let out =
        call(&t.write, "s", serde_json::json!({"path": "new/deep/file.txt", "content": "a\nb\n"}))
            .await;
    assert_eq!(out.content, "created `new/deep/file.txt` (2 lines)");
    assert_eq!(std::fs::read_to_string(t.dir.path().join("new/deep/file.txt")).unwrap(), "a\nb\n");
    let out = call(&t.write, "s", serde_json::json!({"path": "src/lib.rs", "content": "x"})).await;
    assert!(out.is_error && out.content.contains("has not been viewed"), "{out:?}");
    let out =
        call(&t.write, "s", serde_json::json!({"path": "new/deep/file.txt", "content": "c\n"}))
            .await;
    assert_eq!(out.content, "replaced `new/deep/file.txt` (1 line)");
}

#[tokio::test]
async fn ls_lists_a_tree_without_ignored_or_hidden_files() {
    let t = tools();
    let out = call(&t.ls, "s", serde_json::json!({})).await;
    assert_eq!(out.content, "./\n  src/\n    lib.rs\n");
    let out = call(&t.ls, "s", serde_json::json!({"path": "src/lib.rs"})).await;
    assert!(out.is_error && out.content.contains("is not a folder"));
}

#[tokio::test]
async fn every_escape_is_a_refusal_the_model_reads() {
    let t = tools();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), "s3cret").unwrap();
    std::os::unix::fs::symlink(outside.path(), t.dir.path().join("link")).unwrap();
    let secret = outside.path().join("secret");
    let paths =
        ["../secret", "src/../../secret", secret.to_str().unwrap(), "link/secret", "/etc/passwd"];
    for path in paths {
        for (tool, input) in [
            (&t.view as &dyn Tool, serde_json::json!({"path": path})),
            (&t.write, serde_json::json!({"path": path, "content": "x"})),
            (&t.edit, serde_json::json!({"path": path, "old_string": "s", "new_string": "x"})),
            (&t.ls, serde_json::json!({"path": path})),
        ] {
            let out = call(tool, "s", input).await;
            assert!(out.is_error && out.content.starts_with("refused: "), "{path}: {out:?}");
        }
    }
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "s3cret", "nothing outside was touched");
    assert!(!t.dir.path().parent().unwrap().join("secret").exists());
}

#[tokio::test]
async fn grep_finds_lines_with_a_glob_and_a_cap() {
    let t = tools();
    std::fs::write(t.dir.path().join("notes.md"), "fn a() in prose\n").unwrap();
    let grep = turnstile_tools::Grep { workspace: Workspace::new(t.dir.path()).unwrap() };
    let out = call(&grep, "s", serde_json::json!({"pattern": "fn a", "glob": "*.rs"})).await;
    assert_eq!(out.content, "src/lib.rs:1: fn a() {}\nsrc/lib.rs:3: fn a() {}\n");
    let out = call(
        &grep,
        "s",
        serde_json::json!({"pattern": "FN A", "ignore_case": true, "max_results": 1}),
    )
    .await;
    assert_eq!(
        out.content,
        "notes.md:1: fn a() in prose\n(2 more matches not shown; narrow the pattern, the path or the glob)\n"
    );
    let out = call(&grep, "s", serde_json::json!({"pattern": "big|x"})).await;
    assert_eq!(out.content, "no matches", "target/ is ignored by .gitignore");
    let out = call(&grep, "s", serde_json::json!({"pattern": "("})).await;
    assert!(out.is_error && out.content.starts_with("invalid pattern"), "{out:?}");
    let out = call(&grep, "s", serde_json::json!({"pattern": "a", "path": "../"})).await;
    assert!(out.is_error && out.content.starts_with("refused: "), "{out:?}");
}
