//! `inferperf serve`: flags, the startup line, and running until a signal or `--duration`.

use std::ffi::OsString;
use std::io::Write;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use clap::{CommandFactory, Parser};

use super::delay::{parse_delay, parse_delay_value, Delay};
use super::limits::{self, Limits};
use super::llm::state::{OpenAiConfig, DEFAULT_OPENAI_MODEL};
use super::repository::ControlMode;
use super::serve::{model_names, start, ServeConfig};
use super::tls::TlsFiles;
use inferperf_wire::error::{Error, Result};

/// How often the main thread checks for a stop signal or the end of `--duration`.
const STOP_CHECK: Duration = Duration::from_millis(100);
/// Triton's gRPC port.
const DEFAULT_GRPC_PORT: u16 = 8001;

/// Run the reference KServe v2 (Triton-compatible) HTTP and gRPC server with models simple,
/// identity_fp32, identity_bytes, identity_int32, repeat_int32 (decoupled, gRPC stream only),
/// accumulate_int32 (sequence model: running sum per sequence id) and ensemble_simple
/// (simple, then identity_int32).
#[derive(Parser, Debug)]
#[command(name = "inferperf serve", version)]
struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// HTTP port to listen on (0 picks a free one).
    #[arg(long, default_value_t = 8000)]
    port: u16,
    /// gRPC port to listen on, on the same host (0 picks a free one) [default: 8001, or 0
    /// when --port is 0].
    #[arg(long, value_name = "N")]
    grpc_port: Option<u16>,
    /// Do not serve gRPC.
    #[arg(long)]
    no_grpc: bool,
    /// Serve TLS only, on both ports, with this PEM certificate chain (needs --tls-key).
    #[arg(long, value_name = "FILE")]
    tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert.
    #[arg(long, value_name = "FILE")]
    tls_key: Option<PathBuf>,
    /// Require client certificates signed by this PEM CA (needs --tls-cert and --tls-key).
    #[arg(long, value_name = "FILE")]
    tls_client_ca: Option<PathBuf>,
    /// Server threads, each with its own event loop.
    #[arg(long, default_value_t = 1, value_name = "N")]
    threads: usize,
    /// Pin server threads to these cores (round-robin).
    #[arg(long, value_delimiter = ',', value_name = "CORE[,CORE]")]
    pin: Vec<usize>,
    /// Add a compute delay to a model: MODEL=2ms or MODEL=500us..3ms (uniform). Repeatable.
    #[arg(long = "delay", value_name = "MODEL=SPEC")]
    delays: Vec<String>,
    /// Run MODEL's executions one at a time per server thread (a single model instance):
    /// requests queue behind each other's delay, so latency grows with concurrency; a load's
    /// config with an instance_group replaces it. Repeatable.
    #[arg(long = "serial", value_name = "MODEL")]
    serial: Vec<String>,
    /// Model name of the OpenAI-compatible endpoints (/v1/models, /v1/chat/completions,
    /// /v1/completions, /v1/embeddings).
    #[arg(long, default_value = DEFAULT_OPENAI_MODEL, value_name = "NAME")]
    openai_model: String,
    /// A LoRA adapter name the OpenAI-compatible endpoints answer besides --openai-model
    /// (as vLLM's --lora-modules). Repeatable.
    #[arg(long, value_name = "NAME")]
    openai_adapter: Vec<String>,
    /// OpenAI time to first token: 50ms, or 20ms..80ms (uniform) [default: 0ms].
    #[arg(long, value_name = "SPEC")]
    openai_ttft: Option<String>,
    /// OpenAI gap between stream chunks: 5ms, or 2ms..8ms (uniform) [default: 0ms].
    #[arg(long, value_name = "SPEC")]
    openai_itl: Option<String>,
    /// OpenAI tokens per stream chunk.
    #[arg(long, default_value_t = 1, value_name = "N")]
    openai_tokens_per_chunk: u32,
    /// Put a stream's usage on its last content chunk instead of a final usage-only chunk.
    #[arg(long)]
    openai_usage_on_last: bool,
    /// A stream that starts while more than N streams generate gets its first token
    /// --openai-busy-ttft later (a server with a known breaking point).
    #[arg(long, value_name = "N")]
    openai_busy_streams: Option<u64>,
    /// The extra time to first token above --openai-busy-streams (e.g. 400ms).
    #[arg(long, value_name = "DELAY")]
    openai_busy_ttft: Option<String>,
    /// Which server's Prometheus names `/metrics` uses for the fake GPUs and LLM (Triton's
    /// `nv_*`, vLLM's `vllm:*` or the DCGM exporter's `DCGM_FI_*`); `/metrics/triton`,
    /// `/metrics/vllm` and `/metrics/dcgm` always serve each one.
    #[arg(long, value_enum, default_value = "triton", value_name = "STYLE")]
    metrics_style: crate::metrics::MetricsStyle,
    /// Stop after this many seconds (default: run until Ctrl-C/SIGTERM).
    #[arg(long, value_name = "SECONDS")]
    duration: Option<f64>,
    /// Triton's model control mode: `none` loads every model and refuses load/unload
    /// requests; `explicit` loads only --load-model models and lets clients load and unload
    /// them (the model repository API).
    #[arg(long, default_value = "none", value_parser = ["none", "explicit"], value_name = "MODE")]
    model_control_mode: String,
    /// With --model-control-mode explicit: a model to load at start (`*` = all). Repeatable.
    #[arg(long = "load-model", value_name = "MODEL")]
    load_model: Vec<String>,
    /// Largest request a client may send, bytes: an HTTP body (after chunked decoding; more
    /// is answered 413) or a gRPC message (after gzip/deflate decompression; more is
    /// RESOURCE_EXHAUSTED).
    #[arg(long, default_value_t = limits::DEFAULT_MAX_REQUEST_BYTES, value_name = "BYTES")]
    max_request_bytes: usize,
    /// Connections open at once, HTTP and gRPC together. A new one past it takes the place of
    /// the connection idle longest (one that has not completed a request first); when all
    /// are busy it is closed at accept (HTTP with a 503).
    #[arg(long, default_value_t = limits::DEFAULT_MAX_CONNECTIONS, value_name = "N")]
    max_connections: usize,
    /// Seconds a new connection may stay silent before it is closed (gRPC: until TLS, the
    /// HTTP/2 preface and its first call are in); also the longest an HTTP request head may
    /// take after its first byte, and a body may pause (then the answer is 408).
    #[arg(long, default_value_t = limits::DEFAULT_READ_TIMEOUT.as_secs_f64(), value_name = "SECONDS")]
    read_timeout: f64,
    /// Seconds a connection may stay idle between requests (gRPC: with no call open) before
    /// it is closed.
    #[arg(long, default_value_t = limits::DEFAULT_IDLE_TIMEOUT.as_secs_f64(), value_name = "SECONDS")]
    idle_timeout: f64,
    /// Seconds a whole request may take to arrive after its first byte, however steadily it
    /// trickles in (HTTP: 408; gRPC: DEADLINE_EXCEEDED for the call, or the stream's message).
    #[arg(long, default_value_t = limits::DEFAULT_REQUEST_READ_TIMEOUT.as_secs_f64(), value_name = "SECONDS")]
    request_read_timeout: f64,
    /// Streams one gRPC (HTTP/2) connection may have open at once; more are refused with
    /// REFUSED_STREAM.
    #[arg(long, default_value_t = limits::DEFAULT_MAX_STREAMS, value_name = "N")]
    max_concurrent_streams: u32,
    /// Serve a deliberately faulty server instead, to test clients against: one model,
    /// `identity` (INPUT0 FP32 [16] -> OUTPUT0), health, metadata, config and statistics
    /// answered, and every infer request (or, for the dims and names modes, the metadata)
    /// given the fault MODE, over HTTP and gRPC where the mode applies. Every stall and flood
    /// ends with the server, after --fault-ttl.
    #[arg(long, value_enum, value_name = "MODE")]
    fault: Option<super::fault::FaultMode>,
    /// With --fault: the fault server's lifetime in seconds; it stops by itself after it.
    #[arg(long, default_value_t = 60.0, value_name = "S")]
    fault_ttl: f64,
}

/// What the command line asks for.
#[derive(Debug, PartialEq)]
enum Parsed {
    /// `--help` / `--version` text to print on stdout.
    Info(String),
    Run(Box<ServeConfig>, Option<Duration>),
    /// `--fault MODE`: the fault server instead of the reference server.
    Fault(Box<super::fault::FaultConfig>),
}

/// Drops the program name and the `serve` word, however the caller passed them.
/// The clap definition of `inferperf serve`'s flags, for shell completions and the man page.
pub fn serve_command() -> clap::Command {
    ServeArgs::command()
}

fn flag_args(args: Vec<OsString>) -> Vec<OsString> {
    let mut rest = args.into_iter().peekable();
    if rest
        .peek()
        .is_some_and(|a| !a.to_string_lossy().starts_with('-'))
    {
        rest.next();
    }
    if rest.peek().is_some_and(|a| a == "serve") {
        rest.next();
    }
    rest.collect()
}

/// `--duration SECS`: a positive number of seconds.
fn run_duration(secs: f64) -> Result<Duration> {
    Duration::try_from_secs_f64(secs)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| {
            Error::usage(format!(
                "--duration {secs}: expected a positive number of seconds"
            ))
        })
}

/// A timeout flag's seconds: positive, at most a day.
fn timeout_secs(flag: &str, secs: f64) -> Result<Duration> {
    Duration::try_from_secs_f64(secs)
        .ok()
        .filter(|d| !d.is_zero() && d.as_secs() <= 86_400)
        .ok_or_else(|| {
            Error::usage(format!(
                "{flag} {secs:?}: expected a positive number of seconds, at most 86400"
            ))
        })
}

/// `--max-request-bytes`, `--max-connections`, the timeouts, `--max-concurrent-streams`.
fn limits_of(flags: &ServeArgs) -> Result<Limits> {
    Ok(Limits {
        max_request_bytes: flags.max_request_bytes,
        max_connections: flags.max_connections,
        read_timeout: timeout_secs("--read-timeout", flags.read_timeout)?,
        idle_timeout: timeout_secs("--idle-timeout", flags.idle_timeout)?,
        request_read_timeout: timeout_secs("--request-read-timeout", flags.request_read_timeout)?,
        max_streams: flags.max_concurrent_streams,
    })
}

/// The fake LLM's settings from the `--openai-*` flags.
fn openai_config(flags: &ServeArgs) -> Result<OpenAiConfig> {
    let pace = |flag: &str, value: &Option<String>| match value {
        Some(v) => parse_delay_value(flag, v),
        None => Ok(Delay::Fixed(Duration::ZERO)),
    };
    Ok(OpenAiConfig {
        model: flags.openai_model.clone(),
        ttft: pace("--openai-ttft", &flags.openai_ttft)?,
        itl: pace("--openai-itl", &flags.openai_itl)?,
        tokens_per_chunk: flags.openai_tokens_per_chunk,
        usage_on_last: flags.openai_usage_on_last,
        busy: busy(flags)?,
        adapters: flags.openai_adapter.clone(),
        ..OpenAiConfig::default()
    })
}

/// `--openai-busy-streams` with `--openai-busy-ttft` (both or neither).
fn busy(flags: &ServeArgs) -> Result<Option<crate::llm::state::Busy>> {
    match (flags.openai_busy_streams, &flags.openai_busy_ttft) {
        (None, None) => Ok(None),
        (Some(streams), Some(extra)) => match parse_delay_value("--openai-busy-ttft", extra)? {
            Delay::Fixed(extra_ttft) => Ok(Some(crate::llm::state::Busy {
                streams,
                extra_ttft,
            })),
            _ => Err(Error::usage("--openai-busy-ttft must be one fixed delay")),
        },
        _ => Err(Error::usage(
            "--openai-busy-streams and --openai-busy-ttft go together",
        )),
    }
}

fn parse(args: Vec<OsString>) -> Result<Parsed> {
    let argv = std::iter::once(OsString::from("inferperf serve")).chain(flag_args(args));
    let flags = match ServeArgs::try_parse_from(argv) {
        Ok(flags) => flags,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                return Ok(Parsed::Info(e.to_string()));
            }
            let text = e.to_string();
            let line = text.lines().next().unwrap_or("invalid arguments");
            return Err(Error::usage(line.trim_start_matches("error: ").to_string()));
        }
    };
    let addr: SocketAddr = (flags.host.as_str(), flags.port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut addrs| addrs.next())
        .ok_or_else(|| Error::usage(format!("--host '{}': cannot resolve", flags.host)))?;
    let duration = flags.duration.map(run_duration).transpose()?;
    let delays = flags
        .delays
        .iter()
        .map(|d| parse_delay(d))
        .collect::<Result<Vec<_>>>()?;
    let tls = tls_files(
        flags.tls_cert.clone(),
        flags.tls_key.clone(),
        flags.tls_client_ca.clone(),
    )?;
    // `--port 0` asks for free ports: the gRPC port follows unless given, so two such servers
    // never collide on the fixed default.
    let grpc_port = flags.grpc_port.unwrap_or(if flags.port == 0 {
        0
    } else {
        DEFAULT_GRPC_PORT
    });
    let grpc_addr = (!flags.no_grpc).then(|| SocketAddr::new(addr.ip(), grpc_port));
    if let Some(mode) = flags.fault {
        let ttl = run_duration(flags.fault_ttl)
            .map_err(|e| Error::usage(e.msg.replace("--duration", "--fault-ttl")))?;
        let ttl = duration.map_or(ttl, |d| d.min(ttl));
        if tls.is_some() {
            return Err(Error::usage(
                "--fault serves cleartext only: drop --tls-cert",
            ));
        }
        let (http, grpc) = (addr, grpc_addr);
        let cfg = super::fault::FaultConfig {
            mode,
            http,
            grpc,
            ttl,
        };
        return Ok(Parsed::Fault(Box::new(cfg)));
    }
    let openai = openai_config(&flags)?;
    let control_mode = ControlMode::parse(&flags.model_control_mode).unwrap_or_default();
    if control_mode != ControlMode::Explicit && !flags.load_model.is_empty() {
        return Err(Error::usage(
            "--load-model needs --model-control-mode explicit (every model is loaded otherwise)",
        ));
    }
    let limits = limits_of(&flags)?;
    let cfg = ServeConfig {
        addr,
        threads: flags.threads,
        pin_cores: flags.pin,
        delays,
        serial: flags.serial,
        grpc_addr,
        tls,
        openai,
        control_mode,
        load_models: flags.load_model,
        limits,
        metrics_style: flags.metrics_style,
    };
    Ok(Parsed::Run(Box::new(cfg), duration))
}

/// Set from the signal handler; read by the main thread's wait loop.
static STOP_REQUESTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop_signal(_signal: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    STOP_REQUESTED.store(true, Ordering::SeqCst);
}

fn install_stop_handlers() {
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a zeroed sigaction is a valid starting point; the handler only stores to an
        // atomic, which is async-signal-safe; SA_RESTART keeps the server threads' syscalls
        // from failing with EINTR more than necessary (they retry anyway).
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_stop_signal as *const () as libc::sighandler_t;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
}

fn run(cfg: ServeConfig, duration: Option<Duration>) -> Result<()> {
    let secure = cfg.tls.is_some();
    let handle = start(cfg)?;
    println!("{}", startup_line(&handle.addr, handle.grpc_addr, secure));
    let _ = std::io::stdout().flush();
    install_stop_handlers();
    let started = Instant::now();
    while !STOP_REQUESTED.load(Ordering::SeqCst) && duration.map_or(true, |d| started.elapsed() < d)
    {
        std::thread::sleep(STOP_CHECK);
    }
    handle.stop();
    Ok(())
}

/// The line naming where the server listens, e.g. `... on http://127.0.0.1:8000 and gRPC
/// 127.0.0.1:8001 (models: ...)`.
fn startup_line(http: &SocketAddr, grpc: Option<SocketAddr>, tls: bool) -> String {
    let scheme = if tls { "https" } else { "http" };
    let grpc = match grpc {
        Some(addr) if tls => format!(" and gRPC over TLS {addr}"),
        Some(addr) => format!(" and gRPC {addr}"),
        None => String::new(),
    };
    format!(
        "inferperf serve: listening on {scheme}://{http}{grpc} (models: {})",
        model_names()
    )
}

/// `--tls-cert`, `--tls-key` (both or neither) and `--tls-client-ca` (needs both).
fn tls_files(
    cert: Option<std::path::PathBuf>,
    key: Option<std::path::PathBuf>,
    client_ca: Option<std::path::PathBuf>,
) -> Result<Option<TlsFiles>> {
    match (cert, key) {
        (Some(cert_chain), Some(key)) => Ok(Some(TlsFiles {
            cert_chain,
            key,
            client_ca,
        })),
        (None, None) if client_ca.is_some() => Err(Error::usage(
            "--tls-client-ca needs --tls-cert and --tls-key",
        )),
        (None, None) => Ok(None),
        (Some(_), None) => Err(Error::usage("--tls-cert needs --tls-key")),
        (None, Some(_)) => Err(Error::usage("--tls-key needs --tls-cert")),
    }
}

/// `inferperf serve [flags]`. `args` as the process got them (program name and the `serve`
/// word are skipped if present). Returns the exit code: 0, or 99 with a one-line message.
pub fn serve_main(args: Vec<OsString>) -> i32 {
    keep_large_blocks_mapped();
    let result = parse(args).and_then(|parsed| match parsed {
        Parsed::Info(text) => {
            print!("{text}");
            Ok(())
        }
        Parsed::Run(cfg, duration) => run(*cfg, duration),
        Parsed::Fault(cfg) => {
            install_stop_handlers();
            super::fault::run(&cfg, &STOP_REQUESTED)
        }
    });
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("inferperf serve: {e}");
            e.exit_code()
        }
    }
}

/// The server allocates tensors of a megabyte and more per request (gRPC messages and their
/// decoded fields): from the heap they reuse pages already mapped, where a fresh mapping per
/// block costs a page fault per 4 KiB on every request. So large blocks stay on the heap
/// (threshold at glibc's maximum) and freed memory is kept for the next request.
fn keep_large_blocks_mapped() {
    // SAFETY: mallopt only changes allocator tuning; it runs before any server thread starts.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 256 << 20);
    }
}

#[cfg(test)]
#[path = "cli_tests.rs"]
mod tests;
