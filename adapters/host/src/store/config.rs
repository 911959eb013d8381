//! How to open a store (SPEC 4.12): where it is, how it syncs, what it injects.

use std::path::PathBuf;

use super::faults::*;
use super::location::*;

/// How to open a store.
#[derive(Clone, Debug)]
pub struct StoreConfig {
    /// Where the database is: a file (the owner lock is `<path>.lock` beside it) or an
    /// in-memory disk (simulation and tests).
    pub location: Location,
    /// `PRAGMA synchronous`: `FULL` (default) makes every commit durable on power loss;
    /// `NORMAL` only on process crash.
    pub synchronous: Synchronous,
    /// Failures to inject (tests only; `None` in production).
    pub faults: Option<Faults>,
    /// Several hosts: the ghost log of takes and fenced commits that the simulator checks
    /// (`None` in production).
    pub audit: Option<super::audit::Audit>,
    /// The bug the host pretends to have (test builds with the `mutants` feature only).
    #[cfg(feature = "mutants")]
    pub mutant: Option<crate::HostMutant>,
}

impl StoreConfig {
    /// The mutant this configuration switches on (none without the `mutants` feature).
    pub(crate) fn armed(&self) -> crate::mutants::Armed {
        #[cfg(feature = "mutants")]
        {
            crate::mutants::Armed::with(self.mutant)
        }
        #[cfg(not(feature = "mutants"))]
        {
            crate::mutants::Armed::default()
        }
    }

    /// A durable store at this path, without injected faults; a `postgres://` (or
    /// `postgresql://`) URL given as the path is that PostgreSQL database
    /// ([`Location::parse`]).
    #[must_use]
    pub fn new(path: impl Into<PathBuf>) -> StoreConfig {
        let path = path.into();
        match path.to_str() {
            Some(text) if is_postgres_url(text) => {
                StoreConfig::at(Location::Postgres(text.to_owned()))
            }
            _ => StoreConfig::at(Location::File(path)),
        }
    }

    /// A store on an in-memory disk, without injected faults: what the simulator uses (no
    /// file system, no fsync), with the same SQL, owner lock and recovery as a file.
    #[must_use]
    pub fn in_memory(disk: &MemoryDisk) -> StoreConfig {
        StoreConfig::at(Location::Memory(disk.clone()))
    }

    /// A store at `location`, without injected faults.
    #[must_use]
    pub fn at(location: Location) -> StoreConfig {
        StoreConfig {
            location,
            synchronous: Synchronous::Full,
            faults: None,
            audit: None,
            #[cfg(feature = "mutants")]
            mutant: None,
        }
    }
}

/// SQLite's `synchronous` setting for the writer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Synchronous {
    /// Every commit is synced to disk (durable on power loss).
    #[default]
    Full,
    /// Synced at checkpoints only (durable on a process crash, not on power loss).
    Normal,
}
