//! One write as SQL (SPEC 4.4, 4.7, 4.11, 4.12), inside the transaction of a group commit.
//!
//! The streamed appends (text, reasoning, summary text) stamp the change order's revision
//! themselves, in the same statement: they are most of the writes, and the trigger that would
//! stamp them otherwise (schema version 3) then skips them, which halves what an append costs.
//!
//! Every update is field-level: text and reasoning are appended with `||`, gauges are set and
//! cost is added in one `UPDATE`, a title changes only the title. Nothing is read and written
//! back (G-15). Every write that names a row checks that it touched it: a write for a message,
//! session or ledger row the store does not hold is an error, never a silent no-op (a lost
//! ledger outcome would be a lost RunComplete).

use turnstile_core::{MessageFinish, StoreOp};

use super::error::StoreError;
use super::schema::{int, mode_text, outcome_text, to_json};
use super::sql::{Arg, Db, argv};
use super::txn::{NewRun, Write};
use crate::record::{CompletionRecord, Cursor};

/// The finish of a summary that succeeded.
pub(super) const SUMMARY_DONE: &str = r#"{"reason":"done"}"#;

/// The ledger cursors of one commit: the last one assigned, and those this commit assigned.
/// The store adopts `last` only when the commit succeeds.
#[derive(Debug)]
pub(super) struct Cursors {
    /// The newest cursor assigned so far (0 for none).
    pub(super) last: u64,
    /// The cursors this commit assigned, one per `LedgerOutcome`, in order.
    pub(super) assigned: Vec<Cursor>,
}

/// Applies one write.
///
/// # Errors
/// SQLite errors (constraints included); [`StoreError::Corrupt`] for a write naming a row the
/// store does not hold, or an op this store does not know.
pub(super) fn write<'a>(
    plan: &mut Plan<'a>,
    w: &'a Write,
    cursors: &mut Cursors,
) -> Result<(), StoreError> {
    match w {
        Write::Accept(run) => accept(plan, run),
        Write::CommandApplied(id) => {
            let changed = plan.execute(
                "UPDATE session_commands SET applied = 1 WHERE id = ?1",
                argv![int(*id, "command id")?],
            )?;
            plan.one(changed, move |_| format!("session_commands has no row {id}"))
        }
        Write::Op(op) => op_(plan, op, cursors),
        Write::RawInput { message, call, raw } => {
            let changed = plan.execute(
                "UPDATE tool_calls SET raw_input = ?3 WHERE message = ?1 AND call = ?2",
                argv![int(message.0, "message id")?, call.as_str(), raw],
            )?;
            plan.one(changed, move |_| {
                format!("raw input: message {message} has no tool call {call}")
            })
        }
    }
}

/// A new submission's ledger row, creating its (top-level, untitled) session when unknown.
fn accept<'a>(plan: &mut Plan<'a>, run: &'a NewRun) -> Result<(), StoreError> {
    plan.execute(
        "INSERT INTO sessions (id, created) \
         VALUES (?1, (SELECT coalesce(max(created), 0) + 1 FROM sessions)) \
         ON CONFLICT (id) DO NOTHING",
        argv![run.session.as_str()],
    )?;
    // The core's (SPEC 4.1); a row with a RunId and none breaks the table's CHECK.
    let fingerprint = run.fingerprint.map(|f| f.to_hex());
    let attachments = attachments_json(&run.attachments)?;
    plan.execute(
"INSERT INTO runs (seq, session, run_id, mode, prompt, attachments, fingerprint, state, \
         accepted_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'waiting', CAST(unixepoch('subsec') * 1000 AS INTEGER))",
argv![
        int(run.seq.0, "sequence")?,
        run.session.as_str(),
        run.run_id.as_ref().map(|r| r.as_str()),
        mode_text(run.mode),
        &run.prompt,
        attachments,
        fingerprint,
    ])?;
    Ok(())
}

/// The JSON of a list of attachments (`[]` without building a serializer when empty).
fn attachments_json(attachments: &[turnstile_core::Attachment]) -> Result<String, StoreError> {
    if attachments.is_empty() { Ok("[]".to_owned()) } else { to_json(attachments, "attachments") }
}

/// The statements of one commit, in order, run as one batch ([`Db::execute_all`]: a
/// PostgreSQL connection sends them in one round trip), with the statements that must change
/// exactly one row. Planning a write computes everything it writes (cursors included)
/// without reading the database, so the whole commit can go at once.
pub(super) struct Plan<'a> {
    statements: Vec<(&'static str, Vec<Arg<'a>>)>,
    /// A statement that must change exactly one row, and what to say when it did not.
    checks: Vec<(usize, Check<'a>)>,
}

/// Says what was wrong, with the database at hand to name what it found instead.
type Say<'a> = Box<dyn FnOnce(&dyn Db) -> String + 'a>;

/// What a statement that changed no row says.
enum Check<'a> {
    /// The op names a message of a role that its session does not hold (the streamed
    /// appends: most writes, so no allocation for them).
    Message { op: &'a StoreOp, id: turnstile_core::MessageId, role: &'static str },
    /// Anything else (with the database at hand, to name what it found instead).
    Other(Say<'a>),
}

impl Check<'_> {
    fn say(self, db: &dyn Db) -> String {
        match self {
            Check::Message { op, id, role } => {
                format!("{}: session {} has no {role} message {id}", op_name(op), op.session())
            }
            Check::Other(what) => what(db),
        }
    }
}

/// A statement of a plan, whose count of changed rows is known once the plan ran.
#[derive(Clone, Copy, Debug)]
pub(super) struct Planned(usize);

impl<'a> Plan<'a> {
    pub(super) fn new() -> Plan<'a> {
        Plan { statements: Vec::new(), checks: Vec::new() }
    }

    /// Adds a statement. (A `Result`, so that planning reads as running: it never fails.)
    #[allow(clippy::unnecessary_wraps)]
    fn execute(&mut self, sql: &'static str, args: Vec<Arg<'a>>) -> Result<Planned, StoreError> {
        self.statements.push((sql, args));
        Ok(Planned(self.statements.len() - 1))
    }

    /// The statement must change exactly one row; `what` says what was wrong otherwise.
    #[allow(clippy::unnecessary_wraps)]
    fn one(
        &mut self,
        planned: Planned,
        what: impl FnOnce(&dyn Db) -> String + 'a,
    ) -> Result<(), StoreError> {
        self.checks.push((planned.0, Check::Other(Box::new(what))));
        Ok(())
    }

    /// Runs every statement, in order, then the checks of those that ran: the first check
    /// that fails is the error, else the statement that failed, as if each had been checked
    /// as it ran.
    pub(super) fn run(self, db: &dyn Db) -> Result<(), StoreError> {
        let batch: Vec<(&str, &[Arg<'_>])> =
            self.statements.iter().map(|(sql, args)| (*sql, args.as_slice())).collect();
        let (counts, failed) = db.execute_all(&batch);
        for (i, what) in self.checks {
            match counts.get(i) {
                Some(1) => {}
                Some(_) => return Err(StoreError::Corrupt(what.say(db))),
                None => break,
            }
        }
        failed.map_or(Ok(()), Err)
    }
}

/// The name of an op (its serde tag), for error messages.
fn op_name(op: &StoreOp) -> String {
    serde_json::to_value(op)
        .ok()
        .and_then(|v| v.get("op").and_then(|o| o.as_str()).map(str::to_owned))
        .unwrap_or_else(|| format!("{op:?}"))
}

/// Updates one message of a role in a session, failing unless it exists.
fn message_update<'a>(
    plan: &mut Plan<'a>,
    sql: &'static str,
    args: Vec<Arg<'a>>,
    missing: Check<'a>,
) -> Result<(), StoreError> {
    let changed = plan.execute(sql, args)?;
    plan.checks.push((changed.0, missing));
    Ok(())
}

#[allow(clippy::too_many_lines)] // one arm per op, each a statement or two: a flat table
fn op_<'a>(plan: &mut Plan<'a>, op: &'a StoreOp, cursors: &mut Cursors) -> Result<(), StoreError> {
    // Built only when a write misses its row: naming the op serialises it.
    let missing =
        |id: &turnstile_core::MessageId, role: &'static str| Check::Message { op, id: *id, role };
    match op {
        StoreOp::LedgerActivated { session, seq, .. } => {
            let changed = plan.execute(
                "UPDATE runs SET state = 'active' \
                     WHERE seq = ?1 AND session = ?2 AND state IN ('waiting', 'paused')",
                argv![int(seq.0, "sequence")?, session.as_str()],
            )?;
            plan.one(changed, move |db| ledger_problem(db, op, seq.0, "waiting or paused"))
        }
        StoreOp::LedgerPaused { session, seq } => {
            let changed = plan.execute(
                "UPDATE runs SET state = 'paused' \
                     WHERE seq = ?1 AND session = ?2 AND state = 'active'",
                argv![int(seq.0, "sequence")?, session.as_str()],
            )?;
            plan.one(changed, move |db| ledger_problem(db, op, seq.0, "active"))
        }
        StoreOp::LedgerOutcome { completion } => {
            let record = CompletionRecord::from(completion);
            let json = to_json(&record, "completion")?;
            let seq = completion.seq().0;
            let cursor = cursors.last + 1;
            let changed = plan.execute(
                "UPDATE runs SET state = 'finished', outcome = ?3, completion = ?4, cursor = ?5, \
                     finished_at = CAST(unixepoch('subsec') * 1000 AS INTEGER) \
                     WHERE seq = ?1 AND session = ?2 AND state <> 'finished'",
                argv![
                    int(seq, "sequence")?,
                    completion.session().as_str(),
                    outcome_text(completion.outcome()),
                    json,
                    int(cursor, "cursor")?,
                ],
            )?;
            plan.one(changed, move |db| ledger_problem(db, op, seq, "unfinished"))?;
            cursors.last = cursor;
            cursors.assigned.push(Cursor(cursor));
            Ok(())
        }
        StoreOp::ChildAccepted { session, seq, parent, parent_seq, prompt, title } => {
            plan.execute(
                "INSERT INTO sessions (id, parent, title, created) \
                 VALUES (?1, ?2, ?3, (SELECT coalesce(max(created), 0) + 1 FROM sessions))",
                argv![session.as_str(), parent.as_str(), title],
            )?;
            plan.execute(
                "INSERT INTO runs (seq, session, mode, prompt, parent_seq, state) \
                 VALUES (?1, ?2, 'own_turn', ?3, ?4, 'waiting')",
                argv![
                    int(seq.0, "sequence")?,
                    session.as_str(),
                    prompt,
                    int(parent_seq.0, "parent sequence")?,
                ],
            )?;
            Ok(())
        }
        StoreOp::UserMessage { session, seq, id, text, attachments, synthetic } => {
            plan.execute(
                "INSERT INTO messages (id, session, seq, role, text, attachments, synthetic) \
                 VALUES (?1, ?2, ?3, 'user', ?4, ?5, ?6)",
                argv![
                    int(id.0, "message id")?,
                    session.as_str(),
                    int(seq.0, "sequence")?,
                    text,
                    attachments_json(attachments)?,
                    synthetic,
                ],
            )?;
            Ok(())
        }
        StoreOp::AssistantMessage { session, seq, id, turn, step } => {
            plan.execute(
                "INSERT INTO messages (id, session, seq, role, turn, step) \
                 VALUES (?1, ?2, ?3, 'assistant', ?4, ?5)",
                argv![
                    int(id.0, "message id")?,
                    session.as_str(),
                    int(seq.0, "sequence")?,
                    int(turn.0, "turn")?,
                    step,
                ],
            )?;
            Ok(())
        }
        StoreOp::ReasoningStarted { session, id, .. } => message_update(
            plan,
            "UPDATE messages SET reasoning = coalesce(reasoning, ''), reasoning_done = 0 \
             WHERE id = ?1 AND session = ?2 AND role = 'assistant'",
            argv![int(id.0, "message id")?, session.as_str()],
            missing(id, "assistant"),
        ),
        StoreOp::AppendReasoning { session, id, text, .. } => message_update(
            plan,
            "UPDATE messages SET reasoning = coalesce(reasoning, '') || ?3, \
             rev = (SELECT value FROM counters WHERE name = 'revision') \
             WHERE id = ?1 AND session = ?2 AND role = 'assistant'",
            argv![int(id.0, "message id")?, session.as_str(), text],
            missing(id, "assistant"),
        ),
        StoreOp::ReasoningEnded { session, id, signature, .. } => message_update(
            plan,
            "UPDATE messages SET reasoning = coalesce(reasoning, ''), reasoning_done = 1, \
             reasoning_signature = coalesce(?3, reasoning_signature) \
             WHERE id = ?1 AND session = ?2 AND role = 'assistant'",
            argv![int(id.0, "message id")?, session.as_str(), signature],
            missing(id, "assistant"),
        ),
        StoreOp::AppendText { session, id, text, .. } => message_update(
            plan,
            "UPDATE messages SET text = text || ?3, \
             rev = (SELECT value FROM counters WHERE name = 'revision') \
             WHERE id = ?1 AND session = ?2 AND role = 'assistant'",
            argv![int(id.0, "message id")?, session.as_str(), text],
            missing(id, "assistant"),
        ),
        StoreOp::ToolInputStarted { id, call, name, .. } => {
            plan.execute(
                "INSERT INTO tool_calls (message, call, ord, name) \
                 SELECT ?1, ?2, coalesce(max(ord), 0) + 1, ?3 FROM tool_calls WHERE message = ?1",
                argv![int(id.0, "message id")?, call.as_str(), name],
            )?;
            Ok(())
        }
        StoreOp::ToolCall { id, call, name, input, .. } => {
            // Finishes the unfinished call with this id, or adds a finished one.
            let changed = plan.execute(
                "INSERT INTO tool_calls (message, call, ord, name, input, finished) \
                     SELECT ?1, ?2, coalesce(max(ord), 0) + 1, ?3, ?4, 1 \
                     FROM tool_calls WHERE message = ?1 \
                     ON CONFLICT (message, call) DO UPDATE \
                     SET name = excluded.name, input = excluded.input, finished = 1 \
                     WHERE tool_calls.finished = 0",
                argv![int(id.0, "message id")?, call.as_str(), name, input],
            )?;
            plan.one(changed, move |_| {
                format!("{}: message {id} already has a finished tool call {call}", op_name(op))
            })
        }
        StoreOp::MessageReset { session, id, .. } => {
            message_update(
                plan,
                "UPDATE messages SET text = '', reasoning = NULL, reasoning_signature = NULL, \
                 reasoning_done = 0 \
                 WHERE id = ?1 AND session = ?2 AND role = 'assistant'",
                argv![int(id.0, "message id")?, session.as_str()],
                missing(id, "assistant"),
            )?;
            plan.execute(
                "DELETE FROM tool_calls WHERE message = ?1",
                argv![int(id.0, "message id")?],
            )?;
            Ok(())
        }
        StoreOp::ToolResult { id, call, content, is_error, synthetic, .. } => {
            plan.execute(
                "INSERT INTO tool_results (message, call, content, is_error, synthetic) \
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                argv![int(id.0, "message id")?, call.as_str(), content, is_error, synthetic],
            )?;
            Ok(())
        }
        StoreOp::MessageFinished { session, id, finish, .. } => message_update(
            plan,
            "UPDATE messages SET finish = ?3 \
             WHERE id = ?1 AND session = ?2 AND role = 'assistant'",
            argv![int(id.0, "message id")?, session.as_str(), finish_json(finish)?],
            missing(id, "assistant"),
        ),
        StoreOp::SessionUsage {
            session,
            prompt_tokens,
            completion_tokens,
            cost_micros,
            ancestor,
            ..
        } => {
            let cost = int(*cost_micros, "cost")?;
            let gauge = |g: &Option<u64>| g.map(|v| int(v, "token gauge")).transpose();
            let changed = plan.execute(
                "UPDATE sessions SET prompt_tokens = coalesce(?2, prompt_tokens), \
                     completion_tokens = coalesce(?3, completion_tokens), \
                     cost_micros = cost_micros + ?4 \
                     WHERE id = ?1",
                argv![session.as_str(), gauge(prompt_tokens)?, gauge(completion_tokens)?, cost],
            )?;
            plan.one(changed, move |_| format!("{}: no session {session}", op_name(op)))?;
            if let Some(ancestor) = ancestor {
                let changed = plan.execute(
                    "UPDATE sessions SET cost_micros = cost_micros + ?2 WHERE id = ?1",
                    argv![ancestor.as_str(), cost],
                )?;
                plan.one(changed, move |_| {
                    format!("{}: no ancestor session {ancestor}", op_name(op))
                })?;
            }
            Ok(())
        }
        StoreOp::Title { session, title } => {
            let changed = plan.execute(
                "UPDATE sessions SET title = ?2 WHERE id = ?1",
                argv![session.as_str(), title],
            )?;
            plan.one(changed, move |_| format!("{}: no session {session}", op_name(op)))
        }
        StoreOp::SummaryMessage { session, id } => {
            plan.execute(
                "INSERT INTO messages (id, session, role) VALUES (?1, ?2, 'summary')",
                argv![int(id.0, "message id")?, session.as_str()],
            )?;
            Ok(())
        }
        StoreOp::SummaryText { session, id, text } => message_update(
            plan,
            "UPDATE messages SET text = text || ?3, \
             rev = (SELECT value FROM counters WHERE name = 'revision') \
             WHERE id = ?1 AND session = ?2 AND role = 'summary'",
            argv![int(id.0, "message id")?, session.as_str(), text],
            missing(id, "summary"),
        ),
        StoreOp::SummaryReset { session, id } => message_update(
            plan,
            "UPDATE messages SET text = '' WHERE id = ?1 AND session = ?2 AND role = 'summary'",
            argv![int(id.0, "message id")?, session.as_str()],
            missing(id, "summary"),
        ),
        StoreOp::SummaryDone { session, id, completion_tokens } => {
            let mid = int(id.0, "message id")?;
            message_update(
                plan,
                "UPDATE messages SET finish = ?3 \
                 WHERE id = ?1 AND session = ?2 AND role = 'summary'",
                argv![mid, session.as_str(), SUMMARY_DONE],
                missing(id, "summary"),
            )?;
            let changed = plan.execute(
                "UPDATE sessions SET summary_message = ?2, prompt_tokens = 0, \
                     completion_tokens = ?3 WHERE id = ?1",
                argv![session.as_str(), mid, int(*completion_tokens, "token gauge")?],
            )?;
            plan.one(changed, move |_| format!("{}: no session {session}", op_name(op)))
        }
        StoreOp::SummaryFailed { session, id, title, message } => {
            let finish =
                serde_json::json!({ "reason": "error", "title": title, "message": message });
            message_update(
                plan,
                "UPDATE messages SET finish = ?3 \
                 WHERE id = ?1 AND session = ?2 AND role = 'summary'",
                argv![int(id.0, "message id")?, session.as_str(), finish.to_string()],
                missing(id, "summary"),
            )
        }
        StoreOp::SummaryDeleted { session, id } => message_update(
            plan,
            "DELETE FROM messages WHERE id = ?1 AND session = ?2 AND role = 'summary'",
            argv![int(id.0, "message id")?, session.as_str()],
            missing(id, "summary"),
        ),
        // Coalesced updates are the host's debouncer's business: nothing to do here.
        StoreOp::Flush { .. } => Ok(()),
        other => Err(StoreError::Corrupt(format!(
            "store op {} is not supported by this store",
            op_name(other)
        ))),
    }
}

/// The JSON of an assistant message's finish.
pub(super) fn finish_json(finish: &MessageFinish) -> Result<String, StoreError> {
    to_json(finish, "message finish")
}

/// Says why a ledger change matched no row: no row for the sequence, another session's row,
/// or a row in the wrong state.
fn ledger_problem(db: &dyn Db, op: &StoreOp, seq: u64, expected: &str) -> String {
    let name = op_name(op);
    let found = i64::try_from(seq).ok().map(|s| {
        db.row("SELECT session, state FROM runs WHERE seq = ?1", &[Arg::Int(s)])
            .and_then(|r| r.map(|r| Ok((r.text(0)?, r.text(1)?))).transpose())
    });
    match found {
        None | Some(Ok(None)) => format!("{name}: the ledger has no row for sequence {seq}"),
        Some(Err(e)) => format!("{name}: ledger row {seq} could not be read: {e}"),
        Some(Ok(Some((session, _)))) if session != op.session().as_str() => {
            format!("{name}: ledger row {seq} belongs to session {session}, not {}", op.session())
        }
        Some(Ok(Some((_, state)))) => {
            format!("{name}: ledger row {seq} is {state}, expected {expected}")
        }
    }
}
