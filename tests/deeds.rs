//! Proof of what happened, over real HTTP on the local server: the audit chain is verified
//! against its record before it is served (SC-SEC-06), and a sealed action's deed verifies
//! offline with the tenant's public key (SC-SEC-07).

use countersign::{
    boot::embedded::{Database, Parts, Server},
    config::Config,
    domain::{
        canonical,
        deed::{public_key_from_pem, Deed, DeedError},
        State,
    },
};
use countersign_tests::{
    config_toml, keys, on_every_store, postgres,
    raw::Raw,
    stores::{Backend, Place},
    temp_db, Api, ToolServer, DEED_KID, DEED_PUBLIC_PEM,
};
use serde_json::{json, Value};
use std::sync::Arc;

struct World {
    api: Api,
    db: Database,
    _tools: ToolServer,
    _server: Server,
}

async fn world() -> World {
    world_on(Database::Sqlite(temp_db("deeds"))).await
}

async fn world_on(db: Database) -> World {
    let tools = ToolServer::start().await;
    let config = Arc::new(
        Config::from_toml(&config_toml(&tools, "10s", "5s"))
            .and_then(Config::read_keys)
            .unwrap(),
    );
    let listen = "127.0.0.1:0".parse().unwrap();
    let server = Server::start_on(config, &db, listen, Parts::default())
        .await
        .unwrap();
    World {
        api: Api::new(server.addr),
        db,
        _tools: tools,
        _server: server,
    }
}

/// GET a deed: its status and raw bytes (a deed is verified byte for byte, never re-encoded).
async fn fetch_deed(api: &Api, id: &str, key: &str) -> (u16, Vec<u8>) {
    let res = reqwest::Client::new()
        .get(format!("{}/v1/actions/{id}/deed", api.base))
        .bearer_auth(key)
        .send()
        .await
        .unwrap();
    (res.status().as_u16(), res.bytes().await.unwrap().to_vec())
}

/// Submit a mail (needs approval) and approve it: it runs now and succeeds.
async fn approved_and_run(api: &Api) -> Value {
    let (status, action) = api
        .submit(
            keys::AGENT,
            json!({"tool": "mail.send", "args": {"to": "ops@example.com", "subject": "hi"}}),
        )
        .await;
    assert_eq!(status, 202, "{action}");
    let id = action["id"].as_str().unwrap();
    let digest = action["approval"]["context_digest"].as_str().unwrap();
    let (status, _) = api.approve(id, digest).await;
    assert_eq!(status, 200);
    api.wait_sealed(id, 10).await
}

#[tokio::test]
async fn sc_sec_07_a_sealed_actions_deed_verifies_offline() {
    let w = world().await;
    let sealed = approved_and_run(&w.api).await;
    assert_eq!(sealed["state"], "succeeded", "{sealed}");
    let id = sealed["id"].as_str().unwrap();

    let (status, file) = fetch_deed(&w.api, id, keys::AGENT).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&file));
    let public = public_key_from_pem(DEED_PUBLIC_PEM).unwrap();
    let deed = Deed::verify(&file, &public).expect("the served deed verifies");

    // Self-contained: the call, the countersignature, the outcome, the chain and its head.
    assert_eq!(deed.kid, DEED_KID);
    assert_eq!(deed.action_id, id);
    assert_eq!(deed.tenant, "acme");
    assert_eq!(deed.call.tool, "mail.send");
    assert_eq!(deed.call.args, sealed["args"]);
    assert_eq!(deed.call.args_digest, canonical::digest(&sealed["args"]));
    let approval = deed.approval.as_ref().unwrap();
    assert_eq!(
        approval.context_digest,
        sealed["approval"]["context_digest"].as_str().unwrap()
    );
    assert_eq!(approval.approver.as_deref(), Some("approver-1"));
    assert_eq!(deed.state, State::Succeeded);
    assert_eq!(
        deed.outcome.as_ref().unwrap().result,
        Some(json!({"sent": true}))
    );
    let path: Vec<State> = deed.events.iter().map(|e| e.to).collect();
    // Due now and fitting the request: approved already claimed, in one write (SC-EDGE-07)
    // that records both the approval and the claim (issue 16).
    assert_eq!(
        path,
        [
            State::PendingApproval,
            State::Approved,
            State::Executing,
            State::Succeeded
        ]
    );
    assert_eq!(deed.chain_head, deed.events.last().unwrap().hash);
    assert_eq!(
        deed.events[1].context_digest.as_deref(),
        Some(approval.context_digest.as_str())
    );

    // Every key of the tenant reads the same deed (sealed actions never change).
    for key in [keys::APPROVER, keys::ADMIN] {
        assert_eq!(fetch_deed(&w.api, id, key).await, (200, file.clone()));
    }

    // A one-byte change anywhere, and the wrong key, fail.
    for i in (0..file.len()).step_by(7) {
        let mut changed = file.clone();
        changed[i] ^= 0x01;
        assert!(Deed::verify(&changed, &public).is_err(), "byte {i}");
    }
    let other = countersign::domain::deed::DeedKey::from_seed("x", &[1; 32]).verifying_key();
    assert_eq!(Deed::verify(&file, &other), Err(DeedError::Signature));
}

#[tokio::test]
async fn sc_sec_07_only_sealed_actions_have_deeds_and_only_for_their_tenant() {
    let w = world().await;
    let (_, pending) = w
        .api
        .submit(keys::AGENT, json!({"tool": "mail.send", "args": {}}))
        .await;
    let id = pending["id"].as_str().unwrap();
    let (status, body) = fetch_deed(&w.api, id, keys::AGENT).await;
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "action_not_sealed");
    assert_eq!(body["error"]["state"], "pending_approval");

    // Another tenant's id answers exactly as a missing one (SC-SEC-01).
    let other = fetch_deed(&w.api, id, keys::OTHER_TENANT_AGENT).await;
    let missing = fetch_deed(
        &w.api,
        "act_01J0000000000000000000000Z",
        keys::OTHER_TENANT_AGENT,
    )
    .await;
    assert_eq!(other.0, 404);
    assert_eq!(other, missing);
    assert_eq!(fetch_deed(&w.api, id, "no-such-key").await.0, 401);

    // A tenant without a deed key is told so.
    let (_, g) = w
        .api
        .submit(
            keys::OTHER_TENANT_AGENT,
            json!({"tool": "mail.send", "args": {}}),
        )
        .await;
    let gid = g["id"].as_str().unwrap();
    let (status, _) = w.api.cancel(gid, keys::OTHER_TENANT_AGENT).await;
    assert_eq!(status, 200);
    let (status, body) = fetch_deed(&w.api, gid, keys::OTHER_TENANT_AGENT).await;
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (403, Some("forbidden"))
    );
}

/// The stored chain is checked against its record before the engine serves events or a deed;
/// a database edited behind the server's back is refused (500, logged), never served. On
/// today's main (chain from "", no head or count check) each of these was served as valid.
async fn a_tampered_chain_is_never_served(db: Database) {
    let w = world_on(db).await;
    let mut ids = vec![];
    for _ in 0..4 {
        let (_, a) = w
            .api
            .submit(
                keys::AGENT,
                json!({"tool": "mail.send", "args": {"to": "a@example.com"}}),
            )
            .await;
        let id = a["id"].as_str().unwrap().to_owned();
        assert_eq!(w.api.cancel(&id, keys::AGENT).await.0, 200);
        assert_eq!(fetch_deed(&w.api, &id, keys::AGENT).await.0, 200);
        ids.push(id);
    }
    let db = Raw::open(&w.db).await;
    // Cut: the last event deleted.
    let cut = db
        .execute(
            "DELETE FROM events WHERE action_id = $1 AND seq = 2",
            &[&ids[0]],
        )
        .await;
    assert_eq!(cut, 1);
    // Moved: action 1's record and chain copied over action 2's (its id kept).
    let mut moved: Value = serde_json::from_slice(&db.body(&ids[1]).await).unwrap();
    moved["id"] = json!(ids[2]);
    db.set_body(&ids[2], &serde_json::to_vec(&moved).unwrap())
        .await;
    db.execute("DELETE FROM events WHERE action_id = $1", &[&ids[2]])
        .await;
    let copied = db.execute(
        "INSERT INTO events (tenant, action_id, seq, body) SELECT tenant, CAST($1 AS TEXT), seq, body FROM events WHERE action_id = $2",
        &[&ids[2], &ids[1]],
    )
    .await;
    assert_eq!(copied, 2, "created and cancelled");
    // Edited args, with their digest recomputed.
    db.edit_body(&ids[3], |edited| {
        edited["args"] = json!({"to": "attacker@example.com"});
        edited["args_digest"] = json!(canonical::digest(&edited["args"]));
    })
    .await;

    for id in &ids[..] {
        if id == &ids[1] {
            continue;
        }
        let (status, events) = w
            .api
            .get(&format!("/v1/actions/{id}/events"), keys::AGENT)
            .await;
        assert_eq!(status, 500, "{id}: {events}");
        assert_eq!(events["error"]["code"], "internal");
        assert_eq!(fetch_deed(&w.api, id, keys::AGENT).await.0, 500, "{id}");
    }
    // The untouched source of the move still verifies.
    assert_eq!(fetch_deed(&w.api, &ids[1], keys::AGENT).await.0, 200);
}

#[tokio::test]
async fn sc_sec_06_a_tampered_chain_is_never_served_sqlite() {
    a_tampered_chain_is_never_served(Database::Sqlite(temp_db("deeds"))).await;
}

#[tokio::test]
async fn sc_sec_06_a_tampered_chain_is_never_served_postgres() {
    a_tampered_chain_is_never_served(postgres::database("deeds").await).await;
}

/// A `POST` with the `Countersign-Channel` header set to `channel` (none: `None`).
async fn post_through(
    api: &Api,
    path: &str,
    key: &str,
    body: Value,
    channel: Option<&str>,
) -> (u16, Value) {
    let headers: Vec<(&str, &str)> = channel
        .map(|c| ("Countersign-Channel", c))
        .into_iter()
        .collect();
    let body = Some(body.to_string().into_bytes());
    let (s, v, _) = api
        .send(reqwest::Method::POST, path, Some(key), body, &headers)
        .await;
    (s, v)
}

/// The channel on each event's actor of `id`, in order.
async fn channels(api: &Api, id: &str) -> Vec<Option<String>> {
    let (s, v) = api
        .get(&format!("/v1/actions/{id}/events"), keys::APPROVER)
        .await;
    assert_eq!(s, 200, "{v}");
    let events = v["data"].as_array().unwrap();
    events
        .iter()
        .map(|e| e["actor"]["channel"].as_str().map(str::to_owned))
        .collect()
}

/// SC-CH-08 over real HTTP, on every store: each decision path records its own channel — an
/// approve without the header `api`, a deny from the page `page`, a cancel and a stop from the
/// CLI `cli` — on the audit event (and the stop), and the deed names it and verifies offline
/// (format v4). A key's request naming `slack`, `email` or anything else is refused `400` and
/// writes nothing. On main every one of these events had no channel.
async fn channels_on_the_record(backend: Backend) {
    let tools = ToolServer::start().await;
    let config = Arc::new(
        Config::from_toml(&config_toml(&tools, "10s", "5s"))
            .and_then(Config::read_keys)
            .unwrap(),
    );
    let place = Place::fresh(backend, "deed_channels").await;
    let server = place.serve(config).await;
    let api = Api::new(server.addr);
    let mail = json!({"tool": "mail.send", "args": {"to": "ops@example.com"}});
    let public = public_key_from_pem(DEED_PUBLIC_PEM).unwrap();
    let actions = |id: &str, verb: &str| format!("/v1/actions/{id}/{verb}");

    // A channel a key may not claim, or none known: refused, nothing written.
    let (_, a) = api.submit(keys::AGENT, mail.clone()).await;
    let (id, digest) = (a["id"].as_str().unwrap(), &a["approval"]["context_digest"]);
    for bad in ["slack", "email", "Page", "sms", ""] {
        let body = json!({"context_digest": digest});
        let (s, v) = post_through(
            &api,
            &actions(id, "approve"),
            keys::APPROVER,
            body,
            Some(bad),
        )
        .await;
        assert_eq!(
            (s, v["error"]["param"].as_str()),
            (400, Some("Countersign-Channel")),
            "{bad}: {v}"
        );
    }
    assert_eq!(channels(&api, id).await, [None], "nothing written");

    // The API (no header): the approval, and the deed's countersignature, name `api`.
    let (s, v) = api.approve(id, digest.as_str().unwrap()).await;
    assert_eq!(s, 200, "{v}");
    let sealed = api.wait_sealed(id, 10).await;
    assert_eq!(sealed["state"], "succeeded", "{sealed}");
    let via = |c: &str| Some(c.to_owned());
    assert_eq!(channels(&api, id).await[..2], [None, via("api")]);
    let (s, file) = fetch_deed(&api, id, keys::APPROVER).await;
    assert_eq!(s, 200);
    let deed = Deed::verify(&file, &public).expect("the deed verifies offline");
    assert_eq!(deed.format, countersign::domain::deed::FORMAT_CHANNEL);
    assert_eq!(
        deed.approved_by().as_deref(),
        Some("approver-1, through api")
    );

    // The page denies; the deed's seal event names `page`.
    let (_, a) = api.submit(keys::AGENT, mail.clone()).await;
    let id = a["id"].as_str().unwrap();
    let body = json!({"reason": "not today"});
    let (s, v) = post_through(
        &api,
        &actions(id, "deny"),
        keys::APPROVER,
        body,
        Some("page"),
    )
    .await;
    assert_eq!((s, v["state"].as_str()), (200, Some("denied")), "{v}");
    assert_eq!(channels(&api, id).await, [None, via("page")]);
    let deed = Deed::verify(&fetch_deed(&api, id, keys::APPROVER).await.1, &public).unwrap();
    assert_eq!(deed.format, countersign::domain::deed::FORMAT_CHANNEL);
    assert_eq!(
        deed.events[1].actor.channel.map(|c| c.as_str()),
        Some("page")
    );

    // The CLI cancels (an agent's own cancel through the API says `api`).
    let (_, a) = api.submit(keys::AGENT, mail.clone()).await;
    let id = a["id"].as_str().unwrap();
    let (s, v) = post_through(
        &api,
        &actions(id, "cancel"),
        keys::APPROVER,
        json!({}),
        Some("cli"),
    )
    .await;
    assert_eq!((s, v["state"].as_str()), (200, Some("cancelled")), "{v}");
    assert_eq!(channels(&api, id).await, [None, via("cli")]);
    let (_, a) = api.submit(keys::AGENT, mail.clone()).await;
    let id = a["id"].as_str().unwrap();
    assert_eq!(api.cancel(id, keys::AGENT).await.0, 200);
    assert_eq!(channels(&api, id).await, [None, via("api")]);

    // A stop from the CLI says so; one through the API says `api`.
    let body = json!({"agent_id": "agent-2"});
    let (s, stop) = post_through(&api, "/v1/stops", keys::ADMIN, body, Some("cli")).await;
    assert_eq!((s, stop["channel"].as_str()), (201, Some("cli")), "{stop}");
    let (s, stop) = api
        .post("/v1/stops", keys::ADMIN, json!({"agent_id": "agent-3"}))
        .await;
    assert_eq!((s, stop["channel"].as_str()), (201, Some("api")), "{stop}");
    assert_eq!(api.delete("/v1/stops/agent-2", keys::ADMIN).await, 204);
    assert_eq!(api.delete("/v1/stops/agent-3", keys::ADMIN).await, 204);
}

on_every_store!(channels_on_the_record:
    sc_ch_08_channels_on_the_record_sqlite,
    sc_ch_08_channels_on_the_record_dynamodb,
    sc_ch_08_channels_on_the_record_postgres);
