//! The exhaustive breadth-first checker (SPEC section 10 "Model").
//!
//! It explores every state of the specification reachable within a configuration's budgets,
//! each exactly once (deduplicated by its packed [`Key`]), level by level, so the first problem
//! found has a shortest path. On every state and every transition it checks:
//! - **conformance**: the core, driven in lockstep along the same path, produces the same
//!   projection (SPEC 7) as the specification on every explored transition;
//! - **the core's invariants** (SPEC 6): its public `check_invariants` and `Auditor` after every
//!   input;
//! - **I6 liveness**, as SPEC defines it: every state with an unfinished submission offers a
//!   host reply, and the graph of host replies has no cycle, so answering the pending requests
//!   in any order without client input always reaches a state where every submission has an
//!   outcome (every maximal path is finite and ends where nothing is pending);
//! - the specification's own assertions (an outcome decided twice panics in [`Spec`]).
//!
//! The core's state is kept beside each frontier state ([`Lockstep::fork`]); a state reached
//! again along another path is not explored again, which is sound because conformance makes
//! the core's observable behaviour a function of the specification state.

use std::collections::HashMap;
use std::time::Instant;

use turnstile_core::Start;
use turnstile_core::projection::Projection;
use turnstile_core::trace::{Trace, TraceHeader, TraceLine};

use crate::driver::{Fault, Lockstep};
use crate::encode::{BuildKeyHasher, Key, encode};
use crate::spec::{Action, Emit, Spec};
use crate::{Bounds, Options, Progress};

/// What the checker found wrong.
#[derive(Clone, Debug, PartialEq)]
pub enum Problem {
    /// The core's projected outputs differ from the specification's.
    Disagreement {
        /// What the specification says.
        expected: Box<Projection>,
        /// What the core did.
        actual: Box<Projection>,
    },
    /// The core broke an invariant, refused an input, or asked for no IO the spec expects.
    Core(Fault),
    /// I6: a state with an unfinished submission and no pending host request.
    Stuck,
    /// I6: answering host requests can go on forever (a cycle without client input).
    Cycle,
}

/// A problem with its shortest path, as a trace file the core's replay reproduces.
#[derive(Clone, Debug)]
pub struct Counterexample {
    /// What is wrong.
    pub problem: Problem,
    /// The abstract actions from the initial state.
    pub path: Vec<Action>,
    /// The same path as the core's trace (the last line carries the expectation that fails).
    pub trace: Trace,
}

/// What a check explored and found.
#[derive(Clone, Debug)]
pub struct Report {
    /// The configuration's name.
    pub config: String,
    /// Distinct states.
    pub states: u64,
    /// Transitions explored (each checked for conformance when that is on).
    pub transitions: u64,
    /// The deepest level (the longest shortest path).
    pub depth: u32,
    /// Wall time.
    pub seconds: f64,
    /// `None`: every check passed.
    pub counterexample: Option<Box<Counterexample>>,
    /// True when `max_states` stopped the search before the space was exhausted (the
    /// unexplored frontier was not checked for I6).
    pub truncated: bool,
}

impl Report {
    /// Distinct states per second.
    #[must_use]
    pub fn states_per_second(&self) -> f64 {
        self.states as f64 / self.seconds.max(1e-9)
    }
}

struct Node {
    index: u32,
    spec: Spec,
    core: Option<Box<Lockstep>>,
}

/// A problem found at state `at` (after `last`, when the problem is in a transition).
struct Found {
    problem: Problem,
    at: u32,
    last: Option<Action>,
}

/// The breadth-first search's memory: the visited states and how each was first reached.
struct Search<'a> {
    bounds: &'a Bounds,
    visited: HashMap<Key, u32, BuildKeyHasher>,
    /// For each state: its parent and the action that reached it (the shortest path).
    parents: Vec<(u32, Action)>,
    /// Host replies as (from, to): the graph I6's cycle check runs over.
    host_edges: Vec<[u32; 2]>,
    /// With the core in lockstep: each state's observable core digest, by index.
    observed: Vec<u64>,
    transitions: u64,
    depth: u32,
}

/// Explores `bounds` and reports.
#[must_use]
pub fn check(bounds: &Bounds, options: &Options, progress: &mut dyn FnMut(Progress)) -> Report {
    let started = Instant::now();
    let root = Spec::new(bounds.budget);
    let core = options.conformance.then(|| Box::new(Lockstep::new(&bounds.config)));
    let mut search = Search {
        bounds,
        visited: HashMap::default(),
        parents: vec![(u32::MAX, Action::Invalid)],
        host_edges: Vec::new(),
        observed: core.iter().map(|c| c.observable()).collect(),
        transitions: 0,
        depth: 0,
    };
    search.visited.insert(encode(&root), 0);
    let mut frontier = vec![Node { index: 0, spec: root, core }];
    let mut actions = Vec::new();
    while !frontier.is_empty() {
        let mut next = Vec::new();
        for node in frontier.drain(..) {
            if let Err(found) = search.expand(node, &mut actions, &mut next) {
                return search.report(started, Some(found));
            }
            if search.visited.len() % 65_536 < actions.len() {
                progress(search.progress());
            }
        }
        search.depth += u32::from(!next.is_empty());
        progress(search.progress());
        frontier = next;
        let full = options.max_states.is_some_and(|m| search.visited.len() as u64 >= m);
        if full && !frontier.is_empty() {
            let mut r = search.report(started, None);
            r.truncated = true;
            return r;
        }
    }
    let cycle = find_cycle(search.visited.len(), &search.host_edges);
    let found = cycle.map(|at| Found { problem: Problem::Cycle, at, last: None });
    search.report(started, found)
}

impl Search<'_> {
    /// Checks one state and pushes its new successors onto `next`.
    fn expand(
        &mut self,
        node: Node,
        actions: &mut Vec<Action>,
        next: &mut Vec<Node>,
    ) -> Result<(), Found> {
        let at = node.index;
        node.spec.actions(actions);
        if let Some(core) = &node.core {
            // The same submissions are unfinished on both sides (so, where the specification
            // has finished everything, so has the core: I6 for the core).
            let unfinished = (1..=node.spec.accepted).filter(|&n| node.spec.unfinished(n));
            let expected = unfinished.count() as u64;
            if core.unfinished() != expected {
                let fault = Fault::Violation(format!(
                    "the core has {} unfinished submissions, the specification {expected}",
                    core.unfinished()
                ));
                return Err(Found { problem: Problem::Core(fault), at, last: None });
            }
        }
        if node.spec.any_unfinished() && !actions.iter().any(|a| is_answer(*a)) {
            return Err(Found { problem: Problem::Stuck, at, last: None });
        }
        for &a in actions.iter() {
            self.transitions += 1;
            let found = |problem| Found { problem, at, last: Some(a) };
            let (spec, core) = successor(&node, a).map_err(found)?;
            let key = encode(&spec);
            let len = self.visited.len() as u32;
            let target = *self.visited.entry(key).or_insert(len);
            let digest = core.as_ref().map(|c| c.observable());
            if target == len {
                self.parents.push((at, a));
                self.observed.extend(digest);
                next.push(Node { index: target, spec, core });
            } else if digest.is_some_and(|d| self.observed.get(target as usize) != Some(&d)) {
                // Deduplication is sound only if every path to a specification state leaves
                // the core looking the same to a host.
                return Err(found(Problem::Core(Fault::Violation(
                    "two paths to the same specification state leave the core in different \
                     observable states (busy, queue, active turn, unfinished)"
                        .into(),
                ))));
            }
            if is_answer(a) {
                self.host_edges.push([at, target]);
            }
        }
        Ok(())
    }

    fn progress(&self) -> Progress {
        Progress {
            states: self.visited.len() as u64,
            transitions: self.transitions,
            depth: self.depth,
        }
    }

    fn report(&self, started: Instant, found: Option<Found>) -> Report {
        let counterexample = found.map(|f| {
            let path = path_to(&self.parents, f.at, f.last);
            Box::new(counterexample(self.bounds, f.problem, path))
        });
        Report {
            config: self.bounds.name.to_owned(),
            states: self.visited.len() as u64,
            transitions: self.transitions,
            depth: self.depth,
            seconds: started.elapsed().as_secs_f64(),
            counterexample,
            truncated: false,
        }
    }
}

/// The specification's successor by `a`, and the core's in lockstep when it runs: their
/// projections must agree.
fn successor(node: &Node, a: Action) -> Result<(Spec, Option<Box<Lockstep>>), Problem> {
    let mut spec = node.spec;
    let mut emit = Emit { on: node.core.is_some(), ..Emit::default() };
    spec.apply(a, &mut emit);
    let Some(core) = &node.core else { return Ok((spec, None)) };
    let mut core = core.fork();
    // An external acceptor assigning a sequence sends the core nothing: it must output nothing.
    let actual = match a.reaches_core() {
        true => core.step(&node.spec, a).map_err(Problem::Core)?.2,
        false => Projection::default(),
    };
    let expected = emit.finish();
    if expected != actual {
        let (expected, actual) = (Box::new(expected), Box::new(actual));
        return Err(Problem::Disagreement { expected, actual });
    }
    Ok((spec, Some(Box::new(core))))
}

/// A host reply to pending IO: what SPEC I6 lets the host answer (not a client command, not a
/// stale reply).
fn is_answer(a: Action) -> bool {
    !a.is_client() && !a.is_stale()
}

fn path_to(parents: &[(u32, Action)], mut at: u32, last: Option<Action>) -> Vec<Action> {
    let mut path: Vec<Action> = last.into_iter().collect();
    while at != 0 {
        let (parent, a) = parents[at as usize];
        path.push(a);
        at = parent;
    }
    path.reverse();
    path
}

/// A state on a cycle of host replies, if there is one (Kahn's algorithm: what cannot be
/// peeled off in topological order lies on or before a cycle; we return one that is on it).
fn find_cycle(states: usize, edges: &[[u32; 2]]) -> Option<u32> {
    // The breadth-first loop pushes each state's edges together, in index order.
    assert!(edges.is_sorted_by_key(|e| e[0]), "host edges are grouped by source");
    let mut out_degree = vec![0u32; states];
    let mut start = vec![0u32; states + 1];
    for [from, _] in edges {
        start[*from as usize + 1] += 1;
    }
    for i in 0..states {
        start[i + 1] += start[i];
    }
    let mut incoming = vec![0u32; edges.len()];
    // Reverse adjacency: for each target, its sources.
    let mut rstart = vec![0u32; states + 1];
    for [_, to] in edges {
        rstart[*to as usize + 1] += 1;
    }
    for i in 0..states {
        rstart[i + 1] += rstart[i];
    }
    let mut rfill = rstart.clone();
    for [from, to] in edges {
        out_degree[*from as usize] += 1;
        incoming[rfill[*to as usize] as usize] = *from;
        rfill[*to as usize] += 1;
    }
    // Peel states with no outgoing host edge (sinks), then whatever only leads to peeled ones.
    let mut stack: Vec<u32> = (0..states as u32).filter(|&s| out_degree[s as usize] == 0).collect();
    let mut peeled = 0usize;
    while let Some(s) = stack.pop() {
        peeled += 1;
        for i in rstart[s as usize]..rstart[s as usize + 1] {
            let from = incoming[i as usize] as usize;
            out_degree[from] -= 1;
            if out_degree[from] == 0 {
                stack.push(from as u32);
            }
        }
    }
    if peeled == states {
        return None;
    }
    // Every unpeeled state leads to a cycle; walk from one until a state repeats.
    let mut seen = vec![false; states];
    let mut at = (0..states).find(|&s| out_degree[s] > 0)? as u32;
    loop {
        if seen[at as usize] {
            return Some(at);
        }
        seen[at as usize] = true;
        let range = start[at as usize]..start[at as usize + 1];
        at = range.map(|i| edges_sorted_target(edges, i)).find(|&t| out_degree[t as usize] > 0)?;
    }
}

fn edges_sorted_target(edges: &[[u32; 2]], i: u32) -> u32 {
    // `start` indexes edges grouped by source only when they are pushed in source order, which
    // the breadth-first loop does (every state's edges are pushed together, in index order).
    edges[i as usize][1]
}

/// Replays `path` through a fresh specification and core, and writes it as a trace: every line
/// carries the specification's projection, so the core's replay fails exactly where the
/// checker did.
fn counterexample(bounds: &Bounds, problem: Problem, path: Vec<Action>) -> Counterexample {
    let mut spec = Spec::new(bounds.budget);
    let mut core = Lockstep::new(&bounds.config);
    let mut lines = Vec::new();
    for &a in &path {
        let before = spec;
        let mut emit = Emit { on: true, ..Emit::default() };
        spec.apply(a, &mut emit);
        let expected = emit.finish();
        if !a.reaches_core() {
            continue; // the core sees nothing of it, so the trace has no line for it
        }
        // The failing input belongs in the trace too: replay must reach it.
        let Ok((at, input)) = core.concrete(&before, a) else { break };
        let line = TraceLine { at, input, expect: None, expect_projection: Some(expected) };
        lines.push((lines.len() + 2, line));
        if core.step(&before, a).is_err() {
            break;
        }
    }
    let mut header = TraceHeader::new(bounds.config.clone(), Start::default());
    header.name = Some(format!("model-{}", bounds.name));
    header.rule = Some(describe(&problem));
    header.origin = Some(serde_json::json!({
        "model": bounds.name,
        "path": path.iter().map(|a| format!("{a:?}")).collect::<Vec<_>>(),
    }));
    Counterexample { problem, path, trace: Trace { header, lines } }
}

/// One line saying what the problem is.
#[must_use]
pub fn describe(p: &Problem) -> String {
    match p {
        Problem::Disagreement { .. } => {
            "the core's outputs disagree with the specification (SPEC 7)".into()
        }
        Problem::Core(Fault::Host(e)) => format!("the core refused a legal input: {e}"),
        Problem::Core(Fault::Violation(v)) => format!("the core broke an invariant: {v}"),
        Problem::Core(Fault::Unanswerable(w)) => {
            format!("the core did not ask for IO the specification expects: {w}")
        }
        Problem::Stuck => "I6: a submission is unfinished and nothing is pending".into(),
        Problem::Cycle => "I6: host replies alone can cycle forever".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::find_cycle;

    #[test]
    fn an_acyclic_graph_has_no_cycle() {
        // 0 → 1 → 3, 0 → 2 → 3: a diamond, edges grouped by source in index order.
        assert_eq!(find_cycle(4, &[[0, 1], [0, 2], [1, 3], [2, 3]]), None);
        assert_eq!(find_cycle(3, &[]), None);
    }

    #[test]
    fn a_cycle_is_found_and_the_state_returned_lies_on_it() {
        // 0 → 1 → 2 → 1, and 2 → 3 (a way out does not make the cycle harmless: I6 says every
        // order of answers must end).
        let at = find_cycle(4, &[[0, 1], [1, 2], [2, 1], [2, 3]]).expect("a cycle");
        assert!(at == 1 || at == 2, "{at} is not on the cycle");
        // A self-loop.
        assert_eq!(find_cycle(2, &[[0, 1], [1, 1]]), Some(1));
    }
}
