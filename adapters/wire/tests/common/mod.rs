//! The recorded cases, as the tests read them.

use std::path::{Path, PathBuf};

use turnstile_wire::recording::Recording;

pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/providers")
}

/// Every case, in path order.
pub fn cases() -> Vec<Recording> {
    Recording::read_all(&fixtures()).expect("the recorded cases")
}
