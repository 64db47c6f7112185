//! clap definitions of perf_analyzer's command line, as its CLI reference describes it
//! (<https://github.com/triton-inference-server/perf_analyzer/blob/main/docs/cli.md>).
//!
//! Values are kept as raw strings here and parsed in `validate`, so that every error names the
//! flag and the value in perf_analyzer's words instead of clap's.

use clap::parser::ValueSource;
use clap::{Arg, ArgAction, ArgMatches, ColorChoice, CommandFactory, Parser};

use super::help::{
    ABOUT, GENERAL, INPUT, LOAD, MEASUREMENT, NOTES, PLANNED, PLANNED_FLAGS, REPORTS, TRANSPORT,
    USAGE,
};

/// Help is rendered at this width so that it does not depend on the terminal (columns).
const HELP_WIDTH: usize = 100;

/// The perf_analyzer-compatible flags inferperf implements (see `command()` for the rest).
#[derive(Parser, Debug, Default)]
#[command(
    name = "inferperf",
    about = ABOUT,
    override_usage = USAGE,
    after_help = NOTES,
    disable_help_flag = true,
    disable_version_flag = true,
    args_override_self = true,
    // `--flag -1` is the flag's (bad) value, reported by the flag's own check.
    allow_negative_numbers = true,
    term_width = HELP_WIDTH,
    color = ColorChoice::Never
)]
pub struct RunArgs {
    // --- general ---
    /// Model name (required)
    #[arg(short = 'm', value_name = "MODEL", help_heading = GENERAL)]
    pub model_name: Option<String>,
    /// Model version [default: "" (the server picks the latest)]
    #[arg(short = 'x', value_name = "VERSION", help_heading = GENERAL)]
    pub model_version: Option<String>,
    /// Verbose output (pass lines, client overhead, send/receive split); -v -v also prints the
    /// request every worker sends [default: off]
    #[arg(short = 'v', action = ArgAction::Count, help_heading = GENERAL)]
    pub verbose: u8,
    /// Service kind: triton, triton_c_api (Triton in process; needs --model-repository),
    /// openai (an OpenAI-compatible HTTP API; needs --endpoint, --input-data with "payload"
    /// entries and --async), tfserving (-i grpc), torchserve (--input-data with
    /// "TORCHSERVE_INPUT" file paths) or dynamic_grpc (--grpc-method, --input-data with
    /// "message_generator" commands) [default: triton]
    #[arg(long, value_name = "KIND", help_heading = GENERAL)]
    pub service_kind: Option<String>,
    /// C API: Triton install directory, holding lib/libtritonserver.so, backends/ and
    /// repoagents/ [default: /opt/tritonserver]
    #[arg(long, value_name = "DIR", help_heading = GENERAL)]
    pub triton_server_directory: Option<String>,
    /// C API: the model repository the in-process server loads (required there)
    /// [default: none]
    #[arg(long, value_name = "DIR", help_heading = GENERAL)]
    pub model_repository: Option<String>,
    /// OpenAI: path the payloads are POSTed to, e.g. v1/chat/completions (also written to the
    /// profile export) [default: none]
    #[arg(long, value_name = "PATH", help_heading = GENERAL)]
    pub endpoint: Option<String>,
    /// TF Serving: the signature whose inputs are sent [default: serving_default]
    #[arg(long, value_name = "NAME", help_heading = GENERAL)]
    pub model_signature_name: Option<String>,
    /// dynamic_grpc: the fully qualified method every request calls [default: none]
    #[arg(long, value_name = "PKG.SERVICE/METHOD", help_heading = GENERAL)]
    pub grpc_method: Option<String>,
    /// Print the version to stderr and exit
    #[arg(long, help_heading = GENERAL)]
    pub version: bool,
    /// Print this help and exit
    #[arg(short = 'h', long, help_heading = GENERAL)]
    pub help: bool,

    // --- load ---
    /// Closed-loop concurrency sweep; END 0 = until --latency-threshold is exceeded
    /// [default: 1:1:1]
    #[arg(long, value_name = "START[:END[:STEP]]", allow_hyphen_values = true, help_heading = LOAD)]
    pub concurrency_range: Option<String>,
    /// Open-loop request rate sweep in requests/s; END 0 = until --latency-threshold is
    /// exceeded [default: 1.0:1.0:1.0 when chosen]
    #[arg(long, value_name = "START[:END[:STEP]]", allow_hyphen_values = true, help_heading = LOAD)]
    pub request_rate_range: Option<String>,
    /// Inter-arrival distribution of request-rate mode: constant|poisson [default: constant]
    #[arg(long, value_name = "DIST", help_heading = LOAD)]
    pub request_distribution: Option<String>,
    /// Open-loop schedule from a file: one gap in microseconds per line (at most an hour),
    /// looped; at most 1,048,576 gaps [default: none]
    #[arg(long, value_name = "FILE", help_heading = LOAD)]
    pub request_intervals: Option<String>,
    /// Streaming ramp: START requests, STEP more each time all launched ones have had
    /// --request-period responses, up to END; results only in --profile-export-file
    /// [default: off]
    #[arg(long, value_name = "START:END:STEP", allow_hyphen_values = true, help_heading = LOAD)]
    pub periodic_concurrency_range: Option<String>,
    /// Periodic mode: responses each request must get before the next batch [default: 10]
    #[arg(long, value_name = "N", allow_negative_numbers = true, help_heading = LOAD)]
    pub request_period: Option<String>,
    /// Send each --input-data entry once at its `timestamp` (ms since the start)
    /// [default: off]
    #[arg(long, help_heading = LOAD)]
    pub fixed_schedule: bool,
    /// OpenAI multi-turn chat: N conversations (grouped by the data's `session_id`) at a
    /// time, turn by turn; results only in --profile-export-file [default: 0 (off)]
    #[arg(long, value_name = "N", allow_negative_numbers = true, help_heading = LOAD)]
    pub session_concurrency: Option<String>,
    /// Bisect the concurrency or rate range for the highest level under -l [default: linear]
    #[arg(long, help_heading = LOAD)]
    pub binary_search: bool,
    /// Run as one rank of an MPI job (under mpirun). Alone: perf_analyzer's multi-model mode
    /// (each rank profiles its own -m and writes its own report; a level ends when every rank
    /// is stable). Needs Open MPI's libmpi.so.40 at run time
    #[arg(long, help_heading = LOAD)]
    pub enable_mpi: bool,
    /// With --enable-mpi: every rank runs the same flags; the load (concurrency, rate,
    /// request counts) is split across ranks, windows are aligned, and rank 0 writes one
    /// merged report, CSV and profile export
    #[arg(long, help_heading = LOAD)]
    pub mpi_scale_out: bool,
    /// With --enable-mpi: seconds a rank waits at a window's exchange for the others before
    /// it ends the run [default: 4x the window, at least 60; 600 with count windows]
    #[arg(long, value_name = "S", allow_negative_numbers = true, help_heading = LOAD)]
    pub mpi_timeout: Option<String>,
    /// Seed of the request schedule and random data, printed so a run can be repeated
    /// [default: drawn at start]
    #[arg(long, value_name = "N", help_heading = LOAD)]
    pub seed: Option<String>,
    /// Open-loop modes: at most N requests in flight (sends wait and count as late)
    /// [default: no cap]
    #[arg(long, value_name = "N", allow_negative_numbers = true, help_heading = LOAD)]
    pub max_inflight: Option<String>,
    /// Sequence models, open loop: concurrent sequences [default: 4]
    #[arg(long, value_name = "N", allow_negative_numbers = true, help_heading = LOAD)]
    pub num_of_sequences: Option<String>,
    /// Sequence models: base sequence length [default: 20, or the data's steps]
    #[arg(long, value_name = "N", allow_negative_numbers = true, help_heading = LOAD)]
    pub sequence_length: Option<String>,
    /// Sequence models: +/- random variation of the length in % [default: 20.0]
    #[arg(long, value_name = "PCT", allow_negative_numbers = true, help_heading = LOAD)]
    pub sequence_length_variation: Option<String>,
    /// Sequence models: ids to use, START[:END] [default: 1: (unbounded)]
    #[arg(long, value_name = "START[:END]", allow_hyphen_values = true, help_heading = LOAD)]
    pub sequence_id_range: Option<String>,
    /// Sequence models, open loop: at most one request in flight per sequence (always so:
    /// accepted for perf_analyzer's command lines)
    #[arg(long, help_heading = LOAD)]
    pub serial_sequences: bool,
    /// Async API: stabilise on throughput only [default: sync]
    #[arg(short = 'a', long = "async", help_heading = LOAD)]
    pub async_mode: bool,
    /// Sync API: stabilise on latency and throughput (conflicts with --async)
    #[arg(long, help_heading = LOAD)]
    pub sync: bool,
    /// Upper bound on worker threads [default: one per core]
    #[arg(long, value_name = "N", allow_negative_numbers = true, help_heading = LOAD)]
    pub max_threads: Option<String>,
    /// Pin worker threads to cores [default: pinned when the server is on another machine]
    #[arg(long, help_heading = LOAD)]
    pub pin: bool,
    /// Do not pin worker threads to cores
    #[arg(long, help_heading = LOAD)]
    pub no_pin: bool,
    /// Deprecated: concurrency start [default: 1]
    #[arg(short = 't', value_name = "N", allow_negative_numbers = true, help_heading = LOAD)]
    pub concurrency_start: Option<String>,
    /// Deprecated: concurrency end (use with -d) [default: 0 with -d]
    #[arg(short = 'c', value_name = "N", allow_negative_numbers = true, help_heading = LOAD)]
    pub concurrency_end: Option<String>,
    /// Deprecated: dynamic concurrency, sweep from -t up to -c (0 = no limit)
    #[arg(short = 'd', help_heading = LOAD)]
    pub dynamic_concurrency: bool,

    // --- measurement ---
    /// How a window ends: time_windows|count_windows [default: time_windows]
    #[arg(long, value_name = "MODE", help_heading = MEASUREMENT)]
    pub measurement_mode: Option<String>,
    /// Time window length in ms (exact; see note 1) [default: 5000]
    #[arg(short = 'p', long, value_name = "MS", allow_negative_numbers = true, help_heading = MEASUREMENT)]
    pub measurement_interval: Option<String>,
    /// Minimum completed requests per count window [default: 50]
    #[arg(long, value_name = "N", allow_negative_numbers = true, help_heading = MEASUREMENT)]
    pub measurement_request_count: Option<String>,
    /// Allowed spread of the last 3 windows, in % (>= 0) [default: 10]
    #[arg(short = 's', long, value_name = "PCT", allow_negative_numbers = true, help_heading = MEASUREMENT)]
    pub stability_percentage: Option<String>,
    /// Maximum windows per sweep point [default: 10]
    #[arg(short = 'r', long, value_name = "N", allow_negative_numbers = true, help_heading = MEASUREMENT)]
    pub max_trials: Option<String>,
    /// Stabilise on and report this latency percentile (1..99) instead of the mean; -1 = mean
    /// [default: -1]
    #[arg(long, value_name = "P", allow_negative_numbers = true, help_heading = MEASUREMENT)]
    pub percentile: Option<String>,
    /// Stop the sweep when the stabilising latency reaches this many ms; 0 = no limit
    /// [default: 0]
    #[arg(short = 'l', long, value_name = "MS", allow_negative_numbers = true, help_heading = MEASUREMENT)]
    pub latency_threshold: Option<String>,
    /// Run exactly N requests in one window, no stability check (see note 2); 0 = off
    /// [default: 0]
    #[arg(long, value_name = "N", allow_negative_numbers = true, help_heading = MEASUREMENT)]
    pub request_count: Option<String>,
    /// Requests sent before measuring, never measured [default: 0]
    #[arg(long, value_name = "N", allow_negative_numbers = true, help_heading = MEASUREMENT)]
    pub warmup_request_count: Option<String>,

    // --- input ---
    /// Input values: zero|random, a JSON file (repeatable) or a directory with one file per
    /// input [default: random]
    #[arg(long, value_name = "zero|random|PATH", action = ArgAction::Append, help_heading = INPUT)]
    pub input_data: Vec<String>,
    /// Deprecated: same as --input-data DIR [default: none]
    #[arg(long, value_name = "DIR", help_heading = INPUT)]
    pub data_directory: Option<String>,
    /// Deprecated: same as --input-data zero
    #[arg(short = 'z', help_heading = INPUT)]
    pub zero_input: bool,
    /// Batch size (> 0) [default: 1]
    #[arg(short = 'b', value_name = "N", allow_negative_numbers = true, help_heading = INPUT)]
    pub batch_size: Option<String>,
    /// Shape of an input with -1 dims, without the batch dim (repeatable)
    #[arg(long, value_name = "NAME:D1,D2,...", action = ArgAction::Append, help_heading = INPUT)]
    pub shape: Vec<String>,
    /// Length of random BYTES elements [default: 128]
    #[arg(long, value_name = "N", allow_negative_numbers = true, help_heading = INPUT)]
    pub string_length: Option<String>,
    /// Fixed value for every BYTES element [default: random strings]
    #[arg(long, value_name = "STRING", allow_hyphen_values = true, help_heading = INPUT)]
    pub string_data: Option<String>,
    /// Most bytes one generated (random/zero) input may take in a request; a model shape
    /// asking for more is an error naming the input [default: 268435456 (256 MiB)]
    #[arg(long, value_name = "N", allow_negative_numbers = true, help_heading = INPUT)]
    pub max_input_bytes: Option<String>,
    /// Tensor transport: none|system (POSIX shared memory on the server's host); cuda
    /// (device memory shared by IPC handle) needs libcudart.so [default: none]
    #[arg(long, value_name = "none|system|cuda", help_heading = INPUT)]
    pub shared_memory: Option<String>,
    /// CUDA device of --shared-memory cuda regions (inferperf only) [default: 0]
    #[arg(long, value_name = "N", allow_negative_numbers = true, help_heading = INPUT)]
    pub cuda_device: Option<String>,
    /// Bytes per output region when the output size is unknown (dynamic shape or BYTES),
    /// times the batch size [default: 102400]
    #[arg(long, value_name = "BYTES", allow_negative_numbers = true, help_heading = INPUT)]
    pub output_shared_memory_size: Option<String>,
    /// Input encoding over HTTP: binary|json [default: binary]
    #[arg(long, value_name = "FORMAT", help_heading = INPUT)]
    pub input_tensor_format: Option<String>,
    /// Output encoding over HTTP: binary|json [default: binary]
    #[arg(long, value_name = "FORMAT", help_heading = INPUT)]
    pub output_tensor_format: Option<String>,

    // --- transport ---
    /// Server address host:port, http://host:port or https://host:port
    /// [default: localhost:8000 (HTTP), localhost:8001 (gRPC)]
    #[arg(short = 'u', value_name = "URL", help_heading = TRANSPORT)]
    pub url: Option<String>,
    /// Protocol, case-insensitive: http|grpc [default: http]
    #[arg(short = 'i', value_name = "PROTOCOL", help_heading = TRANSPORT)]
    pub protocol: Option<String>,
    /// Extra HTTP header, or gRPC metadata with -i grpc (repeatable)
    #[arg(short = 'H', value_name = "NAME:VALUE", action = ArgAction::Append, help_heading = TRANSPORT)]
    pub headers: Vec<String>,
    /// gRPC bidirectional streaming (ModelStreamInfer); implies --async; required for
    /// decoupled models
    #[arg(long, help_heading = TRANSPORT)]
    pub streaming: bool,
    /// gRPC request compression: none|gzip|deflate [default: none]
    #[arg(long, value_name = "ALGORITHM", help_heading = TRANSPORT)]
    pub grpc_compression_algorithm: Option<String>,
    /// Request-level parameter, TYPE bool|int|string; gRPC only (repeatable) [default: none]
    #[arg(long, value_name = "NAME:VALUE:TYPE", action = ArgAction::Append, help_heading = TRANSPORT)]
    pub request_parameter: Vec<String>,
    /// TLS channel for gRPC [default: off]
    #[arg(long, help_heading = TRANSPORT)]
    pub ssl_grpc_use_ssl: bool,
    /// gRPC root CAs, PEM [default: the system bundle]
    #[arg(long, value_name = "FILE", help_heading = TRANSPORT)]
    pub ssl_grpc_root_certifications_file: Option<String>,
    /// gRPC client key, PEM [default: none]
    #[arg(long, value_name = "FILE", help_heading = TRANSPORT)]
    pub ssl_grpc_private_key_file: Option<String>,
    /// gRPC client certificate chain, PEM [default: none]
    #[arg(long, value_name = "FILE", help_heading = TRANSPORT)]
    pub ssl_grpc_certificate_chain_file: Option<String>,
    /// HTTPS: verify the server certificate, 0|1 [default: 1]
    #[arg(long, value_name = "0|1", help_heading = TRANSPORT)]
    pub ssl_https_verify_peer: Option<String>,
    /// HTTPS: verify the server name, 0|1|2 (1 and 2 both verify) [default: 2]
    #[arg(long, value_name = "0|1|2", help_heading = TRANSPORT)]
    pub ssl_https_verify_host: Option<String>,
    /// HTTPS CA bundle [default: the system bundle]
    #[arg(long, value_name = "FILE", help_heading = TRANSPORT)]
    pub ssl_https_ca_certificates_file: Option<String>,
    /// HTTPS client certificate [default: none]
    #[arg(long, value_name = "FILE", help_heading = TRANSPORT)]
    pub ssl_https_client_certificate_file: Option<String>,
    /// HTTPS client certificate type: PEM|DER [default: PEM]
    #[arg(long, value_name = "TYPE", help_heading = TRANSPORT)]
    pub ssl_https_client_certificate_type: Option<String>,
    /// HTTPS client key [default: none]
    #[arg(long, value_name = "FILE", help_heading = TRANSPORT)]
    pub ssl_https_private_key_file: Option<String>,
    /// HTTPS client key type: PEM|DER [default: PEM]
    #[arg(long, value_name = "TYPE", help_heading = TRANSPORT)]
    pub ssl_https_private_key_type: Option<String>,
    /// Seconds to wait for /v2/health/ready before giving up; 0 = check once [default: 10]
    #[arg(long, value_name = "SECONDS", allow_negative_numbers = true, help_heading = TRANSPORT)]
    pub ready_timeout: Option<String>,
    /// Milliseconds a request may take from its start to its last byte (a stream: the whole
    /// stream) before it fails as timed out, at most 86400000
    /// [default: max(10 min, 10x the slowest request so far)]
    #[arg(long, value_name = "MS", allow_negative_numbers = true, help_heading = TRANSPORT)]
    pub request_timeout: Option<String>,
    /// Milliseconds a request may go without a byte moving (or a connect without finishing)
    /// before it fails as timed out, at most 86400000
    /// [default: max(30 s, 10x the slowest request so far)]
    #[arg(long, value_name = "MS", allow_negative_numbers = true, help_heading = TRANSPORT)]
    pub request_idle_timeout: Option<String>,
    /// Largest response body or gRPC message accepted, in bytes; a larger one fails its
    /// request [default: 67108864 (64 MiB)]
    #[arg(long, value_name = "BYTES", allow_negative_numbers = true, help_heading = TRANSPORT)]
    pub max_response_bytes: Option<String>,

    /// Models whose server statistics the Server section adds, e.g. "a,b:2" (BLS models)
    /// [default: none]
    #[arg(long, value_name = "A[:VER],B", help_heading = TRANSPORT)]
    pub bls_composing_models: Option<String>,
    /// Server trace level sent at startup: OFF|TIMESTAMPS|TENSORS [default: the server's]
    #[arg(long, value_name = "LEVEL", help_heading = TRANSPORT)]
    pub trace_level: Option<String>,
    /// Server trace rate sent at startup [default: the server's]
    #[arg(long, value_name = "N", allow_negative_numbers = true, help_heading = TRANSPORT)]
    pub trace_rate: Option<String>,
    /// Server trace count sent at startup, >= -1 [default: the server's]
    #[arg(long, value_name = "N", allow_negative_numbers = true, help_heading = TRANSPORT)]
    pub trace_count: Option<String>,
    /// Server trace log frequency sent at startup, >= 0 [default: the server's]
    #[arg(long, value_name = "N", allow_negative_numbers = true, help_heading = TRANSPORT)]
    pub log_frequency: Option<String>,

    // --- reports ---
    /// Write the CSV latency report to this file [default: none]
    #[arg(short = 'f', value_name = "FILE", help_heading = REPORTS)]
    pub csv_file: Option<String>,
    /// Extra CSV columns [default: off]
    #[arg(long, help_heading = REPORTS)]
    pub verbose_csv: bool,
    /// inferperf only: append its own CSV columns after perf_analyzer's (min/max latency,
    /// open-loop send lag and latency from the intended send time, the client's receive delay
    /// after the kernel's receive stamp, client CPU use with --collect-metrics); without it
    /// the CSV header is perf_analyzer's [default: off]
    #[arg(long, help_heading = REPORTS)]
    pub csv_extra_columns: bool,
    /// inferperf only: time responses by the worker's clock read after each socket read
    /// instead of the kernel's receive stamp of the data; the latency then includes the
    /// client's own delay before the read, and the receive-delay line and columns are left out
    /// [default: kernel stamps on]
    #[arg(long, help_heading = REPORTS)]
    pub no_kernel_rx_stamps: bool,
    /// inferperf only: start each request at the worker's clock read just before the write
    /// of its first byte instead of the kernel's send stamp of that write (one system call
    /// less per request); the latency then includes the time from that read until the data
    /// left, e.g. the system call itself or the CPU taken from the client on the way
    /// [default: kernel stamps on, plain TCP]
    #[arg(long, help_heading = REPORTS)]
    pub no_kernel_tx_stamps: bool,
    /// inferperf only: over gRPC without TLS, do not open the packet socket (root or
    /// CAP_NET_RAW) that times each response by the TCP segment that carried it when one read
    /// takes several; such responses then share that read's stamp [default: on where it can
    /// be opened]
    #[arg(long, help_heading = REPORTS)]
    pub no_packet_stamps: bool,
    /// Write the per-request JSON export to this file, which must not exist [default: none]
    #[arg(long, value_name = "FILE", help_heading = REPORTS)]
    pub profile_export_file: Option<String>,
    /// Poll the server's Prometheus GPU metrics while measuring; adds them (and inferperf's
    /// own CPU use) to the console and, with --verbose-csv, the GPU columns to the CSV
    /// [default: off]
    #[arg(long, help_heading = REPORTS)]
    pub collect_metrics: bool,
    /// Prometheus metrics URL, [http://]host[:port][/path]
    /// [default: <host of -u>:8002/metrics]
    #[arg(long, value_name = "URL", help_heading = REPORTS)]
    pub metrics_url: Option<String>,
    /// Metrics poll period in ms (> 0) [default: 1000]
    #[arg(long, value_name = "MS", allow_negative_numbers = true, help_heading = REPORTS)]
    pub metrics_interval: Option<String>,
}

/// The full command: `RunArgs` plus the recognised but unimplemented flags.
pub fn command() -> clap::Command {
    RunArgs::command().args(PLANNED_FLAGS.iter().map(|flag| {
        let arg = Arg::new(flag.long)
            .long(flag.long)
            .help(flag.help)
            .help_heading(PLANNED);
        match flag.value_name {
            None => arg.action(ArgAction::SetTrue),
            Some(value_name) => arg
                .value_name(value_name)
                .allow_negative_numbers(true)
                .action(if flag.repeatable {
                    ArgAction::Append
                } else {
                    ArgAction::Set
                }),
        }
    }))
}

/// The first unimplemented flag given on the command line, as `--name`.
pub fn first_planned_flag(matches: &ArgMatches) -> Option<String> {
    PLANNED_FLAGS
        .iter()
        .find(|flag| matches.value_source(flag.long) == Some(ValueSource::CommandLine))
        .map(|flag| format!("--{}", flag.long))
}
