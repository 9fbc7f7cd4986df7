//! Timestamps: parsing from JSON and RFC 3339 formatting. All times are
//! `i64` milliseconds since the Unix epoch, UTC.
//!
//! Accepted by [`parse_timestamp`] / [`parse_timestamp_at`]:
//! * RFC 3339 / ISO 8601 strings: `2024-05-01T12:30:00Z`, `2024-05-01T12:30:00.123+02:00`,
//!   `2024-05-01 12:30:00Z`, offsets written `+0200`; without an offset
//!   (`2024-05-01T12:30:00`, `2024-05-01T12:30`) the time is taken as UTC;
//!   date only (`2024-05-01`) means midnight UTC. Fractions beyond milliseconds are truncated.
//! * Integers (JSON numbers or digit strings): **|n| < 10^11 is epoch seconds,
//!   otherwise epoch milliseconds.** 10^11 s is the year 5138 and 10^11 ms is
//!   March 1973, so every realistic value of either kind is classified right.
//!   Fractional numbers follow the same rule (`1700000000.5` = …000.500 s).
//! * `"now"`, `"now-1h"`, `"now+5m"` relative to the current time (or to the
//!   `now_ms` given to [`parse_timestamp_at`]), durations as in
//!   [`parse_duration`].

use crate::duration::parse_duration;
use crate::error::TsError;
use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};
use serde_json::Value;

/// Below this magnitude an epoch number is seconds, at or above it milliseconds.
pub const EPOCH_SECONDS_LIMIT: i64 = 100_000_000_000;

fn bad(input: &str, reason: impl Into<String>) -> TsError {
    TsError::InvalidTimestamp { input: input.to_string(), reason: reason.into() }
}

/// Current wall-clock time in epoch milliseconds (0 if the clock is before 1970).
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// Parse a timestamp (see the module docs); `"now"` uses the system clock.
pub fn parse_timestamp(v: &Value) -> Result<i64, TsError> {
    parse_timestamp_at(v, now_ms())
}

/// Parse a timestamp, resolving `"now"` forms against `now_ms` (pure).
pub fn parse_timestamp_at(v: &Value, now_ms: i64) -> Result<i64, TsError> {
    match v {
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Ok(from_epoch_int(i))
            } else if let Some(f) = n.as_f64() {
                from_epoch_float(f, &n.to_string())
            } else {
                Err(bad(&n.to_string(), "number out of range"))
            }
        }
        Value::String(s) => parse_str(s, now_ms),
        other => Err(bad(&other.to_string(), "expected an RFC 3339 string or an epoch number (seconds or milliseconds)")),
    }
}

fn from_epoch_int(i: i64) -> i64 {
    if i.unsigned_abs() < EPOCH_SECONDS_LIMIT as u64 {
        i * 1000 // |i| < 1e11: cannot overflow
    } else {
        i
    }
}

fn from_epoch_float(f: f64, input: &str) -> Result<i64, TsError> {
    if !f.is_finite() {
        return Err(bad(input, "not a finite number"));
    }
    let ms = if f.abs() < EPOCH_SECONDS_LIMIT as f64 { f * 1000.0 } else { f };
    let ms = ms.round();
    if ms.abs() >= 9.2e18 {
        return Err(bad(input, "out of range"));
    }
    Ok(ms as i64)
}

fn parse_str(raw: &str, now_ms: i64) -> Result<i64, TsError> {
    let s = raw.trim();
    if s.is_empty() {
        return Err(bad(raw, "empty string"));
    }
    if let Some(rel) = s.strip_prefix("now") {
        let rel = rel.trim();
        if rel.is_empty() {
            return Ok(now_ms);
        }
        let (sign, dur) = if let Some(d) = rel.strip_prefix('-') {
            (-1i64, d)
        } else if let Some(d) = rel.strip_prefix('+') {
            (1, d)
        } else {
            return Err(bad(raw, "expected now, now-<duration> or now+<duration>"));
        };
        let d = parse_duration(dur.trim()).map_err(|e| bad(raw, e.to_string()))?;
        return now_ms.checked_add(sign * d).ok_or_else(|| bad(raw, "out of range"));
    }
    let digits = s.strip_prefix('-').unwrap_or(s);
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        let i: i64 = s.parse().map_err(|_| bad(raw, "number out of range"))?;
        return Ok(from_epoch_int(i));
    }
    if let Ok(dt) = DateTime::parse_from_rfc3339(s) {
        return Ok(dt.timestamp_millis());
    }
    for fmt in ["%Y-%m-%dT%H:%M:%S%.f%z", "%Y-%m-%d %H:%M:%S%.f%z"] {
        if let Ok(dt) = DateTime::parse_from_str(s, fmt) {
            return Ok(dt.timestamp_millis());
        }
    }
    for fmt in ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M"] {
        if let Ok(dt) = NaiveDateTime::parse_from_str(s, fmt) {
            return Ok(dt.and_utc().timestamp_millis());
        }
    }
    if let Some(dt) = NaiveDate::parse_from_str(s, "%Y-%m-%d").ok().and_then(|d| d.and_hms_opt(0, 0, 0)) {
        return Ok(dt.and_utc().timestamp_millis());
    }
    Err(bad(raw, "expected RFC 3339 (e.g. 2024-05-01T12:30:00Z), a date (2024-05-01) or epoch seconds/milliseconds"))
}

/// Format as RFC 3339 UTC with milliseconds, e.g. `2024-05-01T12:30:00.000Z`.
/// Values outside chrono's range (about ±262,000 years) are formatted as the
/// decimal millisecond count.
pub fn format_timestamp(ms: i64) -> String {
    match DateTime::<Utc>::from_timestamp_millis(ms) {
        Some(dt) => dt.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string(),
        None => ms.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const T: i64 = 1_714_566_600_000; // 2024-05-01T12:30:00Z

    #[test]
    fn strings() {
        let ok = |s: &str| parse_timestamp(&json!(s)).unwrap_or_else(|e| panic!("{s}: {e}"));
        assert_eq!(ok("2024-05-01T12:30:00Z"), T);
        assert_eq!(ok("2024-05-01T12:30:00.123Z"), T + 123);
        assert_eq!(ok("2024-05-01T12:30:00.123456789Z"), T + 123);
        assert_eq!(ok("2024-05-01t12:30:00z"), T);
        assert_eq!(ok("2024-05-01T14:30:00+02:00"), T);
        assert_eq!(ok("2024-05-01T14:30:00.5+0200"), T + 500);
        assert_eq!(ok("2024-05-01T07:30:00-05:00"), T);
        assert_eq!(ok("2024-05-01 12:30:00Z"), T);
        assert_eq!(ok("2024-05-01T12:30:00"), T);
        assert_eq!(ok("2024-05-01 12:30:00.250"), T + 250);
        assert_eq!(ok("2024-05-01T12:30"), T);
        assert_eq!(ok("2024-05-01"), T - 45_000_000);
        assert_eq!(ok("1970-01-01T00:00:00Z"), 0);
        assert_eq!(ok("1969-12-31T23:59:59.999Z"), -1);
        assert_eq!(ok(" 1714566600 "), T);
        assert_eq!(ok("1714566600000"), T);
    }

    #[test]
    fn numbers() {
        assert_eq!(parse_timestamp(&json!(1_714_566_600)).unwrap(), T);
        assert_eq!(parse_timestamp(&json!(T)).unwrap(), T);
        assert_eq!(parse_timestamp(&json!(1_714_566_600.25)).unwrap(), T + 250);
        assert_eq!(parse_timestamp(&json!(0)).unwrap(), 0);
        assert_eq!(parse_timestamp(&json!(99_999_999_999i64)).unwrap(), 99_999_999_999_000);
        assert_eq!(parse_timestamp(&json!(100_000_000_000i64)).unwrap(), 100_000_000_000);
        assert_eq!(parse_timestamp(&json!(-86_400)).unwrap(), -86_400_000);
        assert_eq!(parse_timestamp(&json!(i64::MAX)).unwrap(), i64::MAX);
        assert!(parse_timestamp(&json!(u64::MAX)).is_err());
        assert!(parse_timestamp(&json!(1e300)).is_err());
    }

    #[test]
    fn relative() {
        assert_eq!(parse_timestamp_at(&json!("now"), T).unwrap(), T);
        assert_eq!(parse_timestamp_at(&json!("now-1h"), T).unwrap(), T - 3_600_000);
        assert_eq!(parse_timestamp_at(&json!("now + 5m"), T).unwrap(), T + 300_000);
        assert!(parse_timestamp_at(&json!("now*2"), T).is_err());
        assert!(parse_timestamp_at(&json!("now-"), T).is_err());
        assert!(parse_timestamp_at(&json!("now-1w"), i64::MIN).is_err());
        assert!(parse_timestamp(&json!("now")).unwrap() > T);
    }

    #[test]
    fn rejects() {
        for v in [
            json!(""),
            json!("yesterday"),
            json!("2024-13-01"),
            json!("2024-02-30T00:00:00Z"),
            json!("2024-05-01T25:00:00Z"),
            json!("2024-05-01T12:30:00+25:00"),
            json!("99999999999999999999"),
            json!("-"),
            json!("now€"),
            json!("2024-05-01T12:30:00€"),
            json!(null),
            json!(true),
            json!([1]),
            json!({"t": 1}),
        ] {
            assert!(parse_timestamp(&v).is_err(), "{v}");
        }
    }

    #[test]
    fn formatting() {
        assert_eq!(format_timestamp(T + 7), "2024-05-01T12:30:00.007Z");
        assert_eq!(format_timestamp(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(format_timestamp(-1), "1969-12-31T23:59:59.999Z");
        assert_eq!(format_timestamp(i64::MAX), i64::MAX.to_string());
        assert_eq!(format_timestamp(i64::MIN), i64::MIN.to_string());
        for ms in [0, -1, T, T + 999, 253_402_300_799_999] {
            assert_eq!(parse_timestamp(&json!(format_timestamp(ms))).unwrap(), ms);
        }
    }
}
