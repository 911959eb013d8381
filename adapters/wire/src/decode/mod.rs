//! Decoding a streamed response: bytes in, core [`StepEvent`]s out (SPEC 9 "Providers").
//!
//! One [`Decoder`] per response. Feed it the body in chunks of any size; the same bytes give the
//! same events however they are split. What every API's decoder guarantees:
//!
//! - the events form a valid sequence: at most one reasoning section (start, deltas, end), text
//!   deltas, tool-input starts and complete tool calls, then exactly one `Finished` or `Failed`,
//!   and nothing after it ([`Decoder::finish`] produces the `Failed` of a stream that ended
//!   without its terminal event: "stream ended without a finish", retryable);
//! - events that carry no content (keep-alive comments and `ping`s, unknown event types,
//!   unknown fields) produce nothing, so they do not extend the core's stream watchdog;
//! - bytes that are not the API's format (invalid UTF-8, invalid JSON in a chunk) are a
//!   [`DecodeError`] naming the byte offset; the transport reports it as a transport error
//!   ([`DecodeError::to_provider_error`]), which the core may retry;
//! - a body that held no event at all ends with "stream ended without a finish" and what it
//!   began with, so that a person sees what arrived instead.
//!
//! Before decoding, [`not_a_stream`] tells from a success answer's content type and first
//! bytes whether it can be an event stream at all: an HTML page (a proxy's login or error
//! page) or a whole JSON body (a server that ignored `"stream": true`) never becomes one, so
//! it is a provider error that is not retried, which names what arrived.
//!
//! Reasoning: the core keeps one reasoning section per message, so consecutive reasoning
//! blocks (items) of a response join into one section, and a reasoning block that comes after
//! text or a tool call is neither shown nor kept. The section's end
//! carries the provider's items as a [`crate::ReasoningState`].

mod anthropic;
mod chat;
mod responses;
mod sink;

use sink::{Common, Phase, Sink};

use turnstile_core::{ProviderError, StepEvent};

use crate::Api;
use crate::sse::{Frame, Framer};

/// The response's bytes are not the API's format.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodeError {
    /// The API whose format was expected.
    pub api: Api,
    /// The byte offset in the body where the offending line or event starts.
    pub offset: u64,
    /// What was wrong.
    pub message: String,
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "invalid {} stream at byte {}: {}", self.api, self.offset, self.message)
    }
}

impl std::error::Error for DecodeError {}

impl DecodeError {
    /// The error the core gets: a transport error with this text (retryable: a corrupted
    /// stream may be a transient fault).
    #[must_use]
    pub fn to_provider_error(&self) -> ProviderError {
        crate::error::transport(self.to_string())
    }
}

/// A streamed response's decoder for one API.
#[derive(Debug)]
pub struct Decoder {
    framer: Framer,
    frames: Vec<Frame>,
    api: ApiDecoder,
    common: Common,
    /// The body's first bytes (at most [`QUOTE_MAX`]), quoted when no event ever came.
    head: Vec<u8>,
    /// True once a frame (an event or a comment) was read.
    framed: bool,
}

/// The most bytes of a body quoted in an error.
const QUOTE_MAX: usize = 200;

/// Whether a success answer can be an event stream (SPEC 4.5): `None` when it can, else the
/// provider error to report instead of decoding it. A pure function of the status, the
/// `content-type` header and the body's first bytes (as many as arrived; 64 are plenty):
///
/// - a body that begins like an event stream (`data:`, `event:`, `id:`, `retry:`, or a `:`
///   comment) or a `text/event-stream` content type is decoded;
/// - any other content type is not a stream (an HTML page, `application/json`);
/// - without a content type, a body that begins with `{`, `[` or `<` (JSON, HTML, XML) is not
///   one either.
///
/// The error has class `provider` with the status, `x-should-retry: false` semantics (never
/// retried: the same request gets the same page), and a message that names the content type
/// and quotes the first bytes.
#[must_use]
pub fn not_a_stream(
    status: u16,
    content_type: Option<&str>,
    first: &[u8],
) -> Option<ProviderError> {
    let media = content_type.map(|c| c.split(';').next().unwrap_or("").trim().to_ascii_lowercase());
    let start = first.trim_ascii_start();
    let looks_like_events =
        [&b"data:"[..], b"event:", b"id:", b"retry:", b":"].iter().any(|p| start.starts_with(p));
    if looks_like_events || media.as_deref() == Some("text/event-stream") {
        return None;
    }
    if media.is_none() && !matches!(start.first(), Some(b'{' | b'[' | b'<')) {
        return None;
    }
    let kind = match content_type {
        Some(c) => format!("content type `{}`", c.trim()),
        None => "no content type".to_owned(),
    };
    let what = match crate::error::error_text(first).1 {
        Some(m) => format!(" (it says: {m})"),
        None => String::new(),
    };
    Some(ProviderError {
        class: turnstile_core::ErrorClass::Provider,
        status: Some(status),
        should_retry: Some(false),
        title: Some("not an event stream".to_owned()),
        message: format!(
            "the provider answered HTTP {status} with {kind} instead of an event stream{what}; \
             it began: {}",
            quote(first)
        ),
        ..ProviderError::default()
    })
}

/// The first bytes of a body on one line, for a message.
fn quote(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(QUOTE_MAX)]);
    let one: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut chars = one.chars();
    let head: String = chars.by_ref().take(QUOTE_MAX).collect();
    let more = chars.next().is_some() || bytes.len() > QUOTE_MAX;
    if head.is_empty() {
        "(nothing)".to_owned()
    } else if more {
        format!("`{head}…`")
    } else {
        format!("`{head}`")
    }
}

#[derive(Debug)]
enum ApiDecoder {
    Chat(chat::Chat),
    Responses(responses::Responses),
    Anthropic(anthropic::Anthropic),
}

impl Decoder {
    /// A decoder for a response of `api`.
    #[must_use]
    pub fn new(api: Api) -> Decoder {
        Decoder {
            framer: Framer::new(),
            frames: Vec::new(),
            api: match api {
                Api::OpenAiChat => ApiDecoder::Chat(chat::Chat::default()),
                Api::OpenAiResponses => ApiDecoder::Responses(responses::Responses::default()),
                Api::AnthropicMessages => ApiDecoder::Anthropic(anthropic::Anthropic::default()),
            },
            common: Common {
                api,
                reasoning: Phase::None,
                reasoning_items: Vec::new(),
                started: std::collections::BTreeSet::new(),
                called: std::collections::BTreeSet::new(),
                ended: false,
            },
            head: Vec::new(),
            framed: false,
        }
    }

    /// True once the terminal event (`Finished` or `Failed`) was produced, or an error was
    /// returned: later bytes are ignored.
    #[must_use]
    pub fn is_done(&self) -> bool {
        self.common.ended
    }

    /// Bytes fed so far.
    #[must_use]
    pub fn offset(&self) -> u64 {
        self.framer.offset()
    }

    /// Feeds the next bytes of the body; the events they complete are pushed to `out`.
    ///
    /// # Errors
    /// The bytes are not the API's format; the decoder is done then.
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<StepEvent>) -> Result<(), DecodeError> {
        if self.common.ended {
            return Ok(());
        }
        let api = self.common.api;
        let room = QUOTE_MAX.saturating_sub(self.head.len());
        self.head.extend_from_slice(&bytes[..bytes.len().min(room)]);
        // Frames completed before a line that is not UTF-8 are decoded first, so the result
        // does not depend on where the bytes were split.
        let framed = self.framer.feed(bytes, &mut self.frames);
        self.framed |= !self.frames.is_empty();
        let mut frames = std::mem::take(&mut self.frames);
        let mut result = Ok(());
        for frame in frames.drain(..) {
            if self.common.ended {
                break;
            }
            let mut sink = Sink { common: &mut self.common, out };
            let step = match &mut self.api {
                ApiDecoder::Chat(d) => d.frame(&frame, &mut sink),
                ApiDecoder::Responses(d) => d.frame(&frame, &mut sink),
                ApiDecoder::Anthropic(d) => d.frame(&frame, &mut sink),
            };
            if let Err(message) = step {
                self.common.ended = true;
                result = Err(DecodeError { api, offset: frame.offset, message });
            }
        }
        self.frames = frames;
        if result.is_err() || self.common.ended {
            // Bytes after the terminal event are ignored, whatever they are.
            return result;
        }
        if let Err(e) = framed {
            self.common.ended = true;
            return Err(DecodeError {
                api,
                offset: e.offset,
                message: "a line is not UTF-8".into(),
            });
        }
        Ok(())
    }

    /// The end of the body. A stream that has not produced its terminal event ends `Failed`
    /// with "stream ended without a finish" (chat completions accept a finish reason without
    /// the `[DONE]` that should follow it).
    ///
    /// # Errors
    /// The last, unterminated line is not UTF-8.
    pub fn finish(&mut self, out: &mut Vec<StepEvent>) -> Result<(), DecodeError> {
        if self.common.ended {
            return Ok(());
        }
        if let Err(e) = self.framer.finish() {
            self.common.ended = true;
            return Err(DecodeError {
                api: self.common.api,
                offset: e.offset,
                message: "a line is not UTF-8".into(),
            });
        }
        let mut sink = Sink { common: &mut self.common, out };
        let finished = match &mut self.api {
            ApiDecoder::Chat(d) => d.end_of_body(&mut sink),
            ApiDecoder::Responses(_) | ApiDecoder::Anthropic(_) => false,
        };
        if !finished {
            let mut error = crate::error::incomplete();
            if !self.framed && !self.head.is_empty() {
                // Not one event in the whole body: say what came instead.
                error.message = format!(
                    "{}: no event arrived; the body began: {}",
                    error.message,
                    quote(&self.head)
                );
            }
            sink.fail(error);
        }
        Ok(())
    }

    /// Decodes a whole body at once (a recording, a test): its events, or the first error.
    ///
    /// # Errors
    /// As [`Decoder::feed`].
    pub fn decode_all(api: Api, body: &[u8]) -> Result<Vec<StepEvent>, DecodeError> {
        let mut decoder = Decoder::new(api);
        let mut out = Vec::new();
        decoder.feed(body, &mut out)?;
        decoder.finish(&mut out)?;
        Ok(out)
    }
}

/// A valid event sequence: one reasoning section at most (start, deltas, end), a tool call
/// only after its start and once, exactly one terminal event, last.
///
/// What every decoder of this crate guarantees; a fuzzer or a test checks it with this.
///
/// # Errors
/// The first event out of place, with the sequence.
pub fn check_sequence(events: &[StepEvent]) -> Result<(), String> {
    #[derive(PartialEq)]
    enum R {
        None,
        Open,
        Ended,
    }
    let mut reasoning = R::None;
    let mut started: Vec<&turnstile_core::CallId> = Vec::new();
    let mut called: Vec<&turnstile_core::CallId> = Vec::new();
    for (i, e) in events.iter().enumerate() {
        let last = i + 1 == events.len();
        match e {
            StepEvent::ReasoningStart if reasoning == R::None => reasoning = R::Open,
            StepEvent::ReasoningDelta { .. } if reasoning == R::Open => {}
            StepEvent::ReasoningEnd { .. } if reasoning == R::Open => reasoning = R::Ended,
            StepEvent::TextDelta { text } if !text.is_empty() && reasoning != R::Open => {}
            StepEvent::ToolInputStart { id, .. }
                if reasoning != R::Open && !started.contains(&id) =>
            {
                started.push(id);
            }
            StepEvent::ToolCall { id, input, .. }
                if started.contains(&id) && !called.contains(&id) && !input.is_empty() =>
            {
                called.push(id);
            }
            StepEvent::Finished { .. } if last && reasoning != R::Open => {}
            StepEvent::Failed { .. } if last => {}
            other => return Err(format!("event {i} out of place: {other:?} in {events:?}")),
        }
    }
    match events.last() {
        Some(StepEvent::Finished { .. } | StepEvent::Failed { .. }) => Ok(()),
        _ => Err(format!("no terminal event: {events:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use turnstile_core::FinishReason;

    /// Found by the fuzzer: a chunk with invalid JSON before a line that is not UTF-8 gave the
    /// UTF-8 error when fed whole and the JSON error when split between them.
    #[test]
    fn the_first_error_wins_however_the_bytes_are_split() {
        let body = b"data: {\"choices\": [\x01]}\n\ndata: \xff\n\n";
        let whole = Decoder::decode_all(Api::OpenAiChat, body).unwrap_err();
        let mut d = Decoder::new(Api::OpenAiChat);
        let mut out = Vec::new();
        let split =
            d.feed(&body[..25], &mut out).and_then(|()| d.feed(&body[25..], &mut out)).unwrap_err();
        assert_eq!(whole, split);
        assert_eq!(whole.offset, 0);
        assert!(whole.message.contains("not valid JSON"), "{whole}");
    }

    #[test]
    fn bytes_after_the_terminal_event_are_ignored() {
        let body = b"data: {\"choices\":[{\"delta\":{\"content\":\"x\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\ndata: \xff\n\n";
        let events = Decoder::decode_all(Api::OpenAiChat, body).unwrap();
        assert!(matches!(
            events.last(),
            Some(StepEvent::Finished { reason: FinishReason::Stop, .. })
        ));
    }

    #[test]
    fn a_page_or_a_whole_json_body_is_not_a_stream_and_is_not_retried() {
        let html = b"<!DOCTYPE html>\n<html><head><title>Sign in</title></head></html>";
        let e = not_a_stream(200, Some("text/html; charset=utf-8"), html).expect("not a stream");
        assert!(!e.is_retryable() && !e.is_unauthorized());
        assert_eq!(e.status, Some(200));
        assert!(e.message.contains("`text/html; charset=utf-8`"), "{}", e.message);
        assert!(e.message.contains("<!DOCTYPE html> <html><head>"), "{}", e.message);
        let json = br#"{"id":"chatcmpl-1","object":"chat.completion","choices":[]}"#;
        let e = not_a_stream(200, Some("application/json"), json).expect("not a stream");
        assert!(e.message.contains("`application/json`") && e.message.contains("chatcmpl-1"));
        let proxy = br#"{"error":{"message":"quota exceeded","type":"billing"}}"#;
        let e = not_a_stream(200, None, proxy).expect("JSON without a content type");
        assert!(e.message.contains("no content type") && e.message.contains("quota exceeded"));
        assert!(not_a_stream(200, Some("text/event-stream"), b"").is_none());
        assert!(not_a_stream(200, Some("Text/Event-Stream; charset=utf-8"), b"{").is_none());
        assert!(not_a_stream(200, Some("text/plain"), b"data: {}\n\n").is_none(), "events win");
        assert!(not_a_stream(200, None, b"event: message_start\n").is_none());
        assert!(not_a_stream(200, None, b"").is_none(), "nothing yet: the decoder decides");
        let long = vec![b'<'; 1_000];
        assert!(not_a_stream(200, Some("text/html"), &long).unwrap().message.ends_with("…`"));
    }

    #[test]
    fn a_body_without_one_event_says_how_it_began() {
        let mut d = Decoder::new(Api::AnthropicMessages);
        let mut out = Vec::new();
        d.feed(b"Service temporarily unavailable", &mut out).unwrap();
        d.finish(&mut out).unwrap();
        let Some(StepEvent::Failed { error }) = out.last() else { panic!("{out:?}") };
        assert!(error.is_retryable(), "it may still be transient");
        assert!(error.message.starts_with("stream ended without a finish"));
        assert!(error.message.contains("`Service temporarily unavailable`"), "{}", error.message);
        let events = b"event: ping\ndata: {\"type\":\"ping\"}\n\n";
        let out = Decoder::decode_all(Api::AnthropicMessages, events).unwrap();
        let Some(StepEvent::Failed { error }) = out.last() else { panic!("{out:?}") };
        assert_eq!(error.message, "stream ended without a finish", "events came: as before");
    }
}
