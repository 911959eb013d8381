//! # turnstile-tools: the built-in tools of the reference agent (SPEC 9 "Tools")
//!
//! `view`, `ls`, `glob`, `grep`, `write`, `edit`, `multiedit` and `bash`, each confined to a
//! working directory ([`Workspace`]): a path that leaves it is refused with a result the model
//! reads. Each tool has a description and a JSON schema ([`turnstile_host::Tool::definition`])
//! the providers send, and reads its arguments leniently against that schema ([`args`]):
//! `file_path` for `path`, an unknown field ignored and named in the result, `"20"` for `20`;
//! any other slip is an error result naming the field.
//!
//! Around them, the [`Gate`] every call passes first: pre-tool [`hook`]s, then the
//! [`permission`] rules, then a person for what the rules say to ask about.
//!
//! ```no_run
//! # fn demo() -> std::io::Result<()> {
//! let tools = turnstile_tools::builtins(".", None)?;
//! # let _ = tools; Ok(()) }
//! ```

#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod args;
pub mod bash;
pub mod files;
pub mod gate;
pub mod glob;
pub mod grep;
pub mod hook;
pub mod ls;
pub mod permission;
pub mod process;
pub mod workspace;

pub use bash::Bash;
pub use files::{Edit, MultiEdit, Seen, View, Write};
pub use gate::{Answer, Ask, Asker, Denial, DenyAsks, Gate};
pub use glob::Glob;
pub use grep::Grep;
pub use hook::{Hook, Hooks, HooksFile};
pub use ls::Ls;
pub use permission::{Level, Permissions, PermissionsFile};
pub use process::Reaper;
pub use workspace::{Refusal, Workspace};

/// The built-in tools confined to `root`, with the `agent` tool (SPEC 4.11); `bash` records
/// its running commands with `reaper` when given.
///
/// # Errors
/// `root` is not a directory.
pub fn builtins(
    root: impl AsRef<std::path::Path>,
    reaper: Option<Reaper>,
) -> std::io::Result<turnstile_host::ToolSet> {
    let workspace = Workspace::new(root)?;
    let seen = Seen::default();
    Ok(turnstile_host::ToolSet::new()
        .with(View { workspace: workspace.clone(), seen: seen.clone() })
        .with(Write { workspace: workspace.clone(), seen: seen.clone() })
        .with(Edit { workspace: workspace.clone(), seen: seen.clone() })
        .with(MultiEdit { workspace: workspace.clone(), seen })
        .with(Ls { workspace: workspace.clone() })
        .with(Glob { workspace: workspace.clone() })
        .with(Grep { workspace: workspace.clone() })
        .with(Bash { workspace, reaper })
        .with_agent())
}
