//! CSV writer tests: perf_analyzer's header for each flag combination, row layout, and
//! the `--csv-extra-columns` additions.

use super::*;
use crate::measure::server_stats::{ModelStats, ServerStats, StatDuration};
use crate::measure::stats::ClientStats;
use crate::report::test_samples::*;

/// A point with the given µs numbers (+ sub-µs noise that must be truncated).
fn point(load: LoadValue, tput: f64, send_recv: (u64, u64), pcts: &[(u32, u64)]) -> PointReport {
    PointReport {
        load,
        batch_size: 1,
        client: ClientStats {
            throughput: tput,
            avg_send_ns: send_recv.0 * 1000 + 999,
            avg_recv_ns: send_recv.1 * 1000 + 1,
            percentiles_ns: pcts.iter().map(|&(p, v)| (p, v * 1000 + 500)).collect(),
            ..ClientStats::default()
        },
        server: None,
        metrics: None,
    }
}

fn render(points: &[PointReport], pct: Option<u32>, verbose: bool, server: bool) -> String {
    render_with(points, pct, verbose, false, server)
}

fn render_with(
    points: &[PointReport],
    pct: Option<u32>,
    verbose: bool,
    extra: bool,
    server: bool,
) -> String {
    let mut out = Vec::new();
    write_csv(&mut out, points, pct, verbose, extra, server).unwrap();
    String::from_utf8(out).unwrap()
}

const P4: [u32; 4] = [50, 90, 95, 99];

fn pcts(v: [u64; 4]) -> Vec<(u32, u64)> {
    P4.iter().copied().zip(v).collect()
}

#[test]
fn sync_sweep_matches_sample_sorted_by_throughput() {
    // Given in reverse order: rows must come out by ascending throughput.
    let points = [
        point(
            LoadValue::Concurrency(2),
            24255.2,
            (29, 0),
            &pcts([61, 97, 114, 176]),
        ),
        point(
            LoadValue::Concurrency(1),
            20896.5,
            (15, 0),
            &pcts([42, 53, 55, 67]),
        ),
    ];
    assert_eq!(render(&points, None, false, false), HTTP_SYNC_C1_2_CSV);
}

#[test]
fn decoupled_adds_response_throughput_after_inferences() {
    // (The point's client-library times are set: the CSV must not show them.)
    let mut p = point(
        LoadValue::Concurrency(2),
        100.0,
        (3, 4),
        &pcts([10, 20, 30, 40]),
    );
    p.client.responses = Some(crate::measure::stats::ResponseStats {
        count: 1200,
        throughput: 1200.5,
        ..Default::default()
    });
    let text = render(&[p], None, false, false);
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some(
            "Concurrency,Inferences/Second,Response Throughput,Client Send,Client Recv,\
             p50 latency,p90 latency,p95 latency,p99 latency"
        )
    );
    // No client-library split for a decoupled request: 0 in Client Send/Recv, as
    // perf_analyzer writes on the decoupled repeat_int32.
    assert_eq!(lines.next(), Some("2,100,1200.5,0,0,10,20,30,40"));
}

#[test]
fn request_rate_matches_sample() {
    let p = point(
        LoadValue::RequestRate(2000.0),
        2060.77,
        (3, 0),
        &pcts([145, 277, 346, 526]),
    );
    assert_eq!(render(&[p], None, false, false), GRPC_POISSON_2000_CSV);
}

#[test]
fn verbose_percentile_matches_sample_and_extra_columns_add_min_max() {
    let mut p = point(
        LoadValue::Concurrency(4),
        28077.6,
        (51, 0),
        &pcts([92, 169, 201, 296]),
    );
    p.client.avg_request_ns = 106_400;
    p.client.min_latency_ns = 41_999;
    p.client.max_latency_ns = 2_000_000;
    assert_eq!(
        render(std::slice::from_ref(&p), Some(95), true, false),
        HTTP_ASYNC_C4_VERBOSE_P95_CSV
    );
    let want = HTTP_ASYNC_C4_VERBOSE_P95_CSV
        .replace("response wait\n", "response wait,Min latency,Max latency\n")
        .replace(",51,55\n", ",51,55,41,2000\n");
    assert_eq!(render_with(&[p], Some(95), true, true, false), want);
}

#[test]
fn extra_percentile_and_avg_column() {
    let mut p = point(LoadValue::Concurrency(1), 10.0, (1, 2), &[]);
    p.client.percentiles_ns = vec![
        (50, 5_000),
        (75, 7_000),
        (90, 9_000),
        (95, 9_500),
        (99, 9_900),
    ];
    p.client.avg_latency_ns = 6_200;
    let text = render(std::slice::from_ref(&p), Some(75), false, false);
    assert_eq!(
        text,
        "Concurrency,Inferences/Second,Client Send,Client Recv,p50 latency,p75 latency,\
         p90 latency,p95 latency,p99 latency\n1,10,1,2,5,7,9,9,9\n"
    );
    let text = render(std::slice::from_ref(&p), None, true, false);
    let header = text.lines().next().unwrap();
    assert!(header.ends_with("p99 latency,Avg latency,request/response,response wait"));
    assert!(text.lines().nth(1).unwrap().ends_with(",9,6,3,0"), "{text}");
    let text = render_with(&[p], None, true, true, false);
    let header = text.lines().next().unwrap();
    assert!(header.ends_with(
        "p99 latency,Avg latency,request/response,response wait,Min latency,Max latency"
    ));
    assert!(text
        .lines()
        .nth(1)
        .unwrap()
        .starts_with("1,10,1,2,5,9,9,9,6,3,0,"));
    assert_eq!(render(&[], None, true, true), "");
}

#[test]
fn server_columns() {
    let d = |count: u64, us_each: u64| StatDuration {
        count,
        ns: count * us_each * 1000,
    };
    let mut p = point(
        LoadValue::Concurrency(3),
        500.0,
        (10, 5),
        &pcts([1, 2, 3, 4]),
    );
    p.client.avg_latency_ns = 1_000_000; // client wait = 1000 - 10.999 - 5.001 = 984 us
    let model = ModelStats {
        queue: d(4, 100),
        compute_input: d(2, 10),
        compute_infer: d(2, 600),
        compute_output: d(2, 20),
        cache_hit: d(1, 30),
        cache_miss: d(2, 40),
        ..ModelStats::default()
    };
    p.server = Some(ServerStats {
        model,
        cache_enabled: true,
        composing: Vec::new(),
    });
    let text = render(std::slice::from_ref(&p), None, false, true);
    let mut lines = text.lines();
    assert_eq!(
        lines.next().unwrap(),
        "Concurrency,Inferences/Second,Client Send,Network+Server Send/Recv,Server Queue,\
         Server Compute Input,Server Compute Infer,Server Compute Output,Server Cache Hit,\
         Server Cache Miss,Client Recv,p50 latency,p90 latency,p95 latency,p99 latency"
    );
    // 984 - (100 + 630 + 30 + 40) = 184
    assert_eq!(
        lines.next().unwrap(),
        "3,500,10,184,100,10,600,20,30,40,5,1,2,3,4"
    );
    // Server time exceeding the client wait clamps to 0; no cache columns when off.
    p.client.avg_latency_ns = 500_000;
    p.server.as_mut().unwrap().cache_enabled = false;
    let text = render(&[p.clone()], None, false, true);
    assert!(
        text.ends_with("\n3,500,10,0,100,10,600,20,5,1,2,3,4\n"),
        "{text}"
    );
    // Server stats available but missing for a point: zero server times, so the whole
    // client wait is unexplained.
    p.server = None;
    let text = render(&[p], None, false, true);
    assert!(
        text.ends_with("\n3,500,10,484,0,0,0,0,5,1,2,3,4\n"),
        "{text}"
    );
}

/// perf_analyzer's columns through `Client Recv` with server statistics (cache off).
const SERVER_COLS: &str = "Client Send,Network+Server Send/Recv,Server Queue,\
    Server Compute Input,Server Compute Infer,Server Compute Output,Client Recv";
const P4_COLS: &str = "p50 latency,p90 latency,p95 latency,p99 latency";
const GPU_COLS: &str =
    "Avg GPU Utilization,Avg GPU Power Usage,Max GPU Memory Usage,Total GPU Memory";

/// What a header case's points carry.
#[derive(Clone, Copy, Default)]
struct Case {
    rate: bool,
    decoupled: bool,
    metrics: bool,
    pct: Option<u32>,
    verbose: bool,
}

fn case_points(c: Case) -> Vec<PointReport> {
    let load = if c.rate {
        LoadValue::RequestRate(200.0)
    } else {
        LoadValue::Concurrency(1)
    };
    let mut p = point(load, 100.0, (3, 4), &[]);
    p.client.percentiles_ns = crate::measure::stats::percentile_set(c.pct)
        .into_iter()
        .map(|q| (q, u64::from(q) * 1000))
        .collect();
    if c.rate {
        p.client.schedule = Some(Default::default());
    }
    if c.decoupled {
        p.client.responses = Some(Default::default());
    }
    if c.metrics {
        p.metrics = Some(PointMetrics {
            client_cpu_pct: Some(12.5),
            ..Default::default()
        });
    }
    p.server = Some(ServerStats::default());
    vec![p]
}

/// The header perf_analyzer 2.50 writes for each flag combination on a Triton with the
/// statistics extension (every row was seen from the real perf_analyzer against
/// tritonserver 2.51). Open-loop points carry schedule data and points of a metrics run
/// carry metrics: neither may add a column by default.
///
/// Checks each `(case, header)`: the CSV's first line is `header` and the next row has
/// one cell per column.
fn check_default_headers(table: Vec<(Case, String)>) {
    for (case, want) in table {
        let text = render(&case_points(case), case.pct, case.verbose, true);
        let mut lines = text.lines();
        assert_eq!(lines.next().unwrap(), want);
        // Every row has exactly one cell per column; empty GPU cells stay empty as
        // perf_analyzer writes them on a server without GPU gauges.
        let row = lines.next().unwrap();
        assert_eq!(row.split(',').count(), want.split(',').count(), "{row}");
        if case.metrics && case.verbose {
            assert!(row.ends_with(",,,,"), "{row}");
        }
    }
}

#[test]
fn default_header_for_concurrency_and_rate() {
    let v = true;
    check_default_headers(vec![
        (
            Case::default(),
            format!("Concurrency,Inferences/Second,{SERVER_COLS},{P4_COLS}"),
        ),
        (
            Case {
                rate: true,
                ..Case::default()
            },
            format!("Request Rate,Inferences/Second,{SERVER_COLS},{P4_COLS}"),
        ),
        (
            Case {
                verbose: v,
                ..Case::default()
            },
            format!(
                "Concurrency,Inferences/Second,{SERVER_COLS},{P4_COLS},Avg latency,\
                     request/response,response wait"
            ),
        ),
        (
            Case {
                rate: true,
                verbose: v,
                ..Case::default()
            },
            format!(
                "Request Rate,Inferences/Second,{SERVER_COLS},{P4_COLS},Avg latency,\
                     request/response,response wait"
            ),
        ),
    ]);
}

#[test]
fn default_header_with_a_percentile() {
    let v = true;
    check_default_headers(vec![
        (
            Case {
                pct: Some(95),
                ..Case::default()
            },
            format!("Concurrency,Inferences/Second,{SERVER_COLS},{P4_COLS}"),
        ),
        (
            Case {
                pct: Some(95),
                verbose: v,
                ..Case::default()
            },
            format!(
                "Concurrency,Inferences/Second,{SERVER_COLS},{P4_COLS},request/response,\
                     response wait"
            ),
        ),
        (
            Case {
                pct: Some(75),
                verbose: v,
                ..Case::default()
            },
            format!(
                "Concurrency,Inferences/Second,{SERVER_COLS},p50 latency,p75 latency,\
                     p90 latency,p95 latency,p99 latency,request/response,response wait"
            ),
        ),
    ]);
}

#[test]
fn default_header_of_a_metrics_run() {
    let v = true;
    check_default_headers(vec![
        (
            Case {
                metrics: true,
                ..Case::default()
            },
            format!("Concurrency,Inferences/Second,{SERVER_COLS},{P4_COLS}"),
        ),
        (
            Case {
                metrics: true,
                verbose: v,
                ..Case::default()
            },
            format!(
                "Concurrency,Inferences/Second,{SERVER_COLS},{P4_COLS},Avg latency,\
                     request/response,response wait,{GPU_COLS}"
            ),
        ),
        (
            Case {
                rate: true,
                metrics: true,
                pct: Some(99),
                verbose: v,
                ..Case::default()
            },
            format!(
                "Request Rate,Inferences/Second,{SERVER_COLS},{P4_COLS},\
                     request/response,response wait,{GPU_COLS}"
            ),
        ),
    ]);
}

#[test]
fn default_header_of_a_decoupled_model() {
    let v = true;
    check_default_headers(vec![
        (
            Case {
                decoupled: true,
                ..Case::default()
            },
            format!("Concurrency,Inferences/Second,Response Throughput,{SERVER_COLS},{P4_COLS}"),
        ),
        (
            Case {
                decoupled: true,
                verbose: v,
                ..Case::default()
            },
            format!(
                "Concurrency,Inferences/Second,Response Throughput,{SERVER_COLS},{P4_COLS},\
                     Avg latency,request/response,response wait"
            ),
        ),
    ]);
}

#[test]
fn extra_columns_follow_perf_analyzers_columns() {
    let extra = |case: Case| {
        let text = render_with(&case_points(case), case.pct, case.verbose, true, true);
        let (header, row) = text.split_once('\n').unwrap();
        assert_eq!(
            header.split(',').count(),
            row.trim_end().split(',').count(),
            "{text}"
        );
        (header.to_string(), row.trim_end().to_string())
    };
    let plain = format!("Concurrency,Inferences/Second,{SERVER_COLS},{P4_COLS}");
    let (h, row) = extra(Case::default());
    assert_eq!(h, format!("{plain},Min latency,Max latency"));
    assert!(row.ends_with(",0,0"), "{row}");
    let (h, row) = extra(Case {
        metrics: true,
        verbose: true,
        ..Case::default()
    });
    assert_eq!(
        h,
        format!(
            "{plain},Avg latency,request/response,response wait,{GPU_COLS},Min latency,\
             Max latency,{CLIENT_CPU_CSV_COLUMN}"
        )
    );
    assert!(row.ends_with(",12.5"), "{row}");
    let (h, _) = extra(Case {
        rate: true,
        metrics: true,
        ..Case::default()
    });
    let rate_plain = plain.replace("Concurrency", "Request Rate");
    assert_eq!(
        h,
        format!(
            "{rate_plain},Min latency,Max latency,{},{CLIENT_CPU_CSV_COLUMN}",
            SCHEDULE_COLUMNS.join(",")
        )
    );
}
