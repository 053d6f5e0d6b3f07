//! Where the functions' configuration document comes from (SC-OPS-03): the environment holds
//! it whole, or names an SSM Parameter Store path whose parameters hold it in parts.
//!
//! Lambda allows 4 KB of environment in all, so `COUNTERSIGN_CONFIG` fits a document of about
//! 3.5 KB; a real tenant's catalog does not fit. `COUNTERSIGN_CONFIG_SSM` names a path instead:
//! the String parameters directly under it, in name order, concatenated exactly, are the
//! document (`/countersign/config/00`, `/01`, … — standard parameters hold 4 KB each, advanced
//! ones 8 KB; one parameter under the path is the simple case). A function reads them at cold
//! start and looks again at most every `COUNTERSIGN_CONFIG_RECHECK` (default 60 s): one
//! `GetParametersByPath`, whose versions say whether anything changed.
//!
//! The parts are written one `PutParameter` at a time, so a look between two writes would see
//! half of each document — possibly a valid TOML mixing both. A changed document is therefore
//! served only once its newest part is [`SETTLE`] old: an operator's writes come seconds apart.

use super::BootError;
use std::time::{Duration, SystemTime};

/// How often a function looks for a changed document when none is given.
pub const DEFAULT_RECHECK: Duration = Duration::from_secs(60);

/// How old the newest part of a document must be before it is served.
pub const SETTLE: Duration = Duration::from_secs(5);

/// Where the document comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigSource {
    /// `COUNTERSIGN_CONFIG`: the document itself, fixed for the function's life.
    Inline(String),
    /// `COUNTERSIGN_CONFIG_SSM`: the parameters under `path`, looked at again at most every
    /// `recheck` (`COUNTERSIGN_CONFIG_RECHECK`).
    Ssm { path: String, recheck: Duration },
}

impl ConfigSource {
    /// Exactly one of `COUNTERSIGN_CONFIG` and `COUNTERSIGN_CONFIG_SSM` (a blank one is unset).
    pub fn from_lookup(get: &dyn Fn(&'static str) -> Option<String>) -> Result<Self, BootError> {
        let set = |name| get(name).filter(|v| !v.trim().is_empty());
        let recheck = set("COUNTERSIGN_CONFIG_RECHECK")
            .map(|text| recheck(&text))
            .transpose()?
            .unwrap_or(DEFAULT_RECHECK);
        match (set("COUNTERSIGN_CONFIG"), set("COUNTERSIGN_CONFIG_SSM")) {
            (Some(_), Some(_)) => Err(BootError::Invalid(
                "COUNTERSIGN_CONFIG_SSM",
                "set either COUNTERSIGN_CONFIG (the document) or COUNTERSIGN_CONFIG_SSM (its SSM path), not both".into(),
            )),
            (Some(text), None) => Ok(ConfigSource::Inline(text)),
            (None, Some(path)) => Ok(ConfigSource::Ssm {
                path: ssm_path(&path)?,
                recheck,
            }),
            (None, None) => Err(BootError::Invalid(
                "COUNTERSIGN_CONFIG_SSM",
                "not set: name the SSM path holding the configuration (or put the document itself, up to about 3.5 KB, in COUNTERSIGN_CONFIG)".into(),
            )),
        }
    }

    /// The variable an error in the document is reported against.
    pub fn variable(&self) -> &'static str {
        match self {
            ConfigSource::Inline(_) => "COUNTERSIGN_CONFIG",
            ConfigSource::Ssm { .. } => "COUNTERSIGN_CONFIG_SSM",
        }
    }
}

fn recheck(text: &str) -> Result<Duration, BootError> {
    text.trim()
        .parse::<jiff::SignedDuration>()
        .ok()
        .filter(|d| *d >= jiff::SignedDuration::from_secs(1))
        .and_then(|d| Duration::try_from(d).ok())
        .ok_or_else(|| {
            BootError::Invalid(
                "COUNTERSIGN_CONFIG_RECHECK",
                format!("{text:?} is not a duration of at least 1s, like \"60s\" or \"5m\""),
            )
        })
}

/// A parameter hierarchy: `/` and then names of SSM's characters, without a trailing `/`.
fn ssm_path(text: &str) -> Result<String, BootError> {
    let path = text.trim().trim_end_matches('/');
    let ok = path.starts_with('/')
        && path.len() > 1
        && !path.contains("//")
        && path
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/_.-".contains(&b));
    if ok {
        Ok(path.to_owned())
    } else {
        Err(BootError::Invalid(
            "COUNTERSIGN_CONFIG_SSM",
            format!("{text:?} is not an SSM parameter path like \"/countersign/config\""),
        ))
    }
}

/// One parameter of the document as `GetParametersByPath` answered it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    pub name: String,
    pub version: i64,
    pub value: String,
    /// When it was last written (`LastModifiedDate`).
    pub modified: Option<SystemTime>,
}

/// The document the parts make, and their versions: what a recheck compares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Document {
    pub text: String,
    pub versions: Vec<(String, i64)>,
    /// When its newest part was written.
    pub written: Option<SystemTime>,
}

impl Document {
    /// The parts in name order, their values concatenated exactly (split a file at line ends,
    /// e.g. `split -C 4000 -d`, and this gives it back byte for byte).
    pub fn of(path: &str, mut parts: Vec<Part>) -> Result<Document, String> {
        if parts.is_empty() {
            return Err(format!("no parameters under {path}"));
        }
        parts.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(Document {
            text: parts.iter().map(|p| p.value.as_str()).collect(),
            written: parts.iter().filter_map(|p| p.modified).max(),
            versions: parts.into_iter().map(|p| (p.name, p.version)).collect(),
        })
    }

    /// How long until the document has settled ([`SETTLE`]) as of `now`; `None`: it has.
    pub fn settling(&self, now: SystemTime) -> Option<Duration> {
        let age = now.duration_since(self.written?).unwrap_or_default();
        SETTLE.checked_sub(age).filter(|left| !left.is_zero())
    }
}

/// Every String parameter directly under `path` (all pages). A SecureString or StringList is
/// refused: the document holds no secret (keys are hashes, secrets are named, not held), and
/// nothing is decrypted into it.
pub async fn read(ssm: &aws_sdk_ssm::Client, path: &str) -> Result<Document, String> {
    use aws_sdk_ssm::types::ParameterType;
    let mut parts = Vec::new();
    let mut token = None;
    loop {
        let page = ssm
            .get_parameters_by_path()
            .path(path)
            .recursive(false)
            .with_decryption(false)
            .set_next_token(token)
            .send()
            .await
            .map_err(|e| {
                format!(
                    "cannot read the parameters under {path}: {}",
                    aws_sdk_ssm::error::DisplayErrorContext(&e)
                )
            })?;
        for p in page.parameters() {
            let name = p.name().unwrap_or_default().to_owned();
            if p.r#type() != Some(&ParameterType::String) {
                return Err(format!(
                    "parameter {name} is a {}: the configuration is stored as String parameters",
                    p.r#type()
                        .map_or("parameter of unknown type", |t| t.as_str())
                ));
            }
            parts.push(Part {
                version: p.version(),
                value: p.value().unwrap_or_default().to_owned(),
                modified: p
                    .last_modified_date()
                    .and_then(|d| SystemTime::try_from(*d).ok()),
                name,
            });
        }
        token = page.next_token().map(str::to_owned);
        if token.is_none() {
            break;
        }
    }
    Document::of(path, parts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(vars: &[(&'static str, &str)]) -> Result<ConfigSource, BootError> {
        ConfigSource::from_lookup(&|name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        })
    }

    /// SC-OPS-03: the document itself or its SSM path, never both, never neither; the path and
    /// the recheck interval are checked at cold start, each error naming its variable.
    #[test]
    fn sc_ops_03_the_source_is_one_of_two_variables() {
        assert_eq!(
            source(&[("COUNTERSIGN_CONFIG", "[tenants.a]")]).unwrap(),
            ConfigSource::Inline("[tenants.a]".into())
        );
        assert_eq!(
            source(&[("COUNTERSIGN_CONFIG_SSM", "/countersign/prod/config/")]).unwrap(),
            ConfigSource::Ssm {
                path: "/countersign/prod/config".into(),
                recheck: DEFAULT_RECHECK
            }
        );
        assert_eq!(
            source(&[
                ("COUNTERSIGN_CONFIG", " "),
                ("COUNTERSIGN_CONFIG_SSM", "/cs"),
                ("COUNTERSIGN_CONFIG_RECHECK", "5m"),
            ])
            .unwrap(),
            ConfigSource::Ssm {
                path: "/cs".into(),
                recheck: Duration::from_secs(300)
            }
        );
        let both = source(&[
            ("COUNTERSIGN_CONFIG", "[tenants.a]"),
            ("COUNTERSIGN_CONFIG_SSM", "/cs"),
        ]);
        assert!(
            matches!(&both, Err(BootError::Invalid("COUNTERSIGN_CONFIG_SSM", m)) if m.contains("not both")),
            "{both:?}"
        );
        let neither = source(&[("COUNTERSIGN_CONFIG", "")]).unwrap_err();
        assert!(
            neither.to_string().contains("COUNTERSIGN_CONFIG"),
            "{neither}"
        );
        for bad in ["countersign/config", "/", "/a//b", "/a b", "/a*"] {
            let err = source(&[("COUNTERSIGN_CONFIG_SSM", bad)]).unwrap_err();
            assert!(
                matches!(err, BootError::Invalid("COUNTERSIGN_CONFIG_SSM", _)),
                "{bad}: {err}"
            );
        }
        for bad in ["0s", "500ms", "soon", "-5s"] {
            let err = source(&[
                ("COUNTERSIGN_CONFIG_SSM", "/cs"),
                ("COUNTERSIGN_CONFIG_RECHECK", bad),
            ])
            .unwrap_err();
            assert!(
                matches!(err, BootError::Invalid("COUNTERSIGN_CONFIG_RECHECK", _)),
                "{bad}: {err}"
            );
        }
    }

    /// The parts join in name order, exactly: a file split at line ends comes back whole.
    #[test]
    fn sc_ops_03_parts_join_in_name_order_and_settle_before_they_serve() {
        let at = |secs| SystemTime::UNIX_EPOCH + Duration::from_secs(secs);
        let part = |name: &str, value: &str| Part {
            name: name.into(),
            version: 1,
            value: value.into(),
            modified: Some(at(match name {
                "/cs/01" => 1_000_003,
                _ => 1_000_000,
            })),
        };
        let doc = Document::of(
            "/cs",
            vec![
                part("/cs/02", "c = 3\n"),
                part("/cs/00", "a = 1\n"),
                part("/cs/01", "b = 2\n"),
            ],
        )
        .unwrap();
        assert_eq!(doc.text, "a = 1\nb = 2\nc = 3\n");
        assert_eq!(
            doc.versions
                .iter()
                .map(|(n, _)| n.as_str())
                .collect::<Vec<_>>(),
            ["/cs/00", "/cs/01", "/cs/02"]
        );
        assert_eq!(
            Document::of("/cs", vec![]).unwrap_err(),
            "no parameters under /cs"
        );
        // Served once the newest part (01, written at +3 s) is SETTLE old.
        assert_eq!(doc.written, Some(at(1_000_003)));
        assert_eq!(
            doc.settling(at(1_000_004)),
            Some(SETTLE - Duration::from_secs(1))
        );
        assert_eq!(doc.settling(at(1_000_003) + SETTLE), None);
        assert_eq!(
            doc.settling(at(1_000_000)),
            Some(SETTLE),
            "a clock behind SSM's waits"
        );
    }
}
