//! Address validation tokens (RFC 9000 §8.1.3) for the replay's QUIC endpoints: each connection
//! whose path is validated is sent `SENT` tokens in NEW_TOKEN frames; a client that comes back
//! with one in its Initial has its address validated at once, so the server's answer to its
//! 0-RTT requests is not held to 3x the bytes the client sent (§8.1) until the handshake
//! completes. Chromium keeps the tokens with the session it resumes and sends one in the Initial
//! (quiche `TlsClientHandshaker::CryptoConnect`, `SetSourceAddressTokenToSend`), as servers that
//! issue them (Google's) expect; without them every 0-RTT response above ~3.6 KB waited a round
//! trip here (docs/dataplane-interfaces.md "h3 vs h2 transfer"). quinn issues them only with its
//! `bloom` feature (a Bloom-filter log of used tokens), which the build leaves off; this exact
//! log takes its place.
use std::collections::HashSet;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

/// Tokens sent per validated connection (quinn's default with `bloom`).
pub const SENT: u32 = 2;
/// At most this many used tokens remembered (16 bytes each); beyond, after dropping the expired
/// ones, a token is refused (allowed: the client then waits for the handshake, as without one).
const CAPACITY: usize = 100_000;

/// The tokens already used, each refused a second time (a token's reuse would let a spoofer
/// lift the amplification limit). Expired tokens are refused by quinn before they get here.
#[derive(Default)]
pub struct UsedTokens(Mutex<HashSet<(u128, SystemTime, Duration)>>);

impl quinn::TokenLog for UsedTokens {
    fn check_and_insert(
        &self,
        nonce: u128,
        issued: SystemTime,
        lifetime: Duration,
    ) -> Result<(), quinn::TokenReuseError> {
        let mut used = self.0.lock().unwrap();
        if used.len() >= CAPACITY {
            let now = SystemTime::now();
            used.retain(|(_, i, l)| *i + *l > now);
            if used.len() >= CAPACITY {
                return Err(quinn::TokenReuseError);
            }
        }
        if used.insert((nonce, issued, lifetime)) {
            Ok(())
        } else {
            Err(quinn::TokenReuseError)
        }
    }
}

/// The validation-token settings of the replay's `quinn::ServerConfig`.
pub fn config() -> quinn::ValidationTokenConfig {
    let mut c = quinn::ValidationTokenConfig::default();
    c.log(std::sync::Arc::new(UsedTokens::default())).sent(SENT);
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use quinn::TokenLog;

    #[test]
    fn a_token_is_taken_once() {
        let log = UsedTokens::default();
        let t = SystemTime::now();
        let life = Duration::from_secs(60);
        assert!(log.check_and_insert(7, t, life).is_ok());
        assert!(log.check_and_insert(7, t, life).is_err(), "reused token accepted");
        assert!(log.check_and_insert(8, t, life).is_ok());
    }
}
