//! One transition's outputs, put into SPEC section 7's canonical order by construction.
//!
//! Handlers do not push outputs in the order they think of them; they put each output into its
//! bucket: (1) the reply, (2) aborts, (3) per deciding submission its writes, flush, ledger
//! outcome, commit and completion, (4) per session its hand-off and starts, then (5) the tail
//! (the shutdown deadline and `Stopped`). [`Tx::finish`] concatenates the buckets, so the
//! order of a transition's outputs is a function of what it decided, never of code paths.

use std::collections::BTreeMap;

use crate::ids::{CallId, Seq};
use crate::output::OutputKind;

/// The outputs of the transition being computed.
#[derive(Debug, Default)]
pub(crate) struct Tx {
    reply: Option<OutputKind>,
    /// Sorted by (sequence, call id) at the end; the push order breaks ties.
    aborts: Vec<(Seq, Option<CallId>, OutputKind)>,
    /// Keyed by the sequence of the submission the outputs belong to.
    decided: BTreeMap<Seq, Vec<OutputKind>>,
    /// Keyed by the sequence of the submission that runs next in the session.
    handoff: BTreeMap<Seq, Vec<OutputKind>>,
    tail: Vec<OutputKind>,
}

impl Tx {
    pub(crate) fn reply(&mut self, out: OutputKind) {
        debug_assert!(self.reply.is_none(), "one reply per transition");
        self.reply = Some(out);
    }

    pub(crate) fn abort(&mut self, seq: Seq, call: Option<CallId>, out: OutputKind) {
        self.aborts.push((seq, call, out));
    }

    pub(crate) fn decided(&mut self, seq: Seq, out: OutputKind) {
        self.decided.entry(seq).or_default().push(out);
    }

    pub(crate) fn handoff(&mut self, seq: Seq, out: OutputKind) {
        self.handoff.entry(seq).or_default().push(out);
    }

    pub(crate) fn tail(&mut self, out: OutputKind) {
        self.tail.push(out);
    }

    /// Ends the open transaction of bucket `seq` (decided bucket) with a `Commit` when its
    /// last output is a write.
    pub(crate) fn seal_decided(&mut self, seq: Seq) {
        if let Some(v) = self.decided.get_mut(&seq) {
            seal(v);
        }
    }

    /// Same as [`Tx::seal_decided`] for a hand-off bucket.
    pub(crate) fn seal_handoff(&mut self, seq: Seq) {
        if let Some(v) = self.handoff.get_mut(&seq) {
            seal(v);
        }
    }

    /// The outputs in canonical order.
    pub(crate) fn finish(self, mut sink: impl FnMut(OutputKind)) {
        let Tx { reply, mut aborts, decided, handoff, tail } = self;
        if let Some(r) = reply {
            sink(r);
        }
        aborts.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        aborts.into_iter().for_each(|(_, _, o)| sink(o));
        decided.into_values().flatten().for_each(&mut sink);
        handoff.into_values().flatten().for_each(&mut sink);
        tail.into_iter().for_each(sink);
    }
}

fn seal(v: &mut Vec<OutputKind>) {
    let session = match v.last() {
        Some(OutputKind::Store(op)) => op.session().clone(),
        _ => return,
    };
    v.push(OutputKind::Commit { session });
}
