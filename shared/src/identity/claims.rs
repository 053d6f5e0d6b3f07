//! What a verified token says (SC-ID-02, SC-ID-03): pure checks in a fixed order, each failing
//! closed with its reason, then the claims read as a [`Principal`]. No I/O and no clock of its
//! own: the caller passes the time.

use crate::config::{IdentityConfig, Person, Principal, Role};
use jiff::Timestamp;
use serde_json::{Map, Value};

/// Why a signed token is still refused: each is a 401 `invalid_token`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("the token's typ is not at+jwt")]
    Type,
    #[error("the token's issuer is not the tenant's")]
    Issuer,
    #[error("the token is not for this server (aud)")]
    Audience,
    #[error("the token has no expiry")]
    NoExpiry,
    #[error("the token has expired")]
    Expired,
    #[error("the token is not valid yet")]
    NotYetValid,
    #[error("the token names no subject")]
    NoSubject,
}

/// What a route needs of a caller (a token's scopes must grant it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    Role(Role),
    /// Any of the three roles (reads, cancel, `GET /v1/me`).
    Any,
}

/// The checks on a token whose signature is good, in this order: its type, issuer, audience,
/// expiry, start. `typ` is the JOSE header's.
pub fn check(
    typ: Option<&str>,
    claims: &Map<String, Value>,
    id: &IdentityConfig,
    now: Timestamp,
) -> Result<(), Refused> {
    let typ = typ.map(str::to_ascii_lowercase);
    let at_jwt = matches!(typ.as_deref(), Some("at+jwt" | "application/at+jwt"));
    // RFC 9068 §4: an access token says so. Most providers still write `JWT` (or nothing);
    // any other type (an ID token's `id_token+jwt`, a logout token's) is not an access token.
    if !(at_jwt || (!id.require_at_jwt && matches!(typ.as_deref(), None | Some("jwt")))) {
        return Err(Refused::Type);
    }
    if text(claims, "iss") != Some(id.issuer.as_str()) {
        return Err(Refused::Issuer);
    }
    let audiences = id.audiences();
    if !strings(claims.get("aud")).any(|a| audiences.iter().any(|ours| ours == a)) {
        return Err(Refused::Audience);
    }
    let now = now.as_second();
    let leeway = id.leeway.as_secs();
    let exp = claims
        .get("exp")
        .and_then(Value::as_i64)
        .ok_or(Refused::NoExpiry)?;
    if now >= exp.saturating_add(leeway) {
        return Err(Refused::Expired);
    }
    if let Some(nbf) = claims.get("nbf") {
        let nbf = nbf.as_i64().ok_or(Refused::NotYetValid)?;
        if now.saturating_add(leeway) < nbf {
            return Err(Refused::NotYetValid);
        }
    }
    Ok(())
}

/// The scopes the token grants, as the tenant names its claim (a space-separated string, as
/// RFC 9068 writes `scope`, or a list, as Okta writes `scp`).
fn scopes<'a>(claims: &'a Map<String, Value>, id: &IdentityConfig) -> Vec<&'a str> {
    match claims.get(&id.scope_claim) {
        Some(Value::String(s)) => s.split_whitespace().collect(),
        other => strings(other).collect(),
    }
}

/// The role the token acts in for `need`, or the scope it lacks. A token granting several
/// roles acts in the one the route needs; where any role will do, in the least of them
/// (agent, then approver, then admin).
pub fn role(claims: &Map<String, Value>, id: &IdentityConfig, need: Need) -> Result<Role, String> {
    let granted = scopes(claims, id);
    let ladder = [
        (Role::Agent, &id.agent_scope),
        (Role::Approver, &id.approve_scope),
        (Role::Admin, &id.admin_scope),
    ];
    let held = |scope: &String| granted.contains(&scope.as_str());
    match need {
        Need::Role(role) => {
            let (_, scope) = ladder.iter().find(|(r, _)| *r == role).expect("every role");
            if held(scope) {
                Ok(role)
            } else {
                Err((*scope).clone())
            }
        }
        Need::Any => ladder
            .iter()
            .find(|(_, scope)| held(scope))
            .map(|(role, _)| *role)
            .ok_or_else(|| {
                let all: Vec<&str> = ladder.iter().map(|(_, s)| s.as_str()).collect();
                all.join(" ")
            }),
    }
}

/// Who the token is, in `role`: a machine client (client credentials: no subject, or the
/// subject is the client itself, as RFC 9068 writes it) is the agent named by `client_id` (or
/// `azp`, or the tenant's `client_claim`); any other token is the person `sub`, who is also
/// the agent id of a person's agent.
pub fn principal(
    tenant: &str,
    claims: &Map<String, Value>,
    id: &IdentityConfig,
    role: Role,
) -> Result<Principal, Refused> {
    let client = match &id.client_claim {
        Some(claim) => text(claims, claim),
        None => text(claims, "client_id").or_else(|| text(claims, "azp")),
    };
    let subject = text(claims, "sub").filter(|s| !s.is_empty());
    let machine = client.is_some() && (subject.is_none() || subject == client);
    let person = (!machine)
        .then(|| {
            subject.map(|subject| Person {
                issuer: id.issuer.clone(),
                subject: subject.to_owned(),
                email: text(claims, "email").map(str::to_owned),
                name: text(claims, "name").map(str::to_owned),
            })
        })
        .flatten();
    let agent = machine && role == Role::Agent;
    let who = if agent { client } else { subject };
    let who = who.filter(|w| !w.is_empty()).ok_or(Refused::NoSubject)?;
    let groups = match role {
        Role::Approver => strings(claims.get(&id.groups_claim))
            .map(str::to_owned)
            .collect(),
        Role::Agent | Role::Admin => Vec::new(),
    };
    Ok(Principal {
        tenant: tenant.to_owned(),
        role,
        id: who.to_owned(),
        groups,
        person,
    })
}

fn text<'a>(claims: &'a Map<String, Value>, name: &str) -> Option<&'a str> {
    claims.get(name).and_then(Value::as_str)
}

/// A claim that is one string or a list of them (`aud`, `groups`).
fn strings(value: Option<&Value>) -> Box<dyn Iterator<Item = &str> + '_> {
    match value {
        Some(Value::String(s)) => Box::new(std::iter::once(s.as_str())),
        Some(Value::Array(items)) => Box::new(items.iter().filter_map(Value::as_str)),
        _ => Box::new(std::iter::empty()),
    }
}

#[cfg(test)]
mod tests;
