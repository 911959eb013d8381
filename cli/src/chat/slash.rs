//! The chat's slash commands: a line that starts with `/` is a command, not a prompt.
//!
//! Pure: a line in, a [`Slash`] (or the words that say what is wrong) out. `//text` sends
//! `/text` as a prompt, for the rare prompt that starts with a slash.

/// One command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Slash {
    /// A new session; the next prompt starts it.
    New,
    /// The store's sessions, most recent first.
    Sessions,
    /// Continue the session whose id starts with this.
    Resume(String),
    /// This session's conversation.
    History,
    /// Cancel the prompts waiting in this session's queue (the running turn goes on).
    Clear,
    /// Summarize this session now.
    Summarize,
    /// The commands and keys.
    Help,
    /// Leave.
    Quit,
}

/// The commands, with what each does, as `/help` shows them.
pub const HELP: &[(&str, &str)] = &[
    ("/new", "start a new session"),
    ("/sessions", "list the sessions, most recent first"),
    (
        "/resume ID",
        "continue a session (a unique prefix of its id is enough)",
    ),
    ("/history", "show this session's conversation"),
    (
        "/clear",
        "cancel the prompts waiting in the queue (the running turn goes on)",
    ),
    ("/summarize", "summarize this session now"),
    ("/help", "show this"),
    ("/quit", "leave (also Ctrl-D)"),
];

/// A line a command says: a listing (stdout without a terminal) or a note (stderr).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Said {
    /// Part of what was asked for (a list, a conversation).
    Out(String),
    /// A note or an error.
    Note(String),
}

impl Said {
    /// The line.
    #[must_use]
    pub fn text(&self) -> &str {
        match self {
            Said::Out(t) | Said::Note(t) => t,
        }
    }
}

/// What a line typed at the chat's prompt is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Typed {
    /// A prompt (maybe empty).
    Prompt(String),
    /// A command.
    Command(Slash),
    /// A command that is not one: what to say.
    Wrong(String),
}

impl Typed {
    /// Reads one line.
    #[must_use]
    pub fn read(line: &str) -> Typed {
        if let Some(rest) = line.strip_prefix("//") {
            return Typed::Prompt(format!("/{rest}"));
        }
        let Some(command) = line.trim_end().strip_prefix('/') else {
            return Typed::Prompt(line.to_owned());
        };
        let (name, arg) = match command.split_once(char::is_whitespace) {
            Some((name, arg)) => (name, arg.trim()),
            None => (command, ""),
        };
        let bare = |slash: Slash| {
            if arg.is_empty() {
                Typed::Command(slash)
            } else {
                Typed::Wrong(format!("/{name} takes no argument"))
            }
        };
        match name {
            "new" => bare(Slash::New),
            "sessions" => bare(Slash::Sessions),
            "resume" if arg.is_empty() => {
                Typed::Wrong("/resume needs a session id (or a unique prefix of one)".into())
            }
            "resume" => Typed::Command(Slash::Resume(arg.to_owned())),
            "history" => bare(Slash::History),
            "clear" => bare(Slash::Clear),
            "summarize" => bare(Slash::Summarize),
            "help" | "?" => bare(Slash::Help),
            "quit" | "exit" => bare(Slash::Quit),
            other => Typed::Wrong(format!("unknown command /{other}; /help lists them")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_prompts_and_mistakes() {
        assert_eq!(Typed::read("/new"), Typed::Command(Slash::New));
        assert_eq!(Typed::read("/quit  "), Typed::Command(Slash::Quit));
        assert_eq!(
            Typed::read("/resume 3f2a"),
            Typed::Command(Slash::Resume("3f2a".into()))
        );
        assert_eq!(
            Typed::read("/resume   3f2a  "),
            Typed::Command(Slash::Resume("3f2a".into()))
        );
        assert!(matches!(Typed::read("/resume"), Typed::Wrong(w) if w.contains("needs a session")));
        assert!(matches!(Typed::read("/new now"), Typed::Wrong(w) if w.contains("no argument")));
        assert!(matches!(Typed::read("/frobnicate"), Typed::Wrong(w) if w.contains("/help")));
        assert_eq!(
            Typed::read("list the files"),
            Typed::Prompt("list the files".into())
        );
        assert_eq!(
            Typed::read("//etc/hosts?"),
            Typed::Prompt("/etc/hosts?".into())
        );
        assert_eq!(
            Typed::read(" /new"),
            Typed::Prompt(" /new".into()),
            "only at the start"
        );
    }

    #[test]
    fn help_names_every_command() {
        for (command, _) in HELP {
            let name = command.split_whitespace().next().unwrap_or_default();
            let line = if name == "/resume" {
                "/resume x".to_owned()
            } else {
                name.to_owned()
            };
            assert!(matches!(Typed::read(&line), Typed::Command(_)), "{line}");
        }
    }
}
