//! `turnstile run --server URL`: the same run against a `turnstile serve` (SPEC 9 "CLI").
//!
//! The client opens the event stream first (so it misses nothing of its run), then submits
//! the prompt with its own RunId, and waits for exactly that run's RunComplete on the stream.
//! A lost connection is resumed with `Last-Event-ID` from the last event received, also when
//! the server was killed and restarted: the server then delivers the RunComplete it missed
//! (`interrupted` for a turn the restart cut short, status 2). The first Ctrl-C (or SIGTERM)
//! cancels the run on the server with `cancel_run` (unlike Crush, which leaves it running:
//! G-12) and keeps waiting for its RunComplete; a second exits at once.
//!
//! `--server` may name several servers of one store (`URL1,URL2,...`, SPEC 11): a request or
//! the stream that cannot reach one moves to the next, and the stream resumes there from the
//! same `Last-Event-ID` (every server builds it from the ledger's one order). The prompt
//! carries its RunId, so sending it again elsewhere is answered with the same run.
//!
//! The server's permission asks for the run's sessions are shown (a `--json` line of type
//! `ask`); on a terminal (stdin and stderr) the client asks the question and sends the answer,
//! and anywhere else it answers `deny` at once, as a local `run` treats an ask (SPEC 9).

use std::collections::{BTreeMap, VecDeque};
use std::io::IsTerminal as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::mpsc;
use turnstile_core::{MessageId, RunId, SessionId};
use turnstile_host::CompletionRecord;
use turnstile_host::store::{StoredMessage, StoredRole};
use turnstile_server::delta::MessageDelta;
use turnstile_wire::sse::{Frame, Framer};

use crate::args::{Global, Run};
use crate::failure::{EXIT_USAGE, Failure};
use crate::live::{Show, View};

/// How long a run with several servers waits for one of them, per server: for requests that
/// reach none and for its event stream.
const PATIENCE: Duration = Duration::from_secs(5);

/// How long a lost server is waited for before the run gives up (status 1).
const GIVE_UP_AFTER: Duration = Duration::from_secs(300);

/// Runs `turnstile run --server URL`.
///
/// # Errors
/// Bad usage, no token, a server that cannot be reached or refuses the token, a rejected
/// prompt, or a server lost for good.
pub async fn run(_global: &Global, a: Run, url: &str, prompt: String) -> Result<u8, Failure> {
    // A model from TURNSTILE_MODEL is the environment's, not a choice made for this run.
    let from_env = std::env::var("TURNSTILE_MODEL").ok();
    let model_given = a.model.is_some() && a.model != from_env;
    for (given, flag) in [
        (model_given, "--model"),
        (a.yolo, "--yolo"),
        (a.cwd.is_some(), "--cwd"),
    ] {
        if given {
            return Err(Failure::usage(format!(
                "{flag} cannot be used with --server: the server chose its model, permissions \
                 and working directory when it started"
            )));
        }
    }
    let client = Client::new(url, token(a.token_file.clone())?)?;
    let session = session(&client, &a).await?;
    let run_id = RunId::new(
        a.run_id
            .clone()
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string()),
    );
    let show = crate::finish::show(a.json);
    // The stream first: once it answered, nothing the run does can be missed.
    let mut frames = follow(client.clone());
    // The first event, `asks`, lists what is pending, which an attached run's ask may be:
    // it is read once the view is ready.
    let unreachable =
        |client: &Client| Failure::setup(format!("cannot reach the server at {}", client.base()));
    let opening = match frames.recv().await {
        Some(Feed::Frame(f)) => f,
        Some(Feed::Lost(why)) | Some(Feed::Fatal(why)) => return Err(Failure::setup(why)),
        // With several servers the stream goes on to the next ones: a few seconds each.
        Some(Feed::Reconnecting) if client.servers.bases.len() > 1 => {
            let patience = PATIENCE * client.servers.bases.len() as u32;
            match tokio::time::timeout(patience, frames.recv()).await {
                Ok(Some(Feed::Frame(f))) => f,
                Ok(Some(Feed::Lost(why) | Feed::Fatal(why))) => return Err(Failure::setup(why)),
                _ => return Err(unreachable(&client)),
            }
        }
        None | Some(Feed::Reconnecting) => return Err(unreachable(&client)),
    };
    // Ctrl-C is ours from before the prompt is sent: a signal while it is on its way still
    // cancels the run on the server instead of leaving it running (G-12).
    let mut interrupts = Interrupts::new()?;
    let body = json!({"prompt": prompt, "run_id": run_id});
    let path = format!("/v1/sessions/{}/prompts", encode(session.as_str()));
    let accepted = match client.post(&path, &body).await? {
        (202, v) => v,
        (status, v) => {
            let message = error_message(&v);
            if show == Show::Json {
                crate::out::line(&json!({"type": "rejected", "message": message}).to_string());
            }
            let stopped = v["error"]["code"] == "engine_stopped";
            let failure = if matches!(status, 400 | 409 | 413 | 503) && !stopped {
                Failure {
                    status: EXIT_USAGE,
                    message: format!("the run was rejected: {message}"),
                }
            } else {
                Failure::setup(format!(
                    "the server refused the prompt ({status}): {message}"
                ))
            };
            return Err(failure);
        }
    };
    if show == Show::Json {
        let line = json!({
            "type": "accepted", "session": accepted["session"], "seq": accepted["seq"],
            "run_id": run_id, "existing": accepted["existing"],
        });
        crate::out::line(&line.to_string());
    }
    let mut view = View::new(session.clone(), show);
    let mut asking = Asking::new(client.clone());
    let mut streaming = Streaming::default();
    on_frame(&mut view, &mut asking, &mut streaming, &opening, &run_id).await;
    // An existing run may have finished before the stream opened: then only the ledger has
    // its RunComplete. (One that finishes later comes on the stream.)
    if accepted["existing"] == true {
        let (status, v) = client
            .get(&format!("/v1/runs/{}", encode(run_id.as_str())))
            .await?;
        if status == 200
            && let Ok(record) =
                serde_json::from_value::<CompletionRecord>(v["run_complete"].clone())
        {
            return Ok(crate::finish::report(&record, show));
        }
    }
    let mut cancelled = false;
    let record = loop {
        let feed = tokio::select! {
            biased;
            f = frames.recv() => f,
            Some(line) = asking.typed() => {
                asking.answer_typed(&mut view, &line).await;
                continue;
            }
            () = crate::out::closed(), if !cancelled => {
                // Nobody reads what the run prints: cancelled on the server, quietly.
                cancelled = true;
                let path = format!("/v1/runs/{}/cancel", encode(run_id.as_str()));
                if let Err(f) = client.post(&path, &json!({})).await {
                    tracing::warn!("cannot cancel the run: {}", f.message);
                }
                continue;
            }
            () = interrupts.next() => {
                if cancelled {
                    eprintln!("\nexiting without waiting; the run goes on being cancelled on the server");
                    std::process::exit(130);
                }
                cancelled = true;
                eprintln!("\ncancelling the run on the server (Ctrl-C again to exit at once)");
                // Sent on its own task: a second Ctrl-C still exits while it is on its way.
                let (client, path) = (client.clone(), format!("/v1/runs/{}/cancel", encode(run_id.as_str())));
                tokio::spawn(async move {
                    match client.post(&path, &json!({})).await {
                        Ok((202, _)) => {}
                        Ok((status, v)) => eprintln!("warning: the cancel was refused ({status}): {}", error_message(&v)),
                        Err(f) => eprintln!("warning: {}", f.message),
                    }
                });
                continue;
            }
        };
        match feed {
            Some(Feed::Frame(frame)) => {
                if let Some(record) =
                    on_frame(&mut view, &mut asking, &mut streaming, &frame, &run_id).await
                {
                    break record;
                }
            }
            Some(Feed::Reconnecting) => {
                view.note("[the connection to the server was lost; reconnecting]")
            }
            Some(Feed::Lost(why) | Feed::Fatal(why)) => {
                view.end();
                return Err(Failure::setup(why));
            }
            None => {
                view.end();
                return Err(Failure::setup("the event stream ended".to_owned()));
            }
        }
    };
    view.end();
    Ok(crate::finish::report(&record, show))
}

/// The last state of each followed message still being written, which a `message_delta`
/// event appends to.
#[derive(Debug, Default)]
struct Streaming {
    open: BTreeMap<MessageId, (u64, StoredMessage)>,
}

impl Streaming {
    /// A whole state of a message: kept while it is written (a user message never is).
    fn whole(&mut self, revision: u64, message: &StoredMessage) {
        if message.finish.is_none() && message.role != StoredRole::User {
            self.open.insert(message.id, (revision, message.clone()));
        } else {
            self.open.remove(&message.id);
        }
    }

    /// A delta: the message's new state, when it applies to the state held. The server sends
    /// one only on top of a state it sent on the same stream, so a miss is a bug (logged; the
    /// message's finish comes whole and repairs it).
    fn delta(&mut self, delta: &MessageDelta) -> Option<&StoredMessage> {
        let Some((revision, message)) = self.open.get_mut(&delta.id) else {
            tracing::warn!(message = %delta.id, "a message delta for a message not held");
            return None;
        };
        if *revision != delta.base_revision || delta.apply(message).is_err() {
            tracing::warn!(message = %delta.id, held = *revision, base = delta.base_revision,
                "a message delta on a state not held");
            return None;
        }
        *revision = delta.revision;
        Some(message)
    }
}

/// Applies one event to the view (and to the asks); the RunComplete when it is ours.
async fn on_frame(
    view: &mut View,
    asking: &mut Asking,
    streaming: &mut Streaming,
    frame: &Frame,
    run_id: &RunId,
) -> Option<CompletionRecord> {
    let Ok(data) = serde_json::from_str::<Value>(&frame.data) else {
        return None;
    };
    match frame.event.as_str() {
        "session" => {
            let id = SessionId::new(data["id"].as_str().unwrap_or_default());
            let parent = data["parent"].as_str().map(SessionId::new);
            view.learn(&id, parent.as_ref());
        }
        "message" => {
            let session = SessionId::new(data["session"].as_str().unwrap_or_default());
            let Ok(message) = serde_json::from_value::<StoredMessage>(data["message"].clone())
            else {
                return None;
            };
            if follows(view, &session) {
                streaming.whole(data["revision"].as_u64().unwrap_or_default(), &message);
                view.message(&session, &message);
            }
        }
        "message_delta" => {
            let Ok(delta) = serde_json::from_value::<MessageDelta>(data) else {
                return None;
            };
            if follows(view, &delta.session)
                && let Some(message) = streaming.delta(&delta)
            {
                view.message(&delta.session, message);
            }
        }
        "retry" => {
            let session = SessionId::new(data["session"].as_str().unwrap_or_default());
            if follows(view, &session) {
                view.retry(
                    &session,
                    data["seq"].as_u64().unwrap_or_default(),
                    u32::try_from(data["attempt"].as_u64().unwrap_or_default()).unwrap_or(u32::MAX),
                    data["delay_ms"].as_u64().unwrap_or_default(),
                    data["reason"].as_str().unwrap_or_default(),
                );
            }
        }
        // The `asks` frame that opens every connection lists what is pending, ours included
        // after a reconnection; each ask is taken once.
        "asks" => {
            for ask in data["asks"].as_array().into_iter().flatten() {
                let session = SessionId::new(ask["session"].as_str().unwrap_or_default());
                if follows(view, &session) {
                    asking.opened(view, ask).await;
                }
            }
        }
        "ask" => {
            let session = SessionId::new(data["session"].as_str().unwrap_or_default());
            if follows(view, &session) {
                asking.opened(view, &data).await;
            }
        }
        "ask_closed" => asking.closed(view, data["id"].as_str().unwrap_or_default()),
        "run_complete" if data["run_id"].as_str() == Some(run_id.as_str()) => {
            return serde_json::from_value(data).ok();
        }
        _ => {}
    }
    None
}

/// Whether a session's events are ours: our session, or a sub-agent whose id names one of
/// our assistant messages (`<message id>$$<call id>`, SPEC 4.11).
fn follows(view: &mut View, session: &SessionId) -> bool {
    if let Some(known) = view.knows(session) {
        return known;
    }
    let ours = turnstile_core::parent_message(session).is_some_and(|m| view.has_message(m));
    let parent = ours.then(|| view.session().clone());
    view.learn(session, parent.as_ref())
}

/// The session: `--session`, `--continue` (the server's most recent), a known `--run-id`'s,
/// or a new one.
async fn session(client: &Client, a: &Run) -> Result<SessionId, Failure> {
    if let Some(id) = &a.session {
        return Ok(SessionId::new(id));
    }
    if a.continue_ {
        let (status, v) = client.get("/v1/sessions").await?;
        if status != 200 {
            return Err(Failure::setup(format!(
                "cannot list the sessions ({status}): {}",
                error_message(&v)
            )));
        }
        return v["sessions"][0]["id"]
            .as_str()
            .map(SessionId::new)
            .ok_or_else(|| {
                Failure::usage("--continue: the server has no session yet; run a prompt first")
            });
    }
    if let Some(run_id) = &a.run_id {
        let (status, v) = client.get(&format!("/v1/runs/{}", encode(run_id))).await?;
        if status == 200
            && let Some(s) = v["session"].as_str()
        {
            return Ok(SessionId::new(s));
        }
    }
    Ok(SessionId::new(uuid::Uuid::new_v4().to_string()))
}

/// The token: `$TURNSTILE_SERVER_TOKEN`, else `--token-file`, else `.turnstile/server-token`.
fn token(file: Option<PathBuf>) -> Result<String, Failure> {
    if let Ok(t) = std::env::var(crate::setup::TOKEN_ENV)
        && !t.trim().is_empty()
    {
        return Ok(t.trim().to_owned());
    }
    let path = file.unwrap_or_else(|| {
        // The project's token, found from any of its subfolders as the store is.
        let cwd = std::env::current_dir().unwrap_or_default();
        crate::setup::project_root(&cwd)
            .join(".turnstile")
            .join("server-token")
    });
    std::fs::read_to_string(&path)
        .map(|t| t.trim().to_owned())
        .map_err(|e| {
            Failure::setup(format!(
                "no token for the server: set {} or give --token-file (cannot read `{}`: {e})",
                crate::setup::TOKEN_ENV,
                path.display()
            ))
        })
}

/// A path segment, percent-encoded.
fn encode(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for b in segment.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn error_message(v: &Value) -> String {
    v["error"]["message"]
        .as_str()
        .map_or_else(|| v.to_string(), str::to_owned)
}

/// The servers' addresses (one, or several of one store) and the token.
#[derive(Clone)]
struct Client {
    http: reqwest::Client,
    servers: std::sync::Arc<Servers>,
    token: String,
}

/// The servers a run may use, and the one it uses now.
struct Servers {
    bases: Vec<String>,
    at: std::sync::atomic::AtomicUsize,
}

impl Client {
    /// A client of `urls`: one URL, or several separated by commas.
    fn new(urls: &str, token: String) -> Result<Client, Failure> {
        let mut bases = Vec::new();
        for url in urls.split(',').map(str::trim).filter(|u| !u.is_empty()) {
            let base = url.trim_end_matches('/').to_owned();
            if !(base.starts_with("http://") || base.starts_with("https://")) {
                return Err(Failure::usage(format!(
                    "--server: `{url}` is not an http:// or https:// URL"
                )));
            }
            bases.push(base);
        }
        if bases.is_empty() {
            return Err(Failure::usage("--server: no URL given".to_owned()));
        }
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| Failure::setup(format!("cannot build the HTTP client: {e}")))?;
        let servers = Servers {
            bases,
            at: std::sync::atomic::AtomicUsize::new(0),
        };
        Ok(Client {
            http,
            servers: std::sync::Arc::new(servers),
            token,
        })
    }

    /// The server in use.
    fn base(&self) -> String {
        let s = &self.servers;
        s.bases[s.at.load(std::sync::atomic::Ordering::Relaxed) % s.bases.len()].clone()
    }

    /// Moves to the next server (the one in use could not be reached); false when there is
    /// only one.
    fn next_server(&self) -> bool {
        let s = &self.servers;
        s.at.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        s.bases.len() > 1
    }

    async fn get(&self, path: &str) -> Result<(u16, Value), Failure> {
        self.send(|base| self.http.get(format!("{base}{path}")))
            .await
    }

    async fn post(&self, path: &str, body: &Value) -> Result<(u16, Value), Failure> {
        self.send(|base| self.http.post(format!("{base}{path}")).json(body))
            .await
    }

    /// Sends a request to the server in use, and to each next one while it cannot be
    /// reached (every request of a run may be sent again: the prompt carries its RunId).
    /// With several servers, a moment when none can be reached (all still starting, or one
    /// dead while the next restarts) is waited out for [`PATIENCE`] a server, as the event
    /// stream does; one server that cannot be reached is an error at once.
    async fn send(
        &self,
        request: impl Fn(&str) -> reqwest::RequestBuilder,
    ) -> Result<(u16, Value), Failure> {
        let servers = self.servers.bases.len();
        let patience = tokio::time::Instant::now() + PATIENCE * servers as u32;
        let mut tries = servers;
        loop {
            let base = self.base();
            let r = request(&base).bearer_auth(&self.token).send().await;
            tries -= 1;
            match r {
                Err(e) if tries > 0 && self.next_server() => {
                    tracing::info!("cannot reach the server at {base}: {e}; trying the next one");
                }
                Err(e)
                    if servers > 1 && e.is_connect() && tokio::time::Instant::now() < patience =>
                {
                    tracing::info!("no server can be reached ({base}: {e}); trying again");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    self.next_server();
                    tries = servers;
                }
                r => return self.answer(&base, r).await,
            }
        }
    }

    async fn answer(
        &self,
        base: &str,
        r: reqwest::Result<reqwest::Response>,
    ) -> Result<(u16, Value), Failure> {
        let r = r.map_err(|e| Failure::setup(format!("cannot reach the server at {base}: {e}")))?;
        let status = r.status().as_u16();
        if status == 401 {
            return Err(Failure::setup(format!(
                "the server at {base} refused the token"
            )));
        }
        let text = r.text().await.unwrap_or_default();
        Ok((
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        ))
    }
}

/// The permission asks of the run's sessions (SPEC 9 "Tools"): on a terminal each is a
/// question, answered in turn; without one, nobody can answer, so each is denied at once, as a
/// local `run` denies an ask.
struct Asking {
    client: Client,
    /// Lines typed on the terminal; `None` when stdin or stderr is not a terminal.
    typed: Option<mpsc::Receiver<String>>,
    /// The asks waiting for an answer, oldest first: the first is the question shown.
    queue: VecDeque<Value>,
    /// Every ask taken (an ask is listed again by a reconnection's `asks` frame).
    seen: Vec<String>,
}

/// What a denial says when nobody can answer (the server's gate writes it into the result).
const NOBODY_TO_ASK: &str = "nobody can answer here: `turnstile run --server` has no terminal \
                             to ask on; allow the tool in the server's [permissions]";

impl Asking {
    fn new(client: Client) -> Asking {
        let terminal = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
        let typed = terminal.then(|| {
            let (tx, rx) = mpsc::channel(16);
            tokio::spawn(async move {
                use tokio::io::AsyncBufReadExt as _;
                let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    if tx.send(line).await.is_err() {
                        return;
                    }
                }
            });
            rx
        });
        Asking {
            client,
            typed,
            queue: VecDeque::new(),
            seen: Vec::new(),
        }
    }

    /// The next line typed while a question is shown; never, when none is.
    async fn typed(&mut self) -> Option<String> {
        match &mut self.typed {
            Some(rx) if !self.queue.is_empty() => rx.recv().await,
            _ => std::future::pending().await,
        }
    }

    /// A new ask of ours: shown, then asked (or denied when nobody can answer).
    async fn opened(&mut self, view: &mut View, ask: &Value) {
        let id = ask["id"].as_str().unwrap_or_default().to_owned();
        if self.seen.contains(&id) {
            return;
        }
        self.seen.push(id.clone());
        view.ask(ask);
        if self.typed.is_none() {
            self.send(view, &id, "deny", NOBODY_TO_ASK).await;
            return;
        }
        self.queue.push_back(ask.clone());
        if self.queue.len() == 1 {
            question(ask);
        }
    }

    /// An ask closed on the server (answered elsewhere, or withdrawn by a cancel).
    fn closed(&mut self, view: &mut View, id: &str) {
        let Some(at) = self.queue.iter().position(|a| a["id"] == id) else {
            return;
        };
        self.queue.remove(at);
        if at == 0 {
            view.note("[the question was withdrawn]");
            if let Some(next) = self.queue.front() {
                question(next);
            }
        }
    }

    /// A line typed as the answer to the question shown.
    async fn answer_typed(&mut self, view: &mut View, line: &str) {
        let Some(ask) = self.queue.front() else {
            return;
        };
        let id = ask["id"].as_str().unwrap_or_default().to_owned();
        let Some((answer, why)) = parse_answer(line) else {
            eprint!("answer y (yes, once), a (yes, for this session) or n (no): ");
            return;
        };
        self.queue.pop_front();
        self.send(view, &id, answer, why).await;
        if let Some(next) = self.queue.front() {
            question(next);
        }
    }

    async fn send(&self, view: &mut View, id: &str, answer: &str, why: &str) {
        let mut body = json!({"answer": answer});
        if answer == "deny" {
            body["message"] = json!(why);
        }
        match self
            .client
            .post(&format!("/v1/asks/{}", encode(id)), &body)
            .await
        {
            Ok((200, _)) => view.answered(id, answer, why),
            Ok((409, _)) => view.note("[the question was withdrawn before the answer]"),
            Ok((status, v)) => {
                eprintln!(
                    "warning: the answer was refused ({status}): {}",
                    error_message(&v)
                )
            }
            Err(f) => eprintln!("warning: {}", f.message),
        }
    }
}

/// The question for an ask, on stderr.
fn question(ask: &Value) {
    let on = ask["subject"]
        .as_str()
        .map(|s| format!(" on `{s}`"))
        .unwrap_or_default();
    eprint!(
        "May `{}` run{on}? [y] yes, once / [a] yes, for this session / [n] no: ",
        ask["tool"].as_str().unwrap_or_default()
    );
}

/// A typed answer: the server's answer and why; `None` for anything else.
fn parse_answer(line: &str) -> Option<(&'static str, &'static str)> {
    match line.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" | "once" => Some(("once", "the user allowed this call")),
        "a" | "always" | "session" => {
            Some(("session", "the user allowed the tool for the session"))
        }
        "n" | "no" | "deny" => Some(("deny", "the user denied this call")),
        _ => None,
    }
}

/// SIGINT and SIGTERM as a stream, installed once before the prompt is sent: a signal between
/// two waits is kept for the next one, never lost. SIGTERM is a Ctrl-C: it cancels the run on
/// the server too (G-12).
struct Interrupts {
    #[cfg(unix)]
    signal: tokio::signal::unix::Signal,
    #[cfg(unix)]
    terminate: tokio::signal::unix::Signal,
}

impl Interrupts {
    fn new() -> Result<Interrupts, Failure> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let listen = |kind| {
                signal(kind).map_err(|e| Failure::setup(format!("cannot listen for signals: {e}")))
            };
            Ok(Interrupts {
                signal: listen(SignalKind::interrupt())?,
                terminate: listen(SignalKind::terminate())?,
            })
        }
        #[cfg(not(unix))]
        {
            Ok(Interrupts {})
        }
    }

    async fn next(&mut self) {
        #[cfg(unix)]
        {
            tokio::select! {
                biased;
                _ = self.signal.recv() => {}
                _ = self.terminate.recv() => {}
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// How long a stream may be silent (the server's heartbeat is every 15 s) before the
/// connection is taken for dead and resumed.
const SILENCE: Duration = Duration::from_secs(45);

/// What the stream follower reports.
enum Feed {
    Frame(Frame),
    /// The connection dropped; it is being resumed.
    Reconnecting,
    /// The server could not be reached for too long.
    Lost(String),
    /// The server refused the stream (the token, a bad position).
    Fatal(String),
}

/// Follows `/v1/events`, resuming from the last event id after any loss (on the next server,
/// when there are several).
fn follow(client: Client) -> mpsc::Receiver<Feed> {
    let (tx, rx) = mpsc::channel(256);
    tokio::spawn(async move {
        let mut last: Option<String> = None;
        let mut lost_since: Option<Instant> = None;
        let mut delay = Duration::from_millis(100);
        loop {
            let mut req = client
                .http
                .get(format!("{}/v1/events", client.base()))
                .bearer_auth(&client.token);
            if let Some(id) = &last {
                req = req.header("Last-Event-ID", id);
            }
            match req.send().await {
                Ok(mut resp) if resp.status().is_success() => {
                    let mut framer = Framer::new();
                    let mut out = Vec::new();
                    // A half-open connection sends nothing, not even heartbeats: resume.
                    while let Ok(Ok(Some(chunk))) =
                        tokio::time::timeout(SILENCE, resp.chunk()).await
                    {
                        if framer.feed(&chunk, &mut out).is_err() {
                            break;
                        }
                        for frame in out.drain(..) {
                            lost_since = None;
                            delay = Duration::from_millis(100);
                            if let Some(id) = &frame.id {
                                last = Some(id.clone());
                            }
                            if tx.send(Feed::Frame(frame)).await.is_err() {
                                return;
                            }
                        }
                    }
                }
                Ok(resp) => {
                    // A refusal (the token, a bad position) or an engine that stopped is for
                    // good; anything else (too many streams, a proxy's 502) is retried.
                    let status = resp.status().as_u16();
                    let v: Value = resp.json().await.unwrap_or(Value::Null);
                    if (400..500).contains(&status) || v["error"]["code"] == "engine_stopped" {
                        let why = format!(
                            "the server refused the event stream ({status}): {}",
                            error_message(&v)
                        );
                        let _ = tx.send(Feed::Fatal(why)).await;
                        return;
                    }
                }
                Err(_) => {}
            }
            let first_loss = lost_since.is_none();
            let since = *lost_since.get_or_insert_with(Instant::now);
            if since.elapsed() > GIVE_UP_AFTER {
                let _ = tx
                    .send(Feed::Lost(format!(
                        "lost the server at {} for {} s; the run goes on there (`turnstile run --server {} --run-id <id>` attaches again)",
                        client.base(),
                        GIVE_UP_AFTER.as_secs(),
                        client.base()
                    )))
                    .await;
                return;
            }
            if first_loss && tx.send(Feed::Reconnecting).await.is_err() {
                return;
            }
            // With several servers, the next one: it resumes from the same event.
            client.next_server();
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(Duration::from_secs(2));
        }
    });
    rx
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_answers_are_read_leniently_and_anything_else_is_asked_again() {
        assert_eq!(parse_answer(" Y\n").map(|a| a.0), Some("once"));
        assert_eq!(parse_answer("always").map(|a| a.0), Some("session"));
        assert_eq!(parse_answer("n").map(|a| a.0), Some("deny"));
        assert_eq!(parse_answer("maybe"), None);
        assert_eq!(parse_answer(""), None);
    }

    #[test]
    fn path_segments_are_encoded() {
        assert_eq!(encode("a b/c$$d"), "a%20b%2Fc%24%24d");
        assert_eq!(encode("run-1_x.y~"), "run-1_x.y~");
    }
}
