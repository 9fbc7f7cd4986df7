//! Durations such as `"500ms"`, `"10s"`, `"5m"`, `"1h"`, `"7d"`, `"2w"`, `"1h30m"`.
//!
//! Grammar: one or more `<number><unit>` components, optionally separated by
//! spaces, summed. The number is decimal digits with an optional fraction
//! (`"1.5h"`; sub-millisecond remainders are truncated). Units (case-insensitive):
//! `ms`, `s`, `m` (minutes), `h`, `d` (24 h), `w` (7 d). Negative durations,
//! missing units and results beyond `i64` milliseconds are errors.

use crate::error::TsError;
use serde_json::Value;

const MS_PER: [(&str, i64); 6] = [("ms", 1), ("s", 1_000), ("m", 60_000), ("h", 3_600_000), ("d", 86_400_000), ("w", 604_800_000)];

fn bad(input: &str, reason: impl Into<String>) -> TsError {
    TsError::InvalidDuration { input: input.to_string(), reason: reason.into() }
}

/// Parse a duration string into milliseconds.
pub fn parse_duration(s: &str) -> Result<i64, TsError> {
    let input = s;
    let lower = s.trim().to_ascii_lowercase();
    let mut rest = lower.as_str();
    if rest.is_empty() {
        return Err(bad(input, "empty duration"));
    }
    if rest.starts_with('-') {
        return Err(bad(input, "durations cannot be negative"));
    }
    let mut total: i64 = 0;
    while !rest.is_empty() {
        let int_end = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        let int_part = &rest[..int_end];
        rest = &rest[int_end..];
        let mut frac_part = "";
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(|c: char| !c.is_ascii_digit()).unwrap_or(r.len());
            frac_part = &r[..end];
            rest = &r[end..];
            if frac_part.is_empty() {
                return Err(bad(input, "expected digits after '.'"));
            }
        }
        if int_part.is_empty() && frac_part.is_empty() {
            return Err(bad(input, "expected a number"));
        }
        let unit_end = rest.find(|c: char| !c.is_ascii_alphabetic()).unwrap_or(rest.len());
        let unit = &rest[..unit_end];
        rest = rest[unit_end..].trim_start();
        if unit.is_empty() {
            return Err(bad(input, "missing unit (use ms, s, m, h, d or w)"));
        }
        let per = MS_PER
            .iter()
            .find(|(u, _)| *u == unit)
            .map(|(_, ms)| *ms)
            .ok_or_else(|| bad(input, format!("unknown unit '{unit}' (use ms, s, m, h, d or w)")))?;
        let overflow = || bad(input, "duration is too large");
        let int: i64 = if int_part.is_empty() { 0 } else { int_part.parse().map_err(|_| overflow())? };
        let mut ms = int.checked_mul(per).ok_or_else(overflow)?;
        if !frac_part.is_empty() {
            // Up to 18 fractional digits are significant; more cannot change the result.
            let digits = &frac_part[..frac_part.len().min(18)];
            let num: i128 = digits.parse().map_err(|_| overflow())?;
            let den = 10i128.pow(digits.len() as u32);
            let add = i64::try_from(num * per as i128 / den).map_err(|_| overflow())?;
            ms = ms.checked_add(add).ok_or_else(overflow)?;
        }
        total = total.checked_add(ms).ok_or_else(overflow)?;
    }
    Ok(total)
}

/// Parse a JSON duration: a string as in [`parse_duration`], or a non-negative
/// integer number of milliseconds.
pub fn parse_duration_value(v: &Value) -> Result<i64, TsError> {
    match v {
        Value::String(s) => parse_duration(s),
        Value::Number(n) => match n.as_i64() {
            Some(ms) if ms >= 0 => Ok(ms),
            _ => Err(bad(&n.to_string(), "a numeric duration must be a non-negative integer of milliseconds")),
        },
        other => Err(bad(&other.to_string(), "expected a string like \"5m\" or integer milliseconds")),
    }
}

/// Format milliseconds compactly, largest units first: `5_400_000` → `"1h30m"`,
/// `0` → `"0ms"`. Negative values get a leading `-`. Round-trips through [`parse_duration`]
/// for non-negative input.
pub fn format_duration(ms: i64) -> String {
    if ms == 0 {
        return "0ms".into();
    }
    let mut out = String::new();
    if ms < 0 {
        out.push('-');
    }
    let mut rest = ms.unsigned_abs();
    for (unit, per) in MS_PER.iter().rev() {
        let per = *per as u64;
        let n = rest / per;
        if n > 0 {
            out.push_str(&format!("{n}{unit}"));
            rest -= n * per;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units_and_combinations() {
        assert_eq!(parse_duration("500ms").unwrap(), 500);
        assert_eq!(parse_duration("10s").unwrap(), 10_000);
        assert_eq!(parse_duration("5m").unwrap(), 300_000);
        assert_eq!(parse_duration("1h").unwrap(), 3_600_000);
        assert_eq!(parse_duration("7d").unwrap(), 604_800_000);
        assert_eq!(parse_duration("2w").unwrap(), 1_209_600_000);
        assert_eq!(parse_duration("1h30m").unwrap(), 5_400_000);
        assert_eq!(parse_duration("1h 30m 15s").unwrap(), 5_415_000);
        assert_eq!(parse_duration("1d2h3m4s5ms").unwrap(), 93_784_005);
        assert_eq!(parse_duration(" 1H ").unwrap(), 3_600_000);
        assert_eq!(parse_duration("1.5h").unwrap(), 5_400_000);
        assert_eq!(parse_duration(".5s").unwrap(), 500);
        assert_eq!(parse_duration("0s").unwrap(), 0);
        assert_eq!(parse_duration("1.0005s").unwrap(), 1_000);
    }

    #[test]
    fn rejects_bad_input() {
        for s in [
            "",
            "  ",
            "5",
            "m",
            "5x",
            "-5m",
            "1h30",
            "5 m x",
            "1.h",
            ".s",
            "h1",
            "5mm",
            "99999999999999999999s",
            "15250285000w",
            "9223372036854775807ms1ms",
            "1..5s",
            "5m-1s",
        ] {
            assert!(parse_duration(s).is_err(), "{s:?} should fail");
        }
        let e = parse_duration("5x").unwrap_err().to_string();
        assert!(e.contains("unknown unit 'x'"), "{e}");
    }

    #[test]
    fn json_and_format() {
        assert_eq!(parse_duration_value(&serde_json::json!("1m")).unwrap(), 60_000);
        assert_eq!(parse_duration_value(&serde_json::json!(250)).unwrap(), 250);
        assert!(parse_duration_value(&serde_json::json!(-1)).is_err());
        assert!(parse_duration_value(&serde_json::json!(1.5)).is_err());
        assert!(parse_duration_value(&serde_json::json!(null)).is_err());
        assert_eq!(format_duration(5_400_000), "1h30m");
        assert_eq!(format_duration(1_209_600_500), "2w500ms");
        assert_eq!(format_duration(-1000), "-1s");
        for ms in [1, 999, 60_000, 93_784_005, i64::MAX] {
            assert_eq!(parse_duration(&format_duration(ms)).unwrap(), ms);
        }
    }
}
