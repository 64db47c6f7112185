//! What a `profile` level leaves in its directory: the raw export, GenAI-Perf's summaries,
//! the per-request records, time slices, the HTML page and plots.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::cli::{self, LoadPoint, ProfileConfig};
use super::{dataset, export, html_report, report_options, runner, telemetry};
use crate::error::{Error, Result};
use crate::measure::llm::LlmRequest;

/// `artifacts/<model>-<service kind>-<endpoint type>-<mode><value>`, as GenAI-Perf names it;
/// the model part is a safe file stem (`org/model` gives `org_model`), so the directory is
/// always inside the artifact directory.
pub(super) fn point_dir(cfg: &ProfileConfig, point: LoadPoint) -> PathBuf {
    let model = crate::text::safe_file_stem(&cfg.models.join("_"));
    let kind = if cfg.endpoint_type == cli::EndpointType::Kserve {
        "triton"
    } else {
        "openai"
    };
    cfg.args.artifact_dir.join(format!(
        "{model}-{kind}-{}-{}",
        cfg.endpoint_type.name(),
        point.label()
    ))
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
    let kind = if cfg.endpoint_type == cli::EndpointType::Kserve {
        "triton"
    } else {
        "openai"
    };
    let names = export::ExportNames::from_export_file(&cfg.args.profile_export_file);
    let mut files: Vec<(String, String)> = vec![
        ("inputs.json".into(), export::inputs_json(bodies)),
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
        (
            names.records_jsonl,
            crate::report::llm::jsonl::records(requests),
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
    for (name, text) in files {
        crate::report::write::write_atomic("", &dir.join(name), text.as_bytes())?;
    }
    write_pages(cfg, point, dir, f)
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
