//! A transaction the engine produced, applied commit by commit, is protocol-legal.

use super::*;

both_stores!(an_engine_turn_applied_commit_by_commit_is_protocol_legal,);

/// Drives the real engine through one turn with reasoning, a tool call and a second step, and
/// applies its writes exactly as a host does: grouped by `Commit`, the acceptance row first.
/// Drives one submission through an engine to its end, committing each `Commit` of the core as
/// one transaction: a turn with reasoning, text, a tool call and a second step.
fn drive_turn(engine: &mut Engine, store: &mut Store, submit: &Submit) -> (Vec<Completion>, u32) {
    let mut inbox = VecDeque::from([Input::Submit(submit.clone())]);
    let mut pending: BTreeMap<SessionId, Vec<Write>> = BTreeMap::new();
    let mut done = Vec::new();
    let mut commits = 0;
    let usage = Usage { input_tokens: 120, output_tokens: 30, cost_micros: 9, ..Usage::default() };
    while let Some(input) = inbox.pop_front() {
        engine.handle(Millis(0), input).unwrap();
        while let Some(out) = engine.poll_output() {
            match out.kind {
                OutputKind::Reply(Reply::Accepted { session, seq, run_id, mode }) => {
                    let fingerprint = run_id.as_ref().and_then(|r| engine.run_fingerprint(r));
                    let run = NewRun {
                        session: session.clone(),
                        seq,
                        run_id,
                        mode,
                        prompt: submit.prompt.clone(),
                        attachments: submit.attachments.clone(),
                        fingerprint,
                    };
                    // Durable before the reply is answered.
                    store.commit(&[txn(session.as_str(), vec![Write::Accept(run)])]).unwrap();
                }
                OutputKind::Prepare { session, seq } => inbox.push_back(Input::Prepared {
                    session,
                    seq,
                    setup: Setup::with_tools(&["view"]),
                }),
                OutputKind::StartStep { step } => {
                    let ev = |event| Input::Step { step: step.clone(), event };
                    let events = if step.step == 0 {
                        vec![
                            StepEvent::ReasoningStart,
                            StepEvent::ReasoningDelta { text: "think".into() },
                            StepEvent::ReasoningEnd { signature: Some("sig".into()) },
                            StepEvent::TextDelta { text: "Looking.".into() },
                            StepEvent::ToolInputStart {
                                id: CallId::new("c1"),
                                name: "view".into(),
                            },
                            StepEvent::ToolCall {
                                id: CallId::new("c1"),
                                name: "view".into(),
                                input: r#"{"path":"."}"#.into(),
                            },
                            StepEvent::Finished {
                                reason: FinishReason::ToolCalls,
                                usage: Some(usage),
                            },
                        ]
                    } else {
                        vec![
                            StepEvent::TextDelta { text: "Two files.".into() },
                            StepEvent::Finished { reason: FinishReason::Stop, usage: Some(usage) },
                        ]
                    };
                    inbox.extend(events.into_iter().map(ev));
                }
                OutputKind::RunTool { call, .. } => {
                    inbox.push_back(Input::ToolResult { call, result: ToolOutput::ok("a.rs b.rs") })
                }
                OutputKind::Store(op) => {
                    pending.entry(op.session().clone()).or_default().push(Write::Op(op));
                }
                OutputKind::Commit { session } => {
                    let writes = pending.remove(&session).unwrap_or_default();
                    store.commit(&[Txn { session, writes, fence: None }]).unwrap();
                    commits += 1;
                }
                OutputKind::Finished(c) => done.push(c),
                _ => {}
            }
        }
    }
    assert!(pending.values().all(Vec::is_empty), "every write was committed: {pending:?}");
    (done, commits)
}

fn an_engine_turn_applied_commit_by_commit_is_protocol_legal(kind: Kind) {
    let dir = Scratch::new(kind);
    let opened = open(&dir);
    let mut store = opened.store;
    let mut writer_compiles = count_compiles(&mut store.conn);
    let mut engine = Engine::new(Config::default(), opened.start).unwrap();
    let submit = Submit::new("s1", "list the files").with_run_id("r1");
    let (done, commits) = drive_turn(&mut engine, &mut store, &submit);
    assert!(commits >= 3);
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].outcome(), Outcome::Completed);

    let mut r = store.reader().unwrap();
    assert_eq!(r.protocol_problems(&sid("s1")).unwrap(), Vec::<String>::new());
    let run = r.run(&RunId::new("r1")).unwrap().unwrap();
    assert_eq!(run.state, RunState::Finished);
    assert_eq!(run.completion, Some((Cursor(1), CompletionRecord::from(&done[0]))));
    let m = r.messages(&sid("s1")).unwrap();
    let roles: Vec<StoredRole> = m.iter().map(|m| m.role).collect();
    assert_eq!(roles, vec![StoredRole::User, StoredRole::Assistant, StoredRole::Assistant]);
    assert_eq!(m[0].text, "list the files");
    assert_eq!(m[1].reasoning.as_deref(), Some("think"));
    assert_eq!(m[1].reasoning_signature.as_deref(), Some("sig"));
    assert_eq!(m[1].text, "Looking.");
    assert_eq!(m[1].calls[0].input.as_deref(), Some(r#"{"path":"."}"#));
    assert_eq!(m[1].results[0].content, "a.rs b.rs");
    assert_eq!(m[1].finish, Some(json!({"reason": "tool_use"})));
    assert_eq!(m[2].text, "Two files.");
    assert_eq!(m[2].finish, Some(json!({"reason": "end_turn"})));
    assert_eq!(done[0].text(), Some("Two files."));
    assert_eq!(done[0].message_id(), Some(m[2].id));
    let s = r.session(&sid("s1")).unwrap().unwrap();
    assert_eq!((s.prompt_tokens, s.completion_tokens, s.cost_micros), (120, 30, 18));
    assert_eq!(r.integrity_check(), Ok(()));

    // The same turn again, other values bound: every statement is already compiled and cached.
    // (A plan that depends on a bound value is compiled again at every rebinding: the cost the
    // host pays per step when a query is written that way.)
    let mut reader_compiles = count_compiles(&mut r.conn);
    for session in ["s1", "none"] {
        r.messages(&sid(session)).unwrap();
        r.session(&sid(session)).unwrap();
        r.run(&RunId::new(session)).unwrap();
    }
    writer_compiles.reset(&store.conn);
    reader_compiles.reset(&r.conn);
    let again = Submit::new("s2", "list them again").with_run_id("r2");
    let (done2, _) = drive_turn(&mut engine, &mut store, &again);
    assert_eq!(done2[0].outcome(), Outcome::Completed);
    for session in ["s2", "s1", "other"] {
        r.messages(&sid(session)).unwrap();
        r.session(&sid(session)).unwrap();
        r.run(&RunId::new(session)).unwrap();
    }
    let compiled = (writer_compiles.since(&store.conn), reader_compiles.since(&r.conn));
    assert_eq!(compiled, (0, 0), "writer, reader");
    drop(r);
    store.close().unwrap();

    // The restart hands the engine everything it needs to refuse a rerun of r1.
    let again = open(&dir);
    assert!(again.recovered.is_empty());
    assert_eq!(again.start.next_seq, Some(Seq(3)));
    assert_eq!(again.start.runs.len(), 2);
    assert_eq!(again.start.runs[0].fingerprint, Fingerprint::of(&submit));
    let mut engine = Engine::new(Config::default(), again.start).unwrap();
    engine.handle(Millis(0), Input::Submit(submit)).unwrap();
    let reply = engine.poll_output().unwrap();
    assert!(
        matches!(
            reply.kind,
            OutputKind::Reply(Reply::Existing {
                seq: Seq(1),
                outcome: Some(Outcome::Completed),
                ..
            })
        ),
        "{reply:?}"
    );
}
