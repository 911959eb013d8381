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
//!
//! With several hosts (SPEC 11) a take runs the same recovery for one session alone
//! ([`recover_session`]), inside the take's transaction: only its active and paused
//! submissions end `interrupted` (waiting ones were never started and stay queued for the new
//! owner), and only its messages are repaired.

use turnstile_core::{INTERRUPTED_TITLE, MessageFinish, MessageId, RunId, Seq, SessionId};

use super::apply::finish_json;
use super::error::StoreError;
use super::schema::{int, outcome_text, to_json, uint};
use super::sql::{Arg, Db, args};
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
/// The database's errors; [`StoreError::Corrupt`] for rows that do not parse.
pub(super) fn recover(
    db: &dyn Db,
    last_cursor: &mut u64,
    armed: Armed,
) -> Result<Vec<(Cursor, CompletionRecord)>, StoreError> {
    db.begin_write()?;
    match recover_in(db, *last_cursor, armed).and_then(|done| db.commit().map(|()| done)) {
        Ok((cursor, recovered)) => {
            *last_cursor = cursor;
            Ok(recovered)
        }
        Err(e) => {
            db.rollback();
            Err(e)
        }
    }
}

fn recover_in(
    db: &dyn Db,
    cursor: u64,
    armed: Armed,
) -> Result<(u64, Vec<(Cursor, CompletionRecord)>), StoreError> {
    // Recovery's changes are a revision of their own, so a client that resumes the change
    // order from before the crash sees what recovery repaired.
    super::schema::bump_revision(db)?;
    let high = message_high(db)?.unwrap_or(0);
    let mut next_id = || high + 1;
    let done = end_interrupted(db, unfinished(db, None)?, cursor, &mut next_id, true)?;
    repair_messages(db, armed, None)?;
    Ok(done)
}

/// What a take of one session recovered (SPEC 11), inside the take's transaction (which has
/// advanced the change order already): its active and paused submissions ended `interrupted`,
/// numbered after `cursor`, and its messages repaired. A message it inserts takes its id from
/// `next_id` (the take's own block, so no other host's core can hand it out). Returns the
/// newest cursor and the records, in cursor order.
///
/// # Errors
/// The database's errors; [`StoreError::Corrupt`] for rows that do not parse.
pub(super) fn recover_session(
    db: &dyn Db,
    session: &str,
    cursor: u64,
    next_id: &mut dyn FnMut() -> i64,
    armed: Armed,
) -> Result<(u64, Vec<(Cursor, CompletionRecord)>), StoreError> {
    let runs = if armed.is(HostMutant::MemberTakeRunsTwice) {
        // The bug: the started turn goes back to the queue instead of ending, and runs again.
        db.execute(
            "UPDATE runs SET state = 'waiting' WHERE session = ?1 AND state IN ('active', 'paused')",
            &[Arg::from(session)],
        )?;
        Vec::new()
    } else {
        unfinished(db, Some(session))?
    };
    let done = end_interrupted(db, runs, cursor, next_id, false)?;
    repair_messages(db, armed, Some(session))?;
    Ok(done)
}

/// Ends `runs` `interrupted`, numbering their outcomes after `cursor`. With `waiting_too`
/// false, a waiting submission that was never activated is left queued.
fn end_interrupted(
    db: &dyn Db,
    runs: Vec<Unfinished>,
    mut cursor: u64,
    next_id: &mut dyn FnMut() -> i64,
    waiting_too: bool,
) -> Result<(u64, Vec<(Cursor, CompletionRecord)>), StoreError> {
    let mut recovered = Vec::new();
    for run in runs {
        let what = format!("runs row {}", run.seq);
        let activated = run.state != "waiting" || has_messages(db, run.seq)?;
        if !activated && !waiting_too {
            continue;
        }
        let last = if activated { Some(last_assistant(db, &run, next_id)?) } else { None };
        let record = CompletionRecord::recovered(
            SessionId::new(&run.session),
            run.run_id.as_deref().map(RunId::new),
            Seq(uint(run.seq, &what)?),
            last,
        );
        cursor += 1;
        db.execute(
            "UPDATE runs SET state = 'finished', outcome = ?2, completion = ?3, cursor = ?4, \
             finished_at = CAST(unixepoch('subsec') * 1000 AS INTEGER) WHERE seq = ?1",
            &args![
                run.seq,
                outcome_text(record.outcome),
                &to_json(&record, "completion")?,
                int(cursor, "cursor")?,
            ],
        )?;
        recovered.push((Cursor(cursor), record));
    }
    Ok((cursor, recovered))
}

/// The unfinished ledger rows (of one session, or all), in sequence order.
fn unfinished(db: &dyn Db, session: Option<&str>) -> Result<Vec<Unfinished>, StoreError> {
    let rows = match session {
        None => db.rows(
            "SELECT seq, session, run_id, state FROM runs WHERE state <> 'finished' ORDER BY seq",
            &[],
        )?,
        Some(session) => db.rows(
            "SELECT seq, session, run_id, state FROM runs \
             WHERE session = ?1 AND state <> 'finished' ORDER BY seq",
            &[Arg::from(session)],
        )?,
    };
    rows.into_iter()
        .map(|r| {
            Ok(Unfinished {
                seq: r.int(0)?,
                session: r.text(1)?,
                run_id: r.opt_text(2)?,
                state: r.text(3)?,
            })
        })
        .collect()
}

fn has_messages(db: &dyn Db, seq: i64) -> Result<bool, StoreError> {
    Ok(db.row("SELECT 1 FROM messages WHERE seq = ?1 LIMIT 1", &[Arg::Int(seq)])?.is_some())
}

/// The highest message id the store ever held (`None` for none): the counter kept by a
/// trigger, or a message above it.
pub(super) fn message_high(db: &dyn Db) -> Result<Option<i64>, StoreError> {
    let counter = db.scalar("SELECT value FROM counters WHERE name = 'message_high'", &[])?;
    let max = db.scalar("SELECT max(id) FROM messages", &[])?;
    Ok(counter.max(max))
}

/// The submission's last assistant message (id and text); an empty one is inserted when it has
/// none.
fn last_assistant(
    db: &dyn Db,
    run: &Unfinished,
    next_id: &mut dyn FnMut() -> i64,
) -> Result<(MessageId, String), StoreError> {
    let found = db.row(
        "SELECT id, text FROM messages WHERE seq = ?1 AND role = 'assistant' \
         ORDER BY ord DESC LIMIT 1",
        &[Arg::Int(run.seq)],
    )?;
    if let Some(r) = found {
        let id = r.int(0)?;
        return Ok((MessageId(uint(id, &format!("messages row {id} id"))?), r.text(1)?));
    }
    let id = next_id();
    db.execute(
        "INSERT INTO messages (id, session, seq, role) VALUES (?1, ?2, ?3, 'assistant')",
        &args![id, &run.session, run.seq],
    )?;
    Ok((MessageId(uint(id, "new message id")?), String::new()))
}

/// Finishes messages, reasoning and tool calls, writes the missing results, deletes partial
/// summaries: of one session, or of all.
fn repair_messages(db: &dyn Db, armed: Armed, session: Option<&str>) -> Result<(), StoreError> {
    let finish = finish_json(&MessageFinish::Error {
        title: INTERRUPTED_TITLE.to_owned(),
        message: RECOVERY_MESSAGE.to_owned(),
    })?;
    // The session, when there is one, is each statement's last argument, `?n`; `col` names
    // the column that holds it.
    let only = |col: &str, n: usize| match session {
        None => String::new(),
        Some(_) => format!(" AND {col} = ?{n}"),
    };
    fn with<'a>(mut a: Vec<Arg<'a>>, session: Option<&'a str>) -> Vec<Arg<'a>> {
        a.extend(session.map(Arg::from));
        a
    }
    db.execute(
        &format!(
            "UPDATE messages SET finish = ?1 WHERE finish IS NULL AND role = 'assistant'{}",
            only("session", 2)
        ),
        &with(vec![Arg::from(finish.as_str())], session),
    )?;
    db.execute(
        &format!(
            "UPDATE messages SET reasoning_done = 1 \
             WHERE reasoning IS NOT NULL AND reasoning_done = 0{}",
            only("session", 1)
        ),
        &with(Vec::new(), session),
    )?;
    let calls = match session {
        None => "UPDATE tool_calls SET input = '{}', finished = 1 WHERE finished = 0".to_owned(),
        Some(_) => "UPDATE tool_calls SET input = '{}', finished = 1 WHERE finished = 0 \
                    AND message IN (SELECT id FROM messages WHERE session = ?1)"
            .to_owned(),
    };
    db.execute(&calls, &with(Vec::new(), session))?;
    let delete_summaries = format!(
        "DELETE FROM messages WHERE finish IS NULL AND role = 'summary'{}",
        only("session", 1)
    );
    if armed.is(HostMutant::RecoveryLeavesOrphans) {
        // The bug: calls without a result stay without one.
        db.execute(&delete_summaries, &with(Vec::new(), session))?;
        return Ok(());
    }
    db.execute(
        &format!(
            "INSERT INTO tool_results (message, call, content, is_error, synthetic) \
             SELECT c.message, c.call, CAST(?1 AS TEXT), 1, 1 \
             FROM tool_calls c JOIN messages m ON m.id = c.message \
             WHERE NOT EXISTS \
                 (SELECT 1 FROM tool_results r WHERE r.message = c.message AND r.call = c.call){} \
             ORDER BY m.ord, c.ord",
            only("m.session", 2)
        ),
        &with(vec![Arg::from(HISTORY_REPAIR_RESULT)], session),
    )?;
    db.execute(&delete_summaries, &with(Vec::new(), session))?;
    Ok(())
}
