//! The CSV latency report (`-f`). Model Analyzer and user scripts parse this
//! file by column name, so by default its header, column order and number formats are
//! perf_analyzer's exactly for the same flags. inferperf's additions appear only with
//! `--csv-extra-columns`, after all of perf_analyzer's columns: `Min latency,Max latency`,
//! the open-loop schedule columns, the client's receive delay columns (responses timed by
//! kernel stamps), and with `--collect-metrics` the client CPU column.

use super::fmt::{fmt_g, us};
use super::metrics::{client_cpu_cell, gpu_csv_cells, CLIENT_CPU_CSV_COLUMN, GPU_CSV_COLUMNS};
use super::server::ServerAverages;
use super::{LoadValue, PointReport};
use crate::measure::metrics::PointMetrics;
use crate::measure::stats::percentile_set;
use std::io::{self, Write};

mod composing;
pub use composing::{composing_csv_path, write_composing_csv, write_composing_csvs};

/// Writes the header and one row per point, rows sorted by ascending throughput (as
/// perf_analyzer does). Nothing is written when there are no points.
/// `server_stats_available`: the server has the `statistics` extension (adds the server
/// columns; points without server numbers then show zeros there). `extra_columns`
/// (`--csv-extra-columns`): append inferperf's own columns after perf_analyzer's.
pub fn write_csv(
    w: &mut impl Write,
    points: &[PointReport],
    percentile: Option<u32>,
    verbose_csv: bool,
    extra_columns: bool,
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
        extra: extra_columns,
        schedule: extra_columns && points.iter().any(|p| p.client.schedule.is_some()),
        rx: extra_columns && points.iter().any(|p| p.client.rx.is_some()),
        metrics: points.iter().any(|p| p.metrics.is_some()),
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

/// Open loop, `--csv-extra-columns` (inferperf only): send lag and latency from the intended send
/// time, in µs, and the share of sends over 1 ms late in %.
const SCHEDULE_COLUMNS: [&str; 6] = [
    "Send lag p50",
    "Send lag p99",
    "Send lag max",
    "Avg latency from intended send",
    "p99 latency from intended send",
    "Late sends %",
];

/// `--csv-extra-columns` (inferperf only), where responses were timed by kernel receive
/// stamps: the client's own receive delay (stamp to the worker's read) p50 and p99 in µs,
/// and the share of responses timed by the clock for want of a stamp, in %.
const RX_COLUMNS: [&str; 3] = [
    "Client Recv Delay p50",
    "Client Recv Delay p99",
    "Clock-timed responses %",
];

/// The client-library split of a request as the CSV shows it (ns). A decoupled model's
/// request has no single send/receive exchange, and perf_analyzer writes 0 for all three
/// (so its whole latency beyond the server's time is `Network+Server Send/Recv`); so does
/// inferperf.
struct LibraryTimes {
    send_ns: u64,
    recv_ns: u64,
    request_ns: u64,
}

impl LibraryTimes {
    fn of(p: &PointReport) -> Self {
        let c = &p.client;
        if c.responses.is_some() {
            return Self {
                send_ns: 0,
                recv_ns: 0,
                request_ns: 0,
            };
        }
        Self {
            send_ns: c.avg_send_ns,
            recv_ns: c.avg_recv_ns,
            request_ns: c.avg_request_ns,
        }
    }
}

/// Which optional columns the file has.
struct Layout {
    percentiles: Vec<u32>,
    /// `Avg latency` (verbose CSV without `--percentile`).
    avg_column: bool,
    verbose: bool,
    server: bool,
    /// `Response Throughput` (decoupled models).
    responses: bool,
    /// `--csv-extra-columns`: `Min latency,Max latency` after perf_analyzer's columns.
    extra: bool,
    /// Open loop with `--csv-extra-columns`: send lag and latency from the intended send time.
    schedule: bool,
    /// `--csv-extra-columns` with kernel-stamped responses: the client's receive delay.
    rx: bool,
    /// `--collect-metrics`: perf_analyzer's GPU columns after `response wait` (with
    /// `--verbose-csv`), and with `--csv-extra-columns` inferperf's client CPU column last.
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
        }
        if self.extra {
            cols.extend(["Min latency", "Max latency"].map(String::from));
            if self.schedule {
                cols.extend(SCHEDULE_COLUMNS.map(String::from));
            }
            if self.rx {
                cols.extend(RX_COLUMNS.map(String::from));
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
        let lib = LibraryTimes::of(p);
        cells.push(us(lib.send_ns).to_string());
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
                .saturating_sub(lib.send_ns)
                .saturating_sub(lib.recv_ns);
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
        cells.push(us(lib.recv_ns).to_string());
        for &q in &self.percentiles {
            cells.push(us(c.percentile(q).unwrap_or(0)).to_string());
        }
        if self.verbose {
            let (request, send, recv) = (us(lib.request_ns), us(lib.send_ns), us(lib.recv_ns));
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
        }
        let no_metrics = PointMetrics::default();
        let metrics = p.metrics.as_ref().unwrap_or(&no_metrics);
        if self.verbose && self.metrics {
            cells.extend(gpu_csv_cells(&metrics.gpu));
        }
        if self.extra {
            self.extra_cells(&mut cells, p, metrics);
        }
        cells.join(",")
    }

    /// `--csv-extra-columns` (inferperf only): min/max latency, the open-loop schedule, the
    /// client's receive delay, client CPU.
    fn extra_cells(&self, cells: &mut Vec<String>, p: &PointReport, metrics: &PointMetrics) {
        let c = &p.client;
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
        if self.rx {
            let r = c.rx.clone().unwrap_or_default();
            cells.push(us(r.delay_p50_ns).to_string());
            cells.push(us(r.delay_p99_ns).to_string());
            cells.push(format!("{:.2}", r.clock_pct()));
        }
        if self.metrics {
            cells.push(client_cpu_cell(metrics));
        }
    }
}

#[cfg(test)]
#[path = "csv_tests.rs"]
mod tests;
