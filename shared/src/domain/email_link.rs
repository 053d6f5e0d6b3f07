//! The confirmation link of an approval mail (SC-CH-10 … SC-CH-13): a token naming one action,
//! the context digest the mail showed, one approver and an expiry, signed with the tenant's link
//! key (HMAC-SHA256). Pure: the key and `now` come in as arguments.
//!
//! `<base64url(payload JSON)>.<base64url(HMAC(key, "countersign-email-link-v1." + first part))>`.
//! The payload is read before the signature is checked only to learn the tenant, whose key then
//! decides; nothing else of it is believed until the signature verified.

use base64::{engine::general_purpose::URL_SAFE_NO_PAD as B64, Engine as _};
use hmac::{Hmac, Mac};
use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use sha2::Sha256;

/// Bound into every signature, so a MAC made for anything else never verifies as a link.
const PURPOSE: &[u8] = b"countersign-email-link-v1.";
/// Longer tokens are refused unread.
pub const MAX_TOKEN: usize = 2048;

/// What a link lets its holder do: decide `action_id` as `approver`, for this context, until
/// `expires_at`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Link {
    #[serde(rename = "t")]
    pub tenant: String,
    #[serde(rename = "a")]
    pub action_id: String,
    #[serde(rename = "p")]
    pub approver: String,
    #[serde(rename = "d")]
    pub context_digest: String,
    /// Unix seconds.
    #[serde(rename = "e")]
    pub expires_at: i64,
}

/// Why a link is refused; nothing is read or changed for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LinkError {
    #[error("this link is malformed")]
    Malformed,
    /// The signature does not verify (altered, or signed with another key), or the tenant
    /// sends no mail.
    #[error("this link is not valid")]
    Forged,
    #[error("this link has expired")]
    Expired,
}

impl Link {
    pub fn sign(&self, key: &[u8]) -> String {
        let payload = B64.encode(serde_json::to_vec(self).expect("a link serializes"));
        let mac = B64.encode(mac(key, &payload).finalize().into_bytes());
        format!("{payload}.{mac}")
    }

    /// The tenant a token claims to be of: which key to check it with. Not yet believed.
    pub fn claimed_tenant(token: &str) -> Result<String, LinkError> {
        Ok(unverified(token)?.1.tenant)
    }

    /// The link `token` carries, if `key` signed it and it has not expired at `now`.
    pub fn verify(token: &str, key: &[u8], now: Timestamp) -> Result<Link, LinkError> {
        let (payload, link, signature) = unverified(token)?;
        let signature = B64.decode(signature).map_err(|_| LinkError::Malformed)?;
        mac(key, payload)
            .verify_slice(&signature)
            .map_err(|_| LinkError::Forged)?;
        if now.as_second() >= link.expires_at {
            return Err(LinkError::Expired);
        }
        Ok(link)
    }
}

fn mac(key: &[u8], payload: &str) -> Hmac<Sha256> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("hmac takes any key length");
    mac.update(PURPOSE);
    mac.update(payload.as_bytes());
    mac
}

fn unverified(token: &str) -> Result<(&str, Link, &str), LinkError> {
    if token.len() > MAX_TOKEN {
        return Err(LinkError::Malformed);
    }
    let (payload, signature) = token.split_once('.').ok_or(LinkError::Malformed)?;
    let bytes = B64.decode(payload).map_err(|_| LinkError::Malformed)?;
    let link: Link = serde_json::from_slice(&bytes).map_err(|_| LinkError::Malformed)?;
    Ok((payload, link, signature))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link() -> Link {
        Link {
            tenant: "acme".into(),
            action_id: "act_01JC0000000000000000000000".into(),
            approver: "approver-1".into(),
            context_digest: "9c1f".into(),
            expires_at: 2_000,
        }
    }

    const KEY: &[u8] = b"0123456789abcdef0123456789abcdef";

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(s).unwrap()
    }

    #[test]
    fn sc_ch_12_a_link_verifies_with_its_key_until_it_expires() {
        let token = link().sign(KEY);
        assert_eq!(Link::claimed_tenant(&token), Ok("acme".into()));
        assert_eq!(Link::verify(&token, KEY, at(1_999)), Ok(link()));
        assert_eq!(
            Link::verify(&token, KEY, at(2_000)),
            Err(LinkError::Expired)
        );
        assert_eq!(
            Link::verify(&token, b"another key, just as long as it.", at(0)),
            Err(LinkError::Forged)
        );
    }

    #[test]
    fn sc_ch_12_an_altered_link_is_refused() {
        let token = link().sign(KEY);
        let (_, signature) = token.split_once('.').unwrap();
        // Each bound member changed in turn, the old signature kept.
        let others = [
            Link {
                action_id: "act_01JC0000000000000000000001".into(),
                ..link()
            },
            Link {
                approver: "approver-2".into(),
                ..link()
            },
            Link {
                context_digest: "9c1e".into(),
                ..link()
            },
            Link {
                expires_at: 9_999,
                ..link()
            },
            Link {
                tenant: "globex".into(),
                ..link()
            },
        ];
        for other in others {
            let payload = B64.encode(serde_json::to_vec(&other).unwrap());
            let forged = format!("{payload}.{signature}");
            assert_eq!(
                Link::verify(&forged, KEY, at(0)),
                Err(LinkError::Forged),
                "{other:?}"
            );
        }
        for malformed in [
            "",
            "x",
            "x.y",
            ".",
            &format!("{token}x"),
            &"a".repeat(MAX_TOKEN + 1),
        ] {
            assert!(
                Link::verify(malformed, KEY, at(0)).is_err(),
                "{malformed:?}"
            );
        }
    }
}
