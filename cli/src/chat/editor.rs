//! The input line of the interactive chat: keys in, what they ask for out.
//!
//! Pure: a key event goes in, an [`Action`] comes out, and the line's text and cursor change.
//! What an action does (steer, queue, cancel, exit) depends on the session, so the screen's
//! loop decides it; the editor only knows the line and the prompt history.

use crossterm::event::{Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use tui_input::backend::crossterm::to_input_request;
use tui_input::{Input, InputRequest};
use unicode_width::UnicodeWidthChar;

use super::history::History;

/// How a line is sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Send {
    /// Enter: steer the running turn (SPEC 4.3), or start a turn when none runs.
    Steer,
    /// Alt-Enter: a turn of its own, after the ones before it.
    Queue,
}

/// What a key asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Nothing to do (the key did nothing, or only changed the line: redraw).
    Edited,
    /// Send this line.
    Send(String, Send),
    /// Escape.
    Escape,
    /// Ctrl-C.
    Interrupt,
    /// Ctrl-D on an empty line: leave.
    Exit,
}

/// The line being typed, and the prompt history the arrows walk.
pub struct Editor {
    input: Input,
    history: History,
    /// Where the arrows are in the history (an index of it), and the line typed before.
    browsing: Option<(usize, String)>,
}

impl Editor {
    /// An empty line over `history`.
    pub fn new(history: History) -> Editor {
        Editor {
            input: Input::default(),
            history,
            browsing: None,
        }
    }

    /// The line's text.
    pub fn value(&self) -> &str {
        self.input.value()
    }

    /// What went wrong with the history's file, once.
    pub fn trouble(&mut self) -> Option<String> {
        self.history.trouble()
    }

    /// Empties the line.
    pub fn clear(&mut self) {
        self.input.reset();
        self.browsing = None;
    }

    /// Reads one key (releases and repeats of terminals that report them are ignored).
    pub fn key(&mut self, key: KeyEvent) -> Action {
        if key.kind == KeyEventKind::Release {
            return Action::Edited;
        }
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let alt = key.modifiers.contains(KeyModifiers::ALT);
        match key.code {
            KeyCode::Enter if alt => self.send(Send::Queue),
            KeyCode::Enter => self.send(Send::Steer),
            KeyCode::Esc => Action::Escape,
            KeyCode::Char('c') if ctrl => Action::Interrupt,
            KeyCode::Char('d') if ctrl && self.value().is_empty() => Action::Exit,
            KeyCode::Char('d') if ctrl => self.request(InputRequest::DeleteNextChar),
            KeyCode::Up => self.older(),
            KeyCode::Down => self.newer(),
            _ => match to_input_request(&Event::Key(key)) {
                Some(request) => self.request(request),
                None => Action::Edited,
            },
        }
    }

    /// Inserts pasted text (its line ends included: a pasted block is one prompt).
    pub fn paste(&mut self, text: &str) {
        let text = text.replace("\r\n", "\n").replace('\r', "\n");
        for c in text.chars() {
            self.input.handle(InputRequest::InsertChar(c));
        }
    }

    /// What the line shows in `width` columns: its visible text (line ends shown as `↵`) and
    /// the cursor's column in it.
    pub fn view(&self, width: usize) -> (String, usize) {
        let width = width.max(1);
        // One column is kept for the cursor after the last character.
        let scroll = self.input.visual_scroll(width.saturating_sub(1).max(1));
        let mut shown = String::new();
        let mut columns = 0;
        let mut skipped = 0;
        for c in self.input.value().chars() {
            let c = if c == '\n' { '↵' } else { c };
            let w = c.width().unwrap_or(0);
            if skipped < scroll {
                skipped += w;
                continue;
            }
            if columns + w > width {
                break;
            }
            shown.push(c);
            columns += w;
        }
        let cursor = self.input.visual_cursor().saturating_sub(scroll).min(width);
        (shown, cursor)
    }

    fn request(&mut self, request: InputRequest) -> Action {
        self.input.handle(request);
        Action::Edited
    }

    fn send(&mut self, how: Send) -> Action {
        let text = self.input.value().to_owned();
        if text.trim().is_empty() {
            return Action::Edited;
        }
        self.history.push(&text);
        self.clear();
        Action::Send(text, how)
    }

    fn older(&mut self) -> Action {
        let at = match &self.browsing {
            Some((0, _)) => return Action::Edited,
            Some((i, _)) => i - 1,
            None if self.history.is_empty() => return Action::Edited,
            None => self.history.len() - 1,
        };
        let typed = match self.browsing.take() {
            Some((_, typed)) => typed,
            None => self.input.value().to_owned(),
        };
        self.show(at, typed);
        Action::Edited
    }

    fn newer(&mut self) -> Action {
        let Some((i, typed)) = self.browsing.take() else {
            return Action::Edited;
        };
        if i + 1 < self.history.len() {
            self.show(i + 1, typed);
        } else {
            // Past the newest entry: the line typed before the arrows.
            self.input = Input::new(typed);
        }
        Action::Edited
    }

    fn show(&mut self, at: usize, typed: String) {
        let entry = self.history.get(at).unwrap_or_default().to_owned();
        self.input = Input::new(entry);
        self.browsing = Some((at, typed));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    fn typed(e: &mut Editor, text: &str) {
        for c in text.chars() {
            e.key(key(KeyCode::Char(c)));
        }
    }

    #[test]
    fn enter_steers_alt_enter_queues_and_blank_lines_are_not_sent() {
        let mut e = Editor::new(History::in_memory());
        assert_eq!(e.key(key(KeyCode::Enter)), Action::Edited);
        typed(&mut e, "  ");
        assert_eq!(e.key(key(KeyCode::Enter)), Action::Edited);
        e.clear();
        typed(&mut e, "look");
        assert_eq!(
            e.key(key(KeyCode::Enter)),
            Action::Send("look".into(), Send::Steer)
        );
        assert_eq!(e.value(), "");
        typed(&mut e, "later");
        let alt_enter = KeyEvent::new(KeyCode::Enter, KeyModifiers::ALT);
        assert_eq!(e.key(alt_enter), Action::Send("later".into(), Send::Queue));
    }

    #[test]
    fn control_keys() {
        let mut e = Editor::new(History::in_memory());
        let ctrl = |c| KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL);
        assert_eq!(e.key(ctrl('d')), Action::Exit, "on an empty line");
        typed(&mut e, "ab");
        e.key(key(KeyCode::Left));
        assert_eq!(e.key(ctrl('d')), Action::Edited, "deletes forward");
        assert_eq!(e.value(), "a");
        assert_eq!(e.key(ctrl('c')), Action::Interrupt);
        assert_eq!(e.key(key(KeyCode::Esc)), Action::Escape);
        typed(&mut e, " two words");
        e.key(ctrl('w'));
        assert_eq!(e.value(), "a two ");
        e.key(ctrl('u'));
        assert_eq!(e.value(), "");
    }

    #[test]
    fn arrows_walk_the_history_and_come_back_to_the_typed_line() {
        let mut e = Editor::new(History::in_memory());
        for p in ["first", "second"] {
            typed(&mut e, p);
            e.key(key(KeyCode::Enter));
        }
        typed(&mut e, "draft");
        e.key(key(KeyCode::Up));
        assert_eq!(e.value(), "second");
        e.key(key(KeyCode::Up));
        assert_eq!(e.value(), "first");
        e.key(key(KeyCode::Up));
        assert_eq!(e.value(), "first", "the oldest stays");
        e.key(key(KeyCode::Down));
        assert_eq!(e.value(), "second");
        e.key(key(KeyCode::Down));
        assert_eq!(e.value(), "draft");
    }

    #[test]
    fn a_long_line_scrolls_and_a_paste_is_one_prompt() {
        let mut e = Editor::new(History::in_memory());
        typed(&mut e, "abcdefghijklmnopqrstuvwxyz");
        let (shown, cursor) = e.view(10);
        assert!(
            shown.ends_with('z') && shown.chars().count() <= 10,
            "{shown}"
        );
        assert_eq!(cursor, shown.chars().count());
        e.clear();
        e.paste("one\r\ntwo");
        assert_eq!(e.value(), "one\ntwo");
        assert_eq!(e.view(20).0, "one↵two");
    }
}
