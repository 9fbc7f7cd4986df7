//! Write coalescing on the router: the writes of one group that arrive while an
//! earlier call for that group is in flight wait in the group's lane and go to
//! its leader together, in one call, when that call returns. A lone write goes
//! out at once and alone, so coalescing adds no wait when there is nothing to
//! share; under load one call (one HTTP/2 stream, one access check on the
//! node) carries many writes, and the leader proposes them as one log entry.
//!
//! One call per group is in flight from this router at a time: whoever holds
//! the group's turn sends everything queued (up to [`MAX_ITEMS`]) and answers
//! each writer; a writer that gets the turn after its write was answered just
//! takes the answer. The call is one attempt (the cluster client hands back
//! what it could not answer, and those writers retry alone), so a slow or dead
//! leader holds the lane for one attempt, not for a whole retry loop. A holder
//! that is cancelled mid-call drops the answers it owed: those writers get
//! `None` and send their writes alone too (a request id makes a write that did
//! reach the log apply once).

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::{Arc, Mutex};

use tessera_api::GroupId;
use tokio::sync::oneshot;
use tokio::sync::oneshot::error::TryRecvError;

/// Writes in one call at most.
pub(super) const MAX_ITEMS: usize = 64;

/// Bytes of writes in one call at most (a larger write still goes, alone).
pub(super) const MAX_BYTES: usize = 1 << 20;

/// One lane per group.
pub(super) struct Lanes<T, R> {
    lanes: Mutex<HashMap<GroupId, Arc<Lane<T, R>>>>,
}

struct Lane<T, R> {
    /// Held by the one writer whose call for the group is in flight.
    turn: tokio::sync::Mutex<()>,
    waiting: Mutex<VecDeque<Waiting<T, R>>>,
}

struct Waiting<T, R> {
    item: T,
    bytes: usize,
    answer: oneshot::Sender<R>,
}

impl<T, R> Default for Lanes<T, R> {
    fn default() -> Self {
        Lanes { lanes: Mutex::default() }
    }
}

impl<T, R> Lanes<T, R> {
    /// Sends `item` (about `bytes` long) for `group` through `send` (which
    /// answers the items it is given, in order), together with whatever else
    /// waits for the group. `None`: the call that took the item was cancelled
    /// before it answered; the caller sends the item alone.
    pub(super) async fn submit<F, Fut>(&self, group: GroupId, item: T, bytes: usize, send: F) -> Option<R>
    where
        F: Fn(Vec<T>) -> Fut,
        Fut: Future<Output = Vec<R>>,
    {
        let lane = self.lanes.lock().unwrap_or_else(|e| e.into_inner()).entry(group).or_insert_with(|| Arc::new(Lane::new())).clone();
        let (answer, mut own) = oneshot::channel();
        lane.waiting.lock().unwrap_or_else(|e| e.into_inner()).push_back(Waiting { item, bytes, answer });
        let _turn = lane.turn.lock().await;
        loop {
            match own.try_recv() {
                Ok(answer) => return Some(answer),
                Err(TryRecvError::Closed) => return None,
                Err(TryRecvError::Empty) => {}
            }
            let batch: Vec<Waiting<T, R>> = {
                let mut waiting = lane.waiting.lock().unwrap_or_else(|e| e.into_inner());
                let (mut take, mut bytes) = (0, 0);
                while let Some(next) = waiting.get(take)
                    && take < MAX_ITEMS
                    && (take == 0 || bytes + next.bytes <= MAX_BYTES)
                {
                    bytes += next.bytes;
                    take += 1;
                }
                waiting.drain(..take).collect()
            };
            if batch.is_empty() {
                // Unreachable: an unanswered item of ours is still queued.
                return None;
            }
            let (items, answers): (Vec<T>, Vec<oneshot::Sender<R>>) = batch.into_iter().map(|w| (w.item, w.answer)).unzip();
            for (answer, result) in answers.into_iter().zip(send(items).await) {
                let _ = answer.send(result);
            }
        }
    }
}

impl<T, R> Lanes<T, R> {
    /// Writes waiting for `group` that no call has taken yet.
    #[cfg(test)]
    fn queued(&self, group: GroupId) -> usize {
        let lanes = self.lanes.lock().unwrap_or_else(|e| e.into_inner());
        lanes.get(&group).map_or(0, |lane| lane.waiting.lock().unwrap_or_else(|e| e.into_inner()).len())
    }
}

impl<T, R> Lane<T, R> {
    fn new() -> Self {
        Lane { turn: tokio::sync::Mutex::new(()), waiting: Mutex::default() }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn a_lone_write_goes_alone_and_concurrent_ones_share_calls() {
        let lanes: Arc<Lanes<u32, u32>> = Arc::new(Lanes::default());
        let calls = Arc::new(AtomicUsize::new(0));
        let send = |calls: Arc<AtomicUsize>| {
            move |items: Vec<u32>| {
                let calls = calls.clone();
                async move {
                    calls.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    items.into_iter().map(|i| i * 10).collect::<Vec<_>>()
                }
            }
        };
        assert_eq!(lanes.submit(1, 7, 1, send(calls.clone())).await, Some(70));
        assert_eq!(calls.load(Ordering::SeqCst), 1);

        let writers: Vec<_> = (0..40u32)
            .map(|i| {
                let (lanes, calls) = (lanes.clone(), calls.clone());
                tokio::spawn(async move { lanes.submit(1, i, 1, send(calls)).await })
            })
            .collect();
        for (i, writer) in writers.into_iter().enumerate() {
            assert_eq!(writer.await.unwrap(), Some(i as u32 * 10), "each writer gets its own answer");
        }
        let made = calls.load(Ordering::SeqCst) - 1;
        assert!(made < 40, "40 concurrent writes made {made} calls");
    }

    #[tokio::test]
    async fn a_call_carries_at_most_a_megabyte_of_writes() {
        let lanes: Arc<Lanes<u32, u32>> = Arc::new(Lanes::default());
        let release = Arc::new(tokio::sync::Notify::new());
        let sizes = Arc::new(Mutex::new(Vec::new()));
        let send = |release: Arc<tokio::sync::Notify>, sizes: Arc<Mutex<Vec<usize>>>| {
            move |items: Vec<u32>| {
                let (release, sizes) = (release.clone(), sizes.clone());
                async move {
                    sizes.lock().unwrap().push(items.len());
                    if items == [0] {
                        release.notified().await;
                    }
                    items
                }
            }
        };
        let writer = |i: u32, bytes: usize| {
            let (lanes, release, sizes) = (lanes.clone(), release.clone(), sizes.clone());
            tokio::spawn(async move { lanes.submit(1, i, bytes, send(release, sizes)).await })
        };
        let first = writer(0, 10);
        while sizes.lock().unwrap().is_empty() {
            tokio::task::yield_now().await;
        }
        // 400 KiB each: two fit in a megabyte, the third waits for the next call.
        let queued: Vec<_> = (1..=3).map(|i| writer(i, 400 << 10)).collect();
        while lanes.queued(1) < 3 {
            tokio::task::yield_now().await;
        }
        release.notify_one();
        assert_eq!(first.await.unwrap(), Some(0));
        for (i, writer) in queued.into_iter().enumerate() {
            assert_eq!(writer.await.unwrap(), Some(i as u32 + 1));
        }
        assert_eq!(*sizes.lock().unwrap(), vec![1, 2, 1]);
    }

    #[tokio::test]
    async fn writes_taken_by_a_cancelled_call_are_handed_back() {
        let lanes: Arc<Lanes<u32, u32>> = Arc::new(Lanes::default());
        let (started, mut started_rx) = tokio::sync::mpsc::unbounded_channel::<u32>();
        let release = Arc::new(tokio::sync::Notify::new());
        // The first writer's call is in flight until released.
        let first = {
            let (lanes, started, release) = (lanes.clone(), started.clone(), release.clone());
            tokio::spawn(async move {
                lanes
                    .submit(1, 1, 1, move |items: Vec<u32>| {
                        let (started, release) = (started.clone(), release.clone());
                        async move {
                            let _ = started.send(1);
                            release.notified().await;
                            items
                        }
                    })
                    .await
            })
        };
        assert_eq!(started_rx.recv().await, Some(1));
        // Two more queue behind it; the second's call will take both and never answer.
        let second = {
            let (lanes, started) = (lanes.clone(), started.clone());
            tokio::spawn(async move {
                lanes
                    .submit(1, 2, 1, move |_items: Vec<u32>| {
                        let started = started.clone();
                        async move {
                            let _ = started.send(2);
                            std::future::pending::<Vec<u32>>().await
                        }
                    })
                    .await
            })
        };
        let third = {
            let lanes = lanes.clone();
            tokio::spawn(async move { lanes.submit(1, 3, 1, |items: Vec<u32>| async move { items }).await })
        };
        while lanes.queued(1) < 2 {
            tokio::task::yield_now().await;
        }
        release.notify_one();
        assert_eq!(first.await.unwrap(), Some(1));
        assert_eq!(started_rx.recv().await, Some(2), "the second writer's call took the queued writes");
        second.abort();
        assert_eq!(third.await.unwrap(), None, "a write taken by a cancelled call is handed back to its writer");
        assert_eq!(lanes.submit(1, 4, 1, |items: Vec<u32>| async move { items }).await, Some(4), "the lane is free again");
    }
}
