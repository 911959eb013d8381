//! Server-sent events framing (the WHATWG `text/event-stream` format), bytes in, events out.
//!
//! Written here rather than taken from a crate because the ones available frame a `Stream` of a
//! runtime; this one is a plain buffer that any split of the bytes feeds identically, which is
//! what the simulator and the fuzzer need. Lines end in `\n`, `\r\n` or `\r` (a `\r` at the end
//! of one chunk waits for the next to see whether a `\n` follows); a line starting with `:` is a
//! comment (a keep-alive); `data` lines join with `\n`; a blank line dispatches the event; an
//! event with no `data` line is dropped, as the format says.

/// One dispatched event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// The `event:` field; empty when the event had none (the format's "message").
    pub event: String,
    /// The joined `data:` lines.
    pub data: String,
    /// The `id:` field of this event, when it had one (the format's "last event ID" for a
    /// client that reconnects; a model stream has none).
    pub id: Option<String>,
    /// The byte offset in the stream where the event's first line starts (for error
    /// messages).
    pub offset: u64,
}

/// Decoding failure of the framing itself: only invalid UTF-8 in a line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameError {
    /// The byte offset of the line.
    pub offset: u64,
}

/// The framer's buffer: feed bytes, take frames.
#[derive(Debug, Default)]
pub struct Framer {
    line: Vec<u8>,
    /// The stream offset of `line`'s first byte.
    line_start: u64,
    /// Bytes consumed so far.
    offset: u64,
    /// The previous chunk ended in `\r`: a `\n` at the start of this one belongs to it.
    after_cr: bool,
    event: String,
    data: String,
    id: Option<String>,
    has_data: bool,
    /// Where the event being read started.
    event_start: u64,
    /// The stream's first line may start with a byte-order mark.
    started: bool,
}

impl Framer {
    /// An empty framer at offset 0.
    #[must_use]
    pub fn new() -> Framer {
        Framer::default()
    }

    /// Bytes consumed so far.
    #[must_use]
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Feeds bytes; every event they complete is pushed to `out`.
    ///
    /// # Errors
    /// A line that is not UTF-8.
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<Frame>) -> Result<(), FrameError> {
        for &b in bytes {
            self.offset += 1;
            if std::mem::take(&mut self.after_cr) && b == b'\n' {
                self.line_start = self.offset;
                continue;
            }
            match b {
                b'\n' | b'\r' => {
                    self.after_cr = b == b'\r';
                    self.end_line(out)?;
                    self.line_start = self.offset;
                }
                _ => self.line.push(b),
            }
        }
        Ok(())
    }

    /// The end of the stream: an unterminated last line is processed (an event it completes is
    /// not dispatched: the format needs the blank line).
    ///
    /// # Errors
    /// A last line that is not UTF-8.
    pub fn finish(&mut self) -> Result<(), FrameError> {
        let mut ignored = Vec::new();
        if !self.line.is_empty() {
            self.end_line(&mut ignored)?;
        }
        Ok(())
    }

    /// True when bytes of an unfinished event are buffered (a stream cut mid-event).
    #[must_use]
    pub fn has_partial(&self) -> bool {
        !self.line.is_empty() || self.has_data || !self.event.is_empty()
    }

    fn end_line(&mut self, out: &mut Vec<Frame>) -> Result<(), FrameError> {
        let mut line = std::mem::take(&mut self.line);
        if !std::mem::replace(&mut self.started, true) && line.starts_with(&[0xEF, 0xBB, 0xBF]) {
            line.drain(..3);
        }
        let Ok(line) = std::str::from_utf8(&line) else {
            return Err(FrameError { offset: self.line_start });
        };
        if line.is_empty() {
            if std::mem::take(&mut self.has_data) {
                out.push(Frame {
                    event: std::mem::take(&mut self.event),
                    data: std::mem::take(&mut self.data),
                    id: self.id.take(),
                    offset: self.event_start,
                });
            } else {
                self.event.clear();
                self.id = None;
            }
            return Ok(());
        }
        if line.starts_with(':') {
            return Ok(());
        }
        if !self.has_data && self.event.is_empty() && self.id.is_none() {
            self.event_start = self.line_start;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "event" => value.clone_into(&mut self.event),
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            // The format ignores an id holding NUL.
            "id" if !value.contains('\0') => self.id = Some(value.to_owned()),
            // `retry` matters to a browser's reconnect timing, not here.
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(chunks: &[&[u8]]) -> Vec<Frame> {
        let mut f = Framer::new();
        let mut out = Vec::new();
        for c in chunks {
            f.feed(c, &mut out).unwrap();
        }
        out
    }

    #[test]
    fn events_data_lines_comments_and_line_ends() {
        let got = frames(&[b"\xEF\xBB\xBF: keep-alive\r\nevent: a\r\ndata: 1\r\ndata:2\r\n\r\n"]);
        assert_eq!(got.len(), 1);
        assert_eq!((got[0].event.as_str(), got[0].data.as_str()), ("a", "1\n2"));
        let got = frames(&[b"data: x\r", b"\ndata: y\r\rdata: z\n\n"]);
        assert_eq!(got.iter().map(|f| f.data.as_str()).collect::<Vec<_>>(), ["x\ny", "z"]);
    }

    #[test]
    fn any_split_gives_the_same_frames() {
        let body = b"event: e\r\ndata: {\"a\": 1}  \r\n\r\n: ping\n\ndata: [DONE]\n\n";
        let whole = frames(&[body]);
        for cut in 0..body.len() {
            assert_eq!(frames(&[&body[..cut], &body[cut..]]), whole, "cut at {cut}");
        }
        assert_eq!(whole.len(), 2);
    }

    #[test]
    fn an_event_keeps_its_own_id() {
        let got =
            frames(&[b"id: 3-9\nevent: a\ndata: x\n\ndata: y\n\nid: 4-1\n\nid: 5-2\ndata: z\n\n"]);
        let ids: Vec<_> = got.iter().map(|f| f.id.as_deref()).collect();
        assert_eq!(ids, [Some("3-9"), None, Some("5-2")]);
    }

    #[test]
    fn an_event_without_data_or_blank_line_is_not_dispatched() {
        assert!(frames(&[b"event: x\n\n"]).is_empty());
        let mut f = Framer::new();
        let mut out = Vec::new();
        f.feed(b"data: cut", &mut out).unwrap();
        assert!(f.has_partial());
        f.finish().unwrap();
        assert!(out.is_empty());
    }

    #[test]
    fn invalid_utf8_names_the_line_offset() {
        let mut f = Framer::new();
        let err = f.feed(b"data: ok\n\ndata: \xff\n", &mut Vec::new()).unwrap_err();
        assert_eq!(err.offset, 10);
    }
}
