use super::*;

const KEY: &str = "744db379a83da2deefdc13b510e392e5023808002b15e0bca779b63e498d306a";

fn load(tenant_body: &str) -> Result<Config, ConfigError> {
    Config::from_toml(&format!(
        "[tenants.acme]\ntime_zone = \"Europe/Berlin\"\n{tenant_body}\n"
    ))
}

fn err(tenant_body: &str) -> String {
    load(tenant_body).unwrap_err().to_string()
}

#[test]
fn the_sample_config_loads() {
    let text = include_str!("../../../config/local.toml");
    let config = Config::from_toml(text).unwrap();
    let who = config.principal("cs_agent-dev").unwrap();
    assert_eq!(
        (who.tenant.as_str(), who.role, who.id.as_str()),
        ("acme", Role::Agent, "agent-dev")
    );
    assert!(config.principal("cs_nobody").is_none());
}

#[test]
fn errors_name_the_bad_entry() {
    assert!(Config::from_toml("[tenants]")
        .unwrap_err()
        .to_string()
        .contains("no [tenants"));
    assert!(
        Config::from_toml("[tenants.acme]\ntime_zone = \"Mars/Olympus\"")
            .unwrap_err()
            .to_string()
            .contains("tenants.acme.time_zone")
    );
    assert!(err("approval_ttl = \"soon\"").contains("tenants.acme.approval_ttl"));
    assert!(
        err("keys = [{ id = \"a\", role = \"agent\", sha256 = \"abc\" }]")
            .contains("tenants.acme.keys[0]")
    );
    let dup = format!(
        "keys = [{{ id = \"a\", role = \"agent\", sha256 = \"{KEY}\" }}, {{ id = \"b\", role = \"admin\", sha256 = \"{KEY}\" }}]"
    );
    assert!(err(&dup).contains("tenants.acme.keys[1]"));
    assert!(err("keys = [{ id = \"a\", role = \"king\", sha256 = \"x\" }]").contains("king"));
    assert!(
        err("policy = [{ tool = \"x\", decision = \"set_result\" }]")
            .contains("tenants.acme.policy[0]")
    );
    assert!(
        err("policy = [{ tool = \"x\", decision = \"allow\", result = 1 }]").contains("policy[0]")
    );
    assert!(err("[tenants.acme.tools.t]\nexecutor = \"lambda\"")
        .contains("tenants.acme.tools.\"t\".executor"));
    assert!(err(
        "[tenants.acme.tools.t]\nexecutor = \"webhook\"\nurl = \"ftp://x\"\nsecret_env = \"X\""
    )
    .contains(".url"));
    assert!(err("[tenants.acme.tools.t]\nexecutor = \"webhook\"\nurl = \"https://x\"\nsecret_env = \"A\"\nsecret_ssm = \"/b\"")
        .contains("exactly one of secret_env, secret_ssm"));
    assert!(err(
        "[tenants.acme.tools.t]\nexecutor = \"webhook\"\nurl = \"https://x\"\nsecret_ssm = \"b\""
    )
    .contains("tenants.acme.tools.\"t\".secret_ssm"));
    assert!(err("colour = 1").contains("colour"));
    let tool = |timeout: &str| {
        format!("[tenants.acme.tools.t]\nexecutor = \"webhook\"\nurl = \"https://x\"\nsecret_env = \"COUNTERSIGN_CONFIG_TEST_SECRET\"\ntimeout = \"{timeout}\"")
    };
    assert!(err(&tool("31s")).contains("tenants.acme.tools.\"t\".timeout"));
    assert!(err(&tool("1ns")).contains(".timeout"));
    assert!(load(&tool("30s")).is_ok());
    for limit in [
        "rate_per_key = 0.0",
        "rate_per_tenant = 1e9",
        "burst_per_key = 0",
    ] {
        let e = Config::from_toml(&format!(
            "[limits]\n{limit}\n[tenants.acme]\ntime_zone = \"UTC\""
        ))
        .unwrap_err()
        .to_string();
        assert!(
            e.contains(&format!("limits.{}", limit.split(' ').next().unwrap())),
            "{e}"
        );
    }
    assert!(Config::from_toml(
        "[limits]\nmin_window = \"73h\"\n[tenants.acme]\ntime_zone = \"UTC\""
    )
    .unwrap_err()
    .to_string()
    .contains("limits.min_window"));
}

#[test]
fn sc_sec_08_webhook_targets_https_and_public_unless_the_tenant_allows_the_host() {
    let tool = |allow: &str, url: &str| {
        format!("{allow}\n[tenants.acme.tools.t]\nexecutor = \"webhook\"\nurl = \"{url}\"\nsecret_env = \"COUNTERSIGN_CONFIG_TEST_SECRET\"")
    };
    let refused = [
        ("", "http://tools.example.com/x", "allow_http_hosts"),
        ("", "https://127.0.0.1/x", "allow_private_hosts"),
        ("", "https://10.0.0.7/x", "allow_private_hosts"),
        (
            "",
            "https://169.254.169.254/latest/meta-data",
            "allow_private_hosts",
        ),
        ("", "https://[::1]:8443/x", "allow_private_hosts"),
        ("", "https://[fd00::1]/x", "allow_private_hosts"),
        ("", "https://[::ffff:192.168.0.1]/x", "allow_private_hosts"),
        (
            "allow_http_hosts = [\"127.0.0.1\"]",
            "http://127.0.0.1:9/x",
            "allow_private_hosts",
        ),
        (
            "allow_private_hosts = [\"127.0.0.1\"]",
            "http://127.0.0.1:9/x",
            "allow_http_hosts",
        ),
        (
            "allow_http_hosts = [\"a.example\"]",
            "http://b.example/x",
            "allow_http_hosts",
        ),
    ];
    for (allow, url, hint) in refused {
        let e = err(&tool(allow, url));
        assert!(
            e.contains("tenants.acme.tools.\"t\".url") && e.contains(hint),
            "{url}: {e}"
        );
    }
    let private = |allow: &str, url: &str| match &load(&tool(allow, url)).unwrap().tenants["acme"]
        .tools["t"]
        .executor
    {
        Executor::Webhook { allow_private, .. } => *allow_private,
        _ => unreachable!(),
    };
    assert!(!private("", "https://tools.example.com/x"));
    assert!(private(
        "allow_http_hosts = [\"127.0.0.1\"]\nallow_private_hosts = [\"127.0.0.1\"]",
        "http://127.0.0.1:9/x"
    ));
    assert!(private(
        "allow_private_hosts = [\"tools.internal\"]",
        "https://tools.internal/x"
    ));
}

#[test]
fn fingerprints_change_with_the_entry() {
    let a = ToolEntry {
        name: "t".into(),
        executor: Executor::Echo,
        recovery: Recovery::Fail,
        info: ToolInfo::default(),
    };
    let b = ToolEntry {
        recovery: Recovery::Retry,
        ..a.clone()
    };
    assert_ne!(a.fingerprint(), b.fingerprint());
    assert_eq!(a.fingerprint(), a.clone().fingerprint());
}

#[test]
fn sc_sec_07_deed_keys_are_read_where_the_process_boots_not_while_parsing() {
    // The variable is set nowhere: parsing must not look for it (it did before the split).
    let text = "deed_key = { kid = \"k1\", secret_env = \"COUNTERSIGN_CONFIG_TEST_UNSET_PEM\" }";
    let config = load(text).expect("parsing reads no environment");
    let signer = config.tenants["acme"].deed_key.clone().unwrap();
    assert!(signer.key().is_none(), "nothing read while parsing");

    let unset = load(text).unwrap().read_keys_with(&|_| None).unwrap_err();
    assert!(
        unset.to_string().contains(
            "tenants.acme.deed_key.secret_env: environment variable COUNTERSIGN_CONFIG_TEST_UNSET_PEM is not set"
        ),
        "{unset}"
    );
    let garbage = load(text)
        .unwrap()
        .read_keys_with(&|_| Some("not a pem".into()))
        .unwrap_err();
    assert!(
        garbage
            .to_string()
            .contains("tenants.acme.deed_key.secret_env"),
        "{garbage}"
    );

    let pem = "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIAPMcH0raIkxYyLt09QFKwHyNuoId7ncXzmxgYqosXJT\n-----END PRIVATE KEY-----\n";
    let read = load(text)
        .unwrap()
        .read_keys_with(&|name| (name == "COUNTERSIGN_CONFIG_TEST_UNSET_PEM").then(|| pem.into()))
        .unwrap();
    let key = read.tenants["acme"].deed_key.as_ref().and_then(|s| s.key());
    assert!(key.is_some(), "read at boot");
    assert!(
        err("deed_key = { kid = \" \", secret_env = \"X\" }").contains("tenants.acme.deed_key.kid")
    );
}

/// SC-ID-03: a tenant's identity provider — the two required names, the documented defaults,
/// and each refusal naming its field.
#[test]
fn sc_id_03_identity_loads_with_defaults_and_refusals_name_the_field() {
    let id = |body: &str| format!("[tenants.acme.identity]\n{body}");
    let good =
        "issuer = \"https://login.example.com/realms/acme\"\naudience = \"https://cs.example.com\"";
    let config = load(&id(good)).unwrap();
    let i = config.tenants["acme"].identity.clone().unwrap();
    assert_eq!(
        (
            i.leeway.as_secs(),
            i.jwks_refresh.as_secs(),
            i.jwks_max_age.as_secs()
        ),
        (30, 60, 86_400)
    );
    assert_eq!(
        (
            i.scope_claim.as_str(),
            i.groups_claim.as_str(),
            i.client_claim.as_deref()
        ),
        ("scope", "groups", None)
    );
    assert_eq!(
        [&i.agent_scope, &i.approve_scope, &i.admin_scope],
        [
            "countersign:agent",
            "countersign:approve",
            "countersign:admin"
        ]
    );
    assert!(i.keys_for_people && !i.require_at_jwt);
    assert!(load(&id("issuer = \"http://127.0.0.1:8080\"\naudience = \"x\"")).is_ok());
    let cases = [
        (
            "issuer = \"http://login.example.com\"\naudience = \"x\"",
            "tenants.acme.identity.issuer",
        ),
        (
            "issuer = \"https://l.example.com?a=1\"\naudience = \"x\"",
            "tenants.acme.identity.issuer",
        ),
        (
            "issuer = \"not a url\"\naudience = \"x\"",
            "tenants.acme.identity.issuer",
        ),
        (
            "issuer = \"https://l.example.com\"\naudience = \" \"",
            "tenants.acme.identity.audience",
        ),
        (
            &format!("{good}\nleeway = \"6m\""),
            "tenants.acme.identity.leeway",
        ),
        (
            &format!("{good}\njwks_refresh = \"soon\""),
            "tenants.acme.identity.jwks_refresh",
        ),
        (
            &format!("{good}\nscope_claim = \"a b\""),
            "tenants.acme.identity.scope_claim",
        ),
        (
            &format!("{good}\nadmin_scope = \"countersign:agent\""),
            "scopes must differ",
        ),
        (&format!("{good}\ncolour = 1"), "unknown field"),
        (
            "issuer = \"https://l.example.com\"",
            "missing field `audience`",
        ),
    ];
    for (body, expected) in cases {
        let e = err(&id(body));
        assert!(e.contains(expected), "{body}: {e}");
    }
    // Two tenants with one provider need two audiences: the token's pair names its tenant.
    let two = |aud: &str| {
        Config::from_toml(&format!(
            "[tenants.a]\ntime_zone = \"UTC\"\n[tenants.a.identity]\n{good}\n\
             [tenants.b]\ntime_zone = \"UTC\"\n[tenants.b.identity]\nissuer = \"https://login.example.com/realms/acme\"\naudience = \"{aud}\"\n"
        ))
    };
    assert!(two("https://other.example.com").is_ok());
    let e = two("https://cs.example.com").unwrap_err().to_string();
    assert!(
        e.contains("tenants.b.identity") && e.contains("tenant a"),
        "{e}"
    );
    // With a provider, a rule's approver groups need no key: the provider's people hold them.
    let rule = "[[tenants.acme.policy]]\ntool = \"*\"\ndecision = \"require_approval\"\napprovers = [\"finance\"]\n";
    assert!(err(rule).contains("approver key"));
    assert!(load(&format!("{rule}{}", id(good))).is_ok());
}

const SLACK: &str = "[tenants.acme.slack]\nbot_token_env = \"SLACK_BOT_TOKEN\"\nsigning_secret_env = \"SLACK_SIGNING_SECRET\"\nchannel = \"C0123456789\"";

fn approver(extra: &str) -> String {
    format!("keys = [{{ id = \"fin-1\", role = \"approver\", sha256 = \"{KEY}\"{extra} }}]")
}

/// SC-CH-01: the tenant's Slack app is named by the configuration with the names docs/slack.md
/// gives, and an approver key names its Slack user; each mistake names its entry.
#[test]
fn sc_ch_01_the_slack_app_and_slack_users_are_configured_and_checked() {
    let config = load(&format!(
        "{}\n{SLACK}\napi_url = \"https://slack.example.com/api/\"",
        approver(", slack_user = \"U0123ABCD\"")
    ))
    .unwrap();
    let slack = config.tenants["acme"].slack.as_ref().unwrap();
    assert_eq!(slack.bot_token, Secret::Env("SLACK_BOT_TOKEN".into()));
    assert_eq!(slack.channel, "C0123456789");
    assert_eq!(slack.api_url, "https://slack.example.com/api");
    assert_eq!(slack.approver("U0123ABCD"), Some("fin-1"));
    assert_eq!(slack.approver("U9999"), None);
    let by_ssm = load(&SLACK.replace(
        "bot_token_env = \"SLACK_BOT_TOKEN\"",
        "bot_token_ssm = \"/countersign/acme/slack-bot\"",
    ))
    .unwrap();
    let slack = by_ssm.tenants["acme"].slack.as_ref().unwrap();
    assert_eq!(
        slack.bot_token,
        Secret::Ssm("/countersign/acme/slack-bot".into())
    );
    assert_eq!(slack.api_url, SLACK_API);

    let refused = [
        (SLACK.replace("bot_token_env = \"SLACK_BOT_TOKEN\"\n", ""), "tenants.acme.slack: needs exactly one of bot_token_env, bot_token_ssm"),
        (format!("{SLACK}\nbot_token_ssm = \"/x\""), "tenants.acme.slack: needs exactly one of bot_token_env, bot_token_ssm"),
        (SLACK.replace("signing_secret_env = \"SLACK_SIGNING_SECRET\"", "signing_secret_ssm = \"x\""), "tenants.acme.slack.signing_secret_ssm: must be a parameter name"),
        (SLACK.replace("signing_secret_env = \"SLACK_SIGNING_SECRET\"", "signing_secret_env = \"\""), "tenants.acme.slack: needs exactly one of signing_secret_env, signing_secret_ssm"),
        (SLACK.replace("C0123456789", "#approvals"), "tenants.acme.slack.channel: \"#approvals\" is not a channel id"),
        (format!("{SLACK}\napi_url = \"http://slack.example.com/api\""), "tenants.acme.slack.api_url: must be https"),
        (format!("{SLACK}\napi_url = \"https://127.0.0.1:9/api\""), "tenants.acme.slack.api_url: 127.0.0.1 is not a public address"),
        (format!("{SLACK}\nteam = \"T1\""), "unknown field `team`"),
        (approver(", slack_user = \"U0123ABCD\""), "tenants.acme.slack: approver fin-1 has a slack_user, but the tenant has no [tenants.acme.slack]"),
        (format!("{}\n{SLACK}", approver(", slack_user = \"fin@example.com\"")), "tenants.acme.keys[0].slack_user: \"fin@example.com\" is not a Slack user id"),
        (format!("keys = [{{ id = \"a\", role = \"admin\", sha256 = \"{KEY}\", slack_user = \"U1234\" }}]\n{SLACK}"), "tenants.acme.keys[0]: only approver keys have a slack_user"),
        (format!("keys = [{{ id = \"a\", role = \"approver\", sha256 = \"{KEY}\", slack_user = \"U1234\" }}, {{ id = \"b\", role = \"approver\", sha256 = \"{}\", slack_user = \"U1234\" }}]\n{SLACK}", KEY.replace('7', "8")), "tenants.acme.keys[1].slack_user: U1234 is already the Slack user of approver a"),
    ];
    for (body, expected) in refused {
        let e = err(&body);
        assert!(e.contains(expected), "{body}\n→ {e}");
    }
    // A local stand-in of the Web API is reached only where the tenant allows it.
    let local = load(&format!("allow_http_hosts = [\"127.0.0.1\"]\nallow_private_hosts = [\"127.0.0.1\"]\n{SLACK}\napi_url = \"http://127.0.0.1:9/api\"")).unwrap();
    assert!(local.tenants["acme"].slack.as_ref().unwrap().allow_private);
}

/// SC-CH-15: a `require_approval` rule may name the Slack channel its requests go to; a
/// malformed id, a rule that asks nobody, or a tenant without a Slack app is a configuration
/// error naming the rule's field.
#[test]
fn sc_ch_15_a_rule_names_its_slack_channel() {
    let rule = |extra: &str| {
        format!("[[tenants.acme.policy]]\ntool = \"pay.*\"\ndecision = \"require_approval\"\n{extra}\n[[tenants.acme.policy]]\ntool = \"*\"\ndecision = \"require_approval\"\n")
    };
    let config = load(&format!(
        "{}\n{}\n{SLACK}",
        approver(""),
        rule("slack_channel = \"CFIN0001\"")
    ))
    .unwrap();
    let policy = &config.tenants["acme"].policy;
    assert_eq!(policy[0].slack_channel.as_deref(), Some("CFIN0001"));
    assert_eq!(policy[1].slack_channel, None, "the tenant's channel");

    let refused = [
        (format!("{}\n{}\n{SLACK}", approver(""), rule("slack_channel = \"#finance\"")), "tenants.acme.policy[0].slack_channel: \"#finance\" is not a channel id"),
        (format!("{}\n{}\n{SLACK}", approver(""), rule("slack_channel = \"U0123ABCD\"")), "tenants.acme.policy[0].slack_channel: \"U0123ABCD\" is not a channel id"),
        (format!("{}\n{}", approver(""), rule("slack_channel = \"CFIN0001\"")), "tenants.acme.policy[0].slack_channel: the tenant has no [tenants.acme.slack] to post to"),
        (format!("{}\n[[tenants.acme.policy]]\ntool = \"*\"\ndecision = \"allow\"\nslack_channel = \"CFIN0001\"\n{SLACK}", approver("")), "tenants.acme.policy[0]: slack_channel belongs to a require_approval rule"),
    ];
    for (body, expected) in refused {
        let e = err(&body);
        assert!(e.contains(expected), "{body}\n→ {e}");
    }
}

/// SC-CH-16: `[email] sign_in_for` names require_approval rules by label, in a tenant that
/// signs its people in; anything else is a configuration error naming the field.
#[test]
fn sc_ch_16_sign_in_for_names_rules_of_a_tenant_with_a_provider() {
    let keys = format!("keys = [{{ id = \"fin-1\", role = \"approver\", sha256 = \"{KEY}\", email = \"fin@example.com\" }}]\npolicy = [{{ tool = \"pay.*\", decision = \"require_approval\", name = \"payments\" }}, {{ tool = \"*\", decision = \"allow\" }}]");
    let email = |rules: &str| {
        format!("[tenants.acme.email]\nsmtp_url_env = \"S\"\nfrom = \"a@example.com\"\nlink_secret_env = \"L\"\nsign_in_for = [{rules}]")
    };
    let identity = "[tenants.acme.identity]\nissuer = \"https://login.example.com/realms/acme\"\naudience = \"https://cs.example.com\"";
    let config = load(&format!("{keys}\n{identity}\n{}", email("\"payments\""))).unwrap();
    let mail = config.tenants["acme"].email.as_ref().unwrap();
    assert!(mail.needs_sign_in(Some("payments")));
    assert!(!mail.needs_sign_in(Some("pay.*")) && !mail.needs_sign_in(None));
    let refused = [
        (
            format!("{keys}\n{}", email("\"payments\"")),
            "tenants.acme.email.sign_in_for: needs the tenant's [identity]",
        ),
        (
            format!("{keys}\n{identity}\n{}", email("\"pay.*\"")),
            "tenants.acme.email.sign_in_for: \"pay.*\" names no require_approval rule",
        ),
        (
            format!("{keys}\n{identity}\n{}", email("\"*\"")),
            "tenants.acme.email.sign_in_for: \"*\" names no require_approval rule",
        ),
    ];
    for (body, expected) in refused {
        let e = err(&body);
        assert!(e.contains(expected), "{body}\n→ {e}");
    }
}

/// SC-CH-17: `users_by_email` finds Slack users among the approver keys' emails (lower-cased);
/// without an approver email, or with two approvers sharing one, it is a configuration error.
#[test]
fn sc_ch_17_users_by_email_needs_distinct_approver_emails() {
    let key = |id: &str, hash: &str, email: &str| {
        format!(
            "{{ id = \"{id}\", role = \"approver\", sha256 = \"{hash}\", email = \"{email}\" }}"
        )
    };
    let one = key("fin-1", KEY, "Fin@Example.com");
    let other = key("fin-2", &KEY.replace('7', "8"), "fin@example.com");
    let by_email = format!("{SLACK}\nusers_by_email = true");
    let config = load(&format!("keys = [{one}]\n{by_email}")).unwrap();
    let slack = config.tenants["acme"].slack.as_ref().unwrap();
    assert_eq!(slack.approver_by_email("FIN@example.COM"), Some("fin-1"));
    assert_eq!(slack.approver_by_email("eve@example.com"), None);
    assert!(
        load(&format!("keys = [{one}]\n{SLACK}")).unwrap().tenants["acme"]
            .slack
            .as_ref()
            .unwrap()
            .by_email
            .is_empty()
    );
    let refused = [
        (
            format!("{}\n{by_email}", approver("")),
            "tenants.acme.slack.users_by_email: no approver key has an email",
        ),
        (
            format!("keys = [{one}, {other}]\n{by_email}"),
            "tenants.acme.slack.users_by_email: two approvers have the same email",
        ),
    ];
    for (body, expected) in refused {
        let e = err(&body);
        assert!(e.contains(expected), "{body}\n→ {e}");
    }
}
