//! `inferperf serve --fault MODE`: a deliberately faulty KServe v2 server to point clients at.
//!
//! It serves one model, `identity` (INPUT0 FP32 [16] -> OUTPUT0 FP32 [16], no batching), over
//! HTTP/1.1 and over gRPC (HTTP/2, cleartext). Health, server metadata, model metadata, config
//! and statistics are answered correctly (unless the mode is about them); infer requests get
//! the fault. Plain blocking sockets: one accept thread per port and one thread per connection,
//! at most [`MAX_CONNECTIONS`] at a time. Every wait and every flood ends when the server's
//! lifetime (`--fault-ttl`) is over or it is stopped, so nothing runs forever.
//!
//! - `model`: what the server says about its model (JSON and protobuf), per mode;
//! - `http`: the HTTP/1.1 front and its faults;
//! - `grpc`: the HTTP/2 front (frames and HPACK from the client crate) and its faults;
//! - `io`: bounded reads, writes and holds shared by both fronts;
//! - `openai`: the OpenAI chat and completions endpoints (`inferperf profile`), healthy in
//!   `none` and answered with an error inside a 200 in the `sse-*` modes.
//! - `odd`: replies that are almost right (a request refused early, odd numbers and chunks).

mod grpc;
#[cfg(test)]
mod grpc_tests;
mod http;
mod io;
mod model;
mod odd;
#[cfg(test)]
mod odd_tests;
pub mod openai;
#[cfg(test)]
mod openai_tests;
#[cfg(test)]
#[path = "fault_tests.rs"]
mod tests;

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use inferperf_wire::error::{Error, Result};

/// Connections served at once; later ones are closed at once until one ends.
pub const MAX_CONNECTIONS: usize = 128;
/// Default lifetime of a fault server (`--fault-ttl`).
pub const DEFAULT_TTL: Duration = Duration::from_secs(60);
/// How often blocked reads, writes and accepts look at the stop flag and the deadline.
const TICK: Duration = Duration::from_millis(50);
/// In `every-nth-fails`, every this-many-th infer request fails.
pub const NTH: u64 = 3;
/// In `drip`, the time between two bytes of a reply.
pub const DRIP_EVERY: Duration = Duration::from_millis(100);

/// What the server does wrong. The names are the `--fault` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum FaultMode {
    /// No fault: a healthy server (the control case).
    None,
    /// The first infer request closes its connection and the listeners: later connects are
    /// refused.
    Refuse,
    /// Half of the response, then a TCP reset (SO_LINGER 0 close).
    Reset,
    /// Half of the response body, then a clean close (FIN).
    CloseMidBody,
    /// Reads the infer request and never answers it (the connection stays open).
    StallHead,
    /// The response head and half the body, then nothing.
    StallBody,
    /// Accepts connections and never sends a byte, not even for health or metadata.
    StallForever,
    /// A correct infer reply, one byte every 100 ms: a reply of a few hundred bytes takes
    /// half a minute, and its connection is never idle for long.
    Drip,
    /// HTTP: Content-Length 8 bytes short of the body sent. gRPC: a message length prefix 100
    /// bytes longer than the message.
    WrongContentLength,
    /// Bytes that are neither HTTP/1.1 nor HTTP/2 in place of the response.
    Garbage,
    /// Every infer request fails: HTTP 500 / grpc-status 13 INTERNAL (OpenAI chat and
    /// completions too: a 500 with an OpenAI error object).
    #[value(name = "status-500")]
    Status500,
    /// Every third infer request fails (HTTP 500 / grpc-status 13; OpenAI chat and completions
    /// too).
    EveryNthFails,
    /// Every third infer request gets half its response, then a TCP reset of its connection
    /// (as an overloaded server sheds load); the others are answered.
    EveryNthResets,
    /// HTTP: a 200 whose body is not JSON. gRPC: as not-protobuf.
    NotJson,
    /// gRPC: a reply message that does not decode as ModelInferResponse. HTTP: as not-json.
    NotProtobuf,
    /// HTTP: `100 Continue` interim responses, forever. gRPC: no fault.
    InterimFlood,
    /// HTTP: a chunked body of one-byte chunks, each with 1 KiB of chunk extensions, forever.
    /// gRPC: no fault.
    ChunkExtensionFlood,
    /// HTTP: a response head whose header lines never end. gRPC: HEADERS followed by
    /// CONTINUATION frames, never END_HEADERS.
    EndlessHeader,
    /// HTTP: Content-Length 10^15, 64 KiB of it, then nothing. gRPC: a message length prefix of
    /// 4 GiB - 1.
    HugeContentLength,
    /// gRPC: SETTINGS frames, without end, after each infer request. HTTP: no fault.
    SettingsFlood,
    /// gRPC: PING frames, without end, after each infer request. HTTP: no fault.
    PingFlood,
    /// A 2 MiB response header (gRPC: one HEADERS + CONTINUATION block over 1 MiB), then the
    /// response.
    HugeHeaders,
    /// Model metadata and config give INPUT0 the dims [4294967296,4294967296,4294967296].
    DimsHuge,
    /// Model metadata and config give INPUT0 the dims [65536,65536] (16 GiB of FP32).
    DimsBig,
    /// `identity` is an ensemble whose composing model is named `../../x`.
    NameDotdot,
    /// `identity` is an ensemble whose composing model is named `/abs/x`.
    NameAbs,
    /// Every infer request fails with error text holding ESC sequences, BEL and CR.
    EscapeText,
    /// OpenAI chat and completions only: a stream of two text chunks, an `event: error`
    /// packet holding an OpenAI error object, then `[DONE]`; not streamed, a 200 whose body
    /// is that object.
    SseErrorEvent,
    /// OpenAI chat and completions only: two text chunks, then `data: {"error":{..}}` (an
    /// OpenAI error object), then `[DONE]`; not streamed, a 200 whose body is that object.
    SseOpenaiError,
    /// OpenAI chat and completions only: two text chunks, then vLLM's
    /// `data: {"object":"error",..}`, then `[DONE]`; not streamed, a 200 with that object.
    SseVllmError,
    /// OpenAI chat and completions only: two text chunks, then `data: {not json`, then
    /// `[DONE]`; not streamed, a 200 whose body is `{not json`.
    SseNotJson,
    /// Model metadata and config give INPUT0 the dims [4194304] (16 MiB of FP32). HTTP: an
    /// infer request over 1 MiB is answered 413 once its head is read, and the connection
    /// closes without reading the body (a reset). gRPC: grpc-status 8 RESOURCE_EXHAUSTED once
    /// 1 MiB of the message has arrived.
    PayloadTooLarge,
    /// gRPC: the reply's content-type is `text/html`. HTTP: no fault.
    WrongContentType,
    /// gRPC: the reply message has its compressed flag set but the reply has no
    /// grpc-encoding. HTTP: no fault.
    CompressedNoEncoding,
    /// HTTP: OUTPUT0 comes as JSON data whose first value has 5000 digits. gRPC: no fault.
    HugeNumber,
    /// HTTP: the healthy reply, its JSON padded to 400 KB with whitespace, sent chunked in
    /// one-byte chunks (valid, only slow to parse). gRPC: no fault.
    TinyChunks,
}

impl FaultMode {
    /// The `--fault` name of the mode.
    pub fn name(self) -> String {
        use clap::ValueEnum;
        self.to_possible_value()
            .map(|v| v.get_name().to_string())
            .unwrap_or_default()
    }

    /// Every mode, in declaration order.
    pub fn all() -> &'static [FaultMode] {
        use clap::ValueEnum;
        FaultMode::value_variants()
    }

    /// Whether the mode changes what the HTTP/1.1 port does for KServe clients.
    pub fn applies_to_http(self) -> bool {
        !matches!(
            self,
            FaultMode::None
                | FaultMode::SettingsFlood
                | FaultMode::PingFlood
                | FaultMode::WrongContentType
                | FaultMode::CompressedNoEncoding
        ) && !self.applies_to_openai()
    }

    /// Whether the mode changes what the gRPC port does.
    pub fn applies_to_grpc(self) -> bool {
        !matches!(
            self,
            FaultMode::None
                | FaultMode::InterimFlood
                | FaultMode::ChunkExtensionFlood
                | FaultMode::HugeNumber
                | FaultMode::TinyChunks
        ) && !self.applies_to_openai()
    }

    /// Whether the mode is about the OpenAI endpoints (`inferperf profile`); it leaves KServe
    /// requests healthy.
    pub fn applies_to_openai(self) -> bool {
        matches!(
            self,
            FaultMode::SseErrorEvent
                | FaultMode::SseOpenaiError
                | FaultMode::SseVllmError
                | FaultMode::SseNotJson
        )
    }
}

/// How to run a fault server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultConfig {
    pub mode: FaultMode,
    /// HTTP/1.1 address; port 0 picks a free one.
    pub http: SocketAddr,
    /// gRPC address; port 0 picks a free one; None = no gRPC.
    pub grpc: Option<SocketAddr>,
    /// The server's lifetime: it stops by itself once this has passed.
    pub ttl: Duration,
}

/// What every thread of one fault server shares.
pub(crate) struct Shared {
    mode: FaultMode,
    deadline: Instant,
    stop: AtomicBool,
    /// Set by `refuse`: the listeners close.
    refused: AtomicBool,
    /// Infer requests received so far (both ports).
    infers: AtomicU64,
    /// Connections being served now.
    live: AtomicUsize,
}

impl Shared {
    /// Whether the server is stopping: stopped, or past its lifetime.
    pub(crate) fn done(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || Instant::now() >= self.deadline
    }

    /// Infer requests received so far.
    pub(crate) fn infers(&self) -> u64 {
        self.infers.load(Ordering::Relaxed)
    }

    /// Counts an infer request; returns its number, from 1.
    pub(crate) fn next_infer(&self) -> u64 {
        self.infers.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Whether infer request number `n` fails in the current mode.
    pub(crate) fn fails(&self, n: u64) -> bool {
        match self.mode {
            FaultMode::Status500 | FaultMode::EscapeText => true,
            FaultMode::EveryNthFails => n % NTH == 0,
            _ => false,
        }
    }

    /// Whether infer request number `n` is cut short by a reset in the current mode.
    pub(crate) fn resets(&self, n: u64) -> bool {
        self.mode == FaultMode::Reset || (self.mode == FaultMode::EveryNthResets && n % NTH == 0)
    }
}

/// A running fault server; stopping (or dropping) it ends every thread.
pub struct FaultHandle {
    /// The HTTP/1.1 address listened on.
    pub addr: SocketAddr,
    /// The gRPC address, when asked for.
    pub grpc_addr: Option<SocketAddr>,
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

impl FaultHandle {
    /// Whether the server's lifetime has passed (it serves nothing more).
    pub fn expired(&self) -> bool {
        self.shared.done()
    }

    /// Infer requests received so far.
    pub fn infers(&self) -> u64 {
        self.shared.infers()
    }

    /// The mode served.
    pub fn mode(&self) -> FaultMode {
        self.shared.mode
    }

    /// Stops the accept threads; connection threads end within [`TICK`]-ish.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }

    /// The line `serve` prints: where it listens, the mode and when it stops.
    pub fn startup_line(&self) -> String {
        let grpc = self
            .grpc_addr
            .map(|a| format!(" and gRPC {a}"))
            .unwrap_or_default();
        let ttl = self
            .shared
            .deadline
            .saturating_duration_since(Instant::now());
        format!(
            "inferperf serve: fault {} on http://{}{grpc} (model: identity; stops after {} s)",
            self.shared.mode.name(),
            self.addr,
            ttl.as_secs_f64().round()
        )
    }
}

impl Drop for FaultHandle {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Binds both ports and starts the accept threads.
pub fn start(cfg: &FaultConfig) -> Result<FaultHandle> {
    let bind = |addr: SocketAddr| -> Result<TcpListener> {
        let listener = TcpListener::bind(addr)
            .map_err(|e| Error::generic(format!("cannot listen on {addr}: {e}")))?;
        crate::serve::widen_backlog(&listener)
            .map_err(|e| Error::generic(format!("cannot listen on {addr}: {e}")))?;
        Ok(listener)
    };
    let http = bind(cfg.http)?;
    let grpc = cfg.grpc.map(bind).transpose()?;
    let deadline = Instant::now()
        .checked_add(cfg.ttl)
        .ok_or_else(|| Error::usage("--fault-ttl: too large"))?;
    let shared = Arc::new(Shared {
        mode: cfg.mode,
        deadline,
        stop: AtomicBool::new(false),
        refused: AtomicBool::new(false),
        infers: AtomicU64::new(0),
        live: AtomicUsize::new(0),
    });
    let addr = http.local_addr()?;
    let grpc_addr = grpc.as_ref().map(|l| l.local_addr()).transpose()?;
    let mut threads = vec![accept_thread(http, &shared, http::serve_conn)?];
    if let Some(l) = grpc {
        threads.push(accept_thread(l, &shared, grpc::serve_conn)?);
    }
    Ok(FaultHandle {
        addr,
        grpc_addr,
        shared,
        threads,
    })
}

/// Runs a fault server until `stop` is set or its lifetime passes; prints its startup line.
pub fn run(cfg: &FaultConfig, stop: &AtomicBool) -> Result<()> {
    use std::io::Write;
    let handle = start(cfg)?;
    println!("{}", handle.startup_line());
    let _ = std::io::stdout().flush();
    while !stop.load(Ordering::SeqCst) && !handle.expired() {
        std::thread::sleep(TICK);
    }
    handle.stop();
    Ok(())
}

type ConnFn = fn(TcpStream, &Shared);

/// Accepts connections on `listener` until the server stops (or `refuse` closes it), giving
/// each its own thread, at most [`MAX_CONNECTIONS`] at once.
fn accept_thread(
    listener: TcpListener,
    shared: &Arc<Shared>,
    serve: ConnFn,
) -> Result<JoinHandle<()>> {
    listener.set_nonblocking(true)?;
    let shared = Arc::clone(shared);
    let join = std::thread::Builder::new()
        .name("fault-accept".into())
        .spawn(move || {
            while !shared.done() && !shared.refused.load(Ordering::Relaxed) {
                if !io::wait_readable(listener.as_raw_fd(), TICK) {
                    continue;
                }
                let Ok((stream, _)) = listener.accept() else {
                    continue;
                };
                if shared.live.load(Ordering::Relaxed) >= MAX_CONNECTIONS {
                    continue;
                }
                let _ = stream.set_nonblocking(false);
                let _ = stream.set_nodelay(true);
                shared.live.fetch_add(1, Ordering::Relaxed);
                let conn_shared = Arc::clone(&shared);
                let spawned =
                    std::thread::Builder::new()
                        .name("fault-conn".into())
                        .spawn(move || {
                            serve(stream, &conn_shared);
                            conn_shared.live.fetch_sub(1, Ordering::Relaxed);
                        });
                if spawned.is_err() {
                    shared.live.fetch_sub(1, Ordering::Relaxed);
                }
            }
            // Dropping the listener here closes the port: later connects are refused.
        })?;
    Ok(join)
}
