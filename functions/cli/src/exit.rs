//! Exit codes: one per kind of outcome a script acts on differently. Documented in the
//! README ("The countersign CLI") and in `countersign --help`.

use serde_json::Value;
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Something unexpected: a 500, an answer that is not the API's JSON.
    Failure = 1,
    /// Bad flags or input: clap's own errors, a missing key, `validation_failed`.
    Usage = 2,
    /// `not_found` (also another tenant's id).
    NotFound = 3,
    /// Refused or in conflict: any 403 (`forbidden`, `denied`, `agent_stopped`, …), any 409
    /// (`context_changed`, `action_sealed`, `action_executing`, `idempotency_conflict`), 413.
    Refused = 4,
    /// Try again later: the server cannot be reached, `rate_limited`, `unavailable`.
    Unavailable = 5,
    /// `unauthenticated`: the key is missing from the config or mistyped; a stored sign-in
    /// expired or kept in a file others may read.
    Unauthenticated = 6,
    /// `approve` was not confirmed at its prompt.
    NotConfirmed = 7,
    /// `verify`: the deed does not verify with the key.
    NotVerified = 8,
}

pub const HELP: &str = "Exit codes: 0 ok · 1 unexpected failure · 2 usage or validation_failed · \
3 not_found · 4 refused or conflict (403, 409, 413) · 5 unavailable (unreachable, 429, 503) · \
6 unauthenticated · 7 approval not confirmed · 8 deed does not verify";

impl From<Exit> for std::process::ExitCode {
    fn from(e: Exit) -> Self {
        std::process::ExitCode::from(e as u8)
    }
}

/// Why a command failed, and the exit code that says so.
#[derive(Debug)]
pub struct Failure {
    pub exit: Exit,
    pub message: String,
}

impl Failure {
    pub fn new(exit: Exit, message: impl Into<String>) -> Failure {
        Failure {
            exit,
            message: message.into(),
        }
    }

    /// An API error answer `{"error": {"code", "message", …}}` with its HTTP status.
    pub fn from_api(status: u16, body: &Value) -> Failure {
        let error = &body["error"];
        let code = error["code"].as_str().unwrap_or("");
        let exit = match (code, status) {
            ("validation_failed", _) => Exit::Usage,
            ("unauthenticated", _) | (_, 401) => Exit::Unauthenticated,
            ("not_found", _) | (_, 404) => Exit::NotFound,
            ("rate_limited" | "unavailable", _) | (_, 429 | 502..=504) => Exit::Unavailable,
            (_, 403 | 409 | 413) => Exit::Refused,
            _ => Exit::Failure,
        };
        let mut message = match error["message"].as_str() {
            Some(m) => format!("{code}: {m}"),
            None => format!("HTTP {status}"),
        };
        for detail in ["param", "state", "context_digest", "action_id"] {
            if let Some(v) = error[detail].as_str().filter(|v| !message.contains(v)) {
                message.push_str(&format!(" ({detail}: {v})"));
            }
        }
        Failure::new(exit, message)
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_api_error_has_its_exit_code() {
        let cases = [
            (400, "validation_failed", Exit::Usage),
            (401, "unauthenticated", Exit::Unauthenticated),
            (403, "forbidden", Exit::Refused),
            (403, "agent_stopped", Exit::Refused),
            (404, "not_found", Exit::NotFound),
            (409, "context_changed", Exit::Refused),
            (409, "action_sealed", Exit::Refused),
            (413, "payload_too_large", Exit::Refused),
            (429, "rate_limited", Exit::Unavailable),
            (503, "unavailable", Exit::Unavailable),
            (500, "internal", Exit::Failure),
            (502, "", Exit::Unavailable),
        ];
        for (status, code, exit) in cases {
            let body = json!({"error": {"code": code, "message": "m"}});
            assert_eq!(
                Failure::from_api(status, &body).exit,
                exit,
                "{status} {code}"
            );
        }
    }
}
