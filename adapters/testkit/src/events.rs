//! A client of the server's event stream (`GET /v1/events`, SPEC 9), as a user's client reads
//! it: over HTTP with the bearer token, framed by the project's SSE framer, resuming after the
//! last event it read with `Last-Event-ID`.
//!
//! What it guarantees:
//! - It connects to the address it is given (the tests' servers listen on 127.0.0.1) and
//!   asserts the stream was opened (`200`); while every stream slot is taken (`503`) it tries
//!   again, as a client does.
//! - Events come out one at a time, in the order the server sent them. Every event read is
//!   kept ([`Events::frames`]), across reconnects, and [`Events::last`] is the id of the last
//!   one read: a reconnect resumes exactly after what the test saw. Events that arrived but
//!   were not read yet are dropped at a reconnect (the server sends them again after `last`).
//! - Every wait is bounded: opening the stream panics after 20 s without an answer,
//!   [`Events::next`] after 10 s without an event, [`Events::read_until`] after 30 s in all,
//!   and [`Events::next_within`] answers `None` after the time it is given.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use serde_json::Value;
pub use turnstile_wire::sse::Frame;
use turnstile_wire::sse::Framer;

/// How long opening the stream may take.
const OPEN_WITHIN: Duration = Duration::from_secs(20);

/// How long [`Events::next`] waits for an event.
const NEXT_WITHIN: Duration = Duration::from_secs(10);

/// How long [`Events::read_until`] reads in all.
const UNTIL_WITHIN: Duration = Duration::from_secs(30);

/// An event-stream client: one connection at a time, everything it read kept.
pub struct Events {
    http: reqwest::Client,
    url: String,
    token: String,
    /// The open connection; `None` once it ended.
    resp: Option<reqwest::Response>,
    framer: Framer,
    /// Events received but not read yet.
    ready: VecDeque<Frame>,
    frames: Vec<Frame>,
    last: Option<String>,
    bytes: usize,
}

/// What a read found before its deadline.
enum Read {
    Frame(Frame),
    Ended,
    Quiet,
}

impl Events {
    /// Opens `{base}/v1/events` with `token`, resuming after event `last` when given.
    ///
    /// # Panics
    /// When the stream is not opened with a `200` within 20 s.
    pub async fn connect(base: &str, token: &str, last: Option<&str>) -> Events {
        Events::connect_at(base, "/v1/events", token, last).await
    }

    /// Opens `{base}{path}` (`/v1/events` with a query, such as `?deltas=false`) with `token`,
    /// resuming after event `last` when given.
    ///
    /// # Panics
    /// When the stream is not opened with a `200` within 20 s.
    pub async fn connect_at(base: &str, path: &str, token: &str, last: Option<&str>) -> Events {
        let mut events = Events {
            http: reqwest::Client::new(),
            url: format!("{base}{path}"),
            token: token.to_owned(),
            resp: None,
            framer: Framer::new(),
            ready: VecDeque::new(),
            frames: Vec::new(),
            last: last.map(str::to_owned),
            bytes: 0,
        };
        events.reconnect().await;
        events
    }

    /// Opens the stream again, resuming after [`Events::last`] (from the start without it);
    /// what was read is kept, what arrived unread is dropped (it comes again).
    ///
    /// # Panics
    /// When the stream is not opened with a `200` within 20 s (a `503` is tried again).
    pub async fn reconnect(&mut self) {
        let deadline = tokio::time::Instant::now() + OPEN_WITHIN;
        let resp = loop {
            let mut req = self.http.get(&self.url).bearer_auth(&self.token);
            if let Some(id) = &self.last {
                req = req.header("Last-Event-ID", id);
            }
            let resp = tokio::time::timeout_at(deadline, req.send())
                .await
                .unwrap_or_else(|_| panic!("GET {}: no answer within 20 s", self.url))
                .unwrap_or_else(|e| panic!("GET {}: {e}", self.url));
            // Every stream slot is taken (a stream just closed may hold its slot until the
            // server sees the close): wait for one, as a client does.
            if resp.status().as_u16() == 503 && tokio::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
            break resp;
        };
        assert_eq!(resp.status().as_u16(), 200, "GET {}", self.url);
        self.resp = Some(resp);
        self.framer = Framer::new();
        self.ready.clear();
    }

    /// Opens the stream again on another server at `base` (several servers over one store
    /// share one event order, SPEC 11), resuming after [`Events::last`]; the path and what
    /// was read are kept.
    ///
    /// # Panics
    /// As [`Events::reconnect`].
    pub async fn reconnect_to(&mut self, base: &str) {
        let path = self.url.find("/v1/").map_or("/v1/events", |i| &self.url[i..]).to_owned();
        self.url = format!("{base}{path}");
        self.reconnect().await;
    }

    /// Whether the connection is open (it ended when the server closed it or went away).
    pub fn is_open(&self) -> bool {
        self.resp.is_some()
    }

    /// The next event, or `None` when the connection ended or nothing came for `within`.
    pub async fn next_within(&mut self, within: Duration) -> Option<Frame> {
        match self.read_before(tokio::time::Instant::now() + within).await {
            Read::Frame(f) => Some(f),
            Read::Ended | Read::Quiet => None,
        }
    }

    /// The next event.
    ///
    /// # Panics
    /// When the connection ended, or after 10 s without an event.
    pub async fn next(&mut self) -> Frame {
        match self.read_before(tokio::time::Instant::now() + NEXT_WITHIN).await {
            Read::Frame(f) => f,
            Read::Ended => panic!("GET {}: the stream ended before an event", self.url),
            Read::Quiet => panic!("GET {}: no event within 10 s", self.url),
        }
    }

    /// Reads events until `stop` holds for one (`true`) or the connection ends (`false`, also
    /// at once when it had ended).
    ///
    /// # Panics
    /// After 30 s without either.
    pub async fn read_until(&mut self, mut stop: impl FnMut(&Frame) -> bool) -> bool {
        let deadline = tokio::time::Instant::now() + UNTIL_WITHIN;
        loop {
            match self.read_before(deadline).await {
                Read::Frame(f) if stop(&f) => return true,
                Read::Frame(_) => {}
                Read::Ended => return false,
                Read::Quiet => panic!("GET {}: read for 30 s without an end", self.url),
            }
        }
    }

    /// Reads events until one of `kind` (an `ask`, say); returns its data.
    ///
    /// # Panics
    /// When the connection ended, or after 30 s without one.
    pub async fn next_event(&mut self, kind: &str) -> Value {
        let mut found = None;
        let seen = self
            .read_until(|f| {
                if f.event == kind {
                    found = Some(data(f));
                }
                found.is_some()
            })
            .await;
        match found {
            Some(v) if seen => v,
            _ => panic!("GET {}: the stream ended before a `{kind}` event", self.url),
        }
    }

    /// Reads events until the RunComplete of `run_id`; returns every event read, that one
    /// last.
    ///
    /// # Panics
    /// As [`Events::next`]: when the connection ended, or after 10 s without an event.
    pub async fn until_run_complete(&mut self, run_id: &str) -> Vec<Frame> {
        let mut seen = Vec::new();
        loop {
            let f = self.next().await;
            let done = is_run_complete(&f, run_id);
            seen.push(f);
            if done {
                return seen;
            }
        }
    }

    /// Every event read, over every connection, in order.
    pub fn frames(&self) -> &[Frame] {
        &self.frames
    }

    /// The id of the last event read (or the one the client connected with, before any):
    /// where a reconnect resumes.
    pub fn last(&self) -> Option<&str> {
        self.last.as_deref()
    }

    /// The bytes received so far, over every connection (heartbeats included).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Per RunId, among the events read: how many `run_complete` events it had, and the
    /// outcome of the last one.
    pub fn run_completes(&self) -> BTreeMap<String, (usize, String)> {
        let mut seen: BTreeMap<String, (usize, String)> = BTreeMap::new();
        for f in self.frames.iter().filter(|f| f.event == "run_complete") {
            let v = data(f);
            let entry = seen.entry(v["run_id"].as_str().unwrap().to_owned()).or_default();
            entry.0 += 1;
            v["outcome"].as_str().unwrap().clone_into(&mut entry.1);
        }
        seen
    }

    /// The next event, reading the connection until `deadline` when none is waiting.
    async fn read_before(&mut self, deadline: tokio::time::Instant) -> Read {
        loop {
            if let Some(f) = self.ready.pop_front() {
                if f.id.is_some() {
                    self.last.clone_from(&f.id);
                }
                self.frames.push(f.clone());
                return Read::Frame(f);
            }
            let Some(resp) = self.resp.as_mut() else { return Read::Ended };
            match tokio::time::timeout_at(deadline, resp.chunk()).await {
                Err(_) => return Read::Quiet,
                Ok(Ok(Some(chunk))) => {
                    self.bytes += chunk.len();
                    let mut out = Vec::new();
                    self.framer.feed(&chunk, &mut out).expect("the event stream is UTF-8");
                    self.ready.extend(out);
                }
                Ok(Ok(None) | Err(_)) => {
                    self.resp = None;
                    return Read::Ended;
                }
            }
        }
    }
}

/// The events of a whole event-stream body (read some other way than with [`Events`]: a raw
/// socket, say), framed as every client of the project frames them.
///
/// # Panics
/// When the body is not an event stream.
pub fn frames_of(body: &[u8]) -> Vec<Frame> {
    let mut framer = turnstile_wire::sse::Framer::new();
    let mut frames = Vec::new();
    framer.feed(body, &mut frames).expect("an event stream");
    frames
}

/// An event's data as JSON.
///
/// # Panics
/// When it is not JSON.
pub fn data(f: &Frame) -> Value {
    serde_json::from_str(&f.data).unwrap()
}

/// Whether `f` is the RunComplete of `run_id`.
pub fn is_run_complete(f: &Frame, run_id: &str) -> bool {
    f.event == "run_complete" && data(f)["run_id"] == run_id
}

/// The RunIds of the `run_complete` events among `frames`, in order.
pub fn run_complete_ids(frames: &[Frame]) -> Vec<String> {
    frames
        .iter()
        .filter(|f| f.event == "run_complete")
        .map(|f| data(f)["run_id"].as_str().unwrap().to_owned())
        .collect()
}
