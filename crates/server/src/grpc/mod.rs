//! The reference server's gRPC endpoint (Triton's `inference.GRPCInferenceService` over
//! HTTP/2 with `h2`) and, with TLS, the HTTPS front of the HTTP listener: both on one tokio
//! runtime on its own thread, stopped and joined by [`Runtime::shutdown`].
//!
//! Files: `connection` (one connection: first byte, TLS, HTTP/2, idle time, its place among
//! the open ones), `wire` (status, compression, message framing on h2 streams), `convert`
//! (infer request/response messages), `unary` (metadata, config, statistics), `service`
//! (routing, inference, delays, the stream), `llm` (the fake LLM as a decoupled model on the
//! stream), `sleep` (precise delays).

mod connection;
mod convert;
mod llm;
mod service;
mod sleep;
pub mod tfserving;
mod unary;
mod wire;

#[cfg(test)]
mod diff_tests;
#[cfg(test)]
mod hostile_tests;
#[cfg(test)]
mod idle_tests;
#[cfg(test)]
mod llm_tests;
#[cfg(test)]
mod load_config_tests;
#[cfg(test)]
mod models_tests;
#[cfg(test)]
mod stream_tests;
#[cfg(test)]
pub mod test_client;
#[cfg(test)]
#[path = "grpc_tests.rs"]
mod tests;
#[cfg(test)]
mod tls_tests;

use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tokio::net::TcpListener;
use tokio::sync::{oneshot, Notify};
use tokio_rustls::TlsAcceptor;

use super::places::Wake;
use super::state::Shared;
use super::tls;
use inferperf_wire::error::{Error, Result};
use service::Service;

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
    let first_byte = service.shared.limits.read_timeout;
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
                let acceptor = TlsAcceptor::from(config);
                tokio::spawn(tls::front_http(listener, acceptor, backend, first_byte));
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
        let accepted = Instant::now();
        let wake = Wake::Task(Notify::new());
        let Some(place) = shared
            .conns
            .enter(shared.limits.max_connections, accepted, wake)
        else {
            drop(tcp); // over --max-connections, every open connection busy
            continue;
        };
        let _ = tcp.set_nodelay(true);
        let service = Arc::clone(&service);
        let tls = tls.clone();
        tokio::spawn(connection::run(tcp, tls, service, place, accepted));
    }
}
