//! The `resume` function: EventBridge Scheduler's wake `{tenant, action_id, correlation_id}` and
//! the minute sweep `{"sweep":{}}`. Answers the `ResumeOutcome` / `SweepReport` as JSON. Only an
//! error a retry can fix (store or Scheduler unavailable) fails the invocation, reported as
//! `Retryable.<kind>`, so the delivery is retried; a permanent one is answered `dropped`.

use countersign::boot::aws::{self, ResumeEvent};
use lambda_runtime::{service_fn, LambdaEvent};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    aws::init_logs();
    // Once per cold start: clients and configuration are reused by warm invocations (the
    // configuration re-read when it changes). The sweep sends the notifications: their
    // secrets are checked with the tools' (errors name the entry).
    let function = aws::Function::<aws::Resume>::start(aws::Boot::from_env()?).await?;
    lambda_runtime::run(service_fn(|event: LambdaEvent<ResumeEvent>| {
        let function = function.clone();
        async move {
            // The invocation's deadline (ms since the epoch) bounds what the sweep starts.
            let deadline = jiff::Timestamp::from_millisecond(event.context.deadline as i64).ok();
            let engine = function.engine().await;
            aws::resume(&engine, event.payload, deadline).await
        }
    }))
    .await
}
