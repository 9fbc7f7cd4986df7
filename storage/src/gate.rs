//! Group gates: no write to a group's records outlives the group's deletion.
//!
//! openraft runs a replica's applies, snapshot installs and builds, and log
//! truncations on blocking threads that can outlive `Raft::shutdown` (the task
//! awaiting them is gone, the thread is not). When a replica moves away, such a
//! straggler would write records (`SM_APPLIED` among them) after the group's
//! data was deleted: orphan keys that a later split or re-hosting would read
//! as the group's state. Each such piece of work therefore runs under a pass of
//! its group's gate; [`GroupGates::close`] refuses new passes and waits for the
//! running ones before the data goes. A gate is opened again (with a new epoch)
//! when the group is hosted again, and a pass of an earlier epoch is refused.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

#[derive(Default)]
struct Gate {
    epoch: u64,
    closed: bool,
    busy: usize,
}

/// The gates of the groups of one store.
#[derive(Default)]
pub struct GroupGates {
    gates: Mutex<HashMap<u64, Gate>>,
    idle: Condvar,
}

/// Leave to write `group`'s records until dropped.
pub struct GroupPass {
    gates: Arc<GroupGates>,
    group: u64,
}

impl Drop for GroupPass {
    fn drop(&mut self) {
        let mut gates = self.gates.gates.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(gate) = gates.get_mut(&self.group) {
            gate.busy -= 1;
        }
        self.gates.idle.notify_all();
    }
}

impl GroupGates {
    /// Opens `group`'s gate (a new epoch after a close) and answers its epoch.
    pub fn open(&self, group: u64) -> u64 {
        let mut gates = self.gates.lock().unwrap_or_else(|e| e.into_inner());
        let gate = gates.entry(group).or_insert_with(|| Gate { epoch: 1, ..Gate::default() });
        if gate.closed {
            gate.epoch += 1;
            gate.closed = false;
        }
        gate.epoch
    }

    /// A pass for work of `group` started under `epoch`; `None` once the gate
    /// was closed since (the group was dropped here).
    pub fn enter(self: &Arc<Self>, group: u64, epoch: u64) -> Option<GroupPass> {
        let mut gates = self.gates.lock().unwrap_or_else(|e| e.into_inner());
        let gate = gates.get_mut(&group)?;
        if gate.closed || gate.epoch != epoch {
            return None;
        }
        gate.busy += 1;
        Some(GroupPass { gates: self.clone(), group })
    }

    /// Refuses new passes of `group` and waits up to `timeout` for the running
    /// ones; answers how many still run then.
    pub fn close(&self, group: u64, timeout: Duration) -> usize {
        let deadline = Instant::now() + timeout;
        let mut gates = self.gates.lock().unwrap_or_else(|e| e.into_inner());
        gates.entry(group).or_default().closed = true;
        loop {
            let busy = gates.get(&group).map_or(0, |g| g.busy);
            let left = deadline.saturating_duration_since(Instant::now());
            if busy == 0 || left.is_zero() {
                return busy;
            }
            gates = self.idle.wait_timeout(gates, left).unwrap_or_else(|e| e.into_inner()).0;
        }
    }
}

/// The error of work refused because its group was dropped here.
pub fn dropped(group: u64) -> std::io::Error {
    std::io::Error::other(format!("group {group} was dropped on this node"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closing_waits_for_running_work_and_refuses_stragglers_of_the_closed_epoch() {
        let gates = Arc::new(GroupGates::default());
        let epoch = gates.open(7);
        let pass = gates.enter(7, epoch).expect("an open gate admits");
        let closer = {
            let gates = gates.clone();
            std::thread::spawn(move || gates.close(7, Duration::from_secs(10)))
        };
        // The close waits for the running pass.
        std::thread::sleep(Duration::from_millis(50));
        assert!(!closer.is_finished(), "the close returned while work still ran");
        drop(pass);
        assert_eq!(closer.join().unwrap(), 0);
        // Work started before the close is refused after it, even once the
        // group is hosted again (a new epoch).
        assert!(gates.enter(7, epoch).is_none());
        let reopened = gates.open(7);
        assert_ne!(reopened, epoch);
        assert!(gates.enter(7, epoch).is_none());
        assert!(gates.enter(7, reopened).is_some());
        // A close with nothing running returns at once; a stuck pass is reported.
        let _stuck = gates.enter(7, reopened).unwrap();
        assert_eq!(gates.close(7, Duration::from_millis(20)), 1);
    }
}
