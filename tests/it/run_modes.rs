//! Measurement rules end to end: latency threshold sweeps, stability failures and their exit
//! codes, warm-up, percentiles, against the reference server with known compute delays.

use crate::common;

use std::time::Duration;

use common::*;
use inferperf::config::{ConcurrencyRange, MeasurementMode};
use inferperf::error::ErrorKind;
use inferperf::report::LoadValue;
use inferperf::server::{self, Delay, ServeConfig};

fn serial_server(delay: Delay) -> server::ServerHandle {
    let cfg = ServeConfig {
        addr: "127.0.0.1:0".parse().unwrap(),
        delays: vec![("simple".into(), delay)],
        serial: vec!["simple".into()],
        ..ServeConfig::default()
    };
    server::start(cfg).unwrap()
}

#[test]
fn open_ended_sweep_stops_at_the_latency_threshold() {
    // One execution at a time, 10 ms each: latency is about concurrency x 10 ms, and the
    // 25 ms limit sits 5 ms from both neighbouring levels (room for a loaded machine's
    // scheduling delays).
    let server = serial_server(Delay::Fixed(Duration::from_millis(10)));
    let mut cfg = quick_config(&server, "simple", 20);
    cfg.concurrency = ConcurrencyRange {
        start: 1,
        end: 0,
        step: 1,
    };
    cfg.latency_threshold_ms = 25;
    let (res, text) = run(&cfg);
    assert!(res.error.is_none());
    let loads: Vec<_> = res.points.iter().map(|p| p.load).collect();
    assert_eq!(
        loads,
        vec![LoadValue::Concurrency(1), LoadValue::Concurrency(2)],
        "{text}"
    );
    assert!(
        text.contains("Request concurrency: 3\n"),
        "level 3 was measured: {text}"
    );
    assert!(
        text.contains("Measured latency went over the set limit of 25 msec."),
        "{text}"
    );
    // At concurrency 2 each request waits for the other one: the server reports that as queue.
    let s = res.points[1].server.as_ref().unwrap();
    let queue_avg_us = s.model.queue.ns / s.model.queue.count.max(1) / 1000;
    let infer_avg_us = s.model.compute_infer.ns / s.model.compute_infer.count.max(1) / 1000;
    assert!(infer_avg_us >= 10_000, "compute infer {infer_avg_us} us");
    assert!(queue_avg_us >= 5_000, "queue {queue_avg_us} us");
    let c2_latency = res.points[1].client.avg_latency_ns;
    let c1_latency = res.points[0].client.avg_latency_ns;
    // The second request's wait adds about one service time (10 ms) to the average; the
    // machine's own delays add to both levels alike.
    assert!(
        c2_latency > c1_latency + 5_000_000,
        "c1 {c1_latency} ns, c2 {c2_latency} ns"
    );
}

#[test]
fn first_level_unstable_is_a_stability_error() {
    // Uniformly random 1-5 ms service time and a 0 % band: never stable.
    let server = serial_server(Delay::Uniform(
        Duration::from_millis(1),
        Duration::from_millis(5),
    ));
    let mut cfg = quick_config(&server, "simple", 10);
    cfg.stability_threshold = 0.0;
    cfg.max_trials = 3;
    let (res, text) = run(&cfg);
    let err = res.error.expect("unstable");
    assert_eq!(err.kind, ErrorKind::Stability);
    assert_eq!(err.exit_code(), 2);
    assert!(
        err.msg
            .contains("within 3 measurement windows for concurrency 1"),
        "{}",
        err.msg
    );
    assert!(
        err.msg.contains("--measurement-request-count"),
        "{}",
        err.msg
    );
    assert!(res.points.is_empty());
    assert!(!text.contains("Inferences/Second vs."), "{text}");
}

#[test]
fn windows_without_completions_exit_3() {
    let server = serial_server(Delay::Fixed(Duration::from_millis(400)));
    let mut cfg = quick_config(&server, "simple", 10);
    cfg.measurement_mode = MeasurementMode::TimeWindows;
    cfg.measurement_interval_ms = 50;
    cfg.max_trials = 3;
    let (res, _) = run(&cfg);
    let err = res.error.expect("no valid requests");
    assert_eq!(err.kind, ErrorKind::NoValidRequests);
    assert_eq!(err.exit_code(), 3);
}

#[test]
fn warm_up_is_sent_but_not_measured() {
    let server = start_server();
    let mut cfg = quick_config(&server, "simple", 10);
    cfg.warmup_request_count = 150;
    cfg.request_count = 250;
    cfg.concurrency = ConcurrencyRange {
        start: 2,
        end: 2,
        step: 1,
    };
    let (res, text) = run(&cfg);
    assert!(res.error.is_none());
    assert_eq!(res.points[0].client.request_count, 250);
    assert_eq!(model_counters(&server, "simple").infer_requests, 400);
    assert!(text.contains("Sending 150 warmup requests"), "{text}");
    // The server section covers the measured window only.
    assert_eq!(
        res.points[0].server.as_ref().unwrap().model.success.count,
        250
    );
}

#[test]
fn percentile_drives_stability_and_reports() {
    let server = start_server();
    let dir = temp_dir("pct");
    let mut cfg = quick_config(&server, "simple", 100);
    cfg.percentile = Some(95);
    cfg.verbose_csv = true;
    cfg.csv_file = Some(dir.join("p.csv"));
    let (res, text) = run(&cfg);
    assert!(res.error.is_none());
    let c = &res.points[0].client;
    let p95 = c.percentiles_ns.iter().find(|(p, _)| *p == 95).unwrap().1;
    assert_eq!(c.stabilizing_latency_ns, p95);
    assert!(
        text.contains("Inferences/Second vs. Client p95 Batch Latency\n"),
        "{text}"
    );
    assert!(!text.contains("Avg latency:"), "{text}");
    let csv = std::fs::read_to_string(dir.join("p.csv")).unwrap();
    let header = csv.lines().next().unwrap();
    assert_eq!(header.matches("p95 latency").count(), 1, "{header}");
    assert!(
        header.ends_with(",p99 latency,request/response,response wait"),
        "{header}"
    );
}

#[test]
fn verbose_request_count_prints_its_one_pass_like_perf_analyzer() {
    let server = start_server();
    let mut cfg = quick_config(&server, "simple", 50);
    cfg.request_count = 100;
    cfg.verbose = 1;
    let (res, text) = run(&cfg);
    assert!(res.error.is_none());
    assert_eq!(text.matches("  Pass [").count(), 1, "{text}");
    assert!(text.contains("  Pass [1] throughput: "), "{text}");
}

#[test]
fn trace_flags_reach_the_server_over_both_protocols() {
    let server = start_grpc_server(Vec::new());
    let mut cfg = quick_config(&server, "simple", 20);
    cfg.request_count = 20;
    cfg.trace_settings = vec![
        ("trace_level".into(), "TIMESTAMPS".into()),
        ("trace_rate".into(), "50".into()),
    ];
    let (res, _) = run(&cfg);
    assert!(res.error.is_none(), "{:?}", res.error);
    let update = server.last_trace_update().expect("a trace update");
    assert_eq!(update.model, None, "global settings");
    assert_eq!(
        update.settings["trace_level"],
        vec!["TIMESTAMPS".to_string()]
    );
    assert_eq!(update.settings["trace_rate"], vec!["50".to_string()]);
    assert!(
        !update.settings.contains_key("trace_count"),
        "only the flags given"
    );
    cfg.protocol = inferperf::config::Protocol::Grpc;
    cfg.url = server.grpc_addr.unwrap().to_string();
    cfg.trace_settings = vec![("log_frequency".into(), "3".into())];
    let (res, _) = run(&cfg);
    assert!(res.error.is_none(), "{:?}", res.error);
    let update = server.last_trace_update().expect("a trace update");
    assert_eq!(update.settings["log_frequency"], vec!["3".to_string()]);
    assert_eq!(server.trace_updates().len(), 2);
}

#[test]
fn ensemble_reports_its_composing_models_and_their_csvs() {
    let server = start_server();
    let dir = temp_dir("ensemble");
    let mut cfg = quick_config(&server, "ensemble_simple", 50);
    cfg.request_count = 100;
    cfg.csv_file = Some(dir.join("out.csv"));
    let (res, text) = run(&cfg);
    assert!(res.error.is_none(), "{:?}", res.error);
    let s = res.points[0].server.as_ref().expect("server section");
    let names: Vec<&str> = s.composing.iter().map(|c| c.model.name.as_str()).collect();
    assert_eq!(names, vec!["identity_int32", "simple"]);
    assert!(s.composing.iter().all(|c| c.model.success.count == 100));
    assert!(text.contains("  Composing models: \n"), "{text}");
    assert!(text.contains("  simple, version: 1\n"), "{text}");
    for model in ["simple", "identity_int32"] {
        let path = dir.join(format!("{model}_v1.out.csv"));
        let csv = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
        assert!(
            csv.starts_with("Concurrency,Inferences/Second,Client Send,"),
            "{csv}"
        );
    }
}

#[test]
fn binary_search_over_concurrency_finds_the_latency_limit() {
    // One execution at a time, 10 ms each: latency is about 10 ms x concurrency, so a 25 ms
    // limit passes at 1 and 2 and fails from 3 on, with 5 ms to spare on a loaded machine.
    let srv = serial_server(Delay::Fixed(Duration::from_millis(10)));
    let mut cfg = quick_config(&srv, "simple", 20);
    cfg.concurrency = ConcurrencyRange {
        start: 1,
        end: 8,
        step: 1,
    };
    cfg.binary_search = true;
    cfg.latency_threshold_ms = 25;
    let (res, text) = run(&cfg);
    assert!(res.error.is_none(), "{:?}", res.error);
    let loads: Vec<LoadValue> = res.points.iter().map(|p| p.load).collect();
    // Probes: 1 (passes), 8 (fails), 4 (fails), 2 (passes), 3 (fails); passing ones reported.
    assert_eq!(
        loads,
        vec![LoadValue::Concurrency(1), LoadValue::Concurrency(2)],
        "{text}"
    );
    for c in [1, 8, 4, 2, 3] {
        assert!(
            text.contains(&format!("Request concurrency: {c}\n")),
            "{c}: {text}"
        );
    }
    assert!(!text.contains("Request concurrency: 5\n"), "{text}");
}

#[test]
fn count_windows_look_at_their_count_once_a_second() {
    let server = start_server();
    let dir = common::Scratch::new("inferperf-test-count-windows");
    // 20 requests complete within a few ms on the reference server; the window still lasts
    // until its first whole second, as perf_analyzer's count windows do.
    let mut cfg = quick_config(&server, "simple", 20);
    cfg.count_check_ms = 1000;
    cfg.max_trials = 3;
    cfg.stability_threshold = 1000.0;
    cfg.profile_export_file = Some(dir.join("w.json"));
    let (res, _) = run(&cfg);
    assert!(res.error.is_none(), "{:?}", res.error);
    let export: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("w.json")).unwrap()).unwrap();
    let edges: Vec<u64> = export["experiments"][0]["window_boundaries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert_eq!(edges.len(), 4, "three windows: {edges:?}");
    let requests = export["experiments"][0]["requests"]
        .as_array()
        .unwrap()
        .len();
    for pair in edges.windows(2) {
        let ms = (pair[1] - pair[0]) / 1_000_000;
        assert!(ms >= 1000, "a count window shorter than a second: {ms} ms");
    }
    // A second of closed-loop load on the reference server is far more than 20 requests.
    assert!(
        requests > 3 * 20 * 5,
        "{requests} requests in three 1 s windows"
    );
}
