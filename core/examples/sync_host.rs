//! A complete host in a plain synchronous loop: no async runtime, a scripted model and tools,
//! an in-memory "store" (the run ledger and the highest message id), virtual time. Run it with
//! `cargo run -p turnstile-core --example sync_host`; `tests/example.rs` checks its transcript.
//!
//! The scenario: a prompt whose model calls a tool; a follow-up typed meanwhile is folded into
//! the running turn; a run whose tool must not be cut off is cancelled, and the grace timer
//! cleans it up; then the process "crashes" mid-turn, and the next engine starts from the store
//! (recovery, the crate docs' "Recovery" section): the interrupted run gets its RunComplete,
//! and resubmitting a finished run answers it instead of running it again.

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write as _;

use turnstile_core::{
    CallId, Config, Engine, Fingerprint, FinishReason, Input, KnownRun, MessageId, Millis, Outcome,
    OutputClass, OutputKind, Reply, RunId, Seq, Setup, Start, StepEvent, StoreOp, Submit,
    ToolOutput, ToolSpec,
};

/// What the scripted model does: the first step of a session calls its tool, the next ends.
fn model(session: &str, step: u32) -> (&'static str, Option<&'static str>, FinishReason) {
    match (session, step) {
        ("ops", _) => ("Running the migration.", Some("migrate"), FinishReason::ToolCalls),
        ("qa", _) => ("Searching.", Some("grep"), FinishReason::ToolCalls),
        (_, 0) => ("Let me list the files.", Some("ls"), FinishReason::ToolCalls),
        _ => ("There are two files.", None, FinishReason::Stop),
    }
}

/// `ls` answers at once; `migrate` (left to finish on abort) and `grep` never answer here.
fn tool(name: &str) -> Option<ToolOutput> {
    (name == "ls").then(|| ToolOutput::ok("a.rs b.rs"))
}

/// The run ledger, as a store keeps it: one row per accepted submission.
#[derive(Default)]
struct Store {
    rows: BTreeMap<Seq, (Option<RunId>, Fingerprint, Submit, Option<Outcome>)>,
    next_message: u64,
}

struct Host {
    engine: Engine,
    now: Millis,
    inbox: VecDeque<Input>,
    timers: BTreeMap<turnstile_core::TimerId, Millis>,
    store: Store,
    submitted: VecDeque<Submit>,
    log: String,
}

impl Host {
    fn submit(&mut self, s: Submit) {
        self.submitted.push_back(s.clone());
        self.send(Input::Submit(s));
    }

    fn send(&mut self, input: Input) {
        self.inbox.push_back(input);
        // Steps 1 and 2 of the host protocol: one input, then drain and act, until quiet.
        while let Some(input) = self.inbox.pop_front() {
            self.engine.handle(self.now, input).expect("this host follows the protocol");
            while let Some(out) = self.engine.poll_output() {
                self.act(out.kind);
            }
        }
    }

    fn act(&mut self, out: OutputKind) {
        let at = self.now.0;
        match out {
            OutputKind::Reply(r) => {
                let submit = self.submitted.pop_front().expect("a reply answers a submit");
                if let Reply::Accepted { seq, .. } = &r {
                    let fp = Fingerprint::of(&submit);
                    self.store.rows.insert(*seq, (submit.run_id.clone(), fp, submit, None));
                }
                writeln!(self.log, "{at:>6} ms  reply {r:?}").unwrap()
            }
            OutputKind::Prepare { session, seq } => {
                let mut setup = Setup::with_tools(&["ls", "grep"]);
                setup.tools.push(ToolSpec::new("migrate").left_to_finish());
                self.inbox.push_back(Input::Prepared { session, seq, setup });
            }
            OutputKind::StartStep { step } => {
                let (text, call, reason) = model(step.session.as_str(), step.step);
                let ev = |event| Input::Step { step: step.clone(), event };
                self.inbox.push_back(ev(StepEvent::TextDelta { text: text.into() }));
                if let Some(name) = call {
                    let (id, input) = (CallId::new(format!("call-{}", step.seq)), "{}".into());
                    self.inbox.push_back(ev(StepEvent::ToolCall { id, name: name.into(), input }));
                }
                self.inbox.push_back(ev(StepEvent::Finished { reason, usage: None }));
            }
            OutputKind::RunTool { call, name, .. } => match tool(&name) {
                Some(result) => self.inbox.push_back(Input::ToolResult { call, result }),
                None => writeln!(self.log, "{at:>6} ms  tool {name} runs on").unwrap(),
            },
            OutputKind::SetTimer { timer, deadline, .. } => {
                self.timers.insert(timer, deadline);
            }
            OutputKind::CancelTimer { timer } => {
                self.timers.remove(&timer);
            }
            OutputKind::Store(op) => self.write(op),
            OutputKind::Commit { .. } => {} // in memory every write is durable at once
            OutputKind::Finished(c) => {
                let kind = if c.is_run_complete() { "RunComplete" } else { "outcome" };
                let (o, text) = (c.outcome(), c.text().unwrap_or(""));
                writeln!(self.log, "{at:>6} ms  #{} {kind} {o:?} text={text:?}", c.seq()).unwrap()
            }
            other if other.class() == OutputClass::MayIgnore => {} // aborts, titles, stopped
            other => unimplemented!("this host does not handle {other:?}"),
        }
    }

    /// The store keeps the ledger's outcomes and the highest message id the core allocated.
    fn write(&mut self, op: StoreOp) {
        match op {
            StoreOp::UserMessage { id, .. }
            | StoreOp::AssistantMessage { id, .. }
            | StoreOp::SummaryMessage { id, .. } => self.store.next_message = id.0 + 1,
            StoreOp::LedgerOutcome { completion } => {
                let row = self.store.rows.get_mut(&completion.seq()).expect("a ledger row");
                row.3 = Some(completion.outcome());
            }
            _ => {} // messages, tool calls and results: a real store writes them in order
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

/// Recovery (the process stopped): every unfinished row ends `interrupted` with its
/// RunComplete, and the next engine starts above the ledger and the message ids.
fn restart(mut store: Store, now: Millis, log: String) -> Host {
    let mut log = log;
    for (seq, (run_id, _, _, outcome)) in &mut store.rows {
        if outcome.is_none() {
            *outcome = Some(Outcome::Interrupted);
            writeln!(log, "{:>6} ms  recovery: #{seq} {run_id:?} Interrupted", now.0).unwrap();
        }
    }
    let next_seq = store.rows.keys().next_back().map(|s| Seq(s.0 + 1));
    let runs = store.rows.iter().filter_map(|(seq, (run_id, fingerprint, submit, outcome))| {
        let (run_id, outcome) = (run_id.clone()?, (*outcome)?);
        let (session, seq, fingerprint) = (submit.session.clone(), *seq, *fingerprint);
        Some(KnownRun { run_id, session, seq, fingerprint, outcome })
    });
    let next_message = Some(MessageId(store.next_message));
    let start = Start { next_seq, next_message, runs: runs.collect() };
    let engine = Engine::new(Config::default(), start).expect("a start from the store");
    let (inbox, timers, submitted) = (VecDeque::new(), BTreeMap::new(), VecDeque::new());
    Host { engine, now, inbox, timers, store, submitted, log }
}

/// Runs the scenario and returns its transcript.
pub fn transcript() -> String {
    let mut h = restart(Store { next_message: 1, ..Store::default() }, Millis(0), String::new());
    // The follow-up is submitted while the first turn's tool result is pending, so it folds.
    h.submitted.push_back(Submit::new("dev", "What files are here?").with_run_id("run-1"));
    h.inbox.push_back(Input::Submit(h.submitted[0].clone()));
    h.submit(Submit::new("dev", "And be brief."));
    h.now = Millis(100);
    h.submit(Submit::new("ops", "Migrate the database.").with_run_id("run-2"));
    h.now = Millis(200);
    h.send(Input::CancelRun { run_id: RunId::new("run-2") });
    h.fire_timers();
    h.submit(Submit::new("qa", "Find the tests.").with_run_id("run-3"));
    // The process stops while run-3's tool runs: the engine is gone, the store remains.
    let mut h = restart(h.store, Millis(6_000), h.log);
    h.submit(Submit::new("qa", "Find the tests.").with_run_id("run-3"));
    h.send(Input::Shutdown);
    let (stopped, unfinished) = (h.engine.is_stopped(), h.engine.unfinished());
    writeln!(h.log, "{:>6} ms  stopped={stopped} unfinished={unfinished}", h.now.0).unwrap();
    h.log
}

#[allow(dead_code)] // unused when the test includes this file as a module
fn main() {
    print!("{}", transcript());
}
