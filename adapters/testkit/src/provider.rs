//! A fake LLM provider: a real HTTP/1.1 server on 127.0.0.1 that answers each request with a
//! scripted [`Reply`].
//!
//! Each connection reads one request (path, headers and JSON body, kept as a [`Captured`]),
//! answers it with the reply the script or the route gives, and then notes when the client
//! closed the socket (a cancel shows as a close). Written on a plain `TcpListener` so that a
//! test controls every byte, including the broken ones a real server library would never send:
//! a body cut mid-event, a head and then nothing, a stream paced in time.
//!
//! What it guarantees:
//! - It listens on 127.0.0.1 only, on a port of its own ([`FakeProvider::base_url`] ends in
//!   `/v1`, as a provider's base URL does).
//! - Every answer is sent with `connection: close` and a chunked body, so the client sees each
//!   piece of a body when it is sent, and each request has a connection of its own.
//! - Every wait of a test is bounded: [`FakeProvider::wait_requests`] and
//!   [`FakeProvider::wait_steps`] panic after 20 s, [`FakeProvider::wait_closed`] answers
//!   `None` after 20 s. A client that opens a connection and sends no request within 60 s is
//!   dropped.
//! - Dropping the server stops it accepting; connections already open end when their client
//!   closes them or the test's runtime ends.
//!
//! Title requests (the host asks for a session's title at its first turn, at the same time as
//! the turn's first step) are recognised by [`TITLE_MARK`]: [`FakeProvider::titled`],
//! [`FakeProvider::anthropic`] and [`FakeProvider::replaying`] answer them apart, so the
//! script's order is the order of the steps whatever the race between the two.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use turnstile_wire::recording::Recording;

/// The start of the system prompt of a title request (`turnstile_http::prompt::TITLE_PROMPT`
/// starts so): a request whose body holds it anywhere is a title request.
pub const TITLE_MARK: &str = "Write a short title";

/// How long a test waits for requests or a close before it fails.
const WAIT: Duration = Duration::from_secs(20);

/// How long a connection may take to send its request.
const REQUEST_WITHIN: Duration = Duration::from_secs(60);

/// One scripted answer.
#[derive(Clone, Debug)]
pub enum Reply {
    /// A status, headers and a body sent in `pieces` chunks, each flushed on its own.
    Body {
        /// The HTTP status.
        status: u16,
        /// The headers, exactly these (no `content-type` unless given).
        headers: Vec<(String, String)>,
        /// The body's bytes.
        body: Vec<u8>,
        /// How many chunks of about equal size the body is sent in (0 counts as 1).
        pieces: usize,
    },
    /// A 200 event stream sent in pieces, each after its pause in milliseconds.
    Paced(Vec<(u64, Vec<u8>)>),
    /// A 200 event stream whose first `bytes` bytes are sent, then the socket is closed without
    /// the end of the body (a connection cut mid-event).
    Cut {
        /// The stream that would have been sent.
        body: Vec<u8>,
        /// How much of it is sent before the cut.
        bytes: usize,
    },
    /// A 200 event-stream head, then nothing until the client closes the connection (a stalled
    /// provider, or one that thinks for a long time).
    Hang,
}

impl Reply {
    /// A 200 event stream (`content-type: text/event-stream`) of these bytes, in one piece.
    pub fn sse(body: impl AsRef<[u8]>) -> Reply {
        Reply::Body {
            status: 200,
            headers: vec![("content-type".into(), "text/event-stream".into())],
            body: body.as_ref().to_vec(),
            pieces: 1,
        }
    }

    /// An answer with `status`, exactly these headers and `body` (an error, usually).
    pub fn status(status: u16, headers: &[(&str, &str)], body: &str) -> Reply {
        Reply::Body {
            status,
            headers: headers.iter().map(|(a, b)| ((*a).to_owned(), (*b).to_owned())).collect(),
            body: body.as_bytes().to_vec(),
            pieces: 1,
        }
    }

    /// The same with `content-type: application/json` before the headers given (an error as a
    /// provider's API sends it).
    pub fn json(status: u16, headers: &[(&str, &str)], body: &str) -> Reply {
        let mut all = vec![("content-type", "application/json")];
        all.extend_from_slice(headers);
        Reply::status(status, &all, body)
    }

    /// This [`Reply::Body`] with its body sent in `pieces` chunks (a decoder then sees events
    /// split across reads).
    ///
    /// # Panics
    /// On any other reply: only a body has pieces.
    #[must_use]
    pub fn in_pieces(self, pieces: usize) -> Reply {
        match self {
            Reply::Body { status, headers, body, .. } => {
                Reply::Body { status, headers, body, pieces }
            }
            other => panic!("only a Reply::Body is sent in pieces, not {other:?}"),
        }
    }

    /// What a script answers once it ran out (or had nothing): a 500 that says so.
    fn no_more() -> Reply {
        Reply::status(500, &[], "{\"error\":\"no more replies\"}")
    }
}

/// A request the server received.
#[derive(Clone, Debug)]
pub struct Captured {
    /// The request target, as sent (`/v1/messages`).
    pub path: String,
    /// The headers, names as sent.
    pub headers: Vec<(String, String)>,
    /// The body as JSON (`null` when it was empty or not JSON).
    pub body: serde_json::Value,
}

impl Captured {
    /// The value of header `name` (any case), when it was sent.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// Whether this is a title request (its body holds [`TITLE_MARK`]).
    pub fn is_title(&self) -> bool {
        self.body.to_string().contains(TITLE_MARK)
    }
}

/// One connection that sent a request: the request, and when the client closed it.
struct Exchange {
    request: Captured,
    closed: Option<Instant>,
}

/// The connections in the order their requests were answered.
type Log = Arc<Mutex<Vec<Exchange>>>;

/// What answers a request.
type Route = Arc<Mutex<dyn FnMut(&Captured) -> Reply + Send>>;

/// A running fake provider; dropping it stops it accepting connections.
pub struct FakeProvider {
    /// `http://127.0.0.1:PORT/v1`: the base URL to configure a provider with.
    pub base_url: String,
    log: Log,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeProvider {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeProvider {
    /// Answers every request, title requests included, with the next of `replies` in the order
    /// the requests arrive; once they ran out, with the last one again (a script of one
    /// [`Reply::Hang`] stalls every attempt). With no replies at all, every request gets a 500
    /// saying there are no more.
    ///
    /// For a host, which sends title requests beside the steps, use [`FakeProvider::titled`].
    pub async fn start(replies: Vec<Reply>) -> FakeProvider {
        FakeProvider::scripted(replies, None).await
    }

    /// Answers title requests with `title`, every one; the other requests (the steps) get
    /// `replies` in order, the last one again once they ran out (as [`FakeProvider::start`]).
    pub async fn titled(replies: Vec<Reply>, title: Reply) -> FakeProvider {
        FakeProvider::scripted(replies, Some(title)).await
    }

    /// A provider for a host on the Anthropic messages API: the steps get `replies` (as
    /// [`FakeProvider::titled`]), title requests the title `A test title` as an Anthropic
    /// stream ([`crate::anthropic::text_stream`]).
    pub async fn anthropic(replies: Vec<Reply>) -> FakeProvider {
        let title = Reply::sse(crate::anthropic::text_stream("A test title"));
        FakeProvider::titled(replies, title).await
    }

    /// Serves a recorded case's responses in order, each in 3 pieces, to the steps, and `title`
    /// (in 3 pieces) to every title request. A step beyond the recorded ones gets a 500 saying
    /// there are no more: a replay has exactly the recorded answers.
    pub async fn replaying(recording: &Recording, title: &[u8]) -> FakeProvider {
        let mut replies: Vec<Reply> =
            recording.exchanges.iter().map(|(_, body)| Reply::sse(body).in_pieces(3)).collect();
        replies.reverse();
        let title = Reply::sse(title).in_pieces(3);
        FakeProvider::routing(move |req| {
            if req.is_title() {
                title.clone()
            } else {
                replies.pop().unwrap_or_else(Reply::no_more)
            }
        })
        .await
    }

    /// Answers each request with what `route` makes of it (called once per request, in the
    /// order they arrive).
    pub async fn routing(route: impl FnMut(&Captured) -> Reply + Send + 'static) -> FakeProvider {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind a port of 127.0.0.1");
        let base_url = format!("http://{}/v1", listener.local_addr().expect("the bound address"));
        let log: Log = Arc::new(Mutex::new(Vec::new()));
        let route: Route = Arc::new(Mutex::new(route));
        let connections = log.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((socket, _)) = listener.accept().await else { return };
                let (log, route) = (connections.clone(), route.clone());
                tokio::spawn(async move { serve(socket, route, log).await });
            }
        });
        FakeProvider { base_url, log, task }
    }

    /// The script behind [`FakeProvider::start`] and [`FakeProvider::titled`].
    async fn scripted(replies: Vec<Reply>, title: Option<Reply>) -> FakeProvider {
        let mut next = 0;
        FakeProvider::routing(move |req| {
            if let Some(title) = title.as_ref().filter(|_| req.is_title()) {
                return title.clone();
            }
            let i = next.min(replies.len().saturating_sub(1));
            next += 1;
            replies.get(i).cloned().unwrap_or_else(Reply::no_more)
        })
        .await
    }

    /// Every request received so far, in the order they were answered.
    pub fn requests(&self) -> Vec<Captured> {
        self.log.lock().unwrap().iter().map(|e| e.request.clone()).collect()
    }

    /// The bodies of the steps received so far (title requests left out), in order.
    pub fn steps(&self) -> Vec<serde_json::Value> {
        self.log
            .lock()
            .unwrap()
            .iter()
            .filter(|e| !e.request.is_title())
            .map(|e| e.request.body.clone())
            .collect()
    }

    /// Waits until `n` requests arrived, title requests included.
    ///
    /// # Panics
    /// After 20 s without them.
    pub async fn wait_requests(&self, n: usize) {
        let deadline = Instant::now() + WAIT;
        while self.log.lock().unwrap().len() < n {
            assert!(Instant::now() < deadline, "the provider did not get {n} requests in 20 s");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    /// Waits until `n` steps arrived (title requests left out).
    ///
    /// # Panics
    /// After 20 s without them, saying how many came.
    pub async fn wait_steps(&self, n: usize) {
        let deadline = Instant::now() + WAIT;
        while self.steps().len() < n {
            assert!(Instant::now() < deadline, "the provider got {} steps", self.steps().len());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// When the client closed the connection of request `i` (an index of
    /// [`FakeProvider::requests`]), if it did yet; without waiting.
    pub fn closed_at(&self, i: usize) -> Option<Instant> {
        self.log.lock().unwrap().get(i).and_then(|e| e.closed)
    }

    /// Waits until the client closed the connection of request `i` (an index of
    /// [`FakeProvider::requests`]); when it did, or `None` after 20 s.
    pub async fn wait_closed(&self, i: usize) -> Option<Instant> {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(at) = self.closed_at(i) {
                return Some(at);
            }
            if Instant::now() > deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
}

/// Reads one request: its head, then a body of its `content-length`.
async fn read_request(socket: &mut TcpStream) -> Option<Captured> {
    let mut buf = Vec::new();
    let mut chunk = [0_u8; 8192];
    let head_end = loop {
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let path = lines.next()?.split(' ').nth(1)?.to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':').map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned())))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    while buf.len() < head_end + length {
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let body = serde_json::from_slice(&buf[head_end..head_end + length]).unwrap_or_default();
    Some(Captured { path, headers, body })
}

/// A response head with a chunked body.
fn head(status: u16, headers: &[(String, String)]) -> Vec<u8> {
    let mut h =
        format!("HTTP/1.1 {status} Status\r\ntransfer-encoding: chunked\r\nconnection: close\r\n");
    for (k, v) in headers {
        h.push_str(&format!("{k}: {v}\r\n"));
    }
    h.push_str("\r\n");
    h.into_bytes()
}

/// One chunk of a chunked body (never empty: an empty chunk would end the body).
fn chunk(bytes: &[u8]) -> Vec<u8> {
    let mut c = format!("{:x}\r\n", bytes.len()).into_bytes();
    c.extend_from_slice(bytes);
    c.extend_from_slice(b"\r\n");
    c
}

/// The end of a chunked body.
const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

/// Sends `reply`; `Ok(true)` when the socket is to be closed now (a cut), `Ok(false)` when the
/// client is to close it.
async fn answer(socket: &mut TcpStream, reply: Reply) -> std::io::Result<bool> {
    let sse = [("content-type".to_owned(), "text/event-stream".to_owned())];
    match reply {
        Reply::Body { status, headers, body, pieces } => {
            socket.write_all(&head(status, &headers)).await?;
            let size = body.len().div_ceil(pieces.max(1)).max(1);
            for piece in body.chunks(size) {
                socket.write_all(&chunk(piece)).await?;
                socket.flush().await?;
            }
            socket.write_all(LAST_CHUNK).await?;
        }
        Reply::Paced(pieces) => {
            socket.write_all(&head(200, &sse)).await?;
            socket.flush().await?;
            for (pause, piece) in pieces {
                tokio::time::sleep(Duration::from_millis(pause)).await;
                if !piece.is_empty() {
                    socket.write_all(&chunk(&piece)).await?;
                    socket.flush().await?;
                }
            }
            socket.write_all(LAST_CHUNK).await?;
        }
        Reply::Cut { body, bytes } => {
            socket.write_all(&head(200, &sse)).await?;
            let sent = &body[..bytes.min(body.len())];
            if !sent.is_empty() {
                socket.write_all(&chunk(sent)).await?;
            }
            socket.flush().await?;
            return Ok(true);
        }
        Reply::Hang => socket.write_all(&head(200, &sse)).await?,
    }
    socket.flush().await?;
    Ok(false)
}

/// One connection: its request, its answer, and the time the client closed it.
async fn serve(mut socket: TcpStream, route: Route, log: Log) {
    let Ok(Some(request)) = tokio::time::timeout(REQUEST_WITHIN, read_request(&mut socket)).await
    else {
        return;
    };
    // Routed and logged at once: the log's order is the order of the answers.
    let (reply, index) = {
        let mut log = log.lock().unwrap();
        let reply = (route.lock().unwrap())(&request);
        log.push(Exchange { request, closed: None });
        (reply, log.len() - 1)
    };
    if matches!(answer(&mut socket, reply).await, Ok(false)) {
        // Until the client closes: a read of 0 bytes (or an error) is the close.
        let mut sink = [0_u8; 256];
        while let Ok(1..) = socket.read(&mut sink).await {}
    }
    log.lock().unwrap()[index].closed = Some(Instant::now());
}
