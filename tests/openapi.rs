//! The OpenAPI document (generated from the code) is what the server serves, what the
//! repository commits, and covers every route the router serves.

use countersign::{api, boot::embedded::Server, config::Config};
use countersign_tests::{config_toml, temp_db, ToolServer};
use serde_json::Value;
use std::sync::Arc;

/// Served `/openapi.json` == `docs/openapi.json` == the document generated from the code, byte
/// for byte (the server sends the committed bytes; the generator is what they must equal). On a
/// difference, regenerate: `cargo run -q -p countersign-server -- openapi > docs/openapi.json`.
#[tokio::test]
async fn sc_sec_01_the_served_openapi_document_is_the_committed_one() {
    let tools = ToolServer::start().await;
    let config = Arc::new(Config::from_toml(&config_toml(&tools, "10s", "5s")).unwrap());
    let server = Server::start(config, &temp_db("openapi"), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let res = reqwest::get(format!("http://{}/openapi.json", server.addr))
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(
        res.headers()["content-type"].to_str().unwrap(),
        "application/json"
    );
    let served = res.text().await.unwrap();
    let committed = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/openapi.json"),
    )
    .expect("docs/openapi.json is committed");
    assert!(served == committed, "the server sends docs/openapi.json");
    assert!(
        api::openapi::document() == committed,
        "docs/openapi.json differs from the document generated from the code; regenerate it \
         with `cargo run -q -p countersign-server -- openapi > docs/openapi.json`"
    );
}

/// Every route in `api::ROUTES` is in the document with its method; every `/v1` operation
/// declares bearer security (globally), its error answers and 429 with `Retry-After`.
#[test]
fn sc_sec_01_the_openapi_document_covers_every_route() {
    let doc: Value = serde_json::from_str(&api::openapi::document()).unwrap();
    assert_eq!(doc["openapi"], "3.1.0");
    assert_eq!(
        doc["components"]["securitySchemes"]["bearer"]["scheme"],
        "bearer"
    );
    assert_eq!(doc["security"][0]["bearer"], serde_json::json!([]));
    for (method, path, _) in api::ROUTES {
        let op = &doc["paths"][path][method.to_lowercase()];
        assert!(op.is_object(), "{method} {path} is not in the document");
        let responses = op["responses"].as_object().unwrap();
        assert!(
            responses.keys().any(|s| s.starts_with('2')),
            "{method} {path}: no success answer"
        );
        if path.starts_with("/v1/") {
            for status in ["400", "401", "413", "429", "503"] {
                assert!(
                    responses.contains_key(status),
                    "{method} {path}: no {status}"
                );
            }
            assert!(responses["429"]["headers"]["Retry-After"].is_object());
            assert!(
                op.get("security").is_none(),
                "{method} {path} overrides bearer"
            );
        } else if *path == "/mcp" {
            // MCP (docs/mcp.md): bearer like /v1, its refusals are JSON-RPC errors of its own.
            assert!(op.get("security").is_none(), "/mcp overrides bearer");
        } else {
            assert_eq!(op["security"], serde_json::json!([{}]), "{path} is public");
        }
    }
}
