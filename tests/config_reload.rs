//! SC-OPS-03 on the local server: a new configuration without a restart — on SIGHUP, and when
//! the file changes — over real HTTP, tools over real HTTP. Operations under way keep the
//! configuration they started under; a ticket committed under the old one meets the new catalog
//! at its wake (SC-RES-04); a document that does not load keeps the running one (logged, and
//! counted as `config_reloads{outcome="rejected"}` and `config_rejected`).
//!
//! Caught on main: the configuration was read once at start; a policy, key or tool change
//! meant a restart (SIGHUP ended the server: no handler), and nothing looked at the file.

#[path = "reload_support/mod.rs"]
mod reload_support;

use countersign::{
    boot::embedded::{self, Server},
    telemetry,
};
use countersign_tests::{
    child_server, config_toml, in_secs, keys,
    receiver::{notify_toml, Mode, Receiver},
    temp_db, Api, ToolServer,
};
use reload_support::{broken, changed, write_atomically, NEW_AGENT};
use serde_json::{json, Value};
use std::{path::PathBuf, process::Command, sync::Arc, time::Duration};

/// Set in the child process: its config file, database and metrics address.
const CHILD_CONFIG: &str = "COUNTERSIGN_TEST_RELOAD_CONFIG";
const CHILD_DB: &str = "COUNTERSIGN_TEST_RELOAD_DB";
const CHILD_METRICS: &str = "COUNTERSIGN_TEST_RELOAD_METRICS";

/// Poll `ok` every 100 ms for up to `secs`; whether it came true.
/// The in-process reloads count into one process-wide `config_reloads`: the test that reads
/// the counter and the one that only reloads take turns, or one's reload lands in the other's
/// count (seen as `applied` 2 where 1 was expected when they ran side by side).
static IN_PROCESS_RELOADS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn eventually<F: std::future::Future<Output = bool>>(secs: u64, ok: impl Fn() -> F) -> bool {
    let until = std::time::Instant::now() + Duration::from_secs(secs);
    while std::time::Instant::now() < until {
        if ok().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

/// The child's counters `config_reloads{outcome=…}` and `config_rejected`, from its `/metrics`.
async fn reloads(metrics: &str) -> (f64, f64, f64) {
    let text = reqwest::get(format!("http://{metrics}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let sample = |series: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.trim().parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (
        sample("config_reloads{outcome=\"applied\"}"),
        sample("config_reloads{outcome=\"rejected\"}"),
        sample("config_rejected "),
    )
}

fn hang_up_signal(child: &std::process::Child) {
    let sent = Command::new("kill")
        .args(["-HUP", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
}

/// Kills the child server when the test ends, however it ends.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// SIGHUP reloads the file. Under way when it does: a ticket of `report.build` (an entry the
/// change leaves alone), one of `mail.send` (pointed elsewhere by the change) and a run of
/// `search.web` (taken out of the catalog by the change), held at the tool. The run finishes
/// under the configuration it started with; at their wakes the first ticket runs and the second
/// is sealed `catalog_changed` without a call. Then a broken document: rejected, counted, and
/// the server keeps serving the last one that loaded. The child's poll is an hour away: only
/// the signal can have reloaded it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sc_ops_03_sighup_reloads_the_local_server_and_work_under_way_keeps_its_config() {
    let tools = ToolServer::start().await;
    let first = config_toml(&tools, "10s", "5s");
    let file = temp_db("reload-sighup").with_extension("toml");
    write_atomically(&file, &first);
    let metrics = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .to_string();
    let db = temp_db("reload-sighup");
    let (child, addr) = child_server(
        "child_serves_and_reloads_on_sighup",
        &[
            (CHILD_CONFIG, file.as_os_str()),
            (CHILD_DB, db.as_os_str()),
            (CHILD_METRICS, metrics.as_ref()),
        ],
    );
    let child = Killed(child);
    let api = Api::new(addr);
    assert_eq!(api.get("/v1/me", NEW_AGENT).await.0, 401);

    // Under the first configuration.
    let window = json!({"not_before": in_secs(6), "not_after": in_secs(120)});
    let (s, report) = api
        .submit(
            keys::AGENT,
            json!({"tool": "report.build", "args": {"q": "kept"}, "schedule": window}),
        )
        .await;
    assert_eq!(
        (s, report["state"].as_str()),
        (201, Some("approved")),
        "{report}"
    );
    let (s, mail) = api
        .submit(
            keys::AGENT,
            json!({"tool": "mail.send", "args": {"to": "x@example.com"}, "schedule": window}),
        )
        .await;
    assert_eq!(
        (s, mail["state"].as_str()),
        (202, Some("pending_approval")),
        "{mail}"
    );
    let mail_id = mail["id"].as_str().unwrap().to_owned();
    let (s, approved) = api
        .approve(
            &mail_id,
            mail["approval"]["context_digest"].as_str().unwrap(),
        )
        .await;
    assert_eq!(
        (s, approved["state"].as_str()),
        (200, Some("approved")),
        "{approved}"
    );
    tools.hold();
    let running = {
        let api = Api::new(addr);
        tokio::spawn(async move {
            api.submit(
                keys::AGENT,
                json!({"tool": "search.web", "args": {"q": "under way"}}),
            )
            .await
        })
    };
    assert!(
        eventually(10, || async {
            tools
                .received()
                .iter()
                .any(|r| r.body["args"]["q"] == "under way")
        })
        .await,
        "the search reached the tool"
    );

    // The change, then SIGHUP.
    let second = changed(&first);
    write_atomically(&file, &second);
    hang_up_signal(&child.0);
    assert!(
        eventually(10, || async { api.get("/v1/me", NEW_AGENT).await.0 == 200 }).await,
        "the new key works once the signal reloaded the file"
    );
    let (s, gone) = api
        .submit(
            keys::AGENT,
            json!({"tool": "search.web", "args": {"q": "after"}}),
        )
        .await;
    assert!(
        s >= 400 || gone["state"] != "succeeded",
        "search.web is out of the catalog now: {s} {gone}"
    );
    assert!(!tools
        .received()
        .iter()
        .any(|r| r.body["args"]["q"] == "after"));

    // The run under way finishes under the configuration it started with.
    tools.release();
    let (s, ran) = running.await.unwrap();
    assert_eq!(
        (s, ran["state"].as_str()),
        (200, Some("succeeded")),
        "{ran}"
    );

    // The tickets at their wakes (SC-RES-04).
    let report = api.wait_sealed(report["id"].as_str().unwrap(), 30).await;
    assert_eq!(report["state"], "succeeded", "{report}");
    assert_eq!(tools.count_for(report["id"].as_str().unwrap()), 1);
    let mail = api.wait_sealed(&mail_id, 30).await;
    assert_eq!(
        (mail["state"].as_str(), mail["outcome"]["reason"].as_str()),
        (Some("cancelled"), Some("catalog_changed")),
        "{mail}"
    );
    assert_eq!(tools.count_for(&mail_id), 0, "never sent");
    assert_eq!(reloads(&metrics).await, (1.0, 0.0, 0.0));

    // A broken document: the running configuration stays, and the refusal is counted.
    write_atomically(&file, &broken(&second));
    hang_up_signal(&child.0);
    assert!(
        eventually(10, || async { reloads(&metrics).await == (1.0, 1.0, 1.0) }).await,
        "the broken document was seen and refused: {:?}",
        reloads(&metrics).await
    );
    assert_eq!(
        api.get("/v1/me", NEW_AGENT).await.0,
        200,
        "the last good one serves"
    );
    let (s, again) = api
        .submit(
            keys::AGENT,
            json!({"tool": "report.build", "args": {"q": "still"}, "schedule": {"not_before": in_secs(5), "not_after": in_secs(120)}}),
        )
        .await;
    assert_eq!(s, 201, "{again}");
}

/// Not a test of its own: the server process of the SIGHUP test (which re-runs this binary with
/// `--ignored --exact`), started as `countersign-server` starts, its file's poll an hour away.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "the child process of sc_ops_03_sighup_reloads_the_local_server_and_work_under_way_keeps_its_config"]
async fn child_serves_and_reloads_on_sighup() {
    let (Some(config), Some(db), Ok(metrics)) = (
        std::env::var_os(CHILD_CONFIG),
        std::env::var_os(CHILD_DB),
        std::env::var(CHILD_METRICS),
    ) else {
        return;
    };
    let handle = telemetry::prometheus::install();
    let listener = tokio::net::TcpListener::bind(&metrics).await.unwrap();
    tokio::spawn(telemetry::prometheus::serve(listener, handle));
    let path = PathBuf::from(config);
    let text = embedded::read_config(&path).unwrap();
    let config = Arc::new(embedded::load_config(&text).unwrap());
    let mut server = Server::start(config, &PathBuf::from(db), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    server.reload_from(path, &text, Duration::from_secs(3600));
    println!("CHILD_ADDR {}", server.addr);
    std::future::pending::<()>().await;
}

/// A changed file is served without a signal (looked at every 200 ms here; `CONFIG_POLL` in
/// the binary); a `touch` is no change; a broken file keeps the running configuration; the fixed
/// file is served again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sc_ops_03_a_changed_file_is_served_and_a_broken_one_keeps_the_last_good() {
    let _turn = IN_PROCESS_RELOADS.lock().await;
    let handle = telemetry::prometheus::install();
    let counted = |outcome: &str| {
        let text = handle.render();
        let series = format!("config_reloads{{outcome=\"{outcome}\"}}");
        text.lines()
            .find_map(|l| l.strip_prefix(series.as_str())?.trim().parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    let tools = ToolServer::start().await;
    let first = config_toml(&tools, "10s", "5s");
    let file = temp_db("reload-file").with_extension("toml");
    write_atomically(&file, &first);
    let text = embedded::read_config(&file).unwrap();
    let config = Arc::new(embedded::load_config(&text).unwrap());
    let mut server = Server::start(
        config,
        &temp_db("reload-file"),
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap();
    server.reload_from(file.clone(), &text, Duration::from_millis(200));
    let api = Api::new(server.addr);
    let new_key_works = || async { api.get("/v1/me", NEW_AGENT).await.0 == 200 };
    assert!(!new_key_works().await);

    let applied = counted("applied");
    let second = changed(&first);
    write_atomically(&file, &second);
    assert!(eventually(10, new_key_works).await, "the change is served");
    assert_eq!(counted("applied"), applied + 1.0);

    // The same text again: no reload.
    write_atomically(&file, &second);
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(
        counted("applied"),
        applied + 1.0,
        "the same text is no change"
    );

    let rejected = counted("rejected");
    write_atomically(&file, &broken(&second));
    assert!(
        eventually(10, || async { counted("rejected") == rejected + 1.0 }).await,
        "the broken file was seen and refused"
    );
    assert!(new_key_works().await, "the last good configuration serves");
    let live: Value = api.get("/v1/me", keys::AGENT).await.1;
    assert_eq!(live["tenant"], "acme");

    // Fixed: served again (the first document: the new key is gone).
    write_atomically(&file, &first);
    assert!(
        eventually(10, || async { !new_key_works().await }).await,
        "the fixed file is served"
    );
    assert_eq!(counted("applied"), applied + 2.0);
    assert_eq!(
        counted("rejected"),
        rejected + 1.0,
        "refused once, not at every look"
    );
    server.shutdown().await.unwrap();
}

/// A reload reaches the notifications too: an endpoint the new document adds is sent the notices
/// of what happens after it (the local server's notifier follows the configuration).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sc_ops_03_an_endpoint_a_reload_adds_is_notified() {
    let _turn = IN_PROCESS_RELOADS.lock().await;
    let tools = ToolServer::start().await;
    let receiver = Receiver::start(Mode::Up).await;
    let first = config_toml(&tools, "10s", "5s");
    let file = temp_db("reload-notify").with_extension("toml");
    write_atomically(&file, &first);
    let text = embedded::read_config(&file).unwrap();
    let config = Arc::new(embedded::load_config(&text).unwrap());
    let mut server = Server::start(
        config,
        &temp_db("reload-notify"),
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap();
    server.reload_from(file.clone(), &text, Duration::from_millis(200));
    let api = Api::new(server.addr);

    write_atomically(
        &file,
        &(first.clone() + &notify_toml(&receiver.url(), "1s", 3)),
    );
    let served = || async { server.live().engine().config().tenants["acme"].notify.len() == 1 };
    assert!(eventually(10, served).await, "the endpoint is served");
    let (s, pending) = api
        .submit(
            keys::AGENT,
            json!({"tool": "mail.send", "args": {"to": "x@example.com"}}),
        )
        .await;
    assert_eq!(s, 202, "{pending}");
    let id = pending["id"].as_str().unwrap().to_owned();
    assert!(
        eventually(15, || async {
            receiver
                .seen()
                .iter()
                .any(|d| d.status == 200 && d.signature_ok && d.body.to_string().contains(&id))
        })
        .await,
        "the new endpoint was notified of {id}: {:?}",
        receiver.seen()
    );
    server.shutdown().await.unwrap();
}
