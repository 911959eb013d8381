//! The world's provider: how it answers each request ([`Behaviour`]: the seeded mix, recorded
//! streams only, or a script of the user's), which tools its calls name, and the title and
//! credential replies. Its randomness is the world's, so a seed always gives the same answers.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use turnstile_core::{
    AGENT_TOOL, CallId, ErrorClass, FinishReason, ProviderError, SessionId, StepEvent, Usage,
};
use turnstile_host::{
    BoxError, BoxFuture, EventSink, ModelInfo, ModelRequest, Provider, RequestKind, RequestMessage,
};

use crate::rng::Rng;
use crate::world::act::Act;

/// A script: the acts that answer one request, drawn from the world's generator for that
/// request (so a seed gives the same answers).
pub type Script = Arc<dyn Fn(&mut Rng, &ModelRequest) -> Vec<Act> + Send + Sync>;

/// How the world's provider answers requests.
#[derive(Clone, Default)]
pub enum Behaviour {
    /// The built-in mix: text, reasoning, tool calls (some with invalid JSON or an unknown
    /// tool), sub-agents, retryable and fatal errors with Retry-After, 401s, stalled and cut
    /// streams, slow streams below the watchdog, and recorded streams through the real decoders.
    #[default]
    Seeded,
    /// Only real recorded provider streams (OpenAI chat, OpenAI Responses, Anthropic) through
    /// the real decoders, whole, cut, stalled or with a byte changed.
    Recorded,
    /// The user's script for every request.
    Scripted(Script),
}

impl std::fmt::Debug for Behaviour {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Behaviour::Seeded => "Seeded",
            Behaviour::Recorded => "Recorded",
            Behaviour::Scripted(_) => "Scripted(..)",
        })
    }
}

/// Draws a tool call's input (JSON text) from the request's generator.
pub type InputGen = Arc<dyn Fn(&mut Rng) -> String + Send + Sync>;

/// A tool the provider's calls may name, and how it draws the call's input (`None`: the
/// built-in tools' `{"path":"x"}`, or an unknown tool).
#[derive(Clone)]
pub(crate) struct Callable {
    pub(crate) name: String,
    pub(crate) input: Option<InputGen>,
}

/// What the provider may do, for the whole seed.
#[derive(Clone)]
pub(crate) struct Answers {
    pub(crate) behaviour: Behaviour,
    /// The names its tool calls draw from (repeats weigh more), unknown names included.
    pub(crate) callable: Vec<Callable>,
    /// Whether streams may stall (else a stall is a cut).
    pub(crate) stalls: bool,
}

/// One request the provider answered (one attempt of a step or of a summary): its session,
/// its kind, and the events it sent that the host took, in order. The provider cannot tell
/// which step of which submission a request is for: the host's request does not say.
#[derive(Clone, Debug)]
pub(crate) struct Streamed {
    pub(crate) session: SessionId,
    pub(crate) kind: RequestKind,
    pub(crate) events: Vec<StepEvent>,
}

impl Streamed {
    /// Adds `event` to request `tag`'s events, or takes its last one back (`None`).
    fn note(all: &Mutex<Vec<Streamed>>, tag: u64, event: Option<StepEvent>) {
        let mut all = all.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(one) = usize::try_from(tag - 1).ok().and_then(|i| all.get_mut(i)) else { return };
        match event {
            Some(e) => one.events.push(e),
            None => {
                one.events.pop();
            }
        }
    }
}

/// A shared generator for the actors that draw in the order the runtime schedules them.
pub(crate) type Shared = Arc<Mutex<Rng>>;

pub(crate) fn draw<T>(rng: &Shared, f: impl FnOnce(&mut Rng) -> T) -> T {
    let mut r = rng.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    f(&mut r)
}

/// The world's provider (its state is shared by every incarnation of the host): it answers
/// as its [`Behaviour`] says, fails preparations now and then, refreshes credentials after a
/// while (mostly successfully) and writes titles.
pub(crate) struct SimProvider {
    pub(crate) rng: Shared,
    pub(crate) answers: Answers,
    /// Preparations this provider failed, per session (a failed preparation must fail only its
    /// own submission: G-24).
    pub(crate) prep_failures: Arc<Mutex<BTreeMap<SessionId, u64>>>,
    /// Every request streamed so far, in order, with the events the host took from it: what
    /// the provider sent, which the store's texts are checked against. The seeded texts are
    /// also tagged with the request's number (its place here, from 1), so a trace shows which
    /// request a text came from.
    pub(crate) streamed: Arc<Mutex<Vec<Streamed>>>,
    /// Requests of sub-agents that offered the `agent` tool (SPEC 4.11 allows none).
    pub(crate) agent_offered_to_child: Arc<Mutex<Vec<SessionId>>>,
}

impl Provider for SimProvider {
    fn prepare(&self, session: &SessionId) -> BoxFuture<Result<ModelInfo, BoxError>> {
        // Preparations take a while, so they finish out of acceptance order.
        let (fail, ms) = draw(&self.rng, |r| (r.chance(3), r.between(0, 400)));
        if fail {
            let mut failures =
                self.prep_failures.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            *failures.entry(session.clone()).or_default() += 1;
        }
        // One session has a small window, so summaries (pause and resume) happen.
        let context_window = if session.as_str() == "s0" { 2_500 } else { 100_000 };
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            if fail { Err("model unavailable".into()) } else { Ok(ModelInfo { context_window }) }
        })
    }

    fn stream(&self, request: ModelRequest, mut sink: EventSink) -> BoxFuture<()> {
        if request.session.is_child() && request.tools.iter().any(|t| t.name == AGENT_TOOL) {
            let mut seen = self
                .agent_offered_to_child
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            seen.push(request.session.clone());
        }
        let mut rng = draw(&self.rng, Rng::fork);
        let tag = {
            let mut all = self.streamed.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let (session, kind) = (request.session.clone(), request.kind);
            all.push(Streamed { session, kind, events: Vec::new() });
            all.len() as u64
        };
        let acts = self.answers.answer(&mut rng, &request, tag);
        let streamed = self.streamed.clone();
        Box::pin(async move {
            for act in acts {
                match act {
                    Act::Wait(ms) => tokio::time::sleep(Duration::from_millis(ms)).await,
                    Act::Send(e) => {
                        // Noted before it is sent (a crash may end the send half-way) and
                        // taken back when the host did not take it: a `false` for anything
                        // but the stream's end means the event never reached the engine.
                        let ends =
                            matches!(e, StepEvent::Finished { .. } | StepEvent::Failed { .. });
                        Streamed::note(&streamed, tag, Some(e.clone()));
                        if !sink.send(e).await {
                            if !ends {
                                Streamed::note(&streamed, tag, None);
                            }
                            return;
                        }
                    }
                    Act::Hang => std::future::pending::<()>().await,
                    Act::Cut => return,
                }
            }
        })
    }

    fn refresh_credentials(&self) -> BoxFuture<bool> {
        let (ok, ms) = draw(&self.rng, |r| (r.chance(80), r.between(0, 3_000)));
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            ok
        })
    }

    fn title(&self, prompt: String) -> BoxFuture<Result<(String, Option<Usage>), BoxError>> {
        let ok = draw(&self.rng, |r| r.chance(80));
        Box::pin(async move {
            if ok { Ok((format!("About {prompt}"), None)) } else { Err("no title".into()) }
        })
    }
}

fn usage(rng: &mut Rng) -> Usage {
    Usage {
        input_tokens: rng.between(100, 3_000),
        output_tokens: rng.between(10, 400),
        cost_micros: rng.between(0, 50),
        ..Usage::default()
    }
}

/// Streamed text, each word tagged with the request it came from (`q<request>w<i> `).
fn text(rng: &mut Rng, out: &mut Vec<Act>, tag: u64) {
    for i in 0..rng.between(1, 6) {
        out.push(Act::Wait(rng.between(1, 40)));
        out.push(Act::Send(StepEvent::TextDelta { text: format!("q{tag}w{i} ") }));
    }
}

fn failure(class: ErrorClass, status: Option<u16>, retry_after_ms: Option<u64>) -> Act {
    Act::Send(StepEvent::Failed {
        error: ProviderError {
            class,
            status,
            retry_after_ms,
            message: "simulated failure".to_owned(),
            ..ProviderError::default()
        },
    })
}

impl Answers {
    /// What the provider does for one request.
    fn answer(&self, rng: &mut Rng, request: &ModelRequest, tag: u64) -> Vec<Act> {
        let mut acts = match &self.behaviour {
            Behaviour::Seeded => self.seeded(rng, request, tag),
            Behaviour::Recorded => {
                let mut out = vec![Act::Wait(rng.between(1, 200))];
                out.extend(crate::recorded::answer(rng, tag));
                out
            }
            Behaviour::Scripted(script) => script(rng, request),
        };
        if !self.stalls {
            for act in &mut acts {
                if matches!(act, Act::Hang) {
                    *act = Act::Cut;
                }
            }
        }
        acts
    }

    /// The built-in mix for one request.
    fn seeded(&self, rng: &mut Rng, request: &ModelRequest, tag: u64) -> Vec<Act> {
        let mut out = vec![Act::Wait(rng.between(1, 200))];
        if request.kind == RequestKind::Summary {
            // Summaries take a while (a long history): cancels land during them.
            out.push(Act::Wait(rng.between(300, 3_000)));
            if rng.chance(10) {
                out.push(failure(ErrorClass::Provider, Some(400), None));
            } else {
                text(rng, &mut out, tag);
                let usage = Usage { output_tokens: rng.between(50, 500), ..Usage::default() };
                let finish = StepEvent::Finished { reason: FinishReason::Stop, usage: Some(usage) };
                out.push(Act::Send(finish));
            }
            return out;
        }
        let after_tools = matches!(request.messages.last(), Some(RequestMessage::ToolResults(_)));
        match rng.below(100) {
            0..=17 if !after_tools || rng.chance(30) => self.tool_step(rng, request, tag, &mut out),
            18..=24 => {
                text(rng, &mut out, tag);
                out.push(failure(ErrorClass::Provider, Some(429), Some(rng.between(10, 3_000))));
            }
            25..=27 => out.push(failure(ErrorClass::Provider, Some(503), None)),
            28..=30 => out.push(failure(ErrorClass::Transport, None, None)),
            31..=33 => {
                if rng.chance(50) {
                    text(rng, &mut out, tag);
                }
                out.push(failure(ErrorClass::Unauthorized, Some(401), None));
            }
            34..=35 => out.push(failure(ErrorClass::Provider, Some(400), None)),
            36..=38 => {
                text(rng, &mut out, tag);
                out.push(Act::Hang);
            }
            39..=42 => {
                text(rng, &mut out, tag);
                out.push(Act::Cut);
            }
            // A real provider's recorded stream through the real decoder (whole, cut, stalled
            // or with a byte changed).
            43..=54 => out.extend(crate::recorded::answer(rng, tag)),
            55..=59 => {
                // Slow but alive: gaps below the watchdog's 5 s, 6 to 16 s in all (SPEC 4.5).
                for i in 0..rng.between(3, 4) {
                    out.push(Act::Wait(rng.between(2_000, 4_000)));
                    out.push(Act::Send(StepEvent::TextDelta { text: format!("q{tag}s{i} ") }));
                }
                let finish = StepEvent::Finished { reason: FinishReason::Stop, usage: None };
                out.push(Act::Send(finish));
            }
            _ => {
                if rng.chance(20) {
                    out.push(Act::Send(StepEvent::ReasoningStart));
                    out.push(Act::Send(StepEvent::ReasoningDelta { text: "think".into() }));
                    out.push(Act::Send(StepEvent::ReasoningEnd { signature: None }));
                }
                text(rng, &mut out, tag);
                let reason = if rng.chance(5) { FinishReason::Length } else { FinishReason::Stop };
                let finish = StepEvent::Finished { reason, usage: Some(usage(rng)) };
                out.push(Act::Send(finish));
            }
        }
        out
    }

    /// A step that calls one or two tools: the world's tools by the weights of `callable`,
    /// sub-agents where the request offers them (top-level sessions), and now and then a
    /// child's `agent` call, which it was not offered (an unknown tool to it).
    fn tool_step(&self, rng: &mut Rng, request: &ModelRequest, tag: u64, out: &mut Vec<Act>) {
        if rng.chance(30) {
            out.push(Act::Send(StepEvent::ReasoningStart));
            out.push(Act::Send(StepEvent::ReasoningDelta { text: "hmm".into() }));
            out.push(Act::Send(StepEvent::ReasoningEnd { signature: Some("sig".into()) }));
        }
        let offered = request.tools.iter().any(|t| t.name == AGENT_TOOL);
        for i in 0..rng.between(1, 2) {
            let pick = &self.callable[rng.below(self.callable.len() as u64) as usize];
            let mut name = pick.name.as_str();
            let mut generator = pick.input.as_ref();
            if rng.chance(if offered { 25 } else { 2 }) {
                name = AGENT_TOOL;
                generator = None;
            }
            let input = match (rng.below(10), name == AGENT_TOOL, generator) {
                (0, _, _) => "{bad".to_owned(),
                (1, true, _) => "{}".to_owned(),
                (_, true, _) => format!("{{\"prompt\":\"sub q{tag}\"}}"),
                (_, false, Some(generate)) => generate(rng),
                (_, false, None) => "{\"path\":\"x\"}".to_owned(),
            };
            let id = CallId::new(format!("c{}", rng.below(1_000) * 10 + i));
            out.push(Act::Send(StepEvent::ToolInputStart { id: id.clone(), name: name.into() }));
            out.push(Act::Wait(rng.between(0, 20)));
            out.push(Act::Send(StepEvent::ToolCall { id, name: name.into(), input }));
        }
        // Sometimes a tool step fills the context: the turn pauses for a summary.
        let usage = rng.chance(30).then(|| usage(rng));
        let finish = StepEvent::Finished { reason: FinishReason::ToolCalls, usage };
        out.push(Act::Send(finish));
    }
}
