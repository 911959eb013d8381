//! `glob` in a scratch working directory with real files and set modification times: newest
//! first (ties by name), the cap and its note, `.gitignore` and hidden files skipped, and
//! every way out of the working directory refused or not followed.

use std::time::{Duration, SystemTime};

use turnstile_core::{CallId, SessionId, ToolOutput};
use turnstile_host::{Tool, ToolCall};
use turnstile_tools::{Glob, Workspace};

fn glob(dir: &std::path::Path) -> Glob {
    Glob { workspace: Workspace::new(dir).unwrap() }
}

async fn call(tool: &Glob, input: serde_json::Value) -> ToolOutput {
    tool.run(ToolCall::new(SessionId::new("s"), CallId::new("c"), input.to_string())).await
}

/// Writes `path` (and its folders) and sets its modification time to `secs` after an epoch.
fn file(dir: &std::path::Path, path: &str, secs: u64) {
    let path = dir.join(path);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, path.display().to_string()).unwrap();
    let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000 + secs);
    std::fs::File::options().write(true).open(&path).unwrap().set_modified(at).unwrap();
}

#[tokio::test]
async fn newest_first_by_modification_time_ties_by_name() {
    let dir = tempfile::tempdir().unwrap();
    file(dir.path(), "old.rs", 10);
    file(dir.path(), "src/new.rs", 300);
    file(dir.path(), "src/deep/b.rs", 200);
    file(dir.path(), "src/deep/a.rs", 200);
    file(dir.path(), "src/Cargo.toml", 400);
    let g = glob(dir.path());
    let out = call(&g, serde_json::json!({"pattern": "**/*.rs"})).await;
    assert_eq!(out, ToolOutput::ok("src/new.rs\nsrc/deep/a.rs\nsrc/deep/b.rs\nold.rs\n"));
    // `*` stays within a folder; the folder searched is `path`, paths stay relative to the
    // working directory.
    let out = call(&g, serde_json::json!({"pattern": "*.rs"})).await;
    assert_eq!(out, ToolOutput::ok("old.rs\n"));
    let out = call(&g, serde_json::json!({"pattern": "src/*.toml"})).await;
    assert_eq!(out, ToolOutput::ok("src/Cargo.toml\n"));
    let out = call(&g, serde_json::json!({"pattern": "*.rs", "path": "src/deep"})).await;
    assert_eq!(out, ToolOutput::ok("src/deep/a.rs\nsrc/deep/b.rs\n"));
    // Touching a file moves it first.
    file(dir.path(), "old.rs", 500);
    let out = call(&g, serde_json::json!({"pattern": "**/*.rs"})).await;
    assert!(out.content.starts_with("old.rs\n"), "{}", out.content);
    let out = call(&g, serde_json::json!({"pattern": "**/*.py"})).await;
    assert_eq!(out, ToolOutput::ok("no files match `**/*.py` in `.`"));
}

#[tokio::test]
async fn at_most_100_newest_are_listed_and_a_note_says_how_many_more() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..105 {
        file(dir.path(), &format!("f{i:03}.txt"), i);
    }
    let out = call(&glob(dir.path()), serde_json::json!({"pattern": "*.txt"})).await;
    let lines: Vec<&str> = out.content.lines().collect();
    assert_eq!(lines.len(), 101, "{}", out.content);
    assert_eq!(lines[0], "f104.txt", "the newest first");
    assert_eq!(lines[99], "f005.txt", "the oldest five are left out");
    assert_eq!(lines[100], "(5 more files matched; narrow the pattern or the path)");
    let out = call(&glob(dir.path()), serde_json::json!({"pattern": "f00*.txt"})).await;
    assert_eq!(out.content.lines().count(), 10, "no note under the cap: {}", out.content);
}

#[tokio::test]
async fn gitignore_and_hidden_files_are_skipped() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(".gitignore"), "target/\n*.log\n").unwrap();
    file(dir.path(), "src/a.rs", 1);
    file(dir.path(), "target/debug/build.rs", 2);
    file(dir.path(), "run.log", 3);
    file(dir.path(), ".hidden/secret.rs", 4);
    let out = call(&glob(dir.path()), serde_json::json!({"pattern": "**/*"})).await;
    assert_eq!(out, ToolOutput::ok("src/a.rs\n"));
}

#[tokio::test]
async fn nothing_outside_the_working_directory_is_reached() {
    let outside = tempfile::tempdir().unwrap();
    file(outside.path(), "secret.rs", 1);
    let root = outside.path().join("work");
    file(&root, "src/a.rs", 2);
    std::os::unix::fs::symlink(outside.path(), root.join("src/out")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret.rs"), root.join("src/s.rs")).unwrap();
    let g = glob(&root);
    for (input, why) in [
        (serde_json::json!({"pattern": "../*"}), "refused: the pattern `../*` contains `..`"),
        (serde_json::json!({"pattern": "src/../../*.rs"}), "refused: the pattern"),
        (serde_json::json!({"pattern": "/etc/*"}), "refused: the pattern `/etc/*` is absolute"),
        (
            serde_json::json!({"pattern": format!("{}/*", outside.path().display())}),
            "refused: the pattern",
        ),
        (serde_json::json!({"pattern": "*", "path": ".."}), "refused: `..` contains `..`"),
        (
            serde_json::json!({"pattern": "*", "path": outside.path().display().to_string()}),
            "is outside the working directory",
        ),
        (serde_json::json!({"pattern": "*", "path": "src/out"}), "through a symbolic link"),
        (serde_json::json!({"pattern": "*", "path": "src/a.rs"}), "`src/a.rs` is not a folder"),
    ] {
        let out = call(&g, input.clone()).await;
        assert!(out.is_error && out.content.contains(why), "{input}: {out:?}");
    }
    // Symbolic links are neither followed nor listed, even those that lead outside.
    let out = call(&g, serde_json::json!({"pattern": "**/*"})).await;
    assert_eq!(out, ToolOutput::ok("src/a.rs\n"));
    let out = call(&g, serde_json::json!({"pattern": "["})).await;
    assert!(out.is_error && out.content.starts_with("invalid pattern `[`"), "{out:?}");
}
