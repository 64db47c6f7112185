use super::*;

/// The first `n` offsets (ns) a worker would send at.
fn take(w: &mut WorkerSchedule, n: usize) -> Vec<u64> {
    let mut out = Vec::new();
    while out.len() < n {
        let Some(t) = w.peek() else { break };
        out.push(t);
        w.advance();
    }
    out
}

#[test]
fn constant_rate_matches_perf_analyzers_example() {
    // Rate 10 over 4 workers: worker k sends at 0.1(k+1) + 0.4n seconds.
    let mut ws = deal(&Schedule::Constant { rate: 10.0 }, 4);
    let ms = 1_000_000;
    let cases = [
        (0, vec![100 * ms, 500 * ms, 900 * ms]),
        (1, vec![200 * ms, 600 * ms, 1000 * ms]),
        (3, vec![400 * ms, 800 * ms, 1200 * ms]),
    ];
    for (k, want) in cases {
        assert_eq!(take(&mut ws[k], 3), want, "worker {k}");
    }
}

#[test]
fn one_worker_constant_rate_is_evenly_spaced() {
    let mut ws = deal(&Schedule::Constant { rate: 2000.0 }, 1);
    let got = take(&mut ws[0], 5);
    assert_eq!(
        got,
        vec![500_000, 1_000_000, 1_500_000, 2_000_000, 2_500_000]
    );
}

#[test]
fn intervals_follow_the_documented_example() {
    // 100 ms, 200 ms, 500 ms with one worker: 0.1, 0.3, 0.8, then 0.9, 1.1, 1.6 s.
    let ms = 1_000_000;
    let gaps = vec![100 * ms, 200 * ms, 500 * ms];
    let mut ws = deal(&Schedule::Intervals(gaps.clone()), 1);
    let want: Vec<u64> = [100, 300, 800, 900, 1100, 1600]
        .iter()
        .map(|v| v * ms)
        .collect();
    assert_eq!(take(&mut ws[0], 6), want);
    // Two workers: the three gaps are looped twice so both workers' lists wrap together.
    let ws = deal(&Schedule::Intervals(gaps), 2);
    let mut a = ws[0].clone();
    let mut b = ws[1].clone();
    assert_eq!(take(&mut a, 3), vec![100 * ms, 800 * ms, 1100 * ms]);
    assert_eq!(take(&mut b, 3), vec![300 * ms, 900 * ms, 1600 * ms]);
    assert!((nominal_rate(&Schedule::Intervals(vec![ms; 4])) - 1000.0).abs() < 1e-9);
}

#[test]
fn fixed_schedule_sends_each_entry_once() {
    let mut ws = deal(&Schedule::Fixed(vec![30, 10, 20, 40, 50]), 2);
    assert_eq!(ws[0].remaining(), Some(3));
    assert_eq!(take(&mut ws[0], 10), vec![10, 30, 50]);
    assert_eq!(take(&mut ws[1], 10), vec![20, 40]);
    assert_eq!(ws[0].peek(), None);
    assert_eq!(ws[0].remaining(), Some(0));
    // More workers than entries: the extra ones never send.
    let mut ws = deal(&Schedule::Fixed(vec![5]), 3);
    assert_eq!(take(&mut ws[2], 3), Vec::<u64>::new());
}

#[test]
fn poisson_schedule_has_the_right_mean_and_dispersion() {
    let rate = 2000.0;
    let schedule = Schedule::Poisson {
        rate,
        seed: 42,
        horizon_ns: 20_000_000_000,
    };
    let mut w = deal(&schedule, 1).remove(0);
    let times = take(&mut w, 40_000);
    let gaps: Vec<f64> = times.windows(2).map(|p| (p[1] - p[0]) as f64).collect();
    let n = gaps.len() as f64;
    let mean = gaps.iter().sum::<f64>() / n;
    let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / (n - 1.0);
    // Exponential gaps: mean 1/rate, coefficient of variation 1.
    let want = 1e9 / rate;
    assert!((mean / want - 1.0).abs() < 0.02, "mean gap {mean} ns");
    let cv = var.sqrt() / mean;
    assert!((cv - 1.0).abs() < 0.03, "coefficient of variation {cv}");
    // Counts per 10 ms bin: Poisson, so variance / mean close to 1 (constant would be 0).
    let bins = 2_000;
    let mut counts = vec![0f64; bins];
    for t in &times {
        let b = (*t / 10_000_000) as usize;
        if b < bins {
            counts[b] += 1.0;
        }
    }
    let cm = counts.iter().sum::<f64>() / bins as f64;
    let cvar = counts.iter().map(|c| (c - cm).powi(2)).sum::<f64>() / (bins as f64 - 1.0);
    assert!((cvar / cm - 1.0).abs() < 0.1, "dispersion {}", cvar / cm);
}

#[test]
fn poisson_is_repeatable_by_seed_and_differs_between_seeds() {
    let s = |seed| Schedule::Poisson {
        rate: 100.0,
        seed,
        horizon_ns: 1_000_000_000,
    };
    let a = take(&mut deal(&s(7), 1).remove(0), 50);
    let b = take(&mut deal(&s(7), 1).remove(0), 50);
    let c = take(&mut deal(&s(8), 1).remove(0), 50);
    assert_eq!(a, b);
    assert_ne!(a, c);
}

#[test]
fn poisson_repeats_after_the_horizon() {
    let mut w = deal(
        &Schedule::Poisson {
            rate: 1000.0,
            seed: 3,
            horizon_ns: 10_000_000,
        },
        1,
    )
    .remove(0);
    let times = take(&mut w, 200);
    assert!(times.windows(2).all(|p| p[1] > p[0]), "strictly increasing");
    assert!(
        *times.last().unwrap() > 100_000_000,
        "keeps going past the horizon"
    );
}

#[test]
fn lanes_get_every_nth_send_whatever_the_worker_split() {
    // Worker w owns lanes w, w + workers, ... and deals its own sends to them in turn (as
    // the sequence feed does); merged by time, the lanes must come round robin, across the
    // repeat of the schedule too.
    let schedules = [
        Schedule::Constant { rate: 1000.0 },
        Schedule::Poisson {
            rate: 1000.0,
            seed: 5,
            horizon_ns: 20_000_000,
        },
        Schedule::Intervals(vec![100, 300, 200]),
        Schedule::Fixed((1..=40).map(|i| i * 10).collect()),
    ];
    for (workers, lanes) in [(1, 4), (2, 4), (2, 5), (3, 7), (4, 4)] {
        for s in &schedules {
            let ws = deal_lanes(s, workers, lanes);
            let mut sends: Vec<(u64, usize)> = Vec::new();
            for (w, mut sched) in ws.into_iter().enumerate() {
                let own: Vec<usize> = (w..lanes).step_by(workers).collect();
                for (k, t) in take(&mut sched, 200).into_iter().enumerate() {
                    sends.push((t, own[k % own.len()]));
                }
            }
            sends.sort_unstable();
            let n = sends.len().min(200);
            let got: Vec<usize> = sends[..n].iter().map(|&(_, lane)| lane).collect();
            let want: Vec<usize> = (0..n).map(|i| i % lanes).collect();
            assert_eq!(got, want, "{workers} workers, {lanes} lanes, {s:?}");
        }
    }
    // As many lanes as workers: the plain deal.
    let s = Schedule::Constant { rate: 10.0 };
    assert_eq!(deal_lanes(&s, 3, 3), deal(&s, 3));
}

#[test]
fn gamma_schedule_has_the_mean_rate_and_the_shapes_dispersion() {
    // Shape k: gaps with mean 1/rate and coefficient of variation 1/sqrt(k).
    for (shape, seed) in [(0.25, 1), (1.0, 2), (4.0, 3), (16.0, 4)] {
        let rate = 1000.0;
        let schedule = Schedule::Gamma {
            rate,
            shape,
            seed,
            horizon_ns: 40_000_000_000,
        };
        let mut w = deal(&schedule, 1).remove(0);
        let times = take(&mut w, 30_000);
        let gaps: Vec<f64> = times.windows(2).map(|p| (p[1] - p[0]) as f64).collect();
        let n = gaps.len() as f64;
        let mean = gaps.iter().sum::<f64>() / n;
        let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / (n - 1.0);
        let want = 1e9 / rate;
        assert!(
            (mean / want - 1.0).abs() < 0.03,
            "shape {shape}: mean gap {mean}"
        );
        let cv = var.sqrt() / mean;
        let want_cv = 1.0 / shape.sqrt();
        assert!(
            (cv / want_cv - 1.0).abs() < 0.06,
            "shape {shape}: coefficient of variation {cv}, want {want_cv}"
        );
        assert_eq!(nominal_rate(&schedule), rate);
    }
    let s = |seed| Schedule::Gamma {
        rate: 50.0,
        shape: 2.0,
        seed,
        horizon_ns: 1_000_000_000,
    };
    let a = take(&mut deal(&s(7), 2).remove(1), 40);
    assert_eq!(a, take(&mut deal(&s(7), 2).remove(1), 40));
    assert_ne!(a, take(&mut deal(&s(8), 2).remove(1), 40));
}
