//! Identity from the organization's provider (docs/identity.md, SC-ID-01 … SC-ID-04): a real
//! OpenID provider — `oidc-provider` (scripts/oidc-provider.sh installs it; tests/identity/
//! provider.mjs configures it) with client credentials, authorization code + PKCE, resource
//! indicators issuing JWT access tokens and dynamic client registration — and the local server
//! over real HTTP, on every store where a token submits or approves.

#[path = "aws_support/mod.rs"]
mod aws_support;

use base64::Engine as _;
use countersign::config::Config;
use countersign_tests::{config_toml, keys, on_every_store, stores::Backend, Api, ToolServer};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::{process::Command, sync::Arc};

/// This server's resource identifier in the tests' configuration.
const AUD: &str = "https://countersign.test";

/// The provider process (`countersign_tests::idp`), and a client for it.
struct Idp {
    // Held for its life: dropped, the provider stops.
    _provider: countersign_tests::idp::Provider,
    acme: String,
    globex: String,
    signer: String,
    http: reqwest::Client,
}

impl Idp {
    fn start() -> Idp {
        let provider = countersign_tests::idp::Provider::start();
        Idp {
            acme: provider.acme.clone(),
            globex: provider.globex.clone(),
            signer: provider.signer.clone(),
            _provider: provider,
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
        }
    }

    fn issuer(&self, tenant: &str) -> &str {
        if tenant == "acme" {
            &self.acme
        } else {
            &self.globex
        }
    }

    /// A machine client's token (client credentials, with a resource indicator).
    async fn client_token(&self, tenant: &str, client: &str, secret: &str, scope: &str) -> String {
        let request = self
            .http
            .post(format!("{}/token", self.issuer(tenant)))
            .basic_auth(client, Some(secret))
            .form(&[
                ("grant_type", "client_credentials"),
                ("scope", scope),
                ("resource", AUD),
            ]);
        text_of(&answer(request).await, "access_token")
    }

    /// A person's token: authorization code with PKCE through the provider's login page, where
    /// `person` signs in (the page reads `login_hint`), for `resource`.
    async fn person_token(
        &self,
        tenant: &str,
        person: &str,
        scope: &str,
        resource: &str,
    ) -> String {
        let client = format!("{tenant}-app");
        self.person_token_through(tenant, &client, person, scope, resource)
            .await
    }

    /// A person's token through `client` (a public client allowed the code grant).
    async fn person_token_through(
        &self,
        tenant: &str,
        client: &str,
        person: &str,
        scope: &str,
        resource: &str,
    ) -> String {
        let issuer = self.issuer(tenant);
        let verifier = format!("v-{}-{}", ulid::Ulid::new(), ulid::Ulid::new());
        let challenge = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(Sha256::digest(verifier.as_bytes()));
        let redirect = "http://127.0.0.1/callback";
        let mut url = reqwest::Url::parse(&format!("{issuer}/auth")).unwrap();
        url.query_pairs_mut()
            .append_pair("client_id", client)
            .append_pair("response_type", "code")
            .append_pair("redirect_uri", redirect)
            .append_pair("scope", &format!("openid email profile {scope}"))
            .append_pair("code_challenge", &challenge)
            .append_pair("code_challenge_method", "S256")
            .append_pair("resource", resource)
            .append_pair("login_hint", person)
            .append_pair("state", "s");
        // The person's browser, to the redirect back with the code.
        let mut browser = countersign_tests::idp::Browser::default();
        let (to, _) = browser
            .follow(&self.http, self.http.get(url), Some(redirect))
            .await;
        let code = to.query_pairs().find(|(k, _)| k == "code");
        let code = code
            .unwrap_or_else(|| panic!("a code: {to}"))
            .1
            .into_owned();
        let request = self.http.post(format!("{issuer}/token")).form(&[
            ("grant_type", "authorization_code"),
            ("code", &code),
            ("redirect_uri", redirect),
            ("client_id", client),
            ("code_verifier", &verifier),
            ("resource", resource),
        ]);
        text_of(&answer(request).await, "access_token")
    }

    /// A token the provider would never issue, signed by the test signer: with `tenant`'s own
    /// `key` (`rsa`, `ec`, `ed`), a stranger's, none, or HS256 under the public key.
    async fn forge(&self, tenant: &str, key: &str, header: Value, claims: Value) -> String {
        let request = self
            .http
            .post(&self.signer)
            .json(&json!({"tenant": tenant, "key": key, "header": header, "claims": claims}));
        text_of(&answer(request).await, "token")
    }

    /// Claims as the acme provider issues an agent's token, `exp` from now.
    fn claims(&self, exp_in: i64) -> Value {
        let now = jiff::Timestamp::now().as_second();
        json!({
            "iss": self.acme, "aud": AUD, "sub": "acme-bot", "client_id": "acme-bot",
            "scope": "countersign:agent", "iat": now, "exp": now + exp_in,
        })
    }
}

/// The tests' configuration with both tenants trusting their provider.
fn config(tools: &ToolServer, idp: &Idp, extra: &str) -> Arc<Config> {
    config_of(config_toml(tools, "1m", "5s"), idp, extra)
}

/// `text` (the tests' configuration, perhaps edited) with both tenants trusting their provider.
fn config_of(text: String, idp: &Idp, extra: &str) -> Arc<Config> {
    let text = text
        + &format!(
            "\n[tenants.acme.identity]\nissuer = \"{}\"\naudience = \"{AUD}\"\njwks_refresh = \"1s\"\n{extra}\n\
             [tenants.globex.identity]\nissuer = \"{}\"\naudience = \"{AUD}\"\n",
            idp.acme, idp.globex
        );
    Arc::new(
        Config::from_toml(&text)
            .and_then(Config::read_keys)
            .expect("config"),
    )
}

struct World {
    api: Api,
    idp: Idp,
    _tools: ToolServer,
    _server: countersign::boot::embedded::Server,
}

async fn world(backend: Backend, label: &str, extra: &str) -> World {
    world_of(backend, label, extra, |text| text).await
}

/// A world whose configuration is the tests' one as `edit` leaves it.
async fn world_of(
    backend: Backend,
    label: &str,
    extra: &str,
    edit: impl Fn(String) -> String,
) -> World {
    let idp = Idp::start();
    let tools = ToolServer::start().await;
    let place = countersign_tests::stores::Place::fresh(backend, label).await;
    let text = edit(config_toml(&tools, "1m", "5s"));
    let server = place.serve(config_of(text, &idp, extra)).await;
    World {
        api: Api::new(server.addr),
        idp,
        _tools: tools,
        _server: server,
    }
}

/// An API answer with its headers.
async fn send(
    api: &Api,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> (u16, Value, reqwest::header::HeaderMap) {
    api.send(
        method.parse().unwrap(),
        path,
        token,
        body.map(|b| b.to_string().into_bytes()),
        &[],
    )
    .await
}

fn challenge(headers: &reqwest::header::HeaderMap) -> String {
    headers
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default()
}

/// The actions the tenant's admin can list: how "nothing stored" is checked.
async fn stored(api: &Api) -> usize {
    let (s, v) = api.get("/v1/actions", keys::ADMIN).await;
    assert_eq!(s, 200, "{v}");
    v["data"].as_array().map(Vec::len).expect("a list")
}

/// SC-ID-01: the protected resource metadata (RFC 9728) of the API and of `/mcp`, and every
/// refusal's challenge pointing at it: `invalid_token` where a credential was sent,
/// `insufficient_scope` with the scope a route needs.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sc_id_01_protected_resource_metadata_and_challenges() {
    let w = world(Backend::Sqlite, "id01", "").await;
    let host = w.api.base.trim_start_matches("http://").to_owned();
    let (s, api_doc, _) = send(
        &w.api,
        "GET",
        "/.well-known/oauth-protected-resource",
        None,
        None,
    )
    .await;
    assert_eq!(s, 200, "{api_doc}");
    assert_eq!(api_doc["resource"], format!("http://{host}"));
    let mut servers: Vec<&str> = api_doc["authorization_servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    servers.sort();
    let mut expected = vec![w.idp.acme.as_str(), w.idp.globex.as_str()];
    expected.sort();
    assert_eq!(servers, expected);
    assert_eq!(
        api_doc["scopes_supported"],
        json!([
            "countersign:agent",
            "countersign:approve",
            "countersign:admin"
        ])
    );
    assert_eq!(api_doc["bearer_methods_supported"], json!(["header"]));
    let (s, mcp_doc, _) = send(
        &w.api,
        "GET",
        "/.well-known/oauth-protected-resource/mcp",
        None,
        None,
    )
    .await;
    assert_eq!(s, 200);
    assert_eq!(mcp_doc["resource"], format!("http://{host}/mcp"));
    assert_eq!(mcp_doc["scopes_supported"], json!(["countersign:agent"]));

    let api_meta =
        format!("resource_metadata=\"http://{host}/.well-known/oauth-protected-resource\"");
    let mcp_meta =
        format!("resource_metadata=\"http://{host}/.well-known/oauth-protected-resource/mcp\"");
    // No credential: a bare challenge, on the API and on MCP.
    let (s, v, h) = send(&w.api, "GET", "/v1/actions", None, None).await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (401, Some("unauthenticated"))
    );
    assert_eq!(challenge(&h), format!("Bearer {api_meta}"));
    let rpc = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}});
    let (s, _, h) = send(&w.api, "POST", "/mcp", None, Some(rpc.clone())).await;
    assert_eq!(s, 401);
    assert_eq!(challenge(&h), format!("Bearer {mcp_meta}"));
    // A credential that names nobody: invalid_token.
    let (s, _, h) = send(&w.api, "GET", "/v1/actions", Some("no-such-key"), None).await;
    assert_eq!(s, 401);
    assert!(
        challenge(&h).starts_with(&format!("Bearer {api_meta}, error=\"invalid_token\"")),
        "{}",
        challenge(&h)
    );
    let expired = w
        .idp
        .forge("acme", "rsa", json!({}), w.idp.claims(-3600))
        .await;
    let (s, _, h) = send(&w.api, "POST", "/mcp", Some(&expired), Some(rpc.clone())).await;
    assert_eq!(s, 401);
    assert!(
        challenge(&h).contains("error=\"invalid_token\""),
        "{}",
        challenge(&h)
    );
    assert!(challenge(&h).contains(&mcp_meta));
    // An agent's token on an approver's route: 403 insufficient_scope, naming the scope.
    let agent = w
        .idp
        .client_token("acme", "acme-bot", "bot-secret", "countersign:agent")
        .await;
    let (s, v, h) = send(
        &w.api,
        "POST",
        "/v1/actions/act_01J00000000000000000000000/approve",
        Some(&agent),
        Some(json!({"context_digest": "x"})),
    )
    .await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (403, Some("forbidden")),
        "{v}"
    );
    assert!(
        challenge(&h).contains("error=\"insufficient_scope\", scope=\"countersign:approve\""),
        "{}",
        challenge(&h)
    );
    // An approver's token on MCP (agents only): insufficient_scope too.
    let approver = w
        .idp
        .person_token("acme", "ada", "countersign:approve", AUD)
        .await;
    let (s, _, h) = send(&w.api, "POST", "/mcp", Some(&approver), Some(rpc)).await;
    assert_eq!(s, 403);
    assert!(
        challenge(&h).contains("scope=\"countersign:agent\""),
        "{}",
        challenge(&h)
    );
}

/// SC-ID-02, SC-ID-03: a machine client's token submits as the agent its client id names; a
/// person signed in through the provider (authorization code + PKCE) approves as that person;
/// a client registered dynamically submits as itself; keys keep working beside tokens; and an
/// MCP client's token for `/mcp` lists the tools.
async fn tokens_submit_and_approve(backend: Backend) {
    let w = world(backend, "id02", "").await;
    let agent = w
        .idp
        .client_token("acme", "acme-bot", "bot-secret", "countersign:agent")
        .await;
    let (s, v) = w
        .api
        .submit(&agent, json!({"tool": "mail.send", "args": {"to": "a@b"}}))
        .await;
    assert_eq!(
        (s, v["state"].as_str()),
        (202, Some("pending_approval")),
        "{v}"
    );
    assert_eq!(v["agent_id"], "acme-bot");
    let id = v["id"].as_str().unwrap().to_owned();
    let digest = v["approval"]["context_digest"].as_str().unwrap().to_owned();

    let (s, me) = w.api.get("/v1/me", &agent).await;
    assert_eq!(
        (s, me["role"].as_str(), me["key_id"].as_str()),
        (200, Some("agent"), Some("acme-bot"))
    );

    let ada = w
        .idp
        .person_token("acme", "ada", "countersign:approve", AUD)
        .await;
    let (s, v) = approve_with(&w.api, &id, &digest, &ada).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["approval"]["approver"], "ada", "{v}");

    // Dynamic client registration: a new client, its own token, its own agent id.
    let registered = register(
        &w.idp,
        "acme",
        json!({
            "grant_types": ["client_credentials"], "response_types": [], "redirect_uris": [],
            "token_endpoint_auth_method": "client_secret_basic", "scope": "countersign:agent",
        }),
    )
    .await;
    let client = text_of(&registered, "client_id");
    let secret = registered["client_secret"].as_str().unwrap();
    let token = w
        .idp
        .client_token("acme", &client, secret, "countersign:agent")
        .await;
    let (s, v) = w
        .api
        .submit(&token, json!({"tool": "search.web", "args": {}}))
        .await;
    assert_eq!(
        (s, v["agent_id"].as_str()),
        (200, Some(client.as_str())),
        "{v}"
    );

    // Keys beside tokens.
    let (s, v) = w
        .api
        .submit(keys::AGENT, json!({"tool": "search.web", "args": {}}))
        .await;
    assert_eq!((s, v["agent_id"].as_str()), (200, Some("agent-1")), "{v}");

    // A person's agent through MCP: a token for the /mcp resource.
    let mcp = w
        .idp
        .person_token("acme", "bob", "countersign:agent", &format!("{AUD}/mcp"))
        .await;
    let rpc = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}});
    let (s, v, _) = send(&w.api, "POST", "/mcp", Some(&mcp), Some(rpc)).await;
    assert_eq!(s, 200, "{v}");
    assert!(
        v["result"]["tools"]
            .as_array()
            .is_some_and(|t| !t.is_empty()),
        "{v}"
    );
}

on_every_store!(tokens_submit_and_approve:
    sc_id_03_tokens_submit_and_approve_sqlite,
    sc_id_03_tokens_submit_and_approve_dynamodb,
    sc_id_03_tokens_submit_and_approve_postgres);

/// The tests' configuration with `mail.*` needing two approvals (SC-POL-04).
fn two_approvals(text: String) -> String {
    let rule = r#"{ tool = "mail.*", decision = "require_approval" }"#;
    assert!(text.contains(rule), "the tests' mail rule");
    text.replace(
        rule,
        r#"{ tool = "mail.*", decision = "require_approval", approvals = 2 }"#,
    )
}

/// A public client registered at `tenant`'s provider for the code grant (a second app a person
/// signs in through).
async fn code_client(idp: &Idp, tenant: &str) -> String {
    let metadata = json!({
        "grant_types": ["authorization_code"], "response_types": ["code"],
        "redirect_uris": ["http://127.0.0.1/callback"], "token_endpoint_auth_method": "none",
        "scope": "openid email profile countersign:approve",
    });
    text_of(&register(idp, tenant, metadata).await, "client_id")
}

/// A client registered at `tenant`'s provider (dynamic client registration) with `metadata`.
async fn register(idp: &Idp, tenant: &str, metadata: Value) -> Value {
    let request = idp
        .http
        .post(format!("{}/reg", idp.issuer(tenant)))
        .json(&metadata);
    answer(request).await
}

/// The JSON the provider answers `request` with.
async fn answer(request: reqwest::RequestBuilder) -> Value {
    request.send().await.unwrap().json().await.unwrap()
}

/// The string `member` of a provider's `answer`.
fn text_of(answer: &Value, member: &str) -> String {
    answer[member]
        .as_str()
        .unwrap_or_else(|| panic!("{member} in {answer}"))
        .to_owned()
}

/// SC-ID-06 (SC-POL-04 by person): a quorum of two counts distinct people, issuer and subject.
/// Ada approves, then Ada again with a token from another client (the same person: counted
/// once), then Bob: the ticket commits, signed by both. Caught on main: the re-check of earlier
/// approvals (`lapsed`) looked for an approver key named `ada`, found none, and dropped her
/// approval — so with tokens a quorum never completed.
async fn quorum_counts_people(backend: Backend) {
    let w = world_of(backend, "id06", "", two_approvals).await;
    let (s, v) = w
        .api
        .submit(
            keys::AGENT,
            json!({"tool": "mail.send", "args": {"to": "a@b"}}),
        )
        .await;
    assert_eq!(
        (s, v["state"].as_str()),
        (202, Some("pending_approval")),
        "{v}"
    );
    let id = v["id"].as_str().unwrap().to_owned();
    let digest = v["approval"]["context_digest"].as_str().unwrap().to_owned();
    let approve = |token: String| {
        let (api, id, digest) = (&w.api, &id, &digest);
        async move { approve_with(api, id, digest, &token).await }
    };

    let ada = w
        .idp
        .person_token("acme", "ada", "countersign:approve", AUD)
        .await;
    let (s, v) = approve(ada).await;
    assert_eq!(
        (s, v["state"].as_str()),
        (200, Some("pending_approval")),
        "{v}"
    );
    let other_app = code_client(&w.idp, "acme").await;
    let ada_again = w
        .idp
        .person_token_through("acme", &other_app, "ada", "countersign:approve", AUD)
        .await;
    let (s, v) = approve(ada_again).await;
    assert_eq!(
        (s, v["state"].as_str()),
        (200, Some("pending_approval")),
        "the same person twice counts once: {v}"
    );

    let bob = w
        .idp
        .person_token("acme", "bob", "countersign:approve", AUD)
        .await;
    let (s, v) = approve(bob).await;
    assert_eq!(s, 200, "{v}");
    assert_ne!(v["state"], "pending_approval", "two people approved: {v}");
    assert_eq!(
        v["approval"]["quorum"]["signed"]
            .as_array()
            .map(|a| a.iter().map(|s| s["approver"].clone()).collect::<Vec<_>>()),
        Some(vec![json!("ada"), json!("bob")]),
        "{v}"
    );
    let issuer = w.idp.issuer("acme");
    let signed = &v["approval"]["quorum"]["signed"];
    assert_eq!(signed[0]["person"]["subject"], "ada", "{v}");
    assert_eq!(signed[0]["person"]["issuer"], issuer, "{v}");
    assert_eq!(signed[1]["person"]["name"], "Bob", "{v}");
}

/// SC-ID-06 and SC-POL-04 after a change of the config (the next process reads it): a person's
/// approval stands while the tenant still trusts the issuer that named them, and lapses once it
/// does not; a key's approval lapses once the tenant stops taking keys for people. Three
/// quorums of two, each with one approval given under the first config.
async fn approvals_after_a_config_change(backend: Backend) {
    let idp = Idp::start();
    let tools = ToolServer::start().await;
    let place = countersign_tests::stores::Place::fresh(backend, "id06lapse").await;
    let text = two_approvals(config_toml(&tools, "1m", "5s"));
    let server = place.serve(config_of(text.clone(), &idp, "")).await;
    let api = Api::new(server.addr);
    let ada = idp
        .person_token("acme", "ada", "countersign:approve", AUD)
        .await;
    let mut quorums = Vec::new();
    for by in [ada.as_str(), keys::APPROVER, ada.as_str()] {
        let mail = json!({"tool": "mail.send", "args": {"to": "a@b"}});
        let (_, v) = api.submit(keys::AGENT, mail).await;
        let id = v["id"].as_str().unwrap().to_owned();
        let digest = v["approval"]["context_digest"].as_str().unwrap().to_owned();
        let (s, v) = approve_with(&api, &id, &digest, by).await;
        assert_eq!(
            (s, v["state"].as_str()),
            (200, Some("pending_approval")),
            "{v}"
        );
        quorums.push((id, digest));
    }
    server.shutdown().await.unwrap();

    // Keys off for people, the issuer still trusted: Ada's approval stands, the key's lapses.
    let server = place
        .serve(config_of(text.clone(), &idp, "keys_for_people = false"))
        .await;
    let api = Api::new(server.addr);
    let bob = idp
        .person_token("acme", "bob", "countersign:approve", AUD)
        .await;
    let (s, v) = approve_with(&api, &quorums[0].0, &quorums[0].1, &bob).await;
    assert_eq!(s, 200, "{v}");
    assert_ne!(
        v["state"], "pending_approval",
        "Ada's approval counted: {v}"
    );
    let (s, v) = approve_with(&api, &quorums[1].0, &quorums[1].1, &bob).await;
    assert_eq!(
        (s, v["state"].as_str()),
        (200, Some("pending_approval")),
        "{v}"
    );
    assert_eq!(v["approvals"][0]["approver"], "bob", "{v}");
    let (_, events) = api
        .get(&format!("/v1/actions/{}/events", quorums[1].0), &bob)
        .await;
    let last = events["data"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(
        last["reason"], "approval_recorded; lapsed: approver-1",
        "{last}"
    );
    server.shutdown().await.unwrap();

    // The tenant no longer trusts its provider: Ada's approval lapses; a key decides alone.
    let keys_only = text
        + &format!(
            "\n[tenants.globex.identity]\nissuer = \"{}\"\naudience = \"{AUD}\"\n",
            idp.globex
        );
    let config = Config::from_toml(&keys_only)
        .and_then(Config::read_keys)
        .unwrap();
    let server = place.serve(Arc::new(config)).await;
    let api = Api::new(server.addr);
    let (s, v) = api.approve(&quorums[2].0, &quorums[2].1).await;
    assert_eq!(
        (s, v["state"].as_str()),
        (200, Some("pending_approval")),
        "{v}"
    );
    let (_, events) = api
        .get(
            &format!("/v1/actions/{}/events", quorums[2].0),
            keys::APPROVER,
        )
        .await;
    let last = events["data"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["reason"], "approval_recorded; lapsed: ada", "{last}");
    server.shutdown().await.unwrap();
}

on_every_store!(approvals_after_a_config_change:
    sc_id_06_approvals_after_a_config_change_sqlite,
    sc_id_06_approvals_after_a_config_change_dynamodb,
    sc_id_06_approvals_after_a_config_change_postgres);

/// An approve of `id`'s context `digest` with `token`.
async fn approve_with(api: &Api, id: &str, digest: &str, token: &str) -> (u16, Value) {
    let path = format!("/v1/actions/{id}/approve");
    api.post(&path, token, json!({"context_digest": digest}))
        .await
}

/// A person's token: `tenant`'s provider signs `person` in through the tenant's app.
async fn token_of(w: &World, person: &str, scope: &str) -> String {
    w.idp.person_token("acme", person, scope, AUD).await
}

/// The action `id` once sealed, read with `key` (one that may see it).
async fn sealed(api: &Api, id: &str, key: &str) -> Value {
    for _ in 0..200 {
        let (s, v) = api.get(&format!("/v1/actions/{id}"), key).await;
        assert_eq!(s, 200, "{v}");
        if v["sealed_at"].is_string() {
            return v;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("{id} never sealed");
}

/// The actors of `id`'s audit events, in order, as `(type, id, person's subject)`.
async fn actors(api: &Api, id: &str, key: &str) -> Vec<(String, String, Option<String>)> {
    let (s, v) = api.get(&format!("/v1/actions/{id}/events"), key).await;
    assert_eq!(s, 200, "{v}");
    let text = |v: &Value| v.as_str().map(str::to_owned);
    v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let a = &e["actor"];
            (
                text(&a["type"]).unwrap(),
                text(&a["id"]).unwrap_or_default(),
                text(&a["person"]["subject"]),
            )
        })
        .collect()
}

/// SC-ID-07 and SC-ID-08: who acted is on the record. Bob's agent submits and Ada approves,
/// each with a token: the submit and approve events name the person (issuer, subject, email,
/// name), the record's approval names Ada, the deed (format v3) names her and verifies with the
/// tenant's public key; a deny and a cancel by token name theirs; keys name no person.
async fn people_on_the_record(backend: Backend) {
    let w = world(backend, "id07", "").await;
    let (ada, bob_agent) = (
        token_of(&w, "ada", "countersign:approve").await,
        token_of(&w, "bob", "countersign:agent").await,
    );
    let mail = json!({"tool": "mail.send", "args": {"to": "a@b"}});
    let (s, v) = w.api.submit(&bob_agent, mail.clone()).await;
    assert_eq!((s, v["agent_id"].as_str()), (202, Some("bob")), "{v}");
    assert_eq!(v["actor"]["person"]["email"], "bob@example.com", "{v}");
    let id = v["id"].as_str().unwrap().to_owned();
    let digest = v["approval"]["context_digest"].as_str().unwrap().to_owned();
    let (s, v) = approve_with(&w.api, &id, &digest, &ada).await;
    assert_eq!(s, 200, "{v}");
    let v = sealed(&w.api, &id, keys::APPROVER).await;
    assert_eq!(v["state"], "succeeded", "{v}");
    let person = &v["approval"]["person"];
    assert_eq!(
        (
            &person["issuer"],
            &person["subject"],
            &person["email"],
            &person["name"]
        ),
        (
            &json!(w.idp.issuer("acme")),
            &json!("ada"),
            &json!("ada@example.com"),
            &json!("Ada Lovelace")
        ),
        "{v}"
    );
    let trail = actors(&w.api, &id, keys::APPROVER).await;
    let who =
        |t: &str, id: &str, p: Option<&str>| (t.to_owned(), id.to_owned(), p.map(str::to_owned));
    assert_eq!(trail[0], who("agent", "bob", Some("bob")), "{trail:?}");
    assert_eq!(trail[1], who("user", "ada", Some("ada")), "{trail:?}");

    // The deed names Ada, and verifies offline.
    let res = reqwest::Client::new()
        .get(format!("{}/v1/actions/{id}/deed", w.api.base))
        .bearer_auth(keys::APPROVER)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let file = res.bytes().await.unwrap();
    let deed =
        countersign::domain::deed::verify_with_pem(countersign_tests::DEED_PUBLIC_PEM, &file)
            .unwrap();
    // A person through the API: v4, the channel beside the person (SC-CH-08).
    assert_eq!(deed.format, countersign::domain::deed::FORMAT_CHANNEL);
    // `tests/fixtures/person/deed-v3.json`, which `countersign verify` is tested on
    // (functions/cli/tests/cli.rs, SC-ID-08), was this deed before channels were recorded: it
    // stays as written, the v3 deed every verifier must keep accepting.
    assert_eq!(
        deed.approved_by().as_deref(),
        Some(
            format!(
                "ada — Ada Lovelace <ada@example.com> (ada at {}), through api",
                w.idp.issuer("acme")
            )
            .as_str()
        )
    );

    // A deny by a person, a cancel by a person's agent; a key's deny names nobody.
    let (_, v) = w.api.submit(keys::AGENT, mail.clone()).await;
    let denied = v["id"].as_str().unwrap().to_owned();
    let (s, v) = w
        .api
        .post(
            &format!("/v1/actions/{denied}/deny"),
            &ada,
            json!({"reason": "not today"}),
        )
        .await;
    assert_eq!((s, v["state"].as_str()), (200, Some("denied")), "{v}");
    let trail = actors(&w.api, &denied, keys::APPROVER).await;
    assert_eq!(trail[0], who("agent", "agent-1", None), "{trail:?}");
    assert_eq!(trail[1], who("user", "ada", Some("ada")), "{trail:?}");
    let (_, v) = w.api.submit(&bob_agent, mail).await;
    let cancelled = v["id"].as_str().unwrap().to_owned();
    let (s, v) = w.api.cancel(&cancelled, &bob_agent).await;
    assert_eq!((s, v["state"].as_str()), (200, Some("cancelled")), "{v}");
    let trail = actors(&w.api, &cancelled, keys::APPROVER).await;
    assert_eq!(trail[1], who("agent", "bob", Some("bob")), "{trail:?}");
}

on_every_store!(people_on_the_record:
    sc_id_07_people_on_the_record_sqlite,
    sc_id_07_people_on_the_record_dynamodb,
    sc_id_07_people_on_the_record_postgres);

on_every_store!(quorum_counts_people:
    sc_id_06_a_quorum_counts_people_sqlite,
    sc_id_06_a_quorum_counts_people_dynamodb,
    sc_id_06_a_quorum_counts_people_postgres);

/// SC-ID-04: hostile tokens — expired, not yet valid, another audience, another issuer, an
/// unknown key, a stranger's signature, `alg: none`, HS256 under the public key, the other
/// tenant's, oversized, malformed — are each refused 401 `invalid_token`, and nothing is
/// stored. A clock a little off (inside the 30 s leeway) is not refused.
async fn hostile_tokens(backend: Backend) {
    let w = world(backend, "id04", "").await;
    let idp = &w.idp;
    let good = idp.claims(300);
    let with = |k: &str, v: Value| {
        let mut c = good.clone();
        c[k] = v;
        c
    };
    let now = jiff::Timestamp::now().as_second();
    let hostile = [
        (
            "expired",
            idp.forge("acme", "rsa", json!({}), idp.claims(-60)).await,
        ),
        (
            "not yet valid",
            idp.forge("acme", "rsa", json!({}), with("nbf", json!(now + 120)))
                .await,
        ),
        (
            "another audience",
            idp.forge(
                "acme",
                "rsa",
                json!({}),
                with("aud", json!("https://elsewhere.test")),
            )
            .await,
        ),
        (
            "another issuer",
            idp.forge(
                "acme",
                "rsa",
                json!({}),
                with("iss", json!("https://evil.test")),
            )
            .await,
        ),
        (
            "unknown kid",
            idp.forge("acme", "rsa", json!({"kid": "nope"}), good.clone())
                .await,
        ),
        (
            "stranger's key",
            idp.forge("acme", "stranger", json!({}), good.clone()).await,
        ),
        (
            "alg none",
            idp.forge("acme", "none", json!({}), good.clone()).await,
        ),
        (
            "HS256 under the public key",
            idp.forge("acme", "hs256-public", json!({}), good.clone())
                .await,
        ),
        (
            "globex's key claiming acme",
            idp.forge("globex", "rsa", json!({"kid": "acme-rsa"}), good.clone())
                .await,
        ),
        (
            "an ID token",
            idp.forge("acme", "rsa", json!({"typ": "id_token+jwt"}), good.clone())
                .await,
        ),
        (
            "oversized",
            idp.forge(
                "acme",
                "rsa",
                json!({}),
                with("pad", json!("x".repeat(20_000))),
            )
            .await,
        ),
        (
            "malformed",
            "eyJhbGciOiJSUzI1NiJ9.not-base64!.sig".to_owned(),
        ),
    ];
    for (name, token) in &hostile {
        let (s, v, h) = send(
            &w.api,
            "POST",
            "/v1/actions",
            Some(token),
            Some(json!({"tool": "search.web", "args": {}})),
        )
        .await;
        assert_eq!(
            (s, v["error"]["code"].as_str()),
            (401, Some("unauthenticated")),
            "{name}: {v}"
        );
        assert!(
            challenge(&h).contains("error=\"invalid_token\""),
            "{name}: {}",
            challenge(&h)
        );
    }
    assert_eq!(stored(&w.api).await, 0, "nothing stored");

    // A token of tenant globex acts in globex only: acme's actions are not there for it.
    let (_, v) = w
        .api
        .submit(keys::AGENT, json!({"tool": "mail.send", "args": {}}))
        .await;
    let id = v["id"].as_str().unwrap();
    let globex = idp
        .client_token("globex", "globex-bot", "bot-secret", "countersign:agent")
        .await;
    let (s, _) = w.api.get(&format!("/v1/actions/{id}"), &globex).await;
    assert_eq!(s, 404, "another tenant's action is not there");

    // Each algorithm the provider signs with verifies; a clock 20 s off does not matter.
    for key in ["rsa", "ec", "ed"] {
        let token = idp.forge("acme", key, json!({}), idp.claims(300)).await;
        let (s, v) = w
            .api
            .submit(&token, json!({"tool": "search.web", "args": {}}))
            .await;
        assert_eq!(s, 200, "{key}: {v}");
    }
    let skewed = [with("exp", json!(now - 20)), with("nbf", json!(now + 20))];
    for claims in skewed {
        let token = idp.forge("acme", "rsa", json!({}), claims.clone()).await;
        let (s, v) = w
            .api
            .submit(&token, json!({"tool": "search.web", "args": {}}))
            .await;
        assert_eq!(s, 200, "{claims}: {v}");
    }
}

on_every_store!(hostile_tokens:
    sc_id_04_hostile_tokens_are_refused_and_nothing_stored_sqlite,
    sc_id_04_hostile_tokens_are_refused_and_nothing_stored_dynamodb,
    sc_id_04_hostile_tokens_are_refused_and_nothing_stored_postgres);

/// A provider stand-in that is not a provider: its discovery names a key set that `jwks`
/// answers (garbage, or a hang). For the failure modes only; every good token comes from the
/// real one.
async fn broken_provider(jwks: &'static str) -> String {
    use axum::{routing::get, Json, Router};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let doc = json!({"issuer": base, "jwks_uri": format!("{base}/jwks")});
    let app = Router::new()
        .route(
            "/.well-known/openid-configuration",
            get(move || async move { Json(doc) }),
        )
        .route(
            "/jwks",
            get(move || async move {
                if jwks == "hang" {
                    tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
                }
                jwks
            }),
        );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    base
}

/// SC-ID-04: with the provider unreachable, hanging or serving garbage, a token caller is told
/// to retry (503 `unavailable`) and nothing is stored, while keys keep working; keys once
/// fetched keep serving when the provider goes away.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sc_id_04_provider_down_tokens_wait_keys_work() {
    let idp = Idp::start();
    let tools = ToolServer::start().await;
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    for (name, issuer) in [
        ("unreachable", closed),
        ("garbage", broken_provider("{\"keys\": \"no\"}").await),
        ("not JSON", broken_provider("<html>").await),
        ("hangs", broken_provider("hang").await),
    ] {
        let text = config_toml(&tools, "1m", "5s")
            + &format!("\n[tenants.acme.identity]\nissuer = \"{issuer}\"\naudience = \"{AUD}\"\n");
        let config = Arc::new(
            Config::from_toml(&text)
                .and_then(Config::read_keys)
                .unwrap(),
        );
        let place = countersign_tests::stores::Place::fresh(Backend::Sqlite, "id04down").await;
        let server = place.serve(config).await;
        let api = Api::new(server.addr);
        let mut claims = idp.claims(300);
        claims["iss"] = json!(issuer);
        let token = idp.forge("acme", "rsa", json!({}), claims).await;
        let (s, v, h) = send(
            &api,
            "POST",
            "/v1/actions",
            Some(&token),
            Some(json!({"tool": "search.web", "args": {}})),
        )
        .await;
        assert_eq!(
            (s, v["error"]["code"].as_str()),
            (503, Some("unavailable")),
            "{name}: {v}"
        );
        assert!(h.get("retry-after").is_some(), "{name}");
        assert_eq!(stored(&api).await, 0, "{name}: nothing stored");
        let (s, v) = api
            .submit(keys::AGENT, json!({"tool": "search.web", "args": {}}))
            .await;
        assert_eq!(s, 200, "{name}: keys still work: {v}");
    }

    // Keys fetched once serve on while the provider is gone.
    let place = countersign_tests::stores::Place::fresh(Backend::Sqlite, "id04cache").await;
    let server = place.serve(config(&tools, &idp, "")).await;
    let api = Api::new(server.addr);
    let first = idp.forge("acme", "rsa", json!({}), idp.claims(300)).await;
    let later = idp.forge("acme", "ec", json!({}), idp.claims(300)).await;
    let (s, v) = api
        .submit(&first, json!({"tool": "search.web", "args": {}}))
        .await;
    assert_eq!(s, 200, "{v}");
    drop(idp);
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let (s, v) = api
        .submit(&later, json!({"tool": "search.web", "args": {}}))
        .await;
    assert_eq!(s, 200, "cached keys serve: {v}");
}

/// SC-ID-03: a tenant that signs its people in with its provider (`keys_for_people = false`)
/// refuses its approver and admin keys; its agents' keys keep working.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sc_id_03_keys_off_for_people() {
    let w = world(Backend::Sqlite, "id03keys", "keys_for_people = false").await;
    let (s, v) = w
        .api
        .submit(keys::AGENT, json!({"tool": "mail.send", "args": {}}))
        .await;
    assert_eq!(s, 202, "{v}");
    let id = v["id"].as_str().unwrap().to_owned();
    let digest = v["approval"]["context_digest"].as_str().unwrap().to_owned();
    let (s, v) = w.api.approve(&id, &digest).await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (401, Some("unauthenticated")),
        "{v}"
    );
    let (s, _) = w.api.get("/v1/quarantine", keys::ADMIN).await;
    assert_eq!(s, 401);
    // The other tenant's keys are its own business.
    let (s, _) = w.api.get("/v1/actions", keys::OTHER_TENANT_APPROVER).await;
    assert_eq!(s, 200);
    let ada = w
        .idp
        .person_token("acme", "ada", "countersign:approve", AUD)
        .await;
    let (s, v) = approve_with(&w.api, &id, &digest, &ada).await;
    assert_eq!(s, 200, "{v}");
}

/// SC-ID-03, SC-ID-04 on the AWS path: the Lambda functions' handler (API Gateway events, the
/// DynamoDB store on LocalStack) takes a machine client's token to submit and a person's to
/// approve, and refuses an expired one with its challenge, storing nothing for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sc_id_03_the_aws_functions_take_tokens_dynamodb() {
    countersign_tests::localstack::require_localstack().await;
    let idp = Idp::start();
    let extra = format!(
        "\n[tenants.acme.identity]\nissuer = \"{}\"\naudience = \"{AUD}\"\n",
        idp.acme
    );
    let w = aws_support::AwsWorld::with_config("idaws", &extra).await;
    let expired = idp.forge("acme", "rsa", json!({}), idp.claims(-120)).await;
    let body = json!({"tool": "mail.send", "args": {"to": "a@b"}});
    let refused = w
        .v2("POST", "/v1/actions", &expired, Some(body.clone()))
        .await;
    assert_eq!(refused.status, 401, "{}", refused.body);
    let challenge = refused.headers["www-authenticate"]
        .as_str()
        .unwrap_or_default();
    assert!(
        challenge.contains("error=\"invalid_token\""),
        "{}",
        refused.headers
    );
    let listed = w.v2("GET", "/v1/actions", keys::ADMIN, None).await;
    assert_eq!(
        listed.body["data"],
        json!([]),
        "nothing stored: {}",
        listed.body
    );

    let agent = idp
        .client_token("acme", "acme-bot", "bot-secret", "countersign:agent")
        .await;
    let submitted = w.v2("POST", "/v1/actions", &agent, Some(body)).await;
    assert_eq!(submitted.status, 202, "{}", submitted.body);
    assert_eq!(submitted.body["agent_id"], "acme-bot");
    let id = submitted.body["id"].as_str().unwrap();
    let digest = submitted.body["approval"]["context_digest"].clone();
    let ada = idp
        .person_token("acme", "ada", "countersign:approve", AUD)
        .await;
    let approved = w
        .v2(
            "POST",
            &format!("/v1/actions/{id}/approve"),
            &ada,
            Some(json!({"context_digest": digest})),
        )
        .await;
    assert_eq!(approved.status, 200, "{}", approved.body);
    assert_eq!(approved.body["approval"]["approver"], "ada");
}

/// The Python of scripts/mcp-sdks.sh (the official MCP SDK).
fn python() -> String {
    std::env::var("COUNTERSIGN_MCP_PYTHON").unwrap_or_else(|_| {
        format!(
            "{}/.cache/countersign/mcp/venv/bin/python",
            std::env::var("HOME").unwrap_or_default()
        )
    })
}

/// SC-ID-05: the official MCP SDKs — the Python SDK's OAuth client provider and the TypeScript
/// SDK's auth — authorize on their own against countersign and the provider — from the first 401 through the protected resource metadata, the provider's
/// discovery, dynamic client registration and authorization code + PKCE for the `/mcp`
/// resource (the test plays only the person at the login page) — then lists the tools, makes a
/// call that waits and reads its status, as the person's agent; in 2026-07-28 and 2025-11-25.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sc_id_05_the_mcp_sdks_authorize_on_their_own() {
    let idp = Idp::start();
    let tools = ToolServer::start().await;
    // The server's address is its resource: chosen before the config that names it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let base = format!("http://127.0.0.1:{port}");
    let text = config_toml(&tools, "1m", "5s")
        + &format!(
            "\n[tenants.acme.identity]\nissuer = \"{}\"\naudience = \"{base}\"\n",
            idp.acme
        );
    let config = Arc::new(
        Config::from_toml(&text)
            .and_then(Config::read_keys)
            .unwrap(),
    );
    let db = countersign::boot::embedded::Database::Sqlite(countersign_tests::temp_db("id05"));
    let server = countersign::boot::embedded::Server::start_on(
        config,
        &db,
        format!("127.0.0.1:{port}").parse().unwrap(),
        countersign::boot::embedded::Parts::default(),
    )
    .await
    .expect("the server starts");
    let api = Api::new(server.addr);
    let node_dir = std::env::var("COUNTERSIGN_MCP_NODE_DIR").unwrap_or_else(|_| {
        format!(
            "{}/.cache/countersign/mcp/node",
            std::env::var("HOME").unwrap_or_default()
        )
    });
    // The TypeScript client runs from the SDK's folder, where its imports resolve.
    let ts = format!("{node_dir}/ts_oauth-{}.mjs", ulid::Ulid::new());
    std::fs::copy(
        concat!(env!("CARGO_MANIFEST_DIR"), "/identity/ts_oauth.mjs"),
        &ts,
    )
    .expect("the MCP TypeScript SDK is installed (source scripts/mcp-sdks.sh)");
    let py = concat!(env!("CARGO_MANIFEST_DIR"), "/identity/py_oauth.py").to_owned();
    let mcp_url = format!("{base}/mcp");
    let call = [
        "mail_send".to_owned(),
        r#"{"to": "ops@example.com"}"#.to_owned(),
    ];
    let clients: [(&str, String, Vec<String>); 3] = [
        (
            "python, 2026-07-28",
            python(),
            vec![py.clone(), mcp_url.clone(), "modern".into()],
        ),
        (
            "python, 2025-11-25",
            python(),
            vec![py, mcp_url.clone(), "legacy".into()],
        ),
        (
            "typescript, 2025-11-25",
            "node".into(),
            vec![ts.clone(), mcp_url.clone()],
        ),
    ];
    for (name, program, args) in clients {
        let call = call.clone();
        // The SDK waits on this server, which runs on this runtime: off its threads.
        let out = tokio::task::spawn_blocking(move || {
            Command::new(program).args(&args).args(&call).output()
        })
        .await
        .unwrap()
        .expect("the MCP SDKs run (source scripts/mcp-sdks.sh)");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{name}: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let events: Vec<Value> = stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let event = |wanted: &str| {
            events
                .iter()
                .find(|e| e["event"] == wanted)
                .unwrap_or_else(|| panic!("{name}: no {wanted} in {stdout}"))
                .clone()
        };
        let authorize = event("authorize")["url"].as_str().unwrap().to_owned();
        assert!(authorize.starts_with(&idp.acme), "{name}: {authorize}");
        assert!(
            authorize.contains("code_challenge="),
            "{name}: PKCE: {authorize}"
        );
        let resource = format!("resource={}", urlencode(&mcp_url));
        assert!(
            authorize.contains(&resource),
            "{name}: a resource indicator: {authorize}"
        );
        assert!(event("tools")["names"]
            .as_array()
            .unwrap()
            .contains(&json!("mail_send")));
        let id = event("waiting")["action_id"].as_str().unwrap().to_owned();
        let status = event("status");
        assert_eq!(
            status["result"]["structuredContent"]["state"], "pending_approval",
            "{name}: {status}"
        );
        let (s, action) = api.get(&format!("/v1/actions/{id}"), keys::APPROVER).await;
        assert_eq!(s, 200, "{action}");
        assert_eq!(action["agent_id"], "ada", "{name}: the person's agent");
    }
    let _ = std::fs::remove_file(ts);
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The link key of the sign-in test's mail (at least 32 bytes).
const LINK_KEY: &str = "sign-in-test-link-key-0123456789abcdef";

/// POST the confirmation form of `token` deciding `decision`, with `bearer` if any.
async fn confirm(api: &Api, token: &str, bearer: Option<&str>) -> (u16, String) {
    let form = form_urlencoded::Serializer::new(String::new())
        .append_pair("token", token)
        .append_pair("decision", "approve")
        .finish();
    let mut request = reqwest::Client::new()
        .post(format!("{}/ui/email/confirm", api.base))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form);
    if let Some(bearer) = bearer {
        request = request.bearer_auth(bearer);
    }
    let answer = request.send().await.unwrap();
    (answer.status().as_u16(), answer.text().await.unwrap())
}

/// SC-CH-16: a tenant requires the approver signed in as well for a chosen rule's mailed links
/// (`[email] sign_in_for`). The link opens the call with a way to sign in and no form; a POST
/// of the link alone is `401`, with a key's token or another person's `403` — nothing changes —
/// and with the token of the person the mail went to it approves: the key's approval, the
/// person on it, the channel `email`. On main the link alone decided every rule's calls.
async fn email_links_need_the_person_signed_in(backend: Backend) {
    std::env::set_var("COUNTERSIGN_TEST_SIGN_IN_SMTP", "smtps://mail.invalid");
    std::env::set_var("COUNTERSIGN_TEST_SIGN_IN_LINK", LINK_KEY);
    let email = "\n[tenants.acme.email]\nsmtp_url_env = \"COUNTERSIGN_TEST_SIGN_IN_SMTP\"\nfrom = \"countersign <approvals@example.com>\"\nlink_secret_env = \"COUNTERSIGN_TEST_SIGN_IN_LINK\"\nsign_in_for = [\"mail.*\"]\n";
    let w = world_of(backend, "ch16", email, |text| {
        text.replacen(
            "id = \"approver-1\", role = \"approver\",",
            "id = \"approver-1\", role = \"approver\", email = \"Ada@Example.com\",",
            1,
        )
    })
    .await;
    let (_, v) = w
        .api
        .submit(
            keys::AGENT,
            json!({"tool": "mail.send", "args": {"to": "a@b"}}),
        )
        .await;
    let id = v["id"].as_str().unwrap().to_owned();
    let digest = v["approval"]["context_digest"].as_str().unwrap().to_owned();
    let token = countersign::domain::email_link::Link {
        tenant: "acme".into(),
        action_id: id.clone(),
        approver: "approver-1".into(),
        context_digest: digest,
        expires_at: jiff::Timestamp::now().as_second() + 3600,
    }
    .sign(LINK_KEY.as_bytes());

    let shown = reqwest::get(format!("{}/ui/email/confirm?token={token}", w.api.base))
        .await
        .unwrap();
    assert_eq!(shown.status(), 200);
    let shown = shown.text().await.unwrap();
    assert!(
        shown.contains(&format!("href=\"../#action={id}\"")),
        "{shown}"
    );
    assert!(
        !shown.contains("<form"),
        "no form to post without signing in: {shown}"
    );

    let bob = token_of(&w, "bob", "countersign:approve").await;
    for (bearer, status) in [
        (None, 401),
        (Some(keys::APPROVER), 403),
        (Some(bob.as_str()), 403),
    ] {
        let (s, page) = confirm(&w.api, &token, bearer).await;
        assert_eq!(s, status, "{bearer:?}: {page}");
        assert!(page.contains("Nothing was changed"), "{page}");
        assert_eq!(w.api.action(&id).await["state"], "pending_approval");
    }

    let ada = token_of(&w, "ada", "countersign:approve").await;
    let (s, page) = confirm(&w.api, &token, Some(&ada)).await;
    assert_eq!(s, 200, "{page}");
    let (_, events) = w
        .api
        .get(&format!("/v1/actions/{id}/events"), keys::APPROVER)
        .await;
    let approved = &events["data"][1]["actor"];
    assert_eq!(
        (
            &approved["id"],
            &approved["person"]["subject"],
            &approved["channel"]
        ),
        (&json!("approver-1"), &json!("ada"), &json!("email")),
        "{events}"
    );
}

on_every_store!(email_links_need_the_person_signed_in:
    sc_ch_16_email_links_need_the_person_signed_in_sqlite,
    sc_ch_16_email_links_need_the_person_signed_in_dynamodb,
    sc_ch_16_email_links_need_the_person_signed_in_postgres);
