//! The checks after every seed: the store (intact, nothing to recover, legal histories, the
//! ledger agreeing with every answer a client was given), the sub-agents, the flight traces
//! through the core's replay (every invariant after every input, I12), and the user's checks.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};
use turnstile_core::{
    CANCELLED_TOOL_RESULT, NEW_AGENT_TITLE, NO_TEXT_OUTPUT, Outcome, SessionId, Trace,
};
use turnstile_host::store::{Location, Reader, RunRow, RunState, Store, StoreConfig};
use turnstile_host::{CompletionRecord, Cursor, FlightBuffer};

use crate::world::SeedReport;
use crate::world::clients::Observed;
use crate::world::tools::LEFT_TO_FINISH;

/// What a check of the user's sees after a seed ran and the host shut down.
pub struct Run<'a> {
    /// The seed.
    pub seed: u64,
    /// The store exactly as the last host left it (not reopened, so nothing was recovered).
    pub store: &'a Reader,
    /// The ledger: every submission, its state and its RunComplete.
    pub ledger: &'a [RunRow],
    /// The core's flight trace of each host incarnation, in order (a crash starts another).
    pub traces: &'a [Trace],
}

/// The test of a check: what is wrong, or `Ok`.
pub(crate) type Test = Box<dyn FnOnce(&Run<'_>) -> Result<(), String> + Send>;

/// A check of the user's: its name (it heads the violation) and its test.
pub(crate) struct Check {
    pub(crate) name: String,
    pub(crate) test: Test,
}

/// Runs the user's checks over the store the last host left at `location`.
pub(crate) fn user_checks(
    location: &Location,
    checks: Vec<Check>,
    traces: &[Trace],
    report: &mut SeedReport,
) {
    if checks.is_empty() {
        return;
    }
    let reader = match Reader::open_at(location) {
        Ok(r) => r,
        Err(e) => return report.violations.push(format!("the store cannot be read: {e}")),
    };
    let ledger = reader.runs().unwrap_or_default();
    let run = Run { seed: report.seed, store: &reader, ledger: &ledger, traces };
    for check in checks {
        if let Err(why) = (check.test)(&run) {
            report.violations.push(format!("check `{}`: {why}", check.name));
        }
    }
}

/// The store after a clean shutdown: intact, nothing to recover, histories legal, and the ledger
/// agrees with every answer a client was given.
pub(crate) fn check_store(
    location: &Location,
    observed: &Observed,
    prep_failures: &BTreeMap<SessionId, u64>,
    followed: &[(Cursor, CompletionRecord)],
    report: &mut SeedReport,
) {
    let v = &mut report.violations;
    v.extend(observed.problems.iter().cloned());
    // The store exactly as the last process left it: a reopen would run recovery, which repairs
    // what it finds and would hide it.
    let reader = match Reader::open_at(location) {
        Ok(r) => r,
        Err(e) => return v.push(format!("the store cannot be read: {e}")),
    };
    if let Err(e) = reader.integrity_check() {
        v.push(format!("integrity: {e}"));
    }
    let runs = reader.runs().unwrap_or_default();
    for row in &runs {
        if row.state != RunState::Finished {
            v.push(format!("seq {} is unfinished after shutdown", row.seq));
        }
        if let Some((_, record)) = &row.completion {
            let who = if row.session.is_child() { "sub-agent " } else { "" };
            *report.outcomes.entry(format!("{who}{:?}", record.outcome)).or_default() += 1;
        }
    }
    for s in reader.sessions().unwrap_or_default() {
        for p in reader.protocol_problems(&s.id).unwrap_or_default() {
            v.push(format!("session {}: {p}", s.id));
        }
    }
    // The completion stream is lossless and in ledger order, across restarts: the follower saw
    // every recorded outcome exactly once.
    let mut ledger: Vec<(Cursor, CompletionRecord)> =
        runs.iter().filter_map(|r| r.completion.clone()).collect();
    ledger.sort_by_key(|(c, _)| *c);
    if followed != ledger.as_slice() {
        let first = followed.iter().zip(&ledger).position(|(a, b)| a != b);
        v.push(format!(
            "the completion stream gave {} entries, the ledger holds {} (first difference at {first:?})",
            followed.len(),
            ledger.len()
        ));
    }
    // SPEC 4.11: a child session has its parent and title, and the parent's result for the
    // `agent` call is what the child's ledger row says the child ended with.
    for problem in sub_agent_problems(&reader, &runs) {
        v.push(problem);
    }
    // G-24: a failed preparation fails its own submission only.
    let mut prep_failed: BTreeMap<SessionId, u64> = BTreeMap::new();
    for row in &runs {
        let kind = row.completion.as_ref().and_then(|c| c.1.error.as_ref()).map(|e| e.kind);
        if kind == Some(turnstile_core::ErrorKind::Preparation) {
            *prep_failed.entry(row.session.clone()).or_default() += 1;
        }
    }
    for (session, n) in prep_failed {
        let failed = prep_failures.get(&session).copied().unwrap_or(0);
        if n > failed {
            v.push(format!("session {session}: {n} submissions failed preparation, the provider failed {failed}"));
        }
    }
    // A completed message holds one attempt's text only (a retry resets the content first).
    for row in &runs {
        let Some((_, record)) = &row.completion else { continue };
        let tags: std::collections::BTreeSet<&str> = record
            .text
            .as_deref()
            .unwrap_or("")
            .split_whitespace()
            .filter_map(|w| w.split_once('w').map(|(q, _)| q))
            .collect();
        if tags.len() > 1 {
            v.push(format!("seq {}: its text mixes requests {tags:?}", row.seq));
        }
    }
    for (run, seq) in &observed.accepted {
        let row = reader.run(run).ok().flatten();
        let recorded = row.as_ref().and_then(|r| r.completion.as_ref()).map(|c| &c.1);
        match (row.as_ref(), observed.results.get(run).map(Vec::as_slice)) {
            (None, _) => v.push(format!("accepted run {run} has no ledger row")),
            (Some(r), _) if r.seq != *seq => {
                v.push(format!("run {run}: accepted as {seq}, ledger says {}", r.seq))
            }
            (_, None | Some([])) => v.push(format!("run {run}: its waiter never got an answer")),
            (_, Some([Ok(got)])) if Some(got) == recorded => {}
            (_, Some([one])) => {
                v.push(format!("run {run}: waiter got {one:?}, ledger has {recorded:?}"))
            }
            (_, Some(many)) => v.push(format!("run {run}: its waiter got {} answers", many.len())),
        }
    }
    for (run, seq) in &observed.existing {
        if observed.accepted.get(run).is_some_and(|s| s != seq) {
            v.push(format!("resubmission of {run} answered with seq {seq}, accepted as another"));
        }
    }
    drop(reader);
    match Store::open(&StoreConfig::at(location.clone())) {
        Ok(opened) => {
            if !opened.recovered.is_empty() {
                let n = opened.recovered.len();
                v.push(format!("a clean shutdown left {n} submissions to recover"));
            }
            let _ = opened.store.close();
        }
        Err(e) => v.push(format!("the store did not reopen: {e}")),
    }
}

/// Every child session against its ledger row and its parent's result (SPEC 4.11). A result
/// the host wrote itself (`synthetic`: a repair after a crash) is not the child's to decide.
fn sub_agent_problems(reader: &Reader, runs: &[RunRow]) -> Vec<String> {
    let mut problems = Vec::new();
    for s in reader.sessions().unwrap_or_default().into_iter().filter(|s| s.id.is_child()) {
        let id = &s.id;
        if s.title.as_deref() != Some(NEW_AGENT_TITLE) {
            problems.push(format!("child session {id} is titled {:?}", s.title));
        }
        let Some(parent) = &s.parent else {
            problems.push(format!("child session {id} has no parent"));
            continue;
        };
        let rows: Vec<&RunRow> = runs.iter().filter(|r| &r.session == id).collect();
        let [row] = rows.as_slice() else {
            problems.push(format!("child session {id} has {} ledger rows", rows.len()));
            continue;
        };
        if row.run_id.is_some() {
            problems.push(format!("child session {id}: its submission has a RunId"));
        }
        let Some((_, record)) = &row.completion else { continue };
        let (message, call) = id.as_str().split_once("$$").unwrap_or_default();
        let stored = reader.messages(parent).unwrap_or_default();
        let result = stored
            .iter()
            .filter(|m| m.id.to_string() == message)
            .flat_map(|m| &m.results)
            .find(|r| r.call.as_str() == call);
        let Some(result) = result.filter(|r| !r.synthetic) else { continue };
        let text = record.text.clone().unwrap_or_default();
        let expected = match record.outcome {
            Outcome::Completed if text.is_empty() => (NO_TEXT_OUTPUT.to_owned(), true),
            Outcome::Completed => (text, false),
            Outcome::Failed => {
                let message = record.error.as_ref().map_or("", |e| e.message.as_str());
                (format!("Failed to generate response: {message}"), true)
            }
            _ => (CANCELLED_TOOL_RESULT.to_owned(), true),
        };
        if (result.content.clone(), result.is_error) != expected {
            problems.push(format!(
                "child session {id} ended {:?}, but its parent's result is {:?} (error {})",
                record.outcome, result.content, result.is_error
            ));
        }
    }
    problems
}

/// SPEC 4.7 read off the trace: a manual summarize is accepted only when the session has no
/// unfinished submission (the core's checkers see states, not this reply rule).
fn summaries_while_busy(trace: &Trace) -> Vec<String> {
    let mut unfinished: BTreeMap<String, std::collections::BTreeSet<u64>> = BTreeMap::new();
    let mut problems = Vec::new();
    for (line, l) in &trace.lines {
        let outputs = l.expect.as_deref().unwrap_or(&[]);
        let kind = |o: &serde_json::Value| o.get("kind").cloned().unwrap_or_default();
        if let turnstile_core::Input::Summarize { session } = &l.input {
            let accepted = outputs.first().is_some_and(|o| kind(o)["reply"] == "summarizing");
            let busy = unfinished.get(session.as_str()).is_some_and(|s| !s.is_empty());
            if accepted && busy {
                problems.push(format!(
                    "line {line}: summarize of {session} accepted while it has unfinished submissions"
                ));
            }
        }
        for o in outputs {
            let k = kind(o);
            let (session, seq) = (k["session"].as_str().unwrap_or(""), k["seq"].as_u64());
            match (k["type"].as_str(), k["reply"].as_str(), k["op"].as_str(), seq) {
                (Some("reply"), Some("accepted"), _, Some(seq))
                | (Some("store"), _, Some("child_accepted"), Some(seq)) => {
                    unfinished.entry(session.to_owned()).or_default().insert(seq);
                }
                (Some("finished"), _, _, Some(seq)) => {
                    if let Some(s) = unfinished.get_mut(session) {
                        s.remove(&seq);
                    }
                }
                _ => {}
            }
        }
    }
    problems
}

/// SPEC 4.9 from the tool's side: a call of the tool that an abort must leave to finish
/// ([`LEFT_TO_FINISH`]) is never aborted, so the host never cuts it off half-way. (The core
/// aborts only what the setup says the host may drop: this checks that the host said it.)
fn finishing_calls_aborted(trace: &Trace) -> Vec<String> {
    let mut finishing = std::collections::BTreeSet::new();
    let mut problems = Vec::new();
    for (line, l) in &trace.lines {
        for o in l.expect.as_deref().unwrap_or(&[]) {
            let k = &o["kind"];
            let call = (k["call"]["seq"].as_u64(), k["call"]["call"].as_str().map(str::to_owned));
            match k["type"].as_str() {
                Some("run_tool") if k["name"] == LEFT_TO_FINISH => {
                    finishing.insert(call);
                }
                Some("abort_tool") if finishing.contains(&call) => problems.push(format!(
                    "line {line}: call {:?} of `{LEFT_TO_FINISH}`, a tool an abort must leave to \
                     finish, was aborted (cut off half-way)",
                    call.1.unwrap_or_default()
                )),
                _ => {}
            }
        }
    }
    problems
}

/// Every incarnation's flight trace replays through the core: every invariant after every
/// input, and the outputs recorded are the outputs produced (I12). The hash covers them all.
/// Returns the traces that parse, and the text of the one to keep if the seed fails: the
/// first incarnation whose trace the core's replay rejects (what shrinking needs), else the
/// last one's.
pub(crate) fn check_traces(
    flights: &[FlightBuffer],
    report: &mut SeedReport,
) -> (Vec<Trace>, Option<String>) {
    let mut all = String::new();
    let mut failing = None;
    let mut parsed = Vec::new();
    for flight in flights {
        let text = flight.text();
        let (passed, trace) = check_trace(&text, report, &mut all);
        parsed.extend(trace);
        if !passed && failing.is_none() {
            failing = Some(text);
        }
    }
    report.trace_hash = Sha256::digest(all.as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
    (parsed, failing.or_else(|| flights.last().map(FlightBuffer::text)))
}

/// Checks one incarnation's trace: false when the core's replay rejects it, and the trace
/// when it parses.
fn check_trace(text: &str, report: &mut SeedReport, all: &mut String) -> (bool, Option<Trace>) {
    all.push_str(text);
    match Trace::parse(text) {
        Ok(trace) => {
            report.events += trace.lines.len() as u64;
            report.violations.extend(summaries_while_busy(&trace));
            report.violations.extend(finishing_calls_aborted(&trace));
            if let Err(e) = turnstile_core::replay(&trace) {
                report.violations.push(format!("the core's trace fails replay: {e}"));
                return (false, Some(trace));
            }
            (true, Some(trace))
        }
        Err(e) => {
            report.violations.push(format!("the flight trace does not parse: {e}"));
            (false, None)
        }
    }
}
