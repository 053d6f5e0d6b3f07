//! Human output: aligned tables and an action's details. `--json` bypasses all of this.

use jiff::{tz::TimeZone, Timestamp};
use serde_json::Value;

/// The zone every time is shown in: the tenant's (from `GET /v1/me`), or UTC; always named.
pub struct Zone {
    tz: TimeZone,
    name: String,
}

impl Zone {
    pub fn utc() -> Zone {
        Zone {
            tz: TimeZone::UTC,
            name: "UTC".to_owned(),
        }
    }

    /// The IANA zone `name`, or UTC when this build does not know it.
    pub fn named(name: &str) -> Zone {
        match TimeZone::get(name) {
            Ok(tz) => Zone {
                tz,
                name: name.to_owned(),
            },
            Err(_) => Zone::utc(),
        }
    }

    /// An RFC 3339 instant as "2026-12-01 19:42:10 CET (Europe/Berlin)" — seconds kept, the
    /// zone named; anything else is shown as it came.
    pub fn time(&self, v: &Value) -> String {
        let Some(t) = v.as_str().and_then(|s| s.parse::<Timestamp>().ok()) else {
            return text(v);
        };
        let shown = t.to_zoned(self.tz.clone());
        if self.name == "UTC" {
            return shown.strftime("%Y-%m-%d %H:%M:%S UTC").to_string();
        }
        format!("{} ({})", shown.strftime("%Y-%m-%d %H:%M:%S %Z"), self.name)
    }
}

/// Columns padded to their widest cell; the last column is left ragged.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let last = cells.len().saturating_sub(1);
        let mut out = String::new();
        for (i, (cell, width)) in cells.iter().zip(&widths).enumerate() {
            if i == last {
                out.push_str(cell);
            } else {
                out.push_str(&format!("{cell:<width$}  "));
            }
        }
        out.trim_end().to_owned()
    };
    let mut out = vec![line(headers.to_vec())];
    out.extend(
        rows.iter()
            .map(|r| line(r.iter().map(String::as_str).collect())),
    );
    out.join("\n")
}

fn text(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// When it runs, when its approval lapses, or when it was sealed — whichever matters now.
pub fn when(action: &Value, zone: &Zone) -> String {
    if !action["sealed_at"].is_null() {
        let sealed = zone.time(&action["sealed_at"]);
        return match action["outcome"]["reason"].as_str() {
            Some(r) => format!("sealed {sealed}, {r}"),
            None => format!("sealed {sealed}"),
        };
    }
    let summary = &action["approval"]["context"]["schedule"]["summary"];
    if let Some(s) = summary.as_str() {
        return s.to_owned();
    }
    if action["state"] == "pending_approval" {
        return format!("expires {}", zone.time(&action["approval"]["expires_at"]));
    }
    match &action["schedule"] {
        Value::Null => "-".into(),
        w => format!(
            "{} – {}",
            zone.time(&w["not_before"]),
            zone.time(&w["not_after"])
        ),
    }
}

pub fn actions(list: &[Value], zone: &Zone) -> String {
    let rows: Vec<Vec<String>> = list
        .iter()
        .map(|a| {
            vec![
                text(&a["id"]),
                text(&a["state"]),
                text(&a["tool"]),
                text(&a["agent_id"]),
                when(a, zone),
            ]
        })
        .collect();
    table(&["ID", "STATE", "TOOL", "AGENT", "WHEN"], &rows)
}

/// The approval context of a pending action as the approver reads it, with the quorum's
/// progress; the digest below is of exactly the context.
pub fn context(action: &Value, digest: &str, zone: &Zone) -> String {
    let context = &action["approval"]["context"];
    let expires_at = &action["approval"]["expires_at"];
    let mut rows = vec![
        ("tool", text(&context["tool"])),
        ("agent", text(&context["agent_id"])),
    ];
    if !context["action_kind"].is_null() {
        rows.push(("kind", text(&context["action_kind"])));
    }
    rows.push((
        "window",
        match context["schedule"]["summary"].as_str() {
            Some(s) => s.to_owned(),
            None => "none (runs as soon as it is approved)".to_owned(),
        },
    ));
    rows.push(("expires", zone.time(expires_at)));
    // Why it waits and who must sign (SC-POL-05): part of what is countersigned.
    rows.extend(policy_rows(&context["policy"]));
    rows.extend(still_needed(action));
    rows.push((
        "args",
        serde_json::to_string_pretty(&context["args"]).unwrap_or_default(),
    ));
    rows.push(("digest", digest.to_owned()));
    pairs(&rows)
}

/// The matched rule, and the approvals and groups it asks for.
fn policy_rows(policy: &Value) -> Vec<(&'static str, String)> {
    let mut rows = Vec::new();
    if let Some(label) = policy["label"].as_str() {
        rows.push(("rule", format!("#{} {label}", text(&policy["rule"]))));
    }
    let groups = policy["approver_groups"]
        .as_array()
        .map(|g| g.iter().map(text).collect::<Vec<_>>().join(", "));
    if let Some(n) = policy["approvals"].as_u64() {
        rows.push(("approvals", format!("{n} distinct approvers")));
    }
    if let Some(groups) = groups {
        rows.push(("groups", groups));
    }
    rows
}

/// A pending quorum's progress (SC-POL-04): "1 of 2 (approved by fin-1)"; nothing for a rule
/// that asks for one approval.
fn still_needed(a: &Value) -> Option<(&'static str, String)> {
    let required = a["approval"]["context"]["policy"]["approvals"].as_u64()?;
    let needed = a["next_action"]["still_needed"]
        .as_u64()
        .filter(|n| *n > 0)?;
    let given: Vec<String> = a["approvals"]
        .as_array()
        .map(|g| g.iter().map(|s| text(&s["approver"])).collect())
        .unwrap_or_default();
    let by = match given.is_empty() {
        true => String::new(),
        false => format!(" (approved by {})", given.join(", ")),
    };
    Some(("still needed", format!("{needed} of {required}{by}")))
}

/// What an approval left to do: "2 more approvals needed" while a quorum still waits (the
/// API's `next_action.still_needed`, SC-POL-04), else the state it moved to.
pub fn after_approval(a: &Value) -> String {
    let waiting = a["state"] == "pending_approval";
    match a["next_action"]["still_needed"].as_u64() {
        Some(1) if waiting => "1 more approval needed".to_owned(),
        Some(n) if waiting => format!("{n} more approvals needed"),
        _ => text(&a["state"]),
    }
}

pub fn action(a: &Value, zone: &Zone) -> String {
    let mut rows = vec![
        ("id", text(&a["id"])),
        ("state", text(&a["state"])),
        ("tool", text(&a["tool"])),
        ("agent", text(&a["agent_id"])),
        ("decision", text(&a["decision"])),
        ("when", when(a, zone)),
        (
            "args",
            serde_json::to_string_pretty(&a["args"]).unwrap_or_default(),
        ),
    ];
    if let Some(digest) = a["approval"]["context_digest"].as_str() {
        rows.push(("digest", digest.to_owned()));
    }
    rows.extend(policy_rows(&a["approval"]["context"]["policy"]));
    rows.extend(still_needed(a));
    if let Some(approver) = a["approval"]["approver"].as_str() {
        rows.push(("approver", approver.to_owned()));
    }
    if let Some(signed) = a["approval"]["quorum"]["signed"].as_array() {
        let names: Vec<_> = signed.iter().map(|s| text(&s["approver"])).collect();
        rows.push(("approvers", names.join(", ")));
    }
    if !a["outcome"].is_null() {
        rows.push(("outcome", a["outcome"].to_string()));
    }
    rows.push(("last actor", actor(&a["actor"])));
    pairs(&rows)
}

/// The scoped grants: who may call what, how often still, until when, and who granted.
pub fn grants(list: &[Value], zone: &Zone) -> String {
    let rows: Vec<Vec<String>> = list
        .iter()
        .map(|g| {
            let t = &g["terms"];
            let status = match (&g["revoked"], g["active"].as_bool(), g["lapsed"].as_bool()) {
                (Value::Object(_), _, _) => "revoked",
                (_, Some(true), _) => "active",
                // The one who granted may no longer decide: it allows nothing while so.
                (_, _, Some(true)) => "lapsed",
                _ => "spent or expired",
            };
            let pins = t["pins"].as_object().map_or(String::new(), |p| {
                p.iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            });
            vec![
                text(&g["id"]),
                text(&t["agent_id"]),
                text(&t["tool"]),
                format!("{}/{}", g["uses_left"], t["uses"]),
                zone.time(&t["expires_at"]),
                status.to_owned(),
                text(&t["granted_by"]["approver"]),
                pins,
            ]
        })
        .collect();
    table(
        &[
            "ID",
            "AGENT",
            "TOOL",
            "LEFT",
            "UNTIL",
            "STATUS",
            "GRANTED BY",
            "PINS",
        ],
        &rows,
    )
}

pub fn events(events: &[Value], zone: &Zone) -> String {
    let rows: Vec<Vec<String>> = events
        .iter()
        .map(|e| {
            vec![
                text(&e["seq"]),
                zone.time(&e["at"]),
                format!("{} → {}", text(&e["from"]), text(&e["to"])),
                actor(&e["actor"]),
                text(&e["reason"]),
            ]
        })
        .collect();
    table(&["SEQ", "AT", "TRANSITION", "ACTOR", "REASON"], &rows)
}

/// "user approver-1", or "system" when the actor has no id.
fn actor(actor: &Value) -> String {
    match actor["id"].as_str() {
        Some(id) => format!("{} {id}", text(&actor["type"])),
        None => text(&actor["type"]),
    }
}

/// `name   value` lines; a multi-line value continues under its first line.
fn pairs(rows: &[(&str, String)]) -> String {
    let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    let mut out = Vec::new();
    for (name, value) in rows {
        for (i, line) in value.lines().enumerate() {
            let label = if i == 0 { name } else { "" };
            out.push(format!("{label:<width$}  {line}"));
        }
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align_columns_and_leave_the_last_ragged() {
        let rows = vec![
            vec!["a".into(), "long value".into(), "x".into()],
            vec!["bbb".into(), "v".into(), "last column".into()],
        ];
        assert_eq!(
            table(&["ID", "STATE", "WHEN"], &rows),
            "ID   STATE       WHEN\na    long value  x\nbbb  v           last column"
        );
    }

    #[test]
    fn times_are_shown_in_the_zone_named_with_seconds() {
        let t = Value::from("2026-12-01T18:42:10.123456Z");
        assert_eq!(
            Zone::named("Europe/Berlin").time(&t),
            "2026-12-01 19:42:10 CET (Europe/Berlin)"
        );
        assert_eq!(Zone::utc().time(&t), "2026-12-01 18:42:10 UTC");
        assert_eq!(Zone::named("Not/AZone").time(&t), "2026-12-01 18:42:10 UTC");
        assert_eq!(Zone::utc().time(&Value::Null), "-");
    }
}
