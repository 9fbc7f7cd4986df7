//! Group commit of the write-ahead log. Every group's log appends go into the
//! node's one RocksDB WAL; an append is reported durable only after a WAL sync.
//! Instead of one fsync per append, appends queue here and one thread syncs
//! once for everything queued while the previous sync ran — so under load many
//! appends, of many groups, share each fsync.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::thread::JoinHandle;

use crate::store::Db;

/// Told the outcome of the WAL sync covering an append.
type Waiter = Box<dyn FnOnce(std::io::Result<()>) + Send>;

#[derive(Default)]
struct Queue {
    waiting: Vec<Waiter>,
    closed: bool,
}

#[derive(Default)]
struct Shared {
    queue: Mutex<Queue>,
    ready: Condvar,
    syncs: AtomicU64,
    entries: AtomicU64,
}

/// How many log entries the node appended and how many WAL syncs made them
/// durable, since it started: entries per sync above 1 is group commit at work.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WalStats {
    pub syncs: u64,
    pub entries: u64,
}

/// The node's WAL syncer thread; it stops when the last handle is dropped.
pub(crate) struct WalSync {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl WalSync {
    /// Starts the syncer of `db`. It holds the database only while syncing, so
    /// dropping the store closes it.
    pub(crate) fn start(db: &Arc<Db>) -> std::io::Result<Arc<Self>> {
        let shared = Arc::new(Shared::default());
        let (queue, db) = (shared.clone(), Arc::downgrade(db));
        let thread = std::thread::Builder::new().name("wal-sync".into()).spawn(move || run(&queue, &db))?;
        Ok(Arc::new(WalSync { shared, thread: Some(thread) }))
    }

    /// Calls `done` once a WAL sync that started after this call has finished;
    /// `entries` is how many log entries the caller wrote (for [`WalStats`]).
    pub(crate) fn after_sync(&self, entries: u64, done: impl FnOnce(std::io::Result<()>) + Send + 'static) {
        self.shared.entries.fetch_add(entries, Ordering::Relaxed);
        let mut queue = self.shared.queue.lock().unwrap_or_else(|e| e.into_inner());
        queue.waiting.push(Box::new(done));
        drop(queue);
        self.shared.ready.notify_one();
    }

    /// The counters since start.
    pub(crate) fn stats(&self) -> WalStats {
        WalStats { syncs: self.shared.syncs.load(Ordering::Relaxed), entries: self.shared.entries.load(Ordering::Relaxed) }
    }
}

fn run(shared: &Shared, db: &Weak<Db>) {
    loop {
        let batch = {
            let mut queue = shared.queue.lock().unwrap_or_else(|e| e.into_inner());
            while queue.waiting.is_empty() && !queue.closed {
                queue = shared.ready.wait(queue).unwrap_or_else(|e| e.into_inner());
            }
            if queue.waiting.is_empty() {
                return; // closed and drained
            }
            std::mem::take(&mut queue.waiting)
        };
        let (outcome, synced) = match db.upgrade() {
            Some(db) => {
                let started = std::time::Instant::now();
                let outcome = db.sync_wal().map_err(|e| e.to_string());
                if db.syncs_to_disk() {
                    metrics::histogram!("tessera_wal_sync_seconds").record(started.elapsed().as_secs_f64());
                }
                (outcome, !db.unsynced_commits)
            }
            None => (Err("the store is closed".to_string()), false),
        };
        // Counted as the WAL syncs the store asked for (none with `sync_on_commit = false`).
        if synced {
            shared.syncs.fetch_add(1, Ordering::Relaxed);
        }
        for done in batch {
            done(outcome.clone().map_err(std::io::Error::other));
        }
    }
}

impl Drop for WalSync {
    fn drop(&mut self) {
        self.shared.queue.lock().unwrap_or_else(|e| e.into_inner()).closed = true;
        self.shared.ready.notify_one();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join(); // at most one sync in flight
        }
    }
}
