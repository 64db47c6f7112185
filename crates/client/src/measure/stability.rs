//! perf_analyzer's stability rule: a point is done when its last 3 windows agree
//! within ±s on throughput and on the stabilizing latency.

use super::stats::WindowStats;

/// How many trailing windows must agree (hard-coded 3 in perf_analyzer).
pub const STABILITY_WINDOW: usize = 3;

/// What the stability rule keeps from each window.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Trial {
    /// Inferences per second.
    pub throughput: f64,
    /// Stabilizing latency (ns): mean or `--percentile`.
    pub latency_ns: u64,
}

impl Trial {
    /// The entry for a window that failed (no valid requests): never stable, always over a
    /// latency threshold.
    pub fn failed() -> Trial {
        Trial {
            throughput: 0.0,
            latency_ns: u64::MAX,
        }
    }

    pub fn from_window(w: &WindowStats, batch: u64, percentile: Option<u32>) -> Trial {
        Trial {
            throughput: w.throughput(batch),
            latency_ns: w.stabilizing_latency_ns(percentile),
        }
    }
}

/// The last `STABILITY_WINDOW` trials, or `None` while there are fewer.
fn last_window(trials: &[Trial]) -> Option<&[Trial]> {
    trials
        .len()
        .checked_sub(STABILITY_WINDOW)
        .map(|start| &trials[start..])
}

/// max/min of the values is within `1 + threshold`. A zero minimum is only stable when all
/// values are zero (perf_analyzer divides and gets inf or NaN there, i.e. unstable; all-zero
/// latencies cannot happen with real requests).
fn within_ratio(values: impl Iterator<Item = f64> + Clone, threshold: f64) -> bool {
    let max = values.clone().fold(f64::MIN, f64::max);
    let min = values.fold(f64::MAX, f64::min);
    if min <= 0.0 {
        return max <= 0.0;
    }
    max / min <= 1.0 + threshold
}

/// Throughput-only check over the last 3 trials: none is zero and max/min <= 1 + threshold.
/// Async mode accepts a point on this alone after max trials (with a warning).
pub fn throughput_stable(trials: &[Trial], threshold: f64) -> bool {
    let Some(last) = last_window(trials) else {
        return false;
    };
    last.iter().all(|t| t.throughput > 0.0)
        && within_ratio(last.iter().map(|t| t.throughput), threshold)
}

/// Stable: at least 3 trials, and over the last 3 both throughput and latency agree within
/// `threshold` (a fraction: `-s 10` is 0.10).
pub fn is_stable(trials: &[Trial], threshold: f64) -> bool {
    throughput_stable(trials, threshold)
        && last_window(trials)
            .is_some_and(|last| within_ratio(last.iter().map(|t| t.latency_ns as f64), threshold))
}

/// Early stop: a latency threshold is set (ms, 0 = none) and any of the last 3 trials has a
/// latency at or above it. Like perf_analyzer, this is only judged once 3 trials exist.
pub fn over_latency_threshold(trials: &[Trial], threshold_ms: u64) -> bool {
    if threshold_ms == 0 {
        return false;
    }
    let limit_ns = threshold_ms.saturating_mul(1_000_000);
    last_window(trials).is_some_and(|last| last.iter().any(|t| t.latency_ns >= limit_ns))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(throughput: f64, latency_ns: u64) -> Trial {
        Trial {
            throughput,
            latency_ns,
        }
    }

    #[test]
    fn stability_table() {
        let cases: &[(&str, Vec<Trial>, bool, bool)] = &[
            // name, trials, is_stable, throughput_stable (threshold 0.10)
            ("too few", vec![t(100.0, 10), t(100.0, 10)], false, false),
            ("identical", vec![t(100.0, 10); 3], true, true),
            (
                "edge 10%",
                vec![t(100.0, 100), t(110.0, 110), t(105.0, 105)],
                true,
                true,
            ),
            (
                "tput 11%",
                vec![t(100.0, 100), t(111.0, 100), t(105.0, 100)],
                false,
                false,
            ),
            (
                "latency 11%",
                vec![t(100.0, 100), t(100.0, 111), t(100.0, 105)],
                false,
                true,
            ),
            (
                "zero tput",
                vec![t(0.0, 10), t(0.0, 10), t(0.0, 10)],
                false,
                false,
            ),
            (
                "failed window",
                vec![t(100.0, 10), Trial::failed(), t(100.0, 10)],
                false,
                false,
            ),
            (
                "only last 3 count",
                vec![t(1.0, 1), t(100.0, 10), t(100.0, 10), t(100.0, 10)],
                true,
                true,
            ),
            (
                "old failure forgotten",
                vec![Trial::failed(), t(50.0, 20), t(52.0, 21), t(51.0, 20)],
                true,
                true,
            ),
        ];
        for (name, trials, stable, tput) in cases {
            assert_eq!(is_stable(trials, 0.10), *stable, "is_stable: {name}");
            assert_eq!(
                throughput_stable(trials, 0.10),
                *tput,
                "throughput_stable: {name}"
            );
        }
    }

    #[test]
    fn threshold_zero_needs_exact_match() {
        assert!(is_stable(&[t(5.0, 7); 3], 0.0));
        assert!(!is_stable(&[t(5.0, 7), t(5.0, 7), t(5.0, 8)], 0.0));
    }

    #[test]
    fn latency_threshold() {
        let ms = 1_000_000;
        let under = vec![t(1.0, 4 * ms), t(1.0, 4 * ms), t(1.0, 4 * ms)];
        assert!(!over_latency_threshold(&under, 5));
        let mut one_over = under.clone();
        one_over[1] = t(1.0, 5 * ms); // ">=" counts
        assert!(over_latency_threshold(&one_over, 5));
        assert!(!over_latency_threshold(&one_over, 0)); // 0 = no limit
        assert!(!over_latency_threshold(&[t(1.0, 9 * ms)], 5)); // fewer than 3 windows
        assert!(over_latency_threshold(&[Trial::failed(); 3], u64::MAX));
        let old_over = vec![t(1.0, 9 * ms), t(1.0, ms), t(1.0, ms), t(1.0, ms)];
        assert!(!over_latency_threshold(&old_over, 5));
    }

    #[test]
    fn trial_from_window() {
        let w = WindowStats {
            duration_ns: 2_000_000_000,
            request_count: 10,
            latency: crate::measure::Dist::of([1_000, 2_000, 3_000]),
            ..WindowStats::default()
        };
        assert_eq!(Trial::from_window(&w, 2, None), t(10.0, 2_000));
        assert_eq!(Trial::from_window(&w, 1, Some(99)).latency_ns, 3_000);
    }
}
