//! Helpers shared by the host's integration tests.

#![allow(dead_code)] // each test crate uses a different subset

use std::time::Duration;

use turnstile_adapters::store::{Faults, RunState, StoredRole};
use turnstile_adapters::{Answer, Host, HostConfig, Scripted, ScriptedProvider};
use turnstile_core::{FinishReason, RunId, SessionId, StepEvent};

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
