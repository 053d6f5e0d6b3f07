//! What each room may not import (docs/architecture.md), read from the source files: the paths
//! a file names (`use` declarations, paths in code and attributes), comments and string
//! literals left out. A rule broken today is listed in [`KNOWN_DEBTS`], and only there.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The rooms of the shared crate a room may not name, and whether it may name crates that do
/// I/O (a runtime, HTTP, a database, AWS).
const RULES: &[Rule] = &[
    // The floor: pure types and rules. It names no other room and no crate that does I/O.
    Rule {
        room: "domain",
        not: &[
            "api",
            "clock",
            "config",
            "engine",
            "error",
            "identity",
            "notify",
            "operate",
            "store",
            "target",
            "telemetry",
            "tools",
            "wake",
        ],
        io: false,
        only: &[],
    },
    // The configuration and the small services: the domain and one another, nothing above.
    Rule {
        room: "config",
        not: ABOVE_THE_DOCUMENT,
        io: true,
        only: &[],
    },
    Rule {
        room: "clock",
        not: ABOVE_THE_DOCUMENT,
        io: true,
        only: &[],
    },
    Rule {
        room: "telemetry",
        not: ABOVE_THE_DOCUMENT,
        io: true,
        only: &[],
    },
    Rule {
        room: "target",
        not: ABOVE_THE_DOCUMENT,
        io: true,
        only: &[],
    },
    // The engine's error, on the engine's floor: it takes the store's and the domain's
    // refusals in, and the API maps it out.
    Rule {
        room: "error",
        not: &[
            "api", "engine", "identity", "notify", "operate", "tools", "wake",
        ],
        io: true,
        only: &[],
    },
    // The use cases know the ports, never the HTTP edge or a composition root.
    Rule {
        room: "engine",
        not: &["api"],
        io: true,
        only: &[],
    },
    // The adapters serve the engine; none of them calls it, the edge or a composition root.
    Rule {
        room: "store",
        not: &["api", "engine"],
        io: true,
        only: &[],
    },
    Rule {
        room: "wake",
        not: &["api", "engine"],
        io: true,
        only: &[],
    },
    Rule {
        room: "tools",
        not: &["api", "engine"],
        io: true,
        only: &[],
    },
    // The notifier, a room of its own: of the store it knows the outbox port alone.
    Rule {
        room: "notify",
        not: &["api", "engine", "operate"],
        io: true,
        only: &[("store", &["Outbox", "StoreError"])],
    },
    // Operator features (`verify`, `policy test`): they read through the ports and ask the
    // domain, beside the engine rather than through it; they serve no HTTP and wire nothing.
    Rule {
        room: "operate",
        not: &["api", "engine", "notify"],
        io: true,
        only: &[],
    },
    // Token verification: the config's principals and the HTTP client rules, never the edge,
    // the use cases or the stores.
    Rule {
        room: "identity",
        not: &["api", "engine", "store", "tools", "wake"],
        io: true,
        only: &[],
    },
];

/// The rooms above the configuration and the small services (`config/`, `clock.rs`,
/// `telemetry.rs`, `target.rs`), which none of those names.
const ABOVE_THE_DOCUMENT: &[&str] = &[
    "api", "engine", "error", "identity", "notify", "operate", "store", "tools", "wake",
];

/// The composition roots (`boot/`: the self-hosted server, the Lambda wiring, the engine a
/// process serves): they wire every other room, and no room of the crate names them — only the
/// binaries under `functions/` (and the tests) do.
const ROOTS: &str = "boot";

/// Production files longer than this say in their first lines — the module's `//!` comment —
/// why they are one room, in words that contain "one room" or "500 lines".
const MAX_LINES: usize = 500;

/// Known debts: what broke the rules when this test was written (issue 29), each to be paid by
/// splitting the file or moving the import — never added to. An entry whose violation is gone
/// fails the test too ("paid"), so the list only shrinks.
const KNOWN_DEBTS: &[(&str, &str)] = &[];

struct Rule {
    room: &'static str,
    not: &'static [&'static str],
    io: bool,
    /// Rooms the room may name only these items of (`("store", &["Outbox"])`: the port alone).
    only: &'static [(&'static str, &'static [&'static str])],
}

/// Crates that do I/O: the runtime, HTTP, databases, AWS.
fn does_io(krate: &str) -> bool {
    const NAMES: &[&str] = &[
        "axum",
        "deadpool_postgres",
        "hyper",
        "postgres_types",
        "reqwest",
        "rusqlite",
        "tower",
    ];
    NAMES.contains(&krate)
        || ["tokio", "aws_", "lambda_"]
            .iter()
            .any(|p| krate.starts_with(p))
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ is inside the repo")
        .to_path_buf()
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files.sort();
    files
}

fn relative(path: &Path) -> String {
    path.strip_prefix(repo()).unwrap().display().to_string()
}

/// Source text as tokens, comments and the contents of string and char literals gone.
#[derive(Debug, Clone, PartialEq)]
enum Token {
    Ident(String),
    /// `::`
    Sep,
    Open,
    Close,
    Comma,
    Other,
}

fn tokens(source: &str) -> Vec<Token> {
    let s: Vec<char> = source.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        let next = s.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < s.len() && s[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < s.len() {
                if s[i] == '/' && s.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if s[i] == '*' && s.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if c == '"' {
            i = string_end(&s, i + 1);
            out.push(Token::Other);
        } else if (c == 'r' || c == 'b') && raw_string_at(&s, i).is_some() {
            i = raw_string_at(&s, i).unwrap();
            out.push(Token::Other);
        } else if c == '\'' {
            // A char literal ('x', '\n', '\u{1F}'), or a lifetime ('a), which has no closing quote.
            let close = if next == Some('\\') {
                s[i + 3..]
                    .iter()
                    .position(|&c| c == '\'')
                    .map(|p| i + 3 + p)
            } else {
                (s.get(i + 2) == Some(&'\'')).then_some(i + 2)
            };
            i = close.map_or(i + 1, |end| end + 1);
            out.push(Token::Other);
        } else if c.is_whitespace() {
            i += 1;
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < s.len() && (s[i].is_alphanumeric() || s[i] == '_') {
                i += 1;
            }
            out.push(Token::Ident(s[start..i].iter().collect()));
        } else {
            out.push(match (c, next) {
                (':', Some(':')) => {
                    i += 1;
                    Token::Sep
                }
                ('{', _) => Token::Open,
                ('}', _) => Token::Close,
                (',', _) => Token::Comma,
                _ => Token::Other,
            });
            i += 1;
        }
    }
    out
}

/// The index after a string's closing quote; `i` is just after the opening one.
fn string_end(s: &[char], mut i: usize) -> usize {
    while i < s.len() && s[i] != '"' {
        i += if s[i] == '\\' { 2 } else { 1 };
    }
    i + 1
}

/// The end of a raw string (`r"…"`, `r#"…"#`, `br"…"`) starting at `i`, if one does.
fn raw_string_at(s: &[char], i: usize) -> Option<usize> {
    let mut j = i + usize::from(s[i] == 'b');
    if s.get(j) != Some(&'r') || (i > 0 && (s[i - 1].is_alphanumeric() || s[i - 1] == '_')) {
        return None;
    }
    j += 1;
    let hashes = s[j..].iter().take_while(|&&c| c == '#').count();
    j += hashes;
    if s.get(j) != Some(&'"') {
        return None;
    }
    let close: Vec<char> = std::iter::once('"')
        .chain(std::iter::repeat_n('#', hashes))
        .collect();
    (j + 1..s.len())
        .find(|&k| s[k..].starts_with(&close))
        .map(|k| k + close.len())
}

/// Every path the tokens name, whole (`use a::{b::c, d}` is `a::b::c` and `a::d`), with the
/// number of inline `mod x { … }` it sits in (their `super` stays in the file).
fn paths(tokens: &[Token]) -> Vec<(Vec<String>, usize)> {
    let mut inline = Vec::new();
    let mut depth = 0usize;
    let mut out = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        match &tokens[i] {
            Token::Ident(m)
                if m == "mod"
                    && matches!(tokens.get(i + 1), Some(Token::Ident(_)))
                    && tokens.get(i + 2) == Some(&Token::Open) =>
            {
                inline.push(depth);
                depth += 1;
                i += 3;
                continue;
            }
            Token::Open => depth += 1,
            Token::Close => {
                depth = depth.saturating_sub(1);
                if inline.last() == Some(&depth) {
                    inline.pop();
                }
            }
            Token::Ident(_)
                if tokens.get(i + 1) == Some(&Token::Sep)
                    && (i == 0 || tokens[i - 1] != Token::Sep) =>
            {
                let mut found = Vec::new();
                let (end, opened) = path_at(tokens, i, &[], &mut found);
                out.extend(found.into_iter().map(|p| (p, inline.len())));
                depth += opened;
                i = end;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// The path starting at `i` under `prefix` into `found`; the index after it, and braces opened
/// and not closed (none: a group's braces close inside).
fn path_at(
    tokens: &[Token],
    mut i: usize,
    prefix: &[String],
    found: &mut Vec<Vec<String>>,
) -> (usize, usize) {
    let mut path = prefix.to_vec();
    while let Some(Token::Ident(segment)) = tokens.get(i) {
        path.push(segment.clone());
        i += 1;
        if tokens.get(i) != Some(&Token::Sep) {
            break;
        }
        i += 1;
        if tokens.get(i) == Some(&Token::Open) {
            // A group: each item a path under this one, up to its comma or the closing brace.
            i += 1;
            while i < tokens.len() && tokens[i] != Token::Close {
                if matches!(tokens[i], Token::Ident(_)) {
                    i = path_at(tokens, i, &path, found).0;
                }
                while i < tokens.len() && !matches!(tokens[i], Token::Comma | Token::Close) {
                    i += 1;
                }
                if tokens.get(i) == Some(&Token::Comma) {
                    i += 1;
                }
            }
            return (i + 1, 0);
        }
    }
    found.push(path);
    (i, 0)
}

/// A file of the shared crate: its module path (`shared/src/domain/condition/bind.rs` is
/// `domain::condition::bind`) and its room, the first of those.
fn module_of(file: &str) -> Vec<String> {
    let inside = file
        .strip_prefix("shared/src/")
        .expect("a file of the shared crate");
    let mut parts: Vec<String> = inside
        .trim_end_matches(".rs")
        .split('/')
        .map(String::from)
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts
}

/// The crate-root names `lib.rs` hands on (`pub use engine::Engine;`), with their room.
fn root_names(lib: &str) -> BTreeMap<String, String> {
    paths(&tokens(lib))
        .into_iter()
        .filter(|(p, _)| p.len() == 2)
        .map(|(p, _)| (p[1].clone(), p[0].clone()))
        .collect()
}

/// What a file names: rooms of the crate (as `room:x`) and other crates (as `crate:x`).
fn named_by(file: &str, source: &str, roots: &BTreeMap<String, String>) -> Vec<String> {
    let module = module_of(file);
    let mut named = Vec::new();
    for (path, inline) in paths(&tokens(source)) {
        let supers = path.iter().take_while(|s| *s == "super").count();
        let first = path[0].as_str();
        let room_named = if first == "crate" {
            path.get(1).cloned()
        } else if supers > inline && supers - inline >= module.len() {
            // `super` up to the crate root, then the room.
            path.get(supers).cloned()
        } else if first == "super" || first == "self" {
            None // within the file's own room
        } else {
            if !matches!(first, "std" | "core" | "alloc" | "Self") {
                named.push(format!("crate:{first}"));
            }
            None
        };
        if let Some(name) = room_named {
            let at = path.iter().position(|s| *s == name).unwrap_or(0);
            let room = roots.get(&name).cloned().unwrap_or(name);
            if let Some(item) = path.get(at + 1) {
                named.push(format!("item:{room}::{item}"));
            }
            named.push(format!("room:{room}"));
        }
    }
    named.sort();
    named.dedup();
    named
}

/// What the rules say of one file of the shared crate: each broken rule as "names x".
fn broken(file: &str, source: &str, roots: &BTreeMap<String, String>) -> Vec<String> {
    let module = module_of(file);
    let named = named_by(file, source, roots);
    let mut found: Vec<String> = named
        .iter()
        .filter(|n| *n == &format!("room:{ROOTS}") && module.first().is_some_and(|m| m != ROOTS))
        .map(|_| format!("names {ROOTS}"))
        .collect();
    let Some(rule) = RULES
        .iter()
        .find(|r| module.first().is_some_and(|m| m == r.room))
    else {
        return found;
    };
    found.extend(named.into_iter().filter_map(|n| match n.split_once(':') {
        Some(("room", r)) if rule.not.contains(&r) => Some(format!("names {r}")),
        Some(("crate", c)) if !rule.io && does_io(c) => Some(format!("names {c}")),
        Some(("item", i)) => {
            let (room, item) = i.split_once("::")?;
            let (_, allowed) = rule.only.iter().find(|(r, _)| *r == room)?;
            (!allowed.contains(&item)).then(|| format!("names {room}::{item}"))
        }
        _ => None,
    }));
    found.sort();
    found.dedup();
    found
}

/// Files that only tests compile: `#[cfg(test)] mod x;` names `x.rs` beside its parent's
/// module folder.
fn test_only(files: &[PathBuf]) -> Vec<PathBuf> {
    let mut only = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(file).unwrap();
        let lines: Vec<&str> = text.lines().map(str::trim).collect();
        for pair in lines.windows(2) {
            let Some(name) = pair[1]
                .strip_prefix("mod ")
                .and_then(|m| m.strip_suffix(';'))
            else {
                continue;
            };
            if !only_for_tests(pair[0]) {
                continue;
            }
            let stem = file.file_stem().unwrap().to_str().unwrap();
            let folder = match stem {
                "mod" | "lib" | "main" => file.parent().unwrap().to_path_buf(),
                _ => file.with_extension(""),
            };
            only.push(folder.join(format!("{name}.rs")));
            only.push(folder.join(name).join("mod.rs"));
        }
    }
    only
}

/// `#[cfg(test)]`, `#[cfg(all(test, feature = "embedded"))]`: what follows is only for tests.
fn only_for_tests(line: &str) -> bool {
    let line = line.trim();
    line.starts_with("#[cfg(") && !line.contains("not(") && line.contains("test")
}

/// A file's lines before its inline test module (`#[cfg(test)]` then `mod tests {`).
fn production_lines(text: &str) -> usize {
    let lines: Vec<&str> = text.lines().collect();
    lines
        .windows(2)
        .position(|w| only_for_tests(w[0]) && w[1].trim_start().starts_with("mod tests {"))
        .unwrap_or(lines.len())
}

/// Whether the module's opening `//!` comment says why the file is one room.
fn says_one_room(text: &str) -> bool {
    let doc: String = text
        .lines()
        .map_while(|l| l.trim_start().strip_prefix("//!"))
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase();
    doc.contains("one room") || doc.contains("500 lines")
}

/// Every violation of the rules in the repository, as (file, what).
fn violations() -> Vec<(String, String)> {
    let shared = repo().join("shared/src");
    let roots = root_names(&std::fs::read_to_string(shared.join("lib.rs")).unwrap());
    let mut found = Vec::new();
    let mut production = rust_files(&shared);
    for entry in std::fs::read_dir(repo().join("functions")).unwrap() {
        let src = entry.unwrap().path().join("src");
        if src.is_dir() {
            production.extend(rust_files(&src));
        }
    }
    for file in rust_files(&shared) {
        let text = std::fs::read_to_string(&file).unwrap();
        let name = relative(&file);
        found.extend(
            broken(&name, &text, &roots)
                .into_iter()
                .map(|w| (name.clone(), w)),
        );
    }
    let tests = test_only(&production);
    for file in production.iter().filter(|f| !tests.contains(f)) {
        let text = std::fs::read_to_string(file).unwrap();
        if production_lines(&text) > MAX_LINES && !says_one_room(&text) {
            found.push((relative(file), format!("over {MAX_LINES} lines")));
        }
    }
    found
}

/// The folders whose modules import one another one way only: every folder of the shared crate
/// (`config`, `domain`, `store/dynamodb`, …), read from the disk so a new one is checked too. No
/// module of a folder reaches itself again through the others' imports (`domain::action` →
/// `domain::context` → `domain::action` was one, through `Quorum`; `config::policy` →
/// `config::tenant` → `config::policy` another, through `Principal`).
fn folders(dir: &Path, at: &[String]) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            let mut room = at.to_vec();
            room.push(path.file_name().unwrap().to_str().unwrap().to_owned());
            found.extend(folders(&path, &room));
            found.push(room);
        }
    }
    found.sort();
    found
}

/// The modules a room is made of: its first-level files and folders (`domain/condition/` is
/// `condition`), `mod.rs` aside.
fn modules_of(room: &Path) -> BTreeSet<String> {
    std::fs::read_dir(room)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir() || p.extension().is_some_and(|e| e == "rs"))
        .map(|p| p.file_stem().unwrap().to_str().unwrap().to_owned())
        .filter(|m| m != "mod")
        .collect()
}

/// Which of the room's modules each of its modules names, outside tests: paths written from the
/// crate (`crate::domain::window::Window`) or up from the file (`super::window::Window`), and
/// names the room's `mod.rs` hands on (`crate::domain::Action`, `super::Window`) taken to the
/// module they come from. Nested modules count as their first-level module.
fn module_imports(
    room: &[String],
    files: &[(String, String)],
    modules: &BTreeSet<String>,
) -> BTreeMap<String, BTreeSet<String>> {
    let n = room.len();
    let handed_on: BTreeMap<String, String> = files
        .iter()
        .filter(|(f, _)| module_of(f) == room)
        .flat_map(|(_, text)| paths(&tokens(text)))
        .filter(|(p, _)| p.len() == 2 && modules.contains(&p[0]))
        .map(|(p, _)| (p[1].clone(), p[0].clone()))
        .collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (file, text) in files {
        let module = module_of(file);
        if module.len() <= n || !module.starts_with(room) {
            continue;
        }
        for (path, inline) in paths(&tokens(text)) {
            if inline > 0 {
                continue; // an inline module: the file's tests
            }
            let supers = path.iter().take_while(|s| *s == "super").count();
            let within: Vec<String> = if path[0] == "crate" {
                path[1..].to_vec()
            } else if path[0] == "self" {
                module.iter().chain(&path[1..]).cloned().collect()
            } else if supers > 0 && supers < module.len() {
                module[..module.len() - supers]
                    .iter()
                    .chain(&path[supers..])
                    .cloned()
                    .collect()
            } else {
                continue;
            };
            if within.len() <= n || !within.starts_with(room) {
                continue;
            }
            let target = if modules.contains(&within[n]) {
                within[n].clone()
            } else if let Some(m) = handed_on.get(&within[n]) {
                m.clone()
            } else {
                continue;
            };
            if target != module[n] {
                edges.entry(module[n].clone()).or_default().insert(target);
            }
        }
    }
    edges
}

/// A circle in `edges`, as the modules along it (`a → b → a`), if there is one.
fn circle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn walk(
        at: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        trail: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = trail.iter().position(|m| m == at) {
            let mut found = trail[i..].to_vec();
            found.push(at.to_owned());
            return Some(found);
        }
        if done.contains(at) {
            return None;
        }
        trail.push(at.to_owned());
        for next in edges.get(at).into_iter().flatten() {
            if let Some(found) = walk(next, edges, trail, done) {
                return Some(found);
            }
        }
        trail.pop();
        done.insert(at.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    edges
        .keys()
        .find_map(|m| walk(m, edges, &mut Vec::new(), &mut done))
}

/// The shared crate's production files (tests-only files left out), as (path, text).
fn production_files() -> Vec<(String, String)> {
    let files = rust_files(&repo().join("shared/src"));
    let tests = test_only(&files);
    files
        .iter()
        .filter(|f| !tests.contains(f))
        .map(|f| (relative(f), std::fs::read_to_string(f).unwrap()))
        .collect()
}

/// Issue 29: inside each folder of the shared crate the imports run one way — no module reaches
/// itself again through its imports (docs/architecture.md: "no import circle").
#[test]
fn issue29_imports_inside_a_room_run_one_way() {
    let files = production_files();
    let shared = repo().join("shared/src");
    let rooms = folders(&shared, &[]);
    for room in [
        "config", "domain", "engine", "api", "store", "boot", "api/mcp",
    ] {
        let room: Vec<String> = room.split('/').map(String::from).collect();
        assert!(rooms.contains(&room), "{room:?}: a folder of the crate");
    }
    let mut circles = Vec::new();
    for room in &rooms {
        let modules = modules_of(&shared.join(room.join("/")));
        if let Some(found) = circle(&module_imports(room, &files, &modules)) {
            circles.push(format!("{}: {}", room.join("/"), found.join(" → ")));
        }
    }
    assert!(
        circles.is_empty(),
        "import circles (move the shared type to the module both need, below them):\n{}",
        circles.join("\n")
    );
}

/// The circle check reads both spellings of a path and the room's re-exports, and skips tests.
#[test]
fn issue29_the_circle_check_sees_a_circle() {
    let modules: BTreeSet<String> = ["a", "b", "c"].map(String::from).into();
    let file = |name: &str, text: &str| (format!("shared/src/room/{name}"), text.to_owned());
    let files = [
        file(
            "mod.rs",
            "pub mod a; pub mod b; pub mod c; pub use c::Thing;",
        ),
        file("a.rs", "use super::b::B;"),
        file("b.rs", "fn f() -> crate::room::Thing { todo!() }"),
        file("c/mod.rs", "mod deep;"),
        file(
            "c/deep.rs",
            "use super::super::a::A; #[cfg(test)] mod tests { use super::super::super::b; }",
        ),
    ];
    let room = ["room".to_owned()];
    let edges = module_imports(&room, &files, &modules);
    assert_eq!(
        circle(&edges).unwrap(),
        ["a", "b", "c", "a"].map(String::from)
    );
    let one_way = &files[..3];
    assert_eq!(circle(&module_imports(&room, one_way, &modules)), None);
    assert_eq!(edges["c"], ["a"].map(String::from).into());
    // A folder inside a room is checked the same way (`store/dynamodb`: item → records → item
    // was one, through a re-export).
    let inner: BTreeSet<String> = ["deep", "other"].map(String::from).into();
    let nested = [
        file("c/mod.rs", "mod deep; mod other; pub(super) use other::Q;"),
        file("c/deep.rs", "use super::Q;"),
        file("c/other.rs", "use crate::room::c::deep::P;"),
    ];
    let folder = ["room", "c"].map(String::from);
    assert_eq!(
        circle(&module_imports(&folder, &nested, &inner)).unwrap(),
        ["deep", "other", "deep"].map(String::from)
    );
    let nested_folders = folders(&repo().join("shared/src"), &[]);
    assert!(
        nested_folders.iter().filter(|f| f.len() > 1).count() > 2,
        "nested folders are found: {nested_folders:?}"
    );
}

/// Issue 29: each path the API serves is spelled once, in `api::paths`; the routers, the route
/// table and the OpenAPI annotations name the constant (a second spelling can drift).
#[test]
fn issue29_each_api_path_is_spelled_once() {
    let api = repo().join("shared/src/api");
    let table = std::fs::read_to_string(api.join("mod.rs")).unwrap();
    let paths: Vec<&str> = table
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pub const "))
        .filter_map(|l| l.split_once(": &str = \"")?.1.strip_suffix("\";"))
        .filter(|p| p.starts_with('/'))
        .collect();
    assert!(paths.len() > 10, "the paths of api/mod.rs: {paths:?}");
    let mut spelled = Vec::new();
    for file in rust_files(&api) {
        let text = std::fs::read_to_string(&file).unwrap();
        for path in &paths {
            let n = text.matches(&format!("\"{path}\"")).count();
            if n > 0 {
                spelled.push((relative(&file), *path, n));
            }
        }
    }
    let twice: Vec<String> = spelled
        .iter()
        .filter(|(f, _, n)| *n > 1 || !f.ends_with("api/mod.rs"))
        .map(|(f, p, n)| format!("{f}: \"{p}\" ×{n}"))
        .collect();
    assert!(
        twice.is_empty(),
        "name the constant of api::paths instead:\n{}",
        twice.join("\n")
    );
}

/// Issue 29 (docs/architecture.md): no room but the composition roots (`boot/`) names them; the
/// domain names no other room and no crate that does I/O; the engine names not the HTTP API; the adapters name neither
/// the engine nor the API; the notifier names of the store only its outbox port; no production file is over 500 lines unless its first lines say why
/// it is one room. Known debts excepted, and only those.
#[test]
fn issue29_each_room_imports_only_what_its_floor_allows() {
    let found = violations();
    let new: Vec<String> = found
        .iter()
        .filter(|(f, w)| !KNOWN_DEBTS.contains(&(f.as_str(), w.as_str())))
        .map(|(f, w)| format!("{f}: {w}"))
        .collect();
    let paid: Vec<String> = KNOWN_DEBTS
        .iter()
        .filter(|(f, w)| !found.iter().any(|(g, v)| g == f && v == w))
        .map(|(f, w)| format!("{f}: {w}"))
        .collect();
    assert!(
        new.is_empty(),
        "rules broken (docs/architecture.md says where the code goes instead):\n{}",
        new.join("\n")
    );
    assert!(
        paid.is_empty(),
        "known debts paid — remove them from KNOWN_DEBTS:\n{}",
        paid.join("\n")
    );
}

/// The scanner finds what a file names however it is spelled, and nothing in comments or
/// strings: the rule above could not fail if it read nothing.
#[test]
fn issue29_the_scanner_reads_paths_not_comments() {
    let roots = root_names(
        "pub mod engine;\npub use engine::Engine;\npub use clock::{Clock, SystemClock};",
    );
    let at = "shared/src/domain/condition/bind.rs";
    let names = |source: &str| broken(at, source, &roots);
    assert_eq!(names("use crate::config::Config;"), ["names config"]);
    assert_eq!(
        names("use crate::{domain::Window, store::{Store, StoreError}};"),
        ["names store"]
    );
    assert_eq!(names("fn f() { crate::engine::run(); }"), ["names engine"]);
    assert_eq!(names("use crate::Engine;"), ["names engine"]);
    assert_eq!(names("use super::super::super::api::x;"), ["names api"]);
    assert_eq!(names("#[tokio::test]\nasync fn t() {}"), ["names tokio"]);
    assert_eq!(
        names("use {reqwest::Client, std::sync::Arc};"),
        ["names reqwest"]
    );
    assert_eq!(
        names("fn f() { let c = reqwest::Client::new(); }"),
        ["names reqwest"]
    );
    assert_eq!(
        names("use aws_sdk_dynamodb::Client;"),
        ["names aws_sdk_dynamodb"]
    );
    // Within the domain, or not code at all.
    let clean = [
        "use super::super::window::Window; use super::CallFacts; use crate::domain::Decision;",
        "// use crate::config::Config;\n/* tokio::spawn /* nested */ crate::store */",
        r##"const S: &str = "crate::engine"; const R: &str = r#"tokio::x"#; const C: char = '"';"##,
        r#"const Q: char = '\''; const B: &[u8] = b"crate::store";"#,
        "fn f<'a>(x: &'a str) -> &'a str { x } mod tests { use super::super::Thing; }",
        "use serde_json::Value; use std::sync::Arc; use cel::Context;",
    ];
    for source in clean {
        assert_eq!(names(source), Vec::<String>::new(), "{source}");
    }
    // The engine may name the store, not the API.
    let engine = |source: &str| broken("shared/src/engine/intake.rs", source, &roots);
    assert_eq!(
        engine("use crate::{store::Store, api::body::Submit};"),
        ["names api"]
    );
    assert_eq!(
        engine("use tokio::sync::watch; use super::commit;"),
        Vec::<String>::new()
    );
    // The configuration and the small services name the domain and one another, nothing above.
    let config = |source: &str| broken("shared/src/config/tenant.rs", source, &roots);
    assert_eq!(
        config("use crate::{domain::policy::Rule, target}; use super::policy;"),
        Vec::<String>::new()
    );
    assert_eq!(config("use crate::store::Store;"), ["names store"]);
    assert_eq!(
        broken("shared/src/clock.rs", "use crate::engine::Engine;", &roots),
        ["names engine"]
    );
    // The engine's error takes the store's in; it names no room above the engine.
    let error = |source: &str| broken("shared/src/error.rs", source, &roots);
    assert_eq!(error("use crate::store::StoreError;"), Vec::<String>::new());
    assert_eq!(error("use crate::api::error::ApiError;"), ["names api"]);
    // The notifier names the outbox port of the store, and nothing else of it.
    let notify = |source: &str| broken("shared/src/notify/mod.rs", source, &roots);
    assert_eq!(
        notify("use crate::store::{Outbox, StoreError}; use crate::target;"),
        Vec::<String>::new()
    );
    assert_eq!(
        notify("use crate::store::{Outbox, Store};"),
        ["names store::Store"]
    );
    assert_eq!(
        notify("fn f(s: &dyn crate::store::Actions) {}"),
        ["names store::Actions"]
    );
    assert_eq!(notify("use crate::Engine;"), ["names engine"]);
    // Only the composition roots name the composition roots; they name what they wire.
    let api = |source: &str| broken("shared/src/api/router.rs", source, &roots);
    assert_eq!(api("use crate::boot::live::Live;"), ["names boot"]);
    assert_eq!(
        api("use crate::{engine::Engine, store::Store};"),
        Vec::<String>::new()
    );
    let root = |source: &str| broken("shared/src/boot/aws/function.rs", source, &roots);
    assert_eq!(
        root("use crate::{api, boot::live::Live, store::dynamodb::DynamoStore};"),
        Vec::<String>::new()
    );
    // A long file passes only where its first lines say why it is one room.
    let long = format!("//! The store.\n{}", "fn f() {}\n".repeat(MAX_LINES + 1));
    assert!(production_lines(&long) > MAX_LINES && !says_one_room(&long));
    let tested = format!(
        "//! x\n#[cfg(test)]\nmod tests {{\n{}}}\n",
        "\n".repeat(MAX_LINES)
    );
    assert_eq!(production_lines(&tested), 1);
    assert_eq!(
        production_lines(&tested.replace("(test)", "(all(test, unix))")),
        1
    );
    assert!(says_one_room(
        "//! The store, one room: every write path shares its savepoint."
    ));
    assert!(says_one_room(
        "//! Items.\n//!\n//! Over 500 lines on purpose: encoding beside decoding."
    ));
    assert!(!says_one_room("//! The store.\nfn f() {} // one room"));
}
