//! `countersign login` against a real OpenID provider (`oidc-provider`, scripts/oidc-provider.sh;
//! tests/identity/provider.mjs) and the local server over real HTTP, on every store: the
//! device authorization grant with the person confirming the code at the provider's pages, the
//! token kept in a 0600 file, the other commands using it (refreshed when it lapsed), the
//! refusals that name what to do, and `countersign logout`.

use countersign::config::Config;
use countersign_tests::{
    config_toml, idp::Provider, in_secs, keys, on_every_store, stores::Backend, stores::Place, Api,
    ToolServer,
};
use serde_json::{json, Value};
use std::{
    io::{BufRead, BufReader},
    os::unix::fs::PermissionsExt,
    path::Path,
    process::{Command, Stdio},
    sync::Arc,
};

/// The server's resource: its `public_url` without `/ui/`, and the tenant's audience.
const AUD: &str = "https://countersign.test";

/// `countersign` with no key, its token in `token_file`: what it printed and how it ended.
fn cli(url: &str, token_file: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_countersign"))
        .args(args)
        .env("COUNTERSIGN_URL", url)
        .env("COUNTERSIGN_TOKEN_FILE", token_file)
        .env_remove("COUNTERSIGN_KEY")
        .stdin(Stdio::null())
        .output()
        .expect("the CLI runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `countersign login`, the person confirming the code it prints at the provider's pages.
fn login(url: &str, token_file: &Path) -> (i32, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_countersign"))
        .arg("login")
        .env("COUNTERSIGN_URL", url)
        .env("COUNTERSIGN_TOKEN_FILE", token_file)
        .env_remove("COUNTERSIGN_KEY")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the CLI runs");
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut said = String::new();
    let (link, code) = loop {
        let mut line = String::new();
        assert!(err.read_line(&mut line).unwrap() > 0, "it ended: {said}");
        said.push_str(&line);
        let link = said.split_whitespace().find(|w| w.starts_with("http"));
        let code = said.split("shows the code ").nth(1).map(str::trim);
        if let (Some(link), Some(code)) = (link, code.filter(|c| !c.is_empty())) {
            break (link.to_owned(), code.to_owned());
        }
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let page = runtime.block_on(countersign_tests::idp::confirm_device(&link, &code));
    assert!(page.contains("Sign-in Success"), "{page}");
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
    let status = child.wait().unwrap();
    (status.code().unwrap_or(-1), said + &rest)
}

fn stored(token_file: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(token_file).unwrap()).unwrap()
}

/// Rewrite the stored sign-in (its mode stays 0600: the file is written in place).
fn restore(token_file: &Path, edit: impl FnOnce(&mut Value)) {
    let mut value = stored(token_file);
    edit(&mut value);
    std::fs::write(token_file, value.to_string()).unwrap();
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// SC-ID-09: the CLI signs a person in.
async fn the_cli_signs_a_person_in(backend: Backend) {
    let provider = Provider::start();
    let tools = ToolServer::start().await;
    let text = config_toml(&tools, "1m", "5s")
        + &format!(
            "\n[server]\npublic_url = \"{AUD}/ui/\"\n\
             [tenants.acme.identity]\nissuer = \"{}\"\naudience = \"{AUD}\"\n",
            provider.acme
        );
    let config = Arc::new(
        Config::from_toml(&text)
            .and_then(Config::read_keys)
            .unwrap(),
    );
    let place = Place::fresh(backend, "login").await;
    let server = place.serve(config).await;
    let api = Api::new(server.addr);
    let url = format!("http://{}", server.addr);
    let dir = countersign_tests::temp_db("login")
        .parent()
        .unwrap()
        .to_owned();
    let token_file = dir.join("countersign").join("token.json");

    // Signed in: the device grant, the code confirmed at the provider; the token in a 0600
    // file in a 0700 folder, with a refresh token.
    let (code, said) = {
        let (url, file) = (url.clone(), token_file.clone());
        tokio::task::spawn_blocking(move || login(&url, &file))
            .await
            .unwrap()
    };
    assert_eq!(code, 0, "{said}");
    assert!(
        said.contains(&format!("signed in at {}", provider.acme)),
        "{said}"
    );
    assert_eq!(mode(&token_file), 0o600);
    assert_eq!(mode(token_file.parent().unwrap()), 0o700);
    let first = stored(&token_file);
    assert_eq!(
        first["resource"], AUD,
        "the server's resource, from its metadata"
    );
    assert!(first["refresh_token"].is_string(), "{first}");

    // The other commands use it: the person approves as herself.
    let (s, action) = api
        .submit(
            keys::AGENT,
            json!({"tool": "mail.send", "args": {"to": "ops@example.com"},
                   "schedule": {"not_before": in_secs(3600), "not_after": in_secs(7200)}}),
        )
        .await;
    assert_eq!(s, 202, "{action}");
    let id = action["id"].as_str().unwrap().to_owned();
    let run = |args: &[&str]| {
        let (url, file) = (url.clone(), token_file.clone());
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        async move {
            tokio::task::spawn_blocking(move || {
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                cli(&url, &file, &args)
            })
            .await
            .unwrap()
        }
    };
    let (code, out, err) = run(&["--json", "approve", "--yes", &id]).await;
    assert_eq!(code, 0, "{out}{err}");
    let after = api.action(&id).await;
    assert_eq!(after["state"], "approved", "{after}");
    assert_eq!(after["approval"]["approver"], "ada", "{after}");

    // Lapsed with a refresh token: renewed, and the new tokens stored.
    restore(&token_file, |v| v["expires_at"] = json!(0));
    let (code, out, err) = run(&["--json", "show", &id]).await;
    assert_eq!(code, 0, "{out}{err}");
    let renewed = stored(&token_file);
    assert_ne!(renewed["access_token"], first["access_token"]);
    assert!(renewed["expires_at"].as_i64().unwrap() > jiff::Timestamp::now().as_second());
    assert_eq!(mode(&token_file), 0o600);

    // Lapsed with none: told what to do.
    restore(&token_file, |v| {
        v["expires_at"] = json!(0);
        v["refresh_token"] = Value::Null;
    });
    let (code, _, err) = run(&["show", &id]).await;
    assert_eq!(code, 6, "{err}");
    assert!(
        err.contains("token expired: run countersign login"),
        "{err}"
    );

    // A file others may read is not used.
    restore(&token_file, |v| v["expires_at"] = Value::Null);
    std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (code, _, err) = run(&["show", &id]).await;
    assert_eq!(code, 6, "{err}");
    assert!(err.contains("may be read by others (mode 644"), "{err}");

    // Signed out: the file is gone, and a command says how to sign in.
    let (code, _, err) = run(&["logout"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(!token_file.exists());
    let (code, _, err) = run(&["show", &id]).await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("run countersign login"), "{err}");
    let _ = std::fs::remove_dir_all(dir);
}

on_every_store!(the_cli_signs_a_person_in:
    sc_id_09_the_cli_signs_a_person_in_sqlite,
    sc_id_09_the_cli_signs_a_person_in_dynamodb,
    sc_id_09_the_cli_signs_a_person_in_postgres);
