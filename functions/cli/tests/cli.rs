//! The `countersign` binary against the local server over real HTTP: each test runs the
//! compiled CLI as a process, as a script or a person would, and checks its output, its effect
//! (read back through the API) and its exit code.

use countersign::{boot::embedded::Server, config::Config};
use countersign_tests::{config_toml, in_secs, keys, temp_db, Api, ToolServer};
use serde_json::{json, Value};
use std::{io::Write, process::Stdio, sync::Arc};

struct World {
    url: String,
    api: Api,
    _tools: ToolServer,
    _server: Server,
}

async fn world() -> World {
    world_with(|toml| toml).await
}

/// The test config, changed by `edit` before it loads.
async fn world_with(edit: impl FnOnce(String) -> String) -> World {
    let tools = ToolServer::start().await;
    let config = Arc::new(
        Config::from_toml(&edit(config_toml(&tools, "10s", "5s")))
            .and_then(Config::read_keys)
            .unwrap(),
    );
    let server = Server::start(config, &temp_db("cli"), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    World {
        url: format!("http://{}", server.addr),
        api: Api::new(server.addr),
        _tools: tools,
        _server: server,
    }
}

/// What one run of the CLI printed and how it ended.
#[derive(Debug)]
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| panic!("{e}: {self:?}"))
    }
}

/// `countersign <args>` against `url` with `key` in the environment and `stdin` as its input.
async fn cli_at(url: &str, key: &str, args: &[&str], stdin: &str) -> Run {
    let (url, key) = (url.to_owned(), key.to_owned());
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let stdin = stdin.to_owned();
    tokio::task::spawn_blocking(move || {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_countersign"))
            .args(&args)
            .env("COUNTERSIGN_URL", url)
            .env("COUNTERSIGN_KEY", key)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the CLI starts");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    })
    .await
    .unwrap()
}

impl World {
    /// `countersign <args>` with the key in the environment and `stdin` as its input.
    async fn cli(&self, key: &str, args: &[&str], stdin: &str) -> Run {
        cli_at(&self.url, key, args, stdin).await
    }

    async fn pending_mail(&self, subject: &str) -> Value {
        let run = self
            .cli(
                keys::AGENT,
                &[
                    "--json",
                    "submit",
                    "--tool",
                    "mail.send",
                    "--args",
                    &json!({"to": "ops@example.com", "subject": subject}).to_string(),
                    "--not-before",
                    &in_secs(3600),
                    "--not-after",
                    &in_secs(7200),
                ],
                "",
            )
            .await;
        assert_eq!(run.code, 0, "{run:?}");
        let action = run.json();
        assert_eq!(action["state"], "pending_approval");
        action
    }
}

#[tokio::test]
async fn sc_int_05_submit_and_list_pending_as_table_and_json() {
    let w = world().await;
    let action = w.pending_mail("weekly numbers").await;
    let id = action["id"].as_str().unwrap();

    let table = w.cli(keys::APPROVER, &["list", "--pending"], "").await;
    assert_eq!(table.code, 0, "{table:?}");
    let mut lines = table.stdout.lines();
    assert!(lines.next().unwrap().starts_with("ID"), "{table:?}");
    let row = lines.find(|l| l.starts_with(id)).expect("the action's row");
    assert!(row.contains("pending_approval") && row.contains("mail.send"));
    assert!(
        row.contains("(Europe/Berlin)"),
        "the window sentence: {row}"
    );

    let json = w
        .cli(keys::APPROVER, &["list", "--pending", "--json"], "")
        .await;
    let page = json.json();
    let ids: Vec<&str> = page["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec![id]);
}

/// Issue 16, defect 1: caught on main — `list --pending` printed the first page and a cursor,
/// so an approver who read its table missed the waiting actions after it (an empty first page
/// printed an empty table and exit 0). It follows the cursors to the end now.
#[tokio::test]
async fn sc_app_01_issue16_list_pending_shows_every_waiting_action_across_pages() {
    let w = world().await;
    let mut waiting = Vec::new();
    for i in 0..5 {
        let action = w.pending_mail(&format!("page {i}")).await;
        waiting.insert(0, action["id"].as_str().unwrap().to_owned());
    }
    let json = w
        .cli(
            keys::APPROVER,
            &["--json", "list", "--pending", "--limit", "2"],
            "",
        )
        .await;
    assert_eq!(json.code, 0, "{json:?}");
    let page = json.json();
    let ids: Vec<&str> = page["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, waiting, "all five, newest first, over three pages");
    assert_eq!(page["next_cursor"], Value::Null);
    let table = w
        .cli(keys::APPROVER, &["list", "--pending", "--limit", "2"], "")
        .await;
    assert_eq!(table.code, 0, "{table:?}");
    assert_eq!(
        table.stdout.lines().count(),
        1 + 5,
        "a header and five rows: {table:?}"
    );
    assert!(!table.stderr.contains("more:"), "{table:?}");
}

#[tokio::test]
async fn sc_app_02_approve_shows_the_context_and_waits_for_a_yes() {
    let w = world().await;
    let action = w.pending_mail("needs a yes").await;
    let id = action["id"].as_str().unwrap();
    let digest = action["approval"]["context_digest"].as_str().unwrap();

    // No (or end of input) at the prompt: nothing is approved, exit 7.
    let no = w.cli(keys::APPROVER, &["approve", id], "n\n").await;
    assert_eq!(no.code, 7, "{no:?}");
    for shown in [
        "mail.send",
        "agent-1",
        "needs a yes",
        "(Europe/Berlin)",
        digest,
    ] {
        assert!(
            no.stderr.contains(shown),
            "the prompt shows {shown}: {no:?}"
        );
    }
    assert!(no.stderr.contains("Approve this call? [y/N]"));
    assert_eq!(w.api.action(id).await["state"], "pending_approval");

    let yes = w.cli(keys::APPROVER, &["approve", id], "y\n").await;
    assert_eq!(yes.code, 0, "{yes:?}");
    assert!(yes.stdout.contains(&format!("approved {id}: approved")));
    let after = w.api.action(id).await;
    assert_eq!(after["state"], "approved");
    assert_eq!(after["approval"]["approver"], "approver-1");
    // SC-CH-08: the CLI names itself; the approval is recorded as the CLI's.
    assert_eq!(channel_of_event(&w, id, 1).await, "cli");
}

/// The channel on the actor of `id`'s event `n` (0: the submit).
async fn channel_of_event(w: &World, id: &str, n: usize) -> String {
    let (s, v) = w
        .api
        .get(&format!("/v1/actions/{id}/events"), keys::APPROVER)
        .await;
    assert_eq!(s, 200, "{v}");
    v["data"][n]["actor"]["channel"]
        .as_str()
        .unwrap_or("")
        .to_owned()
}

#[tokio::test]
async fn sc_app_02_approve_with_a_stale_digest_is_refused_with_exit_4() {
    let w = world().await;
    let action = w.pending_mail("bound").await;
    let id = action["id"].as_str().unwrap();
    let stale = "sha256:0000000000000000000000000000000000000000000000000000000000000000";
    let run = w
        .cli(
            keys::APPROVER,
            &["approve", id, "--digest", stale, "--yes"],
            "",
        )
        .await;
    assert_eq!(run.code, 4, "{run:?}");
    assert!(run.stderr.contains("context_changed"), "{run:?}");
    assert_eq!(w.api.action(id).await["state"], "pending_approval");
    // The digest from the action (or a notification) approves without a prompt.
    let digest = action["approval"]["context_digest"].as_str().unwrap();
    let run = w
        .cli(
            keys::APPROVER,
            &["approve", id, "--digest", digest, "--yes", "--json"],
            "",
        )
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.json()["state"], "approved");
}

#[tokio::test]
async fn sc_app_01_an_agent_key_cannot_approve_exit_4() {
    let w = world().await;
    let action = w.pending_mail("mine").await;
    let id = action["id"].as_str().unwrap();
    let run = w.cli(keys::AGENT, &["approve", id, "--yes"], "").await;
    assert_eq!(run.code, 4, "{run:?}");
    assert!(run.stderr.contains("forbidden"), "{run:?}");
}

#[tokio::test]
async fn sc_app_05_deny_and_sc_can_02_cancel_a_sealed_action_exit_4() {
    let w = world().await;
    let action = w.pending_mail("no thanks").await;
    let id = action["id"].as_str().unwrap();
    let run = w
        .cli(keys::APPROVER, &["deny", id, "--reason", "not today"], "")
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("denied"), "{run:?}");
    let events = w.cli(keys::AGENT, &["events", id], "").await;
    assert_eq!(events.code, 0, "{events:?}");
    assert!(
        events.stdout.contains("pending_approval → denied"),
        "{events:?}"
    );
    assert!(events.stdout.contains("not today"), "{events:?}");
    assert_eq!(channel_of_event(&w, id, 1).await, "cli", "SC-CH-08");

    let again = w.cli(keys::AGENT, &["cancel", id], "").await;
    assert_eq!(again.code, 4, "{again:?}");
    assert!(again.stderr.contains("action_sealed") && again.stderr.contains("denied"));
}

#[tokio::test]
async fn sc_can_01_cancel_a_waiting_action() {
    let w = world().await;
    let action = w.pending_mail("cancel me").await;
    let id = action["id"].as_str().unwrap();
    let run = w.cli(keys::AGENT, &["--json", "cancel", id], "").await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.json()["state"], "cancelled");
    let show = w.cli(keys::AGENT, &["show", id], "").await;
    assert!(show.stdout.contains("cancelled"), "{show:?}");
}

#[tokio::test]
async fn sc_stop_01_stop_and_resume_an_agent() {
    let w = world().await;
    let run = w
        .cli(keys::ADMIN, &["stop", "--agent", "agent-1"], "")
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("stopped agent agent-1"));
    let refused = w
        .cli(keys::AGENT, &["submit", "--tool", "mail.send"], "")
        .await;
    assert_eq!(refused.code, 4, "{refused:?}");
    assert!(refused.stderr.contains("agent_stopped"), "{refused:?}");

    let lifted = w.cli(keys::ADMIN, &["resume-agent", "agent-1"], "").await;
    assert_eq!(lifted.code, 0, "{lifted:?}");
    let ok = w
        .cli(keys::AGENT, &["submit", "--tool", "mail.send"], "")
        .await;
    assert_eq!(ok.code, 0, "{ok:?}");
    // `stop` alone is a usage error: the whole tenant needs --all.
    let bare = w.cli(keys::ADMIN, &["stop"], "").await;
    assert_eq!(bare.code, 2, "{bare:?}");
}

#[tokio::test]
async fn exit_codes_scripts_rely_on() {
    let w = world().await;
    let missing = w
        .cli(keys::AGENT, &["show", "act_01ABCDEFGHJKMNPQRSTVWXYZ12"], "")
        .await;
    assert_eq!(missing.code, 3, "not_found: {missing:?}");
    let bad_key = w.cli("not-a-key", &["list"], "").await;
    assert_eq!(bad_key.code, 6, "unauthenticated: {bad_key:?}");
    let no_key = w.cli("", &["list"], "").await;
    assert_eq!(no_key.code, 2, "no key: {no_key:?}");
    assert!(no_key.stderr.contains("COUNTERSIGN_KEY"));
    let invalid = w
        .cli(
            keys::AGENT,
            &["submit", "--tool", "mail.send", "--args", "[1]"],
            "",
        )
        .await;
    assert_eq!(invalid.code, 2, "validation_failed: {invalid:?}");
    assert!(invalid.stderr.contains("validation_failed"), "{invalid:?}");
    let not_json = w
        .cli(keys::AGENT, &["submit", "--tool", "x", "--args", "{"], "")
        .await;
    assert_eq!(not_json.code, 2, "{not_json:?}");
    let unknown_flag = w.cli(keys::AGENT, &["list", "--bogus"], "").await;
    assert_eq!(unknown_flag.code, 2, "{unknown_flag:?}");

    // Nothing listens on a port just released: unavailable.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let down = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_countersign"))
            .args(["--url", &format!("http://127.0.0.1:{port}"), "list"])
            .env("COUNTERSIGN_KEY", keys::AGENT)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert_eq!(down.status.code(), Some(5), "unreachable");
    assert!(
        !String::from_utf8_lossy(&down.stderr).contains(keys::AGENT),
        "the key is never printed"
    );
}

#[tokio::test]
async fn key_hash_prints_the_hash_the_config_stores() {
    let w = world().await;
    let from_arg = w.cli("", &["key-hash", "cs_approver-dev"], "").await;
    assert_eq!(from_arg.code, 0, "{from_arg:?}");
    // config/local.toml's approver hash for cs_approver-dev.
    let expected = "6f2bb6860b352451b3c490938ba95258ec5b9d4670fafafa678fbd9c00e72659";
    assert_eq!(from_arg.stdout.trim(), expected);
    let from_stdin = w.cli("", &["key-hash"], "cs_approver-dev\n").await;
    assert_eq!(from_stdin.stdout.trim(), expected);
}

#[tokio::test]
async fn sc_sec_07_deed_downloads_byte_for_byte_and_verifies_offline() {
    let w = world().await;
    let action = w.pending_mail("sealed for a deed").await;
    let id = action["id"].as_str().unwrap();
    // Not sealed yet: no deed (409 action_not_sealed → exit 4).
    let early = w.cli(keys::AGENT, &["deed", id], "").await;
    assert_eq!(early.code, 4, "{early:?}");
    let denied = w
        .cli(keys::APPROVER, &["deny", id, "--reason", "audit me"], "")
        .await;
    assert_eq!(denied.code, 0, "{denied:?}");

    let dir = temp_db("cli-deed").parent().unwrap().to_path_buf();
    let (deed, key) = (dir.join("deed.json"), dir.join("public.pem"));
    std::fs::write(&key, countersign_tests::DEED_PUBLIC_PEM).unwrap();
    let saved = w
        .cli(
            keys::AGENT,
            &["deed", id, "--out", deed.to_str().unwrap()],
            "",
        )
        .await;
    assert_eq!(saved.code, 0, "{saved:?}");
    let to_stdout = w.cli(keys::AGENT, &["deed", id], "").await;
    assert_eq!(
        to_stdout.stdout.as_bytes(),
        std::fs::read(&deed).unwrap(),
        "stdout and --out hold the same bytes"
    );

    // verify needs neither a URL nor an API key.
    let args = [
        "verify",
        "--public-key",
        key.to_str().unwrap(),
        deed.to_str().unwrap(),
    ];
    let ok = w.cli("", &args, "").await;
    assert_eq!(ok.code, 0, "{ok:?}");
    assert!(
        ok.stdout.contains(&format!("verified: the deed of {id}")),
        "{ok:?}"
    );
    assert!(ok.stdout.contains("denied"), "{ok:?}");

    // Any changed byte fails with exit 8.
    let text = std::fs::read_to_string(&deed).unwrap();
    std::fs::write(&deed, text.replace("audit me", "audit mE")).unwrap();
    let tampered = w.cli("", &args, "").await;
    assert_eq!(tampered.code, 8, "{tampered:?}");
    assert!(tampered.stderr.contains("does not verify"), "{tampered:?}");
}

/// SC-ID-08: `countersign verify` says who approved — the agent id and the person a token named
/// — from a v3 deed (`tests/fixtures/person/deed-v3.json`, signed by tests/identity.rs
/// `sc_id_07` with the tests' deed key); the same deed naming another person fails (exit 8); a
/// deed main signed before people were recorded (`tests/fixtures/before-call`) still verifies.
#[tokio::test]
async fn sc_id_08_verify_names_the_person_who_approved() {
    let fixtures = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures");
    let dir = temp_db("cli-person").parent().unwrap().to_path_buf();
    let key = dir.join("public.pem");
    std::fs::write(&key, countersign_tests::DEED_PUBLIC_PEM).unwrap();
    let verify = |deed: &std::path::Path| {
        let args = [
            "verify",
            "--public-key",
            key.to_str().unwrap(),
            deed.to_str().unwrap(),
        ]
        .map(str::to_owned);
        async move { cli_at("", "", &args.each_ref().map(String::as_str), "").await }
    };
    let v3 = std::path::PathBuf::from(format!("{fixtures}/person/deed-v3.json"));
    let ok = verify(&v3).await;
    assert_eq!(ok.code, 0, "{ok:?}");
    assert!(
        ok.stdout
            .contains("approved by ada — Ada Lovelace <ada@example.com> (ada at http"),
        "{ok:?}"
    );

    let text = std::fs::read_to_string(&v3).unwrap();
    let changed = dir.join("deed-v3-changed.json");
    std::fs::write(&changed, text.replace("Ada Lovelace", "Eve Lovelace")).unwrap();
    let refused = verify(&changed).await;
    assert_eq!(refused.code, 8, "{refused:?}");

    let records = std::fs::read_to_string(format!("{fixtures}/before-call/records.json")).unwrap();
    let records: Value = serde_json::from_str(&records).unwrap();
    let old = records["sqlite"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "approved_and_run")
        .unwrap();
    let v2 = dir.join("deed-v2.json");
    std::fs::write(&v2, old["deed"].as_str().unwrap()).unwrap();
    let ok = verify(&v2).await;
    assert_eq!(ok.code, 0, "{ok:?}");
    assert!(ok.stdout.contains(", approved by "), "{ok:?}");
}

/// An RFC 3339 instant as the CLI shows it in the test tenant's zone.
fn berlin(instant: &Value) -> String {
    let t: jiff::Timestamp = instant.as_str().unwrap().parse().unwrap();
    let shown = t.to_zoned(jiff::tz::TimeZone::get("Europe/Berlin").unwrap());
    format!("{} (Europe/Berlin)", shown.strftime("%Y-%m-%d %H:%M:%S %Z"))
}

/// Issue 16, item 8: caught on main — `approve` printed `expires 2026-…T…:41.123456789Z`, the
/// audit trail and `sealed` raw UTC with nanoseconds. Every time is in the tenant's zone now
/// (from `GET /v1/me`), named, seconds kept.
#[tokio::test]
async fn sc_ops_02_issue16_times_are_shown_in_the_tenants_zone_with_seconds() {
    let w = world().await;
    let action = w.pending_mail("when exactly").await;
    let id = action["id"].as_str().unwrap();
    let no = w.cli(keys::APPROVER, &["approve", id], "n\n").await;
    let expires = no
        .stderr
        .lines()
        .find(|l| l.starts_with("expires"))
        .unwrap_or_else(|| panic!("an expires line: {no:?}"));
    assert_eq!(
        expires.trim_start_matches("expires").trim(),
        berlin(&action["approval"]["expires_at"]),
        "{no:?}"
    );

    let denied = w
        .cli(keys::APPROVER, &["--json", "deny", id, "--reason", "r"], "")
        .await
        .json();
    let events = w
        .cli(keys::AGENT, &["--json", "events", id], "")
        .await
        .json();
    let table = w.cli(keys::AGENT, &["events", id], "").await;
    for event in events["data"].as_array().unwrap() {
        let shown = berlin(&event["at"]);
        assert!(table.stdout.contains(&shown), "{shown} in {table:?}");
    }
    let list = w.cli(keys::AGENT, &["list", "--state", "denied"], "").await;
    let sealed = format!("sealed {}", berlin(&denied["sealed_at"]));
    assert!(list.stdout.contains(&sealed), "{sealed} in {list:?}");
    // --json stays the API's own text.
    assert!(events["data"][0]["at"].as_str().unwrap().ends_with('Z'));
}

/// Issue 16, item 8: caught on main — a file that is no public key exited 8 ("does not
/// verify"), as a tampered deed does; it is a wrong argument, exit 2.
#[tokio::test]
async fn sc_sec_07_issue16_a_bad_pem_is_a_usage_error_exit_2() {
    let dir = temp_db("cli-pem").parent().unwrap().to_path_buf();
    let (pem, deed) = (dir.join("bad.pem"), dir.join("deed.json"));
    std::fs::write(&pem, "not a key\n").unwrap();
    std::fs::write(&deed, "{}").unwrap();
    let args = [
        "verify",
        "--public-key",
        pem.to_str().unwrap(),
        deed.to_str().unwrap(),
    ];
    let run = cli_at("http://127.0.0.1:9", "", &args, "").await;
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("--public-key"), "{run:?}");
}

/// Argument lines of a `-h` page with no help: nothing after the name and no continuation.
fn bare_arguments(help: &str) -> Vec<String> {
    let lines: Vec<&str> = help.lines().collect();
    let indent = |l: &str| l.len() - l.trim_start().len();
    let mut bare = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let item = line.trim_start();
        if !(line.starts_with("  ") && (item.starts_with('-') || item.starts_with('<'))) {
            continue;
        }
        let continued = lines
            .get(i + 1)
            .is_some_and(|next| !next.trim().is_empty() && indent(next) > indent(line));
        if !item.contains("  ") && !continued {
            bare.push(item.to_owned());
        }
    }
    bare
}

/// Issue 16, item 8: caught on main — `<ID>` and `--reason` had no help, and the usage line
/// (`countersign [OPTIONS] <COMMAND>`) did not say that `--url` and `--key` are optional;
/// `stop`'s usage showed `--agent` as required though `--all` may stand for it.
#[tokio::test]
async fn sc_ops_02_issue16_every_argument_has_help_and_usage_shows_optional_flags() {
    let subcommands = [
        "submit",
        "list",
        "show",
        "approve",
        "deny",
        "cancel",
        "stop",
        "resume-agent",
        "events",
        "deed",
        "verify",
        "key-hash",
    ];
    for sub in subcommands {
        let run = cli_at("http://127.0.0.1:9", "", &[sub, "-h"], "").await;
        assert_eq!(run.code, 0, "{run:?}");
        assert_eq!(
            bare_arguments(&run.stdout),
            Vec::<String>::new(),
            "{sub}: {run:?}"
        );
    }
    let top = cli_at("http://127.0.0.1:9", "", &["-h"], "").await;
    let usage = top
        .stdout
        .lines()
        .find(|l| l.starts_with("Usage:"))
        .unwrap();
    assert!(
        usage.contains("[--url <URL>]") && usage.contains("[--key <KEY>]"),
        "{usage}"
    );
    let stop = cli_at("http://127.0.0.1:9", "", &["stop"], "").await;
    assert_eq!(stop.code, 2, "{stop:?}");
    assert!(stop.stderr.contains("<--agent <AGENT>|--all>"), "{stop:?}");
}

/// A second approver of `acme`, for a two-person rule.
const APPROVER_2: &str = "key-approver-2";

/// Issue 18: caught on main — the approve prompt of a two-person rule named the rule but not
/// how many approvals were still needed, so the second approver could not tell that the first
/// had signed. `show` and the prompt both say "N of M (approved by …)" now.
#[tokio::test]
async fn sc_pol_04_sc_pol_05_show_and_approve_name_the_rule_and_the_approvals_still_needed() {
    let w = world_with(|toml| {
        let rule = r#"{ name = "mail needs two", tool = "mail.*", decision = "require_approval", approvals = 2 }"#;
        let key = format!(
            r#"{{ id = "approver-2", role = "approver", sha256 = "{}" }},
  {{ id = "admin-1""#,
            countersign::domain::canonical::sha256_hex(APPROVER_2.as_bytes())
        );
        toml.replace(r#"{ tool = "mail.*", decision = "require_approval" }"#, rule)
            .replace(r#"{ id = "admin-1""#, &key)
    })
    .await;
    let action = w.pending_mail("two of us").await;
    let id = action["id"].as_str().unwrap();
    let show = w.cli(keys::APPROVER, &["show", id], "").await;
    assert_eq!(show.code, 0, "{show:?}");
    for line in [
        "rule          #0 mail needs two",
        "approvals     2 distinct approvers",
        "still needed  2",
    ] {
        assert!(show.stdout.contains(line), "{line} in {show:?}");
    }

    let first = w.cli(keys::APPROVER, &["approve", id, "--yes"], "").await;
    assert_eq!(first.code, 0, "{first:?}");
    assert!(
        first
            .stdout
            .contains(&format!("approved {id}: 1 more approval needed")),
        "{first:?}"
    );
    // The second approver's prompt says who signed and that one more is needed: theirs.
    let second = w.cli(APPROVER_2, &["approve", id], "n\n").await;
    assert_eq!(second.code, 7, "{second:?}");
    for line in [
        "rule          #0 mail needs two",
        "still needed  1 of 2 (approved by approver-1)",
    ] {
        assert!(second.stderr.contains(line), "{line} in {second:?}");
    }
    let done = w.cli(APPROVER_2, &["approve", id, "--yes"], "").await;
    assert!(
        done.stdout.contains(&format!("approved {id}: approved")),
        "{done:?}"
    );
    let after = w.cli(keys::AGENT, &["show", id], "").await;
    assert!(!after.stdout.contains("still needed"), "{after:?}");
    assert!(after.stdout.contains("approver-1, approver-2"), "{after:?}");
}

/// A third approver of `acme`, for a three-person rule.
const APPROVER_3: &str = "key-approver-3";

/// Issue 30, item 6: caught on main — after the first approvals of a quorum `approve` printed
/// `approved <id>: pending_approval`, as if nothing had counted. It now says how many approvals
/// are still needed (the API's `next_action.still_needed`), in the singular for one, and the
/// state once the last one commits the ticket (SC-POL-04).
#[tokio::test]
async fn sc_pol_04_approve_says_how_many_more_approvals_are_needed() {
    let w = world_with(|toml| {
        let rule = r#"{ name = "mail needs three", tool = "mail.*", decision = "require_approval", approvals = 3 }"#;
        let key = |id: &str, secret: &str| {
            format!(
                r#"{{ id = "{id}", role = "approver", sha256 = "{}" }},"#,
                countersign::domain::canonical::sha256_hex(secret.as_bytes())
            )
        };
        let keys = format!(
            "{}\n  {}\n  {{ id = \"admin-1\"",
            key("approver-2", APPROVER_2),
            key("approver-3", APPROVER_3)
        );
        toml.replace(r#"{ tool = "mail.*", decision = "require_approval" }"#, rule)
            .replace(r#"{ id = "admin-1""#, &keys)
    })
    .await;
    let action = w.pending_mail("three of us").await;
    let id = action["id"].as_str().unwrap();
    for (key, said) in [
        (
            keys::APPROVER,
            format!("approved {id}: 2 more approvals needed\n"),
        ),
        (
            APPROVER_2,
            format!("approved {id}: 1 more approval needed\n"),
        ),
        (APPROVER_3, format!("approved {id}: approved\n")),
    ] {
        let run = w.cli(key, &["approve", id, "--yes"], "").await;
        assert_eq!(run.code, 0, "{run:?}");
        assert_eq!(run.stdout, said, "{run:?}");
    }
}

/// SC-GR-01: `approve` gives a grant with the approval when asked (`--grant-uses`,
/// `--grant-ttl`, `--grant-pin`, `--grant-when`), shows it before asking, and says what it
/// granted; the next matching call needs no person. A grant the server refuses approves nothing.
#[tokio::test]
async fn sc_gr_01_approve_grants_with_the_approval() {
    let w = world().await;
    let bad = w.pending_mail("grant by cli").await;
    let bad_id = bad["id"].as_str().unwrap();
    let refused = w
        .cli(
            keys::APPROVER,
            &["approve", bad_id, "--grant-uses", "1001", "-y"],
            "",
        )
        .await;
    assert_ne!(refused.code, 0, "{refused:?}");
    assert!(refused.stderr.contains("grant.uses"), "{refused:?}");
    let (_, still) = w
        .api
        .get(&format!("/v1/actions/{bad_id}"), keys::ADMIN)
        .await;
    assert_eq!(
        still["state"], "pending_approval",
        "nothing approved: {still}"
    );

    let asked = w
        .cli(
            keys::APPROVER,
            &[
                "approve",
                bad_id,
                "--grant-uses",
                "2",
                "--grant-ttl",
                "8h",
                "--grant-pin",
                "to",
            ],
            "y\n",
        )
        .await;
    assert_eq!(asked.code, 0, "{asked:?}");
    assert!(asked.stderr.contains("and grant agent-1"), "{asked:?}");
    assert!(asked.stderr.contains("the grant? [y/N]"), "{asked:?}");
    let grant = format!("grt_{}", bad_id.trim_start_matches("act_"));
    assert!(
        asked
            .stdout
            .contains(&format!("granted {grant} (2 further calls)")),
        "{asked:?}"
    );
    let (_, listed) = w.api.get("/v1/grants", keys::ADMIN).await;
    let terms = &listed["grants"][0]["terms"];
    assert_eq!(terms["pins"], json!({"to": "ops@example.com"}), "{listed}");
    let hours = |t: &Value| t.as_str().unwrap().parse::<jiff::Timestamp>().unwrap();
    let ttl = hours(&terms["expires_at"]).duration_since(hours(&terms["granted_at"]));
    assert_eq!(ttl.as_hours(), 8, "{terms}");
    let (status, next) = w
        .api
        .submit(
            keys::AGENT,
            json!({"tool": "mail.send", "args": {"to": "ops@example.com", "subject": "again"}}),
        )
        .await;
    assert_eq!(
        (status, &next["decision"]),
        (200, &json!("allow")),
        "{next}"
    );
}

/// SC-GR-07: `grants` lists the tenant's scoped grants with their uses left (a table, or the
/// API's JSON); `revoke` ends one at once — the next matching call waits for a person again.
#[tokio::test]
async fn sc_gr_07_grants_lists_and_revoke_ends_a_grant() {
    let w = world().await;
    let action = w.pending_mail("grant me").await;
    let id = action["id"].as_str().unwrap();
    let body = json!({"context_digest": action["approval"]["context_digest"],
        "grant": {"uses": 3, "pin": ["to"]}});
    let (status, approved) = w
        .api
        .post(&format!("/v1/actions/{id}/approve"), keys::APPROVER, body)
        .await;
    assert_eq!(status, 200, "{approved}");
    let grant = approved["grant"]["id"].as_str().unwrap().to_owned();
    let table = w.cli(keys::APPROVER, &["grants"], "").await;
    assert_eq!(table.code, 0, "{table:?}");
    for shown in [
        grant.as_str(),
        "agent-1",
        "mail.send",
        "3/3",
        "active",
        "approver-1",
    ] {
        assert!(table.stdout.contains(shown), "{shown}: {table:?}");
    }
    let json = w.cli(keys::ADMIN, &["--json", "grants"], "").await;
    assert_eq!(json.json()["grants"][0]["uses_left"], 3, "{json:?}");
    let refused = w.cli(keys::AGENT, &["grants"], "").await;
    assert_eq!(refused.code, 4, "an agent key lists no grants: {refused:?}");

    let revoked = w.cli(keys::APPROVER, &["revoke", &grant], "").await;
    assert_eq!(revoked.code, 0, "{revoked:?}");
    assert!(
        revoked.stdout.contains(&format!("revoked {grant}")),
        "{revoked:?}"
    );
    let after = w.cli(keys::APPROVER, &["grants"], "").await;
    assert!(after.stdout.contains("revoked"), "{after:?}");
    let next = w.pending_mail("grant me").await;
    assert_eq!(next["state"], "pending_approval");
    let missing = w
        .cli(
            keys::APPROVER,
            &["revoke", "grt_01J0000000000000000000000Z"],
            "",
        )
        .await;
    assert_ne!(missing.code, 0, "{missing:?}");
}
