//! The vault's cryptography: Argon2id key derivation from the passphrase and
//! AES-256-GCM (96-bit random nonces) for wrapping the data key and for secrets.

use aes_gcm::aead::{Aead, Payload};
use aes_gcm::{Aes256Gcm, KeyInit, Nonce};
use argon2::{Algorithm, Argon2, Params, Version};
use rand::RngCore;
use zeroize::Zeroizing;

/// A 256-bit key that is wiped from memory when dropped.
pub type Key = Zeroizing<[u8; 32]>;

/// Argon2id cost for the passphrase key: 64 MiB, 3 passes, 1 lane.
pub const KDF_M_KIB: u32 = 65_536;
pub const KDF_T: u32 = 3;
pub const KDF_P: u32 = 1;

/// Associated data of the wrapped data key and of the check value.
const WRAP_AAD: &[u8] = b"tessera-vault:data-key";
const CHECK_AAD: &[u8] = b"tessera-vault:check";
/// The constant whose encryption under the data key confirms an unwrapped key.
pub const CHECK_PLAINTEXT: &[u8] = b"tessera vault data key check v1";

/// A decryption that failed its authentication (wrong key or altered data).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct CryptoError(pub String);

/// `n` random bytes from the operating system.
pub fn random_bytes<const N: usize>() -> [u8; N] {
    let mut b = [0u8; N];
    rand::rngs::OsRng.fill_bytes(&mut b);
    b
}

/// A fresh random data key.
pub fn new_key() -> Key {
    Zeroizing::new(random_bytes::<32>())
}

/// Derives the key-encryption key from a passphrase (slow by design: run it on
/// a blocking thread).
pub fn derive_kek(passphrase: &str, salt: &[u8], m_kib: u32, t: u32, p: u32) -> Result<Key, CryptoError> {
    let params = Params::new(m_kib, t, p, Some(32)).map_err(|e| CryptoError(format!("bad KDF parameters: {e}")))?;
    let mut out = Zeroizing::new([0u8; 32]);
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
        .hash_password_into(passphrase.as_bytes(), salt, out.as_mut())
        .map_err(|e| CryptoError(format!("key derivation failed: {e}")))?;
    Ok(out)
}

/// Encrypts `plaintext` under `key` with a fresh nonce: (nonce, ciphertext with tag).
pub fn seal(key: &[u8; 32], plaintext: &[u8], aad: &[u8]) -> Result<(Vec<u8>, Vec<u8>), CryptoError> {
    let cipher = Aes256Gcm::new_from_slice(key).map_err(|e| CryptoError(e.to_string()))?;
    let nonce = random_bytes::<12>();
    let ct =
        cipher.encrypt(Nonce::from_slice(&nonce), Payload { msg: plaintext, aad }).map_err(|_| CryptoError("encryption failed".into()))?;
    Ok((nonce.to_vec(), ct))
}

/// Decrypts what [`seal`] produced; fails if the key, nonce, data or `aad` differ.
pub fn open(key: &[u8; 32], nonce: &[u8], ciphertext: &[u8], aad: &[u8]) -> Result<Zeroizing<Vec<u8>>, CryptoError> {
    if nonce.len() != 12 {
        return Err(CryptoError("bad nonce length".into()));
    }
    let cipher = Aes256Gcm::new_from_slice(key).map_err(|e| CryptoError(e.to_string()))?;
    cipher
        .decrypt(Nonce::from_slice(nonce), Payload { msg: ciphertext, aad })
        .map(Zeroizing::new)
        .map_err(|_| CryptoError("authentication failed".into()))
}

/// Wraps a data key under the key-encryption key: (nonce, wrapped key).
pub fn wrap(kek: &[u8; 32], key: &[u8; 32]) -> Result<(Vec<u8>, Vec<u8>), CryptoError> {
    seal(kek, key, WRAP_AAD)
}

/// Unwraps a data key; fails for a key-encryption key from another passphrase.
pub fn unwrap(kek: &[u8; 32], nonce: &[u8], wrapped: &[u8]) -> Result<Key, CryptoError> {
    let raw = open(kek, nonce, wrapped, WRAP_AAD)?;
    let key: [u8; 32] = raw.as_slice().try_into().map_err(|_| CryptoError("wrapped key has the wrong length".into()))?;
    Ok(Zeroizing::new(key))
}

/// The check value of a data key: (nonce, ciphertext of [`CHECK_PLAINTEXT`]).
pub fn check_value(key: &[u8; 32]) -> Result<(Vec<u8>, Vec<u8>), CryptoError> {
    seal(key, CHECK_PLAINTEXT, CHECK_AAD)
}

/// Whether `key` decrypts the check value to the constant.
pub fn verify_check(key: &[u8; 32], nonce: &[u8], check: &[u8]) -> bool {
    open(key, nonce, check, CHECK_AAD).is_ok_and(|p| p.as_slice() == CHECK_PLAINTEXT)
}

/// Associated data binding a secret's ciphertext to its path.
pub fn secret_aad(path: &str) -> Vec<u8> {
    [b"tessera-vault:secret:".as_slice(), path.as_bytes()].concat()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrap_unwrap_and_wrong_passphrase() {
        let salt = random_bytes::<16>();
        // Small cost for a quick unit test; the vault uses the constants above.
        let kek = derive_kek("correct horse battery staple", &salt, 1024, 1, 1).unwrap();
        let key = new_key();
        let (nonce, wrapped) = wrap(&kek, &key).unwrap();
        assert_eq!(*unwrap(&kek, &nonce, &wrapped).unwrap(), *key);
        let wrong = derive_kek("correct horse battery stapler", &salt, 1024, 1, 1).unwrap();
        assert!(unwrap(&wrong, &nonce, &wrapped).is_err());
        let (cn, check) = check_value(&key).unwrap();
        assert!(verify_check(&key, &cn, &check));
        assert!(!verify_check(&kek, &cn, &check));
    }

    #[test]
    fn secrets_are_bound_to_their_path() {
        let key = new_key();
        let (nonce, ct) = seal(&key, b"s3cret", &secret_aad("a/b")).unwrap();
        assert_eq!(open(&key, &nonce, &ct, &secret_aad("a/b")).unwrap().as_slice(), b"s3cret");
        assert!(open(&key, &nonce, &ct, &secret_aad("a/c")).is_err());
        assert!(!ct.windows(6).any(|w| w == b"s3cret"));
    }
}
