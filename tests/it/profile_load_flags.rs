//! AIPerf's load flags of `inferperf profile` against the in-process reference server: the
//! arrival pattern (and its gamma shape), the failed-request threshold, the grace period
//! after a duration, the prefill cap and the request-rate series. Each test checks what the
//! server received (counts, the spread of the gaps between arrivals) and what the summary
//! says; spreads are compared as coefficients of variation, never as wall-clock limits.

use crate::common;
use crate::run_profile::{profile, start_llm};

use std::path::Path;
use std::process::Command;

use common::temp_dir;
use serde_json::Value;

fn summary(dir: &Path) -> Value {
    let text = std::fs::read_to_string(dir.join("profile_export_genai_perf.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// The coefficient of variation of the gaps between the times the server answered each
/// request (its first token: no delay, so the arrival).
fn arrival_cv(server: &inferperf::server::ServerHandle) -> (usize, f64) {
    let mut first: Vec<u64> = server.token_times().iter().map(|t| t[0]).collect();
    first.sort_unstable();
    let gaps: Vec<f64> = first.windows(2).map(|w| (w[1] - w[0]) as f64).collect();
    let n = gaps.len() as f64;
    let mean = gaps.iter().sum::<f64>() / n;
    let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (first.len(), var.sqrt() / mean)
}

#[test]
fn arrival_patterns_space_the_requests_the_server_receives() {
    // 300 requests at 150/s: constant gaps (spread near 0), Poisson (near 1), gamma of
    // shape 0.25 (vLLM's burstiness; near 2).
    let mut cvs = Vec::new();
    for (tag, extra) in [
        ("constant", &[][..]),
        ("poisson", &["--arrival-pattern", "poisson"][..]),
        (
            "gamma",
            &["--request-rate-mode", "gamma", "--vllm-burstiness", "0.25"][..],
        ),
    ] {
        let server = start_llm(0, 0, 1);
        let dir = temp_dir(&format!("profile-arrival-{tag}"));
        let mut args = vec![
            "--request-rate",
            "150",
            "--request-count",
            "300",
            "--osl",
            "1",
        ];
        args.extend_from_slice(extra);
        args.extend(["--random-seed", "5"]);
        let (outcomes, _) = profile(&server, &dir, &args).unwrap();
        let (n, cv) = arrival_cv(&server);
        assert_eq!(n, 300, "{tag}: the server saw every request");
        assert_eq!(outcomes[0].requests.len(), 300);
        let config = &summary(&outcomes[0].dir)["input_config"];
        assert_eq!(config["arrival_pattern"], tag, "{config}");
        cvs.push((tag, cv, config["arrival_smoothness"].clone()));
        server.stop();
    }
    eprintln!("arrival spreads: {cvs:?}");
    let [(_, constant, _), (_, poisson, _), (_, gamma, shape)] = &cvs[..] else {
        unreachable!()
    };
    assert!(*constant < 0.4, "constant arrivals: cv {constant}");
    assert!(
        (0.7..1.35).contains(poisson),
        "poisson arrivals: cv {poisson}"
    );
    assert!(
        *gamma > 1.5,
        "gamma 0.25 arrivals: cv {gamma} (poisson {poisson})"
    );
    assert_eq!(*shape, 0.25);
}

/// Runs the built binary's `profile` with `args`; returns (exit code, stderr).
fn run_binary(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_inferperf"))
        .arg("profile")
        .args(["-m", "m", "-u", "127.0.0.1:9", "--quiet"])
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn bad_load_flag_values_are_one_line_usage_errors() {
    let dir = temp_dir("profile-load-flags-bad");
    let series = dir.join("series.json");
    std::fs::write(&series, r#"[{"time_s": 0, "qps": 1}]"#).unwrap();
    let series = series.to_str().unwrap();
    for (args, flag) in [
        (
            &["--request-rate", "5", "--arrival-pattern", "bursty"][..],
            "--arrival-pattern",
        ),
        (
            &["--request-rate", "5", "--arrival-smoothness", "0"][..],
            "--arrival-smoothness",
        ),
        (
            &["--request-rate", "5", "--vllm-burstiness", "-1"][..],
            "--arrival-smoothness",
        ),
        (
            &["--concurrency", "2", "--arrival-pattern", "poisson"][..],
            "--arrival-pattern",
        ),
        (
            &[
                "--request-rate",
                "5",
                "--request-distribution",
                "constant",
                "--arrival-pattern",
                "poisson",
            ][..],
            "--arrival-pattern",
        ),
        (
            &[
                "--benchmark-duration",
                "1",
                "--benchmark-grace-period",
                "-2",
            ][..],
            "--benchmark-grace-period",
        ),
        (
            &["--benchmark-grace-period", "2"][..],
            "--benchmark-grace-period",
        ),
        (
            &["--failed-request-threshold", "2"][..],
            "--failed-request-threshold",
        ),
        (
            &["--streaming", "--prefill-concurrency", "0"][..],
            "--prefill-concurrency",
        ),
        (&["--prefill-concurrency", "2"][..], "--prefill-concurrency"),
        (
            &[
                "--streaming",
                "--concurrency",
                "2",
                "--prefill-concurrency",
                "4",
            ][..],
            "--prefill-concurrency",
        ),
        (
            &["--request-rate-series", series][..],
            "--request-rate-series",
        ),
        (
            &["--request-rate-series", "/nonexistent/s.json"][..],
            "--request-rate-series",
        ),
    ] {
        let (code, stderr) = run_binary(args);
        assert_eq!(code, 99, "{args:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
        assert!(
            stderr.starts_with("error: profile: ") && stderr.contains(flag),
            "{args:?}: {stderr}"
        );
    }
}
