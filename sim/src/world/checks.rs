//! The checks after every seed: the store (intact, nothing to recover, legal histories, the
//! ledger agreeing with every answer a client was given), the sub-agents, the flight traces
//! through the core's replay (every invariant after every input, I12), and the user's checks.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};
use turnstile_core::{
    CANCELLED_TOOL_RESULT, NEW_AGENT_TITLE, NO_TEXT_OUTPUT, Outcome, SessionId, StepEvent, Trace,
};
use turnstile_host::store::{
    Location, Reader, RunRow, RunState, Store, StoreConfig, StoredMessage, StoredRole,
};
use turnstile_host::{CompletionRecord, Cursor, FlightBuffer, RequestKind};

use crate::world::clients::Observed;
use crate::world::provider::Streamed;
use crate::world::report::SeedReport;
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
    streamed: &[Streamed],
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
    // A finished message holds the text of one attempt as the provider sent it (a retry resets
    // the content first), and the ledger reports the text its message holds.
    for s in reader.sessions().unwrap_or_default() {
        let messages = reader.messages(&s.id).unwrap_or_default();
        v.extend(texts_not_sent(&s.id, &messages, streamed));
        for row in runs.iter().filter(|r| r.session == s.id) {
            let Some((_, record)) = &row.completion else { continue };
            let (Some(id), Some(text)) = (record.message_id, &record.text) else { continue };
            let stored = messages.iter().find(|m| m.id == id).map(|m| m.text.as_str());
            if stored != Some(text.as_str()) {
                v.push(format!(
                    "seq {}: the ledger's text is {:?}, its message {id:?} holds {:?}",
                    row.seq,
                    short(text),
                    stored.map(short)
                ));
            }
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

/// SPEC 4.4, 4.5 and 4.7 against what the provider sent: every finished assistant message of
/// `session` holds the text of one attempt of a step that the provider streamed for the
/// session, as the host took it from the provider (the decoded text of the bytes sent,
/// whatever a fault changed in them), after SPEC 4.4's rule for a leading "\n"; every finished
/// summary the text of one summary attempt. Only a message that ended cancelled or with an
/// error (a cancel, a failure, a crash) may hold a prefix of it (empty also when no request
/// went out). A message mixing attempts (a retry appended to the failed attempt, or a stale
/// stream's text) holds neither.
///
/// The provider cannot tell which step a request is for (the request does not say), so the
/// candidates are every attempt of the session: a mix passes only if it equals (or, where a
/// prefix is allowed, starts) another whole attempt of the same session, which the seeded
/// texts, tagged with their request, never do.
pub(crate) fn texts_not_sent(
    session: &SessionId,
    messages: &[StoredMessage],
    streamed: &[Streamed],
) -> Vec<String> {
    let attempts = |kind: RequestKind| {
        streamed.iter().filter(move |a| &a.session == session && a.kind == kind)
    };
    let steps: Vec<String> =
        attempts(RequestKind::Step).flat_map(|a| step_texts(&a.events)).collect();
    let summaries: Vec<String> =
        attempts(RequestKind::Summary).map(|a| summary_text(&a.events)).collect();
    let mut problems = Vec::new();
    for m in messages {
        let Some(finish) = &m.finish else { continue };
        let reason = finish.get("reason").and_then(serde_json::Value::as_str).unwrap_or("");
        let (kind, texts, partial) = match m.role {
            StoredRole::Assistant => {
                (RequestKind::Step, &steps, matches!(reason, "canceled" | "error"))
            }
            StoredRole::Summary => (RequestKind::Summary, &summaries, reason == "error"),
            StoredRole::User => continue,
        };
        // Empty is the start of every attempt, also of one never sent (a cancel before the
        // request went out).
        let nothing = partial && m.text.is_empty();
        if nothing || texts.iter().any(|t| *t == m.text || (partial && t.starts_with(&m.text))) {
            continue;
        }
        let whole = if partial { "the start of" } else { "the text of" };
        problems.push(format!(
            "session {session}: message {:?} (seq {:?}, {reason}) holds {:?}, not {whole} any of \
             the {} attempts the provider streamed for the session: its text mixes attempts or \
             was never sent",
            m.id,
            m.seq.map(|s| s.0),
            short(&m.text),
            attempts(kind).count()
        ));
    }
    problems
}

/// The texts an assistant message may hold after one attempt's events (SPEC 4.4): the text
/// deltas in order, one leading "\n" removed from each while the message has no content part
/// yet (no text, no reasoning section, no tool call). A tool call new in the attempt is a
/// content part unless an earlier step of the turn used its id (or the step is at its call
/// limit), which the provider cannot see: both readings are kept, so more than one text may
/// come out (they differ only in such a newline).
pub(crate) fn step_texts(events: &[StepEvent]) -> Vec<String> {
    // Each reading: whether the message has a content part yet, and its text.
    let mut readings: Vec<(bool, String)> = vec![(false, String::new())];
    let mut reasoning = false;
    let mut calls = std::collections::BTreeSet::new();
    for event in events {
        match event {
            StepEvent::ReasoningStart if !reasoning => {
                reasoning = true;
                readings.iter_mut().for_each(|r| r.0 = true);
            }
            StepEvent::TextDelta { text } => {
                for (any, stored) in &mut readings {
                    let text =
                        if *any { text.as_str() } else { text.strip_prefix('\n').unwrap_or(text) };
                    if !text.is_empty() {
                        *any = true;
                        stored.push_str(text);
                    }
                }
            }
            StepEvent::ToolInputStart { id, .. } | StepEvent::ToolCall { id, .. }
                if calls.insert(id.clone()) =>
            {
                let without: Vec<(bool, String)> =
                    readings.iter().filter(|r| !r.0).map(|r| (true, r.1.clone())).collect();
                readings.extend(without);
            }
            _ => {}
        }
        readings.sort();
        readings.dedup();
    }
    readings.into_iter().map(|(_, text)| text).collect()
}

/// The text a summary holds after one attempt's events (SPEC 4.7): every text delta, in order.
pub(crate) fn summary_text(events: &[StepEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            StepEvent::TextDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

/// A text cut to its first 120 characters, for a violation's line.
fn short(text: &str) -> String {
    match text.char_indices().nth(120) {
        Some((end, _)) => format!("{}...", &text[..end]),
        None => text.to_owned(),
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

#[cfg(test)]
mod tests {
    use turnstile_core::{ErrorClass, FinishReason, MessageId, ProviderError, Seq};
    use turnstile_wire::{Api, Decoder};

    use super::*;

    /// The recorded Anthropic answer the world served in seeds 402396 and 495722.
    const HELLO: &[u8] = include_bytes!(
        "../../../tests/fixtures/providers/anthropic-messages/\
         TestAnthropicCommon__claude-sonnet-4__simple_streaming/00.response.body"
    );

    fn s0() -> SessionId {
        SessionId::new("s0")
    }

    fn step(events: Vec<StepEvent>) -> Streamed {
        Streamed { session: s0(), kind: RequestKind::Step, events }
    }

    fn text(t: &str) -> StepEvent {
        StepEvent::TextDelta { text: t.to_owned() }
    }

    fn finished() -> StepEvent {
        StepEvent::Finished { reason: FinishReason::Stop, usage: None }
    }

    fn failed(status: u16) -> StepEvent {
        let error = ProviderError {
            class: ErrorClass::Provider,
            status: Some(status),
            ..ProviderError::default()
        };
        StepEvent::Failed { error }
    }

    /// A finished message of `role` in session s0 holding `text`, finished as `finish` says.
    fn message(role: StoredRole, text: &str, finish: serde_json::Value) -> StoredMessage {
        StoredMessage {
            id: MessageId(8),
            seq: Some(Seq(4)),
            role,
            text: text.to_owned(),
            attachments: Vec::new(),
            synthetic: false,
            reasoning: None,
            reasoning_signature: None,
            reasoning_done: false,
            finish: Some(finish),
            calls: Vec::new(),
            results: Vec::new(),
        }
    }

    fn assistant(text: &str, reason: &str) -> StoredMessage {
        message(StoredRole::Assistant, text, serde_json::json!({ "reason": reason }))
    }

    fn problems(stored: &StoredMessage, streamed: &[Streamed]) -> Vec<String> {
        texts_not_sent(&s0(), std::slice::from_ref(stored), streamed)
    }

    /// What the client decodes from `body` with the byte at the first `find` (plus `at`) XORed
    /// with `flip`: the recorded answer with one byte changed, as the world's provider sends it.
    fn decoded_with_a_byte_changed(find: &str, at: usize, flip: u8) -> Vec<StepEvent> {
        let mut body = HELLO.to_vec();
        let i = body.windows(find.len()).position(|w| w == find.as_bytes()).expect("in the body");
        body[i + at] ^= flip;
        let mut decoder = Decoder::new(Api::AnthropicMessages);
        let mut events = Vec::new();
        decoder.feed(&body, &mut events).expect("the changed byte is inside a text delta");
        decoder.finish(&mut events).expect("the stream ends");
        events
    }

    #[test]
    fn a_recorded_answer_with_a_byte_changed_inside_a_text_delta_is_the_text_it_sent() {
        // Seed 402396: "You" arrived as "Yow" (the old word heuristic read "Yow", "which" and
        // "way" as the text of two requests); seed 495722: "casual" arrived as "cawual".
        for (find, at, flip, stored) in [
            (
                "\\n\\nYou\"",
                6,
                0b10,
                "Olá! (That's \"hi\" in Portuguese)\n\nYow could also say \"Oi!\" which is a more \
                 casual way to say hi in Portuguese.",
            ),
            (
                " casual way",
                3,
                0b100,
                "Olá! (That's \"hi\" in Portuguese)\n\nYou could also say \"Oi!\" which is a more \
                 cawual way to say hi in Portuguese.",
            ),
        ] {
            let sent = step(decoded_with_a_byte_changed(find, at, flip));
            assert_eq!(
                problems(&assistant(stored, "end_turn"), std::slice::from_ref(&sent)),
                Vec::<String>::new()
            );
            // The unchanged text is not what was sent.
            let recorded = step(decoded_with_a_byte_changed(find, at, 0));
            let whole = summary_text(&recorded.events);
            assert_eq!(problems(&assistant(&whole, "end_turn"), &[sent]).len(), 1, "{find}");
        }
    }

    #[test]
    fn a_message_mixing_two_attempts_is_reported() {
        // A 429 after some text, then a retry without its reset: the text of both attempts.
        let first = step(vec![text("q1w0 "), text("q1w1 "), failed(429)]);
        let second = step(vec![text("q2w0 "), finished()]);
        let sent = [first, second];
        assert_eq!(problems(&assistant("q2w0 ", "end_turn"), &sent), Vec::<String>::new());
        let mixed = problems(&assistant("q1w0 q1w1 q2w0 ", "end_turn"), &sent);
        assert_eq!(mixed.len(), 1, "{mixed:?}");
        assert!(mixed[0].contains("mixes attempts"), "{mixed:?}");
        // A mix is no prefix of either attempt, so a failed message holding it is reported too.
        assert_eq!(problems(&assistant("q1w0 q1w1 q2w0 ", "error"), &sent).len(), 1);
        // The same with recorded answers, where nothing tags the text: a stream cut short and
        // its retry, the same body whole.
        let cut = step(decoded_with_a_byte_changed(" casual way", 0, 0)[..8].to_vec());
        let whole = step(decoded_with_a_byte_changed(" casual way", 0, 0));
        let (a, b) = (summary_text(&cut.events), summary_text(&whole.events));
        assert!(!a.is_empty() && a.len() < b.len(), "{a:?} {b:?}");
        let sent = [cut, whole];
        assert_eq!(problems(&assistant(&b, "end_turn"), &sent), Vec::<String>::new());
        assert_eq!(problems(&assistant(&format!("{a}{b}"), "end_turn"), &sent).len(), 1);
    }

    #[test]
    fn only_a_cancelled_or_failed_message_may_hold_the_start_of_an_attempt() {
        let sent = [step(vec![text("q1w0 "), text("q1w1 "), finished()])];
        for reason in ["canceled", "error"] {
            assert_eq!(problems(&assistant("q1w0 ", reason), &sent), Vec::<String>::new());
            assert_eq!(problems(&assistant("", reason), &sent), Vec::<String>::new());
        }
        for reason in ["end_turn", "tool_use", "max_tokens"] {
            assert_eq!(problems(&assistant("q1w0 ", reason), &sent).len(), 1, "{reason}");
        }
        // A cancel before the request went out: nothing was sent, and nothing is held.
        assert_eq!(problems(&assistant("", "canceled"), &[]), Vec::<String>::new());
        assert_eq!(problems(&assistant("", "end_turn"), &[]).len(), 1);
        // Another session's attempt is not this message's.
        let elsewhere = Streamed { session: SessionId::new("s1"), ..sent[0].clone() };
        assert_eq!(problems(&assistant("q1w0 q1w1 ", "end_turn"), &[elsewhere]).len(), 1);
        // An unfinished message is not checked (the store's protocol check reports it).
        let mut open = assistant("q9w0 ", "end_turn");
        open.finish = None;
        assert_eq!(problems(&open, &sent), Vec::<String>::new());
    }

    #[test]
    fn a_leading_newline_goes_while_the_message_has_no_content_part() {
        // SPEC 4.4: one "\n" from each delta until a content part exists.
        let events = vec![text("\n"), text("\n\nHi"), text("\nthere"), finished()];
        assert_eq!(step_texts(&events), vec!["\nHi\nthere".to_owned()]);
        let sent = [step(events)];
        assert_eq!(problems(&assistant("\nHi\nthere", "end_turn"), &sent), Vec::<String>::new());
        assert_eq!(problems(&assistant("\n\nHi\nthere", "end_turn"), &sent).len(), 1);
        // A reasoning section is a content part: the newline stays.
        let reasoned = vec![StepEvent::ReasoningStart, StepEvent::ReasoningEnd { signature: None }];
        let events = [reasoned, vec![text("\nHi"), finished()]].concat();
        assert_eq!(step_texts(&events), vec!["\nHi".to_owned()]);
        // A reasoning delta without its start is ignored, and is none.
        let events = vec![StepEvent::ReasoningDelta { text: "x".into() }, text("\nHi")];
        assert_eq!(step_texts(&events), vec!["Hi".to_owned()]);
        // A tool call is one unless an earlier step of the turn used its id, which the provider
        // cannot see: both texts are the attempt's.
        let id = turnstile_core::CallId::new("c1");
        let start = StepEvent::ToolInputStart { id: id.clone(), name: "view".into() };
        let call = StepEvent::ToolCall { id, name: "view".into(), input: "{}".into() };
        let events = vec![start, call, text("\nHi"), text("\nyou")];
        assert_eq!(step_texts(&events), vec!["\nHi\nyou".to_owned(), "Hi\nyou".to_owned()]);
    }

    #[test]
    fn a_summary_holds_one_summary_attempt_and_no_newline_goes() {
        let summary = |events| Streamed { session: s0(), kind: RequestKind::Summary, events };
        let sent = [
            summary(vec![text("\nq3w0 "), failed(503)]),
            summary(vec![text("\nq4w0 "), text("q4w1 "), finished()]),
            step(vec![text("q5w0 "), finished()]),
        ];
        let done = |t: &str| message(StoredRole::Summary, t, serde_json::json!({"reason": "done"}));
        assert_eq!(problems(&done("\nq4w0 q4w1 "), &sent), Vec::<String>::new());
        assert_eq!(problems(&done("\nq3w0 \nq4w0 q4w1 "), &sent).len(), 1);
        // A step's text is no summary's.
        assert_eq!(problems(&done("q5w0 "), &sent).len(), 1);
        let error = serde_json::json!({"reason": "error", "title": "t", "message": "m"});
        let failed = message(StoredRole::Summary, "\nq4w0 ", error);
        assert_eq!(problems(&failed, &sent), Vec::<String>::new());
    }
}
