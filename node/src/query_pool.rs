//! The node's query pool: a fixed set of threads, at a lower CPU priority than
//! the rest of the process, that run reads (and the leader's SQL trial runs)
//! off the runtime threads driving Raft. At most `queue` jobs wait; beyond
//! that a job is refused as busy. A scan or search that takes every core
//! leaves heartbeats, appends and applies the CPU they need first.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};

use tracing::warn;

type Job = Box<dyn FnOnce() + Send + 'static>;

/// Nice value of the query threads (the runtime and apply threads keep 0).
const QUERY_NICE: i32 = 10;

/// Why a job did not produce its result.
#[derive(Debug, thiserror::Error)]
pub enum PoolError {
    #[error("every query worker is busy and {0} reads are waiting")]
    Busy(usize),
    #[error("the query failed: {0}")]
    Panicked(String),
}

/// A bounded pool of low-priority threads.
pub struct QueryPool {
    jobs: SyncSender<Job>,
    queue: usize,
}

impl QueryPool {
    /// Starts `workers` threads (at least one) with room for `queue` waiting jobs.
    pub fn new(workers: usize, queue: usize) -> Self {
        let (jobs, rx) = sync_channel::<Job>(queue);
        let rx = Arc::new(Mutex::new(rx));
        for i in 0..workers.max(1) {
            let rx = rx.clone();
            // A query runs on the thread's own stack, sized for the deepest SQL request.
            let spawned = std::thread::Builder::new()
                .name(format!("query-{i}"))
                .stack_size(tessera_sql::REQUEST_THREAD_STACK_BYTES)
                .spawn(move || worker(&rx));
            if let Err(e) = spawned {
                warn!("starting query worker {i}: {e}");
            }
        }
        QueryPool { jobs, queue }
    }

    /// Runs `work` on a query thread and waits for its result.
    pub async fn run<T: Send + 'static>(&self, work: impl FnOnce() -> T + Send + 'static) -> Result<T, PoolError> {
        let result = self.submit(work)?;
        result.await.map_err(|_| PoolError::Panicked("the query panicked (see the node log)".into()))
    }

    /// Like [`QueryPool::run`], for work that can stop early: the flag handed to
    /// `work` is set when the caller stops waiting (this future is dropped,
    /// e.g. because the client went away), so the work ends instead of burning
    /// a query thread for nobody.
    pub async fn run_cancellable<T: Send + 'static>(
        &self,
        work: impl FnOnce(Arc<AtomicBool>) -> T + Send + 'static,
    ) -> Result<T, PoolError> {
        /// Sets the flag when dropped before the result arrived.
        struct CancelOnDrop(Option<Arc<AtomicBool>>);
        impl Drop for CancelOnDrop {
            fn drop(&mut self) {
                if let Some(flag) = self.0.take() {
                    flag.store(true, Ordering::Relaxed);
                }
            }
        }
        let flag = Arc::new(AtomicBool::new(false));
        let mut guard = CancelOnDrop(Some(flag.clone()));
        let result = self.submit(move || work(flag))?;
        let out = result.await.map_err(|_| PoolError::Panicked("the query panicked (see the node log)".into()));
        guard.0 = None;
        out
    }

    /// Queues `work`; its result arrives on the receiver.
    fn submit<T: Send + 'static>(&self, work: impl FnOnce() -> T + Send + 'static) -> Result<tokio::sync::oneshot::Receiver<T>, PoolError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move || {
            let _ = tx.send(work());
        });
        match self.jobs.try_send(job) {
            Ok(()) => Ok(rx),
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => Err(PoolError::Busy(self.queue)),
        }
    }
}

fn worker(rx: &Mutex<Receiver<Job>>) {
    lower_priority();
    loop {
        let job = match rx.lock() {
            Ok(rx) => rx.recv(),
            Err(_) => return,
        };
        let Ok(job) = job else { return };
        // A panicking query drops its result sender (the caller sees an error);
        // the worker lives on.
        if let Err(panic) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job)) {
            let what = panic.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| panic.downcast_ref::<String>().cloned());
            warn!("a query panicked: {}", what.unwrap_or_default());
        }
    }
}

/// Lowers this thread's CPU priority (Linux schedules threads one by one).
fn lower_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: gettid and setpriority on the calling thread have no memory effects.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        if libc::setpriority(libc::PRIO_PROCESS, tid, QUERY_NICE) != 0 {
            warn!("could not lower the query thread's priority");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn runs_jobs_refuses_beyond_the_queue_and_survives_panics() {
        let pool = QueryPool::new(1, 1);
        assert_eq!(pool.run(|| 2 + 2).await.unwrap(), 4);
        assert!(matches!(pool.run(|| -> u32 { panic!("boom") }).await, Err(PoolError::Panicked(_))));
        assert_eq!(pool.run(|| 5).await.unwrap(), 5, "the worker survived the panic");
        // One job runs, one waits: the third is refused.
        let (gate_tx, gate_rx) = std::sync::mpsc::channel::<()>();
        let (started_tx, started_rx) = std::sync::mpsc::channel::<()>();
        let blocked = pool
            .submit(move || {
                let _ = started_tx.send(());
                gate_rx.recv().ok()
            })
            .unwrap();
        // The worker holds the blocked job (else the queue could look full with it, then drain).
        tokio::task::spawn_blocking(move || started_rx.recv()).await.unwrap().unwrap();
        while pool.jobs.try_send(Box::new(|| {})).is_ok() {
            tokio::task::yield_now().await;
        }
        assert!(matches!(pool.run(|| 0).await, Err(PoolError::Busy(1))));
        gate_tx.send(()).unwrap();
        assert_eq!(blocked.await.unwrap(), Some(()));
    }

    #[tokio::test]
    async fn a_caller_that_stops_waiting_cancels_the_work() {
        let pool = QueryPool::new(1, 4);
        let (seen_tx, seen_rx) = std::sync::mpsc::channel::<bool>();
        let (started_tx, started_rx) = tokio::sync::oneshot::channel::<()>();
        let waiting = pool.run_cancellable(move |cancel| {
            let _ = started_tx.send(());
            // Work until cancelled (bounded, so a failing test ends).
            let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while !cancel.load(Ordering::Relaxed) && std::time::Instant::now() < until {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            let _ = seen_tx.send(cancel.load(Ordering::Relaxed));
        });
        // The caller gives up once the work has started.
        tokio::select! {
            _ = waiting => panic!("the work finished without being cancelled"),
            _ = started_rx => {}
        }
        let cancelled = tokio::task::spawn_blocking(move || seen_rx.recv_timeout(std::time::Duration::from_secs(5))).await.unwrap();
        assert_eq!(cancelled, Ok(true), "the work did not see the cancellation");
        // Work whose caller waits to the end is not cancelled.
        assert!(!pool.run_cancellable(|cancel| cancel.load(Ordering::Relaxed)).await.unwrap());
    }
}
