//! `GET /metrics`: Triton-style Prometheus metrics for two fake GPUs, so `--collect-metrics`
//! can be tested and demonstrated without a GPU.
//!
//! The values are a pure function of the inferences served so far (N, summed over models),
//! so a test that reads the server's counters can predict them:
//! - GPU 0 ("busy"): utilization `(N mod 100) / 100`; power `50 + 250 * utilization` W;
//!   memory used `1 GiB + N * 4096` bytes (at most the total); total 80 GiB.
//! - GPU 1 ("idle"): utilization 0, power 30 W, memory used 512 MiB, total 16 GiB.
//! - Both: power limit 300 W.
//!
//! The GPU lines carry exactly one label, `gpu_uuid`, as Triton writes them, so
//! perf_analyzer's regex reads them too; the per-model counters carry two.

use std::fmt::Write as _;

use super::reply::{Outcome, Reply};
use super::stats::Counters;

/// The exposition format's content type (version 0.0.4).
pub const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The fake GPUs' uuids, in the order they are written.
pub const FAKE_GPU_UUIDS: [&str; 2] = [
    "GPU-00000000-0000-4000-8000-000000000000",
    "GPU-11111111-1111-4111-8111-111111111111",
];

const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;
/// GPU 0's memory grows by this much per inference served (bytes).
const BYTES_PER_INFERENCE: u64 = 4096;
/// Power draw of GPU 0 at 0 and 100% utilization (W), and of the idle GPU 1.
const BUSY_IDLE_WATTS: f64 = 50.0;
const BUSY_FULL_WATTS: f64 = 300.0;
const IDLE_WATTS: f64 = 30.0;
const POWER_LIMIT_WATTS: f64 = 300.0;

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
}

/// The two GPUs' readings after `inferences` inferences.
pub fn fake_gpus(inferences: u64) -> [FakeGpu; 2] {
    let utilization = (inferences % 100) as f64 / 100.0;
    let busy_total = 80 * GIB;
    let busy = FakeGpu {
        uuid: FAKE_GPU_UUIDS[0],
        utilization,
        power_watts: BUSY_IDLE_WATTS + (BUSY_FULL_WATTS - BUSY_IDLE_WATTS) * utilization,
        power_limit_watts: POWER_LIMIT_WATTS,
        memory_used_bytes: GIB
            .saturating_add(inferences.saturating_mul(BYTES_PER_INFERENCE))
            .min(busy_total),
        memory_total_bytes: busy_total,
    };
    let idle = FakeGpu {
        uuid: FAKE_GPU_UUIDS[1],
        utilization: 0.0,
        power_watts: IDLE_WATTS,
        power_limit_watts: POWER_LIMIT_WATTS,
        memory_used_bytes: 512 * MIB,
        memory_total_bytes: 16 * GIB,
    };
    [busy, idle]
}

/// Writes the `/metrics` page for `counters` into `out`.
pub fn reply(counters: &Counters, out: &mut Vec<u8>) -> Reply {
    let inferences: u64 = counters.per_model.iter().map(|m| m.inferences).sum();
    out.extend_from_slice(exposition(counters, &fake_gpus(inferences)).as_bytes());
    Reply {
        status: 200,
        content_type: PROMETHEUS_TEXT,
        inference_header_len: None,
        outcome: Outcome::Plain,
    }
}

/// The page text: per-model counters, then the GPU gauges.
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
    let gauges: [(&str, &str, Reading); 5] = [
        (
            "nv_gpu_utilization",
            "GPU utilization rate [0.0 - 1.0)",
            |g| g.utilization.to_string(),
        ),
        ("nv_gpu_power_usage", "GPU power usage in watts", |g| {
            g.power_watts.to_string()
        }),
        (
            "nv_gpu_power_limit",
            "GPU power management limit in watts",
            |g| g.power_limit_watts.to_string(),
        ),
        (
            "nv_gpu_memory_used_bytes",
            "GPU used memory, in bytes",
            |g| g.memory_used_bytes.to_string(),
        ),
        (
            "nv_gpu_memory_total_bytes",
            "GPU total memory, in bytes",
            |g| g.memory_total_bytes.to_string(),
        ),
    ];
    for (name, help, reading) in gauges {
        family(&mut page, name, "gauge", help);
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
mod tests {
    use super::*;
    use crate::stats::ModelCounters;
    use inferperf_client::measure::metrics::{GpuMetrics, GPU_LABEL};
    use inferperf_client::protocol::prometheus::parse;

    fn counters(per_model: &[(&str, u64, u64)]) -> Counters {
        Counters {
            per_model: per_model
                .iter()
                .map(|&(name, requests, inferences)| ModelCounters {
                    name: name.into(),
                    infer_requests: requests,
                    inferences,
                    ..ModelCounters::default()
                })
                .collect(),
            ..Counters::default()
        }
    }

    #[test]
    fn gpu_values_follow_the_inference_count() {
        // (inferences, GPU 0 utilization, power, memory used)
        let cases: &[(u64, f64, f64, u64)] = &[
            (0, 0.0, 50.0, GIB),
            (37, 0.37, 142.5, GIB + 37 * 4096),
            (100, 0.0, 50.0, GIB + 100 * 4096),
            (199, 0.99, 297.5, GIB + 199 * 4096),
            (u64::MAX, 0.15, 87.5, 80 * GIB),
        ];
        for &(n, util, watts, used) in cases {
            let [busy, idle] = fake_gpus(n);
            assert!((busy.utilization - util).abs() < 1e-12, "{n}");
            assert!((busy.power_watts - watts).abs() < 1e-9, "{n}");
            assert_eq!(busy.memory_used_bytes, used, "{n}");
            assert_eq!(busy.memory_total_bytes, 85_899_345_920);
            assert_eq!(idle, fake_gpus(0)[1], "the idle GPU never changes");
        }
    }

    #[test]
    fn page_parses_and_carries_the_four_metrics() {
        let mut out = Vec::new();
        let c = counters(&[("simple", 40, 37), ("identity", 0, 0)]);
        let r = reply(&c, &mut out);
        assert_eq!((r.status, r.content_type), (200, PROMETHEUS_TEXT));
        let exposition = parse(&out).expect("our page parses");
        let m = GpuMetrics::from_samples(exposition.samples_by_label(GPU_LABEL));
        assert_eq!(m.utilization[FAKE_GPU_UUIDS[0]], 0.37);
        assert_eq!(m.utilization[FAKE_GPU_UUIDS[1]], 0.0);
        assert_eq!(m.power_watts[FAKE_GPU_UUIDS[0]], 142.5);
        assert_eq!(m.memory_used_bytes[FAKE_GPU_UUIDS[1]], 512 * MIB);
        assert_eq!(m.memory_total_bytes[FAKE_GPU_UUIDS[1]], 16 * GIB);
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains(
            "nv_gpu_power_limit{gpu_uuid=\"GPU-00000000-0000-4000-8000-000000000000\"} 300\n"
        ));
        assert!(text.contains("nv_inference_count{model=\"simple\",version=\"1\"} 37\n"));
        assert!(text.contains("nv_inference_request_success{model=\"simple\",version=\"1\"} 40\n"));
        // perf_analyzer's regex form: name{gpu_uuid="..."} digits, after a newline.
        assert!(text.contains(
            "\nnv_gpu_memory_used_bytes{gpu_uuid=\"GPU-00000000-0000-4000-8000-000000000000\"} 1073893376\n"
        ));
    }
}
