//! The lifecycle's pure rules, which the handlers apply (SPEC 4.5, 4.6, 4.7, 4.11): the error
//! each kind of end carries, the retry policy, the summary's threshold and continuation prompt,
//! and a sub-agent's result as its parent reads it.
//!
//! Nothing here holds a session or writes an output: every function is a value in, a value out.
//! That is what lets every handler use them without the handlers calling each other in a
//! circle (`tests/style.rs` checks the folder's files import each other without one).

use crate::alphabet::config::BACKOFF_MS;
use crate::alphabet::{
    CANCELLED_TOOL_RESULT, CONTEXT_WINDOW_MESSAGE, CONTEXT_WINDOW_TITLE, Config, ErrorClass,
    ErrorInfo, ErrorKind, INTERRUPTED_TITLE, NO_TEXT_OUTPUT, PREPARATION_TITLE, ProviderError,
    SHUTDOWN_FINISH, ToolOutput, UNAUTHORIZED_TITLE,
};
use crate::lifecycle::outcome::Verdict;
use crate::state::Budget;

// The errors a submission can end with (SPEC 4.6, 4.7, 8).

/// The error of a submission interrupted by shutdown while it was unfinished.
pub(crate) fn shutdown_error() -> ErrorInfo {
    ErrorInfo {
        kind: ErrorKind::Interrupted,
        title: INTERRUPTED_TITLE.to_owned(),
        message: SHUTDOWN_FINISH.to_owned(),
    }
}

/// Classifies a provider failure (SPEC 4.6): kind from the class, the provider's title in Title
/// Case, else the default title of the class.
pub(crate) fn provider_error(e: ProviderError) -> ErrorInfo {
    let (kind, default) = match e.class {
        ErrorClass::Provider => (ErrorKind::Provider, "Provider Error"),
        ErrorClass::Transport | ErrorClass::Incomplete => {
            (ErrorKind::Transport, "Stream Transport Error")
        }
        ErrorClass::Unauthorized => (ErrorKind::Unauthorized, "Unauthorized"),
    };
    let title = match e.title.as_deref().map(str::trim) {
        Some(t) if !t.is_empty() && e.class == ErrorClass::Provider => title_case(t),
        _ => default.to_owned(),
    };
    ErrorInfo { kind, title, message: e.message }
}

/// "rate limit exceeded" → "Rate Limit Exceeded".
fn title_case(s: &str) -> String {
    s.split(' ')
        .map(|w| {
            let mut c = w.chars();
            c.next().map(|f| f.to_uppercase().chain(c).collect::<String>()).unwrap_or_default()
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The error of a failed preparation (kind `preparation`).
pub(crate) fn failure(message: String) -> ErrorInfo {
    ErrorInfo { kind: ErrorKind::Preparation, title: PREPARATION_TITLE.to_owned(), message }
}

/// The error of a failed refresh, with the message of the refused attempt when it had one
/// (the provider's: "Incorrect API key provided", and where the key came from), so that the
/// person who must fix the key reads why it was refused.
pub(crate) fn refresh_failed(refused: Option<String>) -> ErrorInfo {
    let message = match refused.filter(|m| !m.trim().is_empty()) {
        Some(m) => format!("{REFRESH_FAILED} The provider said: {m}"),
        None => REFRESH_FAILED.to_owned(),
    };
    ErrorInfo { kind: ErrorKind::Unauthorized, title: UNAUTHORIZED_TITLE.to_owned(), message }
}

/// The first sentence of a failed refresh's message.
const REFRESH_FAILED: &str = "The credential refresh failed.";

/// The error of the no-progress guard.
pub(crate) fn no_progress() -> ErrorInfo {
    let (title, message) = (CONTEXT_WINDOW_TITLE.to_owned(), CONTEXT_WINDOW_MESSAGE.to_owned());
    ErrorInfo { kind: ErrorKind::ContextWindow, title, message }
}

// The retry policy (SPEC 4.5).

/// Header delays at or above this are ignored unless below the backoff (SPEC 4.5).
const HEADER_DELAY_MAX_MS: u64 = 60_000;

/// The delay before retry number `retry` (0-based) of a step with the default backoff (5, 10,
/// 20 s), honouring the error's headers.
#[must_use]
pub fn retry_delay_ms(retry: usize, error: &ProviderError) -> u64 {
    delay_ms(BACKOFF_MS[retry.min(BACKOFF_MS.len() - 1)], error)
}

/// The delay before a retry whose backoff is `backoff`, honouring the error's headers.
fn delay_ms(backoff: u64, error: &ProviderError) -> u64 {
    match error.header_delay_ms() {
        Some(d) if (d > 0 && d < HEADER_DELAY_MAX_MS) || d < backoff => d,
        _ => backoff,
    }
}

/// What a failed attempt leads to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum OnFailure {
    /// A first 401 in the step: ask the host for fresh credentials (the 401's message is kept
    /// for the failure, should the refresh fail).
    Refresh { refused: String },
    /// A retryable error within the budget: try again after this delay.
    Retry { delay_ms: u64 },
    /// Give up with this error.
    Fail(ErrorInfo),
}

/// The one rule of SPEC 4.5, for steps and summaries alike.
pub(crate) fn on_failure(config: &Config, budget: &Budget, error: ProviderError) -> OnFailure {
    if error.is_unauthorized() {
        if budget.refreshed {
            let e = ErrorInfo {
                kind: ErrorKind::Unauthorized,
                title: UNAUTHORIZED_TITLE.to_owned(),
                message: error.message,
            };
            return OnFailure::Fail(e);
        }
        return OnFailure::Refresh { refused: error.message };
    }
    if !error.is_retryable() || budget.attempts >= config.attempts_max {
        return OnFailure::Fail(provider_error(error));
    }
    let backoff = config.backoff_ms(budget.attempts.saturating_sub(1) as usize);
    OnFailure::Retry { delay_ms: delay_ms(backoff, &error) }
}

// The summary's threshold and continuation (SPEC 4.7).

/// Windows above this use the fixed buffer instead of a fifth (SPEC 4.7).
const LARGE_WINDOW: u64 = 200_000;

/// The prompt a resumed submission continues with: always the original prompt, never nested.
#[must_use]
pub fn continuation(original_prompt: &str) -> String {
    format!(
        "The previous session was interrupted because it got too long, the initial user request was: `{original_prompt}`"
    )
}

/// SPEC 4.7's trigger: `cw = 0` never; above 200,000 when at most `buffer` tokens are left;
/// otherwise when at most `floor(cw / 5)` are left.
#[must_use]
pub fn at_threshold(context_window: u64, used: u64, buffer: u64) -> bool {
    if context_window == 0 {
        return false;
    }
    let left = context_window.saturating_sub(used);
    if context_window > LARGE_WINDOW { left <= buffer } else { left <= context_window / 5 }
}

// A sub-agent's end, as its parent's tool result (SPEC 4.11).

/// The parent's tool result for a child that ended with `verdict` (SPEC 4.11).
pub(crate) fn child_result(verdict: &Verdict, text: &str) -> ToolOutput {
    let (content, is_error) = match verdict {
        Verdict::Completed(_) if text.is_empty() => (NO_TEXT_OUTPUT.to_owned(), true),
        Verdict::Completed(_) => (text.to_owned(), false),
        Verdict::Failed(e) => (format!("Failed to generate response: {}", e.message), true),
        // Interrupted by shutdown: the same text whether the child ended at once or at the
        // deadline (then the parent's clean-up writes it).
        Verdict::Cancelled | Verdict::Interrupted(_) | Verdict::Folded => {
            (CANCELLED_TOOL_RESULT.to_owned(), true)
        }
    };
    ToolOutput { content, is_error, stop: None }
}
