//! One transition's outputs, put into SPEC section 7's canonical order by construction.
//!
//! Handlers do not push outputs in the order they think of them; they put each output into its
//! bucket: (1) the reply, (2) aborts, (3) per deciding submission its writes, flush, ledger
//! outcome, commit and completion, (4) per session its hand-off and starts, then (5) the tail
//! (the shutdown deadline and `Stopped`). [`Tx::finish`] orders the buckets, so the order of a
//! transition's outputs is a function of what it decided, never of code paths.

use std::collections::BTreeMap;

use crate::alphabet::{AttemptIo, OutputKind, Seq, SessionId, TimerId};

/// SPEC 7's categories, in output order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Bucket {
    Reply,
    Abort,
    Decided,
    Handoff,
    Tail,
}

/// The outputs of the transition being computed. The engine keeps one and reuses its buffer.
#[derive(Debug, Default)]
pub(crate) struct Tx {
    /// (bucket, sequence, output); sorted stably by bucket, sequence and (for aborts) call id at
    /// the end, so push order breaks ties within one submission's bucket.
    items: Vec<(Bucket, Seq, OutputKind)>,
}

impl Tx {
    pub(crate) fn reply(&mut self, out: OutputKind) {
        debug_assert!(!self.items.iter().any(|i| i.0 == Bucket::Reply), "one reply per transition");
        self.items.push((Bucket::Reply, Seq(0), out));
    }

    /// An abort, ordered by (sequence, call id) among the aborts.
    pub(crate) fn abort(&mut self, seq: Seq, out: OutputKind) {
        self.items.push((Bucket::Abort, seq, out));
    }

    /// A write, flush, ledger outcome, commit or completion of submission `seq`.
    pub(crate) fn decided(&mut self, seq: Seq, out: OutputKind) {
        self.items.push((Bucket::Decided, seq, out));
    }

    /// A hand-off or start of the turn of submission `seq`.
    pub(crate) fn handoff(&mut self, seq: Seq, out: OutputKind) {
        self.items.push((Bucket::Handoff, seq, out));
    }

    pub(crate) fn tail(&mut self, out: OutputKind) {
        self.items.push((Bucket::Tail, Seq(0), out));
    }

    /// Ends the open transaction of `seq`'s decided bucket with a `Commit` when its last
    /// output is a write.
    pub(crate) fn seal_decided(&mut self, seq: Seq) {
        self.seal(Bucket::Decided, seq);
    }

    /// Same as [`Tx::seal_decided`] for a hand-off bucket.
    pub(crate) fn seal_handoff(&mut self, seq: Seq) {
        self.seal(Bucket::Handoff, seq);
    }

    fn seal(&mut self, bucket: Bucket, seq: Seq) {
        let last = self.items.iter().rev().find(|i| i.0 == bucket && i.1 == seq);
        if let Some((_, _, OutputKind::Store(op))) = last {
            let session = op.session().clone();
            self.items.push((bucket, seq, OutputKind::Commit { session }));
        }
    }

    /// The number of outputs the transition holds so far.
    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    /// Hands the outputs to `sink` in canonical order and leaves the buffer empty for reuse.
    ///
    /// Within a bucket, the sessions of the transition go in ascending order of their oldest
    /// sequence in it (SPEC 7: "several sessions in one transition go in ascending order of
    /// their oldest unfinished sequence"), then by sequence, then (aborts) by call id.
    pub(crate) fn finish(&mut self, mut sink: impl FnMut(OutputKind)) {
        self.drop_timers_set_and_cancelled();
        // Sessions can interleave wrongly only with three items or more; most transitions touch
        // one session, and ids are shared, so the check is mostly a pointer compare.
        let one_session = self.items.len() < 3 || {
            let mut sessions = self.items.iter().filter_map(|i| i.2.session());
            let first = sessions.next();
            sessions.all(|s| Some(s) == first)
        };
        if one_session {
            if !self.items.is_sorted_by(|a, b| key(a) <= key(b)) {
                self.items.sort_by(|a, b| key(a).cmp(&key(b)));
            }
        } else {
            self.sort_sessions();
        }
        for (_, _, out) in self.items.drain(..) {
            sink(out);
        }
    }

    /// A timer armed and disarmed within one transition produces neither output: the host never
    /// hears of a timer the engine already forgot.
    fn drop_timers_set_and_cancelled(&mut self) {
        let cancelled: Vec<TimerId> = self
            .items
            .iter()
            .filter_map(|i| match i.2 {
                OutputKind::CancelTimer { timer } => Some(timer),
                _ => None,
            })
            .collect();
        if cancelled.is_empty() {
            return;
        }
        let set_here = |t: &TimerId| {
            self.items
                .iter()
                .any(|i| matches!(i.2, OutputKind::SetTimer { timer, .. } if timer == *t))
        };
        let both: Vec<TimerId> = cancelled.into_iter().filter(set_here).collect();
        self.items.retain(|i| match &i.2 {
            OutputKind::SetTimer { timer, .. } | OutputKind::CancelTimer { timer } => {
                !both.contains(timer)
            }
            _ => true,
        });
    }

    /// Several sessions: within a bucket, sessions go in ascending order of the oldest submission
    /// sequence their outputs name (titles and summaries name none), then by sequence.
    fn sort_sessions(&mut self) {
        let mut oldest: BTreeMap<SessionId, Seq> = BTreeMap::new();
        for (_, _, out) in &self.items {
            if let (Some(s), Some(seq)) = (out.session(), submission_of(out)) {
                let e = oldest.entry(s.clone()).or_insert(seq);
                *e = (*e).min(seq);
            }
        }
        let rank = |i: &(Bucket, Seq, OutputKind)| {
            i.2.session().and_then(|s| oldest.get(s).copied()).unwrap_or(i.1)
        };
        self.items.sort_by(|a, b| {
            (a.0, rank(a), a.1, aborted_call(&a.2)).cmp(&(b.0, rank(b), b.1, aborted_call(&b.2)))
        });
    }
}

/// The submission an output concerns, if it concerns one (titles, summaries, commits and timers
/// do not).
fn submission_of(out: &OutputKind) -> Option<Seq> {
    match out {
        OutputKind::Store(op) => op.seq(),
        OutputKind::Prepare { seq, .. } | OutputKind::AbortPreparation { seq, .. } => Some(*seq),
        OutputKind::StartStep { step } | OutputKind::AbortStep { step } => Some(step.seq),
        OutputKind::RunTool { call, .. } | OutputKind::AbortTool { call } => Some(call.seq),
        OutputKind::RefreshCredentials { attempt: AttemptIo::Step(step) }
        | OutputKind::AbortRefresh { attempt: AttemptIo::Step(step) } => Some(step.seq),
        OutputKind::Finished(c) => Some(c.seq()),
        _ => None,
    }
}

/// The call id an abort output names, which orders aborts of one submission (SPEC 7) by its
/// text (the id type itself orders by hash first).
fn aborted_call(out: &OutputKind) -> Option<&str> {
    match out {
        OutputKind::AbortTool { call } => Some(call.call.as_str()),
        _ => None,
    }
}

/// The sort key of an item: bucket, sequence, and the call id of an aborted tool.
fn key(i: &(Bucket, Seq, OutputKind)) -> (Bucket, Seq, Option<&str>) {
    (i.0, i.1, aborted_call(&i.2))
}
