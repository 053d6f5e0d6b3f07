//! Fewer, better countersignatures (issue 33): decisions in a batch (SC-GR-20), shadow rules
//! (SC-GR-21) and decision insights (SC-GR-22), over real HTTP on every store.

use countersign::config::Config;
use countersign_tests::{
    on_every_store,
    stores::{Backend, Place},
    Api,
};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::sync::Arc;

const AGENT: &str = "key-dec-agent";
const AGENT_2: &str = "key-dec-agent-2";
const APPROVER: &str = "key-dec-approver";
const ADMIN: &str = "key-dec-admin";

fn sha(key: &str) -> String {
    hex::encode(Sha256::digest(key.as_bytes()))
}

/// Mail waits for a person; transfers above 1,000 too, with a shadow rule that would deny those
/// above 10,000 beside them; searches run.
fn config() -> Arc<Config> {
    let text = format!(
        r#"
[tenants.acme]
time_zone = "Europe/Berlin"
approval_ttl = "1h"
keys = [
  {{ id = "agent-1", role = "agent", sha256 = "{agent}" }},
  {{ id = "agent-2", role = "agent", sha256 = "{agent2}" }},
  {{ id = "approver-1", role = "approver", sha256 = "{approver}" }},
  {{ id = "admin-1", role = "admin", sha256 = "{admin}" }},
]
policy = [
  {{ name = "deny huge transfers (trial)", tool = "payments.transfer", when = "args.amount > 10000", decision = "deny", mode = "shadow" }},
  {{ name = "transfers above 1,000", tool = "payments.transfer", when = "args.amount > 1000", decision = "require_approval" }},
  {{ name = "small transfers", tool = "payments.transfer", decision = "allow" }},
  {{ name = "mail", tool = "mail.send", decision = "require_approval" }},
  {{ name = "search", tool = "search.web", decision = "allow" }},
]

[tenants.acme.tools."payments.transfer"]
executor = "builtin.echo"

[tenants.acme.tools."mail.send"]
executor = "builtin.echo"

[tenants.acme.tools."search.web"]
executor = "builtin.echo"
"#,
        agent = sha(AGENT),
        agent2 = sha(AGENT_2),
        approver = sha(APPROVER),
        admin = sha(ADMIN),
    );
    Arc::new(Config::from_toml(&text).expect("the test config loads"))
}

/// A pending mail from `key`, as its submit answered it.
async fn pending(api: &Api, key: &str, to: &str) -> Value {
    let (status, a) = api
        .submit(key, json!({"tool": "mail.send", "args": {"to": to}}))
        .await;
    assert_eq!(status, 202, "{a}");
    a
}

fn digest(a: &Value) -> &str {
    a["approval"]["context_digest"].as_str().unwrap()
}

fn id(a: &Value) -> &str {
    a["id"].as_str().unwrap()
}

async fn read(api: &Api, id: &str) -> Value {
    let (status, v) = api.get(&format!("/v1/actions/{id}"), APPROVER).await;
    assert_eq!(status, 200, "{v}");
    v
}

async fn events(api: &Api, id: &str) -> Vec<Value> {
    let (status, v) = api.get(&format!("/v1/actions/{id}/events"), APPROVER).await;
    assert_eq!(status, 200, "{v}");
    v["data"].as_array().unwrap().clone()
}

/// Poll (bounded) until `id` is sealed; its last view.
async fn sealed(api: &Api, id: &str) -> Value {
    for _ in 0..100 {
        let v = read(api, id).await;
        if v["sealed_at"].is_string() {
            return v;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("{id} was not sealed in 10 s");
}

/// SC-GR-20: a batch of five decisions — an approve, an approve of a stale digest, an approve of
/// an action denied already, a deny, and an id that names nothing — is answered entry by entry:
/// the two that may be taken are, each with its own event (the approve's carrying its own
/// digest), and each refusal says which and why with the code its own route would answer; the
/// refused actions are as they were. The approved call is not run by the request: its wake runs
/// it. A batch refused whole (the role, the size, an action named twice, a deny without reason)
/// decides nothing.
async fn a_batch_is_decided_entry_by_entry(backend: Backend) {
    let place = Place::fresh(backend, "batch").await;
    let server = place.serve(config()).await;
    let api = Api::new(server.addr);
    let approve = pending(&api, AGENT, "a@example.com").await;
    let stale = pending(&api, AGENT, "b@example.com").await;
    let decided = pending(&api, AGENT_2, "c@example.com").await;
    let deny = pending(&api, AGENT_2, "d@example.com").await;
    let (status, v) = api
        .post(
            &format!("/v1/actions/{}/deny", id(&decided)),
            APPROVER,
            json!({"reason": "not today"}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let missing = "act_01J00000000000000000000000";
    let untouched = [(&approve, 1), (&stale, 1), (&decided, 2), (&deny, 1)];

    // Refused whole: nothing is decided.
    let one = |a: &Value| json!({"id": id(a), "decision": "approve", "context_digest": digest(a)});
    let whole: [(&str, Value, u16, &str); 5] = [
        (
            AGENT,
            json!({"decisions": [one(&approve)]}),
            403,
            "forbidden",
        ),
        (
            ADMIN,
            json!({"decisions": [one(&approve)]}),
            403,
            "forbidden",
        ),
        (APPROVER, json!({"decisions": []}), 400, "decisions"),
        (
            APPROVER,
            json!({"decisions": vec![one(&approve); 101]}),
            400,
            "decisions",
        ),
        (
            APPROVER,
            json!({"decisions": [one(&approve), one(&approve)]}),
            400,
            "decisions[1].id",
        ),
    ];
    for (key, body, want, said) in whole {
        let (status, v) = api.post("/v1/decisions", key, body).await;
        assert_eq!(status, want, "{v}");
        let named = v["error"]["param"].as_str().or(v["error"]["code"].as_str());
        assert_eq!(named, Some(said), "{v}");
    }
    let (status, v) = api
        .post(
            "/v1/decisions",
            APPROVER,
            json!({"decisions": [one(&approve), {"id": id(&deny), "decision": "deny"}]}),
        )
        .await;
    assert_eq!(
        (status, v["error"]["param"].as_str()),
        (400, Some("decisions[1].reason")),
        "{v}"
    );
    for (a, version) in untouched {
        assert_eq!(
            read(&api, id(a)).await["version"],
            version,
            "nothing decided"
        );
    }

    let batch = json!({"decisions": [
        one(&approve),
        {"id": id(&stale), "decision": "approve", "context_digest": "sha256:0000"},
        one(&decided),
        {"id": id(&deny), "decision": "deny", "context_digest": digest(&deny), "reason": "not this one"},
        {"id": missing, "decision": "approve", "context_digest": "sha256:0000"},
    ]});
    let (status, v) = api.post("/v1/decisions", APPROVER, batch).await;
    assert_eq!(status, 200, "{v}");
    let results = v["results"].as_array().unwrap();
    let seen: Vec<(&str, u64, Option<&str>)> = results
        .iter()
        .map(|r| {
            (
                r["id"].as_str().unwrap(),
                r["status"].as_u64().unwrap(),
                r["error"]["code"].as_str(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            (id(&approve), 200, None),
            (id(&stale), 409, Some("context_changed")),
            (id(&decided), 409, Some("action_sealed")),
            (id(&deny), 200, None),
            (missing, 404, Some("not_found")),
        ],
        "{v}"
    );
    assert_eq!(
        (v["taken"].as_u64(), v["refused"].as_u64()),
        (Some(2), Some(3))
    );
    assert_eq!(results[1]["error"]["context_digest"], digest(&stale), "{v}");
    assert_eq!(results[2]["error"]["state"], "denied", "{v}");
    assert_eq!(results[3]["action"]["state"], "denied", "{v}");
    assert_eq!(results[3]["action"]["outcome"]["reason"], "not this one");

    // Each taken decision is its own event; the refused actions did not move.
    let trail = events(&api, id(&approve)).await;
    assert_eq!(trail[1]["to"], "approved", "{trail:?}");
    assert_eq!(trail[1]["context_digest"], digest(&approve));
    assert_eq!(trail[1]["actor"]["id"], "approver-1");
    let trail = events(&api, id(&deny)).await;
    assert_eq!(
        (trail.len(), &trail[1]["to"], &trail[1]["reason"]),
        (2, &json!("denied"), &json!("not this one"))
    );
    assert_eq!(read(&api, id(&stale)).await["version"], 1);
    assert_eq!(read(&api, id(&decided)).await["version"], 2);
    // The approved mail runs on its wake, not in the batch's request.
    assert_eq!(results[0]["action"]["state"], "approved", "{v}");
    assert_eq!(sealed(&api, id(&approve)).await["state"], "succeeded");
    server.shutdown().await.unwrap();
}

on_every_store!(a_batch_is_decided_entry_by_entry:
    sc_gr_20_a_batch_is_decided_entry_by_entry_sqlite,
    sc_gr_20_a_batch_is_decided_entry_by_entry_dynamodb,
    sc_gr_20_a_batch_is_decided_entry_by_entry_postgres);

/// SC-GR-21: a rule in shadow decides nothing — the huge transfer waits for a person as the
/// enforced rule says — and its would-be decision is in the action's first audit event (hashed
/// into the chain, which verifies when served) and in the explanation beside the enforced one; a
/// call it does not match carries none.
async fn a_shadow_verdict_is_recorded_without_effect(backend: Backend) {
    let place = Place::fresh(backend, "shadow").await;
    let server = place.serve(config()).await;
    let api = Api::new(server.addr);
    let transfer = |amount: u64| json!({"tool": "payments.transfer", "args": {"amount": amount}});
    let (status, huge) = api.submit(AGENT, transfer(20_000)).await;
    assert_eq!(
        (status, huge["state"].as_str()),
        (202, Some("pending_approval")),
        "{huge}"
    );
    assert_eq!(huge["approval"]["context"]["policy"]["rule"], 1, "{huge}");
    let trail = events(&api, id(&huge)).await;
    assert_eq!(
        trail[0]["shadow"],
        json!([{"rule": 0, "label": "deny huge transfers (trial)", "decision": "deny"}]),
        "{trail:?}"
    );
    let (status, small) = api.submit(AGENT, transfer(2_000)).await;
    assert_eq!(status, 202, "{small}");
    let trail = events(&api, id(&small)).await;
    assert!(trail[0].get("shadow").is_none(), "{trail:?}");
    // Explained: the enforced decision, and the shadow verdict beside it.
    let (status, why) = api
        .post(
            "/v1/policy/explain",
            ADMIN,
            json!({"tool": "payments.transfer", "args": {"amount": 20_000}, "agent_id": "agent-1"}),
        )
        .await;
    assert_eq!(status, 200, "{why}");
    assert_eq!(
        (why["decision"].as_str(), &why["rule"]["index"]),
        (Some("require_approval"), &json!(1)),
        "{why}"
    );
    assert_eq!(why["shadow"][0]["decision"], "deny", "{why}");
    assert_eq!(why["steps"][0]["verdict"], "shadow_matched", "{why}");
    server.shutdown().await.unwrap();
}

on_every_store!(a_shadow_verdict_is_recorded_without_effect:
    sc_gr_21_a_shadow_verdict_is_recorded_without_effect_sqlite,
    sc_gr_21_a_shadow_verdict_is_recorded_without_effect_dynamodb,
    sc_gr_21_a_shadow_verdict_is_recorded_without_effect_postgres);

/// SC-GR-22: decision insights per tool and rule, for admins, over the actions created in the
/// range: what was asked of people and what became of it — approved singly and in a batch,
/// denied, withdrawn, still pending — with the approval rate and the times to decide; a call the
/// policy decided asks nobody and is not counted. A range after them holds nothing; a bad range
/// is refused naming the parameter; another role is refused.
async fn insights_count_what_people_decided(backend: Backend) {
    let place = Place::fresh(backend, "insights").await;
    let server = place.serve(config()).await;
    let api = Api::new(server.addr);
    let start = jiff::Timestamp::now();
    let mut mails = Vec::new();
    for n in 0..6 {
        mails.push(pending(&api, AGENT, &format!("m{n}@example.com")).await);
    }
    let (status, transfer) = api
        .submit(
            AGENT,
            json!({"tool": "payments.transfer", "args": {"amount": 5000}}),
        )
        .await;
    assert_eq!(status, 202, "{transfer}");
    let (status, _) = api
        .submit(AGENT, json!({"tool": "search.web", "args": {"q": "x"}}))
        .await;
    assert_eq!(status, 200);
    approve_as(&api, APPROVER, &mails[0]).await;
    let (status, v) = api
        .post(
            "/v1/decisions",
            APPROVER,
            json!({"decisions": [
                {"id": id(&mails[1]), "decision": "approve", "context_digest": digest(&mails[1])},
                {"id": id(&mails[2]), "decision": "deny", "reason": "no"},
                {"id": id(&transfer), "decision": "approve", "context_digest": digest(&transfer)},
            ]}),
        )
        .await;
    assert_eq!((status, v["taken"].as_u64()), (200, Some(3)), "{v}");
    let (status, v) = api.cancel(id(&mails[3]), AGENT).await;
    assert_eq!(status, 200, "{v}");

    let range =
        |from: jiff::Timestamp, to: jiff::Timestamp| format!("/v1/insights?from={from}&to={to}");
    let later = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(60);
    let (status, v) = api
        .get(
            &range(start - jiff::SignedDuration::from_secs(1), later),
            ADMIN,
        )
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        (v["complete"].as_bool(), v["read"].as_u64()),
        (Some(true), Some(8)),
        "{v}"
    );
    let rows = v["rows"].as_array().unwrap();
    let row = |tool: &str| {
        rows.iter()
            .find(|r| r["tool"] == tool)
            .unwrap_or_else(|| panic!("{tool}: {v}"))
    };
    let mail = row("mail.send");
    assert_eq!(mail["rule"], "mail");
    let counts: Vec<u64> = [
        "requests",
        "approved",
        "denied",
        "expired",
        "withdrawn",
        "pending",
    ]
    .iter()
    .map(|k| mail[k].as_u64().unwrap())
    .collect();
    assert_eq!(counts, [6, 2, 1, 0, 1, 2], "{mail}");
    assert!(
        (mail["approval_rate"].as_f64().unwrap() - 2.0 / 3.0).abs() < 1e-9,
        "{mail}"
    );
    for figure in ["median_seconds_to_decide", "p90_seconds_to_decide"] {
        assert!(mail[figure].as_f64().unwrap() >= 0.0, "{mail}");
    }
    assert_eq!(mail["grant_uses"], 0);
    let transfers = row("payments.transfer");
    assert_eq!(
        (transfers["rule"].as_str(), transfers["approved"].as_u64()),
        (Some("transfers above 1,000"), Some(1))
    );
    assert!(rows.iter().all(|r| r["tool"] != "search.web"), "{v}");

    let (status, v) = api
        .get(
            &range(later, later + jiff::SignedDuration::from_secs(60)),
            ADMIN,
        )
        .await;
    assert_eq!(
        (status, v["rows"].as_array().map(Vec::len)),
        (200, Some(0)),
        "{v}"
    );
    for (path, param) in [
        (range(later, start), "from"),
        (
            range(start - jiff::SignedDuration::from_hours(32 * 24), start),
            "from",
        ),
        ("/v1/insights?from=yesterday".to_owned(), "from"),
        ("/v1/insights?tool=mail.send".to_owned(), "tool"),
    ] {
        let (status, v) = api.get(&path, ADMIN).await;
        assert_eq!(
            (status, v["error"]["param"].as_str()),
            (400, Some(param)),
            "{path}: {v}"
        );
    }
    for key in [APPROVER, AGENT] {
        assert_eq!(api.get("/v1/insights", key).await.0, 403);
    }
    server.shutdown().await.unwrap();
}

on_every_store!(insights_count_what_people_decided:
    sc_gr_22_insights_count_what_people_decided_sqlite,
    sc_gr_22_insights_count_what_people_decided_dynamodb,
    sc_gr_22_insights_count_what_people_decided_postgres);

/// One approve of `a` by `key`, over its own route.
async fn approve_as(api: &Api, key: &str, a: &Value) {
    let path = format!("/v1/actions/{}/approve", id(a));
    let (status, v) = api
        .post(&path, key, json!({"context_digest": digest(a)}))
        .await;
    assert_eq!(status, 200, "{v}");
}
