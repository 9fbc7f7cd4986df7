//! Object store operations, queries and records (spec 03 part A).
//!
//! Content is stored in chunks: the router streams a body into `PutChunk`
//! commands of at most [`CHUNK_BYTES`] under a fresh blob id, then `CommitObject`
//! makes the object visible atomically (replacing, and freeing, any older blob).
//!
//! A bucket's objects are spread over the data groups by a hash of bucket and
//! key; the bucket's record lives in its home group (the hash of its name), and
//! each other group holds a copy of it so objects can be checked against it there.

use serde::{Deserialize, Serialize};

/// Size of one stored chunk of object content.
pub const CHUNK_BYTES: usize = 256 * 1024;

/// Object store writes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ObjectOp {
    /// Creates the bucket; rejected as a conflict when it exists. With
    /// `copy_of_created_at_ms` it stores a copy of the home group's record
    /// instead (and succeeds when the copy is there already); a copy of another
    /// incarnation left by an interrupted drop is emptied and replaced.
    CreateBucket {
        name: String,
        #[serde(default)]
        copy_of_created_at_ms: Option<i64>,
    },
    /// Removes the bucket and every object in it; rejected as not found when
    /// the bucket does not exist, unless `if_exists`.
    DropBucket {
        name: String,
        #[serde(default)]
        if_exists: bool,
    },
    /// Stores one chunk of a blob that is not visible yet.
    PutChunk {
        bucket: String,
        blob_id: String,
        index: u32,
        #[serde(with = "crate::b64")]
        data: Vec<u8>,
        /// The bucket's incarnation (its record's `created_at_ms`) when the
        /// upload started: refused as not found when the group's record is of
        /// another incarnation (the bucket was dropped, or dropped and made again).
        #[serde(default)]
        incarnation: Option<i64>,
    },
    /// Makes a fully uploaded blob the content of `key`.
    CommitObject(ObjectMeta),
    /// Frees the chunks of an upload that will not be committed.
    AbortUpload {
        bucket: String,
        blob_id: String,
        chunks: u32,
    },
    DeleteObject {
        bucket: String,
        key: String,
    },
    /// Frees the chunks of every upload in this group that started more than
    /// `max_age_ms` before the command's time and was neither committed nor
    /// aborted (its router died mid-upload).
    SweepUploads {
        max_age_ms: i64,
    },
}

/// Object store reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ObjectQuery {
    ListBuckets,
    /// The bucket's record in this group.
    Bucket {
        name: String,
    },
    /// The bucket's record with the count and bytes of its objects in this group.
    BucketStats {
        name: String,
    },
    Head {
        bucket: String,
        key: String,
    },
    Chunk {
        bucket: String,
        blob_id: String,
        index: u32,
    },
    /// Objects with `prefix` in key order, strictly after `after` when given.
    List {
        bucket: String,
        prefix: String,
        after: Option<String>,
        limit: usize,
    },
}

/// A stored object's metadata.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ObjectMeta {
    pub bucket: String,
    pub key: String,
    pub size: u64,
    /// FNV-1a 64 of the content, 16 hex digits (unquoted).
    pub etag: String,
    pub content_type: String,
    /// From the `X-Service-Meta` header; `null` when absent.
    pub metadata: serde_json::Value,
    pub blob_id: String,
    pub chunks: u32,
    pub chunk_bytes: u32,
    /// Set by the state machine from the command time.
    #[serde(default)]
    pub created_at_ms: i64,
    #[serde(default)]
    pub updated_at_ms: i64,
    /// The bucket's incarnation the object was written into (see
    /// [`ObjectOp::PutChunk`]); a commit into another incarnation is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bucket_incarnation: Option<i64>,
}

/// A bucket record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BucketInfo {
    pub name: String,
    pub created_at_ms: i64,
}

/// Bucket statistics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BucketStats {
    pub name: String,
    pub created_at_ms: i64,
    pub object_count: u64,
    pub total_bytes: u64,
    /// Uploads started and not yet committed, aborted or swept.
    #[serde(default)]
    pub pending_uploads: u64,
}

/// The record of an upload in flight, written with its first chunk.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingUpload {
    pub bucket: String,
    pub blob_id: String,
    pub started_at_ms: i64,
}

/// Answers to [`ObjectQuery`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ObjectQueryResult {
    Buckets(Vec<BucketInfo>),
    Bucket(Option<BucketInfo>),
    Stats(Option<BucketStats>),
    Meta(Option<ObjectMeta>),
    Chunk(#[serde(with = "crate::b64::option")] Option<Vec<u8>>),
    /// `None` when the bucket does not exist.
    List(Option<Vec<ObjectMeta>>),
}

/// FNV-1a 64-bit, fed incrementally.
#[derive(Debug, Clone, Copy)]
pub struct Fnv1a64(u64);

impl Default for Fnv1a64 {
    fn default() -> Self {
        Fnv1a64(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv1a64 {
    pub fn update(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= *b as u64;
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    /// The digest as 16 lower-case hex digits.
    pub fn hex(&self) -> String {
        format!("{:016x}", self.0)
    }
}

/// Bucket names follow S3's rule: 3–63 characters of lower-case letters, digits,
/// `-` and `.`, starting and ending with a letter or digit, no `..`, and not shaped
/// like an IPv4 address.
pub fn validate_bucket_name(name: &str) -> Result<(), String> {
    let bad = |why: &str| Err(format!("invalid bucket name {name:?}: {why}"));
    if !(3..=63).contains(&name.len()) {
        return bad("must be 3 to 63 characters long");
    }
    if !name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.') {
        return bad("only lower-case letters, digits, '-' and '.' are allowed");
    }
    let edge_ok = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    if !edge_ok(name.as_bytes()[0]) || !edge_ok(name.as_bytes()[name.len() - 1]) {
        return bad("must start and end with a letter or digit");
    }
    if name.contains("..") {
        return bad("must not contain '..'");
    }
    if name.split('.').count() == 4 && name.split('.').all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())) {
        return bad("must not look like an IP address");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a64_matches_reference_vectors() {
        let h = |s: &[u8]| {
            let mut f = Fnv1a64::default();
            f.update(s);
            f.hex()
        };
        assert_eq!(h(b""), "cbf29ce484222325");
        assert_eq!(h(b"a"), "af63dc4c8601ec8c");
        assert_eq!(h(b"foobar"), "85944171f73967e8");
        let mut split = Fnv1a64::default();
        split.update(b"foo");
        split.update(b"bar");
        assert_eq!(split.hex(), h(b"foobar"));
    }

    #[test]
    fn bucket_names_follow_the_s3_rule() {
        for ok in ["abc", "my-bucket.2026", "a".repeat(63).as_str()] {
            assert!(validate_bucket_name(ok).is_ok(), "{ok}");
        }
        for bad in ["ab", "Abc", "-abc", "abc-", "a..b", "192.168.1.1", "a_b", &"a".repeat(64)] {
            assert!(validate_bucket_name(bad).is_err(), "{bad}");
        }
    }
}
