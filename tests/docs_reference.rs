//! The reference docs held to the code (issue 30, item 7).
//!
//! `docs/configuration.md` names every field the config loader reads, in the section of its
//! table, with a default and an example, and every value of the loader's closed enums. The
//! fields are collected from the loader's own source (`shared/src/config/*.rs`): every struct
//! that derives `Deserialize`, walked from `RawConfig` as serde reads it, so a field added to the
//! loader fails this test until the page names it. Caught on main: no such page existed
//! (`[server] public_url`, `[notify]` and `signing` were described only in other pages).
//!
//! The README's API table names every route of `api::ROUTES`. Caught on main: it lacked
//! `POST /mcp`, `POST /v1/policy/explain` and `GET /ui/{asset}`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use syn::{
    punctuated::Punctuated, Attribute, Fields, GenericArgument, Item, Meta, PathArguments, Token,
    Type,
};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ is inside the repo")
        .to_path_buf()
}

fn read(path: &str) -> String {
    std::fs::read_to_string(repo().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// One field as the document spells it, with its innermost type: a raw struct's name when the
/// field is a table (or a list or map of them).
#[derive(Debug)]
struct Field {
    name: String,
    ty: String,
    flatten: bool,
}

/// What the loader reads: each raw struct's fields, and each closed enum's values.
#[derive(Default)]
struct Loader {
    structs: BTreeMap<String, Vec<Field>>,
    values: BTreeMap<String, Vec<String>>,
}

/// The `#[serde(...)]` entries of some attributes, as `name` or `name = "value"` pairs.
fn serde_args(attrs: &[Attribute]) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    for attr in attrs.iter().filter(|a| a.path().is_ident("serde")) {
        let metas = attr
            .parse_args_with(Punctuated::<Meta, Token![,]>::parse_terminated)
            .expect("serde attribute");
        for meta in metas {
            let name = meta.path().get_ident().expect("serde key").to_string();
            let value = match &meta {
                Meta::NameValue(nv) => match &nv.value {
                    syn::Expr::Lit(syn::ExprLit {
                        lit: syn::Lit::Str(s),
                        ..
                    }) => Some(s.value()),
                    _ => None,
                },
                _ => None,
            };
            out.push((name, value));
        }
    }
    out
}

fn derives_deserialize(attrs: &[Attribute]) -> bool {
    attrs
        .iter()
        .filter(|a| a.path().is_ident("derive"))
        .any(|a| {
            a.parse_args_with(Punctuated::<syn::Path, Token![,]>::parse_terminated)
                .expect("derive list")
                .iter()
                .any(|p| p.segments.last().is_some_and(|s| s.ident == "Deserialize"))
        })
}

/// The innermost named type: `Option<Vec<x::RawKey>>` and `BTreeMap<String, RawTool>` → the
/// struct's name (a map's value, the last type argument).
fn innermost(ty: &Type) -> String {
    let Type::Path(path) = ty else {
        return String::new();
    };
    let last = path.path.segments.last().expect("a type name");
    if let PathArguments::AngleBracketed(args) = &last.arguments {
        if let Some(GenericArgument::Type(inner)) = args.args.iter().last() {
            return innermost(inner);
        }
    }
    last.ident.to_string()
}

/// A serde `rename_all` applied to a variant's name.
fn renamed(variant: &str, rule: Option<&str>) -> String {
    let words = variant
        .chars()
        .enumerate()
        .fold(String::new(), |mut s, (i, c)| {
            if c.is_uppercase() && i > 0 {
                s.push(' ');
            }
            s.extend(c.to_lowercase());
            s
        });
    match rule {
        Some("snake_case") => words.replace(' ', "_"),
        Some("kebab-case") => words.replace(' ', "-"),
        None => variant.to_owned(),
        Some(other) => panic!("teach this test serde(rename_all = {other:?})"),
    }
}

/// Every struct and enum of the loader that serde reads.
fn loader() -> Loader {
    let mut loader = Loader::default();
    for entry in std::fs::read_dir(repo().join("shared/src/config")).unwrap() {
        let path = entry.unwrap().path();
        let file = syn::parse_file(&std::fs::read_to_string(&path).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        for item in file.items {
            match item {
                Item::Struct(s) if derives_deserialize(&s.attrs) => {
                    let Fields::Named(named) = &s.fields else {
                        panic!("{}: a raw table has named fields", s.ident);
                    };
                    for (key, _) in serde_args(&s.attrs) {
                        // Field names as written; a struct-wide rename would change them.
                        assert!(
                            matches!(key.as_str(), "deny_unknown_fields" | "default"),
                            "{}: teach this test serde({key})",
                            s.ident
                        );
                    }
                    let fields = named.named.iter().filter_map(field).collect();
                    loader.structs.insert(s.ident.to_string(), fields);
                }
                Item::Enum(e) if derives_deserialize(&e.attrs) => {
                    let args = serde_args(&e.attrs);
                    let rule = args.iter().find(|(k, _)| k == "rename_all");
                    let rule = rule.and_then(|(_, v)| v.as_deref());
                    let values = e.variants.iter().map(|v| {
                        let own = serde_args(&v.attrs)
                            .into_iter()
                            .find(|(k, _)| k == "rename");
                        own.and_then(|(_, v)| v)
                            .unwrap_or_else(|| renamed(&v.ident.to_string(), rule))
                    });
                    loader.values.insert(e.ident.to_string(), values.collect());
                }
                _ => {}
            }
        }
    }
    loader
}

/// A struct field as serde reads it; `None` for one it never reads.
fn field(f: &syn::Field) -> Option<Field> {
    let mut name = f.ident.as_ref().expect("named").to_string();
    let mut flatten = false;
    for (key, value) in serde_args(&f.attrs) {
        match (key.as_str(), value) {
            ("rename", Some(v)) => name = v,
            ("flatten", _) => flatten = true,
            ("skip" | "skip_deserializing", _) => return None,
            ("default" | "skip_serializing_if" | "with" | "deserialize_with", _) => {}
            (other, _) => panic!("{name}: teach this test serde({other})"),
        }
    }
    Some(Field {
        name,
        ty: innermost(&f.ty),
        flatten,
    })
}

/// `(table, field)` for every field of the document, from `RawConfig` down: a table is named by
/// its keys without the names the writer chooses (`tenants.keys` for `[[tenants.<name>.keys]]`).
fn document_fields(loader: &Loader) -> Vec<(String, String)> {
    fn walk(loader: &Loader, table: &str, ty: &str, out: &mut Vec<(String, String)>) {
        for f in &loader.structs[ty] {
            let opens = Some(f.ty.as_str()).filter(|t| loader.structs.contains_key(*t));
            match (opens, f.flatten) {
                (Some(inner), true) => walk(loader, table, inner, out),
                (Some(inner), false) => {
                    let path = match table {
                        "" => f.name.clone(),
                        _ => format!("{table}.{}", f.name),
                    };
                    walk(loader, &path, inner, out);
                }
                (None, _) => out.push((table.to_owned(), f.name.clone())),
            }
        }
    }
    let mut out = Vec::new();
    walk(loader, "", "RawConfig", &mut out);
    out
}

/// The page's sections by table: a heading's first code span, `[[tenants.<name>.keys]]` →
/// `tenants.keys`, with the lines under it.
fn sections(page: &str) -> BTreeMap<String, Vec<&str>> {
    let mut out: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    let mut current = None;
    for line in page.lines() {
        if line.starts_with('#') {
            current = line.split('`').nth(1).map(|code| {
                code.trim_matches(|c| c == '[' || c == ']')
                    .split('.')
                    .filter(|s| !s.trim_matches('"').starts_with('<'))
                    .collect::<Vec<_>>()
                    .join(".")
            });
            continue;
        }
        if let Some(table) = &current {
            out.entry(table.clone()).or_default().push(line);
        }
    }
    out
}

#[test]
fn issue30_the_configuration_page_names_every_field_with_a_default_and_an_example() {
    let loader = loader();
    let fields = document_fields(&loader);
    assert!(
        fields.len() > 40,
        "the walk found the loader's fields: {fields:?}"
    );
    let page = read("docs/configuration.md");
    let sections = sections(&page);
    let mut missing = Vec::new();
    for (table, name) in &fields {
        let row = sections.get(table).and_then(|lines| {
            lines
                .iter()
                .find(|l| l.starts_with(&format!("| `{name}` |")))
        });
        let Some(row) = row else {
            missing.push(format!(
                "[{table}] {name}: no row `| `{name}` | default | example | … |`"
            ));
            continue;
        };
        // | field | default | example | what it does |
        let cells: Vec<&str> = row.trim_matches('|').split(" | ").map(str::trim).collect();
        if cells.len() != 4 || cells.iter().any(|c| c.is_empty()) {
            missing.push(format!("[{table}] {name}: the row needs four cells: {row}"));
        }
    }
    for (name, values) in &loader.values {
        for value in values {
            if !page.contains(&format!("\"{value}\"")) {
                missing.push(format!("{name}: the value \"{value}\" is not named"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "docs/configuration.md:\n{}",
        missing.join("\n")
    );
}

#[test]
fn issue30_the_configuration_pages_whole_document_loads() {
    let page = read("docs/configuration.md");
    let example = page
        .split("## A whole document")
        .nth(1)
        .and_then(|rest| rest.split("```toml\n").nth(1))
        .and_then(|rest| rest.split("```").next())
        .expect("docs/configuration.md ends with a whole document in a toml block");
    let config = countersign::config::Config::from_toml(example).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(config.tenant("acme").map(|t| t.tools.len()), Some(1));
}

#[test]
fn issue30_the_readme_links_the_configuration_page() {
    let readme = read("README.md");
    assert!(
        readme.contains("](docs/configuration.md)"),
        "README.md links docs/configuration.md"
    );
}

#[test]
fn issue30_the_readme_api_table_lists_every_route() {
    let readme = read("README.md");
    let table = readme
        .split("\n## The API\n")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("README.md has a section \"## The API\"");
    let missing: Vec<String> = countersign::api::ROUTES
        .iter()
        .map(|(method, path, _)| {
            // As the contract does, the stop scope is named for what it is.
            format!("`{method} {}", path.replace("{scope}", "{agent_id or *}"))
        })
        .filter(|route| !names(table, route))
        .collect();
    assert!(
        missing.is_empty(),
        "README.md's API table lacks {missing:?}"
    );
}

/// `route` appears whole: not as the start of a longer path (`GET /v1/actions` in
/// `GET /v1/actions/{id}`), but followed by its query or the end of its code span.
fn names(text: &str, route: &str) -> bool {
    text.match_indices(route).any(|(i, _)| {
        let next = text[i + route.len()..].chars().next();
        matches!(next, Some('`' | '?' | ' '))
    })
}
