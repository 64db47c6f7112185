//! The CSV latency report (`-f`, spec §3.2). Model Analyzer parses this file, so columns,
//! order and number formats are perf_analyzer's exactly; our additions come after its
//! columns at the end of `--verbose-csv` rows: `Min latency,Max latency`, the open-loop
//! schedule columns, and with `--collect-metrics` the client CPU column.

use super::fmt::{fmt_g, us};
use super::metrics::{client_cpu_cell, gpu_csv_cells, CLIENT_CPU_CSV_COLUMN, GPU_CSV_COLUMNS};
use super::server::ServerAverages;
use super::{LoadValue, PointReport};
use crate::measure::metrics::PointMetrics;
use crate::measure::stats::percentile_set;
use std::io::{self, Write};

#[path = "csv_composing.rs"]
mod composing;
pub use composing::{composing_csv_path, write_composing_csv, write_composing_csvs};

/// Writes the header and one row per point, rows sorted by ascending throughput (as
/// perf_analyzer does). Nothing is written when there are no points.
/// `server_stats_available`: the server has the `statistics` extension (adds the server
/// columns; points without server numbers then show zeros there).
pub fn write_csv(
    w: &mut impl Write,
    points: &[PointReport],
    percentile: Option<u32>,
    verbose_csv: bool,
    server_stats_available: bool,
) -> io::Result<()> {
    let Some(first) = points.first() else {
        return Ok(());
    };
    let layout = Layout {
        percentiles: percentile_set(percentile),
        avg_column: verbose_csv && percentile.is_none(),
        verbose: verbose_csv,
        server: server_stats_available,
        responses: points.iter().any(|p| p.client.responses.is_some()),
        schedule: verbose_csv && points.iter().any(|p| p.client.schedule.is_some()),
        metrics: verbose_csv && points.iter().any(|p| p.metrics.is_some()),
        cache: server_stats_available
            && points
                .iter()
                .any(|p| p.server.as_ref().is_some_and(|s| s.cache_enabled)),
    };
    writeln!(w, "{}", layout.header(&first.load))?;
    let mut sorted: Vec<&PointReport> = points.iter().collect();
    sorted.sort_by(|a, b| a.client.throughput.total_cmp(&b.client.throughput));
    for p in sorted {
        writeln!(w, "{}", layout.row(p))?;
    }
    Ok(())
}

/// Open loop, `--verbose-csv` (ours): send lag and latency from the intended send time, in
/// µs, and the share of sends over 1 ms late in %.
const SCHEDULE_COLUMNS: [&str; 6] = [
    "Send lag p50",
    "Send lag p99",
    "Send lag max",
    "Avg latency from intended send",
    "p99 latency from intended send",
    "Late sends %",
];

/// Which optional columns the file has.
struct Layout {
    percentiles: Vec<u32>,
    /// `Avg latency` (verbose CSV without `--percentile`).
    avg_column: bool,
    verbose: bool,
    server: bool,
    /// `Response Throughput` (decoupled models).
    responses: bool,
    /// Open loop, `--verbose-csv`: send lag and latency from the intended send time.
    schedule: bool,
    /// `--collect-metrics` with `--verbose-csv`: perf_analyzer's GPU columns after
    /// `response wait`, and our client CPU column last.
    metrics: bool,
    cache: bool,
}

impl Layout {
    fn header(&self, load: &LoadValue) -> String {
        let mut cols: Vec<String> = vec![
            match load {
                LoadValue::Concurrency(_) => "Concurrency",
                LoadValue::RequestRate(_) => "Request Rate",
            }
            .into(),
            "Inferences/Second".into(),
        ];
        if self.responses {
            cols.push("Response Throughput".into());
        }
        cols.push("Client Send".into());
        if self.server {
            cols.extend(
                [
                    "Network+Server Send/Recv",
                    "Server Queue",
                    "Server Compute Input",
                    "Server Compute Infer",
                    "Server Compute Output",
                ]
                .map(String::from),
            );
            if self.cache {
                cols.extend(["Server Cache Hit", "Server Cache Miss"].map(String::from));
            }
        }
        cols.push("Client Recv".into());
        cols.extend(self.percentiles.iter().map(|p| format!("p{p} latency")));
        if self.verbose {
            if self.avg_column {
                cols.push("Avg latency".into());
            }
            cols.extend(["request/response", "response wait"].map(String::from));
            if self.metrics {
                cols.extend(GPU_CSV_COLUMNS.map(String::from));
            }
            cols.extend(["Min latency", "Max latency"].map(String::from));
            if self.schedule {
                cols.extend(SCHEDULE_COLUMNS.map(String::from));
            }
            if self.metrics {
                cols.push(CLIENT_CPU_CSV_COLUMN.into());
            }
        }
        cols.join(",")
    }

    fn row(&self, p: &PointReport) -> String {
        let c = &p.client;
        let mut cells: Vec<String> = vec![p.load.value_text(), fmt_g(c.throughput)];
        if self.responses {
            let rate = c.responses.as_ref().map_or(0.0, |r| r.throughput);
            cells.push(fmt_g(rate));
        }
        cells.push(us(c.avg_send_ns).to_string());
        if self.server {
            let a = p
                .server
                .as_ref()
                .map(ServerAverages::of)
                .unwrap_or_default();
            // Client wait not explained by server queue/compute/cache time; computed in ns
            // and clamped at 0 because client and server clocks measure different spans.
            let client_wait = c
                .avg_latency_ns
                .saturating_sub(c.avg_send_ns)
                .saturating_sub(c.avg_recv_ns);
            let accounted = a.queue_ns + a.compute_ns + a.cache_hit_ns + a.cache_miss_ns;
            let mut server_cells = vec![
                client_wait.saturating_sub(accounted),
                a.queue_ns,
                a.compute_input_ns,
                a.compute_infer_ns,
                a.compute_output_ns,
            ];
            if self.cache {
                server_cells.extend([a.cache_hit_ns, a.cache_miss_ns]);
            }
            cells.extend(server_cells.into_iter().map(|ns| us(ns).to_string()));
        }
        cells.push(us(c.avg_recv_ns).to_string());
        for &q in &self.percentiles {
            cells.push(us(c.percentile(q).unwrap_or(0)).to_string());
        }
        if self.verbose {
            let (request, send, recv) =
                (us(c.avg_request_ns), us(c.avg_send_ns), us(c.avg_recv_ns));
            if self.avg_column {
                cells.push(us(c.avg_latency_ns).to_string());
            }
            cells.push((send + recv).to_string());
            cells.push(
                request
                    .saturating_sub(send)
                    .saturating_sub(recv)
                    .to_string(),
            );
            let no_metrics = PointMetrics::default();
            let metrics = p.metrics.as_ref().unwrap_or(&no_metrics);
            if self.metrics {
                cells.extend(gpu_csv_cells(&metrics.gpu));
            }
            cells.push(us(c.min_latency_ns).to_string());
            cells.push(us(c.max_latency_ns).to_string());
            if self.schedule {
                let s = c.schedule.clone().unwrap_or_default();
                let ns = [
                    s.lag_p50_ns,
                    s.lag_p99_ns,
                    s.lag_max_ns,
                    s.corrected_avg_ns,
                    s.corrected_p99_ns,
                ];
                cells.extend(ns.iter().map(|v| us(*v).to_string()));
                cells.push(format!("{:.2}", s.late_pct));
            }
            if self.metrics {
                cells.push(client_cpu_cell(metrics));
            }
        }
        cells.join(",")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::server_stats::{ModelStats, ServerStats, StatDuration};
    use crate::measure::stats::ClientStats;
    use crate::report::test_samples::*;

    /// A point with the given µs numbers (+ sub-µs noise that must be truncated).
    fn point(
        load: LoadValue,
        tput: f64,
        send_recv: (u64, u64),
        pcts: &[(u32, u64)],
    ) -> PointReport {
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
        let mut out = Vec::new();
        write_csv(&mut out, points, pct, verbose, server).unwrap();
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
        assert_eq!(lines.next(), Some("2,100,1200.5,3,4,10,20,30,40"));
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
    fn verbose_percentile_matches_sample_plus_min_max() {
        let mut p = point(
            LoadValue::Concurrency(4),
            28077.6,
            (51, 0),
            &pcts([92, 169, 201, 296]),
        );
        p.client.avg_request_ns = 106_400;
        p.client.min_latency_ns = 41_999;
        p.client.max_latency_ns = 2_000_000;
        let want = HTTP_ASYNC_C4_VERBOSE_P95_CSV
            .replace("response wait\n", "response wait,Min latency,Max latency\n")
            .replace(",51,55\n", ",51,55,41,2000\n");
        assert_eq!(render(&[p], Some(95), true, false), want);
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
        let text = render(&[p], None, true, false);
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
}
