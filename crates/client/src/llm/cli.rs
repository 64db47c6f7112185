//! `inferperf profile`: the LLM benchmark's flags, named as GenAI-Perf and AIPerf name them,
//! and their validation into a [`ProfileConfig`].

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgAction, Parser, ValueEnum};

use super::cli_compat::{self, Backend, CompatArgs, UiType};
use crate::error::{Error, Result};
use crate::run::kinds::codec::Input;
use crate::run::kinds::registry::{self, Endpoint, Kind};
use crate::run::kinds::Service;
use crate::transport::TlsClient;

/// Which API the requests go to: a service kind of the registry (`run::kinds::KINDS`) that
/// has a `profile` endpoint, chosen once by `--endpoint-type`; the rest of `profile` asks it
/// (its capabilities, its [`Service`], and its endpoint's paths and names).
#[derive(Clone, Copy)]
pub struct EndpointType {
    kind: &'static Kind,
    endpoint: Endpoint,
}

impl EndpointType {
    /// The kind `--endpoint-type name` selects.
    pub fn named(name: &str) -> Option<EndpointType> {
        let kind = registry::for_endpoint(name)?;
        Some(EndpointType {
            kind,
            endpoint: kind.endpoint?,
        })
    }

    /// The registry's kind.
    pub fn kind(self) -> &'static Kind {
        self.kind
    }

    /// The kind's `profile` endpoint.
    pub fn endpoint(self) -> Endpoint {
        self.endpoint
    }

    /// The kind's [`Service`]: how each request is encoded and each reply decoded, and
    /// what the endpoint takes.
    pub fn service(self) -> &'static dyn Service {
        self.kind.service
    }

    /// What the requests are made of.
    pub fn input(self) -> Input {
        self.kind.service.input()
    }

    /// The requests go over gRPC.
    pub fn grpc(self) -> bool {
        self.kind.caps.grpc
    }

    /// The path used when `--endpoint` is not given.
    pub fn default_path(self, model: &str) -> String {
        self.endpoint.default_path(model, false)
    }

    /// Name used in artifact directory names and exports.
    pub fn name(self) -> &'static str {
        self.kind.label()
    }

    /// The endpoint produces generated text (so TTFT, ITL and OSL apply).
    pub fn generates(self) -> bool {
        self.endpoint.generates
    }
}

impl PartialEq for EndpointType {
    fn eq(&self, other: &EndpointType) -> bool {
        std::ptr::eq(self.kind, other.kind)
    }
}

impl Eq for EndpointType {}

impl std::fmt::Debug for EndpointType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// `--endpoint-type`'s values: every registered kind with a `profile` endpoint.
fn endpoint_type_values() -> clap::builder::PossibleValuesParser {
    let values: Vec<clap::builder::PossibleValue> = registry::endpoint_names()
        .into_iter()
        .map(|name| {
            let about = registry::for_endpoint(name)
                .and_then(|k| k.endpoint)
                .map_or("", |e| e.about);
            clap::builder::PossibleValue::new(name).help(about)
        })
        .collect();
    clap::builder::PossibleValuesParser::new(values)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ModelSelection {
    #[value(alias = "round_robin")]
    RoundRobin,
    Random,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Distribution {
    Constant,
    Poisson,
}

/// Flags of `inferperf profile` (GenAI-Perf / AIPerf names).
#[derive(Parser, Debug, Clone)]
#[command(
    name = "inferperf profile",
    about = "Benchmark an LLM endpoint: TTFT, inter-token latency, token throughput, goodput.",
    after_help = "Metric definitions: run `inferperf profile --help-metrics`.",
    // `--flag -1` is the flag's (bad) value, reported by clap naming the flag.
    allow_negative_numbers = true
)]
pub struct ProfileArgs {
    /// Model name(s) to send requests to (several: `-m a b` or `-m a -m b`).
    #[arg(short = 'm', long = "model", visible_alias = "model-names", num_args = 1.., action = ArgAction::Append)]
    pub model: Vec<String>,
    /// How requests are spread over several models.
    #[arg(long, value_enum, default_value = "round-robin")]
    pub model_selection_strategy: ModelSelection,
    /// Server address: host:port, http://host:port or https://host:port (TLS; see the
    /// --ssl-https-* options) (default localhost:8000; localhost:8001 for `--endpoint-type
    /// kserve`).
    #[arg(short = 'u', long)]
    pub url: Option<String>,
    /// The API to call.
    #[arg(long, default_value = "chat", value_parser = endpoint_type_values())]
    pub endpoint_type: String,
    /// Accepted for GenAI-Perf compatibility: `openai` (the default) or `triton` (means
    /// `--endpoint-type kserve` unless an endpoint type is given).
    #[arg(long)]
    pub service_kind: Option<String>,
    /// A custom path instead of the endpoint type's default (e.g. `v1/chat/completions`).
    #[arg(long, visible_alias = "custom-endpoint")]
    pub endpoint: Option<String>,
    /// Ask the server to stream tokens (`"stream": true`; SSE).
    #[arg(long)]
    pub streaming: bool,
    /// Closed loop: requests in flight (conversations in flight for multi-turn runs); a
    /// comma list (`1,4,8`) runs one profile per value.
    #[arg(long, visible_alias = "session-concurrency", value_delimiter = ',')]
    pub concurrency: Vec<u64>,
    /// Open loop: requests per second; a comma list runs one profile per value. With
    /// conversations every turn takes a tick (later turns of running conversations first).
    #[arg(long, value_delimiter = ',')]
    pub request_rate: Vec<f64>,
    /// AIPerf's user-centric mode for conversations: requests per second over all
    /// --num-users users, each user sending its turns num-users/rate seconds apart.
    #[arg(long, value_name = "RATE")]
    pub user_centric_rate: Option<f64>,
    /// Users of --user-centric-rate (conversations under way at once).
    #[arg(long, value_name = "N")]
    pub num_users: Option<u64>,
    /// Arrival process for `--request-rate` (perf_analyzer's name) [default: constant];
    /// see also --arrival-pattern.
    #[arg(long, value_enum)]
    pub request_distribution: Option<Distribution>,
    /// Open loop: cap on requests in flight.
    #[arg(long)]
    pub max_inflight: Option<u64>,
    /// Requests to measure per profile (default 100 unless --benchmark-duration is given).
    #[arg(long, visible_alias = "num-requests")]
    pub request_count: Option<u64>,
    /// Requests sent, and not measured, before each profile.
    #[arg(long, visible_alias = "num-warmup-requests", default_value_t = 0)]
    pub warmup_request_count: u64,
    /// Stop sending after this many seconds (requests in flight are waited for).
    #[arg(long)]
    pub benchmark_duration: Option<f64>,
    /// Milliseconds a request may take from its start to its last byte (a stream: the whole
    /// stream) before it fails as timed out and its connection is replaced (default 600000,
    /// AIPerf's 600 s).
    #[arg(long, value_name = "MS", allow_negative_numbers = true)]
    pub request_timeout: Option<String>,
    /// AIPerf's spelling of --request-timeout, in seconds (default 600).
    #[arg(long, value_name = "S", allow_negative_numbers = true)]
    pub request_timeout_seconds: Option<String>,
    /// Milliseconds a request may go without a byte moving (or a connect without finishing)
    /// before it fails as timed out (default: no limit of its own; --request-timeout bounds
    /// every wait).
    #[arg(long, value_name = "MS", allow_negative_numbers = true)]
    pub request_idle_timeout: Option<String>,
    /// Synthetic prompts: mean input length in tokens.
    #[arg(
        long,
        visible_alias = "isl",
        alias = "prompt-input-tokens-mean",
        default_value_t = 550
    )]
    pub synthetic_input_tokens_mean: u64,
    /// Synthetic prompts: standard deviation of the input length in tokens.
    #[arg(
        long,
        visible_alias = "isl-stddev",
        alias = "prompt-input-tokens-stddev",
        default_value_t = 0.0
    )]
    pub synthetic_input_tokens_stddev: f64,
    /// Requested output length in tokens (`max_tokens`); unset: the server decides.
    #[arg(long, visible_alias = "osl", alias = "prompt-output-tokens-mean")]
    pub output_tokens_mean: Option<u64>,
    /// Standard deviation of the requested output length.
    #[arg(
        long,
        visible_alias = "osl-stddev",
        alias = "prompt-output-tokens-stddev",
        default_value_t = 0.0
    )]
    pub output_tokens_stddev: f64,
    /// Synthetic prompts: a mix of ISL/OSL classes (AIPerf's), replacing the ISL and OSL
    /// flags: `ISL[|SD],OSL[|SD]:WEIGHT;...`, `[(ISL,OSL):WEIGHT,...]` or
    /// `{"pairs": [{"isl", "isl_stddev", "osl", "osl_stddev", "prob"}]}`; each prompt draws
    /// a class by weight (seeded by --random-seed), then its lengths.
    #[arg(long, visible_alias = "seq-dist", value_name = "MIX")]
    pub sequence_distribution: Option<String>,
    /// Also send `min_tokens` = `max_tokens` and `ignore_eos: true`, so the output length is
    /// exact on servers that honour them.
    #[arg(long)]
    pub output_tokens_mean_deterministic: bool,
    /// Distinct prompts to generate (they are reused round robin); with
    /// --conversation-turn-mean above 1, the synthetic conversations.
    #[arg(long, visible_aliases = ["num-dataset-entries", "conversation-num", "num-conversations", "num-sessions"], default_value_t = 100)]
    pub num_prompts: u64,
    /// Seed for prompts, lengths, model selection and Poisson arrivals.
    #[arg(long, default_value_t = 0)]
    pub random_seed: u64,
    /// JSONL prompts: one object per line with `text_input`, `text` or `input`, or a
    /// `payload` object sent verbatim.
    #[arg(long)]
    pub input_file: Option<PathBuf>,
    /// Extra request inputs: `name:value` (split at the first colon; the value is parsed as
    /// JSON when it is valid JSON, else a string) or a JSON object whose every key is one
    /// input; repeatable. Body fields for HTTP endpoints, input tensors for kserve.
    #[arg(long, action = ArgAction::Append)]
    pub extra_inputs: Vec<String>,
    /// Extra HTTP header `Name: value` (e.g. an API key); repeatable. Never written to any
    /// output file.
    #[arg(short = 'H', long = "header", action = ArgAction::Append)]
    pub header: Vec<String>,
    /// `cl100k_base`, `o200k_base` (built in), a local tokenizer.json (file or directory),
    /// or a Hugging Face Hub name ORG/NAME (its tokenizer.json, from the Hub cache or
    /// downloaded into it). Default: the first model name when it has the ORG/NAME form
    /// (as AIPerf does), else o200k_base.
    #[arg(long)]
    pub tokenizer: Option<String>,
    /// Hub branch, tag or commit of a --tokenizer ORG/NAME.
    #[arg(long, default_value = crate::inputs::tokenizer::DEFAULT_REVISION)]
    pub tokenizer_revision: String,
    /// Accepted for AIPerf and GenAI-Perf command lines: only tokenizer.json is read and no
    /// repository code is ever run, so it changes nothing.
    #[arg(long)]
    pub tokenizer_trust_remote_code: bool,
    /// Take ISL and OSL from the server's `usage` (a stream asks for it with
    /// `stream_options.include_usage`, as every streaming chat and completions run does).
    #[arg(long)]
    pub use_server_token_count: bool,
    /// Service-level objectives, `metric:value` in ms or tokens/s (e.g.
    /// `time_to_first_token:200 inter_token_latency:20`).
    #[arg(short = 'g', long, num_args = 1.., action = ArgAction::Append)]
    pub goodput: Vec<String>,
    /// Where the results go (one sub-directory per profile).
    #[arg(
        long,
        visible_alias = "output-artifact-dir",
        default_value = "artifacts"
    )]
    pub artifact_dir: PathBuf,
    /// `--artifact-dir` was typed on the command line (AIPerf then writes straight into it).
    #[arg(skip)]
    pub artifact_dir_given: bool,
    /// Name of perf_analyzer's raw export inside each profile's directory (a file name, no
    /// directory); the GenAI-Perf summaries are named after it: `my.json` gives
    /// `my_genai_perf.json` and `my_genai_perf.csv`, and the per-request file `my.jsonl`.
    #[arg(long, default_value = "profile_export.json")]
    pub profile_export_file: String,
    /// Write TTFT, latency, TTFT-vs-ISL, ITL-by-position and ISL-vs-OSL plots (PNG and SVG).
    #[arg(long)]
    pub generate_plots: bool,
    /// Load worker threads (each pinned to a core); default: one per core.
    #[arg(long, visible_alias = "workers-max")]
    pub max_workers: Option<usize>,
    /// Streamed HTTP responses: when tokens trickle in (wake-ups closer together than this),
    /// a load worker lets them gather for up to this many microseconds between reads, which
    /// cuts its CPU per token. Arrival times come from the kernel's receive stamps either
    /// way, so gathering does not move them. 0: read every token as soon as it arrives.
    #[arg(long, default_value_t = 1000, value_name = "US")]
    pub read_batch_us: u64,
    /// Streamed HTTP responses over plain TCP: do not open the packet socket that stamps
    /// every TCP segment from the server (opened by default where allowed: root or
    /// CAP_NET_RAW). Without it, chunks that wait in the socket until one read takes them
    /// all carry that read's time.
    #[arg(long)]
    pub no_packet_stamps: bool,
    /// Largest response body (the whole stream) or gRPC message accepted, in bytes; a larger
    /// one fails its request.
    #[arg(long, default_value_t = 64 << 20, value_name = "BYTES")]
    pub max_response_bytes: usize,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
    /// Print the metric definitions and exit.
    #[arg(long)]
    pub help_metrics: bool,
    /// Print every AIPerf 0.13 flag and what `profile` does with it (a Markdown table), and
    /// exit.
    #[arg(long)]
    pub help_aiperf_flags: bool,
    #[command(flatten)]
    pub sweep: super::sweep_args::SweepArgs,
    #[command(flatten)]
    pub telemetry: super::telemetry::TelemetryArgs,
    #[command(flatten)]
    pub compat: CompatArgs,
    #[command(flatten)]
    pub dataset: super::dataset::DatasetArgs,
    #[command(flatten)]
    pub report: super::report_args::ReportArgs,
    #[command(flatten)]
    pub load: super::load_args::LoadArgs,
    #[command(flatten)]
    pub multi_run: super::multi_run::MultiRunArgs,
    #[command(flatten)]
    pub media: super::media::MediaArgs,
    #[command(flatten)]
    pub cache_bust: super::cache_bust::CacheBustArgs,
}

/// `--read-batch-us` beyond this would hold completed requests (and the next sends of a
/// closed loop) back for longer than any token gap worth measuring.
const MAX_READ_BATCH_US: u64 = 100_000;

/// The largest `--max-response-bytes` (16 GiB): a response is held in memory whole.
const MAX_RESPONSE_BYTES: usize = 16 << 30;

/// One point of the sweep.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LoadPoint {
    Concurrency(u64),
    RequestRate(f64),
}

impl LoadPoint {
    /// `concurrency4` / `request_rate2.5` / `request_rate32.0`, as GenAI-Perf and AIPerf name
    /// their artifact directories: both read the rate as a Python float and print it as
    /// Python does, so a whole rate keeps its `.0`.
    pub fn label(&self) -> String {
        match self {
            LoadPoint::Concurrency(c) => format!("concurrency{c}"),
            LoadPoint::RequestRate(r) => format!("request_rate{}", python_float(*r)),
        }
    }
}

pub use crate::report::fmt::python_float;

/// Validated settings of a `profile` run.
#[derive(Debug, Clone)]
pub struct ProfileConfig {
    pub args: ProfileArgs,
    pub models: Vec<String>,
    pub endpoint_type: EndpointType,
    /// Path of the request, without a leading `/` (empty for gRPC).
    pub endpoint: String,
    /// host:port.
    pub address: String,
    pub points: Vec<LoadPoint>,
    /// Header pairs, validated.
    pub headers: Vec<(String, String)>,
    /// `--extra-inputs`, parsed.
    pub extra: Vec<(String, serde_json::Value)>,
    /// `--request-timeout` / `--request-timeout-seconds` (default 600 s): the total limit.
    pub request_timeout: Duration,
    /// The flag that set `request_timeout`, named when it fires.
    pub request_timeout_flag: &'static str,
    /// `--request-idle-timeout`; `None`: none but the total limit.
    pub request_idle_timeout: Option<Duration>,
    /// `-u https://...`: the TLS client (from the `--ssl-https-*` options).
    pub tls: Option<TlsClient>,
    /// `--backend`: the kserve request tensors.
    pub backend: Backend,
    /// `--batch-size-text`: texts per embeddings or rankings request.
    pub batch_size: usize,
    /// AIPerf's load flags: arrival pattern, grace period, rate series, failed-request
    /// threshold.
    pub load: super::load_args::LoadPlan,
    /// `--sequence-distribution`, parsed.
    pub sequence_distribution: Option<super::sequence_dist::SequenceDistribution>,
}

/// Parses `argv` (args[0] = "profile"). `Ok(None)`: help or metric definitions were printed.
pub fn parse(args: Vec<OsString>) -> Result<std::result::Result<ProfileConfig, String>> {
    let args = match parse_args(args) {
        Ok(a) => a,
        Err(e) => {
            use clap::error::ErrorKind as K;
            return match e.kind() {
                K::DisplayHelp | K::DisplayVersion => Ok(Err(e.to_string())),
                K::UnknownArgument => {
                    let arg = e
                        .get(clap::error::ContextKind::InvalidArg)
                        .map(|a| a.to_string());
                    match arg.as_deref().and_then(cli_compat::refusal) {
                        Some(text) => Err(Error::usage(text)),
                        None => Err(Error::usage(clap_text(&e))),
                    }
                }
                _ => Err(Error::usage(clap_text(&e))),
            };
        }
    };
    if args.help_metrics {
        return Ok(Err(crate::measure::llm::definitions::definitions_text()));
    }
    if args.help_aiperf_flags {
        return Ok(Err(super::aiperf_flags::page()));
    }
    if args.compat.version {
        return Ok(Err(cli_compat::version_text()));
    }
    validate(args).map(Ok)
}

/// clap's parse, noting whether `--artifact-dir` came from the command line.
fn parse_args(args: Vec<OsString>) -> std::result::Result<ProfileArgs, clap::Error> {
    use clap::{parser::ValueSource, CommandFactory, FromArgMatches};
    let matches = ProfileArgs::command().try_get_matches_from(args)?;
    let mut parsed = ProfileArgs::from_arg_matches(&matches)?;
    parsed.artifact_dir_given =
        matches.value_source("artifact_dir") == Some(ValueSource::CommandLine);
    Ok(parsed)
}

/// clap's message without its own leading "error: " (the caller adds one).
fn clap_text(e: &clap::Error) -> String {
    let text = e.to_string();
    let text = text.trim_end();
    text.strip_prefix("error: ").unwrap_or(text).to_string()
}

fn validate(mut args: ProfileArgs) -> Result<ProfileConfig> {
    if args.model.is_empty() {
        return Err(Error::usage("profile: -m/--model is required"));
    }
    let name = match args.service_kind.as_deref() {
        None | Some("openai") => args.endpoint_type.as_str(),
        Some("triton") if args.endpoint_type == "chat" => "kserve",
        Some("triton") => args.endpoint_type.as_str(),
        Some(other) => {
            return Err(Error::usage(format!(
                "profile: --service-kind must be openai or triton, not '{other}'"
            )))
        }
    };
    let endpoint_type = EndpointType::named(name).ok_or_else(|| {
        Error::usage(format!(
            "profile: --endpoint-type must be one of {}, not '{name}'",
            registry::endpoint_names().join(", ")
        ))
    })?;
    cli_compat::check(&args.compat, endpoint_type)?;
    super::media::check(&args, endpoint_type)?;
    cli_compat::input_file_prefix(&mut args)?;
    cli_compat::measurement_interval(&mut args)?;
    if args.compat.ui_type == Some(UiType::None) {
        args.quiet = true;
    }
    check_load(&args)?;
    super::multi_run::check(&args.multi_run)?;
    let rate_given = !args.request_rate.is_empty() || args.user_centric_rate.is_some();
    if let ([cap], true) = (&args.concurrency[..], rate_given) {
        // AIPerf's --concurrency beside --request-rate: the cap on requests in flight.
        args.max_inflight = Some(*cap);
    }
    check_tokens(&args)?;
    check_bounds(&args)?;
    check_export_file_name(&args.profile_export_file).map_err(Error::usage)?;
    if args.use_server_token_count && !endpoint_type.generates() {
        return Err(Error::usage(
            "profile: --use-server-token-count applies to chat, completions, kserve and generate",
        ));
    }
    let mut headers = args
        .header
        .iter()
        .map(|h| parse_header(h))
        .collect::<Result<Vec<_>>>()?;
    if let Some(auth) = cli_compat::api_key_header(&args.compat, &headers)? {
        headers.push(auth);
    }
    let mut extra = Vec::new();
    for e in &args.extra_inputs {
        extra.extend(parse_extra(e)?);
    }
    crate::measure::llm::goodput::parse(&args.goodput)?;
    let models: Vec<String> = args.model.clone();
    if args.tokenizer.is_none() {
        args.tokenizer = Some(default_tokenizer(&models[0]));
    }
    let endpoint = match &args.endpoint {
        Some(e) => e.trim_start_matches('/').to_string(),
        None => endpoint_type.default_path(&models[0]),
    };
    let (address, https) = cli_compat::server_address(args.url.as_deref(), endpoint_type)?;
    let tls = cli_compat::tls(
        &args.compat,
        https,
        crate::transport::tls::host_of(&address),
        endpoint_type.grpc(),
    )?;
    let (request_timeout, request_timeout_flag) = request_timeout(&args)?;
    let request_idle_timeout = request_idle_timeout(&args)?;
    let load = load_plan(&args, endpoint_type)?;
    let sequence_distribution = sequence_distribution(&args)?;
    let cfg = ProfileConfig {
        sequence_distribution,
        points: load_points(&args, &load),
        load,
        tls,
        backend: args.compat.backend.unwrap_or_default(),
        batch_size: args.compat.batch_size_text.unwrap_or(1) as usize,
        request_timeout,
        request_timeout_flag,
        request_idle_timeout,
        args,
        models,
        endpoint_type,
        endpoint,
        address,
        headers,
        extra,
    };
    super::multi_run::check_plan(&cfg)?;
    super::cache_bust::check(&cfg)?;
    Ok(cfg)
}

/// The tokenizer when `--tokenizer` is not given: the model name when it has the Hub's
/// ORG/NAME form (AIPerf's default is the model name), else the built-in `o200k_base`, so a
/// plain served name such as `gpt-4o` never sends a lookup to the Hub.
pub fn default_tokenizer(model: &str) -> String {
    if model.contains('/') && crate::inputs::tokenizer::hub::is_repo_id(model) {
        model.to_string()
    } else {
        "o200k_base".to_string()
    }
}

/// One load point per `--request-rate` or `--concurrency` value; concurrency 1 by default.
fn load_points(args: &ProfileArgs, plan: &super::load_args::LoadPlan) -> Vec<LoadPoint> {
    if let Some(points) = &plan.rate_series {
        // One level, named after the series' first rate.
        return vec![LoadPoint::RequestRate(points[0].1)];
    }
    if let Some(rate) = args.user_centric_rate {
        return vec![LoadPoint::RequestRate(rate)];
    }
    if !args.request_rate.is_empty() {
        args.request_rate
            .iter()
            .map(|r| LoadPoint::RequestRate(*r))
            .collect()
    } else if !args.concurrency.is_empty() {
        args.concurrency
            .iter()
            .map(|c| LoadPoint::Concurrency(*c))
            .collect()
    } else {
        vec![LoadPoint::Concurrency(1)]
    }
}

/// `Name: value` (the colon is required; the name must be a token).
fn parse_header(h: &str) -> Result<(String, String)> {
    let Some((name, value)) = h.split_once(':') else {
        return Err(Error::usage(format!(
            "profile: -H '{h}' must look like 'Name: value'"
        )));
    };
    let name = name.trim();
    let ok = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
    if !ok || value.contains(['\r', '\n']) {
        return Err(Error::usage(format!(
            "profile: -H '{}' is not a valid header",
            crate::text::redact_header(h)
        )));
    }
    Ok((name.to_string(), value.trim().to_string()))
}

/// `name:value` split at the first colon (the value is JSON when it parses as JSON:
/// numbers, booleans, objects; otherwise a string), or a JSON object whose every key is an
/// input (GenAI-Perf's and AIPerf's two forms).
fn parse_extra(e: &str) -> Result<Vec<(String, serde_json::Value)>> {
    if e.trim_start().starts_with('{') {
        let object: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(e).map_err(|err| {
                Error::usage(format!(
                    "profile: --extra-inputs '{e}' is not a valid JSON object: {err}"
                ))
            })?;
        if let Some(empty) = object.keys().find(|k| k.is_empty()) {
            return Err(Error::usage(format!(
                "profile: --extra-inputs '{e}' has an empty name{empty}"
            )));
        }
        return Ok(object.into_iter().collect());
    }
    let Some((name, value)) = e.split_once(':') else {
        return Err(Error::usage(format!(
            "profile: --extra-inputs '{e}' must look like name:value"
        )));
    };
    if name.is_empty() {
        return Err(Error::usage(format!(
            "profile: --extra-inputs '{e}' has an empty name"
        )));
    }
    let value = serde_json::from_str(value)
        .unwrap_or_else(|_| serde_json::Value::String(value.to_string()));
    Ok(vec![(name.to_string(), value)])
}

/// `--profile-export-file` names a file inside each profile's directory, as in GenAI-Perf,
/// which refuses a path ("use artifact_directory"): a usage error otherwise.
pub fn check_export_file_name(name: &str) -> std::result::Result<(), String> {
    let path = std::path::Path::new(name);
    let plain = path.file_name().is_some_and(|f| f == path.as_os_str());
    if name.is_empty() || !plain || name == "." || name == ".." {
        return Err(format!(
            "profile: --profile-export-file '{name}' must be a file name (its directory is \
             --artifact-dir's profile directory)"
        ));
    }
    Ok(())
}

mod checks;
use checks::{
    check_bounds, check_load, check_tokens, load_plan, request_idle_timeout, request_timeout,
    sequence_distribution,
};

#[cfg(test)]
#[path = "cli_tests.rs"]
mod tests;
