//! The run window `{not_before, not_after}` and its intake rules (SC-INT-02).

use jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Window {
    #[schema(value_type = String, format = DateTime)]
    #[serde(with = "crate::domain::time::fixed")]
    pub not_before: Timestamp,
    #[schema(value_type = String, format = DateTime)]
    #[serde(with = "crate::domain::time::fixed")]
    pub not_after: Timestamp,
}

/// How wide and how far ahead a window may be. The spec's values are the defaults; a
/// deployment may narrow `min_width` for demos and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowRules {
    pub min_width: SignedDuration,
    pub max_ahead: SignedDuration,
}

impl Default for WindowRules {
    fn default() -> Self {
        WindowRules {
            min_width: SignedDuration::from_mins(5),
            max_ahead: SignedDuration::from_hours(72),
        }
    }
}

impl Window {
    /// Parse and check a requested window. Each failure is a sentence for `param: "schedule"`.
    pub fn requested(
        not_before: Option<&str>,
        not_after: Option<&str>,
        now: Timestamp,
        rules: WindowRules,
    ) -> Result<Window, String> {
        Window::parse(not_before, not_after)?.admit(now, rules)
    }

    /// The shape of a requested window: both times, RFC 3339 with an offset.
    pub fn parse(not_before: Option<&str>, not_after: Option<&str>) -> Result<Window, String> {
        Ok(Window {
            not_before: parse_instant("not_before", not_before)?,
            not_after: parse_instant("not_after", not_after)?,
        })
    }

    /// A requested window held to the rules at `now` (SC-INT-02).
    pub fn admit(self, now: Timestamp, rules: WindowRules) -> Result<Window, String> {
        let Window {
            not_before,
            not_after,
        } = self;
        let width = not_after.duration_since(not_before);
        if width < rules.min_width {
            return Err(format!(
                "not_after must be at least {:#} after not_before (got {:#})",
                rules.min_width, width
            ));
        }
        if not_after <= now {
            return Err(format!(
                "not_after ({not_after}) has already passed (now {now})"
            ));
        }
        if not_after.duration_since(now) > rules.max_ahead {
            return Err(format!(
                "not_after must be within {:#} from now",
                rules.max_ahead
            ));
        }
        Ok(self)
    }
}

fn parse_instant(field: &str, raw: Option<&str>) -> Result<Timestamp, String> {
    let raw = raw.ok_or_else(|| format!("{field} is required"))?;
    raw.parse::<Timestamp>().map_err(|e| {
        format!(
            "{field} must be an RFC 3339 time with an offset, e.g. 2026-10-21T17:30:00+02:00 ({e})"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Timestamp {
        "2026-10-21T12:00:00Z".parse().unwrap()
    }

    fn check(nb: &str, na: &str) -> Result<Window, String> {
        Window::requested(Some(nb), Some(na), now(), WindowRules::default())
    }

    #[test]
    fn sc_int_02_accepts_a_valid_window_and_normalizes_to_utc() {
        let w = check("2026-10-21T17:30:00+02:00", "2026-10-21T19:30:00+02:00").unwrap();
        assert_eq!(w.not_before.to_string(), "2026-10-21T15:30:00Z");
    }

    #[test]
    fn sc_int_02_rejects_each_bad_shape() {
        assert!(check("2026-10-21T17:30:00", "2026-10-21T19:30:00Z")
            .unwrap_err()
            .contains("offset"));
        assert!(check("yesterday", "2026-10-21T19:30:00Z")
            .unwrap_err()
            .contains("not_before"));
        assert!(check("2026-10-21T13:00:00Z", "2026-10-21T13:04:59Z")
            .unwrap_err()
            .contains("at least"));
        assert!(check("2026-10-21T10:00:00Z", "2026-10-21T11:00:00Z")
            .unwrap_err()
            .contains("passed"));
        assert!(check("2026-10-24T11:00:00Z", "2026-10-24T12:00:01Z")
            .unwrap_err()
            .contains("within"));
        assert!(Window::requested(
            None,
            Some("2026-10-21T19:30:00Z"),
            now(),
            WindowRules::default()
        )
        .unwrap_err()
        .contains("required"));
    }

    #[test]
    fn sc_int_02_edges_are_inclusive() {
        assert!(check("2026-10-21T13:00:00Z", "2026-10-21T13:05:00Z").is_ok());
        assert!(check("2026-10-24T11:00:00Z", "2026-10-24T12:00:00Z").is_ok());
    }
}
