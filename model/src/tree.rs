//! The lockstep check as two passes ([`Strategy::Tree`](crate::Strategy::Tree), SPEC section 10
//! "Model"): the specification explored alone, then the core checked along the tree of
//! shortest paths.
//!
//! The first pass ([`explore`] without the core) numbers every state in breadth-first order and
//! keeps, for each, its parent and the action that first reached it, and for each expanded
//! state its transitions' targets. The parents form a tree whose paths are the shortest ones;
//! the frontier strategy's core at a state is the core driven along exactly that path. This
//! pass walks the tree depth-first with the core, so a worker holds the cores of one path and
//! of its pending siblings, not of a whole level, and checks at each state what the frontier
//! strategy checks there: the state invariants, the unfinished submissions, and every
//! transition's projection and observable digest. A state's transitions that only spend must
//! leave the core as they found it, so they are checked first, in turn, in one copy of the
//! state's core (`Lockstep::undo_spending`); the last of the others takes the core itself.
//!
//! Problems are ordered by their [`Position`] in the breadth-first search (the state's index,
//! then the check: the state's own, then its transitions in action order). The smallest is
//! reported, which is the one the frontier strategy stops at, with the counts it had reached
//! there, so both strategies give the same report. A worker skips work past the smallest
//! problem found so far.
//!
//! The work is split at the first level with at least [`UNITS`] states: one unit walks the
//! levels above it, and each state of that level roots a unit that rebuilds its core by
//! replaying its path into a fresh core (so no two workers share an id's reference count), then
//! walks its subtree. A transition into a state found earlier is compared with that state's
//! digest after the walk, because the walk that reaches the state first may run on another
//! worker.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use crate::driver::Lockstep;
use crate::search::{
    Edges, Found, Problem, Search, changed_by_spending, diverged, explore, fresh_core, key_of,
    path_to, step_in, successor,
};
use crate::spec::{Action, Emit, Spec};
use crate::{Bounds, Options, Progress, Report};

/// The least number of states in the level where the work is split into units: enough that
/// two workers finish together however unevenly the subtrees grow.
const UNITS: u32 = 4096;

/// A check's place in the breadth-first search's order: the state's index in the high half,
/// then [`STATE`], [`UNFINISHED`], [`STUCK`], or [`FIRST_EDGE`] plus the transition's number.
type Position = u64;
/// The core's state invariants.
const STATE: u64 = 0;
/// The unfinished submissions of core and specification.
const UNFINISHED: u64 = 1;
/// I6: nothing pending while a submission is unfinished (found by the first pass).
const STUCK: u64 = 2;
/// The first transition.
const FIRST_EDGE: u64 = 3;

fn position(state: u32, check: u64) -> Position {
    (u64::from(state) << 32) | check
}

/// Explores the specification, then checks the core along the tree of shortest paths.
pub(crate) fn check(
    bounds: &Bounds,
    options: &Options,
    started: Instant,
    progress: &mut dyn FnMut(Progress),
) -> Report {
    let alone = Options { conformance: false, ..options.clone() };
    let (search, found, truncated) = explore(bounds, &alone, true, progress);
    // The first pass's own problem, placed in the order; a cycle (found once the space is
    // exhausted) comes after every other.
    let limit = match &found {
        Some(f) if f.problem == Problem::Stuck => position(f.at, STUCK),
        _ => Position::MAX,
    };
    let walk = Walk::new(&search, options, limit);
    let first = walk.run(options.jobs.max(1), &search, progress);
    let mut report = match first {
        Some((at, f)) if at < limit => report_at(&search, started, at, f),
        _ => search.report(started, found),
    };
    report.truncated = truncated && report.counterexample.is_none();
    report
}

/// The second pass's shared state.
struct Walk<'a> {
    bounds: &'a Bounds,
    options: Options,
    symmetry: bool,
    /// Transitions that only spend lead back to their source (`Options::subsumption`).
    subsumption: bool,
    parents: &'a [(u32, Action)],
    edges: &'a Edges,
    /// States the first pass expanded (the rest are the frontier a state limit left).
    expanded: u32,
    /// The state the first pass found stuck: its transitions were not computed.
    stuck: Option<u32>,
    /// The states of the level that roots the units (empty: one unit walks the whole tree).
    split: std::ops::Range<u32>,
    /// Each state's observable digest, written by the walk that reaches it along its parent.
    observed: Vec<AtomicU64>,
    /// Each transition's digest where it leads to a state found earlier (compared afterwards).
    reached: Vec<AtomicU64>,
    /// The smallest position of a problem found so far.
    best: AtomicU64,
    found: Mutex<Option<(Position, Found)>>,
    checked: AtomicU64,
}

impl<'a> Walk<'a> {
    fn new(search: &'a Search<'a>, options: &Options, limit: Position) -> Walk<'a> {
        let edges = search.edges.as_ref().expect("the first pass keeps every transition");
        let states = search.parents.len();
        let expanded = (edges.start.len() - 1) as u32;
        let stuck = (limit != Position::MAX).then_some((limit >> 32) as u32);
        let mut split = 0..0;
        if options.jobs > 1 {
            let levels = &search.levels;
            for (l, &first) in levels.iter().enumerate() {
                let end = levels.get(l + 1).copied().unwrap_or(states as u32);
                if end - first >= UNITS {
                    split = first..end;
                    break;
                }
            }
        }
        Walk {
            bounds: search.bounds,
            options: options.clone(),
            symmetry: search.how.symmetry,
            subsumption: search.how.subsumption,
            parents: &search.parents,
            edges,
            expanded,
            stuck,
            split,
            observed: (0..states).map(|_| AtomicU64::new(0)).collect(),
            reached: (0..edges.target.len()).map(|_| AtomicU64::new(0)).collect(),
            best: AtomicU64::new(limit),
            found: Mutex::new(None),
            checked: AtomicU64::new(0),
        }
    }

    /// Walks every unit on `jobs` threads (this one included: it reports progress between its
    /// units), then compares the transitions into earlier states.
    fn run(
        &self,
        jobs: usize,
        search: &Search<'_>,
        progress: &mut dyn FnMut(Progress),
    ) -> Option<(Position, Found)> {
        let units = 1 + self.split.len();
        let next = AtomicUsize::new(0);
        let states = search.parents.len() as u64;
        std::thread::scope(|scope| {
            for _ in 1..jobs.min(units) {
                scope.spawn(|| self.work(&next, units, &mut || {}));
            }
            self.work(&next, units, &mut || {
                progress(Progress {
                    states,
                    transitions: search.transitions,
                    depth: search.depth,
                    checked: self.checked.load(Ordering::Relaxed),
                });
            });
        });
        let mut first = self.found.lock().map_or(None, |mut f| f.take());
        if let Some(d) = self.divergence() {
            first = Some(d);
        }
        first
    }

    fn work(&self, next: &AtomicUsize, units: usize, tick: &mut dyn FnMut()) {
        loop {
            let unit = next.fetch_add(1, Ordering::Relaxed);
            if unit >= units {
                return;
            }
            if unit == 0 {
                let spec = Spec::new(self.bounds.budget);
                let core = Box::new(fresh_core(self.bounds, &self.options));
                let mirrored = self.symmetry && key_of(&spec, true).1;
                self.observed[0].store(core.observable(mirrored), Ordering::Relaxed);
                self.walk(0, spec, core, true);
            } else {
                let root = self.split.start + unit as u32 - 1;
                if let Some((spec, core)) = self.rebuild(root) {
                    self.walk(root, spec, core, false);
                }
            }
            tick();
        }
    }

    /// The specification and the core at `state`, driven along its shortest path from fresh
    /// ones; `None` when a step on the way fails (the walk above finds and records that).
    fn rebuild(&self, state: u32) -> Option<(Spec, Box<Lockstep>)> {
        if position(state, STATE) > self.best.load(Ordering::Relaxed) {
            return None;
        }
        let mut spec = Spec::new(self.bounds.budget);
        let mut core = Box::new(fresh_core(self.bounds, &self.options));
        for a in path_to(self.parents, state, None) {
            let (s, c) = successor(&spec, Some(core), a).ok()?;
            (spec, core) = (s, c?);
        }
        Some((spec, core))
    }

    /// Walks the subtree of `root` depth-first, children in index order. The unit above the
    /// split (`top`) stops at the split's level, whose states root units of their own.
    fn walk(&self, root: u32, spec: Spec, core: Box<Lockstep>, top: bool) {
        let mut stack = vec![(root, spec, core)];
        let mut actions = Vec::new();
        let mut spares = Vec::new();
        let mut visited = 0;
        while let Some((state, spec, core)) = stack.pop() {
            if position(state, STATE) > self.best.load(Ordering::Relaxed) {
                continue; // everything below comes later in the order
            }
            visited += 1;
            let base = stack.len();
            let mut work = Work { actions: &mut actions, stack: &mut stack, spares: &mut spares };
            self.visit(state, &spec, core, top, &mut work);
            stack[base..].reverse();
        }
        self.checked.fetch_add(visited, Ordering::Relaxed);
    }

    /// Checks one state and its transitions with the core of its shortest path, and pushes
    /// its children with theirs.
    fn visit(&self, state: u32, spec: &Spec, core: Box<Lockstep>, top: bool, work: &mut Work) {
        let Work { actions, stack, spares } = work;
        if state >= self.expanded {
            return; // left unexpanded by a state limit
        }
        let fail = |check, problem, last| {
            self.record(position(state, check), Found { problem, at: state, last });
        };
        if let Err(fault) = core.check_state() {
            return fail(STATE, Problem::Core(fault), None);
        }
        if let Some(fault) = crate::search::unfinished_differ(spec, &core) {
            return fail(UNFINISHED, Problem::Core(fault), None);
        }
        if self.stuck == Some(state) {
            return;
        }
        spec.actions(actions);
        let row = self.edges.start[state as usize] as usize;
        debug_assert_eq!(self.edges.start[state as usize + 1] as usize - row, actions.len());
        // The first pass led exactly the transitions that only spend back to their source.
        let covered = |i: usize| self.subsumption && self.edges.target[row + i] == state;
        debug_assert!(
            actions.iter().enumerate().all(|(i, &a)| {
                covered(i) == (self.subsumption && crate::search::only_spends(spec, a))
            }),
            "the first pass marks the transitions that only spend"
        );
        // First, so that the last of the others can take this state's core.
        self.spend(state, spec, &core, (row, actions, &covered), spares);
        let before = |i: usize| position(state, FIRST_EDGE + i as u64) <= self.best();
        let last = (0..actions.len()).rev().find(|&i| !covered(i));
        let mut core = Some(core);
        for i in (0..actions.len()).filter(|&i| !covered(i)) {
            if !before(i) {
                break;
            }
            let (a, check) = (actions[i], FIRST_EDGE + i as u64);
            // The last takes the state's core instead of a copy of it; the others copy it
            // into a core a transition before them left over.
            let mine = match Some(i) == last {
                true => core.take(),
                false => core.as_deref().map(|c| copy(c, spares)),
            };
            let (next, stepped) = match successor(spec, mine, a) {
                Ok((next, Some(stepped))) => (next, stepped),
                Ok((_, None)) => unreachable!("the core runs in this pass"),
                Err(problem) => return fail(check, problem, Some(a)),
            };
            let target = self.edges.target[row + i];
            let digest = stepped.observable(self.symmetry && key_of(&next, true).1);
            if self.parents[target as usize] == (state, a) {
                self.observed[target as usize].store(digest, Ordering::Relaxed);
                if !top || !self.split.contains(&target) {
                    stack.push((target, next, stepped));
                    continue;
                }
            } else {
                self.reached[row + i].store(digest, Ordering::Relaxed);
            }
            give_back(spares, stepped);
        }
        // This state's core, when a problem stopped the others before their last.
        if let Some(core) = core {
            give_back(spares, core);
        }
    }

    /// Checks `state`'s transitions that only spend (those of `actions`, whose edges start at
    /// `row`, that are `covered`) in one copy of its `core`: each must leave the engine as it
    /// found it, so one copy serves them all ([`Lockstep::undo_spending`]). A problem is
    /// recorded; the state's other transitions before it in the order are still to be checked.
    #[allow(clippy::vec_box)]
    fn spend(
        &self,
        state: u32,
        spec: &Spec,
        core: &Lockstep,
        (row, actions, covered): (usize, &[Action], &dyn Fn(usize) -> bool),
        spares: &mut Vec<Box<Lockstep>>,
    ) {
        let mut spending = (0..actions.len()).filter(|&i| covered(i)).peekable();
        if spending.peek().is_none() {
            return;
        }
        let mut scratch = copy(core, spares);
        // Its core is compared with this state's, read the same way.
        let here = self.symmetry && key_of(spec, true).1;
        for i in spending {
            let (a, check) = (actions[i], FIRST_EDGE + i as u64);
            if position(state, check) > self.best() {
                break;
            }
            let problem = match step_in(spec, &mut scratch, a) {
                Err(problem) => Some(problem),
                Ok(_) if !scratch.same_future(core) => Some(changed_by_spending()),
                Ok(_) => None,
            };
            if let Some(problem) = problem {
                self.record(position(state, check), Found { problem, at: state, last: Some(a) });
                return; // the copy is spoilt
            }
            self.reached[row + i].store(scratch.observable(here), Ordering::Relaxed);
            scratch.undo_spending(core);
        }
        give_back(spares, scratch);
    }

    /// The smallest position of a problem found so far.
    fn best(&self) -> Position {
        self.best.load(Ordering::Relaxed)
    }

    fn record(&self, at: Position, found: Found) {
        if let Ok(mut first) = self.found.lock()
            && first.as_ref().is_none_or(|(p, _)| at < *p)
        {
            self.best.store(at, Ordering::Relaxed);
            *first = Some((at, found));
        }
    }

    /// The first transition, before every problem the walk found, into a state found earlier
    /// whose core looks different to a host from the core that state was reached with.
    fn divergence(&self) -> Option<(Position, Found)> {
        let best = self.best.load(Ordering::Relaxed);
        let observed = |t: u32| self.observed[t as usize].load(Ordering::Relaxed);
        let reached = |e: usize| self.reached[e].load(Ordering::Relaxed);
        let (at, state, i) =
            first_divergence(self.parents, self.edges, self.expanded, best, observed, reached)?;
        let last = Some(self.action(state, i));
        Some((at, Found { problem: diverged(), at: state, last }))
    }

    /// The action of `state`'s transition `i`, from its specification state.
    fn action(&self, state: u32, i: usize) -> Action {
        let mut spec = Spec::new(self.bounds.budget);
        for a in path_to(self.parents, state, None) {
            spec.apply(a, &mut Emit::new(false));
        }
        let mut actions = Vec::new();
        spec.actions(&mut actions);
        actions[i]
    }
}

/// A copy of `core`, written over a core `spares` holds when it has one.
#[allow(clippy::vec_box)] // the cores move between the stack, the steps and the spares as boxes
fn copy(core: &Lockstep, spares: &mut Vec<Box<Lockstep>>) -> Box<Lockstep> {
    match spares.pop() {
        Some(mut spare) => {
            core.fork_into(&mut spare);
            spare
        }
        None => Box::new(core.fork()),
    }
}

/// Keeps `core` for a later copy to be written over, unless `spares` holds enough.
#[allow(clippy::vec_box)]
fn give_back(spares: &mut Vec<Box<Lockstep>>, core: Box<Lockstep>) {
    if spares.len() < SPARES_MAX {
        spares.push(core);
    }
}

/// The most cores a worker keeps for reuse: a state's transitions take one each in turn and
/// give it back, so a few suffice; the rest are freed.
const SPARES_MAX: usize = 8;

/// What a worker's walk reuses from one state to the next.
#[allow(clippy::vec_box)] // the cores move between the stack, the steps and the spares as boxes
struct Work<'a> {
    /// The transitions of the state visited.
    actions: &'a mut Vec<Action>,
    /// The states to visit, each with its specification and its core.
    stack: &'a mut Vec<(u32, Spec, Box<Lockstep>)>,
    /// Cores no state needs any more, whose allocations the next copies reuse.
    spares: &'a mut Vec<Box<Lockstep>>,
}

/// Whether `state`'s transition into `target` is the one that found it (its tree edge):
/// `target` is `state`'s child and above `newest`, the newest child found so far by the
/// transitions before it (a state's children are numbered in the order its transitions first
/// reach them), which it then becomes.
fn finds(parents: &[(u32, Action)], state: u32, target: u32, newest: &mut u32) -> bool {
    let found = parents[target as usize].0 == state && target > *newest;
    if found {
        *newest = target;
    }
    found
}

/// The first transition before `best`, in the breadth-first order, that leads to a state found
/// earlier with a digest (`reached`) other than the one that state was found with
/// (`observed`): its position, its state and its number among the state's transitions. A
/// transition that finds its target first (its tree edge) is skipped: a state's children are
/// numbered in the order its transitions first reach them.
fn first_divergence(
    parents: &[(u32, Action)],
    edges: &Edges,
    expanded: u32,
    best: Position,
    observed: impl Fn(u32) -> u64,
    reached: impl Fn(usize) -> u64,
) -> Option<(Position, u32, usize)> {
    for state in 0..expanded {
        let row = edges.start[state as usize] as usize;
        let end = edges.start[state as usize + 1] as usize;
        let mut newest = 0;
        for (i, e) in (row..end).enumerate() {
            let at = position(state, FIRST_EDGE + i as u64);
            if at >= best {
                return None;
            }
            let target = edges.target[e];
            if finds(parents, state, target, &mut newest) {
                continue;
            }
            if observed(target) != reached(e) {
                return Some((at, state, i));
            }
        }
    }
    None
}

/// The report the breadth-first search gives when it stops at the problem at `at`: the states
/// and transitions it had merged by then, at the level it was expanding.
fn report_at(search: &Search<'_>, started: Instant, at: Position, found: Found) -> Report {
    let (state, check) = ((at >> 32) as u32, at & u64::from(u32::MAX));
    let edges = search.edges.as_ref().expect("the first pass keeps every transition");
    let row = edges.start[state as usize];
    // The transitions merged: every earlier state's, and this one's up to the failing one.
    let before = check.saturating_sub(FIRST_EDGE);
    let merged = if check >= FIRST_EDGE { before + 1 } else { 0 };
    // The states found: the root, the children of earlier states, and this one's reached by
    // its transitions before the failing one (the failing one's target is not merged).
    let parents = &search.parents;
    let earlier = parents[1..].partition_point(|&(p, _)| p < state) as u32;
    let mut newest = earlier;
    let mut mine = 0;
    for e in row..row + before {
        let t = edges.target[e as usize];
        mine += u64::from(finds(parents, state, t, &mut newest));
    }
    let mut report = search.report(started, Some(found));
    report.states = 1 + u64::from(earlier) + mine;
    report.transitions = row + merged;
    report.depth = (search.levels.partition_point(|&first| first <= state) - 1) as u32;
    report
}

#[cfg(test)]
mod tests {
    use super::{FIRST_EDGE, first_divergence, position};
    use crate::search::Edges;
    use crate::spec::Action;

    /// 0 → 1, 0 → 2, 0 → 1 again; 1 → 2, 1 → 3; 2 → 3. Tree edges: 0→1, 0→2, 1→3.
    fn graph() -> (Vec<(u32, Action)>, Edges) {
        let none = Action::Invalid;
        let parents = vec![(u32::MAX, none), (0, none), (0, none), (1, none)];
        let edges = Edges { start: vec![0, 3, 5, 6, 6], target: vec![1, 2, 1, 2, 3, 3] };
        (parents, edges)
    }

    #[test]
    fn equal_digests_everywhere_is_no_divergence() {
        let (parents, edges) = graph();
        let found =
            first_divergence(&parents, &edges, 4, u64::MAX, u64::from, |e| [1, 2, 1, 2, 3, 3][e]);
        assert_eq!(found, None);
    }

    #[test]
    fn the_first_differing_transition_into_a_known_state_is_found_and_tree_edges_are_skipped() {
        let (parents, edges) = graph();
        // The tree edges carry nonsense (they are never compared); 0's second transition into
        // 1 agrees; 1 → 2 and 2 → 3 differ: the first in the order is 1's transition 0.
        let reached = |e: usize| [99, 99, 1, 7, 99, 8][e];
        let found = first_divergence(&parents, &edges, 4, u64::MAX, u64::from, reached);
        assert_eq!(found, Some((position(1, FIRST_EDGE), 1, 0)));
        // Not before a problem found earlier in the order.
        let found = first_divergence(&parents, &edges, 4, position(1, 0), u64::from, reached);
        assert_eq!(found, None);
        // A second transition into a child found by the same state is compared too.
        let reached = |e: usize| [99, 99, 5, 2, 99, 3][e];
        let found = first_divergence(&parents, &edges, 4, u64::MAX, u64::from, reached);
        assert_eq!(found, Some((position(0, FIRST_EDGE + 2), 0, 2)));
    }
}
