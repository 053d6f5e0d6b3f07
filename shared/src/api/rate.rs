//! Rate limits per API key and per tenant (SC-SEC-04): token buckets in this process. The local
//! server has one process; on AWS each Lambda container keeps its own buckets, so the limit
//! holds per container (a burst spread over N warm containers may pass N × the limit) — the
//! stage-wide API Gateway throttle stays the outer bound.

use super::error::ApiError;
use crate::config::{Limits, Principal, Rate, Role};
use governor::{clock::Clock, DefaultKeyedRateLimiter, Quota};
use std::{num::NonZeroU32, time::Duration};

pub struct RateLimits {
    keys: DefaultKeyedRateLimiter<(String, Role, String)>,
    tenants: DefaultKeyedRateLimiter<String>,
}

fn quota(rate: Rate) -> Quota {
    Quota::with_period(Duration::from_secs_f64(1.0 / rate.per_second))
        .expect("the config keeps the rate positive and bounded")
        .allow_burst(NonZeroU32::new(rate.burst).expect("the config keeps the burst ≥ 1"))
}

impl RateLimits {
    pub fn new(limits: &Limits) -> Self {
        RateLimits {
            keys: DefaultKeyedRateLimiter::keyed(quota(limits.per_key)),
            tenants: DefaultKeyedRateLimiter::keyed(quota(limits.per_tenant)),
        }
    }

    /// Take one request from the caller's key bucket, then from its tenant's.
    pub fn admit(&self, who: &Principal) -> Result<(), ApiError> {
        let key = (who.tenant.clone(), who.role, who.id.clone());
        self.keys
            .check_key(&key)
            .map_err(|n| refusal(n.wait_time_from(self.keys.clock().now())))?;
        self.tenants
            .check_key(&who.tenant)
            .map_err(|n| refusal(n.wait_time_from(self.tenants.clock().now())))
    }
}

/// Whole seconds, rounded up: `Retry-After` takes no fractions and 0 would invite a spin.
fn refusal(wait: Duration) -> ApiError {
    ApiError::RateLimited {
        retry_after_secs: (wait.as_secs() + u64::from(wait.subsec_nanos() > 0)).max(1),
    }
}
