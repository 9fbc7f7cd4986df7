//! Named crash points for the chaos suite: `SERVICE_TEST_CRASH_POINTS=name[@n],…`
//! makes the process SIGKILL itself the `n`-th time (default first) it reaches
//! `name`, so a test can stop a node exactly between two steps of a snapshot
//! build, an install or a purge instead of hoping a timed kill lands there.
//!
//! Compiled into debug builds and into builds with the `crash-points` feature
//! only; elsewhere [`reached`] is an empty inline function. The points:
//!
//! | name | where |
//! |---|---|
//! | `snapshot-build` | a snapshot file has every frame written but not its end, nor is it published |
//! | `log-purged` | a purge's synced batch (purge mark + log deletion) is written |
//! | `snapshot-install-pending` | an install's synced "pending" record is written, the SST not yet ingested |
//! | `snapshot-install-ingested` | the SST is ingested, the received file not yet current |
//! | `snapshot-install-published` | the received file is current, the purge mark not yet advanced |
//! | `replica-move-learner-added` | a replica move the placement driver planned (not one it resumed) has its learner caught up, the voters not yet replaced |
//! | `replica-move-voters-replaced` | such a move has its group's voters replaced (the old replica, its leader perhaps, left the group), the map not yet told |

/// Every crash point, in the order of the table above.
pub const POINTS: [&str; 7] = [
    "snapshot-build",
    "log-purged",
    "snapshot-install-pending",
    "snapshot-install-ingested",
    "snapshot-install-published",
    "replica-move-learner-added",
    "replica-move-voters-replaced",
];

/// Environment variable naming the crash points to arm.
pub const ENV: &str = "SERVICE_TEST_CRASH_POINTS";

#[cfg(any(debug_assertions, feature = "crash-points"))]
mod armed {
    use std::collections::HashMap;
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// name → (hit on which visit, visits so far).
    fn points() -> &'static HashMap<String, (u64, AtomicU64)> {
        static POINTS: OnceLock<HashMap<String, (u64, AtomicU64)>> = OnceLock::new();
        POINTS.get_or_init(|| {
            let spec = std::env::var(super::ENV).unwrap_or_default();
            spec.split(',')
                .filter(|s| !s.trim().is_empty())
                .map(|s| {
                    let (name, nth) = s.trim().split_once('@').unwrap_or((s.trim(), "1"));
                    (name.to_string(), (nth.parse().unwrap_or(1).max(1), AtomicU64::new(0)))
                })
                .collect()
        })
    }

    pub fn reached(name: &str) {
        let Some((nth, visits)) = points().get(name) else { return };
        if visits.fetch_add(1, Ordering::SeqCst) + 1 == *nth {
            tracing::error!(point = name, visit = nth, "crash point reached: the process kills itself");
            eprintln!("crash point {name} reached (visit {nth}): SIGKILL");
            // SAFETY: plain syscalls; SIGKILL ends the process at once, as a crash would.
            unsafe {
                libc::kill(libc::getpid(), libc::SIGKILL);
            }
        }
    }
}

/// Environment variable delaying every apply batch by that many milliseconds,
/// so a test can hold a replica's state machine behind its log (debug builds and
/// the `crash-points` feature only, like the crash points).
pub const APPLY_DELAY_ENV: &str = "SERVICE_TEST_APPLY_DELAY_MS";

/// The delay [`APPLY_DELAY_ENV`] asks for, if any.
pub fn apply_delay() -> Option<std::time::Duration> {
    #[cfg(any(debug_assertions, feature = "crash-points"))]
    {
        static DELAY: std::sync::OnceLock<Option<std::time::Duration>> = std::sync::OnceLock::new();
        *DELAY.get_or_init(|| {
            let ms: u64 = std::env::var(APPLY_DELAY_ENV).ok()?.parse().ok()?;
            (ms > 0).then(|| std::time::Duration::from_millis(ms))
        })
    }
    #[cfg(not(any(debug_assertions, feature = "crash-points")))]
    None
}

/// Marks the crash point `name` (see the module table).
#[inline]
pub fn reached(name: &str) {
    #[cfg(any(debug_assertions, feature = "crash-points"))]
    armed::reached(name);
    #[cfg(not(any(debug_assertions, feature = "crash-points")))]
    let _ = name;
}
