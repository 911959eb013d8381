//! HTTP error answers and response headers into the core's [`ProviderError`] (SPEC 4.5, 4.6).
//!
//! Only classification: the status, `retry-after-ms` and `retry-after` (seconds or an HTTP
//! date, converted with the caller's clock reading, since this crate reads no clock),
//! `x-should-retry`, and the provider's error title and message from the body. Whether that
//! means a retry, a credential refresh or a failed submission is the core's decision.

use serde::Deserialize;
use turnstile_core::{ErrorClass, ProviderError};

/// Response headers as name and value pairs; names compare case-insensitively.
pub trait Headers {
    /// The first value of the header `name`.
    fn header(&self, name: &str) -> Option<&str>;
}

impl Headers for [(String, String)] {
    fn header(&self, name: &str) -> Option<&str> {
        self.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

impl Headers for Vec<(String, String)> {
    fn header(&self, name: &str) -> Option<&str> {
        self.as_slice().header(name)
    }
}

/// Most of an error body that is worth quoting in a message.
const BODY_QUOTE_MAX: usize = 500;

/// The error of an HTTP answer that is not a success: `status`, its headers, its body (read to
/// the end by the transport), and the time the answer arrived in milliseconds since the Unix
/// epoch (for a `retry-after` given as a date).
///
/// 401 is the auth signal (class `unauthorized`; 403 is not one); the retry headers are read
/// whatever the status; the message and title come from the body's JSON error object when it
/// has one (`{"error": {"type", "code", "message"}}` of OpenAI, `{"type": "error", "error":
/// {"type", "message"}}` of Anthropic, `{"error": "text"}`, `{"message": "text"}`), else from
/// the body's text.
#[must_use]
pub fn classify(
    status: u16,
    headers: &dyn Headers,
    body: &[u8],
    now_unix_ms: u64,
) -> ProviderError {
    let (title, message) = error_text(body);
    let message = match message {
        Some(m) => m,
        None => {
            let text = String::from_utf8_lossy(body);
            let text = text.trim();
            if text.is_empty() {
                format!("HTTP {status}")
            } else {
                format!("HTTP {status}: {}", quote(text))
            }
        }
    };
    ProviderError {
        class: if status == 401 { ErrorClass::Unauthorized } else { ErrorClass::Provider },
        status: Some(status),
        should_retry: headers.header("x-should-retry").and_then(|v| match v.trim() {
            "true" => Some(true),
            "false" => Some(false),
            _ => None,
        }),
        retry_after_ms: headers.header("retry-after-ms").and_then(seconds_or_ms(1.0)),
        retry_after: headers.header("retry-after").and_then(|v| retry_after(v, now_unix_ms)),
        title,
        message,
    }
}

/// A stream that ended without its terminal event (retryable, SPEC 4.5).
#[must_use]
pub fn incomplete() -> ProviderError {
    ProviderError {
        class: ErrorClass::Incomplete,
        message: "stream ended without a finish".to_owned(),
        ..ProviderError::default()
    }
}

/// A transport failure: the connection could not be made, broke, or the stream could not be
/// read (retryable, SPEC 4.5).
#[must_use]
pub fn transport(message: impl Into<String>) -> ProviderError {
    ProviderError {
        class: ErrorClass::Transport,
        message: message.into(),
        ..ProviderError::default()
    }
}

/// The error of a mid-stream error event: `kind` is the provider's error type or code, which
/// becomes the title; the overload, rate-limit and server kinds are retryable, an
/// authentication kind is the auth signal.
#[must_use]
pub(crate) fn stream_error(kind: Option<&str>, message: Option<&str>) -> ProviderError {
    let class = match kind {
        Some("authentication_error" | "invalid_api_key") => ErrorClass::Unauthorized,
        _ => ErrorClass::Provider,
    };
    let retryable = matches!(
        kind,
        Some(
            "overloaded_error"
                | "api_error"
                | "rate_limit_error"
                | "rate_limit_exceeded"
                | "server_error"
                | "internal_error"
                | "timeout_error"
        )
    );
    ProviderError {
        class,
        should_retry: retryable.then_some(true),
        title: kind.map(title_of),
        message: message
            .filter(|m| !m.is_empty())
            .unwrap_or("the provider reported an error")
            .to_owned(),
        ..ProviderError::default()
    }
}

fn title_of(kind: &str) -> String {
    kind.replace('_', " ")
}

fn quote(text: &str) -> String {
    if text.len() <= BODY_QUOTE_MAX {
        return text.to_owned();
    }
    let mut end = BODY_QUOTE_MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[derive(Deserialize)]
struct Body {
    #[serde(default)]
    error: Option<ErrorField>,
    #[serde(default)]
    message: Option<String>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum ErrorField {
    Object {
        #[serde(default, rename = "type")]
        kind: Option<String>,
        #[serde(default)]
        code: Option<serde_json::Value>,
        #[serde(default)]
        message: Option<String>,
    },
    Text(String),
}

/// The title and message of a JSON error body.
pub(crate) fn error_text(body: &[u8]) -> (Option<String>, Option<String>) {
    let Ok(body) = serde_json::from_slice::<Body>(body) else { return (None, None) };
    match body.error {
        Some(ErrorField::Object { kind, code, message }) => {
            let code = code.and_then(|c| c.as_str().map(str::to_owned));
            let title = kind.or(code).filter(|k| !k.is_empty()).map(|k| title_of(&k));
            (title, message.filter(|m| !m.is_empty()))
        }
        Some(ErrorField::Text(text)) => (None, Some(text)),
        None => (None, body.message),
    }
}

/// Parses seconds (with `scale` 1000) or milliseconds (with `scale` 1), integer or decimal.
fn seconds_or_ms(scale: f64) -> impl Fn(&str) -> Option<u64> {
    move |v: &str| {
        let n: f64 = v.trim().parse().ok()?;
        (n.is_finite() && n >= 0.0).then(|| (n * scale).round() as u64)
    }
}

/// `retry-after`: seconds, or an HTTP date (a date in the past is 0).
fn retry_after(v: &str, now_unix_ms: u64) -> Option<u64> {
    if let Some(ms) = seconds_or_ms(1000.0)(v) {
        return Some(ms);
    }
    let at = httpdate::parse_http_date(v.trim()).ok()?;
    let at_ms = at.duration_since(std::time::UNIX_EPOCH).ok()?.as_millis();
    Some(u64::try_from(at_ms.saturating_sub(u128::from(now_unix_ms))).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(a, b)| ((*a).to_owned(), (*b).to_owned())).collect()
    }

    #[test]
    fn status_classes_and_the_auth_signal() {
        let e = classify(401, &h(&[]), br#"{"error":{"message":"bad key","type":"invalid_request_error","code":"invalid_api_key"}}"#, 0);
        assert!(e.is_unauthorized());
        assert_eq!(e.message, "bad key");
        assert_eq!(e.title.as_deref(), Some("invalid request error"));
        let e = classify(403, &h(&[]), b"", 0);
        assert!(!e.is_unauthorized() && !e.is_retryable());
        assert_eq!(e.message, "HTTP 403");
        for status in [408, 409, 429, 500, 503, 529] {
            assert!(classify(status, &h(&[]), b"", 0).is_retryable(), "{status}");
        }
        assert!(!classify(400, &h(&[]), b"", 0).is_retryable());
        assert!(classify(400, &h(&[("X-Should-Retry", "true")]), b"", 0).is_retryable());
    }

    #[test]
    fn retry_headers_in_each_form() {
        let e = classify(429, &h(&[("retry-after-ms", "1500"), ("retry-after", "3")]), b"", 0);
        assert_eq!((e.retry_after_ms, e.retry_after), (Some(1500), Some(3000)));
        assert_eq!(e.header_delay_ms(), Some(1500), "retry-after-ms wins");
        let e = classify(429, &h(&[("Retry-After", "1.5")]), b"", 0);
        assert_eq!(e.retry_after, Some(1500));
        // Wed, 21 Oct 2015 07:28:00 GMT = 1445412480 s.
        let date = "Wed, 21 Oct 2015 07:28:00 GMT";
        let e = classify(503, &h(&[("retry-after", date)]), b"", 1_445_412_470_000);
        assert_eq!(e.retry_after, Some(10_000));
        let e = classify(503, &h(&[("retry-after", date)]), b"", 1_445_412_490_000);
        assert_eq!(e.retry_after, Some(0), "a date in the past");
        assert_eq!(classify(503, &h(&[("retry-after", "soon")]), b"", 0).retry_after, None);
    }

    #[test]
    fn bodies_of_each_shape() {
        let e = classify(
            529,
            &h(&[]),
            br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
            0,
        );
        assert_eq!(
            (e.title.as_deref(), e.message.as_str()),
            (Some("overloaded error"), "Overloaded")
        );
        let e = classify(500, &h(&[]), br#"{"error":"boom"}"#, 0);
        assert_eq!((e.title, e.message.as_str()), (None, "boom"));
        let e = classify(502, &h(&[]), b"<html>Bad Gateway</html>", 0);
        assert_eq!(e.message, "HTTP 502: <html>Bad Gateway</html>");
        let long = "é".repeat(400);
        assert!(classify(500, &h(&[]), long.as_bytes(), 0).message.ends_with('…'));
    }
}
