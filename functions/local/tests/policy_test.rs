//! `countersign-server policy test` (SC-POL-06) as a CI step runs it: the binary, a config and a
//! cases file; its exit status is the verdict.

use std::process::Command;

fn repo(path: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

fn policy_test(cases: &std::path::Path) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_countersign-server"))
        .args(["--config"])
        .arg(repo("config/local.toml"))
        .args(["policy", "test"])
        .arg(cases)
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}

#[test]
fn sc_pol_06_the_sample_policy_passes_its_cases_and_a_mismatch_fails() {
    let (code, text) = policy_test(&repo("config/policy-cases.toml"));
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("ok    a small transfer runs") && text.contains(", 0 failed"),
        "{text}"
    );

    let wrong = std::env::temp_dir().join(format!("policy-cases-{}.toml", std::process::id()));
    std::fs::write(
        &wrong,
        "[[case]]\nname = \"big transfer\"\ntool = \"payments.transfer\"\nargs = { amount = 60000, currency = \"EUR\" }\nexpect = \"allow\"\n",
    )
    .unwrap();
    let (code, text) = policy_test(&wrong);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("FAIL  big transfer: expected allow, got require_approval"),
        "{text}"
    );

    std::fs::write(&wrong, "[[case]]\ntool = \"x\"\n").unwrap();
    let (code, text) = policy_test(&wrong);
    assert_eq!(code, 2, "{text}");
    std::fs::remove_file(&wrong).ok();
}
