//! `--collect-metrics` figures: the server's GPU metrics read from its
//! Prometheus endpoint, merged over the windows a point reports, and inferperf's own CPU use
//! over the same windows (inferperf only; perf_analyzer#326 asks for client CPU metrics).

use std::collections::BTreeMap;

use crate::clock::Clock;

/// The Prometheus metrics perf_analyzer reads, each one sample per `gpu_uuid` label.
pub const GPU_UTILIZATION: &str = "nv_gpu_utilization";
pub const GPU_POWER_USAGE: &str = "nv_gpu_power_usage";
pub const GPU_MEMORY_USED: &str = "nv_gpu_memory_used_bytes";
pub const GPU_MEMORY_TOTAL: &str = "nv_gpu_memory_total_bytes";
/// The label that names the GPU.
pub const GPU_LABEL: &str = "gpu_uuid";

/// The four GPU metrics, keyed by GPU uuid. `BTreeMap` keeps the uuids sorted, the order
/// perf_analyzer's `std::map` prints them in.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GpuMetrics {
    /// Utilization as a fraction (0..1).
    pub utilization: BTreeMap<String, f64>,
    /// Power draw in watts.
    pub power_watts: BTreeMap<String, f64>,
    pub memory_used_bytes: BTreeMap<String, u64>,
    pub memory_total_bytes: BTreeMap<String, u64>,
}

impl GpuMetrics {
    /// Picks the four metrics out of one scrape's samples, each given as (metric name, its
    /// `gpu_uuid` label, value). Samples without the label, non-finite values and negative
    /// byte counts are skipped; the first sample of a GPU wins.
    pub fn from_samples<'a>(
        samples: impl IntoIterator<Item = (&'a str, Option<&'a str>, f64)>,
    ) -> GpuMetrics {
        let mut m = GpuMetrics::default();
        for (name, uuid, value) in samples {
            let Some(uuid) = uuid else {
                continue;
            };
            if !value.is_finite() {
                continue;
            }
            let bytes = (value >= 0.0).then(|| value.round() as u64);
            let uuid = uuid.to_string();
            match (name, bytes) {
                (GPU_UTILIZATION, _) => {
                    m.utilization.entry(uuid).or_insert(value);
                }
                (GPU_POWER_USAGE, _) => {
                    m.power_watts.entry(uuid).or_insert(value);
                }
                (GPU_MEMORY_USED, Some(b)) => {
                    m.memory_used_bytes.entry(uuid).or_insert(b);
                }
                (GPU_MEMORY_TOTAL, Some(b)) => {
                    m.memory_total_bytes.entry(uuid).or_insert(b);
                }
                _ => {}
            }
        }
        m
    }

    /// The metrics this scrape has no GPU for, in perf_analyzer's warning order.
    pub fn missing(&self) -> Vec<&'static str> {
        let present = [
            (GPU_UTILIZATION, !self.utilization.is_empty()),
            (GPU_POWER_USAGE, !self.power_watts.is_empty()),
            (GPU_MEMORY_USED, !self.memory_used_bytes.is_empty()),
            (GPU_MEMORY_TOTAL, !self.memory_total_bytes.is_empty()),
        ];
        present
            .iter()
            .filter(|(_, here)| !here)
            .map(|(name, _)| *name)
            .collect()
    }
}

/// One scrape and when it finished (ns since the epoch, the run's clock).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GpuSample {
    pub at_ns: u64,
    pub metrics: GpuMetrics,
}

/// What `--collect-metrics` adds to a point.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PointMetrics {
    /// The GPU metrics merged over the point's reported windows.
    pub gpu: GpuMetrics,
    /// inferperf's process CPU time over wall time in those windows, in % of one core
    /// (200 = two cores busy); `None` when it could not be measured.
    pub client_cpu_pct: Option<f64>,
}

/// perf_analyzer's merge of every sample of the reported windows: utilization and power
/// are averaged per GPU (over the samples that have that GPU), memory used is the maximum,
/// and total memory is the first value seen.
pub fn merge_gpu(samples: &[&GpuMetrics]) -> GpuMetrics {
    let mut merged = GpuMetrics {
        utilization: mean_per_gpu(samples.iter().map(|s| &s.utilization)),
        power_watts: mean_per_gpu(samples.iter().map(|s| &s.power_watts)),
        ..GpuMetrics::default()
    };
    for s in samples {
        for (uuid, &used) in &s.memory_used_bytes {
            let max = merged.memory_used_bytes.entry(uuid.clone()).or_insert(used);
            *max = (*max).max(used);
        }
        for (uuid, &total) in &s.memory_total_bytes {
            merged
                .memory_total_bytes
                .entry(uuid.clone())
                .or_insert(total);
        }
    }
    merged
}

fn mean_per_gpu<'a>(
    maps: impl Iterator<Item = &'a BTreeMap<String, f64>>,
) -> BTreeMap<String, f64> {
    let mut sums: BTreeMap<String, (f64, u32)> = BTreeMap::new();
    for map in maps {
        for (uuid, &v) in map {
            let (sum, n) = sums.entry(uuid.clone()).or_insert((0.0, 0));
            *sum += v;
            *n += 1;
        }
    }
    sums.into_iter()
        .map(|(uuid, (sum, n))| (uuid, sum / f64::from(n)))
        .collect()
}

/// The scrapes that belong to the windows `span` (start, end ns, inclusive) covers: those
/// that finished inside it. When none did (a span shorter than the poll interval), the last
/// one before its end, or else the first one after, so a short point still reports values.
pub fn samples_in_span(samples: &[GpuSample], span: (u64, u64)) -> Vec<&GpuMetrics> {
    let (start, end) = span;
    let inside: Vec<&GpuMetrics> = samples
        .iter()
        .filter(|s| (start..=end).contains(&s.at_ns))
        .map(|s| &s.metrics)
        .collect();
    if !inside.is_empty() {
        return inside;
    }
    let before = samples.iter().rev().find(|s| s.at_ns <= end);
    before
        .or_else(|| samples.iter().find(|s| s.at_ns > end))
        .map(|s| vec![&s.metrics])
        .unwrap_or_default()
}

/// The process's CPU time at one moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuMark {
    /// Wall clock, ns since the epoch (the run's clock).
    pub at_ns: u64,
    /// CPU time of every thread of the process so far (ns).
    pub cpu_ns: u64,
}

impl CpuMark {
    pub fn now(clock: &Clock) -> CpuMark {
        CpuMark {
            at_ns: clock.now_ns(),
            cpu_ns: process_cpu_ns(),
        }
    }
}

/// CPU time of the whole process, all threads (ns); 0 if the clock cannot be read.
pub fn process_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime only writes into the timespec passed in.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0;
    }
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// CPU use over `span` in % of one core, from the marks taken around it (sorted by time):
/// the first and last mark inside the span when there are two, otherwise the last mark at
/// or before its start and the first at or after its end (or the outermost marks).
pub fn cpu_pct_in_span(marks: &[CpuMark], span: (u64, u64)) -> Option<f64> {
    let (start, end) = span;
    let inside: Vec<&CpuMark> = marks
        .iter()
        .filter(|m| (start..=end).contains(&m.at_ns))
        .collect();
    let (from, to) = match (inside.first(), inside.last()) {
        (Some(a), Some(b)) if b.at_ns > a.at_ns => (*a, *b),
        _ => {
            let from = marks
                .iter()
                .rev()
                .find(|m| m.at_ns <= start)
                .or(marks.first())?;
            let to = marks.iter().find(|m| m.at_ns >= end).or(marks.last())?;
            (from, to)
        }
    };
    let wall_ns = to.at_ns.checked_sub(from.at_ns).filter(|&w| w > 0)?;
    let cpu_ns = to.cpu_ns.saturating_sub(from.cpu_ns);
    Some(cpu_ns as f64 * 100.0 / wall_ns as f64)
}

#[cfg(test)]
#[path = "metrics_tests.rs"]
mod tests;
