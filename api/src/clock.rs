//! The node's hybrid clock: the wall clock, never earlier than a time heard from
//! a peer. Every Raft message carries its sender's clock and every reply its
//! receiver's, so a node whose wall clock lags still stamps commands and judges
//! expiry with the cluster's time while it exchanges heartbeats (the idea of
//! hybrid logical clocks, as CockroachDB uses them).

use std::sync::atomic::{AtomicI64, Ordering};

use crate::command::now_ms;

/// Wall clock plus the latest time observed from peers.
#[derive(Debug, Default)]
pub struct HybridClock {
    /// Added to the wall clock: tests of a skewed node only.
    offset_ms: i64,
    /// The latest time observed from a peer.
    floor: AtomicI64,
}

impl HybridClock {
    /// A clock reading the wall clock shifted by `offset_ms` (0 outside tests).
    pub fn new(offset_ms: i64) -> Self {
        HybridClock { offset_ms, floor: AtomicI64::new(i64::MIN) }
    }

    /// This node's wall clock, with its test offset.
    pub fn wall_ms(&self) -> i64 {
        now_ms().saturating_add(self.offset_ms)
    }

    /// The current time: the wall clock, or the latest peer time if later.
    pub fn now_ms(&self) -> i64 {
        self.wall_ms().max(self.floor.load(Ordering::Relaxed))
    }

    /// Takes in a time a peer sent (0: the peer sent none).
    pub fn observe(&self, remote_ms: i64) {
        if remote_ms > 0 {
            self.floor.fetch_max(remote_ms, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lagging_clock_follows_its_peers_and_never_goes_back() {
        let behind = HybridClock::new(-600_000);
        assert!(behind.now_ms() < now_ms() - 500_000);
        behind.observe(now_ms());
        let caught_up = behind.now_ms();
        assert!(caught_up >= now_ms() - 1_000);
        behind.observe(caught_up - 100_000);
        assert!(behind.now_ms() >= caught_up, "an older peer time moved the clock back");
        behind.observe(0);
        assert!(behind.now_ms() >= caught_up);
    }
}
