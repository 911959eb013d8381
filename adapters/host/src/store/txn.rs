//! A transaction as the host hands it to the store (SPEC 4.12): one session's writes between
//! two of the core's `Commit`s, and a new submission's ledger row.

use turnstile_core::{
    Attachment, CallId, Fingerprint, MessageId, Mode, RunId, Seq, SessionId, StoreOp,
};

use super::lease;

/// A new submission's ledger row, written when the core accepts it (the host holds the
/// content; the core's `Reply::Accepted` names it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct NewRun {
    /// The session (created when unknown).
    pub(crate) session: SessionId,
    /// The sequence the core assigned.
    pub(crate) seq: Seq,
    /// The caller's RunId.
    pub(crate) run_id: Option<RunId>,
    /// The mode it runs in.
    pub(crate) mode: Mode,
    /// The prompt.
    pub(crate) prompt: String,
    /// The attachments.
    pub(crate) attachments: Vec<Attachment>,
    /// With a RunId: the core's fingerprint of the request (SPEC 4.1), which the ledger row
    /// keeps so that a resubmission after a restart is compared with it.
    pub(crate) fingerprint: Option<Fingerprint>,
}

/// One write of a transaction.
#[derive(Clone, Debug)]
pub(crate) enum Write {
    /// Insert a new submission's ledger row (state `waiting`), creating its session if needed.
    Accept(NewRun),
    /// Several hosts: the owner's core was fed this command row (SPEC 11), so a later take
    /// does not feed it again.
    CommandApplied(u64),
    /// A write the core asked for.
    Op(StoreOp),
    /// The host's own, right after the core's `ToolCall` write of a call whose arguments were
    /// not valid JSON: what the model sent, kept beside the `{}` the core stored as the call's
    /// input (SPEC 4.4), for a person reading the history (never sent to a model).
    RawInput {
        /// The assistant message holding the call.
        message: MessageId,
        /// The call.
        call: CallId,
        /// The arguments as the model sent them.
        raw: String,
    },
}

impl Write {
    /// True for streamed content (text, reasoning or summary text appended): coalescible, so a
    /// transaction of only these may wait for the debounce window (SPEC 4.12).
    #[must_use]
    pub(crate) fn is_streamed(&self) -> bool {
        matches!(
            self,
            Write::Op(
                StoreOp::AppendText { .. }
                    | StoreOp::AppendReasoning { .. }
                    | StoreOp::SummaryText { .. }
            )
        )
    }
}

/// One transaction of one session: the writes between two `Commit`s of the core, in order.
#[derive(Clone, Debug)]
pub(crate) struct Txn {
    /// The session whose writes these are.
    pub(crate) session: SessionId,
    /// The writes, in the core's order.
    pub(crate) writes: Vec<Write>,
    /// Several hosts: the epoch of the lease its writer holds the session under. The commit
    /// writes the transaction only if the lease is still the writer's at that epoch (SPEC
    /// 11's fencing); `None` for a store of one process.
    pub(crate) fence: Option<lease::Epoch>,
}
