use super::*;

fn map<T: Copy>(pairs: &[(&str, T)]) -> BTreeMap<String, T> {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

fn gpu(util: &[(&str, f64)], power: &[(&str, f64)], used: &[(&str, u64)]) -> GpuMetrics {
    GpuMetrics {
        utilization: map(util),
        power_watts: map(power),
        memory_used_bytes: map(used),
        memory_total_bytes: map(&[("GPU-a", 1000), ("GPU-b", 2000)]),
    }
}

#[test]
fn missing_metrics_in_warning_order() {
    let m = GpuMetrics {
        power_watts: map(&[("GPU-a", 1.0)]),
        ..GpuMetrics::default()
    };
    assert_eq!(
        m.missing(),
        [GPU_UTILIZATION, GPU_MEMORY_USED, GPU_MEMORY_TOTAL]
    );
    assert_eq!(GpuMetrics::default().missing().len(), 4);
}

#[test]
fn merge_averages_maxes_and_keeps_the_first_total() {
    let s1 = gpu(
        &[("GPU-a", 0.2), ("GPU-b", 1.0)],
        &[("GPU-a", 100.0)],
        &[("GPU-a", 50)],
    );
    let mut s2 = gpu(
        &[("GPU-a", 0.4)],
        &[("GPU-a", 200.0), ("GPU-b", 60.0)],
        &[("GPU-a", 70), ("GPU-b", 5)],
    );
    s2.memory_total_bytes = map(&[("GPU-a", 9999), ("GPU-c", 3)]);
    let s3 = gpu(&[("GPU-a", 0.9)], &[("GPU-a", 300.0)], &[("GPU-a", 60)]);
    let merged = merge_gpu(&[&s1, &s2, &s3]);
    // GPU-a: (0.2 + 0.4 + 0.9) / 3; GPU-b appears once.
    assert!((merged.utilization["GPU-a"] - 0.5).abs() < 1e-12);
    assert_eq!(merged.utilization["GPU-b"], 1.0);
    assert_eq!(
        merged.power_watts,
        map(&[("GPU-a", 200.0), ("GPU-b", 60.0)])
    );
    assert_eq!(
        merged.memory_used_bytes,
        map(&[("GPU-a", 70), ("GPU-b", 5)])
    );
    assert_eq!(
        merged.memory_total_bytes,
        map(&[("GPU-a", 1000), ("GPU-b", 2000), ("GPU-c", 3)])
    );
    assert_eq!(merge_gpu(&[]), GpuMetrics::default());
}

fn sample(at_ns: u64, util: f64) -> GpuSample {
    GpuSample {
        at_ns,
        metrics: gpu(&[("GPU-a", util)], &[], &[]),
    }
}

#[test]
fn samples_in_span_table() {
    let samples = [
        sample(10, 0.1),
        sample(20, 0.2),
        sample(30, 0.3),
        sample(40, 0.4),
    ];
    // (span, utilization of the chosen samples)
    let cases: &[((u64, u64), &[f64])] = &[
        ((10, 40), &[0.1, 0.2, 0.3, 0.4]),
        ((15, 35), &[0.2, 0.3]),
        ((20, 20), &[0.2]),
        // None inside: the last one before the end.
        ((21, 29), &[0.2]),
        ((41, 50), &[0.4]),
        // Nothing before the end: the first one after.
        ((1, 5), &[0.1]),
    ];
    for (span, want) in cases {
        let got: Vec<f64> = samples_in_span(&samples, *span)
            .iter()
            .map(|m| m.utilization["GPU-a"])
            .collect();
        assert_eq!(&got, want, "span {span:?}");
    }
    assert!(samples_in_span(&[], (0, 100)).is_empty());
}

fn mark(at_ns: u64, cpu_ns: u64) -> CpuMark {
    CpuMark { at_ns, cpu_ns }
}

#[test]
fn cpu_pct_in_span_table() {
    // CPU time grows by 50 ns per 100 ns of wall time until 300, then by 200 per 100.
    let marks = [
        mark(0, 0),
        mark(100, 50),
        mark(200, 100),
        mark(300, 150),
        mark(400, 350),
    ];
    let cases: &[((u64, u64), Option<f64>)] = &[
        ((0, 400), Some(350.0 * 100.0 / 400.0)),
        // Inner marks 100 and 300.
        ((50, 350), Some(50.0)),
        ((300, 400), Some(200.0)),
        // One inner mark (200): bracket with 100 and 300.
        ((150, 250), Some(50.0)),
        // No inner mark: bracket with 300 and 400.
        ((310, 390), Some(200.0)),
        // Beyond the last mark: from the last one before the start to the last one.
        ((450, 500), None),
        ((350, 500), Some(200.0)),
    ];
    for (span, want) in cases {
        assert_eq!(cpu_pct_in_span(&marks, *span), *want, "span {span:?}");
    }
    assert_eq!(cpu_pct_in_span(&[], (0, 10)), None);
    assert_eq!(cpu_pct_in_span(&[mark(5, 5)], (0, 10)), None);
}

#[test]
fn process_cpu_time_moves_forward() {
    let clock = Clock::new();
    let a = CpuMark::now(&clock);
    // Burn a little CPU so the process clock visibly advances.
    let mut x = 0u64;
    for i in 0..2_000_000u64 {
        x = x.wrapping_mul(31).wrapping_add(i);
    }
    std::hint::black_box(x);
    let b = CpuMark::now(&clock);
    assert!(b.cpu_ns > a.cpu_ns, "{a:?} {b:?}");
    assert!(b.at_ns >= a.at_ns);
}
