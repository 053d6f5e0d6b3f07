//! The `cancel` function: POST /v1/actions/{id}/cancel and the stops (POST /v1/stops, DELETE /v1/stops/{scope}), from API Gateway
//! (REST v1 or HTTP API v2 events). It serves only its own routes of the local server's router
//! (`api::cancel_routes`), the paths API Gateway routes here. All wiring is in `countersign::boot::aws`.

use countersign::boot::aws;

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    aws::init_logs();
    // Once per cold start: clients and configuration are reused by warm invocations (the
    // configuration re-read when it changes). It runs no tool, so it never reads a webhook secret.
    let function = aws::Function::<aws::Cancel>::start(aws::Boot::from_env()?).await?;
    aws::serve_http(function, countersign::api::cancel_routes).await
}
