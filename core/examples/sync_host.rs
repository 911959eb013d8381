//! A complete host in a plain synchronous loop: no async runtime, a scripted model and tools,
//! an in-memory "store", virtual time. Run it with `cargo run -p turnstile-core --example
//! sync_host`; `tests/example.rs` checks its transcript.
//!
//! The scenario: a prompt whose model calls a tool; a follow-up typed meanwhile is folded into
//! the running turn; a second run is cancelled with `cancel_run` while its tool hangs, and the
//! grace timer cleans it up.

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write as _;

use turnstile_core::{
    CallId, Config, Engine, FinishReason, Input, Millis, OutputKind, RunId, Setup, Start,
    StepEvent, StoreOp, Submit, ToolOutput, ToolSpec,
};

/// What the scripted model does on each step of a session: text, tool calls, finish.
fn model(prompt_step: u32) -> (String, Vec<(&'static str, &'static str)>, FinishReason) {
    match prompt_step {
        0 => ("Let me list the files.".into(), vec![("call-1", "ls")], FinishReason::ToolCalls),
        _ => ("There are two files.".into(), vec![], FinishReason::Stop),
    }
}

/// A slow tool never answers; the others answer at once.
fn tool(name: &str) -> Option<ToolOutput> {
    (name != "slow").then(|| ToolOutput::ok(format!("{name}: a.rs b.rs")))
}

struct Host {
    engine: Engine,
    now: Millis,
    inbox: VecDeque<Input>,
    timers: BTreeMap<turnstile_core::TimerId, Millis>,
    messages: usize,
    log: String,
}

impl Host {
    fn send(&mut self, input: Input) {
        self.inbox.push_back(input);
        // Step 1 and 2 of the host protocol: one input, then drain and act, until quiet.
        while let Some(input) = self.inbox.pop_front() {
            self.engine.handle(self.now, input).expect("this host follows the protocol");
            while let Some(out) = self.engine.poll_output() {
                self.act(out.kind);
            }
        }
    }

    fn act(&mut self, out: OutputKind) {
        match out {
            OutputKind::Reply(r) => {
                writeln!(self.log, "{:>6} ms  reply {r:?}", self.now.0).unwrap()
            }
            OutputKind::Prepare { session, seq } => {
                // `slow` has effects that a cancel must not cut off: the core waits for it.
                let mut setup = Setup::with_tools(&["ls"]);
                setup.tools.push(ToolSpec::new("slow").left_to_finish());
                self.inbox.push_back(Input::Prepared { session, seq, setup });
            }
            OutputKind::StartStep { step } => {
                let (text, calls, reason) = model(step.step);
                let text = if step.session.as_str() == "ops" {
                    "Running the slow check.".to_owned()
                } else {
                    text
                };
                let calls =
                    if step.session.as_str() == "ops" { vec![("call-9", "slow")] } else { calls };
                let ev = |event| Input::Step { step: step.clone(), event };
                self.inbox.push_back(ev(StepEvent::TextDelta { text }));
                for (id, name) in calls {
                    let (id, name, input) = (CallId::new(id), name.to_owned(), "{}".to_owned());
                    self.inbox.push_back(ev(StepEvent::ToolCall { id, name, input }));
                }
                self.inbox.push_back(ev(StepEvent::Finished { reason, usage: None }));
            }
            OutputKind::RunTool { call, name, .. } => match tool(&name) {
                Some(result) => self.inbox.push_back(Input::ToolResult { call, result }),
                None => writeln!(self.log, "{:>6} ms  tool {name} hangs", self.now.0).unwrap(),
            },
            OutputKind::SetTimer { timer, deadline, .. } => {
                self.timers.insert(timer, deadline);
            }
            OutputKind::CancelTimer { timer } => {
                self.timers.remove(&timer);
            }
            OutputKind::Store(
                StoreOp::UserMessage { .. }
                | StoreOp::AssistantMessage { .. }
                | StoreOp::ToolResult { .. },
            ) => {
                self.messages += 1;
            }
            OutputKind::Finished(c) => writeln!(
                self.log,
                "{:>6} ms  #{} {} {:?} {:?} text={:?}",
                self.now.0,
                c.seq(),
                if c.is_run_complete() { "RunComplete" } else { "outcome" },
                c.outcome(),
                c.stop_reason(),
                c.text().unwrap_or("")
            )
            .unwrap(),
            _ => {} // commits, aborts, flushes: nothing to do in memory
        }
    }

    /// Step 3: nothing queued, so jump virtual time to the earliest deadline and fire it.
    fn fire_timers(&mut self) {
        while let Some((&timer, &deadline)) = self.timers.iter().min_by_key(|(_, d)| **d) {
            self.timers.remove(&timer);
            self.now = self.now.max(deadline);
            self.send(Input::TimerFired { timer });
        }
    }
}

/// Runs the scenario and returns its transcript.
pub fn transcript() -> String {
    let engine = Engine::new(Config::default(), Start::default()).expect("valid start");
    let mut h = Host {
        engine,
        now: Millis(0),
        inbox: VecDeque::new(),
        timers: BTreeMap::new(),
        messages: 0,
        log: String::new(),
    };
    // The follow-up is submitted while the first turn's tool result is pending, so it folds.
    h.inbox
        .push_back(Input::Submit(Submit::new("dev", "What files are here?").with_run_id("run-1")));
    h.send(Input::Submit(Submit::new("dev", "And be brief.")));
    h.now = Millis(100);
    h.send(Input::Submit(Submit::new("ops", "Run the slow check.").with_run_id("run-2")));
    h.now = Millis(200);
    h.send(Input::CancelRun { run_id: RunId::new("run-2") });
    h.fire_timers();
    h.send(Input::Shutdown);
    writeln!(
        h.log,
        "{:>6} ms  stopped={} messages={} unfinished={}",
        h.now.0,
        h.engine.is_stopped(),
        h.messages,
        h.engine.unfinished()
    )
    .unwrap();
    h.log
}

#[allow(dead_code)] // unused when the test includes this file as a module
fn main() {
    print!("{}", transcript());
}
