//! The errors a new user meets (no configuration, no key, an unknown model, a bad rule), the
//! help, and `turnstile sessions` / `turnstile history` over a real store.

mod common;

use common::Project;
use serde_json::json;
use turnstile_testkit::anthropic::{text_stream, tool_stream};
use turnstile_testkit::provider::{FakeProvider, Reply};

#[tokio::test(flavor = "multi_thread")]
async fn without_a_configuration_or_a_key_it_says_what_to_set_and_where() {
    let project = Project::with_config("");
    std::fs::remove_file(&project.config).unwrap();
    let mut c = project.command(&["run", "hi"]);
    c.env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY");
    let done = common::finish(c.spawn().unwrap()).await;
    assert_eq!(done.code, Some(1), "{done:?}");
    let home = project.path().join(".config/turnstile/config.toml");
    let local = project.path().join("turnstile.toml");
    assert_eq!(
        done.stderr.trim_end(),
        format!(
            "error: no model to talk to: set OPENAI_API_KEY or ANTHROPIC_API_KEY, or configure a \
             provider and `model` in `{}` or `{}`",
            std::fs::canonicalize(project.path())
                .unwrap()
                .join("turnstile.toml")
                .display(),
            home.display()
        ),
        "{local:?}"
    );

    // A provider whose key variable is not set.
    let project = Project::with_config(
        "model = \"p/m\"\n[providers.p]\napi = \"openai-chat\"\nbase_url = \"http://127.0.0.1:9/v1\"\n\
         api_key_env = \"TURNSTILE_TEST_UNSET_KEY\"\n",
    );
    let mut c = project.command(&["run", "hi"]);
    c.env_remove("TURNSTILE_TEST_UNSET_KEY");
    let done = common::finish(c.spawn().unwrap()).await;
    assert_eq!(done.code, Some(1), "{done:?}");
    assert!(
        done.stderr
            .contains("set TURNSTILE_TEST_UNSET_KEY to use `p/m`, or configure a provider in `"),
        "{}",
        done.stderr
    );
    assert!(done.stderr.contains("turnstile.toml`"), "{}", done.stderr);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unknown_model_and_a_bad_configuration_are_named() {
    let provider = FakeProvider::anthropic(vec![]).await;
    let project = Project::new(&provider.base_url, "");
    let done = project.run(&["run", "--model", "nope/x", "hi"]).await;
    assert_eq!(done.code, Some(1), "{done:?}");
    assert!(
        done.stderr
            .contains("model `nope/x` is not configured (known: "),
        "{}",
        done.stderr
    );

    let project = Project::new(&provider.base_url, "[permissions]\ndeny = [\"bash(rm\"]\n");
    let done = project.run(&["run", "hi"]).await;
    assert_eq!(done.code, Some(1), "{done:?}");
    assert!(
        done.stderr.contains("permissions.deny: rule `bash(rm`"),
        "{}",
        done.stderr
    );
    assert!(
        done.stderr.contains("turnstile.toml"),
        "names the file: {}",
        done.stderr
    );

    let project = Project::new(&provider.base_url, "colour = \"blue\"\n");
    let done = project.run(&["run", "hi"]).await;
    assert_eq!(done.code, Some(1), "{done:?}");
    assert!(
        done.stderr.contains("unknown field `colour`"),
        "{}",
        done.stderr
    );
    assert!(
        done.stderr.contains("line 2"),
        "names the line: {}",
        done.stderr
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn help_explains_each_command_with_examples() {
    let project = Project::with_config("");
    for (args, needle) in [
        (&["--help"][..], "Examples:"),
        (&["run", "--help"][..], "Exit status:"),
        (&["run", "--help"][..], "turnstile run --continue"),
        (&["sessions", "--help"][..], "Example:"),
        (&["history", "--help"][..], "Example:"),
        (&["serve", "--help"][..], "Examples:"),
        (&["serve", "--help"][..], "turnstile run --server"),
        (&["run", "--help"][..], "--server"),
        (&["run", "--help"][..], "turnstile run --record bug-42"),
        (&["serve", "--help"][..], "turnstile serve --record"),
    ] {
        let done = project.run(args).await;
        assert_eq!(done.code, Some(0), "{args:?}: {done:?}");
        assert!(
            done.stdout.contains(needle),
            "{args:?} shows {needle:?}: {}",
            done.stdout
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn sessions_and_history_read_the_store_back() {
    let provider = FakeProvider::anthropic(vec![
        Reply::sse(tool_stream("toolu_1", "ls", &json!({}))),
        Reply::sse(text_stream("Nothing much here.")),
    ])
    .await;
    let project = Project::new(&provider.base_url, "");
    let done = project.sessions_empty().await;
    assert_eq!(done.code, Some(0));
    assert!(done.stderr.contains("no store at"), "{done:?}");

    assert_eq!(project.run(&["run", "What is here?"]).await.code, Some(0));
    let done = project.run(&["sessions"]).await;
    assert_eq!(done.code, Some(0), "{done:?}");
    let table: Vec<&str> = done.stdout.lines().collect();
    assert_eq!(table.len(), 2, "{}", done.stdout);
    for column in ["ID", "TITLE", "MESSAGES", "COST", "LAST ACTIVITY"] {
        assert!(table[0].contains(column), "{}", table[0]);
    }
    assert!(
        table[1].contains("A test title") && table[1].contains("just now"),
        "{}",
        table[1]
    );

    let done = project.run(&["sessions", "--json"]).await;
    let list: serde_json::Value = serde_json::from_str(&done.stdout).unwrap();
    let id = list[0]["id"].as_str().unwrap().to_owned();
    assert_eq!(list[0]["messages"], 3, "{list}");
    assert_eq!(list[0]["submissions"], 1);

    let done = project.run(&["history", &id]).await;
    assert_eq!(done.code, Some(0), "{done:?}");
    for needle in [
        "── user · seq 1",
        "What is here?",
        "── assistant",
        "→ ls {}",
        "Nothing much here.",
    ] {
        assert!(
            done.stdout.contains(needle),
            "{needle:?} in {}",
            done.stdout
        );
    }
    let done = project.run(&["history", &id, "--json"]).await;
    let h: serde_json::Value = serde_json::from_str(&done.stdout).unwrap();
    assert_eq!(h["messages"][1]["calls"][0]["name"], "ls");
    assert_eq!(h["messages"][1]["results"][0]["call"], "toolu_1");

    let done = project.run(&["history", "no-such-session"]).await;
    assert_eq!(done.code, Some(64), "{done:?}");
    assert!(
        done.stderr.contains("no session `no-such-session`"),
        "{}",
        done.stderr
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn logs_go_to_a_file_or_to_stderr_and_never_hold_the_prompt() {
    let provider = FakeProvider::anthropic(vec![
        Reply::sse(text_stream("ok")),
        Reply::sse(text_stream("ok")),
    ])
    .await;
    let project = Project::new(&provider.base_url, "");
    let prompt = "PROMPT-SECRET-42 do something";
    let done = project
        .run(&["run", "--log-file", "run.log", "--run-id", "logged", prompt])
        .await;
    assert_eq!(
        (done.code, done.stdout.as_str(), done.stderr.as_str()),
        (Some(0), "ok\n", "")
    );
    let log = std::fs::read_to_string(project.path().join("run.log")).unwrap();
    for needle in [
        "submission accepted",
        "run_id=\"logged\"",
        "turn activated",
        "submission finished",
    ] {
        assert!(log.contains(needle), "{needle:?} in {log}");
    }
    assert!(!log.contains("PROMPT-SECRET-42"), "{log}");

    let done = project.run(&["run", "-v", prompt]).await;
    assert_eq!(done.code, Some(0), "{done:?}");
    assert!(
        done.stderr.contains("submission accepted"),
        "{}",
        done.stderr
    );
    assert!(!done.stderr.contains("PROMPT-SECRET-42"), "{}", done.stderr);
    assert_eq!(done.stdout, "ok\n", "logs never go to stdout");
}

#[tokio::test(flavor = "multi_thread")]
async fn serve_and_run_server_say_what_is_wrong_with_their_input() {
    let project = Project::with_config("model = \"openai/gpt-5\"\n");
    let mut c = project.command(&["serve", "--listen", "not-an-address"]);
    c.env("OPENAI_API_KEY", "sk-test");
    let done = common::finish(c.spawn().unwrap()).await;
    assert_eq!(done.code, Some(64), "{done:?}");
    assert!(
        done.stderr
            .contains("`not-an-address` is not an address like 127.0.0.1:8700"),
        "{}",
        done.stderr
    );
    let done = project.run(&["run", "--server", "ftp://x", "hi"]).await;
    assert_eq!(done.code, Some(1), "no token yet: {done:?}");
    assert!(
        done.stderr
            .contains("no token for the server: set TURNSTILE_SERVER_TOKEN"),
        "{}",
        done.stderr
    );
    let mut c = project.command(&["run", "--server", "ftp://x", "hi"]);
    c.env("TURNSTILE_SERVER_TOKEN", "t");
    let done = common::finish(c.spawn().unwrap()).await;
    assert_eq!(done.code, Some(64), "{done:?}");
    assert!(
        done.stderr.contains("is not an http:// or https:// URL"),
        "{}",
        done.stderr
    );
    // Nothing listens on port 9 of 127.0.0.1.
    let mut c = project.command(&["run", "--server", "http://127.0.0.1:9", "hi"]);
    c.env("TURNSTILE_SERVER_TOKEN", "t");
    let done = common::finish(c.spawn().unwrap()).await;
    assert_eq!(done.code, Some(1), "{done:?}");
    assert!(
        done.stderr
            .contains("cannot reach the server at http://127.0.0.1:9"),
        "{}",
        done.stderr
    );
}
