//! `[limits]`: windows, the sweep, run deadlines, rate limits and the request budget.

use super::parse::{bad, duration, ConfigError};
use crate::domain::window::WindowRules;
use jiff::SignedDuration;
use serde::Deserialize;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLimits {
    min_window: Option<String>,
    sweep_interval: Option<String>,
    run_deadline: Option<String>,
    rate_per_key: Option<f64>,
    burst_per_key: Option<u32>,
    rate_per_tenant: Option<f64>,
    burst_per_tenant: Option<u32>,
    request_budget: Option<String>,
}

#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub window: WindowRules,
    /// An allowed request whose window opens within this runs at once (SC-INT-05).
    pub allow_now_within: SignedDuration,
    /// How often the sweep runs (local server; on AWS the sweep schedule says).
    pub sweep_interval: SignedDuration,
    /// Latest start of an approved call that has no window.
    pub run_deadline: SignedDuration,
    /// Requests one API key may make (SC-SEC-04).
    pub per_key: Rate,
    /// Requests all keys of one tenant may make together, so no tenant takes another's share.
    pub per_tenant: Rate,
    /// How long an HTTP request may wait on a tool run (SC-EDGE-07): a due ticket runs inside
    /// the request only if its tool's whole claim budget fits; otherwise its wake runs it.
    /// The default leaves room under API Gateway's 29 s integration timeout.
    pub request_budget: SignedDuration,
}

/// A token bucket: `per_second` refill, up to `burst` at once.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    pub per_second: f64,
    pub burst: u32,
}

fn rate(
    at: &str,
    per_second: Option<f64>,
    burst: Option<u32>,
    default: Rate,
) -> Result<Rate, ConfigError> {
    let per_second = per_second.unwrap_or(default.per_second);
    // Below one per day or above a million per second is a typo, not a limit.
    if !(1.0 / 86_400.0..=1e6).contains(&per_second) {
        return Err(bad(
            format!("limits.rate_{at}"),
            "must be between 1/86400 and 1000000 requests per second",
        ));
    }
    let burst = burst.unwrap_or(default.burst);
    if burst == 0 {
        return Err(bad(format!("limits.burst_{at}"), "must be at least 1"));
    }
    Ok(Rate { per_second, burst })
}

pub(super) fn limits(raw: RawLimits) -> Result<Limits, ConfigError> {
    let min_window = duration("limits.min_window", raw.min_window.as_deref(), "5m")?;
    if min_window > WindowRules::default().max_ahead {
        return Err(bad("limits.min_window", "must be at most 72h"));
    }
    Ok(Limits {
        window: WindowRules {
            min_width: min_window,
            ..WindowRules::default()
        },
        allow_now_within: SignedDuration::from_secs(60),
        sweep_interval: duration(
            "limits.sweep_interval",
            raw.sweep_interval.as_deref(),
            "60s",
        )?,
        run_deadline: duration("limits.run_deadline", raw.run_deadline.as_deref(), "15m")?,
        // Generous for people and well-behaved agents; a runaway loop meets the bucket.
        per_key: rate(
            "per_key",
            raw.rate_per_key,
            raw.burst_per_key,
            Rate {
                per_second: 50.0,
                burst: 100,
            },
        )?,
        per_tenant: rate(
            "per_tenant",
            raw.rate_per_tenant,
            raw.burst_per_tenant,
            Rate {
                per_second: 200.0,
                burst: 400,
            },
        )?,
        request_budget: duration(
            "limits.request_budget",
            raw.request_budget.as_deref(),
            "25s",
        )?,
    })
}
