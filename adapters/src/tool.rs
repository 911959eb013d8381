//! Tools the model may call (SPEC 9 "Tools"): the trait a host implements and the set a turn
//! is prepared with.
//!
//! The core decides which calls run (complete, valid JSON, a known name, not a repeat) and when
//! (after the stream ended); a [`Tool`] only runs one call it is handed and reports its result.
//! An aborted call's future is dropped.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use turnstile_core::{CallId, SessionId, ToolOutput, ToolSpec};

/// A boxed, sendable future: what the host's traits return, so they stay object-safe.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// One call a tool is asked to run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolCall {
    /// The calling session.
    pub session: SessionId,
    /// The provider's call id.
    pub call: CallId,
    /// The arguments: valid JSON text (the core never runs a call with invalid JSON).
    pub input: String,
}

/// A tool.
///
/// `run` may take as long as it needs; the host drops the future when the turn is cancelled
/// (after which a result is ignored), so a tool that holds external resources should release
/// them on drop.
pub trait Tool: Send + Sync + 'static {
    /// The name the model calls it by, and whether it asks a person.
    fn spec(&self) -> ToolSpec;
    /// Runs one call.
    fn run(&self, call: ToolCall) -> BoxFuture<ToolOutput>;

    /// Whether a cancel may drop a running call (the default). A tool with effects that must
    /// not be cut off half-way answers false: the host then lets the call finish and reports
    /// its result, which the core writes if it arrives before the turn's clean-up (the tool
    /// really ran, SPEC 4.9) and ignores after it (I13).
    fn abortable(&self) -> bool {
        true
    }
}

/// The tools a host offers, by name. Names are unique: adding a second tool with a name
/// replaces the first.
#[derive(Clone, Default)]
pub struct ToolSet {
    tools: BTreeMap<String, Arc<dyn Tool>>,
}

impl ToolSet {
    /// An empty set.
    #[must_use]
    pub fn new() -> ToolSet {
        ToolSet::default()
    }

    /// The set with `tool` added (replacing one with the same name).
    #[must_use]
    pub fn with(mut self, tool: impl Tool) -> ToolSet {
        self.tools.insert(tool.spec().name, Arc::new(tool));
        self
    }

    /// The specs the core's `Setup` lists, in name order.
    #[must_use]
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools.values().map(|t| t.spec()).collect()
    }

    /// The tool with this name.
    #[must_use]
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.get(name)
    }
}

impl std::fmt::Debug for ToolSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.tools.keys()).finish()
    }
}

/// A tool that answers every call with a fixed text after a delay (tests, demos, benchmarks).
#[derive(Clone, Debug)]
pub struct EchoTool {
    /// The tool's name.
    pub name: String,
    /// How long each call takes, in milliseconds of runtime time.
    pub delay_ms: u64,
}

impl Tool for EchoTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec { name: self.name.clone(), interactive: false }
    }

    fn run(&self, call: ToolCall) -> BoxFuture<ToolOutput> {
        let delay = std::time::Duration::from_millis(self.delay_ms);
        Box::pin(async move {
            tokio::time::sleep(delay).await;
            ToolOutput::ok(format!("echo {}", call.input))
        })
    }
}
