//! Helpers shared by the host's integration tests.

#![allow(dead_code)] // each test crate uses a different subset

use std::sync::Arc;
use std::time::Duration;

use turnstile_core::{FinishReason, Outcome, RunId, SessionId, StepEvent, ToolOutput, ToolSpec};
use turnstile_host::store::{Faults, RunState, StoredRole};
use turnstile_host::{
    Answer, BoxFuture, Host, HostConfig, Scripted, ScriptedProvider, Tool, ToolCall, ToolSet,
};

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
    let s = SessionId::new("s");
    let problems = host.read(move |r| r.protocol_problems(&s)).await.expect("read");
    assert!(problems.is_empty(), "history is not protocol-legal: {problems:?}");
    host.shutdown().await.expect("shutdown");
    results
}
