//! `multiedit` on real files: every edit in order on the evolving text, all or none (a failing
//! edit names itself and leaves the file as it was on disk), the same view-first and
//! unchanged-since rules as `edit`, and `replace_all`.

use turnstile_core::{CallId, SessionId, ToolOutput};
use turnstile_host::{Tool, ToolCall};
use turnstile_tools::{Edit, MultiEdit, Seen, View, Workspace};

const TEXT: &str = "fn a() {}\nfn b() {}\nfn a() {}\n";

struct Tools {
    dir: tempfile::TempDir,
    view: View,
    edit: Edit,
    multiedit: MultiEdit,
}

fn tools() -> Tools {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("src")).unwrap();
    std::fs::write(dir.path().join("src/lib.rs"), TEXT).unwrap();
    let workspace = Workspace::new(dir.path()).unwrap();
    let seen = Seen::default();
    Tools {
        view: View { workspace: workspace.clone(), seen: seen.clone() },
        edit: Edit { workspace: workspace.clone(), seen: seen.clone() },
        multiedit: MultiEdit { workspace, seen },
        dir,
    }
}

impl Tools {
    fn on_disk(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("src/lib.rs")).unwrap()
    }

    async fn viewed(&self, session: &str) {
        let out = call(&self.view, session, serde_json::json!({"path": "src/lib.rs"})).await;
        assert!(!out.is_error, "{out:?}");
    }
}

async fn call(tool: &dyn Tool, session: &str, input: serde_json::Value) -> ToolOutput {
    tool.run(ToolCall::new(SessionId::new(session), CallId::new("c"), input.to_string())).await
}

fn edits(edits: serde_json::Value) -> serde_json::Value {
    serde_json::json!({"path": "src/lib.rs", "edits": edits})
}

#[tokio::test]
async fn every_edit_applies_in_order_to_the_text_the_ones_before_it_left() {
    let t = tools();
    t.viewed("s").await;
    let out = call(
        &t.multiedit,
        "s",
        edits(serde_json::json!([
            {"old_string": "fn b() {}", "new_string": "fn c() {}"},
            // Only the first edit made this text unique.
            {"old_string": "fn c() {}\nfn a", "new_string": "fn c() {}\nfn d"},
        ])),
    )
    .await;
    assert_eq!(out, ToolOutput::ok("edited `src/lib.rs`: 2 edits, replaced 2 places"));
    assert_eq!(t.on_disk(), "fn a() {}\nfn c() {}\nfn d() {}\n");
    // Its own change does not make the file stale for the next edit.
    let out = call(
        &t.edit,
        "s",
        serde_json::json!({"path": "src/lib.rs", "old_string": "fn d", "new_string": "fn e"}),
    )
    .await;
    assert!(!out.is_error, "{out:?}");
}

#[tokio::test]
async fn a_failing_second_edit_writes_nothing_and_names_itself() {
    let t = tools();
    t.viewed("s").await;
    let first = serde_json::json!({"old_string": "fn b() {}", "new_string": "fn c() {}"});
    for (second, why) in [
        (
            serde_json::json!({"old_string": "fn z() {}", "new_string": "x"}),
            "edit 2 of 2: old_string was not found in `src/lib.rs`",
        ),
        (
            serde_json::json!({"old_string": "fn a() {}", "new_string": "x"}),
            "edit 2 of 2: old_string matches 2 places in `src/lib.rs`",
        ),
        (
            serde_json::json!({"old_string": "", "new_string": "x"}),
            "edit 2 of 2: old_string is empty",
        ),
        (
            serde_json::json!({"old_string": "fn a", "new_string": "fn a"}),
            "edit 2 of 2: old_string and new_string are the same",
        ),
        (
            // The text the first edit removed is not there for the second.
            serde_json::json!({"old_string": "fn b() {}", "new_string": "x"}),
            "(each edit applies to the text the ones before it left)",
        ),
    ] {
        let out = call(&t.multiedit, "s", edits(serde_json::json!([first, second]))).await;
        assert!(out.is_error, "{out:?}");
        assert!(out.content.contains(why), "{why}: {}", out.content);
        assert!(out.content.ends_with("Nothing was written: the edits apply all or none."));
        assert_eq!(t.on_disk(), TEXT, "the first edit was not written either");
    }
    // The file is still as viewed: a correct call now goes through.
    let out = call(&t.multiedit, "s", edits(serde_json::json!([first]))).await;
    assert_eq!(out, ToolOutput::ok("edited `src/lib.rs`: 1 edit, replaced 1 place"));
}

#[tokio::test]
async fn a_file_not_viewed_or_changed_since_is_refused() {
    let t = tools();
    let one = edits(serde_json::json!([{"old_string": "fn b() {}", "new_string": "fn c() {}"}]));
    let out = call(&t.multiedit, "s", one.clone()).await;
    assert!(out.is_error && out.content.contains("has not been viewed in this session"), "{out:?}");
    t.viewed("s").await;
    std::fs::write(t.dir.path().join("src/lib.rs"), "fn b() {}\n// a person's change\n").unwrap();
    let out = call(&t.multiedit, "s", one.clone()).await;
    assert!(
        out.is_error && out.content.contains("changed on disk since it was last viewed"),
        "{out:?}"
    );
    assert_eq!(t.on_disk(), "fn b() {}\n// a person's change\n");
    // Another session's view does not count.
    let out = call(&t.multiedit, "other", one).await;
    assert!(out.is_error && out.content.contains("has not been viewed"), "{out:?}");
}

#[tokio::test]
async fn replace_all_replaces_every_occurrence_of_its_edit() {
    let t = tools();
    t.viewed("s").await;
    let out = call(
        &t.multiedit,
        "s",
        edits(serde_json::json!([
            {"old_string": "fn a()", "new_string": "fn x()", "replace_all": true},
            {"old_string": "fn b()", "new_string": "fn y()"},
        ])),
    )
    .await;
    assert_eq!(out, ToolOutput::ok("edited `src/lib.rs`: 2 edits, replaced 3 places"));
    assert_eq!(t.on_disk(), "fn x() {}\nfn y() {}\nfn x() {}\n");
}

#[tokio::test]
async fn an_edit_without_its_fields_or_no_edit_at_all_is_named() {
    let t = tools();
    t.viewed("s").await;
    let out = call(
        &t.multiedit,
        "s",
        edits(serde_json::json!([{"old_string": "a", "new_string": "b"}, {"old_string": "c"}])),
    )
    .await;
    assert_eq!(
        out,
        ToolOutput::error(
            "invalid arguments for `multiedit`: field `new_string` of item 2 of field `edits` is missing"
        )
    );
    let out = call(&t.multiedit, "s", edits(serde_json::json!([]))).await;
    assert_eq!(
        out,
        ToolOutput::error(
            "invalid arguments for `multiedit`: field `edits` must have at least 1 item, got 0"
        )
    );
    assert_eq!(t.on_disk(), TEXT);
}

#[tokio::test]
async fn a_path_outside_the_working_directory_is_refused() {
    let t = tools();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), "s3cret").unwrap();
    let secret = outside.path().join("secret");
    for path in ["../secret", secret.to_str().unwrap()] {
        let input =
            serde_json::json!({"path": path, "edits": [{"old_string": "s", "new_string": "x"}]});
        let out = call(&t.multiedit, "s", input).await;
        assert!(out.is_error && out.content.starts_with("refused: "), "{path}: {out:?}");
    }
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "s3cret");
}
