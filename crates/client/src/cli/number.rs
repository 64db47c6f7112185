//! Numeric flag values: parse errors name the flag and the value (exit 99).

use std::fmt::Display;
use std::str::FromStr;

use crate::error::{Error, Result};

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
