//! The GenAI-Perf and AIPerf `profile` flags beyond the shared core of [`super::cli`]: each is
//! accepted with its meaning here, or refused by [`refusal`] with an error that names the
//! flag and says why. HTTPS settings use perf_analyzer's `--ssl-https-*` names.

use std::path::{Path, PathBuf};

use clap::ValueEnum;

use super::cli::{EndpointType, ProfileArgs};
use crate::error::{Error, Result};
use crate::transport::{PemOrDer, TlsClient, TlsOptions};

/// The Triton backend behind `--endpoint-type kserve`: which tensors a request carries, as
/// GenAI-Perf's converters write them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum Backend {
    /// `text_input`, `max_tokens`, `exclude_input_in_output`, `stream`, and `min_length`
    /// for `--output-tokens-mean-deterministic`.
    #[default]
    Tensorrtllm,
    /// `text_input`, `exclude_input_in_output`, `stream`, and `sampling_parameters` (a JSON
    /// string holding `max_tokens` and, for deterministic lengths, `min_tokens`).
    Vllm,
}

/// How AIPerf's `--ui-type` shows progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum UiType {
    /// A progress line (the default).
    Simple,
    /// No progress output (same as `--quiet`).
    None,
    /// AIPerf's full-screen dashboard: refused (there is none).
    Dashboard,
}

/// AIPerf's `--connection-reuse-strategy`: when an HTTP/1.1 connection is replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum ConnectionReuse {
    /// Each load slot keeps its connection open and reuses it (the default).
    #[default]
    Pooled,
    /// A new connection for every request, closed once its response is in.
    Never,
    /// AIPerf's per-conversation connections: refused (see `check`).
    StickyUserSessions,
}

/// GenAI-Perf / AIPerf flags with a meaning here, and perf_analyzer's HTTPS flags.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct CompatArgs {
    /// How HTTP/1.1 connections are reused (AIPerf's): `pooled`, each load slot keeps its
    /// connection open; `never`, a new connection for every request, closed after its
    /// response (its connect time shows in `http_req_connecting`).
    #[arg(
        long = "connection-reuse-strategy",
        value_enum,
        value_name = "STRATEGY"
    )]
    pub connection_reuse_strategy: Option<ConnectionReuse>,
    /// `--endpoint-type kserve`: the model's Triton backend, which picks the request tensors
    /// (GenAI-Perf's; default tensorrtllm).
    #[arg(long, value_enum)]
    pub backend: Option<Backend>,
    /// Texts per request for `--endpoint-type embeddings` (inputs) and `rankings`
    /// (passages); other endpoint types take 1.
    #[arg(
        short = 'b',
        long = "batch-size-text",
        visible_alias = "batch-size",
        alias = "prompt-batch-size"
    )]
    pub batch_size_text: Option<u64>,
    /// GenAI-Perf's measurement interval in ms: measures for three intervals (GenAI-Perf's
    /// time at the default stability), i.e. `--benchmark-duration` of 3 x MS / 1000 s.
    #[arg(short = 'p', long = "measurement-interval", value_name = "MS")]
    pub measurement_interval: Option<u64>,
    /// Refused: perf_analyzer's stability search has no counterpart here (see the error).
    #[arg(short = 's', long = "stability-percentage", hide = true)]
    pub stability_percentage: Option<String>,
    /// Print the effective settings (server, endpoint, TLS, load, prompts) before the run.
    #[arg(short = 'v', long)]
    pub verbose: bool,
    /// Print the version and exit.
    #[arg(long)]
    pub version: bool,
    /// AIPerf's: send `max_tokens` rather than `max_completion_tokens`. Requests here always
    /// carry `max_tokens` (GenAI-Perf's field, which every OpenAI-compatible server reads).
    #[arg(long)]
    pub use_legacy_max_tokens: bool,
    /// API key sent as `Authorization: Bearer KEY` (never written to any output file).
    #[arg(long, value_name = "KEY")]
    pub api_key: Option<String>,
    /// AIPerf's progress display: simple (progress line), none (= --quiet); dashboard is
    /// refused.
    #[arg(long = "ui-type", visible_alias = "ui", value_enum)]
    pub ui_type: Option<UiType>,
    /// HTTPS: verify the server certificate, 0|1 [default: 1].
    #[arg(long, value_name = "0|1")]
    pub ssl_https_verify_peer: Option<String>,
    /// HTTPS: verify the server name, 0|1|2 (1 and 2 both verify) [default: 2].
    #[arg(long, value_name = "0|1|2")]
    pub ssl_https_verify_host: Option<String>,
    /// HTTPS CA bundle, PEM [default: the system bundle].
    #[arg(long, value_name = "FILE")]
    pub ssl_https_ca_certificates_file: Option<PathBuf>,
    /// HTTPS client certificate [default: none].
    #[arg(long, value_name = "FILE")]
    pub ssl_https_client_certificate_file: Option<PathBuf>,
    /// HTTPS client certificate type: PEM|DER [default: PEM].
    #[arg(long, value_name = "TYPE")]
    pub ssl_https_client_certificate_type: Option<String>,
    /// HTTPS client key [default: none].
    #[arg(long, value_name = "FILE")]
    pub ssl_https_private_key_file: Option<PathBuf>,
    /// HTTPS client key type: PEM|DER [default: PEM].
    #[arg(long, value_name = "TYPE")]
    pub ssl_https_private_key_type: Option<String>,
}

/// `--url` to host:port and whether it is `https://` (default port 443 then, else 80).
pub fn server_address(url: Option<&str>, kind: EndpointType) -> Result<(String, bool)> {
    let default = kind.endpoint().default_url;
    let url = url.unwrap_or(default);
    let shown = crate::text::redact_url(url);
    let (rest, https) = match url.strip_prefix("https://") {
        Some(rest) => (rest, true),
        None => (url.strip_prefix("http://").unwrap_or(url), false),
    };
    if rest.contains("://") {
        return Err(Error::usage(format!(
            "profile: --url '{shown}' must be host:port, http://host:port or https://host:port"
        )));
    }
    let host = rest.split('/').next().unwrap_or("");
    if host.is_empty() {
        return Err(Error::usage(format!(
            "profile: --url '{shown}' has no host"
        )));
    }
    if host.contains('@') {
        return Err(Error::usage(format!(
            "profile: --url '{shown}': {}",
            crate::text::URL_CREDENTIALS
        )));
    }
    let has_port = match host.rfind(']') {
        Some(end) => host[end..].contains(':'),
        None => host.contains(':'),
    };
    let port = if https { 443 } else { 80 };
    let address = if has_port {
        host.to_string()
    } else {
        format!("{host}:{port}")
    };
    Ok((address, https))
}

/// GenAI-Perf's prefixed `--input-file` values, read as GenAI-Perf reads them (the prefix
/// wins over a file of that name): `payload:FILE` is the payload file FILE (the dataset
/// format `payload`), `synthetic:NAME1,NAME2` asks for one set of synthetic prompts per
/// name (for rankings, the names `queries` and `passages`).
pub fn input_file_prefix(args: &mut ProfileArgs) -> Result<()> {
    let Some(text) = args
        .input_file
        .as_ref()
        .map(|p| p.to_string_lossy().into_owned())
    else {
        return Ok(());
    };
    if let Some(file) = text.strip_prefix("payload:") {
        if file.is_empty() {
            return Err(Error::usage(
                "profile: --input-file payload: names no file (payload:FILE)",
            ));
        }
        if args.dataset.custom_dataset_type.is_some() || args.dataset.dataset_name.is_some() {
            return Err(Error::usage(format!(
                "profile: --input-file {text} is a GenAI-Perf payload file; give no \
                 --custom-dataset-type or --dataset-name with it"
            )));
        }
        if !std::path::Path::new(file).is_file() {
            return Err(Error::usage(format!(
                "profile: --input-file {text}: no such file"
            )));
        }
        args.input_file = Some(file.into());
        args.dataset.custom_dataset_type = Some(super::dataset::formats::Format::Payload);
    } else if let Some(names) = text.strip_prefix("synthetic:") {
        let names: Vec<String> = names.split(',').map(|n| n.trim().to_string()).collect();
        if names.iter().any(String::is_empty) {
            return Err(Error::usage(format!(
                "profile: --input-file {text}: give the file names after synthetic:, \
                 separated by commas (synthetic:queries,passages)"
            )));
        }
        args.input_file = None;
        args.dataset.synthetic_files = names;
    }
    Ok(())
}

/// GenAI-Perf's `-p MS`: a time window of three intervals (what GenAI-Perf measures at the
/// default stability), exclusive with `--request-count` as there.
pub fn measurement_interval(args: &mut ProfileArgs) -> Result<()> {
    let Some(ms) = args.compat.measurement_interval else {
        return Ok(());
    };
    if ms == 0 {
        return Err(Error::usage(
            "profile: -p/--measurement-interval must be at least 1 ms",
        ));
    }
    if args.request_count.is_some() || args.benchmark_duration.is_some() {
        return Err(Error::usage(
            "profile: -p/--measurement-interval sets the measurement window; give it, \
             --request-count or --benchmark-duration, not two of them",
        ));
    }
    args.benchmark_duration = Some(3.0 * ms as f64 / 1000.0);
    Ok(())
}

/// The version line `--version` prints.
pub fn version_text() -> String {
    format!("inferperf {}\n", env!("CARGO_PKG_VERSION"))
}

/// Flags of GenAI-Perf or AIPerf that `profile` refuses, and why: (flag or flag prefix
/// ending in `-`, reason). Only consulted for flags the parser does not know, so a flag
/// another part of `profile` accepts is never refused here.
const REFUSED: &[(&str, &str)] = &[
    ("--input-dataset", "inferperf never downloads datasets; save the dataset as a local file and give it with --input-file"),
    ("--public-dataset", "inferperf never downloads datasets; save the dataset as a local file and give it with --input-file"),
    ("--hf-subset", "inferperf never downloads datasets; give a local file with --input-file"),
    ("--grpc-method", "the dynamic_grpc endpoint type is not supported; use --endpoint-type kserve for Triton gRPC"),
    ("--output-format", "older GenAI-Perf spelling; use --endpoint-type (and --backend tensorrtllm|vllm for kserve)"),
    ("--checkpoint-dir", "there is no checkpointing: every run writes complete results to --artifact-dir"),
    ("--enable-checkpointing", "there is no checkpointing: every run writes complete results to --artifact-dir"),
    ("--image-source", "synthetic images are generated from --random-seed (a noisy colour gradient); no image files or stock sources are read"),
    ("--image-source-sampling", "synthetic images are generated from --random-seed; no image files or stock sources are read"),
    ("--video-", "video inputs are not generated; prompts are text"),
    ("--batch-size-video", "video inputs are not generated; prompts are text"),
    ("--transport", "profile speaks HTTP/1.1 (chat, completions, embeddings, rankings, generate) and gRPC (kserve); the endpoint type picks it"),
    ("--api-host", "there is no AIPerf control API; the run is driven from the command line"),
    ("--api-port", "there is no AIPerf control API; the run is driven from the command line"),
    ("--mlflow-", "results are written as files under --artifact-dir; nothing is uploaded"),
    ("--wandb-", "results are written as files under --artifact-dir; nothing is uploaded"),
    ("--otel-", "results are written as files under --artifact-dir; nothing is exported to a collector"),
    ("--zmq-", "profile runs in one process; there is no ZMQ service bus"),
    ("--record-processors", "profile runs in one process; load workers are set with --max-workers"),
    ("--accuracy-", "accuracy benchmarks are not run; profile measures performance"),
    ("--config", "settings come from the command line only; there is no YAML config file"),
    // AIPerf 0.13 flags with no counterpart here, by --help group.
    // Endpoint
    ("--url-strategy", "profile sends to one server address (-u); run one profile per server"),
    ("--wait-for-model-", "profile does not poll the server for readiness; start it once the model answers"),
    ("--reset-kv-cache-", "no control requests are sent to the server; reset its cache before the run"),
    ("--reset-kv-cache", "no control requests are sent to the server; reset its cache before the run"),
    ("--server-profiler-", "no control requests are sent to the server; start and stop its profiler around the run"),
    ("--server-profiler", "no control requests are sent to the server; start and stop its profiler around the run"),
    ("--transport-type", "profile speaks HTTP/1.1 (chat, completions, embeddings, rankings, generate) and gRPC (kserve); the endpoint type picks it"),
    ("--per-chunk-usage", "usage is read where the server sends it; to ask for it on every chunk give --extra-inputs with the server's option"),
    ("--download-video-content", "video generation endpoints are not supported"),
    ("--request-content-type", "request bodies are JSON (or gRPC protobuf for kserve); multipart forms are not sent"),
    ("--session-header", "conversation turns carry no session-affinity header; add a fixed one with -H"),
    ("--uuid-and-strip", "no image cache hints are sent"),
    // Tokenizer
    ("--apply-chat-template", "input tokens are counted on the prompt text itself, without the model's chat template"),
    // Input
    ("--hf-weka-dataset", "inferperf never downloads datasets; give a local file with --input-file"),
    ("--dataset-filter", "inferperf never downloads datasets; give a local file with --input-file"),
    ("--ignore-trace-delays", "a trace's timestamps are replayed with --fixed-schedule, or ignored without it; conversation pauses come from the file's delays"),
    ("--use-think-time-only", "AIPerf's weka trace loader is not supported; traces are read as mooncake_trace"),
    ("--max-context-length", "AIPerf's weka trace loader is not supported; traces are read as mooncake_trace"),
    ("--allow-dataset-wrap", "AIPerf's weka and agentic replay are not supported"),
    ("--trace-session-sample-ratio", "AIPerf's baseten trace loader is not supported; traces are read as mooncake_trace"),
    // Conversation Input
    ("--inter-turn-delay-cap-seconds", "AIPerf's DAG and baseten trace loaders are not supported"),
    ("--max-idle-gap-cap-seconds", "AIPerf's DAG and baseten trace loaders are not supported"),
    ("--open-loop-", "AIPerf's baseten trace loader is not supported; a trace's timestamps are replayed with --fixed-schedule"),
    ("--no-open-loop-", "AIPerf's baseten trace loader is not supported; a trace's timestamps are replayed with --fixed-schedule"),
    ("--omit-kv-hints", "AIPerf's baseten trace loader is not supported; mooncake hash_ids are never sent to the server"),
    ("--force-min-tokens", "AIPerf's baseten trace loader is not supported; --output-tokens-mean-deterministic sends min_tokens"),
    ("--no-force-min-tokens", "AIPerf's baseten trace loader is not supported"),
    // Prompt, Prefix Prompt, ISL
    ("--prompt-corpus", "synthetic prompts are drawn from one built-in corpus"),
    ("--random-range-ratio", "lengths are drawn from a normal distribution (--isl-stddev, --osl-stddev) or a --sequence-distribution mix"),
    ("--random-corpus-style", "synthetic prompts are drawn from one built-in corpus"),
    // Rankings
    ("--rankings-", "synthetic rankings requests are not generated; give a rankings folder (queries.jsonl and passages.jsonl) with --input-file"),
    // Synthesis
    ("--synthesis-", "AIPerf's trace synthesis is not done; traces replay as given (--fixed-schedule-speedup scales their time)"),
    // Load Generator, Warmup: AIPerf's agentic replay
    ("--trajectory-start-", "AIPerf's agentic replay is not supported"),
    ("--burst-phase-starts", "AIPerf's agentic replay is not supported"),
    ("--trace-idle-gap-cap-seconds", "AIPerf's weka trace replay is not supported"),
    ("--system-idle-gap-cap-seconds", "AIPerf's agentic replay is not supported"),
    ("--agentic-", "AIPerf's agentic replay is not supported"),
    // Scenario
    ("--scenario", "AIPerf's locked scenarios are not supported; give the run's flags"),
    ("--unsafe-override", "AIPerf's locked scenarios are not supported; give the run's flags"),
    // Output
    ("--profile-export-prefix", "AIPerf's files keep their names; --profile-export-file names GenAI-Perf's export"),
    ("--export-level", "the summaries and profile_export.jsonl (every request's record) are always written; raw request and response bodies are not"),
    ("--profile-export-level", "the summaries and profile_export.jsonl (every request's record) are always written; raw request and response bodies are not"),
    ("--plot-required", "there is no auto-plot step; --generate-plots writes the plots in the run itself"),
    ("--export-outputs-json", "the generated text is not saved"),
    ("--stream", "results are written as files under --artifact-dir; nothing is exported to a collector"),
    ("--gen-ai-provider", "results are written as files under --artifact-dir; nothing is exported to a collector"),
    // HTTP Trace
    // Server Metrics, Network Latency
    ("--server-metrics-formats", "server metrics are reported in the run's summaries; no separate server-metrics files are written"),
    ("--network-latency-", "no network round trip is subtracted: latencies are as measured at the client"),
    // Service
    ("--record-processor-service-count", "profile runs in one process; load workers are set with --max-workers"),
    ("--stats-interval", "the progress line (--ui-type simple) updates on its own period; there is no stats log block"),
    // Multi-Run: adaptive search, convergence and recipes
    ("--convergence-", "runs are not stopped early on convergence; every --num-profile-runs run is made"),
    ("--sweep-type", "a sweep walks one list (--concurrency or --request-rate values); lists of other flags are not combined"),
    ("--no-sweep-table", "a sweep prints its table once, after the last level"),
    ("--search-", "AIPerf's adaptive (Bayesian) search is not supported; sweep a list of levels, or find the highest rate within the --goodput limits with --sla-search"),
    ("--optuna-", "AIPerf's adaptive (Bayesian) search is not supported; sweep a list of levels, or use --sla-search"),
    ("--bo-constraint-mode", "AIPerf's adaptive (Bayesian) search is not supported; sweep a list of levels, or use --sla-search"),
    ("--variant", "sweep variations are the values of one list flag (--concurrency or --request-rate)"),
    ("--sweep-variant", "sweep variations are the values of one list flag (--concurrency or --request-rate)"),
    ("--ttft-sla-ms", "AIPerf's search recipes are not supported; give the limits with --goodput (e.g. time_to_first_token:200)"),
    ("--itl-sla-ms", "AIPerf's search recipes are not supported; give the limits with --goodput (e.g. inter_token_latency:20)"),
    ("--tpot-sla-ms", "AIPerf's search recipes are not supported; give the limits with --goodput (e.g. inter_token_latency:20)"),
    ("--e2e-sla-ms", "AIPerf's search recipes are not supported; give the limits with --goodput (e.g. request_latency:2000)"),
    ("--error-rate-sla", "AIPerf's search recipes are not supported; --failed-request-threshold stops a run with too many failures"),
    ("--slo-attainment-fraction", "AIPerf's search recipes are not supported; --sla-min-goodput-fraction sets the share for --sla-search"),
    ("--isl-osl-pairs", "AIPerf's search recipes are not supported; mix lengths with --sequence-distribution"),
    ("--degradation-", "AIPerf's search recipes are not supported; sweep --concurrency and read sweep_summary.csv"),
    ("--isl-min", "AIPerf's search recipes are not supported; run one profile per input length"),
    ("--isl-max", "AIPerf's search recipes are not supported; run one profile per input length"),
    ("--isl-steps", "AIPerf's search recipes are not supported; run one profile per input length"),
    ("--osl-min", "AIPerf's search recipes are not supported; run one profile per output length"),
    ("--osl-max", "AIPerf's search recipes are not supported; run one profile per output length"),
    ("--osl-steps", "AIPerf's search recipes are not supported; run one profile per output length"),
    ("--concurrency-min", "AIPerf's search recipes are not supported; sweep a list: --concurrency 1,2,4,8"),
    ("--concurrency-max", "AIPerf's search recipes are not supported; sweep a list: --concurrency 1,2,4,8"),
    ("--concurrency-steps", "AIPerf's search recipes are not supported; sweep a list: --concurrency 1,2,4,8"),
    ("--log-level", "use -v/--verbose for the effective settings; errors and warnings always go to stderr"),
    ("--extra-verbose", "use -v/--verbose for the effective settings; errors and warnings always go to stderr"),
    ("--prefill-concurrency-ramp-duration", "the --prefill-concurrency cap holds from the first request; it is not ramped"),
    ("--conversation-turn-delay-ratio", "turn pauses are set in ms by --conversation-turn-delay-mean and --conversation-turn-delay-stddev"),
    ("--session-turn-delay-ratio", "turn pauses are set in ms by --conversation-turn-delay-mean and --conversation-turn-delay-stddev"),
    ("--warmup-duration", "warm-up is a number of requests (--warmup-request-count), sent at the run's load"),
    ("--warmup-grace-period", "warm-up is a number of requests (--warmup-request-count), each waited for"),
    ("--num-warmup-sessions", "warm-up is a number of requests (--warmup-request-count)"),
    ("--warmup-concurrency", "warm-up requests (--warmup-request-count) are sent at the run's own load"),
    ("--warmup-request-rate", "warm-up requests (--warmup-request-count) are sent at the run's own load"),
    ("--warmup-concurrency-ramp-duration", "warm-up requests (--warmup-request-count) are sent at the run's own load"),
    ("--warmup-request-rate-ramp-duration", "warm-up requests (--warmup-request-count) are sent at the run's own load"),
    ("--warmup-arrival-pattern", "warm-up requests (--warmup-request-count) are sent at the run's own load"),
    ("--warmup-prefill-concurrency", "warm-up requests share the run's --prefill-concurrency cap"),
    ("--warmup-prefill-concurrency-ramp-duration", "warm-up requests share the run's --prefill-concurrency cap; it is not ramped"),
    // Multi-Run
    ("--no-set-consistent-seed", "every --num-profile-runs run sends the same prepared requests"),
    ("--vary-seed-per-trial", "every --num-profile-runs run sends the same prepared requests"),
    ("--convergence-", "--num-profile-runs runs a fixed number of runs; there is no early stop on convergence"),
    ("--parameter-sweep-same-seed", "every level of a list or sweep sends the same prepared requests"),
    ("--no-parameter-sweep-same-seed", "every level of a list or sweep sends the same prepared requests"),
];

/// The refusal for a flag the parser does not know, when it is one of GenAI-Perf's or
/// AIPerf's: "profile: FLAG is not supported: WHY".
pub fn refusal(arg: &str) -> Option<String> {
    let flag = arg.split_once('=').map_or(arg, |(f, _)| f);
    REFUSED
        .iter()
        .find(|(name, _)| {
            if name.ends_with('-') {
                flag.starts_with(name)
            } else {
                flag == *name
            }
        })
        .map(|(_, why)| format!("profile: {flag} is not supported: {why}"))
}

/// The checks and meanings of the flags above that need the rest of the configuration.
pub fn check(args: &CompatArgs, endpoint_type: EndpointType) -> Result<()> {
    if let Some(s) = &args.stability_percentage {
        return Err(Error::usage(format!(
            "profile: -s/--stability-percentage {s} is not supported: profile measures one \
             window set by --request-count, --benchmark-duration or -p, with no search for \
             stable windows, so there is no stability threshold to apply"
        )));
    }
    if args.ui_type == Some(UiType::Dashboard) {
        return Err(Error::usage(
            "profile: --ui-type dashboard is not supported: there is no full-screen \
             dashboard; use --ui-type simple (a progress line) or none",
        ));
    }
    if args.connection_reuse_strategy == Some(ConnectionReuse::StickyUserSessions) {
        return Err(Error::usage(
            "profile: --connection-reuse-strategy sticky-user-sessions is not supported: a \
             conversation's turns already ride on their load slot's connection; use pooled or \
             never",
        ));
    }
    if args.connection_reuse_strategy == Some(ConnectionReuse::Never) && endpoint_type.grpc() {
        return Err(Error::usage(
            "profile: --connection-reuse-strategy never applies to HTTP/1.1 endpoints; \
             --endpoint-type kserve keeps one gRPC connection per worker",
        ));
    }
    if args.backend.is_some() && !endpoint_type.service().takes_backend() {
        return Err(Error::usage(
            "profile: --backend applies to --endpoint-type kserve (a Triton model's tensors)",
        ));
    }
    match args.batch_size_text {
        Some(0) => Err(Error::usage(
            "profile: --batch-size-text must be at least 1",
        )),
        Some(b) if b > MAX_BATCH => Err(Error::usage(format!(
            "profile: --batch-size-text must be at most {MAX_BATCH} (got {b})"
        ))),
        Some(b) if b > 1 && !endpoint_type.service().takes_batches() => Err(Error::usage(format!(
            "profile: --batch-size-text {b} applies to --endpoint-type embeddings and \
             rankings (as in GenAI-Perf); {} requests carry one prompt",
            endpoint_type.name()
        ))),
        _ => Ok(()),
    }
}

/// What `-v` prints before the run: the effective settings, header values left out.
pub fn settings_text(cfg: &super::cli::ProfileConfig) -> String {
    let tls = match &cfg.tls {
        Some(t) => format!("TLS (server name {:?})", t.server_name()),
        None => "plain".into(),
    };
    let names: Vec<&str> = cfg.headers.iter().map(|(n, _)| n.as_str()).collect();
    let extra: Vec<String> = cfg.extra.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let points: Vec<String> = cfg.points.iter().map(|p| p.label()).collect();
    let a = &cfg.args;
    format!(
        "Server: {} ({tls})\nEndpoint: {} {:?}{}\nModels: {}\nLoad: {}; request count {}; \
         benchmark duration {}; warm-up {}\nPrompts: {} tokens (sd {}), {} distinct, seed {}, \
         tokenizer {} (revision {})\nOutput tokens: {}\nHeaders: {}\nExtra inputs: {}\n",
        cfg.address,
        cfg.endpoint_type.name(),
        cfg.endpoint,
        if cfg.endpoint_type.service().takes_backend() {
            format!(" (backend {:?})", cfg.backend).to_lowercase()
        } else {
            String::new()
        },
        cfg.models.join(", "),
        points.join(", "),
        a.request_count.map_or("default".into(), |n| n.to_string()),
        a.benchmark_duration
            .map_or("none".into(), |d| format!("{d} s")),
        a.warmup_request_count,
        a.synthetic_input_tokens_mean,
        a.synthetic_input_tokens_stddev,
        a.num_prompts,
        a.random_seed,
        a.tokenizer.as_deref().unwrap_or_default(),
        a.tokenizer_revision,
        a.output_tokens_mean
            .map_or("server decides".into(), |n| n.to_string()),
        if names.is_empty() {
            "none".into()
        } else {
            names.join(", ")
        },
        if extra.is_empty() {
            "none".into()
        } else {
            extra.join(", ")
        },
    )
}

/// `--batch-size-text` at most.
const MAX_BATCH: u64 = 4096;

/// `--api-key` as an `Authorization` header, refused beside one given with `-H`.
pub fn api_key_header(
    args: &CompatArgs,
    headers: &[(String, String)],
) -> Result<Option<(String, String)>> {
    let Some(key) = &args.api_key else {
        return Ok(None);
    };
    if key.trim().is_empty() || key.contains(['\r', '\n']) {
        return Err(Error::usage(
            "profile: --api-key must be a non-empty key on one line",
        ));
    }
    if headers
        .iter()
        .any(|(n, _)| n.eq_ignore_ascii_case("authorization"))
    {
        return Err(Error::usage(
            "profile: give --api-key or an Authorization header (-H), not both",
        ));
    }
    Ok(Some((
        "Authorization".into(),
        format!("Bearer {}", key.trim()),
    )))
}

/// The TLS client for an `https://` URL (ALPN `http/1.1`, or `h2` for gRPC), built now so
/// a bad CA or certificate file fails before the run; `--ssl-https-*` without https is an
/// error.
pub fn tls(args: &CompatArgs, https: bool, host: &str, grpc: bool) -> Result<Option<TlsClient>> {
    let given = args.ssl_https_verify_peer.is_some()
        || args.ssl_https_verify_host.is_some()
        || args.ssl_https_ca_certificates_file.is_some()
        || args.ssl_https_client_certificate_file.is_some()
        || args.ssl_https_client_certificate_type.is_some()
        || args.ssl_https_private_key_file.is_some()
        || args.ssl_https_private_key_type.is_some();
    if !https {
        if given {
            return Err(Error::usage(
                "profile: the --ssl-https-* options need an https:// URL in -u/--url",
            ));
        }
        return Ok(None);
    }
    let verify_peer = match args.ssl_https_verify_peer.as_deref().map(str::trim) {
        None | Some("1") => true,
        Some("0") => false,
        Some(raw) => {
            return Err(Error::usage(format!(
                "profile: --ssl-https-verify-peer must be 0 or 1 (got '{raw}')"
            )))
        }
    };
    let verify_host = match args.ssl_https_verify_host.as_deref().map(str::trim) {
        None | Some("1") | Some("2") => true,
        Some("0") => false,
        Some(raw) => {
            return Err(Error::usage(format!(
                "profile: --ssl-https-verify-host must be 0, 1 or 2 (got '{raw}')"
            )))
        }
    };
    let cert_type = format(
        "--ssl-https-client-certificate-type",
        &args.ssl_https_client_certificate_type,
    )?;
    let key_type = format(
        "--ssl-https-private-key-type",
        &args.ssl_https_private_key_type,
    )?;
    let ca_file = existing(
        "--ssl-https-ca-certificates-file",
        &args.ssl_https_ca_certificates_file,
    )?;
    let cert = existing(
        "--ssl-https-client-certificate-file",
        &args.ssl_https_client_certificate_file,
    )?;
    let key = existing(
        "--ssl-https-private-key-file",
        &args.ssl_https_private_key_file,
    )?;
    let alpn: &[&[u8]] = if grpc { &[b"h2"] } else { &[b"http/1.1"] };
    let mut opts = TlsOptions::new("--ssl-https", alpn);
    opts.ca_file = ca_file;
    opts.client_cert = cert.map(|p| (p, cert_type));
    opts.client_key = key.map(|p| (p, key_type));
    opts.verify_peer = verify_peer;
    opts.verify_host = verify_host;
    TlsClient::new(&opts, host)
        .map(Some)
        .map_err(|e| Error::usage(format!("profile: {}", e.msg)))
}

fn format(flag: &str, raw: &Option<String>) -> Result<PemOrDer> {
    match raw.as_deref().map(str::to_ascii_uppercase).as_deref() {
        None | Some("PEM") => Ok(PemOrDer::Pem),
        Some("DER") => Ok(PemOrDer::Der),
        Some(_) => Err(Error::usage(format!(
            "profile: {flag} must be PEM or DER (got '{}')",
            raw.as_deref().unwrap_or_default()
        ))),
    }
}

fn existing(flag: &str, path: &Option<PathBuf>) -> Result<Option<PathBuf>> {
    match path {
        Some(p) if !Path::new(p).is_file() => Err(Error::usage(format!(
            "profile: {flag} {}: no such file",
            p.display()
        ))),
        other => Ok(other.clone()),
    }
}

#[cfg(test)]
#[path = "cli_compat_tests.rs"]
mod tests;
