//! Times as countersign writes them: RFC 3339 in UTC with exactly six fraction digits
//! (microseconds), e.g. `2026-10-21T15:30:00.000000Z`, in the API, events, deeds and notices —
//! one width that every RFC 3339 parser reads (Python's `fromisoformat` before 3.11 takes only
//! 3 or 6 digits). The clock gives whole microseconds, so nothing is lost; a finer time (one
//! recorded before, or a window an agent asked for to the nanosecond) keeps all nine digits
//! rather than change its value (a deed's chain is re-hashed from its parsed times).
//!
//! The audit chain hashes its own fields as they always were (`audit::Entry`, `audit::Origin`),
//! so this format never changes a hash.

use jiff::{RoundMode, Timestamp, TimestampRound, Unit};
use serde::{Deserialize, Deserializer, Serializer};

/// `ts` cut to whole microseconds (toward the past).
pub fn micros(ts: Timestamp) -> Timestamp {
    ts.round(
        TimestampRound::new()
            .smallest(Unit::Microsecond)
            .mode(RoundMode::Floor),
    )
    .unwrap_or(ts)
}

/// The written form: six fraction digits, nine for a time finer than a microsecond.
pub fn text(ts: &Timestamp) -> String {
    if ts.subsec_nanosecond() % 1000 == 0 {
        format!("{ts:.6}")
    } else {
        format!("{ts:.9}")
    }
}

/// `#[serde(with = "crate::domain::time::fixed")]`: a time in the written form; any RFC 3339
/// time reads.
pub mod fixed {
    use super::*;

    pub fn serialize<S: Serializer>(ts: &Timestamp, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&text(ts))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Timestamp, D::Error> {
        Timestamp::deserialize(d)
    }
}

/// [`fixed`] for an optional time.
pub mod fixed_opt {
    use super::*;

    pub fn serialize<S: Serializer>(ts: &Option<Timestamp>, s: S) -> Result<S::Ok, S::Error> {
        match ts {
            Some(ts) => s.serialize_str(&text(ts)),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Timestamp>, D::Error> {
        Option::<Timestamp>::deserialize(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn times_are_written_with_six_fraction_digits() {
        for (at, written) in [
            ("2026-10-21T15:30:00Z", "2026-10-21T15:30:00.000000Z"),
            ("2026-10-21T15:30:00.12Z", "2026-10-21T15:30:00.120000Z"),
            (
                "2026-10-21T17:30:00.123456+02:00",
                "2026-10-21T15:30:00.123456Z",
            ),
            // Finer than the clock gives: all nine digits, the value unchanged.
            (
                "2026-10-21T15:30:00.1234567Z",
                "2026-10-21T15:30:00.123456700Z",
            ),
        ] {
            assert_eq!(text(&ts(at)), written, "{at}");
            assert_eq!(ts(&text(&ts(at))), ts(at), "{at} reads back");
        }
    }

    #[test]
    fn micros_cuts_to_whole_microseconds() {
        let at = ts("2026-10-21T15:30:00.1234567Z");
        assert_eq!(micros(at), ts("2026-10-21T15:30:00.123456Z"));
        let whole = ts("2026-10-21T15:30:00.123456Z");
        assert_eq!(micros(whole), whole);
    }
}
