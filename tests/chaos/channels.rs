//! The approval channels under chaos (SC-CH-03, SC-CH-13): a stand-in of Slack's Web API and an
//! SMTP server, each slow, failing and down in turns while the run goes on. They record what
//! they took, so the run can hold the deliveries to the outbox's promise afterwards: no notice
//! lost (delivered, or still in the outbox), repeats only as at-least-once allows them, each
//! mail under its notice's stable `Message-ID`.

use axum::{body::Bytes, extract::Path, routing::post, Json, Router};
use countersign::{
    domain::{Action, State},
    store::Store,
};
use serde_json::{json, Value};
use std::{
    collections::{BTreeMap, BTreeSet},
    io::{BufRead, BufReader, Write},
    net::{TcpListener, TcpStream},
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex,
    },
    time::{Duration, Instant},
};

/// When a channel is down: from a quarter of the run to half of it (its messages must wait,
/// and nothing else may).
#[derive(Clone, Copy)]
pub struct Down {
    pub from: Instant,
    pub until: Instant,
}

impl Down {
    fn now(&self) -> bool {
        (self.from..self.until).contains(&Instant::now())
    }
}

/// What the stand-ins took.
#[derive(Default)]
pub struct Took {
    /// Slack: `chat.postMessage` per action id.
    pub posted: BTreeMap<String, usize>,
    /// Slack: `chat.update` calls.
    pub updated: usize,
    /// SMTP: each mail accepted, by its `Message-ID`: (recipient, copies).
    pub mails: BTreeMap<String, (String, usize)>,
    /// Calls refused on purpose (503, 451, connection closed) and answered slowly.
    pub refused: usize,
    pub slow: usize,
}

pub type Taken = Arc<Mutex<Took>>;

/// A choice every `n`th time, spread by a counter (no dependency, reproducible enough).
fn every(counter: &AtomicU64, n: u64) -> bool {
    counter
        .fetch_add(1, Ordering::Relaxed)
        .wrapping_mul(0x9E37_79B9)
        .is_multiple_of(n)
}

/// The action id a Slack message is about: its page link and buttons name it.
fn action_in(body: &str) -> Option<String> {
    let at = body.find("act_")?;
    body.get(at..at + 30).map(str::to_owned)
}

/// Slack's Web API, as the outbox calls it: `chat.postMessage` and `chat.update`. One call in
/// six answers 503, one in eight takes 3 s (past the client's timeout), and while `down` every
/// call answers 503.
pub async fn slack(taken: Taken, down: Down) -> String {
    let counter = Arc::new(AtomicU64::new(1));
    let app = Router::new().route(
        "/api/{method}",
        post(move |Path(method): Path<String>, body: Bytes| {
            let (taken, counter) = (taken.clone(), counter.clone());
            async move {
                let unavailable = (axum::http::StatusCode::SERVICE_UNAVAILABLE, Json(json!({})));
                if down.now() || every(&counter, 6) {
                    taken.lock().unwrap().refused += 1;
                    return unavailable;
                }
                if every(&counter, 8) {
                    taken.lock().unwrap().slow += 1;
                    tokio::time::sleep(Duration::from_secs(3)).await;
                }
                let text = String::from_utf8_lossy(&body).into_owned();
                let parsed: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
                let ok = axum::http::StatusCode::OK;
                let mut took = taken.lock().unwrap();
                match (method.as_str(), action_in(&text)) {
                    ("chat.postMessage", Some(id)) => {
                        *took.posted.entry(id).or_default() += 1;
                        let ts = format!("{}.000100", took.posted.values().sum::<usize>());
                        (ok, Json(json!({"ok": true, "channel": parsed["channel"], "ts": ts})))
                    }
                    ("chat.update", _) => {
                        took.updated += 1;
                        (ok, Json(json!({"ok": true, "channel": parsed["channel"], "ts": parsed["ts"]})))
                    }
                    _ => (ok, Json(json!({"ok": false, "error": "unknown_method"}))),
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}/api")
}

/// A plain SMTP server (the tenant's `insecure_plaintext`): one mail in six is refused `451` at
/// `RCPT`, one session in eight greets after 3 s, and while `down` a session is closed before
/// the greeting. Answers one line per command (no pipelining offered).
pub fn smtp(taken: Taken, down: Down) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let counter = Arc::new(AtomicU64::new(1));
    std::thread::spawn(move || {
        for stream in listener.incoming().map_while(Result::ok) {
            let (taken, counter) = (taken.clone(), counter.clone());
            std::thread::spawn(move || {
                if down.now() {
                    taken.lock().unwrap().refused += 1;
                    return; // dropped: the client finds the server gone
                }
                session(stream, &taken, &counter).ok();
            });
        }
    });
    format!("smtp://{addr}")
}

fn session(stream: TcpStream, taken: &Taken, counter: &AtomicU64) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut out = stream.try_clone()?;
    if every(counter, 8) {
        taken.lock().unwrap().slow += 1;
        std::thread::sleep(Duration::from_secs(3));
    }
    out.write_all(b"220 chaos ESMTP\r\n")?;
    let mut lines = BufReader::new(stream);
    let mut to = String::new();
    loop {
        let mut line = String::new();
        if lines.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let command = line.trim_end().to_ascii_uppercase();
        let reply: &[u8] = if command.starts_with("EHLO") {
            b"250-chaos\r\n250 8BITMIME\r\n"
        } else if command.starts_with("RCPT") && every(counter, 6) {
            taken.lock().unwrap().refused += 1;
            b"451 4.3.0 try again later\r\n"
        } else if command.starts_with("RCPT") {
            to = line.trim_end()[8..].to_owned();
            b"250 ok\r\n"
        } else if command == "DATA" {
            out.write_all(b"354 go ahead\r\n")?;
            let mut id = None;
            loop {
                let mut data = String::new();
                if lines.read_line(&mut data)? == 0 {
                    return Ok(());
                }
                if data == ".\r\n" || data == ".\n" {
                    break;
                }
                if let Some(value) = data.strip_prefix("Message-ID:") {
                    id = Some(value.trim().to_owned());
                }
            }
            let mut took = taken.lock().unwrap();
            let entry = took
                .mails
                .entry(id.unwrap_or_default())
                .or_insert((to.clone(), 0));
            entry.1 += 1;
            b"250 accepted\r\n"
        } else if command == "QUIT" {
            out.write_all(b"221 bye\r\n")?;
            return Ok(());
        } else {
            b"250 ok\r\n"
        };
        out.write_all(reply)?;
    }
}

/// The deliveries held to the outbox's promise, once the run is over: what is broken, and the
/// figures to print.
pub async fn check(store: &dyn Store, all: &[Action], took: &Took) -> (Vec<String>, String) {
    let far = jiff::Timestamp::now() + jiff::SignedDuration::from_hours(24 * 365);
    let mut waiting: BTreeSet<String> = BTreeSet::new();
    for entry in store.outbox_due(far, 100_000).await.unwrap_or_default() {
        waiting.insert(entry.action_id);
    }
    for entry in store.outbox_dead("acme", 100_000).await.unwrap_or_default() {
        waiting.insert(entry.action_id);
    }
    let mut broken = Vec::new();
    let asked: Vec<&Action> = all.iter().filter(|a| a.approval().is_some()).collect();
    // No request lost: posted, or its notices still in the outbox (delayed, or a dead letter).
    for a in &asked {
        if !took.posted.contains_key(a.id()) && !waiting.contains(a.id()) {
            broken.push(format!(
                "{}: asked for approval, never posted to Slack, and nothing of it is left in the outbox",
                a.id()
            ));
        }
    }
    // A mail's Message-ID names its notice and recipient: every copy of it went to the same one,
    // and a notice's mail names its own action.
    let ulid = |a: &Action| a.id().trim_start_matches("act_").to_owned();
    for (id, (to, _)) in &took.mails {
        let Some(notice) = id.strip_prefix("<ntf_") else {
            broken.push(format!("a mail without a notice's Message-ID: {id:?}"));
            continue;
        };
        if !all
            .iter()
            .any(|a| notice.starts_with(&format!("{}_", ulid(a))))
        {
            broken.push(format!("mail {id} names no action of the run"));
        }
        if !to.contains("approver@chaos.example") {
            broken.push(format!("mail {id} went to {to}, not the approver"));
        }
    }
    // A call still waiting whose request left the outbox was mailed to its approver.
    for a in asked.iter().filter(|a| a.state() == State::PendingApproval) {
        let mailed = took
            .mails
            .keys()
            .any(|id| id.starts_with(&format!("<ntf_{}_", ulid(a))));
        if !mailed && !waiting.contains(a.id()) {
            broken.push(format!(
                "{}: still waits, its request left the outbox, no mail",
                a.id()
            ));
        }
    }
    let reposted = took.posted.values().filter(|n| **n > 1).count();
    let copies: usize = took.mails.values().map(|(_, n)| n).sum();
    let figures = format!(
        "channels: asked {}, posted to Slack {} (re-posted at least once: {reposted}), updates {}, mails {} under {} Message-IDs, refused on purpose {}, slow {}, actions with notices still in the outbox {}",
        asked.len(),
        took.posted.len(),
        took.updated,
        copies,
        took.mails.len(),
        took.refused,
        took.slow,
        waiting.len()
    );
    (broken, figures)
}
