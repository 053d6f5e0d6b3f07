//! The `intake` function: POST /v1/actions and the reads (GET /v1/actions…), from API Gateway
//! (REST v1 or HTTP API v2 events). It serves only its own routes of the local server's router
//! (`api::intake_routes`), the paths API Gateway routes here. All wiring is in `countersign::boot::aws`.

use countersign::boot::aws;

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    aws::init_logs();
    // Once per cold start: clients and configuration are reused by warm invocations (the
    // configuration re-read when it changes). It gates: its policy's conditions are compiled.
    let function = aws::Function::<aws::Intake>::start(aws::Boot::from_env()?).await?;
    aws::serve_http(function, countersign::api::intake_routes).await
}
