//! The compact state encoding: a specification state packed into 32 bytes, exactly (two states
//! are equal exactly when their keys are; no hash is trusted for equality).
//!
//! Every field gets a fixed number of bits in fixed bytes; a value that does not fit panics, so a larger
//! configuration cannot silently merge states. `tests` check that the encoding is injective
//! over a whole explored state space.

use std::hash::{BuildHasherDefault, Hasher};

use turnstile_core::{Mode, Outcome};

use crate::spec::{
    Attempt, AttemptPhase, Budget, Call, Cause, Closing, Lane, Spec, Status, Title, Tool, TurnPhase,
};

/// A packed state: 32 bytes.
pub type Key = [u8; 32];

/// Writes small fields into bytes; a value too wide for its field panics (a configuration
/// larger than the encoding would otherwise merge distinct states).
struct Pack {
    bytes: Key,
    at: usize,
}

impl Pack {
    #[inline(always)]
    fn byte(&mut self, value: u64, what: &str) {
        if value > 0xff || self.at == self.bytes.len() {
            too_wide(what, value, 8);
        }
        self.bytes[self.at] = value as u8;
        self.at += 1;
    }

    /// Two 4-bit fields in one byte.
    #[inline(always)]
    fn nibbles(&mut self, hi: u8, lo: u8, what: &str) {
        if hi > 0xf || lo > 0xf {
            too_wide(what, u64::from(hi.max(lo)), 4);
        }
        self.byte(u64::from(hi << 4 | lo), what);
    }
}

#[cold]
#[inline(never)]
fn too_wide(what: &str, value: u64, bits: u32) -> ! {
    panic!("{what} = {value} does not fit in {bits} bits: the configuration is too large")
}

/// Packs a state.
#[must_use]
pub fn encode(s: &Spec) -> Key {
    let mut p = Pack { bytes: [0; 32], at: 0 };
    let closing = match s.closing {
        Closing::Open => 0,
        Closing::Draining { deadline: false } => 1,
        Closing::Draining { deadline: true } => 2,
        Closing::Closed => 3,
    };
    let stale = s.stale.iter().enumerate().fold(0u8, |acc, (i, f)| acc | u8::from(*f) << i);
    // accepted 4 bits, closing 2, then shutdown's budget (0 or 1) in bit 6 and the budget of
    // calls of the tool left to finish once started (0 or 1) in bit 7.
    if s.accepted > 15 {
        too_wide("accepted", u64::from(s.accepted), 4);
    }
    if s.budget.shutdowns > 1 {
        too_wide("shutdowns", u64::from(s.budget.shutdowns), 1);
    }
    if s.budget.asking > 1 {
        too_wide("asking", u64::from(s.budget.asking), 1);
    }
    let shutdowns = u64::from(s.budget.shutdowns) << 6 | u64::from(s.budget.asking) << 7;
    p.byte(u64::from(s.accepted) | closing << 4 | shutdowns, "accepted");
    p.byte(u64::from(stale), "stale flags");
    for sub in s.subs.iter().take(s.accepted as usize) {
        // session 1 bit, mode 1, run 2, status 4, pauses 2: 10 bits in two bytes (the child's
        // submission has session bit 0: the sub-agent's bytes name it).
        let run = sub.run.map_or(0, |r| u64::from(r) + 1);
        let session = u64::from(sub.session & 1);
        let head = session | u64::from(sub.mode == Mode::Fold) << 1 | run << 2;
        p.byte(head | status(sub.status) << 4, "submission");
        // pauses 2 bits, then the steps the step limit counts (SPEC 4.6).
        if sub.pauses > 3 {
            too_wide("pauses", u64::from(sub.pauses), 2);
        }
        p.byte(u64::from(sub.pauses) | u64::from(sub.steps) << 2, "pauses and steps");
    }
    // Unused submission slots encode as nothing: `accepted` says how many follow.
    for lane in &s.lanes[..2] {
        encode_lane(&mut p, lane);
    }
    // Each lane's first call: its state is in the lane's bytes, its bit here (`call_bits`:
    // which tool it names, SPEC 4.9, whether its work began, or whether its result stops the
    // turn); then whether the lane's streaming attempt had content since its watchdog was
    // armed (SPEC 4.5): one bit per lane; then each lane's second call's state, 2 bits per
    // lane.
    let call = |l: &Lane, i: usize| match l {
        Lane::Turn(t) => call_bits(t.calls[i]),
        _ => (0, 0),
    };
    let content = |l: &Lane| match l {
        Lane::Turn(t) => matches!(t.phase, TurnPhase::Step(a) if a.content),
        Lane::Summary(sm) => sm.attempt.content,
        Lane::Idle => false,
    };
    let flags = call(&s.lanes[0], 0).1
        | call(&s.lanes[1], 0).1 << 1
        | u64::from(content(&s.lanes[0])) << 2
        | u64::from(content(&s.lanes[1])) << 3
        | call(&s.lanes[0], 1).0 << 4
        | call(&s.lanes[1], 1).0 << 6;
    p.byte(flags, "calls and content");
    // Each session's title in 3 bits: 0 untitled, 7 written, else the requesting sequence;
    // then each lane's second call's bit.
    let title = |t: Title| match t {
        Title::Untitled => 0,
        Title::Requested { seq } if (1..=6).contains(&seq) => u64::from(seq),
        Title::Requested { seq } => too_wide("title request", u64::from(seq), 3),
        Title::Titled => 7,
    };
    let seconds = call(&s.lanes[0], 1).1 << 6 | call(&s.lanes[1], 1).1 << 7;
    p.byte(title(s.titles[0]) | title(s.titles[1]) << 3 | seconds, "titles");
    let b = budget(&s.budget);
    for pair in b.chunks(2) {
        p.nibbles(pair[0], pair.get(1).copied().unwrap_or(0), "budget");
    }
    encode_sub_agent(&mut p, s);
    p.bytes
}

/// The key of a state's class under the symmetry of its two sessions: the smaller of its own
/// key and its mirror image's ([`Spec::mirrored`]), and whether that is the mirror's. With
/// one session there is no mirror image (the second session is never used).
#[must_use]
pub fn canonical(s: &Spec) -> (Key, bool) {
    let key = encode(s);
    if s.budget.sessions < 2 {
        return (key, false);
    }
    let mirror = encode(&s.mirrored());
    if mirror < key { (mirror, true) } else { (key, false) }
}

/// The sub-agent's part of a state (SPEC 4.11), in five bytes after the rest, written only
/// when one is not zero: a configuration without the `agent` tool keeps its 32 bytes for its
/// other fields (all zero means: no `agent` call left to make, none made, no child).
fn encode_sub_agent(p: &mut Pack, s: &Spec) {
    if s.budget.agents > 1 {
        too_wide("agents", u64::from(s.budget.agents), 1);
    }
    let agent = |l: &Lane| matches!(l, Lane::Turn(t) if matches!(t.calls[0], Call::Agent { .. }));
    let (content, call) = match &s.lanes[2] {
        Lane::Turn(t) => {
            if t.calls[1] != Call::None {
                too_wide("a sub-agent's second call", 1, 0);
            }
            (matches!(t.phase, TurnPhase::Step(a) if a.content), call_bits(t.calls[0]).1)
        }
        _ => (false, 0),
    };
    let (parent, step, seq) = s.child.map_or((0, 0, 0), |c| (c.parent, c.step, c.seq));
    if seq > 7 || step > 15 {
        too_wide("the child's sequence or step", u64::from(seq.max(step)), 3);
    }
    // The child's sequence names the one submission whose session is the child (its own
    // submission byte says session 0).
    let flags = u64::from(s.budget.agents)
        | u64::from(agent(&s.lanes[0])) << 1
        | u64::from(agent(&s.lanes[1])) << 2
        | u64::from(content) << 3
        | call << 4
        | u64::from(seq) << 5;
    let link = u64::from(parent) | u64::from(step) << 1;
    let mut lane = Pack { bytes: [0; 32], at: 0 };
    encode_lane(&mut lane, &s.lanes[2]);
    let bytes = [flags, link, lane.bytes[0].into(), lane.bytes[1].into(), lane.bytes[2].into()];
    if bytes.iter().any(|b| *b != 0) {
        for b in bytes {
            p.byte(b, "sub-agent");
        }
    }
}

/// A call's code (2 bits) and its one bit: which tool it names while streamed or running (and
/// whether an asking call's work began), whether its result asked to stop once it has one.
///
/// Read with its turn's phase, which the lane's bytes hold: while the step streams (backing
/// off or refreshing included) a call is none or streamed, never running or done; once the
/// stream finished (the tools run, or the turn aborts) it is none, running or done, never
/// streamed. So a streamed call of the tool left to finish once started takes a running
/// call's code, and a running one a streamed call's: distinct states keep distinct keys (the
/// test `the_state_encoding_is_injective` checks it over whole explored spaces).
fn call_bits(c: Call) -> (u64, u64) {
    match c {
        Call::None => (0, 0),
        Call::Streamed { tool: Tool::Dropped } => (1, 0),
        Call::Streamed { tool: Tool::Finishes } => (1, 1),
        // Running's code: nothing runs while the step streams.
        Call::Streamed { tool: Tool::Asks { started } } => (2, u64::from(started)),
        Call::Running { tool: Tool::Dropped } => (2, 0),
        Call::Running { tool: Tool::Finishes } => (2, 1),
        // Streamed's code: nothing streams once the stream finished.
        Call::Running { tool: Tool::Asks { started } } => (1, u64::from(started)),
        Call::Done { stop } => (3, u64::from(stop)),
        // The sub-agent's bytes say the first call is an `agent` call: streamed only while
        // the step streams, running only after.
        Call::Agent { running } => (1 + u64::from(running), 0),
    }
}

/// What is left to spend. The constants of a configuration (`sessions`, `external`,
/// `untitled`, `step_limit`) are the same in every state of one exploration, so they are not
/// in the key; `shutdowns` and `asking` (one bit each) go with `accepted`.
fn budget(b: &Budget) -> [u8; 20] {
    [
        b.stalls,
        b.odd_finishes,
        b.finishing,
        b.submits,
        b.runs,
        b.replays,
        b.cancels,
        b.cancel_runs,
        b.clears,
        b.summarizes,
        b.second_calls,
        b.prep_failures,
        b.tool_calls,
        b.stops,
        b.highs,
        b.retryable,
        b.fatal,
        b.auth,
        b.refresh_failures,
        b.stale,
    ]
}

fn status(s: Status) -> u64 {
    match s {
        Status::Preparing => 0,
        Status::Prepared => 1,
        Status::Active => 2,
        Status::Paused => 3,
        Status::Done(o) => {
            4 + match o {
                Outcome::Completed => 0,
                Outcome::Failed => 1,
                Outcome::Cancelled => 2,
                Outcome::Interrupted => 3,
                Outcome::Folded => 4,
            }
        }
        Status::InFlight { covered: false } => 9,
        Status::InFlight { covered: true } => 10,
        Status::LookUp { same: false } => 11,
        Status::LookUp { same: true } => 12,
        Status::Answered => 13,
    }
}

/// number 3 bits, used 3, refreshed 1: one byte; the phase goes with the caller's tag.
fn attempt_byte(a: &Attempt) -> u64 {
    u64::from(a.number) | u64::from(a.used) << 3 | u64::from(a.refreshed) << 6
}

fn attempt_phase(a: &Attempt) -> u64 {
    match a.phase {
        AttemptPhase::Streaming => 0,
        AttemptPhase::Backoff => 1,
        AttemptPhase::Refreshing => 2,
    }
}

fn encode_lane(p: &mut Pack, lane: &Lane) {
    // Three bytes: the tag with the small fields, then two payload bytes. A turn's first call's
    // state (2 bits) is split over the free top bits of its first and third bytes.
    match lane {
        Lane::Idle => {
            p.byte(0, "lane");
            p.byte(0, "lane");
            p.byte(0, "lane");
        }
        Lane::Turn(t) => {
            let call = call_bits(t.calls[0]).0;
            let (phase, extra, attempt) = match &t.phase {
                TurnPhase::Step(a) => (0, attempt_phase(a), attempt_byte(a)),
                TurnPhase::Tool => (1, 0, 0),
                TurnPhase::Aborting { cause, grace } => {
                    (2, u64::from(*cause == Cause::Shutdown) | u64::from(*grace) << 1, 0)
                }
            };
            let tag = 1 | phase << 2 | extra << 4 | u64::from(t.high) << 6 | (call >> 1) << 7;
            p.byte(tag, "lane");
            if t.owner > 15 || t.step > 15 {
                too_wide("owner or step", u64::from(t.owner.max(t.step)), 4);
            }
            if t.owner > 7 {
                too_wide("owner", u64::from(t.owner), 3);
            }
            let owner = u64::from(t.owner) | u64::from(t.tool_use) << 3;
            p.byte(owner | u64::from(t.step) << 4, "owner and step");
            if attempt > 0x7f {
                too_wide("attempt", attempt, 7);
            }
            p.byte(attempt | (call & 1) << 7, "attempt");
        }
        Lane::Summary(sm) => {
            p.byte(2 | attempt_phase(&sm.attempt) << 2, "lane");
            p.byte(sm.resume.map_or(0, u64::from), "resume");
            p.byte(attempt_byte(&sm.attempt), "attempt");
        }
    }
}

/// A fast hasher for packed keys (FxHash's multiply-rotate): the keys are already dense bits,
/// and the visited set is only ever probed, never iterated, so its order decides nothing.
#[derive(Default, Clone, Copy)]
pub struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // A key arrives as its 24 bytes: mix them a word at a time.
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.write_u64(u64::from_le_bytes(w));
        }
        for b in chunks.remainder() {
            self.write_u64(u64::from(*b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}

/// The hasher for maps keyed by [`Key`].
pub type BuildKeyHasher = BuildHasherDefault<KeyHasher>;
