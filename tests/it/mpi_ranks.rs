//! Whole runs as ranks of an in-process world against the reference server: what the server
//! received against the merged report and export.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::thread;

use crate::common::export_latencies;
use inferperf::config::{ConcurrencyRange, Config, MeasurementMode};
use inferperf::mpi::local::LocalWorld;
use inferperf::mpi::run::run_rank;
use inferperf::mpi::Collective;
use inferperf::server::{self, ServeConfig};

fn config(url: &str, concurrency: u64) -> Config {
    Config {
        model_name: "simple".into(),
        url: url.into(),
        measurement_mode: MeasurementMode::CountWindows,
        measurement_request_count: 100,
        // Look at the count every 5 ms instead of every second, so tests stay fast.
        count_check_ms: 5,
        stability_threshold: 10.0,
        max_trials: 10,
        pin_threads: false,
        ready_timeout_s: 2,
        concurrency: ConcurrencyRange {
            start: concurrency,
            end: concurrency,
            step: 1,
        },
        enable_mpi: true,
        mpi_scale_out: true,
        ..Config::default()
    }
}

/// Runs `cfg` on `n` in-process ranks; each rank's (result, console text).
fn ranks(n: usize, cfg: Config) -> Vec<(inferperf::run::RunResult, String)> {
    let handles: Vec<_> = LocalWorld::world(n)
        .into_iter()
        .map(|w| {
            let cfg = cfg.clone();
            thread::spawn(move || {
                let mut out = Vec::new();
                let stop = Arc::new(AtomicBool::new(false));
                let res = run_rank(&cfg, Box::new(w), &mut out, stop).expect("rank runs");
                (res, String::from_utf8(out).unwrap())
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

fn start_server() -> server::ServerHandle {
    server::start(ServeConfig {
        addr: "127.0.0.1:0".parse().unwrap(),
        threads: 1,
        ..ServeConfig::default()
    })
    .unwrap()
}

#[test]
fn scale_out_request_count_is_split_and_merged_into_one_report() {
    let srv = start_server();
    let dir = std::env::temp_dir().join(format!("inferperf-mpi-unit-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let export = dir.join("export.json");
    let mut cfg = config(&srv.addr.to_string(), 4);
    cfg.request_count = 601;
    cfg.profile_export_file = Some(export.clone());
    cfg.csv_file = Some(dir.join("out.csv"));
    let out = ranks(2, cfg);
    let served = srv.counters().infer_requests;
    srv.stop();
    let (root, text) = &out[0];
    assert!(
        root.error.is_none(),
        "{:?}",
        root.error.as_ref().map(|e| e.to_string())
    );
    let p = &root.points[0];
    assert_eq!(
        p.client.request_count, 601,
        "rank 0's report merges both ranks"
    );
    assert_eq!(served, 601, "the ranks' shares add up to the total");
    assert!(text.contains("Request concurrency: 4"), "{text}");
    assert!(text.contains("    Request count: 601\n"), "{text}");
    assert!(out[1].1.is_empty(), "rank 1 prints nothing: {}", out[1].1);
    // The merged percentiles are those of the union of every rank's requests, to the whole
    // microsecond the reports print (the windows keep latency histograms, not samples).
    let lat = export_latencies(&export);
    assert_eq!(lat.len(), 601);
    // perf_analyzer's rank: round(p/100 * (n - 1)).
    let nearest = |pct: u64| lat[(pct as f64 / 100.0 * (lat.len() - 1) as f64 + 0.5) as usize];
    for (pct, ns) in &p.client.percentiles_ns {
        assert_eq!(*ns / 1000, nearest(u64::from(*pct)) / 1000, "p{pct}");
    }
    assert_eq!(p.client.max_latency_ns, *lat.last().unwrap());
    assert!(std::fs::read_to_string(dir.join("out.csv"))
        .unwrap()
        .contains("Concurrency"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn scale_out_windows_are_stable_on_the_merged_numbers() {
    let srv = start_server();
    let out = ranks(2, config(&srv.addr.to_string(), 2));
    srv.stop();
    let (root, text) = &out[0];
    assert!(
        root.error.is_none(),
        "{:?}",
        root.error.as_ref().map(|e| e.to_string())
    );
    let c = &root.points[0].client;
    // Count windows of 100 split 50/50: each merged window holds both ranks' requests.
    assert!(c.request_count >= 300, "{}", c.request_count);
    assert!(text.contains("Request concurrency: 2"), "{text}");
    assert!(out[1].0.points.len() == 1 && out[1].1.is_empty());
}

#[test]
fn a_rank_whose_server_is_gone_ends_every_rank_with_its_message() {
    let srv = start_server();
    let good = srv.addr.to_string();
    // Multi-model lets each rank have its own flags: rank 1 measures a server that stops
    // during its first (never-ending) window, while rank 0's windows go on normally.
    let dead = start_server();
    let dead_url = dead.addr.to_string();
    let handles: Vec<_> = LocalWorld::world(2)
        .into_iter()
        .map(|w| {
            let mut cfg = config(if w.rank() == 0 { &good } else { &dead_url }, 1);
            cfg.mpi_scale_out = false;
            cfg.mpi_timeout_s = Some(30);
            if w.rank() == 1 {
                cfg.measurement_request_count = 1_000_000_000;
            }
            thread::spawn(move || {
                let mut out = Vec::new();
                let stop = Arc::new(AtomicBool::new(false));
                run_rank(&cfg, Box::new(w), &mut out, stop).map(|r| r.error.map(|e| e.to_string()))
            })
        })
        .collect();
    thread::sleep(std::time::Duration::from_millis(400));
    dead.stop();
    let res: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    srv.stop();
    for (rank, r) in res.iter().enumerate() {
        let err = r.as_ref().ok().and_then(|e| e.clone()).unwrap_or_default();
        assert!(
            err.contains("rank 1: Thread [0] had error"),
            "rank {rank}: {r:?}"
        );
    }
}
