//! Configuration and the state an engine starts from (SPEC 4.1, 4.12, 8).

use serde::{Deserialize, Serialize};

use crate::alphabet::ids::{MessageId, Seq};
use crate::alphabet::run::KnownRun;

/// Attempts per step by default (SPEC 8: 4 attempts, so 3 retries).
pub const ATTEMPTS_MAX: u32 = 4;
/// The backoff before retry 1, 2 and 3 by default (SPEC 4.5: 5, 10 and 20 s, no jitter).
pub const BACKOFF_MS: [u64; 3] = [5_000, 10_000, 20_000];
const _: () = assert!(BACKOFF_MS.len() as u32 == ATTEMPTS_MAX - 1);

fn is_default_attempts(n: &u32) -> bool {
    *n == ATTEMPTS_MAX
}

fn is_default_backoff(b: &[u64]) -> bool {
    b == BACKOFF_MS
}

/// Tunable constants (SPEC section 8). Every field has the SPEC default.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// How long an aborted turn waits for its running tools before clean-up (SPEC 4.9).
    pub cancel_grace_ms: u64,
    /// How long shutdown waits for aborting turns before cleaning them up (SPEC 4.10).
    pub shutdown_deadline_ms: u64,
    /// Steps per submission before it fails with `step_limit`; 0 means unlimited (SPEC 4.6).
    pub step_limit: u32,
    /// Tool calls kept per step; later ones are ignored like duplicate ids.
    pub calls_per_step_max: u32,
    /// Who assigns sequences (SPEC 4.10): the core (default) or an external acceptor.
    pub acceptor: Acceptor,
    /// Summarize automatically when the context is nearly full (SPEC 4.7).
    pub auto_summarize: bool,
    /// Tokens left that trigger a summary for windows above 200,000 (SPEC 4.7).
    pub summarize_buffer_tokens: u64,
    /// How long an attempt of a step or a summary may go without a content event before it
    /// fails as a retryable transport error "stream idle for `<N>` s" (SPEC 4.5 "Stream
    /// watchdog", section 8), counted from the attempt's start; 0 disables the watchdog. At
    /// least 1,000 when not 0 (N is the timeout in whole seconds).
    pub stream_idle_timeout_ms: u64,
    /// Attempts per step or summary before a retryable error fails it (SPEC 4.5, section 8:
    /// 4, so 3 retries); at least 1 (1: never retry). Also the attempts after a credential
    /// refresh. Not written to a trace when it is the default.
    #[serde(skip_serializing_if = "is_default_attempts")]
    pub attempts_max: u32,
    /// The backoff before each retry, in milliseconds (SPEC 4.5: 5, 10 and 20 s, no jitter);
    /// a retry beyond the list waits its last delay. A `retry-after-ms` or `retry-after`
    /// header replaces it as SPEC 4.5 says. Not empty when `attempts_max` is above 1; not
    /// written to a trace when it is the default.
    #[serde(skip_serializing_if = "is_default_backoff")]
    pub retry_backoff_ms: Vec<u64>,
    /// Queue length per session above which [`crate::Engine::queue_len`] should make a host push
    /// back. The core never drops an accepted submission to honour it.
    pub queue_max: u32,
    /// The bug this engine pretends to have (SPEC 10 "Mutants"); test builds only.
    #[cfg(feature = "mutants")]
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(skip))] // the schema is that of a host's build
    pub mutant: Option<crate::alphabet::mutants::Mutant>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            cancel_grace_ms: 5_000,
            shutdown_deadline_ms: 5_000,
            step_limit: 0,
            calls_per_step_max: 128,
            queue_max: 1_024,
            acceptor: Acceptor::Core,
            auto_summarize: true,
            summarize_buffer_tokens: 20_000,
            stream_idle_timeout_ms: 300_000,
            attempts_max: ATTEMPTS_MAX,
            retry_backoff_ms: BACKOFF_MS.to_vec(),
            #[cfg(feature = "mutants")]
            mutant: None,
        }
    }
}

impl Config {
    /// Checks the values that would make the engine misbehave silently.
    ///
    /// # Errors
    /// [`crate::alphabet::error::HostError::InvalidConfig`] naming the field: `calls_per_step_max` 0 (every
    /// tool call would be dropped unanswered; offer no tools instead), `queue_max` 0 (no
    /// prompt could ever wait) or `stream_idle_timeout_ms` between 1 and 999 (the watchdog's
    /// message counts whole seconds: "stream idle for 0 s" would say nothing), `attempts_max`
    /// 0 (a step could not even start), or an empty `retry_backoff_ms` with retries allowed.
    pub fn validate(&self) -> Result<(), crate::alphabet::error::HostError> {
        let bad =
            |field, reason| Err(crate::alphabet::error::HostError::InvalidConfig { field, reason });
        if self.calls_per_step_max == 0 {
            return bad("calls_per_step_max", "must be at least 1; offer no tools to disable them");
        }
        if self.queue_max == 0 {
            return bad("queue_max", "must be at least 1");
        }
        if (1..1_000).contains(&self.stream_idle_timeout_ms) {
            return bad("stream_idle_timeout_ms", "must be 0 (disabled) or at least 1000");
        }
        if self.attempts_max == 0 {
            return bad("attempts_max", "must be at least 1 (1: never retry)");
        }
        if self.attempts_max > 1 && self.retry_backoff_ms.is_empty() {
            return bad(
                "retry_backoff_ms",
                "must name at least one delay when retries are allowed",
            );
        }
        Ok(())
    }

    /// The delay before retry number `retry` (0-based): its element of `retry_backoff_ms`,
    /// else the last one.
    #[must_use]
    pub fn backoff_ms(&self, retry: usize) -> u64 {
        let b = &self.retry_backoff_ms;
        b.get(retry).or(b.last()).copied().unwrap_or(0)
    }
}

/// Who assigns submission sequences.
///
/// The choice decides which cancel watermarks make sense, so the engine checks it: with the
/// core as acceptor, a submission may not bring a sequence and a cancel may not name one above
/// the newest (it would cancel prompts not yet typed, breaking I10); with an external acceptor
/// (an HTTP front end, another node) every submission brings its sequence, strictly increasing,
/// and a cancel's watermark may run ahead of what has reached the core.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Acceptor {
    /// The core assigns sequences at acceptance.
    #[default]
    Core,
    /// Sequences come with the submissions, from an acceptor outside the core.
    External,
}

/// What the store's ledger says when the engine starts (SPEC 4.1, 4.12 recovery).
///
/// The host runs recovery first, so every run here is finished.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default, deny_unknown_fields)]
pub struct Start {
    /// The first sequence to assign: above the ledger's maximum.
    pub next_seq: Option<Seq>,
    /// The first message id to assign: above the store's maximum.
    pub next_message: Option<MessageId>,
    /// Every run in the ledger, with its outcome.
    pub runs: Vec<KnownRun>,
}
