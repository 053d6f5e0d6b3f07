//! The `intake` function: POST /v1/actions and the reads (GET /v1/actions…), from API Gateway
//! (REST v1 or HTTP API v2 events). It serves only its own routes of the local server's router
//! (`api::intake_routes`), the paths API Gateway routes here. All wiring is in `countersign::aws`.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    countersign::aws::init_logs();
    // Once per cold start: clients and configuration are reused by warm invocations.
    let engine = countersign::aws::engine_from_env(countersign::aws::Settings::from_env(
        countersign::config::Conditions::Compile,
    )?)
    .await?;
    countersign::aws::serve_http(engine, countersign::api::intake_routes).await
}
