//! The named lifecycle scenarios behind `traces/*.jsonl`.
//!
//! Each scenario drives the scripted host through one rule of SPEC or one appendix flaw and
//! states, by hand, the outcome every submission must reach. `traces.rs` turns each into a
//! trace file with the outputs the core produced ("blessed", like a snapshot), replays every
//! file with all invariants checked after every input, and checks the stated outcomes.

use std::collections::BTreeMap;

use turnstile_core::trace::Trace;
use turnstile_core::{
    Acceptor, Attachment, CallId, Config, ErrorClass, Fingerprint, FinishReason, Input, KnownRun,
    Mode, Outcome, ProviderError, RunId, Seq, SessionId, Setup, Start, StepEvent, StopTurn, Submit,
    ToolOutput, ToolSpec, Usage,
};

use crate::harness::Host;

/// One named scenario.
pub struct Scenario {
    /// The file name without `.jsonl`.
    pub name: &'static str,
    /// The rule or flaw it pins down.
    pub rule: &'static str,
    /// The configuration.
    pub config: fn() -> Config,
    /// The start state.
    pub start: fn() -> Start,
    /// Drives the host.
    pub run: fn(&mut Host),
    /// The outcome each sequence must reach, stated by hand.
    pub outcomes: &'static [(u64, Outcome)],
}

impl Scenario {
    /// Runs the scenario and returns its trace (without expected outputs).
    #[must_use]
    pub fn trace(&self) -> Trace {
        let mut h = Host::with_start((self.config)(), (self.start)());
        (self.run)(&mut h);
        let mut t = h.trace();
        t.header.name = Some(self.name.to_owned());
        t.header.rule = Some(self.rule.to_owned());
        t.header.origin = Some(serde_json::json!({ "scenario": self.name }));
        t.header.expect_outcomes =
            Some(self.outcomes.iter().map(|(s, o)| (Seq(*s), *o)).collect::<BTreeMap<_, _>>());
        t
    }
}

fn s(id: &str) -> SessionId {
    SessionId::new(id)
}

fn own(session: &str, prompt: &str) -> Submit {
    Submit::new(session, prompt).with_mode(Mode::OwnTurn)
}

fn cancel(h: &mut Host, session: &str) {
    h.send(Input::Cancel { session: s(session), up_to: None });
}

/// A step that calls `ls`, a tool the host drops on abort.
fn tool_step(h: &mut Host, seq: Seq, call: &str) {
    h.tool_call(seq, call, "ls");
    h.finish(seq, FinishReason::ToolCalls);
}

/// A step that calls `write`, a tool an abort must leave to finish (SPEC 4.9).
fn finishing_tool_step(h: &mut Host, seq: Seq, call: &str) {
    h.tool_call(seq, call, "write");
    h.finish(seq, FinishReason::ToolCalls);
}

fn default_config() -> Config {
    Config::default()
}

fn no_start() -> Start {
    Start::default()
}

macro_rules! scenario {
    ($name:literal, $rule:literal, $outcomes:expr, $run:expr) => {
        Scenario {
            name: $name,
            rule: $rule,
            config: default_config,
            start: no_start,
            run: $run,
            outcomes: $outcomes,
        }
    };
}

use Outcome::{Cancelled, Completed, Failed, Folded, Interrupted};

mod admission;
mod agents;
mod cancel;
mod retries;
mod summary;
mod turn;
mod watchdog;

/// Every scenario, in file-name order.
#[must_use]
pub fn all() -> Vec<Scenario> {
    let mut v: Vec<Scenario> = [
        admission::scenarios(),
        cancel::scenarios(),
        turn::scenarios(),
        retries::scenarios(),
        summary::scenarios(),
        agents::scenarios(),
        watchdog::scenarios(),
    ]
    .into_iter()
    .flatten()
    .collect();
    v.sort_by_key(|s| s.name);
    v
}
