//! The Lambda functions as shipped: built alone (so the shared crate has only the features a
//! function asks for: `aws`, no `embedded`), zipped as the deployment package (`bootstrap`), and
//! started against a stub Lambda Runtime API to time init: process start → its first
//! `GET /runtime/invocation/next` (what `scripts/measure_init.py` measures, in Rust).

use crate::{cost::Function, stats::Summary};
use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};
use tokio::io::AsyncReadExt;

pub struct Shipped {
    pub function: Function,
    pub binary_bytes: u64,
    pub zip_bytes: u64,
    pub init: Summary,
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Build the four function binaries with `profile`; their paths, by function.
pub fn build(profile: &str) -> Vec<(Function, PathBuf)> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(workspace_root()).args([
        "build",
        "--profile",
        profile,
        "--message-format=json",
    ]);
    for f in Function::ALL {
        cmd.args(["-p", &format!("countersign-{}", f.name())]);
    }
    if profile == "release" {
        // As shipped: the Lambda target's flags, on this host's target (an explicit `--target`
        // keeps them off build scripts and proc macros, as for the cross build).
        let host = host_triple();
        let flags = lambda_rustflags();
        eprintln!("bench: the Lambda target's flags on {host}: {flags:?}");
        cmd.args(["--target", &host, "--config"]);
        cmd.arg(format!(
            "target.{host}.rustflags={}",
            toml::Value::from(flags)
        ));
    }
    eprintln!("bench: building the functions ({profile} profile)…");
    let out = cmd
        .stderr(Stdio::inherit())
        .output()
        .expect("run cargo build");
    assert!(out.status.success(), "cargo build of the functions failed");
    let mut built = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(msg) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let Some(exe) = msg["executable"].as_str() else {
            continue;
        };
        let name = msg["target"]["name"].as_str().unwrap_or_default();
        if let Some(f) = Function::ALL
            .into_iter()
            .find(|f| name == format!("countersign-{}", f.name()))
        {
            built.push((f, PathBuf::from(exe)));
        }
    }
    assert_eq!(built.len(), 4, "cargo built the four function binaries");
    built.sort();
    built
}

/// The flags `.cargo/config.toml` gives the Lambda target (aarch64-unknown-linux-gnu).
fn lambda_rustflags() -> Vec<String> {
    let path = workspace_root().join(".cargo/config.toml");
    let text = std::fs::read_to_string(&path).expect("read .cargo/config.toml");
    let config: toml::Table = text.parse().expect(".cargo/config.toml is TOML");
    let flags = &config["target"]["aarch64-unknown-linux-gnu"]["rustflags"];
    flags
        .as_array()
        .expect("rustflags is a list")
        .iter()
        .map(|f| f.as_str().expect("a flag is a string").to_owned())
        .collect()
}

/// This machine's target triple, from `rustc -vV`.
fn host_triple() -> String {
    let out = Command::new("rustc")
        .arg("-vV")
        .output()
        .expect("run rustc -vV");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: "))
        .expect("rustc -vV names the host")
        .to_owned()
}

/// The deployment package: `bootstrap` (executable), deflated as `sam build` packs it — SAM's
/// Python `zipfile` (zlib, level 6), run here. The `zip` crate's deflate (zlib-rs) packed the
/// same binaries ≈ 3 % larger (resume 3.06 against 2.97 MB), which reported a miss that ships
/// as a pass.
fn zip_size(binary: &Path) -> u64 {
    const PACK: &str = "import io, sys, zipfile
buffer = io.BytesIO()
with zipfile.ZipFile(buffer, 'w', zipfile.ZIP_DEFLATED) as z:
    entry = zipfile.ZipInfo('bootstrap')
    entry.external_attr = 0o100755 << 16
    entry.compress_type = zipfile.ZIP_DEFLATED
    with open(sys.argv[1], 'rb') as f:
        z.writestr(entry, f.read())
print(len(buffer.getvalue()))";
    let out = Command::new("python3")
        .args(["-c", PACK])
        .arg(binary)
        .output()
        .expect("python3 (the bench packs the functions as sam build does, with zipfile)");
    assert!(
        out.status.success(),
        "packing {}: {}",
        binary.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("zipfile printed the package's size")
}

pub async fn measure(built: &[(Function, PathBuf)], init_runs: usize) -> Vec<Shipped> {
    let mut shipped = Vec::new();
    for (f, exe) in built {
        let mut ms = Vec::with_capacity(init_runs);
        for _ in 0..init_runs {
            ms.push(init_once(exe).await);
        }
        shipped.push(Shipped {
            function: *f,
            binary_bytes: std::fs::metadata(exe).unwrap().len(),
            zip_bytes: zip_size(exe),
            init: Summary::of(ms),
        });
    }
    shipped
}

/// Start the binary against a stub Runtime API; ms until it asks for its first invocation.
async fn init_once(exe: &Path) -> f64 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (asked, mut first) = tokio::sync::mpsc::unbounded_channel();
    let stub = tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let asked = asked.clone();
            tokio::spawn(async move {
                let mut head = vec![0u8; 4096];
                let n = socket.read(&mut head).await.unwrap_or(0);
                if String::from_utf8_lossy(&head[..n]).contains("/runtime/invocation/next") {
                    let _ = asked.send(Instant::now());
                }
                // Never answer: the function waits for work, as it would for an idle Lambda.
                tokio::time::sleep(Duration::from_secs(30)).await;
                drop(socket);
            });
        }
    });
    let config = std::fs::read_to_string(workspace_root().join("config/local.toml")).unwrap();
    let started = Instant::now();
    let mut child = tokio::process::Command::new(exe)
        .env_clear()
        .envs([
            ("AWS_LAMBDA_RUNTIME_API", format!("127.0.0.1:{port}")),
            ("AWS_LAMBDA_FUNCTION_NAME", "bench".into()),
            ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256".into()),
            ("AWS_LAMBDA_FUNCTION_VERSION", "1".into()),
            ("AWS_REGION", "us-east-1".into()),
            ("AWS_ACCESS_KEY_ID", "bench".into()),
            ("AWS_SECRET_ACCESS_KEY", "bench".into()),
            ("COUNTERSIGN_TABLE", "bench".into()),
            ("COUNTERSIGN_SCHEDULE_GROUP", "bench".into()),
            (
                "COUNTERSIGN_RESUME_ARN",
                "arn:aws:lambda:us-east-1:000000000000:function:resume".into(),
            ),
            (
                "COUNTERSIGN_SCHEDULER_ROLE_ARN",
                "arn:aws:iam::000000000000:role/scheduler".into(),
            ),
            ("COUNTERSIGN_CONFIG", config),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start the function binary");
    let at = tokio::time::timeout(Duration::from_secs(10), first.recv())
        .await
        .ok()
        .flatten()
        .unwrap_or_else(|| panic!("{} never asked for work", exe.display()));
    let _ = child.kill().await;
    stub.abort();
    at.duration_since(started).as_secs_f64() * 1000.0
}
