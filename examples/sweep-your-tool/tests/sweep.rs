//! Sweeps of the simulated world with the `transfer` tool and a check of its own. Run with
//! `RUSTFLAGS="--cfg madsim" CARGO_TARGET_DIR=target/madsim cargo test --release -p
//! sweep-your-tool` (without the flag this file is empty: only the simulator can run a world).
//!
//! The seed count and the jobs come from `TURNSTILE_SIM_SEEDS` and `TURNSTILE_SIM_JOBS` when
//! set, so a nightly hunt runs the same test with more seeds; `TURNSTILE_SIM_SEED=N` reruns
//! one seed, as a failure's report says.

#![cfg(madsim)]

use sweep_your_tool::{Bank, Transfer};
use turnstile_sim::rng::Rng;
use turnstile_sim::sweep::Sweep;
use turnstile_sim::world::{Faults, Run};

const ACCOUNTS: [(&str, u64); 3] = [("alice", 100), ("bob", 100), ("carol", 100)];

/// A call's arguments, as the simulated model writes them.
fn transfer_input(rng: &mut Rng) -> String {
    let from = ACCOUNTS[rng.below(3) as usize].0;
    let to = ACCOUNTS[rng.below(3) as usize].0;
    format!(
        r#"{{"from":"{from}","to":"{to}","amount":{}}}"#,
        rng.between(1, 60)
    )
}

/// The transfer calls the core told the host to abort (a cancel, a shutdown), read off the
/// core's traces: `c123 at 4021 ms, ...`.
fn aborted_transfers(run: &Run<'_>) -> String {
    let mut transfers = std::collections::BTreeSet::new();
    let mut aborted = Vec::new();
    for (_, line) in run.traces.iter().flat_map(|t| &t.lines) {
        for output in line.expect.iter().flatten() {
            let kind = &output["kind"];
            let call = kind["call"]["call"].as_str().unwrap_or_default().to_owned();
            match kind["type"].as_str() {
                Some("run_tool") if kind["name"] == "transfer" => drop(transfers.insert(call)),
                Some("abort_tool") if transfers.contains(&call) => {
                    aborted.push(format!("{call} at {} ms", line.at.0));
                }
                _ => {}
            }
        }
    }
    if aborted.is_empty() {
        "none".to_owned()
    } else {
        aborted.join(", ")
    }
}

/// The built-in world with the transfer tool and the bank's check.
fn sweep(name: &str, transfer: fn(Bank) -> Transfer) -> Sweep {
    Sweep::new(name)
        .setup(move |world| {
            // A fresh bank per seed, shared by the tool and the check.
            let bank = Bank::new(&ACCOUNTS);
            world.tool(transfer(bank.clone()), transfer_input);
            world.check("the money is all there", move |run| {
                let total = bank.total();
                let expected: u64 = ACCOUNTS.iter().map(|a| a.1).sum();
                if total == expected {
                    return Ok(());
                }
                let (balances, cut) = (bank.balances(), aborted_transfers(run));
                Err(format!(
                    "the accounts hold {total}, not {expected} ({balances:?}); transfers the \
                     host aborted: {cut}"
                ))
            });
        })
        // Only this tool (and sub-agents, and a tool the model makes up): its calls are many.
        .without_built_in_tools()
        // A crash of the process cuts off any call, left to finish or not: surviving one is a
        // journal's job, not the lifecycle's, so this world has no crash and no outage.
        .faults(Faults {
            crash: 0,
            outage: 0,
            ..Faults::ALL
        })
        .seeds(200)
        // Failing seeds' core traces go under the target directory (`target/madsim/tmp/sweeps`).
        .out(concat!(env!("CARGO_TARGET_TMPDIR"), "/sweeps"))
}

#[test]
fn a_transfer_left_to_finish_keeps_the_money_whole() {
    sweep("transfer", Transfer::new).run().assert_passed();
}

#[test]
fn the_sweep_finds_a_transfer_that_a_cancel_cuts_in_half() {
    let report = sweep("droppable transfer", Transfer::droppable).run();
    assert!(
        !report.passed(),
        "the droppable transfer went unnoticed:\n{report}"
    );
    let first = &report.failures[0];
    assert!(
        first
            .violations
            .iter()
            .any(|v| v.starts_with("check `the money is all there`")),
        "{}",
        report.failures()
    );
    // The report says how to rerun the seed, and where its core trace is.
    assert!(
        first
            .rerun
            .starts_with(&format!("TURNSTILE_SIM_SEED={} ", first.seed)),
        "{}",
        first.rerun
    );
    assert!(
        first.rerun.contains("-p sweep-your-tool --test sweep"),
        "{}",
        first.rerun
    );
    assert!(
        first.trace.as_ref().is_some_and(|p| p.exists()),
        "{:?}",
        first.trace
    );
    // The failing seeds fail again when rerun alone: the tool is deterministic.
    assert!(
        report.nondeterministic.is_empty(),
        "{:?}",
        report.nondeterministic
    );
    eprintln!("{}", report.failures());
}
