//! The one way this crate runs store work (SQLite transactions with their
//! fsyncs) from async code: never on a runtime worker that other tasks are
//! waiting for.
//!
//! On a multi-threaded runtime the work runs on the calling thread through
//! [`tokio::task::block_in_place`]: the runtime hands the thread's other
//! tasks to another thread, and the caller does not wait for a pool thread
//! to wake up first. On the 2-vCPU development VM that wake-up cost 0.15 ms
//! before the update's commit on every message (docs/performance.md).
//! Elsewhere (a current-thread runtime, where that is impossible) the work
//! goes to the blocking pool with [`tokio::task::spawn_blocking`].

use std::panic::{AssertUnwindSafe, catch_unwind};

use tokio::runtime::{Handle, RuntimeFlavor};

/// The work panicked (its thread survived; the work did not finish).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Panicked;

/// Runs `work` off the runtime's workers (see the module documentation).
/// A panic in `work` is returned as [`Panicked`], as a blocking-pool join
/// failure is.
pub(crate) async fn run<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Panicked> {
    let flavor = Handle::try_current().map(|handle| handle.runtime_flavor());
    match flavor {
        Ok(RuntimeFlavor::MultiThread) => {
            tokio::task::block_in_place(|| catch_unwind(AssertUnwindSafe(work)))
                .map_err(|_| Panicked)
        }
        // A current-thread runtime cannot lend its only worker.
        _ => tokio::task::spawn_blocking(work)
            .await
            .map_err(|_| Panicked),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;

    /// Work that can only finish once another task on the same runtime has
    /// run: it would wait forever if it held the runtime's only worker.
    async fn work_needing_another_task() -> Result<&'static str, Panicked> {
        let (tx, rx) = mpsc::channel();
        let (started_tx, started_rx) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            // Only runs when some worker is free to run it.
            let _ = started_rx.await;
            tx.send("the other task ran").unwrap();
        });
        run(move || {
            started_tx.send(()).unwrap();
            rx.recv_timeout(Duration::from_secs(10)).unwrap()
        })
        .await
    }

    #[test]
    fn on_a_multi_threaded_runtime_the_other_tasks_keep_running() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .build()
            .unwrap();
        let got = runtime.block_on(async { tokio::spawn(work_needing_another_task()).await });
        assert_eq!(got.unwrap(), Ok("the other task ran"));
    }

    #[test]
    fn on_a_current_thread_runtime_the_work_goes_to_the_blocking_pool() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        assert_eq!(
            runtime.block_on(work_needing_another_task()),
            Ok("the other task ran")
        );
    }

    #[test]
    fn a_panic_in_the_work_is_an_error_on_both_flavors() {
        for runtime in [
            tokio::runtime::Builder::new_multi_thread().build().unwrap(),
            tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap(),
        ] {
            let got = runtime.block_on(run(|| -> u8 { panic!("deliberate") }));
            assert_eq!(got, Err(Panicked));
        }
    }

    #[test]
    fn on_a_multi_threaded_runtime_the_work_runs_on_the_calling_thread() {
        let runtime = tokio::runtime::Builder::new_multi_thread().build().unwrap();
        let same = runtime.block_on(async {
            tokio::spawn(async {
                let caller = std::thread::current().id();
                run(move || std::thread::current().id() == caller).await
            })
            .await
        });
        assert_eq!(same.unwrap(), Ok(true));
    }
}
