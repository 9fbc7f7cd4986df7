//! The node's hybrid clock: the wall clock, never earlier than a time heard from
//! a peer. Every Raft message carries its sender's id and clock and every reply
//! its receiver's, so a node whose wall clock lags still stamps commands and
//! judges expiry with the cluster's time while it exchanges heartbeats (the idea
//! of hybrid logical clocks, as CockroachDB uses them).
//!
//! **Bounded by the majority.** The clock keeps each peer's last offset (its
//! time minus this node's wall clock on arrival). The cluster's view of this
//! node's error is the median of those offsets and 0 (this node itself); when
//! it exceeds `max_offset_ms`, this node's wall clock is the outlier and is
//! corrected by it. A peer time more than `max_offset_ms` ahead of the
//! corrected clock is not taken in: one node whose clock runs ahead cannot
//! drag the others forward (which would freeze their time, or expire TTLs
//! early), and it sets its own clock back to the majority's. Readings of a
//! node found ahead therefore go back once; what must never go back, a group's
//! time, is kept monotone where commands are stamped (the stamp is never below
//! the group's applied time + 1).

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use crate::command::now_ms;

/// A peer offset older than this no longer counts.
const OFFSET_TTL: Duration = Duration::from_secs(10);

/// Default bound on how far apart the nodes' clocks may be (CockroachDB's default).
pub const DEFAULT_MAX_OFFSET_MS: i64 = 500;

/// Wall clock, corrected by the majority, plus the latest time observed from peers.
#[derive(Debug)]
pub struct HybridClock {
    /// Added to the wall clock: tests of a skewed node only.
    offset_ms: i64,
    /// How far a peer's time may be ahead before it is ignored.
    max_offset_ms: i64,
    /// The latest accepted peer time.
    floor: AtomicI64,
    /// Added to the wall clock: the majority's view of this node's error, when
    /// it exceeds `max_offset_ms`; else 0.
    correction: AtomicI64,
    /// Peer id → (its time minus this node's wall clock, when seen).
    offsets: Mutex<HashMap<u64, (i64, Instant)>>,
}

impl Default for HybridClock {
    fn default() -> Self {
        HybridClock::new(0)
    }
}

/// A peer time that was not taken in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ignored {
    pub peer: u64,
    /// How far ahead of this node's (corrected) clock it was.
    pub ahead_ms: i64,
}

impl HybridClock {
    /// A clock reading the wall clock shifted by `offset_ms` (0 outside tests),
    /// bounded by [`DEFAULT_MAX_OFFSET_MS`].
    pub fn new(offset_ms: i64) -> Self {
        HybridClock {
            offset_ms,
            max_offset_ms: DEFAULT_MAX_OFFSET_MS,
            floor: AtomicI64::new(i64::MIN),
            correction: AtomicI64::new(0),
            offsets: Mutex::new(HashMap::new()),
        }
    }

    /// The same clock with another bound on peer clock offsets.
    pub fn with_max_offset(mut self, max_offset_ms: i64) -> Self {
        self.max_offset_ms = max_offset_ms.max(1);
        self
    }

    /// This node's wall clock, with its test offset.
    pub fn wall_ms(&self) -> i64 {
        now_ms().saturating_add(self.offset_ms)
    }

    /// The majority's correction of this node's wall clock (0 while it agrees).
    pub fn correction_ms(&self) -> i64 {
        self.correction.load(Ordering::Relaxed)
    }

    /// The current time: the corrected wall clock, or the latest accepted peer
    /// time if later.
    pub fn now_ms(&self) -> i64 {
        self.wall_ms().saturating_add(self.correction_ms()).max(self.floor.load(Ordering::Relaxed))
    }

    /// Takes in a time peer `peer` sent (0: it sent none). Returns what was
    /// ignored when the time was too far ahead of the majority's.
    pub fn observe(&self, peer: u64, remote_ms: i64) -> Option<Ignored> {
        if remote_ms <= 0 {
            return None;
        }
        let wall = self.wall_ms();
        let correction = {
            let mut offsets = self.offsets.lock().unwrap_or_else(|e| e.into_inner());
            let now = Instant::now();
            offsets.insert(peer, (remote_ms - wall, now));
            offsets.retain(|_, (_, at)| now.duration_since(*at) < OFFSET_TTL);
            let mut views: Vec<i64> = offsets.values().map(|(o, _)| *o).collect();
            views.push(0);
            let median = median_towards_zero(&mut views);
            let correction = if median.abs() > self.max_offset_ms { median } else { 0 };
            self.correction.store(correction, Ordering::Relaxed);
            correction
        };
        let ahead = remote_ms - (wall + correction);
        if ahead > self.max_offset_ms {
            return Some(Ignored { peer, ahead_ms: ahead });
        }
        self.floor.fetch_max(remote_ms, Ordering::Relaxed);
        None
    }
}

/// The median; of the two middle values of an even count, the one nearer 0.
fn median_towards_zero(values: &mut [i64]) -> i64 {
    values.sort_unstable();
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        let (a, b) = (values[n / 2 - 1], values[n / 2]);
        if a.abs() <= b.abs() { a } else { b }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEN_MIN: i64 = 600_000;

    #[test]
    fn a_lagging_clock_follows_the_majority_and_never_goes_back() {
        let behind = HybridClock::new(-TEN_MIN);
        assert!(behind.now_ms() < now_ms() - 500_000);
        // One peer alone cannot tell who is wrong; two agreeing peers can.
        assert!(behind.observe(2, now_ms()).is_some());
        assert_eq!(behind.observe(3, now_ms()), None);
        let caught_up = behind.now_ms();
        assert!(caught_up >= now_ms() - 1_000, "{}", now_ms() - caught_up);
        behind.observe(2, caught_up - 100_000);
        assert!(behind.now_ms() >= caught_up, "an older peer time moved the clock back");
        behind.observe(2, 0);
        assert!(behind.now_ms() >= caught_up);
    }

    #[test]
    fn one_fast_peer_cannot_drag_the_others_forward() {
        let honest = HybridClock::new(0);
        honest.observe(3, now_ms()); // an honest peer
        let ignored = honest.observe(2, now_ms() + TEN_MIN).expect("the fast peer's time is ignored");
        assert_eq!(ignored.peer, 2);
        assert!(ignored.ahead_ms > TEN_MIN - 1_000);
        assert!(honest.now_ms() < now_ms() + 1_000, "the honest clock jumped ahead");
        // Small differences (link delays, NTP noise) are taken in as before.
        assert_eq!(honest.observe(2, now_ms() + 200), None);
    }

    #[test]
    fn a_fast_clock_is_set_back_by_the_majority() {
        let ahead = HybridClock::new(TEN_MIN);
        assert!(ahead.now_ms() > now_ms() + TEN_MIN - 1_000);
        ahead.observe(1, now_ms());
        ahead.observe(3, now_ms());
        assert!(ahead.correction_ms() < -(TEN_MIN - 1_000), "{}", ahead.correction_ms());
        assert!((ahead.now_ms() - now_ms()).abs() < 1_000, "{}", ahead.now_ms() - now_ms());
    }
}
