//! LocalStack for the tests: the SDK pointed at it (never skipped when it is not there) and a
//! fresh DynamoDB table per test, from `infra/table.json`, the definition the infrastructure
//! uses. The rest of the AWS path's support (the Lambda wiring, API Gateway events) is
//! `tests/aws_support`, compiled only into the tests that use it.

use aws_config::SdkConfig;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection,
    ProjectionType, ScalarAttributeType, TimeToLiveSpecification,
};
use countersign::{boot::aws, store::dynamodb::DynamoStore};
use serde_json::Value;
use std::sync::Once;

/// Point the SDK at LocalStack unless the caller already chose an endpoint.
pub fn aws_env() {
    static SET: Once = Once::new();
    SET.call_once(|| {
        for (k, v) in [
            ("AWS_ENDPOINT_URL", "http://127.0.0.1:4566"),
            ("AWS_ACCESS_KEY_ID", "test"),
            ("AWS_SECRET_ACCESS_KEY", "test"),
            ("AWS_REGION", "us-east-1"),
            // What infra/template.yaml sets for every function (tests/infra_template.rs).
            aws::HTTP_ENV,
        ] {
            if std::env::var(k).is_err() {
                std::env::set_var(k, v);
            }
        }
    });
}

pub fn endpoint() -> String {
    aws_env();
    std::env::var("AWS_ENDPOINT_URL").unwrap()
}

/// Fail loudly (never skip) when LocalStack is not there.
pub async fn require_localstack() {
    let url = format!("{}/_localstack/health", endpoint());
    let ok = reqwest::Client::new()
        .get(&url)
        .timeout(std::time::Duration::from_secs(5))
        .send()
        .await
        .map(|r| r.status().is_success());
    assert!(
        matches!(ok, Ok(true)),
        "LocalStack is not reachable at {url}: start it with `bash localstack/start.sh` \
         (or set AWS_ENDPOINT_URL) — these tests do not skip"
    );
}

pub async fn sdk() -> SdkConfig {
    aws_env();
    require_localstack().await;
    // The functions' own configuration (the environment alone), which `aws_env` completes.
    aws::sdk_config_from_env().expect("aws_env sets the region and credentials")
}

/// A name unique to this test run: `cs-<label>-<ulid>` (lowercase, ≤ 64 characters).
pub fn unique(label: &str) -> String {
    format!("cs-{label}-{}", ulid::Ulid::new()).to_lowercase()
}

/// Create a table from `infra/table.json`, the definition the infrastructure uses.
pub async fn create_table(sdk: &SdkConfig, name: &str) {
    // The nearest `infra/` above the including crate (the tests crate, or tests/bench).
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .map(|dir| dir.join("infra/table.json"))
        .find(|p| p.is_file())
        .expect("infra/table.json above the crate");
    let def: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let key_schema = |v: &Value| -> Vec<KeySchemaElement> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|k| {
                KeySchemaElement::builder()
                    .attribute_name(k["AttributeName"].as_str().unwrap())
                    .key_type(KeyType::from(k["KeyType"].as_str().unwrap()))
                    .build()
                    .unwrap()
            })
            .collect()
    };
    let client = aws_sdk_dynamodb::Client::new(sdk);
    let mut req = client
        .create_table()
        .table_name(name)
        .set_key_schema(Some(key_schema(&def["KeySchema"])))
        .billing_mode(BillingMode::from(def["BillingMode"].as_str().unwrap()));
    for a in def["AttributeDefinitions"].as_array().unwrap() {
        req = req.attribute_definitions(
            AttributeDefinition::builder()
                .attribute_name(a["AttributeName"].as_str().unwrap())
                .attribute_type(ScalarAttributeType::from(
                    a["AttributeType"].as_str().unwrap(),
                ))
                .build()
                .unwrap(),
        );
    }
    for g in def["GlobalSecondaryIndexes"].as_array().unwrap() {
        req = req.global_secondary_indexes(
            GlobalSecondaryIndex::builder()
                .index_name(g["IndexName"].as_str().unwrap())
                .set_key_schema(Some(key_schema(&g["KeySchema"])))
                .projection(
                    Projection::builder()
                        .projection_type(ProjectionType::from(
                            g["Projection"]["ProjectionType"].as_str().unwrap(),
                        ))
                        .set_non_key_attributes(g["Projection"]["NonKeyAttributes"].as_array().map(
                            |names| {
                                names
                                    .iter()
                                    .map(|n| n.as_str().unwrap().to_owned())
                                    .collect()
                            },
                        ))
                        .build(),
                )
                .build()
                .unwrap(),
        );
    }
    req.send().await.expect("CreateTable");
    client
        .update_time_to_live()
        .table_name(name)
        .time_to_live_specification(
            TimeToLiveSpecification::builder()
                .enabled(true)
                .attribute_name(def["TimeToLiveAttribute"].as_str().unwrap())
                .build()
                .unwrap(),
        )
        .send()
        .await
        .expect("UpdateTimeToLive");
}

/// A fresh table of its own (`label` names it): its client and name.
pub async fn fresh_table(label: &str) -> (aws_sdk_dynamodb::Client, String) {
    let sdk = sdk().await;
    let table = unique(label);
    create_table(&sdk, &table).await;
    (aws_sdk_dynamodb::Client::new(&sdk), table)
}

/// A store on a fresh table of its own.
pub async fn fresh_store(label: &str) -> DynamoStore {
    let (client, table) = fresh_table(label).await;
    DynamoStore::new(client, &table)
}
