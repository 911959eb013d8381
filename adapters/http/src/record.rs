//! Recordings (SPEC 9 "Recordings"): every exchange of a provider written in the format of the
//! recorded streams under `tests/fixtures/providers/` ([`turnstile_wire::recording`]), so a bug
//! report is a flight trace plus its recordings, and both replay offline.
//!
//! A [`Recorder`] writes one case folder, `<dir>/<api>/<name>/`: `NN.request.json` when a
//! request is sent, `NN.response.body` (the bytes as received, also when the stream was cut or
//! cancelled) and `case.json` when its exchange ends. The request body never holds a key
//! (keys travel in headers), and a key a server echoes in a response body is replaced by
//! `<redacted>`; response headers are kept without credentials or cookies
//! ([`turnstile_wire::recording::is_secret_header`]), and request headers are not kept.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use turnstile_wire::Api;
use turnstile_wire::recording::{Case, Interaction, is_secret_header, request_file, response_file};

/// Writes one case folder.
#[derive(Debug, Clone)]
pub struct Recorder {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    dir: PathBuf,
    case: Mutex<Case>,
}

impl Recorder {
    /// A recorder writing `<root>/<api>/<name>/` (created; an existing case there is replaced).
    ///
    /// # Errors
    /// The folder cannot be created.
    pub fn create(root: &Path, api: Api, model: &str, name: &str) -> std::io::Result<Recorder> {
        let dir = root.join(api.name()).join(name);
        std::fs::create_dir_all(&dir)?;
        let case = Case {
            api: api.name().to_owned(),
            model: model.to_owned(),
            source: format!("recorded by turnstile {}", env!("CARGO_PKG_VERSION")),
            interactions: Vec::new(),
        };
        let recorder = Recorder { inner: Arc::new(Inner { dir, case: Mutex::new(case) }) };
        recorder.write_case();
        Ok(recorder)
    }

    /// The case folder.
    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// Records a request about to be sent; the returned exchange records its answer.
    pub(crate) fn start(&self, path: &str, body: &serde_json::Value) -> Exchange {
        let n = {
            let mut case =
                self.inner.case.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            case.interactions.push(Interaction {
                method: "POST".into(),
                path: path.to_owned(),
                status: 0,
                content_type: String::new(),
                streaming: true,
                headers: Vec::new(),
            });
            case.interactions.len() - 1
        };
        let pretty = serde_json::to_vec_pretty(body).unwrap_or_default();
        self.write(&request_file(n), &pretty);
        Exchange { recorder: self.clone(), n, body: Vec::new(), secret: None }
    }

    // Recording is best effort: a full disk must not fail the user's turn.
    fn write(&self, file: &str, bytes: &[u8]) {
        let _ = std::fs::write(self.inner.dir.join(file), bytes);
    }

    fn write_case(&self) {
        let case = self.inner.case.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let json = serde_json::to_vec_pretty(&*case).unwrap_or_default();
        drop(case);
        self.write("case.json", &json);
    }
}

/// One exchange being recorded; its response is written when it is dropped, however the
/// stream ended.
#[derive(Debug)]
pub(crate) struct Exchange {
    recorder: Recorder,
    n: usize,
    body: Vec<u8>,
    /// Replaced by `<redacted>` wherever a server echoes it back.
    secret: Option<Vec<u8>>,
}

impl Exchange {
    /// The response's status and headers (credentials and cookies left out).
    pub(crate) fn head(&mut self, status: u16, headers: &[(String, String)]) {
        let mut case =
            self.recorder.inner.case.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(i) = case.interactions.get_mut(self.n) {
            i.status = status;
            i.content_type = headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case("content-type"))
                .map(|(_, v)| v.clone())
                .unwrap_or_default();
            i.streaming = i.content_type.starts_with("text/event-stream");
            i.headers = headers.iter().filter(|(k, _)| !is_secret_header(k)).cloned().collect();
        }
    }

    /// The key this exchange sends: the recording never holds it, even where a server echoed
    /// it back in a body.
    pub(crate) fn redact(&mut self, secret: &str) {
        self.secret = (!secret.is_empty()).then(|| secret.as_bytes().to_vec());
    }

    /// Bytes of the response body as they arrived.
    pub(crate) fn body(&mut self, bytes: &[u8]) {
        self.body.extend_from_slice(bytes);
    }
}

impl Drop for Exchange {
    fn drop(&mut self) {
        if let Some(secret) = &self.secret {
            self.body = replace(&self.body, secret, b"<redacted>");
        }
        self.recorder.write(&response_file(self.n), &self.body);
        self.recorder.write_case();
    }
}

/// `bytes` with every `from` replaced by `to`.
fn replace(bytes: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i..].starts_with(from) {
            out.extend_from_slice(to);
            i += from.len();
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn replace_every_occurrence() {
        assert_eq!(super::replace(b"a KEY b KEYKEY", b"KEY", b"<r>"), b"a <r> b <r><r>");
    }
}
