//! What an access token costs beside a key (issue 31, SC-ID-02), with the provider's keys
//! already cached — as on every request but the first of a process:
//!
//! - in process: authenticating one request's credential — a key (its SHA-256 looked up in the
//!   configuration) or a JWT (the key lookup misses, then the server's verifier: header, issuer,
//!   the cached key, the signature, the claims, the role) — for RS256, ES256 and EdDSA tokens,
//!   through [`Verifier::fixed`] with the bench's own key set (`keys/`, no network): a token
//!   seen the first time (its signature checked) and the same token again (its checked
//!   signature remembered, its claims checked);
//! - end to end: allow → run on the embedded server, the agent authenticating with its key on
//!   one side and with an RS256 token on the other, alternated a round each (`gate::alternate`).
//!   The server's verifier finds the same key set by OpenID discovery on a loopback server of
//!   the bench's, once, at its first token.

use crate::gate::{alternate, Runs, Side};
use crate::{stats::Summary, world};
use countersign::config::{Config, Role};
use countersign::identity::{Need, Verifier};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Batches per credential: the figure is their median.
const BATCHES: usize = 5;
const AUDIENCE: &str = "https://countersign.bench";

/// Tokens seen once each, per algorithm: the first-sight figure is their mean.
pub const FRESH: usize = 200;

pub struct Identity {
    /// Each credential's name and its median time to authenticate one request.
    pub alone: Vec<(&'static str, Duration)>,
    /// Each algorithm's mean time to authenticate a token seen the first time.
    pub first: Vec<(&'static str, Duration)>,
    pub calls: usize,
    pub key: Runs,
    pub token: Runs,
    pub lifecycles: usize,
    pub concurrency: usize,
}

impl Identity {
    /// The median of the rounds' ratios, token ÷ key: lifecycles per second and CPU per one.
    pub fn ratios(&self) -> (f64, f64) {
        let ratio =
            |a: &[f64], b: &[f64]| Summary::of(a.iter().zip(b).map(|(t, k)| t / k).collect()).p50;
        (
            ratio(&self.token.per_s, &self.key.per_s),
            ratio(&self.token.cpu, &self.key.cpu),
        )
    }
}

/// The bench tenant's agent, as a machine client's token names it, signed with `alg`.
fn token(issuer: &str, alg: Algorithm) -> String {
    signed(issuer, alg, "bench-agent-token")
}

/// The same, told apart from every other by `jti`.
fn signed(issuer: &str, alg: Algorithm, jti: &str) -> String {
    let (kid, key) = match alg {
        Algorithm::RS256 => (
            "bench-rs256",
            EncodingKey::from_rsa_der(include_bytes!("../keys/rs256.der")),
        ),
        Algorithm::ES256 => (
            "bench-es256",
            EncodingKey::from_ec_der(include_bytes!("../keys/es256.der")),
        ),
        _ => (
            "bench-eddsa",
            EncodingKey::from_ed_der(include_bytes!("../keys/eddsa.der")),
        ),
    };
    let mut header = Header::new(alg);
    header.kid = Some(kid.into());
    header.typ = Some("at+jwt".into());
    let now = jiff::Timestamp::now().as_second();
    let claims = json!({
        "iss": issuer, "aud": AUDIENCE, "client_id": "bench-agent", "sub": "bench-agent",
        "scope": "countersign:agent", "iat": now, "exp": now + 86_400, "jti": jti,
    });
    jsonwebtoken::encode(&header, &claims, &key).expect("the bench's token signs")
}

/// The bench's configuration, tenant `bench` trusting `issuer`.
async fn config(issuer: &str) -> (Config, countersign_tests::ToolServer) {
    let (mut toml, tools) = world::config().await;
    toml.push_str(&format!(
        "\n[tenants.bench.identity]\nissuer = \"{issuer}\"\naudience = \"{AUDIENCE}\"\n"
    ));
    (
        Config::from_toml(&toml).expect("the identity bench's config"),
        tools,
    )
}

/// OpenID discovery and the key set, on a loopback port: the issuer's URL.
async fn provider() -> String {
    use axum::{routing::get, Json, Router};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let issuer = format!("http://{}", listener.local_addr().unwrap());
    let set: Value = serde_json::from_str(include_str!("../keys/jwks.json")).unwrap();
    let discovery = json!({"issuer": issuer, "jwks_uri": format!("{issuer}/jwks")});
    let app = Router::new()
        .route(
            "/.well-known/openid-configuration",
            get(move || async move { Json(discovery) }),
        )
        .route("/jwks", get(move || async move { Json(set) }));
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    issuer
}

pub async fn measure(
    calls: usize,
    lifecycles: usize,
    concurrency: usize,
    rounds: usize,
) -> Identity {
    let issuer = provider().await;
    let (config, _tools) = config(&issuer).await;
    let set: Value = serde_json::from_str(include_str!("../keys/jwks.json")).unwrap();
    let verifier = Verifier::fixed(&config, &set);
    let mut alone = vec![("a key", per_key(&config, world::BENCH_AGENT, calls))];
    let mut first = Vec::new();
    for (name, alg) in [
        ("an RS256 token", Algorithm::RS256),
        ("an ES256 token", Algorithm::ES256),
        ("an EdDSA token", Algorithm::EdDSA),
    ] {
        let bearer = token(&issuer, alg);
        alone.push((name, per_token(&config, &verifier, &bearer, calls).await));
        first.push((name, first_sight(&config, &verifier, &issuer, alg).await));
    }
    let config = Arc::new(config);
    let body = json!({"tool": "search.instant", "args": {"q": "x"}});
    let sides = [
        Side::new(config.clone(), world::BENCH_AGENT, body.clone()),
        Side::new(config, &token(&issuer, Algorithm::RS256), body),
    ];
    let [key, token] = alternate(&sides, lifecycles, concurrency, rounds).await;
    Identity {
        alone,
        first,
        calls,
        key,
        token,
        lifecycles,
        concurrency,
    }
}

/// Tokens the verifier has not seen (each its own `jti`, signed before the clock starts): the
/// signature is checked for each.
async fn first_sight(
    config: &Config,
    verifier: &Verifier,
    issuer: &str,
    alg: Algorithm,
) -> Duration {
    let tokens: Vec<String> = (0..FRESH)
        .map(|i| signed(issuer, alg, &format!("fresh-{i}")))
        .collect();
    let (now, need) = (jiff::Timestamp::now(), Need::Role(Role::Agent));
    let started = Instant::now();
    for bearer in &tokens {
        assert!(config.principal(bearer).is_none());
        let who = verifier.principal(config, bearer, need, now).await;
        assert!(who.is_ok(), "a fresh token verifies");
    }
    started.elapsed() / FRESH as u32
}

fn median(mut batches: Vec<Duration>) -> Duration {
    batches.sort();
    batches[batches.len() / 2]
}

/// A key: what `api::auth::authenticate` does with one (its hash looked up).
fn per_key(config: &Config, key: &str, calls: usize) -> Duration {
    let who = config.principal(key).expect("the bench agent's key");
    assert_eq!(who.role, Role::Agent);
    median(
        (0..BATCHES)
            .map(|_| {
                let started = Instant::now();
                for _ in 0..calls {
                    std::hint::black_box(config.principal(std::hint::black_box(key)));
                }
                started.elapsed() / calls as u32
            })
            .collect(),
    )
}

/// A token: the key lookup misses, then the verifier (its keys cached), as
/// `api::auth::authenticate` does.
async fn per_token(config: &Config, verifier: &Verifier, bearer: &str, calls: usize) -> Duration {
    let now = jiff::Timestamp::now();
    let need = Need::Role(Role::Agent);
    let who = verifier.principal(config, bearer, need, now).await;
    assert_eq!(who.expect("the bench's token verifies").id, "bench-agent");
    let mut batches = Vec::new();
    for _ in 0..BATCHES {
        let started = Instant::now();
        for _ in 0..calls {
            let bearer = std::hint::black_box(bearer);
            assert!(config.principal(bearer).is_none());
            let who = verifier.principal(config, bearer, need, now).await;
            std::hint::black_box(who.is_ok());
        }
        batches.push(started.elapsed() / calls as u32);
    }
    median(batches)
}
