//! The names MCP tools are offered under.
//!
//! A tool `t` of the server configured as `[mcp.s]` is offered as `mcp_s_t`, so that it cannot
//! clash with a built-in tool or with a tool of another server. Providers allow only
//! `[a-zA-Z0-9_-]` in a tool name, at most 64 of them, so:
//!
//! 1. every character of `s` and `t` outside `[a-zA-Z0-9_-]` becomes `_` (`my.server` and
//!    `read/file` give `mcp_my_server_read_file`);
//! 2. a name longer than [`TOOL_NAME_MAX`] keeps its first 55 characters, then `_` and 8 hex
//!    digits of a hash of the original server and tool names (64 in all);
//! 3. a name already taken by an earlier tool (servers in name order, each server's tools in
//!    the order of its `tools/list`) is made unique the same way as in 2. A tool whose name is
//!    still taken then (a server listing the same tool twice) is not offered.

/// The longest tool name providers accept.
pub const TOOL_NAME_MAX: usize = 64;

/// Characters kept before the hash when a name must be shortened or made unique.
const KEPT_BEFORE_HASH: usize = TOOL_NAME_MAX - 9;

/// The name tool `tool` of server `server` is offered under, before uniqueness (rules 1 and 2
/// of the [module docs](self)).
#[must_use]
pub fn tool_name(server: &str, tool: &str) -> String {
    let name: String = format!("mcp_{server}_{tool}")
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' })
        .collect();
    if name.len() > TOOL_NAME_MAX { hashed(&name, server, tool) } else { name }
}

/// `name` (all ASCII) cut to [`KEPT_BEFORE_HASH`] characters, then `_` and the hash.
fn hashed(name: &str, server: &str, tool: &str) -> String {
    let kept = &name[..name.len().min(KEPT_BEFORE_HASH)];
    format!("{kept}_{:08x}", fnv1a(server, tool))
}

/// FNV-1a (32 bits) of `server`, a zero byte, and `tool`: stable across runs and platforms.
fn fnv1a(server: &str, tool: &str) -> u32 {
    let bytes = server.bytes().chain([0]).chain(tool.bytes());
    bytes.fold(0x811c_9dc5, |h, b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193))
}

/// Names handed out so far (rule 3 of the [module docs](self)).
#[derive(Debug, Default)]
pub(crate) struct Names {
    taken: std::collections::BTreeSet<String>,
}

impl Names {
    /// A name for tool `tool` of `server` that no earlier tool has, or `None` when even the
    /// hashed form is taken.
    pub(crate) fn claim(&mut self, server: &str, tool: &str) -> Option<String> {
        let name = tool_name(server, tool);
        if self.taken.insert(name.clone()) {
            return Some(name);
        }
        let other = hashed(&name, server, tool);
        self.taken.insert(other.clone()).then_some(other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_prefixed_and_sanitized() {
        assert_eq!(tool_name("files", "read_file"), "mcp_files_read_file");
        assert_eq!(tool_name("my.server", "read/file"), "mcp_my_server_read_file");
        assert_eq!(tool_name("a b", "é-x"), "mcp_a_b__-x");
    }

    #[test]
    fn long_names_are_cut_with_a_hash_to_64() {
        let long = "t".repeat(100);
        let a = tool_name("s", &long);
        assert_eq!(a.len(), TOOL_NAME_MAX);
        assert!(a.starts_with("mcp_s_ttt"));
        let b = tool_name("s", &format!("{long}x"));
        assert_eq!(b.len(), TOOL_NAME_MAX);
        assert_ne!(a, b, "the hash tells apart names equal in their first 55 characters");
        assert_eq!(a, tool_name("s", &long), "the same every time");
        assert_eq!(tool_name("s", &"t".repeat(58)).len(), TOOL_NAME_MAX, "64 fits");
    }

    #[test]
    fn a_taken_name_gets_a_hash_and_a_repeat_is_dropped() {
        let mut names = Names::default();
        assert_eq!(names.claim("a_b", "c").as_deref(), Some("mcp_a_b_c"));
        let other = names.claim("a", "b_c").unwrap();
        assert!(other.starts_with("mcp_a_b_c_") && other.len() == "mcp_a_b_c_".len() + 8);
        assert_eq!(names.claim("a", "b_c"), None);
        let all_allowed =
            |n: &str| n.chars().all(|c| c.is_ascii_alphanumeric() || "_-".contains(c));
        assert!(all_allowed(&other));
    }
}
