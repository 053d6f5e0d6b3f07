//! SC-EDGE-03 across an upgrade: records a server wrote before a change of the code still load
//! after it, the same. `tests/fixtures/before-call/` holds what main wrote at d9f7aaf (before the
//! call became one type, issue 29): an SQLite database, the DynamoDB items of the same walk, each
//! action's stored record and API view as main encoded them, and the deeds main signed. Loaded by
//! today's code, every record must encode to the same bytes, answer the same view, verify its
//! chain, and sign the same deed, byte for byte; a new write over an old DynamoDB record keeps
//! its call item as it was.
//!
//! The fixtures were written by `write_fixtures_before_the_call_type` (ignored: run it with
//! `--ignored` only to make new ones, on the code whose records are to be kept).

#[path = "aws_support/mod.rs"]
mod aws_support;

use aws_sdk_dynamodb::{primitives::Blob, types::AttributeValue};
use countersign::{
    api::view::ActionView,
    config::Config,
    domain::{
        audit,
        context::{approval_context, ContextInput},
        deed::{verify_with_pem, Deed, DeedKey},
        policy::Matched,
        Action,
    },
    store::{dynamodb::DynamoStore, sqlite::SqliteStore, Actions, Store},
};
use countersign_tests::{
    config_toml, in_secs, keys, stores::Place, temp_db, Api, ToolServer, DEED_KID, DEED_PUBLIC_PEM,
};
use serde_json::{json, Map, Value};
use std::{collections::HashMap, path::PathBuf, sync::Arc};

const TENANT: &str = "acme";

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/before-call")
}

/// The private half of the tests' deed key (support sets it for the server from the same PEM).
fn deed_key() -> DeedKey {
    DeedKey::from_pem(DEED_KID, countersign_tests::DEED_KEY_PEM).unwrap()
}

// ---------- reading what main wrote ----------

/// One action as main left it: its stored record, its API view and its deed (if sealed).
struct Expected {
    name: String,
    id: String,
    stored: String,
    view: String,
    deed: Option<String>,
}

fn expected(store: &str) -> Vec<Expected> {
    let text = std::fs::read_to_string(fixtures().join("records.json")).unwrap();
    let all: Value = serde_json::from_str(&text).unwrap();
    all[store]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| Expected {
            name: r["name"].as_str().unwrap().to_owned(),
            id: r["id"].as_str().unwrap().to_owned(),
            stored: r["stored"].as_str().unwrap().to_owned(),
            view: r["view"].as_str().unwrap().to_owned(),
            deed: r["deed"].as_str().map(str::to_owned),
        })
        .collect()
}

/// Load every expected action from `store` and hold it to what main wrote.
async fn holds_to_main(store: &dyn Store, records: &[Expected]) {
    assert!(
        records.len() >= 8,
        "the walk left {} actions",
        records.len()
    );
    for r in records {
        let action = store.load(TENANT, &r.id).await.unwrap().expect(&r.name);
        let stored = String::from_utf8(action.to_stored()).unwrap();
        assert_eq!(stored, r.stored, "{}: the stored record", r.name);
        let view = serde_json::to_string(&ActionView::from(&action)).unwrap();
        assert_eq!(view, r.view, "{}: the API view", r.name);
        shows_the_same_context(&action, &r.name);
        let events = store.events(TENANT, &r.id).await.unwrap();
        audit::verify(&action, &events).unwrap_or_else(|e| panic!("{}: {e:?}", r.name));
        match &r.deed {
            Some(deed) => {
                verify_with_pem(DEED_PUBLIC_PEM, deed.as_bytes()).unwrap();
                let signed = Deed::of(&action, &events, DEED_KID)
                    .unwrap()
                    .sign(&deed_key());
                assert_eq!(
                    String::from_utf8(signed).unwrap(),
                    *deed,
                    "{}: the deed",
                    r.name
                );
            }
            None => assert!(!action.state().is_sealed(), "{}", r.name),
        }
    }
}

/// The approval context built again from the loaded call is the one main stored, to the byte
/// of its digest: intake asks for the same countersignature it did.
fn shows_the_same_context(action: &Action, name: &str) {
    let Some(approval) = &action.approval() else {
        return;
    };
    let rule = approval.context.get("policy").map(|p| Matched {
        index: p["rule"].as_u64().unwrap() as usize,
        label: p["label"].as_str().unwrap().to_owned(),
    });
    let tz = jiff::tz::TimeZone::get("Europe/Berlin").unwrap();
    let (context, digest) = approval_context(&ContextInput {
        call: action.call(),
        time_zone: &tz,
        time_zone_name: "Europe/Berlin",
        rule: rule.as_ref(),
        quorum: &approval.quorum,
    });
    assert_eq!(context, approval.context, "{name}: the context");
    assert_eq!(
        digest, approval.context_digest,
        "{name}: the context digest"
    );
}

/// The SQLite file main wrote: every record loads into the same bytes, view, chain and deed.
#[tokio::test]
async fn sc_edge_03_an_sqlite_store_written_before_the_call_type_loads_the_same() {
    let db = temp_db("formats");
    std::fs::copy(fixtures().join("store.sqlite"), &db).unwrap();
    let records = expected("sqlite");
    // The bodies as main wrote them, read behind the store's back.
    let conn = rusqlite::Connection::open(&db).unwrap();
    for r in &records {
        let body: Vec<u8> = conn
            .query_row("SELECT body FROM actions WHERE id = ?1", [&r.id], |row| {
                row.get(0)
            })
            .unwrap();
        assert_eq!(String::from_utf8(body).unwrap(), r.stored, "{}", r.name);
    }
    drop(conn);
    let store = SqliteStore::open_existing(&db).unwrap();
    holds_to_main(&store, &records).await;
}

/// The DynamoDB items main wrote: every record loads into the same bytes, view, chain and
/// deed, and a transition committed over an old record leaves its call item byte-identical
/// (a call encoded otherwise would change the state item's call digest `cd` and rewrite it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sc_edge_03_dynamodb_items_written_before_the_call_type_load_the_same() {
    let sdk = aws_support::sdk().await;
    let table = aws_support::unique("formats");
    aws_support::create_table(&sdk, &table).await;
    let client = aws_sdk_dynamodb::Client::new(&sdk);
    let text = std::fs::read_to_string(fixtures().join("dynamodb.json")).unwrap();
    let items: Vec<Value> = serde_json::from_str(&text).unwrap();
    for item in &items {
        client
            .put_item()
            .table_name(&table)
            .set_item(Some(item_of(item)))
            .send()
            .await
            .unwrap();
    }
    let store = DynamoStore::new(client.clone(), &table);
    let records = expected("dynamodb");
    holds_to_main(&store, &records).await;

    // A new write over an old record: cancel the approved one.
    let r = records.iter().find(|r| r.name == "approved").unwrap();
    let action = store.load(TENANT, &r.id).await.unwrap().unwrap();
    let now = jiff::Timestamp::now();
    let t = countersign::domain::Transition::seal(
        &action,
        countersign::domain::Actor::system(),
        &countersign::domain::SealReason::Cancelled,
        now,
    );
    store.commit(&t).await.unwrap();
    let after = scan(&client, &table).await;
    let call_of = |items: &[Value]| {
        items
            .iter()
            .find(|i| i["sk"]["S"] == json!(format!("A#{}", r.id)))
            .cloned()
            .unwrap()
    };
    assert_eq!(
        call_of(&after),
        call_of(&items),
        "the call item is rewritten"
    );
    let cd_of = |items: &[Value]| {
        items
            .iter()
            .find(|i| i["sk"]["S"] == json!(format!("A#{}#S", r.id)))
            .map(|i| i["cd"].clone())
            .unwrap()
    };
    assert_eq!(cd_of(&after), cd_of(&items), "the call digest moved");
    let sealed = store.load(TENANT, &r.id).await.unwrap().unwrap();
    let events = store.events(TENANT, &r.id).await.unwrap();
    audit::verify(&sealed, &events).unwrap();
}

// ---------- DynamoDB items as JSON ----------

/// An item as DynamoDB JSON (`{"S": …}`, `{"N": …}`; bytes as hex under `"B"`).
fn json_of(v: &AttributeValue) -> Value {
    match v {
        AttributeValue::S(s) => json!({ "S": s }),
        AttributeValue::N(n) => json!({ "N": n }),
        AttributeValue::B(b) => json!({ "B": hex::encode(b.as_ref()) }),
        AttributeValue::Bool(b) => json!({ "BOOL": b }),
        AttributeValue::Null(_) => json!({ "NULL": true }),
        AttributeValue::L(l) => json!({ "L": l.iter().map(json_of).collect::<Vec<_>>() }),
        AttributeValue::M(m) => json!({ "M": map_json(m) }),
        other => panic!("an attribute the adapter does not write: {other:?}"),
    }
}

fn map_json(m: &HashMap<String, AttributeValue>) -> Map<String, Value> {
    let mut sorted: Vec<_> = m.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(b.0));
    sorted
        .into_iter()
        .map(|(k, v)| (k.clone(), json_of(v)))
        .collect()
}

fn attribute_of(v: &Value) -> AttributeValue {
    let (kind, inner) = v.as_object().unwrap().iter().next().unwrap();
    match kind.as_str() {
        "S" => AttributeValue::S(inner.as_str().unwrap().to_owned()),
        "N" => AttributeValue::N(inner.as_str().unwrap().to_owned()),
        "B" => AttributeValue::B(Blob::new(hex::decode(inner.as_str().unwrap()).unwrap())),
        "BOOL" => AttributeValue::Bool(inner.as_bool().unwrap()),
        "NULL" => AttributeValue::Null(true),
        "L" => AttributeValue::L(inner.as_array().unwrap().iter().map(attribute_of).collect()),
        "M" => AttributeValue::M(item_of(inner)),
        other => panic!("{other}"),
    }
}

fn item_of(v: &Value) -> HashMap<String, AttributeValue> {
    v.as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), attribute_of(v)))
        .collect()
}

async fn scan(client: &aws_sdk_dynamodb::Client, table: &str) -> Vec<Value> {
    let scanned = client.scan().table_name(table).send().await.unwrap();
    assert!(scanned.last_evaluated_key().is_none(), "one page");
    let mut items: Vec<Value> = scanned
        .items()
        .iter()
        .map(|i| Value::Object(map_json(i)))
        .collect();
    items.sort_by_key(|i| (i["pk"].to_string(), i["sk"].to_string()));
    items
}

// ---------- writing them (on the code whose records are kept) ----------

/// The walk that leaves one action in each state main can be asked for over HTTP, with every
/// member of the call set somewhere: args with non-ASCII keys and a float, `action_kind`, `run`
/// ids, a window. Returns each action's name and id.
async fn walk(api: &Api) -> Vec<(&'static str, String)> {
    let id = |v: &Value| v["id"].as_str().unwrap().to_owned();
    let window = json!({"not_before": in_secs(3600), "not_after": in_secs(7200)});
    let run = json!({"run_id": "run-7", "thread_id": "thread-3", "call_id": "call-9"});
    let mut out = Vec::new();

    let (s, pending) = api
        .submit(keys::AGENT, json!({"tool": "mail.send", "args": {"to": "ops@example.com", "n": 1.5, "é": "ü"}, "action_kind": "email", "run": run, "schedule": window}))
        .await;
    assert_eq!(s, 202, "{pending}");
    out.push(("pending", id(&pending)));

    let (s, approved) = api
        .submit(keys::AGENT, json!({"tool": "report.build", "args": {"q": [1, 2]}, "action_kind": "report", "schedule": window}))
        .await;
    assert_eq!(s, 201, "{approved}");
    out.push(("approved", id(&approved)));

    let (s, claimed) = api
        .submit(keys::AGENT, json!({"tool": "report.build", "args": {}, "run": {"call_id": "call-10"}, "schedule": window}))
        .await;
    assert_eq!(s, 201, "{claimed}");
    out.push(("executing", id(&claimed)));

    let (s, cancelled) = api
        .submit(
            keys::AGENT,
            json!({"tool": "report.build", "args": {"n": 3}, "schedule": window}),
        )
        .await;
    assert_eq!(s, 201, "{cancelled}");
    let (s, v) = api.cancel(&id(&cancelled), keys::AGENT).await;
    assert_eq!(s, 200, "{v}");
    out.push(("cancelled", id(&cancelled)));

    let (s, denied) = api
        .submit(keys::AGENT, json!({"tool": "mail.send", "args": {"to": "x@example.com"}, "run": {"run_id": "run-8"}}))
        .await;
    assert_eq!(s, 202, "{denied}");
    let (s, v) = api
        .post(
            &format!("/v1/actions/{}/deny", id(&denied)),
            keys::APPROVER,
            json!({"reason": "not today"}),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    out.push(("denied", id(&denied)));

    let (s, ran) = api
        .submit(keys::AGENT, json!({"tool": "mail.send", "args": {"to": "y@example.com"}, "action_kind": "email", "run": {"call_id": "call-11", "thread_id": "thread-4"}}))
        .await;
    assert_eq!(s, 202, "{ran}");
    let digest = ran["approval"]["context_digest"].as_str().unwrap();
    let (s, v) = api.approve(&id(&ran), digest).await;
    assert_eq!(s, 200, "{v}");
    let v = api.wait_sealed(&id(&ran), 10).await;
    assert_eq!(v["state"], "succeeded", "{v}");
    out.push(("approved_and_run", id(&ran)));

    let (s, allowed) = api
        .submit(
            keys::AGENT,
            json!({"tool": "search.web", "args": {"q": "x"}}),
        )
        .await;
    assert_eq!(s, 200, "{allowed}");
    assert_eq!(allowed["state"], "succeeded", "{allowed}");
    out.push(("allowed", id(&allowed)));

    let (s, shadow) = api
        .submit(
            keys::AGENT,
            json!({"tool": "sandbox.run", "args": {"x": null}}),
        )
        .await;
    assert!(s < 300, "{shadow}");
    out.push(("set_result", id(&shadow)));

    let (s, refused) = api
        .submit(
            keys::AGENT,
            json!({"tool": "mail.send", "args": {}, "action_kind": "undeclared"}),
        )
        .await;
    assert_eq!(s, 403, "{refused}");
    out.push((
        "refused",
        refused["error"]["action_id"].as_str().unwrap().to_owned(),
    ));
    out
}

/// Claim `id` at the store (an executing record is not left behind by any request).
async fn claim(store: &dyn Store, id: &str) {
    let action = store.load(TENANT, id).await.unwrap().unwrap();
    let now = jiff::Timestamp::now();
    let until = now
        .checked_add(jiff::SignedDuration::from_hours(24 * 365 * 50))
        .unwrap();
    let t = countersign::domain::Transition::claim(&action, "wrk_fixture/1", until, now).unwrap();
    store.commit(&t).await.unwrap();
}

/// Each action's stored record, view and deed, as this code encodes them.
async fn records(api: &Api, store: &dyn Store, walked: &[(&str, String)]) -> Value {
    let mut out = Vec::new();
    for (name, id) in walked {
        let action: Action = store.load(TENANT, id).await.unwrap().unwrap();
        let res = reqwest::Client::new()
            .get(format!("{}/v1/actions/{id}/deed", api.base))
            .bearer_auth(keys::AGENT)
            .send()
            .await
            .unwrap();
        let status = res.status().as_u16();
        let deed = String::from_utf8(res.bytes().await.unwrap().to_vec()).unwrap();
        let deed = (status == 200).then_some(deed);
        assert_eq!(deed.is_some(), action.state().is_sealed(), "{name}");
        out.push(json!({
            "name": name,
            "id": id,
            "stored": String::from_utf8(action.to_stored()).unwrap(),
            "view": serde_json::to_string(&ActionView::from(&action)).unwrap(),
            "deed": deed,
        }));
    }
    Value::Array(out)
}

async fn serve_walk(place: &Place, store: &dyn Store) -> Value {
    let tools = ToolServer::start().await;
    let config = Arc::new(
        Config::from_toml(&config_toml(&tools, "10s", "5s"))
            .and_then(Config::read_keys)
            .unwrap(),
    );
    let server = place.serve(config).await;
    let api = Api::new(server.addr);
    let walked = walk(&api).await;
    claim(
        store,
        &walked.iter().find(|(n, _)| *n == "executing").unwrap().1,
    )
    .await;
    let records = records(&api, store, &walked).await;
    server.shutdown().await.unwrap();
    records
}

/// Writes `tests/fixtures/before-call/` with this code. Not a test of anything: run it only to
/// make new fixtures (`cargo test -p countersign-tests --test formats -- --ignored write_`).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore]
async fn write_fixtures_before_the_call_type() {
    let dir = fixtures();
    std::fs::create_dir_all(&dir).unwrap();

    let db = temp_db("fixtures");
    let place = Place::Db(countersign::boot::embedded::Database::Sqlite(db.clone()));
    let store = SqliteStore::open(&db).unwrap();
    let sqlite = serve_walk(&place, &store).await;
    drop(store);
    let out = dir.join("store.sqlite");
    let _ = std::fs::remove_file(&out);
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute("VACUUM INTO ?1", [out.to_str().unwrap()])
        .unwrap();

    let sdk = aws_support::sdk().await;
    let table = aws_support::unique("fixtures");
    aws_support::create_table(&sdk, &table).await;
    let client = aws_sdk_dynamodb::Client::new(&sdk);
    let place = Place::Dynamodb {
        client: client.clone(),
        table: table.clone(),
    };
    let store = DynamoStore::new(client.clone(), &table);
    let dynamodb = serve_walk(&place, &store).await;
    let items = scan(&client, &table).await;

    let pretty = |v: &Value| serde_json::to_string_pretty(v).unwrap() + "\n";
    std::fs::write(
        dir.join("records.json"),
        pretty(&json!({"sqlite": sqlite, "dynamodb": dynamodb})),
    )
    .unwrap();
    std::fs::write(dir.join("dynamodb.json"), pretty(&Value::Array(items))).unwrap();
}
