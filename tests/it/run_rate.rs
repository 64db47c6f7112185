//! Open-loop load against the in-process reference server: the schedule is kept (intended
//! send times exactly on the grid, the server sees the target rate), and when the client
//! cannot keep it the report says so and the corrected latency shows the cost.

use crate::common;

use common::*;
use inferperf::config::{Distribution, LoadMode, RateRange};
use inferperf::report::LoadValue;

pub(crate) fn rate_config(
    server: &inferperf::server::ServerHandle,
    rate: f64,
    count: u64,
) -> inferperf::config::Config {
    let mut cfg = quick_config(server, "simple", 50);
    cfg.load_mode = LoadMode::RequestRate;
    cfg.request_rate = RateRange {
        start: rate,
        end: rate,
        step: 1.0,
    };
    cfg.request_count = count;
    cfg.async_mode = true;
    cfg
}

/// (intended, actual) send times of every exported request, by intended time.
fn sends(export: &serde_json::Value) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = export["experiments"][0]["requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["intended_timestamp"].as_u64().expect("intended time"),
                r["timestamp"].as_u64().unwrap(),
            )
        })
        .collect();
    out.sort_unstable();
    out
}

#[test]
fn constant_rate_keeps_its_grid_and_rate() {
    let server = start_server();
    let dir = temp_dir("rate-constant");
    let mut cfg = rate_config(&server, 2000.0, 4000);
    cfg.profile_export_file = Some(dir.join("r.json"));
    cfg.max_threads = Some(1);
    cfg.seed = 99;
    let (res, text) = run(&cfg);
    assert!(res.error.is_none(), "{:?}", res.error);
    let p = &res.points[0];
    assert_eq!(p.load, LoadValue::RequestRate(2000.0));
    assert_eq!(p.client.request_count, 4000);
    assert_eq!(model_counters(&server, "simple").infer_requests, 4000);
    assert!(
        text.contains("Request Rate: 2000 inference requests per second"),
        "{text}"
    );
    assert!(text.contains("    Avg send request rate: "), "{text}");
    assert!(text.contains("    Send lag: p50 "), "{text}");
    assert!(
        text.contains("    Latency from the intended send time: avg "),
        "{text}"
    );
    let export: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("r.json")).unwrap()).unwrap();
    assert_eq!(export["seed"], 99);
    let s = sends(&export);
    assert_eq!(s.len(), 4000);
    // Intended times sit exactly 500 us apart; nothing goes out before its time.
    assert!(s.windows(2).all(|w| w[1].0 - w[0].0 == 500_000), "grid");
    assert!(s.iter().all(|(intended, actual)| actual >= intended));
    // The server saw the target rate, within 1 %.
    let arrivals = server.arrivals("simple");
    assert_eq!(arrivals.len(), 4000);
    // The first and last 20 are left out: a late first send is a start-up cost, not the rate.
    let span = arrivals[3979] - arrivals[20];
    let rate = 3959.0 * 1e9 / span as f64;
    assert!((rate / 2000.0 - 1.0).abs() < 0.01, "server saw {rate}/s");
    let sched = p.client.schedule.as_ref().expect("schedule statistics");
    assert!(sched.corrected_avg_ns >= p.client.avg_latency_ns);
}

#[test]
fn poisson_rate_is_random_but_repeatable_by_seed() {
    let dir = temp_dir("rate-poisson");
    let mut firsts = Vec::new();
    // Seed 5 twice, then 6. The rate the server saw is judged on the first run; a run in
    // which the shared machine stalled the server's one thread or the client (seen: 65 ms,
    // 7 % of the span) is tried again, up to three times.
    let mut timing_failures = Vec::new();
    let mut i = 0;
    for seed in [5u64, 5, 6] {
        loop {
            let server = start_server();
            let mut cfg = rate_config(&server, 2000.0, 2000);
            cfg.distribution = Distribution::Poisson;
            cfg.seed = seed;
            cfg.max_threads = Some(1);
            cfg.profile_export_file = Some(dir.join(format!("p{i}.json")));
            let (res, text) = run(&cfg);
            assert!(res.error.is_none(), "{:?}", res.error);
            assert!(text.contains("Using poisson distribution"), "{text}");
            assert!(text.contains(&format!("--seed {seed}")), "{text}");
            let export: serde_json::Value = serde_json::from_str(
                &std::fs::read_to_string(dir.join(format!("p{i}.json"))).unwrap(),
            )
            .unwrap();
            i += 1;
            let s = sends(&export);
            if firsts.is_empty() {
                if let Err(why) = rate_kept(&server.arrivals("simple"), &s) {
                    timing_failures.push(why);
                    assert!(timing_failures.len() < 3, "{timing_failures:#?}");
                    continue;
                }
            }
            // The drawn schedule itself (intended times, no clock involved).
            let origin = s[0].0;
            let offsets: Vec<u64> = s.iter().take(50).map(|(t, _)| t - origin).collect();
            let gaps: Vec<u64> = s.windows(2).map(|w| w[1].0 - w[0].0).collect();
            let mean = gaps.iter().sum::<u64>() as f64 / gaps.len() as f64;
            assert!((mean / 500_000.0 - 1.0).abs() < 0.1, "mean gap {mean}");
            assert!(gaps.iter().any(|&g| g < 100_000) && gaps.iter().any(|&g| g > 1_500_000));
            firsts.push(offsets);
            break;
        }
    }
    assert_eq!(firsts[0], firsts[1], "same seed, same schedule");
    assert_ne!(firsts[0], firsts[2], "another seed, another schedule");
}

/// The server saw the Poisson rate within 10 % (2000 sends, mean gap 500 us), and the median
/// send left within 2 ms of its intended time. The first and last 20 arrivals are left out:
/// a late first send is a start-up cost, not the rate. Lateness is judged by the median, not
/// a count over a bound: while other tests load the same two cores, a fifth of the sends may
/// wait over 5 ms for a core, yet half of them leave on time unless the client lost its
/// schedule.
fn rate_kept(arrivals: &[u64], s: &[(u64, u64)]) -> Result<(), String> {
    let n = arrivals.len();
    let span = arrivals[n - 21] - arrivals[20];
    let intended_span = s[n - 21].0 - s[20].0;
    let (seen, meant) = (span as f64, intended_span as f64);
    if (seen / meant - 1.0).abs() >= 0.1 {
        return Err(format!("arrivals span {seen} vs {meant}"));
    }
    let mut lateness: Vec<u64> = s.iter().map(|(i, a)| a.saturating_sub(*i)).collect();
    lateness.sort_unstable();
    let median = lateness[lateness.len() / 2];
    if median > 2_000_000 {
        return Err(format!("median send {median} ns late"));
    }
    Ok(())
}

#[test]
fn falling_behind_is_reported_with_corrected_latency() {
    // 5 ms of compute per request and at most one request in flight: 200 requests/s at
    // best, against a schedule of 400/s.
    let delay = inferperf::server::parse_delay("simple=5ms").unwrap();
    let server = start_server_with(vec![delay]);
    let mut cfg = rate_config(&server, 400.0, 200);
    cfg.max_inflight = Some(1);
    cfg.max_threads = Some(1);
    let (res, text) = run(&cfg);
    assert!(res.error.is_none(), "{:?}", res.error);
    let c = &res.points[0].client;
    let sched = c.schedule.as_ref().expect("schedule statistics");
    assert!(!sched.kept(), "{sched:?}");
    assert!(sched.late_pct > 50.0, "{sched:?}");
    // Waiting for the slot is part of the corrected latency only.
    assert!(
        sched.corrected_avg_ns > 2 * c.avg_latency_ns,
        "{sched:?} vs {}",
        c.avg_latency_ns
    );
    assert!(sched.corrected_p99_ns > c.percentile(99).unwrap());
    assert!(
        text.contains("[WARNING] inferperf did not keep the schedule"),
        "{text}"
    );
}

#[test]
fn request_intervals_file_drives_the_schedule() {
    let server = start_server();
    let dir = temp_dir("intervals");
    let file = dir.join("gaps.txt");
    std::fs::write(&file, "1000\n3000\n").unwrap();
    let mut cfg = quick_config(&server, "simple", 50);
    cfg.load_mode = LoadMode::Intervals;
    cfg.request_intervals_ns = inferperf::cli::load::read_intervals(&file).unwrap();
    cfg.request_count = 400;
    cfg.max_threads = Some(1);
    cfg.profile_export_file = Some(dir.join("i.json"));
    let (res, text) = run(&cfg);
    assert!(res.error.is_none(), "{:?}", res.error);
    // Two sends every 4 ms: 500 requests/s.
    assert_eq!(res.points[0].load, LoadValue::RequestRate(500.0));
    assert!(
        text.contains("Request Rate: 500 inference requests per second"),
        "{text}"
    );
    let export: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("i.json")).unwrap()).unwrap();
    let s = sends(&export);
    let gaps: Vec<u64> = s.windows(2).map(|w| w[1].0 - w[0].0).collect();
    assert!(
        gaps.iter().all(|&g| g == 1_000_000 || g == 3_000_000),
        "{gaps:?}"
    );
    assert_eq!(gaps.iter().filter(|&&g| g == 3_000_000).count(), 200);
}

#[test]
fn rate_sweep_and_binary_search() {
    let server = start_server();
    let mut cfg = rate_config(&server, 200.0, 0);
    cfg.request_count = 0;
    cfg.measurement_mode = inferperf::config::MeasurementMode::CountWindows;
    cfg.measurement_request_count = 60;
    cfg.count_check_ms = 5;
    cfg.stability_threshold = 10.0;
    cfg.request_rate = RateRange {
        start: 200.0,
        end: 600.0,
        step: 200.0,
    };
    let (res, _) = run(&cfg);
    assert!(res.error.is_none(), "{:?}", res.error);
    let loads: Vec<LoadValue> = res.points.iter().map(|p| p.load).collect();
    assert_eq!(
        loads,
        vec![
            LoadValue::RequestRate(200.0),
            LoadValue::RequestRate(400.0),
            LoadValue::RequestRate(600.0)
        ]
    );
    // Binary search with a limit nothing reaches: start passes, end passes, done.
    cfg.binary_search = true;
    cfg.latency_threshold_ms = 10_000;
    let (res, _) = run(&cfg);
    let loads: Vec<LoadValue> = res.points.iter().map(|p| p.load).collect();
    assert_eq!(
        loads,
        vec![LoadValue::RequestRate(200.0), LoadValue::RequestRate(600.0)]
    );
}

#[test]
fn fixed_schedule_sends_each_entry_once_at_its_time() {
    let server = start_server();
    let dir = temp_dir("fixed");
    // Entry i: INPUT0 all i, sent at 3*i ms (0, 3, ..., 117 ms).
    let steps: Vec<serde_json::Value> = (0..40)
        .map(|i| {
            serde_json::json!({"INPUT0": vec![i; 16], "INPUT1": vec![0; 16], "timestamp": [3 * i]})
        })
        .collect();
    let file = dir.join("schedule.json");
    std::fs::write(&file, serde_json::json!({ "data": steps }).to_string()).unwrap();
    let mut cfg = quick_config(&server, "simple", 50);
    cfg.load_mode = LoadMode::FixedSchedule;
    cfg.input_data = inferperf::config::InputData::Files(vec![file]);
    cfg.max_threads = Some(2);
    cfg.profile_export_file = Some(dir.join("f.json"));
    let (res, _) = run(&cfg);
    assert!(res.error.is_none(), "{:?}", res.error);
    assert_eq!(res.points[0].load, LoadValue::RequestRate(0.0));
    assert_eq!(res.points[0].client.request_count, 40);
    assert_eq!(model_counters(&server, "simple").infer_requests, 40);
    let export: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("f.json")).unwrap()).unwrap();
    assert_eq!(
        export["experiments"][0]["experiment"],
        serde_json::json!({"mode": "request_rate", "value": 0.0})
    );
    // Each entry went once, at its own time: sorted by intended time, entry i is 3*i ms in.
    let mut reqs: Vec<(u64, i64)> = export["experiments"][0]["requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let v = &r["request_inputs"]["INPUT0"];
            let first = v.as_array().map_or_else(|| v.as_i64(), |a| a[0].as_i64());
            (r["intended_timestamp"].as_u64().unwrap(), first.unwrap())
        })
        .collect();
    reqs.sort_unstable();
    let origin = reqs[0].0;
    for (i, (t, entry)) in reqs.iter().enumerate() {
        assert_eq!(*entry, i as i64, "entry order");
        assert_eq!(t - origin, 3_000_000 * i as u64, "entry {i} time");
    }
}
