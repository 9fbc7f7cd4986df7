//! `Idempotency-Key`: a client that retries a write after a timeout or a lost
//! connection sends the same key again, and the write applies once.
//!
//! The router gives every Raft write a request id that the state machine
//! remembers for ten minutes with its first response ([`tessera_storage::dedup`]
//! on the nodes). Without the header the id is random per HTTP request; with it,
//! the ids of the request's writes are derived from the caller's user id, the
//! key, the target group and the write's position in the request, so the same
//! request sent again reaches the same ids and gets the first responses back
//! instead of applying twice (as Stripe's and the IETF draft's idempotency keys).
//! A key is scoped to its user: two users never share one. A reused key with a
//! different body answers what the first request did.

use std::sync::atomic::{AtomicU32, Ordering};

use sha2::{Digest, Sha256};
use tessera_api::GroupId;

/// The header's name.
pub const HEADER: &str = "idempotency-key";

/// Keys are 1–255 visible ASCII characters.
pub fn valid_key(key: &str) -> bool {
    (1..=255).contains(&key.len()) && key.bytes().all(|b| b.is_ascii_graphic())
}

/// The idempotency scope of one HTTP request.
pub struct Scope {
    base: [u8; 32],
    writes: AtomicU32,
}

impl Scope {
    /// The scope of `key` sent by user `user_id`.
    pub fn new(user_id: &str, key: &str) -> Self {
        let base = Sha256::new().chain_update(user_id.as_bytes()).chain_update([0]).chain_update(key.as_bytes()).finalize();
        Scope { base: base.into(), writes: AtomicU32::new(0) }
    }

    /// The request id of the request's next write, to `group` (32 hex digits).
    fn next_id(&self, group: GroupId) -> String {
        let n = self.writes.fetch_add(1, Ordering::SeqCst);
        let digest = Sha256::new().chain_update(self.base).chain_update(group.to_be_bytes()).chain_update(n.to_be_bytes()).finalize();
        hex::encode(&digest[..16])
    }
}

tokio::task_local! {
    static SCOPE: Scope;
}

/// Runs `f` with `scope` as the idempotency scope of the writes it makes.
pub async fn with_scope<F: std::future::Future>(scope: Scope, f: F) -> F::Output {
    SCOPE.scope(scope, f).await
}

/// The request id for a write to `group`: derived from the request's
/// idempotency key when it has one, else the time (milliseconds, 6 bytes)
/// then 10 random bytes. Ids that grow with time are written next to the last
/// one in the nodes' storage (the memtable insert starts from there, see
/// third_party/README.md), where random ones each searched it from the top.
pub fn request_id(group: GroupId) -> String {
    SCOPE.try_with(|s| s.next_id(group)).unwrap_or_else(|_| time_ordered_id(tessera_api::command::now_ms()))
}

/// 32 hex digits: `now_ms` (its low 48 bits), then 80 random bits.
fn time_ordered_id(now_ms: i64) -> String {
    let mut id = [0u8; 16];
    id[..6].copy_from_slice(&(now_ms as u64).to_be_bytes()[2..]);
    id[6..].copy_from_slice(&rand::random::<[u8; 10]>());
    hex::encode(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_same_key_gives_the_same_ids_per_user() {
        let ids = |user: &'static str, key: &'static str| {
            with_scope(Scope::new(user, key), async { [request_id(1), request_id(2), request_id(1)] })
        };
        let first = ids("u1", "k").await;
        assert_eq!(first, ids("u1", "k").await, "a retry reaches the same ids");
        assert_ne!(first, ids("u2", "k").await, "keys are per user");
        assert_ne!(first, ids("u1", "k2").await);
        assert_ne!(first[0], first[2], "each write of a request has its own id");
        assert!(first.iter().all(|id| id.len() == 32));
        assert_ne!(request_id(1), request_id(1), "without a key, ids are random");
        let (earlier, later) = (time_ordered_id(1_700_000_000_000), time_ordered_id(1_700_000_000_001));
        assert!(earlier < later && later.len() == 32, "ids without a key grow with time: {earlier} {later}");
        assert!(valid_key("order-42") && !valid_key("") && !valid_key("a b") && !valid_key(&"x".repeat(256)));
    }
}
