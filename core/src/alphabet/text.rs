//! The exact strings of SPEC section 8 that the core writes or hosts must match, in one place.
//!
//! Each is part of the contract: a host, the store and the tests compare against these
//! constants, never against a copy of the text.

// Clean-up and interruption (SPEC 4.9, 4.10)

/// The synthetic result of a call that never reported, on cancel or shutdown.
pub const CANCELLED_TOOL_RESULT: &str = "Error: user cancelled assistant tool calling";
/// The synthetic result of a call that never reported when the turn failed.
pub const FAILED_TOOL_RESULT: &str = "There was an error while executing the tool";
/// The finish text of a cancelled turn's message.
pub const CANCELED_FINISH: &str = "User canceled request";
/// The finish text of a turn interrupted by shutdown.
pub const SHUTDOWN_FINISH: &str = "Interrupted by shutdown";
/// The title of an interrupted submission.
pub const INTERRUPTED_TITLE: &str = "Interrupted";

// Recovery after a process stop, and history repair (SPEC 4.9, 4.12): the host writes these

/// The error message of a submission that crash recovery ended (with [`INTERRUPTED_TITLE`]).
pub const RECOVERY_MESSAGE: &str = "The process stopped before this request finished.";
/// The result a host writes for a tool call that has none, at recovery and when it builds a
/// model request from history.
pub const HISTORY_REPAIR_RESULT: &str = "tool call was interrupted and did not produce a result, you may retry this call if the result is still needed";

// Preparation (SPEC 4.1)

/// The title of a `preparation` failure (SPEC names the kind; the title is ours).
pub const PREPARATION_TITLE: &str = "Preparation Failed";

// Credentials (SPEC 4.5)

/// The title of a failed credential refresh or a second 401 (SPEC 4.5).
pub const UNAUTHORIZED_TITLE: &str = "Unauthorized";

// The ends of a turn (SPEC 4.6, 4.8)

/// The title of a `step_limit` failure.
pub const STEP_LIMIT_TITLE: &str = "Step Limit Reached";
/// The title of a `loop_detected` failure.
pub const LOOP_TITLE: &str = "Loop Detected";
/// The message of a `loop_detected` failure.
pub const LOOP_MESSAGE: &str =
    "The same tool interaction was repeated more than 5 times in the last 10 steps.";

// Streaming (SPEC 4.4, 4.5)

/// The error of an attempt the stream watchdog ended (SPEC 4.5, 8): "stream idle for `<N>` s",
/// N the timeout in whole seconds. The core reports it as a transport error (retryable; after
/// the last attempt the submission fails with kind `transport`, "Stream Transport Error").
#[must_use]
pub fn stream_idle_message(timeout_ms: u64) -> String {
    format!("stream idle for {} s", timeout_ms / 1_000)
}

/// The result of a call whose arguments were not valid JSON (SPEC 8).
pub const INVALID_JSON_RESULT: &str = "Tool call failed: arguments were not valid JSON. Please check your tool call format and try again.";

// Sub-agents (SPEC 4.11)

/// The tool that starts a sub-agent.
pub const AGENT_TOOL: &str = "agent";
/// A sub-agent session's title (SPEC 8).
pub const NEW_AGENT_TITLE: &str = "New Agent Session";
/// The result of an `agent` call without a prompt (SPEC 8).
pub const PROMPT_REQUIRED: &str = "prompt is required";
/// The result of a sub-agent that completed without text (SPEC 8).
pub const NO_TEXT_OUTPUT: &str = "Sub-agent completed but produced no text output.";

// Summarization (SPEC 4.7)

/// The summary request (SPEC 8).
pub const SUMMARY_REQUEST: &str = "Provide a detailed summary of our conversation above.";
/// The title of a failed summarization (SPEC 4.7).
pub const SUMMARIZATION_TITLE: &str = "Summarization Error";
/// The title of the no-progress failure (SPEC 4.7).
pub const CONTEXT_WINDOW_TITLE: &str = "Context Window Exceeded";
/// The message of the no-progress failure (SPEC 4.7).
pub const CONTEXT_WINDOW_MESSAGE: &str = "Summarization did not free enough context to continue.";

// Titles (SPEC 4.11)

/// The title of a session whose prompt gives none (SPEC 8).
pub const UNTITLED: &str = "Untitled Session";
