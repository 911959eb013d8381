//! Who may call the server: the bearer token, and the `Origin` check that keeps web pages out.
//!
//! - Every request must carry `Authorization: Bearer <token>`; the token is compared in
//!   constant time, and no header is ever logged.
//! - A request with an `Origin` header is refused (403) unless that origin is allowed: a
//!   browser adds `Origin` to every cross-site request, so a web page the user visits cannot
//!   drive a local agent through the browser, even if it guessed the token. Clients that are
//!   not browsers send no `Origin`.
//! - An allowed origin is told so (CORS): its preflight (`OPTIONS` with
//!   `Access-Control-Request-Method`) is answered `204` without a token, and every answer to it
//!   carries `Access-Control-Allow-Origin`, so a page on that origin can use the API with the
//!   token.
//! - The scheme name `Bearer` is matched without regard to case (RFC 7235), and a `401`
//!   carries `WWW-Authenticate: Bearer`.
//!
//! The token is configured, or generated at first start into a file only its owner can read
//! (mode 0600) and reused by later starts.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

use crate::error::ApiError;

/// The bearer token. `Debug` never shows it.
#[derive(Clone)]
pub struct Token(Arc<str>);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(..)")
    }
}

/// Where the token came from, so that the operator is told once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TokenSource {
    /// Given in the configuration or the environment.
    Configured,
    /// Read from this file, written by an earlier start.
    File(PathBuf),
    /// Generated now into this file: the only time it is shown.
    Generated(PathBuf),
}

/// Why a token could not be had.
#[derive(Debug)]
pub struct TokenError {
    /// The file.
    pub path: PathBuf,
    /// What was being done with it.
    pub action: &'static str,
    /// The cause.
    pub source: std::io::Error,
}

impl std::fmt::Display for TokenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "cannot {} the token file `{}`: {}",
            self.action,
            self.path.display(),
            self.source
        )
    }
}

impl std::error::Error for TokenError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

impl Token {
    /// A configured token. Empty or with whitespace inside is refused: such a token cannot
    /// be sent in a header as it is.
    ///
    /// # Errors
    /// A message saying what is wrong with it.
    pub fn new(text: &str) -> Result<Token, String> {
        let text = text.trim();
        if text.is_empty() {
            return Err("the server token is empty".to_owned());
        }
        if text.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err("the server token contains whitespace or control characters".to_owned());
        }
        Ok(Token(text.into()))
    }

    /// The token in `path`, or a new one (32 random bytes, as hex) written there with mode
    /// 0600 when the file does not exist.
    ///
    /// Servers started at once on one machine get one token: a new token is written whole to
    /// a file of its own and then linked to `path`, which fails when another start linked
    /// its token first; that start's token is then read. So no start sees a half-written
    /// file or an error because another start won. On a file system without hard links the
    /// token is written in place (starts at once may then race, as before).
    ///
    /// # Errors
    /// The file cannot be read, created or written, or holds an unusable token.
    pub fn load_or_generate(path: &Path) -> Result<(Token, TokenSource), TokenError> {
        let err = |action, source| TokenError { path: path.to_owned(), action, source };
        if let Some(found) = Token::load(path)? {
            return Ok(found);
        }
        let mut bytes = [0_u8; 32];
        getrandom::fill(&mut bytes)
            .map_err(|e| err("generate", std::io::Error::other(e.to_string())))?;
        let text: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| err("create the directory of", e))?;
        }
        // The new token's own file, beside the token file (a link cannot cross file systems).
        let mut draft = path.as_os_str().to_owned();
        draft.push(format!(".{}.new", &text[..16]));
        let draft = PathBuf::from(draft);
        if let Err(e) = write_private(&draft, &text) {
            let _ = std::fs::remove_file(&draft);
            return Err(TokenError { path: draft, action: "write", source: e });
        }
        let linked = std::fs::hard_link(&draft, path);
        // The draft goes whatever happened; the token file, if linked, keeps the content.
        let _ = std::fs::remove_file(&draft);
        match linked {
            Ok(()) => Ok((Token(text.into()), TokenSource::Generated(path.to_owned()))),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => match Token::load(path)? {
                Some(found) => Ok(found),
                None => Err(err("read", e)),
            },
            // A file system without hard links: written in place, as one start at a time may.
            Err(_) => {
                write_private(path, &text).map_err(|e| err("create", e))?;
                Ok((Token(text.into()), TokenSource::Generated(path.to_owned())))
            }
        }
    }

    /// The token in `path`, or `None` when there is no such file.
    fn load(path: &Path) -> Result<Option<(Token, TokenSource)>, TokenError> {
        let err = |action, source| TokenError { path: path.to_owned(), action, source };
        match std::fs::read_to_string(path) {
            Ok(text) => {
                let token =
                    Token::new(&text).map_err(|why| err("use", std::io::Error::other(why)))?;
                Ok(Some((token, TokenSource::File(path.to_owned()))))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(err("read", e)),
        }
    }

    /// The token's text, to show once or to send as a client.
    #[must_use]
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// True when `presented` is this token, compared in constant time.
    #[must_use]
    pub fn matches(&self, presented: &str) -> bool {
        self.0.as_bytes().ct_eq(presented.as_bytes()).into()
    }
}

/// Writes `text` and a newline to a new file at `path` only its owner can read, synced.
fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path)?;
    file.write_all(text.as_bytes())?;
    file.write_all(b"\n")?;
    file.sync_all()
}

/// What the guard needs.
#[derive(Clone, Debug)]
pub(crate) struct Guard {
    pub(crate) token: Token,
    pub(crate) origins: Arc<[String]>,
}

/// What the browser may send and read across origins.
const CORS_METHODS: &str = "GET, POST, OPTIONS";
const CORS_HEADERS: &str = "authorization, content-type, last-event-id";

/// The middleware in front of every route: the `Origin` check, a preflight's answer, then
/// the token. Every answer to an allowed origin names it.
pub(crate) async fn guard(State(guard): State<Guard>, request: Request, next: Next) -> Response {
    let origin = match allowed_origin(&guard, request.headers()) {
        Ok(origin) => origin,
        Err(e) => return refused(&request, e).into_response(),
    };
    let preflight = request.method() == Method::OPTIONS
        && request.headers().contains_key(header::ACCESS_CONTROL_REQUEST_METHOD);
    let mut response = if preflight && origin.is_some() {
        preflight_answer()
    } else {
        match check_token(&guard, request.headers()) {
            Ok(()) => next.run(request).await,
            Err(e) => refused(&request, e).into_response(),
        }
    };
    if let Some(origin) = origin {
        let headers = response.headers_mut();
        headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
        headers.append(header::VARY, HeaderValue::from_static("origin"));
    }
    response
}

fn refused(request: &Request, e: ApiError) -> ApiError {
    tracing::info!(
        method = %request.method(),
        path = request.uri().path(),
        code = e.code,
        "request refused"
    );
    e
}

/// `204` to a CORS preflight of an allowed origin: the methods and headers the API takes.
fn preflight_answer() -> Response {
    let mut response = StatusCode::NO_CONTENT.into_response();
    let headers = response.headers_mut();
    headers.insert(header::ACCESS_CONTROL_ALLOW_METHODS, HeaderValue::from_static(CORS_METHODS));
    headers.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, HeaderValue::from_static(CORS_HEADERS));
    headers.insert(header::ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static("600"));
    response
}

/// The request's `Origin` when it is an allowed one; `None` without one; 403 otherwise.
fn allowed_origin(guard: &Guard, headers: &HeaderMap) -> Result<Option<HeaderValue>, ApiError> {
    let Some(origin) = headers.get(header::ORIGIN) else { return Ok(None) };
    let allowed =
        origin.to_str().is_ok_and(|o| guard.origins.iter().any(|a| a.eq_ignore_ascii_case(o)));
    if !allowed {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "origin_not_allowed",
            "requests from a web page's origin are refused; allow the origin in the \
             server's configuration",
        ));
    }
    Ok(Some(origin.clone()))
}

fn check_token(guard: &Guard, headers: &HeaderMap) -> Result<(), ApiError> {
    let presented =
        headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| {
            let (scheme, token) = v.trim_start().split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then_some(token)
        });
    match presented {
        Some(p) if guard.token.matches(p.trim()) => Ok(()),
        Some(_) => Err(unauthorized("the bearer token is wrong")),
        None => Err(unauthorized("missing `Authorization: Bearer <token>`")),
    }
}

fn unauthorized(message: &str) -> ApiError {
    ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_token_is_kept_private_and_reused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/token");
        let (token, source) = Token::load_or_generate(&path).unwrap();
        assert_eq!(source, TokenSource::Generated(path.clone()));
        assert_eq!(token.expose().len(), 64);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let (again, source) = Token::load_or_generate(&path).unwrap();
        assert_eq!(source, TokenSource::File(path.clone()));
        assert!(again.matches(token.expose()));
        assert!(!again.matches("x"));
        assert!(!again.matches(&token.expose()[..63]));
        assert_eq!(format!("{token:?}"), "Token(..)");
    }

    /// Several servers started at once on one machine share one token file (the README's
    /// "Run it on several machines"): every start gets the same token, none an error, and
    /// none a file still being written.
    #[test]
    fn servers_starting_at_once_share_one_generated_token() {
        for _ in 0..40 {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("token");
            let barrier = std::sync::Barrier::new(6);
            let got: Vec<_> = std::thread::scope(|s| {
                let starts: Vec<_> = (0..6)
                    .map(|_| {
                        s.spawn(|| {
                            barrier.wait();
                            Token::load_or_generate(&path)
                        })
                    })
                    .collect();
                starts.into_iter().map(|t| t.join().unwrap()).collect()
            });
            let got: Vec<(Token, TokenSource)> =
                got.into_iter().map(|r| r.map_err(|e| e.to_string()).unwrap()).collect();
            let generated =
                got.iter().filter(|(_, s)| matches!(s, TokenSource::Generated(_))).count();
            assert_eq!(generated, 1, "one start generates the token");
            assert!(got.iter().all(|(t, _)| t.matches(got[0].0.expose())));
            let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
            assert_eq!(names.len(), 1, "no temporary file is left: {names:?}");
        }
    }

    #[test]
    fn unusable_tokens_are_refused() {
        assert!(Token::new("").is_err());
        assert!(Token::new("a b").is_err());
        assert!(Token::new(" ok \n").unwrap().matches("ok"));
    }
}
