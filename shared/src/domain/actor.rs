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
    /// The person a verified token named (SC-ID-07); absent for keys and machine clients, so
    /// an event written before people were recorded serializes — and hashes — as it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub person: Option<Person>,
    /// The channel a decision came through (SC-CH-08); absent on other events,
    /// so an event written before channels were recorded serializes — and hashes — as it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<Channel>,
}

/// A person as the tenant's identity provider names them: issuer and subject together are the
/// person (SC-ID-06); the display claims are for people reading the record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Person {
    pub issuer: String,
    pub subject: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl Person {
    /// The same person: the same issuer and subject, whatever the display claims say now.
    pub fn is(&self, other: &Person) -> bool {
        self.issuer == other.issuer && self.subject == other.subject
    }
}

impl std::fmt::Display for Person {
    /// `Ada Lovelace <ada@example.com> (ada at https://login.example.com)`: who, for people.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.name, &self.email) {
            (Some(name), Some(email)) => write!(f, "{name} <{email}> ")?,
            (Some(shown), None) | (None, Some(shown)) => write!(f, "{shown} ")?,
            (None, None) => {}
        }
        write!(f, "({} at {})", self.subject, self.issuer)
    }
}

/// Where a decision came from (issue 32, SC-CH-08): every approve, deny, cancel and stop names
/// one. An event without a channel was written before channels were recorded, or is not a
/// decision (the agent's submit, the system's sealing).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Channel {
    Api,
    Page,
    Cli,
    Slack,
    Email,
}

impl Channel {
    pub const ALL: [Channel; 5] = [
        Channel::Api,
        Channel::Page,
        Channel::Cli,
        Channel::Slack,
        Channel::Email,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Channel::Api => "api",
            Channel::Page => "page",
            Channel::Cli => "cli",
            Channel::Slack => "slack",
            Channel::Email => "email",
        }
    }

    pub fn parse(s: &str) -> Option<Channel> {
        Channel::ALL.into_iter().find(|c| c.as_str() == s)
    }
}

impl Actor {
    pub fn system() -> Self {
        Actor {
            kind: ActorKind::System,
            id: None,
            person: None,
            channel: None,
        }
    }
    pub fn agent(id: &str) -> Self {
        Actor {
            kind: ActorKind::Agent,
            id: Some(id.to_owned()),
            person: None,
            channel: None,
        }
    }
    pub fn user(id: &str) -> Self {
        Actor {
            kind: ActorKind::User,
            id: Some(id.to_owned()),
            person: None,
            channel: None,
        }
    }
    /// A person deciding, through `channel` when it is recorded.
    pub fn user_via(id: &str, channel: Option<Channel>) -> Self {
        Actor {
            channel,
            ..Actor::user(id)
        }
    }
    /// A person or an approver key deciding: the key's name, or the person's agent id (their
    /// subject) with who they are, through `channel` when it is recorded.
    pub fn decider(id: &str, person: Option<&Person>, channel: Option<Channel>) -> Self {
        Actor {
            person: person.cloned(),
            ..Actor::user_via(id, channel)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An actor without a channel serializes as before (old events hash unchanged); one with
    /// a channel names it.
    #[test]
    fn sc_ch_07_the_channel_is_recorded_only_when_known() {
        let plain = serde_json::to_string(&Actor::user("fin-1")).unwrap();
        assert_eq!(plain, r#"{"type":"user","id":"fin-1"}"#);
        let slack = Actor::user_via("fin-1", Some(Channel::Slack));
        let text = serde_json::to_string(&slack).unwrap();
        assert_eq!(text, r#"{"type":"user","id":"fin-1","channel":"slack"}"#);
        assert_eq!(serde_json::from_str::<Actor>(&text).unwrap(), slack);
        for c in Channel::ALL {
            assert_eq!(Channel::parse(c.as_str()), Some(c));
        }
    }

    /// SC-ID-07 with SC-CH-07: a person deciding through a channel is recorded with both, each
    /// only when known — a key's event through the API still serializes as before.
    #[test]
    fn sc_id_07_a_person_and_a_channel_are_recorded_together() {
        let ada = Person {
            issuer: "https://login.example.com".into(),
            subject: "ada".into(),
            email: None,
            name: None,
        };
        let key = Actor::decider("fin-1", None, None);
        assert_eq!(
            serde_json::to_string(&key).unwrap(),
            r#"{"type":"user","id":"fin-1"}"#
        );
        let both = Actor::decider("ada", Some(&ada), Some(Channel::Slack));
        let text = serde_json::to_string(&both).unwrap();
        assert_eq!(
            text,
            r#"{"type":"user","id":"ada","person":{"issuer":"https://login.example.com","subject":"ada"},"channel":"slack"}"#
        );
        assert_eq!(serde_json::from_str::<Actor>(&text).unwrap(), both);
    }
}
