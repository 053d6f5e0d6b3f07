//! Slack (SC-CH-01 … SC-CH-07, docs/slack.md): approval requests posted as Block Kit messages,
//! the buttons' interactions verified and approved, every later transition updating the
//! message — on the local server over SQLite, DynamoDB (LocalStack) and Postgres.
//!
//! Slack's own code checks us: a stand-in of the Web API (`tests/slack/web_api.py`) parses
//! every message and modal with `slack_sdk`'s Block Kit models and checks the bot token, and
//! the interactions the tests send are signed by `slack_sdk.signature.SignatureVerifier`.
//! `source scripts/slack-sdk.sh` first (it installs the pinned `slack_sdk`).

use countersign::config::Config;
use countersign_tests::{
    config_toml,
    helper::Helper,
    keys, on_every_store,
    receiver::{notify_toml, Mode, Receiver},
    stores::{Backend, Place},
    Api, ToolServer,
};
use serde_json::{json, Value};
use std::{
    process::Command,
    sync::{Arc, Once},
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

const BOT_TOKEN: &str = "xoxb-countersign-test";
const SIGNING_SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
const TOKEN_ENV: &str = "COUNTERSIGN_TEST_SLACK_BOT_TOKEN";
const SECRET_ENV: &str = "COUNTERSIGN_TEST_SLACK_SIGNING_SECRET";
const CHANNEL: &str = "C0123456789";
/// approver-1's Slack user.
const FIN: &str = "UFIN00001";
/// The Slack user of agent-1's approver key: the agent itself (SC-APP-01, no self-approval).
const SELF: &str = "USELF0001";

/// The Web API stand-in, a helper process killed on drop.
struct WebApi {
    _process: Helper,
    base: String,
    http: reqwest::Client,
}

impl WebApi {
    fn start() -> WebApi {
        let python = std::env::var("COUNTERSIGN_SLACK_PYTHON")
            .expect("COUNTERSIGN_SLACK_PYTHON: `source scripts/slack-sdk.sh` first");
        let mut command = Command::new(python);
        command.args([
            concat!(env!("CARGO_MANIFEST_DIR"), "/slack/web_api.py"),
            BOT_TOKEN,
        ]);
        let (process, port) = Helper::start(command);
        let port: u16 = port.parse().expect("the stand-in prints its port");
        WebApi {
            _process: process,
            base: format!("http://127.0.0.1:{port}"),
            http: reqwest::Client::new(),
        }
    }

    /// A request of the stand-in's own (not of the Web API), answered in JSON.
    async fn ask(&self, request: reqwest::RequestBuilder) -> Value {
        let answer = request.send().await.unwrap();
        assert!(answer.status().is_success(), "{answer:?}");
        answer.json().await.unwrap()
    }

    async fn calls(&self) -> Vec<Value> {
        let calls = self
            .ask(self.http.get(format!("{}/calls", self.base)))
            .await;
        let calls = calls.as_array().unwrap().clone();
        // Slack's models took every message we sent, and the token was ours every time.
        for call in &calls {
            assert!(
                call["error"].is_null(),
                "the stand-in refused a call: {call}"
            );
        }
        calls
    }

    /// The calls of `method` that mention `action_id`.
    async fn calls_of(&self, method: &str, action_id: &str) -> Vec<Value> {
        self.calls()
            .await
            .into_iter()
            .filter(|c| c["method"] == method && c["body"].to_string().contains(action_id))
            .collect()
    }

    /// Wait (up to 30 s) for a call of `method` about `action_id` that `matches`.
    async fn wait_for(
        &self,
        method: &str,
        action_id: &str,
        matches: impl Fn(&Value) -> bool,
    ) -> Value {
        let until = Instant::now() + Duration::from_secs(30);
        loop {
            let found = self.calls_of(method, action_id).await;
            if let Some(call) = found.into_iter().find(|c| matches(&c["body"])) {
                return call["body"].clone();
            }
            assert!(
                Instant::now() < until,
                "no {method} for {action_id}: {:#?}",
                self.calls().await
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Answer the next `times` calls `503` (Slack down).
    async fn fail(&self, times: u32) {
        let request = self.http.post(format!("{}/fail", self.base));
        self.ask(request.json(&json!({"times": times, "status": 503})))
            .await;
    }

    /// How many calls were answered `503`.
    async fn failed(&self) -> u64 {
        let failed = self
            .ask(self.http.get(format!("{}/failed", self.base)))
            .await;
        failed["failed"].as_u64().unwrap()
    }

    /// The workspace's members as `users.info` answers them.
    async fn members(&self, users: Value) {
        self.ask(self.http.post(format!("{}/users", self.base)).json(&users))
            .await;
    }

    /// `x-slack-signature` for this request, computed by slack_sdk.
    async fn sign(&self, secret: &str, timestamp: &str, body: &str) -> String {
        let request = self.http.post(format!("{}/sign", self.base));
        let signed = self
            .ask(request.json(&json!({"secret": secret, "timestamp": timestamp, "body": body})))
            .await;
        signed["signature"].as_str().unwrap().to_owned()
    }
}

/// The tests' configuration with the tenant's Slack app on the stand-in, approver-1 as `FIN`
/// and agent-1's approver key as `SELF`.
fn config(tools: &ToolServer, web_api: &WebApi, approval_ttl: &str, extra: &str) -> Arc<Config> {
    config_with_rules(tools, web_api, approval_ttl, extra, "", "")
}

/// As [`config`], with `rules` (TOML inline tables, each ending in `,`) first in acme's policy.
fn config_with_rules(
    tools: &ToolServer,
    web_api: &WebApi,
    approval_ttl: &str,
    extra: &str,
    rules: &str,
    slack_extra: &str,
) -> Arc<Config> {
    static ENV: Once = Once::new();
    ENV.call_once(|| {
        std::env::set_var(TOKEN_ENV, BOT_TOKEN);
        std::env::set_var(SECRET_ENV, SIGNING_SECRET);
    });
    let mut text = String::new();
    for line in config_toml(tools, "30s", "2s").lines() {
        let user = if line.contains("id = \"approver-1\", role = \"approver\"") {
            Some(FIN)
        } else if line.contains("id = \"agent-1\", role = \"approver\"") {
            Some(SELF)
        } else {
            None
        };
        let line = match user {
            Some(user) => line.replace(" },", &format!(", slack_user = \"{user}\" }},")),
            None => line.replace(
                "approval_ttl = \"1h\"",
                &format!("approval_ttl = \"{approval_ttl}\""),
            ),
        };
        text.push_str(&line);
        text.push('\n');
    }
    // approver-1's address, for the Slack users found by email (SC-CH-17).
    let text = text.replacen(
        &format!("slack_user = \"{FIN}\""),
        &format!("slack_user = \"{FIN}\", email = \"approver-1@example.com\""),
        1,
    );
    let mut text = text.replacen("policy = [\n", &format!("policy = [\n  {rules}\n"), 1);
    text.push_str(extra);
    text.push_str(&format!(
        "\n[tenants.acme.slack]\nbot_token_env = \"{TOKEN_ENV}\"\nsigning_secret_env = \"{SECRET_ENV}\"\nchannel = \"{CHANNEL}\"\napi_url = \"{}/api\"\n",
        web_api.base
    ));
    text.push_str(slack_extra);
    Arc::new(Config::from_toml(&text).expect("the Slack test config loads"))
}

/// One test's world: the tools, the stand-in, the server over `backend`'s store.
struct World {
    tools: ToolServer,
    slack: WebApi,
    api: Api,
    http: reqwest::Client,
    _server: countersign::boot::embedded::Server,
    _place: Place,
}

async fn world(backend: Backend, label: &str, approval_ttl: &str) -> World {
    world_with(backend, label, approval_ttl, "", 0).await
}

/// With `rules` first in acme's policy (see [`config_with_rules`]).
async fn world_with_rules(backend: Backend, label: &str, rules: &str) -> World {
    world_configured(backend, label, rules, "").await
}

/// With `rules` first in acme's policy and `slack_extra` in its `[slack]` table.
async fn world_configured(backend: Backend, label: &str, rules: &str, slack_extra: &str) -> World {
    let tools = ToolServer::start().await;
    let slack = WebApi::start();
    let place = Place::fresh(backend, label).await;
    let server = place
        .serve(config_with_rules(
            &tools,
            &slack,
            "1h",
            "",
            rules,
            slack_extra,
        ))
        .await;
    World {
        api: Api::new(server.addr),
        tools,
        slack,
        http: reqwest::Client::new(),
        _server: server,
        _place: place,
    }
}

/// With `extra` configuration, and the stand-in down for its first `down` calls.
async fn world_with(
    backend: Backend,
    label: &str,
    approval_ttl: &str,
    extra: &str,
    down: u32,
) -> World {
    let tools = ToolServer::start().await;
    let slack = WebApi::start();
    slack.fail(down).await;
    let place = Place::fresh(backend, label).await;
    let server = place
        .serve(config(&tools, &slack, approval_ttl, extra))
        .await;
    World {
        api: Api::new(server.addr),
        tools,
        slack,
        http: reqwest::Client::new(),
        _server: server,
        _place: place,
    }
}

/// How an interaction is signed.
enum Sign {
    Right,
    Secret(&'static str),
    /// The timestamp this many seconds before now.
    Aged(u64),
    /// Signed, then one byte of the body changed.
    Altered,
}

impl World {
    /// A pending `mail.send` and its posted message: (action id, context digest, message).
    async fn pending(&self, to: &str) -> (String, String, Value) {
        let (s, action) = self
            .api
            .submit(
                keys::AGENT,
                json!({"tool": "mail.send", "args": {"to": to, "body": "x".repeat(600)}}),
            )
            .await;
        assert_eq!(s, 202, "{action}");
        let id = action["id"].as_str().unwrap().to_owned();
        let digest = action["approval"]["context_digest"]
            .as_str()
            .unwrap()
            .to_owned();
        let message = self.slack.wait_for("chat.postMessage", &id, |_| true).await;
        (id, digest, message)
    }

    /// Send a Slack interaction `payload` signed as `sign`: (status, answer).
    async fn interact(&self, payload: &Value, sign: Sign) -> (u16, Value) {
        let body = form_urlencoded::Serializer::new(String::new())
            .append_pair("payload", &payload.to_string())
            .finish();
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let at = match sign {
            Sign::Aged(secs) => now - secs,
            _ => now,
        }
        .to_string();
        let secret = match sign {
            Sign::Secret(s) => s,
            _ => SIGNING_SECRET,
        };
        let signature = self.slack.sign(secret, &at, &body).await;
        let body = match sign {
            // The clicking user changed after signing.
            Sign::Altered => body.replacen("U", "W", 1),
            _ => body,
        };
        let answer = self
            .http
            .post(format!("{}/v1/slack/interactions", self.api.base))
            .header("content-type", "application/x-www-form-urlencoded")
            .header("x-slack-request-timestamp", at)
            .header("x-slack-signature", signature)
            .body(body)
            .send()
            .await
            .unwrap();
        let status = answer.status().as_u16();
        let bytes = answer.bytes().await.unwrap();
        let value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        (status, value)
    }

    /// Where the action stands: its state and its audit trail's length.
    async fn standing(&self, id: &str) -> (String, usize) {
        let action = self.api.action(id).await;
        let (s, events) = self
            .api
            .get(&format!("/v1/actions/{id}/events"), keys::AGENT)
            .await;
        assert_eq!(s, 200, "{events}");
        (
            action["state"].as_str().unwrap().to_owned(),
            events["data"].as_array().unwrap().len(),
        )
    }
}

/// A click on a message's button `action_id` by Slack user `user`.
fn click(message: &Value, action_id: &str, user: &str) -> Value {
    let button = message["blocks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == "actions")
        .flat_map(|b| b["elements"].as_array().unwrap().iter())
        .find(|e| e["action_id"] == action_id)
        .unwrap_or_else(|| panic!("no {action_id} button in {message}"))
        .clone();
    json!({
        "type": "block_actions",
        "user": {"id": user, "username": "someone", "team_id": "T0001"},
        "team": {"id": "T0001"},
        "channel": {"id": message["channel"]},
        "container": {"type": "message", "channel_id": message["channel"]},
        "trigger_id": format!("trig-{user}"),
        "actions": [{"type": "button", "action_id": action_id, "block_id": "decide", "value": button["value"]}],
    })
}

fn has_buttons(message: &Value) -> bool {
    message["blocks"]
        .to_string()
        .contains("countersign_approve")
}

fn header(message: &Value) -> String {
    message["blocks"][0]["text"]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// SC-CH-02, SC-CH-04, SC-CH-05: the request's message shows the call and carries the action
/// and its digest; forged, stale and altered requests, an unknown Slack user and an ineligible
/// one change nothing; two racing clicks count one approval and run the tool once, a replay
/// changes nothing; the message is updated to where the action ended.
async fn approve_by_button(backend: Backend) {
    let w = world(backend, "slack-approve", "1h").await;
    let (id, digest, message) = w.pending("ops@example.com").await;
    assert_eq!(message["channel"], CHANNEL);
    assert_eq!(header(&message), "Approval requested: mail.send");
    let text = message["blocks"].to_string();
    for shown in [
        "agent-1",
        "ops@example.com",
        "(400 more characters)",
        "Expires",
        "1 needed",
        "CET",
    ] {
        assert!(text.contains(shown), "{shown} not in {text}");
    }
    let value: Value = serde_json::from_str(
        message["blocks"][3]["elements"][0]["value"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(value, json!({"t": "acme", "a": id, "d": digest}));
    let before = w.standing(&id).await;
    assert_eq!(before.0, "pending_approval");

    let approve = click(&message, "countersign_approve", FIN);
    for (sign, what) in [
        (Sign::Secret("not-the-signing-secret"), "a forged signature"),
        (Sign::Aged(301), "a timestamp more than 5 minutes old"),
        (Sign::Altered, "a body altered after signing"),
    ] {
        let (status, answer) = w.interact(&approve, sign).await;
        assert_eq!(status, 401, "{what}: {answer}");
        assert_eq!(answer["error"]["code"], "unauthenticated", "{what}");
    }
    for (user, code) in [("UNOBODY01", "forbidden"), (SELF, "forbidden")] {
        let (status, answer) = w
            .interact(&click(&message, "countersign_approve", user), Sign::Right)
            .await;
        assert_eq!(
            (status, &answer["ok"]),
            (200, &json!(false)),
            "{user}: {answer}"
        );
        assert_eq!(answer["error"]["code"], code, "{user}: {answer}");
    }
    // The refused were told, privately.
    let told = w
        .slack
        .calls_of("chat.postEphemeral", "countersign did not take")
        .await;
    assert!(
        told.iter().any(|c| c["body"]["user"] == "UNOBODY01"),
        "{told:?}"
    );
    assert!(told.iter().any(|c| c["body"]["user"] == SELF), "{told:?}");
    assert_eq!(w.standing(&id).await, before, "nothing changed");
    assert_eq!(w.tools.count_for(&id), 0);

    // A double click: two identical signed requests at once.
    let (a, b) = tokio::join!(
        w.interact(&approve, Sign::Right),
        w.interact(&approve, Sign::Right)
    );
    assert_eq!((a.0, b.0), (200, 200), "{a:?} {b:?}");
    assert!(a.1["ok"] == true || b.1["ok"] == true, "{a:?} {b:?}");
    let ran = w.api.wait_sealed(&id, 30).await;
    assert_eq!(ran["state"], "succeeded", "{ran}");
    let (_, events) = w
        .api
        .get(&format!("/v1/actions/{id}/events"), keys::AGENT)
        .await;
    let approvals: Vec<&Value> = events["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["from"] == "pending_approval" && e["to"] == "approved")
        .collect();
    assert_eq!(approvals.len(), 1, "{events}");
    // SC-CH-07: the audit event names the approver and the channel.
    assert_eq!(
        approvals[0]["actor"],
        json!({"type": "user", "id": "approver-1", "channel": "slack"})
    );
    assert_eq!(w.tools.count_for(&id), 1, "the tool ran once");
    let after = w.standing(&id).await;
    // A replay of the same signed click later changes nothing.
    let (status, _) = w.interact(&approve, Sign::Right).await;
    assert_eq!(status, 200);
    assert_eq!(w.standing(&id).await, after);
    assert_eq!(w.tools.count_for(&id), 1);

    // The message, updated in place: the same ts, no buttons, where the action ended.
    let posted_ts = first_ts(&w, &id).await;
    let updated = w
        .slack
        .wait_for("chat.update", &id, |m| header(m) == "Ran: mail.send")
        .await;
    assert_eq!(
        (updated["channel"].as_str(), updated["ts"].as_str()),
        (Some(CHANNEL), Some(posted_ts.as_str()))
    );
    assert!(!has_buttons(&updated), "{updated}");
    assert_eq!(
        w.slack.calls_of("chat.postMessage", &id).await.len(),
        1,
        "posted once"
    );
}

/// The ts the stand-in gave the action's message (its first post: 1700000001.000100, …).
async fn first_ts(w: &World, id: &str) -> String {
    let calls = w.slack.calls().await;
    let posts: Vec<&Value> = calls
        .iter()
        .filter(|c| c["method"] == "chat.postMessage")
        .collect();
    let at = posts
        .iter()
        .position(|c| c["body"].to_string().contains(id))
        .unwrap();
    format!("{}.000100", 1_700_000_001 + at)
}

/// SC-CH-06: Deny opens a modal asking why; its submission denies with that reason, and the
/// message says so. An empty reason is refused on the field.
async fn deny_by_modal(backend: Backend) {
    let w = world(backend, "slack-deny", "1h").await;
    let (id, _, message) = w.pending("deny@example.com").await;
    let (status, answer) = w
        .interact(&click(&message, "countersign_deny", FIN), Sign::Right)
        .await;
    assert_eq!(
        (status, &answer["modal"]),
        (200, &json!("deny")),
        "{answer}"
    );
    let opened = w.slack.wait_for("views.open", &id, |_| true).await;
    assert_eq!(opened["trigger_id"], format!("trig-{FIN}"));
    let view = &opened["view"];
    let submission = |reason: &str| {
        json!({
            "type": "view_submission",
            "user": {"id": FIN},
            "team": {"id": "T0001"},
            "view": {
                "id": "V0001",
                "callback_id": view["callback_id"],
                "private_metadata": view["private_metadata"],
                "state": {"values": {"reason": {"reason_input": {"type": "plain_text_input", "value": reason}}}},
            },
        })
    };
    let (status, answer) = w.interact(&submission("  "), Sign::Right).await;
    assert_eq!(status, 200);
    assert_eq!(answer["response_action"], "errors", "{answer}");
    assert_eq!(w.standing(&id).await.0, "pending_approval");

    let (status, answer) = w
        .interact(&submission("not on a Friday"), Sign::Right)
        .await;
    assert_eq!(
        (status, answer),
        (200, Value::Null),
        "an empty answer closes the modal"
    );
    let denied = w.api.action(&id).await;
    assert_eq!(denied["state"], "denied", "{denied}");
    let (_, events) = w
        .api
        .get(&format!("/v1/actions/{id}/events"), keys::AGENT)
        .await;
    let last = events["data"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(
        (&last["to"], &last["actor"]),
        (
            &json!("denied"),
            &json!({"type": "user", "id": "approver-1", "channel": "slack"})
        ),
        "SC-CH-07"
    );
    assert_eq!(denied["outcome"]["reason"], "not on a Friday", "{denied}");
    let updated = w
        .slack
        .wait_for("chat.update", &id, |m| header(m) == "Denied: mail.send")
        .await;
    assert!(
        updated["blocks"].to_string().contains("not on a Friday"),
        "{updated}"
    );
    assert!(!has_buttons(&updated));
    assert_eq!(w.tools.count_for(&id), 0);
}

/// SC-CH-03: an approval made elsewhere (the API, as the page makes it) updates the Slack
/// message too.
async fn approval_elsewhere_updates_the_message(backend: Backend) {
    let w = world(backend, "slack-elsewhere", "1h").await;
    let (id, digest, _) = w.pending("page@example.com").await;
    let (status, approved) = w.api.approve(&id, &digest).await;
    assert_eq!(status, 200, "{approved}");
    // SC-CH-08: an approval through the API records its own channel, `api`; the agent's
    // submit and the system's run record none.
    let (_, events) = w
        .api
        .get(&format!("/v1/actions/{id}/events"), keys::AGENT)
        .await;
    let channels: Vec<_> = events["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["actor"].get("channel").and_then(Value::as_str))
        .collect();
    assert_eq!(channels[..2], [None, Some("api")], "{events}");
    assert!(channels[2..].iter().all(Option::is_none), "{events}");
    let updated = w
        .slack
        .wait_for("chat.update", &id, |m| header(m) == "Ran: mail.send")
        .await;
    assert!(
        updated["blocks"].to_string().contains("approver-1"),
        "{updated}"
    );
    assert!(!has_buttons(&updated));
}

/// SC-CH-05: a click after the approval expired approves nothing.
async fn click_after_expiry(backend: Backend) {
    let w = world(backend, "slack-expired", "2s").await;
    let (id, _, message) = w.pending("late@example.com").await;
    let expires: jiff::Timestamp = w.api.action(&id).await["approval"]["expires_at"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    while jiff::Timestamp::now() <= expires {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (status, answer) = w
        .interact(&click(&message, "countersign_approve", FIN), Sign::Right)
        .await;
    assert_eq!((status, &answer["ok"]), (200, &json!(false)), "{answer}");
    assert_eq!(answer["error"]["code"], "action_sealed", "{answer}");
    let sealed = w.api.wait_sealed(&id, 30).await;
    assert_eq!(
        (&sealed["state"], &sealed["outcome"]["reason"]),
        (&json!("cancelled"), &json!("approval_expired"))
    );
    assert_eq!(w.tools.count_for(&id), 0);
    let updated = w
        .slack
        .wait_for("chat.update", &id, |m| header(m) == "Cancelled: mail.send")
        .await;
    assert!(
        updated["blocks"].to_string().contains("Expired"),
        "{updated}"
    );
}

/// SC-CH-03: a Slack that is down delays only its own messages. The webhook endpoint takes the
/// request at once and is not sent it again while Slack's part is retried with backoff; once
/// Slack answers, the message is posted, once.
async fn slack_down_delays_only_slack(backend: Backend) {
    let receiver = Receiver::start(Mode::Up).await;
    let notify = notify_toml(&receiver.url(), "300ms", 1000);
    let w = world_with(backend, "slack-down", "1h", &notify, 3).await;
    let (s, action) = w
        .api
        .submit(
            keys::AGENT,
            json!({"tool": "mail.send", "args": {"to": "down@example.com"}}),
        )
        .await;
    assert_eq!(s, 202, "{action}");
    let id = action["id"].as_str().unwrap().to_owned();
    let notice = format!("ntf_{}_1", id.strip_prefix("act_").unwrap());
    assert!(
        receiver.wait_taken(std::slice::from_ref(&notice), 30).await,
        "the endpoint took it"
    );
    w.slack.wait_for("chat.postMessage", &id, |_| true).await;
    assert_eq!(
        w.slack.failed().await,
        3,
        "Slack's part was tried while it was down"
    );
    assert_eq!(
        receiver.taken(&notice).len(),
        1,
        "the endpoint was not sent it again"
    );
    assert_eq!(w.slack.calls_of("chat.postMessage", &id).await.len(), 1);
}

on_every_store!(slack_down_delays_only_slack: sc_ch_03_slack_down_delays_only_slack_sqlite, sc_ch_03_slack_down_delays_only_slack_dynamodb, sc_ch_03_slack_down_delays_only_slack_postgres);
on_every_store!(approve_by_button: sc_ch_04_approve_by_button_sqlite, sc_ch_04_approve_by_button_dynamodb, sc_ch_04_approve_by_button_postgres);
on_every_store!(deny_by_modal: sc_ch_06_deny_by_modal_sqlite, sc_ch_06_deny_by_modal_dynamodb, sc_ch_06_deny_by_modal_postgres);
on_every_store!(approval_elsewhere_updates_the_message: sc_ch_03_approval_elsewhere_updates_the_message_sqlite, sc_ch_03_approval_elsewhere_updates_the_message_dynamodb, sc_ch_03_approval_elsewhere_updates_the_message_postgres);
on_every_store!(click_after_expiry: sc_ch_05_click_after_expiry_sqlite, sc_ch_05_click_after_expiry_dynamodb, sc_ch_05_click_after_expiry_postgres);

/// SC-CH-15: a rule that names a Slack channel has its requests posted there — and updated
/// there — while the other rules' go to the tenant's channel. On main every request went to
/// the tenant's channel (`slack_channel` was an unknown field).
async fn a_rule_names_its_channel(backend: Backend) {
    let rule = r#"{ tool = "mail.send", decision = "require_approval", name = "mail to the CFO", when = "args.to == 'cfo@example.com'", slack_channel = "CFINANCE01" },"#;
    let w = world_with_rules(backend, "slack-rule-channel", rule).await;
    let (cfo, digest, posted) = w.pending("cfo@example.com").await;
    assert_eq!(posted["channel"], "CFINANCE01", "{posted}");
    let (other, _, posted) = w.pending("ops@example.com").await;
    assert_eq!(posted["channel"], CHANNEL, "{posted}");
    // The update goes where the message is.
    let (status, v) = w.api.approve(&cfo, &digest).await;
    assert_eq!(status, 200, "{v}");
    let updated = w
        .slack
        .wait_for("chat.update", &cfo, |m| header(m) == "Ran: mail.send")
        .await;
    assert_eq!(updated["channel"], "CFINANCE01", "{updated}");
    assert!(w.slack.calls_of("chat.update", &other).await.is_empty());
}

on_every_store!(a_rule_names_its_channel:
    sc_ch_15_a_rule_names_its_channel_sqlite,
    sc_ch_15_a_rule_names_its_channel_dynamodb,
    sc_ch_15_a_rule_names_its_channel_postgres);

/// SC-CH-17: with `users_by_email`, a clicking Slack user without a `slack_user` is found by the
/// email of their Slack profile (`users.info`, read with the bot token, as a form) among the
/// approver keys' `email`s — case aside — and approves as that key; a bot, a deleted member, or
/// a member whose email is no approver's is refused, and nothing changes. On main such a click
/// was always refused as an unknown Slack user.
async fn users_by_email(backend: Backend) {
    let w = world_configured(backend, "slack-by-email", "", "users_by_email = true\n").await;
    w.slack
        .members(json!({
            "UMAIL0001": {"email": "Approver-1@Example.com"},
            "UBOT00001": {"email": "approver-1@example.com", "is_bot": true},
            "UGONE0001": {"email": "approver-1@example.com", "deleted": true},
            "UOTHER001": {"email": "someone@example.com"},
        }))
        .await;
    let (id, _, message) = w.pending("by-email@example.com").await;
    for user in ["UBOT00001", "UGONE0001", "UOTHER001", "UNKNOWN01"] {
        let (status, answer) = w
            .interact(&click(&message, "countersign_approve", user), Sign::Right)
            .await;
        assert_eq!(
            (status, &answer["ok"]),
            (200, &json!(false)),
            "{user}: {answer}"
        );
        assert_eq!(answer["error"]["code"], "forbidden", "{user}: {answer}");
        assert_eq!(
            w.api.action(&id).await["state"],
            "pending_approval",
            "{user}"
        );
    }
    let (status, answer) = w
        .interact(
            &click(&message, "countersign_approve", "UMAIL0001"),
            Sign::Right,
        )
        .await;
    assert_eq!((status, &answer["ok"]), (200, &json!(true)), "{answer}");
    let sealed = w.api.wait_sealed(&id, 30).await;
    assert_eq!(sealed["approval"]["approver"], "approver-1", "{sealed}");
    let looked_up: Vec<_> = w
        .slack
        .calls()
        .await
        .into_iter()
        .filter(|c| c["method"] == "users.info")
        .map(|c| c["body"]["user"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert!(looked_up.contains(&"UMAIL0001".to_owned()), "{looked_up:?}");
}

on_every_store!(users_by_email:
    sc_ch_17_users_by_email_sqlite,
    sc_ch_17_users_by_email_dynamodb,
    sc_ch_17_users_by_email_postgres);
