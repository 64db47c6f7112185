//! A whole perf_analyzer run: setup, the concurrency sweep, and the three reports.

mod plan;
pub mod setup;

use std::fs::File;
use std::io::{BufWriter, Write};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use crate::clock::Clock;
use crate::config::{Config, MeasurementMode, Protocol};
use crate::engine::coordinator::{profile_point, PointCtx, PointOutcome, PointStatus};
use crate::engine::{available_cores, EngineSpec};
use crate::error::{Error, Result};
use crate::inputs::build_inputs;
use crate::report::export::ExportExperiment;
use crate::report::{console, csv, export, Banner, LoadValue, PointReport};
use crate::service::triton_grpc::outputs_json;
use crate::service::triton_http::decode_outputs_json;
use setup::{fetch_stats, prepare, Target};

/// What a finished run produced (the CLI prints it; tests inspect it).
pub struct RunResult {
    pub points: Vec<PointReport>,
    /// The error that ended the run after the reports were written, if any.
    pub error: Option<Error>,
}

/// Runs the measurement described by `cfg`, printing perf_analyzer's console report to `out`.
/// `stop` ends the run after the current window, like Ctrl-C.
pub fn run(cfg: &Config, out: &mut dyn Write, stop: Arc<AtomicBool>) -> Result<RunResult> {
    let mut target = prepare(cfg)?;
    let inputs = build_inputs(&target.meta, &target.config, cfg)?;
    let plan = plan::build(cfg, &target, &inputs)?;
    if cfg.verbose >= 2 {
        if let Some(request) = plan.requests.first() {
            eprintln!("{}", printable_request(request));
        }
    }
    let keep_windows = cfg.profile_export_file.is_some();
    let cores = available_cores().len().max(1);
    let spec = EngineSpec {
        addr: target.addr,
        requests: Arc::new(plan.requests),
        keep_bodies: keep_windows,
        pin: cfg.pin_threads,
        max_workers: cfg.max_threads.unwrap_or(cores).min(cores.max(1)),
        clock: Clock::new(),
        tls: target.tls.clone(),
        wire: plan.wire.clone(),
    };
    let decoupled = target.config.decoupled;
    let _ = out.write_all(console::banner(&banner(cfg, decoupled)).as_bytes());
    let step_inputs = plan.step_inputs;
    let cache = target.config.response_cache;
    let stats_available = target.stats_available;
    let (points, exps, error) = sweep(cfg, &spec, &mut target, cache, &stop, out, &step_inputs)?;
    if !points.is_empty() {
        let _ = out.write_all(console::summary(&points, cfg.percentile).as_bytes());
    }
    let _ = out.flush();
    write_reports(cfg, &points, &exps, stats_available)?;
    Ok(RunResult { points, error })
}

type SweepResult = (Vec<PointReport>, Vec<ExportExperiment>, Option<Error>);

/// Linear search over `--concurrency-range` (end 0: until the latency threshold).
fn sweep(
    cfg: &Config,
    spec: &EngineSpec,
    target: &mut Target,
    cache_enabled: bool,
    stop: &AtomicBool,
    out: &mut dyn Write,
    step_inputs: &[String],
) -> Result<SweepResult> {
    let mut points = Vec::new();
    let mut exps = Vec::new();
    let mut error = None;
    let range = cfg.concurrency;
    let decoupled = target.config.decoupled;
    let mut c = range.start;
    loop {
        let load = LoadValue::Concurrency(c);
        let _ = out.write_all(console::point_header(&load).as_bytes());
        let outcome = {
            let mut fetch = || fetch_stats(target, cfg);
            let mut ctx = PointCtx {
                cfg,
                spec,
                stats: &mut fetch,
                cache_enabled,
                keep_windows: cfg.profile_export_file.is_some(),
                decoupled,
                stop,
                out: &mut *out,
            };
            profile_point(&mut ctx, c)?
        };
        let PointOutcome {
            status,
            client,
            server,
            windows,
        } = outcome;
        if cfg.profile_export_file.is_some() {
            exps.push(ExportExperiment {
                load,
                windows,
                step_inputs: step_inputs.to_vec(),
            });
        }
        let report = client.map(|client| PointReport {
            load,
            batch_size: cfg.batch_size,
            client,
            server,
        });
        let (keep, end, err) = judge(cfg, &status, report.as_ref(), c, points.is_empty(), out);
        if keep {
            if let Some(r) = report {
                let http = cfg.protocol == Protocol::Http;
                let text = console::point(&r, cfg.percentile, cfg.verbose, http);
                let _ = out.write_all(text.as_bytes());
                points.push(r);
            }
        }
        if err.is_some() {
            error = err;
        }
        c += range.step;
        if end || !(c <= range.end || range.end == 0) {
            break;
        }
    }
    Ok((points, exps, error))
}

/// Decides from a level's outcome: (report it?, end the sweep?, error for the exit code).
fn judge(
    cfg: &Config,
    status: &PointStatus,
    report: Option<&PointReport>,
    c: u64,
    first: bool,
    out: &mut dyn Write,
) -> (bool, bool, Option<Error>) {
    match status {
        PointStatus::Stable => {
            let lat = report.map_or(0, |r| r.client.stabilizing_latency_ns);
            let limit = cfg.latency_threshold_ms;
            if limit > 0 && lat >= limit * 1_000_000 {
                let _ = writeln!(
                    out,
                    "Measured latency went over the set limit of {limit} msec. "
                );
                return (false, true, None);
            }
            (true, false, None)
        }
        PointStatus::OverThreshold => {
            let limit = cfg.latency_threshold_ms;
            let _ = writeln!(
                out,
                "Measured latency went over the set limit of {limit} msec. "
            );
            (false, true, None)
        }
        PointStatus::Unstable => {
            let what = match cfg.measurement_mode {
                MeasurementMode::TimeWindows => "--measurement-interval",
                MeasurementMode::CountWindows => "--measurement-request-count",
            };
            let msg = format!(
                "Failed to obtain stable measurement within {} measurement windows for \
                 concurrency {c}. Please try to increase the {what}.",
                cfg.max_trials
            );
            if first {
                // Exit code 2; the caller prints the message once.
                return (false, true, Some(Error::stability(msg)));
            }
            eprintln!("{msg}");
            (false, true, None)
        }
        PointStatus::Interrupted => {
            eprintln!(
                "Interrupted: reporting the windows measured so far (not checked for stability)."
            );
            (true, true, None)
        }
        PointStatus::Failed(msg) => {
            let e = Error::generic(format!("inference request failed: {msg}"));
            (true, true, Some(e))
        }
        PointStatus::NoValidRequests => (false, true, Some(Error::no_valid_requests())),
    }
}

fn banner(cfg: &Config, decoupled: bool) -> Banner {
    Banner {
        batch_size: cfg.batch_size,
        service_kind: "TRITON",
        warmup_request_count: cfg.warmup_request_count,
        request_count: cfg.request_count,
        count_windows: cfg.measurement_mode == MeasurementMode::CountWindows,
        percentile: cfg.percentile,
        async_mode: cfg.async_mode,
        measurement_interval_ms: cfg.measurement_interval_ms,
        measurement_request_count: cfg.measurement_request_count,
        latency_threshold_ms: cfg.latency_threshold_ms,
        concurrency_end: cfg.concurrency.end,
        concurrency_start: cfg.concurrency.start,
        decoupled,
    }
}

fn write_reports(
    cfg: &Config,
    points: &[PointReport],
    exps: &[ExportExperiment],
    stats_available: bool,
) -> Result<()> {
    if let (Some(path), false) = (&cfg.csv_file, points.is_empty()) {
        let f = File::create(path)
            .map_err(|e| Error::generic(format!("-f {}: {e}", path.display())))?;
        let mut w = BufWriter::new(f);
        csv::write_csv(
            &mut w,
            points,
            cfg.percentile,
            cfg.verbose_csv,
            stats_available,
        )
        .and_then(|_| w.flush())
        .map_err(|e| Error::generic(format!("-f {}: {e}", path.display())))?;
    }
    if let Some(path) = &cfg.profile_export_file {
        let err = |e: std::io::Error| {
            Error::generic(format!("--profile-export-file {}: {e}", path.display()))
        };
        let mut w = BufWriter::new(File::create(path).map_err(err)?);
        let framed = cfg.protocol == Protocol::Grpc && cfg.streaming;
        let decode = |body: &[u8]| export_outputs(cfg, body);
        export::write_export(&mut w, exps, crate::VERSION, "triton", "", &decode, framed)
            .and_then(|_| w.flush())
            .map_err(err)?;
    }
    Ok(())
}

/// One response body as the export's `response_outputs` object (`{}` when it cannot be
/// read, or for a decoupled model's empty final response).
fn export_outputs(cfg: &Config, body: &[u8]) -> String {
    use crate::protocol::grpc::pb::inference as pb;
    use prost::Message;
    match (cfg.protocol, cfg.streaming) {
        (Protocol::Http, _) => decode_outputs_json(body, None).ok(),
        (Protocol::Grpc, false) => pb::ModelInferResponse::decode(body)
            .ok()
            .map(|r| outputs_json(&r)),
        (Protocol::Grpc, true) => pb::ModelStreamInferResponse::decode(body)
            .ok()
            .and_then(|r| r.infer_response)
            .map(|r| outputs_json(&r)),
    }
    .unwrap_or_else(|| "{}".into())
}

/// `-v -v`: the request every worker sends, for debugging. Binary tensor bytes (after the
/// JSON inference header) are shown as a byte count.
fn printable_request(request: &[u8]) -> String {
    let head_end = request
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(request.len(), |p| p + 4);
    let head = String::from_utf8_lossy(&request[..head_end]);
    let json_len = head
        .lines()
        .find_map(|l| l.strip_prefix("Inference-Header-Content-Length:"))
        .and_then(|v| v.trim().parse::<usize>().ok());
    let text_end = json_len.map_or(request.len(), |n| (head_end + n).min(request.len()));
    let mut out = format!(
        "Request sent by every worker:\n{}",
        String::from_utf8_lossy(&request[..text_end])
    );
    if text_end < request.len() {
        out.push_str(&format!(
            "<{} bytes of binary tensor data>",
            request.len() - text_end
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::printable_request;

    #[test]
    fn printable_request_hides_binary_data() {
        let req =
            b"POST / HTTP/1.1\r\nInference-Header-Content-Length: 7\r\n\r\n{\"a\":1}ab\x00\xff";
        let s = printable_request(req);
        assert!(
            s.ends_with("\r\n\r\n{\"a\":1}<4 bytes of binary tensor data>"),
            "{s}"
        );
        let json = b"POST / HTTP/1.1\r\n\r\n{\"a\":1}";
        assert!(printable_request(json).ends_with("{\"a\":1}"));
    }
}
