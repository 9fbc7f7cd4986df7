//! Where data lives: every model's routing key, and the ring of data groups the
//! keys hash onto. This is the one place routing is computed; routers and tests
//! use it rather than building routing strings by hand.
//!
//! The mapping is specified over bytes, not through `std::hash::Hash` (whose
//! output is not promised to stay the same across Rust releases), so it never
//! changes under a cluster with data:
//! - a key's bytes are [`RoutingKey::bytes`] (the prefixes below);
//! - its hash is SipHash-2-4 with both keys 0 over those bytes, as a `u64`;
//! - each data group owns [`POINTS_PER_GROUP`] points on a ring, point `p` of
//!   group `g` at the hash of the bytes `group/<g>/<p>` (decimal);
//! - a key belongs to the group of the first point at or after its hash,
//!   wrapping around (points ordered by hash, then group id).
//!
//! The golden tests at the bottom pin the mapping.

use siphasher::sip::SipHasher;

use crate::GroupId;

/// Points each data group owns on the ring.
pub const POINTS_PER_GROUP: u32 = 64;

/// What a request is routed by, per data model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoutingKey<'a> {
    /// A key-value key: routes as its own bytes.
    Kv(&'a str),
    /// A SQL database (with its tables, CDC channels and imports): `sql/<database>`.
    SqlDatabase(&'a str),
    /// A document collection's home (its definition): `doccoll/<name>`.
    Collection(&'a str),
    /// One document: `doc/<collection>/<id>`.
    Document { collection: &'a str, id: &'a str },
    /// An object bucket's home (its record): the bucket name's own bytes.
    Bucket(&'a str),
    /// One object: `obj/<bucket>/<key>`.
    Object { bucket: &'a str, key: &'a str },
    /// A vector collection's home (its definition and layout): `vector/<name>`.
    VectorCollection(&'a str),
    /// A time-series metric: `ts/<metric>`.
    Metric(&'a str),
    /// A stream channel that is not a CDC channel: `stream/<channel>`.
    Channel(&'a str),
    /// A graph: `graph/<name>`.
    Graph(&'a str),
}

impl RoutingKey<'_> {
    /// The bytes the key hashes as.
    pub fn bytes(&self) -> Vec<u8> {
        match self {
            RoutingKey::Kv(key) => key.as_bytes().to_vec(),
            RoutingKey::SqlDatabase(db) => format!("sql/{db}").into_bytes(),
            RoutingKey::Collection(name) => format!("doccoll/{name}").into_bytes(),
            RoutingKey::Document { collection, id } => format!("doc/{collection}/{id}").into_bytes(),
            RoutingKey::Bucket(bucket) => bucket.as_bytes().to_vec(),
            RoutingKey::Object { bucket, key } => format!("obj/{bucket}/{key}").into_bytes(),
            RoutingKey::VectorCollection(name) => format!("vector/{name}").into_bytes(),
            RoutingKey::Metric(metric) => format!("ts/{metric}").into_bytes(),
            RoutingKey::Channel(channel) => format!("stream/{channel}").into_bytes(),
            RoutingKey::Graph(name) => format!("graph/{name}").into_bytes(),
        }
    }
}

/// SipHash-2-4 with keys (0, 0) of `bytes`.
pub fn hash(bytes: &[u8]) -> u64 {
    SipHasher::new_with_keys(0, 0).hash(bytes)
}

/// The data groups' points, in ring order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ring {
    points: Vec<(u64, GroupId)>,
}

impl Ring {
    /// The ring of `groups` ([`POINTS_PER_GROUP`] points each).
    pub fn new(groups: impl IntoIterator<Item = GroupId>) -> Ring {
        let mut points: Vec<(u64, GroupId)> =
            groups.into_iter().flat_map(|g| (0..POINTS_PER_GROUP).map(move |p| (hash(format!("group/{g}/{p}").as_bytes()), g))).collect();
        points.sort_unstable();
        points.dedup();
        Ring { points }
    }

    /// The group owning `key`; `None` on a ring without groups.
    pub fn group_of(&self, key: &RoutingKey<'_>) -> Option<GroupId> {
        self.group_of_bytes(&key.bytes())
    }

    /// The group owning a key whose routing bytes are `bytes`.
    pub fn group_of_bytes(&self, bytes: &[u8]) -> Option<GroupId> {
        let h = hash(bytes);
        let at = self.points.partition_point(|(p, _)| *p < h);
        self.points.get(at).or_else(|| self.points.first()).map(|(_, g)| *g)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hash is SipHash-2-4 with zero keys (the reference vector of the
    /// SipHash paper uses other keys; this pins ours).
    #[test]
    fn the_hash_is_pinned() {
        assert_eq!(hash(b""), 0x1e92_4b9d_7377_00d7);
        assert_eq!(hash(b"a"), hash(b"a"));
        assert_ne!(hash(b"a"), hash(b"b"));
    }

    #[test]
    fn routing_bytes_are_the_documented_prefixes() {
        let cases = [
            (RoutingKey::Kv("user:1"), "user:1"),
            (RoutingKey::SqlDatabase("shop"), "sql/shop"),
            (RoutingKey::Collection("people"), "doccoll/people"),
            (RoutingKey::Document { collection: "people", id: "p1" }, "doc/people/p1"),
            (RoutingKey::Bucket("media"), "media"),
            (RoutingKey::Object { bucket: "media", key: "a/b.png" }, "obj/media/a/b.png"),
            (RoutingKey::VectorCollection("emb"), "vector/emb"),
            (RoutingKey::Metric("cpu"), "ts/cpu"),
            (RoutingKey::Channel("orders"), "stream/orders"),
            (RoutingKey::Graph("social"), "graph/social"),
        ];
        for (key, bytes) in cases {
            assert_eq!(key.bytes(), bytes.as_bytes(), "{key:?}");
        }
    }

    /// Golden mapping: changing it would move data under a running cluster.
    #[test]
    fn the_mapping_is_pinned() {
        let ring = Ring::new(1..=8);
        let keys: Vec<String> = (0..16).map(|i| format!("key-{i}")).collect();
        let groups: Vec<GroupId> = keys.iter().map(|k| ring.group_of(&RoutingKey::Kv(k)).unwrap()).collect();
        assert_eq!(groups, GOLDEN_8, "the ring's mapping changed");
        let three = Ring::new(1..=3);
        let groups: Vec<GroupId> = keys.iter().map(|k| three.group_of(&RoutingKey::Kv(k)).unwrap()).collect();
        assert_eq!(groups, GOLDEN_3, "the ring's mapping changed");
    }

    const GOLDEN_8: [GroupId; 16] = [1, 1, 5, 2, 8, 8, 7, 8, 4, 5, 1, 4, 4, 1, 3, 7];
    const GOLDEN_3: [GroupId; 16] = [1, 1, 2, 2, 1, 2, 1, 1, 3, 3, 1, 3, 1, 1, 3, 3];

    #[test]
    fn keys_spread_over_every_group_and_the_ring_wraps() {
        let ring = Ring::new(1..=8);
        let mut counts = [0u32; 9];
        for i in 0..8_000 {
            counts[ring.group_of(&RoutingKey::Kv(&format!("k{i}"))).unwrap() as usize] += 1;
        }
        for (g, n) in counts.iter().enumerate().skip(1) {
            assert!((500..=1_600).contains(n), "group {g} got {n} of 8000 keys: {counts:?}");
        }
        assert_eq!(Ring::new([]).group_of(&RoutingKey::Kv("x")), None);
        let one = Ring::new([7]);
        assert_eq!(one.group_of_bytes(&[0xff; 8]), Some(7));
    }
}
