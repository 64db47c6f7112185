//! Numeric flag values: parse errors name the flag and the value (exit 99).

use std::fmt::Display;
use std::str::FromStr;

use crate::error::{Error, Result};

/// Upper bounds of numeric flags: far above any real use, and low enough that no later
/// product or conversion (ms to ns, a count times a size, a rate to an interval) can
/// overflow. A value above one is a usage error naming the flag.
///
/// Concurrency, requests in flight, sequences, sessions, trials.
pub(crate) const MAX_LEVEL: u64 = 1_000_000;
/// Request counts (measured, warm-up, per window, per sequence).
pub(crate) const MAX_COUNT: u64 = 1_000_000_000;
/// Durations in ms (a day).
pub(crate) const MAX_MS: u64 = 86_400_000;
/// Durations in s (a day).
pub(crate) const MAX_S: u64 = 86_400;
/// Request rates in requests/s.
pub(crate) const MAX_RATE: f64 = 10_000_000.0;
/// Percentages that may exceed 100 (a spread, a variation).
pub(crate) const MAX_PERCENT: f64 = 10_000.0;

/// Parses a number, naming the flag and the value on failure.
pub(super) fn parse_number<T: FromStr>(flag: &str, raw: &str) -> Result<T> {
    raw.trim().parse::<T>().map_err(|_| {
        Error::usage(format!(
            "Failed to parse {flag}. '{raw}' is not a valid integer."
        ))
    })
}

/// Parses an integer that must be `>= min`; negative input gets the range message, not a
/// syntax one.
pub(super) fn parse_at_least<T>(flag: &str, raw: &str, min: i64) -> Result<T>
where
    T: TryFrom<i128> + Display,
{
    let value: i128 = parse_number(flag, raw)?;
    let requirement = if min == 1 {
        "> 0".to_string()
    } else {
        format!(">= {min}")
    };
    if value < i128::from(min) {
        return Err(Error::usage(format!(
            "Failed to parse {flag}. The value must be {requirement} (got '{raw}')."
        )));
    }
    T::try_from(value)
        .map_err(|_| Error::usage(format!("Failed to parse {flag}. '{raw}' is too large.")))
}

/// Parses an integer that must be in `min..=max`.
pub(super) fn parse_in_range(flag: &str, raw: &str, min: i64, max: u64) -> Result<u64> {
    let value: u64 = parse_at_least(flag, raw, min)?;
    if value > max {
        return Err(Error::usage(format!(
            "Failed to parse {flag}. The value must be <= {max} (got '{raw}')."
        )));
    }
    Ok(value)
}

/// Parses an integer in `min..=max` into `T`.
pub(super) fn parse_within<T: TryFrom<u64>>(
    flag: &str,
    raw: &str,
    min: i64,
    max: u64,
) -> Result<T> {
    let value = parse_in_range(flag, raw, min, max)?;
    T::try_from(value)
        .map_err(|_| Error::usage(format!("Failed to parse {flag}. '{raw}' is too large.")))
}

/// Parses a finite number in `min..=max`.
pub(crate) fn parse_float_within(flag: &str, raw: &str, min: f64, max: f64) -> Result<f64> {
    let value = raw.trim().parse::<f64>().map_err(|_| {
        Error::usage(format!(
            "Failed to parse {flag}. '{raw}' is not a valid number."
        ))
    })?;
    check_float(value, min, max)
        .map_err(|why| Error::usage(format!("Failed to parse {flag}. {why} (got '{raw}').")))?;
    Ok(value)
}

/// Why `value` is not a finite number in `min..=max`, if it is not.
pub(crate) fn check_float(value: f64, min: f64, max: f64) -> std::result::Result<(), String> {
    if !value.is_finite() {
        return Err("The value must be a finite number".to_string());
    }
    if value < min {
        return Err(format!("The value must be >= {min}"));
    }
    if value > max {
        return Err(format!("The value must be <= {max}"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_in_a_range() {
        assert_eq!(parse_in_range("--t", "86400", 0, 86_400).unwrap(), 86_400);
        let err = parse_in_range("--t", "18446744073709551615", 0, 86_400).unwrap_err();
        assert_eq!(
            err.msg,
            "Failed to parse --t. The value must be <= 86400 (got '18446744073709551615')."
        );
        assert!(parse_in_range("--t", "-1", 0, 86_400).is_err());
    }

    #[test]
    fn integers_and_floats_within_bounds() {
        assert_eq!(parse_within::<u32>("-r", "10", 1, MAX_LEVEL).unwrap(), 10);
        for raw in ["1000001", "18446744073709551615", "99999999999999999999999"] {
            let err = parse_within::<u32>("-r", raw, 1, MAX_LEVEL).unwrap_err();
            assert!(err.msg.starts_with("Failed to parse -r. "), "{}", err.msg);
            assert_eq!(err.exit_code(), 99);
        }
        assert!(parse_within::<u8>("--x", "300", 0, 1000).is_err());
        assert_eq!(
            parse_float_within("-s", "10.5", 0.0, MAX_PERCENT).unwrap(),
            10.5
        );
        for raw in ["1e30", "-1", "inf", "NaN", "x"] {
            let err = parse_float_within("-s", raw, 0.0, MAX_PERCENT).unwrap_err();
            assert!(err.msg.starts_with("Failed to parse -s. "), "{}", err.msg);
        }
    }

    #[test]
    fn bounded_integers() {
        assert_eq!(parse_at_least::<u64>("-b", "7", 1).unwrap(), 7);
        assert_eq!(parse_at_least::<u64>("-l", "0", 0).unwrap(), 0);
        assert_eq!(parse_at_least::<u32>("-r", " 3 ", 1).unwrap(), 3);
        let cases = [
            ("0", 1, "must be > 0"),
            ("-2", 0, "must be >= 0"),
            ("x", 1, "not a valid integer"),
            ("99999999999", 1, "too large"),
        ];
        for (raw, min, needle) in cases {
            let err = parse_at_least::<u32>("--flag", raw, min).unwrap_err();
            assert!(
                err.msg.contains(needle) && err.msg.contains("--flag"),
                "{}",
                err.msg
            );
        }
    }
}
