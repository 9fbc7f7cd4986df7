//! The binary codec of everything that crosses the wire between binaries or
//! enters the Raft log: MessagePack with named fields (self-describing, so
//! optional fields and JSON values inside commands round-trip), and raw bytes for
//! binary payloads (JSON stays for on-disk records and HTTP).

use serde::Serialize;
use serde::de::DeserializeOwned;

/// Errors of [`encode`] and [`decode`].
#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    #[error("encoding: {0}")]
    Encode(#[from] rmp_serde::encode::Error),
    #[error("decoding: {0}")]
    Decode(#[from] rmp_serde::decode::Error),
}

/// Encodes a value.
pub fn encode<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, CodecError> {
    Ok(rmp_serde::to_vec_named(value)?)
}

/// Decodes a value.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, CodecError> {
    Ok(rmp_serde::from_slice(bytes)?)
}
