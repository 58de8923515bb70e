//! Passwords, tokens and the sign-in slowdown.

use argon2::password_hash::{rand_core::OsRng, PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;
use base64::Engine;
use rand::RngCore;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::Mutex;

/// argon2id (the crate's default: v19, 19 MiB, 2 passes) PHC string.
pub fn hash_password(password: &str) -> String {
    let salt = SaltString::generate(&mut OsRng);
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .expect("argon2 hashing with valid default parameters")
        .to_string()
}

pub fn verify_password(password: &str, phc: &str) -> bool {
    PasswordHash::new(phc)
        .map(|hash| Argon2::default().verify_password(password.as_bytes(), &hash).is_ok())
        .unwrap_or(false)
}

/// A fresh random bearer token (256 bits, URL-safe).
pub fn new_token() -> String {
    let mut bytes = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut bytes);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// Tokens are stored only as their SHA-256: a leaked table opens nothing.
pub fn token_hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// Failed sign-ins tolerated before the slowdown starts.
pub const FREE_FAILURES: u32 = 5;
const FIRST_LOCK_MS: i64 = 30_000;
const MAX_LOCK_MS: i64 = 15 * 60_000;

/// Repeated failures for one email lock it out for a while, doubling each
/// further failure (30 s, 60 s, … up to 15 min). Counted per email so an
/// attacker cannot spread guesses over many connections.
#[derive(Default)]
pub struct SignInThrottle {
    by_email: Mutex<HashMap<String, Failures>>,
}

#[derive(Clone, Copy, Default)]
struct Failures {
    count: u32,
    locked_until: i64,
}

impl SignInThrottle {
    /// `Err(seconds)` while the email is locked.
    pub fn check(&self, email: &str, now: i64) -> Result<(), u64> {
        let map = self.by_email.lock().expect("throttle lock");
        match map.get(email) {
            Some(f) if f.locked_until > now => Err(((f.locked_until - now) as u64).div_ceil(1000)),
            _ => Ok(()),
        }
    }

    pub fn record_failure(&self, email: &str, now: i64) {
        let mut map = self.by_email.lock().expect("throttle lock");
        let f = map.entry(email.to_string()).or_default();
        f.count += 1;
        if f.count >= FREE_FAILURES {
            let doublings = (f.count - FREE_FAILURES).min(10);
            f.locked_until = now + (FIRST_LOCK_MS << doublings).min(MAX_LOCK_MS);
        }
    }

    pub fn record_success(&self, email: &str) {
        self.by_email.lock().expect("throttle lock").remove(email);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn password_hash_is_argon2id_and_verifies_only_the_right_password() {
        let phc = hash_password("correct horse");
        assert!(phc.starts_with("$argon2id$"));
        assert!(verify_password("correct horse", &phc));
        assert!(!verify_password("wrong horse", &phc));
        assert!(!verify_password("correct horse", "not a hash"));
    }

    #[test]
    fn tokens_are_random_and_hashed() {
        let (a, b) = (new_token(), new_token());
        assert_ne!(a, b);
        assert_eq!(token_hash(&a).len(), 64);
        assert_eq!(token_hash(&a), token_hash(&a));
    }

    #[test]
    fn throttle_locks_after_free_failures_and_doubles() {
        let t = SignInThrottle::default();
        for _ in 0..FREE_FAILURES - 1 {
            t.record_failure("a@x", 0);
            assert_eq!(t.check("a@x", 0), Ok(()));
        }
        t.record_failure("a@x", 0);
        assert_eq!(t.check("a@x", 0), Err(30));
        assert_eq!(t.check("a@x", 30_000), Ok(()));
        t.record_failure("a@x", 30_000);
        assert_eq!(t.check("a@x", 30_000), Err(60));
        assert_eq!(t.check("b@x", 30_000), Ok(()), "other emails are not affected");
        t.record_success("a@x");
        assert_eq!(t.check("a@x", 30_000), Ok(()));
    }
}
