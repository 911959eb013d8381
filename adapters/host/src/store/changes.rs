//! The change order (SPEC 9 "Server"): what changed in the store after a [`Position`].
//!
//! Every committing transaction advances the store's revision by one, and triggers stamp each
//! message and session row it changes with that revision (see `schema`, version 3). A
//! [`Position`] pairs a ledger cursor with a revision, and [`Reader::changes`] answers, in one
//! read transaction (one consistent snapshot), the completions after the cursor and the current
//! state of every message and session changed at or after the revision.
//!
//! This is how an event stream resumes exactly: completions are numbered, so each is delivered
//! once; rows are states, not deltas, so delivering one again is harmless. It needs nothing kept
//! in memory, so it works the same after a restart, and several processes reading one database
//! agree on it (the revision is a column, not a counter in a process).

use serde::{Deserialize, Serialize};
use turnstile_core::{MessageId, SessionId};

use super::error::StoreError;
use super::read::{Reader, SESSION_COLUMNS, raw_session, revision};
use super::read::{SessionRow, StoredMessage};
use super::schema::{int, uint};
use super::sql::{Row, args, in_snapshot};
use crate::record::{CompletionRecord, Cursor};

/// A point in the store's change order: every completion up to `cursor` and every row change
/// of a revision below `revision` is behind it.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct Position {
    /// The newest completion behind the position (`Cursor(0)`: none).
    pub cursor: Cursor,
    /// Row changes of revisions below this are behind the position; those at or above it are
    /// not.
    pub revision: u64,
}

impl Position {
    /// The later of two positions, component by component.
    #[must_use]
    pub fn max(self, other: Position) -> Position {
        Position {
            cursor: self.cursor.max(other.cursor),
            revision: self.revision.max(other.revision),
        }
    }
}

/// A session's current state, read from the store: its row and what its ledger says.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionState {
    /// The session's row (title, gauges, cost, parent).
    #[serde(flatten)]
    pub row: SessionRow,
    /// The revision that last changed it.
    pub revision: u64,
    /// Its messages.
    pub messages: u64,
    /// Its submissions not yet finished (waiting, active or paused).
    pub unfinished: u64,
    /// Its submissions waiting (preparing or queued).
    pub waiting: u64,
    /// True while a summary of it is being written.
    pub summarizing: bool,
}

impl SessionState {
    /// Busy as SPEC 3 means it: a submission unfinished, or a summarization running.
    #[must_use]
    pub fn busy(&self) -> bool {
        self.unfinished > 0 || self.summarizing
    }
}

/// One changed row, as it is now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// A session's state.
    Session(SessionState),
    /// A message with its calls and results.
    Message {
        /// Its session.
        session: SessionId,
        /// The revision that last changed it.
        revision: u64,
        /// The message.
        message: StoredMessage,
    },
}

impl Change {
    /// The revision that last changed the row.
    #[must_use]
    pub fn revision(&self) -> u64 {
        match self {
            Change::Session(s) => s.revision,
            Change::Message { revision, .. } => *revision,
        }
    }
}

/// What changed after a position, in one consistent snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Changes {
    /// The rows changed at or after the position's revision, by revision (a message's state
    /// before its session's within one revision): all of them, or a page of whole revisions.
    pub rows: Vec<Change>,
    /// The completions after the position's cursor, in cursor order (at most the limit; none
    /// while the rows are paged, so that a completion never comes before its message's final
    /// state).
    pub completions: Vec<(Cursor, CompletionRecord)>,
    /// True when more rows or completions follow than the limit let through.
    pub more: bool,
    /// The position after everything above: where the next call resumes.
    pub now: Position,
}

const STATE_COLUMNS: &str = "s.rev, \
     (SELECT count(*) FROM messages m WHERE m.session = s.id), \
     (SELECT count(*) FROM runs r WHERE r.session = s.id AND r.state <> 'finished'), \
     (SELECT count(*) FROM runs r WHERE r.session = s.id AND r.state = 'waiting'), \
     EXISTS (SELECT 1 FROM messages m WHERE m.session = s.id AND m.role = 'summary' \
             AND m.finish IS NULL)";

impl Reader {
    /// The position now: after every completion and every revision committed so far.
    ///
    /// # Errors
    /// SQLite errors.
    pub fn position(&self) -> Result<Position, StoreError> {
        let db = self.db();
        in_snapshot(db, || {
            Ok(Position { cursor: super::read::newest_cursor(db)?, revision: revision(db)? + 1 })
        })
    }

    /// What changed after `after`: every completion after its cursor (up to `limit`), and the
    /// current state of every message and session changed at or after its revision (up to
    /// about `limit` rows: whole revisions, so one revision larger than `limit` comes whole).
    ///
    /// Read in one transaction, so the rows and completions are one snapshot: a completion is
    /// never reported without the final state of its message. While the rows are paged
    /// ([`Changes::more`] with no completions), [`Changes::now`] is the revision the page ends
    /// before, and the next call goes on from there; a catch-up from far back so reads a
    /// bounded amount at a time.
    ///
    /// # Errors
    /// The database's errors; [`StoreError::Corrupt`] for a row that does not parse.
    pub fn changes(&self, after: Position, limit: usize) -> Result<Changes, StoreError> {
        in_snapshot(self.db(), || self.changes_in(after, limit))
    }

    fn changes_in(&self, after: Position, limit: usize) -> Result<Changes, StoreError> {
        let db = self.db();
        let snapshot = revision(db)?;
        let from = int(after.revision, "revision")?;
        let cut = self.page_end(from, limit)?;
        let until = cut.unwrap_or(i64::MAX);
        let mut rows: Vec<Change> = self
            .load_messages(
                "SELECT id FROM messages WHERE rev >= ?1 AND rev < ?2",
                &args![from, until],
            )?
            .into_iter()
            .map(|m| Change::Message {
                session: m.session,
                revision: m.revision,
                message: m.message,
            })
            .collect();
        let sql = format!(
            "SELECT {}, {STATE_COLUMNS} FROM sessions s WHERE s.rev >= ?1 AND s.rev < ?2",
            prefixed(SESSION_COLUMNS)
        );
        for r in db.rows(&sql, &args![from, until])? {
            rows.push(Change::Session(raw_state(&r)?.parse()?));
        }
        // Stable: within a revision, messages (in write order) come before sessions.
        rows.sort_by_key(Change::revision);
        if let Some(cut) = cut {
            // A page of rows: the completions wait for the page that ends at the snapshot.
            let revision = uint(cut, "revision")?;
            return Ok(Changes {
                rows,
                completions: Vec::new(),
                more: true,
                now: Position { cursor: after.cursor, revision },
            });
        }
        let mut completions = self.completions_after(after.cursor, limit.saturating_add(1))?;
        let more = completions.len() > limit;
        completions.truncate(limit);
        let newest = if more {
            completions.last().map_or(after.cursor, |(c, _)| *c)
        } else {
            super::read::newest_cursor(db)?.max(after.cursor)
        };
        Ok(Changes {
            rows,
            completions,
            more,
            now: Position { cursor: newest, revision: (snapshot + 1).max(after.revision) },
        })
    }

    /// The revision a page of at most `limit` changed rows from revision `from` ends before
    /// (whole revisions; at least one); `None` when every changed row fits.
    fn page_end(&self, from: i64, limit: usize) -> Result<Option<i64>, StoreError> {
        let revs = "SELECT rev FROM messages WHERE rev >= ?1 \
                    UNION ALL SELECT rev FROM sessions WHERE rev >= ?1";
        let offset = i64::try_from(limit).unwrap_or(i64::MAX);
        let db = self.db();
        let beyond = db.scalar(
            &format!("SELECT rev FROM ({revs}) AS revs ORDER BY rev LIMIT 1 OFFSET ?2"),
            &args![from, offset],
        )?;
        let Some(beyond) = beyond else { return Ok(None) };
        if beyond > from {
            return Ok(Some(beyond));
        }
        // The first revision alone is over the limit: it comes whole, up to the next one.
        db.scalar(&format!("SELECT min(rev) FROM ({revs}) AS revs WHERE rev > ?1"), &args![from])
    }

    /// One session's current state, if the store holds it.
    ///
    /// # Errors
    /// The database's errors; [`StoreError::Corrupt`] for a row that does not parse.
    pub fn session_state(&self, id: &SessionId) -> Result<Option<SessionState>, StoreError> {
        let sql = format!(
            "SELECT {}, {STATE_COLUMNS} FROM sessions s WHERE s.id = ?1",
            prefixed(SESSION_COLUMNS)
        );
        let row = self.db().row(&sql, &args![id.as_str()])?;
        row.map(|r| raw_state(&r)?.parse()).transpose()
    }

    /// A page of a session's messages in write order: up to `limit` after the message
    /// `after` (from the first without it). `None` when `after` is not a message of the
    /// session.
    ///
    /// # Errors
    /// The database's errors; [`StoreError::Corrupt`] for a row that does not parse.
    pub fn messages_page(
        &self,
        session: &SessionId,
        after: Option<MessageId>,
        limit: usize,
    ) -> Result<Option<Vec<StoredMessage>>, StoreError> {
        let db = self.db();
        in_snapshot(db, || {
            let after_ord = match after {
                None => Some(0),
                Some(id) => db
                    .row(
                        "SELECT ord FROM messages WHERE id = ?1 AND session = ?2",
                        &args![int(id.0, "message id")?, session.as_str()],
                    )?
                    .map(|r| r.int(0))
                    .transpose()?,
            };
            let Some(after_ord) = after_ord else { return Ok(None) };
            let limit = i64::try_from(limit).unwrap_or(i64::MAX);
            let chosen =
                "SELECT id FROM messages WHERE session = ?1 AND ord > ?2 ORDER BY ord LIMIT ?3";
            let page = self.load_messages(chosen, &args![session.as_str(), after_ord, limit])?;
            Ok(Some(page.into_iter().map(|m| m.message).collect()))
        })
    }
}

/// `a, b` as `s.a, s.b`.
fn prefixed(columns: &str) -> String {
    columns.split(", ").map(|c| format!("s.{c}")).collect::<Vec<_>>().join(", ")
}

struct RawState {
    session: super::read::RawSession,
    rev: i64,
    messages: i64,
    unfinished: i64,
    waiting: i64,
    summarizing: bool,
}

fn raw_state(r: &Row) -> Result<RawState, StoreError> {
    Ok(RawState {
        session: raw_session(r)?,
        rev: r.int(7)?,
        messages: r.int(8)?,
        unfinished: r.int(9)?,
        waiting: r.int(10)?,
        summarizing: r.flag(11)?,
    })
}

impl RawState {
    fn parse(self) -> Result<SessionState, StoreError> {
        let what = format!("sessions row {}", self.session.id);
        Ok(SessionState {
            revision: uint(self.rev, &format!("{what} rev"))?,
            messages: uint(self.messages, &what)?,
            unfinished: uint(self.unfinished, &what)?,
            waiting: uint(self.waiting, &what)?,
            summarizing: self.summarizing,
            row: self.session.parse()?,
        })
    }
}
