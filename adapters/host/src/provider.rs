//! LLM providers (SPEC 9 "Providers"): the trait the host streams model steps through, the
//! sink a stream's events go to, and a scripted provider for tests, demos and benchmarks.
//!
//! The provider-neutral request ([`ModelRequest`]) is the wire crate's (`turnstile-wire`,
//! re-exported here): the host builds it from the store, and an HTTP provider encodes it.
//!
//! A provider turns one [`ModelRequest`] into a stream of [`StepEvent`]s sent to an
//! [`EventSink`]. It classifies failures into [`turnstile_core::ProviderError`]; the core
//! decides about retries, credential refreshes and outcomes. Cancellation drops the stream's
//! future, which must close the connection at once.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use tokio::sync::mpsc;
use turnstile_core::{
    CallId, ErrorClass, FinishReason, ProviderError, SessionId, StepEvent, Usage,
};
pub use turnstile_wire::{
    ModelRequest, RequestCall, RequestKind, RequestMessage, RequestResult, ToolDef,
};

use crate::tool::BoxFuture;

/// What preparing a submission resolved about the model.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ModelInfo {
    /// The context window in tokens; 0 when unknown (never summarizes).
    pub context_window: u64,
}

/// Where a provider sends a stream's events. Sending after the host dropped the stream (a
/// cancel) or after the stream's `Finished` or `Failed` returns false: the provider should then
/// stop.
///
/// In the host, events go straight to the engine's inbox, tagged with the IO they belong to;
/// [`EventSink::channel`] gives a sink whose events can be read back (to test a provider).
#[derive(Debug)]
pub struct EventSink {
    target: Target,
}

#[derive(Debug)]
enum Target {
    Channel(mpsc::Sender<StepEvent>),
    Engine(Box<EngineTarget>),
}

/// Hands one event to the engine, as the input that names its IO; false once the engine is
/// gone. The host builds it, so this module needs nothing of the host's internals.
pub(crate) type Deliver = Box<dyn FnMut(StepEvent) -> BoxFuture<bool> + Send + Sync>;

/// A sink that reports to the engine directly.
pub(crate) struct EngineTarget {
    pub(crate) deliver: Deliver,
    /// The request's strings and the response's so far, for SPEC 4.4's usage estimate.
    pub(crate) request: Vec<String>,
    pub(crate) response: Vec<String>,
    /// Set once `Finished` or `Failed` was sent: the stream task then knows it ended properly.
    pub(crate) ended: Arc<AtomicBool>,
}

impl std::fmt::Debug for EngineTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineTarget").field("ended", &self.ended).finish_non_exhaustive()
    }
}

impl EventSink {
    /// A sink and the receiver its events can be read from (for testing a provider).
    #[must_use]
    pub fn channel(capacity: usize) -> (EventSink, mpsc::Receiver<StepEvent>) {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        (EventSink { target: Target::Channel(tx) }, rx)
    }

    pub(crate) fn engine(target: EngineTarget) -> EventSink {
        EventSink { target: Target::Engine(Box::new(target)) }
    }

    /// Sends one event, waiting while the host is behind. False when the stream was dropped
    /// or has ended; the provider should stop then. A `Finished` without usage gets SPEC
    /// 4.4's estimate on the way.
    pub async fn send(&mut self, event: StepEvent) -> bool {
        match &mut self.target {
            Target::Channel(tx) => tx.send(event).await.is_ok(),
            Target::Engine(t) => t.send(event).await,
        }
    }
}

impl EngineTarget {
    async fn send(&mut self, mut event: StepEvent) -> bool {
        if self.ended.load(Ordering::Relaxed) {
            return false;
        }
        match &mut event {
            StepEvent::TextDelta { text } | StepEvent::ReasoningDelta { text } => {
                self.response.push(text.clone());
            }
            StepEvent::ToolCall { id, name, input } => {
                self.response.extend([id.as_str().to_owned(), name.clone(), input.clone()]);
            }
            StepEvent::Finished { usage, .. } if usage.is_none() => {
                *usage = Some(Usage::estimate(
                    self.request.iter().map(String::as_str),
                    self.response.iter().map(String::as_str),
                ));
            }
            _ => {}
        }
        let ends = matches!(event, StepEvent::Finished { .. } | StepEvent::Failed { .. });
        let sent = (self.deliver)(event).await;
        if ends {
            self.ended.store(true, Ordering::Relaxed);
        }
        sent && !ends
    }
}

/// A provider's own error, of whatever type it has (`"text".into()` makes one from a
/// string). The host records its `Display` text where SPEC records a message.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// An LLM provider.
pub trait Provider: Send + Sync + 'static {
    /// Resolves the model for a submission of this session (SPEC 4.1 preparation): an error
    /// ends that submission `failed` (kind `preparation`, the error's `Display` as its
    /// message) and affects no other.
    fn prepare(&self, session: &SessionId) -> BoxFuture<Result<ModelInfo, BoxError>>;
    /// Streams one request's answer into `sink`: deltas, tool calls, then exactly one
    /// `Finished` or `Failed`. Returning without either counts as a stream that ended without
    /// a finish (retryable, SPEC 4.5).
    fn stream(&self, request: ModelRequest, sink: EventSink) -> BoxFuture<()>;
    /// Refreshes credentials after a 401, waiting up to 5 minutes for a person if needed;
    /// true when fresh credentials are in place.
    fn refresh_credentials(&self) -> BoxFuture<bool>;
    /// Generates a session title from a prompt, with what it used and cost; an error or an
    /// empty title makes the core fall back to the prompt (SPEC 4.11).
    fn title(&self, prompt: String) -> BoxFuture<Result<(String, Option<Usage>), BoxError>>;
}

/// One element of a scripted answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scripted {
    /// Wait this many milliseconds of runtime time (simulated under the simulator).
    Wait(u64),
    /// Send this event.
    Event(StepEvent),
    /// Never answer again (a provider that hangs; only a cancel ends it).
    Hang,
}

/// A scripted answer: what the provider does for one request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Answer(pub Vec<Scripted>);

impl Answer {
    /// `text` streamed in `deltas` pieces, `every_ms` apart, then finish `stop` with usage.
    #[must_use]
    pub fn streamed(text: &str, deltas: usize, every_ms: u64, usage: Usage) -> Answer {
        let chars: Vec<char> = text.chars().collect();
        let per = chars.len().div_ceil(deltas.max(1)).max(1);
        let mut out = Vec::new();
        for piece in chars.chunks(per) {
            out.push(Scripted::Wait(every_ms));
            out.push(Scripted::Event(StepEvent::TextDelta { text: piece.iter().collect() }));
        }
        out.push(Scripted::Event(StepEvent::Finished {
            reason: FinishReason::Stop,
            usage: Some(usage),
        }));
        Answer(out)
    }

    /// One tool call, then finish `tool_calls`.
    #[must_use]
    pub fn tool_call(id: &str, name: &str, input: &str) -> Answer {
        Answer(vec![
            Scripted::Event(StepEvent::ToolCall {
                id: CallId::new(id),
                name: name.to_owned(),
                input: input.to_owned(),
            }),
            Scripted::Event(StepEvent::Finished { reason: FinishReason::ToolCalls, usage: None }),
        ])
    }

    /// A failure with this HTTP status.
    #[must_use]
    pub fn failure(status: u16, message: &str) -> Answer {
        Answer(vec![Scripted::Event(StepEvent::Failed {
            error: ProviderError {
                class: if status == 401 { ErrorClass::Unauthorized } else { ErrorClass::Provider },
                status: Some(status),
                message: message.to_owned(),
                ..ProviderError::default()
            },
        })])
    }

    /// A provider that never answers.
    #[must_use]
    pub fn hang() -> Answer {
        Answer(vec![Scripted::Hang])
    }
}

type ScriptFn = dyn Fn(&ModelRequest, u64) -> Answer + Send + Sync;
type PrepareFn = dyn Fn(&SessionId) -> Result<ModelInfo, BoxError> + Send + Sync;

/// A provider that answers from a script: a function from the request (and the number of
/// requests it has seen before, from 0) to an [`Answer`]. Deterministic under the simulator:
/// it waits only on runtime time.
#[derive(Clone)]
pub struct ScriptedProvider {
    script: Arc<ScriptFn>,
    prepare: Arc<PrepareFn>,
    refresh_ok: bool,
    requests: Arc<AtomicU64>,
}

impl ScriptedProvider {
    /// A provider answering with `script`; the model's context window is unknown (0).
    pub fn new(script: impl Fn(&ModelRequest, u64) -> Answer + Send + Sync + 'static) -> Self {
        ScriptedProvider {
            script: Arc::new(script),
            prepare: Arc::new(|_| Ok(ModelInfo::default())),
            refresh_ok: true,
            requests: Arc::new(AtomicU64::new(0)),
        }
    }

    /// The same provider with this preparation rule.
    #[must_use]
    pub fn with_prepare(
        mut self,
        prepare: impl Fn(&SessionId) -> Result<ModelInfo, BoxError> + Send + Sync + 'static,
    ) -> Self {
        self.prepare = Arc::new(prepare);
        self
    }

    /// The same provider, whose credential refreshes succeed or fail.
    #[must_use]
    pub fn with_refresh(mut self, ok: bool) -> Self {
        self.refresh_ok = ok;
        self
    }

    /// How many streams it has been asked for.
    #[must_use]
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }
}

impl std::fmt::Debug for ScriptedProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedProvider").field("requests", &self.requests()).finish()
    }
}

impl Provider for ScriptedProvider {
    fn prepare(&self, session: &SessionId) -> BoxFuture<Result<ModelInfo, BoxError>> {
        let result = (self.prepare)(session);
        Box::pin(async move { result })
    }

    fn stream(&self, request: ModelRequest, mut sink: EventSink) -> BoxFuture<()> {
        let n = self.requests.fetch_add(1, Ordering::Relaxed);
        let answer = (self.script)(&request, n);
        Box::pin(async move {
            for step in answer.0 {
                match step {
                    Scripted::Wait(ms) => {
                        tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
                    }
                    Scripted::Event(e) => {
                        if !sink.send(e).await {
                            return;
                        }
                    }
                    Scripted::Hang => std::future::pending::<()>().await,
                }
            }
        })
    }

    fn refresh_credentials(&self) -> BoxFuture<bool> {
        let ok = self.refresh_ok;
        Box::pin(async move { ok })
    }

    fn title(&self, prompt: String) -> BoxFuture<Result<(String, Option<Usage>), BoxError>> {
        let title: String = prompt.split_whitespace().take(4).collect::<Vec<_>>().join(" ");
        Box::pin(async move { Ok((title, None)) })
    }
}
