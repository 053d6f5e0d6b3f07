//! The SAM template (`infra/template.yaml`) through LocalStack's CloudFormation (issue 4):
//!
//! - its stateful resources — the table, the schedule group and the dead-letter queue — taken
//!   verbatim from the template into a plain CloudFormation stack, created, and the resulting
//!   table described: keys, attributes, indexes, billing and TTL equal `infra/table.json`;
//! - the whole template through the SAM transform (LocalStack bundles it) as a change set: it
//!   expands to the functions, the HTTP API and one invoke permission per route of
//!   `countersign::api::ROUTES`.
//!
//! The functions and the HTTP API themselves cannot be created here (no Docker for Lambda, and
//! API Gateway v2 is not in the host LocalStack). Requires LocalStack with `cloudformation` in
//! SERVICES (`bash localstack/start.sh` starts it so); these tests fail rather than skip.

use aws_config::SdkConfig;
use aws_sdk_cloudformation::{
    types::{Capability, ChangeSetType, StackStatus},
    Client as Cfn,
};
use countersign::api::ROUTES;
use countersign_tests::localstack;
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// The resources of the template that LocalStack on the host can create, verbatim.
const STATEFUL: [&str; 3] = ["Table", "WakeScheduleGroup", "WakeDeadLetterQueue"];

fn repo_file(path: &str) -> String {
    let full = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(path);
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn template() -> Value {
    serde_norway::from_str(&repo_file("infra/template.yaml")).expect("infra/template.yaml")
}

fn list(v: &Value) -> Vec<Value> {
    match v {
        Value::Array(items) => items.clone(),
        Value::Null => vec![],
        other => vec![other.clone()],
    }
}

/// Every `Ref` inside a value.
fn refs(v: &Value, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(m) => {
            if let Some(Value::String(r)) = m.get("Ref") {
                out.insert(r.clone());
            }
            m.values().for_each(|x| refs(x, out));
        }
        Value::Array(items) => items.iter().for_each(|x| refs(x, out)),
        _ => {}
    }
}

/// The stateful resources as a plain CloudFormation template. Changed for a test stack only:
/// deletion policies become `Delete` and deletion protection defaults to off, so the stack
/// leaves nothing behind.
fn plain_template(t: &Value) -> Value {
    let mut resources = Map::new();
    let mut used = BTreeSet::new();
    for id in STATEFUL {
        let mut r = t["Resources"][id].clone();
        assert!(r.is_object(), "template resource {id}");
        refs(&r, &mut used);
        let m = r.as_object_mut().unwrap();
        for policy in ["DeletionPolicy", "UpdateReplacePolicy"] {
            if m.contains_key(policy) {
                m.insert(policy.into(), json!("Delete"));
            }
        }
        resources.insert(id.into(), r);
    }
    let mut parameters = Map::new();
    for name in used.iter().filter(|r| !r.starts_with("AWS::")) {
        if STATEFUL.contains(&name.as_str()) {
            continue;
        }
        let mut p = t["Parameters"][name].clone();
        assert!(p.is_object(), "{name} is neither a parameter nor extracted");
        if name == "DeletionProtection" {
            p["Default"] = json!("false");
        }
        parameters.insert(name.clone(), p);
    }
    json!({
        "AWSTemplateFormatVersion": "2010-09-09",
        "Description": "countersign infra test: the stateful resources of infra/template.yaml",
        "Parameters": parameters,
        "Resources": resources,
        "Outputs": {
            "TableName": {"Value": {"Ref": "Table"}},
            "ScheduleGroupName": {"Value": {"Ref": "WakeScheduleGroup"}},
            "QueueArn": {"Value": {"Fn::GetAtt": ["WakeDeadLetterQueue", "Arn"]}}
        }
    })
}

async fn wait_stack(cfn: &Cfn, name: &str) -> StackStatus {
    for _ in 0..120 {
        let out = cfn.describe_stacks().stack_name(name).send().await;
        let status = match out {
            Ok(out) => out.stacks()[0].stack_status().cloned().expect("status"),
            // A deleted stack may no longer be found by name.
            Err(_) => return StackStatus::DeleteComplete,
        };
        if !status.as_str().ends_with("IN_PROGRESS") {
            return status;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!("stack {name} did not settle within 60 s");
}

async fn stack_failure(cfn: &Cfn, name: &str) -> String {
    let events = cfn
        .describe_stack_events()
        .stack_name(name)
        .send()
        .await
        .map(|e| e.stack_events().to_vec())
        .unwrap_or_default();
    events
        .iter()
        .filter(|e| {
            e.resource_status()
                .is_some_and(|s| s.as_str().ends_with("FAILED"))
        })
        .map(|e| {
            format!(
                "{} {}: {}",
                e.logical_resource_id().unwrap_or("?"),
                e.resource_status().map(|s| s.as_str()).unwrap_or("?"),
                e.resource_status_reason().unwrap_or("")
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn key_schema(keys: &[aws_sdk_dynamodb::types::KeySchemaElement]) -> Value {
    keys.iter()
        .map(|k| json!({"AttributeName": k.attribute_name(), "KeyType": k.key_type().as_str()}))
        .collect()
}

#[tokio::test]
async fn issue4_localstack_cloudformation_creates_the_templates_table_group_and_queue() {
    let sdk: SdkConfig = localstack::sdk().await;
    let cfn = Cfn::new(&sdk);
    let spec: Value = serde_json::from_str(&repo_file("infra/table.json")).unwrap();
    let stack = localstack::unique("infra");
    let body = serde_json::to_string(&plain_template(&template())).unwrap();

    cfn.create_stack()
        .stack_name(&stack)
        .template_body(body)
        .send()
        .await
        .expect("CreateStack");
    let status = wait_stack(&cfn, &stack).await;
    assert_eq!(
        status,
        StackStatus::CreateComplete,
        "{}",
        stack_failure(&cfn, &stack).await
    );
    // Check in a task so that the stack is deleted whatever the checks find.
    let checks = tokio::spawn(check_stack(sdk.clone(), stack.clone(), spec));
    let checked = checks.await;
    cfn.delete_stack().stack_name(&stack).send().await.unwrap();
    let status = wait_stack(&cfn, &stack).await;
    if let Err(failed) = checked {
        std::panic::resume_unwind(failed.into_panic());
    }
    assert_eq!(status, StackStatus::DeleteComplete);
}

/// What the stack made: the table, the schedule group and the queue, as the template says.
async fn check_stack(sdk: SdkConfig, stack: String, spec: Value) {
    let cfn = Cfn::new(&sdk);
    let described = cfn
        .describe_stacks()
        .stack_name(&stack)
        .send()
        .await
        .unwrap();
    let outputs: BTreeMap<String, String> = described.stacks()[0]
        .outputs()
        .iter()
        .map(|o| {
            (
                o.output_key().unwrap().to_owned(),
                o.output_value().unwrap().to_owned(),
            )
        })
        .collect();

    // The table: the same keys and indexes as infra/table.json (what the adapter queries).
    let ddb = aws_sdk_dynamodb::Client::new(&sdk);
    let table = ddb
        .describe_table()
        .table_name(&outputs["TableName"])
        .send()
        .await
        .expect("DescribeTable")
        .table
        .expect("table");
    assert_eq!(key_schema(table.key_schema()), spec["KeySchema"]);
    let attributes: BTreeSet<String> = table
        .attribute_definitions()
        .iter()
        .map(|a| json!({"AttributeName": a.attribute_name(), "AttributeType": a.attribute_type().as_str()}).to_string())
        .collect();
    let expected_attributes: BTreeSet<String> = list(&spec["AttributeDefinitions"])
        .iter()
        .map(Value::to_string)
        .collect();
    assert_eq!(attributes, expected_attributes);
    let indexes: BTreeMap<String, Value> = table
        .global_secondary_indexes()
        .iter()
        .map(|i| {
            let name = i.index_name().unwrap().to_owned();
            let projection = i
                .projection()
                .and_then(|p| p.projection_type())
                .map(|p| p.as_str().to_owned());
            let mut index = json!({
                "IndexName": name,
                "KeySchema": key_schema(i.key_schema()),
                "Projection": {"ProjectionType": projection},
            });
            let non_key = i
                .projection()
                .map(|p| p.non_key_attributes())
                .unwrap_or_default();
            if !non_key.is_empty() {
                index["Projection"]["NonKeyAttributes"] = json!(non_key);
            }
            (name, index)
        })
        .collect();
    let expected: BTreeMap<String, Value> = list(&spec["GlobalSecondaryIndexes"])
        .into_iter()
        .map(|i| (i["IndexName"].as_str().unwrap().to_owned(), i))
        .collect();
    assert_eq!(
        indexes, expected,
        "DescribeTable's indexes = infra/table.json"
    );
    assert_eq!(
        table
            .billing_mode_summary()
            .and_then(|b| b.billing_mode())
            .map(|b| b.as_str()),
        spec["BillingMode"].as_str()
    );
    let ttl = ddb
        .describe_time_to_live()
        .table_name(&outputs["TableName"])
        .send()
        .await
        .expect("DescribeTimeToLive")
        .time_to_live_description
        .expect("ttl");
    assert_eq!(
        ttl.attribute_name(),
        spec["TimeToLiveAttribute"].as_str(),
        "TTL attribute"
    );
    assert_eq!(
        ttl.time_to_live_status().map(|s| s.as_str()),
        Some("ENABLED")
    );

    // The schedule group the wakes are created in.
    let scheduler = aws_sdk_scheduler::Client::new(&sdk);
    let group = scheduler
        .get_schedule_group()
        .name(&outputs["ScheduleGroupName"])
        .send()
        .await
        .expect("GetScheduleGroup");
    assert_eq!(group.state().map(|s| s.as_str()), Some("ACTIVE"));
    assert!(
        outputs["ScheduleGroupName"].starts_with(&stack),
        "named after the stack"
    );
    assert!(outputs["QueueArn"].starts_with("arn:aws:sqs:"));
}

#[tokio::test]
async fn issue4_localstack_sam_transform_expands_one_invoke_permission_per_route() {
    let sdk: SdkConfig = localstack::sdk().await;
    let cfn = Cfn::new(&sdk);
    let mut t = template();
    // What `sam deploy` does before CloudFormation sees the template: code is in S3.
    let mut functions = BTreeMap::new();
    for (id, r) in t["Resources"].as_object_mut().unwrap() {
        if r["Type"] == "AWS::Serverless::Function" {
            r["Properties"]["CodeUri"] = json!("s3://countersign-artifacts/placeholder.zip");
            let name = r["Properties"]["FunctionName"]["Fn::Sub"]
                .as_str()
                .unwrap()
                .trim_start_matches("${AWS::StackName}-")
                .to_owned();
            functions.insert(id.clone(), name);
        }
    }

    let stack = localstack::unique("sam");
    cfn.create_change_set()
        .stack_name(&stack)
        .change_set_name("transform")
        .change_set_type(ChangeSetType::Create)
        .template_body(serde_json::to_string(&t).unwrap())
        .capabilities(Capability::CapabilityIam)
        .capabilities(Capability::CapabilityAutoExpand)
        .send()
        .await
        .expect("CreateChangeSet");
    let mut changes = Vec::new();
    for _ in 0..60 {
        let c = cfn
            .describe_change_set()
            .stack_name(&stack)
            .change_set_name("transform")
            .send()
            .await
            .expect("DescribeChangeSet");
        let status = c
            .status()
            .map(|s| s.as_str().to_owned())
            .unwrap_or_default();
        if !status.ends_with("IN_PROGRESS") {
            assert_eq!(status, "CREATE_COMPLETE", "{:?}", c.status_reason());
            changes = c
                .changes()
                .iter()
                .filter_map(|ch| ch.resource_change())
                .map(|rc| {
                    (
                        rc.logical_resource_id().unwrap_or_default().to_owned(),
                        rc.resource_type().unwrap_or_default().to_owned(),
                    )
                })
                .collect();
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let _ = cfn.delete_stack().stack_name(&stack).send().await;
    assert!(!changes.is_empty(), "the change set did not settle");

    let of_type = |ty: &str| -> Vec<&String> {
        changes
            .iter()
            .filter(|(_, t)| t == ty)
            .map(|(id, _)| id)
            .collect()
    };
    assert_eq!(of_type("AWS::Lambda::Function").len(), 4);
    assert_eq!(of_type("AWS::ApiGatewayV2::Api"), vec!["Api"]);
    assert!(
        changes
            .iter()
            .all(|(_, ty)| !ty.starts_with("AWS::Serverless::")),
        "everything transformed"
    );
    // SAM adds one API Gateway invoke permission per routed event, named <Function><Event>Permission.
    let mut per_function: BTreeMap<String, usize> = BTreeMap::new();
    for id in of_type("AWS::Lambda::Permission") {
        let (_, name) = functions
            .iter()
            .find(|(fid, _)| id.starts_with(fid.as_str()))
            .unwrap_or_else(|| panic!("permission {id} of no function"));
        *per_function.entry(name.clone()).or_default() += 1;
    }
    let mut expected: BTreeMap<String, usize> = BTreeMap::new();
    for (_, _, owner) in ROUTES {
        *expected.entry(owner.to_string()).or_default() += 1;
    }
    assert_eq!(
        per_function, expected,
        "invoke permissions per function = routes per function in api::ROUTES (resume: none)"
    );
    // No generated role: each function keeps the least-privilege role the template gives it.
    let roles: BTreeSet<String> = of_type("AWS::IAM::Role").into_iter().cloned().collect();
    let expected_roles = [
        "ApproveRole",
        "CancelRole",
        "IntakeRole",
        "ResumeRole",
        "SchedulerRole",
    ];
    assert_eq!(roles, expected_roles.map(String::from).into());
}

/// The stack's identity table (docs/identity.md): the template's `IdentityConfig` parameter
/// and the parameters and conditions it reads, verbatim, created by LocalStack's CloudFormation
/// under a path holding a document of one tenant, then read as the functions read their
/// configuration (`countersign::boot::aws::source::read`). `pool`: with `CreateUserPool`, where a
/// stand-in resource named `UserPool` gives the pool's id (Cognito is not in the host
/// LocalStack).
async fn identity_stack(pool: bool) -> countersign::config::IdentityConfig {
    let sdk: SdkConfig = localstack::sdk().await;
    let cfn = Cfn::new(&sdk);
    let ssm = aws_sdk_ssm::Client::new(&sdk);
    let t = template();
    let path = format!("/{}", localstack::unique("identity"));
    ssm.put_parameter()
        .name(format!("{path}/00"))
        .value("[tenants.acme]\ntime_zone = \"UTC\"\n")
        .r#type(aws_sdk_ssm::types::ParameterType::String)
        .send()
        .await
        .expect("PutParameter");
    let mut resources = json!({"IdentityConfig": t["Resources"]["IdentityConfig"].clone()});
    let pool_id = format!("eu-west-1_{}", localstack::unique("pool").replace('-', ""));
    if pool {
        resources["UserPool"] = json!({
            "Type": "AWS::SSM::Parameter", "Condition": "CreateUserPool",
            "Properties": {"Name": pool_id, "Type": "String", "Value": "a stand-in for the pool"},
        });
    }
    // The parameters they name, by `Ref` or inside an `Fn::Sub`.
    let mut used = BTreeSet::new();
    refs(&resources, &mut used);
    refs(&t["Conditions"], &mut used);
    let text = resources.to_string();
    let parameters: Map<String, Value> = t["Parameters"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(name, _)| used.contains(*name) || text.contains(&format!("${{{name}}}")))
        .map(|(name, p)| (name.clone(), p.clone()))
        .collect();
    let body = json!({
        "AWSTemplateFormatVersion": "2010-09-09",
        "Parameters": parameters,
        "Conditions": {
            "HasIdentity": t["Conditions"]["HasIdentity"],
            "CreateUserPool": t["Conditions"]["CreateUserPool"],
        },
        "Resources": resources,
    });
    let stack = localstack::unique("identity");
    let parameter = |k: &str, v: &str| {
        aws_sdk_cloudformation::types::Parameter::builder()
            .parameter_key(k)
            .parameter_value(v)
            .build()
    };
    let issuer = if pool {
        ""
    } else {
        "https://login.example.com/realms/acme"
    };
    cfn.create_stack()
        .stack_name(&stack)
        .template_body(body.to_string())
        .parameters(parameter("ConfigPath", &path))
        .parameters(parameter("IdentityTenant", "acme"))
        .parameters(parameter("IdentityIssuer", issuer))
        .parameters(parameter(
            "IdentityAudience",
            "https://countersign.example.com",
        ))
        .parameters(parameter("CreateUserPool", &pool.to_string()))
        .parameters(parameter("UserPoolDomainPrefix", "acme-people"))
        .send()
        .await
        .expect("CreateStack");
    let status = wait_stack(&cfn, &stack).await;
    let failure = stack_failure(&cfn, &stack).await;
    let document = countersign::boot::aws::source::read(&ssm, &path).await;
    cfn.delete_stack().stack_name(&stack).send().await.unwrap();
    wait_stack(&cfn, &stack).await;
    let _ = ssm
        .delete_parameter()
        .name(format!("{path}/00"))
        .send()
        .await;
    assert_eq!(status, StackStatus::CreateComplete, "{failure}");
    let document = document.expect("the document and the stack's part");
    assert_eq!(document.versions.len(), 2, "{document:?}");
    assert!(
        document.versions[1].0.ends_with("/identity"),
        "{document:?}"
    );
    let config = countersign::config::Config::from_toml(&document.text)
        .unwrap_or_else(|e| panic!("{e}\n{}", document.text));
    let identity = config.tenants["acme"].identity.clone();
    let identity = identity.unwrap_or_else(|| panic!("no identity:\n{}", document.text));
    assert_eq!(identity.audience, "https://countersign.example.com");
    if pool {
        // https://cognito-idp.<region>.<URLSuffix>/<pool id>: the suffix is amazonaws.com on
        // AWS (amazonaws.com.cn in China), and LocalStack's own here.
        let region = sdk.region().expect("a region");
        let pool = format!("https://cognito-idp.{region}.");
        assert!(identity.issuer.starts_with(&pool), "{}", identity.issuer);
        assert!(identity.issuer.ends_with(&format!("/{pool_id}")));
    } else {
        assert_eq!(identity.issuer, issuer);
    }
    identity
}

#[tokio::test]
async fn issue31_sc_ops_03_localstack_the_stacks_issuer_and_audience_reach_the_configuration() {
    let identity = identity_stack(false).await;
    // The defaults: countersign's own scope names and the `groups` claim.
    assert_eq!(identity.approve_scope, "countersign:approve");
    assert_eq!(identity.groups_claim, "groups");
}

#[tokio::test]
async fn issue31_sc_ops_03_localstack_the_stacks_user_pool_is_the_issuer_with_its_scope_names() {
    let identity = identity_stack(true).await;
    // A user pool writes a resource server's scope as <identifier>/<name>.
    let aud = "https://countersign.example.com";
    assert_eq!(identity.agent_scope, format!("{aud}/countersign:agent"));
    assert_eq!(identity.approve_scope, format!("{aud}/countersign:approve"));
    assert_eq!(identity.admin_scope, format!("{aud}/countersign:admin"));
    assert_eq!(identity.groups_claim, "cognito:groups");
}
