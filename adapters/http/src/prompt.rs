//! The default system prompt, for a coding agent: where it works, the date, its tools, and the
//! project's own instructions (`AGENTS.md`, or `CLAUDE.md` where there is none).

use std::path::{Path, PathBuf};

use turnstile_wire::ToolDef;

/// The instruction files read in each folder, in order of preference: the first one present is
/// read, the others in that folder are not (`CLAUDE.md` only where there is no `AGENTS.md`).
pub const INSTRUCTION_FILES: [&str; 2] = ["AGENTS.md", "CLAUDE.md"];

/// Bytes of one instruction file put in the prompt; the rest is cut with a note (a file of
/// instructions the size of a book would crowd the context out).
pub const INSTRUCTIONS_BYTES_MAX: usize = 32 * 1024;

/// One project instruction file, as it goes into the system prompt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Instructions {
    /// Where it was read.
    pub path: PathBuf,
    /// Its text (cut at [`INSTRUCTIONS_BYTES_MAX`], with a note).
    pub text: String,
}

/// The project's instructions for work in `dir`: in every folder from the repository's root
/// (the nearest folder upward with `.git`; without one, `dir` alone) down to `dir`, its
/// `AGENTS.md`, or its `CLAUDE.md` when it has no `AGENTS.md`. Outermost first, so the more
/// specific ones come later and read as refinements. A file that cannot be read as UTF-8 text
/// is left out; an empty one is skipped.
#[must_use]
pub fn project_instructions(dir: &Path) -> Vec<Instructions> {
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_owned());
    let root = dir.ancestors().find(|d| d.join(".git").exists()).unwrap_or(&dir);
    let mut folders: Vec<&Path> = dir.ancestors().take_while(|d| d.starts_with(root)).collect();
    folders.reverse();
    folders
        .into_iter()
        .filter_map(|folder| {
            INSTRUCTION_FILES.iter().map(|name| folder.join(name)).find(|p| p.is_file())
        })
        .filter_map(|path| {
            let text = std::fs::read_to_string(&path).ok()?;
            let text = text.trim();
            (!text.is_empty()).then(|| Instructions { text: cut(text), path })
        })
        .collect()
}

/// `text` cut at [`INSTRUCTIONS_BYTES_MAX`] (on a character boundary), with a note.
fn cut(text: &str) -> String {
    if text.len() <= INSTRUCTIONS_BYTES_MAX {
        return text.to_owned();
    }
    let mut end = INSTRUCTIONS_BYTES_MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}\n[... cut: the file has {} bytes; the first {end} are shown]",
        &text[..end],
        text.len()
    )
}

/// `system` with the project's instructions appended (nothing when there are none).
#[must_use]
pub fn with_instructions(mut system: String, instructions: &[Instructions], dir: &Path) -> String {
    if instructions.is_empty() {
        return system;
    }
    system.push_str(
        "\n\nThe project's instructions follow, from its own files (the later, more specific \
         ones refine the earlier). Follow them.",
    );
    for i in instructions {
        let shown = i.path.strip_prefix(dir).unwrap_or(&i.path);
        system.push_str(&format!("\n\n# {}\n\n{}", shown.display(), i.text));
    }
    system
}

/// The system prompt for a request offering `tools`, working in `working_dir`, on `date`.
#[must_use]
pub fn default_system_prompt(working_dir: &str, date: &str, tools: &[ToolDef]) -> String {
    let mut prompt = format!(
        "You are turnstile, a coding agent. You help with software tasks in the working \
         directory `{working_dir}`. Today is {date}.\n\n\
         Be concise and direct. Before changing a file, read it. Prefer small, verifiable \
         steps; after a change, check it (build, test) when you can. When you are done, say \
         what you did in a few sentences."
    );
    if !tools.is_empty() {
        prompt.push_str("\n\nYour tools:");
        for t in tools {
            prompt.push_str(&format!("\n- {}: {}", t.name, t.description));
        }
        prompt.push_str("\nUse a tool when it helps; call several at once when they do not depend on each other.");
    }
    prompt
}

/// The system prompt of a title request (SPEC 4.11).
pub const TITLE_PROMPT: &str = "Write a short title (at most 50 characters) for a conversation that starts with the user's message below. Answer with the title only: no quotes, no punctuation at the end.";

/// The UTC calendar date (`YYYY-MM-DD`) of a time in seconds since the Unix epoch.
#[must_use]
pub fn utc_date(unix_secs: u64) -> String {
    // Days to civil date (H. Hinnant's algorithm), for days on or after 1970-01-01.
    let z = unix_secs / 86_400 + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instructions_are_read_from_the_repository_root_down_agents_before_claude() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("repo");
        let deep = root.join("crates/app");
        std::fs::create_dir_all(&deep).unwrap();
        std::fs::create_dir(root.join(".git")).unwrap();
        // Above the repository: never read.
        std::fs::write(tmp.path().join("AGENTS.md"), "outside").unwrap();
        std::fs::write(root.join("AGENTS.md"), "root rules").unwrap();
        std::fs::write(root.join("CLAUDE.md"), "not read: AGENTS.md is here").unwrap();
        std::fs::write(root.join("crates/CLAUDE.md"), "crates rules").unwrap();
        std::fs::write(deep.join("AGENTS.md"), "  \n").unwrap(); // empty: skipped
        let found = project_instructions(&deep);
        let texts: Vec<&str> = found.iter().map(|i| i.text.as_str()).collect();
        assert_eq!(texts, ["root rules", "crates rules"]);
        let system = with_instructions("base".into(), &found, &deep.canonicalize().unwrap());
        assert!(system.starts_with("base\n\nThe project's instructions"), "{system}");
        assert!(system.contains("root rules") && system.contains("crates rules"), "{system}");
        assert!(system.find("root rules") < system.find("crates rules"), "outermost first");
        // Without a repository, the working directory's own file alone.
        let lone = tempfile::tempdir().unwrap();
        std::fs::write(lone.path().join("CLAUDE.md"), "lone").unwrap();
        let found = project_instructions(lone.path());
        assert_eq!(found.iter().map(|i| i.text.as_str()).collect::<Vec<_>>(), ["lone"]);
        assert_eq!(with_instructions("base".into(), &[], lone.path()), "base");
    }

    #[test]
    fn a_long_file_is_cut_with_a_note() {
        let long = "é".repeat(INSTRUCTIONS_BYTES_MAX);
        let text = cut(&long);
        assert!(text.len() < long.len() + 100);
        assert!(text.contains("[... cut: the file has"), "{}", &text[text.len() - 80..]);
    }

    #[test]
    fn dates() {
        assert_eq!(utc_date(0), "1970-01-01");
        assert_eq!(utc_date(951_782_400), "2000-02-29");
        assert_eq!(utc_date(1_796_083_200), "2026-12-01");
    }

    #[test]
    fn the_prompt_names_the_directory_the_date_and_the_tools() {
        let p = default_system_prompt("/w", "2026-12-01", &[ToolDef::new("view", "Reads a file.")]);
        assert!(
            p.contains("`/w`") && p.contains("2026-12-01") && p.contains("- view: Reads a file.")
        );
    }
}
