//! The `approve` function: POST /v1/actions/{id}/approve and /deny, from API Gateway
//! (REST v1 or HTTP API v2 events). It serves only its own routes of the local server's router
//! (`api::approve_routes`), the paths API Gateway routes here. All wiring is in `countersign::boot::aws`.

use countersign::boot::aws;

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    aws::init_logs();
    // Once per cold start: clients and configuration are reused by warm invocations (the
    // configuration re-read when it changes).
    let function = aws::Function::<aws::Approve>::start(aws::Boot::from_env()?).await?;
    aws::serve_http(function, countersign::api::approve_routes).await
}
