//! The SAM template (`infra/template.yaml`) held to the code (issue 4, SPEC §7): the routes the
//! router serves, the environment the functions read, the AWS calls each function makes
//! (`infra/permissions.json`), the table (`infra/table.json`), and a Scheduler role that can
//! invoke only the resume function. No AWS needed: the template is read as plain YAML.

use countersign::{
    api::ROUTES,
    boot::aws::{ENV_VARS, HTTP_ENV},
};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The functions of SPEC §7, each built from `functions/<name>` as binary `countersign-<name>`.
const FUNCTIONS: [&str; 4] = ["intake", "approve", "cancel", "resume"];
/// The longest tool timeout the config accepts (infra/README.md "Timeouts").
const SUPPORTED_TOOL_TIMEOUT_S: u64 = countersign::config::MAX_TOOL_TIMEOUT.as_secs() as u64;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ is inside the repo")
        .to_path_buf()
}

fn read(path: &str) -> String {
    std::fs::read_to_string(repo().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The template as JSON. Short-form tags (`!Ref`) would not parse into plain values: the
/// template keeps to long-form intrinsics on purpose.
fn template() -> Value {
    serde_norway::from_str(&read("infra/template.yaml"))
        .expect("infra/template.yaml is plain YAML (long-form intrinsics, no !Tags)")
}

fn json_file(path: &str) -> Value {
    serde_json::from_str(&read(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn resources(t: &Value) -> &Map<String, Value> {
    t["Resources"].as_object().expect("Resources")
}

fn resource<'a>(t: &'a Value, id: &str) -> &'a Value {
    resources(t)
        .get(id)
        .unwrap_or_else(|| panic!("resource {id} is missing"))
}

fn of_type<'a>(t: &'a Value, ty: &str) -> Vec<(&'a String, &'a Value)> {
    resources(t)
        .iter()
        .filter(|(_, r)| r["Type"] == ty)
        .collect()
}

fn sub(s: &str) -> Value {
    json!({ "Fn::Sub": s })
}

fn get_att(id: &str, att: &str) -> Value {
    json!({ "Fn::GetAtt": [id, att] })
}

fn reference(id: &str) -> Value {
    json!({ "Ref": id })
}

/// A policy's `Action`/`Resource`: a string or a list of them.
fn list(v: &Value) -> Vec<Value> {
    match v {
        Value::Array(items) => items.clone(),
        Value::Null => vec![],
        other => vec![other.clone()],
    }
}

/// function name (intake, …) → logical id, from `FunctionName: ${AWS::StackName}-<name>`.
fn functions(t: &Value) -> BTreeMap<String, String> {
    of_type(t, "AWS::Serverless::Function")
        .into_iter()
        .map(|(id, r)| {
            let name = r["Properties"]["FunctionName"]["Fn::Sub"]
                .as_str()
                .and_then(|s| s.strip_prefix("${AWS::StackName}-"))
                .unwrap_or_else(|| {
                    panic!("{id}: FunctionName must be Fn::Sub ${{AWS::StackName}}-<name>")
                });
            (name.to_owned(), id.clone())
        })
        .collect()
}

/// The ARN of the resume function as the template spells it where GetAtt cannot be used.
const RESUME_ARN_SUB: &str =
    "arn:${AWS::Partition}:lambda:${AWS::Region}:${AWS::AccountId}:function:${AWS::StackName}-resume";

#[test]
fn issue4_the_template_deploys_the_four_functions_built_with_cargo_lambda() {
    let t = template();
    assert_eq!(t["Transform"], "AWS::Serverless-2016-10-31");
    let fns = functions(&t);
    assert_eq!(
        fns.keys().map(String::as_str).collect::<BTreeSet<_>>(),
        FUNCTIONS.into_iter().collect::<BTreeSet<_>>(),
        "SPEC §7: exactly the functions intake, approve, cancel, resume"
    );
    let globals = &t["Globals"]["Function"];
    for (name, id) in &fns {
        let r = resource(&t, id);
        let p = &r["Properties"];
        let prop = |k: &str| {
            if p[k].is_null() {
                globals[k].clone()
            } else {
                p[k].clone()
            }
        };
        assert_eq!(prop("Runtime"), "provided.al2023", "{id}");
        assert_eq!(prop("Architectures"), json!(["arm64"]), "{id}");
        assert_eq!(prop("Handler"), "bootstrap", "{id}");
        assert_eq!(r["Metadata"]["BuildMethod"], "rust-cargolambda", "{id}");
        let binary = format!("countersign-{name}");
        assert_eq!(r["Metadata"]["BuildProperties"]["Binary"], binary, "{id}");
        // The workspace root, where cargo-lambda leaves target/lambda/<binary>/bootstrap.
        assert_eq!(p["CodeUri"], "..", "{id}: CodeUri is the workspace root");
        let manifest = read(&format!("functions/{name}/Cargo.toml"));
        assert!(
            manifest.contains(&format!("name = \"{binary}\"")),
            "functions/{name}/Cargo.toml builds binary {binary}"
        );
        assert!(
            p["MemorySize"]
                .as_i64()
                .is_some_and(|m| (128..=1024).contains(&m)),
            "{id}: MemorySize"
        );
        assert!(p["Timeout"].as_i64().is_some(), "{id}: Timeout");
    }
}

#[test]
fn issue4_functions_that_run_tools_outlast_the_longest_tool_run() {
    // intake (allow → runs now), approve (due at approval) and resume (wake, sweep) run tools;
    // a function killed mid-run leaves an expired lease (SC-REC-02) instead of a result.
    let t = template();
    let fns = functions(&t);
    // The engine's own budget for one claim of a `retry` tool at the supported timeout.
    let tool = countersign::config::ToolEntry {
        name: "longest".into(),
        executor: countersign::config::Executor::Webhook {
            url: "https://tool.example".into(),
            secret: countersign::config::Secret::Env("UNUSED".into()),
            timeout_ms: SUPPORTED_TOOL_TIMEOUT_S * 1000,
            allow_private: false,
            signing: Default::default(),
        },
        recovery: countersign::config::Recovery::Retry,
        info: Default::default(),
    };
    let worst = tool.claim_budget().as_secs();
    for name in ["intake", "approve", "resume"] {
        let timeout = resource(&t, &fns[name])["Properties"]["Timeout"]
            .as_i64()
            .unwrap();
        assert!(
            timeout > worst && timeout <= 900,
            "{name}: Timeout {timeout}s must exceed one claim of a retry tool at {SUPPORTED_TOOL_TIMEOUT_S}s timeout ({worst}s)"
        );
    }
}

#[test]
fn issue4_sc_api_every_route_the_router_serves_is_routed_to_its_function_and_nothing_else() {
    // SPEC §3 route → function, via countersign::api::ROUTES (held to the router by its test).
    let t = template();
    let fns = functions(&t);
    let mut routed = BTreeSet::new();
    for (name, id) in &fns {
        let events = resource(&t, id)["Properties"]["Events"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        for (event_id, e) in events {
            assert_eq!(
                e["Type"], "HttpApi",
                "{id}.{event_id}: functions are reached through the HTTP API only (resume by Scheduler)"
            );
            let p = &e["Properties"];
            assert_eq!(p["ApiId"], reference("Api"), "{id}.{event_id}");
            assert_eq!(p["PayloadFormatVersion"], "2.0", "{id}.{event_id}");
            let route = (
                p["Method"].as_str().unwrap().to_uppercase(),
                p["Path"].as_str().unwrap().to_owned(),
                name.clone(),
            );
            assert!(routed.insert(route.clone()), "{route:?} routed twice");
        }
    }
    let expected: BTreeSet<_> = ROUTES
        .iter()
        .map(|(m, p, f)| (m.to_string(), p.to_string(), f.to_string()))
        .collect();
    let missing: Vec<_> = expected.difference(&routed).collect();
    let extra: Vec<_> = routed.difference(&expected).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "template routes ≠ api::ROUTES\n  not routed: {missing:?}\n  routed but not served: {extra:?}"
    );
    assert!(
        resource(&t, &fns["resume"])["Properties"]["Events"].is_null(),
        "resume has no API route: only Scheduler invokes it"
    );
    assert_eq!(of_type(&t, "AWS::Serverless::HttpApi").len(), 1);
    assert!(
        of_type(&t, "AWS::Lambda::Permission").is_empty(),
        "no extra invoke permissions"
    );
}

#[test]
fn issue4_env_vars_lists_every_countersign_variable_the_wiring_reads() {
    // The constant is the test's source; make sure it is complete: every COUNTERSIGN_*
    // literal in the AWS wiring and the function binaries is in it.
    let mut sources = vec![read("shared/src/boot/aws.rs")];
    for name in FUNCTIONS {
        sources.push(read(&format!("functions/{name}/src/main.rs")));
    }
    let mut named = BTreeSet::new();
    for text in &sources {
        let mut rest = text.as_str();
        while let Some(at) = rest.find("\"COUNTERSIGN_") {
            let tail = &rest[at + 1..];
            let end = tail
                .find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
                .unwrap_or(tail.len());
            named.insert(tail[..end].to_owned());
            rest = &tail[end..];
        }
    }
    let listed: BTreeSet<String> = ENV_VARS.iter().map(|s| s.to_string()).collect();
    assert_eq!(
        named, listed,
        "countersign::boot::aws::ENV_VARS must name exactly the COUNTERSIGN_* variables the wiring reads"
    );
}

#[test]
fn issue4_every_env_var_a_function_reads_is_set_for_it() {
    let t = template();
    let globals = t["Globals"]["Function"]["Environment"]["Variables"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    for (name, id) in functions(&t) {
        let mut env = globals.clone();
        if let Some(own) = resource(&t, &id)["Properties"]["Environment"]["Variables"].as_object() {
            env.extend(own.clone());
        }
        for var in ENV_VARS {
            assert!(
                env.contains_key(*var),
                "{name} ({id}) reads {var} but the template does not set it"
            );
        }
        // …and each points at the resource it names.
        assert_eq!(env["COUNTERSIGN_TABLE"], reference("Table"), "{name}");
        assert_eq!(
            env["COUNTERSIGN_SCHEDULE_GROUP"],
            reference("WakeScheduleGroup"),
            "{name}"
        );
        assert_eq!(env["COUNTERSIGN_RESUME_ARN"], sub(RESUME_ARN_SUB), "{name}");
        assert_eq!(
            env["COUNTERSIGN_SCHEDULER_ROLE_ARN"],
            get_att("SchedulerRole", "Arn"),
            "{name}"
        );
        assert_eq!(
            env["COUNTERSIGN_DLQ_ARN"],
            get_att("WakeDeadLetterQueue", "Arn"),
            "{name}"
        );
        // The document is in SSM under ConfigPath (SC-OPS-03): the variable that would hold
        // it whole stays empty (Lambda's 4 KB of environment cannot).
        assert_eq!(env["COUNTERSIGN_CONFIG"], "", "{name}");
        assert_eq!(
            env["COUNTERSIGN_CONFIG_SSM"],
            reference("ConfigPath"),
            "{name}"
        );
        assert_eq!(
            env["COUNTERSIGN_CONFIG_RECHECK"],
            reference("ConfigRecheck"),
            "{name}"
        );
        assert_eq!(
            env["COUNTERSIGN_RETENTION"],
            reference("SealedRetention"),
            "{name}"
        );
    }
    let fns = functions(&t);
    assert_eq!(
        resource(&t, &fns["resume"])["Properties"]["FunctionName"],
        sub("${AWS::StackName}-resume"),
        "COUNTERSIGN_RESUME_ARN is built from this name"
    );
}

/// `lambda_http` leaves a REST API's stage out of the request path only where the function's
/// environment says so; the wiring has no stage stripper of its own (issue 14).
#[test]
fn issue14_every_function_has_lambda_http_leave_the_stage_out() {
    let t = template();
    let (var, value) = HTTP_ENV;
    assert_eq!(
        t["Globals"]["Function"]["Environment"]["Variables"][var], value,
        "the template sets {var} for every function"
    );
    for (name, id) in functions(&t) {
        let own = &resource(&t, &id)["Properties"]["Environment"]["Variables"][var];
        assert!(own.is_null(), "{name} ({id}) overrides {var}");
    }
    assert!(
        !read("shared/src/boot/aws.rs").contains("strip_prefix(&format!(\"/{stage}"),
        "no hand-written stage stripper"
    );
}

/// Every statement of a role's inline policies: (actions, resources, condition).
fn statements(role: &Value, role_id: &str) -> Vec<(Vec<String>, Vec<Value>, Value)> {
    let p = &role["Properties"];
    assert!(
        p["ManagedPolicyArns"].is_null(),
        "{role_id}: no managed policies; everything is listed inline"
    );
    let mut out = Vec::new();
    for policy in list(&p["Policies"]) {
        for s in list(&policy["PolicyDocument"]["Statement"]) {
            assert_eq!(s["Effect"], "Allow", "{role_id}: {s}");
            for forbidden in ["NotAction", "NotResource", "NotPrincipal"] {
                assert!(s[forbidden].is_null(), "{role_id}: {forbidden} in {s}");
            }
            let actions: Vec<String> = list(&s["Action"])
                .iter()
                .map(|a| a.as_str().expect("action is a string").to_owned())
                .collect();
            for a in &actions {
                assert!(!a.contains('*'), "{role_id}: wildcard action {a}");
            }
            let resources = list(&s["Resource"]);
            assert!(
                !resources.is_empty(),
                "{role_id}: statement without Resource"
            );
            assert!(
                !resources.contains(&json!("*")),
                "{role_id}: Resource \"*\" in {s}"
            );
            out.push((actions, resources, s["Condition"].clone()));
        }
    }
    out
}

fn role_of<'a>(t: &'a Value, function_id: &str) -> (String, &'a Value) {
    let p = &resource(t, function_id)["Properties"];
    assert!(
        p["Policies"].is_null(),
        "{function_id}: use its own Role, not SAM Policies (which add managed policies)"
    );
    let role_id = p["Role"]["Fn::GetAtt"][0]
        .as_str()
        .unwrap_or_else(|| panic!("{function_id}: Role must be Fn::GetAtt [<Role>, Arn]"))
        .to_owned();
    let role = resource(t, &role_id);
    assert_eq!(role["Type"], "AWS::IAM::Role");
    (role_id, role)
}

#[test]
fn issue4_each_function_is_allowed_exactly_the_aws_calls_its_code_makes() {
    let t = template();
    let perms = json_file("infra/permissions.json");
    let table = json_file("infra/table.json");
    let indexes: BTreeSet<String> = list(&table["GlobalSecondaryIndexes"])
        .iter()
        .map(|i| i["IndexName"].as_str().unwrap().to_owned())
        .collect();
    let runtime = perms["runtime"].as_object().expect("runtime");
    let declared = perms["functions"].as_object().expect("functions");
    assert_eq!(
        declared.keys().map(String::as_str).collect::<BTreeSet<_>>(),
        FUNCTIONS.into_iter().collect::<BTreeSet<_>>()
    );
    let group_schedules = sub(
        "arn:${AWS::Partition}:scheduler:${AWS::Region}:${AWS::AccountId}:schedule/${WakeScheduleGroup}/cs-*",
    );
    let secret_parameters =
        sub("arn:${AWS::Partition}:ssm:${AWS::Region}:${AWS::AccountId}:parameter/countersign/*");
    let config_path =
        sub("arn:${AWS::Partition}:ssm:${AWS::Region}:${AWS::AccountId}:parameter${ConfigPath}");
    // Wake schedules are named cs-<correlation id>: the policies' cs-* covers them.
    let name = countersign::wake::scheduler::schedule_name(&countersign::domain::resume::Wake {
        tenant: "t".into(),
        action_id: "act_1".into(),
        correlation_id: "cor_1".into(),
    });
    assert!(name.starts_with("cs-"), "{name}");

    for (fname, fid) in functions(&t) {
        let (role_id, role) = role_of(&t, &fid);
        let trust = &role["Properties"]["AssumeRolePolicyDocument"]["Statement"];
        assert_eq!(
            list(trust)
                .iter()
                .map(|s| s["Principal"].clone())
                .collect::<Vec<_>>(),
            vec![json!({"Service": "lambda.amazonaws.com"})],
            "{role_id}: only Lambda assumes it"
        );
        let calls = declared[&fname].as_object().expect("calls");
        for (action, why) in calls.iter().chain(runtime.iter()) {
            assert!(
                why.as_str().is_some_and(|w| w.len() > 10),
                "permissions.json: say why {fname} needs {action}"
            );
        }
        let expected: BTreeSet<&str> = calls
            .keys()
            .chain(runtime.keys())
            .map(String::as_str)
            .collect();
        let mut allowed = BTreeSet::new();
        for (actions, resources, condition) in statements(role, &role_id) {
            for action in &actions {
                allowed.insert(action.clone());
                let service = action.split(':').next().unwrap();
                for r in &resources {
                    let ok = match service {
                        "dynamodb" => {
                            *r == get_att("Table", "Arn")
                                || r["Fn::Sub"]
                                    .as_str()
                                    .and_then(|s| s.strip_prefix("${Table.Arn}/index/"))
                                    .is_some_and(|i| indexes.contains(i))
                        }
                        "scheduler" => *r == group_schedules,
                        // Webhook secrets (secret_ssm): the /countersign/ parameters only;
                        // the configuration: its path only (SC-OPS-03).
                        "ssm" => match action.as_str() {
                            "ssm:GetParameter" => *r == secret_parameters,
                            "ssm:GetParametersByPath" => *r == config_path,
                            _ => false,
                        },
                        // The on-failure destination of resume's asynchronous invocations.
                        "sqs" => *r == get_att("WakeDeadLetterQueue", "Arn"),
                        "iam" => {
                            *r == get_att("SchedulerRole", "Arn")
                                && condition
                                    == json!({"StringEquals": {"iam:PassedToService": "scheduler.amazonaws.com"}})
                        }
                        "logs" => {
                            let logs_id = r["Fn::GetAtt"][0].as_str().unwrap_or_default();
                            resources_name(&t, logs_id)
                                == sub(&format!("/aws/lambda/${{AWS::StackName}}-{fname}"))
                        }
                        _ => false,
                    };
                    assert!(ok, "{role_id}: {action} on {r} (condition {condition}) is broader than {fname} needs");
                }
            }
        }
        let allowed: BTreeSet<&str> = allowed.iter().map(String::as_str).collect();
        let missing: Vec<_> = expected.difference(&allowed).collect();
        let extra: Vec<_> = allowed.difference(&expected).collect();
        assert!(
            missing.is_empty() && extra.is_empty(),
            "{fname}: role {role_id} ≠ infra/permissions.json\n  missing: {missing:?}\n  not needed: {extra:?}"
        );
    }
}

fn resources_name(t: &Value, log_group_id: &str) -> Value {
    let r = resource(t, log_group_id);
    assert_eq!(r["Type"], "AWS::Logs::LogGroup", "{log_group_id}");
    r["Properties"]["LogGroupName"].clone()
}

#[test]
fn issue4_the_scheduler_role_can_only_invoke_the_resume_function() {
    let t = template();
    let role = resource(&t, "SchedulerRole");
    let trust = list(&role["Properties"]["AssumeRolePolicyDocument"]["Statement"]);
    assert_eq!(trust.len(), 1);
    assert_eq!(
        trust[0]["Principal"],
        json!({"Service": "scheduler.amazonaws.com"})
    );
    assert_eq!(
        trust[0]["Condition"]["StringEquals"]["aws:SourceAccount"],
        reference("AWS::AccountId"),
        "confused-deputy guard"
    );
    let mut seen = BTreeSet::new();
    for (actions, resources, condition) in statements(role, "SchedulerRole") {
        for action in actions {
            match action.as_str() {
                "lambda:InvokeFunction" => {
                    assert_eq!(resources, vec![sub(RESUME_ARN_SUB)], "invoke resume only")
                }
                // Scheduler sends undeliverable events to the DLQ as this role.
                "sqs:SendMessage" => {
                    assert_eq!(resources, vec![get_att("WakeDeadLetterQueue", "Arn")])
                }
                other => panic!("SchedulerRole may not {other}"),
            }
            assert!(condition.is_null());
            seen.insert(action);
        }
    }
    assert!(seen.contains("lambda:InvokeFunction"));
    // Every schedule the template creates targets the resume function with this role.
    for (id, s) in of_type(&t, "AWS::Scheduler::Schedule") {
        let target = &s["Properties"]["Target"];
        assert_eq!(target["Arn"], get_att("ResumeFunction", "Arn"), "{id}");
        assert_eq!(target["RoleArn"], get_att("SchedulerRole", "Arn"), "{id}");
    }
    let fns = functions(&t);
    assert_eq!(fns["resume"], "ResumeFunction");
}

#[test]
fn issue4_sc_rec_01_the_sweep_runs_every_minute_and_no_function_can_delete_it() {
    let t = template();
    let sweeps = of_type(&t, "AWS::Scheduler::Schedule");
    assert_eq!(sweeps.len(), 1, "one recurring schedule: the sweep");
    let p = &sweeps[0].1["Properties"];
    assert_eq!(p["ScheduleExpression"], "rate(1 minute)");
    assert_eq!(p["GroupName"], reference("WakeScheduleGroup"));
    assert_eq!(p["State"], "ENABLED");
    let name = p["Name"].as_str().unwrap();
    assert!(
        !name.starts_with("cs-"),
        "the functions may manage cs-* wake schedules only; the sweep is not one"
    );
    let input: countersign::boot::aws::ResumeEvent =
        serde_json::from_str(p["Target"]["Input"].as_str().unwrap())
            .expect("the resume function accepts the sweep's input");
    assert!(matches!(
        input,
        countersign::boot::aws::ResumeEvent::Sweep(_)
    ));
    assert_eq!(
        p["Target"]["DeadLetterConfig"]["Arn"],
        get_att("WakeDeadLetterQueue", "Arn")
    );
    assert_eq!(
        resource(&t, "WakeScheduleGroup")["Type"],
        "AWS::Scheduler::ScheduleGroup"
    );
}

#[test]
fn issue4_the_table_equals_infra_table_json() {
    // One source of truth: the DynamoDB adapter's tests and the LocalStack setup create the
    // table from infra/table.json; the deployed table must be the same.
    let t = template();
    let spec = json_file("infra/table.json");
    let known: BTreeSet<&str> = [
        "AttributeDefinitions",
        "KeySchema",
        "GlobalSecondaryIndexes",
        "BillingMode",
        "TimeToLiveAttribute",
    ]
    .into();
    for key in spec.as_object().unwrap().keys() {
        assert!(
            known.contains(key.as_str()),
            "infra/table.json has {key}: teach this test (and the template) about it"
        );
    }
    let table = resource(&t, "Table");
    assert_eq!(table["Type"], "AWS::DynamoDB::Table");
    assert_eq!(table["DeletionPolicy"], "Retain");
    assert_eq!(table["UpdateReplacePolicy"], "Retain");
    let p = &table["Properties"];
    let as_set =
        |v: &Value| -> BTreeSet<String> { list(v).iter().map(|x| x.to_string()).collect() };
    assert_eq!(
        as_set(&p["AttributeDefinitions"]),
        as_set(&spec["AttributeDefinitions"]),
        "AttributeDefinitions"
    );
    assert_eq!(p["KeySchema"], spec["KeySchema"], "KeySchema");
    let by_name = |v: &Value| -> BTreeMap<String, Value> {
        list(v)
            .into_iter()
            .map(|i| (i["IndexName"].as_str().unwrap().to_owned(), i))
            .collect()
    };
    assert_eq!(
        by_name(&p["GlobalSecondaryIndexes"]),
        by_name(&spec["GlobalSecondaryIndexes"]),
        "GlobalSecondaryIndexes (keys and projections)"
    );
    assert!(p["LocalSecondaryIndexes"].is_null());
    assert_eq!(p["BillingMode"], spec["BillingMode"]);
    assert_eq!(
        p["TimeToLiveSpecification"],
        json!({"AttributeName": spec["TimeToLiveAttribute"], "Enabled": true})
    );
    assert_eq!(
        p["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"],
        true
    );
    assert_eq!(
        p["DeletionProtectionEnabled"],
        reference("DeletionProtection")
    );
    assert_eq!(
        t["Parameters"]["DeletionProtection"]["AllowedValues"],
        json!(["true", "false"])
    );
}

#[test]
fn issue4_alarms_watch_the_dead_letter_queue_and_every_function() {
    let t = template();
    let alarms = of_type(&t, "AWS::CloudWatch::Alarm");
    let watches = |namespace: &str, metric: &str, dimension: &Value| {
        alarms.iter().any(|(_, a)| {
            let p = &a["Properties"];
            p["Namespace"] == namespace
                && p["MetricName"] == metric
                && list(&p["Dimensions"])
                    .iter()
                    .any(|d| d["Value"] == *dimension)
                && p["ComparisonOperator"] == "GreaterThanThreshold"
                && p["Threshold"] == 0
        })
    };
    assert!(
        watches(
            "AWS/SQS",
            "ApproximateNumberOfMessagesVisible",
            &get_att("WakeDeadLetterQueue", "QueueName")
        ),
        "an alarm on undeliverable wakes"
    );
    for (name, id) in functions(&t) {
        assert!(
            watches("AWS/Lambda", "Errors", &reference(&id)),
            "an Errors alarm on {name}"
        );
    }
    assert_eq!(
        resource(&t, "WakeDeadLetterQueue")["Type"],
        "AWS::SQS::Queue"
    );
}

#[test]
fn issue4_outputs_name_the_api_url_and_the_table() {
    let t = template();
    let outputs = &t["Outputs"];
    assert_eq!(
        outputs["ApiUrl"]["Value"],
        sub("https://${Api}.execute-api.${AWS::Region}.${AWS::URLSuffix}")
    );
    assert_eq!(outputs["TableName"]["Value"], reference("Table"));
    // The configuration document comes from SSM, read by the functions themselves (see
    // infra/README.md for why): the path and how often they look are parameters.
    let path = &t["Parameters"]["ConfigPath"];
    assert_eq!(
        (&path["Type"], &path["Default"]),
        (&json!("String"), &json!("/countersign/config"))
    );
    let recheck = &t["Parameters"]["ConfigRecheck"];
    assert_eq!(
        (&recheck["Type"], &recheck["Default"]),
        (&json!("String"), &json!("60s"))
    );
}

/// The metric table of `docs/operations.md`: metric name → its row.
fn documented_metrics() -> BTreeMap<String, String> {
    let doc = read("docs/operations.md");
    let section = doc
        .split("\n## Metrics\n")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("docs/operations.md has a Metrics section");
    section
        .lines()
        .filter_map(|line| {
            let name = line.strip_prefix("| `")?.split('`').next()?;
            Some((name.to_owned(), line.to_owned()))
        })
        .collect()
}

/// The dashboard's widgets' metrics, each `[namespace, name, dimension…, {options}?]`.
fn dashboard_metrics(t: &Value) -> Vec<Vec<Value>> {
    let body = resource(t, "Dashboard")["Properties"]["DashboardBody"]["Fn::Sub"]
        .as_str()
        .expect("DashboardBody is an Fn::Sub string");
    // Every substitution becomes 0 (inside a string "…0…"): the JSON parses as it will.
    let mut plain = String::new();
    let mut rest = body;
    while let Some(at) = rest.find("${") {
        plain.push_str(&rest[..at]);
        plain.push('0');
        rest = &rest[at + rest[at..].find('}').expect("a closed ${…}") + 1..];
    }
    plain.push_str(rest);
    let body: Value = serde_json::from_str(&plain).expect("the dashboard body is JSON");
    list(&body["widgets"])
        .iter()
        .flat_map(|w| list(&w["properties"]["metrics"]))
        .map(|m| searched(&m).unwrap_or_else(|| list(&m)))
        .collect()
}

/// A metric a widget finds by a search expression (a labelled family whose label values the
/// template cannot know, e.g. a rule's name): `SEARCH('{Countersign,…} MetricName="x"', …)`
/// read as `["Countersign", "x"]`.
fn searched(m: &Value) -> Option<Vec<Value>> {
    // An expression is a metrics row of one object: `[{"expression": …, "id": …}]`.
    let expression = m.get(0)?.get("expression")?.as_str()?;
    let namespace = expression
        .split_once("SEARCH('{")?
        .1
        .split([',', '}'])
        .next()?;
    let name = expression
        .split_once("MetricName=\"")?
        .1
        .split('"')
        .next()?;
    Some(vec![json!(namespace), json!(name)])
}

/// Issue 19: the alarms on countersign's own metrics, and the dashboard, name only metrics that
/// `docs/operations.md` defines (namespace `Countersign`, no dimensions), and each metric the
/// document says is alarmed has its alarm, notifying the topic parameter.
#[test]
fn issue19_alarms_and_the_dashboard_name_only_documented_metrics() {
    let t = template();
    let documented = documented_metrics();
    for required in [
        "wake_lateness_seconds",
        "sweep_lost_wakes",
        "notifications_dead",
        "records_quarantined",
    ] {
        assert!(
            documented.contains_key(required),
            "{required} is documented"
        );
    }
    let alarms = of_type(&t, "AWS::CloudWatch::Alarm");
    for (id, a) in &alarms {
        let p = &a["Properties"];
        assert_eq!(
            p["AlarmActions"],
            json!({"Fn::If": ["HasAlarmTopic", [reference("AlarmTopicArn")], reference("AWS::NoValue")]}),
            "{id} notifies the AlarmTopicArn topic"
        );
        if p["Namespace"] != "Countersign" {
            continue;
        }
        let metric = p["MetricName"].as_str().unwrap_or_default();
        let row = documented.get(metric).unwrap_or_else(|| {
            panic!("{id} watches {metric}, which docs/operations.md does not define")
        });
        assert!(
            row.contains(&format!("`{id}`")),
            "docs/operations.md names {id} beside {metric}"
        );
        assert!(
            p["Dimensions"].is_null(),
            "{id}: the metrics are published without dimensions"
        );
    }
    for (metric, row) in &documented {
        let Some(alarm) = row
            .split('|')
            .nth(6)
            .and_then(|cell| cell.split('`').nth(1))
        else {
            continue;
        };
        let p = &resource(&t, alarm)["Properties"];
        assert_eq!(p["MetricName"], json!(metric), "{alarm}");
        assert_eq!(p["Namespace"], "Countersign", "{alarm}");
    }
    let lateness = &resource(&t, "LatenessAlarm")["Properties"];
    assert_eq!(lateness["ExtendedStatistic"], "p99");
    assert_eq!(lateness["Threshold"], reference("LatenessP99Seconds"));
    assert_eq!(t["Parameters"]["LatenessP99Seconds"]["Type"], "Number");

    let metrics = dashboard_metrics(&t);
    let ours: BTreeSet<String> = metrics
        .iter()
        .filter(|m| m.first() == Some(&json!("Countersign")))
        .map(|m| m[1].as_str().unwrap().to_owned())
        .collect();
    for name in &ours {
        assert!(
            documented.contains_key(name),
            "the dashboard shows {name}, which docs/operations.md does not define"
        );
    }
    assert_eq!(
        ours,
        documented.keys().cloned().collect(),
        "the dashboard shows every documented metric"
    );
    for (name, id) in functions(&t) {
        assert!(
            metrics
                .iter()
                .any(|m| m[..2] == [json!("AWS/Lambda"), json!("Errors")]
                    && m.get(3) == Some(&json!(format!("0")))
                    && resource(&t, &id)["Type"] == "AWS::Serverless::Function"),
            "the dashboard shows {name}'s errors"
        );
    }
}

/// Issue 19: the resume function's asynchronous invocation config (EventBridge Scheduler invokes
/// it asynchronously: infra/README.md argues the values, and states the ones the template has),
/// reserved concurrency from parameters on every function, and the dead-letter queue encrypted.
#[test]
fn issue19_resume_async_config_concurrency_and_encryption() {
    let t = template();
    let fns = functions(&t);
    let async_config = &resource(&t, &fns["resume"])["Properties"]["EventInvokeConfig"];
    let retries = async_config["MaximumRetryAttempts"]
        .as_u64()
        .expect("retries set");
    let age = async_config["MaximumEventAgeInSeconds"]
        .as_u64()
        .expect("max age set");
    assert_eq!(
        async_config["DestinationConfig"]["OnFailure"],
        json!({"Type": "SQS", "Destination": get_att("WakeDeadLetterQueue", "Arn")})
    );
    let readme = read("infra/README.md");
    for stated in [
        format!("`MaximumRetryAttempts: {retries}`"),
        format!("`MaximumEventAgeInSeconds: {age}`"),
    ] {
        assert!(readme.contains(&stated), "infra/README.md states {stated}");
    }
    for (name, id) in &fns {
        let want = if name == "resume" {
            "ResumeConcurrency"
        } else {
            "HttpFunctionConcurrency"
        };
        assert_eq!(
            resource(&t, id)["Properties"]["ReservedConcurrentExecutions"],
            reference(want),
            "{name}"
        );
        assert!(
            t["Parameters"][want]["MinValue"].as_u64() >= Some(1),
            "{want}: 0 would stop {name}"
        );
    }
    assert_eq!(
        resource(&t, "WakeDeadLetterQueue")["Properties"]["SqsManagedSseEnabled"],
        true
    );
}

/// Issue 19: `checkov` runs pinned in CI (infra/lint.sh), and every check the template skips
/// says why, in one line, beside the resource it concerns.
#[test]
fn issue19_checkov_is_pinned_and_every_skip_says_why() {
    let lint = read("infra/lint.sh");
    let pinned = lint
        .lines()
        .find_map(|l| l.strip_prefix("CHECKOV_VERSION="))
        .expect("infra/lint.sh pins checkov");
    assert!(
        pinned.split('.').count() == 3 && pinned.split('.').all(|p| p.parse::<u32>().is_ok()),
        "an exact version: {pinned}"
    );
    assert!(lint.contains("checkov/bin/checkov\" --file template.yaml"));
    assert!(
        read(".ci/run").contains("bash infra/lint.sh"),
        "CI runs the lint"
    );
    let t = template();
    let mut skipped = 0;
    for (id, r) in resources(&t) {
        for skip in list(&r["Metadata"]["checkov"]["skip"]) {
            let check = skip["id"].as_str().unwrap_or_default();
            let why = skip["comment"].as_str().unwrap_or_default();
            assert!(check.starts_with("CKV_"), "{id}: {skip}");
            assert!(
                why.len() > 30 && !why.contains('\n'),
                "{id} skips {check}: say why in one line"
            );
            skipped += 1;
        }
    }
    assert!(skipped > 0);
}
