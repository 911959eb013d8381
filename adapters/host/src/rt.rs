//! Runtime glue: blocking work (the place where the host's code differs under the simulator),
//! store reads through it, and a panic guard for IO tasks.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};
use std::task::Poll;

use crate::store::{Reader, StoreError};

/// Runs blocking work (SQLite) off the async worker threads. Under the simulator (`--cfg
/// madsim`) it runs inline, as the simulation is single-threaded and its disk IO is real.
///
/// A panic in `f` is resumed in the caller, as it is when `f` runs inline; the only error is
/// [`StoreError::Cancelled`]: the runtime shut down before `f` started.
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, StoreError> {
    #[cfg(madsim)]
    {
        Ok(f())
    }
    #[cfg(not(madsim))]
    {
        match tokio::task::spawn_blocking(f).await {
            Ok(v) => Ok(v),
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(_) => Err(StoreError::Cancelled),
        }
    }
}

/// Read connections shared by many callers: a query takes the first that is free, or waits
/// for one (chosen in turn) when all are busy. Each is a WAL reader, so queries on different
/// connections run at once and never block the writer.
#[derive(Clone, Debug)]
pub(crate) struct Readers {
    pool: Arc<[Mutex<Reader>]>,
    next: Arc<std::sync::atomic::AtomicUsize>,
}

impl Readers {
    /// A pool of these connections (at least one).
    pub(crate) fn new(readers: Vec<Reader>) -> Readers {
        assert!(!readers.is_empty(), "a pool of read connections needs one");
        Readers { pool: readers.into_iter().map(Mutex::new).collect(), next: Arc::default() }
    }

    fn with<T>(&self, f: impl FnOnce(&Reader) -> T) -> T {
        for r in self.pool.iter() {
            if let Ok(r) = r.try_lock() {
                return f(&r);
            }
        }
        let i = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % self.pool.len();
        let r = self.pool[i].lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&r)
    }
}

/// Runs a query on a shared read connection with [`blocking`]: the one way the host reads
/// the store (requests, preparation, waits, completion streams, `Host::read`).
pub(crate) async fn read<T: Send + 'static>(
    readers: &Readers,
    f: impl FnOnce(&Reader) -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    let readers = readers.clone();
    blocking(move || readers.with(f)).await?
}

/// Polls `fut`, turning a panic inside it into `Err(message)`, so an IO task that panics can
/// still report a failure to the engine instead of leaving its turn waiting forever.
pub(crate) async fn catch_unwind<F: Future>(fut: F) -> Result<F::Output, String> {
    let mut fut = std::pin::pin!(fut);
    std::future::poll_fn(move |cx| {
        match std::panic::catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(cx))) {
            Ok(Poll::Ready(v)) => Poll::Ready(Ok(v)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(payload) => Poll::Ready(Err(panic_message(payload.as_ref()))),
        }
    })
    .await
}

/// The message of a panic's payload (`panic!` with a literal or a formatted string), or "a
/// panic without a message".
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_owned()
    }
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn a_panic_becomes_an_error_and_a_value_passes_through() {
        assert_eq!(super::catch_unwind(async { 7 }).await, Ok(7));
        let got = super::catch_unwind(async {
            if true {
                panic!("tool exploded");
            }
        })
        .await;
        assert_eq!(got, Err("tool exploded".to_owned()));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_panic_in_blocking_work_is_resumed_in_the_caller() {
        assert_eq!(super::blocking(|| 7).await, Ok(7));
        let caught = super::catch_unwind(super::blocking(|| {
            if true {
                panic!("reader exploded");
            }
        }))
        .await;
        assert_eq!(caught, Err("reader exploded".to_owned()));
    }
}
