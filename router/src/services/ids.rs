//! Random identifiers.

use rand::RngCore;

/// A fresh random id (128 bits, hex), from the thread's ChaCha generator (seeded
/// and reseeded from the operating system): an activity record is written for
/// most requests, and asking the kernel for each id was a system call apiece.
pub fn new_id() -> String {
    let mut bytes = [0u8; 16];
    rand::thread_rng().fill_bytes(&mut bytes);
    hex::encode(bytes)
}
