//! Summary statistics of one LLM metric over its exact values, as AIPerf 0.13 and
//! GenAI-Perf 0.0.16 compute them with numpy: avg = sum / count, population std (ddof 0),
//! and percentiles by linear interpolation between the closest ranks (numpy's default
//! `np.percentile` method).
//!
//! Percentile pN of the sorted values v[0..n]: i = N/100 · (n − 1), lo = ⌊i⌋,
//! hi = min(lo + 1, n − 1), pN = v[lo] + (i − lo) · (v[hi] − v[lo]). So p25 of [1, 2, 3, 4]
//! is 1.75 and p50 of an even count is the mean of the two middle values.
//!
//! [`StatAcc`] keeps every value (8 bytes each); [`StatAcc::record_n`] keeps one value and
//! its repeat count (16 bytes), so a metric recorded once per chunk with a token count stays
//! bounded per chunk rather than per token. The statistics are computed after the run.
//! [`LiveAcc`] is the fixed-memory HDR histogram behind the live progress line.

use hdrhistogram::Histogram;

/// The percentiles every LLM metric reports (GenAI-Perf's JSON set).
pub const PERCENTILES: [u32; 9] = [1, 5, 10, 25, 50, 75, 90, 95, 99];

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

/// numpy-linear percentile `q` (0..=100) of the `n` sorted values that `at(k)` returns
/// (k = 0..n, ascending); `n` must be at least 1.
pub fn linear_percentile(q: f64, n: u64, at: impl Fn(u64) -> f64) -> f64 {
    let virtual_index = q / 100.0 * (n - 1) as f64;
    let lo = virtual_index as u64;
    let hi = (lo + 1).min(n - 1);
    let frac = virtual_index - lo as f64;
    let (a, b) = (at(lo), at(hi));
    a + frac * (b - a)
}

/// numpy `method="nearest"` percentile `q` (0..=100) of the `n` sorted values that `at(k)`
/// returns: the value at rank q/100 · (n − 1) rounded to the nearest integer, halves to the
/// even one (numpy's `around`), so p50 of [1, 2, 3, 4] is 3 and p50 of six values is the
/// third. `n` must be at least 1.
pub fn nearest_percentile(q: f64, n: u64, at: impl Fn(u64) -> f64) -> f64 {
    let rank = (q / 100.0 * (n - 1) as f64).round_ties_even() as u64;
    at(rank.min(n - 1))
}

/// AIPerf 0.13's error-adjusted view of a latency metric (`adj_<tag>`): the successful
/// requests' values plus one +inf per failed request. Its average, sum and maximum are
/// +inf and its std undefined, so only the count, the minimum and the percentiles are
/// kept; a percentile that lands on a failure is +inf. Percentiles use numpy's `nearest`
/// method ([`nearest_percentile`]), which AIPerf picks to stay clear of inf − inf.
#[derive(Clone, Debug, PartialEq)]
pub struct Adjusted {
    /// Successful values plus failed requests.
    pub count: u64,
    /// The smallest successful value.
    pub min: f64,
    /// Values at [`PERCENTILES`], same order; +inf where the rank falls on a failure.
    pub percentiles: [f64; 9],
}

impl Adjusted {
    /// The same view with every finite value multiplied by `factor` (ns to ms).
    pub fn scaled(&self, factor: f64) -> Adjusted {
        Adjusted {
            count: self.count,
            min: self.min * factor,
            percentiles: self.percentiles.map(|v| v * factor),
        }
    }
}

/// numpy-linear percentile `q` (0..=100) of `sorted` (ascending); `None` when empty.
pub fn percentile_of_sorted(sorted: &[f64], q: f64) -> Option<f64> {
    (!sorted.is_empty()).then(|| linear_percentile(q, sorted.len() as u64, |k| sorted[k as usize]))
}

/// Collects the exact values of one metric.
#[derive(Clone, Debug, Default)]
pub struct StatAcc {
    values: Vec<f64>,
    /// Copies of each entry of `values`, same order; `None` while every value was recorded
    /// once.
    repeats: Option<Vec<u64>>,
    /// Number of values, repeats included.
    count: u64,
    /// Negative values are kept (a signed difference) instead of ignored.
    signed: bool,
}

impl StatAcc {
    /// An accumulator for a metric that is never negative: negative values are ignored.
    pub fn new() -> Self {
        StatAcc::default()
    }

    /// An accumulator that keeps negative values too.
    pub fn signed() -> Self {
        StatAcc {
            signed: true,
            ..StatAcc::default()
        }
    }

    /// Records one value. Non-finite values, and negative ones unless [`StatAcc::signed`],
    /// are ignored (no metric produces them).
    pub fn record(&mut self, value: f64) {
        self.record_n(value, 1);
    }

    /// Records `n` copies of `value` in one entry.
    pub fn record_n(&mut self, value: f64, n: u64) {
        if n == 0 || !value.is_finite() || (value < 0.0 && !self.signed) {
            return;
        }
        if n > 1 && self.repeats.is_none() {
            self.repeats = Some(vec![1; self.values.len()]);
        }
        self.values.push(value);
        if let Some(r) = &mut self.repeats {
            r.push(n);
        }
        self.count += n;
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    /// The summary, or `None` when nothing was recorded.
    pub fn stats(&self) -> Option<Stats> {
        if self.count == 0 {
            return None;
        }
        let n = self.count;
        let Some(repeats) = &self.repeats else {
            let sum: f64 = self.values.iter().sum();
            let avg = sum / n as f64;
            let sq: f64 = self.values.iter().map(|v| (v - avg) * (v - avg)).sum();
            let mut sorted = self.values.clone();
            sorted.sort_unstable_by(f64::total_cmp);
            let percentiles =
                PERCENTILES.map(|p| linear_percentile(p as f64, n, |k| sorted[k as usize]));
            return Some(Stats {
                count: n,
                avg,
                min: sorted[0],
                max: sorted[sorted.len() - 1],
                std: (sq / n as f64).sqrt(),
                percentiles,
            });
        };
        let pairs = || self.values.iter().copied().zip(repeats.iter().copied());
        let sum: f64 = pairs().map(|(v, r)| v * r as f64).sum();
        let avg = sum / n as f64;
        let sq: f64 = pairs().map(|(v, r)| (v - avg) * (v - avg) * r as f64).sum();
        let mut sorted: Vec<(f64, u64)> = pairs().collect();
        sorted.sort_unstable_by(|a, b| a.0.total_cmp(&b.0));
        // ends[i]: number of values up to and including entry i.
        let ends: Vec<u64> = sorted
            .iter()
            .scan(0u64, |acc, &(_, r)| {
                *acc += r;
                Some(*acc)
            })
            .collect();
        let at = |k: u64| sorted[ends.partition_point(|&e| e <= k)].0;
        let percentiles = PERCENTILES.map(|p| linear_percentile(p as f64, n, at));
        Some(Stats {
            count: n,
            avg,
            min: sorted[0].0,
            max: sorted[sorted.len() - 1].0,
            std: (sq / n as f64).sqrt(),
            percentiles,
        })
    }
}

impl StatAcc {
    /// The error-adjusted view of these values with `failed` failed requests added as +inf
    /// ([`Adjusted`]); `None` when nothing was recorded (AIPerf writes no `adj_<tag>` for a
    /// metric without values) or when nothing failed.
    pub fn adjusted(&self, failed: u64) -> Option<Adjusted> {
        if self.count == 0 || failed == 0 {
            return None;
        }
        let mut sorted: Vec<(f64, u64)> = match &self.repeats {
            Some(r) => self.values.iter().copied().zip(r.iter().copied()).collect(),
            None => self.values.iter().map(|&v| (v, 1)).collect(),
        };
        sorted.sort_unstable_by(|a, b| a.0.total_cmp(&b.0));
        let ends: Vec<u64> = sorted
            .iter()
            .scan(0u64, |acc, &(_, r)| {
                *acc += r;
                Some(*acc)
            })
            .collect();
        let ok = self.count;
        let at = |k: u64| {
            if k >= ok {
                f64::INFINITY
            } else {
                sorted[ends.partition_point(|&e| e <= k)].0
            }
        };
        let n = ok + failed;
        Some(Adjusted {
            count: n,
            min: sorted[0].0,
            percentiles: PERCENTILES.map(|p| nearest_percentile(p as f64, n, at)),
        })
    }
}

/// Collects the values of a metric that can be negative (a signed difference).
#[derive(Clone, Debug)]
pub struct SignedAcc(StatAcc);

impl Default for SignedAcc {
    fn default() -> Self {
        SignedAcc(StatAcc::signed())
    }
}

impl SignedAcc {
    pub fn new() -> Self {
        SignedAcc::default()
    }

    /// Records one value; non-finite values are ignored.
    pub fn record(&mut self, value: f64) {
        self.0.record(value);
    }

    /// The summary, or `None` when nothing was recorded.
    pub fn stats(&self) -> Option<Stats> {
        self.0.stats()
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

/// Significant decimal digits the live histogram keeps.
const LIVE_SIGNIFICANT_DIGITS: u8 = 3;

/// A fixed-memory median of non-negative integer-valued samples (ns) for the live progress
/// line, which reads it while the run goes on: nearest rank from an HDR histogram, within
/// 0.1 % of the exact sample. The reports never use it.
pub struct LiveAcc {
    hist: Histogram<u64>,
}

impl LiveAcc {
    pub fn new() -> Self {
        LiveAcc {
            // Only a precision above 5 digits is refused.
            hist: Histogram::new(LIVE_SIGNIFICANT_DIGITS).expect("3 significant digits is valid"),
        }
    }

    /// Records one value; negative and non-finite values are ignored.
    pub fn record(&mut self, value: f64) {
        if !value.is_finite() || value < 0.0 {
            return;
        }
        // `as` saturates; a value past the histogram's ceiling is clamped.
        let v = value.round() as u64;
        if self.hist.record(v).is_err() {
            self.hist.saturating_record(v);
        }
    }

    /// The nearest-rank median, or `None` before any value.
    pub fn p50(&self) -> Option<f64> {
        (!self.hist.is_empty()).then(|| self.hist.value_at_percentile(50.0) as f64)
    }
}

impl Default for LiveAcc {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
#[path = "stats_tests.rs"]
mod tests;
