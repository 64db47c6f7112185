//! The validated run configuration: what the CLI produces and the engine consumes.

use std::path::PathBuf;

pub use inferperf_wire::protocol::grpc::compress::Compression;
pub use inferperf_wire::protocol::http1::DEFAULT_MAX_RESPONSE_BYTES;

/// Default of `--max-input-bytes` (256 MiB): far above the inputs of real models, far below
/// what a shape from a confused or hostile server can ask for.
pub const DEFAULT_MAX_INPUT_BYTES: u64 = 256 << 20;

/// Open loop without `--max-inflight`, perf_analyzer mode: requests one worker may have in
/// flight. Past the server's capacity every request beyond what keeps it busy only waits in
/// its queue, and servers serve deep queues more slowly: nginx's fixed gRPC answers, offered
/// 160k/s from one worker, came back at 82.8k/s with 64 in flight (h2load's closed loop at
/// 64 streams: 85.4k/s), 72.8k/s with 128, 46k/s with 1,024. The sends that find no free slot
/// wait and count as late, and the report says so.
pub const PA_MAX_INFLIGHT: usize = 64;

/// Protocol to the server (`-i`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Http,
    Grpc,
}

/// Which kind of server the run talks to: the `--service-kind` value, as the service-kind
/// registry (`run::kinds::registry`) names it. The constants name the built-in kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServiceKind(pub &'static str);

#[allow(non_upper_case_globals)]
impl ServiceKind {
    /// Triton / KServe v2 (HTTP or gRPC).
    pub const Triton: ServiceKind = ServiceKind("triton");
    /// An OpenAI-compatible HTTP API: each input-data `payload` POSTed to `--endpoint`.
    pub const OpenAi: ServiceKind = ServiceKind("openai");
    /// Triton in process through its C API (`libtritonserver.so`), no network.
    pub const TritonCApi: ServiceKind = ServiceKind("triton_c_api");
    /// TensorFlow Serving's `PredictionService` over gRPC.
    pub const TfServing: ServiceKind = ServiceKind("tfserving");
    /// TorchServe: a file uploaded per request to `/predictions/<model>` (HTTP).
    pub const TorchServe: ServiceKind = ServiceKind("torchserve");
    /// Any gRPC method (`--grpc-method`), messages from `message_generator` commands.
    pub const DynamicGrpc: ServiceKind = ServiceKind("dynamic_grpc");
}

impl Default for ServiceKind {
    fn default() -> ServiceKind {
        ServiceKind::Triton
    }
}

/// How load is generated (perf_analyzer's inference load modes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadMode {
    /// Closed loop, `--concurrency-range`.
    Concurrency,
    /// Open loop at `--request-rate-range` rates.
    RequestRate,
    /// Open loop at the gaps of `--request-intervals`.
    Intervals,
    /// `--fixed-schedule`: each input-data entry once, at its `timestamp`.
    FixedSchedule,
    /// `--periodic-concurrency-range` with `--request-period`.
    Periodic,
}

/// Inter-arrival distribution of request-rate mode (`--request-distribution`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Distribution {
    Constant,
    Poisson,
}

/// A `start:end:step` sweep of request rates (per second); `end == 0` means "until the
/// latency threshold is exceeded".
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateRange {
    pub start: f64,
    pub end: f64,
    pub step: f64,
}

impl RateRange {
    /// The range holding the single rate 1 (`--request-rate-range 1`).
    const ONE: RateRange = RateRange {
        start: 1.0,
        end: 1.0,
        step: 1.0,
    };
}

/// Sequence (stateful) model settings (`--num-of-sequences`, `--sequence-*`).
#[derive(Debug, Clone, PartialEq)]
pub struct SequenceSettings {
    /// Concurrent sequences in open-loop modes (concurrency mode uses the concurrency).
    pub num_sequences: u64,
    /// Base sequence length; `length_given`: set by the flag (JSON data otherwise sets it).
    pub length: u64,
    pub length_given: bool,
    /// +/- random variation of the length, in %.
    pub variation_pct: f64,
    /// First sequence id, and the number of ids to cycle through.
    pub id_start: u64,
    pub id_range: Option<u64>,
    /// `--serial-sequences`: accepted for perf_analyzer's command lines; every mode keeps at
    /// most one request in flight per sequence, so nothing reads it.
    pub serial: bool,
}

impl Default for SequenceSettings {
    fn default() -> Self {
        SequenceSettings {
            num_sequences: 4,
            length: 20,
            length_given: false,
            variation_pct: 20.0,
            id_start: 1,
            id_range: None,
            serial: false,
        }
    }
}

/// A `--request-parameter name:value:type` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParamValue {
    Bool(bool),
    Int(i64),
    Str(String),
}

/// Encoding of a certificate or key file (`--ssl-https-*-type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CertFormat {
    Pem,
    Der,
}

/// TLS settings from the `--ssl-*` flags and an `https://` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsConfig {
    /// Root CAs; `None`: the system bundle.
    pub ca_file: Option<PathBuf>,
    pub client_cert: Option<(PathBuf, CertFormat)>,
    pub client_key: Option<(PathBuf, CertFormat)>,
    pub verify_peer: bool,
    pub verify_host: bool,
    /// Flag family the settings came from (`--ssl-grpc` or `--ssl-https`), for messages.
    pub flag_prefix: &'static str,
}

/// `--collect-metrics` settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricsConfig {
    /// `--metrics-url`, normalised to `host:port/path` (plain HTTP); by default the `-u` host
    /// with port 8002 and path `/metrics`, where Triton serves its metrics.
    pub url: String,
    /// `--metrics-interval`: poll period (ms, > 0).
    pub interval_ms: u64,
}

impl MetricsConfig {
    /// The normalised URL split into (`host:port`, `/path`).
    pub fn address_and_path(&self) -> (&str, &str) {
        match self.url.find('/') {
            Some(i) => (&self.url[..i], &self.url[i..]),
            None => (&self.url, "/"),
        }
    }
}

/// How a measurement window ends (`--measurement-mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MeasurementMode {
    /// A window lasts `measurement_interval_ms` (exactly; perf_analyzer sleeps 1.2x).
    TimeWindows,
    /// A window lasts until `measurement_request_count` requests have completed.
    CountWindows,
}

/// Where input tensor values come from (`--input-data`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InputData {
    Random,
    Zero,
    /// JSON file(s) or a directory (`--input-data FILE.json|DIR`), read by `inputs`.
    Files(Vec<PathBuf>),
}

/// Tensor encoding over HTTP (`--input-tensor-format`, `--output-tensor-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TensorFormat {
    Binary,
    Json,
}

/// Tensor transport (`--shared-memory`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SharedMemory {
    None,
    System,
    Cuda,
}

/// A `start:end:step` sweep of concurrency values. `end == 0` means "until the latency
/// threshold is exceeded".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConcurrencyRange {
    pub start: u64,
    pub end: u64,
    pub step: u64,
}

impl ConcurrencyRange {
    /// The range holding the single value 1 (`--concurrency-range 1`).
    const ONE: ConcurrencyRange = ConcurrencyRange {
        start: 1,
        end: 1,
        step: 1,
    };
}

#[derive(Debug, Clone)]
pub struct Config {
    // --- general ---
    pub model_name: String,
    /// Empty: the server picks (latest).
    pub model_version: String,
    /// `host:port` (a leading `http://` is accepted and stripped).
    pub url: String,
    pub protocol: Protocol,
    /// `--service-kind`.
    pub service_kind: ServiceKind,
    /// `--endpoint`: the path the openai kind POSTs to (no leading `/`), copied into the
    /// profile export.
    pub endpoint: String,
    /// `-v` count.
    pub verbose: u8,
    /// `--grpc-method pkg.Service/Method` (dynamic_grpc; empty otherwise).
    pub grpc_method: String,
    /// `--model-signature-name` (tfserving).
    pub model_signature_name: String,

    // --- load ---
    pub load_mode: LoadMode,
    pub concurrency: ConcurrencyRange,
    /// `--periodic-concurrency-range start:end:step` and `--request-period`.
    pub periodic: ConcurrencyRange,
    pub request_period: u32,
    pub request_rate: RateRange,
    pub distribution: Distribution,
    /// `--request-intervals`: the file's gaps, in ns.
    pub request_intervals_ns: Vec<u64>,
    /// `--fixed-schedule`: each input-data entry's send offset (ns), filled in once the data
    /// is read.
    pub fixed_schedule_ns: Vec<u64>,
    /// `--binary-search` over the range instead of a linear sweep.
    pub binary_search: bool,
    /// `--enable-mpi`: one rank of an MPI job; `--mpi-scale-out` splits one load across the
    /// ranks; `--mpi-timeout` (s) bounds every wait for the other ranks.
    pub enable_mpi: bool,
    pub mpi_scale_out: bool,
    pub mpi_timeout_s: Option<u64>,
    /// Seed of the request schedule and random input data (`--seed`, else drawn at start).
    pub seed: u64,
    pub seed_given: bool,
    /// `--max-inflight`: a cap on requests in flight in open-loop modes (none by default).
    pub max_inflight: Option<u64>,
    /// `--session-concurrency`: OpenAI multi-turn conversations run at a time (0: off).
    pub session_concurrency: u64,
    pub sequences: SequenceSettings,
    /// `--sync` was given (sequence models default to async otherwise).
    pub sync_given: bool,
    /// `-a/--async` (true) or sync (false).
    pub async_mode: bool,
    /// Upper bound on worker threads; `None`: one per available core.
    pub max_threads: Option<usize>,
    /// Pin worker threads to cores: `--pin`, or by default when the server is on another
    /// machine.
    pub pin_threads: bool,

    // --- measurement ---
    pub measurement_mode: MeasurementMode,
    pub measurement_interval_ms: u64,
    pub measurement_request_count: u64,
    /// How often a count window looks at its count, in ms: 1000, as perf_analyzer, so a
    /// count window lasts whole seconds. No flag sets it; library users (and the tests, to
    /// stay fast) may shorten it.
    pub count_check_ms: u64,
    /// As a fraction: `-s 10` is 0.10.
    pub stability_threshold: f64,
    pub max_trials: u32,
    /// `--percentile`: stabilise on and report this percentile instead of the mean.
    pub percentile: Option<u32>,
    /// `-l` in ms; 0 means no limit.
    pub latency_threshold_ms: u64,
    /// `--request-count`: exactly this many requests in one window (0 = off).
    pub request_count: u64,
    pub warmup_request_count: u64,

    // --- inputs ---
    pub batch_size: u64,
    /// true when `-b` was given explicitly (the banner prints the batch size either way for
    /// Triton, but later service kinds need to know).
    pub batch_size_given: bool,
    pub input_data: InputData,
    /// `--shape name:d1,d2` (no batch dim), in the order given.
    pub shapes: Vec<(String, Vec<i64>)>,
    pub string_length: usize,
    pub string_data: Option<String>,
    /// `--max-input-bytes`: the most bytes one generated (random or zero) input may take in
    /// one request.
    pub max_input_bytes: u64,
    pub input_tensor_format: TensorFormat,
    pub output_tensor_format: TensorFormat,
    pub shared_memory: SharedMemory,
    /// `--output-shared-memory-size`: bytes per output region (times the batch size) when
    /// the output's size is not known.
    pub output_shm_size: u64,
    /// `--cuda-device`: the CUDA device of `--shared-memory cuda` regions (perf_analyzer
    /// always uses 0).
    pub cuda_device: i32,
    /// `-H Name:Value`, in the order given (HTTP headers, or gRPC metadata).
    pub headers: Vec<(String, String)>,

    // --- gRPC and TLS ---
    /// `--streaming`: requests go over gRPC `ModelStreamInfer` streams.
    pub streaming: bool,
    pub compression: Compression,
    /// `--request-parameter`, in the order given.
    pub request_parameters: Vec<(String, ParamValue)>,
    /// TLS to the server (`-u https://…` or `--ssl-grpc-use-ssl`); `None`: plain TCP.
    pub tls: Option<TlsConfig>,

    /// Triton trace settings to send once at startup (`--trace-level`, `--trace-rate`,
    /// `--trace-count`, `--log-frequency`): (key, value) in Triton's names, only those given.
    pub trace_settings: Vec<(String, String)>,
    /// `--bls-composing-models a[:ver],b`: models whose statistics the Server section adds.
    pub bls_composing_models: Option<String>,
    /// C API: `--triton-server-directory` (holds `lib/libtritonserver.so`).
    pub triton_server_directory: PathBuf,
    /// C API: `--model-repository` (required there).
    pub model_repository: Option<PathBuf>,

    // --- reports ---
    pub csv_file: Option<PathBuf>,
    pub verbose_csv: bool,
    /// `--csv-extra-columns` (inferperf only): inferperf's columns after perf_analyzer's in `-f`.
    pub csv_extra_columns: bool,
    /// Responses are timed by the kernel's receive stamp (off: `--no-kernel-rx-stamps`, the
    /// worker's clock read after the read).
    pub rx_stamps: bool,
    /// Requests start at the kernel's send stamp of their first byte's write (off:
    /// `--no-kernel-tx-stamps`, the worker's clock read just before that write).
    pub tx_stamps: bool,
    /// gRPC responses read together are timed by their own TCP segment's stamp from a packet
    /// socket, where one can be opened (off: `--no-packet-stamps`).
    pub packet_stamps: bool,
    pub profile_export_file: Option<PathBuf>,
    /// `--collect-metrics` (with `--metrics-url`, `--metrics-interval`); `None`: off.
    pub metrics: Option<MetricsConfig>,

    // --- run control ---
    /// Seconds to wait for `/v2/health/ready` before giving up.
    pub ready_timeout_s: u64,
    /// `--request-timeout`: a request not complete this long after its start fails as
    /// timed out; `None`: max(10 min, 10x the slowest request completed so far).
    pub request_timeout: Option<std::time::Duration>,
    /// `--request-idle-timeout`: a request with no byte moved for this long fails as timed
    /// out; `None`: max(30 s, 10x the slowest request completed so far).
    pub request_idle_timeout: Option<std::time::Duration>,
    /// `--max-response-bytes`: the largest response body or gRPC message accepted.
    pub max_response_bytes: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            model_name: String::new(),
            model_version: String::new(),
            url: "localhost:8000".into(),
            protocol: Protocol::Http,
            service_kind: ServiceKind::Triton,
            endpoint: String::new(),
            verbose: 0,
            grpc_method: String::new(),
            model_signature_name: "serving_default".into(),
            load_mode: LoadMode::Concurrency,
            concurrency: ConcurrencyRange::ONE,
            periodic: ConcurrencyRange::ONE,
            request_period: 10,
            request_rate: RateRange::ONE,
            distribution: Distribution::Constant,
            request_intervals_ns: Vec::new(),
            fixed_schedule_ns: Vec::new(),
            binary_search: false,
            enable_mpi: false,
            mpi_scale_out: false,
            mpi_timeout_s: None,
            seed: 1,
            seed_given: false,
            max_inflight: None,
            session_concurrency: 0,
            sequences: SequenceSettings::default(),
            sync_given: false,
            async_mode: false,
            max_threads: None,
            // The default server, localhost, shares this machine's cores.
            pin_threads: false,
            measurement_mode: MeasurementMode::TimeWindows,
            measurement_interval_ms: 5000,
            measurement_request_count: 50,
            count_check_ms: 1000,
            stability_threshold: 0.10,
            max_trials: 10,
            percentile: None,
            latency_threshold_ms: 0,
            request_count: 0,
            warmup_request_count: 0,
            batch_size: 1,
            batch_size_given: false,
            input_data: InputData::Random,
            shapes: Vec::new(),
            string_length: 128,
            string_data: None,
            max_input_bytes: DEFAULT_MAX_INPUT_BYTES,
            input_tensor_format: TensorFormat::Binary,
            output_tensor_format: TensorFormat::Binary,
            shared_memory: SharedMemory::None,
            output_shm_size: 102_400,
            cuda_device: 0,
            headers: Vec::new(),
            streaming: false,
            compression: Compression::None,
            request_parameters: Vec::new(),
            tls: None,
            trace_settings: Vec::new(),
            bls_composing_models: None,
            triton_server_directory: PathBuf::from("/opt/tritonserver"),
            model_repository: None,
            csv_file: None,
            verbose_csv: false,
            csv_extra_columns: false,
            rx_stamps: true,
            tx_stamps: true,
            packet_stamps: true,
            profile_export_file: None,
            metrics: None,
            ready_timeout_s: 10,
            request_timeout: None,
            request_idle_timeout: None,
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::MetricsConfig;

    #[test]
    fn metrics_url_splits_into_address_and_path() {
        let split = |url: &str| {
            let cfg = MetricsConfig {
                url: url.into(),
                interval_ms: 1,
            };
            let (address, path) = cfg.address_and_path();
            (address.to_string(), path.to_string())
        };
        assert_eq!(split("h:1/a/b"), ("h:1".into(), "/a/b".into()));
        assert_eq!(split("h:1"), ("h:1".into(), "/".into()));
    }
}
