//! What a `profile` level leaves: in GenAI-Perf's folder the raw export, GenAI-Perf's
//! summaries and time slices, the HTML page and plots; in AIPerf's folder (the same one unless
//! [`layout`](super::layout) puts it elsewhere) AIPerf's summaries, time slices, log and the
//! per-request records.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::cli::{LoadPoint, ProfileConfig};
use super::{dataset, export, html_report, report_options, runner, telemetry};
use crate::error::{Error, Result};
use crate::measure::llm::LlmRequest;

/// `artifacts/<model>-<service kind>-<kind detail>-<stimulus>`, as GenAI-Perf names it:
/// `openai-<endpoint type>` for OpenAI endpoints, `triton-<backend>` (`tensorrtllm`, `vllm`)
/// for Triton's KServe endpoint. The model part is the first model's name, with `_multi`
/// after it when several are given (as both tools name it), as a safe file stem (`org/model`
/// gives `org_model`), so the directory is always inside the artifact directory.
pub(super) fn point_dir(cfg: &ProfileConfig, point: LoadPoint) -> PathBuf {
    let first = &cfg.models[0];
    let model = crate::text::safe_file_stem(&if cfg.models.len() > 1 {
        format!("{first}_multi")
    } else {
        first.clone()
    });
    let endpoint = cfg.endpoint_type.endpoint();
    let kind = if cfg.endpoint_type.service().takes_backend() {
        format!("{}-{}", endpoint.family, backend_name(cfg.backend))
    } else {
        format!("{}-{}", endpoint.family, cfg.endpoint_type.name())
    };
    cfg.args
        .artifact_dir
        .join(format!("{model}-{kind}-{}", stimulus(cfg, point)))
}

/// The load part of a level's folder name, by the rules of GenAI-Perf's and AIPerf's own
/// names, which agree where both tools take the flags:
/// - `fixed_schedule` for a trace replayed on its timestamps;
/// - `concurrencyN-request_rateR` for AIPerf's `--concurrency N --request-rate R` (a rate
///   capped at N in flight; GenAI-Perf refuses the pair);
/// - else the level's label: `concurrencyN` / `request_rateR`, the rate written as Python
///   writes a float (`request_rate32.0`), as both tools do.
fn stimulus(cfg: &ProfileConfig, point: LoadPoint) -> String {
    let a = &cfg.args;
    if a.dataset.replaying() {
        return "fixed_schedule".into();
    }
    match (point, &a.concurrency[..]) {
        // Both flags given (a sweep's rate levels beside its --concurrency are not capped).
        (LoadPoint::RequestRate(_), [cap]) if !a.request_rate.is_empty() => {
            format!("concurrency{cap}-{}", point.label())
        }
        _ => point.label(),
    }
}

/// GenAI-Perf's lower-case backend name.
fn backend_name(b: super::cli_compat::Backend) -> &'static str {
    match b {
        super::cli_compat::Backend::Tensorrtllm => "tensorrtllm",
        super::cli_compat::Backend::Vllm => "vllm",
    }
}

/// The effective settings, written into the summary JSON (no headers: they may hold keys).
pub(super) fn input_config(cfg: &ProfileConfig, point: LoadPoint) -> Value {
    let a = &cfg.args;
    let mut config = json!({
        "model": cfg.models,
        "endpoint_type": cfg.endpoint_type.name(),
        "endpoint": cfg.endpoint,
        "url": cfg.address,
        "streaming": a.streaming,
        "load": point.label(),
        "request_count": a.request_count,
        "warmup_request_count": a.warmup_request_count,
        "benchmark_duration": a.benchmark_duration,
        "synthetic_input_tokens_mean": a.synthetic_input_tokens_mean,
        "synthetic_input_tokens_stddev": a.synthetic_input_tokens_stddev,
        "output_tokens_mean": a.output_tokens_mean,
        "output_tokens_stddev": a.output_tokens_stddev,
        "num_prompts": a.num_prompts,
        "random_seed": a.random_seed,
        "tokenizer": a.tokenizer,
        "tokenizer_revision": a.tokenizer_revision,
        "use_server_token_count": a.use_server_token_count,
        "goodput": a.goodput,
        "extra_inputs": cfg.extra.iter().map(|(k, v)| json!({k: v})).collect::<Vec<_>>(),
        "dataset": dataset::config_json(&a.dataset),
        "concurrency_ramp_duration": a.sweep.concurrency_ramp_duration,
        "request_rate_ramp_duration": a.sweep.request_rate_ramp_duration,
        "request_cancellation_rate": a.sweep.request_cancellation_rate,
        "request_cancellation_delay": a.sweep.request_cancellation_delay,
        "num_prefix_prompts": a.sweep.num_prefix_prompts,
        "prefix_prompt_length": a.sweep.prefix_prompt_length,
        "shared_system_prompt_length": a.sweep.shared_system_prompt_length,
    });
    if let (Value::Object(map), Value::Object(load)) =
        (&mut config, super::load_args::config_json(&cfg.load))
    {
        map.extend(load);
    }
    config
}

/// The telemetry of a point as a section of its HTML page.
pub(super) fn telemetry_section(t: &telemetry::Report) -> crate::report::html::Section {
    crate::report::html::Section {
        id: "telemetry".into(),
        title: "Server and GPU telemetry".into(),
        html: t.html(),
    }
}

/// What a level writes besides its raw run.
pub(super) struct PointFiles<'a> {
    pub(super) payloads: &'a [String],
    pub(super) bodies: &'a [Value],
    pub(super) requests: &'a [LlmRequest],
    pub(super) metrics: &'a crate::measure::llm::LlmMetrics,
    pub(super) cancelled: u64,
    /// Further sections of the level's HTML page (telemetry).
    pub(super) sections: &'a [crate::report::html::Section],
    /// The level's console table and notes, as printed.
    pub(super) console: &'a str,
}

pub(super) fn write_point(
    cfg: &ProfileConfig,
    point: LoadPoint,
    dir: &Path,
    run: &runner::PointRun,
    f: &PointFiles,
) -> Result<()> {
    let PointFiles {
        payloads,
        bodies,
        requests,
        metrics,
        cancelled,
        ..
    } = *f;
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::generic(format!("cannot write {}: {e}", dir.display())))?;
    let kind = cfg.endpoint_type.endpoint().family;
    let names = export::ExportNames::from_export_file(&cfg.args.profile_export_file);
    let write_inputs = |dir: &Path| {
        crate::report::write::write_atomic_with("", &dir.join("inputs.json"), |w| {
            export::write_inputs_json(w, bodies)
        })
    };
    let mut files: Vec<(String, String)> = vec![
        (
            names.genai_perf_json,
            runner::with_cancelled(
                dataset::with_lag(
                    cfg,
                    &run.records,
                    crate::report::llm::genai_perf::json(metrics, &input_config(cfg, point)),
                ),
                cancelled,
            ),
        ),
        (
            names.genai_perf_csv,
            crate::report::llm::genai_perf::csv(metrics, &report_options(cfg)),
        ),
    ];
    if let Some(seconds) = cfg.args.report.slice_duration {
        use crate::report::llm::timeslices;
        files.push((
            names.timeslices_json,
            timeslices::json(&metrics.slices, seconds),
        ));
        files.push((names.timeslices_csv, timeslices::csv(&metrics.slices)));
    }
    let export_path = dir.join(&cfg.args.profile_export_file);
    crate::report::write::write_atomic_with("", &export_path, |w| {
        export::write_profile_export(w, run, point, payloads, kind, &cfg.endpoint)
    })?;
    // AIPerf's run folder: the per-request records beside its summaries (`aiperf plot` wants
    // both), and the inputs both tools write.
    let aiperf_dir = super::layout::aiperf_dir(cfg, point);
    let mut aiperf = vec![(
        names.records_jsonl,
        crate::report::llm::jsonl::records_with(requests, cfg.args.report.export_http_trace),
    )];
    aiperf.extend(aiperf_files(cfg, point, run, f));
    if aiperf_dir == dir {
        write_inputs(dir)?;
        files.extend(aiperf);
        write_files(dir, files)?;
    } else {
        write_inputs(dir)?;
        write_files(dir, files)?;
        std::fs::create_dir_all(&aiperf_dir)
            .map_err(|e| Error::generic(format!("cannot write {}: {e}", aiperf_dir.display())))?;
        write_inputs(&aiperf_dir)?;
        write_files(&aiperf_dir, aiperf)?;
    }
    write_pages(cfg, point, dir, f)
}

/// Writes each `(name, text)` into `dir` (names may hold a sub-folder: `logs/aiperf.log`).
fn write_files(dir: &Path, files: Vec<(String, String)>) -> Result<()> {
    for (name, text) in files {
        let path = dir.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| Error::generic(format!("cannot write {}: {e}", parent.display())))?;
        }
        crate::report::write::write_atomic("", &path, text.as_bytes())?;
    }
    Ok(())
}

/// AIPerf's files for a level (see the list in `docs/llm-guide.md`): its JSON and CSV summaries,
/// the console text, `logs/aiperf.log` and the marker its tools wait for. Written last among
/// the summaries, so the marker stands only beside complete files.
fn aiperf_files(
    cfg: &ProfileConfig,
    point: LoadPoint,
    run: &runner::PointRun,
    f: &PointFiles,
) -> Vec<(String, String)> {
    use crate::report::llm::aiperf;
    let info = aiperf::RunInfo {
        benchmark_id: benchmark_id(run),
        cli_command: cli_command(),
        start_ns: run.start_ns,
        end_ns: run.end_ns,
        was_cancelled: run.interrupted,
        input_config: aiperf_input_config(cfg, point),
    };
    let dir = super::layout::aiperf_dir(cfg, point);
    let log = [
        aiperf::log_line(
            run.start_ns,
            &format!(
                "inferperf {} started: {}",
                env!("CARGO_PKG_VERSION"),
                info.cli_command
            ),
        ),
        aiperf::log_line(
            run.end_ns,
            &format!(
                "{} requests measured, {} failed",
                f.requests.len(),
                f.requests.iter().filter(|r| r.error.is_some()).count()
            ),
        ),
        aiperf::log_line(run.end_ns, &format!("results in {}", dir.display())),
    ]
    .concat();
    let mut files = Vec::new();
    if cfg.args.report.slice_duration.is_some() {
        let origin = f
            .requests
            .iter()
            .filter(|r| !r.error.as_ref().is_some_and(|e| e.kind == "cancelled"))
            .map(|r| r.start_ns)
            .min()
            .unwrap_or(run.start_ns);
        files.push((
            "profile_export_aiperf_timeslices.json".into(),
            aiperf::timeslices_json(f.metrics, origin, &info.input_config),
        ));
        files.push((
            "profile_export_aiperf_timeslices.csv".into(),
            aiperf::timeslices_csv(f.metrics, origin),
        ));
    }
    files.extend([
        (
            "profile_export_aiperf.json".into(),
            aiperf::json(f.metrics, &info),
        ),
        ("profile_export_aiperf.csv".into(), aiperf::csv(f.metrics)),
        ("profile_export_console.txt".into(), f.console.to_string()),
        ("logs/aiperf.log".into(), log),
    ]);
    if super::layout::is_sweep(cfg) {
        let (field, text) = super::layout::parameter(point);
        let rc = aiperf::RunConfig {
            sweep_id: &sweep_id(cfg),
            variation: aiperf::Variation {
                index: cfg.points.iter().position(|p| *p == point).unwrap_or(0),
                field,
                value: match point {
                    LoadPoint::Concurrency(c) => c.into(),
                    LoadPoint::RequestRate(r) => r.into(),
                },
                text: &text,
            },
            artifact_dir: &dir.display().to_string(),
            random_seed: cfg.args.random_seed,
            expected_duration_s: cfg
                .args
                .benchmark_duration
                .filter(|_| cfg.args.warmup_request_count == 0),
        };
        files.push((
            super::layout::RUN_CONFIG.into(),
            aiperf::run_config_json(&info, &rc),
        ));
    }
    files.push((
        ".aiperf_results_ready.json".into(),
        aiperf::ready_marker(run.interrupted),
    ));
    files
}

/// The sweep's id, a UUID's text: the same for every level of one sweep (its folder, this
/// process and the time the process first asked), distinct across runs.
fn sweep_id(cfg: &ProfileConfig) -> String {
    use std::hash::{Hash, Hasher};
    static STARTED: std::sync::OnceLock<std::time::SystemTime> = std::sync::OnceLock::new();
    let started = STARTED.get_or_init(std::time::SystemTime::now);
    let half = |salt: u8| {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (
            salt,
            super::layout::sweep_dir(cfg),
            std::process::id(),
            started,
        )
            .hash(&mut h);
        h.finish()
    };
    let x = (u128::from(half(0)) << 64) | u128::from(half(1));
    let hex = format!("{x:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

/// 12 hex digits from the run's start time and process id: distinct per run.
fn benchmark_id(run: &runner::PointRun) -> String {
    let mixed = run
        .start_ns
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .rotate_left(17)
        ^ u64::from(std::process::id());
    format!("{:012x}", mixed & 0xFFFF_FFFF_FFFF)
}

/// The command line, each argument quoted as a POSIX shell reads it back.
fn cli_command() -> String {
    std::env::args()
        .map(|a| {
            if !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./:=,@%+".contains(c))
            {
                a
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// AIPerf's `input_config` block (its v2 layout: models, endpoint, datasets, phases,
/// artifacts, tokenizer) for the settings inferperf shares with it.
fn aiperf_input_config(cfg: &ProfileConfig, point: LoadPoint) -> Value {
    let a = &cfg.args;
    let scheme = if cfg.tls.is_some() { "https" } else { "http" };
    let mut phase = json!({"name": "profiling", "kind": "profiling"});
    match point {
        _ if a.dataset.replaying() => phase["type"] = "fixed_schedule".into(),
        LoadPoint::Concurrency(c) => {
            phase["type"] = "concurrency".into();
            phase["concurrency"] = c.into();
        }
        LoadPoint::RequestRate(r) => {
            phase["type"] = cfg.load.arrival.name().into();
            phase["rate"] = json!(r);
        }
    }
    if let Some(n) = a.request_count {
        phase["requests"] = n.into();
    }
    if let Some(d) = a.benchmark_duration {
        phase["duration"] = json!(d);
    }
    let mut dataset = json!({"name": "main"});
    match &a.input_file {
        Some(path) => {
            dataset["type"] = "file".into();
            dataset["path"] = path.display().to_string().into();
        }
        None => {
            dataset["type"] = "synthetic".into();
            dataset["entries"] = a.num_prompts.into();
            dataset["prompts"] = json!({
                "isl": {"mean": a.synthetic_input_tokens_mean, "stddev": a.synthetic_input_tokens_stddev},
                "osl": {"mean": a.output_tokens_mean, "stddev": a.output_tokens_stddev},
            });
        }
    }
    json!({
        "models": {"items": cfg.models.iter().map(|m| json!({"name": m})).collect::<Vec<_>>()},
        "endpoint": {
            "urls": [format!("{scheme}://{}", cfg.address)],
            "type": cfg.endpoint_type.name(),
            "streaming": a.streaming,
        },
        "datasets": [dataset],
        "phases": [phase],
        "artifacts": {
            "dir": super::layout::aiperf_dir(cfg, point).display().to_string(),
            "slice_duration": a.report.slice_duration,
            "auto_plot": false,
            "plot_required": false,
        },
        "tokenizer": {"name": a.tokenizer},
        "gpu_telemetry": {"enabled": false},
        "server_metrics": {"enabled": false, "urls": [], "formats": []},
        "network_latency": {"enabled": false},
        "otel": {},
        "mlflow": {},
        "wandb": {},
        "runtime": {"ui": "none"},
    })
}

/// The level's `report.html` and (`--generate-plots`) its plot files.
fn write_pages(cfg: &ProfileConfig, point: LoadPoint, dir: &Path, f: &PointFiles) -> Result<()> {
    if !cfg.args.report.no_html_report {
        let page = html_report::PointReport {
            label: &point.label(),
            requests: f.requests,
            metrics: f.metrics,
            opts: &report_options(cfg),
            config: &input_config(cfg, point),
            sections: f.sections,
        };
        html_report::write_point(cfg, dir, &page)?;
    }
    if cfg.args.generate_plots {
        let plots = dir.join("plots");
        std::fs::create_dir_all(&plots)
            .map_err(|e| Error::generic(format!("cannot write {}: {e}", plots.display())))?;
        crate::report::plot::write_run_plots_named(
            f.requests,
            &cfg.models,
            &plots,
            crate::report::plot::PLOT_SIZE,
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;

    fn cfg(args: &[&str]) -> ProfileConfig {
        let mut v: Vec<OsString> = vec!["profile".into()];
        v.extend(args.iter().map(OsString::from));
        crate::llm::cli::parse(v).unwrap().unwrap()
    }

    #[test]
    fn point_dirs_are_named_as_genai_perf_names_them() {
        let name = |args: &[&str]| {
            let c = cfg(args);
            let dir = point_dir(&c, c.points[0]);
            dir.file_name().unwrap().to_string_lossy().into_owned()
        };
        let triton = [
            "-m",
            "org/llm",
            "--service-kind",
            "triton",
            "--concurrency",
            "2",
        ];
        assert_eq!(name(&triton), "org_llm-triton-tensorrtllm-concurrency2");
        let vllm = [&triton[..], &["--backend", "vllm"]].concat();
        assert_eq!(name(&vllm), "org_llm-triton-vllm-concurrency2");
        let trt = [&triton[..], &["--backend", "tensorrtllm"]].concat();
        assert_eq!(name(&trt), "org_llm-triton-tensorrtllm-concurrency2");
        let chat = [
            "-m",
            "llm",
            "--endpoint-type",
            "chat",
            "--request-rate",
            "5",
        ];
        assert_eq!(name(&chat), "llm-openai-chat-request_rate5.0");
        let capped = [&chat[..], &["--concurrency", "100"]].concat();
        assert_eq!(
            name(&capped),
            "llm-openai-chat-concurrency100-request_rate5.0"
        );
        assert_eq!(
            name(&["-m", "llm", "--request-rate", "2.5"]),
            "llm-openai-chat-request_rate2.5"
        );
        let c = cfg(&capped);
        assert_eq!(
            c.args.max_inflight,
            Some(100),
            "the concurrency caps the rate"
        );
    }
}
