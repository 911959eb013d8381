//! `--record DIR` and `[record] dir`: a process's flight trace and its provider exchanges in
//! one folder, which `turnstile-sim replay DIR` replays output for output and `turnstile-sim
//! view DIR` draws (SPEC 10: a live host's run replayed; `docs/trace-format.md`, "Recordings
//! of live runs").
//!
//! One process (a `turnstile run`, or a `turnstile serve` with all its sessions) writes one
//! recording:
//!
//! ```text
//! DIR/flight.jsonl                          the core's flight trace: every input, its outputs
//! DIR/providers/<api>/flight-<session>/     each session's exchanges (case.json, NN.request.json,
//!                                           NN.response.body: tests/fixtures/providers/'s format)
//! DIR/providers/<api>/flight-titles/        the title requests
//! ```
//!
//! A recording is never overwritten: a later process recording into the same folder takes the
//! next free name, `flight-2.jsonl` with `providers/<api>/flight-2-<session>/`, and so on. The
//! name is claimed by creating the trace file exclusively, so two processes never share one.
//! No key is written: requests carry keys in headers, which are not recorded, and a key a
//! server echoes in a body or an error is replaced by `<redacted>` (`turnstile_http::record`).

use std::path::{Path, PathBuf};

use serde::Deserialize;
use turnstile_host::{Flight, HostConfig};
use turnstile_http::HttpProvider;

use crate::failure::Failure;

/// The name of a folder's first flight trace (without `.jsonl`); later ones add `-2`, `-3`, ...
pub const FIRST: &str = "flight";

/// The most recordings one folder takes.
const MOST: u32 = 10_000;

/// A recording claimed in its folder: the trace file exists (empty until the host opens).
#[derive(Debug)]
pub struct Recording {
    dir: PathBuf,
    trace: PathBuf,
    stem: String,
}

/// Claims the next recording in `folder` (`--record`, else `[record] dir`:
/// `setup::Loaded::record_folder`), if one is named.
///
/// # Errors
/// The folder cannot be created, or no trace file can be created in it.
pub fn claim(folder: Option<PathBuf>) -> Result<Option<Recording>, Failure> {
    folder.map(|dir| Recording::claim(&dir)).transpose()
}

impl Recording {
    /// Claims the first free name in `dir` (created if missing): `flight.jsonl`, else
    /// `flight-2.jsonl`, ...; a name whose provider cases exist is not free either.
    ///
    /// # Errors
    /// The folder cannot be created, or a trace file cannot be created in it.
    pub fn claim(dir: &Path) -> Result<Recording, Failure> {
        std::fs::create_dir_all(dir).map_err(|e| {
            Failure::setup(format!(
                "cannot create the recording folder `{}`: {e}",
                dir.display()
            ))
        })?;
        for n in 1..=MOST {
            let stem = if n == 1 {
                FIRST.to_owned()
            } else {
                format!("{FIRST}-{n}")
            };
            if has_cases(dir, &stem) {
                continue;
            }
            let trace = dir.join(format!("{stem}.jsonl"));
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&trace)
            {
                Ok(_) => {
                    let dir = dir.to_owned();
                    return Ok(Recording { dir, trace, stem });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => {
                    return Err(Failure::setup(format!(
                        "cannot create the flight trace `{}`: {e}",
                        trace.display()
                    )));
                }
            }
        }
        Err(Failure::setup(format!(
            "the recording folder `{}` already holds {MOST} recordings: record into another one",
            dir.display()
        )))
    }

    /// The flight trace file.
    #[must_use]
    pub fn trace(&self) -> &Path {
        &self.trace
    }

    /// Records `provider`'s exchanges and the host's flight trace (with its outputs, so that a
    /// replay compares every one).
    ///
    /// # Errors
    /// The providers' folder cannot be created.
    pub fn attach(
        &self,
        provider: HttpProvider,
        config: &mut HostConfig,
    ) -> Result<HttpProvider, Failure> {
        let provider = provider
            .with_recordings(self.dir.join("providers"), &self.stem)
            .map_err(|e| Failure::setup(e.to_string()))?;
        config.trace = Some(Flight::File(self.trace.clone()));
        config.trace_outputs = true;
        tracing::info!(trace = %self.trace.display(), "recording the flight trace and provider exchanges");
        Ok(provider)
    }

    /// Gives the claimed name back (the host did not open: nothing was recorded).
    pub fn release(&self) {
        let _ = std::fs::remove_file(&self.trace);
    }

    /// One line for stderr: where the recording goes and how to read it.
    #[must_use]
    pub fn describe(&self) -> String {
        format!(
            "recording: the flight trace `{}`, provider exchanges under `{}` (replay: \
             turnstile-sim replay {})",
            self.trace().display(),
            self.dir.join("providers").display(),
            self.dir.display()
        )
    }
}

/// True when `dir/providers/<api>/<stem>-*` exists: a recording whose trace was removed.
fn has_cases(dir: &Path, stem: &str) -> bool {
    let prefix = format!("{stem}-");
    let Ok(apis) = std::fs::read_dir(dir.join("providers")) else {
        return false;
    };
    apis.filter_map(Result::ok).any(|api| {
        std::fs::read_dir(api.path()).is_ok_and(|cases| {
            cases
                .filter_map(Result::ok)
                .any(|c| c.file_name().to_string_lossy().starts_with(&prefix))
        })
    })
}

/// `[record] dir`: a folder name, not an empty string (the error names the line).
///
/// # Errors
/// Not a string, or an empty one.
pub fn folder<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<PathBuf>, D::Error> {
    let text = String::deserialize(d)?;
    if text.trim().is_empty() {
        return Err(serde::de::Error::custom(
            "`dir` is empty: name the folder to record into, or leave `[record]` out",
        ));
    }
    Ok(Some(PathBuf::from(text)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_later_recording_takes_the_next_free_name_and_never_overwrites() {
        let dir = tempfile::tempdir().unwrap();
        let first = Recording::claim(dir.path()).unwrap();
        assert_eq!(first.trace(), dir.path().join("flight.jsonl"));
        std::fs::write(first.trace(), "kept").unwrap();
        let second = Recording::claim(dir.path()).unwrap();
        assert_eq!(second.trace(), dir.path().join("flight-2.jsonl"));
        assert_eq!(std::fs::read_to_string(first.trace()).unwrap(), "kept");
        // A recording whose trace was removed keeps its name while its cases are there.
        std::fs::create_dir_all(dir.path().join("providers/openai-chat/flight-3-s1")).unwrap();
        let fourth = Recording::claim(dir.path()).unwrap();
        assert_eq!(fourth.trace(), dir.path().join("flight-4.jsonl"));
        // A released name is free again.
        second.release();
        let again = Recording::claim(dir.path()).unwrap();
        assert_eq!(again.trace(), dir.path().join("flight-2.jsonl"));
    }

    #[test]
    fn an_empty_folder_name_is_refused() {
        #[derive(Debug, Deserialize)]
        struct Record {
            #[serde(default, deserialize_with = "super::folder")]
            dir: Option<PathBuf>,
        }
        #[derive(Debug, Deserialize)]
        struct File {
            record: Record,
        }
        let err = toml::from_str::<File>("[record]\ndir = \"\"\n").unwrap_err();
        assert!(err.to_string().contains("`dir` is empty"), "{err}");
        assert!(err.to_string().contains("line 2"), "{err}");
        let ok: File = toml::from_str("[record]\ndir = \"rec\"\n").unwrap();
        assert_eq!(ok.record.dir, Some(PathBuf::from("rec")));
    }
}
