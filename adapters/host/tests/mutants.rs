//! The host's mutants (SPEC 10, `src/mutants.rs`): each, switched on, makes a specific
//! difference that a test of the real host rejects. Each case names that test; the crash
//! test's own mutant case is in `tests/crash.rs`.

#![cfg(feature = "mutants")]

mod common;

use std::sync::Arc;
use std::time::Duration;

use turnstile_core::{Outcome, RunId, SessionId, Submit, Usage};
use turnstile_host::store::Fault;
use turnstile_host::{
    Answer, Host, HostConfig, HostMutant, ScriptedProvider, SubmitError, ToolSet,
};

fn config(dir: &tempfile::TempDir, mutant: HostMutant) -> HostConfig {
    let mut c = common::config_in(dir.path());
    c.store.mutant = Some(mutant);
    c
}

async fn open(c: &HostConfig, p: ScriptedProvider) -> Host {
    common::open_with(c, p, ToolSet::new()).await
}

fn echo() -> ScriptedProvider {
    ScriptedProvider::new(|_, _| Answer::streamed("echo", 2, 1, Usage::default()))
}

#[test]
fn every_mutant_has_a_case_here_or_in_the_crash_test() {
    let names: Vec<&str> = HostMutant::ALL.iter().map(|m| m.name()).collect();
    assert_eq!(
        names,
        [
            "publish_before_commit",
            "reply_before_durable",
            "structural_overtakes_held",
            "recovery_leaves_orphans",
            "child_offered_agent",
            "abort_policy_lost"
        ]
    );
    for m in HostMutant::ALL {
        assert_eq!(HostMutant::from_name(m.name()), Some(*m));
    }
}

/// The mutants of several hosts are hunted by the simulator's members world (`turnstile-sim
/// members-mutants`, in CI), where each is found; the real-process test finds the first too
/// (a stale owner's commit stops its host), and the last is also found below.
#[test]
fn every_several_hosts_mutant_is_named_and_apart_from_a_host_alone() {
    let names: Vec<&str> = HostMutant::MEMBERS.iter().map(|m| m.name()).collect();
    assert_eq!(
        names,
        [
            "member_no_fence",
            "member_stale_take",
            "member_acts_past_deadline",
            "member_watermark_out_of_order",
            "member_take_drops_waiting",
            "member_take_runs_twice",
            "member_held_unfenced"
        ]
    );
    for m in HostMutant::MEMBERS {
        assert_eq!(HostMutant::from_name(m.name()), Some(*m));
        assert!(!HostMutant::ALL.contains(m), "{} is several hosts' only", m.name());
    }
}

/// Rejected by the audit of `members.rs`'s
/// `a_members_streamed_text_is_written_under_its_epoch`: the text the debounce writes goes
/// without the lease's epoch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn member_held_unfenced_writes_streamed_text_without_an_epoch() {
    let dir = tempfile::tempdir().expect("dir");
    let mut c = config(&dir, HostMutant::MemberHeldUnfenced);
    let audit = turnstile_host::store::Audit::default();
    c.store.audit = Some(audit.clone());
    c.member = Some(turnstile_host::MemberConfig::new("h0"));
    // Ten pieces 60 ms apart: each is held past the 33 ms debounce and written by it.
    let text = "one two three four five six seven eight nine ten";
    let p = ScriptedProvider::new(move |_, _| Answer::streamed(text, 10, 60, Usage::default()));
    let host = open(&c, p).await;
    host.submit(Submit::new("s", "p").with_run_id("r")).await.expect("accepted");
    let done = host.wait(&RunId::new("r")).await.expect("done");
    assert_eq!(done.outcome, Outcome::Completed);
    host.shutdown().await.expect("shutdown");
    let found = audit.fenced_writes();
    assert!(found.iter().any(|f| f.contains("a write without an epoch")), "{found:?}");
}

/// Rejected by `a_persistent_store_failure_stops_the_engine_and_recovery_decides_on_restart`:
/// a waiter hears an outcome that was never recorded, and recovery later decides another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publish_before_commit_publishes_an_outcome_the_ledger_never_had() {
    let dir = tempfile::tempdir().expect("dir");
    let mut c = config(&dir, HostMutant::PublishBeforeCommit);
    c.store_retry = Duration::from_millis(100);
    let faults = common::faulty(&mut c);
    let host = open(&c, ScriptedProvider::new(|_, _| Answer::hang())).await;
    host.submit(Submit::new("s", "x").with_run_id("r1")).await.expect("accepted");
    common::until_active(&host, "r1").await;
    // Nothing else may be left to write when the disk fills (the title, the step's message):
    // only the cancel's clean-up must meet the fault.
    loop {
        let s = SessionId::new("s");
        let row = host.read(move |r| r.session(&s)).await.expect("read").expect("row");
        if row.title.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    host.flush().await.expect("flush");
    faults.fail_always(Fault::DiskFull);
    let waiter = {
        let host = host.clone();
        tokio::spawn(async move { host.wait(&RunId::new("r1")).await })
    };
    // The waiter must be registered before the outcome is (wrongly) published.
    while host.waiters() == 0 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    host.cancel(&SessionId::new("s")).await.expect("cancel");
    let heard = waiter.await.expect("join").expect("the mutant publishes an outcome");
    assert_eq!(heard.outcome, Outcome::Cancelled);
    let _ = host.shutdown().await;
    drop(host);
    faults.clear();
    let mut again = None;
    for _ in 0..200 {
        if let Ok(h) = Host::open(c.clone(), Arc::new(echo()), ToolSet::new()).await {
            again = Some(h);
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let again = again.expect("reopened");
    let recorded = again.wait(&RunId::new("r1")).await.expect("recorded");
    assert_eq!(recorded.outcome, Outcome::Interrupted, "published cancelled, recorded interrupted");
    again.shutdown().await.expect("shutdown");
}

/// Rejected by `after_a_storage_failure_finished_runs_are_still_answered_by_sequence` (a
/// submission whose row cannot be written is answered with the stop): the caller hears
/// "accepted" for a RunId the ledger never holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reply_before_durable_accepts_a_run_that_is_never_recorded() {
    let dir = tempfile::tempdir().expect("dir");
    let mut c = config(&dir, HostMutant::ReplyBeforeDurable);
    c.store_retry = Duration::from_millis(100);
    let faults = common::faulty(&mut c);
    let host = open(&c, echo()).await;
    faults.fail_always(Fault::ReadOnly);
    let reply = host.submit(Submit::new("s", "never durable").with_run_id("r1")).await;
    assert!(reply.is_ok(), "the mutant answers before the commit: {reply:?}");
    let stopped = host.wait(&RunId::new("r1")).await;
    assert!(stopped.is_err(), "{stopped:?}");
    assert!(!matches!(host.submit(Submit::new("s", "y")).await, Err(SubmitError::Rejected(_))));
    let row = host.read(|r| r.run(&RunId::new("r1"))).await.expect("read");
    assert_eq!(row, None, "accepted, yet the ledger has no row for it");
}

/// Rejected by `a_run_complete_is_published_after_its_text_is_durable`: when the RunComplete
/// is published, the store does not hold the text it reports.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn structural_overtakes_held_publishes_before_the_text_is_stored() {
    let dir = tempfile::tempdir().expect("dir");
    let mut c = config(&dir, HostMutant::StructuralOvertakesHeld);
    c.debounce = Duration::from_secs(30);
    let provider = common::two_deltas_then_finish();
    let host = open(&c, provider).await;
    host.submit(Submit::new("s", "go").with_run_id("r")).await.expect("ok");
    let done = host.wait(&RunId::new("r")).await.expect("done");
    assert_eq!(done.text.as_deref(), Some("all of it"));
    let stored = common::assistant_text(&host, "s").await;
    assert_eq!(stored, "", "the RunComplete was published before its text was written");
    let _ = host.shutdown().await;
}

/// Rejected by `a_sub_agent_runs_in_a_child_session_and_its_text_is_the_parent_s_result`
/// (`tests/host.rs`): the child's request offers the `agent` tool.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn child_offered_agent_offers_sub_agents_to_a_sub_agent() {
    let dir = tempfile::tempdir().expect("dir");
    let offered: Arc<std::sync::Mutex<Vec<(SessionId, bool)>>> = Arc::default();
    let seen = offered.clone();
    let provider = ScriptedProvider::new(move |req, _| {
        let agent = req.tools.iter().any(|t| t.name == "agent");
        seen.lock().expect("lock").push((req.session.clone(), agent));
        match req.messages.last() {
            _ if req.session.is_child() => Answer::streamed("done", 1, 1, Usage::default()),
            Some(turnstile_host::provider::RequestMessage::ToolResults(_)) => {
                Answer::streamed("ok", 1, 1, Usage::default())
            }
            _ => Answer::tool_call("c1", "agent", r#"{"prompt":"go"}"#),
        }
    });
    let c = config(&dir, HostMutant::ChildOfferedAgent);
    let host = Host::open(c, Arc::new(provider), ToolSet::new().with_agent()).await.expect("open");
    host.submit(Submit::new("p", "x").with_run_id("r1")).await.expect("accepted");
    host.wait(&RunId::new("r1")).await.expect("completion");
    let offered = offered.lock().expect("lock").clone();
    assert!(
        offered.iter().any(|(s, agent)| s.is_child() && *agent),
        "the mutant offers `agent` to the child: {offered:?}"
    );
    host.shutdown().await.expect("shutdown");
}

/// Rejected by `a_tool_that_must_finish_is_not_cut_off_and_its_result_is_written`: the setup
/// loses the tool's abort policy, so the core aborts the call, the host drops it half-way, and
/// the stored result is the cancel text instead of what the tool did.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_policy_lost_cuts_off_a_tool_that_must_finish() {
    let dir = tempfile::tempdir().expect("dir");
    let results =
        common::cancel_during_a_tool_left_to_finish(config(&dir, HostMutant::AbortPolicyLost))
            .await;
    let cancelled = (turnstile_core::CANCELLED_TOOL_RESULT.to_owned(), true);
    assert_eq!(results, [cancelled], "the call was cut off and its work lost");
}
