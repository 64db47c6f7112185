//! Tests of the exact LLM metric statistics against numpy's `percentile` (default linear
//! method), `mean` and `std` (ddof 0) on the same inputs.

use super::*;

/// xorshift64*: a small deterministic generator so the tests need no crate.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 * a.abs().max(b.abs()).max(1.0)
}

fn assert_percentiles(s: &Stats, want: [f64; 9]) {
    for (i, p) in PERCENTILES.iter().enumerate() {
        assert!(
            close(s.percentiles[i], want[i]),
            "p{p}: got {} want {}",
            s.percentiles[i],
            want[i]
        );
    }
}

/// Linear interpolation written out with exact rational steps, for comparison.
fn by_hand(sorted: &[f64], p: u32) -> f64 {
    let n = sorted.len();
    // rank = p · (n − 1) / 100, split into whole and fractional parts without rounding.
    let num = p as usize * (n - 1);
    let lo = num / 100;
    let frac = (num % 100) as f64 / 100.0;
    let hi = (lo + 1).min(n - 1);
    sorted[lo] + frac * (sorted[hi] - sorted[lo])
}

#[test]
fn empty_accumulator_has_no_stats() {
    assert_eq!(StatAcc::new().stats(), None);
    assert_eq!(SignedAcc::new().stats(), None);
    assert_eq!(stats_of(&[]), None);
    assert_eq!(percentile_of_sorted(&[], 50.0), None);
}

/// numpy: np.percentile([1, 2, 3, 4], [1, 5, 10, 25, 50, 75, 90, 95, 99]).
#[test]
fn four_values_interpolate_like_numpy() {
    let s = stats_of(&[4.0, 1.0, 3.0, 2.0]).unwrap();
    assert_percentiles(&s, [1.03, 1.15, 1.3, 1.75, 2.5, 3.25, 3.7, 3.85, 3.97]);
    assert_eq!(s.p(25), Some(1.75));
    assert_eq!(s.p(50), Some(2.5));
    assert_eq!(s.p(42), None);
    assert_eq!((s.min, s.max, s.avg), (1.0, 4.0, 2.5));
}

/// numpy: np.percentile(np.arange(1, 201), ...): p99 = 198.01, p50 = 100.5.
#[test]
fn one_to_two_hundred_like_numpy() {
    let values: Vec<f64> = (1..=200).map(f64::from).collect();
    let s = stats_of(&values).unwrap();
    assert_percentiles(
        &s,
        [
            2.99, 10.95, 20.9, 50.75, 100.5, 150.25, 180.1, 190.05, 198.01,
        ],
    );
    for p in PERCENTILES {
        assert!(close(s.p(p).unwrap(), by_hand(&values, p)), "p{p}");
    }
}

/// Population std (ddof 0): [2, 4, 4, 4, 5, 5, 7, 9] has mean 5 and std 2.
#[test]
fn exact_moments_on_small_input() {
    let s = stats_of(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]).unwrap();
    assert_eq!(s.count, 8);
    assert_eq!(s.avg, 5.0);
    assert_eq!(s.std, 2.0);
    assert_eq!((s.min, s.max), (2.0, 9.0));
    // rank 3.5 lies between the 4th and 5th smallest (4 and 5).
    assert_eq!(s.p(50), Some(4.5));
}

#[test]
fn one_value_is_every_percentile() {
    let s = stats_of(&[42.0]).unwrap();
    assert_eq!(s.percentiles, [42.0; 9]);
    assert_eq!((s.std, s.avg), (0.0, 42.0));
}

/// numpy on [0.5, -3.25, 7, 7, 1e9, 12.125, 0]: percentiles, mean 142857146.19642857 and
/// std 349927104.7486249.
#[test]
fn signed_values_keep_their_sign() {
    let mut a = SignedAcc::new();
    for v in [0.5, -3.25, 7.0, 7.0, 1e9, 12.125, 0.0, f64::NAN] {
        a.record(v);
    }
    let s = a.stats().unwrap();
    assert_eq!(s.count, 7);
    assert_percentiles(
        &s,
        [
            -3.055,
            -2.275,
            -1.3,
            0.25,
            7.0,
            9.5625,
            400000007.27500033,
            700000003.6374993,
            940000000.7274995,
        ],
    );
    assert!(close(s.avg, 142857146.19642857));
    assert!(close(s.std, 349927104.7486249));
    assert_eq!((s.min, s.max), (-3.25, 1e9));
}

#[test]
fn bad_values_are_ignored() {
    let mut a = StatAcc::new();
    a.record(f64::NAN);
    a.record(-1.0);
    a.record(f64::INFINITY);
    a.record_n(5.0, 0);
    assert_eq!(a.count(), 0);
    assert_eq!(a.stats(), None);
}

/// Fractional values (tokens/s) are kept as they are, not rounded.
#[test]
fn fractional_values_are_exact() {
    let s = stats_of(&[55.61, 55.67, 55.71]).unwrap();
    assert_eq!(s.p(50), Some(55.67));
    assert!(close(s.p(99).unwrap(), 55.67 + 0.98 * (55.71 - 55.67)));
}

/// `record_n` (one entry, a repeat count) gives the statistics of the expanded list, also
/// when mixed with single values and when runs straddle the interpolation ranks.
#[test]
fn record_n_equals_the_expanded_values() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for round in 0..50 {
        let mut a = StatAcc::new();
        let mut expanded = Vec::new();
        let entries = 1 + rng.next() % 40;
        for _ in 0..entries {
            let v = (rng.next() % 1000) as f64 * 0.25;
            let n = if rng.next() % 3 == 0 {
                1
            } else {
                1 + rng.next() % 7
            };
            a.record_n(v, n);
            expanded.extend(std::iter::repeat_n(v, n as usize));
        }
        let got = a.stats().unwrap();
        let want = stats_of(&expanded).unwrap();
        assert_eq!(got.count, want.count, "round {round}");
        assert_eq!((got.min, got.max), (want.min, want.max), "round {round}");
        assert!(close(got.avg, want.avg), "round {round}");
        assert!(close(got.std, want.std), "round {round}");
        for (g, w) in got.percentiles.iter().zip(want.percentiles) {
            assert!(close(*g, w), "round {round}: {got:?} {want:?}");
        }
    }
}

/// Random inputs of every size up to 500, in ns from microseconds to minutes, against the
/// interpolation written out by hand and two-pass moments.
#[test]
fn random_inputs_match_the_definition() {
    let mut rng = Rng(0xD1B5_4A32_D192_ED03);
    for round in 0..200 {
        let n = 1 + (rng.next() % 500) as usize;
        let values: Vec<f64> = (0..n)
            .map(|_| {
                let exp = 3.0 + (rng.next() % 8_000_000) as f64 / 1_000_000.0;
                10f64.powf(exp).round()
            })
            .collect();
        let s = stats_of(&values).unwrap();
        let mut sorted = values.clone();
        sorted.sort_by(f64::total_cmp);
        for (i, p) in PERCENTILES.iter().enumerate() {
            let want = by_hand(&sorted, *p);
            assert!(
                close(s.percentiles[i], want),
                "round {round} n {n} p{p}: {} vs {want}",
                s.percentiles[i]
            );
            assert_eq!(
                percentile_of_sorted(&sorted, *p as f64),
                Some(s.percentiles[i])
            );
        }
        let mean = values.iter().sum::<f64>() / n as f64;
        let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n as f64;
        assert!(close(s.avg, mean));
        assert!(close(s.std, var.sqrt()));
    }
}

#[test]
fn live_median_is_within_a_thousandth() {
    let mut live = LiveAcc::new();
    assert_eq!(live.p50(), None);
    for v in 1..=1001u32 {
        live.record(f64::from(v) * 1000.0);
    }
    live.record(-5.0);
    let p50 = live.p50().unwrap();
    assert!((501_000.0..=501_000.0 * 1.001).contains(&p50), "{p50}");
}

/// numpy 2.4 `np.percentile(..., method="nearest")`: ranks rounded half to even.
#[test]
fn nearest_percentile_rounds_half_to_even_like_numpy() {
    let at = |v: &'static [f64]| move |k: u64| v[k as usize];
    // np.percentile([0, 1, 2, 3], 50, method="nearest") == 2.0 (rank 1.5 -> 2).
    assert_eq!(nearest_percentile(50.0, 4, at(&[0.0, 1.0, 2.0, 3.0])), 2.0);
    // np.percentile(np.arange(6.), [50, 10], method="nearest") == [2.0, 0.0] (2.5 -> 2, 0.5 -> 0).
    let six: &[f64] = &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0];
    assert_eq!(nearest_percentile(50.0, 6, at(six)), 2.0);
    assert_eq!(nearest_percentile(10.0, 6, at(six)), 0.0);
}

/// Eight values and four failures: numpy gives [1, 2, 2, 4, 7, inf, inf, inf, inf] for
/// np.percentile([1..8] + [inf] * 4, PERCENTILES, method="nearest").
#[test]
fn adjusted_adds_one_infinity_per_failure() {
    let mut acc = StatAcc::new();
    for v in [8.0, 3.0, 1.0, 5.0, 2.0, 7.0, 4.0, 6.0] {
        acc.record(v);
    }
    let a = acc.adjusted(4).unwrap();
    assert_eq!(a.count, 12);
    assert_eq!(a.min, 1.0);
    let inf = f64::INFINITY;
    assert_eq!(a.percentiles, [1.0, 2.0, 2.0, 4.0, 7.0, inf, inf, inf, inf]);
    assert_eq!(acc.adjusted(0), None);
    assert_eq!(StatAcc::new().adjusted(4), None);
}
