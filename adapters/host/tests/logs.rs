//! The host's logs ("Logs" in the crate docs), captured by a layer of this test's own around
//! real host runs: the events a person debugging a run needs are there, at their levels, with
//! `session`, `seq` and `run_id` as fields; and no prompt, answer or tool input reaches a
//! record at INFO or above.
//!
//! One subscriber is installed for the whole test binary (the host's tasks run on the runtime's
//! threads, so a thread-local default would miss them); each test finds its own events by its
//! sessions and RunIds, and the content check covers everything captured.

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record as SpanValues};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::{Context, SubscriberExt as _};
use tracing_subscriber::registry::LookupSpan;
use turnstile_core::{ErrorKind, Outcome, ProviderError, Rejection, RunId, SessionId, StepEvent};
use turnstile_core::{StopReason, Submit};
use turnstile_host::store::Fault;
use turnstile_host::{
    Answer, EchoTool, Host, HostConfig, Scripted, ScriptedProvider, SubmitError, ToolSet, Usage,
    WaitError,
};

/// The prompt of every test here: it must never be logged at INFO or above.
const PROMPT_SECRET: &str = "PROMPT-SECRET-42";
/// What the scripted model answers, and what it passes to a tool: content too.
const ANSWER_SECRET: &str = "ANSWER-SECRET-7";
const TOOL_SECRET: &str = "TOOL-SECRET-9";

/// One captured event, or one span as it was created (its fields as recorded then, or later).
#[derive(Clone, Debug)]
struct Captured {
    span: bool,
    level: Level,
    target: String,
    /// The event's message, or the span's name.
    message: String,
    /// The event's fields, with those of every span it is in (outermost first, the event's
    /// own last), as a formatting subscriber shows them.
    fields: BTreeMap<String, String>,
}

impl Captured {
    fn get(&self, field: &str) -> Option<&str> {
        self.fields.get(field).map(String::as_str)
    }

    /// Everything a formatting subscriber could print of this record.
    fn text(&self) -> String {
        let fields: Vec<String> = self.fields.iter().map(|(k, v)| format!("{k}={v}")).collect();
        format!("{} {} {}", self.target, self.message, fields.join(" "))
    }
}

#[derive(Default)]
struct Fields(BTreeMap<String, String>);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

/// The capturing layer: every span and event, at every level, into one shared list.
struct Capture(Arc<Mutex<Vec<Captured>>>);

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Capture {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        let meta = attrs.metadata();
        self.push(Captured {
            span: true,
            level: *meta.level(),
            target: meta.target().to_owned(),
            message: meta.name().to_owned(),
            fields: fields.0.clone(),
        });
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(fields);
        }
    }

    fn on_record(&self, id: &Id, values: &SpanValues<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut more = Fields::default();
        values.record(&mut more);
        let meta = span.metadata();
        self.push(Captured {
            span: true,
            level: *meta.level(),
            target: meta.target().to_owned(),
            message: meta.name().to_owned(),
            fields: more.0.clone(),
        });
        if let Some(fields) = span.extensions_mut().get_mut::<Fields>() {
            fields.0.extend(more.0);
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        if let Some(scope) = ctx.event_scope(event) {
            for span in scope.from_root() {
                if let Some(f) = span.extensions().get::<Fields>() {
                    fields.extend(f.0.clone());
                }
            }
        }
        let mut own = Fields::default();
        event.record(&mut own);
        let message = own.0.remove("message").unwrap_or_default();
        fields.extend(own.0);
        let meta = event.metadata();
        self.push(Captured {
            span: false,
            level: *meta.level(),
            target: meta.target().to_owned(),
            message,
            fields,
        });
    }
}

impl Capture {
    fn push(&self, c: Captured) {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(c);
    }
}

/// The binary's one capture, installed as the global subscriber on first use.
fn captured() -> Vec<Captured> {
    static LOG: OnceLock<Arc<Mutex<Vec<Captured>>>> = OnceLock::new();
    let log = LOG.get_or_init(|| {
        let log = Arc::new(Mutex::new(Vec::new()));
        let subscriber = tracing_subscriber::registry().with(Capture(log.clone()));
        tracing::subscriber::set_global_default(subscriber).expect("the only subscriber");
        log
    });
    log.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
}

/// Installs the capture before a host runs.
fn install() {
    let _ = captured();
}

/// The events with this message whose fields include every `(name, value)` of `with`.
fn events<'a>(log: &'a [Captured], message: &str, with: &[(&str, &str)]) -> Vec<&'a Captured> {
    log.iter()
        .filter(|c| !c.span && c.message == message)
        .filter(|c| with.iter().all(|(k, v)| c.get(k) == Some(*v)))
        .collect()
}

/// The one event with this message and these fields, checked to be at `level`.
fn one<'a>(
    log: &'a [Captured],
    level: Level,
    message: &str,
    with: &[(&str, &str)],
) -> &'a Captured {
    let found = events(log, message, with);
    let [event] = found.as_slice() else {
        let near: Vec<String> =
            log.iter().filter(|c| c.message == message).map(Captured::text).collect();
        panic!("one {message:?} event with {with:?}, found {}: {near:#?}", found.len());
    };
    assert_eq!(event.level, level, "the level of {}", event.text());
    event
}

/// No record at INFO or above (the level order: ERROR < WARN < INFO < DEBUG < TRACE) carries
/// content: the prompt, the model's answer or a tool's input.
fn no_content_above_debug(log: &[Captured]) {
    let leaks: Vec<String> = log
        .iter()
        .filter(|c| c.level <= Level::INFO)
        .map(Captured::text)
        .filter(|t| [PROMPT_SECRET, ANSWER_SECRET, TOOL_SECRET].iter().any(|s| t.contains(s)))
        .collect();
    assert!(leaks.is_empty(), "content logged at INFO or above: {leaks:#?}");
}

fn config(dir: &tempfile::TempDir) -> HostConfig {
    common::config_in(dir.path())
}

fn usage() -> Usage {
    Usage { input_tokens: 10, output_tokens: 5, ..Usage::default() }
}

/// A run whose first attempt fails (503, retry after 20 ms), whose second calls a tool, and
/// whose last answers: its acceptance, activation, attempts, retry, tool call and completion
/// are logged with their fields, and none of its content is logged at INFO or above.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_logs_acceptance_activation_retry_tool_call_and_completion_but_no_content() {
    install();
    let dir = tempfile::tempdir().expect("dir");
    let provider = ScriptedProvider::new(|_, n| match n {
        0 => Answer(vec![Scripted::Event(StepEvent::Failed {
            error: ProviderError {
                status: Some(503),
                retry_after_ms: Some(20),
                message: "overloaded".into(),
                ..ProviderError::default()
            },
        })]),
        1 => Answer::tool_call("c1", "view", &format!("{{\"path\":\"{TOOL_SECRET}\"}}")),
        _ => Answer::streamed(&format!("{ANSWER_SECRET} done"), 2, 1, usage()),
    });
    let tools = ToolSet::new().with(EchoTool { name: "view".into(), delay_ms: 5 });
    let host = Host::open(config(&dir), Arc::new(provider), tools).await.expect("open");
    let prompt = format!("{PROMPT_SECRET} look at it");
    let run = host.submit(Submit::new("s-trace", prompt).with_run_id("r-trace")).await.expect("ok");
    let done = host.wait(&RunId::new("r-trace")).await.expect("done");
    assert_eq!((done.outcome, done.stop_reason), (Outcome::Completed, Some(StopReason::EndTurn)));
    assert!(done.text.as_deref().is_some_and(|t| t.contains(ANSWER_SECRET)), "{done:?}");
    host.shutdown().await.expect("shutdown");

    let log = captured();
    let seq = run.seq.0.to_string();
    let run_fields = [("session", "s-trace"), ("seq", seq.as_str()), ("run_id", "r-trace")];
    let engine = "turnstile_host::host::engine";

    let accepted = one(&log, Level::INFO, "submission accepted", &run_fields);
    assert_eq!((accepted.target.as_str(), accepted.get("mode")), (engine, Some("own_turn")));
    one(&log, Level::INFO, "turn activated", &run_fields);

    // Every attempt of the first step, numbered from 0, then the second step's.
    for (step, attempt) in [("0", "0"), ("0", "1"), ("1", "0")] {
        let with = [run_fields.as_slice(), &[("step", step), ("attempt", attempt)]].concat();
        one(&log, Level::DEBUG, "provider attempt started", &with);
    }
    let retry = one(&log, Level::WARN, "provider attempt failed: retrying", &run_fields);
    assert_eq!(
        (retry.get("reason"), retry.get("status"), retry.get("delay_ms"), retry.get("attempt")),
        (Some("overloaded"), Some("503"), Some("20"), Some("0")),
        "{}",
        retry.text()
    );
    assert_eq!(retry.get("class"), Some("provider"));

    // The tool call: its start and end, in its span (tool, call id, session).
    let call = [("tool", "view"), ("call_id", "c1"), ("session", "s-trace"), ("seq", seq.as_str())];
    one(&log, Level::DEBUG, "tool call started", &call);
    let ended = one(&log, Level::DEBUG, "tool call finished", &call);
    assert_eq!(ended.get("is_error"), Some("false"));
    assert!(ended.get("elapsed_ms").is_some(), "{}", ended.text());

    let finished = one(&log, Level::INFO, "submission finished", &run_fields);
    assert_eq!(
        (finished.get("outcome"), finished.get("stop_reason")),
        (Some("completed"), Some("end_turn"))
    );
    assert!(!events(&log, "shutdown requested", &[]).is_empty());
    assert!(!events(&log, "host shut down", &[]).is_empty());

    no_content_above_debug(&log);
}

/// A rejection, a cancel, store faults that are retried and then stop the host, and the
/// recovery of the next open are logged; the store's events name the error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rejections_store_faults_the_fail_stop_and_recovery_are_logged() {
    install();
    let dir = tempfile::tempdir().expect("dir");
    let mut c = config(&dir);
    c.store_retry = Duration::from_millis(100);
    let faults = common::faulty(&mut c);
    let hang = || ScriptedProvider::new(|_, _| Answer::hang());
    let host = Host::open(c.clone(), Arc::new(hang()), ToolSet::new()).await.expect("open");
    let empty = host.submit(Submit::new("s-fault", "").with_run_id("r-empty")).await;
    assert_eq!(empty, Err(SubmitError::Rejected(Rejection::PromptEmpty)));
    let prompt = format!("{PROMPT_SECRET} stuck");
    let run = host.submit(Submit::new("s-fault", prompt).with_run_id("r-stuck")).await.expect("ok");
    common::until_active(&host, "r-stuck").await;
    faults.fail_always(Fault::DiskFull);
    host.cancel(&SessionId::new("s-fault")).await.expect("cancel");
    let stopped = host.wait(&RunId::new("r-stuck")).await;
    assert!(matches!(stopped, Err(WaitError::Stopped(_))), "{stopped:?}");
    drop(host);
    faults.clear();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let again = Host::open(c, Arc::new(hang()), ToolSet::new()).await.expect("reopen");
    let recovered = again.wait(&RunId::new("r-stuck")).await.expect("recovered");
    assert_eq!(recovered.outcome, Outcome::Interrupted);
    again.shutdown().await.expect("shutdown");

    let log = captured();
    let rejected = one(&log, Level::WARN, "submission rejected", &[("session", "s-fault")]);
    assert_eq!(
        (rejected.get("run_id"), rejected.get("reason")),
        (Some("r-empty"), Some("prompt is empty"))
    );
    one(&log, Level::INFO, "cancel requested", &[("session", "s-fault")]);
    let writer = "turnstile_host::host::writer";
    let retries = events(&log, "store write failed: retrying", &[("retry", "1")]);
    let retry = retries.iter().find(|e| e.get("error") == Some("database or disk is full"));
    let retry = retry.unwrap_or_else(|| panic!("a store retry: {retries:#?}"));
    assert_eq!((retry.level, retry.target.as_str()), (Level::WARN, writer));
    assert!(retry.get("delay_ms").is_some(), "{}", retry.text());
    let fail_stop = events(&log, "store write failed for good: fail-stop, the host stops", &[]);
    let fail_stop = fail_stop
        .iter()
        .find(|e| e.get("reason").is_some_and(|r| r.ends_with("database or disk is full")))
        .unwrap_or_else(|| panic!("the fail-stop: {fail_stop:#?}"));
    assert_eq!(fail_stop.level, Level::ERROR);
    assert!(
        events(&log, "host stopped", &[]).iter().any(|e| e.level == Level::ERROR
            && e.get("reason").is_some_and(|r| r.contains("storage failure"))),
        "the host's stop is logged with its reason"
    );
    let seq = run.seq.0.to_string();
    let interrupted = [("session", "s-fault"), ("seq", seq.as_str()), ("run_id", "r-stuck")];
    let msg = "recovery: an unfinished submission ended interrupted";
    one(&log, Level::INFO, msg, &interrupted);
    one(&log, Level::INFO, "store opened; recovery done", &[("interrupted", "1")]);

    no_content_above_debug(&log);
}

/// A stalled stream: the watchdog's firing is logged, and the retry it leads to gives its
/// reason ("stream idle for 1 s"). Virtual time, as in the host's own watchdog test.
#[tokio::test(start_paused = true)]
async fn the_stream_watchdog_and_its_retries_are_logged_with_the_idle_reason() {
    install();
    let dir = tempfile::tempdir().expect("dir");
    let mut c = config(&dir);
    c.engine.stream_idle_timeout_ms = 1_000;
    let provider = ScriptedProvider::new(|_, _| {
        Answer(vec![
            Scripted::Event(StepEvent::TextDelta { text: ANSWER_SECRET.into() }),
            Scripted::Hang,
        ])
    });
    let host = Host::open(c, Arc::new(provider), ToolSet::new()).await.expect("open");
    let prompt = format!("{PROMPT_SECRET} stall");
    host.submit(Submit::new("s-idle", prompt).with_run_id("r-idle")).await.expect("ok");
    let done = host.wait(&RunId::new("r-idle")).await.expect("done");
    assert_eq!(done.error.map(|e| e.kind), Some(ErrorKind::Transport));
    host.shutdown().await.expect("shutdown");

    let log = captured();
    let run = [("session", "s-idle"), ("run_id", "r-idle")];
    let fired = events(&log, "stream watchdog fired: the attempt was idle and is closed", &run);
    assert_eq!(fired.len(), 4, "every attempt stalls: {fired:#?}");
    assert!(
        fired.iter().all(|e| e.level == Level::WARN && e.get("idle_timeout_ms") == Some("1000"))
    );
    let retries = events(&log, "provider attempt failed: retrying", &run);
    let delays: Vec<Option<&str>> = retries.iter().map(|e| e.get("delay_ms")).collect();
    assert_eq!(delays, [Some("5000"), Some("10000"), Some("20000")], "the backoffs");
    assert!(
        retries.iter().all(|e| e.get("reason") == Some("stream idle for 1 s")
            && e.get("class") == Some("transport")),
        "{retries:#?}"
    );
    let finished = one(&log, Level::WARN, "submission finished", &run);
    assert_eq!(
        (finished.get("outcome"), finished.get("error_kind"), finished.get("error_message")),
        (Some("failed"), Some("transport"), Some("stream idle for 1 s"))
    );

    no_content_above_debug(&log);
}
