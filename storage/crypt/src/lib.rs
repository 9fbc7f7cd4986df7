//! Encryption at rest: AES-256-GCM over LZ4-compressed values, with one key per
//! purpose derived from the node's master key by HKDF-SHA256.
//!
//! A sealed value is `version (1) | nonce (12) | AES-256-GCM(flag (1) | body) | tag (16)`:
//! the nonce is 96 random bits drawn per value, `flag` says whether `body` is the
//! LZ4 block of the plaintext (size-prefixed) or the plaintext itself (when
//! compression does not shrink it), and the associated data is the caller's
//! context (the RocksDB key the value is stored under), so a sealed value moved to
//! another key, another purpose or another store fails to open.
//!
//! Keys: `HKDF-SHA256(salt = "tessera-encryption-at-rest-v1", ikm = master key,
//! info = "tessera/<purpose>/aes-256-gcm")`. The salt is fixed so that every node
//! given the same master key derives the same keys (backups stay portable).

use std::fmt;
use std::path::Path;

use aes_gcm::aead::{Aead, AeadCore, KeyInit, OsRng, Payload};
use aes_gcm::{Aes256Gcm, Nonce};
use base64::Engine as _;
use hkdf::Hkdf;
use sha2::Sha256;
use zeroize::Zeroize;

/// Length of the master key and of every derived key.
pub const KEY_LEN: usize = 32;
const VERSION: u8 = 1;
const NONCE_LEN: usize = 12;
const TAG_LEN: usize = 16;
const FLAG_RAW: u8 = 0;
const FLAG_LZ4: u8 = 1;
const SALT: &[u8] = b"tessera-encryption-at-rest-v1";
/// Plaintext of the key check value stored with an encrypted data directory.
const CHECK_PLAINTEXT: &[u8] = b"tessera key check v1";
const CHECK_AAD: &[u8] = b"tessera/key-check";

/// What a sealed value is used for; each purpose has its own derived key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// Values of the `data` column family (every engine's records).
    Data,
    /// Raft log entries (they carry client values until applied and purged).
    Log,
    /// Stored snapshots of a group's state.
    Snapshot,
    /// Backup archives.
    Backup,
    /// The key check value of a data directory.
    Check,
}

impl Purpose {
    const ALL: [Purpose; 5] = [Purpose::Data, Purpose::Log, Purpose::Snapshot, Purpose::Backup, Purpose::Check];

    fn info(self) -> &'static [u8] {
        match self {
            Purpose::Data => b"tessera/data/aes-256-gcm",
            Purpose::Log => b"tessera/log/aes-256-gcm",
            Purpose::Snapshot => b"tessera/snapshot/aes-256-gcm",
            Purpose::Backup => b"tessera/backup/aes-256-gcm",
            Purpose::Check => b"tessera/check/aes-256-gcm",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Errors of the encryption layer. None of them carries key material.
#[derive(Debug, thiserror::Error)]
pub enum CryptError {
    #[error("encryption key: {0}")]
    BadKey(String),
    #[error("a sealed value failed authentication (wrong key, or the stored bytes were altered)")]
    Unauthentic,
    #[error("malformed sealed value: {0}")]
    Malformed(&'static str),
    #[error(
        "the encryption key does not match the key this data directory was encrypted with \
         (check SERVICE_ENCRYPTION_KEY)"
    )]
    KeyMismatch,
    #[error(
        "this data directory holds unencrypted data: encryption at rest can only be turned on \
         for a new data directory"
    )]
    PlaintextStore,
    #[error(
        "this data directory is encrypted at rest: start the node with \
         SERVICE_ENCRYPTION_AT_REST=true and the directory's SERVICE_ENCRYPTION_KEY"
    )]
    EncryptedStore,
}

/// The ciphers of one node, one per [`Purpose`]; values are sealed with the
/// current master key and opened with it or, failing that, with each previous
/// key (key rotation: [`Crypt::with_previous`]).
#[derive(Clone)]
pub struct Crypt {
    ciphers: Vec<Aes256Gcm>,
    previous: Vec<Vec<Aes256Gcm>>,
}

impl fmt::Debug for Crypt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Crypt(<keys redacted>)")
    }
}

impl Crypt {
    /// Derives the per-purpose keys from a 32-byte master key.
    pub fn new(master: &[u8; KEY_LEN]) -> Self {
        Crypt { ciphers: Self::derive(master), previous: Vec::new() }
    }

    /// The same cipher, also opening values sealed with each of `previous`
    /// (key specs, as [`Crypt::from_key_spec`]): after a rotation the old
    /// data stays readable while new values are sealed with the current key.
    pub fn with_previous(mut self, previous: &[String]) -> Result<Self, CryptError> {
        for spec in previous.iter().map(|s| s.trim()).filter(|s| !s.is_empty()) {
            let mut key = parse_key_spec(spec)?;
            self.previous.push(Self::derive(&key));
            key.zeroize();
        }
        Ok(self)
    }

    fn derive(master: &[u8; KEY_LEN]) -> Vec<Aes256Gcm> {
        let hk = Hkdf::<Sha256>::new(Some(SALT), master);
        Purpose::ALL
            .iter()
            .map(|p| {
                let mut key = [0u8; KEY_LEN];
                hk.expand(p.info(), &mut key).expect("32 bytes is a valid HKDF-SHA256 output length");
                let cipher = Aes256Gcm::new(&key.into());
                key.zeroize();
                cipher
            })
            .collect()
    }

    /// Reads the master key from `spec`: a path to a key file (32 raw bytes, or
    /// base64 of 32 bytes), else base64 of 32 bytes given inline.
    pub fn from_key_spec(spec: &str) -> Result<Self, CryptError> {
        let mut key = parse_key_spec(spec)?;
        let crypt = Crypt::new(&key);
        key.zeroize();
        Ok(crypt)
    }

    fn cipher(&self, purpose: Purpose) -> &Aes256Gcm {
        &self.ciphers[purpose.index()]
    }

    /// Compresses and encrypts `plaintext`, bound to `aad`.
    pub fn seal(&self, purpose: Purpose, aad: &[u8], plaintext: &[u8]) -> Vec<u8> {
        let compressed = lz4_flex::block::compress_prepend_size(plaintext);
        let mut inner = Vec::with_capacity(1 + compressed.len().min(plaintext.len()));
        if compressed.len() < plaintext.len() {
            inner.push(FLAG_LZ4);
            inner.extend_from_slice(&compressed);
        } else {
            inner.push(FLAG_RAW);
            inner.extend_from_slice(plaintext);
        }
        let nonce = Aes256Gcm::generate_nonce(&mut OsRng);
        let ct = self
            .cipher(purpose)
            .encrypt(&nonce, Payload { msg: &inner, aad })
            .expect("AES-GCM encryption of an in-memory buffer cannot fail");
        let mut out = Vec::with_capacity(1 + NONCE_LEN + ct.len());
        out.push(VERSION);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&ct);
        out
    }

    /// Authenticates, decrypts and decompresses a value sealed with the same
    /// purpose and `aad`.
    pub fn open(&self, purpose: Purpose, aad: &[u8], sealed: &[u8]) -> Result<Vec<u8>, CryptError> {
        if sealed.len() < 1 + NONCE_LEN + TAG_LEN + 1 {
            return Err(CryptError::Malformed("too short"));
        }
        if sealed[0] != VERSION {
            return Err(CryptError::Malformed("unknown format version (unencrypted data?)"));
        }
        let nonce = Nonce::from_slice(&sealed[1..1 + NONCE_LEN]);
        let payload = || Payload { msg: &sealed[1 + NONCE_LEN..], aad };
        let inner = match self.cipher(purpose).decrypt(nonce, payload()) {
            Ok(inner) => inner,
            // Sealed before a rotation: one of the previous keys opens it.
            Err(_) => self
                .previous
                .iter()
                .find_map(|ciphers| ciphers[purpose.index()].decrypt(nonce, payload()).ok())
                .ok_or(CryptError::Unauthentic)?,
        };
        match inner.split_first() {
            Some((&FLAG_RAW, body)) => Ok(body.to_vec()),
            Some((&FLAG_LZ4, body)) => lz4_flex::block::decompress_size_prepended(body).map_err(|_| CryptError::Malformed("bad LZ4 block")),
            _ => Err(CryptError::Malformed("unknown compression flag")),
        }
    }

    /// Whether previous keys were given (a rotation is under way).
    pub fn has_previous(&self) -> bool {
        !self.previous.is_empty()
    }

    /// The same value sealed under the current key when a previous key sealed
    /// it (after a rotation); `None` when the current key opens it already, or
    /// when no key does (not a sealed value: left as it is).
    pub fn reseal(&self, purpose: Purpose, aad: &[u8], sealed: &[u8]) -> Option<Vec<u8>> {
        if !self.sealed_by_previous(purpose, aad, sealed) {
            return None;
        }
        let plaintext = self.open(purpose, aad, sealed).ok()?;
        Some(self.seal(purpose, aad, &plaintext))
    }

    /// Whether `sealed` opens with a previous key only (it still needs that key).
    pub fn sealed_by_previous(&self, purpose: Purpose, aad: &[u8], sealed: &[u8]) -> bool {
        if self.previous.is_empty() || sealed.len() < 1 + NONCE_LEN + TAG_LEN + 1 || sealed[0] != VERSION {
            return false;
        }
        let nonce = Nonce::from_slice(&sealed[1..1 + NONCE_LEN]);
        let payload = || Payload { msg: &sealed[1 + NONCE_LEN..], aad };
        self.cipher(purpose).decrypt(nonce, payload()).is_err()
            && self.previous.iter().any(|ciphers| ciphers[purpose.index()].decrypt(nonce, payload()).is_ok())
    }

    /// A fresh key check value: a known plaintext sealed under the check key.
    pub fn check_value(&self) -> Vec<u8> {
        self.seal(Purpose::Check, CHECK_AAD, CHECK_PLAINTEXT)
    }

    /// Whether `stored` is a check value made with this key (or, after a
    /// rotation, with a previous one: `Ok(true)`, and the caller stores a fresh
    /// [`Crypt::check_value`]).
    pub fn verify_check_value(&self, stored: &[u8]) -> Result<bool, CryptError> {
        let current = Crypt { ciphers: self.ciphers.clone(), previous: Vec::new() };
        if current.open(Purpose::Check, CHECK_AAD, stored).is_ok_and(|p| p == CHECK_PLAINTEXT) {
            return Ok(false);
        }
        match self.open(Purpose::Check, CHECK_AAD, stored) {
            Ok(p) if p == CHECK_PLAINTEXT => Ok(true),
            _ => Err(CryptError::KeyMismatch),
        }
    }
}

/// Parses a master key spec (see [`Crypt::from_key_spec`]).
pub fn parse_key_spec(spec: &str) -> Result<[u8; KEY_LEN], CryptError> {
    let spec = spec.trim();
    if spec.is_empty() {
        return Err(CryptError::BadKey("the key is empty".into()));
    }
    let path = Path::new(spec);
    if path.is_file() {
        let mut raw = std::fs::read(path).map_err(|e| CryptError::BadKey(format!("reading key file {}: {e}", path.display())))?;
        let key =
            if raw.len() == KEY_LEN { Some(to_key(&raw)) } else { std::str::from_utf8(&raw).ok().and_then(|s| decode_b64_key(s.trim())) };
        raw.zeroize();
        return key
            .ok_or_else(|| CryptError::BadKey(format!("key file {} must hold 32 raw bytes or the base64 of 32 bytes", path.display())));
    }
    decode_b64_key(spec).ok_or_else(|| CryptError::BadKey("must be the base64 of 32 bytes, or the path of an existing key file".into()))
}

fn decode_b64_key(s: &str) -> Option<[u8; KEY_LEN]> {
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
    for engine in [&STANDARD, &STANDARD_NO_PAD, &URL_SAFE, &URL_SAFE_NO_PAD] {
        if let Ok(mut bytes) = engine.decode(s) {
            let key = (bytes.len() == KEY_LEN).then(|| to_key(&bytes));
            bytes.zeroize();
            if key.is_some() {
                return key;
            }
        }
    }
    None
}

fn to_key(bytes: &[u8]) -> [u8; KEY_LEN] {
    let mut key = [0u8; KEY_LEN];
    key.copy_from_slice(bytes);
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crypt(byte: u8) -> Crypt {
        Crypt::new(&[byte; KEY_LEN])
    }

    #[test]
    fn after_a_rotation_old_values_open_and_new_ones_use_the_new_key() {
        let old = crypt(1);
        let sealed_before = old.seal(Purpose::Data, b"k", b"before the rotation");
        let check_before = old.check_value();
        let spec = base64::engine::general_purpose::STANDARD.encode([1u8; KEY_LEN]);
        let rotated = crypt(2).with_previous(&[spec]).unwrap();
        assert_eq!(rotated.open(Purpose::Data, b"k", &sealed_before).unwrap(), b"before the rotation");
        assert!(rotated.verify_check_value(&check_before).unwrap(), "checked with a previous key");
        assert!(!rotated.verify_check_value(&rotated.check_value()).unwrap(), "the current key");
        let sealed_after = rotated.seal(Purpose::Data, b"k", b"after");
        assert!(old.open(Purpose::Data, b"k", &sealed_after).is_err(), "new values are sealed with the new key");
        assert!(crypt(2).open(Purpose::Data, b"k", &sealed_before).is_err(), "without the previous key the old value stays closed");
        assert!(crypt(3).verify_check_value(&check_before).is_err());
    }

    #[test]
    fn resealing_moves_old_values_to_the_current_key() {
        let old = crypt(1);
        let sealed_before = old.seal(Purpose::Data, b"k", b"before");
        let spec = base64::engine::general_purpose::STANDARD.encode([1u8; KEY_LEN]);
        let rotated = crypt(2).with_previous(&[spec]).unwrap();
        assert!(rotated.sealed_by_previous(Purpose::Data, b"k", &sealed_before));
        let resealed = rotated.reseal(Purpose::Data, b"k", &sealed_before).expect("an old value is resealed");
        assert_eq!(crypt(2).open(Purpose::Data, b"k", &resealed).unwrap(), b"before", "the current key alone opens it");
        assert!(!rotated.sealed_by_previous(Purpose::Data, b"k", &resealed));
        assert_eq!(rotated.reseal(Purpose::Data, b"k", &resealed), None, "a current value is left alone");
        assert_eq!(rotated.reseal(Purpose::Data, b"k", b"plain bytes, not sealed at all"), None);
        assert_eq!(rotated.reseal(Purpose::Data, b"other key", &sealed_before), None, "bound to its key");
    }

    #[test]
    fn round_trip_compressible_and_incompressible() {
        let c = crypt(7);
        let text = b"marker-marker-marker-marker-marker-marker-marker-marker".repeat(20);
        let noise: Vec<u8> = (0..4096u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
        for plain in [&text[..], &noise[..], b"", b"x"] {
            let sealed = c.seal(Purpose::Data, b"key", plain);
            assert_eq!(c.open(Purpose::Data, b"key", &sealed).unwrap(), plain);
            assert!(sealed.windows(6).all(|w| w != b"marker"), "plaintext visible in sealed value");
        }
        // Compressible data shrinks below its plaintext size.
        assert!(c.seal(Purpose::Data, b"key", &text).len() < text.len() / 4);
    }

    #[test]
    fn nonces_are_random() {
        let c = crypt(1);
        assert_ne!(c.seal(Purpose::Log, b"k", b"same"), c.seal(Purpose::Log, b"k", b"same"));
    }

    #[test]
    fn tampering_is_detected() {
        let c = crypt(2);
        let sealed = c.seal(Purpose::Data, b"key", b"some value worth protecting");
        for i in 1..sealed.len() {
            let mut bad = sealed.clone();
            bad[i] ^= 0x01;
            assert!(c.open(Purpose::Data, b"key", &bad).is_err(), "flipped byte {i} went unnoticed");
        }
        assert!(c.open(Purpose::Data, b"key", &sealed[..sealed.len() - 1]).is_err());
        // Moved to another key, or read for another purpose.
        assert!(matches!(c.open(Purpose::Data, b"other", &sealed), Err(CryptError::Unauthentic)));
        assert!(matches!(c.open(Purpose::Log, b"key", &sealed), Err(CryptError::Unauthentic)));
        // Plaintext that was never sealed.
        assert!(c.open(Purpose::Data, b"key", b"{\"plain\":\"json value\"}").is_err());
    }

    #[test]
    fn wrong_key_fails() {
        let sealed = crypt(3).seal(Purpose::Snapshot, b"s", b"snapshot bytes");
        assert!(matches!(crypt(4).open(Purpose::Snapshot, b"s", &sealed), Err(CryptError::Unauthentic)));
        let check = crypt(3).check_value();
        crypt(3).verify_check_value(&check).unwrap();
        assert!(matches!(crypt(4).verify_check_value(&check), Err(CryptError::KeyMismatch)));
    }

    #[test]
    fn key_specs() {
        use base64::engine::general_purpose::STANDARD;
        let key = [9u8; KEY_LEN];
        let b64 = STANDARD.encode(key);
        assert_eq!(parse_key_spec(&b64).unwrap(), key);
        assert_eq!(parse_key_spec(&format!("  {b64}\n")).unwrap(), key);
        let dir = tempfile::tempdir().unwrap();
        let raw = dir.path().join("raw.key");
        std::fs::write(&raw, key).unwrap();
        assert_eq!(parse_key_spec(raw.to_str().unwrap()).unwrap(), key);
        let text = dir.path().join("b64.key");
        std::fs::write(&text, format!("{b64}\n")).unwrap();
        assert_eq!(parse_key_spec(text.to_str().unwrap()).unwrap(), key);
        let short = STANDARD.encode([1u8; 16]);
        for bad in ["", "not a key", short.as_str(), "/no/such/key/file"] {
            let err = parse_key_spec(bad).unwrap_err().to_string();
            assert!(!err.contains(&b64), "error leaks key material: {err}");
            assert!(matches!(parse_key_spec(bad), Err(CryptError::BadKey(_))));
        }
        // Derivation is deterministic per master key and distinct per purpose.
        let a = Crypt::from_key_spec(&b64).unwrap();
        let sealed = a.seal(Purpose::Backup, b"b", b"portable");
        assert_eq!(Crypt::new(&key).open(Purpose::Backup, b"b", &sealed).unwrap(), b"portable");
    }
}
