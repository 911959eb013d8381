//! The embedding example (`core/examples/sync_host.rs`) runs and does what its doc says.

#[path = "../core/examples/sync_host.rs"]
mod sync_host;

#[test]
fn the_synchronous_host_example_transcript() {
    let t = sync_host::transcript();
    assert!(t.contains("#1 RunComplete Completed text=\"There are two files.\""), "{t}");
    assert!(t.contains("#2 outcome Folded"), "the follow-up folds into the running turn\n{t}");
    assert!(t.contains("tool migrate runs on"), "{t}");
    assert!(
        t.contains("  5200 ms  #3 RunComplete Cancelled"),
        "the grace timer (5 s after the cancel) cleans up the tool left to finish\n{t}"
    );
    assert!(t.contains("recovery: #4 Some(RunId(\"run-3\")) Interrupted"), "{t}");
    assert!(
        t.contains("reply Existing { session: SessionId(\"qa\"), seq: Seq(4), run_id: RunId(\"run-3\"), outcome: Some(Interrupted) }"),
        "after the restart the finished run is answered, not run again\n{t}"
    );
    assert!(t.ends_with("stopped=true unfinished=0\n"), "{t}");
    insta::assert_snapshot!(t);
}

#[test]
fn the_example_stays_under_200_lines() {
    let lines = include_str!("../core/examples/sync_host.rs").lines().count();
    assert!(lines < 200, "the embedding example has {lines} lines");
}
