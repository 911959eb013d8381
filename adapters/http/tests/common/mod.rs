//! A real HTTP/1.1 server on 127.0.0.1 for the tests: each connection reads one request and
//! answers with the next scripted [`Reply`] (recorded bytes, an error, a cut, a stall), then
//! notes when the client closed the socket. Written on a plain `TcpListener` so that a test
//! controls every byte, including the broken ones a real server library would never send.
#![allow(dead_code)] // each test file uses part of it

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use turnstile_wire::recording::Recording;

/// One scripted answer.
#[derive(Clone, Debug)]
pub enum Reply {
    /// A status, headers and a body sent in `pieces` chunks (chunked transfer encoding).
    Body { status: u16, headers: Vec<(String, String)>, body: Vec<u8>, pieces: usize },
    /// A 200 event stream whose first `bytes` bytes are sent, then the socket is closed without
    /// the end of the chunked body (a connection cut mid-event).
    Cut { body: Vec<u8>, bytes: usize },
    /// A 200 event-stream head, then nothing until the client closes.
    HeadersThenNothing,
}

impl Reply {
    /// A 200 event stream of these bytes, in 3 pieces.
    pub fn sse(body: &[u8]) -> Reply {
        Reply::Body {
            status: 200,
            headers: vec![("content-type".into(), "text/event-stream".into())],
            body: body.to_vec(),
            pieces: 3,
        }
    }

    /// An error answer with a JSON (or any) body.
    pub fn status(status: u16, headers: &[(&str, &str)], body: &str) -> Reply {
        Reply::Body {
            status,
            headers: headers.iter().map(|(a, b)| ((*a).to_owned(), (*b).to_owned())).collect(),
            body: body.as_bytes().to_vec(),
            pieces: 1,
        }
    }
}

/// What the client sent.
#[derive(Clone, Debug)]
pub struct Captured {
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: serde_json::Value,
}

impl Captured {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// Per connection: when its answer began, and when the client closed it.
pub type Closes = Arc<Mutex<Vec<(Instant, Option<Instant>)>>>;

/// A running server.
pub struct Server {
    pub base_url: String,
    pub requests: Arc<Mutex<Vec<Captured>>>,
    /// When each connection's head was sent and when the client closed it.
    pub closes: Closes,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Server {
    /// Serves `replies` in order, one per connection; a connection beyond them gets a 500.
    pub async fn start(replies: Vec<Reply>) -> Server {
        let mut replies = replies.into_iter();
        Server::routing(move |_| {
            replies
                .next()
                .unwrap_or_else(|| Reply::status(500, &[], "{\"error\":\"no more replies\"}"))
        })
        .await
    }

    /// Answers each request with what `route` makes of it.
    pub async fn routing(route: impl FnMut(&Captured) -> Reply + Send + 'static) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind 127.0.0.1");
        let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let closes = Arc::new(Mutex::new(Vec::new()));
        let (req, cl) = (requests.clone(), closes.clone());
        let route = Arc::new(Mutex::new(route));
        let task = tokio::spawn(async move {
            loop {
                let Ok((socket, _)) = listener.accept().await else { return };
                let (req, cl, route) = (req.clone(), cl.clone(), route.clone());
                tokio::spawn(async move { serve(socket, route, req, cl).await });
            }
        });
        Server { base_url, requests, closes, task }
    }

    /// Serves a recorded case's responses in order to the requests of turns, and `title` to
    /// every title request (the host asks for a title at a session's first turn, at the same
    /// time as its first step).
    pub async fn replaying(recording: &Recording, title: &[u8]) -> Server {
        let mut replies: Vec<Reply> =
            recording.exchanges.iter().map(|(_, body)| Reply::sse(body)).collect();
        replies.reverse();
        let title = title.to_vec();
        Server::routing(move |req| {
            if req.body.to_string().contains("Write a short title") {
                Reply::sse(&title)
            } else {
                replies
                    .pop()
                    .unwrap_or_else(|| Reply::status(500, &[], "{\"error\":\"no more replies\"}"))
            }
        })
        .await
    }

    /// The requests other than title requests.
    pub fn turn_requests(&self) -> Vec<Captured> {
        self.requests()
            .into_iter()
            .filter(|r| !r.body.to_string().contains("Write a short title"))
            .collect()
    }

    pub fn requests(&self) -> Vec<Captured> {
        self.requests.lock().unwrap().clone()
    }

    /// Waits until `n` requests arrived (a hang guard of 20 s, then panics).
    pub async fn wait_requests(&self, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.requests.lock().unwrap().len() < n {
            assert!(Instant::now() < deadline, "the server did not get {n} requests");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    /// Waits until connection `i` was closed by the client; when it was (a hang guard of
    /// 20 s, then None).
    pub async fn wait_closed(&self, i: usize) -> Option<Instant> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some((_, Some(at))) = self.closes.lock().unwrap().get(i) {
                return Some(*at);
            }
            if Instant::now() > deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
}

async fn read_request(socket: &mut TcpStream) -> Option<Captured> {
    let mut buf = Vec::new();
    let mut chunk = [0_u8; 4096];
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

fn head(status: u16, headers: &[(String, String)]) -> Vec<u8> {
    let mut h =
        format!("HTTP/1.1 {status} Status\r\ntransfer-encoding: chunked\r\nconnection: close\r\n");
    for (k, v) in headers {
        h.push_str(&format!("{k}: {v}\r\n"));
    }
    h.push_str("\r\n");
    h.into_bytes()
}

fn chunk(bytes: &[u8]) -> Vec<u8> {
    let mut c = format!("{:x}\r\n", bytes.len()).into_bytes();
    c.extend_from_slice(bytes);
    c.extend_from_slice(b"\r\n");
    c
}

type Route = Arc<Mutex<dyn FnMut(&Captured) -> Reply + Send>>;

async fn serve(
    mut socket: TcpStream,
    route: Route,
    requests: Arc<Mutex<Vec<Captured>>>,
    closes: Closes,
) {
    let Some(captured) = read_request(&mut socket).await else { return };
    let reply = (route.lock().unwrap())(&captured);
    let index = {
        requests.lock().unwrap().push(captured);
        let mut c = closes.lock().unwrap();
        c.push((Instant::now(), None));
        c.len() - 1
    };
    let sse = vec![("content-type".to_owned(), "text/event-stream".to_owned())];
    // Ok(true): close the socket now (a cut); Ok(false): wait for the client to close it.
    let result: std::io::Result<bool> = async {
        match reply {
            Reply::Body { status, headers, body, pieces } => {
                socket.write_all(&head(status, &headers)).await?;
                let size = body.len().div_ceil(pieces.max(1)).max(1);
                for piece in body.chunks(size) {
                    socket.write_all(&chunk(piece)).await?;
                    socket.flush().await?;
                }
                socket.write_all(b"0\r\n\r\n").await?;
            }
            Reply::Cut { body, bytes } => {
                socket.write_all(&head(200, &sse)).await?;
                socket.write_all(&chunk(&body[..bytes.min(body.len())])).await?;
                socket.flush().await?;
                return Ok(true);
            }
            Reply::HeadersThenNothing => {
                socket.write_all(&head(200, &sse)).await?;
                socket.flush().await?;
            }
        }
        Ok(false)
    }
    .await;
    if !matches!(result, Ok(false)) {
        closes.lock().unwrap()[index].1 = Some(Instant::now());
        return;
    }
    // Until the client closes: a read of 0 bytes (or an error) is the close.
    let mut sink = [0_u8; 256];
    loop {
        match socket.read(&mut sink).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
    closes.lock().unwrap()[index].1 = Some(Instant::now());
}

/// The recorded cases of the repository.
pub fn cases() -> Vec<Recording> {
    Recording::read_all(&fixtures()).expect("the recorded cases")
}

pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/providers")
}
