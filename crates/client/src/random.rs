//! Uniform floating-point draws from 64 random bits, shared by every seeded generator of the
//! crate (arrival schedules, sequence lengths, synthetic prompts, LLM request classes): the top
//! 53 bits become the mantissa, so each draw is exact and the same seed gives the same value
//! on every platform.

/// 2^53: the number of distinct values a draw takes.
const STEPS: f64 = (1u64 << 53) as f64;

/// Uniform in [0, 1) from the top 53 bits of `bits`.
pub fn unit(bits: u64) -> f64 {
    (bits >> 11) as f64 / STEPS
}

/// Uniform in (0, 1] from the top 53 bits of `bits`: never 0, so `ln` of it stays finite.
pub fn unit_open0(bits: u64) -> f64 {
    ((bits >> 11) + 1) as f64 / STEPS
}

#[cfg(test)]
#[path = "random_tests.rs"]
mod tests;
