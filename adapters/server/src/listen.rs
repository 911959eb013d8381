//! The connections (SPEC 9 "Server"): what a client can hold of the server before the router
//! sees a request, bounded so that no client can starve the others or the store.
//!
//! - **A cap on open connections**, below the process's limit of open files: the accept loop
//!   takes a slot before it accepts, so connections beyond the cap wait in the kernel's
//!   backlog instead of taking the descriptors the store, the tools and the providers need
//!   ([`connection_budget`] raises the soft limit to the hard one and keeps
//!   [`FILES_KEPT_FOR_THE_HOST`] in reserve; a limit too low to serve is refused at start).
//! - **A header timeout**: a request head must arrive within it, and a kept-alive connection
//!   idle for that long is closed, so idle and byte-a-second connections give their slot back.
//! - **JSON errors before the router**: the first request of a connection is read and checked
//!   here, so a malformed request (`400 malformed_request`), a URI over [`URI_BYTES_MAX`]
//!   (`414 uri_too_long`) and a head over [`HEAD_BYTES_MAX`] (`431 headers_too_large`) get the
//!   JSON error body every other refusal has; later requests of a kept-alive connection are
//!   checked by the router's first layer the same way (hyper's own, body-less refusals are kept
//!   for heads far beyond these limits).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::StatusCode;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

use crate::error::ApiError;

/// The longest request URI, in bytes (`414 uri_too_long` above it).
pub const URI_BYTES_MAX: usize = 8 << 10;
/// The largest request head (request line and headers), in bytes (`431 headers_too_large`).
pub const HEAD_BYTES_MAX: usize = 64 << 10;
/// Open files kept for the host (the store's connections, logs, tool processes and their pipes,
/// MCP servers, provider connections) out of the process's limit.
pub const FILES_KEPT_FOR_THE_HOST: u64 = 128;
/// The fewest connections a server may be left with by the file limit.
pub const CONNECTIONS_MIN: usize = 32;

/// How the server holds connections.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// The most connections open at once; more wait to be accepted.
    pub max: usize,
    /// How long a request head may take to arrive, and a kept-alive connection may stay idle.
    pub header_timeout: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> ConnectionLimits {
        ConnectionLimits { max: 1024, header_timeout: Duration::from_secs(20) }
    }
}

/// The file limit is too low to serve.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileLimitTooLow {
    /// The process's limit of open files (after raising the soft limit to the hard one).
    pub limit: u64,
}

impl std::fmt::Display for FileLimitTooLow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "this process may open only {} files (`ulimit -n`), and the server keeps {} of them \
             for its store, tools and providers and needs room for at least {} connections: \
             raise the limit, e.g. `ulimit -n 4096`",
            self.limit, FILES_KEPT_FOR_THE_HOST, CONNECTIONS_MIN
        )
    }
}

impl std::error::Error for FileLimitTooLow {}

/// How many connections the server may hold: `wanted`, cut to the process's limit of open
/// files less [`FILES_KEPT_FOR_THE_HOST`]. The soft limit is first raised to the hard one (as
/// far as the operating system allows), so a default shell limit of 1,024 does not decide it.
///
/// # Errors
/// [`FileLimitTooLow`] when fewer than [`CONNECTIONS_MIN`] connections would fit.
pub fn connection_budget(wanted: usize) -> Result<usize, FileLimitTooLow> {
    let limit = file_limit();
    let room = limit.saturating_sub(FILES_KEPT_FOR_THE_HOST);
    let room = usize::try_from(room).unwrap_or(usize::MAX);
    if room < CONNECTIONS_MIN {
        return Err(FileLimitTooLow { limit });
    }
    Ok(wanted.min(room))
}

/// The soft limit of open files, raised to the hard limit first where that is possible.
#[cfg(unix)]
fn file_limit() -> u64 {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else { return u64::MAX };
    if soft < hard && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
        return hard;
    }
    soft
}

#[cfg(not(unix))]
fn file_limit() -> u64 {
    u64::MAX
}

/// Serves `router` on `listener` until `shutdown` completes, then lets the open connections
/// finish (a caller bounds that wait); see the module docs for what each connection may hold.
///
/// # Errors
/// Only what accepting connections fails with for good; a failing connection ends alone.
pub async fn serve(
    listener: TcpListener,
    router: axum::Router,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let slots = Arc::new(Semaphore::new(limits.max.max(1)));
    let graceful = GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_buf_size(HEAD_BYTES_MAX * 4);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        // A slot first: beyond the cap, connections wait in the backlog, unaccepted.
        let slot = tokio::select! {
            biased;
            () = &mut shutdown => break,
            slot = slots.clone().acquire_owned() => slot.map_err(io::Error::other)?,
        };
        let (stream, _) = tokio::select! {
            biased;
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) if is_per_connection(&e) => continue,
                Err(e) => {
                    // Out of descriptors or memory: wait a moment instead of spinning.
                    tracing::warn!(error = %e, "cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        // Events are small and must not wait for Nagle's algorithm.
        let _ = stream.set_nodelay(true);
        let (http, router, timeout) = (http.clone(), router.clone(), limits.header_timeout);
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            let _slot = slot;
            let Some(io) = first_head(stream, timeout).await else { return };
            let service = TowerToHyperService::new(router);
            let connection = http.serve_connection(TokioIo::new(io), service);
            if let Err(e) = watcher.watch(connection).await {
                tracing::debug!(error = %e, "connection ended with an error");
            }
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

/// An accept error that concerns one connection only.
fn is_per_connection(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionRefused
            | io::ErrorKind::Interrupted
    )
}

/// Reads the connection's first request head (within `timeout`) and checks it: a good one is
/// handed on with the bytes read put back in front; a bad one gets its JSON error and the
/// connection is closed; a head that never completes closes it.
async fn first_head(mut stream: TcpStream, timeout: Duration) -> Option<Rewind> {
    let mut buf = Vec::with_capacity(1024);
    let read = tokio::time::timeout(timeout, async {
        let mut chunk = [0_u8; 4096];
        loop {
            match head_status(&buf) {
                Head::Incomplete if buf.len() <= HEAD_BYTES_MAX => {}
                status => return Ok::<Head, io::Error>(status),
            }
            let n = stream.read(&mut chunk).await?;
            if n == 0 {
                return Ok(Head::Closed);
            }
            buf.extend_from_slice(&chunk[..n]);
        }
    })
    .await;
    let refusal = match read {
        Ok(Ok(Head::Good)) => return Some(Rewind { prefix: Bytes::from(buf), inner: stream }),
        Ok(Ok(Head::Malformed(why))) => ApiError::new(
            StatusCode::BAD_REQUEST,
            "malformed_request",
            format!("the request is not valid HTTP/1.1: {why}"),
        ),
        Ok(Ok(Head::UriTooLong)) => uri_too_long(),
        Ok(Ok(Head::Incomplete)) => headers_too_large(),
        Ok(Ok(Head::Closed)) | Ok(Err(_)) | Err(_) => return None,
    };
    let _ = stream.write_all(&error_bytes(&refusal)).await;
    let _ = stream.shutdown().await;
    None
}

/// What the bytes read so far hold.
#[derive(Debug, PartialEq, Eq)]
enum Head {
    /// A whole, well-formed request head.
    Good,
    /// Not yet a whole head.
    Incomplete,
    /// Not HTTP.
    Malformed(String),
    /// A request line whose URI is over [`URI_BYTES_MAX`].
    UriTooLong,
    /// The client closed the connection first.
    Closed,
}

fn head_status(buf: &[u8]) -> Head {
    let mut headers = [httparse::EMPTY_HEADER; 128];
    let mut request = httparse::Request::new(&mut headers);
    match request.parse(buf) {
        Ok(httparse::Status::Complete(_)) => {
            if request.path.is_some_and(|p| p.len() > URI_BYTES_MAX) {
                Head::UriTooLong
            } else {
                Head::Good
            }
        }
        Ok(httparse::Status::Partial) => {
            // The request line alone may already be too long.
            let line = buf.split(|b| *b == b'\n').next().unwrap_or_default();
            if buf.len() > URI_BYTES_MAX && !buf.contains(&b'\n') || line.len() > URI_BYTES_MAX + 64
            {
                Head::UriTooLong
            } else {
                Head::Incomplete
            }
        }
        Err(httparse::Error::TooManyHeaders) => Head::Incomplete,
        Err(e) => Head::Malformed(e.to_string()),
    }
}

/// `414 uri_too_long`.
pub(crate) fn uri_too_long() -> ApiError {
    ApiError::new(
        StatusCode::URI_TOO_LONG,
        "uri_too_long",
        format!("the request URI is longer than {URI_BYTES_MAX} bytes"),
    )
}

/// `431 headers_too_large`.
pub(crate) fn headers_too_large() -> ApiError {
    ApiError::new(
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
        "headers_too_large",
        format!("the request head is larger than {HEAD_BYTES_MAX} bytes"),
    )
}

/// A whole HTTP/1.1 response carrying `e`'s JSON body, closing the connection.
fn error_bytes(e: &ApiError) -> Vec<u8> {
    let body = serde_json::json!({"error": {"code": e.code, "message": e.message}}).to_string();
    format!(
        "HTTP/1.1 {} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
         connection: close\r\n\r\n{body}",
        e.status.as_u16(),
        e.status.canonical_reason().unwrap_or(""),
        body.len()
    )
    .into_bytes()
}

/// A connection whose first bytes were read already: they are read again first.
struct Rewind {
    prefix: Bytes,
    inner: TcpStream,
}

impl AsyncRead for Rewind {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.prefix.is_empty() {
            let n = this.prefix.len().min(buf.remaining());
            buf.put_slice(&this.prefix.split_to(n));
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Rewind {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_are_told_apart() {
        assert_eq!(head_status(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n"), Head::Good);
        assert_eq!(head_status(b"GET /v1/health HTTP/1.1\r\nHo"), Head::Incomplete);
        assert!(matches!(head_status(b"\x16\x03\x01 garbage\r\n\r\n"), Head::Malformed(_)));
        let long = format!("GET /{} HTTP/1.1\r\n\r\n", "a".repeat(URI_BYTES_MAX + 1));
        assert_eq!(head_status(long.as_bytes()), Head::UriTooLong);
        let partial = format!("GET /{}", "a".repeat(URI_BYTES_MAX + 100));
        assert_eq!(head_status(partial.as_bytes()), Head::UriTooLong);
    }

    #[test]
    fn an_error_response_is_whole_http_with_the_json_body() {
        let text = String::from_utf8(error_bytes(&uri_too_long())).unwrap_or_default();
        assert!(text.starts_with("HTTP/1.1 414 URI Too Long\r\n"), "{text}");
        let body = text.split("\r\n\r\n").nth(1).unwrap_or_default();
        let v: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
        assert_eq!(v["error"]["code"], "uri_too_long");
        assert!(text.contains(&format!("content-length: {}\r\n", body.len())));
    }
}
