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
    pub fn feed(&mut self, mut bytes: &[u8], out: &mut Vec<Frame>) -> Result<(), FrameError> {
        // A line at a time: the bytes up to the next line end are copied in one go.
        while let Some(&first) = bytes.first() {
            if std::mem::take(&mut self.after_cr) && first == b'\n' {
                // The `\n` of a `\r\n` split across chunks (or just read): not a line end.
                self.offset += 1;
                self.line_start = self.offset;
                bytes = &bytes[1..];
                continue;
            }
            let Some(end) = bytes.iter().position(|&b| b == b'\n' || b == b'\r') else {
                self.line.extend_from_slice(bytes);
                self.offset += bytes.len() as u64;
                return Ok(());
            };
            self.line.extend_from_slice(&bytes[..end]);
            self.offset += end as u64 + 1;
            self.after_cr = bytes[end] == b'\r';
            self.end_line(out)?;
            self.line_start = self.offset;
            bytes = &bytes[end + 1..];
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

#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    /// What one chunk per byte gives: the framer's definition, byte by byte.
    fn byte_by_byte(bytes: &[u8]) -> (Vec<Frame>, Result<(), FrameError>, bool) {
        let mut f = Framer::new();
        let mut out = Vec::new();
        for b in bytes {
            if let Err(e) = f.feed(std::slice::from_ref(b), &mut out) {
                return (out, Err(e), f.has_partial());
            }
        }
        (out, Ok(()), f.has_partial())
    }

    fn pieces() -> impl Strategy<Value = Vec<u8>> {
        let token = prop_oneof![
            Just(b"data: x".to_vec()),
            Just(b"data:".to_vec()),
            Just(b"event: e".to_vec()),
            Just(b"id: 1-2".to_vec()),
            Just(b": ping".to_vec()),
            Just(b"\n".to_vec()),
            Just(b"\r".to_vec()),
            Just(b"\r\n".to_vec()),
            Just(vec![0xEF, 0xBB, 0xBF]),
            Just(vec![0xFF]),
            Just(b"\xC3\xA9".to_vec()),
            any::<u8>().prop_map(|b| vec![b]),
        ];
        proptest::collection::vec(token, 0..40).prop_map(|v| v.concat())
    }

    proptest! {
        /// Whole, in random pieces, or a byte at a time: the same frames, the same error at
        /// the same offset, the same partial state.
        #[test]
        fn any_split_of_any_bytes_gives_the_byte_by_byte_result(
            bytes in pieces(),
            cuts in proptest::collection::vec(any::<usize>(), 0..6),
        ) {
            let want = byte_by_byte(&bytes);
            let mut f = Framer::new();
            let mut out = Vec::new();
            let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
            cuts.sort_unstable();
            let mut at = 0;
            let mut result = Ok(());
            for cut in cuts.into_iter().chain([bytes.len()]) {
                result = f.feed(&bytes[at..cut], &mut out);
                at = cut;
                if result.is_err() {
                    break;
                }
            }
            prop_assert_eq!(&out, &want.0);
            prop_assert_eq!(&result, &want.1);
            if result.is_ok() {
                prop_assert_eq!(f.has_partial(), want.2);
                prop_assert_eq!(f.offset(), bytes.len() as u64);
            }
        }
    }
}
