//! The printed latency figures against every request's latency in the profile export: a
//! point's windows keep fixed-size latency summaries, not samples, and must still print the
//! figures the samples give.

use std::time::Duration;

use crate::common::*;
use inferperf::config::ConcurrencyRange;
use inferperf::server::Delay;

/// perf_analyzer's nearest rank over sorted samples.
fn nearest(sorted: &[u64], p: u32) -> u64 {
    sorted[(f64::from(p) / 100.0 * (sorted.len() - 1) as f64 + 0.5) as usize]
}

/// Runs `count` requests at `concurrency` against a server holding each `simple` request for
/// `delay`, with the export on: the result, the console text and every latency, sorted.
fn measured(
    tag: &str,
    delay: Option<Delay>,
    concurrency: u64,
    count: u64,
) -> (inferperf::run::RunResult, String, Vec<u64>) {
    let server = start_server_with(delay.map(|d| ("simple".into(), d)).into_iter().collect());
    let dir = temp_dir(tag);
    let mut cfg = quick_config(&server, "simple", 50);
    cfg.request_count = count;
    cfg.concurrency = ConcurrencyRange {
        start: concurrency,
        end: concurrency,
        step: 1,
    };
    cfg.profile_export_file = Some(dir.join("export.json"));
    let (res, text) = run(&cfg);
    assert!(res.error.is_none(), "{:?}", res.error);
    let lat = export_latencies(&dir.join("export.json"));
    assert_eq!(lat.len() as u64, count);
    let _ = std::fs::remove_dir_all(&dir);
    (res, text, lat)
}

#[test]
fn printed_latencies_are_those_of_every_request() {
    let (res, text, lat) = measured("figures", None, 4, 3_000);
    let c = &res.points[0].client;
    for p in [50, 90, 95, 99] {
        let line = format!("    p{p} latency: {} usec\n", nearest(&lat, p) / 1000);
        assert!(text.contains(&line), "{line:?} in {text}");
    }
    let n = lat.len() as f64;
    let mean = lat.iter().map(|&l| u128::from(l)).sum::<u128>() / lat.len() as u128;
    let mean_f = lat.iter().map(|&l| l as f64).sum::<f64>() / n;
    let var = lat
        .iter()
        .map(|&l| (l as f64 - mean_f).powi(2))
        .sum::<f64>()
        / (n - 1.0);
    let line = format!(
        "    Avg latency: {} usec (standard deviation {} usec)\n",
        mean / 1000,
        (var.sqrt() / 1000.0) as u64
    );
    assert!(text.contains(&line), "{line:?} in {text}");
    assert_eq!(u128::from(c.avg_latency_ns), mean);
    assert_eq!(
        (c.min_latency_ns, c.max_latency_ns),
        (lat[0], lat[lat.len() - 1])
    );
}

#[test]
fn latencies_past_the_linear_range_stay_within_the_stated_bound() {
    let slow = Delay::Uniform(Duration::from_millis(40), Duration::from_millis(100));
    let (res, _, lat) = measured("figures-slow", Some(slow), 32, 320);
    let c = &res.points[0].client;
    assert!(
        lat[lat.len() / 2] > 65_536_000,
        "most requests past 65.5 ms"
    );
    for &(p, ns) in &c.percentiles_ns {
        let (got, want) = (ns / 1000, nearest(&lat, p) / 1000);
        if want < 65_536 {
            assert_eq!(got, want, "p{p}");
        } else {
            assert!(
                got.abs_diff(want) * 2048 <= want,
                "p{p}: {got} vs {want} us"
            );
        }
    }
    let mean = lat.iter().map(|&l| u128::from(l)).sum::<u128>() / lat.len() as u128;
    assert_eq!(u128::from(c.avg_latency_ns), mean);
    assert_eq!(
        (c.min_latency_ns, c.max_latency_ns),
        (lat[0], lat[lat.len() - 1])
    );
}
