//! `grep`: lines matching a regular expression in the files under a folder of the working
//! directory, with `.gitignore` rules, an optional glob filter and a cap on results.

use serde::Deserialize;
use serde_json::json;
use turnstile_core::{ToolOutput, ToolSpec};
use turnstile_host::{BoxFuture, Tool, ToolCall};
use turnstile_wire::ToolDef;

use crate::args;
use crate::workspace::Workspace;

/// Matches returned when the call gives no cap.
pub const GREP_RESULTS_DEFAULT: usize = 100;
/// The largest cap a call may ask for.
pub const GREP_RESULTS_MAX: usize = 1_000;
/// Characters of a matching line shown.
pub const GREP_LINE_MAX: usize = 500;
/// Files larger than this are skipped.
pub const GREP_FILE_MAX: u64 = 10 * 1024 * 1024;

/// Searches files.
#[derive(Clone, Debug)]
pub struct Grep {
    /// The working directory.
    pub workspace: Workspace,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GrepArgs {
    pattern: String,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    glob: Option<String>,
    #[serde(default)]
    ignore_case: bool,
    #[serde(default)]
    max_results: Option<usize>,
}

impl Tool for Grep {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new("grep")
    }

    fn definition(&self) -> ToolDef {
        ToolDef::new(
            "grep",
            "Search the text files under a folder of the working directory for lines matching a \
             regular expression (Rust regex syntax); returns `path:line: text`. Skips what \
             .gitignore ignores, hidden and binary files.",
        )
        .with_schema(json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "The regular expression."},
                "path": {"type": "string", "description": "The folder or file to search (default: the working directory)."},
                "glob": {"type": "string", "description": "Only files whose name matches this glob, e.g. `*.rs`."},
                "ignore_case": {"type": "boolean", "description": "Match case-insensitively."},
                "max_results": {"type": "integer", "minimum": 1, "maximum": GREP_RESULTS_MAX, "description": "Matching lines to return (default 100)."},
            },
            "required": ["pattern"],
            "additionalProperties": false,
        }))
    }

    fn run(&self, call: ToolCall) -> BoxFuture<ToolOutput> {
        let this = self.clone();
        Box::pin(async move { args::lenient(&this.definition(), &call.input, |a| this.grep(a)) })
    }
}

impl Grep {
    fn grep(&self, a: GrepArgs) -> Result<ToolOutput, ToolOutput> {
        let regex = regex::RegexBuilder::new(&a.pattern)
            .case_insensitive(a.ignore_case)
            .build()
            .map_err(|e| ToolOutput::error(format!("invalid pattern: {e}")))?;
        let root = self
            .workspace
            .resolve(a.path.as_deref().unwrap_or(""))
            .map_err(|r| ToolOutput::error(r.0))?;
        let mut walk = ignore::WalkBuilder::new(&root);
        walk.follow_links(false).require_git(false).sort_by_file_name(|a, b| a.cmp(b));
        if let Some(glob) = &a.glob {
            let mut overrides = ignore::overrides::OverrideBuilder::new(&root);
            overrides
                .add(glob)
                .map_err(|e| ToolOutput::error(format!("invalid glob `{glob}`: {e}")))?;
            walk.overrides(
                overrides
                    .build()
                    .map_err(|e| ToolOutput::error(format!("invalid glob `{glob}`: {e}")))?,
            );
        }
        let cap = a.max_results.unwrap_or(GREP_RESULTS_DEFAULT).clamp(1, GREP_RESULTS_MAX);
        let (mut out, mut found) = (String::new(), 0_usize);
        for entry in walk.build().flatten() {
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                continue;
            }
            if entry.metadata().map_or(true, |m| m.len() > GREP_FILE_MAX) {
                continue;
            }
            let Ok(text) = std::fs::read_to_string(entry.path()) else { continue };
            let shown = self.workspace.display(entry.path());
            for (i, line) in text.lines().enumerate() {
                if regex.is_match(line) {
                    found += 1;
                    if found <= cap {
                        let line: String = line.chars().take(GREP_LINE_MAX).collect();
                        out.push_str(&format!("{shown}:{}: {line}\n", i + 1));
                    }
                }
            }
        }
        if found == 0 {
            return Ok(ToolOutput::ok("no matches"));
        }
        if found > cap {
            out.push_str(&format!(
                "({} more matches not shown; narrow the pattern, the path or the glob)\n",
                found - cap
            ));
        }
        Ok(ToolOutput::ok(out))
    }
}
