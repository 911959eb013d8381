//! The HTTP provider: the host's [`Provider`] over one configured model, with the wire crate
//! doing all encoding, decoding and classification. This module only moves bytes: it sends the
//! request, reads status and headers, feeds the body to the decoder as it arrives, and prices
//! the usage. Dropping a stream's future drops the response, which closes the connection at
//! once (how a cancel, or the core's stream watchdog, ends an attempt).

use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures_util::{Stream, StreamExt};
use turnstile_core::{SessionId, StepEvent, Usage};
use turnstile_host::{BoxError, BoxFuture, EventSink, ModelInfo, Provider};
use turnstile_wire::{
    Api, Decoder, ModelRequest, Prices, RequestKind, RequestMessage, Target, classify, encode,
    transport,
};

use crate::config::{Config, ConfigError, KeySource, ModelConfig, ProviderConfig};
use crate::key::{self, ApiKey};
use crate::prompt::{TITLE_PROMPT, default_system_prompt, utc_date};
use crate::record::{Exchange, Recorder};

/// How long connecting may take before the attempt fails as a transport error.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// The largest error body read (the rest is not needed to classify it).
const ERROR_BODY_MAX: usize = 64 * 1024;

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
    working_dir: String,
    /// The key in use, read at the first request (or preparation) and at each refresh.
    key: Mutex<Option<ApiKey>>,
    recorder: Option<Recorder>,
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
                working_dir,
                key: Mutex::new(None),
                recorder: None,
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

    /// The same provider, whose default system prompt names `dir` as the working directory.
    #[must_use]
    pub fn with_working_dir(self, dir: impl Into<String>) -> HttpProvider {
        let dir = dir.into();
        self.edit(|i| i.working_dir = dir)
    }

    /// The same provider, recording every exchange under `root` (see [`crate::record`]) in a
    /// case folder `name`.
    ///
    /// # Errors
    /// The folder cannot be created.
    pub fn with_recordings(
        self,
        root: impl Into<PathBuf>,
        name: &str,
    ) -> Result<HttpProvider, SetupError> {
        let root = root.into();
        let recorder =
            Recorder::create(&root, self.inner.provider.api, &self.inner.model.api_model, name)
                .map_err(|source| SetupError::Recordings { path: root.clone(), source })?;
        Ok(self.edit(|i| i.recorder = Some(recorder)))
    }

    /// The recorder, when recording.
    #[must_use]
    pub fn recorder(&self) -> Option<&Recorder> {
        self.inner.recorder.as_ref()
    }

    /// The wire API.
    #[must_use]
    pub fn api(&self) -> Api {
        self.inner.provider.api
    }
}

impl Inner {
    fn target(&self, request: &ModelRequest) -> Target {
        let system = self.system_prompt.clone().unwrap_or_else(|| {
            let secs = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
            default_system_prompt(&self.working_dir, &utc_date(secs), &request.tools)
        });
        self.model.target(Some(system))
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

    /// Sends `body` and returns the exchange whose events are read with [`Response::next`].
    async fn send(&self, body: serde_json::Value) -> Response {
        let mut recording =
            self.recorder.as_ref().map(|r| r.start(self.provider.api.path(), &body));
        let failed = |error, recording| Response {
            events: vec![StepEvent::Failed { error }],
            body: None,
            decoder: Decoder::new(self.provider.api),
            recording,
            prices: self.prices(),
        };
        let key = match self.key().await {
            Ok(k) => k,
            Err(message) => {
                let error = turnstile_core::ProviderError {
                    class: turnstile_core::ErrorClass::Unauthorized,
                    message,
                    ..Default::default()
                };
                return failed(error, recording);
            }
        };
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
                Api::AnthropicMessages => request.header("x-api-key", key.expose()),
                Api::OpenAiChat | Api::OpenAiResponses => request.bearer_auth(key.expose()),
            };
        }
        let bytes = serde_json::to_vec(&body).unwrap_or_default();
        let response = match request.body(bytes).send().await {
            Ok(r) => r,
            Err(e) => return failed(transport(describe(&e)), recording),
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
                        body.extend_from_slice(
                            &c[..c.len().min(ERROR_BODY_MAX - body.len().min(ERROR_BODY_MAX))],
                        );
                    }
                    Err(_) => break,
                }
            }
            let now =
                SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
            return failed(classify(status, &headers, &body, now), recording);
        }
        Response {
            events: Vec::new(),
            body: Some(Box::pin(response.bytes_stream())),
            decoder: Decoder::new(self.provider.api),
            recording,
            prices: self.prices(),
        }
    }
}

type BodyStream = Pin<Box<dyn Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>;

/// An exchange whose answer is being read.
struct Response {
    /// Events decided before any body (a failure), handed out first.
    events: Vec<StepEvent>,
    body: Option<BodyStream>,
    decoder: Decoder,
    recording: Option<Exchange>,
    prices: Prices,
}

impl Response {
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
        for event in out.iter_mut() {
            if let StepEvent::Finished { usage: Some(usage), .. } = event {
                *usage = self.prices.priced(*usage);
            }
        }
        true
    }
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
            let mut response = inner.send(body).await;
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
            let mut response = inner.send(encode(inner.provider.api, &request, &target)).await;
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
