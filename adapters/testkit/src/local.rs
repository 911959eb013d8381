//! What a test finds on this machine: a free port of 127.0.0.1, a binary the workspace built
//! beside the test, the files a run left in a folder (and whether a secret is in any of them).

use std::path::{Path, PathBuf};

/// A port of 127.0.0.1 that was free a moment ago (for a server a test starts, or for a
/// connection that must find nobody listening).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The workspace binary `name`, which `cargo test --workspace` builds into the same folder as
/// `beside` (a test's `CARGO_BIN_EXE_*`, or the test executable's folder's parent).
///
/// # Panics
/// When it is missing, saying how to build it (`build` is the cargo command).
pub fn built(beside: &Path, name: &str, build: &str) -> PathBuf {
    let path = beside.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    assert!(
        path.exists(),
        "{} is missing: build it with `{build}` (`cargo test --workspace` builds it)",
        path.display()
    );
    path
}

/// The folder of the running test executable's binaries: where cargo puts the workspace's
/// binaries (`target/<profile>/`), one up from the test's own `deps/`.
pub fn binaries_folder() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().and_then(Path::parent).unwrap().to_owned()
}

/// Every file under `dir`, recursively, in path order.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(files_under(&path));
        } else {
            out.push(path);
        }
    }
    out.sort();
    out
}

/// No file under `dir` holds `secret` (a key, a token).
///
/// # Panics
/// Naming the first file that does.
pub fn assert_absent_under(dir: &Path, secret: &str) {
    for file in files_under(dir) {
        let bytes = std::fs::read(&file).unwrap();
        assert!(
            !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
            "{} holds the secret",
            file.display()
        );
    }
}
