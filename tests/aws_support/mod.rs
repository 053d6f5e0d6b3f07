//! Support for the tests of the AWS path against LocalStack, compiled only into them: a fresh
//! schedule group per test, the engine wired exactly as the Lambda functions wire it, real API
//! Gateway events through `lambda_http`'s adapter, and the Scheduler's stored input delivered to
//! the resume handler. The SDK on LocalStack and a fresh table are the support library's
//! (`countersign_tests::localstack`), which every store's tests share.
// Each test uses a part of it.
#![allow(dead_code, unused_imports)]

pub mod capacity;

use aws_config::SdkConfig;
use countersign::{
    boot::aws::{self, ResumeEvent, Settings},
    clock::ManualClock,
    config::Config,
    domain::resume::Wake,
    tools::Executors,
    wake::scheduler::{schedule_name, SchedulerTarget},
    Clock, Engine,
};
use countersign_tests::ToolServer;
// The SDK on LocalStack and a fresh table: in the support library, beside the stores.
pub use countersign_tests::localstack::{create_table, endpoint, sdk, unique};
use jiff::{SignedDuration, Timestamp};
use lambda_http::{request::LambdaRequest, Adapter, Context, LambdaEvent, Service};
use serde_json::{json, Value};
use std::sync::Arc;

pub const RESUME_ARN: &str = "arn:aws:lambda:us-east-1:000000000000:function:countersign-resume";
pub const ROLE_ARN: &str = "arn:aws:iam::000000000000:role/countersign-scheduler";
pub const DLQ_ARN: &str = "arn:aws:sqs:us-east-1:000000000000:countersign-wake-dlq";

pub async fn create_group(sdk: &SdkConfig, name: &str) {
    aws_sdk_scheduler::Client::new(sdk)
        .create_schedule_group()
        .name(name)
        .send()
        .await
        .expect("CreateScheduleGroup");
}

/// One answer of an HTTP function.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub body: Value,
    pub headers: Value,
}

/// A test's AWS world: its own table and schedule group, a tool server, a manual clock (set to
/// real time at start) and the engine wired as the functions wire it.
pub struct AwsWorld {
    pub sdk: SdkConfig,
    pub table: String,
    pub group: String,
    pub tools: ToolServer,
    pub clock: Arc<ManualClock>,
    pub settings: Settings,
    pub engine: Arc<Engine>,
    pub scheduler: aws_sdk_scheduler::Client,
}

impl AwsWorld {
    pub async fn new(label: &str) -> AwsWorld {
        Self::with_group(label, None).await
    }

    /// `group`: use this schedule group name and do not create it (to make arming fail).
    pub async fn with_group(label: &str, group: Option<&str>) -> AwsWorld {
        Self::build(label, group, "").await
    }

    /// With more configuration appended to the test document (tables only, e.g. notifications).
    pub async fn with_config(label: &str, extra: &str) -> AwsWorld {
        Self::build(label, None, extra).await
    }

    async fn build(label: &str, group: Option<&str>, extra: &str) -> AwsWorld {
        let sdk = sdk().await;
        let table = unique(label);
        create_table(&sdk, &table).await;
        let group = match group {
            Some(g) => g.to_owned(),
            None => {
                let g = unique(label);
                create_group(&sdk, &g).await;
                g
            }
        };
        let tools = ToolServer::start().await;
        let text = countersign_tests::config_toml(&tools, "1m", "5s") + extra;
        // As a function boots: parsed, then the deed keys it names read (aws::Boot::from_env).
        let config = Config::from_toml(&text)
            .and_then(Config::read_keys)
            .expect("test config");
        let settings = Settings {
            table: table.clone(),
            target: SchedulerTarget {
                schedule_group: group.clone(),
                resume_function_arn: RESUME_ARN.into(),
                role_arn: ROLE_ARN.into(),
                dead_letter_arn: Some(DLQ_ARN.into()),
            },
            config: Arc::new(config),
            retention: None,
        };
        let clock = Arc::new(ManualClock::new(Timestamp::now()));
        let engine = aws::engine_with(
            &settings,
            &sdk,
            Arc::new(Executors::new()),
            clock.clone() as Arc<dyn Clock>,
        );
        let scheduler = aws_sdk_scheduler::Client::new(&sdk);
        AwsWorld {
            sdk,
            table,
            group,
            tools,
            clock,
            settings,
            engine,
            scheduler,
        }
    }

    pub fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// RFC 3339 UTC, `secs` from the test clock's now.
    pub fn at(&self, secs: i64) -> String {
        self.now()
            .checked_add(SignedDuration::from_secs(secs))
            .unwrap()
            .round(jiff::Unit::Second)
            .unwrap()
            .to_string()
    }

    /// Feed an API Gateway event (JSON, as API Gateway sends it) to an HTTP function's handler
    /// through `lambda_http`'s own adapter — what `lambda_http::run` does with each invocation.
    pub async fn http_event(&self, event: Value) -> Reply {
        http_event(&self.engine, event).await
    }

    /// HTTP API (v2) event.
    pub async fn v2(&self, method: &str, path: &str, key: &str, body: Option<Value>) -> Reply {
        self.http_event(apigw_v2(method, path, key, body, &[]))
            .await
    }

    /// REST API (v1) event, stage `prod`.
    pub async fn v1(&self, method: &str, path: &str, key: &str, body: Option<Value>) -> Reply {
        self.http_event(apigw_v1(method, path, key, body, &[]))
            .await
    }

    /// Deliver a schedule's `Target.Input` to the resume handler, as the Scheduler would.
    pub async fn deliver(&self, input: &str) -> Result<Value, String> {
        deliver(&self.engine, input).await
    }

    /// The stored schedule of this wake, if any.
    pub async fn schedule(
        &self,
        wake: &Wake,
    ) -> Option<aws_sdk_scheduler::operation::get_schedule::GetScheduleOutput> {
        match self
            .scheduler
            .get_schedule()
            .group_name(&self.group)
            .name(schedule_name(wake))
            .send()
            .await
        {
            Ok(s) => Some(s),
            Err(e)
                if e.as_service_error()
                    .is_some_and(|e| e.is_resource_not_found_exception()) =>
            {
                None
            }
            Err(e) => panic!("GetSchedule: {e:?}"),
        }
    }

    /// The input EventBridge Scheduler will deliver to the resume function for this action's
    /// armed wake (what a function binary is invoked with).
    pub async fn wake_input(&self, action_id: &str) -> Value {
        let wake = self.wake_of(action_id).await;
        let schedule = self.schedule(&wake).await.expect("armed");
        let input = schedule.target().unwrap().input().unwrap();
        serde_json::from_str(input).unwrap()
    }

    /// Every schedule in this test's group.
    pub async fn schedule_names(&self) -> Vec<String> {
        let out = self
            .scheduler
            .list_schedules()
            .group_name(&self.group)
            .send()
            .await
            .expect("ListSchedules");
        out.schedules()
            .iter()
            .filter_map(|s| s.name().map(str::to_owned))
            .collect()
    }

    /// The wake a committed ticket is found by (read through the store, as the engine does).
    pub async fn wake_of(&self, action_id: &str) -> Wake {
        let store = countersign::store::dynamodb::DynamoStore::new(
            aws_sdk_dynamodb::Client::new(&self.sdk),
            &self.table,
        );
        use countersign::store::Actions;
        let action = store
            .load("acme", action_id)
            .await
            .unwrap()
            .expect("action exists");
        let correlation_id = action
            .ticket()
            .expect("a committed ticket")
            .correlation_id()
            .to_owned();
        Wake {
            tenant: action.tenant().to_owned(),
            action_id: action.id().to_owned(),
            correlation_id,
        }
    }
}

pub async fn http_event(engine: &Arc<Engine>, event: Value) -> Reply {
    // The adapter itself is not `Send`; its answer future is (as in `lambda_runtime`).
    let answer = {
        let mut adapter = Adapter::from(aws::http_handler(engine.clone()));
        adapter.call(lambda_event(event))
    };
    let response = answer.await.expect("the handler answers");
    reply(serde_json::to_value(&response).unwrap())
}

/// Feed an API Gateway event to a function's HTTP handler (`aws::Function::http` over `routes`).
pub async fn function_event<D: aws::Duties>(
    function: &Arc<aws::Function<D>>,
    routes: fn(countersign::api::Routes) -> countersign::api::Routes,
    event: Value,
) -> Reply {
    let answer = {
        let mut adapter = Adapter::from(function.http(routes));
        adapter.call(lambda_event(event))
    };
    let response = answer.await.expect("the handler answers");
    reply(serde_json::to_value(&response).unwrap())
}

/// An API Gateway event (JSON, as API Gateway sends it) as `lambda_http` hands it to a handler.
fn lambda_event(event: Value) -> LambdaEvent<LambdaRequest> {
    let request: LambdaRequest =
        serde_json::from_value(event).expect("lambda_http accepts the event");
    LambdaEvent::new(request, Context::default())
}

/// What the runtime sends back to API Gateway, read.
fn reply(wire: Value) -> Reply {
    let status = wire["statusCode"].as_u64().unwrap() as u16;
    let body = match wire["body"].as_str() {
        Some(text) if !text.is_empty() => serde_json::from_str(text).expect("a JSON body"),
        _ => Value::Null,
    };
    // REST (v1) answers carry headers in `multiValueHeaders`, HTTP API (v2) in `headers`.
    let mut headers = wire["headers"].as_object().cloned().unwrap_or_default();
    for (name, values) in wire["multiValueHeaders"].as_object().into_iter().flatten() {
        if let Some(first) = values.get(0) {
            headers.entry(name.clone()).or_insert(first.clone());
        }
    }
    Reply {
        status,
        body,
        headers: Value::Object(headers),
    }
}

/// The resume function's handler over the raw input text (deserialized as the runtime does).
pub async fn deliver(engine: &Engine, input: &str) -> Result<Value, String> {
    let event: ResumeEvent = serde_json::from_str(input).map_err(|e| e.to_string())?;
    // As the function does: the invocation's deadline (resume's Timeout is 300 s) bounds the sweep.
    let deadline = jiff::Timestamp::now()
        .checked_add(jiff::SignedDuration::from_secs(300))
        .ok();
    aws::resume(engine, event, deadline)
        .await
        .map(|answer| serde_json::to_value(answer).unwrap())
        .map_err(|e| e.to_string())
}

fn header_map(key: &str, body: bool, extra: &[(&str, &str)]) -> serde_json::Map<String, Value> {
    let mut headers = serde_json::Map::new();
    headers.insert("accept".into(), json!("application/json"));
    headers.insert("authorization".into(), json!(format!("Bearer {key}")));
    headers.insert(
        "host".into(),
        json!("abc123defg.execute-api.us-east-1.amazonaws.com"),
    );
    headers.insert("user-agent".into(), json!("agent-sdk/1.0"));
    headers.insert("x-forwarded-for".into(), json!("203.0.113.7"));
    headers.insert("x-forwarded-proto".into(), json!("https"));
    if body {
        headers.insert("content-type".into(), json!("application/json"));
    }
    for (k, v) in extra {
        headers.insert(k.to_lowercase(), json!(v));
    }
    headers
}

/// An HTTP API (payload format 2.0) event, as API Gateway sends it to the function.
pub fn apigw_v2(
    method: &str,
    path_and_query: &str,
    key: &str,
    body: Option<Value>,
    extra_headers: &[(&str, &str)],
) -> Value {
    let (path, query) = path_and_query
        .split_once('?')
        .unwrap_or((path_and_query, ""));
    let now = Timestamp::now();
    let mut event = json!({
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": query,
        "headers": header_map(key, body.is_some(), extra_headers),
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "abc123defg",
            "domainName": "abc123defg.execute-api.us-east-1.amazonaws.com",
            "domainPrefix": "abc123defg",
            "http": {
                "method": method,
                "path": path,
                "protocol": "HTTP/1.1",
                "sourceIp": "203.0.113.7",
                "userAgent": "agent-sdk/1.0"
            },
            "requestId": format!("req-{}", ulid::Ulid::new()),
            "routeKey": "$default",
            "stage": "$default",
            "time": now.strftime("%d/%b/%Y:%H:%M:%S +0000").to_string(),
            "timeEpoch": now.as_millisecond()
        },
        "isBase64Encoded": false
    });
    if !query.is_empty() {
        let params: serde_json::Map<String, Value> = query
            .split('&')
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_owned(), json!(v)))
            .collect();
        event["queryStringParameters"] = Value::Object(params);
    }
    if let Some(body) = body {
        event["body"] = json!(body.to_string());
    }
    event
}

/// A REST API (v1, proxy integration) event on stage `prod`, as API Gateway sends it.
pub fn apigw_v1(
    method: &str,
    path_and_query: &str,
    key: &str,
    body: Option<Value>,
    extra_headers: &[(&str, &str)],
) -> Value {
    let (path, query) = path_and_query
        .split_once('?')
        .unwrap_or((path_and_query, ""));
    let headers = header_map(key, body.is_some(), extra_headers);
    let multi: serde_json::Map<String, Value> = headers
        .iter()
        .map(|(k, v)| (k.clone(), json!([v])))
        .collect();
    let (qs, mqs) = if query.is_empty() {
        (Value::Null, Value::Null)
    } else {
        let pairs: Vec<(String, String)> = query
            .split('&')
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        (
            Value::Object(pairs.iter().map(|(k, v)| (k.clone(), json!(v))).collect()),
            Value::Object(pairs.iter().map(|(k, v)| (k.clone(), json!([v]))).collect()),
        )
    };
    let now = Timestamp::now();
    json!({
        "resource": "/{proxy+}",
        "path": path,
        "httpMethod": method,
        "headers": headers,
        "multiValueHeaders": multi,
        "queryStringParameters": qs,
        "multiValueQueryStringParameters": mqs,
        "pathParameters": {"proxy": path.trim_start_matches('/')},
        "stageVariables": null,
        "requestContext": {
            "resourceId": "a1b2c3",
            "resourcePath": "/{proxy+}",
            "httpMethod": method,
            "extendedRequestId": format!("ext-{}", ulid::Ulid::new()),
            "requestTime": now.strftime("%d/%b/%Y:%H:%M:%S +0000").to_string(),
            "path": format!("/prod{path}"),
            "accountId": "123456789012",
            "protocol": "HTTP/1.1",
            "stage": "prod",
            "domainPrefix": "abc123defg",
            "requestTimeEpoch": now.as_millisecond(),
            "requestId": format!("req-{}", ulid::Ulid::new()),
            "identity": {
                "sourceIp": "203.0.113.7",
                "userAgent": "agent-sdk/1.0",
                "accessKey": null,
                "accountId": null,
                "caller": null,
                "user": null,
                "userArn": null,
                "cognitoIdentityId": null,
                "cognitoIdentityPoolId": null,
                "cognitoAuthenticationType": null,
                "cognitoAuthenticationProvider": null
            },
            "domainName": "abc123defg.execute-api.us-east-1.amazonaws.com",
            "apiId": "abc123defg"
        },
        "body": body.map(|b| b.to_string()),
        "isBase64Encoded": false
    })
}
