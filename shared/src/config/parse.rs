//! What every table's validation shares, below them all: the error that names its entry, and
//! the reading of a duration.

#[derive(Debug, thiserror::Error)]
#[error("config: {0}")]
pub struct ConfigError(pub String);

pub(super) fn bad(at: impl std::fmt::Display, what: impl std::fmt::Display) -> ConfigError {
    ConfigError(format!("{at}: {what}"))
}

/// `raw` (or `default`) as a positive duration like "90s", "5m", "24h".
pub(super) fn duration(
    at: &str,
    raw: Option<&str>,
    default: &str,
) -> Result<jiff::SignedDuration, ConfigError> {
    let text = raw.unwrap_or(default);
    let d: jiff::SignedDuration = text.parse().map_err(|e| {
        bad(
            at,
            format!("{text:?} is not a duration like \"90s\", \"5m\", \"24h\" ({e})"),
        )
    })?;
    if d <= jiff::SignedDuration::ZERO {
        return Err(bad(at, "must be positive"));
    }
    Ok(d)
}
