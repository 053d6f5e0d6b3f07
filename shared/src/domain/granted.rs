//! A grant's terms as records name them (SC-GR-08): what an approver granted, its digest, and
//! how an audit event names it. Below the action, the audit chain and the deed, which hold
//! them; the rules over grants are `grant`'s.

use super::{actor::Person, canonical};
use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

/// A grant as an approver asked for it, the defaults filled in and the pins sorted: what each
/// approval of a grantable quorum records on its signoff, and what every approval counted in
/// the quorum must ask alike for the grant to be given (SC-GR-03) — a rule of several people
/// is never widened by one of them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Asked {
    /// How long the grant lasts from the approval that gives it, in seconds.
    pub ttl_seconds: i64,
    pub uses: u32,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pin: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<String>,
}

/// The format of a grant's terms; the digest covers it.
pub const FORMAT: &str = "countersign.grant.v1";

/// Who granted: the approver's name, the person a verified token named, and the approver's
/// groups the rule admitted when they granted (the grant never reaches past them).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct GrantedBy {
    pub approver: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub person: Option<Person>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
}

/// A grant's terms, fixed when granted: what its digest covers and a deed of a granted call
/// shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Terms {
    pub format: String,
    /// `grt_` + the ULID of the action whose approval granted it (one grant per approval).
    pub id: String,
    pub tenant: String,
    pub agent_id: String,
    pub tool: String,
    /// The rule it was granted under: its position and label. A call another rule decides is
    /// not this grant's.
    pub rule: usize,
    pub rule_label: String,
    /// Distinct approvals the rule asked for when granted (more than one: a grantable quorum).
    pub approvals: u32,
    /// The approved call the grant came with.
    pub from_action: String,
    pub granted_by: GrantedBy,
    #[schema(value_type = String, format = DateTime)]
    #[serde(with = "crate::domain::time::fixed")]
    pub granted_at: Timestamp,
    #[schema(value_type = String, format = DateTime)]
    #[serde(with = "crate::domain::time::fixed")]
    pub expires_at: Timestamp,
    /// Calls it allows in all.
    pub uses: u32,
    /// Argument fields a call must carry with exactly these values (the approved call's).
    #[schema(value_type = Object)]
    pub pins: Map<String, Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<String>,
}

impl Terms {
    /// `sha256:<hex>` of the canonical terms.
    pub fn digest(&self) -> String {
        canonical::digest(self)
    }
}

/// How an audit event names a grant: its id and the digest of its terms.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct GrantRef {
    pub id: String,
    pub digest: String,
}
