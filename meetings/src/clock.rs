//! Wall-clock time as the application records it: milliseconds since the
//! epoch, shown as RFC 3339 strings.

use chrono::{DateTime, SecondsFormat, Utc};

pub fn now_ms() -> i64 {
    Utc::now().timestamp_millis()
}

/// `ms` as an RFC 3339 UTC timestamp with milliseconds.
pub fn iso(ms: i64) -> String {
    DateTime::<Utc>::from_timestamp_millis(ms).unwrap_or_default().to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// An ISO 8601 / RFC 3339 timestamp (or a date, taken as its midnight UTC) as milliseconds.
pub fn parse_iso(text: &str) -> Option<i64> {
    if let Ok(t) = DateTime::parse_from_rfc3339(text) {
        return Some(t.timestamp_millis());
    }
    chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d").ok().and_then(|d| d.and_hms_opt(0, 0, 0)).map(|t| t.and_utc().timestamp_millis())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_round_trip() {
        let ms = 1_790_000_000_123;
        assert_eq!(parse_iso(&iso(ms)), Some(ms));
        assert_eq!(parse_iso("2026-11-29"), Some(1_795_910_400_000));
        assert_eq!(parse_iso("2026-11-29T10:00:00+01:00"), Some(1_795_910_400_000 + 9 * 3_600_000));
        assert_eq!(parse_iso("tomorrow"), None);
    }
}
