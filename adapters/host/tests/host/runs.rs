//! Runs end to end: completion, wait, resubmission, cancel, acceptance order.

use super::*;
use crate::common;

both_stores!(
    a_run_completes_with_its_text_and_is_in_the_ledger,
    wait_answers_before_during_after_and_after_a_restart,
    resubmission_is_idempotent_and_a_conflict_is_rejected_also_after_restart,
    cancel_ends_a_hanging_turn_and_the_queue_behind_it_with_one_completion_each,
    own_turns_run_in_acceptance_order_across_sessions_and_tools_run,
    a_resubmission_is_answered_only_after_the_run_is_durable,
);

async fn a_run_completes_with_its_text_and_is_in_the_ledger(kind: common::Kind) {
    let dir = common::Scratch::new(kind);
    let host = open(&config(&dir), echo()).await;
    let run = host.submit(Submit::new("s1", "hello").with_run_id("r1")).await.expect("accepted");
    assert_eq!(run.run_id, Some(RunId::new("r1")));
    assert!(!run.existing);
    let done = host.wait(&RunId::new("r1")).await.expect("completion");
    assert_eq!(done.outcome, Outcome::Completed);
    assert_eq!(done.text.as_deref(), Some("echo: hello"));
    assert_eq!(done.seq, run.seq);
    let row = host.read(|r| r.run(&RunId::new("r1"))).await.expect("read").expect("row");
    assert_eq!(row.state, RunState::Finished);
    assert_eq!(row.completion.expect("completion").1, done);
    let session =
        host.read(|r| r.session(&SessionId::new("s1"))).await.expect("read").expect("row");
    assert_eq!((session.prompt_tokens, session.completion_tokens, session.cost_micros), (10, 5, 7));
    assert_eq!(session.title.as_deref(), Some("hello"), "the provider's title was written");
    legal(&host, "s1").await;
    host.shutdown().await.expect("shutdown");
}

async fn wait_answers_before_during_after_and_after_a_restart(kind: common::Kind) {
    let dir = common::Scratch::new(kind);
    let c = config(&dir);
    let host = open(&c, echo()).await;
    let early = {
        let host = host.clone();
        // Before: the run does not exist yet, so this wait must be told "not found"...
        tokio::spawn(async move { host.wait(&RunId::new("r1")).await })
    };
    assert_eq!(
        early.await.expect("join"),
        Err(WaitError::NotFound(RunId::new("r1"))),
        "a RunId never accepted is not waited for"
    );
    host.submit(Submit::new("s1", "one").with_run_id("r1")).await.expect("accepted");
    // ... during:
    let during = host.wait(&RunId::new("r1")).await.expect("during");
    // ... after:
    let after = host.wait(&RunId::new("r1")).await.expect("after");
    assert_eq!(during, after);
    assert_eq!(host.wait(&RunId::new("nope")).await, Err(WaitError::NotFound(RunId::new("nope"))));
    assert_eq!(WaitError::NotFound(RunId::new("nope")).to_string(), "run not found: nope");
    assert_eq!(host.wait_seq(Seq(99)).await, Err(WaitError::SeqNotFound(Seq(99))));
    assert_eq!(WaitError::SeqNotFound(Seq(99)).to_string(), "run not found: seq 99");
    host.shutdown().await.expect("shutdown");
    drop(host);
    let again = open(&c, echo()).await;
    assert_eq!(again.wait(&RunId::new("r1")).await.expect("after restart"), after);
    again.shutdown().await.expect("shutdown");
}

async fn resubmission_is_idempotent_and_a_conflict_is_rejected_also_after_restart(
    kind: common::Kind,
) {
    let dir = common::Scratch::new(kind);
    let c = config(&dir);
    let host = open(&c, echo()).await;
    let first = host.submit(Submit::new("s1", "same").with_run_id("r1")).await.expect("accepted");
    host.wait(&RunId::new("r1")).await.expect("done");
    host.shutdown().await.expect("shutdown");
    drop(host);
    let host = open(&c, echo()).await;
    let again = host.submit(Submit::new("s1", "same").with_run_id("r1")).await.expect("existing");
    assert!(again.existing);
    assert_eq!((again.seq, again.outcome), (first.seq, Some(Outcome::Completed)));
    let conflict = host.submit(Submit::new("s1", "different").with_run_id("r1")).await;
    assert_eq!(conflict, Err(SubmitError::Rejected(Rejection::RunIdConflict(RunId::new("r1")))));
    assert_eq!(
        conflict.unwrap_err().to_string(),
        "run id r1 is already used by a different request"
    );
    let empty = host.submit(Submit::new("s1", "")).await;
    assert_eq!(empty, Err(SubmitError::Rejected(Rejection::PromptEmpty)));
    host.shutdown().await.expect("shutdown");
}

async fn cancel_ends_a_hanging_turn_and_the_queue_behind_it_with_one_completion_each(
    kind: common::Kind,
) {
    let dir = common::Scratch::new(kind);
    let host = open(&config(&dir), hang()).await;
    let s = SessionId::new("s1");
    host.submit(Submit::new("s1", "first").with_run_id("a")).await.expect("a");
    host.submit(Submit::new("s1", "second").with_run_id("b")).await.expect("b");
    common::until_active(&host, "a").await;
    assert!(host.is_busy(&s).await.expect("busy"));
    host.cancel(&s).await.expect("cancel");
    let a = host.wait(&RunId::new("a")).await.expect("a done");
    let b = host.wait(&RunId::new("b")).await.expect("b done");
    assert_eq!((a.outcome, b.outcome), (Outcome::Cancelled, Outcome::Cancelled));
    assert!(a.message_id.is_some(), "the active one was activated");
    assert!(b.message_id.is_none(), "the waiting one never was, and wrote no message");
    assert!(!host.is_busy(&s).await.expect("busy"));
    legal(&host, "s1").await;
    // An idle cancel changes nothing later (I10); cancel_run is precise.
    host.cancel(&s).await.expect("idle cancel");
    host.submit(Submit::new("s1", "third").with_run_id("c")).await.expect("c");
    host.submit(Submit::new("s1", "fourth").with_run_id("d")).await.expect("d");
    host.cancel_run(&RunId::new("d")).await.expect("cancel d");
    assert_eq!(host.wait(&RunId::new("d")).await.expect("d").outcome, Outcome::Cancelled);
    host.cancel_run(&RunId::new("c")).await.expect("cancel c");
    assert_eq!(host.wait(&RunId::new("c")).await.expect("c").outcome, Outcome::Cancelled);
    host.shutdown().await.expect("shutdown");
}

async fn own_turns_run_in_acceptance_order_across_sessions_and_tools_run(kind: common::Kind) {
    let dir = common::Scratch::new(kind);
    let provider = ScriptedProvider::new(|req, _| {
        let last = req.messages.last();
        match last {
            Some(turnstile_host::provider::RequestMessage::ToolResults(r)) => {
                Answer::streamed(&format!("tool said {}", r[0].content), 2, 1, usage())
            }
            _ if req.last_user_text() == Some("use a tool") => {
                Answer::tool_call("c1", "view", "{\"path\":\"x\"}")
            }
            _ => Answer::streamed(req.last_user_text().unwrap_or(""), 3, 2, usage()),
        }
    });
    let host = open(&config(&dir), provider).await;
    let mut seqs = Vec::new();
    for i in 0..6 {
        let session = format!("s{}", i % 3);
        let prompt = if i == 4 { "use a tool".to_owned() } else { format!("p{i}") };
        let run = host
            .submit(Submit::new(&session, prompt).with_run_id(format!("r{i}")))
            .await
            .expect("accepted");
        seqs.push(run.seq);
    }
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "sequences follow acceptance order: {seqs:?}");
    for i in 0..6 {
        let done = host.wait(&RunId::new(format!("r{i}"))).await.expect("done");
        assert_eq!(done.outcome, Outcome::Completed, "r{i}");
        if i == 4 {
            assert_eq!(done.text.as_deref(), Some("tool said echo {\"path\":\"x\"}"));
        }
    }
    for s in ["s0", "s1", "s2"] {
        legal(&host, s).await;
        // Own turns start in acceptance order: user messages are in sequence order (I7).
        let id = SessionId::new(s);
        let msgs = host.read(move |r| r.messages(&id)).await.expect("read");
        let user_seqs: Vec<_> = msgs
            .iter()
            .filter(|m| m.role == turnstile_host::store::StoredRole::User)
            .map(|m| m.seq)
            .collect();
        assert!(user_seqs.windows(2).all(|w| w[0] < w[1]), "{s}: {user_seqs:?}");
    }
    host.shutdown().await.expect("shutdown");
}

async fn a_resubmission_is_answered_only_after_the_run_is_durable(kind: common::Kind) {
    let dir = common::Scratch::new(kind);
    let mut c = config(&dir);
    let faults = common::faulty(&mut c);
    let host = open(&c, hang()).await;
    // The first acceptance's commit fails a few times (about 150 ms of retries).
    faults.fail_next(4, Fault::Locked);
    let first = {
        let host = host.clone();
        tokio::spawn(async move { host.submit(Submit::new("s", "same").with_run_id("r1")).await })
    };
    tokio::time::sleep(Duration::from_millis(20)).await;
    let again = host.submit(Submit::new("s", "same").with_run_id("r1")).await.expect("existing");
    assert!(again.existing);
    // Answered "existing" means the run is durable: wait finds it.
    let row = host.read(|r| r.run(&RunId::new("r1"))).await.expect("read");
    assert!(row.is_some(), "an existing run was reported before its ledger row was durable");
    let conflict = host.submit(Submit::new("other", "x").with_run_id("r1")).await;
    assert_eq!(conflict, Err(SubmitError::Rejected(Rejection::RunIdConflict(RunId::new("r1")))));
    first.await.expect("join").expect("accepted");
    host.shutdown().await.expect("shutdown");
}

/// A submission that brings its own sequence while the engine assigns them is host misuse:
/// refused as invalid, naming the core's reason, and the host goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_submission_with_its_own_sequence_is_invalid_and_the_host_goes_on() {
    let dir = common::Scratch::new(common::Kind::Sqlite);
    let host = open(&config(&dir), echo()).await;
    let mut submit = Submit::new("s", "numbered").with_run_id("r0");
    submit.seq = Some(Seq(7));
    let got = host.submit(submit).await;
    let Err(SubmitError::Invalid(InvalidRequest::Refused(HostError::WrongAcceptor { .. }))) = &got
    else {
        panic!("a sequence the engine did not assign: {got:?}");
    };
    let text = got.expect_err("refused").to_string();
    assert!(text.starts_with("engine refused an input: wrong acceptor: "), "{text}");
    assert_eq!(host.stopped(), None);
    host.submit(Submit::new("s", "plain").with_run_id("r1")).await.expect("accepted");
    assert_eq!(host.wait(&RunId::new("r1")).await.expect("done").outcome, Outcome::Completed);
    assert_eq!(host.wait(&RunId::new("r0")).await, Err(WaitError::NotFound(RunId::new("r0"))));
    host.shutdown().await.expect("shutdown");
}
