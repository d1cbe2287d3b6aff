//! What the engine stores secret (a stack's trust id, stack users'
//! passwords and EC2 secrets) is encrypted with `[DEFAULT]
//! auth_encryption_key`, as Heat encrypts its `user_creds` and redacted
//! resource data (`heat/common/crypt.py`). Heat uses Fernet (AES-CBC with
//! HMAC-SHA256) keyed by the option's text; keelson uses AES-256-GCM,
//! also authenticated encryption, keyed by SHA-256 of the same text, and
//! records the method beside each value (`decrypt_method`) so another can
//! follow.

use base64::Engine as _;
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, NONCE_LEN};
use ring::rand::{SecureRandom as _, SystemRandom};
use sha2::{Digest as _, Sha256};

/// The `decrypt_method` of what [`Crypt::encrypt`] writes.
pub const METHOD: &str = "aes-256-gcm";

/// Why a stored value cannot be read back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CryptError {
    /// Heat's `InvalidEncryptionKey`: another key (or a damaged value).
    #[error("Can not decrypt data with the auth_encryption_key in heat config.")]
    InvalidEncryptionKey,
    #[error("unknown decrypt_method {0}")]
    UnknownMethod(String),
    #[error("the system random generator failed")]
    Random,
    #[error("AES-256-GCM refused the derived key")]
    Key,
}

/// The engine's key.
pub struct Crypt {
    key: LessSafeKey,
    rng: SystemRandom,
}

impl std::fmt::Debug for Crypt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Crypt")
    }
}

impl Crypt {
    /// The key derived from `auth_encryption_key`'s text.
    pub fn new(auth_encryption_key: &str) -> Result<Crypt, CryptError> {
        let digest = Sha256::digest(auth_encryption_key.as_bytes());
        // 32 bytes, AES-256's key length: ring accepts it.
        let unbound = UnboundKey::new(&AES_256_GCM, &digest).map_err(|_| CryptError::Key)?;
        Ok(Crypt { key: LessSafeKey::new(unbound), rng: SystemRandom::new() })
    }

    /// base64(nonce ‖ ciphertext ‖ tag).
    pub fn encrypt(&self, plain: &str) -> Result<String, CryptError> {
        let mut nonce = [0u8; NONCE_LEN];
        self.rng.fill(&mut nonce).map_err(|_| CryptError::Random)?;
        let mut sealed = plain.as_bytes().to_vec();
        self.key
            .seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::empty(), &mut sealed)
            .map_err(|_| CryptError::Random)?;
        let mut out = nonce.to_vec();
        out.extend_from_slice(&sealed);
        Ok(base64::engine::general_purpose::STANDARD.encode(out))
    }

    /// The text [`Crypt::encrypt`] sealed with this key, under `method`.
    pub fn decrypt(&self, method: &str, sealed: &str) -> Result<String, CryptError> {
        if method != METHOD {
            return Err(CryptError::UnknownMethod(method.to_string()));
        }
        let bytes =
            base64::engine::general_purpose::STANDARD.decode(sealed).map_err(|_| CryptError::InvalidEncryptionKey)?;
        if bytes.len() < NONCE_LEN {
            return Err(CryptError::InvalidEncryptionKey);
        }
        let (nonce, rest) = bytes.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| CryptError::InvalidEncryptionKey)?;
        let mut rest = rest.to_vec();
        let plain =
            self.key.open_in_place(nonce, Aad::empty(), &mut rest).map_err(|_| CryptError::InvalidEncryptionKey)?;
        String::from_utf8(plain.to_vec()).map_err(|_| CryptError::InvalidEncryptionKey)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_refusals() {
        let c = Crypt::new("notgood but just long enough i t").unwrap();
        let sealed = c.encrypt("trust-id-1").unwrap();
        assert_ne!(sealed, c.encrypt("trust-id-1").unwrap(), "a fresh nonce each time");
        assert_eq!(c.decrypt(METHOD, &sealed).unwrap(), "trust-id-1");
        let other = Crypt::new("another key").unwrap();
        assert_eq!(other.decrypt(METHOD, &sealed), Err(CryptError::InvalidEncryptionKey));
        let mut damaged = base64::engine::general_purpose::STANDARD.decode(&sealed).unwrap();
        let last = damaged.len() - 1;
        damaged[last] ^= 1;
        let damaged = base64::engine::general_purpose::STANDARD.encode(damaged);
        assert_eq!(c.decrypt(METHOD, &damaged), Err(CryptError::InvalidEncryptionKey));
        assert_eq!(c.decrypt("fernet", &sealed), Err(CryptError::UnknownMethod("fernet".into())));
        assert_eq!(c.decrypt(METHOD, "!!"), Err(CryptError::InvalidEncryptionKey));
    }
}
