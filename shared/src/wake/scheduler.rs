//! EventBridge Scheduler wake adapter: one one-time `at()` schedule per committed ticket, in the
//! product's schedule group, targeting the resume function with the [`Wake`] as its input.
//!
//! - The name is derived from the correlation id only, so a retried arm finds the same schedule
//!   (`ConflictException` = already armed) and `disarm` can delete it from the wake alone.
//! - Scheduler fires at or after the given second (within the following minute; `at()` has
//!   second precision), so the instant is rounded *up*: the resume never sees a wake before
//!   `due_at` from a schedule, and if one comes early anyway (clock skew, a manual delivery) the
//!   resume re-checks `not_before` and re-arms (SC-RES-05).
//! - Arming again (a retried arm): on a conflict, a schedule whose instant is still comfortably
//!   ahead is pending (idempotent retry); one whose instant has come has fired or is firing, so
//!   it is deleted and created anew.
//! - Re-arming after an early wake ([`Waker::rearm`], SC-EDGE-09): the schedule that delivered
//!   it may still exist until Scheduler deletes it after completion
//!   (`ActionAfterCompletion=DELETE`), and it has fired by Scheduler's clock whatever ours says
//!   (an early wake is the sign that ours lags). So it is always replaced, by one strictly after
//!   its instant: comparing its instant with our clock would take it for a pending one and lose
//!   the wake.
//! - Scheduler rejects `at()` in the past: the instant is at least a little ahead of now.

use super::{WakeError, Waker};
use crate::{domain::resume::Wake, Clock, SystemClock};
use async_trait::async_trait;
use aws_sdk_scheduler::{
    error::DisplayErrorContext,
    operation::{create_schedule::CreateScheduleError, delete_schedule::DeleteScheduleError},
    types::{
        ActionAfterCompletion, DeadLetterConfig, FlexibleTimeWindow, FlexibleTimeWindowMode,
        RetryPolicy, ScheduleState, Target,
    },
    Client,
};
use jiff::{SignedDuration, Timestamp};
use std::sync::Arc;

/// How far ahead of now a new schedule's instant must be; also how far ahead an existing one
/// must be to count as still pending.
const LEAD: SignedDuration = SignedDuration::from_secs(2);
/// Bounds of `RetryPolicy.MaximumEventAgeInSeconds` accepted by Scheduler.
const MIN_EVENT_AGE: i64 = 60;
const MAX_EVENT_AGE: i64 = 86_400;
/// Scheduler's maximum; the event age bounds the retries in time.
const MAX_RETRY_ATTEMPTS: i32 = 185;

/// Where wakes go: the group, the resume function and the role Scheduler assumes.
#[derive(Debug, Clone)]
pub struct SchedulerTarget {
    pub schedule_group: String,
    pub resume_function_arn: String,
    pub role_arn: String,
    /// Undeliverable wakes land here (the sweep still finds their tickets).
    pub dead_letter_arn: Option<String>,
}

pub struct SchedulerWaker {
    client: Client,
    target: SchedulerTarget,
    clock: Arc<dyn Clock>,
}

/// `cs-<correlation id>`: ≤ 64 characters of `[0-9a-zA-Z-_.]`, unique per committed ticket.
pub fn schedule_name(wake: &Wake) -> String {
    let safe: String = wake
        .correlation_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '-'
            }
        })
        .take(61)
        .collect();
    format!("cs-{safe}")
}

/// The first whole second at or after `t`.
pub fn round_up_to_second(t: Timestamp) -> Timestamp {
    let floor = Timestamp::from_second(t.as_second()).expect("in range");
    if floor == t {
        t
    } else {
        floor
            .checked_add(SignedDuration::from_secs(1))
            .expect("in range")
    }
}

/// `at(yyyy-mm-ddThh:mm:ss)`, evaluated in UTC.
pub fn at_expression(t: Timestamp) -> String {
    format!("at({})", t.strftime("%Y-%m-%dT%H:%M:%S"))
}

fn parse_at_expression(expr: &str) -> Option<Timestamp> {
    let inner = expr.strip_prefix("at(")?.strip_suffix(')')?;
    format!("{inner}Z").parse().ok()
}

/// A delivery older than the window is worth nothing: never retry past the deadline, within
/// Scheduler's bounds.
pub fn maximum_event_age(fire_at: Timestamp, deadline: Timestamp) -> i32 {
    let left = deadline.duration_since(fire_at).as_secs();
    left.clamp(MIN_EVENT_AGE, MAX_EVENT_AGE) as i32
}

fn wake_error(what: &str, e: impl std::error::Error + 'static) -> WakeError {
    WakeError(format!("{what}: {}", DisplayErrorContext(e)))
}

impl SchedulerWaker {
    pub fn new(client: Client, target: SchedulerTarget) -> Self {
        SchedulerWaker {
            client,
            target,
            clock: Arc::new(SystemClock),
        }
    }

    /// This function's clock (tests skew it against Scheduler's).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The earliest instant a new schedule may have: a little ahead of now, whole seconds.
    fn soonest(&self) -> Timestamp {
        round_up_to_second(self.clock.now().checked_add(LEAD).expect("in range"))
    }

    /// Create the schedule; `Ok(false)` if one of that name exists already.
    async fn create(
        &self,
        wake: &Wake,
        fire_at: Timestamp,
        deadline: Timestamp,
    ) -> Result<bool, WakeError> {
        let input = serde_json::to_string(wake).expect("a wake serializes");
        let retry = RetryPolicy::builder()
            .maximum_event_age_in_seconds(maximum_event_age(fire_at, deadline))
            .maximum_retry_attempts(MAX_RETRY_ATTEMPTS)
            .build();
        let dead_letter = self
            .target
            .dead_letter_arn
            .as_ref()
            .map(|arn| DeadLetterConfig::builder().arn(arn).build());
        let target = Target::builder()
            .arn(&self.target.resume_function_arn)
            .role_arn(&self.target.role_arn)
            .input(input)
            .retry_policy(retry)
            .set_dead_letter_config(dead_letter)
            .build()
            .map_err(|e| wake_error("target", e))?;
        let window = FlexibleTimeWindow::builder()
            .mode(FlexibleTimeWindowMode::Off)
            .build()
            .map_err(|e| wake_error("window", e))?;
        let created = self
            .client
            .create_schedule()
            .name(schedule_name(wake))
            .group_name(&self.target.schedule_group)
            .description(format!(
                "countersign wake {}/{}",
                wake.tenant, wake.action_id
            ))
            .schedule_expression(at_expression(fire_at))
            .schedule_expression_timezone("UTC")
            .flexible_time_window(window)
            .action_after_completion(ActionAfterCompletion::Delete)
            .state(ScheduleState::Enabled)
            .target(target)
            .send()
            .await;
        match created {
            Ok(_) => {
                tracing::info!(tenant = %wake.tenant, action_id = %wake.action_id, schedule = %schedule_name(wake), at = %fire_at, "wake armed");
                Ok(true)
            }
            Err(e)
                if matches!(
                    e.as_service_error(),
                    Some(CreateScheduleError::ConflictException(_))
                ) =>
            {
                Ok(false)
            }
            Err(e) => Err(wake_error("CreateSchedule", e)),
        }
    }

    /// The instant of an existing schedule of this name, if it still exists.
    async fn existing_instant(&self, wake: &Wake) -> Result<Option<Timestamp>, WakeError> {
        let got = self
            .client
            .get_schedule()
            .name(schedule_name(wake))
            .group_name(&self.target.schedule_group)
            .send()
            .await;
        match got {
            Ok(s) => Ok(s.schedule_expression().and_then(parse_at_expression)),
            Err(e)
                if e.as_service_error()
                    .is_some_and(|e| e.is_resource_not_found_exception()) =>
            {
                Ok(None)
            }
            Err(e) => Err(wake_error("GetSchedule", e)),
        }
    }
}

#[async_trait]
impl Waker for SchedulerWaker {
    async fn arm(&self, wake: &Wake, at: Timestamp, deadline: Timestamp) -> Result<(), WakeError> {
        let soonest = self.soonest();
        let fire_at = round_up_to_second(at).max(soonest);
        if self.create(wake, fire_at, deadline).await? {
            return Ok(());
        }
        match self.existing_instant(wake).await? {
            // Still pending: this arm is a retry of one that already succeeded.
            Some(existing) if existing >= soonest => {
                tracing::debug!(tenant = %wake.tenant, action_id = %wake.action_id, at = %existing, "wake already armed");
                Ok(())
            }
            // Fired (or firing), not yet deleted by Scheduler: replace it.
            _ => {
                self.disarm(wake).await?;
                // A concurrent arm may have recreated it in between; either way one is armed.
                self.create(wake, fire_at, deadline).await.map(|_| ())
            }
        }
    }

    async fn rearm(
        &self,
        wake: &Wake,
        at: Timestamp,
        deadline: Timestamp,
    ) -> Result<(), WakeError> {
        let mut fire_at = round_up_to_second(at).max(self.soonest());
        if let Some(fired) = self.existing_instant(wake).await? {
            self.disarm(wake).await?;
            fire_at = fire_at.max(fired.checked_add(LEAD).expect("in range"));
        }
        // A concurrent re-arm (a duplicate delivery) may have created it in between: one is armed.
        self.create(wake, fire_at, deadline).await.map(|_| ())
    }

    async fn disarm(&self, wake: &Wake) -> Result<(), WakeError> {
        let deleted = self
            .client
            .delete_schedule()
            .name(schedule_name(wake))
            .group_name(&self.target.schedule_group)
            .send()
            .await;
        match deleted {
            Ok(_) => {
                tracing::info!(tenant = %wake.tenant, action_id = %wake.action_id, schedule = %schedule_name(wake), "wake deleted");
                Ok(())
            }
            Err(e)
                if matches!(
                    e.as_service_error(),
                    Some(DeleteScheduleError::ResourceNotFoundException(_))
                ) =>
            {
                Ok(())
            }
            Err(e) => Err(wake_error("DeleteSchedule", e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wake() -> Wake {
        Wake {
            tenant: "acme".into(),
            action_id: "act_1".into(),
            correlation_id: "cor_01ARZ3NDEKTSV4RRFFQ69G5FAV".into(),
        }
    }

    #[test]
    fn names_are_deterministic_and_allowed() {
        let name = schedule_name(&wake());
        assert_eq!(name, "cs-cor_01ARZ3NDEKTSV4RRFFQ69G5FAV");
        assert!(name.len() <= 64);
        let odd = Wake {
            correlation_id: format!("cor_{}", "x/".repeat(60)),
            ..wake()
        };
        let name = schedule_name(&odd);
        assert!(
            name.len() <= 64
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        );
    }

    #[test]
    fn the_instant_rounds_up_never_down() {
        let t: Timestamp = "2026-10-21T17:30:00.001Z".parse().unwrap();
        assert_eq!(
            at_expression(round_up_to_second(t)),
            "at(2026-10-21T17:30:01)"
        );
        let whole: Timestamp = "2026-10-21T17:30:00Z".parse().unwrap();
        assert_eq!(round_up_to_second(whole), whole);
        assert_eq!(
            parse_at_expression("at(2026-10-21T17:30:01)"),
            Some(round_up_to_second(t))
        );
    }

    #[test]
    fn event_age_never_outlives_the_window() {
        let at: Timestamp = "2026-10-21T17:30:00Z".parse().unwrap();
        let plus = |s: i64| at.checked_add(SignedDuration::from_secs(s)).unwrap();
        assert_eq!(maximum_event_age(at, plus(600)), 600);
        assert_eq!(maximum_event_age(at, plus(10)), 60);
        assert_eq!(maximum_event_age(at, plus(3 * 86_400)), 86_400);
    }
}
