//! What a run shows while it works (SPEC 9 "CLI"): on a terminal, the text as it streams and
//! one line per tool call on stderr; with `--json`, every live event as a JSON Line on stdout.
//!
//! The live updates are lossy (a slow reader gets `lagged`); what they point at is re-read
//! from the store, so what is shown is what is stored. A retry's reset (the failed attempt's
//! text is replaced, G-11) restarts the shown text instead of appending to it. A retry is
//! shown after the failed attempt's text (the host announces it after that text's writes,
//! which the follower flushes and reads first),
//! and is always said on stderr: the live line on a terminal, else a log line
//! (`turnstile: retrying in 5 s (attempt 2): Overloaded`), so a wait of half a minute is
//! never silent.
//!
//! JSON Lines, one object per line with a `type` (the schema is in `docs/cli.md`):
//! `accepted`, `text`, `reset`, `retry`, `tool_call`, `tool_result`, `lagged`, and last
//! `run_complete`.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write as _;

use serde_json::{Value, json};
use tokio::sync::oneshot;
use turnstile_core::{MessageId, SessionId};
use turnstile_host::store::{StoredMessage, StoredRole};
use turnstile_host::{Event, Host, Update, Updates};

/// How live events are shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Show {
    /// Not at all (stderr is not a terminal, and no `--json`).
    Nothing,
    /// Text and tool lines on stderr.
    Terminal,
    /// JSON Lines on stdout.
    Json,
}

/// What a view shows on a terminal, for a screen that draws it itself (`turnstile chat` on a
/// terminal) instead of writing to stderr.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Piece {
    /// More of the answer's text (maybe part of a line).
    Text(String),
    /// The answer's text stops here: what follows starts on a line of its own.
    EndText,
    /// A whole line (a tool call, a retry, a note).
    Line(String),
    /// The followed session's turn started a model step (its first sight of an answer).
    Step,
    /// A tool call began to run.
    ToolStarted {
        /// The call's id.
        call: String,
        /// The tool.
        name: String,
    },
    /// A tool call has its result.
    ToolDone {
        /// The call's id.
        call: String,
    },
}

/// A running follower; [`Follower::stop`] ends it after the events received so far.
pub struct Follower {
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl Follower {
    /// Follows the updates of `session` (and of the sub-agents it starts).
    pub fn start(host: Host, mut updates: Updates, session: SessionId, show: Show) -> Follower {
        let (stop, mut stopped) = oneshot::channel();
        let task = tokio::spawn(async move {
            let mut view = StoreView {
                host,
                view: View::new(session, show),
            };
            loop {
                let event = tokio::select! {
                    biased;
                    e = updates.recv() => e,
                    _ = &mut stopped => None,
                };
                let Some(event) = event else { break };
                if show == Show::Nothing && !matches!(event, Event::Update(Update::Retrying { .. }))
                {
                    // Nothing live is shown but the retries' log lines.
                    continue;
                }
                view.on(event).await;
            }
            if show == Show::Nothing {
                return;
            }
            // What the last updates wrote, in case they were not all received.
            view.refresh_all().await;
            view.view.end();
        });
        Follower {
            stop: Some(stop),
            task,
        }
    }

    /// Stops following, after showing what is stored now.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = self.task.await;
    }
}

/// What was shown of one message.
#[derive(Default)]
struct Shown {
    text: String,
    calls: BTreeSet<String>,
    results: BTreeSet<String>,
}

/// What a run shows, fed with stored messages from wherever they come from: the local
/// store ([`Follower`]) or a server's event stream (`remote`).
pub struct View {
    session: SessionId,
    show: Show,
    /// Sessions followed: ours, and the sub-agents' whose parent is ours.
    followed: BTreeSet<SessionId>,
    /// Sessions known not to be followed.
    ignored: BTreeSet<SessionId>,
    shown: BTreeMap<MessageId, Shown>,
    /// The message whose text the terminal line is in the middle of.
    open_line: Option<MessageId>,
    /// What a screen draws, when one does ([`View::drawn`]); else the terminal is stderr.
    pieces: Option<Vec<Piece>>,
}

/// A view over the local host's store.
pub struct StoreView {
    host: Host,
    view: View,
}

impl StoreView {
    /// A view of `session` over `host`'s store.
    pub fn new(host: Host, view: View) -> StoreView {
        StoreView { host, view }
    }

    /// The view.
    pub fn view(&mut self) -> &mut View {
        &mut self.view
    }

    /// Shows what `event` changed.
    pub async fn on(&mut self, event: Event) {
        match event {
            Event::Lagged { skipped } => {
                self.view.lagged(skipped);
                self.refresh_all().await;
            }
            Event::Update(Update::MessageUpdated { session, message }) => {
                if self.follows(&session).await {
                    self.refresh(&session, Some(message)).await;
                }
            }
            Event::Update(Update::Retrying {
                session,
                seq,
                attempt,
                delay_ms,
                reason,
            }) => {
                if self.follows(&session).await {
                    if self.view.show != Show::Nothing {
                        // The failed attempt's last text may still be held by the store's
                        // debounce: written and shown first, so that the retry line comes
                        // after the text it retries, not in the middle of it.
                        let _ = self.host.flush().await;
                        self.refresh(&session, None).await;
                    }
                    self.view.retry(&session, seq.0, attempt, delay_ms, &reason);
                }
            }
            Event::Update(_) => {}
        }
    }

    /// Whether `session` is ours or a sub-agent's of ours (read once from the store).
    async fn follows(&mut self, session: &SessionId) -> bool {
        if let Some(known) = self.view.knows(session) {
            return known;
        }
        let id = session.clone();
        let row = self.host.read(move |r| r.session(&id)).await.ok().flatten();
        self.view
            .learn(session, row.and_then(|r| r.parent).as_ref())
    }

    /// A turn ended: what is stored is shown, and the answer's open line is closed.
    pub async fn settle(&mut self) {
        self.refresh_all().await;
        self.view.end();
    }

    async fn refresh_all(&mut self) {
        for session in self.view.followed.clone() {
            self.refresh(&session, None).await;
        }
    }

    /// Shows what changed in `session`'s messages (`only`: that message).
    async fn refresh(&mut self, session: &SessionId, only: Option<MessageId>) {
        let id = session.clone();
        let Ok(messages) = self.host.read(move |r| r.messages(&id)).await else {
            return;
        };
        for m in messages {
            if only.is_some_and(|o| o != m.id) {
                continue;
            }
            self.view.message(session, &m);
        }
    }
}

impl View {
    /// A view of `session`'s run, shown as `show` says.
    pub fn new(session: SessionId, show: Show) -> View {
        let followed = BTreeSet::from([session.clone()]);
        View {
            session,
            show,
            followed,
            ignored: BTreeSet::new(),
            shown: BTreeMap::new(),
            open_line: None,
            pieces: None,
        }
    }

    /// A view whose terminal output is kept as [`Piece`]s for a screen to draw
    /// ([`View::take_pieces`]).
    pub fn drawn(session: SessionId) -> View {
        View {
            pieces: Some(Vec::new()),
            ..View::new(session, Show::Terminal)
        }
    }

    /// The pieces shown since the last call (none unless [`View::drawn`]).
    pub fn take_pieces(&mut self) -> Vec<Piece> {
        self.pieces.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// Whether `session` is followed, when that is known already: ours and the children
    /// learnt so far are; a top-level session other than ours is not.
    pub fn knows(&self, session: &SessionId) -> Option<bool> {
        if self.followed.contains(session) {
            return Some(true);
        }
        if self.ignored.contains(session) || !session.is_child() {
            return Some(false);
        }
        None
    }

    /// Learns `session`'s parent; returns whether it is followed (a sub-agent of ours).
    pub fn learn(&mut self, session: &SessionId, parent: Option<&SessionId>) -> bool {
        if let Some(known) = self.knows(session) {
            return known;
        }
        let ours = parent.is_some_and(|p| self.followed.contains(p));
        if ours {
            self.followed.insert(session.clone());
        } else {
            self.ignored.insert(session.clone());
        }
        ours
    }

    /// The session whose run this is.
    pub fn session(&self) -> &SessionId {
        &self.session
    }

    /// True when the message was shown (it belongs to a followed session).
    pub fn has_message(&self, id: MessageId) -> bool {
        self.shown.contains_key(&id)
    }

    /// A lagged notice (the live path dropped updates; what is stored is read again).
    pub fn lagged(&mut self, skipped: u64) {
        self.emit_json(json!({"type": "lagged", "skipped": skipped}));
    }

    /// A retry of one of the followed sessions' attempts.
    pub fn retry(
        &mut self,
        session: &SessionId,
        seq: u64,
        attempt: u32,
        delay_ms: u64,
        reason: &str,
    ) {
        self.emit_json(json!({
            "type": "retry", "session": session, "seq": seq, "attempt": attempt,
            "delay_ms": delay_ms, "reason": reason,
        }));
        let wait = seconds(delay_ms);
        if self.show == Show::Terminal {
            self.line(&format!(
                "[retrying in {wait} (attempt {attempt}): {reason}]"
            ));
        } else if !crate::out::is_closed() {
            // Not a terminal (a log, CI), or stdout has the JSON: one line on stderr (none
            // once stdout's reader went away: the run is being ended quietly).
            eprintln!("turnstile: retrying in {wait} (attempt {attempt}): {reason}");
        }
    }

    /// A note on the terminal (and nothing in JSON).
    pub fn note(&mut self, text: &str) {
        self.line(text);
    }

    /// A permission ask of a followed session (`turnstile run --server`): its JSON Line, and
    /// on the terminal what it asks.
    pub fn ask(&mut self, ask: &Value) {
        self.emit_json(json!({
            "type": "ask", "id": ask["id"], "session": ask["session"], "tool": ask["tool"],
            "call_id": ask["call_id"], "input": ask["input"], "subject": ask["subject"],
        }));
        let on = ask["subject"]
            .as_str()
            .map(|s| format!(" on `{s}`"))
            .unwrap_or_default();
        self.line(&format!(
            "[the server asks whether `{}` may run{on}]",
            ask["tool"].as_str().unwrap_or_default()
        ));
    }

    /// What this client answered to an ask (`once`, `session` or `deny`), and why.
    pub fn answered(&mut self, id: &str, answer: &str, why: &str) {
        self.emit_json(json!({"type": "ask_answered", "id": id, "answer": answer, "why": why}));
        if answer == "deny" {
            self.line(&format!("[denied: {why}]"));
        }
    }

    /// Shows what is new in a followed session's stored message (assistant messages only).
    pub fn message(&mut self, session: &SessionId, m: &StoredMessage) {
        if m.role != StoredRole::Assistant {
            return;
        }
        let child = session != &self.session;
        if !child && !self.shown.contains_key(&m.id) {
            self.piece(Piece::Step);
        }
        let shown = self.shown.entry(m.id).or_default();
        let mut out = Vec::new();
        if let Some(delta) = m.text.strip_prefix(shown.text.as_str()) {
            if !delta.is_empty() {
                out.push(Out::Text(delta.to_owned()));
            }
        } else {
            // The stored text no longer starts with what was shown: a retry reset it.
            out.push(Out::Reset);
            if !m.text.is_empty() {
                out.push(Out::Text(m.text.clone()));
            }
        }
        shown.text.clone_from(&m.text);
        for c in &m.calls {
            if c.finished && shown.calls.insert(c.call.as_str().to_owned()) {
                out.push(Out::Call(
                    c.name.clone(),
                    c.call.as_str().to_owned(),
                    c.input.clone(),
                ));
            }
        }
        for r in &m.results {
            if shown.results.insert(r.call.as_str().to_owned()) {
                let name = m
                    .calls
                    .iter()
                    .find(|c| c.call == r.call)
                    .map(|c| c.name.clone());
                out.push(Out::Result(
                    name,
                    r.call.as_str().to_owned(),
                    r.is_error,
                    r.content.clone(),
                ));
            }
        }
        for o in out {
            self.out(session, m.id, child, o);
        }
    }

    fn out(&mut self, session: &SessionId, message: MessageId, child: bool, o: Out) {
        let base = |kind: &str| json!({"type": kind, "session": session, "message": message});
        match o {
            Out::Text(delta) => {
                let mut v = base("text");
                v["delta"] = Value::String(delta.clone());
                self.emit_json(v);
                if self.show == Show::Terminal && !child {
                    if self.open_line != Some(message) {
                        self.close_line();
                        self.open_line = Some(message);
                    }
                    match &mut self.pieces {
                        Some(pieces) => pieces.push(Piece::Text(delta)),
                        None => {
                            eprint!("{delta}");
                            let _ = std::io::stderr().flush();
                        }
                    }
                }
            }
            Out::Reset => {
                self.emit_json(base("reset"));
                if !child {
                    self.line("[the answer restarts]");
                }
            }
            Out::Call(name, call, input) => {
                let mut v = base("tool_call");
                self.piece(Piece::ToolStarted {
                    call: call.clone(),
                    name: name.clone(),
                });
                v["call"] = Value::String(call);
                v["name"] = Value::String(name.clone());
                v["input"] = input
                    .as_deref()
                    .and_then(|i| serde_json::from_str(i).ok())
                    .unwrap_or(Value::Null);
                self.emit_json(v);
                let indent = if child { "    " } else { "" };
                self.line(&format!(
                    "{indent}→ {name} {}",
                    brief(input.as_deref().unwrap_or(""))
                ));
            }
            Out::Result(name, call, is_error, content) => {
                let mut v = base("tool_result");
                self.piece(Piece::ToolDone { call: call.clone() });
                v["call"] = Value::String(call);
                v["name"] = name.clone().map_or(Value::Null, Value::String);
                v["is_error"] = Value::Bool(is_error);
                v["content"] = Value::String(content.clone());
                self.emit_json(v);
                if is_error {
                    let indent = if child { "    " } else { "" };
                    self.line(&format!("{indent}  ✗ {}", brief(&content)));
                }
            }
        }
    }

    fn emit_json(&self, v: Value) {
        if self.show == Show::Json {
            crate::out::line(&v.to_string());
        }
    }

    /// One whole line on the terminal (after the text, if a line of it is open).
    fn line(&mut self, text: &str) {
        if self.show == Show::Terminal {
            self.close_line();
            match &mut self.pieces {
                Some(pieces) => pieces.push(Piece::Line(text.to_owned())),
                None => eprintln!("{text}"),
            }
        }
    }

    fn close_line(&mut self) {
        if self.open_line.take().is_some() {
            match &mut self.pieces {
                Some(pieces) => pieces.push(Piece::EndText),
                None => eprintln!(),
            }
        }
    }

    /// A piece only a screen draws (nothing on stderr).
    fn piece(&mut self, piece: Piece) {
        if let Some(pieces) = &mut self.pieces {
            pieces.push(piece);
        }
    }

    /// Ends the open line, if any.
    pub fn end(&mut self) {
        self.close_line();
    }
}

enum Out {
    Text(String),
    Reset,
    Call(String, String, Option<String>),
    Result(Option<String>, String, bool, String),
}

/// Milliseconds as seconds for a person: "5 s", "1.5 s".
fn seconds(ms: u64) -> String {
    if ms.is_multiple_of(1_000) {
        format!("{} s", ms / 1_000)
    } else {
        format!("{:.1} s", ms as f64 / 1_000.0)
    }
}

/// A call's input or a result on one short line.
fn brief(text: &str) -> String {
    let one: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut chars = one.chars();
    let head: String = chars.by_ref().take(100).collect();
    if chars.next().is_some() {
        format!("{head}…")
    } else {
        head
    }
}
