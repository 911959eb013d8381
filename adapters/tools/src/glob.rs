//! `glob`: the files whose path matches a pattern under a folder of the working directory,
//! newest first, with `.gitignore` rules and a cap on results.
//!
//! The pattern is matched against each file's path relative to the folder searched: `*` and
//! `?` stay within one folder, `**` crosses folders (`*.rs` is the folder's own files,
//! `**/*.rs` those at every depth). It never reaches outside the folder: a pattern with `..`
//! or an absolute one is refused, the folder is confined like every tool's path, and symbolic
//! links are neither followed nor listed.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::SystemTime;

use globset::{GlobBuilder, GlobMatcher};
use serde::Deserialize;
use serde_json::json;
use turnstile_core::{ToolOutput, ToolSpec};
use turnstile_host::{BoxFuture, Tool, ToolCall};
use turnstile_wire::ToolDef;

use crate::args;
use crate::workspace::Workspace;

/// Files listed at most; how many more matched is said in a note.
pub const GLOB_RESULTS_MAX: usize = 100;

/// Finds files by pattern.
#[derive(Clone, Debug)]
pub struct Glob {
    /// The working directory.
    pub workspace: Workspace,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GlobArgs {
    pattern: String,
    #[serde(default)]
    path: Option<String>,
}

impl Tool for Glob {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new("glob")
    }

    fn definition(&self) -> ToolDef {
        ToolDef::new(
            "glob",
            "Find files of the working directory by a glob pattern over their path: `**/*.rs` \
             (every depth), `src/*.toml` (one folder). Returns their paths, most recently \
             modified first, at most 100. Skips what .gitignore ignores and hidden files.",
        )
        .with_schema(json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "The glob, relative to the folder searched: `*` within a folder, `**` across folders."},
                "path": {"type": "string", "description": "The folder to search (default: the working directory)."},
            },
            "required": ["pattern"],
            "additionalProperties": false,
        }))
    }

    fn run(&self, call: ToolCall) -> BoxFuture<ToolOutput> {
        let this = self.clone();
        Box::pin(async move { args::lenient(&this.definition(), &call.input, |a| this.glob(a)) })
    }
}

impl Glob {
    fn glob(&self, a: GlobArgs) -> Result<ToolOutput, ToolOutput> {
        let matcher = matcher(&a.pattern).map_err(ToolOutput::error)?;
        let root = self
            .workspace
            .resolve(a.path.as_deref().unwrap_or(""))
            .map_err(|r| ToolOutput::error(r.0))?;
        let shown = self.workspace.display(&root);
        if !root.is_dir() {
            return Err(ToolOutput::error(format!("`{shown}` is not a folder")));
        }
        let walk = ignore::WalkBuilder::new(&root).follow_links(false).require_git(false).build();
        // The newest GLOB_RESULTS_MAX so far, the least new on top to be dropped first.
        let mut newest = BinaryHeap::with_capacity(GLOB_RESULTS_MAX + 1);
        let mut found = 0_usize;
        for entry in walk.flatten() {
            // A symlink's type is the link's own (not followed): never a file here.
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                continue;
            }
            let Ok(relative) = entry.path().strip_prefix(&root) else { continue };
            if !matcher.is_match(relative) {
                continue;
            }
            found += 1;
            let modified = entry
                .metadata()
                .ok()
                .and_then(|m| m.modified().ok())
                .unwrap_or(SystemTime::UNIX_EPOCH);
            newest.push(Reverse(Found(modified, Reverse(self.workspace.display(entry.path())))));
            if newest.len() > GLOB_RESULTS_MAX {
                newest.pop();
            }
        }
        if found == 0 {
            return Ok(ToolOutput::ok(format!("no files match `{}` in `{shown}`", a.pattern)));
        }
        let mut listed: Vec<Found> = newest.into_iter().map(|Reverse(f)| f).collect();
        listed.sort_by(|a, b| b.cmp(a));
        let mut out: String = listed.iter().map(|Found(_, Reverse(p))| format!("{p}\n")).collect();
        if found > listed.len() {
            out.push_str(&format!(
                "({} more files matched; narrow the pattern or the path)\n",
                found - listed.len()
            ));
        }
        Ok(ToolOutput::ok(out))
    }
}

/// A matching file, ordered so that the greatest comes first in the result: the most
/// recently modified, then the first path by name.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct Found(SystemTime, Reverse<String>);

/// The pattern as a matcher of paths relative to the folder searched; a pattern that could
/// reach outside the folder is refused.
fn matcher(pattern: &str) -> Result<GlobMatcher, String> {
    if pattern.is_empty() {
        return Err("the pattern is empty; give one such as `**/*.rs`".into());
    }
    if pattern.starts_with('/') {
        return Err(format!(
            "refused: the pattern `{pattern}` is absolute; give it relative to the folder \
             searched, and the folder as `path`"
        ));
    }
    if pattern.split('/').any(|part| part == "..") {
        return Err(format!(
            "refused: the pattern `{pattern}` contains `..`; give a pattern inside the working directory"
        ));
    }
    // Relative paths never start with `./`, so a pattern written with it would match nothing.
    let mut relative = pattern;
    while let Some(rest) = relative.strip_prefix("./") {
        relative = rest;
    }
    GlobBuilder::new(relative)
        .literal_separator(true)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| format!("invalid pattern `{pattern}`: {}", e.kind()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn star_stays_in_a_folder_and_double_star_crosses_them() {
        let m = |p: &str, path: &str| matcher(p).unwrap().is_match(path);
        assert!(m("*.rs", "a.rs") && !m("*.rs", "src/a.rs"));
        assert!(m("**/*.rs", "a.rs") && m("**/*.rs", "src/deep/a.rs"));
        assert!(m("src/*.toml", "src/a.toml") && !m("src/*.toml", "src/x/a.toml"));
        assert!(m("./src/*.toml", "src/a.toml"));
    }

    #[test]
    fn a_pattern_that_leaves_the_folder_is_refused() {
        for p in ["../*", "src/../../x", "/etc/*", ".."] {
            assert!(matcher(p).unwrap_err().starts_with("refused: "), "{p}");
        }
        assert!(matcher("[").unwrap_err().starts_with("invalid pattern `[`"));
        assert!(matcher("").is_err());
    }
}
