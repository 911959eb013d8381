//! The permission gate's rules (SPEC 9 "Tools"): whether a call runs, is refused, or needs a
//! person's yes.
//!
//! A rule names a tool, or a tool and a pattern over the call's **subject**: its `command`
//! argument when it has one (`bash`), else its `path` argument (`view`, `write`, `edit`,
//! `multiedit`, `ls`, `glob`, `grep`, and any tool, MCP's included, with such a field). The
//! gate reads the arguments as the tool does first ([`crate::args::canonical`]), so a call that
//! sends `file_path` is matched by its `path`. Patterns are globs (`*` any run of characters,
//! `/` included; `?` one; `[...]` a class), matched against the whole subject.
//!
//! ```toml
//! [permissions]
//! allow = ["view", "ls", "grep", "bash(git status*)", "bash(cargo test*)", "edit(src/**)"]
//! ask   = ["bash(git push*)"]
//! deny  = ["bash(rm -rf *)", "mcp_github_*"]
//! ```
//!
//! The first matching list in the order deny, ask, allow decides; a call no rule matches gets
//! the tool's default: read-only tools (`view`, `ls`, `glob`, `grep`) are allowed, every other
//! tool asks. What an ask becomes is the gate's business ([`crate::gate`]): in `turnstile run`
//! it is a denial unless `--yolo`, in a server a question to a client.

use globset::{GlobBuilder, GlobMatcher};
use serde::Deserialize;

/// What the rules say about one call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// Run it.
    Allow,
    /// Ask a person first.
    Ask,
    /// Refuse it.
    Deny,
}

/// The tools that only read, allowed unless a rule says otherwise.
pub const READ_ONLY: [&str; 4] = ["view", "ls", "glob", "grep"];

/// The `[permissions]` section as written.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct PermissionsFile {
    /// Rules that allow.
    #[serde(default)]
    pub allow: Vec<String>,
    /// Rules that ask.
    #[serde(default)]
    pub ask: Vec<String>,
    /// Rules that deny.
    #[serde(default)]
    pub deny: Vec<String>,
}

/// A rule that cannot be read; its `Display` names the list, the rule and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleError {
    /// `allow`, `ask` or `deny`.
    pub list: &'static str,
    /// The rule as written.
    pub rule: String,
    /// What is wrong with it.
    pub reason: String,
}

impl std::fmt::Display for RuleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "permissions.{}: rule `{}`: {}", self.list, self.rule, self.reason)
    }
}

impl std::error::Error for RuleError {}

/// One rule: a tool name glob and, optionally, a subject glob.
#[derive(Clone, Debug)]
struct Rule {
    text: String,
    tool: GlobMatcher,
    subject: Option<GlobMatcher>,
}

impl Rule {
    fn parse(list: &'static str, text: &str) -> Result<Rule, RuleError> {
        let error = |reason: &str| RuleError { list, rule: text.to_owned(), reason: reason.into() };
        let (tool, subject) = match text.split_once('(') {
            None => (text, None),
            Some((tool, rest)) => {
                let Some(pattern) = rest.strip_suffix(')') else {
                    return Err(error("a pattern is written `tool(pattern)`, with a closing `)`"));
                };
                (tool, Some(pattern))
            }
        };
        let tool = tool.trim();
        if tool.is_empty() {
            return Err(error("the tool name is empty"));
        }
        let glob = |pattern: &str| {
            GlobBuilder::new(pattern)
                .literal_separator(false)
                .build()
                .map(|g| g.compile_matcher())
                .map_err(|e| error(&e.kind().to_string()))
        };
        Ok(Rule {
            text: text.to_owned(),
            tool: glob(tool)?,
            subject: subject.map(glob).transpose()?,
        })
    }

    fn matches(&self, tool: &str, subject: Option<&str>) -> bool {
        self.tool.is_match(tool)
            && match (&self.subject, subject) {
                (None, _) => true,
                (Some(pattern), Some(subject)) => pattern.is_match(subject),
                (Some(_), None) => false,
            }
    }
}

/// The rules, checked: what the gate consults for every call.
#[derive(Clone, Debug, Default)]
pub struct Permissions {
    deny: Vec<Rule>,
    ask: Vec<Rule>,
    allow: Vec<Rule>,
}

/// Why a call got its level: the rule that matched, or the tool's default.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Because {
    /// A rule of the list of that level, as written.
    Rule(String),
    /// No rule matched; the tool's default.
    Default,
}

impl Permissions {
    /// The rules of a `[permissions]` section.
    ///
    /// # Errors
    /// The first rule that cannot be read.
    pub fn new(file: &PermissionsFile) -> Result<Permissions, RuleError> {
        let parse = |list: &'static str, rules: &[String]| {
            rules.iter().map(|r| Rule::parse(list, r)).collect::<Result<Vec<_>, _>>()
        };
        Ok(Permissions {
            deny: parse("deny", &file.deny)?,
            ask: parse("ask", &file.ask)?,
            allow: parse("allow", &file.allow)?,
        })
    }

    /// The level for a call of `tool` with these arguments (JSON text), and why.
    #[must_use]
    pub fn level(&self, tool: &str, input: &str) -> (Level, Because) {
        let subject = subject(input);
        let subject = subject.as_deref();
        for (level, rules) in
            [(Level::Deny, &self.deny), (Level::Ask, &self.ask), (Level::Allow, &self.allow)]
        {
            if let Some(rule) = rules.iter().find(|r| r.matches(tool, subject)) {
                return (level, Because::Rule(rule.text.clone()));
            }
        }
        let default = if READ_ONLY.contains(&tool) { Level::Allow } else { Level::Ask };
        (default, Because::Default)
    }
}

/// A call's subject: its `command` argument, else its `path` argument (empty: `.`).
#[must_use]
pub fn subject(input: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(input).ok()?;
    let text = |key: &str| value.get(key).and_then(serde_json::Value::as_str).map(str::to_owned);
    text("command").or_else(|| text("path").map(|p| if p.is_empty() { ".".into() } else { p }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(allow: &[&str], ask: &[&str], deny: &[&str]) -> Permissions {
        let own = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect();
        Permissions::new(&PermissionsFile { allow: own(allow), ask: own(ask), deny: own(deny) })
            .unwrap()
    }

    fn level(p: &Permissions, tool: &str, input: serde_json::Value) -> Level {
        p.level(tool, &input.to_string()).0
    }

    #[test]
    fn defaults_allow_reading_and_ask_for_the_rest() {
        let p = Permissions::default();
        for tool in READ_ONLY {
            assert_eq!(level(&p, tool, serde_json::json!({})), Level::Allow, "{tool}");
        }
        for tool in ["bash", "write", "edit", "multiedit", "mcp_x_y"] {
            assert_eq!(level(&p, tool, serde_json::json!({})), Level::Ask, "{tool}");
        }
    }

    #[test]
    fn deny_beats_ask_beats_allow() {
        let p = rules(&["bash"], &["bash(git *)"], &["bash(git push*)"]);
        assert_eq!(level(&p, "bash", serde_json::json!({"command": "ls"})), Level::Allow);
        assert_eq!(level(&p, "bash", serde_json::json!({"command": "git log"})), Level::Ask);
        assert_eq!(
            level(&p, "bash", serde_json::json!({"command": "git push origin"})),
            Level::Deny
        );
        let (_, because) = p.level("bash", r#"{"command":"git push"}"#);
        assert_eq!(because, Because::Rule("bash(git push*)".into()));
    }

    #[test]
    fn patterns_match_paths_across_folders_and_tool_globs() {
        let p = rules(&["edit(src/**)", "mcp_docs_*"], &[], &["view(*.env)"]);
        assert_eq!(level(&p, "edit", serde_json::json!({"path": "src/a/b.rs"})), Level::Allow);
        assert_eq!(level(&p, "edit", serde_json::json!({"path": "tests/a.rs"})), Level::Ask);
        assert_eq!(level(&p, "view", serde_json::json!({"path": "conf/.env"})), Level::Deny);
        assert_eq!(level(&p, "mcp_docs_search", serde_json::json!({})), Level::Allow);
        // A rule with a pattern never matches a call without a subject.
        assert_eq!(level(&p, "edit", serde_json::json!({})), Level::Ask);
    }

    #[test]
    fn a_bad_rule_is_named() {
        let e = Permissions::new(&PermissionsFile {
            deny: vec!["bash(rm".into()],
            ..PermissionsFile::default()
        })
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "permissions.deny: rule `bash(rm`: a pattern is written `tool(pattern)`, with a closing `)`"
        );
        let e = Permissions::new(&PermissionsFile {
            allow: vec!["bash([)".into()],
            ..PermissionsFile::default()
        })
        .unwrap_err();
        assert!(e.to_string().starts_with("permissions.allow: rule `bash([)`: "), "{e}");
    }
}
