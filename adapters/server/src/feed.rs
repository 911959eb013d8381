//! The event stream (SPEC 9 "Server"): server-sent events that resume exactly.
//!
//! One **feed** task follows the host: after every commit (the store's revision advanced) it
//! reads what changed since its last position ([`Reader::changes`]), turns it into frames once,
//! and broadcasts them; it also forwards retries and permission asks. Each client's **stream**
//! task copies frames from the broadcast to its connection. A slow client only makes its own
//! task fall behind: the broadcast drops frames for it alone (the engine never waits for a
//! client), and that task then reads what it missed from the store, from its own position.
//!
//! Every event's `id` is the client's position after it, `<cursor>-<revision>`: every
//! RunComplete up to `cursor`, and every message and session state of a revision below
//! `revision`, was delivered. A client that reconnects with `Last-Event-ID` resumes there:
//! each RunComplete after the cursor exactly once (a stream drops any at or below what it
//! delivered), and the current state of each message and session changed since (a state sent
//! twice is harmless). The position is read from the ledger and the store's change order, so
//! this holds across a restart of the server too.
//!
//! [`Reader::changes`]: turnstile_host::store::Reader::changes

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use serde::Serialize;
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};
use turnstile_host::store::{Change, Changes, Position, SessionState};
use turnstile_host::{Cursor, Event, Host, Update};

use crate::asks::{AskEvent, Asks};
use crate::delta::{Broadcasted, Mark, Sent};

/// One event, serialised once for every client: only its `id` line is each stream's own.
#[derive(Debug)]
pub(crate) struct Frame {
    /// `event: <type>\ndata: <json>\n\n`, the event after its `id` line.
    body: Bytes,
    /// What a client has after this frame, when the frame carries store changes.
    claim: Option<Position>,
    /// The RunComplete's cursor, for a `run_complete` frame.
    cursor: Option<Cursor>,
    /// The bytes the feed had broadcast once this frame was sent (set by [`Broadcast::send`]):
    /// a stream that took it is that far into the feed.
    end: u64,
    /// The store revision of the row a `message` or `session` frame carries: a stream that
    /// delivered every state below a later revision has it or a newer one already.
    row: Option<u64>,
    /// A `message` frame's message, and the frame as a `message_delta` when the feed could
    /// make one ([`delta`](crate::delta)).
    message: Option<(Mark, Option<Bytes>)>,
}

impl Frame {
    fn new(event: &str, data: &Value, claim: Option<Position>, cursor: Option<Cursor>) -> Frame {
        Frame { body: body(event, data), claim, cursor, end: 0, row: None, message: None }
    }
}

/// The broadcast of frames, counting the bytes sent, so that a stream can tell how far behind
/// the feed it is in bytes as well as in frames.
#[derive(Clone, Debug)]
struct Broadcast {
    tx: broadcast::Sender<Arc<Frame>>,
    /// Bytes broadcast so far.
    sent: Arc<tokio::sync::watch::Sender<u64>>,
}

impl Broadcast {
    fn send(&self, mut frame: Frame) {
        let mut end = 0;
        self.sent.send_modify(|sent| {
            *sent += frame.body.len() as u64;
            end = *sent;
        });
        frame.end = end;
        let _ = self.tx.send(Arc::new(frame));
    }
}

/// An event's lines after its `id`. JSON as serde_json writes it has no raw line break, so
/// the data is one `data:` line.
fn body(event: &str, data: &Value) -> Bytes {
    let json = serde_json::to_string(data).unwrap_or_default();
    Bytes::from(format!("event: {event}\ndata: {json}\n\n"))
}

/// A heartbeat: a comment line, which clients ignore and proxies see as traffic.
const HEARTBEAT: &[u8] = b":\n\n";

/// A session's state as the API shows it (with `busy`).
#[derive(Serialize)]
struct SessionView<'a> {
    #[serde(flatten)]
    state: &'a SessionState,
    busy: bool,
}

/// The JSON of a session state.
pub(crate) fn session_json(state: &SessionState) -> Value {
    serde_json::to_value(SessionView { state, busy: state.busy() }).unwrap_or(Value::Null)
}

/// The frames of one `changes` answer read from `from`: the rows by revision, then the
/// completions (so a RunComplete follows its message's final state). The feed passes what
/// it broadcast before (`broadcasted`), so that streamed text can also go out as deltas; a
/// catch-up from the store sends whole states only.
fn frames(
    changes: &Changes,
    from: Position,
    mut broadcasted: Option<&mut Broadcasted>,
) -> Vec<Frame> {
    let mut out = Vec::with_capacity(changes.rows.len() + changes.completions.len());
    for (i, row) in changes.rows.iter().enumerate() {
        // After this row, every row of a revision below the next row's is delivered.
        let next = changes.rows.get(i + 1).map_or(changes.now.revision, Change::revision);
        let claim = Position { cursor: from.cursor, revision: next.max(from.revision) };
        let mut frame = match row {
            Change::Message { session, revision, message } => {
                let data = json!({"session": session, "revision": revision, "message": message});
                let mut frame = Frame::new("message", &data, Some(claim), None);
                let delta =
                    broadcasted.as_deref_mut().and_then(|b| b.next(session, *revision, message));
                let base = delta.as_ref().map(|d| d.base_revision);
                let delta = delta.map(|d| {
                    body("message_delta", &serde_json::to_value(d).unwrap_or(Value::Null))
                });
                frame.message = Some((Mark::new(*revision, message, base), delta));
                frame
            }
            Change::Session(state) => {
                Frame::new("session", &session_json(state), Some(claim), None)
            }
        };
        frame.row = Some(row.revision());
        out.push(frame);
    }
    for (cursor, record) in &changes.completions {
        let mut data = serde_json::to_value(record).unwrap_or(Value::Null);
        data["cursor"] = json!(cursor.0);
        let claim = Position { cursor: *cursor, revision: changes.now.revision };
        out.push(Frame::new("run_complete", &data, Some(claim), Some(*cursor)));
    }
    out
}

fn ask_frame(e: &AskEvent) -> Frame {
    let (event, data) = match e {
        AskEvent::Opened(ask) => ("ask", serde_json::to_value(ask).unwrap_or(Value::Null)),
        AskEvent::Closed { id, why } => ("ask_closed", json!({"id": id, "why": why})),
    };
    Frame::new(event, &data, None, None)
}

/// The text of an event id.
#[must_use]
pub fn event_id(p: Position) -> String {
    format!("{}-{}", p.cursor.0, p.revision)
}

/// Parses an event id (`<cursor>-<revision>`).
///
/// # Errors
/// A message naming what is wrong.
pub fn parse_event_id(text: &str) -> Result<Position, String> {
    let bad = || format!("`{text}` is not an event id of this server (`<cursor>-<revision>`)");
    let (c, r) = text.trim().split_once('-').ok_or_else(bad)?;
    let cursor = c.parse::<u64>().map_err(|_| bad())?;
    let revision = r.parse::<u64>().map_err(|_| bad())?;
    Ok(Position { cursor: Cursor(cursor), revision })
}

/// The feed: where streams subscribe.
#[derive(Clone, Debug)]
pub(crate) struct Feed {
    tx: Broadcast,
    /// Set once the feed sent its last frames (the host ended): streams end after them.
    ended: tokio::sync::watch::Receiver<bool>,
}

impl Feed {
    /// Starts the feed task from the store's position now.
    pub(crate) async fn start(host: Host, asks: Asks, capacity: usize) -> Feed {
        let (tx, _) = broadcast::channel(capacity.max(16));
        let tx = Broadcast { tx, sent: Arc::new(tokio::sync::watch::channel(0).0) };
        let (ended_tx, ended) = tokio::sync::watch::channel(false);
        let feed = Feed { tx: tx.clone(), ended };
        // Subscribed before the position is read: nothing committed after it is missed.
        let revisions = host.revisions();
        let updates = host.subscribe();
        let ask_events = asks.subscribe();
        let position = host.read(|r| r.position()).await.unwrap_or_default();
        tokio::spawn(async move {
            run(host, tx, position, revisions, updates, ask_events).await;
            ended_tx.send_replace(true);
        });
        feed
    }

    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Arc<Frame>> {
        self.tx.tx.subscribe()
    }

    /// The bytes broadcast so far, as they grow.
    fn sent(&self) -> tokio::sync::watch::Receiver<u64> {
        self.tx.sent.subscribe()
    }

    fn ended(&self) -> tokio::sync::watch::Receiver<bool> {
        self.ended.clone()
    }
}

async fn run(
    host: Host,
    tx: Broadcast,
    mut position: Position,
    mut revisions: tokio::sync::watch::Receiver<u64>,
    mut updates: turnstile_host::Updates,
    mut ask_events: broadcast::Receiver<AskEvent>,
) {
    let mut asks_open = true;
    let mut broadcasted = Broadcasted::default();
    loop {
        // Asks first (rare, and a person waits on them), then commits, then the lossy live
        // updates: a stream of commits cannot starve an ask.
        tokio::select! {
            biased;
            event = ask_events.recv(), if asks_open => match event {
                Ok(e) => tx.send(ask_frame(&e)),
                // A burst of asks beyond the channel: streams get the pending list when they
                // connect or fall behind, and `GET /v1/asks` lists them.
                Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => asks_open = false,
            },
            changed = revisions.changed() => {
                if changed.is_err() {
                    break;
                }
                position = publish(&host, &tx, position, &mut broadcasted).await;
            }
            event = updates.recv() => match event {
                None => break,
                Some(Event::Update(Update::Retrying { session, seq, attempt, delay_ms, reason })) => {
                    let data = json!({
                        "session": session, "seq": seq, "attempt": attempt,
                        "delay_ms": delay_ms, "reason": reason,
                    });
                    tx.send(Frame::new("retry", &data, None, None));
                }
                Some(_) => {}
            },
        }
    }
    // The host ended (a shutdown): what its last commits recorded goes out, then every stream
    // ends with the broadcast.
    publish(&host, &tx, position, &mut broadcasted).await;
    tracing::debug!("event feed ended");
}

/// Broadcasts what changed after `position`; returns the new position.
async fn publish(
    host: &Host,
    tx: &Broadcast,
    mut position: Position,
    broadcasted: &mut Broadcasted,
) -> Position {
    loop {
        let from = position;
        let read = host.read(move |r| r.changes(from, CATCH_UP_PAGE)).await;
        let changes = match read {
            Ok(c) => c,
            Err(e) => {
                // The next commit wakes the feed again and it reads from the same position.
                tracing::warn!(error = %e, "event feed: the store could not be read");
                return position;
            }
        };
        for frame in frames(&changes, from, Some(broadcasted)) {
            tx.send(frame);
        }
        position = changes.now;
        if !changes.more {
            return position;
        }
    }
}

/// Why a stream could not start.
#[derive(Debug)]
pub(crate) enum StartError {
    /// `Last-Event-ID` is ahead of this store.
    Ahead(Position, Position),
    /// The store could not be read.
    Store(turnstile_host::StoreError),
}

/// Starts one client's stream from `resume` (its `Last-Event-ID`) or from now. The returned
/// receiver yields the SSE events; the task ends when the client goes or the feed ends.
pub(crate) async fn open(
    feed: &Feed,
    host: Host,
    asks: Asks,
    resume: Option<Position>,
    config: StreamConfig,
    permit: tokio::sync::OwnedSemaphorePermit,
) -> Result<mpsc::Receiver<Bytes>, StartError> {
    // Subscribed before reading the store, so nothing falls between the two.
    let frames = feed.subscribe();
    let sent = feed.sent();
    let taken = *sent.borrow();
    let ended = feed.ended();
    let now = host.read(|r| r.position()).await.map_err(StartError::Store)?;
    if let Some(p) = resume
        && (p.cursor > now.cursor || p.revision > now.revision)
    {
        return Err(StartError::Ahead(p, now));
    }
    let (out, rx) = mpsc::channel(16);
    tokio::spawn(async move {
        let _permit = permit;
        let backlog = Backlog { sent, taken, max: config.backlog_bytes };
        let stream = Stream {
            host,
            out,
            delivered: Delivered {
                position: resume.unwrap_or(now),
                sent: Sent::new(config.deltas),
            },
            backlog,
            page: config.page,
        };
        stream.run(frames, ended, asks, resume.is_some(), config.heartbeat).await;
    });
    Ok(rx)
}

/// Rows (or RunCompletes) read per store query by default ([`crate::ServerConfig`]): a resume
/// from far back reads the store a page at a time.
pub const CATCH_UP_PAGE: usize = 512;

/// What a stream is configured with.
#[derive(Clone, Copy, Debug)]
pub(crate) struct StreamConfig {
    /// How often an idle stream gets a heartbeat.
    pub(crate) heartbeat: Duration,
    /// How many bytes of the feed a stream may leave unread before it is ended.
    pub(crate) backlog_bytes: u64,
    /// Rows or RunCompletes per store read of a catch-up.
    pub(crate) page: usize,
    /// Streamed text as `message_delta` events (false: whole `message` states only).
    pub(crate) deltas: bool,
}

struct Stream {
    host: Host,
    out: mpsc::Sender<Bytes>,
    delivered: Delivered,
    backlog: Backlog,
    page: usize,
}

/// What a stream delivered: the decisions of what a frame sends, apart from the IO.
struct Delivered {
    /// The client's position: its event id.
    position: Position,
    /// The last state of each open message sent, for deltas.
    sent: Sent,
}

impl Delivered {
    /// What to send for `frame` (its body, or its delta), moving the position past it;
    /// `None` when the client has it, or a newer state, already.
    fn take<'f>(&mut self, frame: &'f Frame) -> Option<&'f Bytes> {
        if let Some(c) = frame.cursor
            && c <= self.position.cursor
        {
            // Delivered already (from the store, or before a reconnect): exactly once.
            return None;
        }
        if frame.row.is_some_and(|r| r < self.position.revision) {
            // A state this stream sent, or sent a newer one of, from the store after it fell
            // behind: sending it again could show the client an older state after a newer.
            return None;
        }
        if let Some(claim) = frame.claim {
            self.position = self.position.max(claim);
        }
        Some(match &frame.message {
            Some((mark, Some(delta))) if self.sent.as_delta(mark) => delta,
            Some((mark, None)) => {
                self.sent.as_delta(mark);
                &frame.body
            }
            _ => &frame.body,
        })
    }
}

/// How far behind the feed a stream is, in bytes: what it pins in the broadcast.
struct Backlog {
    /// The bytes the feed broadcast so far.
    sent: tokio::sync::watch::Receiver<u64>,
    /// The bytes of the feed this stream took (the `end` of its last frame).
    taken: u64,
    /// Past this many bytes behind, the stream ends and its client resumes from the store.
    max: u64,
}

impl Backlog {
    /// Completes once the stream is more than `max` bytes behind the feed.
    async fn exceeded(&mut self) {
        let (taken, max) = (self.taken, self.max);
        if self.sent.wait_for(|sent| sent.saturating_sub(taken) > max).await.is_err() {
            // The feed is gone: the stream ends with it, not for its backlog.
            std::future::pending::<()>().await;
        }
    }
}

/// The stream ends: the client went away, or it must resume from its position.
struct Gone;

/// What a stream's loop woke for.
enum Next {
    Frame(Result<Arc<Frame>, broadcast::error::RecvError>),
    Beat,
    Ended,
}

impl Stream {
    async fn run(
        mut self,
        mut frames: broadcast::Receiver<Arc<Frame>>,
        mut ended: tokio::sync::watch::Receiver<bool>,
        asks: Asks,
        resume: bool,
        heartbeat: Duration,
    ) {
        // The pending asks first on every connection (a person may be waiting on one), then
        // what a resumed client missed.
        let pending = json!({"asks": asks.pending()});
        if self.send(&body("asks", &pending)).await.is_err() {
            return;
        }
        if resume && self.catch_up().await.is_err() {
            return;
        }
        let mut beat = tokio::time::interval_at(tokio::time::Instant::now() + heartbeat, heartbeat);
        beat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            // Frames first: the feed sent its last ones before it said it ended.
            let next = tokio::select! {
                biased;
                // The client went away: the stream's slot is free at once, not at the next
                // heartbeat.
                () = self.out.closed() => return,
                r = frames.recv() => Next::Frame(r),
                _ = beat.tick() => Next::Beat,
                _ = ended.wait_for(|e| *e) => Next::Ended,
            };
            let received = match next {
                Next::Frame(r) => r,
                Next::Beat => {
                    if self.push(Bytes::from_static(HEARTBEAT)).await.is_err() {
                        return;
                    }
                    continue;
                }
                Next::Ended => match frames.try_recv() {
                    Ok(frame) => Ok(frame),
                    Err(broadcast::error::TryRecvError::Lagged(n)) => {
                        Err(broadcast::error::RecvError::Lagged(n))
                    }
                    Err(_) => return,
                },
            };
            let result = match received {
                Ok(frame) => self.forward(&frame).await,
                Err(broadcast::error::RecvError::Lagged(skipped)) => {
                    tracing::debug!(skipped, "event stream fell behind: reading the store");
                    // What was skipped may hold asks and their closing, which the store does
                    // not have: the pending list again, after the store's changes.
                    match self.catch_up().await {
                        Ok(()) => self.send(&body("asks", &json!({"asks": asks.pending()}))).await,
                        Err(gone) => Err(gone),
                    }
                }
                Err(broadcast::error::RecvError::Closed) => return,
            };
            if result.is_err() {
                return;
            }
        }
    }

    /// Sends what changed after the delivered position, from the store.
    async fn catch_up(&mut self) -> Result<(), Gone> {
        loop {
            let from = self.delivered.position;
            let page = self.page;
            let changes = match self.host.read(move |r| r.changes(from, page)).await {
                Ok(c) => c,
                Err(e) => {
                    // Going on would let a later frame's claim jump past what was never sent;
                    // ending the stream makes the client resume from what it really has.
                    tracing::warn!(error = %e, "event stream: the store could not be read; ending it");
                    return Err(Gone);
                }
            };
            for frame in frames(&changes, from, None) {
                self.forward(&frame).await?;
            }
            self.delivered.position = self.delivered.position.max(changes.now);
            if !changes.more {
                return Ok(());
            }
        }
    }

    async fn forward(&mut self, frame: &Frame) -> Result<(), Gone> {
        self.backlog.taken = self.backlog.taken.max(frame.end);
        match self.delivered.take(frame) {
            Some(body) => self.send(body).await,
            None => Ok(()),
        }
    }

    /// Sends one event: its `id` line (this stream's position), then its shared lines.
    async fn send(&mut self, body: &[u8]) -> Result<(), Gone> {
        let id = event_id(self.delivered.position);
        let mut bytes = Vec::with_capacity(id.len() + 5 + body.len());
        bytes.extend_from_slice(b"id: ");
        bytes.extend_from_slice(id.as_bytes());
        bytes.push(b'\n');
        bytes.extend_from_slice(body);
        self.push(Bytes::from(bytes)).await
    }

    /// Hands bytes to the connection, unless the client stopped reading for so long that the
    /// stream fell more than its backlog behind the feed: then the stream ends, and the client
    /// resumes from its `Last-Event-ID`, reading what it missed from the store.
    async fn push(&mut self, bytes: Bytes) -> Result<(), Gone> {
        let permit = tokio::select! {
            biased;
            permit = self.out.reserve() => permit.map_err(|_| Gone)?,
            () = self.backlog.exceeded() => {
                tracing::info!(
                    max_bytes = self.backlog.max,
                    "event stream: the client fell too far behind; ending it (it resumes from the store)"
                );
                return Err(Gone);
            }
        };
        permit.send(bytes);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use turnstile_core::MessageId;
    use turnstile_host::store::{StoredMessage, StoredRole};

    fn streaming(text: &str) -> StoredMessage {
        StoredMessage {
            id: MessageId(3),
            seq: None,
            role: StoredRole::Assistant,
            text: text.to_owned(),
            attachments: Vec::new(),
            synthetic: false,
            reasoning: None,
            reasoning_signature: None,
            reasoning_done: false,
            finish: None,
            calls: Vec::new(),
            results: Vec::new(),
        }
    }

    /// A `message` frame of revision `row` as the feed makes it, with its delta body when
    /// it has a base.
    fn message_frame(row: u64, text: &str, base: Option<u64>) -> Frame {
        let m = streaming(text);
        let mut f = Frame::new("message", &json!({"text": text}), None, None);
        f.claim = Some(Position { cursor: Cursor(0), revision: row + 1 });
        f.row = Some(row);
        let delta = base.map(|_| body("message_delta", &json!({"text": text})));
        f.message = Some((Mark::new(row, &m, base), delta));
        f
    }

    fn event(bytes: Option<&Bytes>) -> Option<&str> {
        let text = std::str::from_utf8(bytes?).unwrap();
        Some(text.split('\n').next().unwrap().trim_start_matches("event: "))
    }

    #[test]
    fn a_stream_sends_deltas_on_what_it_sent_and_never_an_older_state() {
        let mut d = Delivered {
            position: Position { cursor: Cursor(0), revision: 10 },
            sent: Sent::new(true),
        };
        assert_eq!(event(d.take(&message_frame(10, "a", None))), Some("message"));
        assert_eq!(event(d.take(&message_frame(11, "ab", Some(10)))), Some("message_delta"));
        // It fell behind and caught up from the store to revision 20: the frames still
        // queued for it are older than what it has, and are not sent.
        d.position.revision = 20;
        assert_eq!(event(d.take(&message_frame(12, "abc", Some(11)))), None);
        assert_eq!(d.position.revision, 20, "a skipped frame claims nothing");
        // The store's state (no delta), then deltas on it again.
        assert_eq!(event(d.take(&message_frame(20, "abcdef", None))), Some("message"));
        assert_eq!(event(d.take(&message_frame(21, "abcdefg", Some(20)))), Some("message_delta"));
        // A delta on a base this stream never sent goes out whole.
        assert_eq!(event(d.take(&message_frame(23, "abcdefghi", Some(22)))), Some("message"));
        // A RunComplete at or below the cursor was delivered.
        let mut rc = Frame::new("run_complete", &json!({}), None, Some(Cursor(0)));
        rc.claim = Some(Position { cursor: Cursor(0), revision: 24 });
        assert_eq!(event(d.take(&rc)), None);
        rc.cursor = Some(Cursor(1));
        assert_eq!(event(d.take(&rc)), Some("run_complete"));
    }

    #[test]
    fn event_ids_round_trip_and_bad_ones_are_named() {
        let p = Position { cursor: Cursor(12), revision: 40 };
        assert_eq!(event_id(p), "12-40");
        assert_eq!(parse_event_id("12-40"), Ok(p));
        for bad in ["", "12", "a-1", "1-", "-1", "1-2-3", "99999999999999999999-1"] {
            let e = parse_event_id(bad).expect_err(bad);
            assert!(e.contains("is not an event id"), "{e}");
        }
    }
}
