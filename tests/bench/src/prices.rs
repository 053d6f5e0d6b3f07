//! AWS list prices the cost figures use: us-east-1, on demand, as published on the date below.
//! Change them here (and the date) when AWS does; every cost in the table is derived from these.

/// When these prices were read (DynamoDB's on-demand throughput prices were halved on
/// 1 Nov 2024; the others are unchanged since).
pub const AS_OF: &str = "1 Nov 2024 (us-east-1, read 2026-11)";

/// DynamoDB on demand, per write request unit (WRU).
pub const DYNAMODB_WRU: f64 = 0.625 / 1e6;
/// DynamoDB on demand, per read request unit (RRU).
pub const DYNAMODB_RRU: f64 = 0.125 / 1e6;
/// API Gateway HTTP API, per request (first 300 million a month).
pub const HTTP_API_REQUEST: f64 = 1.00 / 1e6;
/// EventBridge Scheduler, per invocation (beyond the 14 million free a month).
pub const SCHEDULER_INVOCATION: f64 = 1.00 / 1e6;
/// Lambda arm64, per request.
pub const LAMBDA_REQUEST: f64 = 0.20 / 1e6;
/// Lambda arm64, per GB-second of duration (billed in 1 ms steps).
pub const LAMBDA_GB_SECOND: f64 = 0.000_013_333_4;
/// Step Functions Standard, per state transition.
pub const STEP_FUNCTIONS_TRANSITION: f64 = 25.0 / 1e6;

/// What one invocation of `ms` at `memory_mb` costs in Lambda duration (rounded up to 1 ms).
pub fn lambda_duration(ms: f64, memory_mb: u32) -> f64 {
    ms.ceil() / 1000.0 * (memory_mb as f64 / 1024.0) * LAMBDA_GB_SECOND
}
