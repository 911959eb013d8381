//! `view`, `write`, `edit` and `multiedit`: reading and changing files inside the working
//! directory.
//!
//! A file must be viewed before it is changed, and must not have changed on disk since: each
//! session remembers the content hash of what it last viewed or wrote, so an edit never
//! overwrites work the model has not seen (a person's change, another session's).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::Deserialize;
use serde_json::json;
use sha2::{Digest, Sha256};
use turnstile_core::{SessionId, ToolOutput, ToolSpec};
use turnstile_host::{BoxFuture, Tool, ToolCall};
use turnstile_wire::ToolDef;

use crate::args;
use crate::workspace::Workspace;

/// Lines `view` returns when no limit is given.
pub const VIEW_DEFAULT_LINES: usize = 2_000;
/// Characters of one line `view` shows; the rest is cut with a note.
pub const VIEW_LINE_MAX: usize = 2_000;
/// Bytes `view` reads at most; a larger file is read in parts with `offset` and `limit`.
pub const VIEW_BYTES_MAX: u64 = 10 * 1024 * 1024;

/// Per session and file, the hash of the content last viewed or written.
type Hashes = BTreeMap<(SessionId, PathBuf), [u8; 32]>;

/// What each session last saw of each file: the hash of its content.
#[derive(Clone, Debug, Default)]
pub struct Seen(Arc<Mutex<Hashes>>);

impl Seen {
    fn remember(&self, session: &SessionId, path: &Path, content: &[u8]) {
        let mut seen = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        seen.insert((session.clone(), path.to_owned()), hash(content));
    }

    fn check(
        &self,
        session: &SessionId,
        path: &Path,
        content: &[u8],
        shown: &str,
    ) -> Result<(), String> {
        let seen = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match seen.get(&(session.clone(), path.to_owned())) {
            None => Err(format!(
                "`{shown}` has not been viewed in this session; view it before changing it"
            )),
            Some(h) if *h != hash(content) => Err(format!(
                "`{shown}` changed on disk since it was last viewed; view it again before changing it"
            )),
            Some(_) => Ok(()),
        }
    }
}

fn hash(content: &[u8]) -> [u8; 32] {
    Sha256::digest(content).into()
}

/// Reads a file with line numbers.
#[derive(Clone, Debug)]
pub struct View {
    /// The working directory.
    pub workspace: Workspace,
    /// What sessions have seen (shared with `write`, `edit` and `multiedit`).
    pub seen: Seen,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ViewArgs {
    path: String,
    #[serde(default)]
    offset: Option<usize>,
    #[serde(default)]
    limit: Option<usize>,
}

impl Tool for View {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new("view")
    }

    fn definition(&self) -> ToolDef {
        ToolDef::new(
            "view",
            "Read a text file of the working directory, with line numbers. Use offset and limit \
             for a part of a long file. A file must be viewed before it is edited or overwritten.",
        )
        .with_schema(json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "The file, relative to the working directory."},
                "offset": {"type": "integer", "minimum": 0, "description": "Lines to skip (default 0)."},
                "limit": {"type": "integer", "minimum": 1, "description": "Lines to show (default 2000)."},
            },
            "required": ["path"],
            "additionalProperties": false,
        }))
    }

    fn run(&self, call: ToolCall) -> BoxFuture<ToolOutput> {
        let this = self.clone();
        Box::pin(async move {
            args::lenient(&this.definition(), &call.input, |a| this.view(&call.session, a))
        })
    }
}

impl View {
    fn view(&self, session: &SessionId, a: ViewArgs) -> Result<ToolOutput, ToolOutput> {
        let path = self.workspace.resolve(&a.path).map_err(|r| ToolOutput::error(r.0))?;
        let shown = self.workspace.display(&path);
        let meta = std::fs::metadata(&path)
            .map_err(|e| ToolOutput::error(format!("cannot read `{shown}`: {e}")))?;
        if meta.is_dir() {
            return Err(ToolOutput::error(format!("`{shown}` is a directory; use `ls`")));
        }
        if meta.len() > VIEW_BYTES_MAX {
            return Err(ToolOutput::error(format!(
                "`{shown}` has {} bytes, more than {VIEW_BYTES_MAX}; use `grep` to find the part you need",
                meta.len()
            )));
        }
        let bytes = std::fs::read(&path)
            .map_err(|e| ToolOutput::error(format!("cannot read `{shown}`: {e}")))?;
        let Ok(text) = std::str::from_utf8(&bytes) else {
            return Err(ToolOutput::error(format!("`{shown}` is not a text file (not UTF-8)")));
        };
        self.seen.remember(session, &path, &bytes);
        let offset = a.offset.unwrap_or(0);
        let limit = a.limit.unwrap_or(VIEW_DEFAULT_LINES).max(1);
        let total = text.lines().count();
        let mut out = String::new();
        for (i, line) in text.lines().enumerate().skip(offset).take(limit) {
            let shown_line: String = line.chars().take(VIEW_LINE_MAX).collect();
            let cut = if shown_line.len() < line.len() { " […line cut]" } else { "" };
            out.push_str(&format!("{:>6}\t{shown_line}{cut}\n", i + 1));
        }
        // Saturating: a model may send any offset and limit (a sum past usize::MAX is past the
        // end all the same).
        let last = offset.saturating_add(limit).min(total);
        if total == 0 {
            out.push_str("(empty file)\n");
        } else if offset >= total {
            out.push_str(&format!(
                "(the file has {total} lines; offset {offset} is past its end)\n"
            ));
        } else if last < total {
            out.push_str(&format!(
                "(lines {}-{last} of {total}; use offset {last} for more)\n",
                offset + 1
            ));
        }
        Ok(ToolOutput::ok(out))
    }
}

/// Writes a whole file (creating it and its folders).
#[derive(Clone, Debug)]
pub struct Write {
    /// The working directory.
    pub workspace: Workspace,
    /// What sessions have seen.
    pub seen: Seen,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WriteArgs {
    path: String,
    content: String,
}

impl Tool for Write {
    fn spec(&self) -> ToolSpec {
        // A half-written file is worse than a finished one: let a cancel wait for it.
        ToolSpec::new("write").left_to_finish()
    }

    fn definition(&self) -> ToolDef {
        ToolDef::new(
            "write",
            "Write a file of the working directory with this content, creating it (and its \
             folders) or replacing it. An existing file must be viewed first.",
        )
        .with_schema(json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "The file, relative to the working directory."},
                "content": {"type": "string", "description": "The whole new content."},
            },
            "required": ["path", "content"],
            "additionalProperties": false,
        }))
    }

    fn run(&self, call: ToolCall) -> BoxFuture<ToolOutput> {
        let this = self.clone();
        Box::pin(async move {
            args::lenient(&this.definition(), &call.input, |a| this.write(&call.session, a))
        })
    }
}

impl Write {
    fn write(&self, session: &SessionId, a: WriteArgs) -> Result<ToolOutput, ToolOutput> {
        let path = self.workspace.resolve(&a.path).map_err(|r| ToolOutput::error(r.0))?;
        let shown = self.workspace.display(&path);
        if path.is_dir() {
            return Err(ToolOutput::error(format!("`{shown}` is a directory")));
        }
        let existed = path.exists();
        if existed {
            let old = std::fs::read(&path)
                .map_err(|e| ToolOutput::error(format!("cannot read `{shown}`: {e}")))?;
            self.seen.check(session, &path, &old, &shown).map_err(ToolOutput::error)?;
        } else if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| {
                ToolOutput::error(format!("cannot create the folders of `{shown}`: {e}"))
            })?;
        }
        std::fs::write(&path, &a.content)
            .map_err(|e| ToolOutput::error(format!("cannot write `{shown}`: {e}")))?;
        self.seen.remember(session, &path, a.content.as_bytes());
        let lines = a.content.lines().count();
        let verb = if existed { "replaced" } else { "created" };
        let s = if lines == 1 { "" } else { "s" };
        Ok(ToolOutput::ok(format!("{verb} `{shown}` ({lines} line{s})")))
    }
}

/// Replaces one exact piece of text in a file.
#[derive(Clone, Debug)]
pub struct Edit {
    /// The working directory.
    pub workspace: Workspace,
    /// What sessions have seen.
    pub seen: Seen,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EditArgs {
    path: String,
    old_string: String,
    new_string: String,
    #[serde(default)]
    replace_all: bool,
}

/// One exact replacement, of `edit` or of one of `multiedit`'s edits.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Replacement {
    old_string: String,
    new_string: String,
    #[serde(default)]
    replace_all: bool,
}

/// The schema's properties of one replacement (`edit`'s, and each of `multiedit`'s edits).
fn replacement_properties() -> serde_json::Value {
    json!({
        "old_string": {"type": "string", "description": "The exact text to replace."},
        "new_string": {"type": "string", "description": "The text to put in its place."},
        "replace_all": {"type": "boolean", "description": "Replace every occurrence (default false)."},
    })
}

impl Replacement {
    /// `text` with this replacement made, and the number of places replaced; or why it cannot
    /// be made (no match, several without `replace_all`, nothing to replace or to change).
    fn apply(&self, text: &str, shown: &str) -> Result<(String, usize), String> {
        if self.old_string.is_empty() {
            return Err("old_string is empty; use `write` to create a file".to_owned());
        }
        if self.old_string == self.new_string {
            return Err("old_string and new_string are the same; nothing to do".to_owned());
        }
        match (text.matches(self.old_string.as_str()).count(), self.replace_all) {
            (0, _) => Err(format!(
                "old_string was not found in `{shown}`; view the file and copy the text exactly"
            )),
            (n @ 1, _) | (n, true) => Ok((text.replace(&self.old_string, &self.new_string), n)),
            (n, false) => Err(format!(
                "old_string matches {n} places in `{shown}`; include more surrounding text to make it unique, or set replace_all"
            )),
        }
    }
}

/// A file about to be changed: inside the working directory, text, viewed by this session and
/// unchanged on disk since.
struct Target {
    path: PathBuf,
    shown: String,
    text: String,
}

impl Target {
    /// The file at `path` (as the call gave it), checked against what `session` has seen.
    fn open(
        workspace: &Workspace,
        seen: &Seen,
        session: &SessionId,
        path: &str,
    ) -> Result<Target, ToolOutput> {
        let path = workspace.resolve(path).map_err(|r| ToolOutput::error(r.0))?;
        let shown = workspace.display(&path);
        let bytes = std::fs::read(&path)
            .map_err(|e| ToolOutput::error(format!("cannot read `{shown}`: {e}")))?;
        seen.check(session, &path, &bytes, &shown).map_err(ToolOutput::error)?;
        let Ok(text) = String::from_utf8(bytes) else {
            return Err(ToolOutput::error(format!("`{shown}` is not a text file (not UTF-8)")));
        };
        Ok(Target { path, shown, text })
    }

    /// Writes `new` in place of the file, and remembers it as seen by `session` (its own
    /// change does not make the file stale).
    fn save(&self, seen: &Seen, session: &SessionId, new: &str) -> Result<(), ToolOutput> {
        std::fs::write(&self.path, new)
            .map_err(|e| ToolOutput::error(format!("cannot write `{}`: {e}", self.shown)))?;
        seen.remember(session, &self.path, new.as_bytes());
        Ok(())
    }
}

/// "1 place", "3 places".
fn places(count: usize) -> String {
    if count == 1 { "1 place".to_owned() } else { format!("{count} places") }
}

impl Tool for Edit {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new("edit").left_to_finish()
    }

    fn definition(&self) -> ToolDef {
        let mut properties = replacement_properties();
        properties["path"] = json!({"type": "string", "description": "The file, relative to the working directory."});
        ToolDef::new(
            "edit",
            "Replace an exact piece of text in a file of the working directory. old_string must \
             match exactly once (include enough surrounding lines to make it unique), or set \
             replace_all. The file must have been viewed and not changed since.",
        )
        .with_schema(json!({
            "type": "object",
            "properties": properties,
            "required": ["path", "old_string", "new_string"],
            "additionalProperties": false,
        }))
    }

    fn run(&self, call: ToolCall) -> BoxFuture<ToolOutput> {
        let this = self.clone();
        Box::pin(async move {
            args::lenient(&this.definition(), &call.input, |a| this.edit(&call.session, a))
        })
    }
}

impl Edit {
    fn edit(&self, session: &SessionId, a: EditArgs) -> Result<ToolOutput, ToolOutput> {
        let target = Target::open(&self.workspace, &self.seen, session, &a.path)?;
        let edit = Replacement {
            old_string: a.old_string,
            new_string: a.new_string,
            replace_all: a.replace_all,
        };
        let (new, count) = edit.apply(&target.text, &target.shown).map_err(ToolOutput::error)?;
        target.save(&self.seen, session, &new)?;
        Ok(ToolOutput::ok(format!("edited `{}`: replaced {}", target.shown, places(count))))
    }
}

/// Makes several exact replacements in one file, all or none.
#[derive(Clone, Debug)]
pub struct MultiEdit {
    /// The working directory.
    pub workspace: Workspace,
    /// What sessions have seen (shared with `view`).
    pub seen: Seen,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MultiEditArgs {
    path: String,
    edits: Vec<Replacement>,
}

impl Tool for MultiEdit {
    fn spec(&self) -> ToolSpec {
        // All or none holds on disk only if its one write is not cut off.
        ToolSpec::new("multiedit").left_to_finish()
    }

    fn definition(&self) -> ToolDef {
        ToolDef::new(
            "multiedit",
            "Make several exact replacements in one file of the working directory, all or none. \
             The edits apply in order, each to the text the ones before it left; each old_string \
             must match exactly once, or set its replace_all. If any edit cannot be made, nothing \
             is written and the error names the edit. The file must have been viewed and not \
             changed since.",
        )
        .with_schema(json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "The file, relative to the working directory."},
                "edits": {
                    "type": "array",
                    "minItems": 1,
                    "description": "The replacements, made in this order.",
                    "items": {
                        "type": "object",
                        "properties": replacement_properties(),
                        "required": ["old_string", "new_string"],
                        "additionalProperties": false,
                    },
                },
            },
            "required": ["path", "edits"],
            "additionalProperties": false,
        }))
    }

    fn run(&self, call: ToolCall) -> BoxFuture<ToolOutput> {
        let this = self.clone();
        Box::pin(async move {
            args::lenient(&this.definition(), &call.input, |a| this.multiedit(&call.session, a))
        })
    }
}

impl MultiEdit {
    fn multiedit(&self, session: &SessionId, a: MultiEditArgs) -> Result<ToolOutput, ToolOutput> {
        let target = Target::open(&self.workspace, &self.seen, session, &a.path)?;
        let (new, count) = apply_all(&a.edits, &target.text, &target.shown)?;
        target.save(&self.seen, session, &new)?;
        let n = a.edits.len();
        let edits = if n == 1 { "1 edit".to_owned() } else { format!("{n} edits") };
        Ok(ToolOutput::ok(format!(
            "edited `{}`: {edits}, replaced {}",
            target.shown,
            places(count)
        )))
    }
}

/// `text` with every edit made in order, and the places replaced in all; or the error naming
/// the first edit that cannot be made (counted from 1), after which nothing may be written.
fn apply_all(
    edits: &[Replacement],
    text: &str,
    shown: &str,
) -> Result<(String, usize), ToolOutput> {
    let mut text = text.to_owned();
    let mut count = 0;
    for (i, edit) in edits.iter().enumerate() {
        let (next, n) = edit.apply(&text, shown).map_err(|why| {
            // A later edit may fail because an earlier one changed its text.
            let order = if i == 0 {
                ""
            } else {
                " (each edit applies to the text the ones before it left)"
            };
            ToolOutput::error(format!(
                "edit {} of {}: {why}{order}. Nothing was written: the edits apply all or none.",
                i + 1,
                edits.len()
            ))
        })?;
        text = next;
        count += n;
    }
    Ok((text, count))
}
