//! The gate every call passes before its tool runs: pre-tool hooks, then the permission rules,
//! then, for an ask, a person (SPEC 4.6, 8, 9 "Tools").
//!
//! For one call, in this order:
//! 1. the hooks ([`crate::hook`]), unless the session is a sub-agent's (SPEC 4.11): a block
//!    is the call's error result and the turn goes on; a halt ends the turn (stop reason
//!    `hook_halt`); `{"decision":"allow"}` pre-approves step 3;
//! 2. the rules ([`Permissions`]): a deny refuses the call, an allow runs it;
//! 3. an ask runs the call when a hook pre-approved it, when the gate is `yolo`, or when this
//!    session already answered "yes for this session" for this tool; otherwise the [`Asker`]
//!    answers. `turnstile run` asks nobody ([`DenyAsks`]): there an ask is a denial.
//!
//! Hooks and rules see the call's arguments as its tool reads them ([`crate::args::canonical`],
//! from the tool's own schema): a call that sends `file_path` for `path`, or adds a field the
//! tool ignores, is judged by what the tool will do with it, not by how it was spelled. (An MCP
//! tool gets its arguments as sent; what its schema closes out is not seen here, and is its
//! server's to refuse.)
//!
//! A refused call's result asks the core to stop the turn: it ends `completed` with stop
//! reason `permission_denied` (SPEC 4.6 case 1). `yolo` answers every ask with yes; a `deny`
//! rule someone wrote still holds, because it is a decision, not a question.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use turnstile_core::{OnAbort, SessionId, StopTurn, ToolOutput, ToolSpec};
use turnstile_host::{BoxFuture, Tool, ToolCall, ToolSet};
use turnstile_wire::ToolDef;

use crate::args;
use crate::hook::{After, Hook, HookInput, Verdict, post_tool, run_hooks};
use crate::permission::{Because, Level, Permissions, subject};

/// A question for a person: may this call run?
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ask {
    /// The calling session.
    pub session: SessionId,
    /// The tool.
    pub tool: String,
    /// The call (its id and arguments).
    pub call: ToolCall,
    /// What the call acts on ([`crate::permission::subject`] of its arguments as the tool reads
    /// them), if it says.
    pub subject: Option<String>,
}

/// A person's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Yes, this call.
    Once,
    /// Yes, and every later call of this tool in this session.
    ForSession,
    /// No; the text says why (the model and the user read it).
    Deny(String),
}

/// Who answers asks: a terminal prompt, a server's client, or nobody.
pub trait Asker: Send + Sync + 'static {
    /// Answers one ask. The future is dropped when the call is aborted (a cancel withdraws
    /// the question).
    fn ask(&self, ask: Ask) -> BoxFuture<Answer>;
}

/// Nobody to ask: every ask is a denial (`turnstile run`, SPEC 9).
#[derive(Clone, Copy, Debug, Default)]
pub struct DenyAsks;

impl Asker for DenyAsks {
    fn ask(&self, ask: Ask) -> BoxFuture<Answer> {
        let tool = ask.tool;
        Box::pin(async move {
            Answer::Deny(format!(
                "`{tool}` needs approval and nobody can be asked here; allow it in the \
                 configuration's [permissions] or run with --yolo"
            ))
        })
    }
}

/// A call the gate refused, for the user's report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Denial {
    /// The calling session.
    pub session: SessionId,
    /// The tool.
    pub tool: String,
    /// What the call acted on, if it says.
    pub subject: Option<String>,
    /// Why.
    pub why: String,
}

/// The gate: the rules, the hooks, who answers asks, and what each session said yes to.
pub struct Gate {
    permissions: Permissions,
    hooks: Vec<Hook>,
    post_tool: Vec<Hook>,
    asker: Arc<dyn Asker>,
    yolo: bool,
    cwd: PathBuf,
    /// (session, tool) pairs answered [`Answer::ForSession`].
    remembered: Mutex<BTreeSet<(SessionId, String)>>,
    denials: Mutex<Vec<Denial>>,
}

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gate")
            .field("permissions", &self.permissions)
            .field("hooks", &self.hooks)
            .field("yolo", &self.yolo)
            .finish_non_exhaustive()
    }
}

impl Gate {
    /// A gate with these rules and hooks, asking `asker`; hooks run in `cwd`.
    #[must_use]
    pub fn new(
        permissions: Permissions,
        hooks: Vec<Hook>,
        asker: Arc<dyn Asker>,
        cwd: impl Into<PathBuf>,
    ) -> Gate {
        Gate {
            permissions,
            hooks,
            post_tool: Vec::new(),
            asker,
            yolo: false,
            cwd: cwd.into(),
            remembered: Mutex::default(),
            denials: Mutex::default(),
        }
    }

    /// The same gate running these `post_tool` hooks after each call (with its result).
    #[must_use]
    pub fn with_post_tool(mut self, hooks: Vec<Hook>) -> Gate {
        self.post_tool = hooks;
        self
    }

    /// The same gate answering every ask with yes (`--yolo`); deny rules still hold.
    #[must_use]
    pub fn yolo(mut self, yolo: bool) -> Gate {
        self.yolo = yolo;
        self
    }

    /// `tools` with every tool behind this gate (the `agent` tool is the core's; the calls of
    /// the sub-agent it starts pass the gate one by one).
    #[must_use]
    pub fn wrap(self: &Arc<Gate>, tools: ToolSet) -> ToolSet {
        tools.wrapped(|inner| Arc::new(Gated { inner, gate: Arc::clone(self) }))
    }

    /// Every call refused so far, in order.
    #[must_use]
    pub fn denials(&self) -> Vec<Denial> {
        self.denials.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// What the gate says for one call whose arguments, as its tool reads them, are `input`:
    /// `Ok` to run it, `Err` the result instead.
    async fn check(&self, tool: &str, call: &ToolCall, input: &str) -> Result<(), ToolOutput> {
        let mut approved = false;
        if !call.session.is_child() && !self.hooks.is_empty() {
            let hook_input = self.call_input("pre_tool", tool, call, input);
            match run_hooks(&self.hooks, &hook_input, &self.cwd).await {
                Verdict::Proceed { approved: a } => approved = a,
                Verdict::Block(text) => {
                    tracing::info!(session = %call.session, call = %call.call, tool, "a hook blocked the call");
                    return Err(ToolOutput::error(text));
                }
                Verdict::Halt(text) => {
                    tracing::info!(session = %call.session, call = %call.call, tool, "a hook halted the turn");
                    return Err(ToolOutput {
                        content: text,
                        is_error: true,
                        stop: Some(StopTurn::HookHalt),
                    });
                }
            }
        }
        let (level, because) = self.permissions.level(tool, input);
        let refuse = |why: String| self.refuse(tool, call, input, why);
        match level {
            Level::Allow => Ok(()),
            Level::Deny => Err(refuse(match because {
                Because::Rule(rule) => format!("the rule `{rule}` in [permissions] denies it"),
                Because::Default => "denied".into(),
            })),
            Level::Ask if approved || self.yolo || self.remembers(&call.session, tool) => Ok(()),
            Level::Ask => {
                let ask = Ask {
                    session: call.session.clone(),
                    tool: tool.to_owned(),
                    call: call.clone(),
                    subject: subject(input),
                };
                match self.asker.ask(ask).await {
                    Answer::Once => Ok(()),
                    Answer::ForSession => {
                        self.remembered
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .insert((call.session.clone(), tool.to_owned()));
                        Ok(())
                    }
                    Answer::Deny(why) => Err(refuse(why)),
                }
            }
        }
    }

    /// A hook's input about one call.
    fn call_input(&self, event: &str, tool: &str, call: &ToolCall, input: &str) -> HookInput {
        HookInput {
            call_id: Some(call.call.as_str().to_owned()),
            tool_name: Some(tool.to_owned()),
            tool_input: Some(serde_json::from_str(input).unwrap_or(serde_json::Value::Null)),
            ..HookInput::new(event, call.session.as_str(), &self.cwd)
        }
    }

    /// The `post_tool` hooks' say on a call's result: feedback the model reads after it, or the
    /// end of the turn.
    async fn after(
        &self,
        tool: &str,
        call: &ToolCall,
        input: &str,
        result: ToolOutput,
    ) -> ToolOutput {
        if call.session.is_child() || self.post_tool.is_empty() {
            return result;
        }
        let hook_input = HookInput {
            tool_response: Some(
                serde_json::json!({"content": result.content, "is_error": result.is_error}),
            ),
            ..self.call_input("post_tool", tool, call, input)
        };
        match post_tool(&self.post_tool, &hook_input, &self.cwd).await {
            After::Nothing => result,
            After::Feedback(text) => {
                ToolOutput { content: format!("{}\n\n{text}", result.content), ..result }
            }
            After::Halt(text) => {
                tracing::info!(session = %call.session, call = %call.call, tool, "a post-tool hook halted the turn");
                let content = format!("{}\n\n{text}", result.content);
                ToolOutput { content, stop: Some(StopTurn::HookHalt), ..result }
            }
        }
    }

    fn remembers(&self, session: &SessionId, tool: &str) -> bool {
        self.remembered
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(&(session.clone(), tool.to_owned()))
    }

    /// Records a denial and builds the result that stops the turn.
    fn refuse(&self, tool: &str, call: &ToolCall, input: &str, why: String) -> ToolOutput {
        let subject = subject(input);
        tracing::info!(session = %call.session, call = %call.call, tool, "permission denied: {why}");
        let on = subject.as_deref().map(|s| format!(" on `{s}`")).unwrap_or_default();
        let content = format!("Permission denied: `{tool}`{on} was not allowed: {why}.");
        self.denials.lock().unwrap_or_else(PoisonError::into_inner).push(Denial {
            session: call.session.clone(),
            tool: tool.to_owned(),
            subject,
            why,
        });
        ToolOutput { content, is_error: true, stop: Some(StopTurn::PermissionDenied) }
    }
}

/// A tool behind the gate.
///
/// The wait for the hooks and for a person's answer is droppable even where the tool's work
/// is not (SPEC 4.9, 4.10): a tool left to finish is offered as left to finish *once started*,
/// so until its work begins an abort drops the call at once, which withdraws its ask. Its work
/// begins only when [`ToolCall::begin_work`] says so, which the engine decides in order with
/// aborts: an answer that arrives after a cancel can never run the call.
struct Gated {
    inner: Arc<dyn Tool>,
    gate: Arc<Gate>,
}

impl Tool for Gated {
    fn spec(&self) -> ToolSpec {
        let spec = self.inner.spec();
        match spec.on_abort {
            OnAbort::Finish => spec.left_to_finish_once_started(),
            _ => spec,
        }
    }

    fn definition(&self) -> ToolDef {
        self.inner.definition()
    }

    fn run(&self, call: ToolCall) -> BoxFuture<ToolOutput> {
        let (inner, gate) = (Arc::clone(&self.inner), Arc::clone(&self.gate));
        Box::pin(async move {
            let spec = inner.spec();
            // Judged as the tool reads them, so that no spelling dodges a rule or a hook.
            let input = args::canonical(&inner.definition().input_schema, &call.input);
            if let Err(result) = gate.check(&spec.name, &call, &input).await {
                return result;
            }
            if spec.on_abort == OnAbort::Finish && !call.begin_work().await {
                // Aborted while it waited: the core already gave the call its synthetic
                // result and ignores this one.
                tracing::info!(session = %call.session, call = %call.call, tool = spec.name, "the call was aborted before its work began");
                return ToolOutput::error("the call was cancelled before its work began");
            }
            let result = inner.run(call.clone()).await;
            gate.after(&spec.name, &call, &input, result).await
        })
    }
}
