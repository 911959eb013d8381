//! What a run's end means to the person who asked (SPEC 9 "CLI"): its exit status, the line
//! that says why it did not simply complete, its text or JSON Line on stdout, and the `stop`
//! hooks that see it. `run`, `run --server`, `chat` and `serve` all end runs this way.

use std::io::IsTerminal;
use std::path::Path;

use serde_json::json;
use turnstile_core::{Outcome, StopReason};
use turnstile_host::CompletionRecord;
use turnstile_tools::hook::{self, HookInput};

use crate::failure::{EXIT_USAGE, Failure};
use crate::live::Show;
use crate::out;

/// The exit status of a run's end (SPEC 9).
#[must_use]
pub fn status(record: &CompletionRecord) -> u8 {
    match record.outcome {
        Outcome::Completed | Outcome::Folded => match record.stop_reason {
            Some(StopReason::PermissionDenied | StopReason::HookHalt) => 3,
            _ => 0,
        },
        Outcome::Failed => 1,
        Outcome::Cancelled => 130,
        Outcome::Interrupted => 2,
    }
}

/// The `stop` hooks, with the run's RunComplete (they only observe; each is bounded by its
/// timeout).
pub async fn run_stop_hooks(
    hooks: &[turnstile_tools::Hook],
    record: &CompletionRecord,
    cwd: &Path,
) {
    if hooks.is_empty() {
        return;
    }
    let run = match serde_json::to_value(record) {
        Ok(serde_json::Value::Object(map)) => map,
        _ => return,
    };
    let input = HookInput {
        run: Some(run),
        ..HookInput::new("stop", record.session.as_str(), cwd)
    };
    hook::stop(hooks, &input, cwd).await;
}

/// Prints the RunComplete (stdout: its text, or with `--json` its JSON Line) and says why a
/// run did not simply complete on stderr; returns the exit status. When stdout was closed
/// (its reader went away, and the run was cancelled for it), nothing is said at all.
pub fn report(record: &CompletionRecord, show: Show) -> u8 {
    if show == Show::Json {
        let mut v = serde_json::to_value(record).unwrap_or_default();
        v["type"] = json!("run_complete");
        out::line(&v.to_string());
    } else {
        out::line(record.text.as_deref().unwrap_or(""));
    }
    let code = status(record);
    if code != 0 && !out::is_closed() {
        eprintln!("{}", why(record));
    }
    code
}

/// A submission refused before it reached the engine, as the engine's refusals are reported:
/// with `--json` a `rejected` line, and status 64.
pub fn rejected(json: bool, message: &str) -> Failure {
    if json {
        out::line(&json!({"type": "rejected", "message": message}).to_string());
    }
    Failure {
        status: EXIT_USAGE,
        message: format!("the run was rejected: {message}"),
    }
}

/// How live events are shown: `--json`, else the terminal when stderr is one.
pub fn show(json: bool) -> Show {
    if json {
        Show::Json
    } else if std::io::stderr().is_terminal() {
        Show::Terminal
    } else {
        Show::Nothing
    }
}

/// One line on why a run did not simply complete.
pub fn why(record: &CompletionRecord) -> String {
    let error = record
        .error
        .as_ref()
        .map(|e| format!(": {}: {}", e.title, e.message));
    match (record.outcome, record.stop_reason) {
        (Outcome::Completed, Some(StopReason::PermissionDenied)) => {
            "the run stopped: a tool call was denied".to_owned()
        }
        (Outcome::Completed, Some(StopReason::HookHalt)) => {
            "the run stopped: a hook halted the turn".to_owned()
        }
        (Outcome::Failed, _) => format!("the run failed{}", error.unwrap_or_default()),
        (Outcome::Cancelled, _) => "the run was cancelled".to_owned(),
        (Outcome::Interrupted, _) => {
            format!("the run was interrupted{}", error.unwrap_or_default())
        }
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use turnstile_core::Seq;
    use turnstile_core::{RunId, SessionId};

    fn record(outcome: Outcome, stop_reason: Option<StopReason>) -> CompletionRecord {
        CompletionRecord {
            session: SessionId::new("s"),
            run_id: Some(RunId::new("r")),
            seq: Seq(1),
            outcome,
            stop_reason,
            message_id: None,
            text: None,
            error: None,
            usage: Default::default(),
        }
    }

    #[test]
    fn exit_statuses_are_spec_9s() {
        assert_eq!(
            status(&record(Outcome::Completed, Some(StopReason::EndTurn))),
            0
        );
        assert_eq!(
            status(&record(Outcome::Completed, Some(StopReason::MaxTokens))),
            0
        );
        assert_eq!(
            status(&record(
                Outcome::Completed,
                Some(StopReason::PermissionDenied)
            )),
            3
        );
        assert_eq!(
            status(&record(Outcome::Completed, Some(StopReason::HookHalt))),
            3
        );
        assert_eq!(status(&record(Outcome::Failed, None)), 1);
        assert_eq!(status(&record(Outcome::Cancelled, None)), 130);
        assert_eq!(status(&record(Outcome::Interrupted, None)), 2);
    }
}
