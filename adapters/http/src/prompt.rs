//! The default system prompt, for a coding agent: where it works, the date, its tools.

use turnstile_wire::ToolDef;

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
