//! How a delivery is signed, Stripe's way: `ClutchCall-Signature:
//! t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>" under the
//! endpoint's secret>`. The timestamp is signed too, so a receiver that
//! refuses signatures older than five minutes refuses replays.

use domain::integrations::SIGNATURE_TOLERANCE_S;
use hmac::{Hmac, Mac};
use sha2::Sha256;

pub const SIGNATURE_HEADER: &str = "clutchcall-signature";
pub const EVENT_ID_HEADER: &str = "clutchcall-event-id";
pub const EVENT_TYPE_HEADER: &str = "clutchcall-event-type";

fn mac(secret: &str, timestamp_s: i64, body: &[u8]) -> Hmac<Sha256> {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes a key of any length");
    mac.update(timestamp_s.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    mac
}

/// The header value for `body` sent at `timestamp_s`.
pub fn sign(secret: &str, timestamp_s: i64, body: &[u8]) -> String {
    format!("t={timestamp_s},v1={}", hex::encode(mac(secret, timestamp_s, body).finalize().into_bytes()))
}

/// Why a receiver refuses a delivery.
#[derive(Debug, PartialEq, Eq)]
pub enum BadSignature {
    Malformed,
    /// Older (or newer) than the five-minute window.
    OutsideWindow,
    Mismatch,
}

/// What a receiver does: checks the header against the body it got.
pub fn verify(header: &str, secret: &str, body: &[u8], now_s: i64) -> Result<(), BadSignature> {
    let mut timestamp = None;
    let mut signatures = Vec::new();
    for part in header.split(',') {
        match part.trim().split_once('=') {
            Some(("t", t)) => timestamp = t.parse::<i64>().ok(),
            Some(("v1", v)) => signatures.push(hex::decode(v).map_err(|_| BadSignature::Malformed)?),
            _ => {}
        }
    }
    let timestamp = timestamp.ok_or(BadSignature::Malformed)?;
    if signatures.is_empty() {
        return Err(BadSignature::Malformed);
    }
    if (now_s - timestamp).abs() > SIGNATURE_TOLERANCE_S {
        return Err(BadSignature::OutsideWindow);
    }
    // Compared in constant time (`verify_slice`).
    if signatures.iter().any(|s| mac(secret, timestamp, body).verify_slice(s).is_ok()) {
        Ok(())
    } else {
        Err(BadSignature::Mismatch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signed_body_verifies_within_five_minutes_and_nothing_else_does() {
        let header = sign("whsec_1", 1_000, b"{\"id\":1}");
        assert!(header.starts_with("t=1000,v1="));
        assert_eq!(verify(&header, "whsec_1", b"{\"id\":1}", 1_000 + SIGNATURE_TOLERANCE_S), Ok(()));
        assert_eq!(verify(&header, "whsec_1", b"{\"id\":2}", 1_000), Err(BadSignature::Mismatch), "another body");
        assert_eq!(verify(&header, "whsec_2", b"{\"id\":1}", 1_000), Err(BadSignature::Mismatch), "another secret");
        assert_eq!(verify(&header, "whsec_1", b"{\"id\":1}", 1_001 + SIGNATURE_TOLERANCE_S), Err(BadSignature::OutsideWindow), "a replay");
        let moved = header.replace("t=1000", "t=1300");
        assert_eq!(verify(&moved, "whsec_1", b"{\"id\":1}", 1_300), Err(BadSignature::Mismatch), "the timestamp is signed");
        assert_eq!(verify("v1=00", "whsec_1", b"", 0), Err(BadSignature::Malformed));
    }
}
