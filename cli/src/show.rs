//! `turnstile sessions` and `turnstile history`: the store read back, for people and scripts.
//!
//! Both read the store file directly (committed data only, no owner lock), so they work while
//! a run is going on in the same directory.

use std::path::Path;

use serde_json::{Value, json};
use turnstile_core::SessionId;
use turnstile_host::store::{Reader, SessionActivity, StoredMessage, StoredRole};

use crate::args::{Global, History, Sessions};
use crate::{Failure, setup};

fn reader(global: &Global) -> Result<Option<Reader>, Failure> {
    let cwd = std::env::current_dir()
        .map_err(|e| Failure::setup(format!("cannot read the current directory: {e}")))?;
    let path = setup::store_path(global, &cwd);
    if !path.exists() {
        return Ok(None);
    }
    Reader::open(&path)
        .map(Some)
        .map_err(|e| store_error(&path, &e))
}

fn store_error(path: &Path, e: &dyn std::fmt::Display) -> Failure {
    Failure::setup(format!("cannot read the store `{}`: {e}", path.display()))
}

fn no_store(global: &Global) -> String {
    let cwd = std::env::current_dir().unwrap_or_default();
    format!(
        "no store at `{}` yet: `turnstile run` creates it (or give --store)",
        setup::store_path(global, &cwd).display()
    )
}

/// Runs `turnstile sessions`.
///
/// # Errors
/// The store cannot be read.
pub fn sessions(global: &Global, a: &Sessions) -> Result<u8, Failure> {
    let Some(reader) = reader(global)? else {
        if a.json {
            println!("[]");
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
        println!("{}", Value::Array(rows));
        return Ok(0);
    }
    if all.is_empty() {
        eprintln!("no sessions yet");
        return Ok(0);
    }
    let now = now_ms();
    let rows: Vec<[String; 5]> = all
        .iter()
        .map(|s| {
            [
                s.row.id.as_str().to_owned(),
                title(s.row.title.as_deref()),
                s.messages.to_string(),
                dollars(s.row.cost_micros),
                s.last_activity_ms
                    .map_or_else(|| "-".to_owned(), |t| ago(now, t)),
            ]
        })
        .collect();
    let header = ["ID", "TITLE", "MESSAGES", "COST", "LAST ACTIVITY"];
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
    println!("{}", line(&header.map(str::to_owned)));
    for r in &rows {
        println!("{}", line(r));
    }
    Ok(0)
}

/// Runs `turnstile history`.
///
/// # Errors
/// The store cannot be read, or has no such session.
pub fn history(global: &Global, a: &History) -> Result<u8, Failure> {
    let Some(reader) = reader(global)? else {
        return Err(Failure::setup(no_store(global)));
    };
    let id = SessionId::new(&a.session);
    let read =
        |e: turnstile_host::StoreError| Failure::setup(format!("cannot read the session: {e}"));
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
        println!("{v}");
        return Ok(0);
    }
    println!(
        "session {} · {} · {}",
        row.id,
        title(row.title.as_deref()),
        dollars(row.cost_micros)
    );
    for m in &messages {
        print_message(m);
    }
    Ok(0)
}

fn print_message(m: &StoredMessage) {
    let who = match m.role {
        StoredRole::User if m.synthetic => "user (continuation)",
        StoredRole::User => "user",
        StoredRole::Assistant => "assistant",
        StoredRole::Summary => "summary",
    };
    let seq = m.seq.map(|s| format!(" · seq {s}")).unwrap_or_default();
    println!("\n── {who}{seq}");
    if let Some(r) = m.reasoning.as_deref().filter(|r| !r.is_empty()) {
        println!("  (thinking: {} chars)", r.chars().count());
    }
    if !m.text.is_empty() {
        println!("{}", m.text);
    }
    for c in &m.calls {
        println!(
            "  → {} {}",
            c.name,
            c.input.as_deref().unwrap_or("(unfinished)")
        );
        if let Some(r) = m.results.iter().find(|r| r.call == c.call) {
            let mark = if r.is_error { "✗" } else { "←" };
            let note = if r.synthetic {
                " (written by clean-up or recovery)"
            } else {
                ""
            };
            let mut lines = r.content.lines();
            let first: Vec<&str> = lines.by_ref().take(8).collect();
            println!("    {mark}{note} {}", first.join("\n      "));
            let rest = lines.count();
            if rest > 0 {
                println!("      … {rest} more lines");
            }
        }
    }
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
        })).collect::<Vec<_>>(),
        "results": m.results.iter().map(|r| json!({
            "call": r.call, "content": r.content, "is_error": r.is_error, "synthetic": r.synthetic,
        })).collect::<Vec<_>>(),
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
}
