//! Console report tests: rendered text against the real perf_analyzer samples.

use super::*;
use crate::measure::server_stats::{ComposingStats, ModelStats, ServerStats, StatDuration};
use crate::measure::stats::{percentile_set, ClientStats, WindowStats};
use crate::report::test_samples::*;

/// The sample text with the two typos inferperf fixes (see the module comment).
fn fixed_typos(sample: &str) -> String {
    sample
        .replace("requests per seconds", "requests per second")
        .replace("p95throughput", "p95 throughput")
}

/// inferperf's text without its documented addition, to compare with perf_analyzer's.
fn without_min_max(text: &str) -> String {
    text.lines()
        .filter(|l| !l.starts_with("    Min latency: "))
        .map(|l| format!("{l}\n"))
        .collect()
}

fn assert_lines_eq(ours: &str, want: &str) {
    let (a, b): (Vec<&str>, Vec<&str>) = (ours.lines().collect(), want.lines().collect());
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        assert_eq!(x, y, "line {}", i + 1);
    }
    assert_eq!(a.len(), b.len(), "line count\nours:\n{ours}\nwant:\n{want}");
    assert_eq!(ours, want);
}

/// Numbers as the sample prints them (µs), stored as ns with sub-µs noise that must be
/// truncated away.
struct Sample {
    count: u64,
    tput: f64,
    avg_std: (u64, u64),
    pcts: &'static [(u32, u64)],
    /// Avg HTTP/gRPC time: request, send, receive (µs).
    lib: (u64, u64, u64),
    overhead: f64,
}

fn client(s: &Sample, percentile: Option<u32>) -> ClientStats {
    let ns = |v: u64| v * 1000 + 999;
    let percentiles_ns: Vec<(u32, u64)> = s.pcts.iter().map(|&(p, v)| (p, ns(v))).collect();
    assert_eq!(
        percentiles_ns.iter().map(|p| p.0).collect::<Vec<_>>(),
        percentile_set(percentile)
    );
    let stabilizing = match percentile {
        Some(p) => percentiles_ns.iter().find(|q| q.0 == p).unwrap().1,
        None => ns(s.avg_std.0),
    };
    ClientStats {
        request_count: s.count,
        throughput: s.tput,
        avg_latency_ns: ns(s.avg_std.0),
        std_latency_us: s.avg_std.1,
        min_latency_ns: 7_500,
        max_latency_ns: 1_234_567,
        percentiles_ns,
        avg_request_ns: ns(s.lib.0),
        avg_send_ns: ns(s.lib.1),
        avg_recv_ns: s.lib.2 * 1000,
        overhead_pct: s.overhead,
        stabilizing_latency_ns: stabilizing,
        ..ClientStats::default()
    }
}

fn banner_for(percentile: Option<u32>, async_mode: bool, start: u64, end: u64) -> Banner {
    Banner {
        batch_size: 1,
        service_kind: "TRITON",
        warmup_request_count: 0,
        request_count: 0,
        count_windows: false,
        percentile,
        async_mode,
        measurement_interval_ms: 1000,
        measurement_request_count: 50,
        latency_threshold_ms: 0,
        concurrency_end: end,
        concurrency_start: start,
        decoupled: false,
    }
}

#[test]
fn decoupled_point_states_what_latency_means() {
    let mut b = banner_for(None, true, 1, 1);
    b.decoupled = true;
    let text = banner(&b);
    assert!(
        text.contains("  Detected decoupled model, using the last response with outputs for measuring latency\n"),
        "{text}"
    );
    let client = ClientStats {
        throughput: 50.0,
        avg_latency_ns: 9_000_000,
        avg_request_ns: 9_000_000,
        responses: Some(crate::measure::stats::ResponseStats {
            count: 200,
            throughput: 200.0,
            avg_first_response_ns: 2_500_999,
            avg_response_gap_ns: 2_000_000,
        }),
        ..ClientStats::default()
    };
    let text = point(&report(LoadValue::Concurrency(1), client), None, 0, false);
    assert!(
        text.contains("    Throughput: 50 infer/sec\n    Response Throughput: 200 infer/sec\n"),
        "{text}"
    );
    assert!(
        text.contains(
            "    Avg first response latency: 2500 usec, avg time between responses: 2000 usec\n"
        ),
        "{text}"
    );
    assert!(!text.contains("Avg gRPC time"), "{text}");
}

/// Banner, then header + point per point, then the summary: the whole console run.
fn render(
    banner_text: String,
    points: &[PointReport],
    percentile: Option<u32>,
    verbose: u8,
    http: bool,
    passes: &str,
) -> String {
    let mut out = banner_text;
    for p in points {
        out.push_str(&point_header(&p.load));
        out.push_str(passes);
        out.push_str(&point(p, percentile, verbose, http));
    }
    out.push_str(&summary(points, percentile));
    out
}

fn report(load: LoadValue, client: ClientStats) -> PointReport {
    PointReport {
        load,
        batch_size: 1,
        client,
        server: None,
        metrics: None,
    }
}

#[test]
fn http_sync_sweep_matches_sample() {
    let points = [
        report(
            LoadValue::Concurrency(1),
            client(
                &Sample {
                    count: 78289,
                    tput: 20896.5,
                    avg_std: (45, 90),
                    pcts: &[(50, 42), (90, 53), (95, 55), (99, 67)],
                    lib: (44, 10, 5),
                    overhead: 12.0,
                },
                None,
            ),
        ),
        report(
            LoadValue::Concurrency(2),
            client(
                &Sample {
                    count: 156043,
                    tput: 24255.2,
                    avg_std: (77, 428),
                    pcts: &[(50, 61), (90, 97), (95, 114), (99, 176)],
                    lib: (73, 20, 9),
                    overhead: 20.0,
                },
                None,
            ),
        ),
    ];
    let text = render(
        banner(&banner_for(None, false, 1, 2)),
        &points,
        None,
        0,
        true,
        "",
    );
    assert!(text
        .contains("    p99 latency: 67 usec\n    Min latency: 7 usec, max latency: 1234 usec\n"));
    assert_lines_eq(
        &without_min_max(&text),
        &fixed_typos(CONSOLE_HTTP_SYNC_C1_2_TXT),
    );
}

#[test]
fn http_async_verbose_percentile_matches_sample() {
    let c = client(
        &Sample {
            count: 171334,
            tput: 28077.6,
            avg_std: (99, 50),
            pcts: &[(50, 92), (90, 169), (95, 201), (99, 296)],
            lib: (106, 51, 0),
            overhead: 0.004,
        },
        Some(95),
    );
    let pass = |i: usize, count: u64, dur_ns: u64, p95_us: u64| {
        let w = WindowStats {
            request_count: count,
            duration_ns: dur_ns,
            latency: crate::measure::Dist::of([p95_us * 1000 + 500; 3]),
            ..WindowStats::default()
        };
        pass_line(i, &w, 1, Some(95))
    };
    let passes = [
        pass(1, 314_049, 10_000_000_000, 188),
        pass(2, 28_178_300, 1_000_000_000_000, 205),
        pass(3, 284_697, 10_000_000_000, 188),
        pass(4, 27_659_100, 1_000_000_000_000, 206),
    ]
    .concat();
    let points = [report(LoadValue::Concurrency(4), c)];
    let text = render(
        banner(&banner_for(Some(95), true, 4, 4)),
        &points,
        Some(95),
        1,
        true,
        &passes,
    );
    assert_lines_eq(
        &without_min_max(&text),
        &fixed_typos(CONSOLE_HTTP_ASYNC_C4_VERBOSE_P95_TXT),
    );
    assert!(text.contains("  Stabilizing using p95 throughput\n"));
}

#[test]
fn grpc_request_rate_matches_sample() {
    let c = client(
        &Sample {
            count: 7462,
            tput: 2060.7712,
            avg_std: (168, 119),
            pcts: &[(50, 145), (90, 277), (95, 346), (99, 526)],
            lib: (159, 2, 1),
            overhead: 1.0,
        },
        None,
    );
    let rate = RateBanner {
        start: 2000.0,
        end: 2000.0,
        poisson: true,
    };
    let b = banner_with_rate(&banner_for(None, false, 1, 1), Some(&rate));
    let points = [report(LoadValue::RequestRate(2000.0), c)];
    let text = render(b, &points, None, 0, false, "");
    assert_lines_eq(
        &without_min_max(&text),
        &fixed_typos(CONSOLE_GRPC_POISSON_2000_TXT),
    );
}

#[test]
fn request_count_matches_sample() {
    let c = client(
        &Sample {
            count: 5000,
            tput: 4999.48,
            avg_std: (52, 45),
            pcts: &[(50, 46), (90, 67), (95, 79), (99, 118)],
            lib: (49, 12, 7),
            overhead: 1.0,
        },
        None,
    );
    let mut b = banner_for(None, false, 2, 2);
    b.request_count = 5000;
    let points = [report(LoadValue::Concurrency(2), c)];
    let text = render(banner(&b), &points, None, 0, true, "");
    assert_lines_eq(&without_min_max(&text), CONSOLE_HTTP_REQUEST_COUNT_5000_TXT);
}

#[test]
fn banner_variants() {
    let mut b = banner_for(None, false, 1, 1);
    b.count_windows = true;
    b.warmup_request_count = 1;
    let text = banner(&b);
    assert!(text.contains("  Sending 1 warmup request\n"));
    assert!(text.contains("  Using \"count_windows\" mode for stabilization\n"));
    assert!(text.contains("  Minimum number of samples in each window: 50\n"));
    assert!(!text.contains("Latency limit"));
    b.request_count = 1;
    b.warmup_request_count = 3;
    let text = banner(&b);
    assert!(text.contains("  Sending 3 warmup requests\n  Sending 1 benchmark request\n"));
    assert!(!text.contains("stabiliz"));
    // End 0 = search until the latency threshold: a latency limit but no concurrency limit.
    let mut b = banner_for(Some(90), false, 1, 0);
    b.latency_threshold_ms = 7;
    let text = banner(&b);
    assert!(text.contains("  Stabilizing using p90 latency and throughput\n"));
    assert!(text.contains("  Latency limit: 7 msec\n  Using synchronous"));
    // A rate sweep.
    let rate = RateBanner {
        start: 10.0,
        end: 40.5,
        poisson: false,
    };
    let text = banner_with_rate(&banner_for(None, true, 1, 1), Some(&rate));
    assert!(text.contains(
        "  Stabilizing using average throughput\n  Measurement window: 1000 msec\n  \
         Latency limit: 0 msec\n  Request Rate limit: 40.5 requests per second\n  \
         Using uniform distribution on request generation\n  Using asynchronous calls"
    ));
    assert!(text.ends_with("inference\n\n"));
    // OpenAI without -b: no batch size line, as perf_analyzer.
    let mut b = banner_for(None, true, 1, 1);
    b.batch_size = 0;
    b.service_kind = "OPENAI";
    let text = banner(&b);
    assert!(text.starts_with("*** Measurement Settings ***\n  Service Kind: OPENAI\n"));
}

#[test]
fn pass_line_average_form() {
    let w = WindowStats {
        request_count: 8125,
        duration_ns: 10_000_000_000,
        latency: crate::measure::Dist::of([4_600_000, 4_913_000, 5_226_999]),
        ..WindowStats::default()
    };
    assert_eq!(
        pass_line(1, &w, 1, None),
        "  Pass [1] throughput: 812.5 infer/sec. Avg latency: 4913 usec (std 313 usec). \n"
    );
}

#[test]
fn grpc_verbose_wording_and_overhead_warning() {
    let mut c = client(
        &Sample {
            count: 1,
            tput: 1.0,
            avg_std: (10, 0),
            pcts: &[(50, 1), (90, 1), (95, 1), (99, 1)],
            lib: (100, 20, 30),
            overhead: 90.5,
        },
        None,
    );
    let p = report(LoadValue::Concurrency(1), c.clone());
    let text = point(&p, None, 1, false);
    assert!(text.contains("    Avg client overhead: 90.50%\n"));
    assert!(text.contains(
        "    Avg gRPC time: 100 usec (marshal 20 usec + response wait 50 usec + unmarshal 30 usec)\n"
    ));
    assert!(text.ends_with(
        "[WARNING] Perf Analyzer is not able to keep up with the desired load. The results may \
         not be accurate.\n"
    ));
    c.overhead_pct = 90.0;
    let text = point(&report(LoadValue::Concurrency(1), c), None, 0, true);
    assert!(!text.contains("WARNING") && !text.contains("overhead"));
    assert!(text.contains("(send/recv 50 usec + response wait 50 usec)"));
}

#[test]
fn point_with_server_block() {
    let d = |count: u64, us_each: u64| StatDuration {
        count,
        ns: count * us_each * 1000,
    };
    let server = ServerStats {
        model: ModelStats {
            inference_count: 20,
            execution_count: 5,
            success: d(20, 900),
            queue: d(20, 100),
            compute_input: d(5, 10),
            compute_infer: d(5, 700),
            compute_output: d(5, 5),
            ..ModelStats::default()
        },
        cache_enabled: false,
        composing: Vec::new(),
    };
    let c = ClientStats {
        overhead_pct: 99.0,
        ..ClientStats::default()
    };
    let p = PointReport {
        server: Some(server),
        ..report(LoadValue::Concurrency(1), c)
    };
    let text = point(&p, None, 0, true);
    let want =
        "    Avg HTTP time: 0 usec (send/recv 0 usec + response wait 0 usec)\n  Server: \n    \
        Inference count: 20\n    Execution count: 5\n    Successful request count: 20\n    \
        Avg request latency: 900 usec (overhead 85 usec + queue 100 usec + compute input 10 usec \
        + compute infer 700 usec + compute output 5 usec)\n\n[WARNING] Perf Analyzer";
    assert!(text.contains(want), "{text}");
    // The C API has no client library: perf_analyzer prints the line's indent alone, with
    // or without -v.
    for verbose in [0, 1] {
        let text = point(&p, None, verbose, ClientLibrary::InProcess);
        assert!(text.contains(" usec\n    \n  Server: \n"), "{text}");
        assert!(!text.contains("HTTP") && !text.contains("gRPC"), "{text}");
    }
}

#[test]
fn point_with_composing_models() {
    let d = |count: u64, us_each: u64| StatDuration {
        count,
        ns: count * us_each * 1000,
    };
    let model = |name: &str, request: u64, queue: u64, infer: u64| ModelStats {
        name: name.into(),
        version: "1".into(),
        inference_count: 10,
        execution_count: 10,
        success: d(10, request),
        queue: d(10, queue),
        compute_input: d(10, 1),
        compute_infer: d(10, infer),
        compute_output: d(10, 1),
        ..ModelStats::default()
    };
    let p = PointReport {
        server: Some(ServerStats {
            model: model("ens", 900, 0, 0),
            cache_enabled: false,
            composing: Vec::new(),
        }),
        ..report(LoadValue::Concurrency(1), ClientStats::default())
    };
    let composing = [
        ComposingStats {
            model: model("b", 300, 50, 200),
            composing: Vec::new(),
        },
        ComposingStats {
            model: model("a", 400, 100, 250),
            composing: Vec::new(),
        },
    ];
    let text = point_with_composing(&p, &composing, None, 0, true);
    let want = "  Server: \n    Inference count: 10\n    Execution count: 10\n    \
        Successful request count: 10\n    Avg request latency: 900 usec (overhead 296 usec + \
        queue 150 usec + compute 454 usec)\n\n  Composing models: \n  a, version: 1\n      \
        Inference count: 10\n      Execution count: 10\n      Successful request count: 10\n      \
        Avg request latency: 400 usec (overhead 48 usec + queue 100 usec + compute input 1 usec \
        + compute infer 250 usec + compute output 1 usec)\n\n  b, version: 1\n      Inference \
        count: 10\n      Execution count: 10\n      Successful request count: 10\n      Avg \
        request latency: 300 usec (overhead 48 usec + queue 50 usec + compute input 1 usec + \
        compute infer 200 usec + compute output 1 usec)\n\n";
    assert!(text.ends_with(want), "{text}");
    // Without composing models: the ordinary block.
    assert_eq!(
        point_with_composing(&p, &[], None, 0, true),
        point(&p, None, 0, true)
    );
}
