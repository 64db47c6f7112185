//! The three reports perf_analyzer users and tools read: the console text, the CSV (`-f`)
//! and the profile export JSON. Plain data in, text out; files are written through
//! [`write::write_atomic`] (temporary file, then rename).

pub mod console;
pub mod csv;
pub mod export;
pub mod fmt;
#[cfg(feature = "llm")]
pub mod html;
pub mod html_check;
pub mod llm;
pub mod metrics;
#[cfg(feature = "llm")]
pub mod plot;
mod server;
#[cfg(test)]
mod test_samples;
pub mod write;

use crate::measure::metrics::PointMetrics;
use crate::measure::server_stats::ServerStats;
use crate::measure::stats::ClientStats;

/// The load level of one sweep point.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LoadValue {
    /// Concurrent requests (closed loop).
    Concurrency(u64),
    /// Target requests per second (open loop).
    RequestRate(f64),
}

/// perf_analyzer's default load: concurrency 1.
impl Default for LoadValue {
    fn default() -> Self {
        LoadValue::Concurrency(1)
    }
}

impl LoadValue {
    /// The value as perf_analyzer prints it in the console and the CSV: an integer
    /// concurrency, or the rate in the default stream float format (`2000`, `12.5`).
    pub fn value_text(&self) -> String {
        match self {
            LoadValue::Concurrency(c) => c.to_string(),
            LoadValue::RequestRate(r) => fmt::fmt_g(*r),
        }
    }
}

/// One reported sweep point: its load, batch size and merged results.
#[derive(Clone, Debug, PartialEq)]
pub struct PointReport {
    pub load: LoadValue,
    pub batch_size: u64,
    pub client: ClientStats,
    /// Server-side deltas summed over the merged windows; `None` when the server has no
    /// `statistics` extension.
    pub server: Option<ServerStats>,
    /// `--collect-metrics`: the server's GPU metrics and inferperf's CPU use over the same windows.
    pub metrics: Option<PointMetrics>,
}

/// What the "*** Measurement Settings ***" banner states.
#[derive(Clone, Debug, PartialEq)]
pub struct Banner {
    pub batch_size: u64,
    /// "TRITON", "OPENAI", ... (perf_analyzer's upper-case kind names).
    pub service_kind: &'static str,
    pub warmup_request_count: u64,
    /// `--request-count` (0 = off).
    pub request_count: u64,
    /// `--measurement-mode count_windows`.
    pub count_windows: bool,
    pub percentile: Option<u32>,
    pub async_mode: bool,
    pub measurement_interval_ms: u64,
    pub measurement_request_count: u64,
    pub latency_threshold_ms: u64,
    /// Concurrency range end (0 = no limit) and start. The limit lines print only for a real
    /// sweep (end != 1 and end != start). In request-rate mode pass 1 for both.
    pub concurrency_end: u64,
    pub concurrency_start: u64,
    /// A decoupled model (many responses per request).
    pub decoupled: bool,
}

/// The request-rate part of the banner (see `console::banner_with_rate`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RateBanner {
    pub start: f64,
    /// 0.0 = no limit; equal to `start` (or 1.0) for a single rate: no limit lines.
    pub end: f64,
    /// `--request-distribution poisson` (else constant, printed "uniform").
    pub poisson: bool,
}
