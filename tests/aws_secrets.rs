//! Webhook secrets from SSM Parameter Store on LocalStack (SC-SEC-02: secrets only where
//! needed). The functions that run tools fetch every `secret_ssm` once at cold start
//! (`aws::load_secrets`) and sign with it; `cancel` builds its engine without them.

use aws_sdk_ssm::types::ParameterType;
use countersign::{
    config::Config,
    tools::{Call, Executors, ToolAnswer, ToolRunner},
};
use countersign_tests::{config_toml, localstack, ToolServer, SECRET, SECRET_ENV};
use serde_json::json;

/// Caught on main before the change: every function needed every webhook secret in its
/// environment (the config check read them while parsing), even `cancel`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sc_sec_02_webhook_secret_from_ssm_signs_calls_and_is_needed_only_to_run_tools() {
    let sdk = localstack::sdk().await;
    let ssm = aws_sdk_ssm::Client::new(&sdk);
    let name = format!("/countersign/{}/mail", localstack::unique("secrets"));
    ssm.put_parameter()
        .name(&name)
        .value(SECRET)
        .r#type(ParameterType::SecureString)
        .send()
        .await
        .expect("LocalStack serves SSM (localstack/start.sh SERVICES)");

    let tools = ToolServer::start().await;
    // mail.send (the first webhook of the test config) takes its secret from the parameter.
    let toml = config_toml(&tools, "1m", "5s").replacen(
        &format!("secret_env = \"{SECRET_ENV}\""),
        &format!("secret_ssm = \"{name}\""),
        1,
    );
    let config = Config::from_toml(&toml).unwrap();
    let mail = config.tenants["acme"].tools["mail.send"].clone();
    let args = json!({"to": "ops@example.com"});
    let call = |id| Call {
        action_id: id,
        tool: &mail,
        args: &args,
        attempt: 1,
        at: jiff::Timestamp::now(),
        not_after: jiff::Timestamp::now() + jiff::SignedDuration::from_secs(60),
    };

    let secrets = countersign::boot::aws::load_secrets(&config, &sdk, false)
        .await
        .expect("the parameter is fetched at boot");
    let answer = Executors::with_secrets(secrets)
        .run(&call("act_ssm_1"))
        .await;
    assert!(matches!(answer, ToolAnswer::Succeeded(_)), "{answer:?}");
    let received = tools.calls_for("act_ssm_1");
    assert_eq!(received.len(), 1);
    assert!(
        received[0].signature_ok,
        "signed with the parameter's value"
    );

    // Without the fetched secrets (cancel's engine) the call is refused before it is sent.
    let answer = Executors::new().run(&call("act_ssm_2")).await;
    assert_eq!(answer, ToolAnswer::Failed(json!({"kind": "misconfigured"})));
    assert_eq!(tools.count_for("act_ssm_2"), 0);

    // A parameter that does not exist fails the cold start, naming the entry.
    let missing = Config::from_toml(&toml.replace(&name, &format!("{name}-missing"))).unwrap();
    let e = countersign::boot::aws::load_secrets(&missing, &sdk, false)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("tenants.acme.tools.\"mail.send\".secret_ssm: cannot read parameter"),
        "{e}"
    );
    assert!(!e.contains(SECRET));
}
