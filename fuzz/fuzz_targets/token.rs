//! Bearer tokens (SC-ID-02): any text as a bearer, through the server's whole token path —
//! size, header and algorithm, issuer, the key (a fixed key set: `token_keys.json`, no
//! network), the signature, the claims for the tenant whose audience it names, the role each
//! route needs. Never a panic, and nothing but a token our Ed25519 key signed is accepted: the
//! set's RSA and EC keys have no private half anywhere, so a token accepted under them is a
//! forgery, and Ed25519 signing is deterministic, so an accepted token's signature must be the
//! one our key makes over its first two parts.
#![no_main]

use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine as _};
use countersign::config::{Config, Role};
use countersign::identity::{Need, Verifier};
use ed25519_dalek::{Signer, SigningKey};
use libfuzzer_sys::fuzz_target;
use std::sync::LazyLock;

/// Two tenants share an issuer (told apart by audience; one insists on `typ: at+jwt`), a third
/// has its own. The seed replay test (countersign's `identity::tests`) reads the same file.
const CONFIG: &str = include_str!("token_config.toml");

struct Rig {
    config: Config,
    verifier: Verifier,
    runtime: tokio::runtime::Runtime,
    signer: SigningKey,
}

static RIG: LazyLock<Rig> = LazyLock::new(|| {
    let config = Config::from_toml(CONFIG).expect("the fuzz config loads");
    let set = serde_json::from_str(include_str!("token_keys.json")).expect("the key set");
    Rig {
        verifier: Verifier::fixed(&config, &set),
        config,
        runtime: tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime"),
        // The private half of the set's `ed-1` (the seeds were signed with it).
        signer: SigningKey::from_bytes(&[5; 32]),
    }
});

fuzz_target!(|bearer: &str| {
    let rig = &*RIG;
    // The seeds' tokens are good from 1_800_000_000 - 5 to 1_800_000_300.
    let now = jiff::Timestamp::from_second(1_800_000_000).unwrap();
    let needs = [
        Need::Role(Role::Agent),
        Need::Role(Role::Approver),
        Need::Role(Role::Admin),
        Need::Any,
    ];
    for need in needs {
        let answer = rig
            .runtime
            .block_on(rig.verifier.principal(&rig.config, bearer, need, now));
        let Ok(principal) = answer else { continue };
        let (input, signature) = bearer.rsplit_once('.').expect("an accepted token has parts");
        let signature = URL_SAFE_NO_PAD.decode(signature).expect("its signature is base64url");
        assert_eq!(
            signature,
            rig.signer.sign(input.as_bytes()).to_bytes(),
            "a token our key did not sign was accepted: {bearer}"
        );
        if let Need::Role(role) = need {
            assert_eq!(principal.role, role, "accepted in another role than asked");
        }
    }
});
