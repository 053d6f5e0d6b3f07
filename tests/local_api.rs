//! The local server over real HTTP, with tools over real HTTP. Each test names its scenario.

use countersign::{boot::embedded::Server, config::Config, domain::Event};
use countersign_tests::{config_toml, in_secs, keys, temp_db, Api, Behaviour, ToolServer};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::sync::Arc;

struct World {
    tools: ToolServer,
    api: Api,
    _server: Server,
}

async fn world() -> World {
    world_with(Behaviour::default()).await
}

async fn world_with(b: Behaviour) -> World {
    let tools = ToolServer::start().await;
    tools.behave(b);
    let config = Arc::new(Config::from_toml(&config_toml(&tools, "10s", "5s")).unwrap());
    let server = Server::start(config, &temp_db("api"), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let api = Api::new(server.addr);
    World {
        tools,
        api,
        _server: server,
    }
}

fn window(nb: i64, na: i64) -> Value {
    json!({"not_before": in_secs(nb), "not_after": in_secs(na)})
}

fn err_code(v: &Value) -> &str {
    v["error"]["code"].as_str().unwrap_or_default()
}

fn err_param(v: &Value) -> &str {
    v["error"]["param"].as_str().unwrap_or_default()
}

#[tokio::test]
async fn sc_int_01_shape_errors_are_clear_4xx() {
    let w = world().await;
    let cases: Vec<(Vec<u8>, u16, &str, &str)> = vec![
        (b"{not json".to_vec(), 400, "validation_failed", "body"),
        (b"[1,2]".to_vec(), 400, "validation_failed", "body"),
        (b"".to_vec(), 400, "validation_failed", "body"),
        (
            json!({"tool": "", "args": {}}).to_string().into_bytes(),
            400,
            "validation_failed",
            "tool",
        ),
        (
            json!({"tool": "  ", "args": {}}).to_string().into_bytes(),
            400,
            "validation_failed",
            "tool",
        ),
        (
            json!({"tool": 5, "args": {}}).to_string().into_bytes(),
            400,
            "validation_failed",
            "tool",
        ),
        (
            json!({"tool": "mail.send", "args": [1]})
                .to_string()
                .into_bytes(),
            400,
            "validation_failed",
            "args",
        ),
        (
            json!({"tool": "mail.send"}).to_string().into_bytes(),
            400,
            "validation_failed",
            "args",
        ),
        (
            json!({"tool": "mail.send", "args": {}, "colour": 1})
                .to_string()
                .into_bytes(),
            400,
            "validation_failed",
            "colour",
        ),
        (
            json!({"tool": "mail.send", "args": {}, "run": {"run_id": 3}})
                .to_string()
                .into_bytes(),
            400,
            "validation_failed",
            "run.run_id",
        ),
        (
            json!({"tool": "mail.send", "args": {}, "run": {"x": "y"}})
                .to_string()
                .into_bytes(),
            400,
            "validation_failed",
            "run.x",
        ),
        (
            json!({"tool": "mail.send", "args": {}, "schedule": {"not_before": 1}})
                .to_string()
                .into_bytes(),
            400,
            "validation_failed",
            "schedule.not_before",
        ),
        (
            json!({"tool": "mail.send", "args": {}, "action_kind": ""})
                .to_string()
                .into_bytes(),
            400,
            "validation_failed",
            "action_kind",
        ),
        (
            json!({"tool": "mail.send", "args": {}, "action_kind": "k".repeat(300)})
                .to_string()
                .into_bytes(),
            400,
            "validation_failed",
            "action_kind",
        ),
        // An empty call id would make an unbuildable ticket: refused at the door.
        (
            json!({"tool": "search.web", "args": {}, "run": {"call_id": ""}})
                .to_string()
                .into_bytes(),
            400,
            "validation_failed",
            "run.call_id",
        ),
        (
            json!({"tool": "mail.send", "args": {}, "run": {"run_id": "r".repeat(300)}})
                .to_string()
                .into_bytes(),
            400,
            "validation_failed",
            "run.run_id",
        ),
    ];
    for (body, status, code, param) in cases {
        let shown = String::from_utf8_lossy(&body).into_owned();
        let (s, v, _) = w
            .api
            .send(
                reqwest::Method::POST,
                "/v1/actions",
                Some(keys::AGENT),
                Some(body),
                &[],
            )
            .await;
        assert_eq!(
            (s, err_code(&v), err_param(&v)),
            (status, code, param),
            "{shown} → {v}"
        );
        assert!(v["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()));
    }
    // Oversize: the body over 256 KiB, and args over 64 KiB inside a legal body.
    let huge = json!({"tool": "mail.send", "args": {"x": "a".repeat(300 * 1024)}})
        .to_string()
        .into_bytes();
    let (s, v, _) = w
        .api
        .send(
            reqwest::Method::POST,
            "/v1/actions",
            Some(keys::AGENT),
            Some(huge),
            &[],
        )
        .await;
    assert_eq!((s, err_code(&v)), (413, "payload_too_large"));
    let (s, v) = w
        .api
        .submit(
            keys::AGENT,
            json!({"tool": "mail.send", "args": {"x": "a".repeat(70 * 1024)}}),
        )
        .await;
    assert_eq!((s, err_code(&v)), (413, "payload_too_large"));
    // Authentication.
    let (s, v, _) = w
        .api
        .send(
            reqwest::Method::POST,
            "/v1/actions",
            None,
            Some(b"{}".to_vec()),
            &[],
        )
        .await;
    assert_eq!((s, err_code(&v)), (401, "unauthenticated"));
    let (s, v) = w
        .api
        .submit("not-a-key", json!({"tool": "mail.send", "args": {}}))
        .await;
    assert_eq!((s, err_code(&v)), (401, "unauthenticated"));
    // Only agent keys submit.
    let (s, v) = w
        .api
        .submit(keys::APPROVER, json!({"tool": "mail.send", "args": {}}))
        .await;
    assert_eq!((s, err_code(&v)), (403, "forbidden"));
    // Unknown routes and bad query parameters are JSON errors too (an unknown route is
    // `route_not_found` since issue 16: tests/errors.rs).
    let (s, v) = w.api.get("/v1/nothing", keys::AGENT).await;
    assert_eq!((s, err_code(&v)), (404, "route_not_found"));
    let (s, v) = w.api.get("/v1/actions?state=bogus", keys::AGENT).await;
    assert_eq!(
        (s, err_code(&v), err_param(&v)),
        (400, "validation_failed", "state")
    );
    let (s, v) = w.api.get("/v1/actions?limit=0", keys::AGENT).await;
    assert_eq!((s, err_param(&v)), (400, "limit"));
    let (s, v) = w.api.get("/v1/actions?sort=asc", keys::AGENT).await;
    assert_eq!((s, err_param(&v)), (400, "sort"));
    assert!(
        w.tools.received().is_empty(),
        "no bad request reached a tool"
    );
}

#[tokio::test]
async fn sc_int_02_schedule_shape() {
    let w = world().await;
    let bad = [
        json!({"not_before": in_secs(60)}),
        json!({"not_after": in_secs(60)}),
        json!({"not_before": "2026-12-01T10:00:00", "not_after": in_secs(600)}),
        json!({"not_before": "tomorrow", "not_after": in_secs(600)}),
        // narrower than the configured minimum (10 s in the test config)
        json!({"not_before": in_secs(60), "not_after": in_secs(65)}),
        // already over
        json!({"not_before": in_secs(-600), "not_after": in_secs(-60)}),
        // more than 72 h ahead
        json!({"not_before": in_secs(60), "not_after": in_secs(72 * 3600 + 60)}),
    ];
    for schedule in bad {
        let (s, v) = w
            .api
            .submit(
                keys::AGENT,
                json!({"tool": "mail.send", "args": {}, "schedule": schedule}),
            )
            .await;
        assert_eq!(
            (s, err_code(&v), err_param(&v)),
            (400, "validation_failed", "schedule"),
            "{schedule} → {v}"
        );
    }
    let (s, v) = w
        .api
        .submit(
            keys::AGENT,
            json!({"tool": "mail.send", "args": {}, "schedule": window(60, 3600)}),
        )
        .await;
    assert_eq!(s, 202, "{v}");
    // Offsets other than Z are accepted and normalized to UTC.
    let (s, v) = w
        .api
        .submit(keys::AGENT, json!({"tool": "mail.send", "args": {}, "schedule": {"not_before": "2099-01-01T10:00:00+02:00", "not_after": "2099-01-01T11:00:00+02:00"}}))
        .await;
    assert_eq!(
        (s, err_param(&v)),
        (400, "schedule"),
        "2099 is beyond 72 h: {v}"
    );
}

#[tokio::test]
async fn sc_int_03_and_sc_stop_01_stop_first_and_lifting_does_not_revive() {
    let w = world().await;
    let (s, _) = w
        .api
        .post("/v1/stops", keys::AGENT, json!({"agent_id": "agent-1"}))
        .await;
    assert_eq!(s, 403, "only admins stop");
    let (s, stop) = w
        .api
        .post("/v1/stops", keys::ADMIN, json!({"agent_id": "agent-1"}))
        .await;
    assert_eq!(s, 201, "{stop}");

    let (s, v) = w
        .api
        .submit(
            keys::AGENT,
            json!({"tool": "search.web", "args": {"q": "x"}}),
        )
        .await;
    assert_eq!((s, err_code(&v)), (403, "agent_stopped"));
    let id = v["error"]["action_id"].as_str().unwrap().to_owned();
    let recorded = w.api.action(&id).await;
    assert_eq!(recorded["state"], "denied");
    assert_eq!(recorded["outcome"]["reason"], "stopped");
    // Another agent of the tenant is not stopped.
    let (s, _) = w
        .api
        .submit(keys::AGENT_2, json!({"tool": "search.web", "args": {}}))
        .await;
    assert_eq!(s, 200);

    let s = w.api.delete("/v1/stops/agent-1", keys::ADMIN).await;
    assert_eq!(s, 204);
    let s = w.api.delete("/v1/stops/agent-1", keys::ADMIN).await;
    assert_eq!(s, 404, "nothing left to lift");
    assert_eq!(
        w.api.action(&id).await["state"],
        "denied",
        "lifting does not revive"
    );
    let (s, _) = w
        .api
        .submit(keys::AGENT, json!({"tool": "search.web", "args": {}}))
        .await;
    assert_eq!(s, 200);

    // A tenant-wide stop (empty body) stops every agent.
    let (s, _, _) = w
        .api
        .send(
            reqwest::Method::POST,
            "/v1/stops",
            Some(keys::ADMIN),
            None,
            &[],
        )
        .await;
    assert_eq!(s, 201);
    let (s, v) = w
        .api
        .submit(keys::AGENT_2, json!({"tool": "search.web", "args": {}}))
        .await;
    assert_eq!((s, err_code(&v)), (403, "agent_stopped"));
    let s = w.api.delete("/v1/stops/*", keys::ADMIN).await;
    assert_eq!(s, 204);
    assert_eq!(
        w.tools.received().len(),
        2,
        "only the two unstopped calls ran"
    );
}

#[tokio::test]
async fn sc_int_04_undeclared_action_kind_is_capability_bound() {
    let w = world().await;
    let (s, v) = w
        .api
        .submit(
            keys::AGENT,
            json!({"tool": "search.web", "args": {}, "action_kind": "payment"}),
        )
        .await;
    assert_eq!((s, err_code(&v)), (403, "capability_bound"));
    let id = v["error"]["action_id"].as_str().unwrap();
    let a = w.api.action(id).await;
    assert_eq!(
        (a["state"].as_str(), a["outcome"]["reason"].as_str()),
        (Some("denied"), Some("capability_bound"))
    );
    assert_eq!(a["next_action"]["type"], "none");
    assert_eq!(w.tools.count_for(id), 0);
    // A declared kind and the ordinary null kind pass the bound.
    let (s, _) = w
        .api
        .submit(
            keys::AGENT,
            json!({"tool": "search.web", "args": {}, "action_kind": "email"}),
        )
        .await;
    assert_eq!(s, 200);
    let (s, _) = w
        .api
        .submit(
            keys::AGENT,
            json!({"tool": "search.web", "args": {}, "action_kind": null}),
        )
        .await;
    assert_eq!(s, 200);
}

#[tokio::test]
async fn sc_int_05_policy_decisions() {
    let w = world().await;
    // No matching rule → deny.
    let (s, v) = w
        .api
        .submit(keys::AGENT, json!({"tool": "payments.refund", "args": {}}))
        .await;
    assert_eq!((s, err_code(&v)), (403, "denied"));
    assert_eq!(
        w.api
            .action(v["error"]["action_id"].as_str().unwrap())
            .await["state"],
        "denied"
    );

    // allow, no schedule → runs now, once, signed, with the action id as Idempotency-Key.
    let (s, v) = w
        .api
        .submit(
            keys::AGENT,
            json!({"tool": "search.web", "args": {"q": "rust"}}),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["state"], "succeeded");
    assert_eq!(v["outcome"]["result"], json!({"sent": true}));
    let id = v["id"].as_str().unwrap();
    let calls = w.tools.calls_for(id);
    assert_eq!(calls.len(), 1);
    assert!(calls[0].signature_ok);
    assert_eq!(calls[0].idempotency_key.as_deref(), Some(id));
    assert_eq!(calls[0].body["args"], json!({"q": "rust"}));

    // allow, window opening within 60 s → runs at once; the schedule is recorded.
    let (s, v) = w
        .api
        .submit(
            keys::AGENT,
            json!({"tool": "search.web", "args": {}, "schedule": window(30, 600)}),
        )
        .await;
    assert_eq!((s, v["state"].as_str()), (200, Some("succeeded")), "{v}");
    assert!(v["schedule"]["not_before"].is_string());

    // allow, later window → would run early → refused.
    let (s, v) = w
        .api
        .submit(
            keys::AGENT,
            json!({"tool": "search.web", "args": {}, "schedule": window(120, 600)}),
        )
        .await;
    assert_eq!((s, err_code(&v)), (403, "schedule_needs_approval"));
    let id = v["error"]["action_id"].as_str().unwrap();
    assert_eq!(w.api.action(id).await["state"], "denied");
    assert_eq!(w.tools.count_for(id), 0);

    // require_approval → 202 pending with the context.
    let (s, v) = w
        .api
        .submit(
            keys::AGENT,
            json!({"tool": "mail.send", "args": {"to": "a@b"}}),
        )
        .await;
    assert_eq!((s, v["state"].as_str()), (202, Some("pending_approval")));
    assert_eq!(v["next_action"]["type"], "approval");
    assert_eq!(
        v["next_action"]["context_digest"],
        v["approval"]["context_digest"]
    );

    // A tool the policy lets run but the catalog lacks is a validation error, not a 500.
    let (s, v) = w
        .api
        .submit(keys::AGENT, json!({"tool": "search.images", "args": {}}))
        .await;
    assert_eq!((s, err_param(&v)), (400, "tool"));
}

#[tokio::test]
async fn sc_int_06_approval_context_binds_the_window_in_the_tenant_zone() {
    let w = world().await;
    let schedule =
        json!({"not_before": "2026-12-01T16:30:00Z", "not_after": "2026-12-01T18:30:00Z"});
    // Keep the window legal whatever today is: shift it if the fixed date is not ahead.
    let now = jiff::Timestamp::now();
    let fixed: jiff::Timestamp = "2026-12-01T18:30:00Z".parse().unwrap();
    let (schedule, expect) =
        if fixed > now && fixed.duration_since(now) < jiff::SignedDuration::from_hours(72) {
            (
                schedule,
                Some("between Tue 1 Dec 2026 17:30 and 19:30 CET (Europe/Berlin)"),
            )
        } else {
            (window(3600, 7200), None)
        };
    let (s, v) = w
        .api
        .submit(
            keys::AGENT,
            json!({"tool": "mail.send", "args": {"to": "a@b"}, "schedule": schedule}),
        )
        .await;
    assert_eq!(s, 202, "{v}");
    let context = &v["approval"]["context"];
    assert_eq!(context["tool"], "mail.send");
    assert_eq!(context["args"], json!({"to": "a@b"}));
    assert_eq!(context["agent_id"], "agent-1");
    assert_eq!(context["schedule"]["time_zone"], "Europe/Berlin");
    let summary = context["schedule"]["summary"].as_str().unwrap();
    assert!(
        summary.starts_with("between ") && summary.ends_with("(Europe/Berlin)"),
        "{summary}"
    );
    if let Some(expect) = expect {
        assert_eq!(summary, expect);
    }
    // The digest is sha256 of the canonical (key-sorted, compact) context.
    let canonical = serde_json::to_vec(context).unwrap();
    let digest = format!("sha256:{}", hex::encode(Sha256::digest(&canonical)));
    assert_eq!(v["approval"]["context_digest"], digest);
}

#[tokio::test]
async fn sc_int_07_idempotent_intake() {
    let w = world().await;
    let body = json!({"tool": "mail.send", "args": {"to": "a@b"}})
        .to_string()
        .into_bytes();
    let send = |key: &'static str, agent: &'static str, body: Vec<u8>| {
        let api = w.api.clone();
        async move {
            api.send(
                reqwest::Method::POST,
                "/v1/actions",
                Some(agent),
                Some(body),
                &[("idempotency-key", key)],
            )
            .await
        }
    };
    let (s1, v1, h1) = send("k-1", keys::AGENT, body.clone()).await;
    let (s2, v2, h2) = send("k-1", keys::AGENT, body.clone()).await;
    assert_eq!((s1, s2), (202, 202));
    assert_eq!(v1["id"], v2["id"]);
    assert!(h1.get("idempotent-replayed").is_none());
    assert_eq!(h2.get("idempotent-replayed").unwrap(), "true");
    let (_, events) = w
        .api
        .get(
            &format!("/v1/actions/{}/events", v1["id"].as_str().unwrap()),
            keys::AGENT,
        )
        .await;
    assert_eq!(events["data"].as_array().unwrap().len(), 1, "no new commit");

    let other = json!({"tool": "mail.send", "args": {"to": "c@d"}})
        .to_string()
        .into_bytes();
    let (s, v, _) = send("k-1", keys::AGENT, other).await;
    assert_eq!((s, err_code(&v)), (409, "idempotency_conflict"));
    // Scope is tenant + agent: another agent's same key is a new action.
    let (s, v3, _) = send("k-1", keys::AGENT_2, body.clone()).await;
    assert_eq!(s, 202);
    assert_ne!(v3["id"], v1["id"]);
    // A refused intake replays as the same refusal.
    let denied = json!({"tool": "payments.refund", "args": {}})
        .to_string()
        .into_bytes();
    let (s1, d1, _) = send("k-2", keys::AGENT, denied.clone()).await;
    let (s2, d2, _) = send("k-2", keys::AGENT, denied).await;
    assert_eq!((s1, s2), (403, 403));
    assert_eq!(d1["error"]["action_id"], d2["error"]["action_id"]);
    // Concurrent first uses of one key commit one action.
    let (a, b) = tokio::join!(
        send("k-3", keys::AGENT, body.clone()),
        send("k-3", keys::AGENT, body.clone())
    );
    assert_eq!(a.1["id"], b.1["id"], "{a:?} {b:?}");
    let (s, v, _) = send("bad key with spaces", keys::AGENT, body).await;
    assert_eq!((s, err_param(&v)), (400, "Idempotency-Key"));
}

#[tokio::test]
async fn sc_int_08_set_result_answers_without_running_the_tool() {
    let w = world().await;
    let (s, v) = w
        .api
        .submit(
            keys::AGENT,
            json!({"tool": "sandbox.delete_all", "args": {}}),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["state"], "succeeded");
    assert_eq!(v["decision"], "set_result");
    assert_eq!(v["outcome"]["result"], json!({"shadow": true}));
    assert_eq!(v["outcome"]["reason"], "set_result");
    assert!(w.tools.received().is_empty());
}

#[tokio::test]
async fn sc_int_09_schedule_decision_commits_a_ticket_unattended() {
    let w = world().await;
    let (s, v) = w
        .api
        .submit(keys::AGENT, json!({"tool": "report.build", "args": {}}))
        .await;
    assert_eq!((s, err_param(&v)), (400, "schedule"), "{v}");

    let (s, v) = w
        .api
        .submit(
            keys::AGENT,
            json!({"tool": "report.build", "args": {"n": 1}, "schedule": window(2, 30)}),
        )
        .await;
    assert_eq!(s, 201, "{v}");
    assert_eq!(v["state"], "approved");
    assert_eq!(v["actor"], json!({"type": "system"}));
    assert_eq!(v["next_action"]["type"], "scheduled");
    let id = v["id"].as_str().unwrap();
    let done = w.api.wait_sealed(id, 20).await;
    assert_eq!(done["state"], "succeeded", "{done}");
    let calls = w.tools.calls_for(id);
    assert_eq!(calls.len(), 1);
    let not_before: jiff::Timestamp = v["schedule"]["not_before"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(calls[0].at >= not_before, "never before not_before");
}

#[tokio::test]
async fn sc_app_01_only_approvers_and_never_self() {
    let w = world().await;
    let (_, v) = w
        .api
        .submit(keys::AGENT, json!({"tool": "mail.send", "args": {}}))
        .await;
    let (id, digest) = (
        v["id"].as_str().unwrap(),
        v["approval"]["context_digest"].as_str().unwrap(),
    );
    let path = format!("/v1/actions/{id}/approve");
    let (s, r) = w
        .api
        .post(&path, keys::AGENT, json!({"context_digest": digest}))
        .await;
    assert_eq!((s, err_code(&r)), (403, "forbidden"));
    let (s, r) = w
        .api
        .post(&path, keys::ADMIN, json!({"context_digest": digest}))
        .await;
    assert_eq!((s, err_code(&r)), (403, "forbidden"));
    let (s, r) = w
        .api
        .post(
            &path,
            keys::APPROVER_SELF,
            json!({"context_digest": digest}),
        )
        .await;
    assert_eq!(
        (s, err_code(&r)),
        (403, "forbidden"),
        "agent-1 cannot countersign its own call"
    );
    assert_eq!(w.api.action(id).await["state"], "pending_approval");
    let (s, r) = w.api.post(&path, keys::APPROVER, json!({})).await;
    assert_eq!((s, err_param(&r)), (400, "context_digest"));
}

#[tokio::test]
async fn sc_app_02_a_changed_context_is_refused() {
    let w = world().await;
    let (_, v) = w
        .api
        .submit(
            keys::AGENT,
            json!({"tool": "mail.send", "args": {}, "schedule": window(60, 600)}),
        )
        .await;
    let id = v["id"].as_str().unwrap();
    // The digest of a real context for the same call in another window: still not this one.
    let (_, other) = w
        .api
        .submit(
            keys::AGENT,
            json!({"tool": "mail.send", "args": {}, "schedule": window(120, 600)}),
        )
        .await;
    let other_digest = other["approval"]["context_digest"].as_str().unwrap();
    assert_ne!(
        other_digest,
        v["approval"]["context_digest"].as_str().unwrap()
    );
    for digest in [other_digest, "sha256:0000"] {
        let (s, r) = w.api.approve(id, digest).await;
        assert_eq!((s, err_code(&r)), (409, "context_changed"));
    }
    let (s, r) = w.api.approve(id, "sha256:0000").await;
    assert_eq!((s, err_code(&r)), (409, "context_changed"));
    assert_eq!(
        r["error"]["context_digest"],
        v["approval"]["context_digest"]
    );
    let after = w.api.action(id).await;
    assert_eq!(
        (after["state"].as_str(), after["version"].as_u64()),
        (Some("pending_approval"), Some(1))
    );
}

#[tokio::test]
async fn sc_app_03_approve_commits_the_ticket_and_runs_in_the_window() {
    let w = world().await;
    // Due now → performed at once.
    let (_, v) = w
        .api
        .submit(
            keys::AGENT,
            json!({"tool": "mail.send", "args": {"to": "now@x"}}),
        )
        .await;
    let (s, r) = w
        .api
        .approve(
            v["id"].as_str().unwrap(),
            v["approval"]["context_digest"].as_str().unwrap(),
        )
        .await;
    assert_eq!((s, r["state"].as_str()), (200, Some("succeeded")), "{r}");
    assert_eq!(r["approval"]["approver"], "approver-1");
    assert!(r["approval"]["decided_at"].is_string());

    // Scheduled → approved, waits for not_before, then runs once.
    let (_, v) = w
        .api
        .submit(
            keys::AGENT,
            json!({"tool": "mail.send", "args": {"to": "later@x"}, "schedule": window(3, 30)}),
        )
        .await;
    let id = v["id"].as_str().unwrap();
    let (s, r) = w
        .api
        .approve(id, v["approval"]["context_digest"].as_str().unwrap())
        .await;
    assert_eq!((s, r["state"].as_str()), (200, Some("approved")), "{r}");
    assert_eq!(r["next_action"]["type"], "scheduled");
    assert_eq!(r["next_action"]["not_before"], v["schedule"]["not_before"]);
    assert_eq!(w.tools.count_for(id), 0, "not before its window");
    // A retried approve of the same context answers with the action, and commits nothing new.
    let (s, again) = w
        .api
        .approve(id, v["approval"]["context_digest"].as_str().unwrap())
        .await;
    assert_eq!((s, again["version"].as_u64()), (200, Some(2)));
    let done = w.api.wait_sealed(id, 20).await;
    assert_eq!(done["state"], "succeeded");
    let calls = w.tools.calls_for(id);
    assert_eq!(calls.len(), 1);
    let not_before: jiff::Timestamp = v["schedule"]["not_before"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(calls[0].at >= not_before);
}

#[tokio::test]
async fn sc_app_05_deny_seals_with_the_approver_as_actor() {
    let w = world().await;
    let (_, v) = w
        .api
        .submit(keys::AGENT, json!({"tool": "mail.send", "args": {}}))
        .await;
    let id = v["id"].as_str().unwrap();
    let (s, r) = w
        .api
        .post(
            &format!("/v1/actions/{id}/deny"),
            keys::APPROVER,
            json!({"reason": "not today"}),
        )
        .await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(r["state"], "denied");
    // The deny names the channel it came through (SC-CH-08): the API, here.
    assert_eq!(
        r["actor"],
        json!({"type": "user", "id": "approver-1", "channel": "api"})
    );
    assert_eq!(r["outcome"]["reason"], "not today");
    let (s, r) = w
        .api
        .post(
            &format!("/v1/actions/{id}/deny"),
            keys::APPROVER,
            json!({"reason": "again"}),
        )
        .await;
    assert_eq!(
        (s, err_code(&r), r["error"]["state"].as_str()),
        (409, "action_sealed", Some("denied"))
    );
    let (s, r) = w
        .api
        .approve(id, v["approval"]["context_digest"].as_str().unwrap())
        .await;
    assert_eq!((s, err_code(&r)), (409, "action_sealed"));
}

#[tokio::test]
async fn sc_can_01_cancel_pending_or_approved_never_runs() {
    let w = world().await;
    let (_, pending) = w
        .api
        .submit(keys::AGENT, json!({"tool": "mail.send", "args": {}}))
        .await;
    let pid = pending["id"].as_str().unwrap();
    // Another agent's action is missing to an agent key (SC-SEC-01): it cannot cancel it.
    let (s, r) = w.api.cancel(pid, keys::AGENT_2).await;
    assert_eq!(
        (s, err_code(&r)),
        (404, "not_found"),
        "another agent cannot cancel"
    );
    let (s, r) = w.api.cancel(pid, keys::AGENT).await;
    assert_eq!((s, r["state"].as_str()), (200, Some("cancelled")));
    // The cancel names the channel it came through (SC-CH-08): the API, here.
    assert_eq!(
        r["actor"],
        json!({"type": "agent", "id": "agent-1", "channel": "api"})
    );

    let (_, v) = w
        .api
        .submit(
            keys::AGENT,
            json!({"tool": "mail.send", "args": {}, "schedule": window(2, 30)}),
        )
        .await;
    let id = v["id"].as_str().unwrap();
    w.api
        .approve(id, v["approval"]["context_digest"].as_str().unwrap())
        .await;
    let (s, r) = w.api.cancel(id, keys::APPROVER).await;
    assert_eq!((s, r["state"].as_str()), (200, Some("cancelled")), "{r}");
    assert_eq!(r["next_action"]["type"], "none");
    tokio::time::sleep(std::time::Duration::from_secs(4)).await;
    assert_eq!(w.api.action(id).await["state"], "cancelled");
    assert_eq!(w.tools.count_for(id), 0, "a cancelled ticket never runs");
}

#[tokio::test]
async fn sc_can_02_cancel_while_executing_or_sealed_is_a_conflict() {
    let w = world_with(Behaviour {
        delay_ms: 1500,
        ..Behaviour::default()
    })
    .await;
    let api = w.api.clone();
    let running = tokio::spawn(async move {
        api.submit(keys::AGENT, json!({"tool": "search.web", "args": {}}))
            .await
    });
    // Find the executing action while the slow tool holds it.
    let id = loop {
        let (_, page) = w.api.get("/v1/actions?state=executing", keys::AGENT).await;
        if let Some(a) = page["data"].as_array().and_then(|d| d.first()) {
            break a["id"].as_str().unwrap().to_owned();
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    let (s, r) = w.api.cancel(&id, keys::AGENT).await;
    assert_eq!((s, err_code(&r)), (409, "action_executing"));
    let (s, done) = running.await.unwrap();
    assert_eq!((s, done["state"].as_str()), (200, Some("succeeded")));
    let (s, r) = w.api.cancel(&id, keys::AGENT).await;
    assert_eq!(
        (s, err_code(&r), r["error"]["state"].as_str()),
        (409, "action_sealed", Some("succeeded"))
    );
}

#[tokio::test]
async fn another_tenants_ids_are_not_found() {
    let w = world().await;
    let (_, v) = w
        .api
        .submit(keys::AGENT, json!({"tool": "mail.send", "args": {}}))
        .await;
    let id = v["id"].as_str().unwrap();
    for path in [
        format!("/v1/actions/{id}"),
        format!("/v1/actions/{id}/events"),
    ] {
        let (s, r) = w.api.get(&path, keys::OTHER_TENANT_AGENT).await;
        assert_eq!((s, err_code(&r)), (404, "not_found"), "{path}");
    }
    let (s, r) = w.api.approve(id, "x").await;
    assert_ne!(s, 404, "{r}");
    let (s, r) = w
        .api
        .post(
            &format!("/v1/actions/{id}/approve"),
            keys::OTHER_TENANT_APPROVER,
            json!({"context_digest": v["approval"]["context_digest"]}),
        )
        .await;
    assert_eq!((s, err_code(&r)), (404, "not_found"));
    let (s, _) = w.api.cancel(id, keys::OTHER_TENANT_AGENT).await;
    assert_eq!(s, 404);
    let (_, page) = w.api.get("/v1/actions", keys::OTHER_TENANT_AGENT).await;
    assert_eq!(page["data"], json!([]));
    let (s, _) = w.api.get("/v1/actions/act_doesnotexist", keys::AGENT).await;
    assert_eq!(s, 404);
}

#[tokio::test]
async fn listing_filters_and_pages_and_events_form_a_chain() {
    let w = world().await;
    let mut ids = Vec::new();
    for i in 0..5 {
        let (_, v) = w
            .api
            .submit(keys::AGENT, json!({"tool": "mail.send", "args": {"i": i}}))
            .await;
        ids.push(v["id"].as_str().unwrap().to_owned());
    }
    w.api
        .submit(keys::AGENT_2, json!({"tool": "search.web", "args": {}}))
        .await;
    let (_, page1) = w
        .api
        .get("/v1/actions?state=pending_approval&limit=3", keys::APPROVER)
        .await;
    let got: Vec<&str> = page1["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        got,
        ids.iter()
            .rev()
            .take(3)
            .map(String::as_str)
            .collect::<Vec<_>>(),
        "newest first"
    );
    let cursor = page1["next_cursor"].as_str().unwrap();
    let (_, page2) = w
        .api
        .get(
            &format!("/v1/actions?state=pending_approval&limit=3&cursor={cursor}"),
            keys::APPROVER,
        )
        .await;
    assert_eq!(page2["data"].as_array().unwrap().len(), 2);
    let (_, by_agent) = w
        .api
        .get("/v1/actions?agent_id=agent-2", keys::APPROVER)
        .await;
    assert_eq!(by_agent["data"].as_array().unwrap().len(), 1);

    // Approve one; its events chain from pending to succeeded, each hash verifiable.
    let (_, a) = w
        .api
        .action(&ids[0])
        .await
        .as_object()
        .map(|_| ((), w.api.clone()))
        .unwrap();
    let v = a.action(&ids[0]).await;
    w.api
        .approve(&ids[0], v["approval"]["context_digest"].as_str().unwrap())
        .await;
    let (_, events) = w
        .api
        .get(&format!("/v1/actions/{}/events", ids[0]), keys::AGENT)
        .await;
    let events: Vec<Event> = serde_json::from_value(events["data"].clone()).unwrap();
    let path: Vec<String> = events.iter().map(|e| e.to.to_string()).collect();
    // Due now and fitting the request: the approval commits its ticket already claimed, in
    // one write by the approver (SC-EDGE-07), so no sweep can take it before the run; that
    // write records the approval and the claim (issue 16: the trail had skipped `approved`).
    assert_eq!(
        path,
        ["pending_approval", "approved", "executing", "succeeded"]
    );
    assert_eq!(events[1].reason.as_deref(), Some("approved"));
    assert_eq!(events[2].reason.as_deref(), Some("claimed"));
    // SC-SEC-06: served only after verification; the countersignature names its digest.
    assert_eq!(
        events[1].context_digest.as_deref(),
        v["approval"]["context_digest"].as_str()
    );
}

/// Every API route in `api::ROUTES` (the list the SAM template is checked against) is served:
/// without a key it answers 401, never the 404/405 fallbacks. (The approver page's public
/// `/ui/` routes are held to the list in `approver_page.rs`, the public `/openapi.json` in
/// `openapi.rs`.)
#[tokio::test]
async fn every_listed_route_is_served() {
    let w = world().await;
    for (method, path, _function) in countersign::api::ROUTES {
        if !path.starts_with("/v1/") {
            continue;
        }
        let path = path
            .replace("{id}", "act_01ABC")
            .replace("{scope}", "agent-1");
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let (s, v, _) = w.api.send(method.clone(), &path, None, None, &[]).await;
        assert_eq!(
            (s, err_code(&v)),
            (401, "unauthenticated"),
            "{method} {path}"
        );
    }
    let (s, _, _) = w
        .api
        .send(reqwest::Method::PUT, "/v1/actions", None, None, &[])
        .await;
    assert_ne!(s, 401, "an unlisted method is not served");
}

/// Ids and cursors that cannot name an action answer 404/400 before reaching the store.
#[tokio::test]
async fn odd_ids_and_cursors_are_clear_4xx() {
    let w = world().await;
    let long = format!("act_{}", "A".repeat(3000));
    for path in [
        format!("/v1/actions/{long}"),
        "/v1/actions/act_%FF".to_owned(),
        "/v1/actions/%E2%9C%93".to_owned(),
        format!("/v1/actions/{long}/events"),
    ] {
        let (s, v) = w.api.get(&path, keys::AGENT).await;
        assert_eq!((s, err_code(&v)), (404, "not_found"), "{path}");
    }
    let (s, v) = w
        .api
        .get(&format!("/v1/actions?cursor={long}"), keys::AGENT)
        .await;
    assert_eq!((s, err_param(&v)), (400, "cursor"));
    let (s, v) = w
        .api
        .post(
            "/v1/stops",
            keys::ADMIN,
            json!({"agent_id": "a".repeat(300)}),
        )
        .await;
    assert_eq!((s, err_param(&v)), (400, "agent_id"));
}

/// Issue 16, defect 2 (SC-APP-01): the approver page accepted any key — signed in with an agent
/// key it offered Approve, which then failed. Caught on main: there was no way to ask what a
/// key is (`GET /v1/me` answered 404). Every key may ask; an unknown one is refused.
#[tokio::test]
async fn sc_app_01_issue16_me_names_the_keys_tenant_role_and_id() {
    let w = world().await;
    let berlin = "Europe/Berlin";
    for (key, tenant, role, id, zone) in [
        (keys::AGENT, "acme", "agent", "agent-1", berlin),
        (keys::APPROVER, "acme", "approver", "approver-1", berlin),
        (keys::ADMIN, "acme", "admin", "admin-1", berlin),
        (
            keys::OTHER_TENANT_APPROVER,
            "globex",
            "approver",
            "g-approver",
            "America/New_York",
        ),
    ] {
        let (status, me) = w.api.get("/v1/me", key).await;
        assert_eq!(status, 200, "{me}");
        assert_eq!(
            me,
            json!({"tenant": tenant, "role": role, "key_id": id, "time_zone": zone}),
            "{key}"
        );
    }
    let (status, v) = w.api.get("/v1/me", "cs_not-a-key").await;
    assert_eq!(
        (status, &v["error"]["code"]),
        (401, &json!("unauthenticated"))
    );
}
