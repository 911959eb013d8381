//! Queries (SPEC 9): sessions, messages in write order, the run ledger and its completions,
//! integrity and protocol checks. A [`Reader`] is its own read-only connection, so it reads
//! while the [`super::open::Store`] writes (WAL) and can live on another thread.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use turnstile_core::{
    Attachment, CallId, Fingerprint, KnownRun, MessageId, Mode, RunId, Seq, SessionId, Start,
};

use super::conn::Conn;
use super::error::StoreError;
use super::integrity::{IntegrityError, IntegrityProblem};
use super::location::Location;
use super::schema::{int, parse_json, parse_mode, parse_outcome, uint};
use super::sql::{Arg, Db, Row, args};
use crate::record::{CompletionRecord, Cursor};

/// How long a connection waits for a lock before failing with SQLITE_BUSY: short, because the
/// host retries with its own backoff.
pub(super) const BUSY_TIMEOUT: Duration = Duration::from_millis(100);

/// A read-only connection to a store. `Send`: move it to the thread that reads.
#[derive(Debug)]
pub struct Reader {
    pub(super) conn: Conn,
}

/// One session.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionRow {
    /// The session.
    pub id: SessionId,
    /// The calling session of a sub-agent session.
    pub parent: Option<SessionId>,
    /// The title, once written.
    pub title: Option<String>,
    /// The `prompt_tokens` gauge (set after each step).
    pub prompt_tokens: u64,
    /// The `completion_tokens` gauge (set after each step).
    pub completion_tokens: u64,
    /// The accumulated cost in millionths (only ever added to).
    pub cost_micros: u64,
    /// The summary message history starts at, after a successful summarization.
    pub summary_message: Option<MessageId>,
}

/// A session and what it did (see [`Reader::activity`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionActivity {
    /// The session.
    pub row: SessionRow,
    /// Its messages.
    pub messages: u64,
    /// Its submissions.
    pub submissions: u64,
    /// Its newest submission.
    pub newest_seq: Option<Seq>,
    /// When it last accepted or finished a submission (wall clock, ms since the Unix epoch);
    /// `None` for a store written before these times were kept.
    pub last_activity_ms: Option<u64>,
}

/// Who wrote a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StoredRole {
    /// A user message (a prompt, or the synthetic continuation).
    User,
    /// An assistant message (one step of a turn).
    Assistant,
    /// A summary message (SPEC 4.7).
    Summary,
}

/// One message with its tool calls and results.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredMessage {
    /// The core's message id.
    pub id: MessageId,
    /// The submission it belongs to (none for a summary).
    pub seq: Option<Seq>,
    /// Who wrote it.
    pub role: StoredRole,
    /// The text (streamed text is appended).
    pub text: String,
    /// A user message's attachments.
    pub attachments: Vec<Attachment>,
    /// True for the synthetic continuation prompt (SPEC 4.7).
    pub synthetic: bool,
    /// The reasoning section; `None` when there is none.
    pub reasoning: Option<String>,
    /// The provider's signature of the reasoning.
    pub reasoning_signature: Option<String>,
    /// True once the reasoning section ended.
    pub reasoning_done: bool,
    /// The finish; `None` while unfinished. Assistant: the `MessageFinish` JSON (e.g.
    /// `{"reason":"end_turn"}`); summary: `{"reason":"done"}` or
    /// `{"reason":"error","title":..,"message":..}`.
    pub finish: Option<serde_json::Value>,
    /// The tool calls, in the order added.
    pub calls: Vec<StoredCall>,
    /// The tool results, in the order written.
    pub results: Vec<StoredResult>,
}

/// One tool call of an assistant message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredCall {
    /// The provider's call id.
    pub call: CallId,
    /// The tool's name.
    pub name: String,
    /// The arguments; `None` while the call streams.
    pub input: Option<String>,
    /// True once the call is complete (or was finished by clean-up or recovery).
    pub finished: bool,
    /// What the model sent as arguments when that was not valid JSON (`input` is then `{}`,
    /// SPEC 4.4); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_input: Option<String>,
}

/// One tool result of an assistant message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredResult {
    /// The call it answers.
    pub call: CallId,
    /// The result text.
    pub content: String,
    /// True for an error result.
    pub is_error: bool,
    /// True when clean-up or recovery wrote it (the tool never reported).
    pub synthetic: bool,
}

/// Where a submission is in its life, as the ledger records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    /// Accepted, not yet active (preparing or queued).
    Waiting,
    /// Its turn is running.
    Active,
    /// Paused for a summarization (SPEC 4.7).
    Paused,
    /// Its outcome is recorded.
    Finished,
}

/// One ledger row: a submission.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunRow {
    /// The submission's sequence.
    pub seq: Seq,
    /// Its session.
    pub session: SessionId,
    /// The caller's RunId.
    pub run_id: Option<RunId>,
    /// How it joins its session.
    pub mode: Mode,
    /// The prompt.
    pub prompt: String,
    /// The attachments.
    pub attachments: Vec<Attachment>,
    /// Where it is.
    pub state: RunState,
    /// Its completion record and cursor, once finished.
    pub completion: Option<(Cursor, CompletionRecord)>,
}

const RUN_COLUMNS: &str =
    "seq, session, run_id, mode, prompt, attachments, state, completion, cursor";

pub(super) const SESSION_COLUMNS: &str =
    "id, parent, title, prompt_tokens, completion_tokens, cost_micros, summary_message";

impl Reader {
    /// Opens a reader on an existing store file.
    ///
    /// Also a way to inspect a store as it is on disk, without its owner lock and without
    /// running recovery (which repairs what it finds): what the simulator and the crash tests
    /// use to see exactly what a stopped process left. The file must exist.
    ///
    /// # Errors
    /// [`StoreError::Open`] naming the file (no such file, not a database, no permission).
    pub fn open(path: &Path) -> Result<Reader, StoreError> {
        Reader::open_at(&Location::File(path.to_owned()))
    }

    /// Opens a reader on an existing store wherever it is (see [`Reader::open`]): a file, an
    /// in-memory disk, or a PostgreSQL database (a read-only connection of its own).
    ///
    /// Its calls block (as SQLite's do): call them from a blocking thread, as
    /// [`Host::read`](crate::Host::read) does; a PostgreSQL reader used on a thread of an
    /// async runtime panics.
    ///
    /// # Errors
    /// [`StoreError::Open`] naming the file (no such file, not a database, no permission); for
    /// an in-memory disk, SQLite's error; for PostgreSQL, [`StoreError::Postgres`] (the server
    /// cannot be reached, the URL does not parse).
    pub fn open_at(location: &Location) -> Result<Reader, StoreError> {
        if let Location::Postgres(url) = location {
            return Reader::open_postgres(url);
        }
        // Read-write at the file level (a WAL reader may need to write the -shm index), but
        // `query_only` refuses every write.
        let conn = location.connect(false)?;
        let opening = |e| super::location::opening(location, e);
        conn.busy_timeout(BUSY_TIMEOUT).map_err(opening)?;
        conn.pragma_update(None, "query_only", true).map_err(opening)?;
        conn.set_prepared_statement_cache_capacity(32);
        Ok(Reader { conn: Conn::Sqlite(conn) })
    }

    #[cfg(not(madsim))]
    fn open_postgres(url: &str) -> Result<Reader, StoreError> {
        Ok(Reader { conn: Conn::Postgres(Box::new(super::postgres::PgConn::connect_reader(url)?)) })
    }

    #[cfg(madsim)]
    fn open_postgres(url: &str) -> Result<Reader, StoreError> {
        Err(StoreError::Corrupt(format!("{url}: the simulator's build has no PostgreSQL store")))
    }

    /// The connection, as the shared SQL's.
    pub(super) fn db(&self) -> &dyn Db {
        self.conn.db()
    }

    /// One session, if it exists.
    ///
    /// # Errors
    /// SQLite errors; [`StoreError::Corrupt`] for a row that does not parse.
    pub fn session(&self, id: &SessionId) -> Result<Option<SessionRow>, StoreError> {
        let sql = format!("SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ?1");
        let row = self.db().row(&sql, &args![id.as_str()])?;
        row.map(|r| raw_session(&r)?.parse()).transpose()
    }

    /// Every session, in creation order.
    ///
    /// # Errors
    /// SQLite errors; [`StoreError::Corrupt`] for a row that does not parse.
    pub fn sessions(&self) -> Result<Vec<SessionRow>, StoreError> {
        let sql = format!("SELECT {SESSION_COLUMNS} FROM sessions ORDER BY created");
        self.db().rows(&sql, &[])?.iter().map(|r| raw_session(r)?.parse()).collect()
    }

    /// What each session did, for a list of sessions: its messages, its submissions and when
    /// it last accepted or finished one; most recent first (by the newest submission's
    /// sequence, so a clock change cannot reorder it). `children`: sub-agent sessions too.
    ///
    /// # Errors
    /// SQLite errors; [`StoreError::Corrupt`] for a row that does not parse.
    pub fn activity(&self, children: bool) -> Result<Vec<SessionActivity>, StoreError> {
        let rows = self.db().rows(
            "SELECT s.id, \
                    (SELECT count(*) FROM messages m WHERE m.session = s.id), \
                    (SELECT count(*) FROM runs r WHERE r.session = s.id), \
                    (SELECT max(r.seq) FROM runs r WHERE r.session = s.id), \
                    (SELECT max(coalesce(r.finished_at, r.accepted_at)) FROM runs r \
                     WHERE r.session = s.id) \
             FROM sessions s WHERE ?1 = 1 OR s.parent IS NULL \
             ORDER BY coalesce((SELECT max(r.seq) FROM runs r WHERE r.session = s.id), 0) DESC, \
                      s.created DESC",
            &args![children],
        )?;
        let rows = rows
            .iter()
            .map(|r| Ok((r.text(0)?, r.int(1)?, r.int(2)?, r.opt_int(3)?, r.opt_int(4)?)))
            .collect::<Result<Vec<_>, StoreError>>()?;
        let mut out = Vec::with_capacity(rows.len());
        for (id, messages, runs, newest, at) in rows {
            let id = SessionId::new(id);
            let Some(row) = self.session(&id)? else { continue };
            let what = format!("sessions row {id}");
            out.push(SessionActivity {
                row,
                messages: uint(messages, &what)?,
                submissions: uint(runs, &what)?,
                newest_seq: newest.map(|n| uint(n, &what)).transpose()?.map(Seq),
                last_activity_ms: at.map(|n| uint(n, &what)).transpose()?,
            });
        }
        Ok(out)
    }

    /// The top-level session with the newest submission (what `--continue` continues).
    ///
    /// # Errors
    /// SQLite errors.
    pub fn latest_session(&self) -> Result<Option<SessionId>, StoreError> {
        let row = self.db().row(
            "SELECT r.session FROM runs r JOIN sessions s ON s.id = r.session \
             WHERE s.parent IS NULL ORDER BY r.seq DESC LIMIT 1",
            &[],
        )?;
        Ok(row.map(|r| r.text(0)).transpose()?.map(SessionId::new))
    }

    /// Every message of the session, in write order, with its calls and results.
    ///
    /// # Errors
    /// SQLite errors; [`StoreError::Corrupt`] for a row that does not parse.
    pub fn messages(&self, session: &SessionId) -> Result<Vec<StoredMessage>, StoreError> {
        let chosen = "SELECT id FROM messages WHERE session = ?1";
        let loaded = self.load_messages(chosen, &args![session.as_str()])?;
        Ok(loaded.into_iter().map(|m| m.message).collect())
    }

    /// The messages `chosen` selects (a `SELECT id FROM messages ...` with `params`), in write
    /// order, with their calls, results, sessions and revisions.
    pub(super) fn load_messages(
        &self,
        chosen: &str,
        params: &[Arg<'_>],
    ) -> Result<Vec<LoadedMessage>, StoreError> {
        let db = self.db();
        let mut messages = Vec::new();
        let mut index = HashMap::new();
        let sql = format!(
            "WITH chosen(id) AS ({chosen}) \
             SELECT m.id, m.seq, m.role, m.text, m.attachments, m.synthetic, m.reasoning, \
             m.reasoning_signature, m.reasoning_done, m.finish, m.session, m.rev \
             FROM messages m WHERE m.id IN (SELECT id FROM chosen) ORDER BY m.ord"
        );
        for r in db.rows(&sql, params)? {
            let id = r.int(0)?;
            let what = format!("messages row {id}");
            let role = r.text(2)?;
            let role = match role.as_str() {
                "user" => StoredRole::User,
                "assistant" => StoredRole::Assistant,
                "summary" => StoredRole::Summary,
                other => {
                    return Err(StoreError::Corrupt(format!("{what} role: unknown {other:?}")));
                }
            };
            let attachments = r.text(4)?;
            let finish = r.opt_text(9)?;
            index.insert(id, messages.len());
            let message = StoredMessage {
                id: MessageId(uint(id, &format!("{what} id"))?),
                seq: r.opt_int(1)?.map(|s| uint(s, &format!("{what} seq"))).transpose()?.map(Seq),
                role,
                text: r.text(3)?,
                attachments: parse_json(&attachments, &format!("{what} attachments"))?,
                synthetic: r.flag(5)?,
                reasoning: r.opt_text(6)?,
                reasoning_signature: r.opt_text(7)?,
                reasoning_done: r.flag(8)?,
                finish: finish.map(|f| parse_json(&f, &format!("{what} finish"))).transpose()?,
                calls: Vec::new(),
                results: Vec::new(),
            };
            messages.push(LoadedMessage {
                session: SessionId::new(r.text(10)?),
                revision: uint(r.int(11)?, &format!("{what} rev"))?,
                message,
            });
        }
        let sql = format!(
            "WITH chosen(id) AS ({chosen}) \
             SELECT c.message, c.call, c.name, c.input, c.finished, c.raw_input \
             FROM tool_calls c WHERE c.message IN (SELECT id FROM chosen) ORDER BY c.message, c.ord"
        );
        for r in db.rows(&sql, params)? {
            let call = StoredCall {
                call: CallId::new(r.text(1)?),
                name: r.text(2)?,
                input: r.opt_text(3)?,
                finished: r.flag(4)?,
                raw_input: r.opt_text(5)?,
            };
            if let Some(&i) = index.get(&r.int(0)?) {
                messages[i].message.calls.push(call);
            }
        }
        let sql = format!(
            "WITH chosen(id) AS ({chosen}) \
             SELECT r.message, r.call, r.content, r.is_error, r.synthetic \
             FROM tool_results r WHERE r.message IN (SELECT id FROM chosen) ORDER BY r.ord"
        );
        for r in db.rows(&sql, params)? {
            let result = StoredResult {
                call: CallId::new(r.text(1)?),
                content: r.text(2)?,
                is_error: r.flag(3)?,
                synthetic: r.flag(4)?,
            };
            if let Some(&i) = index.get(&r.int(0)?) {
                messages[i].message.results.push(result);
            }
        }
        Ok(messages)
    }

    /// The ledger row of a run.
    ///
    /// # Errors
    /// SQLite errors; [`StoreError::Corrupt`] for a row that does not parse.
    pub fn run(&self, run_id: &RunId) -> Result<Option<RunRow>, StoreError> {
        let sql = format!("SELECT {RUN_COLUMNS} FROM runs WHERE run_id = ?1");
        let row = self.db().row(&sql, &args![run_id.as_str()])?;
        row.map(|r| raw_run(&r)?.parse()).transpose()
    }

    /// Several hosts (SPEC 11): every command accepted for a session (cancels, `cancel_run`s,
    /// queue clears, summarize requests), in the order they were accepted.
    ///
    /// # Errors
    /// The database's errors; [`StoreError::Corrupt`] for a row that does not parse.
    pub fn commands(&self) -> Result<Vec<StoredCommand>, StoreError> {
        let rows = self.db().rows(
            "SELECT id, session, kind, up_to, run_id, applied FROM session_commands ORDER BY id",
            &[],
        )?;
        rows.iter()
            .map(|r| {
                let id = r.int(0)?;
                let what = format!("session_commands row {id}");
                Ok(StoredCommand {
                    id: uint(id, &what)?,
                    session: SessionId::new(r.text(1)?),
                    kind: r.text(2)?,
                    up_to: r.opt_int(3)?.map(|s| uint(s, &what).map(Seq)).transpose()?,
                    run_id: r.opt_text(4)?.map(RunId::new),
                    applied: r.flag(5)?,
                })
            })
            .collect()
    }

    /// Several hosts (SPEC 11): the host that holds the session's lease now, by the
    /// database's clock; `None` when no host does (never taken, released, or expired).
    ///
    /// # Errors
    /// The database's errors.
    pub fn owner(&self, session: &SessionId) -> Result<Option<String>, StoreError> {
        let held = super::lease::holder(self.db(), session.as_str())?;
        Ok(held.filter(|h| h.expires_in_ms > 0).and_then(|h| h.owner))
    }

    /// The ledger row of a sequence.
    ///
    /// # Errors
    /// SQLite errors; [`StoreError::Corrupt`] for a row that does not parse.
    pub fn run_by_seq(&self, seq: Seq) -> Result<Option<RunRow>, StoreError> {
        let sql = format!("SELECT {RUN_COLUMNS} FROM runs WHERE seq = ?1");
        let row = self.db().row(&sql, &args![int(seq.0, "sequence")?])?;
        row.map(|r| raw_run(&r)?.parse()).transpose()
    }

    /// Every ledger row, in sequence order.
    ///
    /// # Errors
    /// SQLite errors; [`StoreError::Corrupt`] for a row that does not parse.
    pub fn runs(&self) -> Result<Vec<RunRow>, StoreError> {
        let sql = format!("SELECT {RUN_COLUMNS} FROM runs ORDER BY seq");
        self.db().rows(&sql, &[])?.iter().map(|r| raw_run(r)?.parse()).collect()
    }

    /// Up to `limit` completions recorded after `after`, in cursor order: how a subscriber
    /// resumes the completion stream (SPEC 9).
    ///
    /// # Errors
    /// SQLite errors; [`StoreError::Corrupt`] for a row that does not parse.
    pub fn completions_after(
        &self,
        after: Cursor,
        limit: usize,
    ) -> Result<Vec<(Cursor, CompletionRecord)>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self.db().rows(
            "SELECT cursor, completion FROM runs WHERE cursor > ?1 ORDER BY cursor LIMIT ?2",
            &args![int(after.0, "cursor")?, limit],
        )?;
        rows.iter()
            .map(|r| {
                let (cursor, json) = (r.int(0)?, r.text(1)?);
                let what = format!("runs row with cursor {cursor}");
                let record = parse_json(&json, &format!("{what} completion"))?;
                Ok((Cursor(uint(cursor, &what)?), record))
            })
            .collect()
    }

    /// The newest cursor recorded; `Cursor(0)` when none.
    ///
    /// # Errors
    /// SQLite errors.
    pub fn newest_cursor(&self) -> Result<Cursor, StoreError> {
        newest_cursor(self.db())
    }

    /// `PRAGMA integrity_check` and `PRAGMA foreign_key_check`: `Ok` when both are clean.
    ///
    /// # Errors
    /// [`IntegrityError::Damaged`] with every problem the checks report, or
    /// [`IntegrityError::Check`] when they could not run.
    pub fn integrity_check(&self) -> Result<(), IntegrityError> {
        let problems = self.integrity_problems().map_err(IntegrityError::Check)?;
        if problems.is_empty() { Ok(()) } else { Err(IntegrityError::Damaged(problems)) }
    }

    fn integrity_problems(&self) -> Result<Vec<IntegrityProblem>, StoreError> {
        match &self.conn {
            Conn::Sqlite(conn) => sqlite_integrity_problems(conn),
            // PostgreSQL checks its pages and enforces the references itself; what is left to
            // check is that every reference names a row (a constraint dropped by hand, or
            // rows restored without them).
            #[cfg(not(madsim))]
            Conn::Postgres(conn) => conn.reference_problems(),
        }
    }

    /// The ways the session's history is not protocol-legal (SPEC 4.9), one human-readable
    /// line each, naming the message and call; empty when it is legal. Checks: every tool call
    /// finished with exactly one result, no result without a call, every assistant message
    /// finished, and no summary left unfinished (meaningful for a store nobody is writing to).
    ///
    /// # Errors
    /// SQLite errors; [`StoreError::Corrupt`] for a row that does not parse.
    pub fn protocol_problems(&self, session: &SessionId) -> Result<Vec<String>, StoreError> {
        let mut problems = Vec::new();
        for m in self.messages(session)? {
            let id = m.id;
            match (m.role, &m.finish) {
                (StoredRole::Assistant, None) => {
                    problems.push(format!("message {id}: assistant message has no finish"));
                }
                (StoredRole::Summary, None) => {
                    problems.push(format!("message {id}: summary message is unfinished"));
                }
                _ => {}
            }
            for c in &m.calls {
                let call = &c.call;
                if !c.finished {
                    problems.push(format!("message {id}: tool call {call} is unfinished"));
                }
                match m.results.iter().filter(|r| r.call == *call).count() {
                    1 => {}
                    0 => problems.push(format!("message {id}: tool call {call} has no result")),
                    n => problems.push(format!("message {id}: tool call {call} has {n} results")),
                }
            }
            for r in &m.results {
                if !m.calls.iter().any(|c| c.call == r.call) {
                    problems
                        .push(format!("message {id}: result for call {} has no tool call", r.call));
                }
            }
        }
        Ok(problems)
    }
}

/// `PRAGMA integrity_check` and `PRAGMA foreign_key_check`.
fn sqlite_integrity_problems(
    conn: &rusqlite::Connection,
) -> Result<Vec<IntegrityProblem>, StoreError> {
    let mut problems = Vec::new();
    let mut stmt = conn.prepare("PRAGMA integrity_check")?;
    for line in stmt.query_map([], |r| r.get::<_, String>(0))? {
        let line = line?;
        if line != "ok" {
            problems.push(IntegrityProblem::Damage(line));
        }
    }
    let mut stmt = conn.prepare("PRAGMA foreign_key_check")?;
    let rows = stmt.query_map([], |r| {
        Ok(IntegrityProblem::ForeignKey { table: r.get(0)?, rowid: r.get(1)?, parent: r.get(2)? })
    })?;
    for p in rows {
        problems.push(p?);
    }
    Ok(problems)
}

/// The newest cursor recorded; `Cursor(0)` when none.
pub(super) fn newest_cursor(db: &dyn Db) -> Result<Cursor, StoreError> {
    let max = db.scalar("SELECT max(cursor) FROM runs", &[])?;
    Ok(Cursor(max.map(|c| uint(c, "runs cursor")).transpose()?.unwrap_or(0)))
}

/// The newest revision committed (0 for a store that never committed one).
pub(super) fn revision(db: &dyn Db) -> Result<u64, StoreError> {
    let value = db.scalar("SELECT value FROM counters WHERE name = 'revision'", &[])?;
    uint(value.unwrap_or(0), "revision")
}

/// A message as [`Reader::load_messages`] reads it: with its session and revision.
pub(super) struct LoadedMessage {
    pub(super) session: SessionId,
    pub(super) revision: u64,
    pub(super) message: StoredMessage,
}

/// What the engine starts from: sequences and message ids above every one the store ever
/// held, and every run with a RunId and its outcome (recovery has run, so all are finished).
pub(super) fn start(db: &dyn Db) -> Result<Start, StoreError> {
    let max_seq = db.scalar("SELECT max(seq) FROM runs", &[])?;
    let next_seq = max_seq.map(|s| uint(s, "runs seq")).transpose()?.map(|s| Seq(s + 1));
    let high = super::recovery::message_high(db)?;
    let next_message = high.map(|h| uint(h, "message id")).transpose()?.map(|h| MessageId(h + 1));
    let rows = db.rows(
        "SELECT run_id, session, seq, fingerprint, outcome FROM runs \
         WHERE run_id IS NOT NULL ORDER BY seq",
        &[],
    )?;
    let mut runs = Vec::with_capacity(rows.len());
    for r in rows {
        let (run_id, session, seq) = (r.text(0)?, r.text(1)?, r.int(2)?);
        let (fingerprint, outcome) = (r.opt_text(3)?, r.opt_text(4)?);
        let what = format!("runs row {seq}");
        let fingerprint = fingerprint
            .ok_or_else(|| StoreError::Corrupt(format!("{what} fingerprint: missing")))?;
        let outcome = outcome.ok_or_else(|| {
            StoreError::Corrupt(format!("{what} outcome: unfinished after recovery"))
        })?;
        runs.push(KnownRun {
            run_id: RunId::new(run_id),
            session: SessionId::new(session),
            seq: Seq(uint(seq, &what)?),
            fingerprint: Fingerprint::from_hex(&fingerprint)
                .map_err(|e| StoreError::Corrupt(format!("{what} fingerprint: {e}")))?,
            outcome: parse_outcome(&outcome, &format!("{what} outcome"))?,
        });
    }
    Ok(Start { next_seq, next_message, runs })
}

/// A command accepted for a session, as stored (several hosts, SPEC 11).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredCommand {
    /// Its id: the order commands were accepted in.
    pub id: u64,
    /// The session.
    pub session: SessionId,
    /// `cancel`, `cancel_run`, `clear_queue` or `summarize`.
    pub kind: String,
    /// The session's newest sequence when it was accepted (the watermark), if it had one.
    pub up_to: Option<Seq>,
    /// The run a `cancel_run` names.
    pub run_id: Option<RunId>,
    /// Whether the session's owner applied it.
    pub applied: bool,
}

/// A session row as stored.
pub(super) struct RawSession {
    pub(super) id: String,
    parent: Option<String>,
    title: Option<String>,
    prompt_tokens: i64,
    completion_tokens: i64,
    cost_micros: i64,
    summary_message: Option<i64>,
}

pub(super) fn raw_session(r: &Row) -> Result<RawSession, StoreError> {
    Ok(RawSession {
        id: r.text(0)?,
        parent: r.opt_text(1)?,
        title: r.opt_text(2)?,
        prompt_tokens: r.int(3)?,
        completion_tokens: r.int(4)?,
        cost_micros: r.int(5)?,
        summary_message: r.opt_int(6)?,
    })
}

impl RawSession {
    pub(super) fn parse(self) -> Result<SessionRow, StoreError> {
        let what = |field: &str| format!("sessions row {} {field}", self.id);
        Ok(SessionRow {
            parent: self.parent.map(SessionId::new),
            title: self.title,
            prompt_tokens: uint(self.prompt_tokens, &what("prompt_tokens"))?,
            completion_tokens: uint(self.completion_tokens, &what("completion_tokens"))?,
            cost_micros: uint(self.cost_micros, &what("cost_micros"))?,
            summary_message: self
                .summary_message
                .map(|m| uint(m, &what("summary_message")))
                .transpose()?
                .map(MessageId),
            id: SessionId::new(self.id),
        })
    }
}

/// A ledger row as stored.
struct RawRun {
    seq: i64,
    session: String,
    run_id: Option<String>,
    mode: String,
    prompt: String,
    attachments: String,
    state: String,
    completion: Option<String>,
    cursor: Option<i64>,
}

fn raw_run(r: &Row) -> Result<RawRun, StoreError> {
    Ok(RawRun {
        seq: r.int(0)?,
        session: r.text(1)?,
        run_id: r.opt_text(2)?,
        mode: r.text(3)?,
        prompt: r.text(4)?,
        attachments: r.text(5)?,
        state: r.text(6)?,
        completion: r.opt_text(7)?,
        cursor: r.opt_int(8)?,
    })
}

impl RawRun {
    fn parse(self) -> Result<RunRow, StoreError> {
        let seq = self.seq;
        let what = |field: &str| format!("runs row {seq} {field}");
        let state = match self.state.as_str() {
            "waiting" => RunState::Waiting,
            "active" => RunState::Active,
            "paused" => RunState::Paused,
            "finished" => RunState::Finished,
            other => {
                return Err(StoreError::Corrupt(format!("{}: unknown {other:?}", what("state"))));
            }
        };
        let completion = match (self.cursor, &self.completion) {
            (Some(cursor), Some(json)) => Some((
                Cursor(uint(cursor, &what("cursor"))?),
                parse_json(json, &what("completion"))?,
            )),
            (None, None) => None,
            _ => {
                return Err(StoreError::Corrupt(format!(
                    "{}: cursor and completion must be set together",
                    what("completion")
                )));
            }
        };
        Ok(RunRow {
            seq: Seq(uint(self.seq, &what("seq"))?),
            session: SessionId::new(&self.session),
            run_id: self.run_id.as_deref().map(RunId::new),
            mode: parse_mode(&self.mode, &what("mode"))?,
            prompt: self.prompt,
            attachments: parse_json(&self.attachments, &what("attachments"))?,
            state,
            completion,
        })
    }
}
