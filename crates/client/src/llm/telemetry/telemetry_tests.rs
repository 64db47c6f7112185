//! GPU telemetry: the metric catalog of each server style, bounded series and their summaries,
//! percentiles, the flags and their usage errors, and the report forms.

use super::catalog::{readings, source, Kind, Reading, MAX_SERIES, METRICS, SOURCES};
use super::series::{percentile, Store, MAX_POINTS};
use super::*;
use crate::protocol::prometheus::parse;

fn args(line: &str) -> TelemetryArgs {
    use clap::Parser;
    #[derive(clap::Parser)]
    struct Wrap {
        #[command(flatten)]
        t: TelemetryArgs,
    }
    let argv = std::iter::once("x").chain(line.split_whitespace());
    Wrap::try_parse_from(argv).expect("flags parse").t
}

fn metric(id: &str) -> usize {
    METRICS.iter().position(|m| m.id == id).unwrap()
}

#[test]
fn every_source_names_a_metric_once() {
    for (i, s) in SOURCES.iter().enumerate() {
        assert!(s.metric < METRICS.len(), "{}", s.name);
        assert!(SOURCES[..i].iter().all(|o| o.name != s.name), "{}", s.name);
    }
    assert_eq!(
        source("vllm:gpu_cache_usage_perc").unwrap().metric,
        metric("kv_cache_usage")
    );
    assert!(source("nv_gpu_utilizationx").is_none());
}

#[test]
fn the_three_servers_read_as_the_same_metrics() {
    let page = "# TYPE nv_gpu_utilization gauge\n\
        nv_gpu_utilization{gpu_uuid=\"GPU-a\"} 0.5\n\
        nv_gpu_memory_used_bytes{gpu_uuid=\"GPU-a\"} 2e9\n\
        vllm:request_success_total{model_name=\"m\",finished_reason=\"stop\"} 3\n\
        vllm:request_success_total{model_name=\"m\",finished_reason=\"length\"} 4\n\
        vllm:kv_cache_usage_perc{model_name=\"m\"} 0.25\n\
        vllm:gpu_cache_usage_perc{model_name=\"m\"} 0.99\n\
        DCGM_FI_DEV_GPU_UTIL{gpu=\"1\",UUID=\"GPU-b\"} 40\n\
        DCGM_FI_DEV_FB_USED{gpu=\"1\",UUID=\"GPU-b\"} 1024\n\
        DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu=\"2\"} 5000\n\
        DCGM_FI_DEV_POWER_USAGE{gpu=\"1\",UUID=\"GPU-b\"} NaN\n\
        nv_cpu_utilization 0.25\n\
        other_metric 1\n";
    let r = readings(&parse(page.as_bytes()).unwrap());
    let get = |id: &str, series: &str| {
        r.iter()
            .find(|x| x.metric == metric(id) && x.series == series)
            .map(|x| x.value)
    };
    assert_eq!(get("gpu_utilization", "GPU-a"), Some(50.0));
    assert_eq!(get("gpu_utilization", "GPU-b"), Some(40.0));
    assert_eq!(get("gpu_memory_used", "GPU-a"), Some(2.0));
    assert!((get("gpu_memory_used", "GPU-b").unwrap() - 1.073741824).abs() < 1e-12);
    assert_eq!(
        get("request_success", "m"),
        Some(7.0),
        "summed over finish reasons"
    );
    assert_eq!(
        get("kv_cache_usage", "m"),
        Some(25.0),
        "the first name on the page wins"
    );
    assert_eq!(
        get("energy_consumption", "2"),
        Some(5.0),
        "mJ to J, series by gpu index"
    );
    assert_eq!(get("gpu_power_usage", "GPU-b"), None, "NaN skipped");
    assert_eq!(
        get("cpu_utilization", ""),
        Some(25.0),
        "no label: one series"
    );
    assert_eq!(r.len(), 8);
}

#[test]
fn series_per_scrape_are_bounded() {
    let mut page = String::new();
    for i in 0..MAX_SERIES + 50 {
        page.push_str(&format!("nv_gpu_utilization{{gpu_uuid=\"g{i}\"}} 1\n"));
    }
    let r = readings(&parse(page.as_bytes()).unwrap());
    assert_eq!(r.len(), MAX_SERIES);
    let mut store = Store::default();
    store.push(1, r);
    let more = vec![Reading {
        metric: 0,
        series: "new".into(),
        value: 1.0,
    }];
    store.push(2, more);
    assert_eq!(
        store.summarize((0, 9)).len(),
        MAX_SERIES,
        "no series past the bound"
    );
}

fn reading(id: &str, value: f64) -> Vec<Reading> {
    vec![Reading {
        metric: metric(id),
        series: "s".into(),
        value,
    }]
}

#[test]
fn gauges_are_summarised_inside_the_span_and_counters_by_growth() {
    let mut store = Store::default();
    // Before the span (t=5), five readings inside (10..=50), one after (t=60).
    store.push(5, reading("kv_cache_usage", 100.0));
    for (t, v) in [(10, 1.0), (20, 2.0), (30, 3.0), (40, 4.0), (50, 10.0)] {
        store.push(t, reading("kv_cache_usage", v));
    }
    store.push(60, reading("kv_cache_usage", 0.0));
    for (t, v) in [(5, 100.0), (30, 110.0), (60_000_000_005, 160.0)] {
        store.push(t, reading("request_success", v));
    }
    let s = store.summarize((10, 50));
    assert_eq!(s.len(), 2);
    let kv = &s[0];
    assert_eq!(METRICS[kv.metric].kind, Kind::Gauge);
    let g = kv.gauge.unwrap();
    assert_eq!((g.avg, g.min, g.max, g.p50), (4.0, 1.0, 10.0, 3.0));
    assert!((g.p99 - 9.76).abs() < 1e-9, "{}", g.p99);
    assert_eq!((kv.samples, kv.before, kv.after), (5, 100.0, 0.0));
    let ok = &s[1];
    assert_eq!(ok.delta, Some(60.0));
    assert_eq!(
        ok.rate_per_s,
        Some(1.0),
        "60 over the 60 s between the two readings"
    );
    assert!(ok.gauge.is_none());
}

#[test]
fn a_reset_counter_counts_from_zero_and_a_short_span_uses_the_nearest_gauge() {
    let mut store = Store::default();
    store.push(1, reading("prompt_tokens", 500.0));
    store.push(9, reading("prompt_tokens", 20.0));
    store.push(1, reading("gpu_utilization", 7.0));
    let s = store.summarize((4, 5));
    let util = s
        .iter()
        .find(|x| x.metric == metric("gpu_utilization"))
        .unwrap();
    assert_eq!(util.samples, 0);
    assert_eq!(util.gauge.unwrap().avg, 7.0);
    let tokens = s
        .iter()
        .find(|x| x.metric == metric("prompt_tokens"))
        .unwrap();
    assert_eq!(tokens.delta, Some(20.0));
}

#[test]
fn long_runs_keep_a_bounded_even_sample() {
    let mut store = Store::default();
    let n = (MAX_POINTS * 5) as u64;
    for t in 0..n {
        store.push(t, reading("gpu_utilization", t as f64));
    }
    assert!(store.points_kept() <= MAX_POINTS, "{}", store.points_kept());
    assert!(store.points_kept() >= MAX_POINTS / 2);
    let g = store.summarize((0, n))[0].gauge.unwrap();
    assert_eq!(g.min, 0.0, "the first reading is kept");
    let mid = (n - 1) as f64 / 2.0;
    assert!((g.avg - mid).abs() < mid * 0.01, "{} vs {mid}", g.avg);
    assert_eq!(store.summarize((0, n))[0].after, (n - 1) as f64);
}

#[test]
fn percentiles_interpolate() {
    assert_eq!(percentile(&[5.0], 99.0), 5.0);
    assert_eq!(percentile(&[1.0, 2.0, 3.0, 4.0], 50.0), 2.5);
}

#[test]
fn flags_become_endpoints() {
    let t = Telemetry::from_args(&args(
        "--server-metrics-url http://h:8002/metrics localhost:9400 \
         --server-metrics h:8002/metrics --server-metrics-interval 50",
    ))
    .unwrap()
    .unwrap();
    let got: Vec<(&str, &str)> = t
        .endpoints
        .iter()
        .map(|e| (e.address.as_str(), e.path.as_str()))
        .collect();
    assert_eq!(
        got,
        [("h:8002", "/metrics"), ("localhost:9400", "/metrics")]
    );
    assert_eq!(t.interval, Duration::from_millis(50));
    let gpu = Telemetry::from_args(&args("--gpu-telemetry"))
        .unwrap()
        .unwrap();
    assert_eq!(gpu.endpoints.len(), 2, "AIPerf's two DCGM defaults");
    assert_eq!(gpu.endpoints[1].address, "localhost:9401");
    let dash = Telemetry::from_args(&args("--gpu-telemetry dashboard n:9400/m")).unwrap();
    assert_eq!(dash.unwrap().endpoints[0].path, "/m");
    assert!(Telemetry::from_args(&args("")).unwrap().is_none());
    assert!(
        Telemetry::from_args(&args("--no-server-metrics --no-gpu-telemetry"))
            .unwrap()
            .is_none()
    );
}

#[test]
fn bad_flags_are_usage_errors_naming_the_flag() {
    for (line, needle) in [
        (
            "--server-metrics-url https://h/metrics",
            "--server-metrics-url",
        ),
        ("--server-metrics-url h:99999", "--server-metrics-url"),
        ("--gpu-telemetry pynvml", "pynvml"),
        ("--gpu-telemetry my.csv", "CSV"),
        ("--server-metrics-interval 0", "--server-metrics-interval"),
        (
            "--no-server-metrics --server-metrics-url h:1",
            "--no-server-metrics",
        ),
        ("--no-gpu-telemetry --gpu-telemetry", "--no-gpu-telemetry"),
    ] {
        let e = Telemetry::from_args(&args(line)).unwrap_err();
        assert_eq!(e.exit_code(), 99, "{line}");
        assert!(e.to_string().contains(needle), "{line}: {e}");
    }
}

#[test]
fn report_forms_escape_what_the_peer_sent() {
    let mut store = Store::default();
    let bad = "<b>\u{1b}[31m\"GPU\"";
    let r = |v| {
        vec![Reading {
            metric: metric("gpu_power_usage"),
            series: bad.into(),
            value: v,
        }]
    };
    store.push(1, r(100.0));
    store.push(2, r(200.0));
    let endpoint = parse_endpoint("--server-metrics-url", "h:1").unwrap();
    let report = Report::new(&[endpoint], &[store], (0, 5));
    let console = report.console();
    assert!(!console.contains('\u{1b}'), "{console}");
    assert!(console.contains("GPU Power Usage (W)"));
    assert!(console.contains("150.00"), "{console}");
    let html = report.html();
    assert!(html.contains("&lt;b&gt;"), "{html}");
    assert!(!html.contains("<b>") && !html.contains('\u{1b}'));
    assert!(html.contains("<table class=\"telemetry\">"));
    let json = report.json();
    let s = &json["endpoints"][0]["metrics"]["gpu_power_usage"];
    assert_eq!(s["unit"], "W");
    assert_eq!(s["series"][bad]["avg"], 150.0);
    assert_eq!(s["series"][bad]["samples"], 2);
}

#[test]
fn the_summary_json_gains_a_telemetry_section() {
    let dir = std::env::temp_dir().join(format!("inferperf-telemetry-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("s.json");
    std::fs::write(&path, "{\n  \"request_count\": {\"avg\": 3}\n}\n").unwrap();
    let report = Report::new(&[], &[], (1, 2));
    add_to_summary(&path, &report).unwrap();
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(v["request_count"]["avg"], 3);
    assert_eq!(v["telemetry"]["span_ns"][1], 2);
    std::fs::write(&path, "[1]").unwrap();
    assert!(add_to_summary(&path, &report).is_err());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn fuzz_entry_takes_any_bytes() {
    fuzz_telemetry(b"");
    fuzz_telemetry(b"nv_gpu_utilization{gpu_uuid=\"\xff\"} 1\n\x00\x01");
    fuzz_telemetry(b"vllm:num_requests_running{model_name=\"m\"} +Inf\n");
}
