//! The repository's recorded provider cases (`tests/fixtures/providers`): one folder per API,
//! one folder per case, each with its requests and the response bodies as received.
//!
//! Read from the source tree at the path this crate was built from; a missing or unreadable
//! fixture is a panic naming the file.

use std::path::{Path, PathBuf};

use turnstile_wire::Api;
use turnstile_wire::recording::{Recording, response_file};

/// The folder of the recorded cases.
pub fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/providers")
}

/// Every recorded case, of every API.
///
/// # Panics
/// When a case cannot be read.
pub fn cases() -> Vec<Recording> {
    Recording::read_all(&dir()).expect("the recorded cases")
}

/// Response body `n` of case `case` of `api`, as the provider sent it.
///
/// # Panics
/// When the file cannot be read, naming it.
pub fn response_body(api: Api, case: &str, n: usize) -> Vec<u8> {
    let path = dir().join(api.name()).join(case).join(response_file(n));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}
