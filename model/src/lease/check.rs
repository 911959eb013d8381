//! The exhaustive check of the lease protocol: every state within the bounds, breadth first,
//! each step judged by the ghost checks, and from every state a fault-free run that must end
//! every submission (liveness). A problem comes back with the shortest path to it.
//!
//! Hosts are interchangeable, so each state is kept under its canonical numbering of the hosts
//! ([`World::canonical`]); a counterexample is replayed from the start to name the hosts as
//! its own steps do.

use std::collections::HashMap;
use std::time::Instant;

use super::protocol::{Action, Bounds, Violation, apply, enabled};
use super::state::{Renaming, Row, World, seq};

/// A problem and the shortest way to it.
#[derive(Clone, Debug)]
pub struct Counterexample {
    /// The steps from the start, the one that broke a guarantee last. For [`Violation::Stuck`],
    /// the path to the state, then the fault-free run that never ends the submission.
    pub path: Vec<Action>,
    /// What broke.
    pub violation: Violation,
}

/// What a check found.
#[derive(Clone, Debug)]
pub struct Report {
    /// Distinct states explored.
    pub states: u64,
    /// Steps taken (transitions).
    pub transitions: u64,
    /// The deepest breadth-first level.
    pub depth: u32,
    /// Wall time.
    pub seconds: f64,
    /// The first problem in breadth-first order (a shortest path), if any.
    pub counterexample: Option<Counterexample>,
}

/// How many steps the fault-free run from a state may take before its submissions count as
/// stuck (unless it loops before): far more than a run needs (each submission takes a
/// handful of steps, a takeover waits one lease).
const DRAIN_STEPS: usize = 200;

/// Explores every state of `b`, breadth first.
#[must_use]
pub fn check(b: &Bounds) -> Report {
    let started = Instant::now();
    let start = b.start().canonical();
    // Each state once, with its index; the tree of shortest paths: each state's parent and
    // the step from it. Only the frontier keeps whole states beside the index.
    let mut index: HashMap<World, u32> = HashMap::new();
    let mut parent: Vec<(u32, Option<Action>)> = vec![(0, None)];
    index.insert(start.clone(), 0);
    let (mut transitions, mut depth) = (0_u64, 0_u32);
    let mut level = vec![(0_u32, start)];
    let counterexample = 'search: loop {
        let mut next = Vec::new();
        for (i, w) in &level {
            if let Err((steps, v)) = drain(b, w) {
                break 'search Some(replay(b, &path_to(&parent, *i), &steps, v));
            }
            for a in enabled(b, w) {
                transitions += 1;
                match apply(b, w, a) {
                    Err(v) => {
                        let mut path = path_to(&parent, *i);
                        path.push(a);
                        break 'search Some(replay(b, &path, &[], v));
                    }
                    Ok(target) => {
                        let target = target.canonical();
                        if index.contains_key(&target) {
                            continue;
                        }
                        let id = u32::try_from(parent.len()).expect("fewer than 2^32 states");
                        index.insert(target.clone(), id);
                        parent.push((*i, Some(a)));
                        next.push((id, target));
                    }
                }
            }
        }
        if next.is_empty() {
            break None;
        }
        depth += 1;
        level = next;
    };
    Report {
        states: parent.len() as u64,
        transitions,
        depth,
        seconds: started.elapsed().as_secs_f64(),
        counterexample,
    }
}

/// The counterexample with its hosts named as from the start. Each step of `path` names
/// hosts as its source's canonical form does, and each of `tail` as the last state's: the
/// path is replayed beside the canonical states it went through, each step renamed back by
/// the renaming that takes the replayed world to its canonical state. `found` is what broke,
/// kept when the replay ends without a step that breaks something (a stuck submission).
fn replay(b: &Bounds, path: &[Action], tail: &[Action], found: Violation) -> Counterexample {
    let mut world = b.start();
    let mut canonical = world.canonical();
    let renamings = Renaming::all(world.hosts.len());
    let mut out = Vec::new();
    for (k, &a) in path.iter().chain(tail).enumerate() {
        let names = renamings
            .iter()
            .find(|r| world.renamed(r) == canonical)
            .expect("a canonical form is a renaming");
        let a = a.renamed(|h| names.invert(h));
        // The tail runs with the clock and takes unbounded (the drain's bounds): only the
        // search's steps are checked against the search's bounds.
        assert!(
            k >= path.len() || enabled(b, &world).contains(&a),
            "the replay left the path at {a}"
        );
        out.push(a);
        match apply(b, &world, a) {
            Ok(next) => world = next,
            Err(v) => return Counterexample { path: out, violation: v },
        }
        // The search's steps each start from a canonical state; the tail runs on from the
        // last one without renumbering.
        if k < path.len() {
            let next = apply(b, &canonical, path[k]).expect("the search took this step");
            canonical = next.canonical();
        } else {
            canonical = world.renamed(names);
        }
    }
    Counterexample { path: out, violation: found }
}

fn path_to(parent: &[(u32, Option<Action>)], mut i: u32) -> Vec<Action> {
    let mut path = Vec::new();
    while let (p, Some(a)) = parent[i as usize] {
        path.push(a);
        i = p;
    }
    path.reverse();
    path
}

/// From `w`, runs the system without faults or new work, every host up, taking the first
/// action of a fixed order of preference (restarts and wakes, then answers, then the owners'
/// work, then takes, and the clock last, so time passes only when nothing else can happen).
/// Every submission must end. On failure: the steps taken and what broke.
fn drain(b: &Bounds, w: &World) -> Result<(), (Vec<Action>, Violation)> {
    let mut w = w.clone();
    w.crashes = 0;
    w.freezes = 0;
    // Without faults, one take ends any loss of the owner; two leave room. A run that needs
    // more goes round in takes (a bug) and is caught as a loop.
    w.takes = 2;
    // No new work.
    let free = Bounds {
        submissions: u8::try_from(w.db.subs.len()).expect("fits"),
        cancels: u8::try_from(w.db.cancels.len()).expect("fits"),
        ..*b
    };
    let mut steps = Vec::new();
    // The run is deterministic: a state met twice is a loop that never ends the work.
    let mut seen = std::collections::HashSet::new();
    for _ in 0..DRAIN_STEPS {
        if !w.db.has_work() && w.hosts.iter().all(|h| !h.busy()) {
            return Ok(());
        }
        if !seen.insert(w.clone()) {
            break;
        }
        let next = enabled(&free, &w).into_iter().filter(|a| preference(*a) < u8::MAX);
        let Some(a) = next.min_by_key(|a| preference(*a)) else { break };
        steps.push(a);
        w = apply(&free, &w, a).map_err(|v| (steps.clone(), v))?;
    }
    let stuck = w.db.subs.iter().position(|r| !matches!(r, Row::Done(_))).map_or(1, seq);
    Err((steps, Violation::Stuck(stuck)))
}

/// Lower first. Steps that only spend (a renewal, a tool run, a release) are never chosen:
/// the run must end without them.
fn preference(a: Action) -> u8 {
    match a {
        Action::Restart(_) | Action::Wake(_) => 0,
        Action::Execute(_) | Action::Receive(_) => 1,
        Action::Expire(_)
        | Action::ApplyCancel(_)
        | Action::Feed(_)
        | Action::CancelWaiting(..)
        | Action::Finish(_)
        | Action::Activate(_) => 2,
        Action::Try(_) => 3,
        Action::Tick => 4,
        Action::Accept(_)
        | Action::Cancel(_)
        | Action::Renew(_)
        | Action::Effect(_)
        | Action::Release(_)
        | Action::Crash(_)
        | Action::Freeze(_) => u8::MAX,
    }
}
