//! SC-MCP-10, Claude Code (the `claude` CLI, pinned by scripts/mcp-sdks.sh): `claude mcp add`
//! with an agent key, then `claude mcp list`, which connects to each server and says whether
//! it did. No model is needed, and nothing leaves the machine: the CLI runs in a home of its
//! own with telemetry, error reports, the updater and other non-essential traffic off.

use super::World;
use std::{path::Path, process::Command};

/// The pinned CLI: scripts/mcp-sdks.sh's export, else its default place.
fn claude() -> String {
    std::env::var("COUNTERSIGN_MCP_CLAUDE").unwrap_or_else(|_| {
        format!(
            "{}/.cache/countersign/mcp/claude/node_modules/.bin/claude",
            std::env::var("HOME").unwrap_or_default()
        )
    })
}

/// One `claude` command in `home` (its config, cache and project folder), offline; its stdout.
fn run(home: &Path, args: &[&str]) -> String {
    let out = Command::new(claude())
        .args(args)
        .current_dir(home)
        .env("HOME", home)
        .env("CLAUDE_CONFIG_DIR", home.join(".claude"))
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_ERROR_REPORTING", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .output()
        .expect("Claude Code is installed (source scripts/mcp-sdks.sh)");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "claude {args:?}: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// What Claude Code saw of the server `name` added with `key`: the CLI's version, `claude mcp
/// list`'s line for it, and the revision its connection log says was negotiated.
pub(super) struct Seen {
    pub version: String,
    pub listed: String,
    pub revision: Option<String>,
}

/// `claude mcp add --transport http NAME URL --header "Authorization: Bearer KEY"`, then
/// `claude mcp list`, in a fresh home (run off the async runtime: the server shares it).
pub(super) async fn add_and_list(w: &World, key: &str) -> Seen {
    let url = w.url.clone();
    let key = key.to_owned();
    tokio::task::spawn_blocking(move || {
        let home = std::env::temp_dir().join(format!("claude-{}", ulid::Ulid::new()));
        std::fs::create_dir_all(&home).unwrap();
        let version = run(&home, &["--version"]);
        let auth = format!("Authorization: Bearer {key}");
        let add = ["mcp", "add", "--transport", "http", "countersign", &url];
        run(&home, &[&add[..], &["--header", &auth]].concat());
        let list = run(&home, &["mcp", "list"]);
        let listed = list
            .lines()
            .find(|l| l.starts_with("countersign:"))
            .unwrap_or_else(|| panic!("claude mcp list names the server: {list}"))
            .to_owned();
        let seen = Seen {
            version: version.split_whitespace().next().unwrap_or("?").to_owned(),
            listed,
            revision: negotiated(&home.join(".cache")),
        };
        let _ = std::fs::remove_dir_all(&home);
        seen
    })
    .await
    .unwrap()
}

/// The revision Claude Code's MCP connection log (JSON lines under its cache) says it
/// negotiated, if it wrote one.
fn negotiated(cache: &Path) -> Option<String> {
    let mut dirs = vec![cache.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            let found = text.lines().find_map(|line| {
                let v: serde_json::Value = serde_json::from_str(line).ok()?;
                let debug = v["debug"].as_str()?;
                let caps = debug.strip_prefix("Connection established with capabilities: ")?;
                let caps: serde_json::Value = serde_json::from_str(caps).ok()?;
                caps["negotiatedProtocolVersion"]
                    .as_str()
                    .map(str::to_owned)
            });
            if found.is_some() {
                return found;
            }
        }
    }
    None
}

/// Claude Code's row of docs/mcp.md's compatibility table: it connects and lists; its calls
/// are a model's to make, so they are not driven here.
pub(super) fn row(seen: &Seen) -> String {
    let connected = if seen.listed.ends_with("✔ Connected") {
        "`claude mcp list`: ✔ Connected".to_owned()
    } else {
        format!("✗ {}", seen.listed)
    };
    let revision = seen.revision.as_deref().unwrap_or("?");
    let by_model = "— (a model's call)";
    format!(
        "| Claude Code, `claude mcp add --transport http` (`claude-code {}`) | {revision} | {connected} | {by_model} | {by_model} | {by_model} | {by_model} |",
        seen.version
    )
}

/// SC-MCP-10 (issue 30): Claude Code adds the server with an agent key and lists it
/// "✔ Connected", having negotiated the stateless revision; added with an approver's key it
/// lists it as failed, so the check can fail.
#[tokio::test]
async fn sc_mcp_10_claude_code_adds_the_server_and_lists_it_connected() {
    let w = super::compat::compat_world().await;
    let seen = add_and_list(&w, countersign_tests::keys::AGENT).await;
    assert!(seen.listed.ends_with("✔ Connected"), "{}", seen.listed);
    assert_eq!(seen.revision.as_deref(), Some("2026-07-28"));
    let refused = add_and_list(&w, countersign_tests::keys::APPROVER).await;
    assert!(
        refused.listed.contains("Failed to connect"),
        "{}",
        refused.listed
    );
    assert!(refused.listed.contains("403"), "{}", refused.listed);
}
