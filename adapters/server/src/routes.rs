//! The routes: thin handlers over the host's public API (SPEC 9 "Server").
//!
//! Every handler checks its input (ids, body, query) into an [`ApiError`] before it calls
//! the host, so a malformed request is a `400` with a JSON body and never reaches the engine.

use std::time::Duration;

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, Path, Query, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};
use turnstile_core::{Attachment, MessageId, Mode, RunId, SessionId, Submit};
use turnstile_host::store::RunRow;
use turnstile_host::{CompletionRecord, Cursor};
use turnstile_tools::Answer;
use turnstile_tools::hook::{self, HookInput};

use crate::asks::{AnswerError, Closed};
use crate::auth::{Guard, guard};
use crate::config::{Limits, OPENAPI};
use crate::error::ApiError;
use crate::feed::{self, StartError, parse_event_id, session_json};
use crate::server::Server;

type ApiResult = Result<Response, ApiError>;

pub(crate) fn router(server: Server) -> Router {
    let limits = &server.inner.config.limits;
    let guard_state = Guard {
        token: server.inner.config.token.clone(),
        origins: server.inner.config.allowed_origins.clone().into(),
    };
    Router::new()
        .route("/v1/health", get(health))
        .route("/v1/openapi.json", get(openapi))
        .route("/v1/sessions", get(sessions))
        .route("/v1/sessions/{session}", get(session))
        .route("/v1/sessions/{session}/messages", get(messages))
        .route("/v1/sessions/{session}/prompts", post(prompt))
        .route("/v1/sessions/{session}/cancel", post(cancel))
        .route("/v1/sessions/{session}/clear", post(clear))
        .route("/v1/sessions/{session}/summarize", post(summarize))
        .route("/v1/runs/{run_id}", get(run))
        .route("/v1/runs/{run_id}/cancel", post(cancel_run))
        .route("/v1/runs/{run_id}/wait", get(wait))
        .route("/v1/asks", get(asks))
        .route("/v1/asks/{ask_id}", post(answer))
        .route("/v1/events", get(events))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(limits.body_bytes))
        .layer(middleware::from_fn_with_state(guard_state, guard))
        .layer(middleware::from_fn(head_limits))
        .layer(middleware::from_fn(log))
        .with_state(server)
}

/// Logs each request's method, path and status (never a header: the token is in one).
async fn log(request: Request, next: Next) -> Response {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let response = next.run(request).await;
    tracing::debug!(%method, path, status = response.status().as_u16(), "request");
    response
}

async fn not_found() -> ApiError {
    ApiError::not_found("no_such_route", "no such route; the API is described at /v1/openapi.json")
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "this route does not take that method; see /v1/openapi.json",
    )
}

/// The limits of a request head, for requests after a connection's first (which
/// [`crate::listen`] checked before hyper read it): the same JSON errors.
async fn head_limits(request: Request, next: Next) -> Response {
    let uri = request.uri().path_and_query().map_or(0, |p| p.as_str().len());
    if uri > crate::listen::URI_BYTES_MAX {
        return crate::listen::uri_too_long().into_response();
    }
    let head: usize = request.headers().iter().map(|(k, v)| k.as_str().len() + v.len() + 4).sum();
    if head + uri > crate::listen::HEAD_BYTES_MAX {
        return crate::listen::headers_too_large().into_response();
    }
    next.run(request).await
}

// ---- input checks ------------------------------------------------------------------------------

/// A session id or RunId from the path: UTF-8, not empty, not too long, no control characters.
fn id(
    path: Result<Path<String>, PathRejection>,
    what: &str,
    limits: &Limits,
) -> Result<String, ApiError> {
    let invalid = |why: String| ApiError::new(StatusCode::BAD_REQUEST, "invalid_id", why);
    let Path(text) =
        path.map_err(|e| invalid(format!("the {what} in the path is not valid: {e}")))?;
    check_id(&text, what, limits).map_err(invalid)?;
    Ok(text)
}

fn check_id(text: &str, what: &str, limits: &Limits) -> Result<(), String> {
    if text.is_empty() {
        return Err(format!("the {what} is empty"));
    }
    if text.trim().is_empty() {
        return Err(format!("the {what} is only whitespace"));
    }
    if text.len() > limits.id_bytes {
        return Err(format!(
            "the {what} is {} bytes long; at most {} are allowed",
            text.len(),
            limits.id_bytes
        ));
    }
    if text.chars().any(char::is_control) {
        return Err(format!("the {what} contains a control character"));
    }
    Ok(())
}

/// A JSON body. Any media type is read as JSON: the token and the `Origin` check, not the
/// media type, keep browsers out.
fn body<T: serde::de::DeserializeOwned>(
    bytes: Result<Bytes, BytesRejection>,
) -> Result<T, ApiError> {
    let bytes = bytes.map_err(|e| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large", e.body_text())
        } else {
            ApiError::invalid(e.body_text())
        }
    })?;
    serde_json::from_slice(&bytes).map_err(|e| {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_json", format!("the request body: {e}"))
    })
}

fn query<T>(q: Result<Query<T>, QueryRejection>) -> Result<T, ApiError> {
    q.map(|Query(t)| t)
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, "invalid_query", e.body_text()))
}

fn completion_json(cursor: Cursor, record: &CompletionRecord) -> Value {
    let mut v = serde_json::to_value(record).unwrap_or(Value::Null);
    v["cursor"] = json!(cursor.0);
    v
}

fn accepted(what: &str) -> Response {
    (StatusCode::ACCEPTED, Json(json!({"status": "accepted", "request": what}))).into_response()
}

/// 404 unless the store holds the session.
async fn known_session(server: &Server, session: &SessionId) -> Result<(), ApiError> {
    let s = session.clone();
    let state =
        server.inner.host.read(move |r| r.session_state(&s)).await.map_err(ApiError::store)?;
    match state {
        Some(_) => Ok(()),
        None => {
            Err(ApiError::not_found("session_not_found", format!("session not found: {session}")))
        }
    }
}

async fn ledger_row(server: &Server, run_id: &RunId) -> Result<RunRow, ApiError> {
    let r = run_id.clone();
    let row =
        server.inner.host.read(move |reader| reader.run(&r)).await.map_err(ApiError::store)?;
    row.ok_or_else(|| ApiError::not_found("run_not_found", format!("run not found: {run_id}")))
}

// ---- handlers ----------------------------------------------------------------------------------

async fn health(State(server): State<Server>) -> Response {
    let (status, code) = if let Some(why) = server.inner.host.stopped() {
        (StatusCode::SERVICE_UNAVAILABLE, format!("stopped: {why}"))
    } else if *server.inner.shutting_down.borrow() {
        (StatusCode::SERVICE_UNAVAILABLE, "shutting_down".to_owned())
    } else {
        (StatusCode::OK, "ok".to_owned())
    };
    (status, Json(json!({"status": code, "version": env!("CARGO_PKG_VERSION")}))).into_response()
}

async fn openapi() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], OPENAPI).into_response()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListQuery {
    /// Sub-agent sessions too.
    #[serde(default)]
    all: bool,
}

async fn sessions(
    State(server): State<Server>,
    q: Result<Query<ListQuery>, QueryRejection>,
) -> ApiResult {
    let q = query(q)?;
    let all = q.all;
    let list = server.inner.host.read(move |r| r.activity(all)).await.map_err(ApiError::store)?;
    let sessions: Vec<Value> = list
        .iter()
        .map(|a| {
            json!({
                "id": a.row.id, "parent": a.row.parent, "title": a.row.title,
                "prompt_tokens": a.row.prompt_tokens, "completion_tokens": a.row.completion_tokens,
                "cost_micros": a.row.cost_micros, "messages": a.messages,
                "submissions": a.submissions, "newest_seq": a.newest_seq,
                "last_activity_ms": a.last_activity_ms,
            })
        })
        .collect();
    Ok(Json(json!({"sessions": sessions})).into_response())
}

async fn session(
    State(server): State<Server>,
    path: Result<Path<String>, PathRejection>,
) -> ApiResult {
    let session = SessionId::new(id(path, "session id", &server.inner.config.limits)?);
    let s = session.clone();
    let state =
        server.inner.host.read(move |r| r.session_state(&s)).await.map_err(ApiError::store)?;
    let state = state.ok_or_else(|| {
        ApiError::not_found("session_not_found", format!("session not found: {session}"))
    })?;
    Ok(Json(session_json(&state)).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PageQuery {
    /// The id of the last message of the previous page (0, or none: from the first).
    after: Option<u64>,
    /// Messages per page (1 to 1000; 100 by default).
    limit: Option<usize>,
}

async fn messages(
    State(server): State<Server>,
    path: Result<Path<String>, PathRejection>,
    q: Result<Query<PageQuery>, QueryRejection>,
) -> ApiResult {
    let session = SessionId::new(id(path, "session id", &server.inner.config.limits)?);
    let q = query(q)?;
    let limit = q.limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_query",
            "`limit` must be from 1 to 1000",
        ));
    }
    known_session(&server, &session).await?;
    let no_message = || {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_query",
            format!("`after`: session {session} has no message {}", q.after.unwrap_or_default()),
        )
    };
    // Message ids are SQLite integers: one above `i64::MAX` names no message (the store would
    // refuse to look it up, a 500).
    if q.after.is_some_and(|a| i64::try_from(a).is_err()) {
        return Err(no_message());
    }
    let after = q.after.filter(|a| *a != 0).map(MessageId);
    let s = session.clone();
    let page = server
        .inner
        .host
        .read(move |r| r.messages_page(&s, after, limit))
        .await
        .map_err(ApiError::store)?;
    let page = page.ok_or_else(no_message)?;
    let next = if page.len() == limit { page.last().map(|m| m.id.0) } else { None };
    Ok(Json(json!({"messages": page, "next": next})).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PromptRequest {
    prompt: String,
    #[serde(default)]
    run_id: Option<String>,
    #[serde(default)]
    attachments: Vec<Attachment>,
    #[serde(default)]
    mode: PromptMode,
}

/// How a prompt meets a session that is working (SPEC 4.3).
#[derive(Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum PromptMode {
    /// Its own turn, after the ones before it.
    #[default]
    Queue,
    /// Folded into the running turn at its next step; its own turn when none runs.
    Steer,
}

async fn prompt(
    State(server): State<Server>,
    path: Result<Path<String>, PathRejection>,
    bytes: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let limits = &server.inner.config.limits;
    let session = id(path, "session id", limits)?;
    let req: PromptRequest = body(bytes)?;
    // The core takes whitespace as text (SPEC 4.1); over HTTP a prompt of only whitespace is
    // a client's mistake, refused like an empty one.
    let text_attached = req.attachments.iter().any(Attachment::is_text);
    if !req.prompt.is_empty() && req.prompt.trim().is_empty() && !text_attached {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "blank_prompt",
            "the prompt is only whitespace",
        ));
    }
    if req.prompt.len() > limits.prompt_bytes {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "prompt_too_long",
            format!(
                "the prompt is {} bytes long; at most {} are allowed",
                req.prompt.len(),
                limits.prompt_bytes
            ),
        ));
    }
    if req.attachments.len() > limits.attachments {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "too_many_attachments",
            format!(
                "{} attachments; at most {} are allowed",
                req.attachments.len(),
                limits.attachments
            ),
        ));
    }
    let config = &server.inner.config;
    if !config.prompt_hooks.is_empty() {
        let cwd = &config.hooks_cwd;
        let input = HookInput {
            prompt: Some(req.prompt.clone()),
            ..HookInput::new("user_prompt_submit", &session, cwd)
        };
        if let Err(why) = hook::user_prompt_submit(&config.prompt_hooks, &input, cwd).await {
            return Err(ApiError::new(StatusCode::BAD_REQUEST, "blocked_by_hook", why));
        }
    }
    let run_id = match req.run_id {
        Some(r) => {
            check_id(&r, "run_id", limits)
                .map_err(|why| ApiError::new(StatusCode::BAD_REQUEST, "invalid_id", why))?;
            r
        }
        None => uuid::Uuid::new_v4().to_string(),
    };
    let submit = Submit {
        attachments: req.attachments,
        ..Submit::new(&session, req.prompt).with_run_id(&run_id)
    };
    let host = &server.inner.host;
    let done = match req.mode {
        PromptMode::Queue => host.submit(submit).await?,
        PromptMode::Steer => host.steer(submit).await?,
    };
    // Steered into a running turn, the prompt has no RunId (a fold has none: it ends `folded`
    // with that turn, and no RunComplete of its own is sent).
    let steered = done.mode == Some(Mode::Fold);
    let run_id = if steered { serde_json::Value::Null } else { json!(run_id) };
    let mut body = json!({
        "session": done.session, "seq": done.seq, "run_id": run_id,
        "existing": done.existing, "outcome": done.outcome,
    });
    if req.mode == PromptMode::Steer {
        body["steered"] = json!(steered);
    }
    Ok((StatusCode::ACCEPTED, Json(body)).into_response())
}

async fn cancel(
    State(server): State<Server>,
    path: Result<Path<String>, PathRejection>,
) -> ApiResult {
    let session = SessionId::new(id(path, "session id", &server.inner.config.limits)?);
    known_session(&server, &session).await?;
    server.inner.host.cancel(&session).await?;
    Ok(accepted("cancel"))
}

async fn clear(
    State(server): State<Server>,
    path: Result<Path<String>, PathRejection>,
) -> ApiResult {
    let session = SessionId::new(id(path, "session id", &server.inner.config.limits)?);
    known_session(&server, &session).await?;
    server.inner.host.clear_queue(&session).await?;
    Ok(accepted("clear"))
}

async fn summarize(
    State(server): State<Server>,
    path: Result<Path<String>, PathRejection>,
) -> ApiResult {
    let session = SessionId::new(id(path, "session id", &server.inner.config.limits)?);
    server.inner.host.summarize(&session).await?;
    Ok(accepted("summarize"))
}

async fn run(State(server): State<Server>, path: Result<Path<String>, PathRejection>) -> ApiResult {
    let run_id = RunId::new(id(path, "run id", &server.inner.config.limits)?);
    let row = ledger_row(&server, &run_id).await?;
    let run_complete = row.completion.as_ref().map(|(c, r)| completion_json(*c, r));
    Ok(Json(json!({
        "run_id": run_id, "session": row.session, "seq": row.seq, "state": row.state,
        "run_complete": run_complete,
    }))
    .into_response())
}

async fn cancel_run(
    State(server): State<Server>,
    path: Result<Path<String>, PathRejection>,
) -> ApiResult {
    let run_id = RunId::new(id(path, "run id", &server.inner.config.limits)?);
    ledger_row(&server, &run_id).await?;
    server.inner.host.cancel_run(&run_id).await?;
    Ok(accepted("cancel_run"))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WaitQuery {
    /// How long to wait, in milliseconds (30 s by default, cut to the server's limit).
    timeout_ms: Option<u64>,
}

async fn wait(
    State(server): State<Server>,
    path: Result<Path<String>, PathRejection>,
    q: Result<Query<WaitQuery>, QueryRejection>,
) -> ApiResult {
    let limits = &server.inner.config.limits;
    let run_id = RunId::new(id(path, "run id", limits)?);
    let q = query(q)?;
    let timeout = Duration::from_millis(q.timeout_ms.unwrap_or(30_000)).min(limits.wait);
    let row = ledger_row(&server, &run_id).await?;
    if let Some((c, r)) = &row.completion {
        return Ok(
            Json(json!({"finished": true, "run_complete": completion_json(*c, r)})).into_response()
        );
    }
    match tokio::time::timeout(timeout, server.inner.host.wait(&run_id)).await {
        Err(_) => Ok(Json(json!({"finished": false})).into_response()),
        Ok(record) => {
            let record = record?;
            // The cursor is the ledger's: read it back (the record was committed).
            let row = ledger_row(&server, &run_id).await?;
            let cursor = row.completion.map_or(Cursor(0), |(c, _)| c);
            Ok(Json(json!({"finished": true, "run_complete": completion_json(cursor, &record)}))
                .into_response())
        }
    }
}

async fn asks(State(server): State<Server>) -> Response {
    Json(json!({"asks": server.inner.asks.pending()})).into_response()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AnswerRequest {
    answer: AnswerKind,
    #[serde(default)]
    message: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum AnswerKind {
    Once,
    Session,
    Deny,
}

async fn answer(
    State(server): State<Server>,
    path: Result<Path<String>, PathRejection>,
    bytes: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let ask = id(path, "ask id", &server.inner.config.limits)?;
    let req: AnswerRequest = body(bytes)?;
    let answer = match req.answer {
        AnswerKind::Once => Answer::Once,
        AnswerKind::Session => Answer::ForSession,
        AnswerKind::Deny => {
            Answer::Deny(req.message.unwrap_or_else(|| "the user denied this call".to_owned()))
        }
    };
    match server.inner.asks.answer_anywhere(&ask, answer).await {
        Ok(()) => Ok(Json(json!({"status": "answered"})).into_response()),
        Err(AnswerError::Unavailable(why)) => Err(ApiError::store(format!(
            "the store, which decides whether the ask was answered, could not be reached: {why}"
        ))),
        Err(AnswerError::Unknown) => {
            Err(ApiError::not_found("ask_not_found", format!("ask not found: {ask}")))
        }
        Err(AnswerError::Closed(why)) => Err(ApiError::new(
            StatusCode::CONFLICT,
            "ask_closed",
            match why {
                Closed::Answered => format!("ask {ask} was answered already"),
                Closed::Withdrawn => format!("ask {ask} was withdrawn: its call was cancelled"),
            },
        )),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EventsQuery {
    /// The position to resume after, as `Last-Event-ID` (for clients that cannot set it).
    last_event_id: Option<String>,
    /// `false`: whole `message` states only, no `message_delta` events.
    deltas: Option<bool>,
}

async fn events(
    State(server): State<Server>,
    headers: HeaderMap,
    q: Result<Query<EventsQuery>, QueryRejection>,
) -> ApiResult {
    let q = query(q)?;
    if let Some(why) = server.inner.host.stopped() {
        // Its feed has ended: a stream would end at once, and a client would reconnect forever.
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "engine_stopped",
            why.to_string(),
        ));
    }
    let invalid = |why: String| ApiError::new(StatusCode::BAD_REQUEST, "invalid_event_id", why);
    let header = match headers.get("last-event-id") {
        Some(v) => Some(
            v.to_str().map_err(|_| invalid("`Last-Event-ID` is not text".to_owned()))?.to_owned(),
        ),
        None => None,
    };
    let resume = header
        .or(q.last_event_id)
        .filter(|t| !t.trim().is_empty())
        .map(|t| parse_event_id(&t))
        .transpose()
        .map_err(invalid)?;
    let permit = server.inner.streams.clone().try_acquire_owned().map_err(|_| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "too_many_streams",
            format!(
                "{} event streams are open, the most this server allows",
                server.inner.config.limits.streams
            ),
        )
    })?;
    let config = feed::StreamConfig {
        heartbeat: server.inner.config.heartbeat,
        backlog_bytes: server.inner.config.stream_backlog_bytes,
        page: server.inner.config.catch_up_page.max(1),
        deltas: q.deltas.unwrap_or(true),
    };
    let rx = feed::open(
        &server.inner.feed,
        server.inner.host.clone(),
        server.inner.asks.clone(),
        resume,
        config,
        permit,
    )
    .await
    .map_err(|e| match e {
        StartError::Ahead(p, now) => invalid(format!(
            "`{}` is ahead of this server's store (now at `{}`)",
            feed::event_id(p),
            feed::event_id(now)
        )),
        StartError::Store(e) => ApiError::store(e),
    })?;
    let chunks = tokio_stream::StreamExt::map(
        tokio_stream::wrappers::ReceiverStream::new(rx),
        Ok::<_, std::convert::Infallible>,
    );
    let response = Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(axum::body::Body::from_stream(chunks))
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string()))?;
    Ok(response)
}

/// The routes and the serving of them.
impl Server {
    /// The routes, behind the `Origin` check and the token.
    pub fn router(&self) -> axum::Router {
        router(self.clone())
    }

    /// Serves the routes on `listener` with the configuration's connection limits
    /// ([`listen`](crate::listen)) until `shutdown` completes, then waits for the open connections to end
    /// (bound that wait: a client that stops reading keeps its connection).
    ///
    /// # Errors
    /// Accepting connections failed for good.
    pub async fn serve(
        &self,
        listener: tokio::net::TcpListener,
        shutdown: impl std::future::Future<Output = ()>,
    ) -> std::io::Result<()> {
        let limits = self.inner.config.connections.clone();
        crate::listen::serve(listener, self.router(), limits, shutdown).await
    }
}
