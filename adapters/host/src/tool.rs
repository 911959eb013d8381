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

use turnstile_core::{AGENT_TOOL, CallId, SessionId, ToolOutput, ToolSpec};
use turnstile_wire::ToolDef;

/// A boxed, sendable future: what the host's traits return, so they stay object-safe.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// One call a tool is asked to run.
#[derive(Clone, Debug)]
pub struct ToolCall {
    /// The calling session.
    pub session: SessionId,
    /// The provider's call id.
    pub call: CallId,
    /// The arguments: valid JSON text (the core never runs a call with invalid JSON).
    pub input: String,
    /// Where [`ToolCall::begin_work`] asks whether the work may begin.
    work: WorkGate,
}

/// Two calls are equal when they name the same call with the same arguments (the door their
/// work goes through is the host's, not part of the call).
impl PartialEq for ToolCall {
    fn eq(&self, other: &ToolCall) -> bool {
        (&self.session, &self.call, &self.input) == (&other.session, &other.call, &other.input)
    }
}

impl Eq for ToolCall {}

impl ToolCall {
    /// A call whose work may always begin ([`ToolCall::begin_work`] says yes at once): what a
    /// test or a host that never aborts hands a tool.
    #[must_use]
    pub fn new(session: SessionId, call: CallId, input: impl Into<String>) -> ToolCall {
        ToolCall { session, call, input: input.into(), work: WorkGate::default() }
    }

    /// The same call, with its work's start decided by `gate` (the host's engine).
    #[must_use]
    pub(crate) fn with_work_gate(mut self, gate: WorkGate) -> ToolCall {
        self.work = gate;
        self
    }

    /// Asks whether this call's work may begin now, and if so records that it began: a tool
    /// left to finish once started ([`OnAbort::FinishOnceStarted`](turnstile_core::OnAbort))
    /// calls it after what may wait (a person's answer, a hook) and before its first effect.
    ///
    /// True: the core recorded the start ([`turnstile_core::Input::ToolStarted`]), so an abort
    /// from now on leaves the call to finish, and its result is written. False: an abort came
    /// first; the work must never begin, and whatever the call returns is ignored. A call made
    /// with [`ToolCall::new`] gets true at once.
    pub async fn begin_work(&self) -> bool {
        match &self.work.0 {
            None => true,
            Some(ask) => ask().await,
        }
    }
}

/// The door a call's work goes through: the host's engine decides, in order with aborts,
/// whether the work of a call may still begin (see [`ToolCall::begin_work`]).
#[derive(Clone, Default)]
pub(crate) struct WorkGate(Option<Arc<dyn Fn() -> BoxFuture<bool> + Send + Sync>>);

impl WorkGate {
    /// A gate that asks `ask` each time.
    pub(crate) fn new(ask: impl Fn() -> BoxFuture<bool> + Send + Sync + 'static) -> WorkGate {
        WorkGate(Some(Arc::new(ask)))
    }
}

impl std::fmt::Debug for WorkGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() { "WorkGate(engine)" } else { "WorkGate(open)" })
    }
}

/// A tool.
///
/// `run` may take as long as it needs. What a cancel (or shutdown) does to a running call is
/// the spec's [`OnAbort`](turnstile_core::OnAbort), which the core is told with the turn's
/// setup:
/// - [`OnAbort::Drop`](turnstile_core::OnAbort::Drop) (the default, [`ToolSpec::new`]): the
///   host drops the future at once and the turn's clean-up does not wait for it, so a tool that
///   holds external resources should release them on drop;
/// - [`OnAbort::Finish`](turnstile_core::OnAbort::Finish) ([`ToolSpec::left_to_finish`]): a
///   call with effects that must not be cut off half-way runs to its end; its result is written
///   if it arrives before the turn's clean-up (the tool really ran, SPEC 4.9), which waits for
///   it up to the cancel grace, and is ignored after it (I13);
/// - [`OnAbort::FinishOnceStarted`](turnstile_core::OnAbort::FinishOnceStarted)
///   ([`ToolSpec::left_to_finish_once_started`]): the call may wait first (a permission ask)
///   and is dropped like the default while it waits; it calls [`ToolCall::begin_work`] before
///   its first effect and from then on is left to finish. A permission gate turns a tool left
///   to finish into one of these, so a cancel withdraws its ask at once.
pub trait Tool: Send + Sync + 'static {
    /// The name the model calls it by, whether it asks a person, and what an abort does to it.
    fn spec(&self) -> ToolSpec;
    /// What the model is told about it: its description and the JSON schema of its input,
    /// which providers send with every request. The default has no description and takes
    /// any object; a real tool should say what it does.
    fn definition(&self) -> ToolDef {
        ToolDef::new(self.spec().name, "")
    }
    /// Runs one call.
    fn run(&self, call: ToolCall) -> BoxFuture<ToolOutput>;
}

/// The tools a host offers, by name. Names are unique: adding a second tool with a name
/// replaces the first.
///
/// The `agent` tool (sub-agents, SPEC 4.11) is not a [`Tool`]: the core runs it by starting a
/// turn in a child session, so the set only says whether it is offered ([`ToolSet::with_agent`]).
#[derive(Clone, Default)]
pub struct ToolSet {
    tools: BTreeMap<String, Arc<dyn Tool>>,
    agent: bool,
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
        let name = tool.spec().name;
        if name == AGENT_TOOL {
            self.agent = false;
        }
        self.tools.insert(name, Arc::new(tool));
        self
    }

    /// Whether the `agent` tool is offered.
    pub(crate) fn offers_agent(&self) -> bool {
        self.agent
    }

    /// The set without the `agent` tool (a member of several hosts does not offer it: a
    /// sub-agent takes its sequence from the core, SPEC 4.10).
    #[must_use]
    pub fn without_agent(mut self) -> ToolSet {
        self.agent = false;
        self
    }

    /// The set with the `agent` tool offered: a call starts a sub-agent in a child session,
    /// whose turn the host drives like any other; its end is the call's result (SPEC 4.11).
    /// Replaces a [`Tool`] named `agent`.
    #[must_use]
    pub fn with_agent(mut self) -> ToolSet {
        self.tools.remove(AGENT_TOOL);
        self.agent = true;
        self
    }

    /// The specs the core's `Setup` lists for a top-level session, in name order.
    #[must_use]
    pub fn specs(&self) -> Vec<ToolSpec> {
        let agent = self.agent.then(|| ToolSpec::new(AGENT_TOOL));
        let mut specs: Vec<ToolSpec> = self.tools.values().map(|t| t.spec()).chain(agent).collect();
        specs.sort_by(|a, b| a.name.cmp(&b.name));
        specs
    }

    /// The tools a model request of `session` offers: for a sub-agent's child session, what
    /// the core gives it ([`turnstile_core::offered_to_sub_agent`]: no `agent` tool, nothing
    /// interactive, SPEC 4.11); for any other session, [`ToolSet::specs`].
    #[must_use]
    pub fn specs_for(&self, session: &SessionId) -> Vec<ToolSpec> {
        let mut specs = self.specs();
        if session.is_child() {
            specs.retain(turnstile_core::offered_to_sub_agent);
        }
        specs
    }

    /// What a model request offers for a top-level session: every tool's [`Tool::definition`]
    /// and the `agent` tool's, in name order.
    #[must_use]
    pub fn definitions(&self) -> Vec<ToolDef> {
        let agent = self.agent.then(agent_definition);
        let mut defs: Vec<ToolDef> =
            self.tools.values().map(|t| t.definition()).chain(agent).collect();
        defs.sort_by(|a, b| a.name.cmp(&b.name));
        defs
    }

    /// The definitions a model request of `session` offers: those of
    /// [`ToolSet::specs_for`], in name order.
    #[must_use]
    pub fn definitions_for(&self, session: &SessionId) -> Vec<ToolDef> {
        let offered: Vec<String> = self.specs_for(session).into_iter().map(|s| s.name).collect();
        self.definitions().into_iter().filter(|d| offered.contains(&d.name)).collect()
    }

    /// The set with every [`Tool`] replaced by `wrap(tool)`: how a permission gate or hooks
    /// go around each tool. The `agent` tool, which the core runs, is kept as it is.
    ///
    /// # Panics
    /// A wrapper that changes a tool's name (the model calls a tool by the name it was
    /// offered under, so a wrapper must keep it).
    #[must_use]
    pub fn wrapped(self, wrap: impl Fn(Arc<dyn Tool>) -> Arc<dyn Tool>) -> ToolSet {
        let tools = self
            .tools
            .into_iter()
            .map(|(name, tool)| {
                let wrapped = wrap(tool);
                assert_eq!(wrapped.spec().name, name, "a wrapper must keep the tool's name");
                (name, wrapped)
            })
            .collect();
        ToolSet { tools, agent: self.agent }
    }

    /// The tool with this name (never the `agent` tool, which the core runs).
    #[must_use]
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.get(name)
    }
}

impl std::fmt::Debug for ToolSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let agent = self.agent.then_some(AGENT_TOOL);
        f.debug_list().entries(self.tools.keys().map(String::as_str).chain(agent)).finish()
    }
}

/// The `agent` tool as the model sees it (SPEC 4.11): one required `prompt`.
#[must_use]
pub fn agent_definition() -> ToolDef {
    ToolDef::new(
        AGENT_TOOL,
        "Launch a sub-agent with its own context to work on a self-contained task; its final \
         answer is this call's result. Give it a complete, specific prompt.",
    )
    .with_schema(serde_json::json!({
        "type": "object",
        "properties": {"prompt": {"type": "string", "description": "The task for the sub-agent."}},
        "required": ["prompt"],
    }))
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
        ToolSpec::new(self.name.clone())
    }

    fn run(&self, call: ToolCall) -> BoxFuture<ToolOutput> {
        let delay = std::time::Duration::from_millis(self.delay_ms);
        Box::pin(async move {
            tokio::time::sleep(delay).await;
            ToolOutput::ok(format!("echo {}", call.input))
        })
    }
}
