//! A whole perf_analyzer run: setup, the concurrency sweep, and the three reports.

pub mod coordinator;
pub mod driver;
pub(crate) mod kinds;
pub mod load;
pub(crate) mod metrics;
pub mod peers;
pub(crate) mod plan;
mod sessions;
pub mod setup;
mod stall;
mod sweep;

/// The service-kind registry both products choose their kind through.
pub use kinds::{registry, KINDS};

use std::io::Write;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use crate::clock::Clock;
use crate::config::{Config, Distribution, LoadMode, MeasurementMode};
use crate::engine::slots::OutputSlots;
use crate::engine::window::OutputCheck;
use crate::engine::wire::Wire;
use crate::engine::{available_cores, EngineSpec, RequestLimits};
use crate::error::{Error, Result};
use crate::report::export::ExportExperiment;
use crate::report::write::write_atomic_with;
use crate::report::{console, csv, export, Banner, PointReport, RateBanner};
use crate::text::{escape_control, redact_header};
use crate::transport::packet_stamps::PacketStamps;
use kinds::{ExportDecoder, Labels, Planned};
use plan::LoadPlan;
use setup::Target;

/// What a finished run produced (the CLI prints it; tests inspect it).
pub struct RunResult {
    pub points: Vec<PointReport>,
    /// The error that ended the run after the reports were written, if any.
    pub error: Option<Error>,
}

/// Runs the measurement described by `cfg`, printing perf_analyzer's console report to `out`.
/// `stop` ends the run after the current window, like Ctrl-C.
pub fn run(cfg: &Config, out: &mut dyn Write, stop: Arc<AtomicBool>) -> Result<RunResult> {
    run_with(cfg, out, stop, &mut peers::Alone)
}

/// [`run`] measured together with `peers` (the other ranks of an `--enable-mpi` run): in
/// scale-out mode only the reporting process prints and writes reports (of the merged
/// windows).
pub fn run_with(
    cfg: &Config,
    out: &mut dyn Write,
    stop: Arc<AtomicBool>,
    peers: &mut dyn peers::Peers,
) -> Result<RunResult> {
    let mut silent = std::io::sink();
    let reports = peers.reports();
    let out: &mut dyn Write = if reports { out } else { &mut silent };
    let rank_cfg = peers.local_config(cfg);
    let cfg = rank_cfg.as_ref().unwrap_or(cfg);
    if cfg.session_concurrency > 0 {
        return sessions::run(cfg, out, &stop);
    }
    let kind = kinds::pick(cfg)?;
    let service = kinds::service(kind)?;
    crate::shm::check_service(cfg, kind.caps.shared_memory.is_some())?;
    let mut target = service.prepare(cfg)?;
    let adjusted = sequence_default(cfg, &target);
    let cfg = adjusted.as_ref().unwrap_or(cfg);
    // Registered regions; dropped (unregistered, unlinked) on every way out of this function.
    let Planned {
        mut plan,
        shm: shm_session,
        slots: shm_slots,
    } = service.plan(cfg, &target)?;
    let scheduled = match cfg.load_mode {
        LoadMode::FixedSchedule => Some(fixed_schedule(cfg, &plan.timestamps_ms)?),
        _ => None,
    };
    let cfg = scheduled.as_ref().unwrap_or(cfg);
    print_first_request(cfg, &plan);
    let spec = EngineSpec {
        reply_check: service.reply_check(cfg, &target),
        packet_stamps: packet_stamps(cfg, &target, &plan.wire),
        ..engine_spec(cfg, &target, &mut plan, shm_slots.clone())
    };
    let decoupled = target.decoupled();
    let labels = service.labels();
    let _ = out.write_all(banner_text(cfg, &labels, decoupled).as_bytes());
    let step_inputs = plan.step_inputs;
    let check = service.output_check(cfg, &target, shm_slots.as_deref(), plan.expected);
    let stats_available = target.stats_available();
    let metrics = metrics::MetricsSource::for_run(cfg)?;
    let mut write_csv = csv_writer(cfg, reports, stats_available);
    let mut sweeper = sweep::Sweeper {
        cfg,
        service,
        spec: &spec,
        target: &mut target,
        stop: &stop,
        out: &mut *out,
        step_inputs: &step_inputs,
        check: check.as_ref().map(|c| c as &OutputCheck),
        metrics: metrics.as_ref(),
        peers,
        on_point: &mut write_csv,
        result: sweep::SweepResult::default(),
    };
    sweeper.run();
    let result = sweeper.result;
    if !result.points.is_empty() {
        let _ = out.write_all(console::summary(&result.points, cfg.percentile).as_bytes());
    }
    if let Some(line) = spec
        .packet_stamps
        .as_ref()
        .and_then(|p| packet_line(cfg, p))
    {
        let _ = writeln!(out, "{line}");
    }
    if let Some(line) = spec.tx_stamps.as_ref().and_then(|m| m.take_line()) {
        let _ = writeln!(out, "{line}");
    }
    let _ = out.flush();
    if reports {
        let slots = shm_slots.as_deref();
        let decode = service.export_decoder(cfg, &target, slots);
        write_final_reports(cfg, &labels, &result, stats_available, &decode)?;
    }
    drop(shm_session);
    Ok(RunResult {
        points: result.points,
        error: result.error,
    })
}

/// The packet socket that times gRPC responses read together by the TCP segment that carried
/// each (see `transport::packet_stamps`): over plain TCP with kernel receive stamps, unless
/// `--no-packet-stamps`. Without root or CAP_NET_RAW there is none (said on stderr with `-v`)
/// and such responses share their read's stamp. Not opened where a connection never has two
/// responses to wait together (concurrency 1 without streaming): there it would only cost.
fn packet_stamps(cfg: &Config, target: &Target, wire: &Wire) -> Option<Arc<PacketStamps>> {
    if !cfg.packet_stamps || !cfg.rx_stamps || target.tls.is_some() {
        return None;
    }
    if !matches!(wire, Wire::Grpc(_)) {
        return None;
    }
    let one_at_a_time = cfg.load_mode == LoadMode::Concurrency
        && cfg.concurrency.start == 1
        && cfg.concurrency.end == 1
        && !cfg.streaming;
    if one_at_a_time {
        return None;
    }
    match PacketStamps::open(target.addr) {
        Ok(p) => Some(Arc::new(p)),
        Err(e) => {
            if cfg.verbose > 0 {
                eprintln!(
                    "info: responses read together share their read's time (packet socket: {e}; \
                     it needs root or CAP_NET_RAW; --no-packet-stamps: not tried)"
                );
            }
            None
        }
    }
}

/// After a run with the packet socket: how many reads took several responses' segments and
/// were timed per segment, and how many could not be (their segments not all seen, or
/// packets the kernel dropped). Nothing when every read held one segment, but with `-v`.
fn packet_line(cfg: &Config, stamps: &PacketStamps) -> Option<String> {
    let s = stamps.take_stats();
    if s.split_reads + s.missed_reads + s.dropped == 0 && cfg.verbose == 0 {
        return None;
    }
    Some(format!(
        "Responses timed per TCP segment (packet socket): {} reads held several segments, each \
         response timed by its own; {} reads kept their own time (segments not all seen); {} \
         packets dropped",
        s.split_reads, s.missed_reads, s.dropped
    ))
}

/// The configuration a sequence model runs with when it differs from `cfg`: sequence models
/// default to async unless --sync was given (perf_analyzer).
fn sequence_default(cfg: &Config, target: &Target) -> Option<Config> {
    let sequences = target.config().is_some_and(|c| c.sequence_batching);
    (sequences && !cfg.sync_given && !cfg.async_mode).then(|| Config {
        async_mode: true,
        ..cfg.clone()
    })
}

/// `-v -v`: prints the plan's first request to stderr.
fn print_first_request(cfg: &Config, plan: &LoadPlan) {
    if cfg.verbose >= 2 {
        if let Some(request) = plan.requests.first() {
            eprintln!("{}", printable_request(request));
        }
    }
}

/// The sweep's per-level callback: rewrites the CSV report with every point so far on the
/// reporting process, does nothing on the others.
fn csv_writer(
    cfg: &Config,
    reports: bool,
    stats_available: bool,
) -> impl FnMut(&[PointReport]) -> Result<()> + '_ {
    move |points: &[PointReport]| {
        if reports {
            write_csv_reports(cfg, points, stats_available)
        } else {
            Ok(())
        }
    }
}

/// Writes the reports of a finished sweep. When one cannot be written, the run's own error
/// (still worth knowing) goes to stderr and the write error, which decides the exit code, is
/// returned.
fn write_final_reports(
    cfg: &Config,
    labels: &Labels,
    result: &sweep::SweepResult,
    stats_available: bool,
    decode: &ExportDecoder,
) -> Result<()> {
    let written = write_reports(
        cfg,
        labels,
        &result.points,
        &result.exps,
        stats_available,
        decode,
    );
    if written.is_err() {
        if let Some(run_error) = &result.error {
            eprintln!("error: {run_error}");
        }
    }
    written
}

/// Connects, waits until the server is ready, and reads what the run needs from it, as the
/// run's service kind does.
pub fn prepare(cfg: &Config) -> Result<Target> {
    kinds::service(kinds::pick(cfg)?)?.prepare(cfg)
}

/// The engine's view of the run: where to send what, on how many pinned workers (the
/// plan's requests move into it).
fn engine_spec(
    cfg: &Config,
    target: &Target,
    plan: &mut LoadPlan,
    slots: Option<Arc<OutputSlots>>,
) -> EngineSpec {
    let keep_windows = cfg.profile_export_file.is_some();
    let cores = available_cores().len().max(1);
    EngineSpec {
        addr: target.addr,
        requests: Arc::new(std::mem::take(&mut plan.requests)),
        keep_bodies: keep_windows || plan.expected.iter().any(Option::is_some),
        keep_going: false,
        http_trace: false,
        rx_stamps: cfg.rx_stamps,
        tx_stamps: cfg.tx_stamps.then(Default::default),
        packet_stamps: None,
        fresh_connections: false,
        pin: cfg.pin_threads,
        max_workers: cfg.max_threads.unwrap_or(cores).min(cores.max(1)),
        clock: Clock::new(),
        tls: target.tls.clone(),
        wire: plan.wire.clone(),
        sequences: plan.sequences.clone(),
        slots,
        read_batch: None,
        request_limits: request_limits(cfg),
        reply_check: Default::default(),
        max_response_bytes: cfg.max_response_bytes,
        cancel: None,
        prefill: None,
    }
}

/// `--request-timeout` and `--request-idle-timeout`, for the engine.
pub(crate) fn request_limits(cfg: &Config) -> RequestLimits {
    RequestLimits {
        total: cfg.request_timeout,
        idle: cfg.request_idle_timeout,
        ..RequestLimits::default()
    }
}

/// The settings banner; open-loop modes add the rate lines, Poisson the seed to repeat it.
fn banner_text(cfg: &Config, labels: &Labels, decoupled: bool) -> String {
    let mut b = banner(cfg, labels, decoupled);
    if cfg.load_mode == LoadMode::Concurrency {
        return console::banner(&b);
    }
    (b.concurrency_start, b.concurrency_end) = (1, 1);
    let r = cfg.request_rate;
    let rate = RateBanner {
        start: r.start,
        end: if cfg.load_mode == LoadMode::Intervals {
            r.start
        } else {
            r.end
        },
        poisson: cfg.distribution == Distribution::Poisson,
    };
    let mut text = console::banner_with_rate(&b, Some(&rate));
    if rate.poisson {
        let seed = cfg.seed;
        let at = text.len() - 1;
        text.insert_str(
            at,
            &format!("  Schedule seed: {seed} (repeat this schedule with --seed {seed})\n"),
        );
    }
    text
}

fn banner(cfg: &Config, labels: &Labels, decoupled: bool) -> Banner {
    Banner {
        // perf_analyzer prints the batch size for Triton, or when -b is given (0: no line).
        batch_size: if labels.always_shows_batch || cfg.batch_size_given {
            cfg.batch_size
        } else {
            0
        },
        service_kind: labels.banner,
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
    labels: &Labels,
    points: &[PointReport],
    exps: &[ExportExperiment],
    stats_available: bool,
    decode: &ExportDecoder,
) -> Result<()> {
    write_csv_reports(cfg, points, stats_available)?;
    if let Some(path) = &cfg.profile_export_file {
        let meta = export::ExportMeta {
            version: crate::VERSION,
            service_kind: labels.export,
            endpoint: &cfg.endpoint,
            // gRPC streams and the C API with --streaming keep every response of a request.
            framed: cfg.streaming && labels.framed_streams,
            seed: (cfg.load_mode != LoadMode::Concurrency).then_some(cfg.seed),
        };
        write_atomic_with("--profile-export-file", path, |mut w| {
            export::write_export(&mut w, exps, &meta, decode)
        })?;
    }
    Ok(())
}

/// `-f`: the CSV of the levels measured so far and, for ensembles and BLS, one CSV per
/// composing model beside it. Written after every level (and at the end), so a run that
/// fails or is killed later keeps them.
fn write_csv_reports(cfg: &Config, points: &[PointReport], stats_available: bool) -> Result<()> {
    let (Some(path), false) = (&cfg.csv_file, points.is_empty()) else {
        return Ok(());
    };
    write_atomic_with("-f", path, |mut w| {
        csv::write_csv(
            &mut w,
            points,
            cfg.percentile,
            cfg.verbose_csv,
            cfg.csv_extra_columns,
            stats_available,
        )
    })?;
    let composing: Vec<_> = points
        .iter()
        .map(|p| {
            p.server
                .as_ref()
                .map(|s| s.composing.clone())
                .unwrap_or_default()
        })
        .collect();
    if composing.iter().any(|c| !c.is_empty()) {
        csv::write_composing_csvs(path, points, &composing)?;
    }
    Ok(())
}

/// `--fixed-schedule`: the entries' send offsets, in data order (they must not go back in
/// time), and a request count of one per entry.
fn fixed_schedule(cfg: &Config, timestamps_ms: &[Option<u64>]) -> Result<Config> {
    let mut offsets = Vec::with_capacity(timestamps_ms.len());
    for (i, t) in timestamps_ms.iter().enumerate() {
        let ms = t.ok_or_else(|| {
            Error::usage(format!(
                "--fixed-schedule: input-data entry {i} has no timestamp"
            ))
        })?;
        let ns = ms.saturating_mul(1_000_000);
        if offsets.last().is_some_and(|&prev| ns < prev) {
            return Err(Error::usage(format!(
                "--fixed-schedule: the timestamp of input-data entry {i} ({ms} ms) is earlier \
                 than the one before it; entries must be in time order"
            )));
        }
        offsets.push(ns);
    }
    if cfg.warmup_request_count > 0 {
        return Err(Error::usage(
            "--warmup-request-count is not supported with --fixed-schedule yet (inferperf)",
        ));
    }
    Ok(Config {
        request_count: offsets.len() as u64,
        fixed_schedule_ns: offsets,
        ..cfg.clone()
    })
}

/// `-v -v`: the request every worker sends, for debugging. Header lines end in `\n`, the
/// values of credential headers (`-H Authorization: ...`, API keys) are `<redacted>`,
/// control characters are escaped, and binary tensor bytes (after the JSON inference
/// header) are shown as a byte count.
fn printable_request(request: &[u8]) -> String {
    let found = request.windows(4).position(|w| w == b"\r\n\r\n");
    let head_end = found.map_or(0, |p| p + 4);
    let head = String::from_utf8_lossy(&request[..head_end]);
    let json_len = head
        .lines()
        .find_map(|l| l.strip_prefix("Inference-Header-Content-Length:"))
        .and_then(|v| v.trim().parse::<usize>().ok());
    let text_end = json_len.map_or(request.len(), |n| (head_end + n).min(request.len()));
    let mut out = String::from("Request sent by every worker:\n");
    for line in head.lines() {
        out.push_str(&redact_header(&escape_control(line)));
        out.push('\n');
    }
    out.push_str(&escape_control(&String::from_utf8_lossy(
        &request[head_end..text_end],
    )));
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
            s.ends_with("Length: 7\n\n{\"a\":1}<4 bytes of binary tensor data>"),
            "{s}"
        );
        let json = b"POST / HTTP/1.1\r\n\r\n{\"a\":1}";
        assert!(printable_request(json).ends_with("{\"a\":1}"));
    }

    #[test]
    fn printable_request_redacts_credentials_and_escapes_control_bytes() {
        let req = b"POST /v1/chat/completions HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer \
                    sk-secret\r\nx-api-key: k-secret\r\napi-key: a-secret\r\n\r\n{\"m\":\"\x1b[2J\"}";
        let s = printable_request(req);
        assert!(!s.contains("secret"), "{s}");
        assert!(s.contains("\nAuthorization: <redacted>\n"), "{s}");
        assert!(
            s.contains("\nx-api-key: <redacted>\napi-key: <redacted>\n"),
            "{s}"
        );
        assert!(s.contains("\nHost: h\n"), "{s}");
        assert!(!s.contains(['\r', '\x1b']), "{s}");
        assert!(s.ends_with("{\"m\":\"\\x1b[2J\"}"), "{s}");
    }
}
