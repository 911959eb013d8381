//! Session titles (SPEC 4.11).
//!
//! A title is requested when a submission of a top-level session without a title is activated
//! for the first time; it is not awaited and not cancelled with the turn. The title write
//! changes only the title (a field update), and its cost is added to the session's cost. When
//! generation fails or returns nothing (after removing newlines, think tags and surrounding
//! space), the title comes from the prompt: newlines turned into spaces, trimmed, cut to 49
//! scalar values and "…" when longer than 50; "Untitled Session" when that is empty. A
//! generated title is held to the same length (SPEC 8 "titles": 50 scalar values, else 49 and
//! "…"): a model that answers with a paragraph does not get a paragraph-wide title.

use crate::alphabet::mutants::mutant;
use crate::alphabet::{OutputKind, Seq, SessionId, StoreOp, UNTITLED, Usage};
use crate::state::Tx;
use crate::state::{PendingTitle, Session, Sessions, State, TitleState};

/// Longer prompts are cut to `TITLE_CHARS_MAX - 1` scalar values and "…" (SPEC 8).
const TITLE_CHARS_MAX: usize = 50;

/// A generated title cleaned of think sections, newlines and surrounding space, and cut to 50
/// scalar values (49 and "…" when longer, SPEC 8).
#[must_use]
pub fn clean_title(raw: &str) -> String {
    cut(strip_title(raw))
}

/// A title longer than 50 scalar values as its first 49 and "…" (SPEC 8).
fn cut(title: String) -> String {
    if title.chars().count() <= TITLE_CHARS_MAX {
        return title;
    }
    let mut cut: String = title.chars().take(TITLE_CHARS_MAX - 1).collect();
    cut.push('…');
    cut
}

fn strip_title(raw: &str) -> String {
    let mut text = String::new();
    let mut rest = raw;
    while let Some(start) = rest.find("<think>") {
        text.push_str(&rest[..start]);
        rest = match rest[start..].find("</think>") {
            Some(end) => &rest[start + end + "</think>".len()..],
            None => "",
        };
    }
    text.push_str(rest);
    text.replace(['\r', '\n'], " ").trim().to_owned()
}

/// The title a prompt gives when generation gave none (SPEC 4.11).
#[must_use]
pub fn title_from_prompt(prompt: &str) -> String {
    let flat = prompt.replace('\n', " ");
    let flat = flat.trim();
    if flat.is_empty() {
        return UNTITLED.to_owned();
    }
    cut(flat.to_owned())
}

/// At a first activation: requests a title when the session has none and none is pending.
pub(crate) fn maybe_request(
    st: &mut State,
    tx: &mut Tx,
    s: &mut Session,
    seq: Seq,
    titled: bool,
    prompt: &str,
) {
    // The bug `title_requested_again`: a pending request does not stop another one.
    let pending = (s.title == TitleState::Requested || st.titles.contains_key(&s.id))
        && !mutant!(st.config, TitleRequestedAgain);
    if titled || s.parent.is_some() || pending {
        return;
    }
    s.title = TitleState::Requested;
    st.titles.insert(s.id.clone(), PendingTitle { seq, prompt: prompt.to_owned() });
    tx.handoff(
        seq,
        OutputKind::RequestTitle { session: s.id.clone(), seq, prompt: prompt.to_owned() },
    );
}

/// `TitleGenerated`: writes the cleaned title or the prompt's, and adds its cost.
pub(crate) fn on_title(
    st: &mut State,
    ss: &mut Sessions,
    tx: &mut Tx,
    session: SessionId,
    seq: Seq,
    title: Option<String>,
    usage: Option<Usage>,
) {
    debug_assert!(
        st.titles.values().all(|p| p.seq < st.next_seq),
        "titles belong to accepted submissions"
    );
    debug_assert!(
        st.closing == crate::state::Closing::Open || st.titles.is_empty(),
        "shutdown abandons titles"
    );
    if st.titles.get(&session).is_none_or(|p| p.seq != seq) {
        return; // stale (I13)
    }
    let Some(pending) = st.titles.remove(&session) else { return };
    // The session has its title now. A submission of it prepared before this write still
    // has a setup that says "untitled" (the host read the store then), so the session in
    // memory must remember that one was requested, also when it was forgotten and re-created
    // while the request was pending (tests/traces/regressions/title-not-requested-again-
    // after-a-stale-setup.jsonl, found by the model checker).
    ss.with(&session, false, |s| s.title = TitleState::Requested);
    write(tx, session, seq, title.as_deref().map(clean_title), &pending.prompt, usage);
}

/// The bug `title_cancelled_with_turn`: a cancel abandons the session's pending title too.
pub(crate) fn cancelled_with_turn(st: &mut State, tx: &mut Tx, session: &SessionId) {
    if mutant!(st.config, TitleCancelledWithTurn)
        && let Some(p) = st.titles.remove(session)
    {
        tx.abort(p.seq, OutputKind::AbortTitle { session: session.clone(), seq: p.seq });
    }
}

/// Shutdown: pending titles are abandoned and the prompt's title written now, so every
/// activated session ends with a title.
pub(crate) fn abandon_all(st: &mut State, tx: &mut Tx) {
    for (session, p) in std::mem::take(&mut st.titles) {
        tx.abort(p.seq, OutputKind::AbortTitle { session: session.clone(), seq: p.seq });
        write(tx, session, p.seq, None, &p.prompt, None);
    }
}

fn write(
    tx: &mut Tx,
    session: SessionId,
    seq: Seq,
    generated: Option<String>,
    prompt: &str,
    usage: Option<Usage>,
) {
    let title = generated.filter(|t| !t.is_empty()).unwrap_or_else(|| title_from_prompt(prompt));
    tx.decided(seq, OutputKind::Store(StoreOp::Title { session: session.clone(), title }));
    if let Some(u) = usage.filter(|u| !u.estimated && u.cost_micros > 0) {
        let op = StoreOp::SessionUsage {
            session: session.clone(),
            seq: None,
            prompt_tokens: None,
            completion_tokens: None,
            cost_micros: u.cost_micros,
            ancestor: None,
        };
        tx.decided(seq, OutputKind::Store(op));
    }
    tx.decided(seq, OutputKind::Commit { session });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles_are_cleaned_and_prompts_cut_at_fifty_scalar_values() {
        assert_eq!(
            clean_title("<think>hmm\nok</think>\n  Fix the login bug \n"),
            "Fix the login bug"
        );
        assert_eq!(clean_title("<think>never closed"), "");
        assert_eq!(clean_title("a\nb"), "a b");
        let long = "word ".repeat(56); // 280 scalar values, as a model once answered
        let cut = clean_title(&long);
        assert_eq!(cut.chars().count(), 50);
        assert!(cut.ends_with('…') && cut.starts_with("word word"), "{cut}");
        assert_eq!(clean_title(&"é".repeat(50)), "é".repeat(50), "fifty is not cut");
        assert_eq!(title_from_prompt("  fix\nit  "), "fix it");
        assert_eq!(title_from_prompt(" \n "), "Untitled Session");
        let fifty = "é".repeat(50);
        assert_eq!(title_from_prompt(&fifty), fifty, "exactly 50 stays");
        let long = "x".repeat(51);
        assert_eq!(title_from_prompt(&long), format!("{}…", "x".repeat(49)));
        assert_eq!(title_from_prompt(&long).chars().count(), 50);
    }
}
