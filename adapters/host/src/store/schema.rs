//! The store's schema (SPEC 9): versioned migrations over `PRAGMA user_version`, and the
//! encodings of the columns that hold enums and integers.
//!
//! Migration `n` (from 1) takes a database at version `n - 1` to version `n`, in one
//! transaction, so a crash mid-migration leaves the previous version intact. A database whose
//! version is newer than [`MIGRATIONS`] knows is refused, never downgraded.
//!
//! Tables (version 1):
//! - `sessions`: one row per session; `created` orders them; the gauges are set, `cost_micros`
//!   only ever grows (field-level updates, SPEC 4.4 and G-15).
//! - `messages`: `ord` (a monotonic integer, never a timestamp) is the write order; `id` is the
//!   core's message id. `finish` is the JSON of the finish, NULL while unfinished.
//! - `tool_calls`: per assistant message, `ord` is the order added; `input` is NULL while the
//!   call streams.
//! - `tool_results`: `ord` is the order written (results of a message are read in it).
//! - `runs`: the run ledger, one row per submission; `cursor` numbers the outcomes in the order
//!   recorded; a CHECK ties `state = 'finished'` to outcome, completion and cursor being set.
//! - `counters`: `message_high`, the highest message id ever inserted (kept by a trigger in the
//!   inserting transaction), so an id deleted later is never handed out again.
//!
//! Version 2 adds `runs.accepted_at` and `runs.finished_at` (wall-clock, informational).
//!
//! Version 3 adds the change order: a `revision` counter that every committing transaction
//! advances once, and `messages.rev` / `sessions.rev`, the revision that last changed the row
//! (stamped by triggers, so no write can forget it). A message's revision changes with its
//! calls and results; a session's with its ledger rows, its new or deleted messages, and the
//! end of its summary (which ends `summarizing`). What changed after a
//! revision is then one indexed query, also after a restart (SPEC 9 "Server").
//!
//! Version 4 adds `tool_calls.raw_input`: what the model sent as a call's arguments when that
//! was not valid JSON (the call's `input` is then `{}`, SPEC 4.4), for people reading the
//! history; NULL otherwise.
//!
//! Version 5 adds `session_leases`: which host holds a session's lease when several hosts
//! share one store, its epoch, and its expiry by the database's clock (SPEC 11, `lease.rs`;
//! one process never reads it).
//!
//! Version 6 adds what several hosts need beyond the lease (SPEC 11, `cluster.rs`):
//! `session_commands`, the cancels, `cancel_run`s, queue clears and summarize requests a host
//! accepted for a session another host may own, each with the session's newest sequence when
//! it committed (`up_to`, its watermark) and whether the owner applied it; `runs.accepted_by`,
//! the host that wrote a submission's row (placement prefers it); and the `message_block`
//! counter, from which each take of a session reserves a block of message ids of its own, so
//! the cores of several hosts never hand out one id twice. One process never reads them.
//!
//! Version 7 adds `asks`: the permission asks of several hosts' sessions (SPEC 11), so that
//! every host lists them and any host answers them. A row is written by the host whose call
//! waits, closed once (answered, with the answer, or withdrawn) by whichever host decides
//! first, and stamped with the revision of its last change (`rev`), which hosts read from.

use rusqlite::{Connection, TransactionBehavior};
use turnstile_core::{Mode, Outcome};

use super::error::StoreError;
use super::sql::Db;

/// The migrations, in order: index `i` takes version `i` to `i + 1`.
pub(super) const MIGRATIONS: &[&str] = &[V1, V2, V3, V4, V5, V6, V7];

/// Version 1: sessions, messages, tool calls and results, the run ledger, counters.
const V1: &str = r#"
CREATE TABLE sessions (
    id TEXT PRIMARY KEY NOT NULL,
    parent TEXT NULL REFERENCES sessions (id),
    title TEXT NULL,
    prompt_tokens INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    cost_micros INTEGER NOT NULL DEFAULT 0,
    summary_message INTEGER NULL REFERENCES messages (id),
    created INTEGER NOT NULL UNIQUE
);
CREATE INDEX sessions_summary ON sessions (summary_message) WHERE summary_message IS NOT NULL;

CREATE TABLE runs (
    seq INTEGER PRIMARY KEY,
    session TEXT NOT NULL REFERENCES sessions (id),
    run_id TEXT NULL UNIQUE,
    mode TEXT NOT NULL CHECK (mode IN ('fold', 'own_turn')),
    prompt TEXT NOT NULL,
    attachments TEXT NOT NULL DEFAULT '[]',
    fingerprint TEXT NULL,
    parent_seq INTEGER NULL REFERENCES runs (seq),
    state TEXT NOT NULL CHECK (state IN ('waiting', 'active', 'paused', 'finished')),
    outcome TEXT NULL
        CHECK (outcome IN ('completed', 'failed', 'cancelled', 'interrupted', 'folded')),
    completion TEXT NULL,
    cursor INTEGER NULL UNIQUE,
    CHECK ((state = 'finished') = (outcome IS NOT NULL)),
    CHECK ((state = 'finished') = (completion IS NOT NULL)),
    CHECK ((state = 'finished') = (cursor IS NOT NULL)),
    CHECK (run_id IS NULL OR fingerprint IS NOT NULL)
);
CREATE INDEX runs_session ON runs (session);
CREATE INDEX runs_unfinished ON runs (seq) WHERE state <> 'finished';

CREATE TABLE messages (
    ord INTEGER PRIMARY KEY AUTOINCREMENT,
    id INTEGER NOT NULL UNIQUE,
    session TEXT NOT NULL REFERENCES sessions (id),
    seq INTEGER NULL REFERENCES runs (seq),
    role TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'summary')),
    text TEXT NOT NULL DEFAULT '',
    attachments TEXT NOT NULL DEFAULT '[]',
    synthetic INTEGER NOT NULL DEFAULT 0 CHECK (synthetic IN (0, 1)),
    reasoning TEXT NULL,
    reasoning_signature TEXT NULL,
    reasoning_done INTEGER NOT NULL DEFAULT 0 CHECK (reasoning_done IN (0, 1)),
    finish TEXT NULL,
    turn INTEGER NULL,
    step INTEGER NULL
);
CREATE INDEX messages_session ON messages (session, ord);
CREATE INDEX messages_seq ON messages (seq, ord) WHERE seq IS NOT NULL;
CREATE INDEX messages_unfinished ON messages (ord) WHERE finish IS NULL;

CREATE TABLE tool_calls (
    message INTEGER NOT NULL REFERENCES messages (id),
    call TEXT NOT NULL,
    ord INTEGER NOT NULL,
    name TEXT NOT NULL,
    input TEXT NULL,
    finished INTEGER NOT NULL DEFAULT 0 CHECK (finished IN (0, 1)),
    PRIMARY KEY (message, call),
    CHECK (finished = 0 OR input IS NOT NULL)
);
CREATE INDEX tool_calls_unfinished ON tool_calls (message) WHERE finished = 0;

CREATE TABLE tool_results (
    ord INTEGER PRIMARY KEY AUTOINCREMENT,
    message INTEGER NOT NULL REFERENCES messages (id),
    call TEXT NOT NULL,
    content TEXT NOT NULL,
    is_error INTEGER NOT NULL CHECK (is_error IN (0, 1)),
    synthetic INTEGER NOT NULL CHECK (synthetic IN (0, 1)),
    UNIQUE (message, call)
);

CREATE TABLE counters (
    name TEXT PRIMARY KEY NOT NULL,
    value INTEGER NULL
);
INSERT INTO counters (name, value) VALUES ('message_high', NULL);

CREATE TRIGGER messages_high AFTER INSERT ON messages
BEGIN
    UPDATE counters SET value = NEW.id
    WHERE name = 'message_high' AND (value IS NULL OR value < NEW.id);
END;
"#;

/// Version 2: when each submission was accepted and finished, in wall-clock milliseconds since
/// the Unix epoch, for people (`turnstile sessions`' last activity). Nothing in the lifecycle
/// reads them: order comes from sequences and cursors, never from a clock. The writes take
/// SQLite's clock (`unixepoch('subsec')`), so no host code reads one.
const V2: &str = r#"
ALTER TABLE runs ADD COLUMN accepted_at INTEGER NULL;
ALTER TABLE runs ADD COLUMN finished_at INTEGER NULL;
"#;

/// Version 3: the change order (see the module docs). Rows written before it have revision 0.
/// The triggers read the current revision from `counters`; [`bump_revision`] advances it at the
/// start of every transaction that writes. A message update that stamps `rev` itself (the
/// streamed appends, the hot path) is skipped by `messages_rev_update`'s `WHEN`; one that
/// forgets to is stamped by it.
const V3: &str = r#"
INSERT INTO counters (name, value) VALUES ('revision', 0);
ALTER TABLE messages ADD COLUMN rev INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN rev INTEGER NOT NULL DEFAULT 0;
CREATE INDEX messages_rev ON messages (rev);
CREATE INDEX sessions_rev ON sessions (rev);

CREATE TRIGGER sessions_rev_insert AFTER INSERT ON sessions
BEGIN
    UPDATE sessions SET rev = (SELECT value FROM counters WHERE name = 'revision')
    WHERE id = NEW.id;
END;
CREATE TRIGGER sessions_rev_update
AFTER UPDATE OF parent, title, prompt_tokens, completion_tokens, cost_micros, summary_message
ON sessions
BEGIN
    UPDATE sessions SET rev = (SELECT value FROM counters WHERE name = 'revision')
    WHERE id = NEW.id;
END;
CREATE TRIGGER runs_rev_insert AFTER INSERT ON runs
BEGIN
    UPDATE sessions SET rev = (SELECT value FROM counters WHERE name = 'revision')
    WHERE id = NEW.session;
END;
CREATE TRIGGER runs_rev_update AFTER UPDATE ON runs
BEGIN
    UPDATE sessions SET rev = (SELECT value FROM counters WHERE name = 'revision')
    WHERE id = NEW.session;
END;
CREATE TRIGGER messages_rev_insert AFTER INSERT ON messages
BEGIN
    UPDATE messages SET rev = (SELECT value FROM counters WHERE name = 'revision')
    WHERE id = NEW.id;
    UPDATE sessions SET rev = (SELECT value FROM counters WHERE name = 'revision')
    WHERE id = NEW.session;
END;
CREATE TRIGGER messages_rev_update
AFTER UPDATE OF text, attachments, synthetic, reasoning, reasoning_signature, reasoning_done,
    finish, turn, step
ON messages
WHEN NEW.rev = OLD.rev
BEGIN
    UPDATE messages SET rev = (SELECT value FROM counters WHERE name = 'revision')
    WHERE id = NEW.id;
END;
CREATE TRIGGER messages_summary_finish AFTER UPDATE OF finish ON messages
WHEN NEW.role = 'summary'
BEGIN
    UPDATE sessions SET rev = (SELECT value FROM counters WHERE name = 'revision')
    WHERE id = NEW.session;
END;
CREATE TRIGGER messages_rev_delete AFTER DELETE ON messages
BEGIN
    UPDATE sessions SET rev = (SELECT value FROM counters WHERE name = 'revision')
    WHERE id = OLD.session;
END;
CREATE TRIGGER tool_calls_rev_insert AFTER INSERT ON tool_calls
BEGIN
    UPDATE messages SET rev = (SELECT value FROM counters WHERE name = 'revision')
    WHERE id = NEW.message;
END;
CREATE TRIGGER tool_calls_rev_update AFTER UPDATE ON tool_calls
BEGIN
    UPDATE messages SET rev = (SELECT value FROM counters WHERE name = 'revision')
    WHERE id = NEW.message;
END;
CREATE TRIGGER tool_results_rev_insert AFTER INSERT ON tool_results
BEGIN
    UPDATE messages SET rev = (SELECT value FROM counters WHERE name = 'revision')
    WHERE id = NEW.message;
END;
"#;

/// Version 4: the arguments the model sent that were not valid JSON (see the module docs).
const V4: &str = r#"
ALTER TABLE tool_calls ADD COLUMN raw_input TEXT NULL;
"#;

/// Version 5: session leases for several hosts over one store (SPEC 11, `lease.rs`): the
/// holder, its epoch, and the expiry by the database's clock in milliseconds.
const V5: &str = r#"
CREATE TABLE session_leases (
    session TEXT PRIMARY KEY NOT NULL,
    owner TEXT NULL,
    epoch INTEGER NOT NULL CHECK (epoch > 0),
    expires_ms INTEGER NOT NULL
);
"#;

/// Version 6: commands accepted for a session another host may own, the accepting host of a
/// submission, and the message-id blocks of takes (SPEC 11, `cluster.rs`).
const V6: &str = r#"
CREATE TABLE session_commands (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('cancel', 'cancel_run', 'clear_queue', 'summarize')),
    up_to INTEGER NULL,
    run_id TEXT NULL,
    applied INTEGER NOT NULL DEFAULT 0 CHECK (applied IN (0, 1)),
    CHECK ((kind = 'cancel_run') = (run_id IS NOT NULL))
);
CREATE INDEX session_commands_pending ON session_commands (session, id) WHERE applied = 0;
ALTER TABLE runs ADD COLUMN accepted_by TEXT NULL;
CREATE INDEX runs_unfinished_session ON runs (session, seq) WHERE state <> 'finished';
INSERT INTO counters (name, value) VALUES ('message_block', NULL);
"#;

/// Version 7: permission asks shared by several hosts (SPEC 11, `cluster.rs`).
const V7: &str = r#"
CREATE TABLE asks (
    id TEXT PRIMARY KEY NOT NULL,
    session TEXT NOT NULL,
    body TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('pending', 'answered', 'withdrawn')),
    answer TEXT NULL,
    rev INTEGER NOT NULL,
    CHECK ((state = 'answered') = (answer IS NOT NULL))
);
CREATE INDEX asks_rev ON asks (rev);
"#;

/// Advances the change order by one inside the caller's (writing) transaction; every row the
/// transaction changes is stamped with the new revision, which it returns.
///
/// # Errors
/// SQLite errors; [`StoreError::Corrupt`] when the counter is missing.
pub(super) fn bump_revision(db: &dyn Db) -> Result<u64, StoreError> {
    let value = db
        .row("UPDATE counters SET value = value + 1 WHERE name = 'revision' RETURNING value", &[])?
        .map(|r| r.int(0))
        .transpose()?;
    let value = value
        .ok_or_else(|| StoreError::Corrupt("the store's revision counter is missing".to_owned()))?;
    uint(value, "revision")
}

/// Brings the database to the newest version, one transaction per migration.
///
/// # Errors
/// [`StoreError::Corrupt`] when the database is newer than this code (or its version is
/// negative); SQLite errors of the migrations.
pub(super) fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    let latest = MIGRATIONS.len();
    let current = usize::try_from(version)
        .map_err(|_| StoreError::Corrupt(format!("store schema version {version} is negative")))?;
    if current > latest {
        return Err(StoreError::Corrupt(format!(
            "store schema version {current} is newer than this turnstile supports ({latest})"
        )));
    }
    for (done, sql) in MIGRATIONS.iter().enumerate().skip(current) {
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", i64::try_from(done + 1).unwrap_or(i64::MAX))?;
        tx.commit()?;
    }
    Ok(())
}

/// A `u64` as SQLite's signed 64-bit integer.
///
/// # Errors
/// [`StoreError::Corrupt`] naming `what` when the value does not fit.
pub(super) fn int(value: u64, what: &str) -> Result<i64, StoreError> {
    i64::try_from(value).map_err(|_| {
        StoreError::Corrupt(format!("{what} {value} does not fit in a 64-bit signed integer"))
    })
}

/// A stored integer as a `u64`.
///
/// # Errors
/// [`StoreError::Corrupt`] naming `what` when it is negative.
pub(super) fn uint(value: i64, what: &str) -> Result<u64, StoreError> {
    u64::try_from(value).map_err(|_| StoreError::Corrupt(format!("{what} is negative: {value}")))
}

/// The `runs.mode` text of a mode.
pub(crate) fn mode_text(mode: Mode) -> &'static str {
    match mode {
        Mode::Fold => "fold",
        Mode::OwnTurn => "own_turn",
    }
}

/// Parses `runs.mode`.
pub(super) fn parse_mode(text: &str, what: &str) -> Result<Mode, StoreError> {
    match text {
        "fold" => Ok(Mode::Fold),
        "own_turn" => Ok(Mode::OwnTurn),
        other => Err(StoreError::Corrupt(format!("{what}: unknown mode {other:?}"))),
    }
}

/// The `runs.outcome` text of an outcome (its serde name).
pub(crate) fn outcome_text(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Completed => "completed",
        Outcome::Failed => "failed",
        Outcome::Cancelled => "cancelled",
        Outcome::Interrupted => "interrupted",
        Outcome::Folded => "folded",
    }
}

/// Parses `runs.outcome`.
pub(super) fn parse_outcome(text: &str, what: &str) -> Result<Outcome, StoreError> {
    match text {
        "completed" => Ok(Outcome::Completed),
        "failed" => Ok(Outcome::Failed),
        "cancelled" => Ok(Outcome::Cancelled),
        "interrupted" => Ok(Outcome::Interrupted),
        "folded" => Ok(Outcome::Folded),
        other => Err(StoreError::Corrupt(format!("{what}: unknown outcome {other:?}"))),
    }
}

/// Parses a JSON column into `T`, naming the table, row and field on failure.
pub(super) fn parse_json<T: serde::de::DeserializeOwned>(
    text: &str,
    what: &str,
) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt(format!("{what}: {e}")))
}

/// Serialises a value for a JSON column.
pub(super) fn to_json<T: serde::Serialize + ?Sized>(
    value: &T,
    what: &str,
) -> Result<String, StoreError> {
    serde_json::to_string(value)
        .map_err(|e| StoreError::Corrupt(format!("{what} cannot be serialised: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodings_round_trip_and_match_serde() {
        for mode in [Mode::Fold, Mode::OwnTurn] {
            assert_eq!(parse_mode(mode_text(mode), "t").ok(), Some(mode));
            assert_eq!(
                serde_json::to_value(mode).ok(),
                Some(serde_json::Value::from(mode_text(mode)))
            );
        }
        for o in [
            Outcome::Completed,
            Outcome::Failed,
            Outcome::Cancelled,
            Outcome::Interrupted,
            Outcome::Folded,
        ] {
            assert_eq!(parse_outcome(outcome_text(o), "t").ok(), Some(o));
            assert_eq!(
                serde_json::to_value(o).ok(),
                Some(serde_json::Value::from(outcome_text(o)))
            );
        }
        assert!(int(u64::MAX, "x").is_err());
        assert!(uint(-1, "x").is_err());
    }
}
