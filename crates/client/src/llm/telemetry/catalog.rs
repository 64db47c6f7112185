//! The Prometheus names `profile` recognises, from Triton, vLLM and the DCGM exporter, and
//! the common metric each one reads as (with the unit conversion), so a GPU's utilization
//! reads the same whichever server reported it.

use crate::protocol::prometheus::Exposition;

/// A gauge is summarised over the run (avg, min, max, percentiles); a counter by how much
/// it grew.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Gauge,
    Counter,
}

/// One metric as reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Metric {
    /// JSON key (GenAI-Perf's telemetry names where it has one).
    pub id: &'static str,
    /// Console and HTML row name.
    pub title: &'static str,
    pub unit: &'static str,
    pub kind: Kind,
}

const fn gauge(id: &'static str, title: &'static str, unit: &'static str) -> Metric {
    Metric {
        id,
        title,
        unit,
        kind: Kind::Gauge,
    }
}

const fn counter(id: &'static str, title: &'static str, unit: &'static str) -> Metric {
    Metric {
        id,
        title,
        unit,
        kind: Kind::Counter,
    }
}

/// Every metric, in report order; [`Source::metric`] indexes this.
pub const METRICS: [Metric; 19] = [
    gauge("gpu_utilization", "GPU Utilization", "%"),
    gauge("gpu_power_usage", "GPU Power Usage", "W"),
    gauge("gpu_power_limit", "GPU Power Limit", "W"),
    counter("energy_consumption", "GPU Energy Consumption", "J"),
    gauge("gpu_memory_used", "GPU Memory Used", "GB"),
    gauge("total_gpu_memory", "Total GPU Memory", "GB"),
    gauge("gpu_temperature", "GPU Temperature", "C"),
    gauge("kv_cache_usage", "KV Cache Usage", "%"),
    gauge("num_requests_running", "Requests Running", "count"),
    gauge("num_requests_waiting", "Requests Waiting", "count"),
    counter("request_success", "Requests Succeeded", "count"),
    counter("request_failure", "Requests Failed", "count"),
    counter("prompt_tokens", "Prompt Tokens", "tokens"),
    counter("generation_tokens", "Generation Tokens", "tokens"),
    counter("prefix_cache_queries", "Prefix Cache Queries", "tokens"),
    counter("prefix_cache_hits", "Prefix Cache Hits", "tokens"),
    counter("num_preemptions", "Preemptions", "count"),
    gauge("cpu_utilization", "CPU Utilization", "%"),
    gauge("cpu_memory_used", "CPU Memory Used", "GB"),
];

/// Index into [`METRICS`] by id (the ids are constants, so a miss is a programming error
/// caught by the catalogue test).
const fn at(id: &str) -> usize {
    let mut i = 0;
    while i < METRICS.len() {
        if const_eq(METRICS[i].id, id) {
            return i;
        }
        i += 1;
    }
    usize::MAX
}

const fn const_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// A Prometheus name and how it reads as a [`Metric`].
#[derive(Clone, Copy, Debug)]
pub struct Source {
    pub name: &'static str,
    pub metric: usize,
    /// Multiplies the value into the metric's unit.
    pub scale: f64,
    /// Labels naming the series (the GPU, or the model), the first present wins; samples of
    /// one name and series are summed over their other labels (vLLM's `finished_reason`).
    pub series_labels: &'static [&'static str],
}

const TRITON_GPU: &[&str] = &["gpu_uuid"];
const TRITON_MODEL: &[&str] = &["model"];
const NONE: &[&str] = &[];
const VLLM: &[&str] = &["model_name", "engine"];
const DCGM_GPU: &[&str] = &["UUID", "gpu"];
const BYTES_TO_GB: f64 = 1e-9;
const MIB_TO_GB: f64 = 1_048_576.0 * 1e-9;

const fn src(name: &'static str, id: &str, scale: f64, labels: &'static [&'static str]) -> Source {
    Source {
        name,
        metric: at(id),
        scale,
        series_labels: labels,
    }
}

/// Every recognised name.
pub const SOURCES: [Source; 29] = [
    // Triton (GPU gauges in fractions, watts, bytes; energy in joules; per-model counters).
    src("nv_gpu_utilization", "gpu_utilization", 100.0, TRITON_GPU),
    src("nv_gpu_power_usage", "gpu_power_usage", 1.0, TRITON_GPU),
    src("nv_gpu_power_limit", "gpu_power_limit", 1.0, TRITON_GPU),
    src(
        "nv_energy_consumption",
        "energy_consumption",
        1.0,
        TRITON_GPU,
    ),
    src(
        "nv_gpu_memory_used_bytes",
        "gpu_memory_used",
        BYTES_TO_GB,
        TRITON_GPU,
    ),
    src(
        "nv_gpu_memory_total_bytes",
        "total_gpu_memory",
        BYTES_TO_GB,
        TRITON_GPU,
    ),
    src(
        "nv_inference_request_success",
        "request_success",
        1.0,
        TRITON_MODEL,
    ),
    src(
        "nv_inference_request_failure",
        "request_failure",
        1.0,
        TRITON_MODEL,
    ),
    src(
        "nv_inference_pending_request_count",
        "num_requests_waiting",
        1.0,
        TRITON_MODEL,
    ),
    // Triton without a GPU reports the host instead.
    src("nv_cpu_utilization", "cpu_utilization", 100.0, NONE),
    src(
        "nv_cpu_memory_used_bytes",
        "cpu_memory_used",
        BYTES_TO_GB,
        NONE,
    ),
    // vLLM (KV-cache usage as a fraction; both the old and the new names).
    src("vllm:kv_cache_usage_perc", "kv_cache_usage", 100.0, VLLM),
    src("vllm:gpu_cache_usage_perc", "kv_cache_usage", 100.0, VLLM),
    src(
        "vllm:num_requests_running",
        "num_requests_running",
        1.0,
        VLLM,
    ),
    src(
        "vllm:num_requests_waiting",
        "num_requests_waiting",
        1.0,
        VLLM,
    ),
    src("vllm:request_success_total", "request_success", 1.0, VLLM),
    src("vllm:prompt_tokens_total", "prompt_tokens", 1.0, VLLM),
    src(
        "vllm:generation_tokens_total",
        "generation_tokens",
        1.0,
        VLLM,
    ),
    src(
        "vllm:prefix_cache_queries_total",
        "prefix_cache_queries",
        1.0,
        VLLM,
    ),
    src(
        "vllm:prefix_cache_hits_total",
        "prefix_cache_hits",
        1.0,
        VLLM,
    ),
    src(
        "vllm:gpu_prefix_cache_queries_total",
        "prefix_cache_queries",
        1.0,
        VLLM,
    ),
    src(
        "vllm:gpu_prefix_cache_hits_total",
        "prefix_cache_hits",
        1.0,
        VLLM,
    ),
    src("vllm:num_preemptions_total", "num_preemptions", 1.0, VLLM),
    // DCGM exporter (utilization in %, frame buffer in MiB, energy in mJ).
    src("DCGM_FI_DEV_GPU_UTIL", "gpu_utilization", 1.0, DCGM_GPU),
    src("DCGM_FI_DEV_POWER_USAGE", "gpu_power_usage", 1.0, DCGM_GPU),
    src(
        "DCGM_FI_DEV_POWER_MGMT_LIMIT",
        "gpu_power_limit",
        1.0,
        DCGM_GPU,
    ),
    src(
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "energy_consumption",
        1e-3,
        DCGM_GPU,
    ),
    src(
        "DCGM_FI_DEV_FB_USED",
        "gpu_memory_used",
        MIB_TO_GB,
        DCGM_GPU,
    ),
    src("DCGM_FI_DEV_GPU_TEMP", "gpu_temperature", 1.0, DCGM_GPU),
];

/// The source of a Prometheus name, if it is one we read.
pub fn source(name: &str) -> Option<&'static Source> {
    SOURCES.iter().find(|s| s.name == name)
}

/// One value read from a scrape: the metric, its series (label value, empty when the
/// sample has none of the source's labels) and the value in the metric's unit.
#[derive(Clone, Debug, PartialEq)]
pub struct Reading {
    pub metric: usize,
    pub series: String,
    pub value: f64,
}

/// Series one scrape may hold; a page with more (labels made up per request, a hostile
/// peer) keeps the first ones, so memory and time stay bounded.
pub const MAX_SERIES: usize = 256;

/// The recognised values of one scrape. Samples of one name and series are summed; when two
/// names read as the same metric and series (vLLM's old and new KV-cache names), the first
/// name on the page wins. Non-finite values are skipped; at most [`MAX_SERIES`] series.
pub fn readings(exposition: &Exposition) -> Vec<Reading> {
    let mut out: Vec<(&'static str, Reading)> = Vec::new();
    for sample in &exposition.samples {
        let Some(src) = source(&sample.name) else {
            continue;
        };
        if !sample.value.is_finite() {
            continue;
        }
        let series = src
            .series_labels
            .iter()
            .find_map(|l| sample.label(l))
            .unwrap_or("");
        let value = sample.value * src.scale;
        let full = out.len() >= MAX_SERIES;
        let same = out
            .iter_mut()
            .find(|(_, r)| r.metric == src.metric && r.series == series);
        match same {
            Some((name, r)) if *name == src.name => r.value += value,
            Some(_) => {}
            None if full => {}
            None => out.push((
                src.name,
                Reading {
                    metric: src.metric,
                    series: series.to_string(),
                    value,
                },
            )),
        }
    }
    out.into_iter().map(|(_, r)| r).collect()
}
