//! The claim checks and the mapping, as tables (SC-ID-02, SC-ID-03).

use super::*;
use serde_json::json;

const ISS: &str = "https://login.example.com/realms/acme";
const AUD: &str = "https://countersign.example.com";

fn identity(extra: &str) -> IdentityConfig {
    let text = format!(
        "[tenants.acme]\ntime_zone = \"UTC\"\n[tenants.acme.identity]\nissuer = \"{ISS}\"\naudience = \"{AUD}\"\n{extra}\n"
    );
    let config = crate::config::Config::from_toml(&text).expect("the identity loads");
    config.tenants["acme"]
        .identity
        .clone()
        .expect("an identity")
}

fn claims(v: serde_json::Value) -> Map<String, Value> {
    v.as_object().unwrap().clone()
}

const NOW: i64 = 1_800_000_000;

/// A name, the header's typ, the claims, the time and the verdict.
type Case<'a> = (
    &'a str,
    Option<&'a str>,
    Map<String, Value>,
    i64,
    Result<(), Refused>,
);

fn at(secs: i64) -> Timestamp {
    Timestamp::from_second(secs).unwrap()
}

/// SC-ID-02: each check refuses alone, in its order; the leeway is 30 s by default.
#[test]
fn sc_id_02_claims_are_checked_in_order_with_a_bounded_leeway() {
    let id = identity("");
    let good = json!({"iss": ISS, "aud": AUD, "exp": NOW + 60, "nbf": NOW - 1, "sub": "u"});
    let with = |k: &str, v: Value| {
        let mut c = claims(good.clone());
        c.insert(k.into(), v);
        c
    };
    let without = |k: &str| {
        let mut c = claims(good.clone());
        c.remove(k);
        c
    };
    let cases: Vec<Case> = vec![
        ("good", Some("at+jwt"), claims(good.clone()), NOW, Ok(())),
        ("JWT typ", Some("JWT"), claims(good.clone()), NOW, Ok(())),
        ("no typ", None, claims(good.clone()), NOW, Ok(())),
        (
            "id token typ",
            Some("id_token+jwt"),
            claims(good.clone()),
            NOW,
            Err(Refused::Type),
        ),
        (
            "wrong iss",
            None,
            with("iss", json!("https://evil.example")),
            NOW,
            Err(Refused::Issuer),
        ),
        (
            "iss with slash",
            None,
            with("iss", json!(format!("{ISS}/"))),
            NOW,
            Err(Refused::Issuer),
        ),
        ("no iss", None, without("iss"), NOW, Err(Refused::Issuer)),
        (
            "wrong aud",
            None,
            with("aud", json!("https://other.example")),
            NOW,
            Err(Refused::Audience),
        ),
        (
            "aud list",
            None,
            with("aud", json!(["x", AUD])),
            NOW,
            Ok(()),
        ),
        (
            "aud of /mcp",
            None,
            with("aud", json!(format!("{AUD}/mcp"))),
            NOW,
            Ok(()),
        ),
        (
            "aud as prefix",
            None,
            with("aud", json!(format!("{AUD}.evil"))),
            NOW,
            Err(Refused::Audience),
        ),
        ("no aud", None, without("aud"), NOW, Err(Refused::Audience)),
        ("no exp", None, without("exp"), NOW, Err(Refused::NoExpiry)),
        (
            "exp as text",
            None,
            with("exp", json!("soon")),
            NOW,
            Err(Refused::NoExpiry),
        ),
        (
            "expired within leeway",
            None,
            claims(good.clone()),
            NOW + 60 + 29,
            Ok(()),
        ),
        (
            "expired past leeway",
            None,
            claims(good.clone()),
            NOW + 60 + 30,
            Err(Refused::Expired),
        ),
        (
            "nbf within leeway",
            None,
            with("nbf", json!(NOW + 30)),
            NOW,
            Ok(()),
        ),
        (
            "nbf past leeway",
            None,
            with("nbf", json!(NOW + 31)),
            NOW,
            Err(Refused::NotYetValid),
        ),
        (
            "nbf as text",
            None,
            with("nbf", json!("x")),
            NOW,
            Err(Refused::NotYetValid),
        ),
    ];
    for (name, typ, c, now, expected) in cases {
        assert_eq!(check(typ, &c, &id, at(now)), expected, "{name}");
    }
    let strict = identity("require_at_jwt = true");
    assert_eq!(
        check(Some("JWT"), &claims(good.clone()), &strict, at(NOW)),
        Err(Refused::Type)
    );
    assert_eq!(
        check(Some("application/at+jwt"), &claims(good), &strict, at(NOW)),
        Ok(())
    );
}

/// SC-ID-03: the role comes from the scopes, the one the route needs, or the least for any.
#[test]
fn sc_id_03_scopes_name_the_role() {
    let id = identity("");
    let entra = identity("scope_claim = \"scp\"");
    let agent = Need::Role(Role::Agent);
    let approver = Need::Role(Role::Approver);
    let cases = [
        (
            "agent",
            &id,
            json!({"scope": "openid countersign:agent"}),
            agent,
            Ok(Role::Agent),
        ),
        (
            "approve",
            &id,
            json!({"scope": "countersign:approve"}),
            approver,
            Ok(Role::Approver),
        ),
        (
            "lacks",
            &id,
            json!({"scope": "countersign:agent"}),
            approver,
            Err("countersign:approve".to_owned()),
        ),
        (
            "none",
            &id,
            json!({}),
            agent,
            Err("countersign:agent".to_owned()),
        ),
        (
            "several, any",
            &id,
            json!({"scope": "countersign:admin countersign:approve"}),
            Need::Any,
            Ok(Role::Approver),
        ),
        (
            "several, admin",
            &id,
            json!({"scope": "countersign:admin countersign:approve"}),
            Need::Role(Role::Admin),
            Ok(Role::Admin),
        ),
        (
            "any, none",
            &id,
            json!({"scope": "openid"}),
            Need::Any,
            Err("countersign:agent countersign:approve countersign:admin".to_owned()),
        ),
        (
            "list form",
            &entra,
            json!({"scp": ["countersign:agent"]}),
            agent,
            Ok(Role::Agent),
        ),
        (
            "other claim ignored",
            &entra,
            json!({"scope": "countersign:agent"}),
            agent,
            Err("countersign:agent".to_owned()),
        ),
        (
            "prefix is not a scope",
            &id,
            json!({"scope": "countersign:agents"}),
            agent,
            Err("countersign:agent".to_owned()),
        ),
    ];
    for (name, id, c, need, expected) in cases {
        assert_eq!(role(&claims(c), id, need), expected, "{name}");
    }
}

/// SC-ID-03: a machine client is the agent its client id names; a person's token is the
/// person, by subject, with their display claims and (as an approver) their groups.
#[test]
fn sc_id_03_claims_name_the_agent_and_the_person() {
    let id = identity("");
    let machine = claims(json!({"iss": ISS, "sub": "ci-bot", "client_id": "ci-bot"}));
    let who = principal("acme", &machine, &id, Role::Agent).unwrap();
    assert_eq!((who.id.as_str(), who.person.is_none()), ("ci-bot", true));
    let azp = claims(json!({"iss": ISS, "azp": "ci-bot"}));
    assert_eq!(
        principal("acme", &azp, &id, Role::Agent).unwrap().id,
        "ci-bot"
    );

    let person = claims(json!({
        "iss": ISS, "sub": "u-42", "client_id": "claude", "email": "ada@example.com",
        "name": "Ada", "groups": ["finance", "ops"]
    }));
    let agent = principal("acme", &person, &id, Role::Agent).unwrap();
    assert_eq!(agent.id, "u-42", "a person's agent is the person");
    assert!(agent.groups.is_empty());
    let approver = principal("acme", &person, &id, Role::Approver).unwrap();
    assert_eq!(approver.id, "u-42");
    assert_eq!(approver.groups, ["finance", "ops"]);
    assert_eq!(
        approver.person,
        Some(Person {
            issuer: ISS.into(),
            subject: "u-42".into(),
            email: Some("ada@example.com".into()),
            name: Some("Ada".into()),
        })
    );
    let cognito = identity("groups_claim = \"cognito:groups\"");
    let c = claims(json!({"sub": "u", "cognito:groups": "finance"}));
    assert_eq!(
        principal("acme", &c, &cognito, Role::Approver)
            .unwrap()
            .groups,
        ["finance"]
    );

    // A token naming nobody is no one.
    assert_eq!(
        principal("acme", &claims(json!({"client_id": ""})), &id, Role::Agent),
        Err(Refused::NoSubject)
    );
    assert_eq!(
        principal("acme", &claims(json!({})), &id, Role::Approver),
        Err(Refused::NoSubject)
    );
}
