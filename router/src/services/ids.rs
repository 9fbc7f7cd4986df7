//! Random identifiers.

use rand::RngCore;

/// A fresh random id (128 bits, hex).
pub fn new_id() -> String {
    let mut bytes = [0u8; 16];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    hex::encode(bytes)
}
