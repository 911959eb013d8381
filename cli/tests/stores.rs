//! The CLI over a PostgreSQL store (SPEC 11): `run`, `sessions` and `history` with
//! `--store postgres://...` (here `TURNSTILE_STORE`) as with the default file, and a second
//! owner of the database refused with its name. These need a server
//! (`TURNSTILE_TEST_POSTGRES`): `cargo test -- --ignored postgres` runs them.

mod common;

use common::Project;
use nix::sys::signal::Signal;
use serde_json::{Value, json};
use turnstile_testkit::anthropic::{text_stream, tool_stream};
use turnstile_testkit::provider::{FakeProvider, Reply};

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs PostgreSQL: eval \"$(scripts/postgres.sh env)\", then --ignored"]
async fn postgres_run_sessions_and_history_use_the_database() {
    let provider = FakeProvider::anthropic(vec![
        Reply::sse(tool_stream(
            "toolu_1",
            "view",
            &json!({"path": "hello.txt"}),
        )),
        Reply::sse(text_stream("It says hello.")),
    ])
    .await;
    let project = Project::new(&provider.base_url, "").on_postgres();
    std::fs::write(project.path().join("hello.txt"), "hello\n").unwrap();

    let done = project.run(&["run", "What does hello.txt say?"]).await;
    assert_eq!(done.code, Some(0), "{done:?}");
    assert_eq!(done.stdout, "It says hello.\n");
    assert!(
        !project.store().exists(),
        "the store is the database, not a file"
    );

    let listed = project.run(&["sessions", "--json"]).await;
    assert_eq!(listed.code, Some(0), "{listed:?}");
    let sessions: Value = serde_json::from_str(&listed.stdout).unwrap();
    let id = sessions[0]["id"].as_str().unwrap().to_owned();
    assert_eq!(sessions.as_array().unwrap().len(), 1, "{sessions}");
    let history = project.run(&["history", &id[..8], "--json"]).await;
    assert_eq!(history.code, Some(0), "{history:?}");
    assert!(
        history.stdout.contains("What does hello.txt say?"),
        "{}",
        history.stdout
    );
    assert!(
        history.stdout.contains("It says hello."),
        "{}",
        history.stdout
    );

    // The reader blocks: off the runtime's threads, as the host reads.
    tokio::task::block_in_place(|| {
        let reader = project.reader();
        assert_eq!(
            reader
                .protocol_problems(&turnstile_core::SessionId::new(&id))
                .unwrap(),
            Vec::<String>::new()
        );
        assert_eq!(reader.integrity_check(), Ok(()));
        assert_eq!(reader.runs().unwrap().len(), 1);
    });
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs PostgreSQL: eval \"$(scripts/postgres.sh env)\", then --ignored"]
async fn postgres_a_second_owner_of_the_database_is_refused_and_named() {
    let provider = FakeProvider::anthropic(vec![Reply::Hang]).await;
    let project = Project::new(&provider.base_url, "").on_postgres();
    let first = project.spawn(&["run", "Hang"]);
    // The first run started: its step reached the provider.
    provider.wait_steps(1).await;
    let done = project.run(&["run", "Another"]).await;
    assert_eq!(done.code, Some(1), "{done:?}");
    assert!(
        done.stderr
            .contains("store is in use by another turnstile process"),
        "{}",
        done.stderr
    );
    let url = project.database.as_ref().unwrap().url();
    assert!(
        done.stderr.contains(url),
        "names the database: {}",
        done.stderr
    );
    assert!(
        done.stderr.contains("owns this database"),
        "{}",
        done.stderr
    );
    // The refused process ran no recovery over the live run.
    let runs = tokio::task::block_in_place(|| project.reader().runs().unwrap());
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].state, turnstile_host::store::RunState::Active);
    common::signal(first.id(), Signal::SIGINT);
    assert_eq!(common::finish(first).await.code, Some(130));
    let runs = tokio::task::block_in_place(|| project.reader().runs().unwrap());
    assert_eq!(runs[0].state, turnstile_host::store::RunState::Finished);
}
