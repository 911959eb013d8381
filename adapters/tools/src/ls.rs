//! `ls`: the tree under a folder of the working directory, with `.gitignore` rules.

use serde::Deserialize;
use serde_json::json;
use turnstile_core::{ToolOutput, ToolSpec};
use turnstile_host::{BoxFuture, Tool, ToolCall};
use turnstile_wire::ToolDef;

use crate::args;
use crate::workspace::Workspace;

/// Entries listed at most; the rest is counted in a note.
pub const LS_ENTRIES_MAX: usize = 1_000;
/// The deepest `depth` accepted.
pub const LS_DEPTH_MAX: usize = 10;

/// Lists a folder.
#[derive(Clone, Debug)]
pub struct Ls {
    /// The working directory.
    pub workspace: Workspace,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LsArgs {
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    depth: Option<usize>,
}

impl Tool for Ls {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new("ls")
    }

    fn definition(&self) -> ToolDef {
        ToolDef::new(
            "ls",
            "List the files and folders under a folder of the working directory (default: the \
             whole directory), as an indented tree, skipping what .gitignore ignores and hidden files.",
        )
        .with_schema(json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "The folder, relative to the working directory."},
                "depth": {"type": "integer", "minimum": 1, "maximum": LS_DEPTH_MAX, "description": "Levels to list (default 2)."},
            },
            "additionalProperties": false,
        }))
    }

    fn run(&self, call: ToolCall) -> BoxFuture<ToolOutput> {
        let this = self.clone();
        Box::pin(async move { args::lenient(&this.definition(), &call.input, |a| this.ls(a)) })
    }
}

impl Ls {
    fn ls(&self, a: LsArgs) -> Result<ToolOutput, ToolOutput> {
        let path = self
            .workspace
            .resolve(a.path.as_deref().unwrap_or(""))
            .map_err(|r| ToolOutput::error(r.0))?;
        let shown = self.workspace.display(&path);
        if !path.is_dir() {
            return Err(ToolOutput::error(format!("`{shown}` is not a folder")));
        }
        let depth = a.depth.unwrap_or(2).clamp(1, LS_DEPTH_MAX);
        let walk = ignore::WalkBuilder::new(&path)
            .max_depth(Some(depth))
            .follow_links(false)
            .require_git(false)
            .sort_by_file_name(|a, b| a.cmp(b))
            .build();
        let mut out = format!("{shown}/\n");
        let (mut listed, mut more) = (0, 0);
        for entry in walk.flatten() {
            if entry.depth() == 0 {
                continue;
            }
            if listed == LS_ENTRIES_MAX {
                more += 1;
                continue;
            }
            let name = entry.file_name().to_string_lossy();
            let slash = if entry.file_type().is_some_and(|t| t.is_dir()) { "/" } else { "" };
            out.push_str(&format!("{}{name}{slash}\n", "  ".repeat(entry.depth())));
            listed += 1;
        }
        if more > 0 {
            out.push_str(&format!("({more} more entries not listed; list a subfolder)\n"));
        }
        Ok(ToolOutput::ok(out))
    }
}
