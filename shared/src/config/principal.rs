//! Who a key or a verified token belongs to: the tenant's keys (`tenant.rs`) make them, a
//! rule's approver groups (`policy.rs`) are checked against them.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Agent,
    Approver,
    Admin,
}

/// Who a key or a verified token belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub tenant: String,
    pub role: Role,
    /// The agent id for agent keys; the person or service id otherwise.
    pub id: String,
    /// An approver's groups (SC-POL-03); empty for other roles.
    pub groups: Vec<String>,
    /// The person a verified token names (SC-ID-03); `None` for keys and machine clients.
    pub person: Option<Person>,
}

pub use crate::domain::actor::Person;
