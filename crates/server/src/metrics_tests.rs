use super::*;
use crate::stats::ModelCounters;
use inferperf_client::measure::metrics::{GpuMetrics, GPU_LABEL};
use inferperf_wire::protocol::prometheus::{parse, Exposition};

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

fn inferences(n: u64) -> PageInput {
    PageInput {
        inferences: n,
        ..PageInput::default()
    }
}

fn page(style: MetricsStyle, c: &Counters, llm: LlmCounts) -> (String, Exposition) {
    let mut out = Vec::new();
    let r = reply(style, c, llm, &mut out);
    assert_eq!((r.status, r.content_type), (200, PROMETHEUS_TEXT));
    let exposition = parse(&out).expect("our page parses");
    (String::from_utf8(out).unwrap(), exposition)
}

fn value(e: &Exposition, name: &str, label: (&str, &str)) -> f64 {
    e.samples
        .iter()
        .find(|s| s.name == name && s.label(label.0) == Some(label.1))
        .unwrap_or_else(|| panic!("{name} {label:?}"))
        .value
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
        let [busy, idle] = fake_gpus(&inferences(n));
        assert!((busy.utilization - util).abs() < 1e-12, "{n}");
        assert!((busy.power_watts - watts).abs() < 1e-9, "{n}");
        assert_eq!(busy.memory_used_bytes, used, "{n}");
        assert_eq!(busy.memory_total_bytes, 85_899_345_920);
        assert_eq!(busy.energy_joules, n);
        assert_eq!(
            idle,
            fake_gpus(&inferences(0))[1],
            "the idle GPU never changes"
        );
    }
}

#[test]
fn llm_load_moves_the_busy_gpu() {
    let input = PageInput {
        inferences: 0,
        llm: LlmCounts {
            running: 16,
            ended: 3,
            prompt_tokens: 100,
            generation_tokens: 50,
        },
    };
    let [busy, _] = fake_gpus(&input);
    assert_eq!(busy.utilization, 0.25, "16 of 64 KV slots");
    assert_eq!(busy.power_watts, 112.5);
    assert_eq!(busy.memory_used_bytes, GIB + 50 * 4096);
    assert_eq!(busy.energy_joules, 50);
    let full = PageInput {
        inferences: 99,
        llm: LlmCounts {
            running: 200,
            ..LlmCounts::default()
        },
    };
    assert_eq!(fake_gpus(&full)[0].utilization, 1.0, "capped at 100%");
}

#[test]
fn page_parses_and_carries_the_four_metrics() {
    let c = counters(&[("simple", 40, 37), ("identity", 0, 0)]);
    let (text, exposition) = page(MetricsStyle::Triton, &c, LlmCounts::default());
    let m = GpuMetrics::from_samples(exposition.samples_by_label(GPU_LABEL));
    assert_eq!(m.utilization[FAKE_GPU_UUIDS[0]], 0.37);
    assert_eq!(m.utilization[FAKE_GPU_UUIDS[1]], 0.0);
    assert_eq!(m.power_watts[FAKE_GPU_UUIDS[0]], 142.5);
    assert_eq!(m.memory_used_bytes[FAKE_GPU_UUIDS[1]], 512 * MIB);
    assert_eq!(m.memory_total_bytes[FAKE_GPU_UUIDS[1]], 16 * GIB);
    assert!(text.contains(
        "nv_gpu_power_limit{gpu_uuid=\"GPU-00000000-0000-4000-8000-000000000000\"} 300\n"
    ));
    assert!(text.contains("nv_inference_count{model=\"simple\",version=\"1\"} 37\n"));
    assert!(text.contains("nv_inference_request_success{model=\"simple\",version=\"1\"} 40\n"));
    assert!(text.contains(
        "nv_energy_consumption{gpu_uuid=\"GPU-00000000-0000-4000-8000-000000000000\"} 37\n"
    ));
    // perf_analyzer's regex form: name{gpu_uuid="..."} digits, after a newline.
    assert!(text.contains(
        "\nnv_gpu_memory_used_bytes{gpu_uuid=\"GPU-00000000-0000-4000-8000-000000000000\"} 1073893376\n"
    ));
}

#[test]
fn vllm_page_reports_the_llm_load() {
    let llm = LlmCounts {
        running: 70,
        ended: 12,
        prompt_tokens: 640,
        generation_tokens: 96,
    };
    let (_, e) = page(MetricsStyle::Vllm, &counters(&[]), llm);
    let m = ("model_name", "inferperf-llm");
    assert_eq!(value(&e, "vllm:num_requests_running", m), 64.0);
    assert_eq!(value(&e, "vllm:num_requests_waiting", m), 6.0);
    assert_eq!(value(&e, "vllm:kv_cache_usage_perc", m), 1.0);
    assert_eq!(value(&e, "vllm:prompt_tokens_total", m), 640.0);
    assert_eq!(value(&e, "vllm:generation_tokens_total", m), 96.0);
    assert_eq!(value(&e, "vllm:prefix_cache_queries_total", m), 640.0);
    let length = ("finished_reason", "length");
    assert_eq!(value(&e, "vllm:request_success_total", length), 12.0);
    let types: Vec<_> = e.types.iter().map(|(n, _)| n.as_str()).collect();
    assert!(types.contains(&"vllm:request_success_total"));
}

#[test]
fn dcgm_page_labels_each_gpu() {
    let llm = LlmCounts {
        running: 32,
        generation_tokens: 5,
        ..LlmCounts::default()
    };
    let (text, e) = page(MetricsStyle::Dcgm, &counters(&[("simple", 3, 3)]), llm);
    let gpu0 = ("gpu", "0");
    assert_eq!(value(&e, "DCGM_FI_DEV_GPU_UTIL", gpu0), 53.0, "3% + 32/64");
    assert_eq!(value(&e, "DCGM_FI_DEV_POWER_USAGE", gpu0), 182.5);
    assert_eq!(
        value(&e, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", gpu0),
        8000.0
    );
    assert_eq!(value(&e, "DCGM_FI_DEV_FB_USED", gpu0), 1024.0);
    assert_eq!(value(&e, "DCGM_FI_DEV_FB_USED", ("gpu", "1")), 512.0);
    assert_eq!(
        value(&e, "DCGM_FI_DEV_GPU_UTIL", ("UUID", FAKE_GPU_UUIDS[1])),
        0.0
    );
    assert!(text.contains("modelName=\"Inferperf Fake GPU\""));
}

#[test]
fn metrics_paths_pick_a_style() {
    use MetricsStyle::*;
    assert_eq!(style_of_path("/metrics", Vllm), Some(Vllm));
    assert_eq!(style_of_path("/metrics/triton", Vllm), Some(Triton));
    assert_eq!(style_of_path("/metrics/dcgm", Triton), Some(Dcgm));
    assert_eq!(style_of_path("/metrics/vllm", Triton), Some(Vllm));
    assert_eq!(style_of_path("/metricsx", Triton), None);
}
