//! The prompt history the up arrow walks, kept across chats in the store's folder
//! (`chat_history`: one JSON string per line, so a prompt with line ends stays one entry).
//!
//! Losing it loses nothing of a session (the store has every prompt): a file that cannot be
//! read or written is said once on the screen and the chat goes on without it.

use std::io::Write as _;
use std::path::{Path, PathBuf};

/// How many prompts are kept (the oldest are forgotten first).
pub const KEPT: usize = 1_000;

/// The prompts typed before, oldest first.
pub struct History {
    entries: Vec<String>,
    file: Option<PathBuf>,
    /// What went wrong with the file, to be said once.
    trouble: Option<String>,
}

impl History {
    /// A history that is not kept.
    pub fn in_memory() -> History {
        History {
            entries: Vec::new(),
            file: None,
            trouble: None,
        }
    }

    /// The history kept in `file` (none yet when it does not exist). Lines that are not a
    /// JSON string are skipped.
    pub fn open(file: &Path) -> History {
        let mut history = History {
            file: Some(file.to_owned()),
            ..History::in_memory()
        };
        match std::fs::read_to_string(file) {
            Ok(text) => {
                history.entries = text
                    .lines()
                    .filter_map(|l| serde_json::from_str::<String>(l).ok())
                    .collect();
                let extra = history.entries.len().saturating_sub(KEPT);
                history.entries.drain(..extra);
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                history.trouble = Some(format!(
                    "cannot read the prompt history `{}`: {e}",
                    file.display()
                ));
                history.file = None;
            }
        }
        history
    }

    /// How many prompts it has.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when it has none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The prompt at `i` (0 is the oldest).
    pub fn get(&self, i: usize) -> Option<&str> {
        self.entries.get(i).map(String::as_str)
    }

    /// Adds a prompt (not twice in a row), and appends it to the file.
    pub fn push(&mut self, prompt: &str) {
        if self.entries.last().is_some_and(|l| l == prompt) {
            return;
        }
        self.entries.push(prompt.to_owned());
        if self.entries.len() > KEPT {
            self.entries.remove(0);
        }
        let Some(file) = &self.file else { return };
        let line = serde_json::Value::String(prompt.to_owned()).to_string();
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(file)
            .and_then(|mut f| writeln!(f, "{line}"));
        if let Err(e) = written {
            self.trouble = Some(format!(
                "cannot write the prompt history `{}`: {e}",
                file.display()
            ));
            self.file = None;
        }
    }

    /// What went wrong with the file, once.
    pub fn trouble(&mut self) -> Option<String> {
        self.trouble.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_across_opens_one_entry_per_prompt() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("chat_history");
        let mut h = History::open(&file);
        assert!(h.is_empty() && h.trouble().is_none());
        h.push("first");
        h.push("first");
        h.push("two\nlines");
        std::fs::OpenOptions::new()
            .append(true)
            .open(&file)
            .and_then(|mut f| writeln!(f, "not json"))
            .unwrap();
        let h = History::open(&file);
        assert_eq!(h.len(), 2);
        assert_eq!(h.get(0), Some("first"));
        assert_eq!(h.get(1), Some("two\nlines"));
    }

    #[test]
    fn an_unwritable_file_is_said_once_and_the_history_goes_on() {
        let dir = tempfile::tempdir().unwrap();
        let mut h = History::open(&dir.path().join("missing").join("chat_history"));
        h.push("one");
        assert!(h.trouble().is_some_and(|t| t.contains("cannot write")));
        h.push("two");
        assert!(h.trouble().is_none());
        assert_eq!(h.len(), 2);
    }
}
