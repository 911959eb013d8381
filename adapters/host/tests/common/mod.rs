//! Helpers shared by the host's integration tests.

#![allow(dead_code)] // each test crate uses a different subset

use std::sync::Arc;
use std::time::Duration;

use turnstile_core::{FinishReason, Outcome, RunId, SessionId, StepEvent, ToolOutput, ToolSpec};
use turnstile_host::store::{Faults, RunState, StoredRole};
use turnstile_host::{
    Answer, BoxFuture, Host, HostConfig, Scripted, ScriptedProvider, Tool, ToolCall, ToolSet,
};

/// Which store a test runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Sqlite,
    Postgres,
}

/// Where a test's store lives: a scratch directory (SQLite's file, and the files a test
/// writes) and, for PostgreSQL, a scratch database on the server of `TURNSTILE_TEST_POSTGRES`.
pub struct Scratch {
    dir: tempfile::TempDir,
    database: Option<turnstile_host::store::ScratchDatabase>,
}

impl Scratch {
    pub fn new(kind: Kind) -> Scratch {
        let database = match kind {
            Kind::Sqlite => None,
            Kind::Postgres => Some(
                turnstile_host::store::ScratchDatabase::create().unwrap_or_else(|e| panic!("{e}")),
            ),
        };
        Scratch { dir: tempfile::tempdir().expect("a scratch directory"), database }
    }

    pub fn path(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// The database's URL, for a PostgreSQL store.
    pub fn url(&self) -> Option<&str> {
        self.database.as_ref().map(turnstile_host::store::ScratchDatabase::url)
    }

    /// The store's configuration.
    pub fn store(&self) -> turnstile_host::store::StoreConfig {
        match &self.database {
            Some(db) => turnstile_host::store::StoreConfig::at(
                turnstile_host::store::Location::Postgres(db.url().to_owned()),
            ),
            None => turnstile_host::store::StoreConfig::new(self.path().join("store.db")),
        }
    }
}

/// Each test once per store: `sqlite::<name>` runs in every `cargo test`; `postgres::<name>`
/// needs a server (`TURNSTILE_TEST_POSTGRES`) and runs with `-- --ignored postgres`.
#[macro_export]
macro_rules! both_stores {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() { super::$name(super::common::Kind::Sqlite).await }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                #[ignore = "needs PostgreSQL: eval \"$(scripts/postgres.sh env)\", then --ignored"]
                async fn $name() { super::$name(super::common::Kind::Postgres).await }
            )*
        }
    };
}

/// Injects store faults into `config`; the handle programs them.
pub fn faulty(config: &mut HostConfig) -> Faults {
    let faults = Faults::default();
    config.store.faults = Some(faults.clone());
    faults
}

/// Waits until the run's ledger row says it is the active turn (its activation is durable).
pub async fn until_active(host: &Host, run: &str) {
    let run = RunId::new(run);
    loop {
        let r = run.clone();
        let state = host.read(move |rd| Ok(rd.run(&r)?.map(|x| x.state))).await.expect("read");
        if state == Some(RunState::Active) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// A provider that streams "all " and "of it", then finishes a little later.
pub fn two_deltas_then_finish() -> ScriptedProvider {
    ScriptedProvider::new(|_, _| {
        Answer(vec![
            Scripted::Event(StepEvent::TextDelta { text: "all ".into() }),
            Scripted::Event(StepEvent::TextDelta { text: "of it".into() }),
            Scripted::Wait(5),
            Scripted::Event(StepEvent::Finished { reason: FinishReason::Stop, usage: None }),
        ])
    })
}

/// The text of the session's assistant messages as the store holds it now.
pub async fn assistant_text(host: &Host, session: &str) -> String {
    let session = SessionId::new(session);
    host.read(move |r| r.messages(&session))
        .await
        .expect("read")
        .iter()
        .filter(|m| m.role == StoredRole::Assistant)
        .map(|m| m.text.clone())
        .collect()
}

/// A tool with effects a cancel must not cut off: it is left to finish (`OnAbort::Finish`) and
/// answers "really ran" after 100 ms.
pub struct Careful;

impl Tool for Careful {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new("careful").left_to_finish()
    }
    fn run(&self, _: ToolCall) -> BoxFuture<ToolOutput> {
        Box::pin(async {
            tokio::time::sleep(Duration::from_millis(100)).await;
            ToolOutput::ok("really ran")
        })
    }
}

/// Runs a turn whose model calls [`Careful`], cancels it while the call runs, and returns the
/// call's stored results as (content, synthetic), after checking the run ended cancelled.
pub async fn cancel_during_a_tool_left_to_finish(config: HostConfig) -> Vec<(String, bool)> {
    let provider = ScriptedProvider::new(|_, _| Answer::tool_call("c1", "careful", "{}"));
    let host =
        Host::open(config, Arc::new(provider), ToolSet::new().with(Careful)).await.expect("open");
    host.submit(turnstile_core::Submit::new("s", "go").with_run_id("r")).await.expect("ok");
    until_active(&host, "r").await;
    tokio::time::sleep(Duration::from_millis(30)).await;
    host.cancel(&SessionId::new("s")).await.expect("cancel");
    let done = host.wait(&RunId::new("r")).await.expect("done");
    assert_eq!(done.outcome, Outcome::Cancelled);
    let msgs = host.read(|r| r.messages(&SessionId::new("s"))).await.expect("read");
    let results = msgs
        .iter()
        .flat_map(|m| m.results.iter())
        .map(|r| (r.content.clone(), r.synthetic))
        .collect();
    legal(&host, "s").await;
    host.shutdown().await.expect("shutdown");
    results
}

/// A host's configuration for a store file in `dir`, with two workers (so that sessions are
/// spread over tasks, as on a real machine).
pub fn config_in(dir: &std::path::Path) -> HostConfig {
    let mut c = HostConfig::new(dir.join("store.db"));
    c.workers = 2;
    c
}

/// Opens a host over `config` with `provider` and `tools`.
pub async fn open_with(config: &HostConfig, provider: ScriptedProvider, tools: ToolSet) -> Host {
    Host::open(config.clone(), Arc::new(provider), tools).await.expect("open")
}

/// The history of `session` is protocol-legal (SPEC 4.9: every call has its result, in order).
pub async fn legal(host: &Host, session: &str) {
    let s = SessionId::new(session);
    let problems = host.read(move |r| r.protocol_problems(&s)).await.expect("read");
    assert!(problems.is_empty(), "history of {session} is not protocol-legal: {problems:?}");
}
