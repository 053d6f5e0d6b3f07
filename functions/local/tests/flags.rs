//! `countersign-server` as an operator runs it: the binary, its flags, its stderr and its exit
//! status (issue 16, item 8).

use std::{
    path::{Path, PathBuf},
    process::{Command, Output, Stdio},
    time::Duration,
};

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cs-local-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The binary with `args`, stdout and stderr piped (so stderr is not a terminal), no
/// inherited store or listen variables.
fn local(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_countersign-server"))
        .args(args)
        .env_remove("COUNTERSIGN_DB")
        .env_remove("COUNTERSIGN_LISTEN")
        .env_remove("COUNTERSIGN_DATABASE_URL")
        .env_remove("COUNTERSIGN_CONFIG_FILE")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

/// A server started on an address another process holds; it must exit by itself.
fn serve_on_a_taken_port(name: &str) -> (String, Output) {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let db = temp(name).join("countersign.db");
    let config = repo("config/local.toml");
    let (tx, rx) = std::sync::mpsc::channel();
    let args = [
        "--listen".as_ref(),
        addr.as_ref(),
        "--db".as_ref(),
        db.as_os_str(),
        "--config".as_ref(),
        config.as_os_str(),
    ]
    .map(std::ffi::OsStr::to_owned);
    std::thread::spawn(move || {
        let args: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
        let _ = tx.send(local(&args));
    });
    let out = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the server exits when its address is taken");
    drop(taken);
    (addr, out)
}

/// Caught on main: a taken port exited with "Address already in use (os error 98)" and no
/// address, so the operator could not tell which of the listens failed.
#[test]
fn sc_ops_02_issue16_a_taken_port_names_the_address() {
    let (addr, out) = serve_on_a_taken_port("bind");
    assert!(!out.status.success(), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let last = stderr.lines().last().unwrap_or_default();
    assert!(
        last.contains(&format!("cannot listen on {addr}")) && last.contains("in use"),
        "the error names the address: {stderr}"
    );
}

/// Caught on main: the log lines carried ANSI colour codes (`\x1b[2m…`) into a log file.
#[test]
fn sc_ops_02_issue16_logs_to_a_file_carry_no_colour_codes() {
    let (_, out) = serve_on_a_taken_port("ansi");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("starting"),
        "an info line was logged: {stderr}"
    );
    assert!(!stderr.contains('\u{1b}'), "no escape codes: {stderr:?}");
}

/// Caught on main: `verify --db X` was refused ("unexpected argument '--db'") and `verify
/// --help` named `--db` without listing it; only `--db X verify` worked.
#[test]
fn sc_ops_02_issue16_verify_takes_the_store_flags_after_the_subcommand() {
    let db = temp("verify").join("countersign.db");
    countersign::store::sqlite::SqliteStore::open(&db).unwrap();
    let config = repo("config/local.toml");
    let after = local(&[
        "verify".as_ref(),
        "--db".as_ref(),
        db.as_os_str(),
        "--config".as_ref(),
        config.as_os_str(),
    ]);
    assert_eq!(after.status.code(), Some(0), "{}", text(&after));
    assert!(
        text(&after).starts_with("tenants 1, actions 0"),
        "{}",
        text(&after)
    );
    // The documented order still works, and a flag after the subcommand wins.
    let before = local(&[
        "--db".as_ref(),
        "elsewhere.db".as_ref(),
        "--config".as_ref(),
        config.as_os_str(),
        "verify".as_ref(),
        "--db".as_ref(),
        db.as_os_str(),
    ]);
    assert_eq!(before.status.code(), Some(0), "{}", text(&before));
    let missing = local(&[
        "--db".as_ref(),
        db.as_os_str(),
        "verify".as_ref(),
        "--config".as_ref(),
        config.as_os_str(),
        "--db".as_ref(),
        "no-such.db".as_ref(),
    ]);
    assert_eq!(missing.status.code(), Some(2), "{}", text(&missing));
    assert!(text(&missing).contains("no database at no-such.db"));

    let help = text(&local(&["verify".as_ref(), "--help".as_ref()]));
    for flag in ["--db <DB>", "--config <CONFIG>", "--database-url <URL>"] {
        assert!(help.contains(flag), "verify --help lists {flag}: {help}");
    }
}

/// Caught on main: `verify-deed` took the PEM as `--key` (the CLI's `--key` is an API key)
/// and a file that is no public key exited 1, as a deed that does not verify.
#[test]
fn sc_sec_07_issue16_verify_deed_takes_public_key_and_a_bad_pem_is_exit_2() {
    let dir = temp("pem");
    let (pem, deed) = (dir.join("bad.pem"), dir.join("deed.json"));
    std::fs::write(
        &pem,
        "-----BEGIN PUBLIC KEY-----\nnot a key\n-----END PUBLIC KEY-----\n",
    )
    .unwrap();
    std::fs::write(&deed, "{}").unwrap();
    let out = local(&[
        "verify-deed".as_ref(),
        "--public-key".as_ref(),
        pem.as_os_str(),
        deed.as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("--public-key") && !text(&out).contains("unexpected argument"),
        "{}",
        text(&out)
    );
    // One name for the PEM key everywhere: `--key` is gone (nothing documented uses it).
    let old = local(&[
        "verify-deed".as_ref(),
        "--key".as_ref(),
        pem.as_os_str(),
        deed.as_os_str(),
    ]);
    assert_eq!(old.status.code(), Some(2), "{}", text(&old));
    assert!(
        text(&old).contains("unexpected argument '--key'"),
        "{}",
        text(&old)
    );
}

/// `verify` on `store` (`--db FILE` or `--database-url URL`) with the sample config.
fn verify(store: &[&std::ffi::OsStr]) -> Output {
    let config = repo("config/local.toml");
    let mut args: Vec<&std::ffi::OsStr> = vec!["verify".as_ref(), "--config".as_ref()];
    args.push(config.as_os_str());
    args.extend_from_slice(store);
    local(&args)
}

/// The tables in the schema `url`'s connections use.
async fn tables(url: &str) -> i64 {
    let sql = countersign_tests::postgres::sql(url).await;
    sql.query_one(
        "SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema()",
        &[],
    )
    .await
    .unwrap()
    .get(0)
}

/// Caught on main (issue 28, item 10): `verify --database-url` pointed at a database with no
/// countersign store created the tables, found nothing wrong in them and exited 0 — a false
/// green for a mistyped URL or schema. `verify` creates and migrates nothing: it says there is
/// no store (exit 2) and the schema stays empty; a real store still verifies (exit 0).
#[tokio::test]
async fn sc_ops_02_verify_of_an_empty_postgres_schema_finds_no_store_and_creates_nothing() {
    let url = countersign_tests::postgres::fresh_url("verify-empty").await;
    let out = verify(&["--database-url".as_ref(), url.as_ref()]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("no countersign store here"),
        "{}",
        text(&out)
    );
    assert_eq!(tables(&url).await, 0, "verify created nothing");

    countersign::store::postgres::PostgresStore::connect(&url, &Default::default())
        .await
        .unwrap();
    let out = verify(&["--database-url".as_ref(), url.as_ref()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));

    // A schema of another version is named, and left at it: verify migrates nothing.
    let sql = countersign_tests::postgres::sql(&url).await;
    let version = "SELECT max(version) FROM countersign_schema";
    let known: i64 = sql.query_one(version, &[]).await.unwrap().get(0);
    sql.execute(
        "DELETE FROM countersign_schema WHERE version = $1",
        &[&known],
    )
    .await
    .unwrap();
    let out = verify(&["--database-url".as_ref(), url.as_ref()]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("older than this binary's"),
        "{}",
        text(&out)
    );
    let after: Option<i64> = sql.query_one(version, &[]).await.unwrap().get(0);
    assert_eq!(after, (known > 1).then_some(known - 1), "not migrated");
}

/// Caught on main (issue 28, item 10): SQLite refused a missing file, but an existing file that
/// holds no countersign store (empty, or another program's database) was given the tables and
/// passed. Now it is refused as the missing file is (exit 2), and left as it was.
#[test]
fn sc_ops_02_verify_of_a_file_without_a_store_finds_none_and_creates_nothing() {
    let dir = temp("verify-none");
    let empty = dir.join("empty.db");
    std::fs::write(&empty, b"").unwrap();
    let other = dir.join("other.db");
    let _ = std::fs::remove_file(&other);
    rusqlite::Connection::open(&other)
        .unwrap()
        .execute_batch("CREATE TABLE notes (body TEXT)")
        .unwrap();
    for db in [&empty, &other] {
        let before = std::fs::read(db).unwrap();
        let out = verify(&["--db".as_ref(), db.as_os_str()]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(
            text(&out).contains("no countersign store here"),
            "{}",
            text(&out)
        );
        assert_eq!(
            std::fs::read(db).unwrap(),
            before,
            "{} unchanged",
            db.display()
        );
    }
}

/// SC-OPS-05: the server's binary says what it is; `countersign-local`, its former name, is
/// still built and is the same program (scripts and units written before the rename keep working).
#[test]
fn sc_ops_05_the_server_is_countersign_server_and_countersign_local_its_alias() {
    let help = text(&local(&["--help".as_ref()]));
    assert!(help.contains("Usage: countersign-server"), "{help}");
    let alias = Command::new(env!("CARGO_BIN_EXE_countersign-local"))
        .arg("--help")
        .output()
        .unwrap();
    assert!(alias.status.success());
    // Usage lines name the binary as it was run.
    let alias = text(&alias).replace("Usage: countersign-local", "Usage: countersign-server");
    assert_eq!(alias, help, "the alias is the same program");
}
