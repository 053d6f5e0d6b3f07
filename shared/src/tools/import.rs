//! `countersign-server tools import`: a downstream MCP server's `tools/list` as catalog entries
//! (`executor = "mcp"`) with the downstream tool's `description`, `inputSchema` and
//! `annotations`. Those fields are part of the tool's fingerprint, so once the import is
//! re-run and loaded, a downstream change after an approval seals `catalog_changed` (SC-RES-04).

use serde_json::Value;

/// Where the imported entries point and how they are named.
pub struct Import<'a> {
    /// The downstream server's Streamable HTTP endpoint.
    pub url: &'a str,
    /// The tenant whose catalog the entries join.
    pub tenant: &'a str,
    /// Put before each downstream name to make the catalog name (`parcel.` → `parcel.deliver`),
    /// so the tenant's policy patterns can match them.
    pub prefix: &'a str,
    /// The environment variable that holds the downstream bearer token (written as `secret_env`).
    pub secret_env: &'a str,
}

/// The catalog TOML for `tools` (a `tools/list` result's entries), one table per tool in name
/// order, and a warning for each thing left out (a tool without a name, a `null` in a schema:
/// TOML has no null).
pub fn catalog_toml(import: &Import<'_>, tools: &[Value]) -> (String, Vec<String>) {
    let mut warnings = Vec::new();
    let mut named: Vec<(&str, &Value)> = Vec::new();
    for tool in tools {
        match tool["name"].as_str() {
            Some(name) if !name.is_empty() => named.push((name, tool)),
            _ => warnings.push(format!("a tool without a name was left out: {tool}")),
        }
    }
    named.sort_by_key(|(name, _)| *name);
    let mut out = format!(
        "# Imported from {} by countersign-server tools import.\n",
        import.url
    );
    for (name, tool) in named {
        let catalog_name = format!("{}{name}", import.prefix);
        out.push_str(&format!(
            "\n[tenants.{}.tools.{}]\n",
            key(import.tenant),
            key(&catalog_name)
        ));
        out.push_str("executor = \"mcp\"\n");
        out.push_str(&format!("url = {}\n", string(import.url)));
        out.push_str(&format!("tool = {}\n", string(name)));
        out.push_str(&format!("secret_env = {}\n", string(import.secret_env)));
        for (field, from) in [
            ("description", "description"),
            ("input_schema", "inputSchema"),
            ("annotations", "annotations"),
        ] {
            let value = &tool[from];
            if value.is_null() {
                continue;
            }
            let mut dropped = Vec::new();
            out.push_str(&format!(
                "{field} = {}\n",
                inline(value, from, &mut dropped)
            ));
            warnings.extend(
                dropped
                    .into_iter()
                    .map(|at| format!("{name}: {at} is null, left out (TOML has no null)")),
            );
        }
    }
    (out, warnings)
}

/// A TOML key: bare when it can be, else quoted.
fn key(k: &str) -> String {
    let bare = !k.is_empty()
        && k.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if bare {
        k.to_owned()
    } else {
        string(k)
    }
}

/// A TOML basic string: a JSON string's escapes (`\"`, `\\`, `\n`, `\uXXXX`, …) are TOML's.
fn string(s: &str) -> String {
    Value::String(s.to_owned()).to_string()
}

/// A JSON value as an inline TOML value; `null`s are left out and their paths noted.
fn inline(value: &Value, at: &str, dropped: &mut Vec<String>) -> String {
    match value {
        Value::Null => {
            dropped.push(at.to_owned());
            String::new()
        }
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => string(s),
        Value::Array(items) => {
            let items: Vec<String> = items
                .iter()
                .enumerate()
                .filter_map(|(i, v)| {
                    let s = inline(v, &format!("{at}[{i}]"), dropped);
                    (!v.is_null()).then_some(s)
                })
                .collect();
            format!("[{}]", items.join(", "))
        }
        Value::Object(fields) => {
            let fields: Vec<String> = fields
                .iter()
                .filter_map(|(k, v)| {
                    let s = inline(v, &format!("{at}.{k}"), dropped);
                    (!v.is_null()).then(|| format!("{} = {s}", key(k)))
                })
                .collect();
            if fields.is_empty() {
                "{}".to_owned()
            } else {
                format!("{{ {} }}", fields.join(", "))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn imported_entries_are_toml_that_reads_back_as_the_downstream_fields() {
        let tools = [json!({
            "name": "send it",
            "description": "Says \"hi\"\nand more",
            "inputSchema": {"type": "object", "properties": {"a-b": {"type": "number", "minimum": 0.5, "default": null}}, "required": ["a-b"]},
        })];
        let import = Import {
            url: "https://tools.example.com/mcp",
            tenant: "acme",
            prefix: "x.",
            secret_env: "TOKEN",
        };
        let (text, warnings) = catalog_toml(&import, &tools);
        let doc: toml::Table = text.parse().unwrap();
        let entry = &doc["tenants"]["acme"]["tools"]["x.send it"];
        assert_eq!(entry["tool"].as_str(), Some("send it"));
        assert_eq!(entry["description"].as_str(), Some("Says \"hi\"\nand more"));
        let schema = serde_json::to_value(&entry["input_schema"]).unwrap();
        assert_eq!(
            schema,
            json!({"type": "object", "properties": {"a-b": {"type": "number", "minimum": 0.5}}, "required": ["a-b"]})
        );
        assert_eq!(warnings.len(), 1, "{warnings:?}");
    }
}
