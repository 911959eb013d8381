//! The embedding example (`core/examples/sync_host.rs`) runs and does what its doc says.

#[path = "../core/examples/sync_host.rs"]
mod sync_host;

#[test]
fn the_synchronous_host_example_transcript() {
    let t = sync_host::transcript();
    assert!(
        t.contains("#1 RunComplete Completed Some(EndTurn) text=\"There are two files.\""),
        "{t}"
    );
    assert!(t.contains("#2 outcome Folded"), "the follow-up folds into the running turn\n{t}");
    assert!(t.contains("tool slow hangs"), "{t}");
    assert!(
        t.contains("  5200 ms  #3 RunComplete Cancelled"),
        "the grace timer (5 s after the cancel) cleans up\n{t}"
    );
    assert!(t.ends_with("stopped=true messages=8 unfinished=0\n"), "{t}");
    insta::assert_snapshot!(t);
}

#[test]
fn the_example_stays_under_200_lines() {
    let lines = include_str!("../core/examples/sync_host.rs").lines().count();
    assert!(lines < 200, "the embedding example has {lines} lines");
}
