//! Applying writes: every op read back, usage, group commits, errors, injected faults.

use super::*;

both_stores!(
    every_op_is_applied_and_read_back,
    session_usage_sets_gauges_and_adds_cost_and_a_title_touches_nothing_else,
    a_group_commit_applies_several_sessions_in_one_transaction,
    writes_for_rows_the_store_does_not_hold_are_errors,
    an_injected_fault_before_or_after_applying_leaves_nothing_and_uses_no_cursor,
);

fn every_op_is_applied_and_read_back(kind: Kind) {
    let dir = Scratch::new(kind);
    let mut store = open(&dir).store;
    let attachment = text_attachment("a.txt", "A");
    let accept = accept(NewRun {
        session: sid("s"),
        seq: Seq(1),
        run_id: Some(RunId::new("r1")),
        mode: Mode::OwnTurn,
        prompt: "look".into(),
        attachments: vec![attachment.clone()],
        fingerprint: None,
    });
    let user_op = StoreOp::UserMessage {
        session: sid("s"),
        seq: Seq(1),
        id: MessageId(1),
        text: "look".into(),
        attachments: Box::new([attachment.clone()]),
        synthetic: false,
    };
    let step0 = vec![
        activated("s", 1),
        user_op,
        assistant("s", 1, 2),
        StoreOp::ReasoningStarted { session: sid("s"), seq: Seq(1), id: MessageId(2) },
        StoreOp::AppendReasoning {
            session: sid("s"),
            seq: Seq(1),
            id: MessageId(2),
            text: "hmm ".into(),
        },
        StoreOp::AppendReasoning {
            session: sid("s"),
            seq: Seq(1),
            id: MessageId(2),
            text: "ok".into(),
        },
        StoreOp::ReasoningEnded {
            session: sid("s"),
            seq: Seq(1),
            id: MessageId(2),
            signature: Some("sig".into()),
        },
        text("s", 1, 2, "Let me "),
        text("s", 1, 2, "look."),
        tool_started("s", 1, 2, "c1"),
        tool_call("s", 1, 2, "c1"),
        tool_call("s", 1, 2, "c2"),
        StoreOp::Flush { session: sid("s") },
    ];
    store.commit(&[txn("s", vec![accept]), ops("s", step0)]).unwrap();
    let results = vec![
        tool_result("s", 1, 2, "c2", "two"),
        StoreOp::ToolResult {
            session: sid("s"),
            seq: Seq(1),
            id: MessageId(2),
            call: CallId::new("c1"),
            content: "one failed".into(),
            is_error: true,
            synthetic: true,
        },
        finished("s", 1, 2, MessageFinish::ToolUse),
        // Step 1: a retry resets the streamed content before the second attempt.
        assistant("s", 1, 3),
        StoreOp::ReasoningStarted { session: sid("s"), seq: Seq(1), id: MessageId(3) },
        text("s", 1, 3, "broken"),
        tool_started("s", 1, 3, "c9"),
        StoreOp::MessageReset { session: sid("s"), seq: Seq(1), id: MessageId(3) },
        text("s", 1, 3, "Done."),
        finished("s", 1, 3, MessageFinish::Error { title: "T".into(), message: "M".into() }),
        outcome(cancelled("s", 1, Some("r1"))),
    ];
    let cursors = store.commit(&[ops("s", results)]).unwrap();
    assert_eq!(cursors, vec![Cursor(1)]);

    // Summaries: done, failed, deleted; a sub-agent; a pause; a title.
    let more = vec![
        StoreOp::SummaryMessage { session: sid("s"), id: MessageId(4) },
        StoreOp::SummaryText { session: sid("s"), id: MessageId(4), text: "wrong".into() },
        StoreOp::SummaryReset { session: sid("s"), id: MessageId(4) },
        StoreOp::SummaryText { session: sid("s"), id: MessageId(4), text: "the ".into() },
        StoreOp::SummaryText { session: sid("s"), id: MessageId(4), text: "summary".into() },
        StoreOp::SummaryDone { session: sid("s"), id: MessageId(4), completion_tokens: 77 },
        StoreOp::SummaryMessage { session: sid("s"), id: MessageId(5) },
        StoreOp::SummaryFailed {
            session: sid("s"),
            id: MessageId(5),
            title: "Summarization Error".into(),
            message: "boom".into(),
        },
        StoreOp::SummaryMessage { session: sid("s"), id: MessageId(6) },
        StoreOp::SummaryDeleted { session: sid("s"), id: MessageId(6) },
        StoreOp::Title { session: sid("s"), title: "Looking".into() },
    ];
    let child = "m2$$c2";
    let sub = vec![
        StoreOp::ChildAccepted {
            session: sid(child),
            seq: Seq(2),
            parent: sid("s"),
            parent_seq: Seq(1),
            prompt: "dig".into(),
            title: turnstile_core::NEW_AGENT_TITLE,
        },
        activated(child, 2),
        StoreOp::LedgerPaused { session: sid(child), seq: Seq(2) },
    ];
    assert_eq!(store.commit(&[ops("s", more), ops(child, sub)]).unwrap(), vec![]);

    let r = store.reader().unwrap();
    let m = r.messages(&sid("s")).unwrap();
    assert_eq!(m.len(), 5, "the deleted summary is gone: {m:#?}");
    assert_eq!(m[0].role, StoredRole::User);
    assert_eq!((m[0].id, m[0].seq, m[0].text.as_str()), (MessageId(1), Some(Seq(1)), "look"));
    assert_eq!(m[0].attachments, vec![attachment.clone()]);
    assert!(!m[0].synthetic && m[0].finish.is_none());

    let a = &m[1];
    assert_eq!(
        (a.role, a.id, a.text.as_str()),
        (StoredRole::Assistant, MessageId(2), "Let me look.")
    );
    assert_eq!(a.reasoning.as_deref(), Some("hmm ok"));
    assert_eq!(a.reasoning_signature.as_deref(), Some("sig"));
    assert!(a.reasoning_done);
    assert_eq!(a.finish, Some(json!({"reason": "tool_use"})));
    let call = |c: &str| StoredCall {
        call: CallId::new(c),
        name: "view".into(),
        input: Some(r#"{"path":"a"}"#.into()),
        finished: true,
        raw_input: None,
    };
    assert_eq!(a.calls, vec![call("c1"), call("c2")], "the started call was finished in place");
    assert_eq!(
        a.results,
        vec![
            StoredResult {
                call: CallId::new("c2"),
                content: "two".into(),
                is_error: false,
                synthetic: false
            },
            StoredResult {
                call: CallId::new("c1"),
                content: "one failed".into(),
                is_error: true,
                synthetic: true
            },
        ],
        "results in the order written"
    );

    let b = &m[2];
    assert_eq!(b.text, "Done.", "the reset cleared the failed attempt");
    assert_eq!((b.reasoning.as_deref(), b.reasoning_done), (None, false));
    assert!(b.calls.is_empty());
    assert_eq!(b.finish, Some(json!({"reason": "error", "title": "T", "message": "M"})));

    assert_eq!((m[3].role, m[3].text.as_str()), (StoredRole::Summary, "the summary"));
    assert_eq!(m[3].finish, Some(json!({"reason": "done"})));
    assert_eq!(m[3].seq, None);
    assert_eq!(
        m[4].finish,
        Some(json!({"reason": "error", "title": "Summarization Error", "message": "boom"}))
    );

    let s = r.session(&sid("s")).unwrap().unwrap();
    assert_eq!(s.title.as_deref(), Some("Looking"));
    assert_eq!(s.summary_message, Some(MessageId(4)));
    assert_eq!((s.prompt_tokens, s.completion_tokens), (0, 77));
    assert_eq!(s.parent, None);

    let c = r.session(&sid(child)).unwrap().unwrap();
    assert_eq!(c.parent, Some(sid("s")));
    assert_eq!(c.title.as_deref(), Some("New Agent Session"));
    assert_eq!(
        r.sessions().unwrap().iter().map(|s| s.id.clone()).collect::<Vec<_>>(),
        vec![sid("s"), sid(child)]
    );

    let run = r.run(&RunId::new("r1")).unwrap().unwrap();
    assert_eq!(run.state, RunState::Finished);
    assert_eq!(run.attachments, vec![attachment]);
    let (cursor, record) = run.completion.clone().unwrap();
    assert_eq!(cursor, Cursor(1));
    assert_eq!(record.outcome, Outcome::Cancelled);
    assert_eq!(record, CompletionRecord::from(&cancelled("s", 1, Some("r1"))));
    let child_run = r.run_by_seq(Seq(2)).unwrap().unwrap();
    assert_eq!(child_run.state, RunState::Paused);
    assert_eq!((child_run.run_id, child_run.mode), (None, Mode::OwnTurn));
    assert_eq!(child_run.prompt, "dig");
    assert_eq!(r.runs().unwrap().iter().map(|r| r.seq).collect::<Vec<_>>(), vec![Seq(1), Seq(2)]);
    assert_eq!(r.completions_after(Cursor(0), 10).unwrap(), vec![(Cursor(1), record)]);
    assert_eq!(r.completions_after(Cursor(1), 10).unwrap(), vec![]);
    assert_eq!(r.newest_cursor().unwrap(), Cursor(1));
    assert_eq!(r.protocol_problems(&sid("s")).unwrap(), Vec::<String>::new());
    assert_eq!(r.integrity_check(), Ok(()));
}

fn session_usage_sets_gauges_and_adds_cost_and_a_title_touches_nothing_else(kind: Kind) {
    let dir = Scratch::new(kind);
    let mut store = open(&dir).store;
    let child = "m1$$c1";
    let setup = vec![
        Write::Accept(NewRun {
            session: sid("p"),
            seq: Seq(1),
            run_id: None,
            mode: Mode::Fold,
            prompt: "x".into(),
            attachments: vec![],
            fingerprint: None,
        }),
        Write::Op(StoreOp::ChildAccepted {
            session: sid(child),
            seq: Seq(2),
            parent: sid("p"),
            parent_seq: Seq(1),
            prompt: "y".into(),
            title: "New Agent Session",
        }),
    ];
    store.commit(&[txn("p", setup)]).unwrap();
    let usage = |session: &str, p: Option<u64>, c: Option<u64>, cost, ancestor: Option<&str>| {
        StoreOp::SessionUsage {
            session: sid(session),
            seq: None,
            prompt_tokens: p,
            completion_tokens: c,
            cost_micros: cost,
            ancestor: ancestor.map(sid),
        }
    };
    store.commit(&[ops("p", vec![usage("p", Some(100), Some(10), 5, None)])]).unwrap();
    store.commit(&[ops("p", vec![usage("p", None, Some(20), 7, None)])]).unwrap();
    store.commit(&[ops(child, vec![usage(child, Some(50), None, 1000, Some("p"))])]).unwrap();
    let r = store.reader().unwrap();
    let p = r.session(&sid("p")).unwrap().unwrap();
    assert_eq!((p.prompt_tokens, p.completion_tokens, p.cost_micros), (100, 20, 1012));
    let c = r.session(&sid(child)).unwrap().unwrap();
    assert_eq!((c.prompt_tokens, c.completion_tokens, c.cost_micros), (50, 0, 1000));

    store
        .commit(&[ops("p", vec![StoreOp::Title { session: sid("p"), title: "T".into() }])])
        .unwrap();
    let after = r.session(&sid("p")).unwrap().unwrap();
    assert_eq!(after, SessionRow { title: Some("T".into()), ..p });

    let err = store
        .commit(&[ops("p", vec![usage("p", None, None, 1, Some("nobody"))])])
        .expect_err("a missing ancestor is an error");
    assert!(err.to_string().contains("nobody"), "{err}");
    assert_eq!(r.session(&sid("p")).unwrap().unwrap().cost_micros, 1012, "rolled back");
}

fn a_group_commit_applies_several_sessions_in_one_transaction(kind: Kind) {
    let dir = Scratch::new(kind);
    let mut store = open(&dir).store;
    let txns: Vec<Txn> = (1..=5)
        .map(|i| {
            let s = format!("s{i}");
            txn(&s, vec![new_run(&s, i, Some(&format!("r{i}")), "p"), Write::Op(activated(&s, i))])
        })
        .collect();
    assert_eq!(store.commit(&txns).unwrap(), vec![]);
    let outcomes: Vec<Txn> = (1..=5)
        .rev()
        .map(|i| {
            let s = format!("s{i}");
            ops(&s, vec![outcome(cancelled(&s, i, Some(&format!("r{i}"))))])
        })
        .collect();
    let cursors = store.commit(&outcomes).unwrap();
    assert_eq!(cursors, (1..=5).map(Cursor).collect::<Vec<_>>());
    let r = store.reader().unwrap();
    let by_cursor: Vec<Seq> =
        r.completions_after(Cursor(0), 100).unwrap().into_iter().map(|(_, c)| c.seq).collect();
    assert_eq!(
        by_cursor,
        vec![Seq(5), Seq(4), Seq(3), Seq(2), Seq(1)],
        "cursors follow write order"
    );
    assert_eq!(r.completions_after(Cursor(2), 2).unwrap().len(), 2, "the limit holds");

    // One bad write anywhere in the group undoes the whole group.
    let bad = vec![
        txn("s6", vec![new_run("s6", 6, None, "p")]),
        ops("s1", vec![outcome(cancelled("s1", 1, Some("r1")))]), // already finished
    ];
    let err = store.commit(&bad).expect_err("a second outcome for a run");
    assert!(err.to_string().contains("ledger row 1 is finished"), "{err}");
    assert!(r.run_by_seq(Seq(6)).unwrap().is_none());
    assert_eq!(r.newest_cursor().unwrap(), Cursor(5));
}

fn writes_for_rows_the_store_does_not_hold_are_errors(kind: Kind) {
    let dir = Scratch::new(kind);
    let mut store = open(&dir).store;
    let err = store.commit(&[ops("s", vec![outcome(cancelled("s", 9, None))])]).unwrap_err();
    assert_eq!(err.to_string(), "ledger_outcome: the ledger has no row for sequence 9");
    let err = store.commit(&[ops("s", vec![activated("s", 9)])]).unwrap_err();
    assert_eq!(err.to_string(), "ledger_activated: the ledger has no row for sequence 9");
    store.commit(&[txn("s", vec![new_run("s", 1, None, "p")])]).unwrap();
    let err = store.commit(&[ops("t", vec![activated("t", 1)])]).unwrap_err();
    assert_eq!(err.to_string(), "ledger_activated: ledger row 1 belongs to session s, not t");
    let err = store.commit(&[ops("s", vec![text("s", 1, 42, "x")])]).unwrap_err();
    assert_eq!(err.to_string(), "append_text: session s has no assistant message m42");
    let err = store
        .commit(&[ops("s", vec![StoreOp::LedgerPaused { session: sid("s"), seq: Seq(1) }])])
        .unwrap_err();
    assert_eq!(err.to_string(), "ledger_paused: ledger row 1 is waiting, expected active");
}

fn an_injected_fault_before_or_after_applying_leaves_nothing_and_uses_no_cursor(kind: Kind) {
    let dir = Scratch::new(kind);
    let faults = Faults::default();
    let cfg = StoreConfig { faults: Some(faults.clone()), ..config(&dir) };
    let mut store = Store::open(&cfg).unwrap().store;
    let r = store.reader().unwrap();
    store.commit(&[txn("s", vec![new_run("s", 1, Some("r1"), "p")])]).unwrap();
    let group = || {
        vec![
            txn("t", vec![new_run("t", 2, None, "q")]),
            ops("s", vec![outcome(cancelled("s", 1, Some("r1")))]),
        ]
    };
    for (fault, code, message) in [
        (Fault::Locked, rusqlite::ErrorCode::DatabaseBusy, "database is locked"),
        (Fault::DiskFull, rusqlite::ErrorCode::DiskFull, "database or disk is full"),
        (Fault::ReadOnly, rusqlite::ErrorCode::ReadOnly, "attempt to write a readonly database"),
        (Fault::DiskFullAtCommit, rusqlite::ErrorCode::DiskFull, "database or disk is full"),
    ] {
        faults.fail_next(1, fault);
        let err = store.commit(&group()).expect_err("injected");
        assert_eq!(sqlite_code(&err), Some(code), "{fault:?}");
        assert_eq!(err.to_string(), message);
        assert!(r.run_by_seq(Seq(2)).unwrap().is_none(), "{fault:?}: nothing applied");
        assert_eq!(r.run_by_seq(Seq(1)).unwrap().unwrap().state, RunState::Waiting);
        assert_eq!(r.newest_cursor().unwrap(), Cursor(0));
    }
    faults.fail_always(Fault::DiskFullAtCommit);
    assert!(store.commit(&group()).is_err());
    faults.clear();
    assert_eq!(store.commit(&group()).unwrap(), vec![Cursor(1)], "no cursor was used up");
    assert_eq!(faults.commits(), 7);
    assert_eq!(faults.injected(), 5);
    assert_eq!(r.integrity_check(), Ok(()));
}

#[test]
fn a_real_lock_conflict_is_sqlite_busy_and_the_store_stays_usable() {
    let dir = Scratch::new(Kind::Sqlite);
    let mut store = open(&dir).store;
    let other = rusqlite::Connection::open(dir.path().join("store.db")).unwrap();
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    let err = store.commit(&[txn("s", vec![new_run("s", 1, None, "p")])]).unwrap_err();
    assert_eq!(sqlite_code(&err), Some(rusqlite::ErrorCode::DatabaseBusy), "{err}");
    other.execute_batch("ROLLBACK").unwrap();
    store.commit(&[txn("s", vec![new_run("s", 1, None, "p")])]).unwrap();
}
