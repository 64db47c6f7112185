//! The console report: settings banner, per-point blocks and the final summary.
//!
//! Layout is perf_analyzer's, line for line, so people and scripts that read its output can
//! read inferperf's. Two of its typos are fixed on purpose, because no known parser reads these
//! lines (Model Analyzer reads the CSV, GenAI-Perf the export): "Stabilizing using
//! p95throughput" gets its missing space, and "requests per seconds" becomes "per second"
//! (both listed in `docs/perf-analyzer-flags.md`, "What differs").
//! The one addition is the "Min latency: .., max latency: .." line after the percentiles.

use super::fmt::{fmt_g, fmt_pct2, us};
use super::server::server_block_with_composing;
use super::{Banner, LoadValue, PointReport, RateBanner};
use crate::measure::server_stats::ComposingStats;
use crate::measure::stats::{ClientStats, WindowStats};
use crate::measure::stats::{RxStats, ScheduleStats, RX_DELAY_WARN_NS};
use std::fmt::Write as _;

/// Above this client overhead (%) the numbers may be limited by the load generator itself.
/// perf_analyzer warns at 50 % of a crude "not idle" time; inferperf's is the workers' real CPU
/// time, and a worker at 50-90 % CPU still sends each request as soon as it can, so the warning
/// appears only when the workers are close to saturated.
pub const OVERHEAD_WARNING_PCT: f64 = 90.0;

/// The "*** Measurement Settings ***" banner, ending with a blank line (concurrency mode).
pub fn banner(b: &Banner) -> String {
    banner_with_rate(b, None)
}

/// The banner; `rate` adds request-rate mode's limit and distribution lines.
pub fn banner_with_rate(b: &Banner, rate: Option<&RateBanner>) -> String {
    let mut out = String::from("*** Measurement Settings ***\n");
    // 0: not printed (perf_analyzer prints it for Triton, or when -b is given).
    if b.batch_size > 0 {
        let _ = writeln!(out, "  Batch size: {}", b.batch_size);
    }
    let _ = writeln!(out, "  Service Kind: {}", b.service_kind);
    if b.warmup_request_count > 0 {
        let _ = writeln!(
            out,
            "  Sending {} warmup request{}",
            b.warmup_request_count,
            plural(b.warmup_request_count)
        );
    }
    if b.request_count != 0 {
        let n = b.request_count;
        let _ = writeln!(out, "  Sending {n} benchmark request{}", plural(n));
    } else {
        stabilization_lines(&mut out, b);
    }
    // perf_analyzer keys these on "end != 1" because a single `--concurrency-range 4` leaves
    // its end at the default 1; inferperf's CLI stores end = start there, so a single value (or
    // `2:2`, where perf_analyzer would print them) shows no sweep limits.
    if b.concurrency_end != 1 && b.concurrency_end != b.concurrency_start {
        let _ = writeln!(out, "  Latency limit: {} msec", b.latency_threshold_ms);
        if b.concurrency_end != 0 {
            let limit = b.concurrency_start.max(b.concurrency_end);
            let _ = writeln!(out, "  Concurrency limit: {limit} concurrent requests");
        }
    }
    if let Some(r) = rate {
        if r.end != 1.0 && r.end != r.start {
            let _ = writeln!(out, "  Latency limit: {} msec", b.latency_threshold_ms);
            if r.end != 0.0 {
                let limit = fmt_g(r.start.max(r.end));
                let _ = writeln!(out, "  Request Rate limit: {limit} requests per second");
            }
        }
        let dist = if r.poisson { "poisson" } else { "uniform" };
        let _ = writeln!(out, "  Using {dist} distribution on request generation");
    }
    let calls = if b.async_mode {
        "asynchronous"
    } else {
        "synchronous"
    };
    let _ = writeln!(out, "  Using {calls} calls for inference");
    if b.decoupled {
        // perf_analyzer says "using the first response" here but measures to the last one;
        // the banner says what is measured.
        out.push_str(
            "  Detected decoupled model, using the last response with outputs for measuring \
             latency\n",
        );
    }
    out.push('\n');
    out
}

fn plural(n: u64) -> &'static str {
    if n > 1 {
        "s"
    } else {
        ""
    }
}

/// Window mode, stabilizing metric and window size (replaced by "Sending N benchmark
/// requests" under `--request-count`).
fn stabilization_lines(out: &mut String, b: &Banner) {
    let mode = if b.count_windows {
        "count_windows"
    } else {
        "time_windows"
    };
    let _ = writeln!(out, "  Using \"{mode}\" mode for stabilization");
    // Async points may be accepted on throughput alone, hence the shorter wording.
    let metric = if b.async_mode {
        "throughput"
    } else {
        "latency and throughput"
    };
    match b.percentile {
        None => {
            let _ = writeln!(out, "  Stabilizing using average {metric}");
        }
        Some(p) => {
            let _ = writeln!(out, "  Stabilizing using p{p} {metric}");
        }
    }
    if b.count_windows {
        let n = b.measurement_request_count;
        let _ = writeln!(out, "  Minimum number of samples in each window: {n}");
    } else {
        let _ = writeln!(
            out,
            "  Measurement window: {} msec",
            b.measurement_interval_ms
        );
    }
}

/// The line that opens a sweep point.
pub fn point_header(load: &LoadValue) -> String {
    match load {
        LoadValue::Concurrency(c) => format!("Request concurrency: {c}\n"),
        LoadValue::RequestRate(r) => {
            format!(
                "Request Rate: {} inference requests per second\n",
                fmt_g(*r)
            )
        }
    }
}

/// The `-v` line for window `i` (1-based) of the current point.
pub fn pass_line(i: usize, w: &WindowStats, batch: u64, percentile: Option<u32>) -> String {
    let tput = fmt_g(w.throughput(batch));
    match percentile {
        Some(p) => {
            let lat = us(w.percentile_latency_ns(p));
            format!("  Pass [{i}] throughput: {tput} infer/sec. p{p} latency: {lat} usec\n")
        }
        None => format!(
            "  Pass [{i}] throughput: {tput} infer/sec. Avg latency: {} usec (std {} usec). \n",
            us(w.avg_latency_ns()),
            w.std_latency_us()
        ),
    }
}

/// Whose time the client block's library line reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientLibrary {
    /// "Avg HTTP time".
    Http,
    /// "Avg gRPC time".
    Grpc,
    /// The in-process C API: perf_analyzer prints the line's indent alone.
    InProcess,
}

/// `true`: HTTP, `false`: gRPC.
impl From<bool> for ClientLibrary {
    fn from(http: bool) -> ClientLibrary {
        if http {
            ClientLibrary::Http
        } else {
            ClientLibrary::Grpc
        }
    }
}

/// A point's "Client:" block, its "Server:" block when server stats exist, and the overhead
/// warning. `verbose` is the `-v` count; `library` picks the HTTP, gRPC or C API wording
/// (`true`: HTTP, `false`: gRPC).
pub fn point(
    p: &PointReport,
    percentile: Option<u32>,
    verbose: u8,
    library: impl Into<ClientLibrary>,
) -> String {
    let composing = p.server.as_ref().map_or(&[][..], |s| &s.composing[..]);
    point_with_composing(p, composing, percentile, verbose, library)
}

/// [`point`] for an ensemble (or a BLS model with `--bls-composing-models`): the "Server:"
/// block adds the composing models (see `measure::server_stats::composing_deltas`, merged
/// over the point's windows with `merge_composing`). Empty `composing` = [`point`].
pub fn point_with_composing(
    p: &PointReport,
    composing: &[ComposingStats],
    percentile: Option<u32>,
    verbose: u8,
    library: impl Into<ClientLibrary>,
) -> String {
    let library = library.into();
    let c = &p.client;
    let mut out = String::from("  Client: \n");
    let _ = writeln!(out, "    Request count: {}", c.request_count);
    if let Some(sched) = &c.schedule {
        out.push_str(&send_rate_lines(sched));
        if c.error_count > 0 {
            // Open loop rides out connections the server reset or closed (engine `Sink`).
            let _ = writeln!(
                out,
                "    [WARNING] {} requests failed in the measured windows (their connections \
                 were lost and reopened); the figures cover the {} that succeeded.",
                c.error_count, c.request_count
            );
        }
    }
    if let Some((count, rate)) = c.sequences {
        let _ = writeln!(out, "    Sequence count: {count} ({} seq/sec)", fmt_g(rate));
    }
    let _ = writeln!(out, "    Throughput: {} infer/sec", fmt_g(c.throughput));
    if let Some(r) = &c.responses {
        let _ = writeln!(
            out,
            "    Response Throughput: {} infer/sec",
            fmt_g(r.throughput)
        );
    }
    if verbose >= 1 {
        let _ = writeln!(
            out,
            "    Avg client overhead: {}%",
            fmt_pct2(c.overhead_pct)
        );
    }
    if percentile.is_none() {
        let avg = us(c.avg_latency_ns);
        let _ = writeln!(
            out,
            "    Avg latency: {avg} usec (standard deviation {} usec)",
            c.std_latency_us
        );
    }
    for (q, ns) in &c.percentiles_ns {
        let _ = writeln!(out, "    p{q} latency: {} usec", us(*ns));
    }
    let (min, max) = (us(c.min_latency_ns), us(c.max_latency_ns));
    let _ = writeln!(out, "    Min latency: {min} usec, max latency: {max} usec");
    match &c.responses {
        // Decoupled: perf_analyzer leaves out the library line (no per-call timing on a
        // stream); the two latencies it leaves to offline tools are printed instead.
        Some(r) => {
            let (first, gap) = (us(r.avg_first_response_ns), us(r.avg_response_gap_ns));
            let _ = writeln!(
                out,
                "    Avg first response latency: {first} usec, avg time between responses: \
                 {gap} usec"
            );
        }
        None => out.push_str(&library_line(c, verbose >= 1, library)),
    }
    if let Some(sched) = &c.schedule {
        out.push_str(&schedule_lines(sched));
    }
    if let Some(rx) = &c.rx {
        out.push_str(&rx_lines(rx));
    }
    if let Some(s) = &p.server {
        out.push_str(&server_block_with_composing(s, composing));
    }
    if let Some(m) = &p.metrics {
        out.push_str(&super::metrics::console_block(m));
    }
    if c.overhead_pct > OVERHEAD_WARNING_PCT {
        out.push_str(
            "[WARNING] Perf Analyzer is not able to keep up with the desired load. The results \
             may not be accurate.\n",
        );
    }
    out
}

/// Open loop: the achieved send rate, and the verdict on the schedule in place of
/// perf_analyzer's "N% of the requests were delayed" warning.
fn send_rate_lines(s: &ScheduleStats) -> String {
    let mut out = format!("    Avg send request rate: {:.2} infer/sec\n", s.send_rate);
    if !s.kept() {
        let _ = writeln!(
            out,
            "    [WARNING] inferperf did not keep the schedule: {:.2}% of the requests were \
             sent over 1 ms late (send lag p99 {} usec). Trust the latency from the intended \
             send time below. Sends wait while --max-inflight requests are in flight (default \
             {} per worker): raise it if the server can take more at once.",
            s.late_pct,
            us(s.lag_p99_ns),
            crate::config::PA_MAX_INFLIGHT
        );
    }
    out
}

/// Responses timed by kernel receive stamps: the client's own delay in reading them (not part
/// of the latency above), the share timed by the clock for want of a stamp, and a warning
/// when the delay's p99 is over `RX_DELAY_WARN_NS`.
fn rx_lines(rx: &RxStats) -> String {
    let mut out = String::new();
    if rx.kernel > 0 {
        let _ = writeln!(
            out,
            "    Client receive delay (kernel receive stamp to the client's read, not in the \
             latency): p50 {} usec, p99 {} usec, max {} usec",
            us(rx.delay_p50_ns),
            us(rx.delay_p99_ns),
            us(rx.delay_max_ns)
        );
    }
    if rx.clock > 0 {
        let _ = writeln!(
            out,
            "    Responses timed by the clock (no kernel receive stamp): {} of {} ({:.2}%)",
            rx.clock,
            rx.kernel + rx.clock,
            rx.clock_pct()
        );
    }
    if rx.late() {
        let _ = writeln!(
            out,
            "    [WARNING] The client was slow to read responses: client receive delay p99 {} \
             usec is over {} usec. Latency runs to the kernel's receive stamps and leaves \
             this delay out, but a client this busy may also send late.",
            us(rx.delay_p99_ns),
            us(RX_DELAY_WARN_NS)
        );
    }
    out
}

/// Open loop: the send lag and the latency from the intended send time.
fn schedule_lines(s: &ScheduleStats) -> String {
    format!(
        "    Send lag: p50 {} usec, p90 {} usec, p99 {} usec, max {} usec ({:.2}% over 1 ms)\n    \
         Latency from the intended send time: avg {} usec, p50 {} usec, p90 {} usec, p99 {} \
         usec, max {} usec\n",
        us(s.lag_p50_ns),
        us(s.lag_p90_ns),
        us(s.lag_p99_ns),
        us(s.lag_max_ns),
        s.late_pct,
        us(s.corrected_avg_ns),
        us(s.corrected_p50_ns),
        us(s.corrected_p90_ns),
        us(s.corrected_p99_ns),
        us(s.corrected_max_ns)
    )
}

/// "Avg HTTP time" / "Avg gRPC time": the client-side split of a request (µs, each average
/// truncated first; response wait = request - send - receive).
fn library_line(c: &ClientStats, verbose: bool, library: ClientLibrary) -> String {
    let http = match library {
        ClientLibrary::Http => true,
        ClientLibrary::Grpc => false,
        ClientLibrary::InProcess => return "    \n".into(),
    };
    let (request, send, recv) = (us(c.avg_request_ns), us(c.avg_send_ns), us(c.avg_recv_ns));
    let wait = request.saturating_sub(send).saturating_sub(recv);
    let split = match (http, verbose) {
        (true, false) => format!("send/recv {} usec + response wait {wait} usec", send + recv),
        (true, true) => {
            format!("send {send} usec + response wait {wait} usec + receive {recv} usec")
        }
        (false, false) => format!(
            "(un)marshal request/response {} usec + response wait {wait} usec",
            send + recv
        ),
        (false, true) => {
            format!("marshal {send} usec + response wait {wait} usec + unmarshal {recv} usec")
        }
    };
    let name = if http { "HTTP" } else { "gRPC" };
    format!("    Avg {name} time: {request} usec ({split})\n")
}

/// The closing "Inferences/Second vs. Client ... Batch Latency" table, one line per point
/// in the order given (probe order).
pub fn summary(points: &[PointReport], percentile: Option<u32>) -> String {
    let mut out = match percentile {
        None => String::from("Inferences/Second vs. Client Average Batch Latency\n"),
        Some(p) => format!("Inferences/Second vs. Client p{p} Batch Latency\n"),
    };
    for p in points {
        let label = match p.load {
            LoadValue::Concurrency(_) => "Concurrency",
            LoadValue::RequestRate(_) => "Request Rate",
        };
        let _ = writeln!(
            out,
            "{label}: {}, throughput: {} infer/sec, latency {} usec",
            p.load.value_text(),
            fmt_g(p.client.throughput),
            us(p.client.stabilizing_latency_ns)
        );
    }
    out
}

#[cfg(test)]
#[path = "console_tests.rs"]
mod tests;
