//! The breadth-first search behind the checker (SPEC section 10 "Model"): the frontier, the
//! expansion of states in chunks on the workers, the core in lockstep beside each frontier
//! state, what is found wrong ([`Problem`]) and the [`Report`]. `checker.rs` chooses how the
//! core follows the search (beside each state here, or along the tree in `tree.rs`).

use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use turnstile_core::Start;
use turnstile_core::projection::Projection;
use turnstile_core::trace::{Trace, TraceHeader, TraceLine};

use crate::driver::{Fault, Lockstep};
use crate::encode::{Key, canonical, encode};
use crate::spec::{Action, Emit, Spec};
use crate::visited::{Target, Visited};
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
    /// When a transition that only spends changed the core's state, the path to it (its last
    /// action that transition): the checker then checked again without subsumption
    /// ([`Options::subsumption`]), and the counts and the verdict are the larger search's.
    pub subsumption_dropped: Option<Vec<Action>>,
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
pub(crate) struct Found {
    pub(crate) problem: Problem,
    pub(crate) at: u32,
    pub(crate) last: Option<Action>,
}

/// Nodes per unit of parallel work: large enough that handing out work costs nothing beside
/// expanding it (a node is about 4 transitions of a few microseconds each).
const CHUNK: usize = 128;

/// Chunks per batch with several workers: the threads meet twice a batch (once expanded, once
/// resolved), so a batch is large enough that meeting costs nothing beside it. With
/// `--strategy frontier` a batch holds its transitions' cores until its merge: 8,192 states of
/// about 4 transitions, at 1.4 KB a core, about 45 MB.
const BATCH: usize = 64;

/// One transition, computed by a worker; the merge decides whether its target is new.
///
/// Without its specification state: most transitions lead to a state found earlier, and the
/// merge recomputes the state only for a new one (a transition is 64 bytes instead of 190).
struct Successor {
    action: Action,
    /// Its target's key; unused when `covered`.
    key: Key,
    /// Whether the transition only spends: its source subsumes its target
    /// ([`Spec::only_spends`], with [`Options::subsumption`]), so its target is not explored
    /// and its core is compared with its source's.
    covered: bool,
    core: Option<Box<Lockstep>>,
    /// The core's observable digest ([`Lockstep::observable`]), with the core in lockstep.
    digest: Option<u64>,
}

/// One expanded node: its transitions in action order, then the problem that stopped its
/// expansion, if one did (a problem in the node itself comes with no transitions).
struct Expanded {
    at: u32,
    /// The expanded state, from which the merge recomputes each new successor's.
    spec: Spec,
    successors: Vec<Successor>,
    found: Option<Found>,
}

/// Every expanded state's transitions, as their targets in action order (compressed rows:
/// state `s`'s are `target[start[s]..start[s + 1]]`; the states expanded are `0..start.len() -
/// 1`).
#[derive(Default)]
pub(crate) struct Edges {
    pub(crate) start: Vec<u64>,
    pub(crate) target: Vec<u32>,
}

/// The breadth-first search's memory: the visited states and how each was first reached.
/// The merge numbers new states in frontier order, so the result (indices, parents, the first
/// problem) does not depend on how many workers expanded and resolved the batches.
pub(crate) struct Search<'a> {
    pub(crate) bounds: &'a Bounds,
    /// The reductions it applies.
    pub(crate) how: Reductions,
    visited: Visited,
    /// For each state: its parent and the action that reached it (the shortest path). States
    /// are numbered as they are found, so a state's children are consecutive, and the parents
    /// never decrease.
    pub(crate) parents: Vec<(u32, Action)>,
    /// Host replies as (from, to): the graph I6's cycle check runs over.
    host_edges: Vec<[u32; 2]>,
    /// With the core in lockstep: each state's observable core digest, by index.
    observed: Vec<u64>,
    /// Every transition's target, when the search keeps them (the tree walk needs them).
    pub(crate) edges: Option<Edges>,
    /// The first state of each level.
    pub(crate) levels: Vec<u32>,
    pub(crate) transitions: u64,
    pub(crate) depth: u32,
}

/// The breadth-first search: the core in lockstep beside every frontier state when
/// `options.conformance`, and every transition's target kept ([`Search::edges`]) when `edges`.
/// Returns the search, its first problem (I6's cycle check included, when the space was
/// exhausted) and whether `max_states` stopped it.
pub(crate) fn explore<'a>(
    bounds: &'a Bounds,
    options: &Options,
    edges: bool,
    progress: &mut dyn FnMut(Progress),
) -> (Search<'a>, Option<Found>, bool) {
    let root = Spec::new(bounds.budget);
    let core = options.conformance.then(|| Box::new(fresh_core(bounds, options)));
    let how = Reductions { symmetry: options.symmetry, subsumption: options.subsumption };
    let (key, mirrored) = key_of(&root, how.symmetry);
    let mut search = Search {
        bounds,
        how,
        visited: Visited::new(options.jobs.max(1)),
        parents: vec![(u32::MAX, Action::Invalid)],
        host_edges: Vec::new(),
        observed: core.iter().map(|c| c.observable(mirrored)).collect(),
        edges: edges.then(Edges::default),
        levels: Vec::new(),
        transitions: 0,
        depth: 0,
    };
    let first = search.visited.resolve(&[key]);
    search.visited.number(&key, first[0]);
    let mut frontier = vec![vec![Node { index: 0, spec: root, core }]];
    let jobs = options.jobs.max(1);
    while !frontier.is_empty() {
        search.levels.push(frontier[0][0].index);
        let mut next = Vec::new();
        if let Err(found) = search.level(frontier, jobs, &mut next, progress) {
            return (search.sealed(), Some(found), false);
        }
        search.depth += u32::from(!next.is_empty());
        progress(search.progress());
        frontier = next;
        let full = options.max_states.is_some_and(|m| u64::from(search.visited.len()) >= m);
        if full && !frontier.is_empty() {
            return (search.sealed(), None, true);
        }
    }
    let cycle = find_cycle(search.visited.len() as usize, &search.host_edges);
    let found = cycle.map(|at| Found { problem: Problem::Cycle, at, last: None });
    (search.sealed(), found, false)
}

/// Adds a node to a level kept as chunks of [`CHUNK`] nodes (the order is the nodes'): the
/// workers take chunks as they are, and a level never moves as it grows.
fn push_chunked(level: &mut Vec<Vec<Node>>, node: Node) {
    match level.last_mut() {
        Some(chunk) if chunk.len() < CHUNK => chunk.push(node),
        _ => level.push({
            let mut chunk = Vec::with_capacity(CHUNK);
            chunk.push(node);
            chunk
        }),
    }
}

fn expand_chunk(chunk: Vec<Node>, how: Reductions) -> Vec<Expanded> {
    let mut actions = Vec::new();
    chunk.into_iter().map(|node| expand(node, &mut actions, how)).collect()
}

/// Expands a batch of chunks on `jobs` threads (this one among them), in frontier order;
/// the threads free `trash` first.
#[allow(clippy::vec_box)]
fn expand_batch(
    batch: Vec<Vec<Node>>,
    jobs: usize,
    how: Reductions,
    trash: Vec<Box<Lockstep>>,
) -> Vec<Vec<Expanded>> {
    if jobs <= 1 || batch.len() == 1 {
        drop(trash);
        return batch.into_iter().map(|chunk| expand_chunk(chunk, how)).collect();
    }
    let batch_len = batch.len();
    let slots: Vec<OnceLock<Vec<Expanded>>> = batch.iter().map(|_| OnceLock::new()).collect();
    let work = Mutex::new(batch.into_iter().enumerate());
    let trash = Mutex::new(trash);
    let worker = || {
        drop(trash.lock().map(|mut t| std::mem::take(&mut *t)));
        while let Some((i, chunk)) = work.lock().ok().and_then(|mut w| w.next()) {
            let done = slots[i].set(expand_chunk(chunk, how));
            debug_assert!(done.is_ok(), "each chunk is expanded once");
        }
    };
    std::thread::scope(|scope| {
        for _ in 1..jobs.min(batch_len) {
            scope.spawn(worker);
        }
        worker();
    });
    slots.into_iter().map(|s| s.into_inner().expect("every chunk was expanded")).collect()
}

/// The core at the initial state, as `options` runs it.
pub(crate) fn fresh_core(bounds: &Bounds, options: &Options) -> Lockstep {
    let core = Lockstep::new(&bounds.config);
    #[cfg(feature = "mutants")]
    let core = core.with_clock_in_digest(options.clock_in_digest);
    #[cfg(not(feature = "mutants"))]
    let _ = options;
    core
}

/// The sound reductions a search applies ([`Options::symmetry`], [`Options::subsumption`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Reductions {
    /// States merged with their mirror images.
    pub(crate) symmetry: bool,
    /// Transitions into subsumed states kept as transitions back to their source.
    pub(crate) subsumption: bool,
}

/// A state's key in the visited set, and whether it is its mirror image's
/// ([`canonical`]) when `symmetry` merges the two.
pub(crate) fn key_of(spec: &Spec, symmetry: bool) -> (Key, bool) {
    if symmetry { canonical(spec) } else { (encode(spec), false) }
}

impl Search<'_> {
    /// One level, a batch of chunks at a time: `jobs` threads expand the batch's chunks, then
    /// resolve its transitions' targets, one shard of the visited set each; then this thread
    /// merges the batch in frontier order.
    fn level(
        &mut self,
        frontier: Vec<Vec<Node>>,
        jobs: usize,
        next: &mut Vec<Vec<Node>>,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<(), Found> {
        let mut chunks = frontier.into_iter();
        // Freeing the cores of transitions into known states is a sixth of the work: the
        // workers do it while expanding the next batch, so the merge stays short.
        #[allow(clippy::vec_box)]
        let mut trash: Vec<Box<Lockstep>> = Vec::new();
        loop {
            // With one worker a batch is one chunk, so its keys are still in the cache when
            // they are looked up.
            let size = if jobs == 1 { 1 } else { BATCH };
            let batch: Vec<Vec<Node>> = chunks.by_ref().take(size).collect();
            if batch.is_empty() {
                return Ok(());
            }
            let expanded = expand_batch(batch, jobs, self.how, std::mem::take(&mut trash));
            let keys: Vec<Key> = expanded
                .iter()
                .flatten()
                .flat_map(|e| e.successors.iter().filter(|s| !s.covered).map(|s| s.key))
                .collect();
            let targets = self.visited.resolve(&keys);
            drop(keys);
            self.merge(expanded, targets, next, &mut trash)?;
            progress(self.progress());
        }
    }

    /// Merges expanded nodes, in order, into the search: each transition's target is found or
    /// numbered, its parent recorded; new targets join `next`. The first problem in frontier
    /// and action order wins, as in a sequential search.
    // The cores arrive boxed and leave boxed: moving the box moves a pointer, not the core.
    #[allow(clippy::vec_box)]
    fn merge(
        &mut self,
        expanded: Vec<Vec<Expanded>>,
        targets: Vec<Target>,
        next: &mut Vec<Vec<Node>>,
        trash: &mut Vec<Box<Lockstep>>,
    ) -> Result<(), Found> {
        let mut targets = targets.into_iter();
        for node in expanded.into_iter().flatten() {
            let at = node.at;
            if let Some(e) = &mut self.edges {
                debug_assert_eq!(e.start.len(), at as usize, "states are merged in order");
                e.start.push(e.target.len() as u64);
            }
            for s in node.successors {
                self.transitions += 1;
                if s.covered {
                    // Its target's futures are all its source's: the transition is kept as
                    // one back to its source, whose core the core it left must look like. It
                    // spent a budget, so it closes no cycle of host replies.
                    if let Some(e) = &mut self.edges {
                        e.target.push(at);
                    }
                    if s.digest.is_some_and(|d| self.observed[at as usize] != d) {
                        return Err(Found { problem: diverged(), at, last: Some(s.action) });
                    }
                    trash.extend(s.core);
                    continue;
                }
                let len = self.visited.len();
                let resolved = targets.next().expect("one target per transition");
                let target = self.visited.number(&s.key, resolved);
                if let Some(e) = &mut self.edges {
                    e.target.push(target);
                }
                if is_answer(s.action) {
                    self.host_edges.push([at, target]);
                }
                if target == len {
                    self.parents.push((at, s.action));
                    self.observed.extend(s.digest);
                    let mut spec = node.spec;
                    spec.apply(s.action, &mut Emit::new(false));
                    debug_assert_eq!(key_of(&spec, self.how.symmetry).0, s.key, "the same state");
                    push_chunked(next, Node { index: target, spec, core: s.core });
                    continue;
                }
                if s.digest.is_some_and(|d| self.observed.get(target as usize) != Some(&d)) {
                    return Err(Found { problem: diverged(), at, last: Some(s.action) });
                }
                // A known state: its core goes back to a worker to be freed there.
                trash.extend(s.core);
            }
            if let Some(found) = node.found {
                // The failing transition counts, as the sequential search counted it.
                self.transitions += u64::from(found.last.is_some());
                return Err(found);
            }
        }
        Ok(())
    }

    fn progress(&self) -> Progress {
        Progress {
            states: self.parents.len() as u64,
            transitions: self.transitions,
            depth: self.depth,
            checked: 0,
        }
    }

    /// The search after its last merge: the visited set is dropped (only the merge needs it)
    /// and the edges' rows closed.
    fn sealed(mut self) -> Self {
        self.visited.clear();
        self.host_edges = Vec::new();
        if let Some(e) = &mut self.edges {
            e.start.push(e.target.len() as u64);
        }
        self
    }

    pub(crate) fn report(&self, started: Instant, found: Option<Found>) -> Report {
        let counterexample = found.map(|f| {
            let path = path_to(&self.parents, f.at, f.last);
            Box::new(counterexample(self.bounds, f.problem, path))
        });
        Report {
            config: self.bounds.name.to_owned(),
            states: self.parents.len() as u64,
            transitions: self.transitions,
            depth: self.depth,
            seconds: started.elapsed().as_secs_f64(),
            counterexample,
            truncated: false,
            subsumption_dropped: None,
        }
    }
}

/// Checks one state (it is new: every node is expanded once) and computes its transitions, in
/// action order, up to the first that fails.
fn expand(node: Node, actions: &mut Vec<Action>, how: Reductions) -> Expanded {
    let at = node.index;
    let stuck = |problem| Expanded {
        at,
        spec: node.spec,
        successors: Vec::new(),
        found: Some(Found { problem, at, last: None }),
    };
    node.spec.actions(actions);
    if let Some(core) = &node.core {
        // The state invariants, once per distinct state (the transition into it was checked
        // by the auditor when it was computed).
        if let Err(fault) = core.check_state() {
            return stuck(Problem::Core(fault));
        }
        if let Some(fault) = unfinished_differ(&node.spec, core) {
            return stuck(Problem::Core(fault));
        }
    }
    if node.spec.any_unfinished() && !actions.iter().any(|a| is_answer(*a)) {
        return stuck(Problem::Stuck);
    }
    let mut successors = Vec::with_capacity(actions.len());
    // A covered transition's core is compared with this state's, read the same way.
    let here = node.core.is_some() && how.symmetry && key_of(&node.spec, true).1;
    let mut core = node.core;
    let last = actions.len().saturating_sub(1);
    for (i, &action) in actions.iter().enumerate() {
        // The last transition takes the node's core instead of a copy of it, unless it only
        // spends: its core is then compared with the node's.
        let take =
            i == last && !(how.subsumption && core.is_some() && only_spends(&node.spec, action));
        let mine = if take { core.take() } else { core.as_ref().map(|c| Box::new(c.fork())) };
        match successor(&node.spec, mine, action) {
            Ok((spec, stepped)) => {
                let covered = how.subsumption && node.spec.only_spends(action, &spec);
                if let (true, Some(c), Some(p)) = (covered, &stepped, &core)
                    && !c.same_future(p)
                {
                    let found =
                        Some(Found { problem: changed_by_spending(), at, last: Some(action) });
                    return Expanded { at, spec: node.spec, successors, found };
                }
                let core = stepped;
                let (key, mirrored) = match covered {
                    true => (Key::default(), here),
                    false => key_of(&spec, how.symmetry),
                };
                let digest = core.as_ref().map(|c| c.observable(mirrored));
                successors.push(Successor { action, key, covered, core, digest });
            }
            Err(problem) => {
                let found = Some(Found { problem, at, last: Some(action) });
                return Expanded { at, spec: node.spec, successors, found };
            }
        }
    }
    Expanded { at, spec: node.spec, successors, found: None }
}

/// Whether the core and the specification have different numbers of unfinished submissions
/// (the same are unfinished on both sides, so where the specification has finished
/// everything, so has the core: I6 for the core).
pub(crate) fn unfinished_differ(spec: &Spec, core: &Lockstep) -> Option<Fault> {
    let expected = (1..=spec.accepted).filter(|&n| spec.unfinished(n)).count() as u64;
    (core.unfinished() != expected).then(|| {
        Fault::Violation(format!(
            "the core has {} unfinished submissions, the specification {expected}",
            core.unfinished()
        ))
    })
}

/// A transition into a state found earlier left the core looking different to a host from
/// the core that state was first reached with. Deduplication is sound only if every path to a
/// specification state leaves the core looking the same.
pub(crate) fn diverged() -> Problem {
    Problem::Core(Fault::Violation(
        "two paths to the same specification state leave the core in different observable \
         states (busy, queue, active turn, unfinished)"
            .into(),
    ))
}

/// A transition that only spends (the specification's source subsumes its target) left the
/// core in another state than its source's. The checker does not report it: it checks again
/// without subsumption ([`Options::subsumption`]), which follows the target and finds whether
/// the difference ever shows, with a counterexample that replays.
pub(crate) fn changed_by_spending() -> Problem {
    Problem::Core(Fault::Violation(
        "a transition that only spends (the specification changes nothing but a budget or a \
         stale reply) changed the core's state"
            .into(),
    ))
}

/// Whether the transition by `a` from `spec` only spends ([`Spec::only_spends`]), computed
/// before the core steps: the caller then keeps the source's core to compare.
pub(crate) fn only_spends(spec: &Spec, a: Action) -> bool {
    let mut next = *spec;
    next.apply(a, &mut Emit::new(false));
    spec.only_spends(a, &next)
}

/// The specification's successor by `a`, and the core's in lockstep when it runs (`core` is
/// the core of the state before, to be moved on): their projections must agree.
pub(crate) fn successor(
    before: &Spec,
    core: Option<Box<Lockstep>>,
    a: Action,
) -> Result<(Spec, Option<Box<Lockstep>>), Problem> {
    let Some(mut core) = core else {
        let mut spec = *before;
        spec.apply(a, &mut Emit::new(false));
        return Ok((spec, None));
    };
    let spec = step_in(before, &mut core, a)?;
    Ok((spec, Some(core)))
}

/// The specification's successor by `a`, with `core` (the core of the state before) stepped
/// in place: their projections must agree.
pub(crate) fn step_in(before: &Spec, core: &mut Lockstep, a: Action) -> Result<Spec, Problem> {
    let mut spec = *before;
    let mut emit = Emit::new(true);
    spec.apply(a, &mut emit);
    // An external acceptor assigning a sequence sends the core nothing: it must output nothing.
    let actual = match a.reaches_core() {
        true => core.step_unchecked(before, a).map_err(Problem::Core)?.2,
        false => Projection::default(),
    };
    let expected = emit.finish();
    if expected != actual {
        let (expected, actual) = (Box::new(expected), Box::new(actual));
        return Err(Problem::Disagreement { expected, actual });
    }
    Ok(spec)
}

/// A host reply to pending IO: what SPEC I6 lets the host answer (not a client command, not a
/// stale reply).
fn is_answer(a: Action) -> bool {
    !a.is_client() && !a.is_stale()
}

pub(crate) fn path_to(parents: &[(u32, Action)], mut at: u32, last: Option<Action>) -> Vec<Action> {
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
        let mut emit = Emit::new(true);
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
