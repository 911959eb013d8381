//! The tokio host end to end: submissions through the engine, the workers, the store writer
//! and SQLite, with the scripted provider.

#[path = "../common/mod.rs"]
mod common;

mod open_errors;
mod postgres;
mod provider;
mod runs;
mod shutdown;
mod store_failures;
mod text;
mod tools_agents_summary;
mod updates;

use std::sync::Arc;
use std::time::Duration;

use turnstile_core::{
    ErrorKind, FinishReason, HostError, Outcome, Rejection, RunId, Seq, SessionId, StepEvent,
    Submit, Usage,
};
use turnstile_host::store::{Fault, Reader, RunState, Store, StoreConfig};
use turnstile_host::{
    Answer, Cursor, EchoTool, Event, Flight, Host, HostConfig, InvalidRequest, OpenError, Scripted,
    ScriptedProvider, Stopped, StoreError, SubmitError, ToolSet, Update, WaitError,
};

fn usage() -> Usage {
    Usage { input_tokens: 10, output_tokens: 5, cost_micros: 7, ..Usage::default() }
}

/// Answers every request by streaming "echo: <last user text>" in 4 deltas, 5 ms apart.
fn echo() -> ScriptedProvider {
    ScriptedProvider::new(|req, _| {
        let text = format!("echo: {}", req.last_user_text().unwrap_or(""));
        Answer::streamed(&text, 4, 5, usage())
    })
}

fn hang() -> ScriptedProvider {
    ScriptedProvider::new(|_, _| Answer::hang())
}

fn config(dir: &common::Scratch) -> HostConfig {
    let mut c = HostConfig::with_store(dir.store());
    c.workers = 2;
    c
}

async fn open(c: &HostConfig, p: ScriptedProvider) -> Host {
    let tools = ToolSet::new().with(EchoTool { name: "view".into(), delay_ms: 5 });
    common::open_with(c, p, tools).await
}

use common::legal;
