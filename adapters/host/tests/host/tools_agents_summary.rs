//! Tools that must finish, sub-agents, summaries.

use super::*;
use crate::common;

both_stores!(
    a_nearly_full_context_is_summarized_and_history_then_starts_at_the_summary,
    a_cancel_during_a_droppable_tool_ends_the_turn_at_once,
    a_sub_agent_runs_in_a_child_session_and_its_text_is_the_parent_s_result,
);

async fn a_nearly_full_context_is_summarized_and_history_then_starts_at_the_summary(
    kind: common::Kind,
) {
    let dir = common::Scratch::new(kind);
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    let provider = ScriptedProvider::new(move |req, _| {
        log.lock().expect("log").push((
            req.kind,
            req.messages.len(),
            req.messages.first().cloned(),
        ));
        match req.kind {
            turnstile_host::provider::RequestKind::Summary => {
                Answer::streamed("SUMMARY", 2, 1, Usage { output_tokens: 40, ..Usage::default() })
            }
            turnstile_host::provider::RequestKind::Step => Answer::streamed(
                "long answer",
                2,
                1,
                Usage { input_tokens: 900, output_tokens: 50, ..Usage::default() },
            ),
        }
    })
    .with_prepare(|_| Ok(turnstile_host::ModelInfo { context_window: 1_000 }));
    let host = open(&config(&dir), provider).await;
    let s = SessionId::new("s");
    host.submit(Submit::new("s", "first").with_run_id("r1")).await.expect("ok");
    assert_eq!(host.wait(&RunId::new("r1")).await.expect("r1").outcome, Outcome::Completed);
    // The housekeeping summary runs after the RunComplete. `is_busy` is the engine's view; the
    // summary's writes become durable just after, so poll the store (bounded).
    let mut row = None;
    for _ in 0..2_000 {
        let s = s.clone();
        let r = host.read(move |r| r.session(&s)).await.expect("read").expect("row");
        if r.summary_message.is_some() {
            row = Some(r);
            break;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let row = row.expect("the summary pointer is set within 4 s");
    assert!(!host.is_busy(&s).await.expect("busy"));
    assert!(row.summary_message.is_some(), "the summary pointer is set");
    assert_eq!((row.prompt_tokens, row.completion_tokens), (0, 40), "gauges reset to the summary");
    host.submit(Submit::new("s", "second").with_run_id("r2")).await.expect("ok");
    host.wait(&RunId::new("r2")).await.expect("r2");
    let log = seen.lock().expect("log").clone();
    let last = log.last().expect("a request");
    assert_eq!(
        last.2,
        Some(turnstile_host::provider::RequestMessage::User {
            text: "SUMMARY".into(),
            attachments: vec![]
        }),
        "history starts at the summary, relabelled as a user message: {log:?}"
    );
    // r2's step filled the context again, so another summary may be running now: check the
    // history once everything has ended (a live summary message is unfinished by design).
    host.shutdown().await.expect("shutdown");
    drop(host);
    let again = open(&config(&dir), echo()).await;
    legal(&again, "s").await;
    again.shutdown().await.expect("shutdown");
}

/// Found by the simulator (seed 1): a manual summarize of a session the store does not hold
/// wrote a summary message for no session, the write failed (a foreign key), and the store
/// failure stopped the whole host. It is now refused before it reaches the engine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn summarizing_an_unknown_session_is_refused_and_harms_nothing() {
    let dir = common::Scratch::new(common::Kind::Sqlite);
    let host = open(&config(&dir), echo()).await;
    let got = host.summarize(&SessionId::new("nobody")).await;
    let nobody = SessionId::new("nobody");
    assert_eq!(got, Err(SubmitError::Invalid(InvalidRequest::SessionNotFound(nobody))));
    assert_eq!(got.expect_err("refused").to_string(), "session not found: nobody");
    host.submit(Submit::new("s", "still fine").with_run_id("r")).await.expect("ok");
    assert_eq!(host.wait(&RunId::new("r")).await.expect("done").outcome, Outcome::Completed);
    assert_eq!(host.stopped(), None);
    host.summarize(&SessionId::new("s")).await.expect("a known idle session summarizes");
    host.shutdown().await.expect("shutdown");
}

/// SPEC 4.9: a cancel does not cut off a tool that must finish; its result arrives within the
/// grace and is written as reported (it really ran), not replaced by the cancel text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_that_must_finish_is_not_cut_off_and_its_result_is_written() {
    let dir = common::Scratch::new(common::Kind::Sqlite);
    let results = common::cancel_during_a_tool_left_to_finish(config(&dir)).await;
    assert_eq!(results, [("really ran".to_owned(), false)]);
}

/// SPEC 4.9: a cancel during a call the host drops (the default) does not wait for it: the
/// turn is cleaned up in the cancel's own transition, with no grace timer, and the next run
/// starts. The flight trace shows what the core decided; the RunComplete follows at once
/// rather than after the 5 s grace.
async fn a_cancel_during_a_droppable_tool_ends_the_turn_at_once(kind: common::Kind) {
    let dir = common::Scratch::new(kind);
    let mut c = config(&dir);
    let flight = turnstile_host::FlightBuffer::default();
    c.trace = Some(Flight::Memory(flight.clone()));
    c.trace_outputs = true;
    let provider = ScriptedProvider::new(|req, _| match req.messages.last() {
        Some(turnstile_host::provider::RequestMessage::ToolResults(_)) => {
            Answer::streamed("done", 1, 0, usage())
        }
        _ if req.last_user_text() == Some("next") => Answer::streamed("next done", 1, 0, usage()),
        _ => Answer::tool_call("c1", "bash", "{}"),
    });
    let tools = ToolSet::new().with(EchoTool { name: "bash".into(), delay_ms: 600_000 });
    let host = Host::open(c, Arc::new(provider), tools).await.expect("open");
    host.submit(Submit::new("s", "go").with_run_id("r1")).await.expect("ok");
    host.submit(Submit::new("s", "next").with_run_id("r2")).await.expect("ok");
    while !flight.text().contains(r#""type":"run_tool""#) {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    host.cancel_run(&RunId::new("r1")).await.expect("cancel");
    assert_eq!(host.wait(&RunId::new("r1")).await.expect("done").outcome, Outcome::Cancelled);
    assert_eq!(host.wait(&RunId::new("r2")).await.expect("done").outcome, Outcome::Completed);
    let msgs = host.read(|r| r.messages(&SessionId::new("s"))).await.expect("read");
    let results: Vec<_> = msgs.iter().flat_map(|m| m.results.iter()).map(|r| r.synthetic).collect();
    assert_eq!(results, [true], "the dropped call gets the synthetic result");
    legal(&host, "s").await;
    host.shutdown().await.expect("shutdown");

    let trace = turnstile_core::Trace::parse(&flight.text()).expect("parses");
    let (_, cancel) = trace
        .lines
        .iter()
        .find(|(_, l)| matches!(l.input, turnstile_core::Input::CancelRun { .. }))
        .expect("the cancel_run was recorded");
    let outputs = cancel.expect.as_ref().expect("outputs recorded");
    let kinds: Vec<String> = outputs
        .iter()
        .map(|o| {
            let k = &o["kind"];
            match (k["type"].as_str(), k["outcome"].as_str(), k["purpose"]["timer"].as_str()) {
                (Some(t), Some(outcome), _) => format!("{t} {outcome}"),
                (Some(t), _, Some(purpose)) => format!("{t} {purpose}"),
                (t, _, _) => t.unwrap_or("?").to_owned(),
            }
        })
        .collect();
    assert!(kinds.iter().any(|k| k == "abort_tool"), "the call was aborted: {kinds:?}");
    // The next turn's step arms its stream watchdog (SPEC 4.5); no grace timer is armed.
    assert!(
        !kinds.iter().any(|k| k == "set_timer cancel_grace"),
        "no grace timer: nothing can still report: {kinds:?}"
    );
    assert!(
        kinds.iter().any(|k| k == "finished cancelled"),
        "the RunComplete is decided in the cancel's own transition: {kinds:?}"
    );
    turnstile_core::replay(&trace).expect("the flight trace replays");
}

/// SPEC 4.11 through the host: the `agent` tool is offered to the parent (not to the child),
/// the child runs in its own session with the parent's id and "New Agent Session", its text is
/// the parent's tool result, its cost is added to the parent, and both ledger rows finish.
async fn a_sub_agent_runs_in_a_child_session_and_its_text_is_the_parent_s_result(
    kind: common::Kind,
) {
    let dir = common::Scratch::new(kind);
    type Offered = Vec<(String, Vec<String>)>;
    let offered: Arc<std::sync::Mutex<Offered>> = Arc::default();
    let seen = offered.clone();
    let provider = ScriptedProvider::new(move |req, _| {
        let tools = req.tools.iter().map(|t| t.name.clone()).collect();
        seen.lock().expect("lock").push((req.session.to_string(), tools));
        if req.session.is_child() {
            return Answer::streamed("found two files", 2, 5, usage());
        }
        match req.messages.last() {
            Some(turnstile_host::provider::RequestMessage::ToolResults(_)) => {
                Answer::streamed("the agent says so", 2, 5, usage())
            }
            _ => Answer::tool_call("c1", "agent", r#"{"prompt":"look around"}"#),
        }
    });
    let tools = ToolSet::new().with(EchoTool { name: "view".into(), delay_ms: 5 }).with_agent();
    let host = Host::open(config(&dir), Arc::new(provider), tools).await.expect("open");
    host.submit(Submit::new("p", "delegate").with_run_id("r1")).await.expect("accepted");
    let done = host.wait(&RunId::new("r1")).await.expect("completion");
    assert_eq!(done.outcome, Outcome::Completed);
    assert_eq!(done.text.as_deref(), Some("the agent says so"));

    let sessions = host.read(|r| r.sessions()).await.expect("read");
    let child = sessions.iter().find(|s| s.id.is_child()).expect("a child session");
    assert_eq!(child.parent, Some(SessionId::new("p")));
    assert_eq!(child.title.as_deref(), Some(turnstile_core::NEW_AGENT_TITLE));
    assert!(child.id.as_str().ends_with("$$c1"), "{}", child.id);
    let parent = sessions.iter().find(|s| s.id.as_str() == "p").expect("the parent");
    // The first parent step (the call) reports no usage: its own last step plus the child.
    assert_eq!(parent.cost_micros, 2 * 7, "the parent's answer and the child's");

    let p = SessionId::new("p");
    let messages = host.read(move |r| r.messages(&p)).await.expect("read");
    let result = messages.iter().flat_map(|m| &m.results).next().expect("the agent's result");
    assert_eq!((result.content.as_str(), result.is_error), ("found two files", false));
    let runs = host.read(|r| r.runs()).await.expect("read");
    let child_run = runs.iter().find(|r| r.session == child.id).expect("the child's row");
    assert_eq!(child_run.state, RunState::Finished);
    let record = &child_run.completion.as_ref().expect("recorded").1;
    assert_eq!(
        (record.outcome, record.text.as_deref()),
        (Outcome::Completed, Some("found two files"))
    );
    legal(&host, "p").await;
    legal(&host, child.id.as_str()).await;

    let offered = offered.lock().expect("lock").clone();
    for (session, tools) in &offered {
        let agent = tools.iter().any(|t| t == "agent");
        assert_eq!(agent, session == "p", "{session} was offered {tools:?}");
        assert!(tools.iter().any(|t| t == "view"), "{session} keeps its other tools");
    }
    host.shutdown().await.expect("shutdown");
}
