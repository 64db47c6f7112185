use super::*;
use crate::measure::record::{RequestRecord, WindowRecords};
use crate::measure::stats::{add_records, percentile_set, WindowStats};

/// The exact path the histogram replaces: every sample kept and sorted.
mod exact {
    pub fn percentile_ns(sorted: &[u64], p: u32) -> u64 {
        if sorted.is_empty() {
            return 0;
        }
        let last = sorted.len() - 1;
        let idx = (f64::from(p) / 100.0 * last as f64 + 0.5) as usize;
        sorted[idx.min(last)]
    }

    pub fn mean_ns(sorted: &[u64]) -> u64 {
        if sorted.is_empty() {
            return 0;
        }
        let total: u128 = sorted.iter().map(|&l| u128::from(l)).sum();
        (total / sorted.len() as u128) as u64
    }

    pub fn std_dev_us(samples: &[u64]) -> u64 {
        if samples.len() < 2 {
            return 0;
        }
        let n = samples.len() as f64;
        let mean = samples.iter().map(|&l| l as f64).sum::<f64>() / n;
        let sq_sum: f64 = samples.iter().map(|&l| (l as f64 - mean).powi(2)).sum();
        ((sq_sum / (n - 1.0)).sqrt() / 1000.0) as u64
    }
}

/// splitmix64: a fixed seed gives the same samples on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in (0, 1].
    fn unit(&mut self) -> f64 {
        ((self.next() >> 11) + 1) as f64 / (1u64 << 53) as f64
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

type Draw = fn(&mut Rng) -> u64;

/// Latency distributions (ns), several of them reaching past the linear range (65.5 ms).
fn distributions() -> Vec<(&'static str, Draw)> {
    vec![
        ("uniform 10 us - 5 ms", |r| 10_000 + r.below(4_990_000)),
        ("exponential, mean 300 us", |r| {
            (-r.unit().ln() * 300_000.0) as u64
        }),
        ("log-normal 100 us - seconds", |r| {
            let g: f64 = (0..12).map(|_| r.unit()).sum::<f64>() - 6.0;
            (1e6 * (g * 2.0).exp()) as u64
        }),
        ("bimodal 80 us / 120 ms", |r| {
            if r.below(10) < 8 {
                80_000 + r.below(20_000)
            } else {
                120_000_000 + r.below(40_000_000)
            }
        }),
        ("uniform 0 - 10 s", |r| r.below(10_000_000_000)),
        ("near the linear edge", |r| 65_000_000 + r.below(1_200_000)),
    ]
}

/// The printed figures of both paths agree: identical in whole µs below the linear range,
/// within 1/2048 above it; count, mean, std, min and max identical.
fn assert_same_figures(name: &str, samples: &[u64]) {
    let d = Dist::of(samples.iter().copied());
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    let n = sorted.len();
    assert_eq!(d.count(), n as u64, "{name}");
    assert_eq!(d.mean_ns(), exact::mean_ns(&sorted), "{name}: mean");
    assert_eq!(d.std_dev_us(), exact::std_dev_us(&sorted), "{name}: std");
    assert_eq!(d.min_ns(), sorted.first().copied().unwrap_or(0), "{name}");
    assert_eq!(d.max_ns(), sorted.last().copied().unwrap_or(0), "{name}");
    let mut ps: Vec<u32> = (0..=100).collect();
    ps.extend(percentile_set(Some(75)));
    for p in ps {
        let want_us = exact::percentile_ns(&sorted, p) / 1000;
        let got_us = d.percentile_ns(p) / 1000;
        if want_us < LINEAR_US {
            assert_eq!(got_us, want_us, "{name} (n {n}): p{p}");
        } else {
            let err = got_us.abs_diff(want_us);
            assert!(
                u128::from(err) * 2048 <= u128::from(want_us),
                "{name} (n {n}): p{p} {got_us} us vs exact {want_us} us"
            );
        }
    }
}

#[test]
fn histogram_prints_the_exact_percentiles() {
    let mut rng = Rng(21);
    for (name, draw) in distributions() {
        for n in [1, 2, 3, 10, 1_000, 200_000] {
            let samples: Vec<u64> = (0..n).map(|_| draw(&mut rng)).collect();
            assert_same_figures(name, &samples);
        }
    }
}

#[test]
fn above_the_linear_range_the_error_is_bounded() {
    // One sample per power of two and a few between: each percentile's bucket middle is
    // within 1/2048 of the sample, and a lone sample comes back exactly (min = max).
    for e in 16..=54u32 {
        let us = (1u64 << e) + (1u64 << e) / 3;
        let ns = us.saturating_mul(1000);
        assert_eq!(Dist::of([ns]).percentile_ns(50), ns);
        let d = Dist::of([ns, ns, 1]);
        let got = d.percentile_ns(100) / 1000;
        assert!(u128::from(got.abs_diff(ns / 1000)) * 2048 <= u128::from(ns / 1000));
    }
}

#[test]
fn nearest_rank_percentiles() {
    let ten: Vec<u64> = (1..=10).map(|v| v * 1000).collect();
    // idx = floor(p/100 * 9 + 0.5)
    let cases: &[(&[u64], u32, u64)] = &[
        (&ten, 50, 6_000),
        (&ten, 90, 9_000),
        (&ten, 95, 10_000),
        (&ten, 99, 10_000),
        (&ten, 1, 1_000),
        (&ten, 5, 1_000),
        (&ten, 6, 2_000),
        (&[7_000], 50, 7_000),
        (&[], 50, 0),
    ];
    for (data, p, want) in cases {
        let d = Dist::of(data.iter().copied());
        assert_eq!(d.percentile_ns(*p), *want, "p{p} of {data:?}");
    }
    // Within a microsecond the bucket's start is reported, kept inside [min, max].
    assert_eq!(Dist::of([1_500, 1_700, 2_900]).percentile_ns(50), 1_500);
    assert_eq!(Dist::of([1_500, 1_700, 2_900]).percentile_ns(99), 2_000);
}

#[test]
fn std_dev_is_sample_std_truncated() {
    // 2,4,4,4,5,5,7,9 ms: sample variance 32/7 ms^2, std 2.138 ms.
    let ms = [2u64, 4, 4, 4, 5, 5, 7, 9].map(|v| v * 1_000_000);
    assert_eq!(Dist::of(ms).std_dev_us(), 2138);
    assert_eq!(Dist::of([5_000]).std_dev_us(), 0);
    assert_eq!(Dist::default().std_dev_us(), 0);
    assert_eq!(Dist::of([u64::MAX, u64::MAX]).mean_ns(), u64::MAX);
}

#[test]
fn times_near_the_top_of_u64_stay_within_the_bound() {
    let mut rng = Rng(5);
    let samples: Vec<u64> = (0..1_000).map(|_| u64::MAX - rng.below(1 << 62)).collect();
    let d = Dist::of(samples.iter().copied());
    let mut sorted = samples.clone();
    sorted.sort_unstable();
    assert_eq!(d.mean_ns(), exact::mean_ns(&sorted));
    for p in [0, 50, 99, 100] {
        let (got, want) = (
            d.percentile_ns(p) / 1000,
            exact::percentile_ns(&sorted, p) / 1000,
        );
        assert!(
            u128::from(got.abs_diff(want)) * 2048 <= u128::from(want),
            "p{p}"
        );
    }
    // Squares past 2^128 saturate: the deviation is then a floating-point estimate, and
    // computing it must not panic.
    let _ = Dist::of([u64::MAX, u64::MAX, 0]).std_dev_us();
}

#[test]
fn merging_equals_adding_every_time() {
    let mut rng = Rng(7);
    let parts: Vec<Vec<u64>> = (0..3)
        .map(|k| (0..5_000).map(|_| rng.below(200_000_000 >> k)).collect())
        .collect();
    let mut merged = Dist::default();
    parts
        .iter()
        .for_each(|p| merged.merge(&Dist::of(p.iter().copied())));
    assert_eq!(merged, Dist::of(parts.concat()));
    merged.merge(&Dist::default());
    assert_eq!(merged.count(), 15_000);
}

#[test]
fn parts_round_trip_and_bad_parts_are_refused() {
    let d = Dist::of([5, 70_000, 9_000_000_000, 70_000]);
    let buckets: Vec<(u64, u64)> = d.buckets().collect();
    assert_eq!(buckets.len(), 3);
    assert_eq!(Dist::from_parts(d.totals(), &buckets), Some(d.clone()));
    let (count, sum, sq, min, max) = d.totals();
    assert_eq!(
        Dist::from_parts((count + 1, sum, sq, min, max), &buckets),
        None
    );
    assert_eq!(Dist::from_parts(d.totals(), &[(BUCKETS as u64, 4)]), None);
    assert_eq!(Dist::from_parts((count, sum, sq, max, min), &buckets), None);
    assert_eq!(
        Dist::from_parts((0, 0, 0, 0, 0), &[]),
        Some(Dist::default())
    );
}

/// A window folded from millions of records holds the same heap as one folded from a few
/// thousand: memory follows the spread of the times, never their count.
#[test]
fn window_memory_does_not_grow_with_its_count() {
    let mut rng = Rng(3);
    let mut batch = WindowRecords::default();
    let mut w = WindowStats::default();
    let mut heap_after = Vec::new();
    for round in 0..400u64 {
        batch.records.clear();
        for i in 0..10_000u64 {
            let start = round * 1_000_000_000 + i * 1_000;
            let latency = 20_000 + rng.below(30_000_000);
            batch.records.push(RequestRecord {
                intended_ns: start - rng.below(2_000_000),
                start_ns: start,
                send_end_ns: start + 1_000,
                recv_start_ns: start + latency / 2,
                end_ns: start + latency,
                ok: true,
                responses: 1,
                ..RequestRecord::default()
            });
        }
        add_records(&mut w, &batch);
        if round == 9 || round == 399 {
            heap_after.push(w.heap_bytes());
        }
    }
    assert_eq!(w.request_count, 4_000_000);
    assert_eq!(w.lag.count(), 4_000_000);
    assert_eq!(
        heap_after[0], heap_after[1],
        "heap after 100k vs 4M records"
    );
    assert!(w.heap_bytes() <= 3 * MAX_HEAP_BYTES);
    // Latencies up to 30 ms touch 30 of the 1,024-µs chunks, not one per request.
    assert!(
        w.latency.heap_bytes() < 40 * 8 * 1024,
        "{}",
        w.latency.heap_bytes()
    );
}
