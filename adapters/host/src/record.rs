//! The completion record a host publishes and stores (SPEC section 5): the RunComplete of a run.
//!
//! The core's [`Completion`] cannot be built outside the core (exactly-once by construction);
//! this is its plain-data mirror, which the store writes into the run ledger and reads back
//! (after a restart, or when crash recovery decides an outcome itself).

use serde::{Deserialize, Serialize};
use turnstile_core::{
    Completion, ErrorInfo, ErrorKind, INTERRUPTED_TITLE, MessageId, Outcome, RECOVERY_MESSAGE,
    RunId, RunUsage, Seq, SessionId, StopReason,
};

/// How a submission ended, with SPEC section 5's fields: `{session, run_id, seq, outcome,
/// stop_reason?, message_id?, text?, error?}`.
///
/// Published once per submission, after the transaction that records it has committed. When
/// `run_id` is present it is that run's one RunComplete.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompletionRecord {
    /// The submission's session.
    pub session: SessionId,
    /// The run, when the submission carried a RunId.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<RunId>,
    /// The submission's sequence.
    pub seq: Seq,
    /// How it ended.
    pub outcome: Outcome,
    /// Why a completed submission stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<StopReason>,
    /// Its last assistant message; present exactly when it was activated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<MessageId>,
    /// That message's text (possibly empty or partial); present exactly when activated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The error; present exactly for `failed` and `interrupted`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorInfo>,
    /// What the run's model requests used: tokens and cost ([`RunUsage`]); left out when none
    /// was reported (and for a run that recovery ended: what it used before the stop is not
    /// known).
    #[serde(default, skip_serializing_if = "RunUsage::is_zero")]
    pub usage: RunUsage,
}

impl CompletionRecord {
    /// True when this record is the RunComplete of a run.
    #[must_use]
    pub fn is_run_complete(&self) -> bool {
        self.run_id.is_some()
    }

    /// The record crash recovery writes for a submission the process did not finish (SPEC
    /// 4.12): `interrupted`, kind `interrupted`, "Interrupted" / "The process stopped before
    /// this request finished.", with its last assistant message when it was activated.
    #[must_use]
    pub(crate) fn recovered(
        session: SessionId,
        run_id: Option<RunId>,
        seq: Seq,
        last: Option<(MessageId, String)>,
    ) -> CompletionRecord {
        let (message_id, text) = last.map_or((None, None), |(id, text)| (Some(id), Some(text)));
        CompletionRecord {
            session,
            run_id,
            seq,
            outcome: Outcome::Interrupted,
            stop_reason: None,
            message_id,
            text,
            error: Some(ErrorInfo {
                kind: ErrorKind::Interrupted,
                title: INTERRUPTED_TITLE.to_owned(),
                message: RECOVERY_MESSAGE.to_owned(),
            }),
            usage: RunUsage::default(),
        }
    }
}

impl From<&Completion> for CompletionRecord {
    fn from(c: &Completion) -> CompletionRecord {
        CompletionRecord {
            session: c.session().clone(),
            run_id: c.run_id().cloned(),
            seq: c.seq(),
            outcome: c.outcome(),
            stop_reason: c.stop_reason(),
            message_id: c.message_id(),
            text: c.text().map(str::to_owned),
            error: c.error().cloned(),
            usage: c.usage(),
        }
    }
}

/// A position in the ledger's completion order: the n-th outcome the store recorded, from 1.
///
/// Completion streams resume after a cursor; cursors survive restarts (they are ledger
/// columns), so a subscriber that reconnects with its last cursor misses nothing.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Cursor(pub u64);

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_record_reads_the_json_the_core_serialises() {
        let mut engine =
            turnstile_core::Engine::new(Default::default(), Default::default()).unwrap();
        let submit = turnstile_core::Submit::new("s", "hi").with_run_id("r");
        engine.handle(turnstile_core::Millis(0), turnstile_core::Input::Submit(submit)).unwrap();
        while engine.poll_output().is_some() {}
        engine
            .handle(
                turnstile_core::Millis(1),
                turnstile_core::Input::CancelRun { run_id: RunId::new("r") },
            )
            .unwrap();
        let completion = std::iter::from_fn(|| engine.poll_output())
            .find_map(|o| match o.kind {
                turnstile_core::OutputKind::Finished(c) => Some(c),
                _ => None,
            })
            .unwrap();
        let json = serde_json::to_string(&completion).unwrap();
        let read: CompletionRecord = serde_json::from_str(&json).unwrap();
        assert_eq!(read, CompletionRecord::from(&completion));
        assert_eq!(read.outcome, Outcome::Cancelled);
        assert_eq!(serde_json::to_string(&read).unwrap(), json);
    }
}
