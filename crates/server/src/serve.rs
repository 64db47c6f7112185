//! Starting and stopping the server: the configuration, binding every listener before any
//! thread starts, the HTTP threads and the gRPC / HTTPS-front runtime, and the handle tests
//! read the server's records through.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{SystemTime, UNIX_EPOCH};

use mio::{Poll, Waker};

use super::delay::Delay;
use super::grpc;
use super::limits::Limits;
use super::llm::state::{OpenAiConfig, OpenAiState};
use super::models;
use super::places::Inbox;
use super::repository::{self, ControlMode};
use super::sequence;
use super::state::Shared;
use super::stats::Counters;
use super::tls::{self, TlsFiles};
use super::trace::{TraceSettings, TraceUpdate};
use super::worker::{Worker, WAKER};
use inferperf_wire::error::{Error, Result};

/// How to run the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServeConfig {
    /// Address to listen on; port 0 picks a free port (see [`ServerHandle::addr`]).
    pub addr: SocketAddr,
    /// Number of server threads, each with its own event loop.
    pub threads: usize,
    /// Cores to pin the threads to (thread i gets `pin_cores[i % len]`); empty = no pinning.
    pub pin_cores: Vec<usize>,
    /// Per-model compute delays.
    pub delays: Vec<(String, Delay)>,
    /// Models whose executions run one at a time per server thread, like a single model
    /// instance on one GPU: a request waits (counted as queue time) until the previous one's
    /// delay has passed, so latency grows with concurrency.
    pub serial: Vec<String>,
    /// Address of the gRPC endpoint; port 0 picks a free port (see
    /// [`ServerHandle::grpc_addr`]); None = no gRPC.
    pub grpc_addr: Option<SocketAddr>,
    /// TLS on both ports (HTTPS and gRPC over TLS); None = cleartext.
    pub tls: Option<TlsFiles>,
    /// The fake LLM behind the OpenAI-compatible `/v1/...` endpoints.
    pub openai: OpenAiConfig,
    /// Triton's `--model-control-mode`: `None` loads every model and refuses load/unload.
    pub control_mode: ControlMode,
    /// In explicit mode, the models loaded at start (`*` = all); the others wait for a load
    /// request.
    pub load_models: Vec<String>,
    /// What a client may send (sizes, connections, time, HTTP/2 streams).
    pub limits: Limits,
    /// Which server's metric names `/metrics` serves (Triton, vLLM or DCGM exporter).
    pub metrics_style: crate::metrics::MetricsStyle,
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            addr: SocketAddr::from(([127, 0, 0, 1], 8000)),
            threads: 1,
            pin_cores: Vec::new(),
            delays: Vec::new(),
            serial: Vec::new(),
            grpc_addr: None,
            tls: None,
            openai: OpenAiConfig::default(),
            control_mode: ControlMode::None,
            load_models: Vec::new(),
            limits: Limits::default(),
            metrics_style: Default::default(),
        }
    }
}

/// A running server; stopping it (or dropping it) stops and joins its threads.
pub struct ServerHandle {
    /// The address actually listened on (the real port when the config asked for port 0).
    /// With TLS, the HTTPS address clients use.
    pub addr: SocketAddr,
    /// The gRPC endpoint's address, when the config asked for one.
    pub grpc_addr: Option<SocketAddr>,
    shared: Arc<Shared>,
    /// Each HTTP thread's eviction inbox, with the waker of its loop.
    inboxes: Vec<Arc<Inbox>>,
    threads: Vec<JoinHandle<()>>,
    /// The gRPC / HTTPS-front runtime, when either is on.
    runtime: Option<grpc::Runtime>,
}

impl ServerHandle {
    /// A snapshot of the request counters (with the sequence counts).
    pub fn counters(&self) -> Counters {
        let mut counters = self.shared.stats.counters();
        let (started, ended) = self.shared.sequences.started_ended();
        counters.sequences_started = started;
        counters.sequences_ended = ended;
        counters.sequences_live = self.shared.sequences.live() as u64;
        counters
    }

    /// Connections since start, HTTP and gRPC: (accepted, refused over `--max-connections`).
    pub fn connection_totals(&self) -> (u64, u64) {
        self.shared.conns.totals()
    }

    /// Idle connections closed since start to make room for a new one at `--max-connections`.
    pub fn connections_evicted(&self) -> u64 {
        self.shared.conns.evicted()
    }

    /// Connections open now, HTTP and gRPC (an HTTPS connection counts once its request reaches
    /// the HTTP loop).
    pub fn open_connections(&self) -> usize {
        self.shared.conns.open()
    }

    /// System shared memory: (regions registered now, input bytes read from regions, output
    /// bytes written into regions) since start.
    pub fn shm_traffic(&self) -> (usize, u64, u64) {
        let (read, written) = self.shared.shm.traffic();
        (self.shared.shm.registered(), read, written)
    }

    /// CUDA shared memory: (regions registered now, input bytes read, output bytes written).
    pub fn cuda_shm_traffic(&self) -> (usize, u64, u64) {
        let (read, written) = self.shared.shm.cuda.traffic();
        (self.shared.shm.cuda.registered(), read, written)
    }

    /// System shared memory: names of the regions outputs were written into since start
    /// (sorted; the first 65,536).
    pub fn shm_output_regions(&self) -> Vec<String> {
        self.shared.shm.output_regions()
    }

    /// Arrival times (ns, [`inferperf_wire::clock::Clock`] wall-clock scale, taken when the request was
    /// fully read) of the last infer requests of `model`, oldest first; successful and
    /// refused requests alike, composing-model executions inside an ensemble excluded.
    /// Empty for an unknown model. Keeps the last [`ARRIVALS_KEPT`](crate::ARRIVALS_KEPT) per model.
    pub fn arrivals(&self, model: &str) -> Vec<u64> {
        match models::find_model(model) {
            Some(index) => self.shared.arrivals.arrivals(index),
            None => Vec::new(),
        }
    }

    /// The requests of sequence model `model` the sequence table checked (accepted and
    /// refused), in the order it checked them, with their id and flags; the last
    /// [`SEQ_ARRIVALS_KEPT`](crate::sequence::SEQ_ARRIVALS_KEPT) over all sequence models. Empty for an unknown model.
    pub fn sequence_arrivals(&self, model: &str) -> Vec<sequence::SeqArrival> {
        let Some(index) = models::find_model(model) else {
            return Vec::new();
        };
        let mut all = self.shared.sequences.arrivals();
        all.retain(|a| a.model == index);
        all
    }

    /// STARTs on an id that was still live (Triton ends the old sequence early).
    pub fn sequences_restarted(&self) -> u64 {
        self.shared.sequences.restarted()
    }

    /// For each of the last [`TOKEN_LOG_REQUESTS`](crate::TOKEN_LOG_REQUESTS) LLM generation requests (OpenAI, Triton
    /// generate or gRPC stream; oldest first, in the order they were parsed): when the server
    /// wrote each content chunk of its stream, or its whole answer (one entry) when not
    /// streamed; ns on the [`inferperf_wire::clock::Clock`] wall-clock scale, like
    /// [`ServerHandle::arrivals`].
    pub fn token_times(&self) -> Vec<Vec<u64>> {
        self.shared.openai.log.snapshot()
    }

    /// When each request of [`ServerHandle::token_times`] (same order) was read and parsed:
    /// ns on the same scale. A request is in its prefill from then until its first entry
    /// there.
    pub fn generation_starts(&self) -> Vec<u64> {
        let log = &self.shared.openai.log;
        log.began()
            .into_iter()
            .map(|at| self.shared.clock.at_ns(at))
            .collect()
    }

    /// Streams the client closed before their last event (OpenAI and generate streams).
    pub fn abandoned_streams(&self) -> u64 {
        self.shared.openai.watch.abandoned()
    }

    /// Streams generating now.
    pub fn generating_streams(&self) -> u64 {
        self.shared.openai.watch.active()
    }

    /// Generation request bodies received, oldest first (with `OpenAiConfig::keep_bodies`).
    pub fn generation_bodies(&self) -> Vec<Vec<u8>> {
        self.shared.openai.watch.bodies()
    }

    /// The images and audio clips of each chat request that carried any, oldest first.
    pub fn llm_media(&self) -> Vec<Vec<crate::llm::media::Media>> {
        self.shared.openai.media.requests()
    }

    /// The fake LLM's load as `/metrics` reports it: generation requests in flight and
    /// ended, prompt words and generated tokens admitted.
    pub fn llm_counts(&self) -> crate::metrics::LlmCounts {
        self.shared.openai.load.snapshot()
    }

    /// Like [`ServerHandle::token_times`], but when each piece was handed to the socket: a
    /// paced stream's chunks are logged as due at the loop turn that released them, and one
    /// turn may write many streams, so these are later under load.
    pub fn token_write_times(&self) -> Vec<Vec<u64>> {
        self.shared.openai.log.written()
    }

    /// Every trace-settings update received (HTTP or gRPC), oldest first.
    pub fn trace_updates(&self) -> Vec<TraceUpdate> {
        self.shared.trace.updates()
    }

    /// The last trace-settings update received, if any.
    pub fn last_trace_update(&self) -> Option<TraceUpdate> {
        self.shared.trace.updates().pop()
    }

    /// The effective trace settings of `model` (None: the global ones).
    pub fn trace_settings(&self, model: Option<&str>) -> TraceSettings {
        self.shared.trace.current(model)
    }

    /// Stops every server thread and waits for them; open connections are dropped.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        // The HTTPS front first: it relays into the HTTP loops stopped next.
        if let Some(mut runtime) = self.runtime.take() {
            runtime.shutdown();
        }
        self.shared.stop.store(true, Ordering::Release);
        for inbox in &self.inboxes {
            inbox.wake();
        }
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Maps the configured delays onto model indices, rejecting unknown models.
fn delays_by_model(delays: &[(String, Delay)]) -> Result<Vec<Option<Delay>>> {
    let mut by_model = vec![None; models::MODELS.len()];
    for (name, delay) in delays {
        let index = models::find_model(name).ok_or_else(|| {
            Error::usage(format!(
                "--delay: unknown model '{name}' (models: {})",
                models::model_names()
            ))
        })?;
        if let Delay::Uniform(low, high) = delay {
            if low > high {
                return Err(Error::usage(format!("--delay {name}: empty range")));
            }
        }
        by_model[index] = Some(*delay);
    }
    Ok(by_model)
}

/// Marks the `--serial` models, rejecting unknown ones.
fn serial_by_model(names: &[String]) -> Result<Vec<bool>> {
    let mut by_model = vec![false; models::MODELS.len()];
    for name in names {
        let index = models::find_model(name).ok_or_else(|| {
            Error::usage(format!(
                "--serial: unknown model '{name}' (models: {})",
                models::model_names()
            ))
        })?;
        by_model[index] = true;
    }
    Ok(by_model)
}

/// Limits of zero would refuse every request or connection.
fn check_limits(limits: &Limits) -> Result<()> {
    let zero = [
        (limits.max_request_bytes == 0, "--max-request-bytes"),
        (limits.max_connections == 0, "--max-connections"),
        (limits.read_timeout.is_zero(), "--read-timeout"),
        (limits.idle_timeout.is_zero(), "--idle-timeout"),
        (
            limits.request_read_timeout.is_zero(),
            "--request-read-timeout",
        ),
        (limits.max_streams == 0, "--max-concurrent-streams"),
    ];
    match zero.iter().find(|(is_zero, _)| *is_zero) {
        Some((_, flag)) => Err(Error::usage(format!("{flag} must be greater than 0"))),
        None => Ok(()),
    }
}

fn check_cores(cores: &[usize]) -> Result<()> {
    let available: Vec<usize> = core_affinity::get_core_ids()
        .unwrap_or_default()
        .iter()
        .map(|c| c.id)
        .collect();
    match cores.iter().find(|c| !available.contains(c)) {
        Some(core) => Err(Error::usage(format!(
            "--pin: core {core} is not available (available: {available:?})"
        ))),
        None => Ok(()),
    }
}

fn bind(addr: SocketAddr, what: &str) -> Result<std::net::TcpListener> {
    let listener = std::net::TcpListener::bind(addr)
        .map_err(|e| Error::generic(format!("cannot listen on {addr} ({what}): {e}")))?;
    widen_backlog(&listener)
        .map_err(|e| Error::generic(format!("cannot listen on {addr} ({what}): {e}")))?;
    listener.set_nonblocking(true)?;
    Ok(listener)
}

/// Listen backlog when `/proc/sys/net/core/somaxconn` cannot be read (the kernel caps the
/// backlog at that value anyway).
const FALLBACK_BACKLOG: i32 = 4096;

/// The listen backlog: the kernel's largest (`net.core.somaxconn`), so thousands of clients
/// connecting at once wait in the accept queue instead of having their handshakes dropped
/// and retried a second later.
pub fn listen_backlog() -> i32 {
    std::fs::read_to_string("/proc/sys/net/core/somaxconn")
        .ok()
        .and_then(|s| s.trim().parse::<i32>().ok())
        .filter(|&n| n > 0)
        .unwrap_or(FALLBACK_BACKLOG)
}

/// Listens again on a bound socket with [`listen_backlog`] (std listens with 128); Linux
/// takes a second `listen` as a new backlog.
pub fn widen_backlog(listener: &std::net::TcpListener) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: listen only changes the queue length of a socket this listener owns.
    let rc = unsafe { libc::listen(listener.as_raw_fd(), listen_backlog()) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The listeners of a configuration: (HTTP listener for the mio loops, HTTPS front and its
/// config, gRPC listener and its TLS config).
type Bound = (
    std::net::TcpListener,
    Option<(std::net::TcpListener, Arc<rustls::ServerConfig>)>,
    Option<(std::net::TcpListener, Option<Arc<rustls::ServerConfig>>)>,
);

/// Loads TLS files and binds every listener, so errors surface before any thread starts.
fn bind_all(cfg: &ServeConfig) -> Result<Bound> {
    let grpc_tls = match &cfg.tls {
        Some(files) => Some(tls::server_config(files, tls::ALPN_H2)?),
        None => None,
    };
    let (http, https) = match &cfg.tls {
        None => (bind(cfg.addr, "HTTP")?, None),
        Some(files) => {
            let config = tls::server_config(files, tls::ALPN_HTTP1)?;
            let public = bind(cfg.addr, "HTTPS")?;
            let internal = bind(SocketAddr::from(([127, 0, 0, 1], 0)), "internal HTTP")?;
            (internal, Some((public, config)))
        }
    };
    let grpc = match cfg.grpc_addr {
        Some(addr) => Some((bind(addr, "gRPC")?, grpc_tls)),
        None => None,
    };
    Ok((http, https, grpc))
}

/// Starts the server; returns once it is listening (connections queue until the loops run).
pub fn start(cfg: ServeConfig) -> Result<ServerHandle> {
    if cfg.threads == 0 {
        return Err(Error::usage("--threads must be at least 1"));
    }
    check_cores(&cfg.pin_cores)?;
    let delays = delays_by_model(&cfg.delays)?;
    let serial = serial_by_model(&cfg.serial)?;
    let (listener, https, grpc) = bind_all(&cfg)?;
    let http_addr = listener.local_addr()?;
    let addr = match &https {
        Some((public, _)) => public.local_addr()?,
        None => http_addr,
    };
    let grpc_addr = match &grpc {
        Some((l, _)) => Some(l.local_addr()?),
        None => None,
    };
    check_limits(&cfg.limits)?;
    let mut shared = Shared::new(delays, serial);
    shared.limits = cfg.limits;
    shared.metrics_style = cfg.metrics_style;
    shared.openai = OpenAiState::new(cfg.openai.clone())?;
    shared.repo =
        repository::Repository::new(cfg.control_mode, &cfg.load_models).map_err(Error::usage)?;
    let shared = Arc::new(shared);
    // If a later thread fails to start, dropping `handle` stops the ones already running.
    let mut handle = ServerHandle {
        addr,
        grpc_addr,
        shared,
        inboxes: Vec::new(),
        threads: Vec::new(),
        runtime: None,
    };
    let seed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1);
    for i in 0..cfg.threads {
        let thread_seed = seed ^ (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        start_http_thread(&mut handle, &listener, &cfg.pin_cores, i, thread_seed)?;
    }
    if grpc.is_some() || https.is_some() {
        let endpoints = grpc::Endpoints {
            grpc,
            https: https.map(|(public, config)| (public, config, http_addr)),
        };
        let core = cfg.pin_cores.last().copied();
        let runtime = grpc::spawn(Arc::clone(&handle.shared), endpoints, core, !seed)?;
        handle.runtime = Some(runtime);
    }
    Ok(handle)
}

/// Starts HTTP server thread `i` on a clone of `listener`.
fn start_http_thread(
    handle: &mut ServerHandle,
    listener: &std::net::TcpListener,
    pin_cores: &[usize],
    i: usize,
    seed: u64,
) -> Result<()> {
    let poll = Poll::new()?;
    let inbox = Arc::new(Inbox::new(Waker::new(poll.registry(), WAKER)?));
    let thread_listener = mio::net::TcpListener::from_std(listener.try_clone()?);
    let shared = Arc::clone(&handle.shared);
    let worker = Worker::new(poll, thread_listener, shared, Arc::clone(&inbox), seed)?;
    let core = (!pin_cores.is_empty()).then(|| pin_cores[i % pin_cores.len()]);
    let thread = std::thread::Builder::new()
        .name(format!("inferperf-serve-{i}"))
        .spawn(move || {
            if let Some(id) = core {
                if !core_affinity::set_for_current(core_affinity::CoreId { id }) {
                    eprintln!("inferperf serve: could not pin thread {i} to core {id}");
                }
            }
            if let Err(e) = worker.run() {
                eprintln!("inferperf serve: thread {i} stopped: {e}");
            }
        })
        .map_err(|e| Error::generic(format!("cannot start server thread: {e}")))?;
    handle.inboxes.push(inbox);
    handle.threads.push(thread);
    Ok(())
}

/// Model names, for the startup line.
pub fn model_names() -> String {
    models::model_names()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn start_rejects_bad_config() {
        let base = ServeConfig {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            ..Default::default()
        };
        let cases = [
            (
                ServeConfig {
                    threads: 0,
                    ..base.clone()
                },
                "--threads",
            ),
            (
                ServeConfig {
                    pin_cores: vec![100_000],
                    ..base.clone()
                },
                "--pin",
            ),
            (
                ServeConfig {
                    delays: vec![("nope".into(), Delay::Fixed(Duration::ZERO))],
                    ..base.clone()
                },
                "unknown model 'nope'",
            ),
            (
                ServeConfig {
                    limits: Limits {
                        max_connections: 0,
                        ..Limits::default()
                    },
                    ..base.clone()
                },
                "--max-connections must be greater than 0",
            ),
            (
                ServeConfig {
                    limits: Limits {
                        max_request_bytes: 0,
                        ..Limits::default()
                    },
                    ..base
                },
                "--max-request-bytes must be greater than 0",
            ),
        ];
        for (cfg, needle) in cases {
            let msg = start(cfg).err().map(|e| e.msg).unwrap_or_default();
            assert!(msg.contains(needle), "{msg}");
        }
    }

    #[test]
    fn default_config() {
        let cfg = ServeConfig::default();
        assert_eq!(cfg.addr.to_string(), "127.0.0.1:8000");
        assert_eq!(
            (cfg.threads, cfg.pin_cores.len(), cfg.delays.len()),
            (1, 0, 0)
        );
        assert_eq!((cfg.grpc_addr, cfg.tls), (None, None));
    }

    #[test]
    fn listeners_queue_as_many_handshakes_as_somaxconn() {
        // Nothing accepts: every connect that completes waits in the accept queue. With
        // std's backlog of 128 the 130th handshake would be dropped and the connect time out.
        let listener = bind(SocketAddr::from(([127, 0, 0, 1], 0)), "HTTP").unwrap();
        let addr = listener.local_addr().unwrap();
        let n = listen_backlog().min(600) as usize;
        let mut clients = Vec::with_capacity(n);
        for i in 0..n {
            match std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(3)) {
                Ok(c) => clients.push(c),
                Err(e) => panic!("connect {i} of {n} (backlog {}): {e}", listen_backlog()),
            }
        }
        assert_eq!(clients.len(), n);
        assert!(
            listen_backlog() > 128,
            "somaxconn here: {}",
            listen_backlog()
        );
    }
}
