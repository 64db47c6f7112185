//! Compute delays: the `Delay` value, its flag syntax (`2ms`, `1ms..3ms`) and the sampling of
//! uniform delays with a small per-thread generator.

use std::time::Duration;

use inferperf_wire::error::{Error, Result};

/// A model's compute delay, added to its real compute time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delay {
    Fixed(Duration),
    /// Uniformly random between the two bounds (inclusive).
    Uniform(Duration, Duration),
}

/// Parses `2ms`, `1.5s`, `500us` (also `µs`), `750ns` into a duration.
fn parse_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let (number, unit) = text.split_at(split);
    let value: f64 = number.parse().ok()?;
    let ns_per_unit = match unit {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        _ => return None,
    };
    let ns = value * ns_per_unit;
    (ns.is_finite() && ns <= 3.6e12).then(|| Duration::from_nanos(ns.round() as u64))
}

/// Parses a `--delay` value: `MODEL=DURATION` or `MODEL=LOW..HIGH` (uniformly random).
pub fn parse_delay(spec: &str) -> Result<(String, Delay)> {
    let bad = |why: &str| Error::usage(format!("--delay '{spec}': {why}"));
    let (model, value) = spec
        .split_once('=')
        .ok_or_else(|| bad("expected MODEL=SPEC"))?;
    let model = model.trim();
    if model.is_empty() {
        return Err(bad("missing model name"));
    }
    Ok((model.to_string(), delay_value(value, bad)?))
}

/// Parses a delay flag's value without a model (e.g. `--openai-ttft 50ms` or `1ms..3ms`);
/// `flag` names the flag in the error.
pub fn parse_delay_value(flag: &str, value: &str) -> Result<Delay> {
    delay_value(value, |why| {
        Error::usage(format!("{flag} '{value}': {why}"))
    })
}

/// `DURATION` or `LOW..HIGH`; `bad` builds the error from the reason.
fn delay_value(value: &str, bad: impl Fn(&str) -> Error) -> Result<Delay> {
    let duration = |text: &str| {
        parse_duration(text).ok_or_else(|| bad("durations look like 2ms, 500us, 1.5s or 750ns"))
    };
    let delay = match value.split_once("..") {
        None => Delay::Fixed(duration(value)?),
        Some((low, high)) => {
            let (low, high) = (duration(low)?, duration(high)?);
            if low > high {
                return Err(bad("the low end of the range is above the high end"));
            }
            Delay::Uniform(low, high)
        }
    };
    Ok(delay)
}

/// xorshift64*: a small, fast generator for uniform delays (quality is ample for jitter).
pub fn next_random(state: &mut u64) -> u64 {
    let mut x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    x.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

pub fn sample_delay(delay: &Delay, rng: &mut u64) -> Duration {
    match *delay {
        Delay::Fixed(d) => d,
        Delay::Uniform(lo, hi) => {
            let span = hi.saturating_sub(lo).as_nanos() as u64;
            let offset = if span == 0 {
                0
            } else {
                next_random(rng) % (span + 1)
            };
            lo + Duration::from_nanos(offset)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delay_specs() {
        let ms = Duration::from_millis;
        let us = Duration::from_micros;
        let ok: [(&str, &str, Delay); 6] = [
            ("simple=2ms", "simple", Delay::Fixed(ms(2))),
            (
                "simple=500us..3ms",
                "simple",
                Delay::Uniform(us(500), ms(3)),
            ),
            (
                "identity_fp32=1.5s",
                "identity_fp32",
                Delay::Fixed(ms(1500)),
            ),
            ("x=750ns", "x", Delay::Fixed(Duration::from_nanos(750))),
            ("x=10µs", "x", Delay::Fixed(us(10))),
            (" y =0ms..0ms", "y", Delay::Uniform(ms(0), ms(0))),
        ];
        for (spec, model, delay) in ok {
            assert_eq!(
                parse_delay(spec).unwrap(),
                (model.to_string(), delay),
                "{spec}"
            );
        }
        for bad in [
            "simple",
            "=2ms",
            "simple=2",
            "simple=ms",
            "simple=3ms..1ms",
            "simple=2h",
            "s=1e9s",
        ] {
            let err = parse_delay(bad).unwrap_err();
            assert_eq!(err.exit_code(), 99, "{bad}");
            assert!(err.msg.starts_with("--delay"), "{bad}: {}", err.msg);
        }
    }

    #[test]
    fn uniform_delay_stays_in_range() {
        let mut rng = 12345u64;
        let (lo, hi) = (Duration::from_micros(500), Duration::from_millis(3));
        let samples: Vec<Duration> = (0..1000)
            .map(|_| sample_delay(&Delay::Uniform(lo, hi), &mut rng))
            .collect();
        assert!(samples.iter().all(|d| *d >= lo && *d <= hi));
        let below_mid = samples
            .iter()
            .filter(|d| **d < Duration::from_micros(1750))
            .count();
        assert!(
            (350..650).contains(&below_mid),
            "{below_mid} of 1000 below the midpoint"
        );
        let fixed = Delay::Fixed(Duration::from_millis(2));
        assert_eq!(sample_delay(&fixed, &mut rng), Duration::from_millis(2));
        assert_eq!(sample_delay(&Delay::Uniform(lo, lo), &mut rng), lo);
    }
}
