//! The change order (SPEC 9 "Server"): what each commit touched, pages, resumption.

use super::*;

both_stores!(
    changes_name_exactly_what_each_commit_touched_and_resume_across_a_restart,
    changes_from_far_back_come_in_pages_of_whole_revisions,
    pages_of_messages_follow_write_order_and_refuse_a_foreign_cursor,
    the_end_of_a_summary_changes_its_session_so_streams_see_it_stop_summarizing,
);

/// The messages and sessions a `changes` answer names, as `m<id>` and `s<id>`, in its order.
fn names(c: &Changes) -> Vec<String> {
    c.rows
        .iter()
        .map(|r| match r {
            Change::Message { message, .. } => format!("m{}", message.id.0),
            Change::Session(s) => format!("s{}", s.row.id),
        })
        .collect()
}

fn changes_name_exactly_what_each_commit_touched_and_resume_across_a_restart(kind: Kind) {
    let dir = Scratch::new(kind);
    let mut store = open(&dir).store;
    let reader = store.reader().unwrap();
    let start = reader.position().unwrap();
    assert_eq!(start.cursor, Cursor(0));
    // Revision 2: a submission of `a` is accepted and activated, with its messages.
    store
        .commit(&[txn(
            "a",
            vec![
                new_run("a", 1, Some("ra"), "hi"),
                Write::Op(activated("a", 1)),
                Write::Op(user("a", 1, 1, "hi")),
                Write::Op(assistant("a", 1, 2)),
            ],
        )])
        .unwrap();
    let after_a = reader.position().unwrap();
    assert_eq!(after_a.revision, store.revision() + 1);
    let c = reader.changes(start, 100).unwrap();
    assert_eq!(names(&c), ["m1", "m2", "sa"]);
    assert_eq!(c.now, after_a);
    let Change::Session(state) = &c.rows[2] else { panic!("a session") };
    assert_eq!((state.unfinished, state.waiting, state.messages), (1, 0, 2));
    assert!(state.busy());
    // Revision 3: `b` is accepted; `a` streams text. Only m2, a and b changed.
    store
        .commit(&[
            txn("b", vec![new_run("b", 2, Some("rb"), "other")]),
            ops("a", vec![text("a", 1, 2, "hel")]),
        ])
        .unwrap();
    let c = reader.changes(after_a, 100).unwrap();
    assert_eq!(names(&c), ["m2", "sb"], "streamed text changes the message, not its session");
    let after_b = c.now;
    // Revision 4: a tool call and its result change the message they belong to.
    store
        .commit(&[ops("a", vec![tool_call("a", 1, 2, "c1"), tool_result("a", 1, 2, "c1", "ok")])])
        .unwrap();
    let c = reader.changes(after_b, 100).unwrap();
    assert_eq!(names(&c), ["m2"]);
    let Change::Message { message, .. } = &c.rows[0] else { panic!("a message") };
    assert_eq!((message.text.as_str(), message.calls.len(), message.results.len()), ("hel", 1, 1));
    let before_crash = c.now;
    assert!(c.completions.is_empty());
    drop(reader);
    drop(store);
    // A restart: recovery ends both submissions interrupted and finishes m2, as a revision of
    // its own, so the position from before the crash sees exactly that.
    let opened = open(&dir);
    assert_eq!(opened.recovered.len(), 2);
    let reader = opened.store.reader().unwrap();
    let c = reader.changes(before_crash, 100).unwrap();
    assert_eq!(names(&c), ["m2", "sa", "sb"]);
    assert_eq!(c.completions.iter().map(|(k, _)| k.0).collect::<Vec<_>>(), [1, 2]);
    assert!(c.rows.iter().all(|r| r.revision() >= before_crash.revision));
    // The limit holds the completions back in order, and `more` says so.
    let first = reader.changes(before_crash, 1).unwrap();
    assert!(first.more);
    assert_eq!(first.completions.len(), 1);
    assert_eq!(first.now.cursor, Cursor(1));
    let rest = reader.changes(first.now, 1).unwrap();
    assert!(!rest.more);
    assert_eq!(rest.completions[0].0, Cursor(2));
    assert!(rest.rows.is_empty(), "the rows were all reported already");
    // Nothing changed after the newest position.
    let now = reader.position().unwrap();
    let c = reader.changes(now, 100).unwrap();
    assert!(c.rows.is_empty() && c.completions.is_empty());
    assert_eq!(c.now, now);
}

/// A catch-up from far back reads pages of whole revisions, no larger than the limit (but for
/// a single revision over it), and the completions only once every row is behind it: the
/// pages together are the answer read at once.
fn changes_from_far_back_come_in_pages_of_whole_revisions(kind: Kind) {
    let dir = Scratch::new(kind);
    let mut store = open(&dir).store;
    let reader = store.reader().unwrap();
    let start = reader.position().unwrap();
    for i in 1..=12_u64 {
        let s = format!("s{i}");
        let (user_id, reply_id) = (2 * i - 1, 2 * i);
        store
            .commit(&[txn(
                &s,
                vec![
                    new_run(&s, i, Some(&format!("r{i}")), "hi"),
                    Write::Op(activated(&s, i)),
                    Write::Op(user(&s, i, user_id, "hi")),
                    Write::Op(assistant(&s, i, reply_id)),
                ],
            )])
            .unwrap();
    }
    drop(reader);
    drop(store);
    // Recovery ends all twelve in one revision: 12 messages and 12 sessions, over the limit.
    let opened = open(&dir);
    assert_eq!(opened.recovered.len(), 12);
    let reader = opened.store.reader().unwrap();
    let whole = reader.changes(start, 1000).unwrap();
    assert!(!whole.more);
    let (mut rows, mut completions, mut at, mut pages) = (Vec::new(), Vec::new(), start, 0);
    loop {
        let page = reader.changes(at, 5).unwrap();
        pages += 1;
        let revisions: std::collections::BTreeSet<u64> =
            page.rows.iter().map(Change::revision).collect();
        assert!(page.rows.len() <= 5 || revisions.len() == 1, "a page of whole revisions");
        if !page.completions.is_empty() || !page.more {
            assert!(
                reader.changes(page.now, 1000).unwrap().rows.is_empty()
                    || page.completions.is_empty(),
                "completions only once every row is behind"
            );
        }
        rows.extend(names(&page));
        completions.extend(page.completions.iter().map(|(c, _)| c.0));
        at = page.now;
        if !page.more {
            break;
        }
    }
    assert!(pages > 3, "{pages} pages");
    assert_eq!(rows, names(&whole));
    assert_eq!(completions, whole.completions.iter().map(|(c, _)| c.0).collect::<Vec<_>>());
    assert_eq!(at, whole.now);
}

fn pages_of_messages_follow_write_order_and_refuse_a_foreign_cursor(kind: Kind) {
    let dir = Scratch::new(kind);
    let mut store = open(&dir).store;
    store
        .commit(&[txn(
            "a",
            vec![
                new_run("a", 1, None, "hi"),
                Write::Op(activated("a", 1)),
                Write::Op(user("a", 1, 1, "hi")),
                Write::Op(assistant("a", 1, 2)),
                Write::Op(assistant("a", 1, 3)),
            ],
        )])
        .unwrap();
    store
        .commit(&[txn(
            "b",
            vec![
                new_run("b", 2, None, "x"),
                Write::Op(activated("b", 2)),
                Write::Op(user("b", 2, 4, "x")),
            ],
        )])
        .unwrap();
    let reader = store.reader().unwrap();
    let ids =
        |page: Option<Vec<StoredMessage>>| page.unwrap().iter().map(|m| m.id.0).collect::<Vec<_>>();
    assert_eq!(ids(reader.messages_page(&sid("a"), None, 2).unwrap()), [1, 2]);
    assert_eq!(ids(reader.messages_page(&sid("a"), Some(MessageId(2)), 2).unwrap()), [3]);
    assert_eq!(
        ids(reader.messages_page(&sid("a"), Some(MessageId(3)), 2).unwrap()),
        Vec::<u64>::new()
    );
    assert_eq!(reader.messages_page(&sid("a"), Some(MessageId(4)), 2).unwrap(), None);
    assert_eq!(reader.session_state(&sid("nope")).unwrap(), None);
    assert_eq!(reader.session_state(&sid("b")).unwrap().unwrap().messages, 1);
}

fn the_end_of_a_summary_changes_its_session_so_streams_see_it_stop_summarizing(kind: Kind) {
    let dir = Scratch::new(kind);
    let mut store = open(&dir).store;
    store
        .commit(&[txn("s", vec![new_run("s", 1, None, "hi"), Write::Op(activated("s", 1))])])
        .unwrap();
    store
        .commit(&[ops("s", vec![StoreOp::SummaryMessage { session: sid("s"), id: MessageId(4) }])])
        .unwrap();
    let reader = store.reader().unwrap();
    assert!(reader.session_state(&sid("s")).unwrap().unwrap().summarizing);
    let before = reader.position().unwrap();
    store
        .commit(&[ops(
            "s",
            vec![StoreOp::SummaryFailed {
                session: sid("s"),
                id: MessageId(4),
                title: "t".into(),
                message: "m".into(),
            }],
        )])
        .unwrap();
    let c = reader.changes(before, 10).unwrap();
    assert_eq!(names(&c), ["m4", "ss"]);
    let Change::Session(state) = &c.rows[1] else { panic!("a session") };
    assert!(!state.summarizing);
}
