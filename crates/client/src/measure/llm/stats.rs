//! Summary statistics of one LLM metric: exact avg/min/max/std from running sums, and
//! percentiles from an HDR histogram (fixed memory, 3 significant digits).
//!
//! Percentiles use the nearest-rank rule: pN is the smallest recorded value with at least N %
//! of the values at or below it. The histogram returns the top of that value's bucket, so a
//! percentile can read up to 1/1024 (< 0.1 %) above the exact sample; it is clamped to the
//! exact [min, max].

use hdrhistogram::Histogram;

/// The percentiles every LLM metric reports (GenAI-Perf's JSON set).
pub const PERCENTILES: [u32; 9] = [1, 5, 10, 25, 50, 75, 90, 95, 99];

/// Significant decimal digits the histograms keep.
const SIGNIFICANT_DIGITS: u8 = 3;

/// The summary of one metric, in the metric's base unit (ns for times, tokens, tokens/s).
#[derive(Clone, Debug, PartialEq)]
pub struct Stats {
    /// Number of values.
    pub count: u64,
    pub avg: f64,
    pub min: f64,
    pub max: f64,
    /// Population standard deviation (divides by `count`, like numpy's default).
    pub std: f64,
    /// Values at [`PERCENTILES`], same order.
    pub percentiles: [f64; 9],
}

impl Stats {
    /// The value at percentile `p` (one of [`PERCENTILES`]); `None` for any other `p`.
    pub fn p(&self, p: u32) -> Option<f64> {
        PERCENTILES
            .iter()
            .position(|&q| q == p)
            .map(|i| self.percentiles[i])
    }

    /// The same statistics with every value multiplied by `factor` (count unchanged); used
    /// to turn ns into ms for display.
    pub fn scaled(&self, factor: f64) -> Stats {
        Stats {
            count: self.count,
            avg: self.avg * factor,
            min: self.min * factor,
            max: self.max * factor,
            std: self.std * factor,
            percentiles: self.percentiles.map(|v| v * factor),
        }
    }
}

/// Collects the values of one metric.
pub struct StatAcc {
    /// Values are stored as `round(value * hist_scale)`, so fractional metrics (tokens/s)
    /// keep three decimals in the histogram.
    hist: Histogram<u64>,
    hist_scale: f64,
    count: u64,
    /// Welford running mean and sum of squared deviations: exact enough for ns values near
    /// 1e12 where the naive sum of squares would cancel.
    mean: f64,
    m2: f64,
    min: f64,
    max: f64,
}

impl StatAcc {
    /// An accumulator for integer-valued metrics (ns, tokens).
    pub fn new() -> Self {
        Self::with_scale(1.0)
    }

    /// An accumulator whose histogram keeps values multiplied by `hist_scale` (e.g. 1000
    /// for tokens/s with three decimals).
    pub fn with_scale(hist_scale: f64) -> Self {
        StatAcc {
            // Only a precision above 5 digits is refused.
            hist: Histogram::new(SIGNIFICANT_DIGITS).expect("3 significant digits is valid"),
            hist_scale,
            count: 0,
            mean: 0.0,
            m2: 0.0,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
        }
    }

    /// Records one value. Negative and non-finite values are ignored (no metric produces
    /// them).
    pub fn record(&mut self, value: f64) {
        self.record_n(value, 1);
    }

    /// Records `n` copies of `value` in one step.
    pub fn record_n(&mut self, value: f64, n: u64) {
        if n == 0 || !value.is_finite() || value < 0.0 {
            return;
        }
        // Welford's update for a batch of n equal values.
        let new_count = self.count + n;
        let delta = value - self.mean;
        self.mean += delta * n as f64 / new_count as f64;
        self.m2 += delta * delta * (self.count as f64) * n as f64 / new_count as f64;
        self.count = new_count;
        self.min = self.min.min(value);
        self.max = self.max.max(value);
        let scaled = (value * self.hist_scale).round();
        // `as` saturates at u64::MAX. The histogram grows to fit; only a value past its
        // ceiling (i64::MAX / 2, a clock bug rather than data) is clamped instead.
        let scaled = scaled as u64;
        if self.hist.record_n(scaled, n).is_err() {
            self.hist.saturating_record_n(scaled, n);
        }
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    /// The summary, or `None` when nothing was recorded.
    pub fn stats(&self) -> Option<Stats> {
        if self.count == 0 {
            return None;
        }
        let mut percentiles = [0.0; 9];
        for (slot, p) in percentiles.iter_mut().zip(PERCENTILES) {
            let v = self.hist.value_at_percentile(p as f64) as f64 / self.hist_scale;
            *slot = v.clamp(self.min, self.max);
        }
        Some(Stats {
            count: self.count,
            avg: self.mean,
            min: self.min,
            max: self.max,
            std: (self.m2 / self.count as f64).max(0.0).sqrt(),
            percentiles,
        })
    }
}

impl Default for StatAcc {
    fn default() -> Self {
        Self::new()
    }
}

/// Collects the values of a metric that can be negative (a signed difference): keeps every
/// value, one per request, and reads exact nearest-rank percentiles from them.
#[derive(Clone, Debug, Default)]
pub struct SignedAcc {
    values: Vec<f64>,
}

impl SignedAcc {
    pub fn new() -> Self {
        SignedAcc::default()
    }

    /// Records one value; non-finite values are ignored.
    pub fn record(&mut self, value: f64) {
        if value.is_finite() {
            self.values.push(value);
        }
    }

    /// The summary, or `None` when nothing was recorded.
    pub fn stats(&self) -> Option<Stats> {
        if self.values.is_empty() {
            return None;
        }
        let mut sorted = self.values.clone();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let avg = sorted.iter().sum::<f64>() / n as f64;
        let var = sorted.iter().map(|v| (v - avg) * (v - avg)).sum::<f64>() / n as f64;
        let mut percentiles = [0.0; 9];
        for (slot, p) in percentiles.iter_mut().zip(PERCENTILES) {
            let rank = ((p as f64 / 100.0) * n as f64).ceil().max(1.0) as usize;
            *slot = sorted[rank.min(n) - 1];
        }
        Some(Stats {
            count: n as u64,
            avg,
            min: sorted[0],
            max: sorted[n - 1],
            std: var.sqrt(),
            percentiles,
        })
    }
}

/// Stats of a plain list of values (tests and small one-off summaries).
pub fn stats_of(values: &[f64]) -> Option<Stats> {
    let mut acc = StatAcc::new();
    for &v in values {
        acc.record(v);
    }
    acc.stats()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// xorshift64*: a small deterministic generator so the test needs no crate.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }
    }

    #[test]
    fn empty_accumulator_has_no_stats() {
        assert_eq!(StatAcc::new().stats(), None);
        assert_eq!(stats_of(&[]), None);
    }

    #[test]
    fn exact_moments_on_small_input() {
        let s = stats_of(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]).unwrap();
        assert_eq!(s.count, 8);
        assert_eq!(s.avg, 5.0);
        assert_eq!(s.std, 2.0);
        assert_eq!((s.min, s.max), (2.0, 9.0));
        // Nearest rank: p50 of 8 values is the 4th smallest, p99 the 8th.
        assert_eq!(s.p(50), Some(4.0));
        assert_eq!(s.p(99), Some(9.0));
        assert_eq!(s.p(1), Some(2.0));
        assert_eq!(s.p(42), None);
    }

    #[test]
    fn record_n_equals_repeated_record() {
        let mut a = StatAcc::new();
        let mut b = StatAcc::new();
        for (v, n) in [(3.0, 4u64), (10.0, 1), (7.5, 3)] {
            a.record_n(v, n);
            for _ in 0..n {
                b.record(v);
            }
        }
        let (sa, sb) = (a.stats().unwrap(), b.stats().unwrap());
        assert_eq!(sa.count, sb.count);
        assert!((sa.avg - sb.avg).abs() < 1e-12);
        assert!((sa.std - sb.std).abs() < 1e-12);
        assert_eq!(sa.percentiles, sb.percentiles);
    }

    #[test]
    fn signed_values_keep_their_sign_and_exact_ranks() {
        let mut a = SignedAcc::new();
        assert_eq!(a.stats(), None);
        for v in [-50.0, 0.0, 25.0, 100.0, f64::NAN] {
            a.record(v);
        }
        let s = a.stats().unwrap();
        assert_eq!(s.count, 4);
        assert_eq!((s.min, s.max, s.avg), (-50.0, 100.0, 18.75));
        // Nearest rank of 4 values: p25 is the 1st, p50 the 2nd, p75 the 3rd, p99 the 4th.
        assert_eq!(s.p(25), Some(-50.0));
        assert_eq!(s.p(50), Some(0.0));
        assert_eq!(s.p(75), Some(25.0));
        assert_eq!(s.p(99), Some(100.0));
        let var = [-50.0f64, 0.0, 25.0, 100.0]
            .iter()
            .map(|v| (v - 18.75) * (v - 18.75))
            .sum::<f64>()
            / 4.0;
        assert!((s.std - var.sqrt()).abs() < 1e-9);
    }

    #[test]
    fn bad_values_are_ignored() {
        let mut a = StatAcc::new();
        a.record(f64::NAN);
        a.record(-1.0);
        a.record(f64::INFINITY);
        assert_eq!(a.count(), 0);
    }

    #[test]
    fn fractional_values_keep_their_decimals_with_a_scale() {
        let mut a = StatAcc::with_scale(1000.0);
        for v in [55.61, 55.67, 55.71] {
            a.record(v);
        }
        let s = a.stats().unwrap();
        assert!((s.p(50).unwrap() - 55.67).abs() < 0.06, "{s:?}");
        assert_eq!(s.p(99), Some(55.71));
    }

    /// HDR percentiles against the exact nearest-rank value of the sorted data, on values
    /// spanning microseconds to minutes in ns: never below the exact value, never more than
    /// 1/1000 above it.
    #[test]
    fn percentile_error_bound_against_exact_sorting() {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        for round in 0..20 {
            let n = 1 + (rng.next() % 5000) as usize;
            let mut values: Vec<f64> = (0..n)
                .map(|_| {
                    // Log-uniform between 1e3 and 1e11 ns.
                    let exp = 3.0 + (rng.next() % 8_000_000) as f64 / 1_000_000.0;
                    10f64.powf(exp).round()
                })
                .collect();
            let s = stats_of(&values).unwrap();
            values.sort_by(f64::total_cmp);
            for (i, p) in PERCENTILES.iter().enumerate() {
                let rank = ((*p as f64 / 100.0) * n as f64).ceil().max(1.0) as usize;
                let exact = values[rank - 1];
                let got = s.percentiles[i];
                assert!(
                    got >= exact && got <= exact * 1.001 + 1.0,
                    "round {round} n {n} p{p}: hdr {got} exact {exact}"
                );
            }
            let mean = values.iter().sum::<f64>() / n as f64;
            assert!((s.avg - mean).abs() <= mean * 1e-9);
        }
    }
}
