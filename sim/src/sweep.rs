//! Running seeds under madsim: one deterministic runtime per seed, in parallel jobs.

use std::panic::AssertUnwindSafe;
use std::time::Duration;

use turnstile_host::store::MemoryDisk;

use crate::world::{Flights, SeedReport, WorldConfig, last_flight, world};

/// Simulated time after which a seed counts as hung.
pub const TIME_LIMIT: Duration = Duration::from_secs(3_600);

/// Runs one seed to its end in its own simulated runtime and checks it. A panic (a hang hits
/// the time limit, or a bug panics) becomes a violation. The flight trace is kept in the report
/// when the seed failed, or always with `keep_trace`.
#[must_use]
pub fn run_seed(seed: u64, knobs: &WorldConfig, keep_trace: bool) -> SeedReport {
    // A seed that panicked may leave its runtime's tasks, and so its disk, behind: a rerun of
    // the same seed in this process (shrinking, a mutant hunt) takes the next free name.
    let pid = std::process::id();
    let mut disk = MemoryDisk::new(&format!("turnstile-sim-{pid}-{seed}"));
    for again in 1..64 {
        if disk.is_ok() {
            break;
        }
        disk = MemoryDisk::new(&format!("turnstile-sim-{pid}-{seed}-{again}"));
    }
    let disk = match disk {
        Ok(d) => d,
        Err(e) => return failed(seed, format!("cannot create the memory disk: {e}")),
    };
    let mut rt = madsim::runtime::Runtime::with_seed_and_config(seed, madsim::Config::default());
    rt.set_time_limit(TIME_LIMIT);
    let flights = Flights::default();
    let result = std::panic::catch_unwind(AssertUnwindSafe(|| {
        rt.block_on(world(seed, knobs, &disk, &flights, keep_trace))
    }));
    match result {
        Ok(report) => report,
        Err(payload) => {
            let why = crate::panic_message(payload.as_ref());
            let mut report =
                failed(seed, format!("panicked (a hang ends at the time limit): {why}"));
            // What the host did until then: the trace of the incarnation that hung.
            report.trace = last_flight(&flights);
            report
        }
    }
}

fn failed(seed: u64, why: String) -> SeedReport {
    SeedReport { seed, violations: vec![why], ..SeedReport::default() }
}
