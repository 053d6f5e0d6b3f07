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
