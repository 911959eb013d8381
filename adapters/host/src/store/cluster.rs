//! Several hosts over one store (SPEC 11): what a member host writes and reads besides its
//! owned sessions' writes, each in a transaction of its own on the member's coordination
//! connection ([`Coordinator`]).
//!
//! - **Accept anywhere.** [`Coordinator::accept`] writes a submission's ledger row (state
//!   `waiting`, its sequence the ledger's next, `accepted_by` this host) or finds the run its
//!   RunId names; [`Coordinator::command`] writes a cancel, `cancel_run`, queue clear or
//!   summarize request as a `session_commands` row whose `up_to` is the session's newest
//!   sequence when it committed: SPEC 4.10's watermark.
//! - **Order without gaps.** Every writing transaction of every host first advances the change
//!   order's one counter row (`schema::bump_revision`), so PostgreSQL runs them one at a time
//!   from that update to their commit: sequences, command ids and cursors are handed out in
//!   commit order, and a reader that has seen sequence `n` has seen every sequence below it.
//! - **Take.** [`Coordinator::take`] takes a session's lease (the statement of `lease.rs`),
//!   reserves a block of message ids for the new owner's core, and runs recovery for that
//!   session alone (`recovery::recover_session`): all in one transaction, which returns what
//!   the new owner feeds its core: the waiting submissions and the commands not yet applied.
//! - **Hints.** A transaction that others must hear about ends with one `NOTIFY` (PostgreSQL);
//!   every host also polls ([`Coordinator::poll`]), so a lost notification only delays.

use turnstile_core::{Fingerprint, MessageId, Mode, Outcome, RunId, Seq, SessionId, Submit};

use super::audit::Audit;
use super::config::StoreConfig;
use super::conn::Conn;
use super::error::StoreError;
use super::lease::{self, Epoch};
use super::schema::{int, mode_text, to_json, uint};
use super::sql::{Arg, Db, args};
use super::txn::NewRun;
use crate::mutants::Armed;
use crate::record::{CompletionRecord, Cursor};

/// The channel of the hosts' notifications.
pub(crate) const CHANNEL: &str = "turnstile";

/// A take's block of message ids: `2^32` ids, from `block << 32`. An owner's core that
/// handed out all of them (four billion messages in one session under one lease) would reach
/// the next take's ids: no agent comes near it.
const BLOCK_BITS: u32 = 32;

/// What accepting a submission found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Accepted {
    /// A new ledger row with this sequence.
    New(Seq),
    /// The RunId names a run already accepted with the same content (SPEC 4.1): its session,
    /// sequence and outcome, if it has one.
    Existing { session: SessionId, seq: Seq, outcome: Option<Outcome> },
    /// The RunId names a run with other content.
    Conflict,
}

/// A command accepted for a session (SPEC 4.10, applied by the owner's core).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum CommandKind {
    /// Cancel the session's submissions at or below the watermark.
    Cancel,
    /// Cancel one run.
    CancelRun(RunId),
    /// End the waiting submissions.
    ClearQueue,
    /// Summarize the session now.
    Summarize,
}

/// A command row the owner has not applied yet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CommandRow {
    /// Its id: the order commands were accepted in.
    pub(crate) id: u64,
    /// The session.
    pub(crate) session: SessionId,
    /// What it asks.
    pub(crate) kind: CommandKind,
    /// The session's newest sequence when it committed (`None`: it had none).
    pub(crate) up_to: Option<Seq>,
}

impl NewRun {
    /// The submission the owner's core is fed (an external acceptor's: it brings its
    /// sequence).
    pub(crate) fn submit(&self) -> Submit {
        Submit {
            session: self.session.clone(),
            prompt: self.prompt.clone(),
            attachments: self.attachments.clone(),
            run_id: self.run_id.clone(),
            mode: Some(self.mode),
            seq: Some(self.seq),
        }
    }
}

/// What a take did, for the new owner.
#[derive(Debug)]
pub(crate) struct Taken {
    /// The lease's new epoch.
    pub(crate) epoch: Epoch,
    /// The first message id the new owner's core hands out (recovery used those below it).
    pub(crate) next_message: MessageId,
    /// What recovery of the session ended `interrupted`, in cursor order.
    pub(crate) recovered: Vec<(Cursor, CompletionRecord)>,
    /// The session's waiting submissions, in sequence order.
    pub(crate) waiting: Vec<NewRun>,
    /// Its commands not yet applied, in id order.
    pub(crate) commands: Vec<CommandRow>,
}

/// What changed in the store since a poll's positions.
#[derive(Debug, Default)]
pub(crate) struct Polled {
    /// Waiting submissions above the sequence polled from, in sequence order.
    pub(crate) waiting: Vec<NewRun>,
    /// The newest sequence in the ledger.
    pub(crate) newest_seq: u64,
    /// Commands above the id polled from, not yet applied, in id order.
    pub(crate) commands: Vec<CommandRow>,
    /// The newest command id.
    pub(crate) newest_command: u64,
    /// Completions above the cursor polled from, in cursor order.
    pub(crate) completions: Vec<(Cursor, CompletionRecord)>,
    /// The store's newest revision.
    pub(crate) revision: u64,
}

/// The database's clock in milliseconds (as in `lease.rs`).
const NOW_MS: &str = "CAST(unixepoch('subsec') * 1000 AS INTEGER)";

/// A member host's connection for everything that is not an owned session's write: accepts,
/// commands, takes, renewals, releases and polls, each in a transaction of its own.
#[derive(Debug)]
pub(crate) struct Coordinator {
    conn: Conn,
    host: String,
    armed: Armed,
    audit: Option<Audit>,
    faults: Option<super::faults::Faults>,
}

impl Coordinator {
    /// A coordinator for `host` over `conn` (migrated).
    pub(crate) fn new(conn: Conn, host: String, config: &StoreConfig) -> Coordinator {
        Coordinator {
            conn,
            host,
            armed: config.armed(),
            audit: config.audit.clone(),
            faults: config.faults.clone(),
        }
    }

    /// A partition between this host and the store (injected, tests and the simulator): every
    /// call fails while a fault is always on.
    fn reachable(&self) -> Result<(), StoreError> {
        match self.faults.as_ref().and_then(super::faults::Faults::always) {
            Some(fault) => Err(fault.error()),
            None => Ok(()),
        }
    }

    /// A new coordination connection for `host` to the (migrated) store of `config` (see
    /// [`super::open::Store::open_member`] for `idle`).
    ///
    /// # Errors
    /// The store cannot be reached or opened.
    pub(crate) fn open(
        config: &StoreConfig,
        host: &str,
        idle: std::time::Duration,
    ) -> Result<Coordinator, StoreError> {
        let conn = match &config.location {
            #[cfg(not(madsim))]
            super::location::Location::Postgres(url) => {
                Conn::Postgres(Box::new(super::postgres::PgConn::connect_member(url, idle)?))
            }
            #[cfg(madsim)]
            super::location::Location::Postgres(url) => {
                let _ = idle;
                return Err(StoreError::Corrupt(format!(
                    "{url}: the simulator's build has no PostgreSQL store"
                )));
            }
            super::location::Location::File(_) | super::location::Location::Memory(_) => {
                Conn::Sqlite(member_sqlite(config)?)
            }
        };
        Ok(Coordinator::new(conn, host.to_owned(), config))
    }

    fn db(&self) -> &dyn Db {
        self.conn.db()
    }

    /// Runs `f` in a writing transaction that first advances the change order; notifies the
    /// other hosts after the commit when `f` says so.
    fn write<T>(
        &self,
        f: impl FnOnce(&dyn Db) -> Result<(T, bool), StoreError>,
    ) -> Result<T, StoreError> {
        self.reachable()?;
        let db = self.db();
        db.begin_write()?;
        let result = super::schema::bump_revision(db).and_then(|revision| {
            let (t, notify) = f(db)?;
            if notify {
                db.notify(CHANNEL, &revision.to_string())?;
            }
            db.commit()?;
            Ok(t)
        });
        if result.is_err() {
            db.rollback();
        }
        result
    }

    /// Accepts a submission (already validated, `mode` its effective mode): a new waiting
    /// ledger row, or the existing run its RunId names (SPEC 4.1).
    ///
    /// # Errors
    /// The database's errors.
    pub(crate) fn accept(&self, submit: &Submit, mode: Mode) -> Result<Accepted, StoreError> {
        self.write(|db| {
            if let Some(run_id) = &submit.run_id {
                let found = db.row(
                    "SELECT session, seq, fingerprint, outcome FROM runs WHERE run_id = ?1",
                    &[Arg::from(run_id.as_str())],
                )?;
                if let Some(r) = found {
                    let (session, seq) = (r.text(0)?, r.int(1)?);
                    let what = format!("runs row {seq}");
                    let mine = Fingerprint::of(submit).to_hex();
                    if r.opt_text(2)?.as_deref() != Some(mine.as_str()) {
                        return Ok((Accepted::Conflict, false));
                    }
                    let outcome = r
                        .opt_text(3)?
                        .map(|o| super::schema::parse_outcome(&o, &format!("{what} outcome")))
                        .transpose()?;
                    let seq = Seq(uint(seq, &what)?);
                    return Ok((
                        Accepted::Existing { session: SessionId::new(session), seq, outcome },
                        false,
                    ));
                }
            }
            let newest = db.scalar("SELECT max(seq) FROM runs", &[])?.unwrap_or(0);
            let seq = Seq(uint(newest, "runs seq")? + 1);
            db.execute(
                "INSERT INTO sessions (id, created) \
                 VALUES (?1, (SELECT coalesce(max(created), 0) + 1 FROM sessions)) \
                 ON CONFLICT (id) DO NOTHING",
                &[Arg::from(submit.session.as_str())],
            )?;
            let fingerprint = submit.run_id.as_ref().map(|_| Fingerprint::of(submit).to_hex());
            let attachments = if submit.attachments.is_empty() {
                "[]".to_owned()
            } else {
                to_json(&submit.attachments, "attachments")?
            };
            db.execute(
                &format!(
                    "INSERT INTO runs (seq, session, run_id, mode, prompt, attachments, \
                     fingerprint, state, accepted_at, accepted_by) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'waiting', {NOW_MS}, ?8)"
                ),
                &args![
                    int(seq.0, "sequence")?,
                    submit.session.as_str(),
                    submit.run_id.as_ref().map(RunId::as_str),
                    mode_text(mode),
                    submit.prompt.as_str(),
                    attachments,
                    fingerprint,
                    self.host.as_str(),
                ],
            )?;
            Ok((Accepted::New(seq), true))
        })
    }

    /// Writes a command for `session` (for `cancel_run`, the run's session, looked up here:
    /// an unknown or finished run writes nothing). Returns whether a row was written.
    ///
    /// # Errors
    /// The database's errors.
    pub(crate) fn command(
        &self,
        session: Option<&SessionId>,
        kind: &CommandKind,
    ) -> Result<bool, StoreError> {
        self.write(|db| {
            let session = match (kind, session) {
                (CommandKind::CancelRun(run_id), _) => {
                    let found = db.row(
                        "SELECT session FROM runs WHERE run_id = ?1 AND state <> 'finished'",
                        &[Arg::from(run_id.as_str())],
                    )?;
                    match found {
                        Some(r) => r.text(0)?,
                        None => return Ok((false, false)),
                    }
                }
                (_, Some(s)) => s.as_str().to_owned(),
                (_, None) => return Ok((false, false)),
            };
            let (name, run_id) = match kind {
                CommandKind::Cancel => ("cancel", None),
                CommandKind::CancelRun(r) => ("cancel_run", Some(r.as_str())),
                CommandKind::ClearQueue => ("clear_queue", None),
                CommandKind::Summarize => ("summarize", None),
            };
            db.execute(
                "INSERT INTO session_commands (session, kind, up_to, run_id) \
                 VALUES (?1, ?2, (SELECT max(seq) FROM runs WHERE session = ?1), ?3)",
                &args![session.as_str(), name, run_id],
            )?;
            Ok((true, true))
        })
    }

    /// Takes `session`'s lease for `lease_ms` if it is free or expired, and prepares the new
    /// owner (see the module docs); `None` when another host holds it (nothing is written).
    ///
    /// # Errors
    /// The database's errors; [`StoreError::Corrupt`] for rows that do not parse.
    pub(crate) fn take(
        &self,
        session: &SessionId,
        lease_ms: u64,
    ) -> Result<Option<Taken>, StoreError> {
        self.reachable()?;
        let db = self.db();
        db.begin_write()?;
        let result = self.take_in(db, session, lease_ms);
        match result {
            Ok(Some(taken)) => {
                db.commit().inspect_err(|_| db.rollback())?;
                Ok(Some(taken))
            }
            Ok(None) => {
                db.rollback();
                Ok(None)
            }
            Err(e) => {
                db.rollback();
                Err(e)
            }
        }
    }

    fn take_in(
        &self,
        db: &dyn Db,
        session: &SessionId,
        lease_ms: u64,
    ) -> Result<Option<Taken>, StoreError> {
        let revision = super::schema::bump_revision(db)?;
        let taken = if self.armed.is(crate::mutants::HostMutant::MemberStaleTake) {
            // The bug: decided from the earlier look for unowned sessions, not from the row.
            lease::take_without_looking(db, session.as_str(), &self.host, lease_ms)?
        } else {
            lease::take(db, session.as_str(), &self.host, lease_ms)?
        };
        let Some(epoch) = taken else {
            return Ok(None);
        };
        let block = db
            .scalar(
                "UPDATE counters SET value = coalesce(value, \
                 (SELECT coalesce(value, 0) FROM counters WHERE name = 'message_high') / 4294967296) + 1 \
                 WHERE name = 'message_block' RETURNING value",
                &[],
            )?
            .ok_or_else(|| StoreError::Corrupt("the message_block counter is missing".into()))?;
        let block = uint(block, "the message_block counter")?;
        let first = block.checked_shl(BLOCK_BITS).filter(|f| f >> BLOCK_BITS == block).ok_or_else(
            || StoreError::Corrupt(format!("the message_block counter {block} is exhausted")),
        )?;
        let mut next = first;
        let mut next_id = || {
            let id = i64::try_from(next).unwrap_or(i64::MAX);
            next += 1;
            id
        };
        let cursor = super::read::newest_cursor(db)?.0;
        let (_, recovered) = super::recovery::recover_session(
            db,
            session.as_str(),
            cursor,
            &mut next_id,
            self.armed,
        )?;
        let waiting = if self.armed.is(crate::mutants::HostMutant::MemberTakeDropsWaiting) {
            // The bug: the waiting submissions are not handed over.
            Vec::new()
        } else {
            waiting_runs(db, Some(session), 0)?
        };
        let commands = pending_commands(db, Some(session), 0)?;
        if !recovered.is_empty() {
            db.notify(CHANNEL, &revision.to_string())?;
        }
        if let Some(audit) = &self.audit {
            audit.took(session, epoch, revision);
        }
        Ok(Some(Taken { epoch, next_message: MessageId(next), recovered, waiting, commands }))
    }

    /// Renews `session`'s lease at `epoch` for `lease_ms`; whether it was still ours.
    ///
    /// # Errors
    /// The database's errors.
    pub(crate) fn renew(
        &self,
        session: &SessionId,
        epoch: Epoch,
        lease_ms: u64,
    ) -> Result<bool, StoreError> {
        self.reachable()?;
        lease::renew(self.db(), session.as_str(), &self.host, epoch, lease_ms)
    }

    /// Releases `session`'s lease at `epoch`; whether it was still ours.
    ///
    /// # Errors
    /// The database's errors.
    pub(crate) fn release(&self, session: &SessionId, epoch: Epoch) -> Result<bool, StoreError> {
        self.reachable()?;
        lease::release(self.db(), session.as_str(), &self.host, epoch)
    }

    /// Sessions with work (an unfinished submission or a command not yet applied) whose lease
    /// is free or expired, oldest work first, at most `limit`. A free session whose work
    /// another host accepted less than `prefer_ms` ago is left to that host (placement
    /// prefers the acceptor); an expired lease is anyone's.
    ///
    /// # Errors
    /// The database's errors.
    pub(crate) fn unowned(
        &self,
        limit: usize,
        prefer_ms: u64,
    ) -> Result<Vec<SessionId>, StoreError> {
        self.reachable()?;
        let sql = format!(
            "SELECT session FROM ( \
                 SELECT r.session AS session, min(r.seq) AS first FROM runs r \
                 LEFT JOIN session_leases l ON l.session = r.session \
                 WHERE r.state <> 'finished' \
                 AND (l.session IS NULL OR l.owner IS NULL OR l.expires_ms <= {NOW_MS}) \
                 AND (l.owner IS NOT NULL OR r.accepted_by IS NULL OR r.accepted_by = ?1 \
                      OR r.accepted_at <= {NOW_MS} - ?2) \
                 GROUP BY r.session \
                 UNION ALL \
                 SELECT c.session AS session, 0 AS first FROM session_commands c \
                 LEFT JOIN session_leases l ON l.session = c.session \
                 WHERE c.applied = 0 \
                 AND (l.session IS NULL OR l.owner IS NULL OR l.expires_ms <= {NOW_MS}) \
             ) AS work GROUP BY session ORDER BY min(first), session LIMIT ?3"
        );
        let rows = self.db().rows(
            &sql,
            &args![
                self.host.as_str(),
                int(prefer_ms, "a preference in milliseconds")?,
                int(limit as u64, "a limit")?
            ],
        )?;
        rows.iter().map(|r| Ok(SessionId::new(r.text(0)?))).collect()
    }

    /// What changed since the positions given (one snapshot).
    ///
    /// # Errors
    /// The database's errors; [`StoreError::Corrupt`] for rows that do not parse.
    pub(crate) fn poll(
        &self,
        after_seq: u64,
        after_command: u64,
        after_cursor: Cursor,
    ) -> Result<Polled, StoreError> {
        self.reachable()?;
        let db = self.db();
        super::sql::in_snapshot(db, || {
            let newest_seq = db.scalar("SELECT max(seq) FROM runs", &[])?.unwrap_or(0);
            let newest_command =
                db.scalar("SELECT max(id) FROM session_commands", &[])?.unwrap_or(0);
            Ok(Polled {
                waiting: waiting_runs(db, None, after_seq)?,
                newest_seq: uint(newest_seq, "runs seq")?,
                commands: pending_commands(db, None, after_command)?,
                newest_command: uint(newest_command, "session_commands id")?,
                completions: completions_after(db, after_cursor)?,
                revision: super::read::revision(db)?,
            })
        })
    }

    /// Whether `session` has an unfinished submission (SPEC 3's busy, as the ledger says it
    /// on a host that does not own the session).
    ///
    /// # Errors
    /// The database's errors.
    pub(crate) fn has_work(&self, session: &SessionId) -> Result<bool, StoreError> {
        Ok(self
            .db()
            .row(
                "SELECT 1 FROM runs WHERE session = ?1 AND state <> 'finished' LIMIT 1",
                &[Arg::from(session.as_str())],
            )?
            .is_some())
    }
}

/// Waiting submissions above `after` (of one session, or all), in sequence order.
fn waiting_runs(
    db: &dyn Db,
    session: Option<&SessionId>,
    after: u64,
) -> Result<Vec<NewRun>, StoreError> {
    const COLUMNS: &str = "session, seq, run_id, mode, prompt, attachments";
    let rows = match session {
        Some(s) => db.rows(
            &format!(
                "SELECT {COLUMNS} FROM runs WHERE session = ?1 AND state = 'waiting' AND seq > ?2 \
                 ORDER BY seq"
            ),
            &args![s.as_str(), int(after, "sequence")?],
        )?,
        None => db.rows(
            &format!(
                "SELECT {COLUMNS} FROM runs WHERE state = 'waiting' AND seq > ?1 ORDER BY seq"
            ),
            &args![int(after, "sequence")?],
        )?,
    };
    rows.iter()
        .map(|r| {
            let seq = r.int(1)?;
            let what = format!("runs row {seq}");
            Ok(NewRun {
                session: SessionId::new(r.text(0)?),
                seq: Seq(uint(seq, &what)?),
                run_id: r.opt_text(2)?.map(RunId::new),
                mode: super::schema::parse_mode(&r.text(3)?, &format!("{what} mode"))?,
                prompt: r.text(4)?,
                attachments: super::schema::parse_json(
                    &r.text(5)?,
                    &format!("{what} attachments"),
                )?,
                // Fed to the owner's core, never written again.
                fingerprint: None,
            })
        })
        .collect()
}

/// Commands not yet applied above `after` (of one session, or all), in id order.
fn pending_commands(
    db: &dyn Db,
    session: Option<&SessionId>,
    after: u64,
) -> Result<Vec<CommandRow>, StoreError> {
    const COLUMNS: &str = "id, session, kind, up_to, run_id";
    let rows = match session {
        Some(s) => db.rows(
            &format!(
                "SELECT {COLUMNS} FROM session_commands WHERE session = ?1 AND applied = 0 \
                 AND id > ?2 ORDER BY id"
            ),
            &args![s.as_str(), int(after, "command id")?],
        )?,
        None => db.rows(
            &format!(
                "SELECT {COLUMNS} FROM session_commands WHERE applied = 0 AND id > ?1 ORDER BY id"
            ),
            &args![int(after, "command id")?],
        )?,
    };
    rows.iter()
        .map(|r| {
            let id = r.int(0)?;
            let what = format!("session_commands row {id}");
            let kind = match (r.text(2)?.as_str(), r.opt_text(4)?) {
                ("cancel", None) => CommandKind::Cancel,
                ("cancel_run", Some(run_id)) => CommandKind::CancelRun(RunId::new(run_id)),
                ("clear_queue", None) => CommandKind::ClearQueue,
                ("summarize", None) => CommandKind::Summarize,
                (other, _) => {
                    return Err(StoreError::Corrupt(format!(
                        "{what} kind: `{other}` is not a command"
                    )));
                }
            };
            let up_to = r.opt_int(3)?.map(|s| uint(s, &format!("{what} up_to"))).transpose()?;
            Ok(CommandRow {
                id: uint(id, &what)?,
                session: SessionId::new(r.text(1)?),
                kind,
                up_to: up_to.map(Seq),
            })
        })
        .collect()
}

/// Every completion above `after`, in cursor order.
fn completions_after(
    db: &dyn Db,
    after: Cursor,
) -> Result<Vec<(Cursor, CompletionRecord)>, StoreError> {
    let rows = db.rows(
        "SELECT cursor, completion FROM runs WHERE cursor > ?1 ORDER BY cursor",
        &args![int(after.0, "cursor")?],
    )?;
    rows.iter()
        .map(|r| {
            let (cursor, json) = (r.int(0)?, r.text(1)?);
            let what = format!("runs row with cursor {cursor}");
            let record = super::schema::parse_json(&json, &format!("{what} completion"))?;
            Ok((Cursor(uint(cursor, &what)?), record))
        })
        .collect()
}

/// Where a shared permission ask stands (several hosts, SPEC 11).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AskState {
    /// Waiting for an answer.
    Pending,
    /// A client answered it (on any host).
    Answered,
    /// Its call was aborted before an answer.
    Withdrawn,
}

impl AskState {
    fn text(self) -> &'static str {
        match self {
            AskState::Pending => "pending",
            AskState::Answered => "answered",
            AskState::Withdrawn => "withdrawn",
        }
    }

    fn parse(text: &str, what: &str) -> Result<AskState, StoreError> {
        match text {
            "pending" => Ok(AskState::Pending),
            "answered" => Ok(AskState::Answered),
            "withdrawn" => Ok(AskState::Withdrawn),
            other => Err(StoreError::Corrupt(format!("{what}: `{other}` is not an ask's state"))),
        }
    }
}

/// A shared permission ask as the store holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AskRow {
    /// Its id.
    pub id: String,
    /// The calling session.
    pub session: SessionId,
    /// The ask as its host described it (JSON, the server's `PendingAsk`).
    pub body: String,
    /// Where it stands.
    pub state: AskState,
    /// The answer (JSON), once answered.
    pub answer: Option<String>,
    /// The revision of its last change: read the asks after one to see what changed.
    pub rev: u64,
}

/// What closing a shared ask found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AskClosing {
    /// It was pending, and this closed it: the one decision about it.
    Closed,
    /// It was closed already (answered or withdrawn, by whichever host was first).
    Already(AskState),
    /// No ask has this id.
    Unknown,
}

impl Coordinator {
    /// Shares a pending ask of this host's call.
    ///
    /// # Errors
    /// The database's errors (an id used twice among them).
    pub(crate) fn open_ask(
        &self,
        id: &str,
        session: &SessionId,
        body: &str,
    ) -> Result<(), StoreError> {
        self.write(|db| {
            db.execute(
                "INSERT INTO asks (id, session, body, state, rev) VALUES (?1, ?2, ?3, 'pending', \
                 (SELECT value FROM counters WHERE name = 'revision'))",
                &args![id, session.as_str(), body],
            )?;
            Ok(((), true))
        })
    }

    /// Closes a pending ask: answered with `answer` (JSON), or withdrawn when `None`. The
    /// first host to close it decides; later ones hear how it closed.
    ///
    /// # Errors
    /// The database's errors.
    pub(crate) fn close_ask(
        &self,
        id: &str,
        answer: Option<&str>,
    ) -> Result<AskClosing, StoreError> {
        self.write(|db| {
            let state = if answer.is_some() { AskState::Answered } else { AskState::Withdrawn };
            let changed = db.execute(
                "UPDATE asks SET state = ?2, answer = ?3, \
                 rev = (SELECT value FROM counters WHERE name = 'revision') \
                 WHERE id = ?1 AND state = 'pending'",
                &args![id, state.text(), answer],
            )?;
            if changed == 1 {
                return Ok((AskClosing::Closed, true));
            }
            let found = db.row("SELECT state FROM asks WHERE id = ?1", &args![id])?;
            let closing = match found {
                Some(r) => {
                    AskClosing::Already(AskState::parse(&r.text(0)?, &format!("asks row {id}"))?)
                }
                None => AskClosing::Unknown,
            };
            Ok((closing, false))
        })
    }

    /// The asks changed after revision `after`, in the order they changed.
    ///
    /// # Errors
    /// The database's errors; [`StoreError::Corrupt`] for a row that does not parse.
    pub(crate) fn asks_after(&self, after: u64) -> Result<Vec<AskRow>, StoreError> {
        self.reachable()?;
        let rows = self.db().rows(
            "SELECT id, session, body, state, answer, rev FROM asks WHERE rev > ?1 ORDER BY rev, id",
            &args![int(after, "revision")?],
        )?;
        rows.iter()
            .map(|r| {
                let id = r.text(0)?;
                let what = format!("asks row {id}");
                Ok(AskRow {
                    session: SessionId::new(r.text(1)?),
                    body: r.text(2)?,
                    state: AskState::parse(&r.text(3)?, &what)?,
                    answer: r.opt_text(4)?,
                    rev: uint(r.int(5)?, &what)?,
                    id,
                })
            })
            .collect()
    }
}

/// A SQLite connection of a member host (several members in one process share the file).
///
/// # Errors
/// The file cannot be opened or set up.
pub(super) fn member_sqlite(config: &StoreConfig) -> Result<rusqlite::Connection, StoreError> {
    let conn = config.location.connect(true)?;
    let opening = |e| super::location::opening(&config.location, e);
    conn.busy_timeout(super::read::BUSY_TIMEOUT).map_err(opening)?;
    conn.pragma_update(None, "journal_mode", config.location.journal_mode()).map_err(opening)?;
    conn.pragma_update(None, "foreign_keys", true)?;
    conn.set_prepared_statement_cache_capacity(super::conn::STATEMENT_CACHE);
    Ok(conn)
}
