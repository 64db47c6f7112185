//! `GET /metrics`: Prometheus metrics for two fake GPUs and the fake LLM, so `--collect-metrics`
//! and `profile --server-metrics-url` can be tested and demonstrated without a GPU.
//!
//! Three page styles, as the servers clients scrape write them: Triton's (`nv_...`, the
//! default `/metrics`), vLLM's (`vllm:...`) and the DCGM exporter's (`DCGM_FI_...`);
//! `--metrics-style` picks what `/metrics` serves and `/metrics/triton`, `/metrics/vllm`,
//! `/metrics/dcgm` always serve each one.
//!
//! The values are a pure function of the server's counters, so a test that reads them can
//! predict the page: N inferences served (summed over the Triton models), and the fake LLM's
//! [`LlmLoad`]: R generation requests in flight, F ended, P prompt and G generated tokens.
//! - GPU 0 ("busy"): utilization `min(1, (N mod 100) / 100 + R / KV_CAPACITY)`; power
//!   `50 + 250 * utilization` W; memory used `1 GiB + (N + G) * 4096` bytes (at most the
//!   total); total 80 GiB; energy `N + G` J since start.
//! - GPU 1 ("idle"): utilization 0, power 30 W, memory used 512 MiB, total 16 GiB, energy 0.
//! - Both: power limit 300 W.
//!
//! Triton's GPU lines carry exactly one label, `gpu_uuid`, as Triton writes them, so
//! perf_analyzer's regex reads them too; the per-model counters carry two.

use std::fmt::Write as _;

pub use super::llm::load::LlmCounts;
use super::reply::{Outcome, Reply};
use super::stats::Counters;

mod styles;

/// The exposition format's content type (version 0.0.4).
pub const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The fake GPUs' uuids, in the order they are written.
pub const FAKE_GPU_UUIDS: [&str; 2] = [
    "GPU-00000000-0000-4000-8000-000000000000",
    "GPU-11111111-1111-4111-8111-111111111111",
];

/// Generation requests the fake LLM's KV cache holds at once: the in-flight count over this
/// is the vLLM page's KV-cache usage (more are "waiting").
pub const KV_CAPACITY: u64 = 64;

const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;
/// GPU 0's memory grows by this much per inference served and per token generated (bytes).
const BYTES_PER_INFERENCE: u64 = 4096;
/// Power draw of GPU 0 at 0 and 100% utilization (W), and of the idle GPU 1.
const BUSY_IDLE_WATTS: f64 = 50.0;
const BUSY_FULL_WATTS: f64 = 300.0;
const IDLE_WATTS: f64 = 30.0;
const POWER_LIMIT_WATTS: f64 = 300.0;

/// Which server's metric names `/metrics` uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum MetricsStyle {
    /// Triton's `nv_gpu_*` gauges and per-model counters.
    #[default]
    Triton,
    /// vLLM's `vllm:*` scheduler, KV-cache and token metrics.
    Vllm,
    /// NVIDIA DCGM exporter's `DCGM_FI_DEV_*` fields, labelled per GPU.
    Dcgm,
}

/// Everything a page is computed from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PageInput {
    /// Inferences served by the Triton models (N).
    pub inferences: u64,
    pub llm: LlmCounts,
}

/// One fake GPU's readings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FakeGpu {
    pub uuid: &'static str,
    /// Fraction, 0..1.
    pub utilization: f64,
    pub power_watts: f64,
    pub power_limit_watts: f64,
    pub memory_used_bytes: u64,
    pub memory_total_bytes: u64,
    /// Joules since the server started.
    pub energy_joules: u64,
}

/// The two GPUs' readings for `input`.
pub fn fake_gpus(input: &PageInput) -> [FakeGpu; 2] {
    let n = input.inferences;
    let llm_share = input.llm.running as f64 / KV_CAPACITY as f64;
    let utilization = ((n % 100) as f64 / 100.0 + llm_share).min(1.0);
    let busy_total = 80 * GIB;
    let work = n.saturating_add(input.llm.generation_tokens);
    let busy = FakeGpu {
        uuid: FAKE_GPU_UUIDS[0],
        utilization,
        power_watts: BUSY_IDLE_WATTS + (BUSY_FULL_WATTS - BUSY_IDLE_WATTS) * utilization,
        power_limit_watts: POWER_LIMIT_WATTS,
        memory_used_bytes: GIB
            .saturating_add(work.saturating_mul(BYTES_PER_INFERENCE))
            .min(busy_total),
        memory_total_bytes: busy_total,
        energy_joules: work,
    };
    let idle = FakeGpu {
        uuid: FAKE_GPU_UUIDS[1],
        utilization: 0.0,
        power_watts: IDLE_WATTS,
        power_limit_watts: POWER_LIMIT_WATTS,
        memory_used_bytes: 512 * MIB,
        memory_total_bytes: 16 * GIB,
        energy_joules: 0,
    };
    [busy, idle]
}

/// The style a metrics path serves (`/metrics` serves `default`), or `None` for other paths.
pub fn style_of_path(path: &str, default: MetricsStyle) -> Option<MetricsStyle> {
    Some(match path {
        "/metrics" => default,
        "/metrics/triton" => MetricsStyle::Triton,
        "/metrics/vllm" => MetricsStyle::Vllm,
        "/metrics/dcgm" => MetricsStyle::Dcgm,
        _ => return None,
    })
}

/// Writes the `style` page for `counters` and the LLM's `llm` counts into `out`.
pub fn reply(style: MetricsStyle, counters: &Counters, llm: LlmCounts, out: &mut Vec<u8>) -> Reply {
    let input = PageInput {
        inferences: counters.per_model.iter().map(|m| m.inferences).sum(),
        llm,
    };
    let gpus = fake_gpus(&input);
    let page = match style {
        MetricsStyle::Triton => exposition(counters, &gpus),
        MetricsStyle::Vllm => styles::vllm(&input),
        MetricsStyle::Dcgm => styles::dcgm(&gpus),
    };
    out.extend_from_slice(page.as_bytes());
    Reply {
        status: 200,
        content_type: PROMETHEUS_TEXT,
        inference_header_len: None,
        outcome: Outcome::Plain,
    }
}

/// The Triton page: per-model counters, then the GPU gauges and the energy counter.
fn exposition(counters: &Counters, gpus: &[FakeGpu]) -> String {
    let mut page = String::new();
    family(
        &mut page,
        "nv_inference_request_success",
        "counter",
        "Number of successful inference requests, all batch sizes",
    );
    for m in &counters.per_model {
        let ok = m.infer_requests.saturating_sub(m.failures);
        let _ = writeln!(
            page,
            "nv_inference_request_success{{model=\"{}\",version=\"1\"}} {ok}",
            m.name
        );
    }
    family(
        &mut page,
        "nv_inference_count",
        "counter",
        "Number of inferences performed (does not include cached requests)",
    );
    for m in &counters.per_model {
        let _ = writeln!(
            page,
            "nv_inference_count{{model=\"{}\",version=\"1\"}} {}",
            m.name, m.inferences
        );
    }
    type Reading = fn(&FakeGpu) -> String;
    let gauges: [(&str, &str, &str, Reading); 6] = [
        (
            "nv_gpu_utilization",
            "gauge",
            "GPU utilization rate [0.0 - 1.0)",
            |g| g.utilization.to_string(),
        ),
        (
            "nv_gpu_power_usage",
            "gauge",
            "GPU power usage in watts",
            |g| g.power_watts.to_string(),
        ),
        (
            "nv_gpu_power_limit",
            "gauge",
            "GPU power management limit in watts",
            |g| g.power_limit_watts.to_string(),
        ),
        (
            "nv_energy_consumption",
            "counter",
            "GPU energy consumption in joules since the Triton Server started",
            |g| g.energy_joules.to_string(),
        ),
        (
            "nv_gpu_memory_used_bytes",
            "gauge",
            "GPU used memory, in bytes",
            |g| g.memory_used_bytes.to_string(),
        ),
        (
            "nv_gpu_memory_total_bytes",
            "gauge",
            "GPU total memory, in bytes",
            |g| g.memory_total_bytes.to_string(),
        ),
    ];
    for (name, kind, help, reading) in gauges {
        family(&mut page, name, kind, help);
        for g in gpus {
            let _ = writeln!(page, "{name}{{gpu_uuid=\"{}\"}} {}", g.uuid, reading(g));
        }
    }
    page
}

fn family(page: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(page, "# HELP {name} {help}");
    let _ = writeln!(page, "# TYPE {name} {kind}");
}

#[cfg(test)]
#[path = "metrics_tests.rs"]
mod tests;
