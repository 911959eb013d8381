//! Recovery on open: unfinished submissions ended, history repaired, ids never reused.

use super::*;

both_stores!(
    recovery_ends_every_unfinished_submission_and_repairs_history,
    deleted_message_ids_are_never_handed_out_again,
    fingerprints_cover_attachments,
    protocol_problems_name_the_message_and_call,
);

/// Leaves, then recovers: a waiting run; an active run with an unfinished message, unfinished
/// reasoning, a call with a result, a finished call without one and an orphan unfinished call;
/// a paused run with a partial summary; a finished run; an activated run without an assistant
/// message; an active sub-agent.
fn recovery_ends_every_unfinished_submission_and_repairs_history(kind: Kind) {
    let dir = Scratch::new(kind);
    let mut store = open(&dir).store;
    let child = "m2$$c2";
    let finish_end = MessageFinish::EndTurn;
    store
        .commit(&[
            txn("w", vec![new_run("w", 1, Some("rw"), "wait")]),
            txn(
                "a",
                vec![
                    new_run("a", 2, Some("ra"), "act"),
                    Write::Op(activated("a", 2)),
                    Write::Op(user("a", 2, 1, "act")),
                    Write::Op(assistant("a", 2, 2)),
                    Write::Op(StoreOp::ReasoningStarted {
                        session: sid("a"),
                        seq: Seq(2),
                        id: MessageId(2),
                    }),
                    Write::Op(text("a", 2, 2, "partial")),
                    Write::Op(tool_call("a", 2, 2, "c1")),
                    Write::Op(tool_result("a", 2, 2, "c1", "done")),
                    Write::Op(tool_call("a", 2, 2, "c2")),
                    Write::Op(tool_started("a", 2, 2, "c3")),
                ],
            ),
            txn(
                "p",
                vec![
                    new_run("p", 3, Some("rp"), "pause"),
                    Write::Op(activated("p", 3)),
                    Write::Op(user("p", 3, 3, "pause")),
                    Write::Op(assistant("p", 3, 4)),
                    Write::Op(text("p", 3, 4, "before the pause")),
                    Write::Op(tool_call("p", 3, 4, "c9")),
                    Write::Op(tool_result("p", 3, 4, "c9", "nine")),
                    Write::Op(finished("p", 3, 4, MessageFinish::ToolUse)),
                    Write::Op(StoreOp::LedgerPaused { session: sid("p"), seq: Seq(3) }),
                    Write::Op(StoreOp::SummaryMessage { session: sid("p"), id: MessageId(5) }),
                    Write::Op(StoreOp::SummaryText {
                        session: sid("p"),
                        id: MessageId(5),
                        text: "half".into(),
                    }),
                ],
            ),
            txn(
                "f",
                vec![
                    new_run("f", 4, Some("rf"), "fin"),
                    Write::Op(activated("f", 4)),
                    Write::Op(user("f", 4, 6, "fin")),
                    Write::Op(assistant("f", 4, 7)),
                    Write::Op(text("f", 4, 7, "all good")),
                    Write::Op(finished("f", 4, 7, finish_end)),
                    Write::Op(outcome(cancelled("f", 4, Some("rf")))),
                ],
            ),
            txn(
                "n",
                vec![
                    new_run("n", 5, None, "no message yet"),
                    Write::Op(activated("n", 5)),
                    Write::Op(user("n", 5, 8, "no message yet")),
                ],
            ),
            txn(
                child,
                vec![
                    Write::Op(StoreOp::ChildAccepted {
                        session: sid(child),
                        seq: Seq(6),
                        parent: sid("a"),
                        parent_seq: Seq(2),
                        prompt: "dig".into(),
                        title: "New Agent Session",
                    }),
                    Write::Op(activated(child, 6)),
                    Write::Op(user(child, 6, 9, "dig")),
                    Write::Op(assistant(child, 6, 10)),
                    Write::Op(text(child, 6, 10, "child text")),
                ],
            ),
        ])
        .unwrap();
    let before_f = store.reader().unwrap().messages(&sid("f")).unwrap();
    let problems = store.reader().unwrap().protocol_problems(&sid("a")).unwrap();
    assert_eq!(
        problems,
        vec![
            "message m2: assistant message has no finish",
            "message m2: tool call c2 has no result",
            "message m2: tool call c3 is unfinished",
            "message m2: tool call c3 has no result",
        ]
    );
    assert_eq!(
        store.reader().unwrap().protocol_problems(&sid("p")).unwrap(),
        vec!["message m5: summary message is unfinished"]
    );
    drop(store); // a crash: no close

    let opened = open(&dir);
    let rec = |session: &str, run_id: Option<&str>, seq, last: Option<(u64, &str)>| {
        CompletionRecord::recovered(
            sid(session),
            run_id.map(RunId::new),
            Seq(seq),
            last.map(|(id, t)| (MessageId(id), t.to_owned())),
        )
    };
    assert_eq!(
        opened.recovered,
        vec![
            (Cursor(2), rec("w", Some("rw"), 1, None)),
            (Cursor(3), rec("a", Some("ra"), 2, Some((2, "partial")))),
            (Cursor(4), rec("p", Some("rp"), 3, Some((4, "before the pause")))),
            (Cursor(5), rec("n", None, 5, Some((11, "")))),
            (Cursor(6), rec(child, None, 6, Some((10, "child text")))),
        ]
    );
    let (_, a) = &opened.recovered[1];
    assert_eq!(a.outcome, Outcome::Interrupted);
    let error = a.error.clone().unwrap();
    assert_eq!(error.kind, ErrorKind::Interrupted);
    assert_eq!(error.title, "Interrupted");
    assert_eq!(error.message, "The process stopped before this request finished.");
    assert_eq!(
        serde_json::to_value(a).unwrap(),
        json!({
            "session": "a", "run_id": "ra", "seq": 2, "outcome": "interrupted",
            "message_id": 2, "text": "partial",
            "error": {
                "kind": "interrupted",
                "title": "Interrupted",
                "message": "The process stopped before this request finished."
            }
        })
    );

    let r = opened.store.reader().unwrap();
    let interrupted = json!({
        "reason": "error",
        "title": "Interrupted",
        "message": "The process stopped before this request finished."
    });
    let m = r.messages(&sid("a")).unwrap();
    assert_eq!(m[1].finish, Some(interrupted.clone()));
    assert!(m[1].reasoning_done, "the reasoning section is closed");
    assert_eq!(m[1].text, "partial");
    assert!(m[1].calls.iter().all(|c| c.finished));
    assert_eq!(m[1].calls[2].input.as_deref(), Some("{}"), "the orphan call gets input {{}}");
    assert_eq!(m[1].calls[1].input.as_deref(), Some(r#"{"path":"a"}"#), "complete input kept");
    let repair = |c: &str| StoredResult {
        call: CallId::new(c),
        content: HISTORY_REPAIR_RESULT.into(),
        is_error: true,
        synthetic: true,
    };
    assert_eq!(
        m[1].results,
        vec![
            StoredResult {
                call: CallId::new("c1"),
                content: "done".into(),
                is_error: false,
                synthetic: false
            },
            repair("c2"),
            repair("c3"),
        ]
    );
    assert_eq!(m[0].finish, None, "user messages have no finish");

    let p = r.messages(&sid("p")).unwrap();
    assert_eq!(p.len(), 2, "the partial summary is deleted: {p:#?}");
    assert_eq!(p[1].finish, Some(json!({"reason": "tool_use"})), "a finished message is kept");
    assert_eq!(r.messages(&sid("f")).unwrap(), before_f, "a finished run is untouched");
    let n = r.messages(&sid("n")).unwrap();
    assert_eq!(n.len(), 2);
    assert_eq!(
        (n[1].id, n[1].role, n[1].seq),
        (MessageId(11), StoredRole::Assistant, Some(Seq(5)))
    );
    assert_eq!((n[1].text.as_str(), &n[1].finish), ("", &Some(interrupted.clone())));
    assert_eq!(r.messages(&sid(child)).unwrap()[1].finish, Some(interrupted));

    for s in r.sessions().unwrap() {
        assert_eq!(r.protocol_problems(&s.id).unwrap(), Vec::<String>::new(), "{}", s.id);
    }
    assert!(r.runs().unwrap().iter().all(|run| run.state == RunState::Finished));
    assert_eq!(r.run(&RunId::new("rf")).unwrap().unwrap().completion.unwrap().0, Cursor(1));
    assert_eq!(r.integrity_check(), Ok(()));
    assert_eq!(RECOVERY_MESSAGE, "The process stopped before this request finished.");

    // Start: sequences and message ids above the maxima; every RunId with its fingerprint.
    assert_eq!(opened.start.next_seq, Some(Seq(7)));
    assert_eq!(opened.start.next_message, Some(MessageId(12)));
    let known: BTreeMap<_, _> =
        opened.start.runs.iter().map(|k| (k.run_id.as_str().to_owned(), k)).collect();
    assert_eq!(known.len(), 4, "runs without a RunId are not listed");
    assert_eq!(known["rf"].outcome, Outcome::Cancelled);
    assert_eq!(known["ra"].outcome, Outcome::Interrupted);
    assert_eq!((known["ra"].seq, &known["ra"].session), (Seq(2), &sid("a")));
    assert_eq!(
        known["rw"].fingerprint,
        Fingerprint::of(&Submit::new("w", "wait").with_run_id("rw"))
    );

    // Idempotent: a second open finds nothing to do and changes nothing.
    let before = dump(&r);
    drop(r);
    drop(opened.store);
    let again = open(&dir);
    assert!(again.recovered.is_empty());
    assert_eq!(dump(&again.store.reader().unwrap()), before);
    assert_eq!(again.start.next_message, Some(MessageId(12)));

    // Cursors continue across the reopen.
    let mut store = again.store;
    store.commit(&[txn("z", vec![new_run("z", 7, None, "z")])]).unwrap();
    let cursors = store.commit(&[ops("z", vec![outcome(cancelled("z", 7, None))])]).unwrap();
    assert_eq!(cursors, vec![Cursor(7)]);
}

fn deleted_message_ids_are_never_handed_out_again(kind: Kind) {
    let dir = Scratch::new(kind);
    let mut store = open(&dir).store;
    store
        .commit(&[
            ops("s", vec![]),
            txn(
                "s",
                vec![
                    new_run("s", 1, None, "p"),
                    Write::Op(StoreOp::SummaryMessage { session: sid("s"), id: MessageId(40) }),
                    Write::Op(StoreOp::SummaryDeleted { session: sid("s"), id: MessageId(40) }),
                ],
            ),
        ])
        .unwrap();
    // And one deleted by recovery.
    store
        .commit(&[ops("s", vec![StoreOp::SummaryMessage { session: sid("s"), id: MessageId(41) }])])
        .unwrap();
    drop(store);
    let opened = open(&dir);
    assert!(opened.store.reader().unwrap().messages(&sid("s")).unwrap().is_empty());
    assert_eq!(opened.start.next_message, Some(MessageId(42)));
    assert_eq!(opened.start.next_seq, Some(Seq(2)));
    assert_eq!(opened.recovered.len(), 1);
}

fn fingerprints_cover_attachments(kind: Kind) {
    let dir = Scratch::new(kind);
    let mut store = open(&dir).store;
    let attachments = vec![Attachment {
        name: "f".into(),
        media_type: "image/png".into(),
        content: "AAA".into(),
    }];
    let run = NewRun {
        session: sid("s"),
        seq: Seq(3),
        run_id: Some(RunId::new("r")),
        mode: Mode::OwnTurn,
        prompt: "see".into(),
        attachments: attachments.clone(),
        fingerprint: None,
    };
    store.commit(&[txn("s", vec![accept(run)])]).unwrap();
    drop(store);
    let start = open(&dir).start;
    let mut submit = Submit::new("s", "see").with_run_id("r");
    submit.attachments = attachments;
    assert_eq!(start.runs[0].fingerprint, Fingerprint::of(&submit));
    assert_ne!(start.runs[0].fingerprint, Fingerprint::of(&Submit::new("s", "see")));
    assert_eq!(start.runs[0].outcome, Outcome::Interrupted);
}

fn protocol_problems_name_the_message_and_call(kind: Kind) {
    let dir = Scratch::new(kind);
    let mut store = open(&dir).store;
    store
        .commit(&[txn(
            "s",
            vec![
                new_run("s", 1, None, "p"),
                Write::Op(activated("s", 1)),
                Write::Op(user("s", 1, 1, "p")),
                Write::Op(assistant("s", 1, 2)),
                Write::Op(tool_call("s", 1, 2, "orphan")),
                Write::Op(tool_result("s", 1, 2, "stray", "x")),
                Write::Op(finished("s", 1, 2, MessageFinish::ToolUse)),
                Write::Op(assistant("s", 1, 3)),
            ],
        )])
        .unwrap();
    let problems = store.reader().unwrap().protocol_problems(&sid("s")).unwrap();
    assert_eq!(
        problems,
        vec![
            "message m2: tool call orphan has no result",
            "message m2: result for call stray has no tool call",
            "message m3: assistant message has no finish",
        ]
    );
}
