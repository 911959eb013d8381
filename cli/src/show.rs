//! `turnstile sessions` and `turnstile history`: the store read back, for people and scripts.
//!
//! Both read the store file directly (committed data only, no owner lock), so they work while
//! a run is going on in the same directory. A session is named by its id or a unique prefix
//! of it ([`resolve`]). Output goes through [`crate::out`]: a reader that goes away early
//! (`turnstile sessions | head -1`) ends the listing quietly.

use serde_json::{Value, json};
use turnstile_core::SessionId;
use turnstile_host::store::{
    Location, Reader, SessionActivity, StoreError, StoredCall, StoredMessage, StoredRole,
};

use crate::args::{Global, History, Sessions};
use crate::failure::Failure;
use crate::{out, setup};

/// The widest title shown in the table (SPEC 8's title length: longer ones are cut to 49 and
/// "…").
const TITLE_WIDTH: usize = 50;

/// [`resolve`] among the sessions of the host's store.
///
/// # Errors
/// As [`resolve`], or the store cannot be read.
pub async fn resolve_in(host: &turnstile_host::Host, given: &str) -> Result<SessionId, String> {
    let all = host
        .read(|r| r.sessions())
        .await
        .map_err(|e| format!("cannot read the sessions: {e}"))?;
    let ids: Vec<SessionId> = all.into_iter().map(|s| s.id).collect();
    resolve(&ids, given)
}

/// The session `given` names among `ids`: the one with that id, else the one whose id starts
/// with it.
///
/// # Errors
/// None starts with it, or several do (named, so that a longer prefix can be given).
pub fn resolve(ids: &[SessionId], given: &str) -> Result<SessionId, String> {
    if let Some(id) = ids.iter().find(|id| id.as_str() == given) {
        return Ok(id.clone());
    }
    let found: Vec<&SessionId> = if given.is_empty() {
        Vec::new()
    } else {
        ids.iter()
            .filter(|id| id.as_str().starts_with(given))
            .collect()
    };
    match found.as_slice() {
        [one] => Ok((*one).clone()),
        [] => Err(format!(
            "no session `{given}` in this store (`turnstile sessions` lists them)"
        )),
        many => {
            const SHOWN: usize = 10;
            let mut names: Vec<String> = many
                .iter()
                .take(SHOWN)
                .map(|id| id.as_str().to_owned())
                .collect();
            if many.len() > SHOWN {
                names.push(format!("and {} more", many.len() - SHOWN));
            }
            Err(format!(
                "`{given}` starts {} session ids: {}; give more of the id",
                many.len(),
                names.join(", ")
            ))
        }
    }
}

fn reader(global: &Global) -> Result<Option<Reader>, Failure> {
    let cwd = std::env::current_dir()
        .map_err(|e| Failure::setup(format!("cannot read the current directory: {e}")))?;
    let store = setup::store_at(global, &cwd);
    if let Location::File(path) = &store.location
        && !path.exists()
    {
        return Ok(None);
    }
    let reader = Reader::open_at(&store.location).map_err(|e| store_error(&store, &e))?;
    // A database nobody ran on yet has no tables: no store yet, as a missing file.
    match reader.position() {
        Err(StoreError::Postgres {
            code: Some(code), ..
        }) if code == UNDEFINED_TABLE => Ok(None),
        Err(e) => Err(store_error(&store, &e)),
        Ok(_) => Ok(Some(reader)),
    }
}

/// PostgreSQL's SQLSTATE for a table that does not exist.
const UNDEFINED_TABLE: &str = "42P01";

fn store_error(store: &setup::StoreAt, e: &dyn std::fmt::Display) -> Failure {
    Failure::setup(format!("cannot read the store `{}`: {e}", store.describe()))
}

fn no_store(global: &Global) -> String {
    let cwd = std::env::current_dir().unwrap_or_default();
    format!(
        "no store at `{}` yet: `turnstile run` creates it (or give --store)",
        setup::store_at(global, &cwd).describe()
    )
}

/// Runs `turnstile sessions`.
///
/// # Errors
/// The store cannot be read.
pub fn sessions(global: &Global, a: &Sessions) -> Result<u8, Failure> {
    let Some(reader) = reader(global)? else {
        if a.json {
            out::line("[]");
        } else {
            eprintln!("{}", no_store(global));
        }
        return Ok(0);
    };
    let all = reader
        .activity(a.all)
        .map_err(|e| Failure::setup(format!("cannot read the sessions: {e}")))?;
    if a.json {
        let rows: Vec<Value> = all.iter().map(session_json).collect();
        out::line(&Value::Array(rows).to_string());
        return Ok(0);
    }
    if all.is_empty() {
        eprintln!("no sessions yet");
        return Ok(0);
    }
    // A reader that went away ends the listing; that is not an error.
    for line in session_lines(&all) {
        if !out::line(&line) {
            break;
        }
    }
    Ok(0)
}

/// The sessions as a table: a header, then one line each (id, title, messages, cost, last
/// activity), columns aligned.
#[must_use]
pub fn session_lines(all: &[turnstile_host::store::SessionActivity]) -> Vec<String> {
    let now = now_ms();
    let rows: Vec<[String; 5]> = all
        .iter()
        .map(|s| {
            [
                s.row.id.as_str().to_owned(),
                cut(&title(s.row.title.as_deref()), TITLE_WIDTH),
                s.messages.to_string(),
                dollars(s.row.cost_micros),
                s.last_activity_ms
                    .map_or_else(|| "-".to_owned(), |t| ago(now, t)),
            ]
        })
        .collect();
    let header = ["ID", "TITLE", "MESSAGES", "COST", "LAST ACTIVITY"].map(str::to_owned);
    let widths: Vec<usize> = (0..5)
        .map(|i| {
            rows.iter()
                .map(|r| r[i].chars().count())
                .chain([header[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: &[String]| {
        let mut out = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                out.push_str(c);
            } else {
                let pad = widths[i] - c.chars().count();
                out.push_str(c);
                out.push_str(&" ".repeat(pad + 2));
            }
        }
        out
    };
    std::iter::once(line(&header))
        .chain(rows.iter().map(|r| line(r)))
        .collect()
}

/// A session's conversation for people: a head line (id, title, cost), then each message.
#[must_use]
pub fn history_lines(
    row: &turnstile_host::store::SessionRow,
    messages: &[StoredMessage],
) -> Vec<String> {
    let head = format!(
        "session {} · {} · {}",
        row.id,
        cut(&title(row.title.as_deref()), TITLE_WIDTH),
        dollars(row.cost_micros)
    );
    std::iter::once(head)
        .chain(messages.iter().map(message_text))
        .collect()
}

/// Runs `turnstile history`.
///
/// # Errors
/// The store cannot be read, or has no such session.
pub fn history(global: &Global, a: &History) -> Result<u8, Failure> {
    let Some(reader) = reader(global)? else {
        return Err(Failure::setup(no_store(global)));
    };
    let read =
        |e: turnstile_host::StoreError| Failure::setup(format!("cannot read the session: {e}"));
    let ids: Vec<SessionId> = reader
        .sessions()
        .map_err(read)?
        .into_iter()
        .map(|s| s.id)
        .collect();
    let id = resolve(&ids, &a.session).map_err(Failure::usage)?;
    let Some(row) = reader.session(&id).map_err(read)? else {
        return Err(Failure::usage(format!(
            "no session `{}` in this store (`turnstile sessions` lists them)",
            a.session
        )));
    };
    let messages = reader.messages(&id).map_err(read)?;
    if a.json {
        let v = json!({
            "session": {
                "id": row.id, "parent": row.parent, "title": row.title,
                "cost_micros": row.cost_micros, "prompt_tokens": row.prompt_tokens,
                "completion_tokens": row.completion_tokens,
            },
            "messages": messages.iter().map(message_json).collect::<Vec<_>>(),
        });
        out::line(&v.to_string());
        return Ok(0);
    }
    for line in history_lines(&row, &messages) {
        if !out::line(&line) {
            break;
        }
    }
    Ok(0)
}

/// Why a result was written by the lifecycle instead of by its tool (`None`: the tool's own
/// result): a code for `--json` and a label for people. Read from the exact texts of SPEC 8
/// and, for a cancel, from the message's finish.
fn cause(
    m: &StoredMessage,
    call: Option<&StoredCall>,
    content: &str,
) -> Option<(&'static str, &'static str)> {
    let shutdown = m.finish.as_ref().and_then(|f| f["message"].as_str())
        == Some(turnstile_core::SHUTDOWN_FINISH);
    let failed = m.finish.as_ref().and_then(|f| f["reason"].as_str()) == Some("error");
    Some(match content {
        turnstile_core::CANCELLED_TOOL_RESULT if shutdown => (
            "shutdown",
            "interrupted by a shutdown before the tool answered",
        ),
        turnstile_core::CANCELLED_TOOL_RESULT => {
            ("cancelled", "cancelled before the tool answered")
        }
        turnstile_core::FAILED_TOOL_RESULT if failed => {
            ("failed", "the turn failed before the tool answered")
        }
        turnstile_core::FAILED_TOOL_RESULT => ("ended", "the turn ended before the tool answered"),
        turnstile_core::HISTORY_REPAIR_RESULT => (
            "recovery",
            "interrupted: the process stopped, recovery wrote this",
        ),
        turnstile_core::INVALID_JSON_RESULT if call.is_some_and(|c| c.raw_input.is_some()) => {
            ("invalid_json", "not run: its arguments were not valid JSON")
        }
        turnstile_core::INVALID_JSON_RESULT => (
            "cut_off",
            "not run: its arguments were cut off before they were complete",
        ),
        turnstile_core::PROMPT_REQUIRED => ("no_prompt", "not run: the agent call had no prompt"),
        c if c.starts_with("tool not found: ") => ("tool_not_found", "not run: no such tool"),
        _ => ("refused", "not run"),
    })
}

/// A message as the lines `history` prints for it.
fn message_text(m: &StoredMessage) -> String {
    let mut out = String::new();
    let mut push = |line: String| {
        out.push_str(&line);
        out.push('\n');
    };
    let who = match m.role {
        StoredRole::User if m.synthetic => "user (continuation)",
        StoredRole::User => "user",
        StoredRole::Assistant => "assistant",
        StoredRole::Summary => "summary",
    };
    let seq = m.seq.map(|s| format!(" · seq {s}")).unwrap_or_default();
    push(format!("\n── {who}{seq}"));
    if let Some(r) = m.reasoning.as_deref().filter(|r| !r.is_empty()) {
        push(format!("  (thinking: {} chars)", r.chars().count()));
    }
    if !m.text.is_empty() {
        push(m.text.clone());
    }
    for c in &m.calls {
        let input = match (&c.raw_input, c.input.as_deref()) {
            // What the model sent is shown, not the `{}` stored in its place.
            (Some(raw), _) => format!("{raw}   (not valid JSON: stored as {{}})"),
            (None, Some(input)) => input.to_owned(),
            (None, None) => "(unfinished)".to_owned(),
        };
        push(format!("  → {} {input}", c.name));
        if let Some(r) = m.results.iter().find(|r| r.call == c.call) {
            let mark = if r.is_error { "✗" } else { "←" };
            let note = match cause(m, Some(c), &r.content).filter(|_| r.synthetic) {
                Some((_, label)) => format!(" ({label})"),
                None => String::new(),
            };
            let mut lines = r.content.lines();
            let first: Vec<&str> = lines.by_ref().take(8).collect();
            push(format!("    {mark}{note} {}", first.join("\n      ")));
            let rest = lines.count();
            if rest > 0 {
                push(format!("      … {rest} more lines"));
            }
        }
    }
    out.truncate(out.trim_end_matches('\n').len());
    out
}

fn message_json(m: &StoredMessage) -> Value {
    let role = match m.role {
        StoredRole::User => "user",
        StoredRole::Assistant => "assistant",
        StoredRole::Summary => "summary",
    };
    json!({
        "id": m.id, "seq": m.seq, "role": role, "text": m.text, "synthetic": m.synthetic,
        "reasoning": m.reasoning, "finish": m.finish,
        "calls": m.calls.iter().map(|c| json!({
            "call": c.call, "name": c.name, "finished": c.finished,
            "input": c.input.as_deref().and_then(|i| serde_json::from_str::<Value>(i).ok()),
            "raw_input": c.raw_input,
        })).collect::<Vec<_>>(),
        "results": m.results.iter().map(|r| {
            let call = m.calls.iter().find(|c| c.call == r.call);
            let cause = cause(m, call, &r.content).filter(|_| r.synthetic).map(|(code, _)| code);
            json!({
                "call": r.call, "content": r.content, "is_error": r.is_error,
                "synthetic": r.synthetic, "cause": cause,
            })
        }).collect::<Vec<_>>(),
    })
}

fn session_json(s: &SessionActivity) -> Value {
    json!({
        "id": s.row.id, "parent": s.row.parent, "title": s.row.title, "messages": s.messages,
        "submissions": s.submissions, "cost_micros": s.row.cost_micros,
        "last_activity_ms": s.last_activity_ms,
    })
}

fn title(t: Option<&str>) -> String {
    t.map_or_else(|| "(untitled)".to_owned(), str::to_owned)
}

/// `text` on one line of at most `width` characters: longer is cut to `width - 1` and "…".
fn cut(text: &str, width: usize) -> String {
    let one = text.replace(['\n', '\r', '\t'], " ");
    if one.chars().count() <= width {
        return one;
    }
    let mut cut: String = one.chars().take(width.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// Micro-dollars as dollars, to the cent above a dollar and to four places below.
fn dollars(micros: u64) -> String {
    let d = micros as f64 / 1e6;
    if d >= 1.0 {
        format!("${d:.2}")
    } else {
        format!("${d:.4}")
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// How long ago `at` was, for a person.
fn ago(now: u64, at: u64) -> String {
    let s = now.saturating_sub(at) / 1000;
    match s {
        0..60 => "just now".to_owned(),
        60..3600 => format!("{} min ago", s / 60),
        3600..86_400 => format!("{} h ago", s / 3600),
        _ => format!("{} days ago", s / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn money_and_times_read_well() {
        assert_eq!(dollars(12_345), "$0.0123");
        assert_eq!(dollars(2_500_000), "$2.50");
        assert_eq!(ago(100_000, 99_000), "just now");
        assert_eq!(ago(10 * 60_000, 0), "10 min ago");
        assert_eq!(ago(3 * 3_600_000, 0), "3 h ago");
        assert_eq!(ago(2 * 86_400_000, 0), "2 days ago");
    }

    #[test]
    fn a_session_is_named_by_its_id_or_a_unique_prefix() {
        let ids: Vec<SessionId> = ["3f2a-1", "3f2b-2", "3f2a-1$$c", "9"]
            .into_iter()
            .map(SessionId::new)
            .collect();
        assert_eq!(resolve(&ids, "9").unwrap().as_str(), "9");
        assert_eq!(resolve(&ids, "3f2b").unwrap().as_str(), "3f2b-2");
        assert_eq!(
            resolve(&ids, "3f2a-1").unwrap().as_str(),
            "3f2a-1",
            "an exact id wins over the longer ids it starts"
        );
        let why = resolve(&ids, "3f2").unwrap_err();
        assert!(
            why.contains("starts 3 session ids: 3f2a-1, 3f2b-2, 3f2a-1$$c"),
            "{why}"
        );
        assert!(resolve(&ids, "x").unwrap_err().contains("no session `x`"));
        assert!(resolve(&ids, "").is_err(), "an empty name names nothing");
    }

    fn message(finish: Option<Value>) -> StoredMessage {
        serde_json::from_value(json!({
            "id": 2, "seq": 1, "role": "assistant", "text": "", "attachments": [], "synthetic": false,
            "reasoning": null, "reasoning_signature": null, "reasoning_done": false,
            "finish": finish, "calls": [], "results": [],
        }))
        .unwrap()
    }

    #[test]
    fn a_result_the_tool_did_not_write_says_why() {
        let cancel = message(Some(
            json!({"reason": "canceled", "message": turnstile_core::CANCELED_FINISH}),
        ));
        let shutdown = message(Some(
            json!({"reason": "canceled", "message": turnstile_core::SHUTDOWN_FINISH}),
        ));
        let error = message(Some(
            json!({"reason": "error", "title": "T", "message": "m"}),
        ));
        let done = message(Some(json!({"reason": "end_turn"})));
        let code = |m: &StoredMessage, call: Option<&StoredCall>, content: &str| {
            cause(m, call, content).map(|(code, _)| code)
        };
        use turnstile_core::{
            CANCELLED_TOOL_RESULT, FAILED_TOOL_RESULT, HISTORY_REPAIR_RESULT, INVALID_JSON_RESULT,
            PROMPT_REQUIRED,
        };
        assert_eq!(
            code(&cancel, None, CANCELLED_TOOL_RESULT),
            Some("cancelled")
        );
        assert_eq!(
            code(&shutdown, None, CANCELLED_TOOL_RESULT),
            Some("shutdown")
        );
        assert_eq!(code(&error, None, FAILED_TOOL_RESULT), Some("failed"));
        assert_eq!(code(&done, None, FAILED_TOOL_RESULT), Some("ended"));
        assert_eq!(code(&done, None, HISTORY_REPAIR_RESULT), Some("recovery"));
        let sent: StoredCall = serde_json::from_value(json!({
            "call": "c", "name": "view", "input": "{}", "finished": true, "raw_input": "{x",
        }))
        .unwrap();
        let cut = StoredCall {
            raw_input: None,
            ..sent.clone()
        };
        assert_eq!(
            code(&done, Some(&sent), INVALID_JSON_RESULT),
            Some("invalid_json")
        );
        assert_eq!(
            code(&done, Some(&cut), INVALID_JSON_RESULT),
            Some("cut_off")
        );
        assert_eq!(
            code(&done, None, "tool not found: teleport"),
            Some("tool_not_found")
        );
        assert_eq!(code(&done, None, PROMPT_REQUIRED), Some("no_prompt"));
    }
}
