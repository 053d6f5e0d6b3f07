//! Docs that stand alone (issue 10): every link in the repository's Markdown points at a file
//! of the repository, and nothing refers to the team's folder outside it (`../shared`,
//! `/work/shared`), which a user of the repository does not have.

use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ is inside the repo")
        .to_path_buf()
}

/// The Markdown files a reader opens: README.md and every *.md under docs/, infra/, localstack/.
fn markdown() -> Vec<PathBuf> {
    let mut files = vec![repo().join("README.md")];
    for dir in ["docs", "infra", "localstack"] {
        for entry in std::fs::read_dir(repo().join(dir)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "md") {
                files.push(path);
            }
        }
    }
    files
}

/// `[text](target)` and `![alt](target)` targets.
fn links(text: &str) -> Vec<String> {
    text.match_indices("](")
        .filter_map(|(i, _)| {
            let rest = &text[i + 2..];
            rest.find(')').map(|end| rest[..end].to_owned())
        })
        .collect()
}

#[test]
fn issue10_every_markdown_link_stays_in_the_repository() {
    let mut broken = Vec::new();
    for file in markdown() {
        let text = std::fs::read_to_string(&file).unwrap();
        let name = file.strip_prefix(repo()).unwrap().display().to_string();
        for target in links(&text) {
            let path = target.split('#').next().unwrap();
            if path.is_empty() {
                continue; // an anchor in the same file
            }
            if path.contains("://") || path.starts_with("mailto:") {
                broken.push(format!("{name}: {target} leaves the repository"));
                continue;
            }
            let resolved = file.parent().unwrap().join(path);
            let inside = resolved
                .canonicalize()
                .is_ok_and(|p| p.starts_with(repo().canonicalize().unwrap()));
            if !inside {
                broken.push(format!("{name}: {target} is not a file of the repository"));
            }
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

#[test]
fn issue10_nothing_refers_to_the_team_folder_outside_the_repository() {
    let mut files = markdown();
    for dir in ["scripts", "localstack", "config", "infra"] {
        for entry in std::fs::read_dir(repo().join(dir)).unwrap() {
            files.push(entry.unwrap().path());
        }
    }
    files.push(repo().join(".ci/run"));
    let mut found = Vec::new();
    for file in files.iter().filter(|f| f.is_file()) {
        let Ok(text) = std::fs::read_to_string(file) else {
            continue;
        };
        for needle in [
            "../shared/SPEC",
            "/work/shared",
            "shared/SPEC.md",
            "shared/STYLE.md",
        ] {
            if text.contains(needle) {
                found.push(format!("{}: {needle}", file.display()));
            }
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

fn contract() -> String {
    std::fs::read_to_string(repo().join("docs/contract.md")).unwrap()
}

#[test]
fn issue10_the_contract_lists_every_route_the_api_serves() {
    let contract = contract();
    let missing: Vec<String> = countersign::api::ROUTES
        .iter()
        .map(|(method, path, _)| {
            // The contract names the stop scope for what it is.
            let path = path.replace("{scope}", "{agent_id or *}");
            format!("`{method} {path}")
        })
        .filter(|route| !contract.contains(route.as_str()))
        .collect();
    assert!(missing.is_empty(), "docs/contract.md §3 lacks {missing:?}");
}

#[test]
fn issue10_the_contract_lists_every_error_code_the_api_answers() {
    // The codes as the one error mapping spells them (`api/error.rs`) and the intake refusals.
    let mut codes = Vec::new();
    for file in ["shared/src/api/error.rs", "shared/src/error.rs"] {
        let source = std::fs::read_to_string(repo().join(file)).unwrap();
        for line in source.lines() {
            let is_code =
                line.contains("StatusCode::") || line.trim_start().starts_with("Refusal::");
            if let (true, Some(start)) = (is_code, line.rfind(", \"").or(line.find("=> \""))) {
                let rest = &line[start..];
                let code: String = rest.split('"').nth(1).unwrap_or_default().to_owned();
                if !code.is_empty() && code.chars().all(|c| c.is_ascii_lowercase() || c == '_') {
                    codes.push(code);
                }
            }
        }
    }
    assert!(codes.len() >= 15, "found the codes: {codes:?}");
    let contract = contract();
    let missing: Vec<&String> = codes
        .iter()
        .filter(|c| !contract.contains(&format!("| `{c}` |")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/contract.md's error table lacks {missing:?}"
    );
}
