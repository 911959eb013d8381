//! Lenient arguments, through the real built-in tools in a scratch working directory:
//! `file_path` read as `path` (and both at once refused), an unknown field ignored and named
//! in the result (also an error result), a number sent as a string, and every other slip an
//! error result naming the field.

use turnstile_core::{CallId, SessionId, ToolOutput};
use turnstile_host::{ToolCall, ToolSet};

struct Tools {
    dir: tempfile::TempDir,
    set: ToolSet,
}

fn tools() -> Tools {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("src")).unwrap();
    std::fs::write(dir.path().join("src/lib.rs"), "one\ntwo\nthree\n").unwrap();
    let set = turnstile_tools::builtins(dir.path(), None).unwrap();
    Tools { dir, set }
}

impl Tools {
    async fn call(&self, tool: &str, input: serde_json::Value) -> ToolOutput {
        let call = ToolCall::new(SessionId::new("s"), CallId::new("c"), input.to_string());
        self.set.get(tool).expect("a built-in tool").run(call).await
    }

    fn read(&self, path: &str) -> String {
        std::fs::read_to_string(self.dir.path().join(path)).unwrap()
    }
}

/// Every built-in tool but `agent`, which is the core's.
const BUILTINS: [&str; 8] = ["bash", "edit", "glob", "grep", "ls", "multiedit", "view", "write"];

#[tokio::test]
async fn file_path_is_read_as_path_by_every_tool_with_a_path() {
    let t = tools();
    let out = t.call("view", serde_json::json!({"file_path": "src/lib.rs", "limit": 1})).await;
    assert_eq!(out, ToolOutput::ok("     1\tone\n(lines 1-1 of 3; use offset 1 for more)\n"));
    let out = t
        .call(
            "edit",
            serde_json::json!({"file_path": "src/lib.rs", "old_string": "two", "new_string": "2"}),
        )
        .await;
    assert_eq!(out, ToolOutput::ok("edited `src/lib.rs`: replaced 1 place"));
    assert_eq!(t.read("src/lib.rs"), "one\n2\nthree\n");
    let out = t.call("write", serde_json::json!({"file_path": "new.txt", "content": "x"})).await;
    assert_eq!(out, ToolOutput::ok("created `new.txt` (1 line)"));
    let out = t.call("ls", serde_json::json!({"file_path": "src"})).await;
    assert_eq!(out, ToolOutput::ok("src/\n  lib.rs\n"));
    let out = t.call("grep", serde_json::json!({"pattern": "one", "file_path": "src"})).await;
    assert_eq!(out, ToolOutput::ok("src/lib.rs:1: one\n"));
    let out = t.call("glob", serde_json::json!({"pattern": "*.rs", "file_path": "src"})).await;
    assert_eq!(out, ToolOutput::ok("src/lib.rs\n"));
}

#[tokio::test]
async fn path_and_file_path_together_is_an_error_the_model_reads() {
    let t = tools();
    let out = t.call("view", serde_json::json!({"path": "src/lib.rs", "file_path": "x"})).await;
    assert_eq!(
        out,
        ToolOutput::error(
            "invalid arguments for `view`: field `path` and field `file_path` were both given; send only `path`"
        )
    );
    let edit = serde_json::json!({
        "path": "src/lib.rs", "file_path": "src/lib.rs", "old_string": "one", "new_string": "1"
    });
    t.call("view", serde_json::json!({"path": "src/lib.rs"})).await;
    assert!(t.call("edit", edit).await.is_error);
    assert_eq!(t.read("src/lib.rs"), "one\ntwo\nthree\n", "nothing was written");
}

#[tokio::test]
async fn an_unknown_field_is_ignored_and_named_in_the_result() {
    let t = tools();
    let out = t
        .call(
            "view",
            serde_json::json!({"path": "src/lib.rs", "description": "Read it", "limit": 1}),
        )
        .await;
    assert_eq!(
        out,
        ToolOutput::ok(
            "(ignored unknown field `description`)\n     1\tone\n(lines 1-1 of 3; use offset 1 for more)\n"
        )
    );
    let out = t
        .call(
            "edit",
            serde_json::json!({"path": "src/lib.rs", "old_string": "one", "new_string": "1", "expected_replacements": 1, "a": true}),
        )
        .await;
    assert_eq!(
        out,
        ToolOutput::ok(
            "(ignored unknown field `a`)\n(ignored unknown field `expected_replacements`)\nedited `src/lib.rs`: replaced 1 place"
        )
    );
    let out =
        t.call("bash", serde_json::json!({"command": "echo hi", "description": "Say hi"})).await;
    assert_eq!(out, ToolOutput::ok("(ignored unknown field `description`)\nexit 0\nhi\n"));
}

#[tokio::test]
async fn an_unknown_field_is_named_on_an_error_result_too() {
    let t = tools();
    // The tool's own error.
    let out = t.call("view", serde_json::json!({"path": "missing.rs", "description": "d"})).await;
    assert!(out.is_error, "{out:?}");
    assert!(
        out.content
            .starts_with("(ignored unknown field `description`)\ncannot read `missing.rs`: "),
        "{}",
        out.content
    );
    // Arguments that cannot be read.
    let out = t.call("view", serde_json::json!({"description": "d"})).await;
    assert_eq!(
        out,
        ToolOutput::error(
            "(ignored unknown field `description`)\ninvalid arguments for `view`: field `path` is missing"
        )
    );
    // A refusal.
    let out = t.call("view", serde_json::json!({"path": "../x", "why": 1})).await;
    assert!(out.is_error && out.content.starts_with("(ignored unknown field `why`)\nrefused: "));
}

#[tokio::test]
async fn a_number_sent_as_a_string_is_read_as_the_number() {
    let t = tools();
    let out = t
        .call("view", serde_json::json!({"path": "src/lib.rs", "offset": "1", "limit": "1"}))
        .await;
    assert_eq!(out, ToolOutput::ok("     2\ttwo\n(lines 2-2 of 3; use offset 2 for more)\n"));
    let out = t.call("ls", serde_json::json!({"depth": "1"})).await;
    assert_eq!(out, ToolOutput::ok("./\n  src/\n"));
    let out = t.call("grep", serde_json::json!({"pattern": "o", "max_results": "1"})).await;
    assert_eq!(
        out,
        ToolOutput::ok(
            "src/lib.rs:1: one\n(1 more matches not shown; narrow the pattern, the path or the glob)\n"
        )
    );
    let out = t.call("bash", serde_json::json!({"command": "echo ok", "timeout_ms": "5000"})).await;
    assert_eq!(out, ToolOutput::ok("exit 0\nok\n"));
}

#[tokio::test]
async fn a_string_that_is_not_exactly_a_number_stays_an_error_naming_the_field() {
    let t = tools();
    for (limit, got) in [
        ("twenty", r#"the string "twenty""#),
        ("2.5", r#"the string "2.5""#),
        (" 20", r#"the string " 20""#),
        ("20 lines", r#"the string "20 lines""#),
    ] {
        let out = t.call("view", serde_json::json!({"path": "src/lib.rs", "limit": limit})).await;
        assert_eq!(
            out,
            ToolOutput::error(format!(
                "invalid arguments for `view`: field `limit` must be an integer, got {got}"
            ))
        );
    }
    let out = t.call("bash", serde_json::json!({"command": "true", "timeout_ms": "soon"})).await;
    assert_eq!(
        out,
        ToolOutput::error(
            r#"invalid arguments for `bash`: field `timeout_ms` must be an integer, got the string "soon""#
        )
    );
}

#[tokio::test]
async fn a_missing_required_field_or_a_wrong_type_is_an_error_naming_the_field() {
    let t = tools();
    for (tool, field) in [
        ("view", "path"),
        ("write", "path"),
        ("edit", "path"),
        ("multiedit", "path"),
        ("grep", "pattern"),
        ("glob", "pattern"),
        ("bash", "command"),
    ] {
        let out = t.call(tool, serde_json::json!({})).await;
        assert_eq!(
            out,
            ToolOutput::error(format!(
                "invalid arguments for `{tool}`: field `{field}` is missing"
            )),
        );
    }
    let out = t.call("write", serde_json::json!({"path": "a.txt"})).await;
    assert_eq!(out, ToolOutput::error("invalid arguments for `write`: field `content` is missing"));
    let out = t.call("view", serde_json::json!({"path": ["src/lib.rs"]})).await;
    assert_eq!(
        out,
        ToolOutput::error(
            "invalid arguments for `view`: field `path` must be a string, got an array"
        )
    );
    let out = t.call("view", serde_json::json!({"path": "src/lib.rs", "limit": 0})).await;
    assert_eq!(
        out,
        ToolOutput::error("invalid arguments for `view`: field `limit` must be at least 1, got 0")
    );
    let out = t
        .call("edit", serde_json::json!({"path": "src/lib.rs", "old_string": "a", "new_string": "b", "replace_all": "yes"}))
        .await;
    assert_eq!(
        out,
        ToolOutput::error(
            r#"invalid arguments for `edit`: field `replace_all` must be a boolean (true or false), got the string "yes""#
        )
    );
}

#[tokio::test]
async fn null_for_an_optional_field_is_the_field_left_out() {
    let t = tools();
    let out = t
        .call("view", serde_json::json!({"path": "src/lib.rs", "offset": null, "limit": null}))
        .await;
    assert_eq!(out, ToolOutput::ok("     1\tone\n     2\ttwo\n     3\tthree\n"));
}

#[test]
fn every_builtin_closes_its_schema_so_unknown_fields_are_ignored() {
    let t = tools();
    let defs = t.set.definitions();
    let names: Vec<&str> = defs.iter().map(|d| d.name.as_str()).collect();
    let mut expected = BUILTINS.to_vec();
    expected.push("agent");
    expected.sort_unstable();
    assert_eq!(names, expected);
    for def in defs.iter().filter(|d| d.name != "agent") {
        let schema = &def.input_schema;
        assert_eq!(schema["additionalProperties"], false, "{}", def.name);
        assert!(!def.description.is_empty(), "{}", def.name);
    }
}
