//! A hostile agent against the local server over real HTTP (SPEC §4 Security). Each test names
//! the SC-SEC rule it proves.

use countersign::{boot::embedded::Server, config::Config, store::sqlite::SqliteStore};
use countersign_tests::faults::FaultyStore;
use countersign_tests::{
    config_toml, in_secs, keys, on_every_store,
    stores::{Backend, Place},
    temp_db, Api, Behaviour, ToolServer,
};
use serde_json::{json, Value};
use std::{
    path::PathBuf,
    sync::{Arc, Mutex},
};

struct World {
    api: Api,
    db: PathBuf,
    config: Arc<Config>,
    server: Server,
    _tools: ToolServer,
}

async fn world() -> World {
    let tools = ToolServer::start().await;
    let config = Arc::new(
        Config::from_toml(&config_toml(&tools, "10s", "5s"))
            .and_then(Config::read_keys)
            .unwrap(),
    );
    let db = temp_db("hostile");
    let server = Server::start(config.clone(), &db, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    World {
        api: Api::new(server.addr),
        db,
        config,
        server,
        _tools: tools,
    }
}

impl World {
    /// Stop the server and start a new one over the same database (a restart).
    async fn restart(self) -> World {
        self.server.shutdown().await.unwrap();
        let server = Server::start(
            self.config.clone(),
            &self.db,
            "127.0.0.1:0".parse().unwrap(),
        )
        .await
        .expect("the server starts over everything it stored");
        World {
            api: Api::new(server.addr),
            server,
            ..self
        }
    }

    async fn raw_submit(&self, body: String) -> (u16, Value) {
        let (status, v, _) = self
            .api
            .send(
                reqwest::Method::POST,
                "/v1/actions",
                Some(keys::AGENT),
                Some(body.into_bytes()),
                &[],
            )
            .await;
        (status, v)
    }

    /// Every stored action of tenant `acme`, as its admin lists them (paging to the end).
    async fn stored(&self) -> Vec<Value> {
        let mut all = Vec::new();
        let mut path = "/v1/actions?limit=100".to_owned();
        loop {
            let (status, page) = self.api.get(&path, keys::ADMIN).await;
            assert_eq!(status, 200, "listing works: {page}");
            all.extend(page["data"].as_array().unwrap().iter().cloned());
            match page["next_cursor"].as_str() {
                Some(c) => path = format!("/v1/actions?limit=100&cursor={c}"),
                None => return all,
            }
        }
    }
}

/// `args` nested so that the whole body has `depth` levels of objects.
fn nested_submit(depth: usize) -> String {
    let args_depth = depth - 1;
    format!(
        r#"{{"tool":"mail.send","args":{}"leaf"{}}}"#,
        "{\"a\":".repeat(args_depth),
        "}".repeat(args_depth)
    )
}

/// Caught on main before the fix: args nested 124 deep were accepted (202), after which the
/// tenant's list answered 500 and the server refused to start over its own database.
#[tokio::test]
async fn sc_sec_03_poison_depth_refused_around_the_limit_nothing_stored() {
    let mut w = world().await;
    for depth in [31, 32, 33, 124] {
        let before = w.stored().await.len();
        let (status, v) = w.raw_submit(nested_submit(depth)).await;
        if depth <= 32 {
            assert_eq!(status, 202, "depth {depth} is within the limit: {v}");
            let id = v["id"].as_str().unwrap();
            let (status, read) = w.api.get(&format!("/v1/actions/{id}"), keys::AGENT).await;
            assert_eq!((status, &read["args"]), (200, &v["args"]), "depth {depth}");
            assert_eq!(w.stored().await.len(), before + 1);
        } else {
            assert_eq!(status, 400, "depth {depth}: {v}");
            assert_eq!(v["error"]["code"], "validation_failed");
            let param = v["error"]["param"].as_str().unwrap();
            assert!(param.starts_with("args.a.a"), "{param}");
            assert!(v["error"]["message"].as_str().unwrap().contains("32"));
            assert_eq!(
                w.stored().await.len(),
                before,
                "depth {depth}: nothing stored"
            );
        }
        // What was stored still loads after a restart, and listing still answers.
        w = w.restart().await;
        assert_eq!(
            w.stored().await.len(),
            if depth <= 32 { before + 1 } else { before }
        );
    }
}

/// Caught on main before the fix: a 30-digit integer was stored as `1.2345678901234568e29` and
/// a repeated key silently kept its last value — the approver saw something else than was sent.
#[tokio::test]
async fn sc_sec_03_inexact_numbers_and_duplicate_keys_refused_nothing_stored() {
    let w = world().await;
    let cases = [
        (
            r#"{"tool":"mail.send","args":{"amount":123456789012345678901234567890}}"#,
            "args.amount",
        ),
        (
            r#"{"tool":"mail.send","args":{"amount":0.30000000000000001}}"#,
            "args.amount",
        ),
        (
            r#"{"tool":"mail.send","args":{"to":"a@example.com","to":"b@example.com"}}"#,
            "args.to",
        ),
        (
            r#"{"tool":"mail.send","tool":"search.web","args":{}}"#,
            "tool",
        ),
        (
            r#"{"tool":"mail.send","args":{"list":[1,{"x":1,"x":1}]}}"#,
            "args.list[1].x",
        ),
    ];
    for (body, param) in cases {
        let (status, v) = w.raw_submit(body.to_owned()).await;
        assert_eq!(status, 400, "{body}: {v}");
        assert_eq!(v["error"]["code"], "validation_failed", "{body}");
        assert_eq!(v["error"]["param"], param, "{body}");
    }
    assert!(w.stored().await.is_empty(), "nothing was stored");

    // Exact numbers pass and are kept as sent.
    let (status, v) = w
        .raw_submit(
            r#"{"tool":"mail.send","args":{"big":18446744073709551615,"neg":-9223372036854775808,"x":0.1}}"#
                .to_owned(),
        )
        .await;
    assert_eq!(status, 202, "{v}");
    assert_eq!(
        v["args"],
        json!({"big": 18446744073709551615u64, "neg": i64::MIN, "x": 0.1})
    );
}

/// The same strict reader serves every JSON route: approve and stop bodies too.
#[tokio::test]
async fn sc_sec_03_every_json_route_reads_strictly() {
    let w = world().await;
    let (status, v) = w
        .api
        .submit(keys::AGENT, json!({"tool": "mail.send", "args": {}}))
        .await;
    assert_eq!(status, 202, "{v}");
    let id = v["id"].as_str().unwrap();
    let digest = v["approval"]["context_digest"].as_str().unwrap();
    let dup = format!(r#"{{"context_digest":"{digest}","context_digest":"{digest}"}}"#);
    for (path, key, body, param) in [
        (
            format!("/v1/actions/{id}/approve"),
            keys::APPROVER,
            dup,
            "context_digest",
        ),
        (
            format!("/v1/actions/{id}/deny"),
            keys::APPROVER,
            r#"{"reason":"x","reason":"y"}"#.to_owned(),
            "reason",
        ),
        (
            "/v1/stops".to_owned(),
            keys::ADMIN,
            r#"{"agent_id":"agent-1","agent_id":"agent-2"}"#.to_owned(),
            "agent_id",
        ),
    ] {
        let (status, v, _) = w
            .api
            .send(
                reqwest::Method::POST,
                &path,
                Some(key),
                Some(body.into_bytes()),
                &[],
            )
            .await;
        assert_eq!(status, 400, "{path}: {v}");
        assert_eq!(v["error"]["param"], param, "{path}");
    }
    assert_eq!(w.api.action(id).await["state"], "pending_approval");
}

/// Serve the API over an engine whose store counts its list reads.
async fn counted_api(config: Arc<Config>) -> (Api, Arc<FaultyStore>) {
    let store = SqliteStore::open(&temp_db("counted")).unwrap();
    countersign_tests::counted_api(config, Arc::new(store)).await
}

/// Caught on main before the fix: `?agent_id=nobody` paged through the tenant's whole history
/// inside one request, looking for `limit` matches.
async fn a_filtered_list_reads_a_bounded_number_and_pages_to_the_end(
    store: Arc<dyn countersign::store::Store>,
) {
    let tools = ToolServer::start().await;
    let config = Arc::new(
        Config::from_toml(&config_toml(&tools, "10s", "5s"))
            .and_then(Config::read_keys)
            .unwrap(),
    );
    let (api, store) = countersign_tests::counted_api(config, store).await;
    let mut newest_first = Vec::new();
    let mut agent_2 = Vec::new();
    for i in 0..120 {
        let key = if i % 10 == 0 {
            keys::AGENT_2
        } else {
            keys::AGENT
        };
        let (status, v) = api
            .submit(key, json!({"tool": "mail.send", "args": {"n": i}}))
            .await;
        assert_eq!(status, 202, "{v}");
        let id = v["id"].as_str().unwrap().to_owned();
        if key == keys::AGENT_2 {
            agent_2.insert(0, id.clone());
        }
        newest_first.insert(0, id);
    }

    // Nobody's actions: each request reads at most 5 × limit, answers nothing, and its cursor
    // continues exactly after what it read, until the history ends.
    let limit = 10;
    // The contract's bound (engine::SCAN_FACTOR), written out so a change to it shows here.
    let bound = 5 * limit;
    let mut path = format!("/v1/actions?agent_id=nobody&limit={limit}");
    let mut pages = 0;
    loop {
        store.take_list_sizes();
        let (status, page) = api.get(&path, keys::ADMIN).await;
        assert_eq!(status, 200, "{page}");
        pages += 1;
        let reads = store.take_list_sizes();
        assert_eq!(reads.len(), 1, "one store read per request");
        assert!(reads[0] <= bound, "read {} > {bound}", reads[0]);
        assert_eq!(page["data"], json!([]));
        match page["next_cursor"].as_str() {
            Some(cursor) => {
                assert_eq!(cursor, newest_first[pages * bound - 1]);
                path = format!("/v1/actions?agent_id=nobody&limit={limit}&cursor={cursor}");
            }
            None => break,
        }
    }
    assert_eq!(pages, 120usize.div_ceil(bound), "paged to the end");

    // A filter that matches some: paging collects exactly its actions, newest first.
    let mut found = Vec::new();
    let mut path = "/v1/actions?agent_id=agent-2&limit=5".to_owned();
    loop {
        let (status, page) = api.get(&path, keys::ADMIN).await;
        assert_eq!(status, 200, "{page}");
        found.extend(
            page["data"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a["id"].as_str().unwrap().to_owned()),
        );
        match page["next_cursor"].as_str() {
            Some(c) => path = format!("/v1/actions?agent_id=agent-2&limit=5&cursor={c}"),
            None => break,
        }
    }
    assert_eq!(found, agent_2);
    let max_read = store.take_list_sizes().into_iter().max().unwrap();
    assert!(max_read <= 5 * 5);
}

#[tokio::test]
async fn sc_sec_05_a_filtered_list_reads_a_bounded_number_and_pages_to_the_end_sqlite() {
    let store = SqliteStore::open(&temp_db("counted")).unwrap();
    a_filtered_list_reads_a_bounded_number_and_pages_to_the_end(Arc::new(store)).await;
}

#[tokio::test]
async fn sc_sec_05_a_filtered_list_reads_a_bounded_number_and_pages_to_the_end_postgres() {
    let store = countersign_tests::postgres::store("counted").await;
    a_filtered_list_reads_a_bounded_number_and_pages_to_the_end(Arc::new(store)).await;
}

/// Caught on main before the fix: a 503 echoed the store's error text — for DynamoDB an
/// AccessDenied naming the account, the role and the table.
#[tokio::test]
async fn sc_sec_02_store_errors_answer_store_unavailable_without_their_text() {
    let tools = ToolServer::start().await;
    let config = Arc::new(
        Config::from_toml(&config_toml(&tools, "10s", "5s"))
            .and_then(Config::read_keys)
            .unwrap(),
    );
    let (api, store) = counted_api(config).await;
    let (_, v) = api
        .submit(keys::AGENT, json!({"tool": "mail.send", "args": {}}))
        .await;
    let id = v["id"].as_str().unwrap();
    let sdk_text = "AccessDeniedException: User: arn:aws:sts::123456789012:assumed-role/countersign-intake/fn is not authorized to perform: dynamodb:Query on resource: arn:aws:dynamodb:us-east-1:123456789012:table/countersign-prod";
    store.fail_reads(Some(sdk_text));
    for path in ["/v1/actions".to_owned(), format!("/v1/actions/{id}")] {
        let (status, v) = api.get(&path, keys::AGENT).await;
        assert_eq!(status, 503, "{path}: {v}");
        assert_eq!(v["error"]["message"], "store unavailable; retry shortly");
        for fragment in [
            "123456789012",
            "arn:aws",
            "countersign-prod",
            "AccessDenied",
        ] {
            assert!(
                !v.to_string().contains(fragment),
                "{path} leaks {fragment}: {v}"
            );
        }
    }
}

/// Every log line of this test binary (countersign at every level, others from warn).
static LOGS: Mutex<Vec<u8>> = Mutex::new(Vec::new());

struct LogCapture;

impl std::io::Write for LogCapture {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        LOGS.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn capture_logs() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new("countersign=trace,warn"))
            .with_writer(|| LogCapture)
            .with_ansi(false)
            .init()
    });
}

/// Caught on main before the fix: a failed webhook call stored reqwest's error text, which holds
/// the whole URL (`…/services/T000/B000/<token>?code=…`), in the outcome every key of the tenant
/// reads, and the retry warning logged it too.
#[tokio::test]
async fn sc_sec_02_a_whole_flow_leaks_no_key_secret_or_url() {
    capture_logs();
    let tools = ToolServer::start().await;
    tools.behave(Behaviour {
        status: 500,
        ..Behaviour::default()
    });
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let mail_url = format!(
        "http://{}/services/T000/B000/SECRETTOKENMAIL?code=hunter2",
        tools.addr
    );
    let report_url = format!("http://{closed}/hooks/SECRETTOKENREPORT?code=swordfish");
    let toml = config_toml(&tools, "10s", "1s")
        .replace(
            &format!("\"{}\"", tools.url("mail")),
            &format!("\"{mail_url}\""),
        )
        .replace(
            &format!("\"{}\"", tools.url("report")),
            &format!("\"{report_url}\""),
        );
    assert!(toml.contains("SECRETTOKENMAIL") && toml.contains("SECRETTOKENREPORT"));
    let config = Arc::new(Config::from_toml(&toml).unwrap());
    let server = Server::start(config, &temp_db("leaks"), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let api = Api::new(server.addr);
    let mut answers = Vec::new();

    // Submit, approve, run: the tool answers 500 → failed.
    let (status, v) = api
        .submit(
            keys::AGENT,
            json!({"tool": "mail.send", "args": {"to": "ops@example.com"}}),
        )
        .await;
    assert_eq!(status, 202, "{v}");
    let mail = v["id"].as_str().unwrap().to_owned();
    answers.push(v.clone());
    let (status, v) = api
        .approve(&mail, v["approval"]["context_digest"].as_str().unwrap())
        .await;
    assert_eq!(status, 200, "{v}");
    answers.push(v);
    // A scheduled retry tool whose target is down: three attempts, two retry warnings, failed.
    let (status, v) = api
        .submit(
            keys::AGENT,
            json!({"tool": "report.build", "args": {},
                   "schedule": {"not_before": in_secs(0), "not_after": in_secs(60)}}),
        )
        .await;
    assert_eq!(status, 201, "{v}");
    let report = v["id"].as_str().unwrap().to_owned();
    answers.push(v);
    for id in [&mail, &report] {
        let sealed = api.wait_sealed(id, 30).await;
        assert_eq!(sealed["state"], "failed", "{sealed}");
        answers.push(sealed);
        answers.push(
            api.get(&format!("/v1/actions/{id}/events"), keys::ADMIN)
                .await
                .1,
        );
    }
    answers.push(api.get("/v1/actions", keys::APPROVER).await.1);
    assert_eq!(
        answers[3]["outcome"]["error"]["status"], 500,
        "{}",
        answers[3]
    );
    assert_eq!(
        answers[5]["outcome"]["error"]["kind"], "unreachable",
        "{}",
        answers[5]
    );

    let logs = String::from_utf8(LOGS.lock().unwrap().clone()).unwrap();
    assert!(
        logs.contains(&report) && logs.contains("retrying"),
        "the flow was logged"
    );
    let answers = serde_json::to_string(&answers).unwrap();
    let secrets = [
        keys::AGENT,
        keys::APPROVER,
        keys::ADMIN,
        countersign_tests::SECRET,
        "SECRETTOKENMAIL",
        "SECRETTOKENREPORT",
        "hunter2",
        "swordfish",
        mail_url.as_str(),
        report_url.as_str(),
    ];
    for secret in secrets {
        assert!(
            !answers.contains(secret),
            "an answer or stored outcome holds {secret}"
        );
        assert!(!logs.contains(secret), "the logs hold {secret}");
    }
}

/// Caught on main before the fix: any `http://` target and any address were called, the cloud
/// metadata endpoint included. A name is checked when it resolves, so a host that passes the
/// config (it is not an address) but resolves inward is refused at connection time.
#[tokio::test]
async fn sc_sec_08_webhook_target_refused_at_connection_and_redirects_not_followed() {
    let tools = ToolServer::start().await;
    // search.web by name; the tenant allows it http, but not a private address.
    let toml = config_toml(&tools, "10s", "5s")
        .replace(
            &format!("\"{}\"", tools.url("search")),
            &format!("\"http://localhost:{}/search\"", tools.addr.port()),
        )
        .replace(
            "allow_http_hosts = [\"127.0.0.1\"]",
            "allow_http_hosts = [\"127.0.0.1\", \"localhost\"]",
        )
        + &format!(
            "[tenants.acme.tools.\"search.mcp\"]\nexecutor = \"mcp\"\nurl = \"{}\"\nsecret_env = \"{}\"\n",
            tools.url("mcp"),
            countersign_tests::SECRET_ENV
        );
    let config = Arc::new(Config::from_toml(&toml).expect("a name passes the config"));
    let server = Server::start(config, &temp_db("targets"), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let api = Api::new(server.addr);
    let (status, v) = api
        .submit(
            keys::AGENT,
            json!({"tool": "search.web", "args": {"q": "x"}}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let v = api.wait_sealed(v["id"].as_str().unwrap(), 10).await;
    assert_eq!(v["state"], "failed", "{v}");
    assert_eq!(v["outcome"]["error"], json!({"kind": "target_refused"}));
    assert!(tools.received().is_empty(), "nothing reached the tool");

    // A redirect is the tool's answer, never followed: mail.send's target answers 307.
    tools.behave(Behaviour {
        status: 307,
        location: Some(tools.url("elsewhere")),
        ..Behaviour::default()
    });
    let (_, v) = api
        .submit(keys::AGENT, json!({"tool": "mail.send", "args": {}}))
        .await;
    let id = v["id"].as_str().unwrap();
    let (status, v) = api
        .approve(id, v["approval"]["context_digest"].as_str().unwrap())
        .await;
    assert_eq!(status, 200, "{v}");
    let sealed = api.wait_sealed(id, 10).await;
    assert_eq!(sealed["state"], "failed", "{sealed}");
    assert_eq!(sealed["outcome"]["error"]["status"], 307);
    // The MCP executor's answer too (issue 28, item 7: every outbound client, one builder).
    let (_, v) = api
        .submit(keys::AGENT, json!({"tool": "search.mcp", "args": {}}))
        .await;
    let sealed = api.wait_sealed(v["id"].as_str().unwrap(), 10).await;
    assert_eq!(sealed["state"], "failed", "{sealed}");
    assert_eq!(sealed["outcome"]["error"]["status"], 307, "{sealed}");
    assert_eq!(
        tools.received().len(),
        2,
        "the redirect target was not called"
    );
}

/// The proxy every child of [`sc_sec_08_proxies_in_the_environment_are_ignored`] is pointed at.
const PROXY_ENV: [&str; 6] = [
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
];

/// Caught on main (issue 28, item 7): reqwest's clients honour `HTTP(S)_PROXY`/`ALL_PROXY`, so
/// with a proxy in the environment the target rules judged the proxy's address — a literal
/// loopback one, never resolved — and the tool's name, resolving inward, was never checked:
/// every call and notification went to the proxy, which reached the host's own network for us.
/// Now the outbound clients use no proxy: the same process, with all six variables pointing at a
/// local proxy, refuses a webhook (http and https), an MCP tool and a notification endpoint whose
/// name resolves to loopback, and the proxy sees no connection. The child is this binary
/// running [`proxied_child_refuses_inward_targets`] with the variables set (they are read when a
/// client is built, and setting them here would reach every other test of this binary).
#[tokio::test]
async fn sc_sec_08_proxies_in_the_environment_are_ignored() {
    let proxy = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let proxy_url = format!("http://{}", proxy.local_addr().unwrap());
    let reached = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = reached.clone();
    tokio::spawn(async move {
        while let Ok((conn, _)) = proxy.accept().await {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            drop(conn);
        }
    });
    let mut child = std::process::Command::new(std::env::current_exe().unwrap());
    child.args([
        "--exact",
        "proxied_child_refuses_inward_targets",
        "--ignored",
        "--nocapture",
    ]);
    for name in PROXY_ENV {
        child.env(name, &proxy_url);
    }
    // The child's own API client (reqwest too) reaches its server directly; the tools' and
    // endpoints' URLs name `localhost`, which this does not cover.
    child
        .env("NO_PROXY", "127.0.0.1")
        .env("no_proxy", "127.0.0.1");
    let out = tokio::task::spawn_blocking(move || child.output().unwrap())
        .await
        .unwrap();
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("1 passed"),
        "the child failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        reached.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "no request reached the proxy"
    );
}

/// The child of [`sc_sec_08_proxies_in_the_environment_are_ignored`] (run only by it).
#[tokio::test]
#[ignore = "run by sc_sec_08_proxies_in_the_environment_are_ignored with a proxy in its environment"]
async fn proxied_child_refuses_inward_targets() {
    assert!(
        PROXY_ENV.iter().all(|name| std::env::var(name).is_ok()),
        "run by its parent, with a proxy in the environment"
    );
    let tools = ToolServer::start().await;
    let port = tools.addr.port();
    let toml = config_toml(&tools, "10s", "5s")
        .replace(
            &format!("\"{}\"", tools.url("search")),
            &format!("\"http://localhost:{port}/search\""),
        )
        .replace(
            "allow_http_hosts = [\"127.0.0.1\"]",
            "allow_http_hosts = [\"127.0.0.1\", \"localhost\"]",
        )
        + &format!(
            "
[tenants.acme.tools.\"search.tls\"]
executor = \"webhook\"
url = \"https://localhost:{port}/search\"
secret_env = \"{secret}\"

[tenants.acme.tools.\"search.mcp\"]
executor = \"mcp\"
url = \"https://localhost:{port}/mcp\"
secret_env = \"{secret}\"
",
            secret = countersign_tests::SECRET_ENV
        )
        + &countersign_tests::receiver::notify_toml(
            &format!("https://localhost:{port}/hook"),
            "100ms",
            1,
        );
    let config = Arc::new(Config::from_toml(&toml).expect("names pass the config"));
    let server = Server::start(config, &temp_db("proxied"), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let api = Api::new(server.addr);
    for tool in ["search.web", "search.tls", "search.mcp"] {
        let (status, v) = api
            .submit(keys::AGENT, json!({"tool": tool, "args": {"q": "x"}}))
            .await;
        assert_eq!(status, 200, "{tool}: {v}");
        let v = api.wait_sealed(v["id"].as_str().unwrap(), 10).await;
        assert_eq!(
            v["outcome"]["error"],
            json!({"kind": "target_refused"}),
            "{tool}: {v}"
        );
    }
    // Each sealing notified the endpoint: one try each (`attempts = 1`), then a dead letter.
    let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let dead = loop {
        let (_, dead) = api.get("/v1/notifications/dead", keys::ADMIN).await;
        if dead["data"].as_array().unwrap().len() == 3 {
            break dead;
        }
        assert!(std::time::Instant::now() < until, "parked: {dead}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    for letter in dead["data"].as_array().unwrap() {
        assert_eq!(letter["last_error"], "target_refused", "{dead}");
    }
    assert!(tools.received().is_empty(), "nothing reached the tools");
    server.shutdown().await.unwrap();
}

/// Caught on main before the fix: no per-key limit existed, so one key (or one tenant) could
/// take the whole capacity. A key's bucket and its tenant's bucket both apply; another tenant's
/// bucket is untouched. Refill is one per 1000 s here, so timing cannot blur the counts.
#[tokio::test]
async fn sc_sec_04_rate_limits_per_key_and_per_tenant_answer_429_with_retry_after() {
    let tools = ToolServer::start().await;
    let toml = config_toml(&tools, "10s", "5s")
        .replace("rate_per_key = 1000000", "rate_per_key = 0.001")
        .replace("burst_per_key = 1000000", "burst_per_key = 5")
        .replace("rate_per_tenant = 1000000", "rate_per_tenant = 0.001")
        .replace("burst_per_tenant = 1000000", "burst_per_tenant = 8");
    let config = Arc::new(Config::from_toml(&toml).unwrap());
    let server = Server::start(config, &temp_db("rates"), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let api = Api::new(server.addr);
    let get = |key: &'static str| {
        let api = api.clone();
        async move {
            api.send(reqwest::Method::GET, "/v1/actions", Some(key), None, &[])
                .await
        }
    };
    // agent-1: its burst of 5, then 429 with Retry-After.
    for _ in 0..5 {
        assert_eq!(get(keys::AGENT).await.0, 200);
    }
    let (status, v, headers) = get(keys::AGENT).await;
    assert_eq!(
        (status, v["error"]["code"].as_str()),
        (429, Some("rate_limited"))
    );
    let retry_after: u64 = headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=1000).contains(&retry_after), "{retry_after}");
    // agent-2 has its own bucket, but the tenant's (8) runs out after 3 more.
    for _ in 0..3 {
        assert_eq!(get(keys::AGENT_2).await.0, 200);
    }
    let (status, v, headers) = get(keys::AGENT_2).await;
    assert_eq!(
        (status, v["error"]["code"].as_str()),
        (429, Some("rate_limited"))
    );
    assert!(headers.contains_key("retry-after"));
    assert_eq!(
        get(keys::ADMIN).await.0,
        429,
        "the whole tenant is at its limit"
    );
    // Another tenant is untouched.
    for _ in 0..5 {
        assert_eq!(get(keys::OTHER_TENANT_AGENT).await.0, 200);
    }
    // Unauthenticated requests spend nothing from anyone's bucket: they are refused first.
    assert_eq!(get("not-a-key").await.0, 401);
}

/// Which id a matrix call names.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Which {
    Own,
    Other,
    Missing,
}

const MISSING_ACTION: &str = "act_00000000000000000000000000";

/// One matrix call: a fresh own action for every call that names one (calls change state).
async fn matrix_call(
    api: &Api,
    method: &str,
    route: &str,
    key: Option<&str>,
    which: Which,
    other_action: &str,
) -> (u16, Value) {
    let mut digest = String::new();
    let id = match (route.contains("{id}"), route.contains("{scope}"), which) {
        (true, _, Which::Own) if route.starts_with("/v1/actions") => {
            let (_, v) = api
                .submit(keys::AGENT, json!({"tool": "mail.send", "args": {}}))
                .await;
            digest = v["approval"]["context_digest"].as_str().unwrap().to_owned();
            v["id"].as_str().unwrap().to_owned()
        }
        (true, _, Which::Own) if route.starts_with("/v1/grants") => {
            // A grant of the tenant's: an approval of a fresh call that grants one, pinned
            // to an argument no other call of the matrix sends.
            let n = ulid::Ulid::new().to_string();
            let (_, v) = api
                .submit(keys::AGENT, json!({"tool": "mail.send", "args": {"n": n}}))
                .await;
            let id = v["id"].as_str().unwrap();
            let digest = &v["approval"]["context_digest"];
            let body = json!({"context_digest": digest, "grant": {"pin": ["n"]}});
            let (s, approved) = api
                .post(&format!("/v1/actions/{id}/approve"), keys::APPROVER, body)
                .await;
            assert_eq!(s, 200, "{approved}");
            approved["grant"]["id"].as_str().unwrap().to_owned()
        }
        (true, _, Which::Other) if route.starts_with("/v1/actions") => other_action.to_owned(),
        (true, _, _) if route.starts_with("/v1/actions") => MISSING_ACTION.to_owned(),
        (true, _, _) => "ntf_missing".to_owned(),
        (_, true, Which::Own) => {
            let scope = format!("agent-{}", ulid::Ulid::new());
            let (s, _) = api
                .post("/v1/stops", keys::ADMIN, json!({"agent_id": scope}))
                .await;
            assert_eq!(s, 201);
            scope
        }
        (_, true, _) => "nobody-stopped".to_owned(),
        _ => String::new(),
    };
    let path = route.replace("{id}", &id).replace("{scope}", &id);
    let body = match (method, route) {
        ("POST", "/v1/actions") => Some(json!({"tool": "mail.send", "args": {}})),
        ("POST", r) if r.ends_with("/approve") => Some(json!({"context_digest": digest})),
        ("POST", r) if r.ends_with("/deny") => Some(json!({"reason": "matrix"})),
        ("POST", "/v1/stops") => Some(json!({"agent_id": "matrix-agent"})),
        ("POST", "/v1/policy/explain") => Some(json!({"tool": "mail.send", "agent_id": "agent-1"})),
        ("POST", _) => Some(json!({})),
        _ => None,
    };
    let (status, v, _) = api
        .send(
            method.parse().unwrap(),
            &path,
            key,
            body.map(|b| b.to_string().into_bytes()),
            &[],
        )
        .await;
    (status, v)
}

/// Caught by nothing on main (no such test existed): every route of `api::ROUTES` × every role
/// (and no key) × own, other tenant's and missing id, over real HTTP. Another tenant's id
/// answers exactly — status and body — as a missing one. A route added to ROUTES without a row
/// here fails the test.
#[tokio::test]
async fn sc_sec_01_tenant_role_route_matrix() {
    let w = world().await;
    let (s, other) = w
        .api
        .submit(
            keys::OTHER_TENANT_AGENT,
            json!({"tool": "mail.send", "args": {}}),
        )
        .await;
    assert_eq!(s, 202, "{other}");
    let other = other["id"].as_str().unwrap().to_owned();
    let roles: [Option<&str>; 5] = [
        Some(keys::AGENT),
        Some(keys::AGENT_2),
        Some(keys::APPROVER),
        Some(keys::ADMIN),
        None,
    ];
    // Expected status per role (agent-1 = the submitter, agent-2 = another agent of the
    // tenant, approver, admin, no key),
    // for the own id and for a missing one; `0` = any non-404, non-5xx answer.
    let expected = |method: &str, route: &str| -> Option<([u16; 5], [u16; 5])> {
        Some(match (method, route) {
            ("POST", "/v1/actions") => ([202, 202, 403, 403, 401], [202, 202, 403, 403, 401]),
            ("GET", "/v1/actions") => ([200, 200, 200, 200, 401], [200, 200, 200, 200, 401]),
            // agent-2 reads only its own: agent-1's action is missing to it (issue 28, item 6).
            ("GET", "/v1/actions/{id}") | ("GET", "/v1/actions/{id}/events") => {
                ([200, 404, 200, 200, 401], [404, 404, 404, 404, 401])
            }
            ("GET", "/v1/actions/{id}/deed") => ([0, 404, 0, 0, 401], [404, 404, 404, 404, 401]),
            ("POST", "/v1/actions/{id}/approve") | ("POST", "/v1/actions/{id}/deny") => {
                ([403, 403, 200, 403, 401], [403, 403, 404, 403, 401])
            }
            // A batch of decisions names its actions in the body: the missing id is answered in
            // its entry (decisions.rs, SC-GR-20); here the role gate, with `{}` a 400 shape error.
            ("POST", "/v1/decisions") => ([403, 403, 400, 403, 401], [403, 403, 400, 403, 401]),
            ("POST", "/v1/actions/{id}/cancel") => {
                ([200, 404, 200, 200, 401], [404, 404, 404, 404, 401])
            }
            ("POST", "/v1/stops") => ([403, 403, 403, 201, 401], [403, 403, 403, 201, 401]),
            ("DELETE", "/v1/stops/{scope}") => {
                ([403, 403, 403, 204, 401], [403, 403, 403, 404, 401])
            }
            ("GET", "/v1/quarantine") => ([403, 403, 403, 200, 401], [403, 403, 403, 200, 401]),
            // Who the key is: every key may ask (issue 16).
            ("GET", "/v1/me") => ([200, 200, 200, 200, 401], [200, 200, 200, 200, 401]),
            ("POST", "/v1/policy/explain") => {
                ([403, 403, 403, 200, 401], [403, 403, 403, 200, 401])
            }
            ("GET", "/v1/insights") => ([403, 403, 403, 200, 401], [403, 403, 403, 200, 401]),
            ("GET", "/v1/notifications/dead") => {
                ([403, 403, 403, 200, 401], [403, 403, 403, 200, 401])
            }
            // Scoped grants: approvers and admins list and revoke; revoking a revoked grant
            // answers it as it stands (grants.rs).
            ("GET", "/v1/grants") => ([403, 403, 200, 200, 401], [403, 403, 200, 200, 401]),
            ("DELETE", "/v1/grants/{id}") => ([403, 403, 200, 200, 401], [403, 403, 404, 404, 401]),
            // No dead letter exists to own here: role gating and the missing id only.
            ("POST", "/v1/notifications/{id}/redeliver") => {
                ([403, 403, 403, 404, 401], [403, 403, 403, 404, 401])
            }
            // MCP takes agent keys only; `{}` is no JSON-RPC request. Task ids: SC-MCP-07 (mcp.rs).
            ("POST", "/mcp") => ([400, 400, 403, 403, 401], [400, 400, 403, 403, 401]),
            // The API's own description is public, the same for everyone (openapi.rs).
            ("GET", "/openapi.json") => ([200; 5], [200; 5]),
            // The OAuth protected resource metadata is public too (identity.rs, SC-ID-01).
            ("GET", r) if r.starts_with("/.well-known/oauth-protected-resource") => {
                ([200; 5], [200; 5])
            }
            // An approval mail's confirmation page answers to its signed link, not to a key
            // (email.rs: altered 403, expired 410, reused 409, GET/HEAD change nothing).
            (_, "/ui/email/confirm") => return None,
            // Slack's interactions answer to Slack's signature, not to a key (slack.rs:
            // forged, stale, altered → 401).
            ("POST", "/v1/slack/interactions") => return None,
            // The approver page is public static files (approver_page.rs holds them).
            ("GET", r) if r.starts_with("/ui/") => return None,
            _ => panic!("{method} {route} has no row in the SC-SEC-01 matrix: add one"),
        })
    };
    let mut calls = 0;
    for (method, route, _) in countersign::api::ROUTES {
        let Some((own, missing)) = expected(method, route) else {
            continue;
        };
        for (r, key) in roles.iter().enumerate() {
            let (status, v) = matrix_call(&w.api, method, route, *key, Which::Own, &other).await;
            let want = own[r];
            if want == 0 {
                assert!(
                    status != 404 && status < 500,
                    "{method} {route} {key:?}: {status} {v}"
                );
            } else {
                assert_eq!(status, want, "{method} {route} as {key:?}, own: {v}");
            }
            let (m_status, m_body) =
                matrix_call(&w.api, method, route, *key, Which::Missing, &other).await;
            assert_eq!(
                m_status, missing[r],
                "{method} {route} as {key:?}, missing: {m_body}"
            );
            let (o_status, o_body) =
                matrix_call(&w.api, method, route, *key, Which::Other, &other).await;
            if route.contains("{id}") && route.starts_with("/v1/actions") {
                assert_eq!(
                    (o_status, &o_body),
                    (m_status, &m_body),
                    "{method} {route} as {key:?}: another tenant's id answers as a missing one"
                );
                if *key == Some(keys::AGENT_2) {
                    assert_eq!(
                        (status, &v),
                        (m_status, &m_body),
                        "{method} {route}: another agent's id answers agent-2 as a missing one"
                    );
                }
            }
            calls += 3;
        }
    }
    assert!(calls >= 3 * 5 * 12, "{calls} calls");
    // The other tenant's action was never touched.
    let (_, v) = w
        .api
        .get(&format!("/v1/actions/{other}"), keys::OTHER_TENANT_APPROVER)
        .await;
    assert_eq!(
        (v["state"].as_str(), v["version"].as_u64()),
        (Some("pending_approval"), Some(1))
    );
}

/// One JSON-RPC request to `/mcp` with `key`: 2025-11-25 (plain), or 2026-07-28 (`_meta` and
/// the mirrored headers) when `modern`.
async fn mcp(api: &Api, key: &str, modern: bool, method: &str, mut params: Value) -> Value {
    let auth = format!("Bearer {key}");
    let mut headers = vec![("authorization", auth.clone())];
    if modern {
        params["_meta"] = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28"});
        headers.push(("mcp-protocol-version", "2026-07-28".into()));
        headers.push(("mcp-method", method.into()));
        let name = params.get("taskId").or_else(|| params.get("name"));
        if let Some(name) = name.and_then(Value::as_str) {
            headers.push(("mcp-name", name.to_owned()));
        }
    }
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (status, v, _) = api
        .send(
            reqwest::Method::POST,
            "/mcp",
            None,
            Some(body.to_string().into_bytes()),
            &headers,
        )
        .await;
    json!({"status": status, "body": v})
}

/// What `key` learns of action `id` on every endpoint that names one — the API's get, events,
/// deed and cancel; MCP's tasks/get, tasks/result, tasks/update, tasks/cancel and
/// `countersign_status` in both revisions — with the id written `ID`, so the answers for two
/// ids compare.
async fn what_a_key_learns(api: &Api, key: &str, id: &str) -> Vec<(String, Value)> {
    let mut learned = Vec::new();
    for (method, path) in [
        ("GET", "/v1/actions/ID"),
        ("GET", "/v1/actions/ID/events"),
        ("GET", "/v1/actions/ID/deed"),
        ("POST", "/v1/actions/ID/cancel"),
    ] {
        let (status, v, _) = api
            .send(
                method.parse().unwrap(),
                &path.replace("ID", id),
                Some(key),
                (method == "POST").then(|| b"{}".to_vec()),
                &[],
            )
            .await;
        learned.push((
            format!("{method} {path}"),
            json!({"status": status, "body": v}),
        ));
    }
    let task = json!({"taskId": id});
    let status = json!({"name": "countersign_status", "arguments": {"action_id": id}});
    for (modern, method, params) in [
        (false, "tasks/get", &task),
        (false, "tasks/result", &task),
        (false, "tasks/cancel", &task),
        (false, "tools/call", &status),
        (true, "tasks/get", &task),
        (true, "tasks/update", &task),
        (true, "tasks/cancel", &task),
        (true, "tools/call", &status),
    ] {
        let v = mcp(api, key, modern, method, params.clone()).await;
        learned.push((format!("mcp {method} modern={modern}"), v));
    }
    let text = serde_json::to_string(&learned).unwrap().replace(id, "ID");
    serde_json::from_str(&text).unwrap()
}

/// The ids of every action `key` lists with `query` (paging to the end).
async fn listed(api: &Api, key: &str, query: &str) -> Vec<String> {
    let mut ids = Vec::new();
    let mut path = format!("/v1/actions?limit=100{query}");
    loop {
        let (status, page) = api.get(&path, key).await;
        assert_eq!(status, 200, "{path}: {page}");
        let data = page["data"].as_array().unwrap();
        ids.extend(data.iter().map(|a| a["id"].as_str().unwrap().to_owned()));
        match page["next_cursor"].as_str() {
            Some(c) => path = format!("/v1/actions?limit=100{query}&cursor={c}"),
            None => return ids,
        }
    }
}

/// Caught on main before the fix (issue 28, item 6): MCP's `tasks/get` hid another agent's task,
/// but the same key read it whole, arguments included, at `GET /v1/actions/{id}` — and its
/// events, its deed, and every one of the tenant's actions in `GET /v1/actions`; its cancel
/// answered 403 (so the id exists). An agent key reads only its own actions, on every endpoint:
/// another agent's — pending, sealed or quarantined — answers exactly as a missing one.
/// Approver and admin keys read the tenant's. SC-SEC-01, SC-MCP-07.
async fn an_agent_reads_only_its_own_actions(backend: Backend) {
    let tools = ToolServer::start().await;
    let toml = config_toml(&tools, "10s", "5s").replacen(
        "[limits]\n",
        "[limits]\nrequest_budget = \"2s\"\n",
        1,
    );
    let config = Arc::new(
        Config::from_toml(&toml)
            .and_then(Config::read_keys)
            .unwrap(),
    );
    let place = Place::fresh(backend, "isolation").await;
    let server = place.serve(config).await;
    let api = Api::new(server.addr);
    let submit = |key: &'static str, tool: &'static str| {
        let api = api.clone();
        async move {
            let (s, v) = api
                .submit(key, json!({"tool": tool, "args": {"secret": "agent-1's"}}))
                .await;
            assert!(s == 200 || s == 202, "{tool}: {v}");
            v["id"].as_str().unwrap().to_owned()
        }
    };
    let pending = submit(keys::AGENT, "mail.send").await;
    let sealed = submit(keys::AGENT, "sandbox.echo").await;
    let broken = submit(keys::AGENT, "mail.send").await;
    let own_2 = submit(keys::AGENT_2, "mail.send").await;
    place.make_unreadable(&broken).await;
    let missing = "act_01ARZ3NDEKTSV4RRFFQ69G5FAV";

    let as_missing = what_a_key_learns(&api, keys::AGENT_2, missing).await;
    assert_eq!(as_missing[0].1["status"], 404, "{as_missing:?}");
    for id in [&pending, &sealed, &broken] {
        let learned = what_a_key_learns(&api, keys::AGENT_2, id).await;
        for (said, missing_said) in learned.iter().zip(&as_missing) {
            assert_eq!(said, missing_said, "agent-2 about agent-1's {id}");
        }
    }
    // Whose a record that does not load is cannot be read: to an agent key it is missing.
    let learned = what_a_key_learns(&api, keys::AGENT, &broken).await;
    assert_eq!(learned, what_a_key_learns(&api, keys::AGENT, missing).await);

    // Lists: an agent's are its own, whatever it filters by.
    assert_eq!(listed(&api, keys::AGENT_2, "").await, [own_2.as_str()]);
    assert_eq!(
        listed(&api, keys::AGENT_2, "&state=pending_approval").await,
        [own_2.as_str()]
    );
    assert!(listed(&api, keys::AGENT_2, "&agent_id=agent-1")
        .await
        .is_empty());
    let tasks = mcp(&api, keys::AGENT_2, false, "tasks/list", json!({})).await;
    let tasks: Vec<_> = tasks["body"]["result"]["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["taskId"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(tasks, [own_2.as_str()]);
    assert_eq!(
        listed(&api, keys::AGENT, "").await,
        [sealed.as_str(), pending.as_str()]
    );

    // Nothing changed, and the owner, approvers and admins read it whole.
    for key in [keys::AGENT, keys::APPROVER, keys::ADMIN] {
        let (status, v) = api.get(&format!("/v1/actions/{pending}"), key).await;
        assert_eq!((status, v["version"].as_u64()), (200, Some(1)), "{v}");
        assert_eq!(v["args"]["secret"], "agent-1's");
        let (status, _) = api.get(&format!("/v1/actions/{sealed}/deed"), key).await;
        assert_eq!(status, 200);
        let (status, _) = api.get(&format!("/v1/actions/{sealed}/events"), key).await;
        assert_eq!(status, 200);
    }
    for key in [keys::APPROVER, keys::ADMIN] {
        let all = listed(&api, key, "").await;
        assert!(all.contains(&pending) && all.contains(&own_2), "{all:?}");
    }
    let (status, v) = api.cancel(&pending, keys::AGENT).await;
    assert_eq!(
        (status, v["state"].as_str()),
        (200, Some("cancelled")),
        "{v}"
    );
    server.shutdown().await.unwrap();
}
on_every_store!(an_agent_reads_only_its_own_actions: sc_sec_01_an_agent_reads_only_its_own_actions_sqlite, sc_sec_01_an_agent_reads_only_its_own_actions_dynamodb, sc_sec_01_an_agent_reads_only_its_own_actions_postgres);
