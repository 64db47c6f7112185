//! The vLLM-style and DCGM-exporter-style `/metrics` pages (see `metrics.rs` for the values).

use std::fmt::Write as _;

use super::{family, FakeGpu, PageInput, KV_CAPACITY, MIB};

/// The model name the vLLM page labels its metrics with.
const VLLM_MODEL: &str = "inferperf-llm";
/// The DCGM page's host and GPU model labels.
const DCGM_HOST: &str = "inferperf";
const DCGM_MODEL: &str = "Inferperf Fake GPU";

/// vLLM's page: scheduler gauges (running, waiting), KV-cache usage as a fraction, and the
/// request, token and prefix-cache counters. The fake LLM has no prefix cache: every prompt
/// token is a query and none a hit.
pub fn vllm(input: &PageInput) -> String {
    let llm = input.llm;
    let running = llm.running.min(KV_CAPACITY);
    let waiting = llm.running - running;
    let usage = running as f64 / KV_CAPACITY as f64;
    let labels = format!("engine=\"0\",model_name=\"{VLLM_MODEL}\"");
    let mut page = String::new();
    let rows: [(&str, &str, &str, String); 8] = [
        (
            "vllm:num_requests_running",
            "gauge",
            "Number of requests in model execution batches.",
            running.to_string(),
        ),
        (
            "vllm:num_requests_waiting",
            "gauge",
            "Number of requests waiting to be processed.",
            waiting.to_string(),
        ),
        (
            "vllm:kv_cache_usage_perc",
            "gauge",
            "KV-cache usage. 1 means 100 percent usage.",
            usage.to_string(),
        ),
        (
            "vllm:prompt_tokens_total",
            "counter",
            "Number of prefill tokens processed.",
            llm.prompt_tokens.to_string(),
        ),
        (
            "vllm:generation_tokens_total",
            "counter",
            "Number of generation tokens processed.",
            llm.generation_tokens.to_string(),
        ),
        (
            "vllm:prefix_cache_queries_total",
            "counter",
            "Prefix cache queries, in terms of number of queried tokens.",
            llm.prompt_tokens.to_string(),
        ),
        (
            "vllm:prefix_cache_hits_total",
            "counter",
            "Prefix cache hits, in terms of number of cached tokens.",
            "0".to_string(),
        ),
        (
            "vllm:num_preemptions_total",
            "counter",
            "Cumulative number of preemption from the engine.",
            "0".to_string(),
        ),
    ];
    for (name, kind, help, value) in rows {
        family(&mut page, name, kind, help);
        let _ = writeln!(page, "{name}{{{labels}}} {value}");
    }
    let name = "vllm:request_success_total";
    family(
        &mut page,
        name,
        "counter",
        "Count of successfully processed requests.",
    );
    // vLLM splits by finish reason; the fake LLM always stops at max_tokens.
    for (reason, count) in [("length", llm.ended), ("stop", 0)] {
        let _ = writeln!(
            page,
            "{name}{{{labels},finished_reason=\"{reason}\"}} {count}"
        );
    }
    page
}

/// The DCGM exporter's page: one line per field and GPU, labelled `gpu`, `UUID`, `device`,
/// `modelName` and `Hostname` as dcgm-exporter writes them; utilization in %, frame-buffer
/// memory in MiB, energy in mJ.
pub fn dcgm(gpus: &[FakeGpu]) -> String {
    type Reading = fn(&FakeGpu) -> String;
    let fields: [(&str, &str, &str, Reading); 7] = [
        (
            "DCGM_FI_DEV_GPU_UTIL",
            "gauge",
            "GPU utilization (in %).",
            |g| format!("{}", (g.utilization * 100.0).round()),
        ),
        (
            "DCGM_FI_DEV_POWER_USAGE",
            "gauge",
            "Power draw (in W).",
            |g| format!("{:.3}", g.power_watts),
        ),
        (
            "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
            "counter",
            "Total energy consumption since boot (in mJ).",
            |g| (g.energy_joules * 1000).to_string(),
        ),
        (
            "DCGM_FI_DEV_FB_USED",
            "gauge",
            "Framebuffer memory used (in MiB).",
            |g| (g.memory_used_bytes / MIB).to_string(),
        ),
        (
            "DCGM_FI_DEV_FB_FREE",
            "gauge",
            "Framebuffer memory free (in MiB).",
            |g| ((g.memory_total_bytes - g.memory_used_bytes) / MIB).to_string(),
        ),
        (
            "DCGM_FI_DEV_GPU_TEMP",
            "gauge",
            "GPU temperature (in C).",
            |g| format!("{}", (40.0 + 40.0 * g.utilization).round()),
        ),
        (
            "DCGM_FI_DEV_POWER_MGMT_LIMIT",
            "gauge",
            "Power management limit (in W).",
            |g| format!("{}", g.power_limit_watts),
        ),
    ];
    let mut page = String::new();
    for (name, kind, help, reading) in fields {
        family(&mut page, name, kind, help);
        for (i, g) in gpus.iter().enumerate() {
            let _ = writeln!(
                page,
                "{name}{{gpu=\"{i}\",UUID=\"{}\",device=\"nvidia{i}\",modelName=\"{DCGM_MODEL}\",Hostname=\"{DCGM_HOST}\"}} {}",
                g.uuid,
                reading(g)
            );
        }
    }
    page
}
