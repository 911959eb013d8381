//! The HTTP provider: the host's [`Provider`] over one configured model, with the wire crate
//! doing all encoding, decoding and classification. This module only moves bytes: it sends the
//! request, reads status and headers, feeds the body to the decoder as it arrives, and prices
//! the usage. Dropping a stream's future drops the response, which closes the connection at
//! once (how a cancel, or the core's stream watchdog, ends an attempt).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures_util::{Stream, StreamExt};
use turnstile_core::{SessionId, StepEvent, Usage};
use turnstile_host::{BoxError, BoxFuture, EventSink, ModelInfo, Provider};
use turnstile_wire::{
    Api, Decoder, Headers as _, ModelRequest, Prices, RequestKind, RequestMessage, Target, ToolDef,
    classify, encode, not_a_stream, transport,
};

use crate::config::{Config, ConfigError, KeySource, ModelConfig, ProviderConfig};
use crate::key::{self, ApiKey};
use crate::prompt::{
    Instructions, TITLE_PROMPT, default_system_prompt, utc_date, with_instructions,
};
use crate::record::{Exchange, Recorder};

/// How long connecting may take before the attempt fails as a transport error.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// The largest error body read (the rest is not needed to classify it).
const ERROR_BODY_MAX: usize = 64 * 1024;

/// How many bytes of a success answer that is not declared an event stream are read before
/// deciding whether it is one ([`not_a_stream`]).
const SNIFF_BYTES: usize = 64;

/// An LLM provider over HTTP for one model.
#[derive(Clone)]
pub struct HttpProvider {
    inner: Arc<Inner>,
}

struct Inner {
    client: reqwest::Client,
    provider: ProviderConfig,
    model: ModelConfig,
    url: String,
    system_prompt: Option<String>,
    /// The project's instruction files (`AGENTS.md`, `CLAUDE.md`), appended to the system prompt.
    instructions: Vec<Instructions>,
    working_dir: String,
    /// The key in use, read at the first request (or preparation) and at each refresh.
    key: Mutex<Option<ApiKey>>,
    recordings: Option<Recordings>,
}

/// Where exchanges are recorded: one case per session (`<name>-<session>`), and one for the
/// title requests (`<name>-titles`), so that each case replays as one conversation.
struct Recordings {
    root: PathBuf,
    name: String,
    cases: Mutex<BTreeMap<String, Recorder>>,
}

impl Recordings {
    fn case(&self, api: Api, model: &str, case: &str) -> Option<Recorder> {
        let safe: String = case
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || "._-".contains(c) { c } else { '_' })
            .collect();
        let name = format!("{}-{safe}", self.name);
        let mut cases = self.cases.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(r) = cases.get(&name) {
            return Some(r.clone());
        }
        // Recording is best effort: a folder that cannot be made loses the recording, not
        // the turn.
        let r = Recorder::create(&self.root, api, model, &name).ok()?;
        cases.insert(name, r.clone());
        Some(r)
    }
}

impl std::fmt::Debug for HttpProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpProvider")
            .field("provider", &self.inner.provider.name)
            .field("api", &self.inner.provider.api)
            .field("model", &self.inner.model.api_model)
            .field("url", &self.inner.url)
            .finish_non_exhaustive()
    }
}

/// Why an HTTP provider could not be built.
#[derive(Debug)]
#[non_exhaustive]
pub enum SetupError {
    /// The configuration names no such model, or is invalid.
    Config(ConfigError),
    /// The HTTP client could not be built (TLS set-up).
    Client(reqwest::Error),
    /// The recordings folder could not be created.
    Recordings {
        /// The folder.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

impl std::fmt::Display for SetupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SetupError::Config(e) => e.fmt(f),
            SetupError::Client(e) => write!(f, "cannot build the HTTP client: {e}"),
            SetupError::Recordings { path, source } => {
                write!(f, "cannot create the recordings folder `{}`: {source}", path.display())
            }
        }
    }
}

impl std::error::Error for SetupError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SetupError::Config(e) => Some(e),
            SetupError::Client(e) => Some(e),
            SetupError::Recordings { source, .. } => Some(source),
        }
    }
}

impl HttpProvider {
    /// The provider for `model` (`provider/model`; `None`: the configuration's default).
    ///
    /// # Errors
    /// The model is not configured, or the HTTP client cannot be built.
    pub fn new(config: &Config, model: Option<&str>) -> Result<HttpProvider, SetupError> {
        let (provider, model) = config.resolve(model).map_err(SetupError::Config)?;
        let mut p = HttpProvider::for_model(provider, model)?;
        if let Some(system) = &config.system_prompt {
            p = p.with_system_prompt(system.clone());
        }
        Ok(p)
    }

    /// The provider for this provider and model configuration.
    ///
    /// # Errors
    /// The HTTP client cannot be built.
    pub fn for_model(
        provider: ProviderConfig,
        model: ModelConfig,
    ) -> Result<HttpProvider, SetupError> {
        let client = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .user_agent(concat!("turnstile/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(SetupError::Client)?;
        let url = format!("{}{}", provider.base_url.trim_end_matches('/'), provider.api.path());
        let working_dir =
            std::env::current_dir().map(|d| d.display().to_string()).unwrap_or_else(|_| ".".into());
        Ok(HttpProvider {
            inner: Arc::new(Inner {
                client,
                provider,
                model,
                url,
                system_prompt: None,
                instructions: Vec::new(),
                working_dir,
                key: Mutex::new(None),
                recordings: None,
            }),
        })
    }

    fn edit(mut self, f: impl FnOnce(&mut Inner)) -> HttpProvider {
        match Arc::get_mut(&mut self.inner) {
            Some(inner) => f(inner),
            None => unreachable!("builder methods run before the provider is shared"),
        }
        self
    }

    /// The same provider with this system prompt instead of the default one.
    #[must_use]
    pub fn with_system_prompt(self, system: impl Into<String>) -> HttpProvider {
        let system = system.into();
        self.edit(|i| i.system_prompt = Some(system))
    }

    /// The same provider, whose system prompt ends with the project's instructions (read with
    /// [`crate::prompt::project_instructions`]; the configured system prompt gets them too).
    #[must_use]
    pub fn with_project_instructions(self, instructions: Vec<Instructions>) -> HttpProvider {
        self.edit(|i| i.instructions = instructions)
    }

    /// The system prompt a request offering `tools` is sent with: the configured one or the
    /// default (the working directory, today's date, the tools), then the project's
    /// instructions. What `turnstile run --print-system-prompt` shows.
    #[must_use]
    pub fn system_prompt(&self, tools: &[ToolDef]) -> String {
        self.inner.system(tools)
    }

    /// The same provider, whose default system prompt names `dir` as the working directory.
    #[must_use]
    pub fn with_working_dir(self, dir: impl Into<String>) -> HttpProvider {
        let dir = dir.into();
        self.edit(|i| i.working_dir = dir)
    }

    /// The same provider, recording every exchange (see [`crate::record`]) under
    /// `root/<api>/`: a case folder `<name>-<session>` per session, and `<name>-titles` for the
    /// title requests.
    ///
    /// # Errors
    /// `root` cannot be created.
    pub fn with_recordings(
        self,
        root: impl Into<PathBuf>,
        name: &str,
    ) -> Result<HttpProvider, SetupError> {
        let root = root.into();
        std::fs::create_dir_all(&root)
            .map_err(|source| SetupError::Recordings { path: root.clone(), source })?;
        let recordings =
            Recordings { root, name: name.to_owned(), cases: Mutex::new(BTreeMap::new()) };
        Ok(self.edit(|i| i.recordings = Some(recordings)))
    }

    /// The wire API.
    #[must_use]
    pub fn api(&self) -> Api {
        self.inner.provider.api
    }
}

impl Inner {
    /// A refused key's message with where the key came from, so that the person who must fix
    /// it knows which variable or command to look at (the key itself is never named).
    fn key_note(&self, message: &str) -> String {
        let from = match &self.provider.key {
            KeySource::Env(var) => {
                format!("the key of provider `{}` came from {var}", self.provider.name)
            }
            KeySource::Command(argv) => format!(
                "the key of provider `{}` came from the command `{}`",
                self.provider.name,
                argv.join(" ")
            ),
            KeySource::None => {
                format!("provider `{}` is configured without a key", self.provider.name)
            }
        };
        format!("{message} ({from})")
    }

    fn system(&self, tools: &[ToolDef]) -> String {
        let system = self.system_prompt.clone().unwrap_or_else(|| {
            let secs = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
            default_system_prompt(&self.working_dir, &utc_date(secs), tools)
        });
        with_instructions(system, &self.instructions, std::path::Path::new(&self.working_dir))
    }

    fn target(&self, request: &ModelRequest) -> Target {
        self.model.target(Some(self.system(&request.tools)))
    }

    fn prices(&self) -> Prices {
        self.model.prices
    }

    async fn key(&self) -> Result<Option<ApiKey>, String> {
        if let Some(k) = self.key.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
        {
            return Ok(Some(k));
        }
        let k = key::read(&self.provider.key, &self.provider.name).await?;
        self.key.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone_from(&k);
        Ok(k)
    }

    /// Sends `body` and returns the exchange whose events are read with [`Response::next`];
    /// `case` names the recording it belongs to.
    async fn send(&self, case: &str, body: serde_json::Value) -> Response {
        let mut recording = self
            .recordings
            .as_ref()
            .and_then(|r| r.case(self.provider.api, &self.model.api_model, case))
            .map(|r| r.start(self.provider.api.path(), &body));
        let failed = |error, recording, secret| {
            let mut r = Response {
                events: vec![StepEvent::Failed { error }],
                first: Vec::new(),
                body: None,
                decoder: Decoder::new(self.provider.api),
                recording,
                prices: self.prices(),
                secret,
            };
            r.redact_events();
            r
        };
        let key = match self.key().await {
            Ok(k) => k,
            Err(message) => {
                let error = turnstile_core::ProviderError {
                    class: turnstile_core::ErrorClass::Unauthorized,
                    message,
                    ..Default::default()
                };
                return failed(error, recording, None);
            }
        };
        if let (Some(r), Some(k)) = (&mut recording, &key) {
            r.redact(k.expose());
        }
        let mut request = self
            .client
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "text/event-stream");
        for (name, value) in &self.provider.headers {
            request = request.header(name, value);
        }
        if let Some(key) = &key {
            request = match self.provider.api {
                Api::AnthropicMessages => {
                    match reqwest::header::HeaderValue::from_str(key.expose()) {
                        Ok(mut value) => {
                            // Not shown by any `Debug` of the request.
                            value.set_sensitive(true);
                            request.header("x-api-key", value)
                        }
                        Err(_) => {
                            let error = turnstile_core::ProviderError {
                                class: turnstile_core::ErrorClass::Unauthorized,
                                message: format!(
                                    "the key of provider `{}` is not a valid header value",
                                    self.provider.name
                                ),
                                ..Default::default()
                            };
                            return failed(error, recording, None);
                        }
                    }
                }
                Api::OpenAiChat | Api::OpenAiResponses => request.bearer_auth(key.expose()),
            };
        }
        let bytes = serde_json::to_vec(&body).unwrap_or_default();
        let response = match request.body(bytes).send().await {
            Ok(r) => r,
            Err(e) => return failed(transport(describe(&e)), recording, key),
        };
        let status = response.status().as_u16();
        let headers: Vec<(String, String)> = response
            .headers()
            .iter()
            .map(|(k, v)| {
                (k.as_str().to_owned(), String::from_utf8_lossy(v.as_bytes()).into_owned())
            })
            .collect();
        if let Some(r) = &mut recording {
            r.head(status, &headers);
        }
        if !response.status().is_success() {
            let mut body = Vec::new();
            let mut stream = response.bytes_stream();
            while let Some(chunk) = stream.next().await {
                match chunk {
                    Ok(c) => {
                        if let Some(r) = &mut recording {
                            r.body(&c);
                        }
                        let room = ERROR_BODY_MAX.saturating_sub(body.len());
                        body.extend_from_slice(&c[..c.len().min(room)]);
                    }
                    Err(_) => break,
                }
            }
            let now =
                SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
            let mut error = classify(status, &headers, &body, now);
            if error.is_unauthorized() {
                error.message = self.key_note(&error.message);
            }
            return failed(error, recording, key);
        }
        let mut body: BodyStream = Box::pin(response.bytes_stream());
        let content_type = headers.header("content-type").map(str::to_owned);
        let mut first = Vec::new();
        if !content_type.as_deref().is_some_and(is_event_stream) {
            // Not declared an event stream: look at how it begins before decoding it.
            while first.len() < SNIFF_BYTES {
                match body.next().await {
                    Some(Ok(c)) => first.extend_from_slice(&c),
                    Some(Err(e)) => {
                        let error = transport(format!("the stream broke: {}", describe(&e)));
                        return failed(error, recording, key);
                    }
                    None => break,
                }
            }
            if let Some(r) = &mut recording {
                r.body(&first);
            }
            if let Some(error) = not_a_stream(status, content_type.as_deref(), &first) {
                // The rest of it is recorded (the recording is the bug report), not decoded.
                while let Some(Ok(c)) = body.next().await {
                    if let Some(r) = &mut recording {
                        r.body(&c);
                    }
                }
                return failed(error, recording, key);
            }
        }
        Response {
            events: Vec::new(),
            first,
            body: Some(body),
            decoder: Decoder::new(self.provider.api),
            recording,
            prices: self.prices(),
            secret: key,
        }
    }
}

type BodyStream = Pin<Box<dyn Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>;

/// An exchange whose answer is being read.
struct Response {
    /// Events decided before any body (a failure), handed out first.
    events: Vec<StepEvent>,
    /// Bytes of the body read (and recorded) before decoding began, decoded first.
    first: Vec<u8>,
    body: Option<BodyStream>,
    decoder: Decoder,
    recording: Option<Exchange>,
    prices: Prices,
    /// The key this exchange used: a server that echoes it in an error text (some proxies
    /// do) must not get it into the store, a trace or a log.
    secret: Option<ApiKey>,
}

impl Response {
    fn redact_events(&mut self) {
        let mut events = std::mem::take(&mut self.events);
        self.redact(&mut events);
        self.events = events;
    }

    fn redact(&self, events: &mut [StepEvent]) {
        let Some(key) = &self.secret else { return };
        for event in events {
            if let StepEvent::Failed { error } = event {
                error.message = error.message.replace(key.expose(), "<redacted>");
                error.title = error.title.take().map(|t| t.replace(key.expose(), "<redacted>"));
            }
        }
    }

    /// The next events, in `out`; false once the answer is over.
    async fn next(&mut self, out: &mut Vec<StepEvent>) -> bool {
        if !self.events.is_empty() {
            out.append(&mut self.events);
            self.body = None;
            return true;
        }
        let Some(body) = &mut self.body else { return false };
        if self.decoder.is_done() {
            self.body = None;
            return false;
        }
        if !self.first.is_empty() {
            let first = std::mem::take(&mut self.first);
            if let Err(e) = self.decoder.feed(&first, out) {
                out.push(StepEvent::Failed { error: e.to_provider_error() });
            }
            self.finish_events(out);
            return true;
        }
        match body.next().await {
            Some(Ok(chunk)) => {
                if let Some(r) = &mut self.recording {
                    r.body(&chunk);
                }
                if let Err(e) = self.decoder.feed(&chunk, out) {
                    out.push(StepEvent::Failed { error: e.to_provider_error() });
                }
            }
            Some(Err(e)) => {
                out.push(StepEvent::Failed {
                    error: transport(format!("the stream broke: {}", describe(&e))),
                });
                self.body = None;
            }
            None => {
                if let Err(e) = self.decoder.finish(out) {
                    out.push(StepEvent::Failed { error: e.to_provider_error() });
                }
                self.body = None;
            }
        }
        self.finish_events(out);
        true
    }

    /// Prices the usage of a finish and redacts the key from a failure.
    fn finish_events(&self, out: &mut [StepEvent]) {
        for event in out.iter_mut() {
            if let StepEvent::Finished { usage: Some(usage), .. } = event {
                *usage = self.prices.priced(*usage);
            }
        }
        self.redact(out);
    }
}

/// Whether a `content-type` value is `text/event-stream` (with any parameters).
fn is_event_stream(content_type: &str) -> bool {
    content_type
        .split(';')
        .next()
        .is_some_and(|m| m.trim().eq_ignore_ascii_case("text/event-stream"))
}

/// A reqwest error with its causes, which name what really failed (refused, reset, ...).
fn describe(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        let s_text = s.to_string();
        if !text.contains(&s_text) {
            text.push_str(": ");
            text.push_str(&s_text);
        }
        source = s.source();
    }
    text
}

impl Provider for HttpProvider {
    fn prepare(&self, _session: &SessionId) -> BoxFuture<Result<ModelInfo, BoxError>> {
        let inner = self.inner.clone();
        Box::pin(async move {
            // A missing key fails the submission at preparation, with a message that says
            // which variable to set, instead of a request that cannot succeed.
            inner.key().await.map_err(BoxError::from)?;
            Ok(ModelInfo { context_window: inner.model.context_window })
        })
    }

    fn stream(&self, request: ModelRequest, mut sink: EventSink) -> BoxFuture<()> {
        let inner = self.inner.clone();
        Box::pin(async move {
            let body = encode(inner.provider.api, &request, &inner.target(&request));
            let mut response = inner.send(request.session.as_str(), body).await;
            let mut events = Vec::new();
            while response.next(&mut events).await {
                for event in events.drain(..) {
                    if !sink.send(event).await {
                        return;
                    }
                }
            }
        })
    }

    fn refresh_credentials(&self) -> BoxFuture<bool> {
        let inner = self.inner.clone();
        Box::pin(async move {
            if inner.provider.key == KeySource::None {
                return false;
            }
            let old = inner.key.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
            match key::read(&inner.provider.key, &inner.provider.name).await {
                // The same key again would only be refused again.
                Ok(Some(new)) if Some(&new) != old.as_ref() => {
                    *inner.key.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
                        Some(new);
                    true
                }
                _ => false,
            }
        })
    }

    fn title(&self, prompt: String) -> BoxFuture<Result<(String, Option<Usage>), BoxError>> {
        let inner = self.inner.clone();
        Box::pin(async move {
            let request = ModelRequest {
                session: SessionId::new("title"),
                kind: RequestKind::Step,
                messages: vec![RequestMessage::User { text: prompt, attachments: vec![] }],
                tools: vec![],
            };
            let mut target = inner.model.target(Some(TITLE_PROMPT.to_owned()));
            target.reasoning = None;
            target.max_output_tokens = None;
            let mut response =
                inner.send("titles", encode(inner.provider.api, &request, &target)).await;
            let (mut title, mut events) = (String::new(), Vec::new());
            while response.next(&mut events).await {
                for event in events.drain(..) {
                    match event {
                        StepEvent::TextDelta { text } => title.push_str(&text),
                        StepEvent::Finished { usage, .. } => return Ok((title, usage)),
                        StepEvent::Failed { error } => return Err(BoxError::from(error.message)),
                        _ => {}
                    }
                }
            }
            Err(BoxError::from("the title stream ended without a finish"))
        })
    }
}
