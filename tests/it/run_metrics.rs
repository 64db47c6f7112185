//! End-to-end `--collect-metrics`: the library polls the in-process reference server's
//! `/metrics` (two fake GPUs whose readings follow the inferences served) while it measures,
//! and the console block, the verbose CSV columns and the client CPU figure must agree with
//! what the server would have reported.

use crate::common;

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use inferperf::config::{Config, MetricsConfig};
use inferperf::error::ErrorKind;
use inferperf::server::Delay;

const BUSY: &str = "GPU-00000000-0000-4000-8000-000000000000";
const IDLE: &str = "GPU-11111111-1111-4111-8111-111111111111";
const GIB: u64 = 1 << 30;

/// `--request-count 200` on `simple` at 1 ms each: a few hundred ms, polled every 20 ms.
fn metrics_config(server: &inferperf::server::ServerHandle, path: &str) -> Config {
    let mut cfg = quick_config(server, "simple", 50);
    cfg.request_count = 200;
    cfg.metrics = Some(MetricsConfig {
        url: format!("{}{path}", server.addr),
        interval_ms: 20,
    });
    cfg
}

fn slow_simple_server() -> inferperf::server::ServerHandle {
    start_server_with(vec![(
        "simple".into(),
        Delay::Fixed(Duration::from_millis(1)),
    )])
}

#[test]
fn console_block_csv_columns_and_predictable_values() {
    let server = slow_simple_server();
    let dir = temp_dir("metrics");
    let mut cfg = metrics_config(&server, "/metrics");
    cfg.csv_file = Some(dir.join("out.csv"));
    cfg.verbose_csv = true;
    cfg.csv_extra_columns = true;
    let (res, text) = run(&cfg);
    assert!(res.error.is_none());
    let p = &res.points[0];
    let m = p.metrics.as_ref().expect("metrics collected");
    let g = &m.gpu;

    // The idle GPU never changes.
    assert_eq!(g.utilization[IDLE], 0.0);
    assert_eq!(g.power_watts[IDLE], 30.0);
    assert_eq!(g.memory_used_bytes[IDLE], 512 << 20);
    assert_eq!(g.memory_total_bytes[IDLE], 16 * GIB);
    // The busy GPU: power = 50 + 250 * utilization per scrape, so the means obey it too.
    let util = g.utilization[BUSY];
    assert!((0.0..1.0).contains(&util), "{util}");
    assert!((g.power_watts[BUSY] - (50.0 + 250.0 * util)).abs() < 1e-9);
    // Memory used = 1 GiB + 4096 per inference served: the max is some count up to the
    // server's final one, and the run's inferences were served while it was polled.
    let served: u64 = server
        .counters()
        .per_model
        .iter()
        .map(|m| m.inferences)
        .sum();
    assert_eq!(served, 200);
    let used = g.memory_used_bytes[BUSY];
    assert_eq!((used - GIB) % 4096, 0, "{used}");
    assert!(used > GIB && used <= GIB + served * 4096, "{used}");
    assert_eq!(g.memory_total_bytes[BUSY], 80 * GIB);
    let cpu = m.client_cpu_pct.expect("client CPU measured");
    assert!(cpu > 0.0, "{cpu}");

    // Console: perf_analyzer's block after the Server section, then inferperf's CPU line.
    let block = format!("  Server Prometheus Metrics: \n    Avg GPU Utilization:\n      {BUSY} : ");
    assert!(text.contains(&block), "{text}");
    for line in [
        format!("      {IDLE} : 0%\n    Avg GPU Power Usage:\n"),
        format!("      {IDLE} : 30 watts\n    Max GPU Memory Usage:\n      {BUSY} : {used} bytes\n"),
        format!("    Total GPU Memory:\n      {BUSY} : 85899345920 bytes\n      {IDLE} : 17179869184 bytes\n"),
        "  Client CPU usage (inferperf): ".to_string(),
    ] {
        assert!(text.contains(&line), "{line:?} not in\n{text}");
    }
    let server_at = text.find("  Server: \n").expect("server block");
    assert!(server_at < text.find("  Server Prometheus Metrics").unwrap());

    // Verbose CSV with --csv-extra-columns: the GPU columns right after `response wait`,
    // client CPU last.
    let csv = std::fs::read_to_string(dir.join("out.csv")).unwrap();
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let row: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert_eq!(header.len(), row.len(), "{csv}");
    let at = header.iter().position(|c| *c == "response wait").unwrap();
    assert_eq!(
        header[at + 1..at + 5],
        [
            "Avg GPU Utilization",
            "Avg GPU Power Usage",
            "Max GPU Memory Usage",
            "Total GPU Memory"
        ]
    );
    assert_eq!(header.last(), Some(&"Client CPU Usage (% of one core)"));
    assert!(row[at + 1].starts_with(&format!("{BUSY}:")), "{csv}");
    assert!(row[at + 1].ends_with(&format!(";{IDLE}:0;")), "{csv}");
    assert_eq!(row[at + 3], format!("{BUSY}:{used};{IDLE}:536870912;"));
    assert_eq!(
        row[at + 4],
        format!("{BUSY}:85899345920;{IDLE}:17179869184;")
    );
    assert!(row.last().unwrap().parse::<f64>().unwrap() > 0.0, "{csv}");
}

#[test]
fn verbose_csv_with_metrics_has_perf_analyzers_header() {
    // Without --csv-extra-columns, perf_analyzer's header exactly: GPU columns last.
    let server = slow_simple_server();
    let dir = temp_dir("metrics-plain-csv");
    let mut cfg = metrics_config(&server, "/metrics");
    cfg.csv_file = Some(dir.join("out.csv"));
    cfg.verbose_csv = true;
    let (res, _) = run(&cfg);
    assert!(res.points[0].metrics.is_some());
    let csv = std::fs::read_to_string(dir.join("out.csv")).unwrap();
    let mut lines = csv.lines();
    assert_eq!(
        lines.next().unwrap(),
        "Concurrency,Inferences/Second,Client Send,Network+Server Send/Recv,Server Queue,\
         Server Compute Input,Server Compute Infer,Server Compute Output,Client Recv,\
         p50 latency,p90 latency,p95 latency,p99 latency,Avg latency,request/response,\
         response wait,Avg GPU Utilization,Avg GPU Power Usage,Max GPU Memory Usage,\
         Total GPU Memory"
    );
    assert_eq!(lines.next().unwrap().split(',').count(), 20, "{csv}");
}

#[test]
fn endpoint_without_gpu_metrics_gives_empty_blocks() {
    // `/v2/health/ready` answers 200 with no body: every metric is missing (a one-time
    // warning each, like perf_analyzer), and the run still succeeds.
    let server = slow_simple_server();
    let (res, text) = run(&metrics_config(&server, "/v2/health/ready"));
    let m = res.points[0].metrics.as_ref().unwrap();
    assert!(m.gpu.utilization.is_empty() && m.gpu.memory_total_bytes.is_empty());
    assert!(
        text.contains(
            "  Server Prometheus Metrics: \n    Avg GPU Utilization:\n    Avg GPU Power \
             Usage:\n    Max GPU Memory Usage:\n    Total GPU Memory:\n"
        ),
        "{text}"
    );
}

#[test]
fn metrics_server_down_fails_the_run_before_any_load() {
    let server = slow_simple_server();
    let dir = temp_dir("metrics-down");
    // A port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut cfg = metrics_config(&server, "/metrics");
    cfg.metrics.as_mut().unwrap().url = format!("127.0.0.1:{port}/metrics");
    cfg.csv_file = Some(dir.join("out.csv"));
    let mut out = Vec::new();
    let e = match inferperf::run::run(&cfg, &mut out, Arc::new(AtomicBool::new(false))) {
        Ok(_) => panic!("the run must fail"),
        Err(e) => e,
    };
    assert_eq!((e.kind, e.exit_code()), (ErrorKind::Generic, 99));
    assert!(
        e.msg.starts_with(&format!(
            "Unable to connect to Metrics endpoint 127.0.0.1:{port}/metrics"
        )),
        "{e}"
    );
    assert_eq!(model_counters(&server, "simple").infer_requests, 0);
    assert!(!dir.join("out.csv").exists());
}
