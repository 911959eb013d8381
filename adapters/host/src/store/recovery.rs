//! Recovery on open (SPEC 4.12): ends what a stopped process left unfinished, in one
//! transaction, before the engine starts.
//!
//! - Every ledger row not `finished` (waiting, active, paused; sub-agent rows too) ends
//!   `interrupted` with [`CompletionRecord::recovered`], in sequence order, each with the next
//!   cursor. A submission that was activated (state active or paused, or it has messages)
//!   reports its last assistant message; one activated without an assistant message gets an
//!   empty one, so the record has a message id.
//! - Unfinished assistant messages get finish `error` "Interrupted" / "The process stopped
//!   before this request finished."; unfinished reasoning sections are closed.
//! - Unfinished tool calls get input `{}` and are finished; every call without a result gets the
//!   repair result (error, synthetic), appended after the message's existing results.
//! - An unfinished summary message is deleted.
//!
//! Every step selects only what is unfinished, so recovery is idempotent: a second open finds
//! nothing to do.

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use turnstile_core::{INTERRUPTED_TITLE, MessageFinish, MessageId, RunId, Seq, SessionId};

use super::StoreError;
use super::apply::finish_json;
use super::schema::{int, outcome_text, to_json, uint};
use crate::mutants::{Armed, HostMutant};
use crate::record::{CompletionRecord, Cursor};
use turnstile_core::{HISTORY_REPAIR_RESULT, RECOVERY_MESSAGE};

/// One unfinished ledger row.
struct Unfinished {
    seq: i64,
    session: String,
    run_id: Option<String>,
    state: String,
}

/// Runs recovery in one transaction, numbering outcomes after `last_cursor` (advanced only
/// when the transaction commits). Returns the records it wrote, in cursor order.
///
/// # Errors
/// SQLite errors; [`StoreError::Corrupt`] for rows that do not parse.
pub(super) fn recover(
    conn: &mut Connection,
    last_cursor: &mut u64,
    armed: Armed,
) -> Result<Vec<(Cursor, CompletionRecord)>, StoreError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    // Recovery's changes are a revision of their own, so a client that resumes the change
    // order from before the crash sees what recovery repaired.
    super::schema::bump_revision(&tx)?;
    let mut cursor = *last_cursor;
    let mut recovered = Vec::new();
    for run in unfinished(&tx)? {
        let what = format!("runs row {}", run.seq);
        let activated = run.state != "waiting" || has_messages(&tx, run.seq)?;
        let last = if activated { Some(last_assistant(&tx, &run)?) } else { None };
        let record = CompletionRecord::recovered(
            SessionId::new(&run.session),
            run.run_id.as_deref().map(RunId::new),
            Seq(uint(run.seq, &what)?),
            last,
        );
        cursor += 1;
        tx.prepare_cached(
            "UPDATE runs SET state = 'finished', outcome = ?2, completion = ?3, cursor = ?4, \
             finished_at = CAST(unixepoch('subsec') * 1000 AS INTEGER) WHERE seq = ?1",
        )?
        .execute(params![
            run.seq,
            outcome_text(record.outcome),
            to_json(&record, "completion")?,
            int(cursor, "cursor")?,
        ])?;
        recovered.push((Cursor(cursor), record));
    }
    repair_messages(&tx, armed)?;
    tx.commit()?;
    *last_cursor = cursor;
    Ok(recovered)
}

/// The unfinished ledger rows, in sequence order.
fn unfinished(conn: &Connection) -> Result<Vec<Unfinished>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT seq, session, run_id, state FROM runs WHERE state <> 'finished' ORDER BY seq",
    )?;
    let rows = stmt.query_map([], |r| {
        Ok(Unfinished { seq: r.get(0)?, session: r.get(1)?, run_id: r.get(2)?, state: r.get(3)? })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

fn has_messages(conn: &Connection, seq: i64) -> Result<bool, StoreError> {
    Ok(conn
        .prepare_cached("SELECT EXISTS (SELECT 1 FROM messages WHERE seq = ?1)")?
        .query_row([seq], |r| r.get(0))?)
}

/// The submission's last assistant message (id and text); an empty one is inserted when it has
/// none.
fn last_assistant(conn: &Connection, run: &Unfinished) -> Result<(MessageId, String), StoreError> {
    let found: Option<(i64, String)> = conn
        .prepare_cached(
            "SELECT id, text FROM messages WHERE seq = ?1 AND role = 'assistant' \
             ORDER BY ord DESC LIMIT 1",
        )?
        .query_row([run.seq], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    if let Some((id, text)) = found {
        return Ok((MessageId(uint(id, &format!("messages row {id} id"))?), text));
    }
    let high: Option<i64> = conn.query_row(
        "SELECT max(coalesce((SELECT value FROM counters WHERE name = 'message_high'), 0), \
         coalesce((SELECT max(id) FROM messages), 0))",
        [],
        |r| r.get(0),
    )?;
    let id = high.unwrap_or(0) + 1;
    conn.prepare_cached(
        "INSERT INTO messages (id, session, seq, role) VALUES (?1, ?2, ?3, 'assistant')",
    )?
    .execute(params![id, run.session, run.seq])?;
    Ok((MessageId(uint(id, "new message id")?), String::new()))
}

/// Finishes messages, reasoning and tool calls, writes the missing results, deletes partial
/// summaries.
fn repair_messages(conn: &Connection, armed: Armed) -> Result<(), StoreError> {
    let finish = finish_json(&MessageFinish::Error {
        title: INTERRUPTED_TITLE.to_owned(),
        message: RECOVERY_MESSAGE.to_owned(),
    })?;
    conn.execute(
        "UPDATE messages SET finish = ?1 WHERE finish IS NULL AND role = 'assistant'",
        [finish],
    )?;
    conn.execute(
        "UPDATE messages SET reasoning_done = 1 WHERE reasoning IS NOT NULL AND reasoning_done = 0",
        [],
    )?;
    conn.execute("UPDATE tool_calls SET input = '{}', finished = 1 WHERE finished = 0", [])?;
    if armed.is(HostMutant::RecoveryLeavesOrphans) {
        // The bug: calls without a result stay without one.
        conn.execute("DELETE FROM messages WHERE finish IS NULL AND role = 'summary'", [])?;
        return Ok(());
    }
    conn.execute(
        "INSERT INTO tool_results (message, call, content, is_error, synthetic) \
         SELECT c.message, c.call, ?1, 1, 1 \
         FROM tool_calls c JOIN messages m ON m.id = c.message \
         WHERE NOT EXISTS \
             (SELECT 1 FROM tool_results r WHERE r.message = c.message AND r.call = c.call) \
         ORDER BY m.ord, c.ord",
        [HISTORY_REPAIR_RESULT],
    )?;
    conn.execute("DELETE FROM messages WHERE finish IS NULL AND role = 'summary'", [])?;
    Ok(())
}
