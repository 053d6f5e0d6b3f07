//! A tenant's `policy = [...]`: rules matched in order, the first match deciding (SPEC §4).

use super::{bad, ConfigError};
use crate::domain::{policy::Rule, Decision};
use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRule {
    tool: String,
    decision: Decision,
    result: Option<toml::Value>,
}

pub(super) fn rules(at: &str, raw: Vec<RawRule>) -> Result<Vec<Rule>, ConfigError> {
    raw.into_iter()
        .enumerate()
        .map(|(i, rule)| self::rule(&format!("{at}.policy[{i}]"), rule))
        .collect()
}

fn rule(at: &str, raw: RawRule) -> Result<Rule, ConfigError> {
    if raw.tool.is_empty() {
        return Err(bad(at, "tool glob must not be empty"));
    }
    let result = match (raw.decision, raw.result) {
        (Decision::SetResult, Some(v)) => {
            Some(serde_json::to_value(v).map_err(|e| bad(at, format!("result: {e}")))?)
        }
        (Decision::SetResult, None) => return Err(bad(at, "decision set_result needs a result")),
        (_, Some(_)) => return Err(bad(at, "only a set_result rule carries a result")),
        (_, None) => None,
    };
    Ok(Rule::new(&raw.tool, raw.decision, result))
}
