//! Approval by mail (SC-CH-10 … SC-CH-13), end to end on the local server over each store: a real
//! SMTP server (PyPI aiosmtpd, pinned in scripts/email-deps.sh) that requires STARTTLS with the
//! test's own CA and AUTH, saving each message it takes; the mails parsed as MIME by a library of
//! their own (mailparse); the link opened in headless Chromium (Playwright) and confirmed; link
//! scanners, reused, altered and expired links changing nothing; SMTP down delaying only mail.
//!
//! Needs `source scripts/email-deps.sh` (scripts/test.sh does it).

use countersign::{config::Config, domain::email_link::Link};
use countersign_tests::{
    config_toml, keys, on_every_store,
    receiver::{notify_toml, Mode, Receiver},
    stores::{Backend, Place},
    Api, ToolServer,
};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::{
    io::{BufRead, BufReader},
    path::PathBuf,
    process::{Child, Command, Stdio},
    sync::Arc,
    time::{Duration, Instant},
};

const LINK_SECRET_ENV: &str = "COUNTERSIGN_TEST_LINK_SECRET";
const LINK_SECRET: &str = "a-link-key-of-at-least-32-bytes-for-tests";
const SMTP_USER: &str = "countersign";
/// Sent percent-encoded in the URL, as an SES SMTP password with `/` and `+` must be.
const SMTP_PASSWORD: &str = "p/ss+word";
/// A second approver, with an address, beside the rig's approver-1.
const APPROVER_2: &str = "key-approver-2-email";

/// The SMTP server of one test: its port, its CA, the folder it saves to; started on demand.
struct Smtp {
    port: u16,
    dir: PathBuf,
    ca: PathBuf,
    cert: PathBuf,
    key: PathBuf,
    child: Option<Child>,
}

impl Smtp {
    /// A free port, a CA of the test's own and a certificate it signs for `localhost`.
    fn prepare(label: &str) -> Smtp {
        let dir =
            std::env::temp_dir().join(format!("countersign-email-{label}-{}", ulid::Ulid::new()));
        std::fs::create_dir_all(dir.join("mail")).unwrap();
        let ca_key = KeyPair::generate().unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "countersign email test CA");
        let ca_pem = ca_params.self_signed(&ca_key).unwrap().pem();
        let key = KeyPair::generate().unwrap();
        let issuer = Issuer::from_params(&ca_params, &ca_key);
        let cert = CertificateParams::new(vec!["localhost".to_owned()])
            .unwrap()
            .signed_by(&key, &issuer)
            .unwrap();
        let (ca, cert_file, key_file) = (
            dir.join("ca.pem"),
            dir.join("cert.pem"),
            dir.join("key.pem"),
        );
        std::fs::write(&ca, ca_pem).unwrap();
        std::fs::write(&cert_file, cert.pem()).unwrap();
        std::fs::write(&key_file, key.serialize_pem()).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        Smtp {
            port,
            dir,
            ca,
            cert: cert_file,
            key: key_file,
            child: None,
        }
    }

    /// aiosmtpd on the port, answering once it accepts connections.
    fn start(&mut self) {
        let python = std::env::var("COUNTERSIGN_EMAIL_PYTHON").unwrap_or_else(|_| {
            format!(
                "{}/.cache/countersign/email/venv/bin/python",
                std::env::var("HOME").unwrap()
            )
        });
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/email/smtp_server.py");
        let mut child = Command::new(&python)
            .arg(script)
            .args([
                "--port",
                &self.port.to_string(),
                "--user",
                SMTP_USER,
                "--password",
                SMTP_PASSWORD,
            ])
            .arg("--dir")
            .arg(self.dir.join("mail"))
            .arg("--cert")
            .arg(&self.cert)
            .arg("--key")
            .arg(&self.key)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("{python} does not start ({e}): source scripts/email-deps.sh")
            });
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line.trim(), "ready", "the SMTP server did not start");
        self.child = Some(child);
    }

    /// The environment variable holding this server's URL (one per test: tests run at once).
    fn url_env(&self) -> String {
        let env = format!("COUNTERSIGN_TEST_SMTP_URL_{}", self.port);
        let password = SMTP_PASSWORD.replace('/', "%2F").replace('+', "%2B");
        std::env::set_var(
            &env,
            format!("smtp://{SMTP_USER}:{password}@localhost:{}", self.port),
        );
        env
    }

    /// The messages taken so far, in order: (envelope, raw bytes).
    fn mails(&self) -> Vec<(Value, Vec<u8>)> {
        let mut names: Vec<_> = std::fs::read_dir(self.dir.join("mail"))
            .unwrap()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "eml"))
            .collect();
        names.sort();
        names
            .into_iter()
            .map(|eml| {
                let meta = std::fs::read(eml.with_extension("json")).unwrap();
                (
                    serde_json::from_slice(&meta).unwrap(),
                    std::fs::read(&eml).unwrap(),
                )
            })
            .collect()
    }

    /// Poll until `n` messages were taken (or a minute passes).
    async fn wait_mails(&self, n: usize) -> Vec<(Value, Vec<u8>)> {
        let until = Instant::now() + Duration::from_secs(60);
        loop {
            let mails = self.mails();
            if mails.len() >= n || Instant::now() > until {
                return mails;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Smtp {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn hash(key: &str) -> String {
    hex::encode(Sha256::digest(key.as_bytes()))
}

/// What each test here starts from: the tool server, the SMTP server (up, or not yet), a fresh
/// place for the records.
struct World {
    tools: ToolServer,
    smtp: Smtp,
    place: Place,
}

impl World {
    async fn new(backend: Backend, label: &str, smtp_up: bool) -> World {
        let tools = ToolServer::start().await;
        let mut smtp = Smtp::prepare(label);
        if smtp_up {
            smtp.start();
        }
        let place = Place::fresh(backend, &format!("email-{label}")).await;
        World { tools, smtp, place }
    }

    /// The local server over the place, with the config `text`.
    async fn serve(&self, text: &str) -> (countersign::boot::embedded::Server, Api) {
        let server = self
            .place
            .serve(Arc::new(Config::from_toml(text).unwrap()))
            .await;
        let api = Api::new(server.addr);
        (server, api)
    }
}

/// The rig's config with addresses on approver-1 and a second approver, mail through `smtp`.
fn config_text(tools: &ToolServer, smtp: &Smtp, extra: &str) -> String {
    std::env::set_var(LINK_SECRET_ENV, LINK_SECRET);
    let approver_1 = format!("sha256 = \"{}\" }}", hash(keys::APPROVER));
    let text = config_toml(tools, "30s", "2s").replacen(
        &approver_1,
        &format!(
            "sha256 = \"{}\", email = \"approver-1@example.test\" }},\n  {{ id = \"approver-2\", role = \"approver\", sha256 = \"{}\", email = \"Approver Two <approver-2@example.test>\" }}",
            hash(keys::APPROVER),
            hash(APPROVER_2)
        ),
        1,
    );
    assert!(
        text.contains("approver-2@example.test"),
        "the rig's approver key moved"
    );
    format!(
        "{text}{extra}\n[tenants.acme.email]\nsmtp_url_env = \"{}\"\nfrom = \"countersign <approvals@example.test>\"\nlink_secret_env = \"{LINK_SECRET_ENV}\"\nca_file = \"{}\"\n",
        smtp.url_env(),
        smtp.ca.display()
    )
}

/// One mail, parsed: who it went to, its Message-ID, the two parts, the link in each.
struct Mail {
    rcpt: Vec<String>,
    message_id: String,
    text: String,
    html: String,
    link: String,
}

fn parse(meta: &Value, raw: &[u8]) -> Mail {
    assert_eq!(
        (meta["tls"].as_bool(), meta["authenticated"].as_bool()),
        (Some(true), Some(true)),
        "{meta}"
    );
    let parsed = mailparse::parse_mail(raw).unwrap();
    assert_eq!(parsed.ctype.mimetype, "multipart/alternative");
    let [text, html] = &parsed.subparts[..] else {
        panic!("two parts: {:?}", parsed.subparts.len())
    };
    assert_eq!(
        (text.ctype.mimetype.as_str(), html.ctype.mimetype.as_str()),
        ("text/plain", "text/html")
    );
    let (text, html) = (text.get_body().unwrap(), html.get_body().unwrap());
    let link = |s: &str, end: char| {
        let start = s
            .find("http://localhost")
            .or_else(|| s.find("http://127.0.0.1"))
            .expect("a link");
        s[start..].split(end).next().unwrap().trim().to_owned()
    };
    let in_text = link(&text, '\n');
    let in_html = link(&html, '"').replace("&amp;", "&");
    assert_eq!(in_text, in_html, "both parts carry the same link");
    assert!(in_text.contains("/ui/email/confirm?token="), "{in_text}");
    use mailparse::MailHeaderMap;
    Mail {
        rcpt: serde_json::from_value(meta["rcpt_tos"].clone()).unwrap(),
        message_id: parsed.headers.get_first_value("Message-ID").unwrap(),
        text,
        html,
        link: in_text,
    }
}

/// The link's token and what it names (its payload, read without the key).
fn token_of(link: &str) -> (String, Value) {
    let token = link.split("token=").nth(1).unwrap().to_owned();
    let payload = token.split('.').next().unwrap();
    use base64::Engine as _;
    let json = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .unwrap();
    (token, serde_json::from_slice(&json).unwrap())
}

/// Open the link in headless Chromium and press `decision` (`approve`, `deny` with a reason).
fn chromium(link: &str, decision: &str, reason: &str) -> Value {
    let python = std::env::var("COUNTERSIGN_EMAIL_PYTHON").unwrap_or_else(|_| {
        format!(
            "{}/.cache/countersign/email/venv/bin/python",
            std::env::var("HOME").unwrap()
        )
    });
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    let out = Command::new(python)
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/email/confirm.py"))
        .args([link, decision, reason])
        .env("CHROMIUM", chromium)
        .output()
        .expect("the browser script runs: source scripts/email-deps.sh");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// What the action's record says now: its state and its trail's length.
async fn standing(api: &Api, id: &str) -> (String, usize) {
    let (_, action) = api.get(&format!("/v1/actions/{id}"), keys::ADMIN).await;
    let (_, events) = api
        .get(&format!("/v1/actions/{id}/events"), keys::ADMIN)
        .await;
    (
        action["state"].as_str().unwrap().to_owned(),
        events["data"].as_array().unwrap().len(),
    )
}

async fn post_form(http: &reqwest::Client, link: &str, form: &[(&str, &str)]) -> (u16, String) {
    let url = link.split('?').next().unwrap();
    let r = http.post(url).form(form).send().await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

/// SC-CH-10, SC-CH-11: one mail per eligible approver, both parts naming the call; five GETs
/// and five HEADs of a link (a scanner) change nothing; the link opened in Chromium and
/// confirmed runs the call; a deny from another link seals the other call in its words.
async fn a_mailed_link_approves_and_scanners_change_nothing(backend: Backend) {
    let w = World::new(backend, "approve", true).await;
    let (server, api) = w.serve(&config_text(&w.tools, &w.smtp, "")).await;
    let (tools, smtp) = (&w.tools, &w.smtp);

    let args = json!({"to": "ops@example.com", "subject": "deploy <done>"});
    let (s, first) = api
        .submit(keys::AGENT, json!({"tool": "mail.send", "args": args}))
        .await;
    assert_eq!(
        (s, first["state"].as_str()),
        (202, Some("pending_approval")),
        "{first}"
    );
    let first_id = first["id"].as_str().unwrap().to_owned();
    let mails = smtp.wait_mails(2).await;
    assert_eq!(mails.len(), 2, "one mail per eligible approver");
    let mails: Vec<Mail> = mails.iter().map(|(m, raw)| parse(m, raw)).collect();
    let mut to: Vec<_> = mails.iter().flat_map(|m| m.rcpt.clone()).collect();
    to.sort();
    assert_eq!(to, ["approver-1@example.test", "approver-2@example.test"]);
    for m in &mails {
        for part in [&m.text, &m.html] {
            for shown in [
                "mail.send",
                "agent-1",
                "ops@example.com",
                "Approvals needed",
                "Expires",
                "Rule",
                first_id.as_str(),
            ] {
                assert!(part.contains(shown), "{shown} is not in {part}");
            }
        }
        assert!(
            m.text.contains("deploy <done>") && m.html.contains("deploy &lt;done&gt;"),
            "{}",
            m.html
        );
        assert!(
            m.message_id
                .starts_with(&format!("<ntf_{}_1.", &first_id[4..])),
            "{}",
            m.message_id
        );
    }
    let link_of = |approver: &str| {
        mails
            .iter()
            .find(|m| token_of(&m.link).1["p"] == approver)
            .map(|m| m.link.clone())
            .unwrap()
    };
    let (link_1, link_2) = (link_of("approver-1"), link_of("approver-2"));
    assert_eq!(token_of(&link_1).1["a"], first_id.as_str());
    assert_eq!(
        token_of(&link_1).1["d"],
        first["approval"]["context_digest"]
    );

    // A link scanner: five GETs and five HEADs, as corporate mail gateways send.
    let before = standing(&api, &first_id).await;
    let http = reqwest::Client::new();
    for _ in 0..5 {
        let got = http.get(&link_1).send().await.unwrap();
        assert_eq!(got.status(), 200);
        assert_eq!(got.headers()["referrer-policy"], "no-referrer");
        assert!(got.text().await.unwrap().contains("mail.send"));
        let head = http.head(&link_1).send().await.unwrap();
        assert_eq!(head.status(), 200);
    }
    assert_eq!(
        standing(&api, &first_id).await,
        before,
        "opening the link approved nothing"
    );
    assert_eq!(before.0, "pending_approval");

    // A person: the link in Chromium, Approve pressed; the call runs.
    let seen = chromium(&link_1, "approve", "");
    assert_eq!(
        (seen["shown_status"].as_u64(), seen["status"].as_u64()),
        (Some(200), Some(200)),
        "{seen}"
    );
    assert!(
        seen["shown"].as_str().unwrap().contains("ops@example.com"),
        "{seen}"
    );
    assert!(
        seen["result"]
            .as_str()
            .unwrap()
            .contains("Approved by approver-1"),
        "{seen}"
    );
    assert_eq!(seen["console"], json!([]), "the page logged: {seen}");
    let until = Instant::now() + Duration::from_secs(30);
    while standing(&api, &first_id).await.0 != "succeeded" && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(standing(&api, &first_id).await.0, "succeeded");
    assert_eq!(tools.count_for(&first_id), 1, "the call ran once");
    let (_, approved) = api
        .get(&format!("/v1/actions/{first_id}"), keys::ADMIN)
        .await;
    assert_eq!(approved["approval"]["approver"], "approver-1", "{approved}");
    // SC-CH-07: the approving event names the approver and the channel it came through.
    let (_, events) = api
        .get(&format!("/v1/actions/{first_id}/events"), keys::ADMIN)
        .await;
    let approving = events["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| {
            e["to"] == "approved" || (e["from"] == "pending_approval" && e["to"] == "executing")
        })
        .unwrap_or_else(|| panic!("an approving event: {events}"));
    assert_eq!(
        approving["actor"],
        json!({"type": "user", "id": "approver-1", "channel": "email"}),
        "{events}"
    );

    // Another approver's link of the same call, now run: shown, decides nothing.
    let after = standing(&api, &first_id).await;
    let (status, page) = post_form(
        &http,
        &link_2,
        &[("token", &token_of(&link_2).0), ("decision", "approve")],
    )
    .await;
    assert_eq!(status, 409, "{page}");
    assert!(page.contains("no longer waits"), "{page}");

    // A second call, denied from approver-2's link in Chromium, with a reason.
    let (s, second) = api
        .submit(keys::AGENT, json!({"tool": "mail.send", "args": {"n": 2}}))
        .await;
    assert_eq!(s, 202, "{second}");
    let second_id = second["id"].as_str().unwrap().to_owned();
    let mails: Vec<Mail> = smtp.wait_mails(4).await[2..]
        .iter()
        .map(|(m, raw)| parse(m, raw))
        .collect();
    let deny_link = mails
        .iter()
        .find(|m| token_of(&m.link).1["p"] == "approver-2")
        .unwrap()
        .link
        .clone();
    assert_eq!(token_of(&deny_link).1["a"], second_id.as_str());
    let seen = chromium(&deny_link, "deny", "not this week");
    assert_eq!(seen["status"].as_u64(), Some(200), "{seen}");
    let (_, denied) = api
        .get(&format!("/v1/actions/{second_id}"), keys::ADMIN)
        .await;
    assert_eq!(
        (
            denied["state"].as_str(),
            denied["outcome"]["reason"].as_str()
        ),
        (Some("denied"), Some("not this week")),
        "{denied}"
    );
    assert_eq!(
        standing(&api, &first_id).await,
        after,
        "nothing else changed"
    );
    server.shutdown().await.unwrap();
}

on_every_store!(a_mailed_link_approves_and_scanners_change_nothing:
    sc_ch_10_11_mailed_link_approves_and_scanners_change_nothing_sqlite,
    sc_ch_10_11_mailed_link_approves_and_scanners_change_nothing_dynamodb,
    sc_ch_10_11_mailed_link_approves_and_scanners_change_nothing_postgres);

/// SC-CH-12: a reused link answers "already used"; an altered one (signature or payload) and an
/// expired one are refused, on GET and on POST — the record unchanged each time.
async fn reused_altered_and_expired_links_are_refused(backend: Backend) {
    let w = World::new(backend, "refuse", true).await;
    let smtp = &w.smtp;
    // Two approvals needed: approver-1's approval leaves the call waiting, so a reuse is
    // answered by the link, not by a sealed record.
    let text = config_text(&w.tools, smtp, "").replacen(
        "{ tool = \"mail.*\", decision = \"require_approval\" }",
        "{ tool = \"mail.*\", decision = \"require_approval\", approvals = 2 }",
        1,
    );
    assert!(text.contains("approvals = 2"), "the rig's rule moved");
    let (server, api) = w.serve(&text).await;
    let (s, action) = api
        .submit(keys::AGENT, json!({"tool": "mail.send", "args": {"n": 1}}))
        .await;
    assert_eq!(s, 202, "{action}");
    let id = action["id"].as_str().unwrap().to_owned();
    let mails: Vec<Mail> = smtp
        .wait_mails(2)
        .await
        .iter()
        .map(|(m, raw)| parse(m, raw))
        .collect();
    let link = mails
        .iter()
        .find(|m| token_of(&m.link).1["p"] == "approver-1")
        .unwrap()
        .link
        .clone();
    let (token, payload) = token_of(&link);
    let http = reqwest::Client::new();

    // Altered: the signature, or the payload (another approver) under the old signature.
    let (body, signature) = token.split_once('.').unwrap();
    let flipped = format!(
        "{body}.{}{}",
        if signature.starts_with('A') { "B" } else { "A" },
        &signature[1..]
    );
    let mut other = payload.clone();
    other["p"] = json!("approver-2");
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let swapped = format!(
        "{}.{signature}",
        b64.encode(serde_json::to_vec(&other).unwrap())
    );
    // Expired: signed with the tenant's own key, its time past.
    let expired = Link {
        tenant: "acme".into(),
        action_id: id.clone(),
        approver: "approver-1".into(),
        context_digest: payload["d"].as_str().unwrap().into(),
        expires_at: jiff::Timestamp::now().as_second() - 1,
    }
    .sign(LINK_SECRET.as_bytes());
    let before = standing(&api, &id).await;
    for (bad, status, says) in [
        (flipped.as_str(), 403, "not valid"),
        (swapped.as_str(), 403, "not valid"),
        ("garbage", 403, "malformed"),
        (expired.as_str(), 410, "expired"),
    ] {
        let base = link.split('?').next().unwrap();
        let got = http
            .get(base)
            .query(&[("token", bad)])
            .send()
            .await
            .unwrap();
        assert_eq!(got.status().as_u16(), status, "GET {bad}");
        assert!(got.text().await.unwrap().contains(says), "GET {bad}");
        let (s, page) = post_form(&http, &link, &[("token", bad), ("decision", "approve")]).await;
        assert_eq!(
            (s, page.contains(says)),
            (status, true),
            "POST {bad}: {page}"
        );
    }
    assert_eq!(
        standing(&api, &id).await,
        before,
        "refused links changed nothing"
    );

    // Used once, the approval counts; used again, "already used", nothing written.
    let (s, page) = post_form(&http, &link, &[("token", &token), ("decision", "approve")]).await;
    assert_eq!(s, 200, "{page}");
    let once = standing(&api, &id).await;
    assert_eq!(
        once,
        ("pending_approval".into(), before.1 + 1),
        "one approval of two"
    );
    for _ in 0..2 {
        let (s, page) =
            post_form(&http, &link, &[("token", &token), ("decision", "approve")]).await;
        assert_eq!(s, 409, "{page}");
        assert!(page.contains("already used"), "{page}");
        let (s, page) = post_form(
            &http,
            &link,
            &[("token", &token), ("decision", "deny"), ("reason", "no")],
        )
        .await;
        assert_eq!(s, 409, "{page}");
    }
    assert!(http
        .get(&link)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
        .contains("already used"));
    assert_eq!(
        standing(&api, &id).await,
        once,
        "a reused link changed nothing"
    );
    server.shutdown().await.unwrap();
}

on_every_store!(reused_altered_and_expired_links_are_refused:
    sc_ch_12_reused_altered_and_expired_links_are_refused_sqlite,
    sc_ch_12_reused_altered_and_expired_links_are_refused_dynamodb,
    sc_ch_12_reused_altered_and_expired_links_are_refused_postgres);

/// SC-CH-13: SMTP down delays only mail. The webhook endpoint takes its notice at once and once;
/// the mail is retried with the entry's backoff and arrives when the server comes up.
async fn smtp_down_delays_only_mail(backend: Backend) {
    let receiver = Receiver::start(Mode::Up).await;
    let mut w = World::new(backend, "down", false).await;
    let notify = notify_toml(&receiver.url(), "300ms", 1000);
    let (server, api) = w.serve(&config_text(&w.tools, &w.smtp, &notify)).await;
    let (s, action) = api
        .submit(keys::AGENT, json!({"tool": "mail.send", "args": {"n": 1}}))
        .await;
    assert_eq!(s, 202, "{action}");
    let id = action["id"].as_str().unwrap();
    let notice = format!("ntf_{}_1", &id[4..]);
    assert!(
        receiver.wait_taken(std::slice::from_ref(&notice), 30).await,
        "the webhook is not held up by SMTP"
    );
    // Let the mail fail a few more tries (every 300 ms) while the webhook is done.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (_, dead) = api.get("/v1/notifications/dead", keys::ADMIN).await;
    assert_eq!(dead["data"], json!([]), "retrying, not parked");
    assert!(w.smtp.mails().is_empty());
    w.smtp.start();
    let mails = w.smtp.wait_mails(2).await;
    assert_eq!(mails.len(), 2, "the mails arrive once SMTP is up");
    assert_eq!(
        receiver.taken(&notice).len(),
        1,
        "the webhook was not sent again for the mail's retries"
    );
    assert_eq!(standing(&api, id).await.0, "pending_approval");
    server.shutdown().await.unwrap();
}

on_every_store!(smtp_down_delays_only_mail:
    sc_ch_13_smtp_down_delays_only_mail_sqlite,
    sc_ch_13_smtp_down_delays_only_mail_dynamodb,
    sc_ch_13_smtp_down_delays_only_mail_postgres);
