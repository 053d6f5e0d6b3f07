//! Who made a transition: the agent, a person, or the system.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ActorKind {
    Agent,
    User,
    System,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Actor {
    #[serde(rename = "type")]
    pub kind: ActorKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

impl Actor {
    pub fn system() -> Self {
        Actor {
            kind: ActorKind::System,
            id: None,
        }
    }
    pub fn agent(id: &str) -> Self {
        Actor {
            kind: ActorKind::Agent,
            id: Some(id.to_owned()),
        }
    }
    pub fn user(id: &str) -> Self {
        Actor {
            kind: ActorKind::User,
            id: Some(id.to_owned()),
        }
    }
}
