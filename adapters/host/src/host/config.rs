//! How to run a host (SPEC 4.12, 11): its store, its engine's configuration, the flight
//! recorder, and a member's part among several hosts.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use turnstile_core::Config;

use super::member::MemberConfig;
use crate::store::StoreConfig;

/// How to run a host.
#[derive(Clone, Debug)]
pub struct HostConfig {
    /// The store.
    pub store: StoreConfig,
    /// The engine's configuration (SPEC section 8 constants, among them the stream watchdog's
    /// idle timeout, `stream_idle_timeout_ms`: 300 s, 0 disables it).
    pub engine: Config,
    /// Worker tasks that drive sessions' IO; default: the available parallelism.
    pub workers: usize,
    /// The debounce window of streamed writes (SPEC 4.12; default 33 ms).
    pub debounce: Duration,
    /// How long a failing store write is retried before the host stops (default 30 s).
    pub store_retry: Duration,
    /// Write everything ready in one SQLite transaction (default). Off, every session
    /// transaction is its own SQLite transaction: only useful as a benchmark baseline.
    pub group_commit: bool,
    /// Capacity of the live-update broadcast; a subscriber further behind gets `lagged`.
    pub updates_capacity: usize,
    /// Capacity of the engine's inbox (back-pressure on clients and streams).
    pub inbox_capacity: usize,
    /// Read connections for clients (`Host::read`, `wait`, completion streams), used by
    /// whichever query finds one free: a server's streams that catch up from the store do not
    /// queue behind one another or behind `wait` (4 by default).
    pub readers: usize,
    /// The flight recorder: write every input to this trace (`turnstile-sim replay`
    /// reproduces the run), with the outputs when `trace_outputs` is set.
    pub trace: Option<Flight>,
    /// Record the outputs too, so a replay compares them.
    pub trace_outputs: bool,
    /// Run as one of several hosts over one store (SPEC 11), or alone (`None`, the default).
    pub member: Option<MemberConfig>,
}

/// Where the flight recorder writes the trace (JSON lines, `docs/trace-format.md`).
#[derive(Clone, Debug)]
pub enum Flight {
    /// A file, created (or truncated) when the host opens; every input is written as it is
    /// handled, so the trace survives a crash up to the input that crashed.
    File(PathBuf),
    /// A buffer in memory that outlives the host (the simulator: a crashed host's trace is
    /// still there to check).
    Memory(FlightBuffer),
    /// Buffers in memory, one per engine: a member of several hosts (SPEC 11) runs a core per
    /// owned session, and each take's core records its own trace there (a host alone records
    /// its one engine in one buffer of it).
    Engines(FlightShelf),
}

/// The traces of several engines in memory, in the order the engines started; clones share
/// them.
#[derive(Clone, Debug, Default)]
pub struct FlightShelf(Arc<Mutex<Vec<FlightBuffer>>>);

impl FlightShelf {
    /// Every trace recorded so far, in the order the engines started.
    #[must_use]
    pub fn traces(&self) -> Vec<FlightBuffer> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// A new buffer for the next engine's trace.
    pub(crate) fn next(&self) -> FlightBuffer {
        let buffer = FlightBuffer::default();
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(buffer.clone());
        buffer
    }
}

/// A shared, growing flight trace in memory; clones write to and read the same text.
#[derive(Clone, Debug, Default)]
pub struct FlightBuffer(Arc<Mutex<String>>);

impl FlightBuffer {
    /// The trace written so far.
    #[must_use]
    pub fn text(&self) -> String {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    pub(crate) fn push(&self, text: &str) {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push_str(text);
    }
}

impl HostConfig {
    /// SPEC defaults for a store file at `path`.
    #[must_use]
    pub fn new(path: impl Into<PathBuf>) -> HostConfig {
        HostConfig::with_store(StoreConfig::new(path))
    }

    /// SPEC defaults for the store `store` describes (a file or an in-memory disk).
    #[must_use]
    pub fn with_store(store: StoreConfig) -> HostConfig {
        HostConfig {
            store,
            engine: Config::default(),
            workers: std::thread::available_parallelism().map_or(2, |n| n.get()),
            debounce: Duration::from_millis(33),
            store_retry: Duration::from_secs(30),
            group_commit: true,
            updates_capacity: 1024,
            inbox_capacity: 4096,
            readers: 4,
            trace: None,
            trace_outputs: false,
            member: None,
        }
    }
}
