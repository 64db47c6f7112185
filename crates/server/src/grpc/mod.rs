//! The reference server's gRPC endpoint (Triton's `inference.GRPCInferenceService` over
//! HTTP/2 with `h2`) and, with TLS, the HTTPS front of the HTTP listener: both on one tokio
//! runtime on its own thread, stopped and joined by [`Runtime::shutdown`].
//!
//! Files: `wire` (status, compression, message framing on h2 streams), `convert` (infer
//! request/response messages), `unary` (metadata, config, statistics), `service` (routing,
//! inference, delays, the stream), `llm` (the fake LLM as a decoupled model on the stream),
//! `sleep` (precise delays).

mod convert;
mod llm;
mod service;
mod sleep;
pub mod tfserving;
mod unary;
mod wire;

#[cfg(test)]
pub mod test_client;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_diff;
#[cfg(test)]
mod tests_hostile;
#[cfg(test)]
mod tests_llm;
#[cfg(test)]
mod tests_load_config;
#[cfg(test)]
mod tests_models;
#[cfg(test)]
mod tests_stream;

use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio_rustls::TlsAcceptor;

use super::state::Shared;
use super::tls::{self, HANDSHAKE_TIMEOUT};
use inferperf_client::error::{Error, Result};
use service::Service;

/// Per-stream and per-connection receive windows, bytes: large enough that a request of a few
/// MB arrives without waiting for window updates.
const STREAM_WINDOW: u32 = 4 << 20;
const CONNECTION_WINDOW: u32 = 16 << 20;
/// Largest DATA frame a client may send (SETTINGS_MAX_FRAME_SIZE): a 1 MiB tensor arrives in
/// one frame instead of 64 of the 16 KiB default, each of which costs the connection task a
/// wake-up and a read.
const MAX_FRAME: u32 = 1 << 20;
/// Largest header block a client may send (SETTINGS_MAX_HEADER_LIST_SIZE, decoded bytes); h2
/// refuses a longer one and bounds the CONTINUATION frames that carry it.
const MAX_HEADER_LIST: u32 = 64 << 10;

/// What the runtime serves; listeners are bound (and their addresses known) by the caller.
pub struct Endpoints {
    /// The gRPC listener, and its TLS config (ALPN `h2`) when TLS is on.
    pub grpc: Option<(std::net::TcpListener, Option<Arc<rustls::ServerConfig>>)>,
    /// The public HTTPS listener, its TLS config (ALPN `http/1.1`), and the internal
    /// cleartext HTTP address it forwards to.
    pub https: Option<(std::net::TcpListener, Arc<rustls::ServerConfig>, SocketAddr)>,
}

/// The running runtime thread.
pub struct Runtime {
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Runtime {
    /// Stops the runtime (dropping every connection and call in flight) and joins its thread.
    pub fn shutdown(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Starts the runtime thread (pinned to `core` if given) serving `endpoints`.
pub fn spawn(
    shared: Arc<Shared>,
    endpoints: Endpoints,
    core: Option<usize>,
    seed: u64,
) -> Result<Runtime> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::generic(format!("cannot start the gRPC runtime: {e}")))?;
    let (stop, stopped) = oneshot::channel::<()>();
    let service = Arc::new(Service::new(shared, seed));
    let thread = std::thread::Builder::new()
        .name("inferperf-serve-grpc".into())
        .spawn(move || {
            if let Some(id) = core {
                if !core_affinity::set_for_current(core_affinity::CoreId { id }) {
                    eprintln!("inferperf serve: could not pin the gRPC thread to core {id}");
                }
            }
            runtime.block_on(async move {
                start_listeners(service, endpoints);
                // Resolves when the sender is dropped (stop) as well as when it sends.
                let _ = stopped.await;
            });
            // Dropping the runtime here cancels every accept loop, connection and call.
            drop(runtime);
        })
        .map_err(|e| Error::generic(format!("cannot start the gRPC thread: {e}")))?;
    Ok(Runtime {
        stop: Some(stop),
        thread: Some(thread),
    })
}

/// Spawns the accept loops (inside the runtime, which tokio listeners need).
fn start_listeners(service: Arc<Service>, endpoints: Endpoints) {
    if let Some((listener, config)) = endpoints.grpc {
        match TcpListener::from_std(listener) {
            Ok(listener) => {
                let acceptor = config.map(TlsAcceptor::from);
                tokio::spawn(accept_grpc(listener, acceptor, service));
            }
            Err(e) => eprintln!("inferperf serve: gRPC listener: {e}"),
        }
    }
    if let Some((listener, config, backend)) = endpoints.https {
        match TcpListener::from_std(listener) {
            Ok(listener) => {
                tokio::spawn(tls::front_http(
                    listener,
                    TlsAcceptor::from(config),
                    backend,
                ));
            }
            Err(e) => eprintln!("inferperf serve: HTTPS listener: {e}"),
        }
    }
}

/// Accepts gRPC connections until the runtime stops.
async fn accept_grpc(listener: TcpListener, tls: Option<TlsAcceptor>, service: Arc<Service>) {
    loop {
        let tcp = match listener.accept().await {
            Ok((tcp, _)) => tcp,
            // EMFILE and friends: back off briefly instead of spinning.
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let shared = &service.shared;
        if !shared.conns.try_open(shared.limits.max_connections) {
            drop(tcp); // over --max-connections
            continue;
        }
        let _ = tcp.set_nodelay(true);
        let service = Arc::clone(&service);
        let tls = tls.clone();
        tokio::spawn(async move {
            // Gives the connection's place back however the task ends (runtime stop included).
            let _open = OpenConn(Arc::clone(&service.shared));
            match tls {
                None => serve_connection(tcp, service).await,
                Some(acceptor) => {
                    let handshake = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp));
                    if let Ok(Ok(stream)) = handshake.await {
                        serve_connection(stream, service).await;
                    }
                }
            }
        });
    }
}

/// A gRPC connection's place in the server's connection count.
struct OpenConn(Arc<super::state::Shared>);

impl Drop for OpenConn {
    fn drop(&mut self) {
        self.0.conns.close();
    }
}

/// Serves one HTTP/2 connection: each call runs in its own task. Besides the limits set
/// here, h2 itself answers each PING and SETTINGS before reading the next frame (a flood
/// queues nothing), resets streams a client opens past the concurrent limit, and ends a
/// connection with ENHANCE_YOUR_CALM that resets streams too fast or floods empty frames.
async fn serve_connection<T>(io: T, service: Arc<Service>)
where
    T: AsyncRead + AsyncWrite + Unpin,
{
    let handshake = h2::server::Builder::new()
        .initial_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .max_frame_size(MAX_FRAME)
        .max_concurrent_streams(service.shared.limits.max_streams)
        .max_header_list_size(MAX_HEADER_LIST)
        .handshake::<T, bytes::Bytes>(io);
    let Ok(mut conn) = handshake.await else {
        return;
    };
    while let Some(Ok((request, respond))) = conn.accept().await {
        let service = Arc::clone(&service);
        tokio::spawn(service.handle(request, respond));
    }
}
