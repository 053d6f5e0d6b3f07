//! One function per subcommand: call the API, then print a table or the JSON.

use crate::{
    args::{Cli, Command},
    client::{segment, Client},
    exit::{Exit, Failure},
    login, session, show,
};
use countersign::domain::{canonical, deed};
use reqwest::Method;
use serde_json::{json, Value};
use std::{
    io::{BufRead, Write},
    path::PathBuf,
};

pub async fn run(cli: Cli) -> Result<(), Failure> {
    let token_file = cli.token_file.clone();
    // Offline commands: no URL, no key.
    match &cli.command {
        Command::KeyHash { secret } => return key_hash(secret.as_deref()),
        Command::Verify { public_key, deed } => return verify(public_key, deed, cli.json),
        Command::Login {
            issuer,
            client_id,
            resource,
            scope,
        } => {
            let ask = login::Ask {
                url: &cli.url,
                issuer: issuer.as_deref(),
                client_id,
                resource: resource.as_deref(),
                scope,
            };
            return signed_in(login::login(ask).await?, &token_file);
        }
        Command::Logout => return logout(&token_file),
        _ => {}
    }
    let signed_in = cli.key.as_deref().is_none_or(|k| k.trim().is_empty());
    let credential = match signed_in {
        false => cli.key.clone(),
        true => stored_token(&cli.url, &token_file).await?,
    };
    let client = Client::new(&cli.url, credential.as_deref())?;
    match command(&client, cli).await {
        Err(failure) if signed_in => Err(session::lapsed(failure)),
        done => done,
    }
}

async fn command(client: &Client, cli: Cli) -> Result<(), Failure> {
    let out = Out::new(client, cli.json, &cli.command).await;
    match cli.command {
        Command::Submit {
            tool,
            args,
            not_before,
            not_after,
            kind,
            idempotency_key,
        } => {
            let args: Value = serde_json::from_str(&args)
                .map_err(|e| Failure::new(Exit::Usage, format!("--args is not JSON: {e}")))?;
            let mut body = json!({"tool": tool, "args": args});
            if let (Some(nb), Some(na)) = (not_before, not_after) {
                body["schedule"] = json!({"not_before": nb, "not_after": na});
            }
            if let Some(kind) = kind {
                body["action_kind"] = json!(kind);
            }
            let headers: Vec<(&str, &str)> = idempotency_key
                .as_deref()
                .map(|k| vec![("Idempotency-Key", k)])
                .unwrap_or_default();
            let action = client
                .send(Method::POST, "/v1/actions", Some(body), &headers)
                .await?;
            out.action(&action);
        }
        Command::List {
            pending,
            state,
            agent,
            limit,
            cursor,
        } => {
            // Every waiting action, however many pages: an approver must not miss one.
            let follow = pending && cursor.is_none();
            let state = pending.then(|| "pending_approval".to_owned()).or(state);
            let query = [("state", state), ("agent_id", agent)];
            list(client, &out, query, limit, cursor, follow).await?;
        }
        Command::Show { id } => out.action(&client.get(&action_path(&id, "")).await?),
        Command::Approve {
            id,
            digest,
            yes,
            grant,
        } => approve(client, &out, &id, digest.as_deref(), yes, grant.body()).await?,
        Command::Deny { id, reason } => {
            let path = action_path(&id, "/deny");
            out.action(&client.post(&path, Some(json!({"reason": reason}))).await?);
        }
        Command::Cancel { id } => {
            out.action(&client.post(&action_path(&id, "/cancel"), None).await?)
        }
        Command::Stop { agent, .. } => {
            let body = agent.map_or(json!({}), |a| json!({"agent_id": a}));
            let stop = client.post("/v1/stops", Some(body)).await?;
            out.line(&stop, || match stop["agent_id"].as_str() {
                Some(a) => format!("stopped agent {a}"),
                None => "stopped the whole tenant".to_owned(),
            });
        }
        Command::ResumeAgent { agent, .. } => {
            let scope = agent.unwrap_or_else(|| "*".to_owned());
            let path = format!("/v1/stops/{}", segment(&scope));
            client.send(Method::DELETE, &path, None, &[]).await?;
            let lifted = json!({"lifted": scope});
            out.line(&lifted, || format!("lifted the stop of {scope}"));
        }
        Command::Grants => {
            let list = client.get("/v1/grants").await?;
            let grants = list["grants"].as_array().cloned().unwrap_or_default();
            out.line(&list, || show::grants(&grants, &out.zone));
        }
        Command::Revoke { id } => {
            let path = format!("/v1/grants/{}", segment(&id));
            let grant = client.send(Method::DELETE, &path, None, &[]).await?;
            out.line(&grant, || {
                let used = grant["revoked"]["after_uses"].as_u64().unwrap_or(0);
                format!("revoked {id} (used {used} time(s) before)")
            });
        }
        Command::Events { id } => {
            let events = client.get(&action_path(&id, "/events")).await?;
            out.line(&events, || show::events(rows(&events), &out.zone));
        }
        Command::Deed { id, out } => {
            let file = client.get_bytes(&action_path(&id, "/deed")).await?;
            match out {
                Some(path) => {
                    std::fs::write(&path, &file).map_err(|e| {
                        Failure::new(
                            Exit::Failure,
                            format!("cannot write {}: {e}", path.display()),
                        )
                    })?;
                    eprintln!("wrote the deed of {id} to {}", path.display());
                }
                None => std::io::stdout()
                    .write_all(&file)
                    .map_err(|e| Failure::new(Exit::Failure, e.to_string()))?,
            }
        }
        Command::KeyHash { .. }
        | Command::Verify { .. }
        | Command::Login { .. }
        | Command::Logout => {
            unreachable!("answered before a client is built")
        }
    }
    Ok(())
}

/// Without a key, the token `countersign login` stored for this server (none: no credential),
/// renewed first with its refresh token when it lapsed.
async fn stored_token(url: &str, given: &Option<PathBuf>) -> Result<Option<String>, Failure> {
    let path = session::path(given.as_deref())?;
    let Some(mut session) = session::Session::load(&path)? else {
        return Ok(None);
    };
    session.check_server(url)?;
    if session.lapsed(jiff::Timestamp::now().as_second()) {
        login::refresh(&mut session).await?;
        session.save(&path)?;
    }
    Ok(Some(session.access_token))
}

fn signed_in(session: session::Session, given: &Option<PathBuf>) -> Result<(), Failure> {
    let path = session::path(given.as_deref())?;
    session.save(&path)?;
    let until = session
        .expires_at
        .and_then(|at| jiff::Timestamp::from_second(at).ok());
    let until = until.map_or(String::new(), |t| format!(" until {t}"));
    eprintln!(
        "signed in at {} for {}{until}; the token is in {}",
        session.issuer,
        session.url,
        path.display()
    );
    Ok(())
}

fn logout(given: &Option<PathBuf>) -> Result<(), Failure> {
    match session::remove(&session::path(given.as_deref())?)? {
        true => eprintln!("signed out: the stored token is removed"),
        false => eprintln!("not signed in: no stored token"),
    }
    Ok(())
}

struct Out {
    json: bool,
    zone: show::Zone,
}

impl Out {
    /// Tables show times in the tenant's zone: asked of `GET /v1/me` only when a table with
    /// times is printed; UTC when it does not answer (the command itself then says why).
    async fn new(client: &Client, json: bool, command: &Command) -> Out {
        let times = !matches!(
            command,
            Command::Stop { .. }
                | Command::ResumeAgent { .. }
                | Command::Deed { .. }
                | Command::Revoke { .. }
        );
        let zone = match (json, times) {
            (false, true) => match client.get("/v1/me").await {
                Ok(me) => show::Zone::named(me["time_zone"].as_str().unwrap_or("UTC")),
                Err(_) => show::Zone::utc(),
            },
            _ => show::Zone::utc(),
        };
        Out { json, zone }
    }

    fn line(&self, value: &Value, human: impl FnOnce() -> String) {
        if self.json {
            println!(
                "{}",
                serde_json::to_string_pretty(value).expect("JSON prints")
            );
        } else {
            println!("{}", human());
        }
    }

    fn action(&self, action: &Value) {
        self.line(action, || show::action(action, &self.zone));
    }
}

fn action_path(id: &str, rest: &str) -> String {
    format!("/v1/actions/{}{rest}", segment(id))
}

fn rows(page: &Value) -> &[Value] {
    page["data"].as_array().map(Vec::as_slice).unwrap_or(&[])
}

/// One page, or with `follow` every page to the end, shown as one.
async fn list(
    client: &Client,
    out: &Out,
    filter: [(&str, Option<String>); 2],
    limit: Option<u32>,
    mut cursor: Option<String>,
    follow: bool,
) -> Result<(), Failure> {
    let mut all = Vec::new();
    loop {
        let query: Vec<String> = filter
            .iter()
            .cloned()
            .chain([
                ("limit", limit.map(|l| l.to_string())),
                ("cursor", cursor.take()),
            ])
            .filter_map(|(name, value)| value.map(|v| format!("{name}={}", segment(&v))))
            .collect();
        let path = match query.is_empty() {
            true => "/v1/actions".to_owned(),
            false => format!("/v1/actions?{}", query.join("&")),
        };
        let page = client.get(&path).await?;
        all.extend(rows(&page).iter().cloned());
        cursor = page["next_cursor"].as_str().map(str::to_owned);
        if !follow || cursor.is_none() {
            break;
        }
    }
    let page = json!({"data": all, "next_cursor": cursor});
    out.line(&page, || show::actions(rows(&page), &out.zone));
    if let (false, Some(next)) = (out.json, &cursor) {
        eprintln!("more: --cursor {next}");
    }
    Ok(())
}

/// Show the context, confirm, and approve the digest of exactly what was shown — computed
/// here with the engine's canonical form, not copied from the answer.
async fn approve(
    client: &Client,
    out: &Out,
    id: &str,
    expected: Option<&str>,
    yes: bool,
    grant: Option<Value>,
) -> Result<(), Failure> {
    let action = client.get(&action_path(id, "")).await?;
    if action["state"] != "pending_approval" {
        return Err(Failure::new(
            Exit::Refused,
            format!("{id} is {}, not pending_approval", action["state"]),
        ));
    }
    let approval = &action["approval"];
    let context = &approval["context"];
    let digest = canonical::digest(context);
    if approval["context_digest"].as_str() != Some(digest.as_str()) {
        return Err(Failure::new(
            Exit::Refused,
            "the context shown does not hash to the action's context_digest; not approving",
        ));
    }
    if let Some(expected) = expected.filter(|e| *e != digest) {
        return Err(Failure::new(
            Exit::Refused,
            format!("context_changed: the action's context is {digest}, not {expected}"),
        ));
    }
    match out.json {
        true => eprintln!("{}", serde_json::to_string_pretty(approval).expect("JSON")),
        false => eprintln!("{}", show::context(&action, &digest, &out.zone)),
    }
    if let Some(grant) = &grant {
        // What the approval also gives, before the question: it is part of what is approved.
        eprintln!("and grant {}: {grant}", text(&action["agent_id"]));
    }
    let question = match grant {
        Some(_) => "Approve this call and the grant? [y/N] ",
        None => "Approve this call? [y/N] ",
    };
    if !yes && !confirm(question)? {
        return Err(Failure::new(Exit::NotConfirmed, "not approved"));
    }
    let mut body = json!({"context_digest": digest});
    if let Some(grant) = grant {
        body["grant"] = grant;
    }
    let path = action_path(id, "/approve");
    let approved = client.post(&path, Some(body)).await?;
    out.line(&approved, || {
        let granted = approved["grant"]["id"].as_str().map_or(String::new(), |g| {
            let uses = approved["grant"]["uses"].as_u64().unwrap_or(0);
            format!(
                "; granted {g} ({uses} further call{})",
                if uses == 1 { "" } else { "s" }
            )
        });
        format!(
            "approved {}: {}{granted}",
            text(&approved["id"]),
            show::after_approval(&approved)
        )
    });
    Ok(())
}

fn text(v: &Value) -> &str {
    v.as_str().unwrap_or("-")
}

/// Ask on stderr, read one line from stdin; anything but y/yes (or end of input) is no.
fn confirm(question: &str) -> Result<bool, Failure> {
    eprint!("{question}");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut answer)
        .map_err(|e| Failure::new(Exit::Failure, format!("cannot read the answer: {e}")))?;
    Ok(matches!(
        answer.trim().to_ascii_lowercase().as_str(),
        "y" | "yes"
    ))
}

/// The config stores keys only as SHA-256 hashes; this prints the one to put there.
fn key_hash(secret: Option<&str>) -> Result<(), Failure> {
    let secret = match secret {
        Some(s) => s.to_owned(),
        None => {
            let mut line = String::new();
            std::io::stdin()
                .lock()
                .read_line(&mut line)
                .map_err(|e| Failure::new(Exit::Failure, e.to_string()))?;
            line.trim_end_matches(['\r', '\n']).to_owned()
        }
    };
    if secret.is_empty() {
        return Err(Failure::new(
            Exit::Usage,
            "give the key as an argument or on stdin",
        ));
    }
    println!("{}", canonical::sha256_hex(secret.as_bytes()));
    Ok(())
}

/// Check a deed file with the tenant's public key: the signature over the exact bytes, then the
/// audit chain inside it (the engine's own verification, `domain::deed`).
fn verify(
    public_key: &std::path::Path,
    deed_file: &std::path::Path,
    json: bool,
) -> Result<(), Failure> {
    let read = |p: &std::path::Path| {
        std::fs::read(p)
            .map_err(|e| Failure::new(Exit::Usage, format!("cannot read {}: {e}", p.display())))
    };
    let pem = String::from_utf8_lossy(&read(public_key)?).into_owned();
    // A file that is no public key is a wrong argument (2), not a deed that fails (8).
    let key = deed::public_key_from_pem(&pem).map_err(|e| {
        Failure::new(
            Exit::Usage,
            format!("--public-key {}: {e}", public_key.display()),
        )
    })?;
    let file = read(deed_file)?;
    let verified = deed::Deed::verify(&file, &key)
        .map_err(|e| Failure::new(Exit::NotVerified, format!("the deed does not verify: {e}")))?;
    let approval = verified.approval.as_ref();
    let approver = approval.and_then(|a| a.approver.as_deref());
    let person = approval.and_then(|a| a.person.as_ref());
    let summary = json!({
        "verified": true,
        "action_id": verified.action_id,
        "tenant": verified.tenant,
        "kid": verified.kid,
        "format": verified.format,
        "state": verified.state,
        "approved_by": approver,
        "person": person,
        "events": verified.events.len(),
        "chain_head": verified.chain_head,
    });
    let out = Out {
        json,
        zone: show::Zone::utc(),
    };
    let by = verified
        .approved_by()
        .map(|who| format!(", approved by {who}"))
        .unwrap_or_default();
    out.line(&summary, || {
        format!(
            "verified: the deed of {} (tenant {}, key {}) — {}{by}, {} events, chain head {}",
            verified.action_id,
            verified.tenant,
            verified.kid,
            verified.state,
            verified.events.len(),
            verified.chain_head
        )
    });
    Ok(())
}
