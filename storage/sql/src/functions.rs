//! Scalar and aggregate functions.
use crate::ExecContext;
use crate::error::{Result, parse, type_mismatch, unsupported};
use crate::types::SqlType;
use crate::value::{Value, cast, civil_from_days, compare, ts_from_ms};
use rust_decimal::prelude::*;
use std::cmp::Ordering;

fn arity(name: &str, args: &[Value], min: usize, max: usize) -> Result<()> {
    if args.len() < min || args.len() > max {
        return Err(parse(format!("wrong number of arguments to {}()", name.to_uppercase())));
    }
    Ok(())
}

fn text_arg(v: &Value) -> String {
    v.to_text()
}

fn int_arg(v: &Value) -> Result<i64> {
    match cast(v.clone(), &SqlType::BigInt, true)? {
        Value::Int(i) => Ok(i),
        _ => Err(type_mismatch("expected an integer argument")),
    }
}

/// Calls a scalar function by lowercase name.
pub fn scalar(name: &str, args: Vec<Value>, ctx: &ExecContext) -> Result<Value> {
    // Time functions first (no NULL propagation concerns).
    match name {
        "now" | "current_timestamp" | "localtimestamp" => return Ok(ts_from_ms(ctx.now_ms)),
        "current_date" => return cast(ts_from_ms(ctx.now_ms), &SqlType::Date, true),
        "current_time" | "localtime" => return cast(ts_from_ms(ctx.now_ms), &SqlType::Time, true),
        "concat" => return Ok(Value::Text(args.iter().filter(|v| !v.is_null()).map(text_arg).collect())),
        "nullif" => {
            arity(name, &args, 2, 2)?;
            return Ok(if compare(&args[0], &args[1])? == Some(Ordering::Equal) { Value::Null } else { args[0].clone() });
        }
        "coalesce" => return Ok(args.into_iter().find(|v| !v.is_null()).unwrap_or(Value::Null)),
        _ => {}
    }
    if args.first().is_some_and(|v| v.is_null()) {
        // Every remaining function is NULL on NULL input.
        return Ok(Value::Null);
    }
    match name {
        "upper" | "lower" | "length" | "char_length" | "character_length" | "abs" | "date" | "ceil" | "ceiling" | "floor" | "sqrt" => {
            arity(name, &args, 1, 1)?
        }
        _ => {}
    }
    let a0 = args.first().cloned().unwrap_or(Value::Null);
    Ok(match name {
        "upper" => Value::Text(text_arg(&a0).to_uppercase()),
        "lower" => Value::Text(text_arg(&a0).to_lowercase()),
        "length" | "char_length" | "character_length" => match &a0 {
            Value::Blob(b) => Value::Int(b.len() as i64),
            v => Value::Int(text_arg(v).chars().count() as i64),
        },
        "abs" => match a0 {
            Value::Int(i) => Value::Int(i.checked_abs().ok_or_else(|| type_mismatch("integer out of range"))?),
            Value::Float(f) => Value::Float(f.abs()),
            Value::Decimal(d) => Value::Decimal(d.abs()),
            Value::Text(s) => scalar("abs", vec![crate::value::number_literal(&s)?], ctx)?,
            other => return Err(type_mismatch(format!("ABS() of {}", other.type_name()))),
        },
        "date" => cast(a0, &SqlType::Date, true)?,
        "round" => {
            arity(name, &args, 1, 2)?;
            let places = match args.get(1) {
                Some(v) if v.is_null() => return Ok(Value::Null),
                Some(v) => int_arg(v)?,
                None => 0,
            };
            match a0 {
                Value::Int(i) => Value::Int(i),
                Value::Decimal(d) => {
                    Value::Decimal(d.round_dp_with_strategy(places.clamp(0, 28) as u32, RoundingStrategy::MidpointAwayFromZero))
                }
                Value::Float(f) => {
                    let m = 10f64.powi(places.clamp(-300, 300) as i32);
                    Value::Float((f * m).round() / m)
                }
                other => return Err(type_mismatch(format!("ROUND() of {}", other.type_name()))),
            }
        }
        "ceil" | "ceiling" | "floor" => match a0 {
            Value::Int(i) => Value::Int(i),
            Value::Decimal(d) => Value::Decimal(if name == "floor" { d.floor() } else { d.ceil() }),
            Value::Float(f) => Value::Float(if name == "floor" { f.floor() } else { f.ceil() }),
            other => return Err(type_mismatch(format!("{}() of {}", name.to_uppercase(), other.type_name()))),
        },
        "sqrt" => {
            let f = match cast(a0, &SqlType::Double, true)? {
                Value::Float(f) => f,
                _ => 0.0,
            };
            if f < 0.0 {
                return Err(type_mismatch("cannot take square root of a negative number"));
            }
            Value::Float(f.sqrt())
        }
        "substring" | "substr" => {
            arity(name, &args, 2, 3)?;
            if args[1..].iter().any(|v| v.is_null()) {
                return Ok(Value::Null);
            }
            let chars: Vec<char> = text_arg(&a0).chars().collect();
            let start = int_arg(&args[1])?;
            let end = match args.get(2) {
                Some(l) => {
                    let l = int_arg(l)?;
                    if l < 0 {
                        return Err(type_mismatch("negative substring length not allowed"));
                    }
                    start.saturating_add(l)
                }
                None => i64::MAX,
            };
            let s = (start.max(1) - 1) as usize;
            let e = (end.max(1) - 1).min(chars.len() as i64) as usize;
            Value::Text(if s < e { chars[s..e].iter().collect() } else { String::new() })
        }
        "trim" | "ltrim" | "rtrim" | "btrim" => {
            let set: Vec<char> = args.get(1).map(text_arg).unwrap_or_else(|| " ".into()).chars().collect();
            let s = text_arg(&a0);
            let f = |c: char| set.contains(&c);
            Value::Text(match name {
                "ltrim" => s.trim_start_matches(f).to_string(),
                "rtrim" => s.trim_end_matches(f).to_string(),
                _ => s.trim_matches(f).to_string(),
            })
        }
        "replace" => {
            arity(name, &args, 3, 3)?;
            if args.iter().any(|v| v.is_null()) {
                return Ok(Value::Null);
            }
            Value::Text(text_arg(&a0).replace(&text_arg(&args[1]), &text_arg(&args[2])))
        }
        other => return Err(unsupported(format!("function {}() does not exist", other.to_uppercase()))),
    })
}

/// Computes an aggregate over non-NULL input values.
/// SUM of integers is an integer; AVG of integers or floats is DOUBLE; AVG of DECIMAL is DECIMAL.
pub fn aggregate(name: &str, vals: Vec<Value>) -> Result<Value> {
    match name {
        "count" => Ok(Value::Int(vals.len() as i64)),
        "min" | "max" => {
            let mut best: Option<Value> = None;
            for v in vals {
                best = Some(match best {
                    None => v,
                    Some(b) => {
                        let o = compare(&v, &b)?.unwrap_or(Ordering::Equal);
                        if (name == "min" && o == Ordering::Less) || (name == "max" && o == Ordering::Greater) { v } else { b }
                    }
                });
            }
            Ok(best.unwrap_or(Value::Null))
        }
        "sum" | "avg" => {
            if vals.is_empty() {
                return Ok(Value::Null);
            }
            let n = vals.len();
            let mut int_sum: i128 = 0;
            let mut dec_sum = Decimal::ZERO;
            let mut f_sum = 0f64;
            let (mut has_dec, mut has_f) = (false, false);
            for v in &vals {
                let v = match v {
                    Value::Text(s) => crate::value::number_literal(s)?,
                    other => other.clone(),
                };
                match v {
                    Value::Int(i) => int_sum += i as i128,
                    Value::Decimal(d) => {
                        has_dec = true;
                        dec_sum = dec_sum.checked_add(d).ok_or_else(|| type_mismatch("numeric value out of range"))?;
                    }
                    Value::Float(f) => {
                        has_f = true;
                        f_sum += f;
                    }
                    other => return Err(type_mismatch(format!("{}() of {}", name.to_uppercase(), other.type_name()))),
                }
            }
            if has_f {
                let total = f_sum + int_sum as f64 + dec_sum.to_f64().unwrap_or(0.0);
                return Ok(Value::Float(if name == "avg" { total / n as f64 } else { total }));
            }
            if has_dec {
                let i = Decimal::from_i128(int_sum).ok_or_else(|| type_mismatch("numeric value out of range"))?;
                let total = dec_sum.checked_add(i).ok_or_else(|| type_mismatch("numeric value out of range"))?;
                if name == "avg" {
                    let avg = total.checked_div(Decimal::from(n)).ok_or_else(|| type_mismatch("numeric value out of range"))?;
                    return Ok(Value::Decimal(avg.round_dp(16).normalize()));
                }
                return Ok(Value::Decimal(total));
            }
            if name == "avg" {
                return Ok(Value::Float(int_sum as f64 / n as f64));
            }
            match i64::try_from(int_sum) {
                Ok(i) => Ok(Value::Int(i)),
                Err(_) => Decimal::from_i128(int_sum).map(Value::Decimal).ok_or_else(|| type_mismatch("integer out of range")),
            }
        }
        other => Err(unsupported(format!("aggregate {other}() is not supported"))),
    }
}

/// EXTRACT(field FROM date/time/timestamp).
pub fn extract(field: &str, v: Value) -> Result<Value> {
    let (days, micros) = match v {
        Value::Null => return Ok(Value::Null),
        Value::Date(d) => (Some(d as i64), 0),
        Value::Timestamp(t) => (Some(t.div_euclid(86_400_000_000)), t.rem_euclid(86_400_000_000)),
        Value::Time(t) => (None, t),
        Value::Text(s) => {
            return extract(field, cast(Value::Text(s), &SqlType::Timestamp, true)?);
        }
        other => return Err(type_mismatch(format!("EXTRACT from {}", other.type_name()))),
    };
    let ymd = days.map(civil_from_days);
    let f = field.to_ascii_uppercase();
    Ok(Value::Int(match (f.as_str(), ymd) {
        ("YEAR", Some((y, _, _))) => y,
        ("MONTH", Some((_, m, _))) => m as i64,
        ("DAY", Some((_, _, d))) => d as i64,
        ("DOW", Some(_)) => (days.unwrap_or(0) + 4).rem_euclid(7),
        ("HOUR", _) => micros / 3_600_000_000,
        ("MINUTE", _) => (micros / 60_000_000) % 60,
        ("SECOND", _) => (micros / 1_000_000) % 60,
        ("EPOCH", _) => days.unwrap_or(0) * 86400 + micros / 1_000_000,
        _ => return Err(unsupported(format!("EXTRACT({f}) is not supported for this value"))),
    }))
}
