//! The chat on a terminal: the input line stays editable while the agent works.
//!
//! One loop owns the screen and reads, in this order (`biased`): the keys, the permission
//! questions of the tools, a question withdrawn by a cancel, the host's updates, and the
//! status line's clock. Every decision a key leads to goes to the host in the order the keys
//! came, so an Escape's watermark (SPEC 4.10) is after everything typed before it and before
//! everything typed after it.
//!
//! | key | idle | working |
//! |---|---|---|
//! | Enter | a turn | steers the running turn (folded at its next step, SPEC 4.3) |
//! | Alt-Enter | a turn | a turn of its own, queued |
//! | Escape | nothing | cancels the session's unfinished work; again: nothing more |
//! | Ctrl-C | clears the line; twice on an empty line: leave | as Escape |
//! | Ctrl-D | leave (on an empty line) | cancels, then leaves |

use std::collections::{BTreeSet, VecDeque};
use std::io::Stdout;
use std::path::Path;
use std::time::{Duration, Instant};

use crossterm::event::{Event as Term, EventStream, KeyCode, KeyEvent, KeyEventKind};
use futures_util::StreamExt as _;
use tokio::sync::{mpsc, oneshot};
use turnstile_core::{Outcome, RunId, SessionId, Submit};
use turnstile_host::BoxFuture;
use turnstile_host::{CompletionRecord, Event, Host, SubmitError, Update};
use turnstile_tools::hook::{self, HookInput};
use turnstile_tools::{Answer, Ask, Asker, Hooks};

use super::editor::{Action, Editor, Send};
use super::history::History;
use super::screen::{Bottom, Screen};
use super::slash::{Slash, Typed};
use super::status::Status;
use crate::failure::Failure;
use crate::live::{Piece, StoreView, View};

/// A permission question, and where its answer goes.
pub struct Asked {
    ask: Ask,
    reply: oneshot::Sender<Answer>,
}

/// The asker of the interactive chat: the questions go to the screen's loop.
pub struct ScreenAsker(mpsc::UnboundedSender<Asked>);

impl ScreenAsker {
    /// An asker, and the loop's end of it.
    pub fn new() -> (ScreenAsker, mpsc::UnboundedReceiver<Asked>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (ScreenAsker(tx), rx)
    }
}

impl Asker for ScreenAsker {
    fn ask(&self, ask: Ask) -> BoxFuture<Answer> {
        let (reply, answer) = oneshot::channel();
        let sent = self.0.send(Asked { ask, reply });
        Box::pin(async move {
            if sent.is_err() {
                return Answer::Deny("the chat has ended; nobody can answer".into());
            }
            answer
                .await
                .unwrap_or_else(|_| Answer::Deny("the question was withdrawn".into()))
        })
    }
}

/// Restores the terminal however the loop ends (a panic included).
struct RawMode;

impl RawMode {
    fn enter() -> std::io::Result<RawMode> {
        crossterm::terminal::enable_raw_mode()?;
        let _ = crossterm::execute!(std::io::stdout(), crossterm::event::EnableBracketedPaste);
        Ok(RawMode)
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        let _ = crossterm::execute!(std::io::stdout(), crossterm::event::DisableBracketedPaste);
        let _ = crossterm::terminal::disable_raw_mode();
    }
}

/// What the chat works with.
pub struct Setting<'a> {
    /// The host.
    pub host: &'a Host,
    /// The hooks (`user_prompt_submit`, `stop`).
    pub hooks: &'a Hooks,
    /// The working directory.
    pub cwd: &'a Path,
    /// The prompt history's file.
    pub history: &'a Path,
}

/// Runs the chat on the terminal until the person leaves.
///
/// # Errors
/// The terminal could not be used.
pub async fn run(
    setting: Setting<'_>,
    session: SessionId,
    asks: mpsc::UnboundedReceiver<Asked>,
) -> Result<u8, Failure> {
    let terminal = |e: std::io::Error| Failure::setup(format!("cannot use the terminal: {e}"));
    let (width, _) = crossterm::terminal::size().map_err(terminal)?;
    let raw = RawMode::enter().map_err(terminal)?;
    let mut chat = Chat::new(&setting, session, width);
    chat.greet();
    let result = chat.run(asks).await;
    let _ = chat.screen.leave();
    drop(raw);
    result.map_err(terminal)
}

/// The loop's state.
struct Chat<'a> {
    setting: &'a Setting<'a>,
    session: SessionId,
    screen: Screen<Stdout>,
    editor: Editor,
    status: Status,
    view: StoreView,
    /// Our runs not finished yet.
    runs: BTreeSet<RunId>,
    /// The questions waiting, the one shown first.
    asks: VecDeque<Asked>,
    /// Questions a cancel withdrew from the screen, kept unanswered until the cancel aborts
    /// their calls: answering them (even with a denial) would race the cancel to end the turn.
    withdrawing: Vec<Asked>,
    /// A first Ctrl-C on an empty idle line: the next one leaves.
    armed: bool,
    /// Leaving once the cancelled work has ended.
    leaving: bool,
}

impl<'a> Chat<'a> {
    fn new(setting: &'a Setting<'a>, session: SessionId, width: u16) -> Chat<'a> {
        let history = History::open(setting.history);
        Chat {
            setting,
            view: StoreView::new(setting.host.clone(), View::drawn(session.clone())),
            session,
            screen: Screen::new(std::io::stdout(), width),
            editor: Editor::new(history),
            status: Status::default(),
            runs: BTreeSet::new(),
            asks: VecDeque::new(),
            withdrawing: Vec::new(),
            armed: false,
            leaving: false,
        }
    }

    fn greet(&mut self) {
        self.say(&format!(
            "turnstile chat · session {} · /help lists the commands",
            self.session
        ));
    }

    async fn run(&mut self, mut asks: mpsc::UnboundedReceiver<Asked>) -> std::io::Result<u8> {
        let mut keys = EventStream::new();
        let mut updates = self.setting.host.subscribe();
        self.usage().await;
        self.draw()?;
        loop {
            let tick = self.status.next_change(Instant::now());
            tokio::select! {
                biased;
                key = keys.next() => match key {
                    Some(Ok(Term::Key(k))) => self.key(k).await?,
                    Some(Ok(Term::Paste(text))) => self.editor.paste(&text),
                    Some(Ok(Term::Resize(width, _))) => self.screen.resize(width)?,
                    Some(Ok(_)) => {}
                    Some(Err(e)) => return Err(e),
                    None => return Ok(0),
                },
                asked = asks.recv() => {
                    if let Some(asked) = asked {
                        self.asked(asked);
                    }
                }
                () = withdrawn(&mut self.asks) => self.withdraw(),
                event = updates.recv() => match event {
                    Some(event) => self.update(event).await,
                    None => return Ok(1),
                },
                () = sleep(tick) => {}
            }
            self.withdrawing.retain(|a| !a.reply.is_closed());
            if !self.working() {
                // Nothing runs that a cancel could still abort: what is left is denied.
                self.withdrawing.clear();
            }
            if self.leaving && self.runs.is_empty() {
                return Ok(0);
            }
            if let Some(trouble) = self.editor.trouble() {
                self.say(&trouble);
            }
            self.draw()?;
        }
    }

    /// One key.
    async fn key(&mut self, key: KeyEvent) -> std::io::Result<()> {
        if key.kind == KeyEventKind::Release {
            return Ok(());
        }
        if !self.asks.is_empty() {
            self.answer(key).await;
            return Ok(());
        }
        let action = self.editor.key(key);
        if action != Action::Interrupt {
            self.armed = false;
        }
        match action {
            Action::Edited => {}
            Action::Send(text, how) => self.send(text, how).await,
            Action::Escape => self.cancel().await,
            Action::Interrupt if self.working() => self.cancel().await,
            Action::Interrupt if !self.editor.value().is_empty() => self.editor.clear(),
            Action::Interrupt if self.armed => self.leave().await,
            Action::Interrupt => {
                self.armed = true;
                self.say("(Ctrl-C again to leave, or Ctrl-D)");
            }
            Action::Exit => self.leave().await,
        }
        Ok(())
    }

    /// A line sent with Enter or Alt-Enter: a command or a prompt.
    async fn send(&mut self, text: String, how: Send) {
        match Typed::read(&text) {
            Typed::Prompt(p) => self.prompt(p, how).await,
            Typed::Command(Slash::Quit) => self.leave().await,
            Typed::Command(Slash::New | Slash::Resume(_)) if self.working() => {
                self.say("error: the session still works; wait for it, or cancel it (Esc)");
            }
            Typed::Command(c) => {
                let said = super::command::command(self.setting.host, &mut self.session, c).await;
                for s in said {
                    self.say(s.text());
                }
                if self.view.view().session() != &self.session {
                    self.follow();
                    self.usage().await;
                }
            }
            Typed::Wrong(why) => self.say(&format!("error: {why}")),
        }
    }

    /// A prompt: the `user_prompt_submit` hooks first, then steered or queued.
    async fn prompt(&mut self, text: String, how: Send) {
        let host = self.setting.host;
        self.say(&format!("› {text}"));
        let input = HookInput {
            prompt: Some(text.clone()),
            ..HookInput::new(
                "user_prompt_submit",
                self.session.as_str(),
                self.setting.cwd,
            )
        };
        let hooks = &self.setting.hooks.user_prompt_submit;
        if let Err(why) = hook::user_prompt_submit(hooks, &input, self.setting.cwd).await {
            self.say(&format!("error: {why}"));
            return;
        }
        let run_id = RunId::new(uuid::Uuid::new_v4().to_string());
        let submit = Submit::new(self.session.as_str(), text).with_run_id(run_id.as_str());
        let sent = match how {
            Send::Steer => host.steer(submit).await,
            Send::Queue => host.submit(submit).await,
        };
        match sent {
            Ok(s) if s.run_id.is_none() => self.say("  (steering the running turn)"),
            Ok(_) => {
                if self.working() {
                    self.say("  (queued)");
                }
                self.runs.insert(run_id);
            }
            Err(SubmitError::Rejected(r)) => self.say(&format!("error: {r}")),
            Err(e) => self.say(&format!("error: cannot submit the prompt: {e}")),
        }
    }

    /// Escape (or Ctrl-C while working): the session's unfinished work is cancelled once.
    async fn cancel(&mut self) {
        if !self.working() || self.status.cancelling {
            return;
        }
        self.status.cancelling = true;
        if let Err(e) = self.setting.host.cancel(&self.session).await {
            self.say(&format!("error: cannot cancel: {e}"));
            self.status.cancelling = false;
            return;
        }
        // The questions of the cancelled work leave the screen at once.
        self.withdrawing.extend(self.asks.drain(..));
        self.status.asking = false;
    }

    /// Leaves: at once when idle, else after the cancelled work has ended.
    async fn leave(&mut self) {
        self.leaving = true;
        if !self.runs.is_empty() {
            self.cancel().await;
        }
    }

    fn working(&self) -> bool {
        self.status.busy || !self.runs.is_empty()
    }

    /// A permission question of a tool.
    fn asked(&mut self, asked: Asked) {
        let on = asked
            .ask
            .subject
            .as_deref()
            .map(|s| format!(" on `{s}`"))
            .unwrap_or_default();
        self.say(&format!("? `{}` asks to run{on}", asked.ask.tool));
        self.asks.push_back(asked);
        self.status.asking = true;
    }

    /// The shown question's answer: y (once), a (always in this session), n (deny); Escape
    /// and Ctrl-C cancel.
    async fn answer(&mut self, key: KeyEvent) {
        let answer = match key.code {
            KeyCode::Char('y' | 'o') => Answer::Once,
            KeyCode::Char('a') => Answer::ForSession,
            KeyCode::Char('n' | 'd') => Answer::Deny("the user denied it".into()),
            KeyCode::Esc => return self.cancel().await,
            KeyCode::Char('c')
                if key
                    .modifiers
                    .contains(crossterm::event::KeyModifiers::CONTROL) =>
            {
                return self.cancel().await;
            }
            _ => return,
        };
        let Some(asked) = self.asks.pop_front() else {
            return;
        };
        let said = match &answer {
            Answer::Once => format!("  allowed `{}` once", asked.ask.tool),
            Answer::ForSession => format!("  allowed `{}` for this session", asked.ask.tool),
            Answer::Deny(_) => format!("  denied `{}`", asked.ask.tool),
        };
        let _ = asked.reply.send(answer);
        self.say(&said);
        self.status.asking = !self.asks.is_empty();
    }

    /// The questions whose call was aborted (a cancel, the turn's end).
    fn withdraw(&mut self) {
        let before = self.asks.len();
        self.asks.retain(|a| !a.reply.is_closed());
        if self.asks.len() < before {
            self.say("  (the question was withdrawn)");
        }
        self.status.asking = !self.asks.is_empty();
    }

    /// One of the host's updates.
    async fn update(&mut self, event: Event) {
        match &event {
            Event::Update(Update::BusyChanged { session, busy }) if *session == self.session => {
                self.status.busy = *busy;
                if !busy {
                    self.status.turn_ended();
                    if self.runs.is_empty() {
                        self.status.cancelling = false;
                    }
                }
            }
            Event::Update(Update::QueueChanged { session, len }) if *session == self.session => {
                self.status.queued = *len;
            }
            Event::Update(Update::Retrying {
                session,
                delay_ms,
                reason,
                ..
            }) if *session == self.session => {
                let until = Instant::now() + Duration::from_millis(*delay_ms);
                self.status.retry = Some((until, reason.clone()));
            }
            _ => {}
        }
        let finished = match &event {
            Event::Update(Update::TurnFinished { record, .. }) => Some(record.clone()),
            _ => None,
        };
        let lagged = matches!(event, Event::Lagged { .. });
        self.view.on(event).await;
        if finished.as_ref().is_some_and(|r| r.session == self.session) {
            self.view.settle().await;
        }
        self.pieces();
        if let Some(record) = finished {
            self.finished(record).await;
        }
        if lagged {
            self.reread().await;
        }
    }

    /// What the view has to show, and what it says of the turn's steps and tools.
    fn pieces(&mut self) {
        for piece in self.view.view().take_pieces() {
            let drawn = match piece {
                Piece::Text(delta) => self.screen.text(&delta),
                Piece::EndText => self.screen.end_text(),
                Piece::Line(line) => self.screen.line(&line),
                Piece::Step => {
                    self.status.step += 1;
                    Ok(())
                }
                Piece::ToolStarted { call, name } => {
                    self.status.tools.insert(call, name);
                    Ok(())
                }
                Piece::ToolDone { call } => {
                    self.status.tools.remove(&call);
                    Ok(())
                }
            };
            if let Err(e) = drawn {
                tracing::warn!("cannot draw: {e}");
            }
        }
    }

    /// A submission's outcome: ours is said, and its `stop` hooks run.
    async fn finished(&mut self, record: CompletionRecord) {
        if record.session != self.session {
            return;
        }
        self.status.turn_ended();
        self.usage().await;
        if !record.run_id.as_ref().is_some_and(|r| self.runs.remove(r)) {
            return;
        }
        if record.outcome != Outcome::Completed || crate::finish::status(&record) != 0 {
            let why = crate::finish::why(&record);
            let why = why
                .trim_start_matches("the run ")
                .trim_start_matches("was ");
            self.say(&format!("[{why}]"));
        }
        if self.runs.is_empty() {
            self.status.cancelling = false;
        }
        crate::finish::run_stop_hooks(&self.setting.hooks.stop, &record, self.setting.cwd).await;
    }

    /// The session's tokens and cost so far, as the store has them (its sub-agents' are their
    /// own sessions').
    async fn usage(&mut self) {
        let id = self.session.clone();
        if let Ok(Some(row)) = self.setting.host.read(move |r| r.session(&id)).await {
            self.status.usage = turnstile_core::RunUsage {
                prompt_tokens: row.prompt_tokens,
                completion_tokens: row.completion_tokens,
                cost_micros: row.cost_micros,
            };
        }
    }

    /// After a lag: our runs' ends are read from the ledger, so none is missed.
    async fn reread(&mut self) {
        for run_id in self.runs.clone() {
            let id = run_id.clone();
            let row = self.setting.host.read(move |r| r.run(&id)).await;
            if let Ok(Some(row)) = row
                && let Some((_, record)) = row.completion
            {
                self.finished(record).await;
            }
        }
    }

    /// Follows the session (after `/new` or `/resume`).
    fn follow(&mut self) {
        self.view = StoreView::new(self.setting.host.clone(), View::drawn(self.session.clone()));
        self.status = Status::default();
    }

    /// A line above the bottom rows.
    fn say(&mut self, text: &str) {
        if let Err(e) = self.screen.line(text) {
            tracing::warn!("cannot draw: {e}");
        }
    }

    fn draw(&mut self) -> std::io::Result<()> {
        let status = self.status.line(Instant::now());
        let bottom = match self.asks.front() {
            Some(a) => {
                let input = match (&a.ask.subject, brief(&a.ask.call.input, 60)) {
                    (Some(s), _) => format!("allow `{}` on `{s}`?", a.ask.tool),
                    (None, args) => format!("allow `{}` {args}?", a.ask.tool),
                };
                Bottom {
                    status,
                    cursor: input.chars().count(),
                    input,
                    footer: "y once · a always in this session · n deny · Esc cancel".into(),
                }
            }
            None => {
                let (input, cursor) = self.editor.view(self.screen.input_width());
                let footer = if self.working() {
                    "Enter steer · Alt-Enter queue · Esc cancel · /help"
                } else {
                    "Enter send · Ctrl-D leave · /help"
                };
                Bottom {
                    status,
                    input,
                    cursor,
                    footer: footer.into(),
                }
            }
        };
        self.screen.set_bottom(bottom)
    }
}

/// Resolves when one of the waiting questions was withdrawn (its call aborted).
async fn withdrawn(asks: &mut VecDeque<Asked>) {
    if asks.is_empty() {
        return std::future::pending().await;
    }
    let closed = asks.iter_mut().map(|a| Box::pin(a.reply.closed()));
    futures_util::future::select_all(closed).await;
}

/// Sleeps until `at`, or forever.
async fn sleep(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

/// A call's arguments on one short line.
fn brief(input: &str, max: usize) -> String {
    let one: String = input.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut chars = one.chars();
    let head: String = chars.by_ref().take(max).collect();
    if chars.next().is_some() {
        format!("{head}…")
    } else {
        head
    }
}
