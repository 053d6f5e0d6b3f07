//! The AWS path end to end against LocalStack: real API Gateway events (HTTP API v2 and REST v1)
//! through `lambda_http` into the HTTP functions' handler, DynamoDB as the store, EventBridge
//! Scheduler storing the wake, and the schedule's stored input delivered to the resume handler
//! as the Scheduler would deliver it (LocalStack's Scheduler never fires on its own).

#[path = "aws_support/mod.rs"]
mod aws_support;

use aws_sdk_scheduler::types::{ActionAfterCompletion, FlexibleTimeWindowMode};
use aws_support::{AwsWorld, DLQ_ARN, RESUME_ARN, ROLE_ARN};
use countersign::domain::resume::Wake;
use countersign_tests::keys;
use jiff::{SignedDuration, Timestamp};
use serde_json::{json, Value};

fn window_body(tool: &str, not_before: &str, not_after: &str) -> Value {
    json!({
        "tool": tool,
        "args": {"to": "ops@example.com", "subject": "quarterly report"},
        "schedule": {"not_before": not_before, "not_after": not_after}
    })
}

/// Submit a `mail.send` in [+120 s, +900 s] and approve it; returns the approved action.
async fn approved_mail(w: &AwsWorld) -> Value {
    let submitted = w
        .v2(
            "POST",
            "/v1/actions",
            keys::AGENT,
            Some(window_body("mail.send", &w.at(120), &w.at(900))),
        )
        .await;
    assert_eq!(submitted.status, 202, "{:?}", submitted.body);
    assert_eq!(submitted.body["state"], "pending_approval");
    let id = submitted.body["id"].as_str().unwrap().to_owned();
    let digest = submitted.body["approval"]["context_digest"].clone();
    let approved = w
        .v2(
            "POST",
            &format!("/v1/actions/{id}/approve"),
            keys::APPROVER,
            Some(json!({ "context_digest": digest })),
        )
        .await;
    assert_eq!(approved.status, 200, "{:?}", approved.body);
    assert_eq!(approved.body["state"], "approved");
    approved.body
}

fn ts(v: &Value) -> Timestamp {
    v.as_str().unwrap().parse().unwrap()
}

/// SC-APP-03, SC-RES-07, SC-REC-03: submit → approve → the armed schedule (expression, target,
/// input) → its input delivered at its time runs the tool exactly once (signed, with the
/// Idempotency-Key) → `succeeded` with its events; a second delivery is rejected.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sc_res_07_approve_arms_a_schedule_whose_input_runs_the_tool_once() {
    let w = AwsWorld::new("flow").await;
    let action = approved_mail(&w).await;
    let id = action["id"].as_str().unwrap();
    let not_before = ts(&action["schedule"]["not_before"]);
    let not_after = ts(&action["schedule"]["not_after"]);

    // The armed wake, as stored by EventBridge Scheduler.
    let wake = w.wake_of(id).await;
    let schedule = w.schedule(&wake).await.expect("approve armed a schedule");
    let expected_at = format!("at({})", not_before.strftime("%Y-%m-%dT%H:%M:%S"));
    assert_eq!(schedule.schedule_expression(), Some(expected_at.as_str()));
    assert_eq!(schedule.schedule_expression_timezone(), Some("UTC"));
    assert_eq!(schedule.group_name(), Some(w.group.as_str()));
    assert_eq!(
        schedule.flexible_time_window().unwrap().mode(),
        &FlexibleTimeWindowMode::Off
    );
    assert_eq!(
        schedule.action_after_completion(),
        Some(&ActionAfterCompletion::Delete)
    );
    let target = schedule.target().unwrap();
    assert_eq!(target.arn(), RESUME_ARN);
    assert_eq!(target.role_arn(), ROLE_ARN);
    assert_eq!(
        target.dead_letter_config().and_then(|d| d.arn()),
        Some(DLQ_ARN)
    );
    let retry = target.retry_policy().unwrap();
    assert_eq!(
        retry.maximum_event_age_in_seconds(),
        Some(not_after.duration_since(not_before).as_secs() as i32),
        "a delivery never outlives the window"
    );
    let input = target.input().unwrap().to_owned();
    let payload: Wake = serde_json::from_str(&input).unwrap();
    assert_eq!(payload, wake);

    // The Scheduler fires at (or after) the instant: deliver its input then.
    w.clock.set(
        not_before
            .checked_add(SignedDuration::from_secs(7))
            .unwrap(),
    );
    let (a, b) = tokio::join!(w.deliver(&input), w.deliver(&input));
    let outcomes = [a.unwrap(), b.unwrap()];
    assert_eq!(
        outcomes.iter().filter(|o| o["outcome"] == "ran").count(),
        1,
        "one of two duplicate deliveries runs the tool: {outcomes:?}"
    );

    let calls = w.tools.calls_for(id);
    assert_eq!(calls.len(), 1, "the tool ran exactly once");
    assert!(calls[0].signature_ok, "HMAC signature verifies");
    assert_eq!(calls[0].idempotency_key.as_deref(), Some(id));
    assert_eq!(calls[0].body["args"], action["args"]);

    // Read back over a REST API (v1) event on a named stage.
    let got = w
        .v1("GET", &format!("/v1/actions/{id}"), keys::AGENT, None)
        .await;
    assert_eq!(got.status, 200, "{:?}", got.body);
    assert_eq!(got.body["state"], "succeeded");
    assert_eq!(got.body["outcome"]["result"], json!({"sent": true}));
    assert_eq!(got.body["next_action"], json!({"type": "none"}));

    let events = w
        .v2(
            "GET",
            &format!("/v1/actions/{id}/events"),
            keys::APPROVER,
            None,
        )
        .await;
    assert_eq!(events.status, 200);
    let to: Vec<&str> = events.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["to"].as_str().unwrap())
        .collect();
    assert_eq!(
        to,
        ["pending_approval", "approved", "executing", "succeeded"]
    );

    // A later delivery (at-least-once) finds no waiting ticket.
    let again = w.deliver(&input).await.unwrap();
    assert_eq!(
        again,
        json!({"outcome": "rejected", "reason": "no_waiting_ticket"})
    );
    assert_eq!(w.tools.count_for(id), 1);
}

/// SC-RES-05: a wake before `not_before` changes nothing and leaves the wake armed; re-arming
/// after a delivery whose schedule still exists (fired, not yet deleted) replaces it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sc_res_05_early_wake_rearms() {
    let w = AwsWorld::new("early").await;
    // `report.*` is scheduled by policy: committed and armed at intake (SC-INT-09).
    let r = w
        .v2(
            "POST",
            "/v1/actions",
            keys::AGENT,
            Some(window_body("report.build", &w.at(4), &w.at(600))),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    assert_eq!(r.body["state"], "approved");
    assert_eq!(r.body["actor"], json!({"type": "system"}));
    let id = r.body["id"].as_str().unwrap();
    let wake = w.wake_of(id).await;
    let first = w.schedule(&wake).await.expect("armed at intake");
    let first_at = first.schedule_expression().unwrap().to_owned();
    let input = first.target().unwrap().input().unwrap().to_owned();

    // Early while its schedule is still pending (a duplicate or manual delivery): waiting, and
    // one schedule stays armed, never earlier. (The resume cannot tell a pending schedule from
    // the one that just fired when its clock lags Scheduler's, so it always re-arms after the
    // existing instant — SC-EDGE-09, tests/clock_skew.rs.)
    let early = w.deliver(&input).await.unwrap();
    assert_eq!(early["outcome"], "waiting", "{early}");
    let pending = w.schedule(&wake).await.expect("still armed");
    assert!(pending.schedule_expression().unwrap() >= first_at.as_str());
    assert_eq!(w.schedule_names().await.len(), 1);
    let first_at = pending.schedule_expression().unwrap().to_owned();

    // Let the schedule's instant pass (it "fired"; LocalStack keeps it, like the moment before
    // Scheduler deletes a completed schedule), then an early wake (skewed clock) arrives.
    tokio::time::sleep(std::time::Duration::from_secs(7)).await;
    let early = w.deliver(&input).await.unwrap();
    assert_eq!(early["outcome"], "waiting", "{early}");
    let rearmed = w.schedule(&wake).await.expect("re-armed");
    let rearmed_at = rearmed.schedule_expression().unwrap();
    assert!(
        rearmed_at > first_at.as_str(),
        "{rearmed_at} replaces {first_at}"
    );
    assert_eq!(w.schedule_names().await.len(), 1);
    let state = w
        .v2("GET", &format!("/v1/actions/{id}"), keys::AGENT, None)
        .await;
    assert_eq!(state.body["state"], "approved");
    assert_eq!(state.body["version"], 1, "an early wake commits nothing");
    assert_eq!(w.tools.count_for(id), 0);

    // At its time it runs.
    let due = ts(&r.body["schedule"]["not_before"]);
    w.clock
        .set(due.checked_add(SignedDuration::from_secs(1)).unwrap());
    let ran = w.deliver(&input).await.unwrap();
    assert_eq!(ran, json!({"outcome": "ran", "state": "succeeded"}));
    assert_eq!(w.tools.count_for(id), 1);
}

/// SC-RES-06: a wake after `not_after` seals `cancelled` / `schedule_missed`, actor system,
/// the tool never runs, and the approval stays recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sc_res_06_missed_window_is_sealed_not_run() {
    let w = AwsWorld::new("missed").await;
    let action = approved_mail(&w).await;
    let id = action["id"].as_str().unwrap();
    let wake = w.wake_of(id).await;
    let input = w
        .schedule(&wake)
        .await
        .unwrap()
        .target()
        .unwrap()
        .input()
        .unwrap()
        .to_owned();

    w.clock.set(
        ts(&action["schedule"]["not_after"])
            .checked_add(SignedDuration::from_secs(1))
            .unwrap(),
    );
    let sealed = w.deliver(&input).await.unwrap();
    assert_eq!(
        sealed,
        json!({"outcome": "sealed", "state": "cancelled", "reason": "schedule_missed"})
    );
    assert_eq!(w.tools.count_for(id), 0, "no catch-up run");
    let got = w
        .v2("GET", &format!("/v1/actions/{id}"), keys::AGENT, None)
        .await;
    assert_eq!(got.body["state"], "cancelled");
    assert_eq!(got.body["actor"], json!({"type": "system"}));
    assert_eq!(got.body["approval"]["approver"], "approver-1");
    let events = w
        .v2(
            "GET",
            &format!("/v1/actions/{id}/events"),
            keys::AGENT,
            None,
        )
        .await;
    let to: Vec<&str> = events.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["to"].as_str().unwrap())
        .collect();
    assert_eq!(to, ["pending_approval", "approved", "cancelled"]);
}

/// SC-CAN-01 (and SC-CAN-02, SC-RES-01): cancel over a REST v1 event seals the action and
/// deletes its schedule; a late wake is rejected; cancelling again is `action_sealed`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sc_can_01_cancel_deletes_the_schedule() {
    let w = AwsWorld::new("cancel").await;
    let action = approved_mail(&w).await;
    let id = action["id"].as_str().unwrap();
    let wake = w.wake_of(id).await;
    let input = w
        .schedule(&wake)
        .await
        .expect("armed")
        .target()
        .unwrap()
        .input()
        .unwrap()
        .to_owned();

    let cancelled = w
        .v1(
            "POST",
            &format!("/v1/actions/{id}/cancel"),
            keys::AGENT,
            None,
        )
        .await;
    assert_eq!(cancelled.status, 200, "{:?}", cancelled.body);
    assert_eq!(cancelled.body["state"], "cancelled");
    // The cancel names the channel it came through (SC-CH-08): the API, here.
    assert_eq!(
        cancelled.body["actor"],
        json!({"type": "agent", "id": "agent-1", "channel": "api"})
    );
    assert!(
        w.schedule(&wake).await.is_none(),
        "cancel deleted the schedule"
    );

    w.clock.set(
        ts(&action["schedule"]["not_before"])
            .checked_add(SignedDuration::from_secs(1))
            .unwrap(),
    );
    let late = w.deliver(&input).await.unwrap();
    assert_eq!(
        late,
        json!({"outcome": "rejected", "reason": "no_waiting_ticket"})
    );
    assert_eq!(w.tools.count_for(id), 0);

    let again = w
        .v2(
            "POST",
            &format!("/v1/actions/{id}/cancel"),
            keys::APPROVER,
            None,
        )
        .await;
    assert_eq!(again.status, 409);
    assert_eq!(again.body["error"]["code"], "action_sealed");
    assert_eq!(again.body["error"]["state"], "cancelled");
}

/// SC-RES-02: a wake naming another correlation id (a stale wake) is rejected; nothing changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sc_res_02_stale_correlation_is_rejected() {
    let w = AwsWorld::new("stale").await;
    let action = approved_mail(&w).await;
    let id = action["id"].as_str().unwrap();
    let wake = w.wake_of(id).await;
    w.clock.set(
        ts(&action["schedule"]["not_before"])
            .checked_add(SignedDuration::from_secs(1))
            .unwrap(),
    );

    let stale = Wake {
        correlation_id: format!("cor_{}", ulid::Ulid::new()),
        ..wake.clone()
    };
    let out = w
        .deliver(&serde_json::to_string(&stale).unwrap())
        .await
        .unwrap();
    assert_eq!(
        out,
        json!({"outcome": "rejected", "reason": "correlation_mismatch"})
    );
    let got = w
        .v2("GET", &format!("/v1/actions/{id}"), keys::AGENT, None)
        .await;
    assert_eq!(got.body["state"], "approved");
    assert_eq!(got.body["version"], 2);
    assert_eq!(w.tools.count_for(id), 0);

    // Inputs other than a wake or the sweep are refused outright.
    let bad = w
        .deliver(&json!({"tenant": "acme", "action_id": id, "correlation_id": wake.correlation_id, "tool": "x"}).to_string())
        .await;
    assert!(bad.is_err(), "{bad:?}");
}

/// SC-STOP-01, SC-RES-03, SC-INT-03: a committed stop seals a waking ticket `denied`/`stopped`
/// without running it and refuses intake; lifting it does not revive what it sealed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sc_stop_01_stop_seals_waking_tickets_and_refuses_intake() {
    let w = AwsWorld::new("stop").await;
    let r = w
        .v2(
            "POST",
            "/v1/actions",
            keys::AGENT,
            Some(window_body("report.build", &w.at(120), &w.at(900))),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let id = r.body["id"].as_str().unwrap();
    let input = serde_json::to_string(&w.wake_of(id).await).unwrap();

    let stop = w
        .v2(
            "POST",
            "/v1/stops",
            keys::ADMIN,
            Some(json!({"agent_id": "agent-1"})),
        )
        .await;
    assert_eq!(stop.status, 201, "{:?}", stop.body);
    let refused = w
        .v1(
            "POST",
            "/v1/actions",
            keys::AGENT,
            Some(window_body("mail.send", &w.at(120), &w.at(900))),
        )
        .await;
    assert_eq!(refused.status, 403);
    assert_eq!(refused.body["error"]["code"], "agent_stopped");
    // Another agent of the tenant is not stopped.
    let other = w
        .v2(
            "POST",
            "/v1/actions",
            keys::AGENT_2,
            Some(window_body("mail.send", &w.at(120), &w.at(900))),
        )
        .await;
    assert_eq!(other.status, 202, "{:?}", other.body);

    w.clock.set(
        ts(&r.body["schedule"]["not_before"])
            .checked_add(SignedDuration::from_secs(1))
            .unwrap(),
    );
    let out = w.deliver(&input).await.unwrap();
    assert_eq!(
        out,
        json!({"outcome": "sealed", "state": "denied", "reason": "stopped"})
    );
    assert_eq!(w.tools.count_for(id), 0);

    let lifted = w.v2("DELETE", "/v1/stops/agent-1", keys::ADMIN, None).await;
    assert_eq!(lifted.status, 204);
    let got = w
        .v2("GET", &format!("/v1/actions/{id}"), keys::AGENT, None)
        .await;
    assert_eq!(
        got.body["state"], "denied",
        "lifting a stop revives nothing"
    );
    let missing = w.v2("DELETE", "/v1/stops/agent-1", keys::ADMIN, None).await;
    assert_eq!(missing.status, 404);
}

/// SC-INT-07: the same Idempotency-Key with the same payload answers the original action;
/// with another payload it is `idempotency_conflict`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sc_int_07_idempotent_intake() {
    let w = AwsWorld::new("idem").await;
    let body = window_body("mail.send", &w.at(120), &w.at(900));
    let key = [("Idempotency-Key", "order-4711")];
    let first = w
        .http_event(aws_support::apigw_v2(
            "POST",
            "/v1/actions",
            keys::AGENT,
            Some(body.clone()),
            &key,
        ))
        .await;
    assert_eq!(first.status, 202, "{:?}", first.body);
    let replay = w
        .http_event(aws_support::apigw_v1(
            "POST",
            "/v1/actions",
            keys::AGENT,
            Some(body.clone()),
            &key,
        ))
        .await;
    assert_eq!(replay.status, 202);
    assert_eq!(replay.body["id"], first.body["id"]);
    assert_eq!(replay.headers["idempotent-replayed"], "true");

    let mut changed = body.clone();
    changed["args"]["subject"] = json!("another subject");
    let conflict = w
        .http_event(aws_support::apigw_v2(
            "POST",
            "/v1/actions",
            keys::AGENT,
            Some(changed),
            &key,
        ))
        .await;
    assert_eq!(conflict.status, 409);
    assert_eq!(conflict.body["error"]["code"], "idempotency_conflict");

    // The key is scoped to the agent: another agent may use it.
    let other = w
        .http_event(aws_support::apigw_v2(
            "POST",
            "/v1/actions",
            keys::AGENT_2,
            Some(body),
            &key,
        ))
        .await;
    assert_eq!(other.status, 202);
    assert_ne!(other.body["id"], first.body["id"]);

    let list = w
        .v2(
            "GET",
            "/v1/actions?agent_id=agent-1&limit=10",
            keys::APPROVER,
            None,
        )
        .await;
    assert_eq!(list.status, 200, "{:?}", list.body);
    assert_eq!(
        list.body["data"].as_array().unwrap().len(),
        1,
        "one action committed for the key"
    );
}

/// SC-RES-01 / §3 not_found: another tenant's ids are not found — for reads, approval, cancel
/// and for a wake that names the wrong tenant.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn other_tenant_gets_not_found() {
    let w = AwsWorld::new("tenant").await;
    let action = approved_mail(&w).await;
    let id = action["id"].as_str().unwrap();
    for (method, path, key, body) in [
        (
            "GET",
            format!("/v1/actions/{id}"),
            keys::OTHER_TENANT_AGENT,
            None,
        ),
        (
            "GET",
            format!("/v1/actions/{id}/events"),
            keys::OTHER_TENANT_AGENT,
            None,
        ),
        (
            "POST",
            format!("/v1/actions/{id}/cancel"),
            keys::OTHER_TENANT_AGENT,
            None,
        ),
        (
            "POST",
            format!("/v1/actions/{id}/approve"),
            keys::OTHER_TENANT_APPROVER,
            Some(json!({"context_digest": action["approval"]["context_digest"]})),
        ),
    ] {
        let r = w.v2(method, &path, key, body).await;
        assert_eq!(r.status, 404, "{method} {path}: {:?}", r.body);
        assert_eq!(r.body["error"]["code"], "not_found");
    }
    let listed = w
        .v2("GET", "/v1/actions", keys::OTHER_TENANT_AGENT, None)
        .await;
    assert_eq!(listed.body["data"], json!([]));

    let wake = w.wake_of(id).await;
    w.clock.set(
        ts(&action["schedule"]["not_before"])
            .checked_add(SignedDuration::from_secs(1))
            .unwrap(),
    );
    let foreign = Wake {
        tenant: "globex".into(),
        ..wake
    };
    let out = w
        .deliver(&serde_json::to_string(&foreign).unwrap())
        .await
        .unwrap();
    assert_eq!(
        out,
        json!({"outcome": "rejected", "reason": "no_waiting_ticket"})
    );
    assert_eq!(w.tools.count_for(id), 0);
}

/// SC-INT-02, SC-INT-05, SC-INT-09: window rules at intake on the AWS path.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sc_int_02_window_rules() {
    let w = AwsWorld::new("window").await;
    let post = |body: Value| async { w.v2("POST", "/v1/actions", keys::AGENT, Some(body)).await };

    // Narrower than the minimum window (1 min in the test config), or already over.
    for (nb, na) in [
        (w.at(120), w.at(150)),
        (w.at(-600), w.at(-60)),
        (w.at(120), w.at(73 * 3600)),
    ] {
        let r = post(window_body("mail.send", &nb, &na)).await;
        assert_eq!(r.status, 400, "{nb}..{na}: {:?}", r.body);
        assert_eq!(r.body["error"]["param"], "schedule");
    }
    // `allow` with a later window would run early: refused.
    let r = post(window_body("search.web", &w.at(600), &w.at(1200))).await;
    assert_eq!(r.status, 403);
    assert_eq!(r.body["error"]["code"], "schedule_needs_approval");
    // `allow` whose window opens within 60 s runs at once; the schedule is recorded.
    let r = post(window_body("search.web", &w.at(30), &w.at(600))).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["state"], "succeeded");
    assert!(r.body["schedule"].is_object());
    assert_eq!(w.tools.count_for(r.body["id"].as_str().unwrap()), 1);
    // A `schedule` rule needs a window.
    let r = post(json!({"tool": "report.build", "args": {}})).await;
    assert_eq!(r.status, 400);
    assert_eq!(r.body["error"]["param"], "schedule");
}

/// SC-REC-01 on AWS: arming fails after the ticket committed (the schedule group does not
/// exist) → nothing is lost: the sweep finds the due ticket and performs it in its window,
/// and never before.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sc_rec_01_sweep_performs_a_ticket_whose_wake_failed_to_arm() {
    let missing_group = aws_support::unique("nogroup");
    let w = AwsWorld::with_group("lost", Some(&missing_group)).await;
    let action = approved_mail(&w).await;
    let id = action["id"].as_str().unwrap();
    assert_eq!(
        action["state"], "approved",
        "the ticket committed although arming failed"
    );

    let sweep = r#"{"sweep":{}}"#;
    let early = w.deliver(sweep).await.unwrap();
    assert_eq!(
        early["resumed"], 0,
        "nothing is due before the window: {early}"
    );
    assert_eq!(w.tools.count_for(id), 0);

    w.clock.set(
        ts(&action["schedule"]["not_before"])
            .checked_add(SignedDuration::from_secs(30))
            .unwrap(),
    );
    let report = w.deliver(sweep).await.unwrap();
    assert_eq!(report["due"], 1, "{report}");
    assert_eq!(report["resumed"], 1, "{report}");
    assert_eq!(w.tools.count_for(id), 1);
    let got = w
        .v2("GET", &format!("/v1/actions/{id}"), keys::AGENT, None)
        .await;
    assert_eq!(got.body["state"], "succeeded");
    let again = w.deliver(sweep).await.unwrap();
    assert_eq!(
        again["due"], 0,
        "a sealed action leaves the sweep index: {again}"
    );
}

/// Caught on main (issue 28, item 11): the HTTP functions share the local server's router, so a
/// wrong method answered `400 validation_failed` there too. Through API Gateway's events (v2 and
/// REST v1) a wrong method is `405 method_not_allowed` with `Allow`, `GET /mcp` included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue28_a_wrong_method_is_405_with_allow_through_api_gateway() {
    let w = AwsWorld::new("method").await;
    for (method, path, allow) in [("GET", "/mcp", "POST"), ("PUT", "/v1/stops", "POST")] {
        for reply in [
            w.v2(method, path, keys::AGENT, None).await,
            w.v1(method, path, keys::AGENT, None).await,
        ] {
            assert_eq!(reply.status, 405, "{method} {path}: {:?}", reply.body);
            assert_eq!(reply.body["error"]["code"], "method_not_allowed");
            assert_eq!(reply.headers["allow"], allow, "{:?}", reply.headers);
        }
    }
}
