//! Confinement (SPEC 9 "Tools"): every path a tool touches resolves inside the working
//! directory. A path with a `..` component, an absolute path outside the directory, and a path
//! whose existing part leads out of it through a symlink are refused with a result the model
//! reads, never an error of the host.
//!
//! The rule is stricter than "stays inside after normalising": any `..` is refused, because a
//! model that writes one is either confused or probing, and a refusal it can read is the most
//! useful answer. Symlinks inside the directory that stay inside it are followed.

use std::path::{Component, Path, PathBuf};

/// The working directory the tools are confined to.
#[derive(Clone, Debug)]
pub struct Workspace {
    root: PathBuf,
}

/// Why a path was refused; its `Display` is the text the model gets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal(pub String);

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl Workspace {
    /// The working directory `root` (resolved through symlinks once, here).
    ///
    /// # Errors
    /// `root` does not exist or is not a directory.
    pub fn new(root: impl AsRef<Path>) -> std::io::Result<Workspace> {
        let root = std::fs::canonicalize(root.as_ref())?;
        if !root.is_dir() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotADirectory,
                format!("`{}` is not a directory", root.display()),
            ));
        }
        Ok(Workspace { root })
    }

    /// The directory.
    #[must_use]
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `path` (relative to the directory, or absolute inside it; empty is the directory) as an
    /// absolute path inside the directory.
    ///
    /// # Errors
    /// A refusal naming the path and why.
    pub fn resolve(&self, path: &str) -> Result<PathBuf, Refusal> {
        let given = Path::new(path);
        if given.components().any(|c| c == Component::ParentDir) {
            return Err(Refusal(format!(
                "refused: `{path}` contains `..`; give a path inside the working directory"
            )));
        }
        let joined = if given.is_absolute() { given.to_path_buf() } else { self.root.join(given) };
        if !joined.starts_with(&self.root) {
            return Err(Refusal(format!(
                "refused: `{path}` is outside the working directory `{}`",
                self.root.display()
            )));
        }
        // The longest part that exists decides where symlinks lead; the rest is created below it.
        let mut existing = joined.as_path();
        let mut rest = Vec::new();
        while !existing.exists() {
            match (existing.parent(), existing.file_name()) {
                (Some(parent), Some(name)) => {
                    rest.push(name.to_owned());
                    existing = parent;
                }
                _ => break,
            }
        }
        let real = std::fs::canonicalize(existing)
            .map_err(|e| Refusal(format!("refused: `{path}` cannot be resolved: {e}")))?;
        if !real.starts_with(&self.root) {
            return Err(Refusal(format!(
                "refused: `{path}` leads outside the working directory through a symbolic link"
            )));
        }
        Ok(rest.into_iter().rev().fold(real, |p, name| p.join(name)))
    }

    /// `path` relative to the directory, for messages (`.` for the directory itself).
    #[must_use]
    pub fn display(&self, path: &Path) -> String {
        match path.strip_prefix(&self.root) {
            Ok(p) if p.as_os_str().is_empty() => ".".to_owned(),
            Ok(p) => p.display().to_string(),
            Err(_) => path.display().to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ws() -> (tempfile::TempDir, Workspace) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("src")).unwrap();
        std::fs::write(dir.path().join("src/a.rs"), "fn a() {}").unwrap();
        let ws = Workspace::new(dir.path()).unwrap();
        (dir, ws)
    }

    #[test]
    fn paths_inside_resolve() {
        let (_d, ws) = ws();
        assert_eq!(ws.resolve("src/a.rs").unwrap(), ws.root().join("src/a.rs"));
        assert_eq!(ws.resolve("").unwrap(), ws.root());
        assert_eq!(ws.resolve("./src").unwrap(), ws.root().join("src"));
        let abs = ws.root().join("src/a.rs");
        assert_eq!(ws.resolve(abs.to_str().unwrap()).unwrap(), abs);
        assert_eq!(ws.resolve("new/dir/file.txt").unwrap(), ws.root().join("new/dir/file.txt"));
    }

    #[test]
    fn every_escape_is_refused_with_a_reason() {
        let (dir, ws) = ws();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("out")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", dir.path().join("passwd")).unwrap();
        for (path, why) in [
            ("../x", "contains `..`"),
            ("src/../../x", "contains `..`"),
            ("src/..", "contains `..`"),
            ("/etc/passwd", "is outside the working directory"),
            ("out/secret", "through a symbolic link"),
            ("out", "through a symbolic link"),
            ("passwd", "through a symbolic link"),
        ] {
            let e = ws.resolve(path).unwrap_err();
            assert!(e.0.contains(why), "{path}: {e}");
        }
    }

    #[test]
    fn a_symlink_that_stays_inside_is_followed() {
        let (dir, ws) = ws();
        std::os::unix::fs::symlink(dir.path().join("src"), dir.path().join("code")).unwrap();
        assert_eq!(ws.resolve("code/a.rs").unwrap(), ws.root().join("src/a.rs"));
    }
}
