//! `inferperf profile`: the LLM benchmark (GenAI-Perf / AIPerf flags and outputs) on the same
//! engine as the perf_analyzer mode.
//!
//! Flow: flags ([`cli`]) → prompts (synthetic of exact token length, or `--input-file`) →
//! request bodies ([`payload`]) pre-encoded once → per load point: the engine runs them
//! ([`runner`]), the stored events become [`LlmRequest`]s ([`convert`]), metrics are
//! computed, printed and written ([`export`], `report::llm`, `report::plot`).

pub mod aiperf_flags;
mod artifacts;
pub mod cache_bust;
pub mod cli;
pub mod cli_compat;
#[cfg(test)]
mod codec_tests;
pub mod convert;
pub mod dataset;
pub mod export;
pub mod html_report;
pub mod input_file;
#[cfg(test)]
mod kserve_tests;
pub mod layout;
pub mod load_args;
pub mod media;
pub mod multi_run;
pub mod payload;
pub mod prefix;
pub mod progress;
pub mod rankings_dir;
pub mod rate_series;
pub mod report_args;
pub mod runner;
pub mod sequence_dist;
pub mod sweep;
pub mod sweep_args;
pub mod sweep_plan;
pub mod telemetry;

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;

use crate::clock::Clock;
use crate::engine::prefill::PrefillCap;
use crate::engine::{EngineSpec, RequestLimits};
use crate::error::{Error, Result};
use crate::inputs::prompts::PromptGen;
use crate::inputs::tokenizer::Tokenizer;
use crate::measure::llm::LlmRequest;
use crate::measure::FailTally;
use crate::run::kinds::codec::{Input, Post};
use crate::run::kinds::reply;
use crate::transport::packet_stamps::{PacketStamps, PacketStats};
use artifacts::{input_config, point_dir, telemetry_section, write_point, PointFiles};
use cli::{LoadPoint, ProfileConfig};
use payload::Entry;

/// `inferperf profile ...` (args[0] = "profile"); returns the exit code.
pub fn profile_main(args: Vec<OsString>) -> i32 {
    let cfg = match cli::parse(args) {
        Ok(Ok(cfg)) => cfg,
        Ok(Err(text)) => {
            print!("{text}");
            return 0;
        }
        Err(e) => {
            eprintln!("error: {e}");
            return e.exit_code();
        }
    };
    if cfg.args.compat.verbose {
        eprint!("{}", cli_compat::settings_text(&cfg));
    }
    crate::signal::install();
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match run(&cfg, &mut out) {
        Ok(_) => 0,
        Err(e) => {
            let _ = out.flush();
            eprintln!("error: {e}");
            e.exit_code()
        }
    }
}

/// What a finished point produced (for tests and callers that want the numbers).
#[derive(Debug)]
pub struct PointOutcome {
    pub point: LoadPoint,
    /// GenAI-Perf's folder of the level.
    pub dir: PathBuf,
    /// AIPerf's folder of the level (the same folder unless `--artifact-dir` was typed or
    /// the run has several levels: see [`layout`]).
    pub aiperf_dir: PathBuf,
    /// The measured requests, cancelled ones included.
    pub requests: Vec<LlmRequest>,
    /// The metrics of the requests that were not cancelled.
    pub metrics: crate::measure::llm::LlmMetrics,
    /// Requests cancelled on purpose (`--request-cancellation-rate`).
    pub cancelled: u64,
    /// The user pressed Ctrl-C during this point.
    pub interrupted: bool,
    /// `--server-metrics-url` / `--gpu-telemetry`: what the endpoints reported.
    pub telemetry: Option<telemetry::Report>,
    /// The level was measured and written but failed (every request failed, the failure
    /// threshold tripped, the server went away): no further level runs and the run ends
    /// with this error.
    pub failure: Option<Error>,
}

/// Everything every level of a run shares: the prompts, their bodies and the engine.
struct Level {
    shape: sweep_args::Shape,
    tokenizer: Tokenizer,
    entries: Vec<Entry>,
    models: Vec<u32>,
    bodies: Vec<Value>,
    payloads: Vec<String>,
    spec: EngineSpec,
    goodput: Vec<crate::measure::llm::goodput::Goodput>,
    scrape: Option<Arc<telemetry::Telemetry>>,
    /// The images and audio length (µs) of each step's body.
    media_counts: Vec<(u32, u64)>,
}

/// Runs every load point of `cfg` (a list, a sweep or an SLA search), printing each
/// point's table to `out` and, over several points, the sweep summary.
pub fn run(cfg: &ProfileConfig, out: &mut dyn Write) -> Result<Vec<PointOutcome>> {
    run_with_summary(cfg, out).map(|(outcomes, _)| outcomes)
}

/// [`run`], also returning the sweep summary (one row per level) for reports.
pub fn run_with_summary(
    cfg: &ProfileConfig,
    out: &mut dyn Write,
) -> Result<(Vec<PointOutcome>, sweep::SweepSummary)> {
    let shape = sweep_args::Shape::of(cfg)?;
    layout::check_aiperf_dirs(cfg)?;
    let tokenizer = Tokenizer::load_revision(
        cfg.args.tokenizer.as_deref().unwrap_or("o200k_base"),
        &cfg.args.tokenizer_revision,
    )?;
    let (mut entries, mut cfg) = dataset::prepare(cfg, &tokenizer, prepare_entries)?;
    let prefixes = prefix::apply(&cfg, &tokenizer, &mut entries)?;
    if let Some(len) = sweep_args::user_context_length(&cfg)? {
        dataset::conversations::add_user_context(&mut cfg, &mut entries, &tokenizer, len)?;
    }
    if let Some((text, tokens)) = &prefixes.system {
        dataset::conversations::add_system(&mut cfg, &mut entries, text, *tokens);
    }
    cache_bust::expand(&cfg, &mut entries);
    let cfg = &cfg;
    let models = payload::pick_models(cfg, entries.len());
    let mut bodies: Vec<Value> = payload::bodies(cfg, &entries, &models);
    let media = media::generate(
        &cfg.args.media,
        cfg.args.random_seed,
        cfg.args.num_prompts as usize,
    )?;
    media::attach(&mut bodies, &media);
    let _ = out.write_all(media::summary_line(&media).as_bytes());
    let media_counts = media::counts(&media, bodies.len());
    drop(media);
    prefix::add_system(&mut bodies, &prefixes);
    let payloads: Vec<String> = bodies.iter().map(Value::to_string).collect();
    let requests = encode_requests(cfg, &entries, &models, &payloads)?;
    let grpc = cfg.endpoint_type.grpc();
    let mut spec = engine_spec(cfg, requests, grpc)?;
    spec.packet_stamps = packet_stamps(cfg, spec.addr);
    spec.cancel = shape.cancel.map(|(share, after)| {
        let after = std::time::Duration::from_secs_f64(after);
        crate::engine::Cancel::spread(spec.requests.len(), share, after)
    });
    let goodput = crate::measure::llm::goodput::parse(&cfg.args.goodput)?;
    let level = Level {
        shape: shape.clone(),
        tokenizer,
        entries,
        models,
        bodies,
        payloads,
        spec,
        goodput,
        scrape: telemetry::Telemetry::from_args(&cfg.args.telemetry)?,
        media_counts,
    };
    let profile = |cfg: &ProfileConfig, out: &mut dyn Write| {
        let (outcomes, summary) = sweep_plan::drive(cfg, &shape, out, |point, out| {
            run_level(&level, cfg, point, out)
        })?;
        write_levels_page(cfg, &outcomes, &summary)?;
        Ok((outcomes, summary))
    };
    if multi_run::is_multi_run(cfg) {
        let outcomes = multi_run::drive(cfg, out, |cfg, out| profile(cfg, out).map(|r| r.0))?;
        return Ok((outcomes, sweep::SweepSummary::default()));
    }
    profile(cfg, out)
}

/// `<artifact dir>/report.html` over several levels, with the sweep summary.
fn write_levels_page(
    cfg: &ProfileConfig,
    outcomes: &[PointOutcome],
    summary: &sweep::SweepSummary,
) -> Result<()> {
    if cfg.args.report.no_html_report {
        return Ok(());
    }
    let points: Vec<html_report::PointSummary> = outcomes
        .iter()
        .map(|o| html_report::PointSummary {
            label: o.point.label(),
            dir: o.dir.clone(),
            metrics: o.metrics.clone(),
        })
        .collect();
    let mut config = input_config(cfg, cfg.points[0]);
    config["load"] = points.iter().map(|p| p.label.clone()).collect();
    let sections = [summary.html_section()];
    html_report::write_levels(cfg, &points, &report_options(cfg), &config, &sections)
}

/// Runs one level: measures it, prints its table and writes its artifacts.
fn run_level(
    l: &Level,
    cfg: &ProfileConfig,
    point: LoadPoint,
    out: &mut dyn Write,
) -> Result<PointOutcome> {
    let marked = cache_bust::level(
        cfg,
        point,
        &l.tokenizer,
        cache_bust::Unmarked {
            entries: &l.entries,
            models: &l.models,
            bodies: &l.bodies,
            spec: &l.spec,
        },
    );
    let (entries, bodies, payloads, spec, warm) = match &marked {
        Some(m) => (&m.entries, &m.bodies, &m.payloads, &m.spec, m.warm.as_ref()),
        None => (&l.entries, &l.bodies, &l.payloads, &l.spec, None),
    };
    let run_cfg = marked.as_ref().and_then(|m| m.cfg.as_ref()).unwrap_or(cfg);
    let scraping = l.scrape.as_ref().map(|t| t.start(spec.clock));
    let run = runner::run_point(spec, warm, run_cfg, point, &l.shape)?;
    let telemetry = scraping.map(|s| s.finish((run.start_ns, run.end_ns)));
    let count = |t: &str| l.tokenizer.count(t) as u64;
    let chunk_counts = ChunkCounts::default();
    let count_chunk = |t: &str| chunk_counts.get(t, |t| l.tokenizer.count_chunk(t) as u64);
    let cx = convert::Context {
        entries,
        models: &l.models,
        count: &count,
        count_chunk: &count_chunk,
        server_counts: cfg.args.use_server_token_count,
        service: cfg.endpoint_type.service(),
    };
    let mut requests = convert::convert(&run, &cx);
    crate::measure::llm::copy_receive_timing(&mut requests, &run.records);
    media::count_requests(&mut requests, &run.records, &l.media_counts);
    dataset::count_history(cfg, &run.records, &mut requests);
    let dir = point_dir(cfg, point);
    let opts = crate::measure::llm::MetricOptions {
        goodput: l.goodput.clone(),
        slice_ns: cfg.args.report.slice_ns(),
        window_ns: Some((run.start_ns, run.end_ns)),
        streaming: cfg.args.streaming,
        no_output_tokens: !cfg.endpoint_type.generates(),
    };
    let (kept, cancelled) = runner::without_cancelled(&requests);
    let metrics = crate::measure::llm::compute(&kept, &opts);
    let table = crate::report::llm::console::render(&metrics, &report_options(cfg));
    let mut console: Vec<u8> = table.into_bytes();
    if cfg.args.report.show_trace_timing {
        let trace = crate::report::llm::console::http_trace_table(&metrics);
        console.extend_from_slice(trace.as_bytes());
    }
    if l.shape.cancel.is_some() {
        let _ = writeln!(
            console,
            "Cancelled requests (on purpose, not in the figures above): {cancelled}"
        );
    }
    let _ = console.write_all(overhead_line(&run, &requests).as_bytes());
    let _ = console.write_all(dataset::lag_line(cfg, &run.records).as_bytes());
    if let Some(c) = &run.connections {
        let _ = console.write_all(c.line().as_bytes());
    }
    if cfg.args.streaming {
        let packets = l.spec.packet_stamps.as_ref().map(|p| p.take_stats());
        let _ = console.write_all(shared_reads_line(&requests, packets).as_bytes());
    }
    if let Some(line) = l.spec.tx_stamps.as_ref().and_then(|m| m.take_line()) {
        let _ = writeln!(console, "{line}");
    }
    if let Some(t) = &telemetry {
        let _ = console.write_all(t.console().as_bytes());
    }
    let _ = out.write_all(&console);
    let files = PointFiles {
        payloads,
        bodies,
        requests: &requests,
        metrics: &metrics,
        cancelled,
        sections: &telemetry.iter().map(telemetry_section).collect::<Vec<_>>(),
        console: &String::from_utf8_lossy(&console),
    };
    write_point(cfg, point, &dir, &run, &files)?;
    if let Some(t) = &telemetry {
        let names = export::ExportNames::from_export_file(&cfg.args.profile_export_file);
        telemetry::add_to_summary(&dir.join(names.genai_perf_json), t)?;
    }
    for w in metrics.checks.warnings() {
        eprintln!("Warning: {}: {w}", point.label());
    }
    let _ = writeln!(out, "Results in {}", dir.display());
    let aiperf_dir = layout::aiperf_dir(cfg, point);
    if aiperf_dir != dir {
        let _ = writeln!(out, "AIPerf's files in {}", aiperf_dir.display());
    }
    let failure = level_failure(point, &run, &dir, &requests, &kept, cancelled, cfg);
    Ok(PointOutcome {
        point,
        dir,
        aiperf_dir,
        requests,
        metrics,
        cancelled,
        interrupted: run.interrupted,
        telemetry,
        failure,
    })
}

/// Why a measured level counts as failed: the failure threshold tripped, every request
/// failed, or the server went away mid-run.
fn level_failure(
    point: LoadPoint,
    run: &runner::PointRun,
    dir: &std::path::Path,
    requests: &[LlmRequest],
    kept: &[LlmRequest],
    cancelled: u64,
    cfg: &ProfileConfig,
) -> Option<Error> {
    if let (Some((failed, total)), Some(t)) = (run.threshold_hit, cfg.load.failed_request_threshold)
    {
        return Some(Error::generic(format!(
            "profile: {}: --failed-request-threshold {t} exceeded: {failed} of {total} \
             finished requests failed, so the run stopped (results so far are in {})",
            point.label(),
            dir.display()
        )));
    }
    if let Err(e) = check_failures(point, run, requests, kept, cancelled) {
        return Some(e);
    }
    // As in perf_analyzer mode: a server gone mid-run exits 99, its reports written.
    run.cut_short
        .as_ref()
        .map(|why| Error::generic(format!("{}: {why}", point.label())))
}

/// A level whose every (not cancelled) request failed is an error; some failures are a
/// warning on stderr.
fn check_failures(
    point: LoadPoint,
    run: &runner::PointRun,
    requests: &[LlmRequest],
    kept: &[LlmRequest],
    cancelled: u64,
) -> Result<()> {
    let fails = failure_tally(run, requests);
    let summary = fails.summary((run.records.len() as u64).saturating_sub(cancelled));
    if !kept.is_empty() && kept.iter().all(|r| !r.ok()) {
        if let Some(line) = summary {
            return Err(Error::generic(line));
        }
        let first = kept[0].error.as_ref().map_or("", |e| e.message.as_str());
        return Err(Error::generic(format!(
            "every request at {} failed; the first: {first}",
            point.label()
        )));
    }
    if let Some(line) = summary {
        let line = crate::text::escape_control(&line);
        eprintln!("Warning: {}: {line}", point.label());
    }
    Ok(())
}

/// The engine's failures (cancelled ones aside), and the failures found in replies the
/// engine saw complete (`requests` in record order): an error inside a 2xx reply, a stream
/// that ended without `[DONE]`.
fn failure_tally(run: &runner::PointRun, requests: &[LlmRequest]) -> FailTally {
    let mut fails = runner::fails_without_cancelled(&run.fails);
    for (record, request) in run.records.iter().zip(requests) {
        if let (true, Some(e)) = (record.ok, &request.error) {
            fails.add(e.fail_kind(), || e.message.clone());
        }
    }
    fails
}

/// The engine's view of a profile run: every request kept (bodies hold the stream), failures
/// counted without stopping the run.
fn engine_spec(cfg: &ProfileConfig, requests: Vec<Vec<u8>>, grpc: bool) -> Result<EngineSpec> {
    let wire = cfg.endpoint_type.service().wire(&cfg.address, &cfg.headers);
    Ok(EngineSpec {
        addr: crate::run::setup::resolve(&cfg.address)?,
        requests: Arc::new(requests),
        keep_bodies: true,
        keep_going: true,
        // AIPerf's http_req_* metrics; gRPC (kserve) runs have none.
        http_trace: !grpc,
        rx_stamps: true,
        tx_stamps: Some(Default::default()),
        packet_stamps: None,
        fresh_connections: cfg.args.compat.connection_reuse_strategy
            == Some(cli_compat::ConnectionReuse::Never),
        pin: true,
        max_workers: cfg
            .args
            .max_workers
            .unwrap_or_else(|| crate::engine::available_cores().len().max(1)),
        clock: Clock::new(),
        tls: cfg.tls.clone(),
        wire,
        sequences: None,
        slots: None,
        // AIPerf's limit is a total one; without --request-idle-timeout it bounds every
        // wait too (an idle limit equal to it never fires first).
        request_limits: RequestLimits {
            total: Some(cfg.request_timeout),
            idle: Some(cfg.request_idle_timeout.unwrap_or(cfg.request_timeout)),
            total_flag: cfg.request_timeout_flag,
        },
        // Reads are timed by the kernel's receive stamps; streams may gather between reads.
        read_batch: Some({
            let batch = if cfg.args.streaming {
                cfg.args.read_batch_us
            } else {
                0
            };
            std::time::Duration::from_micros(batch)
        }),
        reply_check: Default::default(),
        max_response_bytes: cfg.args.max_response_bytes,
        cancel: None,
        prefill: cfg.load.prefill_concurrency.map(|n| PrefillCap {
            limit: n as usize,
            is_token: reply::has_output,
        }),
    })
}

/// The packet socket that times streamed chunks per TCP segment: for `--streaming` over
/// plain HTTP/1.1 or gRPC unless `--no-packet-stamps`; where it cannot be opened (no root or
/// CAP_NET_RAW), one line on stderr says so and chunks keep their reads' times.
fn packet_stamps(cfg: &ProfileConfig, addr: std::net::SocketAddr) -> Option<Arc<PacketStamps>> {
    if !cfg.args.streaming || cfg.args.no_packet_stamps || cfg.tls.is_some() {
        return None;
    }
    match PacketStamps::open(addr) {
        Ok(p) => Some(Arc::new(p)),
        Err(e) => {
            eprintln!(
                "info: chunk times per TCP segment are off (packet socket: {e}; it needs root \
                 or CAP_NET_RAW): chunks that share a read carry its time \
                 (--no-packet-stamps: not tried)"
            );
            None
        }
    }
}

/// The client's own cost: load-worker CPU per output token and per chunk.
fn overhead_line(run: &runner::PointRun, requests: &[LlmRequest]) -> String {
    let tokens: u64 = requests.iter().map(|r| r.osl).sum();
    let chunks: usize = requests.iter().map(|r| r.chunks.len()).sum();
    let cpu_s = run.worker_cpu_ns as f64 / 1e9;
    let per = |n: f64| {
        if n > 0.0 {
            format!("{:.2}", run.worker_cpu_ns as f64 / 1e3 / n)
        } else {
            "n/a".into()
        }
    };
    format!(
        "Client load-worker CPU: {cpu_s:.3} s ({} us per output token, {} us per chunk, {} us per request)\n",
        per(tokens as f64),
        per(chunks as f64),
        per(requests.len() as f64)
    )
}

/// How finely the chunks were timed. With the packet socket (`packets`), each chunk has the
/// time of the TCP segment holding its last byte: chunks sharing a time with the next one
/// came in one segment, or in a read whose segments were not all seen. Without it, a chunk
/// that arrived in the same read as the next chunk of its stream carries that read's
/// arrival time, so its own may have been earlier (the server wrote both at once, or the
/// client read too late to tell them apart): by at most the time since its stream's
/// previous read, whose p99 and max the line gives, naming the metrics built on chunk gaps.
fn shared_reads_line(requests: &[LlmRequest], packets: Option<PacketStats>) -> String {
    let (shared, total) = shared_reads(requests);
    if total == 0 {
        return String::new();
    }
    let pct = shared as f64 * 100.0 / total as f64;
    let mut line = match packets {
        Some(p) => {
            let mut line = format!(
                "Chunks timed per TCP segment (packet socket): {} reads held several segments; {shared} of {total} chunks ({pct:.1} %) share their time with the next chunk of their stream (one segment carried both)",
                p.split_reads
            );
            if p.missed_reads > 0 || p.dropped > 0 {
                line += &format!(
                    ", or a read whose segments were not all seen ({} reads, {} packets dropped by the kernel) and whose time they carry",
                    p.missed_reads, p.dropped
                );
            }
            line
        }
        None => format!(
            "Chunks timed by a shared read: {shared} of {total} ({pct:.1} %) arrived in the same read as the next chunk of their stream and carry its time"
        ),
    };
    let unseen = packets.map_or(true, |p| p.missed_reads > 0 || p.dropped > 0);
    let mut bounds = late_bounds(requests);
    if unseen && !bounds.is_empty() {
        bounds.sort_unstable();
        let p99 = bounds[(bounds.len() * 99).div_ceil(100) - 1];
        let max = bounds[bounds.len() - 1];
        line += &format!(
            "; each may have arrived earlier, by at most the time since its stream's previous read: p99 {:.3} ms, max {:.3} ms (inter token latency, inter chunk latency, time to second token and output token throughput per user rest on these times)",
            p99 as f64 / 1e6,
            max as f64 / 1e6
        );
    }
    line.push('\n');
    line
}

/// For every chunk that carries the next chunk's time (past its stream's first time): how
/// much earlier it may have arrived, the time since the stream's previous distinct time
/// (ns). It came after that read's data, TCP delivering in order.
fn late_bounds(requests: &[LlmRequest]) -> Vec<u64> {
    let mut bounds = Vec::new();
    for r in requests {
        let mut previous: Option<u64> = None;
        for (i, c) in r.chunks.iter().enumerate() {
            let next_same = r
                .chunks
                .get(i + 1)
                .is_some_and(|n| n.arrival_ns == c.arrival_ns);
            if let (true, Some(p)) = (next_same, previous) {
                bounds.push(c.arrival_ns.saturating_sub(p));
            }
            if !next_same {
                previous = Some(c.arrival_ns);
            }
        }
    }
    bounds
}

/// Chunks whose arrival time equals the next chunk's of the same request, and all chunks.
pub fn shared_reads(requests: &[LlmRequest]) -> (usize, usize) {
    let shared = requests
        .iter()
        .flat_map(|r| r.chunks.windows(2))
        .filter(|w| w[0].arrival_ns == w[1].arrival_ns)
        .count();
    (shared, requests.iter().map(|r| r.chunks.len()).sum())
}

/// Which rows the tables show.
fn report_options(cfg: &ProfileConfig) -> crate::report::llm::ReportOptions {
    crate::report::llm::ReportOptions {
        kind: cfg.endpoint_type.service().report(),
        streaming: cfg.args.streaming,
    }
}

/// Every request's bytes, pre-encoded once by the endpoint's kind (HTTP/1.1 POSTs of the
/// JSON bodies, or gRPC `ModelInferRequest` messages for kserve).
fn encode_requests(
    cfg: &ProfileConfig,
    entries: &[Entry],
    models: &[u32],
    payloads: &[String],
) -> Result<Vec<Vec<u8>>> {
    let codec = cfg.endpoint_type.service();
    entries
        .iter()
        .zip(models)
        .zip(payloads)
        .map(|((e, m), p)| {
            let model = cfg.models[*m as usize].as_str();
            let path = endpoint_for(cfg, model);
            let post = Post {
                address: &cfg.address,
                path: &path,
                headers: &cfg.headers,
            };
            codec.encode(&payload::prompt(cfg, model, e), p.as_bytes(), &post)
        })
        .collect()
}

/// The request path for `model` (Triton generate paths carry the model name).
fn endpoint_for(cfg: &ProfileConfig, model: &str) -> String {
    match &cfg.args.endpoint {
        None => cfg
            .endpoint_type
            .endpoint()
            .default_path(model, cfg.args.streaming),
        Some(_) => cfg.endpoint.clone(),
    }
}

/// The prompts: from `--input-file` (ISL counted by the client tokenizer), else synthetic prompts
/// of exact token length.
fn prepare_entries(cfg: &ProfileConfig, tok: &Tokenizer) -> Result<Vec<Entry>> {
    let args = &cfg.args;
    let mut gen = PromptGen::new(tok.clone(), args.random_seed);
    if let Some(path) = &args.input_file {
        let entries = if path.is_dir() {
            rankings_dir::read(path, cfg)?
        } else {
            input_file::read(path)?
        };
        return Ok(counted(cfg, tok, &mut gen, entries));
    }
    // The class draws of --sequence-distribution: a stream of their own, so the lengths'
    // stream is the same with and without a mix.
    let mut classes = args.random_seed ^ 0x0073_6571_6469_7374;
    let names = &args.dataset.synthetic_files;
    if names.is_empty() {
        return Ok(synthetic_prompts(
            cfg,
            &mut gen,
            &mut classes,
            args.num_prompts,
        ));
    }
    if cfg.endpoint_type.input() != Input::QueryPassages {
        // One set of --num-prompts prompts per name, in the order named.
        let mut entries = Vec::new();
        for _ in names {
            entries.extend(synthetic_prompts(
                cfg,
                &mut gen,
                &mut classes,
                args.num_prompts,
            ));
        }
        return Ok(entries);
    }
    let text = || format!("synthetic:{}", names.join(","));
    if !(names.iter().any(|n| n == "queries") && names.iter().any(|n| n == "passages")) {
        return Err(Error::usage(format!(
            "profile: --input-file {} with --endpoint-type rankings needs the names queries \
             and passages (synthetic:queries,passages)",
            text()
        )));
    }
    if args.sweep.num_prefix_prompts > 0 {
        return Err(Error::usage(format!(
            "profile: --num-prefix-prompts applies to prompts sent as text, not to the \
             rankings bodies of --input-file {}",
            text()
        )));
    }
    // As GenAI-Perf: --num-prompts queries, and --num-prompts rows of --batch-size-text
    // passages, each a synthetic prompt of its own.
    let batch = cfg.batch_size.max(1) as u64;
    let queries: Vec<String> = synthetic_prompts(cfg, &mut gen, &mut classes, args.num_prompts)
        .into_iter()
        .map(|e| e.text)
        .collect();
    let passages: Vec<String> = synthetic_prompts(
        cfg,
        &mut gen,
        &mut classes,
        args.num_prompts.saturating_mul(batch),
    )
    .into_iter()
    .map(|e| e.text)
    .collect();
    let groups: Vec<Vec<String>> = passages
        .chunks(batch as usize)
        .map(<[String]>::to_vec)
        .collect();
    let entries = rankings_dir::entries(cfg, &queries, &groups);
    Ok(counted(cfg, tok, &mut gen, entries))
}

/// Entries read from files: their input lengths by the client tokenizer, and the asked
/// output length where the file gives none.
fn counted(
    cfg: &ProfileConfig,
    tok: &Tokenizer,
    gen: &mut PromptGen,
    mut entries: Vec<Entry>,
) -> Vec<Entry> {
    for e in &mut entries {
        e.isl = tok.count(&e.text) as u64;
        if e.osl.is_none() {
            e.osl = requested_osl(cfg, gen);
        }
    }
    entries
}

/// `n` synthetic prompts of the synthetic length flags (or `--sequence-distribution`).
fn synthetic_prompts(
    cfg: &ProfileConfig,
    gen: &mut PromptGen,
    classes: &mut u64,
    n: u64,
) -> Vec<Entry> {
    let args = &cfg.args;
    let mut mismatches = 0;
    let mut entries = Vec::with_capacity(n.min(1 << 20) as usize);
    for _ in 0..n {
        let bucket = cfg.sequence_distribution.as_ref().map(|d| {
            let u = crate::random::unit(payload::splitmix(classes));
            *d.pick(u)
        });
        let (isl_mean, isl_sd) = bucket.map_or(
            (
                args.synthetic_input_tokens_mean as f64,
                args.synthetic_input_tokens_stddev,
            ),
            |b| (b.isl, b.isl_stddev),
        );
        let len = gen.sample_len(isl_mean, isl_sd);
        let p = gen.prompt(len);
        mismatches += usize::from(p.mismatch);
        let osl = match bucket {
            Some(b) => Some(gen.sample_len(b.osl, b.osl_stddev) as u64),
            None => requested_osl(cfg, gen),
        };
        entries.push(Entry {
            text: p.text,
            isl: p.tokens as u64,
            osl,
            payload: None,
        });
    }
    if mismatches > 0 {
        eprintln!(
            "warning: {mismatches} of {n} synthetic prompts could not be made exactly the \
             requested length; their true length is used as ISL"
        );
    }
    entries
}

fn requested_osl(cfg: &ProfileConfig, gen: &mut PromptGen) -> Option<u64> {
    let mean = cfg.args.output_tokens_mean?;
    Some(gen.sample_len(mean as f64, cfg.args.output_tokens_stddev) as u64)
}

/// Token counts of chunk texts already seen: streamed chunks are mostly single words that
/// recur thousands of times, and a hash lookup is far cheaper than a BPE pass.
#[derive(Default)]
struct ChunkCounts(std::cell::RefCell<std::collections::HashMap<String, u64>>);

/// Distinct chunk texts remembered at most (a run of unique chunks must not grow memory).
const CHUNK_COUNTS_KEPT: usize = 1 << 16;

impl ChunkCounts {
    fn get(&self, text: &str, count: impl Fn(&str) -> u64) -> u64 {
        if let Some(&n) = self.0.borrow().get(text) {
            return n;
        }
        let n = count(text);
        let mut seen = self.0.borrow_mut();
        if seen.len() < CHUNK_COUNTS_KEPT {
            seen.insert(text.to_string(), n);
        }
        n
    }
}

/// Fuzz entry for everything `profile` decodes from a server or a file: a whole JSON
/// response, framed SSE events, every endpoint kind's reply decoder (Triton
/// `ModelStreamInferResponse` messages among them), and `--input-file` JSONL. Any bytes give
/// results or errors, never a panic.
pub fn fuzz_llm_responses(data: &[u8]) {
    use crate::measure::record::framed_responses;
    use crate::run::kinds::reply_error::EXCERPT_CHARS;
    let whole = reply::parse_whole(1, data);
    let _ = whole.text();
    let streamed = reply::parse_events(framed_responses(data));
    let _ = streamed.text();
    // The typed fast path must read every message as the general `Value` path does.
    let general = reply::parse_events_general(framed_responses(data));
    assert_eq!(streamed, general, "typed and general SSE parsing disagree");
    // Every endpoint kind's decoder (Triton's stream responses among them), on the bytes as
    // stored events and as a whole body.
    let mut errors = vec![whole.error, streamed.error];
    for kind in crate::run::kinds::KINDS {
        if kind.endpoint.is_none() {
            continue;
        }
        for sse in [true, false] {
            let reply = reply::Reply {
                sse,
                ok: true,
                end_ns: 1,
                body: data,
            };
            errors.push(kind.service.decode(&reply).error);
        }
    }
    // A server's words in an error are one short line without control characters.
    for e in errors.iter().flatten() {
        let message = e.request_error(true, false).message;
        assert!(!message.chars().any(char::is_control), "{message:?}");
        // The message, and at most a type and a code, each cut to an excerpt.
        assert!(e.detail.chars().count() <= 4 * EXCERPT_CHARS);
    }
    let _ = input_file::parse(&String::from_utf8_lossy(data));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_counts_are_remembered_and_bounded() {
        let calls = std::cell::Cell::new(0);
        let counts = ChunkCounts::default();
        let count = |t: &str| {
            calls.set(calls.get() + 1);
            t.len() as u64
        };
        assert_eq!(counts.get(" word", count), 5);
        assert_eq!(counts.get(" word", count), 5);
        assert_eq!(counts.get("x", count), 1);
        assert_eq!(calls.get(), 2, "the repeated chunk was counted once");
        for i in 0..CHUNK_COUNTS_KEPT + 10 {
            counts.get(&i.to_string(), |_| 0);
        }
        assert_eq!(counts.0.borrow().len(), CHUNK_COUNTS_KEPT);
    }

    /// A request whose one-token chunks arrived at `times`.
    fn request(times: &[u64]) -> LlmRequest {
        use crate::measure::llm::Chunk;
        LlmRequest {
            chunks: times
                .iter()
                .map(|&arrival_ns| Chunk {
                    arrival_ns,
                    tokens: 1,
                })
                .collect(),
            ..LlmRequest::default()
        }
    }

    #[test]
    fn chunks_sharing_a_read_are_counted_per_stream() {
        // Two requests read at the same instant do not share a read with each other.
        let requests = [request(&[10, 10, 10, 20]), request(&[20, 30])];
        assert_eq!(shared_reads(&requests), (2, 6));
        let line = shared_reads_line(&requests, None);
        assert!(line.contains("2 of 6 (33.3 %)"), "{line}");
        // The first read of a stream has no earlier read to bound it; no bound, no clause.
        assert!(!line.contains("at most"), "{line}");
        assert_eq!(shared_reads_line(&[request(&[])], None), "");
    }

    #[test]
    fn shared_chunks_are_bounded_by_their_streams_previous_read() {
        use crate::transport::packet_stamps::PacketStats;
        // Reads at 1 ms, 41 ms (three chunks), 46 ms and 90 ms (two): the shared chunks of
        // the 41 ms read came after 1 ms, those of the 90 ms read after 46 ms.
        let ms = 1_000_000;
        let requests = [request(&[
            ms,
            41 * ms,
            41 * ms,
            41 * ms,
            46 * ms,
            90 * ms,
            90 * ms,
        ])];
        assert_eq!(late_bounds(&requests), [40 * ms, 40 * ms, 44 * ms]);
        let line = shared_reads_line(&requests, None);
        assert!(
            line.starts_with("Chunks timed by a shared read: 3 of 7 "),
            "{line}"
        );
        assert!(line.contains("p99 44.000 ms, max 44.000 ms"), "{line}");
        assert!(line.contains("inter token latency"), "{line}");
        // With every segment seen, equal times are one segment's: no bound is given.
        let seen = PacketStats {
            split_reads: 2,
            ..PacketStats::default()
        };
        let line = shared_reads_line(&requests, Some(seen));
        assert!(line.starts_with("Chunks timed per TCP segment (packet socket): 2 reads held several segments; 3 of 7 chunks"), "{line}");
        assert!(
            !line.contains("at most") && !line.contains("dropped"),
            "{line}"
        );
        let missed = PacketStats {
            missed_reads: 1,
            dropped: 5,
            ..seen
        };
        let line = shared_reads_line(&requests, Some(missed));
        assert!(
            line.contains("(1 reads, 5 packets dropped by the kernel)"),
            "{line}"
        );
        assert!(line.contains("p99 44.000 ms"), "{line}");
    }

    /// Failures found in replies the engine saw complete join the engine's own in the line
    /// on stderr and the error of an all-failed level.
    #[test]
    fn failures_inside_replies_are_tallied_with_the_engines() {
        use crate::measure::llm::RequestError;
        use crate::measure::{FailKind, RequestRecord};
        let ok = RequestRecord {
            ok: true,
            ..RequestRecord::default()
        };
        let reset = RequestRecord {
            fail: FailKind::Reset,
            ..RequestRecord::default()
        };
        let mut run = runner::PointRun {
            records: vec![ok, ok, ok, reset],
            ..runner::PointRun::default()
        };
        run.fails.add(FailKind::Reset, || "connection reset".into());
        let failed = |kind: &str, message: &str| LlmRequest {
            error: Some(RequestError {
                kind: kind.into(),
                message: message.into(),
                code: None,
            }),
            ..LlmRequest::default()
        };
        let mut requests = vec![
            LlmRequest::default(),
            failed("sse_error_event", "error in the response stream: oom"),
            failed("not_json", "the reply is not JSON: <html>"),
            failed("reset", "no response"),
        ];
        let fails = failure_tally(&run, &requests);
        assert_eq!(fails.total(), 3);
        assert_eq!(fails.count(FailKind::SseError), 1);
        let line = fails.summary(4).unwrap();
        assert!(
            line.starts_with("3 of 4 requests failed (reset: 1, not_json: 1, sse_error_event: 1)"),
            "{line}"
        );
        let point = LoadPoint::Concurrency(1);
        assert!(check_failures(point, &run, &requests, &requests, 0).is_ok());
        requests[0] = failed("invalid_reply", "error in the reply: no");
        let e = check_failures(point, &run, &requests, &requests, 0).unwrap_err();
        assert!(e.msg.starts_with("all 4 requests failed ("), "{}", e.msg);
    }

    /// The LLM guide's metric definitions are the ones `--help-metrics` prints, kept in sync.
    #[test]
    fn llm_guide_has_the_metric_definitions() {
        let guide = include_str!("../../../../docs/llm-guide.md");
        let table = crate::measure::llm::definitions::definitions_markdown();
        if std::env::var_os("INFERPERF_PRINT_DEFINITIONS").is_some() {
            println!("{table}");
        }
        assert!(
            guide.contains(table.trim()),
            "docs/llm-guide.md lacks the current table:\n{table}"
        );
    }
}
