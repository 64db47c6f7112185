//! `profile --server-metrics-url` against the in-process reference server's own metrics
//! pages (Triton, vLLM and DCGM styles at once): the counters' growth must equal what the
//! server counted, the gauges must follow the load it saw, and an endpoint that cannot be
//! reached gives one warning and a normal report.

use crate::common::temp_dir;
use crate::run_profile::{profile, start_llm, MODEL};

use std::net::TcpListener;
use std::process::Command;
use std::time::Duration;

use inferperf::llm::telemetry::series::SeriesSummary;
use inferperf::llm::telemetry::Report;
use inferperf::server::{self, MetricsStyle, ServeConfig, KV_CAPACITY};
use serde_json::Value;

const GPU0: &str = "GPU-00000000-0000-4000-8000-000000000000";
const REQUESTS: u64 = 24;
const CONCURRENCY: u64 = 4;
const OSL: u64 = 8;

fn series<'a>(report: &'a Report, endpoint: usize, metric: &str, key: &str) -> &'a SeriesSummary {
    report
        .find(endpoint, metric, key)
        .unwrap_or_else(|| panic!("{metric} of {key} at endpoint {endpoint}: {report:#?}"))
}

#[test]
fn three_metrics_styles_report_what_the_server_counted() {
    let server = start_llm(20, 2, 1);
    let dir = temp_dir("profile-telemetry");
    let base = format!("http://{}", server.addr);
    let urls = [
        format!("{base}/metrics/vllm"),
        format!("{base}/metrics/dcgm"),
        format!("{base}/metrics"),
    ];
    let (c, n, osl) = (
        CONCURRENCY.to_string(),
        REQUESTS.to_string(),
        OSL.to_string(),
    );
    let mut args = vec![
        "--streaming",
        "--concurrency",
        &c,
        "--request-count",
        &n,
        "--synthetic-input-tokens-mean",
        "32",
        "--output-tokens-mean",
        &osl,
        "--server-metrics-interval",
        "10",
        "--server-metrics-url",
    ];
    args.extend(urls.iter().map(String::as_str));
    let (outcomes, stdout) = profile(&server, &dir, &args).unwrap();
    let counted = server.llm_counts();
    assert_eq!(counted.ended, REQUESTS, "the server saw every request end");
    assert_eq!(counted.running, 0);
    let t = outcomes[0]
        .telemetry
        .as_ref()
        .expect("telemetry was collected");
    assert_eq!(t.endpoints.len(), 3);
    for e in &t.endpoints {
        assert_eq!(e.failed, 0, "{}", e.url);
        assert!(e.scrapes >= 3, "before, during and after: {}", e.scrapes);
    }
    // vLLM page: counters grew by exactly what the server counted.
    let delta = |metric: &str| series(t, 0, metric, MODEL).delta;
    assert_eq!(delta("request_success"), Some(REQUESTS as f64));
    assert_eq!(delta("generation_tokens"), Some((REQUESTS * OSL) as f64));
    assert_eq!(delta("prompt_tokens"), Some(counted.prompt_tokens as f64));
    assert_eq!(
        delta("prefix_cache_queries"),
        Some(counted.prompt_tokens as f64)
    );
    // ... and its gauges follow the load: never more in flight than the concurrency, and
    // some of it seen (a closed loop keeps its streams busy for the whole span).
    let running = series(t, 0, "num_requests_running", MODEL);
    let g = running.gauge.expect("a gauge");
    assert!(g.max <= CONCURRENCY as f64 && g.max >= 1.0, "{g:?}");
    assert!(g.avg > 0.0 && g.min >= 0.0, "{g:?}");
    assert!(running.samples >= 1);
    let kv = series(t, 0, "kv_cache_usage", MODEL).gauge.unwrap();
    assert!(
        (kv.max - g.max * 100.0 / KV_CAPACITY as f64).abs() < 1e-9,
        "{kv:?} vs {g:?}"
    );
    // DCGM page: the busy GPU's energy grew 1 J per generated token (mJ read as J).
    let energy = series(t, 1, "energy_consumption", GPU0).delta.unwrap();
    assert!((energy - (REQUESTS * OSL) as f64).abs() < 1e-9, "{energy}");
    let util = series(t, 1, "gpu_utilization", GPU0).gauge.unwrap();
    assert!(util.max > 0.0 && util.max <= 100.0 * CONCURRENCY as f64 / KV_CAPACITY as f64 + 0.5);
    // Triton page: the same GPU under its Triton names; memory grew 4096 B per token.
    let energy = series(t, 2, "energy_consumption", GPU0).delta.unwrap();
    assert_eq!(energy, (REQUESTS * OSL) as f64);
    let mem = series(t, 2, "gpu_memory_used", GPU0);
    let grew = (mem.after - mem.before) / 1e-9;
    assert!(
        (grew - (REQUESTS * OSL * 4096) as f64).abs() < 1.0,
        "{grew}"
    );
    check_console(&stdout, &urls);
    check_summary_json(&outcomes[0].dir);
    assert!(t.html().contains(&format!("<caption>{}", urls[0])));
    server.stop();
}

fn check_console(stdout: &str, urls: &[String]) {
    for needle in [
        "Time To First Token (ms)",
        "KV Cache Usage (%)",
        "Requests Running (count)",
        "Requests Succeeded (count)",
        "Generation Tokens (tokens)",
        "GPU Utilization (%)",
        "GPU Energy Consumption (J)",
        "192.00",
    ] {
        assert!(stdout.contains(needle), "{needle}:\n{stdout}");
    }
    for url in urls {
        assert!(
            stdout.contains(&format!("Server Telemetry {url} (")),
            "{url}:\n{stdout}"
        );
    }
}

fn check_summary_json(run_dir: &std::path::Path) {
    let text = std::fs::read_to_string(run_dir.join("profile_export_genai_perf.json")).unwrap();
    let summary: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        summary["request_count"]["avg"], REQUESTS as f64,
        "the LLM metrics stay"
    );
    let vllm = &summary["telemetry"]["endpoints"][0];
    let ok = &vllm["metrics"]["request_success"];
    assert_eq!(ok["kind"], "counter");
    assert_eq!(ok["series"][MODEL]["delta"], REQUESTS as f64);
    let kv = &vllm["metrics"]["kv_cache_usage"];
    assert_eq!(kv["unit"], "%");
    assert!(kv["series"][MODEL]["p99"].as_f64().is_some());
}

/// A loopback port nothing listens on.
fn closed_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

#[test]
fn an_unreachable_endpoint_warns_once_and_the_run_goes_on() {
    let server = start_llm(0, 1, 1);
    let dir = temp_dir("profile-telemetry-down");
    let dead = format!("127.0.0.1:{}/metrics", closed_port());
    let out = Command::new(env!("CARGO_BIN_EXE_inferperf"))
        .args(["profile", "-m", MODEL, "-u", &server.addr.to_string()])
        .args(["--tokenizer", "cl100k_base", "--quiet", "--streaming"])
        .args(["--request-count", "12", "--concurrency", "2"])
        .args([
            "--output-tokens-mean",
            "4",
            "--synthetic-input-tokens-mean",
            "16",
        ])
        .args([
            "--server-metrics-interval",
            "5",
            "--server-metrics-url",
            &dead,
        ])
        .arg("--artifact-dir")
        .arg(&dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let warning = format!("WARNING: server metrics endpoint {dead} cannot be scraped");
    assert_eq!(stderr.matches(&warning).count(), 1, "{stderr}");
    assert!(stdout.contains("Request Count (count)"), "{stdout}");
    assert!(stdout.contains(&format!("Server telemetry {dead}: no recognised metrics")));
    assert_eq!(server.llm_counts().ended, 12);
    server.stop();
}

#[test]
fn metrics_style_serves_vllm_names_at_metrics() {
    let cfg = ServeConfig {
        addr: "127.0.0.1:0".parse().unwrap(),
        metrics_style: MetricsStyle::Vllm,
        openai: server::OpenAiConfig::paced(Duration::from_millis(5), Duration::from_millis(1)),
        ..ServeConfig::default()
    };
    let server = server::start(cfg).unwrap();
    let dir = temp_dir("profile-telemetry-style");
    let url = format!("{}", server.addr);
    let args = [
        "--request-count",
        "6",
        "--concurrency",
        "2",
        "--output-tokens-mean",
        "3",
        "--synthetic-input-tokens-mean",
        "16",
        "--server-metrics",
        &url,
    ];
    let (outcomes, _) = profile(&server, &dir, &args).unwrap();
    let t = outcomes[0].telemetry.as_ref().unwrap();
    assert_eq!(series(t, 0, "request_success", MODEL).delta, Some(6.0));
    assert_eq!(series(t, 0, "generation_tokens", MODEL).delta, Some(18.0));
    assert!(
        t.find(0, "gpu_utilization", GPU0).is_none(),
        "a vLLM page only"
    );
    server.stop();
}

#[test]
fn a_silent_endpoint_times_out_and_the_run_goes_on() {
    let server = start_llm(0, 1, 1);
    let dir = temp_dir("profile-telemetry-silent");
    // Connections queue in the backlog and never get an answer.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("{}/metrics", silent.local_addr().unwrap());
    let args = [
        "--request-count",
        "4",
        "--concurrency",
        "2",
        "--output-tokens-mean",
        "2",
        "--synthetic-input-tokens-mean",
        "8",
        "--server-metrics-url",
        &url,
    ];
    let (outcomes, stdout) = profile(&server, &dir, &args).unwrap();
    assert_eq!(outcomes[0].requests.len(), 4);
    assert!(outcomes[0].requests.iter().all(|r| r.ok()));
    let e = &outcomes[0].telemetry.as_ref().unwrap().endpoints[0];
    assert_eq!((e.scrapes, e.series.len()), (0, 0));
    assert!(
        e.failed >= 2,
        "the scrapes before and after timed out: {}",
        e.failed
    );
    assert!(stdout.contains("no recognised metrics"), "{stdout}");
    drop(silent);
    server.stop();
}
