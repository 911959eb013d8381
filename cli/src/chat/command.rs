//! What a slash command does, against the host: a new or resumed session, the lists, the queue
//! cleared, a summary started. Each says what it did in lines ([`Said`]) that the chat shows
//! its own way (on a terminal, or on stdout and stderr).

use turnstile_core::SessionId;
use turnstile_host::Host;

use super::slash::{HELP, Said, Slash};

pub fn new_session() -> SessionId {
    SessionId::new(uuid::Uuid::new_v4().to_string())
}

/// One slash command, and what it says.
pub async fn command(host: &Host, session: &mut SessionId, c: Slash) -> Vec<Said> {
    let note = |text: String| vec![Said::Note(text)];
    match c {
        Slash::New => {
            *session = new_session();
            note(format!("new session {session}"))
        }
        Slash::Resume(given) => match crate::show::resolve_in(host, &given).await {
            Ok(id) => {
                *session = id;
                note(format!("resumed session {session}"))
            }
            Err(why) => note(format!("error: /resume: {why}")),
        },
        Slash::Sessions => match host.read(|r| r.activity(false)).await {
            Ok(all) if all.is_empty() => note("no sessions yet".into()),
            Ok(all) => crate::show::session_lines(&all)
                .into_iter()
                .map(Said::Out)
                .collect(),
            Err(e) => note(format!("error: cannot read the sessions: {e}")),
        },
        Slash::History => {
            let id = session.clone();
            let read = host
                .read(move |r| Ok((r.session(&id)?, r.messages(&id)?)))
                .await;
            match read {
                Ok((Some(row), messages)) => crate::show::history_lines(&row, &messages)
                    .into_iter()
                    .map(Said::Out)
                    .collect(),
                Ok((None, _)) => note("this session has no messages yet".into()),
                Err(e) => note(format!("error: cannot read the session: {e}")),
            }
        }
        Slash::Clear => match host.clear_queue(session).await {
            Ok(()) => note("the queue is cleared".into()),
            Err(e) => note(format!("error: /clear: {e}")),
        },
        Slash::Summarize => match host.summarize(session).await {
            Ok(()) => note("summarizing".into()),
            Err(e) => note(format!("error: /summarize: {e}")),
        },
        Slash::Help => HELP
            .iter()
            .map(|(command, what)| Said::Note(format!("  {command:<12} {what}")))
            .collect(),
        Slash::Quit => Vec::new(),
    }
}
