//! Policy that fits an organization (SC-POL-01 … SC-POL-06): conditions on the call, approver
//! groups, quorum, explanations. The engine runs over SQLite, DynamoDB (LocalStack) and Postgres
//! with an injected clock; each store-facing guarantee is proven on all three.

use countersign::boot::embedded::Server;
use countersign::{
    config::Config,
    domain::{audit, deed::Deed, Action, NextAction, State},
    tools::Executors,
    Error,
};
use countersign_tests::{
    faults::{Fault, FaultyStore, Gate, Matching, Write},
    on_every_store,
    receiver::{notify_toml, Mode, Receiver},
    stores::{Backend, Place},
    submission, temp_db, Api, ToolServer,
};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::sync::Arc;

/// The plaintext keys of the policy tenant; the config holds their hashes.
const AGENT: &str = "key-pol-agent";
const FINANCE_1: &str = "key-pol-finance-1";
const FINANCE_2: &str = "key-pol-finance-2";
const FINANCE_3: &str = "key-pol-finance-3";
const FINANCE_4: &str = "key-pol-finance-4";
const SRE: &str = "key-pol-sre";
const ADMIN: &str = "key-pol-admin";

fn sha(key: &str) -> String {
    hex::encode(Sha256::digest(key.as_bytes()))
}

/// The README's example policy: transfers above 50,000 need two finance approvers, above 1,000
/// one, below run; mail to the own domain runs, other mail waits; deploys are for sre.
pub fn policy_toml() -> String {
    policy_toml_with(&[
        ("fin-1", FINANCE_1, "finance"),
        ("fin-2", FINANCE_2, "finance"),
        ("sre-1", SRE, "sre"),
    ])
}

/// [`policy_toml`] with these approver keys: (id, plaintext key, group).
fn policy_toml_with(approvers: &[(&str, &str, &str)]) -> String {
    let approvers: String = approvers
        .iter()
        .map(|(id, key, group)| {
            let hash = sha(key);
            format!("  {{ id = \"{id}\", role = \"approver\", groups = [\"{group}\"], sha256 = \"{hash}\" }},\n")
        })
        .collect();
    format!(
        r#"
[tenants.acme]
time_zone = "Europe/Berlin"
approval_ttl = "1h"
keys = [
  {{ id = "agent-1", role = "agent", sha256 = "{agent}" }},
{approvers}  {{ id = "admin-1", role = "admin", sha256 = "{admin}" }},
]
policy = [
  {{ name = "two-person rule above 50,000 EUR", tool = "payments.transfer", when = "args.amount > 50000", decision = "require_approval", approvers = ["finance"], approvals = 2 }},
  {{ name = "transfers above 1,000 EUR", tool = "payments.transfer", when = "args.amount > 1000", decision = "require_approval", approvers = ["finance"] }},
  {{ name = "small transfers", tool = "payments.transfer", decision = "allow" }},
  {{ name = "mail inside acme", tool = "mail.send", when = "args.to.all(r, r.endsWith('@acme.example'))", decision = "allow" }},
  {{ name = "mail leaving acme", tool = "mail.send", decision = "require_approval" }},
  {{ name = "deploys", tool = "deploy.*", decision = "require_approval", approvers = ["sre"] }},
]

[tenants.acme.tools."payments.transfer"]
executor = "builtin.echo"

[tenants.acme.tools."mail.send"]
executor = "builtin.echo"

[tenants.acme.tools."deploy.service"]
executor = "builtin.echo"
"#,
        agent = sha(AGENT),
        admin = sha(ADMIN),
    )
}

/// The shared rig, its store behind a fault-injecting one (to hold a write at a gate), with
/// this file's helpers.
struct Rig {
    inner: countersign_tests::rig::Rig,
    /// The store the engine holds, to hold a write at a gate.
    faults: Arc<FaultyStore>,
}

impl std::ops::Deref for Rig {
    type Target = countersign_tests::rig::Rig;
    fn deref(&self) -> &Self::Target {
        &self.inner
    }
}

async fn rig(backend: Backend) -> Rig {
    let config = Arc::new(Config::from_toml(&policy_toml()).unwrap());
    let faults = Arc::new(FaultyStore::new(
        countersign_tests::stores::store(backend, "policy").await,
    ));
    let inner = countersign_tests::rig::Rig::on(
        ToolServer::start().await,
        config,
        faults.clone(),
        Arc::new(Executors::new()),
    );
    Rig { inner, faults }
}

impl Rig {
    async fn submit(&self, tool: &str, args: Value) -> Result<Action, Error> {
        let req = submission(json!({"tool": tool, "args": args}));
        let a = self.engine.submit(&self.who(AGENT), req, None).await?;
        Ok(a.action)
    }
    async fn pending(&self, tool: &str, args: Value) -> Action {
        let a = self.submit(tool, args).await.unwrap();
        assert_eq!(a.state(), State::PendingApproval, "{tool}");
        a
    }
    async fn approve(&self, key: &str, a: &Action) -> Result<Action, Error> {
        let digest = &a.approval().unwrap().context_digest;
        self.engine.approve(&self.who(key), a.id(), digest).await
    }
    async fn load(&self, id: &str) -> Action {
        self.store.load("acme", id).await.unwrap().unwrap()
    }
}

fn still_needed(a: &Action) -> u32 {
    match a.next_action() {
        NextAction::Approval { still_needed, .. } => still_needed,
        other => panic!("not waiting for approval: {other:?}"),
    }
}

/// SC-POL-01: the same tool waits or runs by its arguments; the first matching rule decides and
/// the approval context names it.
async fn conditions_decide_by_the_call(backend: Backend) {
    let r = rig(backend).await;
    let small = r
        .submit("payments.transfer", json!({"amount": 500}))
        .await
        .unwrap();
    assert_eq!(small.state(), State::Succeeded, "below 1,000 runs");
    let big = r
        .pending("payments.transfer", json!({"amount": 5000}))
        .await;
    let context = &big.approval().unwrap().context;
    assert_eq!(
        context["policy"],
        json!({"rule": 1, "label": "transfers above 1,000 EUR", "approver_groups": ["finance"]})
    );
    let huge = r
        .pending("payments.transfer", json!({"amount": 60000}))
        .await;
    assert_eq!(huge.approval().unwrap().context["policy"]["rule"], 0);
    assert_eq!(still_needed(&huge), 2);
    let inside = json!({"to": ["a@acme.example", "b@acme.example"]});
    assert_eq!(
        r.submit("mail.send", inside).await.unwrap().state(),
        State::Succeeded
    );
    let leaving = json!({"to": ["a@acme.example", "x@other.example"]});
    r.pending("mail.send", leaving).await;
}
on_every_store!(conditions_decide_by_the_call: sc_pol_01_conditions_decide_by_the_call_sqlite, sc_pol_01_conditions_decide_by_the_call_dynamodb, sc_pol_01_conditions_decide_by_the_call_postgres);

/// SC-POL-02: a condition that cannot be evaluated denies — never falls through to the `allow`
/// below it — and the action's outcome and its sealing event say which rule and why.
async fn a_failing_condition_denies_with_the_reason(backend: Backend) {
    let r = rig(backend).await;
    let refused = r
        .submit("payments.transfer", json!({"amount": "a lot"}))
        .await;
    let Err(Error::Refused {
        code, action_id, ..
    }) = refused
    else {
        panic!("not refused: {refused:?}");
    };
    assert_eq!(code.code(), "denied");
    let a = r.load(&action_id).await;
    assert_eq!(a.state(), State::Denied);
    let outcome = a.outcome().unwrap();
    assert_eq!(outcome.reason.as_deref(), Some("condition_error"));
    let error = outcome.error.as_ref().unwrap();
    assert_eq!(error["kind"], "condition_error");
    assert_eq!(error["rule"], 0);
    assert!(error["message"].as_str().unwrap().contains('>'), "{error}");
    let events = r.engine.events(&r.who(ADMIN), a.id()).await.unwrap();
    assert_eq!(
        events.last().unwrap().reason.as_deref(),
        Some("condition_error")
    );
}
on_every_store!(a_failing_condition_denies_with_the_reason: sc_pol_02_a_failing_condition_denies_with_the_reason_sqlite, sc_pol_02_a_failing_condition_denies_with_the_reason_dynamodb, sc_pol_02_a_failing_condition_denies_with_the_reason_postgres);

/// SC-POL-03: only the rule's approver groups decide; others get 403 and are not offered it.
async fn only_the_rules_groups_decide(backend: Backend) {
    let r = rig(backend).await;
    let transfer = r
        .pending("payments.transfer", json!({"amount": 5000}))
        .await;
    let deploy = r.pending("deploy.service", json!({"service": "api"})).await;
    for (key, a) in [(SRE, &transfer), (FINANCE_1, &deploy)] {
        assert!(
            matches!(r.approve(key, a).await, Err(Error::Forbidden(_))),
            "{key}"
        );
        let deny = r.engine.deny(&r.who(key), a.id(), "no").await;
        assert!(matches!(deny, Err(Error::Forbidden(_))), "{key}");
        assert_eq!(
            r.load(a.id()).await.version(),
            a.version(),
            "nothing changed"
        );
    }
    let listed = |key: &'static str| {
        let r = &r;
        async move {
            let f = countersign::engine::ListFilter {
                state: Some(State::PendingApproval),
                ..Default::default()
            };
            let (page, _) = r.engine.list(&r.who(key), f).await.unwrap();
            page.into_iter()
                .map(|a| a.id().to_owned())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(listed(SRE).await, [deploy.id()]);
    assert_eq!(listed(FINANCE_2).await, [transfer.id()]);
    assert_eq!(
        listed(ADMIN).await.len(),
        2,
        "admins see every pending action"
    );
    let approved = r.approve(FINANCE_2, &transfer).await.unwrap();
    assert!(approved.state() != State::PendingApproval);
    let approved = r.approve(SRE, &deploy).await.unwrap();
    assert!(approved.state() != State::PendingApproval);
}
on_every_store!(only_the_rules_groups_decide: sc_pol_03_only_the_rules_groups_decide_sqlite, sc_pol_03_only_the_rules_groups_decide_dynamodb, sc_pol_03_only_the_rules_groups_decide_postgres);

/// SC-POL-04: two distinct finance approvals, each its own event bound to the context digest;
/// a repeated approval counts once; the second commits the ticket; the deed names both.
async fn a_quorum_commits_on_the_last_distinct_approval(backend: Backend) {
    let r = rig(backend).await;
    let a = r
        .pending("payments.transfer", json!({"amount": 60000}))
        .await;
    let digest = a.approval().unwrap().context_digest.clone();
    let once = r.approve(FINANCE_1, &a).await.unwrap();
    assert_eq!(once.state(), State::PendingApproval);
    assert_eq!(still_needed(&once), 1);
    assert_eq!(once.approvals().len(), 1);
    let again = r.approve(FINANCE_1, &a).await.unwrap();
    assert_eq!(
        again.version(),
        once.version(),
        "the same approver counts once"
    );
    let done = r.approve(FINANCE_2, &a).await.unwrap();
    assert!(
        matches!(done.state(), State::Executing | State::Succeeded),
        "{}",
        done.state()
    );
    let sealed = r.load(a.id()).await;
    assert_eq!(sealed.state(), State::Succeeded);
    let signed = sealed.approval().unwrap().quorum.approvers();
    assert_eq!(signed, ["fin-1", "fin-2"]);
    let events = r.engine.events(&r.who(ADMIN), a.id()).await.unwrap();
    audit::verify(&sealed, &events).unwrap();
    let approvals: Vec<_> = events
        .iter()
        .filter(|e| e.context_digest.is_some())
        .map(|e| {
            (
                e.actor.id.clone().unwrap(),
                e.context_digest.clone().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        approvals,
        [
            ("fin-1".to_owned(), digest.clone()),
            ("fin-2".to_owned(), digest)
        ]
    );
    let deed = Deed::of(&sealed, &events, "k").unwrap();
    let deed = serde_json::to_value(&deed).unwrap();
    assert_eq!(deed["approval"]["approvers"][1]["approver"], "fin-2");

    // A deny by any eligible approver seals a quorum that is half way.
    let b = r
        .pending("payments.transfer", json!({"amount": 70000}))
        .await;
    r.approve(FINANCE_1, &b).await.unwrap();
    let denied = r
        .engine
        .deny(&r.who(FINANCE_2), b.id(), "not this one")
        .await
        .unwrap();
    assert_eq!(denied.state(), State::Denied);
    assert!(matches!(
        r.approve(FINANCE_2, &b).await,
        Err(Error::ActionSealed { .. })
    ));
}
on_every_store!(a_quorum_commits_on_the_last_distinct_approval: sc_pol_04_a_quorum_commits_on_the_last_distinct_approval_sqlite, sc_pol_04_a_quorum_commits_on_the_last_distinct_approval_dynamodb, sc_pol_04_a_quorum_commits_on_the_last_distinct_approval_postgres);

/// SC-POL-04, SC-APP-05: a deny whose write loses to another approver's partial approval is
/// asked again on the record that won — still pending, so it seals it. On main the deny
/// answered `409 action_sealed` with state `pending_approval`: a refusal naming a seal that
/// never happened, the action left waiting.
async fn a_deny_that_loses_to_a_partial_approval_still_denies(backend: Backend) {
    let r = rig(backend).await;
    let a = r
        .pending("payments.transfer", json!({"amount": 60000}))
        .await;
    let gate = Gate::new();
    let deny_write = Matching {
        write: Some(Write::Commit),
        to: Some(State::Denied),
        ..Matching::any()
    };
    r.faults
        .inject(deny_write.of(a.id()), Fault::HoldBefore(gate.clone()), 1);
    let deny = {
        let (engine, who, id) = (r.engine.clone(), r.who(FINANCE_2), a.id().to_owned());
        tokio::spawn(async move { engine.deny(&who, &id, "not this one").await })
    };
    gate.reached().await;
    let signed = r.approve(FINANCE_1, &a).await.unwrap();
    assert_eq!(signed.approvals().len(), 1, "the approval landed first");
    gate.open();
    let denied = deny.await.unwrap().unwrap();
    assert_eq!(denied.state(), State::Denied);
    assert_eq!(denied.reason(), Some("not this one"));
    let events = r.engine.events(&r.who(ADMIN), a.id()).await.unwrap();
    audit::verify(&r.load(a.id()).await, &events).unwrap();
}
on_every_store!(a_deny_that_loses_to_a_partial_approval_still_denies: sc_pol_04_a_deny_that_loses_to_a_partial_approval_still_denies_sqlite, sc_pol_04_a_deny_that_loses_to_a_partial_approval_still_denies_dynamodb, sc_pol_04_a_deny_that_loses_to_a_partial_approval_still_denies_postgres);

/// The policy tenant with these approvers, notifying `receiver` (plain http on loopback,
/// allowed explicitly: SC-SEC-08).
fn quorum_config(approvers: &[(&str, &str, &str)], receiver: &Receiver) -> Arc<Config> {
    let text = policy_toml_with(approvers).replacen(
        "approval_ttl = \"1h\"\n",
        "approval_ttl = \"1h\"\nallow_http_hosts = [\"127.0.0.1\"]\nallow_private_hosts = [\"127.0.0.1\"]\n",
        1,
    ) + &notify_toml(&receiver.url(), "1s", 5);
    Arc::new(Config::from_toml(&text).unwrap())
}

/// POST `…/approve` with `key` for the digest of `action`.
async fn approve_over_http(api: &Api, key: &str, action: &Value) -> (u16, Value) {
    let id = action["id"].as_str().unwrap();
    let digest = &action["approval"]["context_digest"];
    api.post(
        &format!("/v1/actions/{id}/approve"),
        key,
        json!({"context_digest": digest}),
    )
    .await
}

/// Caught on main before the fix (issue 28, item 8): a partial approval outlived its approver's
/// eligibility — fin-1 approved one of two, fin-1's key was then removed from the config (and
/// fin-3, who approved another, moved out of finance), and after a restart fin-2's approval
/// committed both tickets with signoffs nobody could give any more. A signoff counts only while
/// its approver holds a key that may decide the action: each approval re-checks the earlier
/// ones, so the action stays pending, and the record, the page's `still_needed` and the
/// notification say one more is needed. SC-POL-03, SC-POL-04.
async fn a_signoff_counts_only_while_its_approver_may_decide(backend: Backend) {
    let receiver = Receiver::start(Mode::Up).await;
    let place = Place::fresh(backend, "quorum").await;
    let before = quorum_config(
        &[
            ("fin-1", FINANCE_1, "finance"),
            ("fin-2", FINANCE_2, "finance"),
            ("fin-3", FINANCE_3, "finance"),
            ("sre-1", SRE, "sre"),
        ],
        &receiver,
    );
    let server = place.serve(before).await;
    let api = Api::new(server.addr);
    let mut pending = Vec::new();
    for (amount, first) in [(60_000, FINANCE_1), (70_000, FINANCE_3)] {
        let (status, a) = api
            .submit(
                AGENT,
                json!({"tool": "payments.transfer", "args": {"amount": amount}}),
            )
            .await;
        assert_eq!(status, 202, "{a}");
        let (status, half) = approve_over_http(&api, first, &a).await;
        assert_eq!(
            (status, half["state"].as_str()),
            (200, Some("pending_approval")),
            "{half}"
        );
        assert_eq!(half["next_action"]["still_needed"], 1);
        pending.push(a);
    }
    server.shutdown().await.unwrap();

    // fin-1's key is gone; fin-3 is in sre now; fin-4 joined finance.
    let after = quorum_config(
        &[
            ("fin-2", FINANCE_2, "finance"),
            ("fin-3", FINANCE_3, "sre"),
            ("fin-4", FINANCE_4, "finance"),
            ("sre-1", SRE, "sre"),
        ],
        &receiver,
    );
    let server = place.serve(after).await;
    let api = Api::new(server.addr);
    for (a, lapsed) in pending.iter().zip(["fin-1", "fin-3"]) {
        let id = a["id"].as_str().unwrap();
        let (status, v) = approve_over_http(&api, FINANCE_2, a).await;
        assert_eq!(status, 200, "{v}");
        assert_eq!(
            v["state"], "pending_approval",
            "{lapsed}'s signoff no longer counts: {v}"
        );
        assert_eq!(v["next_action"]["still_needed"], 1, "{v}");
        assert_eq!(v["approvals"].as_array().unwrap().len(), 1, "{v}");
        assert_eq!(v["approvals"][0]["approver"], "fin-2");
        let (_, events) = api.get(&format!("/v1/actions/{id}/events"), ADMIN).await;
        let last = events["data"].as_array().unwrap().last().unwrap().clone();
        assert_eq!(
            last["reason"],
            format!("approval_recorded; lapsed: {lapsed}"),
            "{last}"
        );
        // The approver page reads the same record; the notification says so too.
        let notice = format!("ntf_{}_{}", id.strip_prefix("act_").unwrap(), v["version"]);
        assert!(
            receiver.wait_taken(std::slice::from_ref(&notice), 20).await,
            "{notice}"
        );
        let data = receiver.taken(&notice)[0].body["data"].clone();
        assert_eq!(
            (&data["approvals_needed"], &data["approved_by"]),
            (&json!(1), &json!(["fin-2"])),
            "{data}"
        );
    }
    // The lapsed approvers cannot sign again; an eligible one completes the quorum.
    let (status, _) = approve_over_http(&api, FINANCE_1, &pending[0]).await;
    assert_eq!(status, 401, "fin-1's key is gone");
    let (status, v) = approve_over_http(&api, FINANCE_3, &pending[1]).await;
    assert_eq!(status, 403, "fin-3 is no longer in finance: {v}");
    let (status, v) = approve_over_http(&api, FINANCE_4, &pending[0]).await;
    assert_eq!(status, 200, "{v}");
    let id = pending[0]["id"].as_str().unwrap();
    let done = loop {
        let (_, done) = api.get(&format!("/v1/actions/{id}"), ADMIN).await;
        if done["sealed_at"].is_string() {
            break done;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert_eq!(done["state"], "succeeded", "{done}");
    assert_eq!(
        done["approval"]["quorum"]["signed"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["approver"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["fin-2", "fin-4"]
    );
    server.shutdown().await.unwrap();
}
on_every_store!(a_signoff_counts_only_while_its_approver_may_decide: sc_pol_04_a_signoff_counts_only_while_its_approver_may_decide_sqlite, sc_pol_04_a_signoff_counts_only_while_its_approver_may_decide_dynamodb, sc_pol_04_a_signoff_counts_only_while_its_approver_may_decide_postgres);

const PAIRS: usize = 200;
const BATCH: usize = 20;

/// SC-POL-04 with SC-CAN-03: the last approval of a quorum racing a cancel, 200 pairs — one
/// winner each: the ticket commits (already claimed, so the cancel meets `executing`) or the
/// cancel seals it (and the approval meets `action_sealed`); never both, never neither.
async fn the_last_approval_racing_a_cancel_has_one_winner(backend: Backend) {
    let r = Arc::new(rig(backend).await);
    let (mut approvals_won, mut cancels_won) = (0, 0);
    for _ in 0..PAIRS / BATCH {
        let pairs = (0..BATCH).map(|_| {
            let r = r.clone();
            async move {
                let a = r
                    .pending("payments.transfer", json!({"amount": 90000}))
                    .await;
                let half = r.approve(FINANCE_1, &a).await.unwrap();
                assert_eq!(still_needed(&half), 1);
                let agent = r.who(AGENT);
                let cancel = r.engine.cancel(&agent, a.id());
                let (approve, cancel) = tokio::join!(r.approve(FINANCE_2, &a), cancel);
                let events = r.engine.events(&r.who(ADMIN), a.id()).await.unwrap();
                (approve, cancel, r.load(a.id()).await, events)
            }
        });
        for (approve, cancel, end, events) in futures_join(pairs).await {
            let signed = events.iter().filter(|e| e.context_digest.is_some()).count();
            match (approve, cancel) {
                (Ok(_), Err(Error::ActionExecuting | Error::ActionSealed { .. })) => {
                    assert_eq!(end.state(), State::Succeeded);
                    assert_eq!(signed, 2);
                    approvals_won += 1;
                }
                (Err(Error::ActionSealed { .. }), Ok(c)) => {
                    assert_eq!(c.state(), State::Cancelled);
                    assert_eq!(end.state(), State::Cancelled);
                    assert_eq!(signed, 1, "the losing approval left no trace");
                    cancels_won += 1;
                }
                other => panic!("not exactly one winner: {other:?}"),
            }
        }
    }
    eprintln!("{backend:?}: approvals won {approvals_won}, cancels won {cancels_won}");
    assert_eq!(approvals_won + cancels_won, PAIRS);
}
on_every_store!(the_last_approval_racing_a_cancel_has_one_winner: sc_pol_04_the_last_approval_racing_a_cancel_has_one_winner_sqlite, sc_pol_04_the_last_approval_racing_a_cancel_has_one_winner_dynamodb, sc_pol_04_the_last_approval_racing_a_cancel_has_one_winner_postgres);

/// SC-POL-05: an admin asks which rule a call would match and why, over HTTP; nothing is
/// stored, and other roles are refused.
#[tokio::test]
async fn sc_pol_05_explain_answers_the_rule_and_stores_nothing() {
    let config = Arc::new(Config::from_toml(&policy_toml()).unwrap());
    let server = Server::start(
        config,
        &temp_db("policy-explain"),
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap();
    let api = Api::new(server.addr);
    let ask =
        |args: Value| json!({"tool": "payments.transfer", "args": args, "agent_id": "agent-1"});
    let (status, v) = api
        .post("/v1/policy/explain", ADMIN, ask(json!({"amount": 60000})))
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["decision"], "require_approval");
    assert_eq!(
        v["rule"],
        json!({"index": 0, "label": "two-person rule above 50,000 EUR"})
    );
    assert_eq!(
        (v["approvals"].as_u64(), &v["approver_groups"]),
        (Some(2), &json!(["finance"]))
    );
    assert_eq!(v["steps"][0]["verdict"], "matched");
    let (_, v) = api
        .post("/v1/policy/explain", ADMIN, ask(json!({"amount": 20})))
        .await;
    let verdicts: Vec<_> = v["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["verdict"].as_str().unwrap())
        .collect();
    assert_eq!(
        (v["decision"].as_str(), verdicts),
        (
            Some("allow"),
            vec!["condition_false", "condition_false", "matched"]
        )
    );
    let (_, v) = api
        .post("/v1/policy/explain", ADMIN, ask(json!({"amount": "lots"})))
        .await;
    assert_eq!(v["decision"], "deny");
    assert!(v["condition_error"].as_str().is_some(), "{v}");
    let (_, v) = api
        .post(
            "/v1/policy/explain",
            ADMIN,
            json!({"tool": "shell.exec", "agent_id": "agent-1"}),
        )
        .await;
    assert_eq!(
        (v["decision"].as_str(), &v["rule"]),
        (Some("deny"), &Value::Null)
    );
    let (status, _) = api
        .post("/v1/policy/explain", FINANCE_1, ask(json!({"amount": 1})))
        .await;
    assert_eq!(status, 403);
    let (status, v) = api
        .post("/v1/policy/explain", ADMIN, json!({"tool": "x"}))
        .await;
    assert_eq!(status, 400, "{v}");
    let (_, page) = api.get("/v1/actions", ADMIN).await;
    assert_eq!(page["data"], json!([]), "explaining stored nothing");
}

async fn futures_join<F>(fs: impl Iterator<Item = F>) -> Vec<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let handles: Vec<_> = fs.map(tokio::spawn).collect();
    let mut out = Vec::new();
    for h in handles {
        out.push(h.await.unwrap());
    }
    out
}
