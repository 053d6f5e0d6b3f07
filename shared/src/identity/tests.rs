//! The token fuzz target's seeds, replayed on stable by `cargo test` (SC-ID-02, SC-ID-04): the
//! fuzz target (fuzz/fuzz_targets/token.rs) needs nightly and runs only when asked
//! (`bash scripts/fuzz.sh`); this runs every seed through the same verifier — the target's
//! configuration and fixed key set, read from its files — with the target's invariant and, for
//! each seed, the answer it must get. A seed added without an answer here fails the test.

use super::*;
use crate::config::Role;
use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine as _};
use ed25519_dalek::{Signer, SigningKey};

const SEEDS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fuzz/seeds/token");

/// Who a seed is for each need, agent / approver / admin / any: `tenant role id`, `scope` (403
/// `insufficient_scope`), or `invalid` (401).
const ANSWERS: &[(&str, [&str; 4])] = {
    const AGENT: [&str; 4] = ["acme agent agent-1", "scope", "scope", "acme agent agent-1"];
    const PERSON: [&str; 4] = [
        "scope",
        "acme approver u-1",
        "acme admin u-1",
        "acme approver u-1",
    ];
    const INVALID: [&str; 4] = ["invalid"; 4];
    &[
        ("agent", AGENT),
        ("person", PERSON),
        // A plain `JWT` typ is an access token where the tenant does not insist on `at+jwt`.
        ("jwt-typ", PERSON),
        // The set has one Ed25519 key: a token naming no `kid` is verified by it.
        ("no-kid", AGENT),
        // Another issuer's tenant, its own audience: every issuer of the target has the set.
        (
            "other-issuer",
            [
                "initech agent agent-1",
                "scope",
                "scope",
                "initech agent agent-1",
            ],
        ),
        (
            "tenant-b",
            [
                "globex agent agent-1",
                "scope",
                "scope",
                "globex agent agent-1",
            ],
        ),
        ("no-scope", ["scope"; 4]),
        ("alg-none", INVALID),
        ("hs256", INVALID),
        ("es256-forged", INVALID),
        ("rs256-forged", INVALID),
        ("expired", INVALID),
        ("not-yet", INVALID),
        ("id-token", INVALID),
        ("require-at-jwt", INVALID),
        ("unknown-kid", INVALID),
        ("wrong-aud", INVALID),
        ("wrong-iss", INVALID),
    ]
};

fn answer(got: &Result<Principal, TokenError>) -> String {
    match got {
        Ok(p) => {
            let role = serde_json::to_value(p.role).unwrap();
            format!("{} {} {}", p.tenant, role.as_str().unwrap(), p.id)
        }
        Err(TokenError::Scope(_)) => "scope".into(),
        Err(TokenError::Invalid(_)) => "invalid".into(),
        Err(TokenError::Unavailable) => "unavailable".into(),
    }
}

#[tokio::test]
async fn sc_id_02_the_token_fuzz_seeds_get_their_answers() {
    let config = Config::from_toml(include_str!("../../../fuzz/fuzz_targets/token_config.toml"))
        .expect("the fuzz target's configuration loads");
    let set = serde_json::from_str(include_str!("../../../fuzz/fuzz_targets/token_keys.json"))
        .expect("the fuzz target's key set");
    let verifier = Verifier::fixed(&config, &set);
    // The private half of the set's `ed-1`, as in the fuzz target.
    let signer = SigningKey::from_bytes(&[5; 32]);
    let now = jiff::Timestamp::from_second(1_800_000_000).unwrap();
    let roles = [Role::Agent, Role::Approver, Role::Admin];
    let needs = roles.map(Need::Role).into_iter().chain([Need::Any]);
    let mut seeds: Vec<_> = std::fs::read_dir(SEEDS)
        .expect("fuzz/seeds/token")
        .map(|e| e.unwrap().path())
        .collect();
    seeds.sort();
    assert_eq!(seeds.len(), ANSWERS.len(), "every seed has its answers");
    for path in seeds {
        let name = path.file_name().unwrap().to_str().unwrap();
        let (_, expected) = ANSWERS
            .iter()
            .find(|(seed, _)| *seed == name)
            .unwrap_or_else(|| panic!("no answers for the seed {name}"));
        let bearer = std::fs::read_to_string(&path).unwrap();
        assert!(
            token::looks_like_jwt(&bearer),
            "{name} reaches the verifier"
        );
        for (need, expected) in needs.clone().zip(expected) {
            let got = verifier.principal(&config, &bearer, need, now).await;
            assert_eq!(answer(&got), *expected, "{name} for {need:?}: {got:?}");
            // The fuzz target's invariant: only what our key signed is accepted.
            if got.is_ok() {
                let (input, signature) = bearer.rsplit_once('.').unwrap();
                let signature = URL_SAFE_NO_PAD.decode(signature).unwrap();
                assert_eq!(
                    signature,
                    signer.sign(input.as_bytes()).to_bytes(),
                    "{name}"
                );
            }
        }
    }
}

/// The verifier remembers a checked signature (BENCHMARKS.md, identity), never the claims: a
/// remembered token past its expiry is refused, and a signature remembered from another key set
/// (a fetch since: the issuer rotated its keys) is checked again — a forged token remembered
/// under an old set is refused.
#[tokio::test]
async fn sc_id_02_a_remembered_signature_is_only_the_signature() {
    let config = Config::from_toml(include_str!("../../../fuzz/fuzz_targets/token_config.toml"))
        .expect("the fuzz target's configuration loads");
    let set = serde_json::from_str(include_str!("../../../fuzz/fuzz_targets/token_keys.json"))
        .expect("the fuzz target's key set");
    let verifier = Verifier::fixed(&config, &set);
    let seed = |name: &str| std::fs::read_to_string(format!("{SEEDS}/{name}")).unwrap();
    let agent = seed("agent");
    let now = jiff::Timestamp::from_second(1_800_000_000).unwrap();
    let later = jiff::Timestamp::from_second(1_900_000_000).unwrap();
    let need = Need::Role(Role::Agent);
    let ask = |bearer: String, at| {
        let (verifier, config) = (&verifier, &config);
        async move { answer(&verifier.principal(config, &bearer, need, at).await) }
    };
    assert_eq!(ask(agent.clone(), now).await, "acme agent agent-1");
    assert_eq!(verifier.verified.lock().unwrap().len(), 1, "remembered");
    assert_eq!(
        ask(agent.clone(), later).await,
        "invalid",
        "expired, though remembered"
    );
    assert_eq!(ask(agent.clone(), now).await, "acme agent agent-1");

    let forged = seed("rs256-forged");
    let digest: [u8; 32] = Sha256::digest(forged.as_bytes()).into();
    verifier.verified.lock().unwrap().insert(digest, 7);
    assert_eq!(
        ask(forged.clone(), now).await,
        "invalid",
        "a signature remembered from another key set is checked again"
    );
}
