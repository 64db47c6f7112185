//! One gRPC connection, from its first byte: TLS when on, the HTTP/2 handshake, each call in
//! its own task, and the connection's place (see `places`) kept in step: idle while no call
//! runs. A connection silent until `--read-timeout` after accept (no TLS, preface or first
//! call by then) is dropped; one idle for `--idle-timeout` after its last call gets GOAWAY.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio::time::timeout_at;
use tokio_rustls::TlsAcceptor;

use super::service::Service;
use crate::places::Place;
use crate::state::Shared;
use crate::tls::HANDSHAKE_TIMEOUT;

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
/// How long an idle connection's GOAWAY may take to go out before the connection is dropped.
const GOAWAY_WAIT: Duration = Duration::from_secs(1);

/// Serves a connection accepted at `accepted` into `place` until it ends, or until its place
/// goes to a new connection.
pub async fn run(
    tcp: TcpStream,
    tls: Option<TlsAcceptor>,
    service: Arc<Service>,
    place: Place,
    accepted: Instant,
) {
    // Gives the connection's place back however the task ends (runtime stop included).
    let open = OpenConn(Arc::clone(&service.shared), Some(place));
    let Some(place) = open.1.as_ref() else {
        return;
    };
    tokio::select! {
        _ = place.until_evicted() => {}
        _ = serve(tcp, tls, service, place, accepted) => {}
    }
}

/// A gRPC connection's place in the server's connection count.
struct OpenConn(Arc<Shared>, Option<Place>);

impl Drop for OpenConn {
    fn drop(&mut self) {
        if let Some(place) = self.1.take() {
            self.0.conns.leave(place);
        }
    }
}

/// One gRPC connection accepted at `accepted`: its first byte, TLS when on, then HTTP/2, all
/// within `--read-timeout` of the accept. Nothing is allocated for the connection before its
/// first byte.
async fn serve(
    tcp: TcpStream,
    tls: Option<TlsAcceptor>,
    service: Arc<Service>,
    place: &Place,
    accepted: Instant,
) {
    let first_due = accepted + service.shared.limits.read_timeout;
    // `readable` may return before a byte is there; a peek waits for one (or the end).
    if timeout_at(first_due.into(), tcp.peek(&mut [0u8; 1]))
        .await
        .is_err()
    {
        return;
    }
    // Boxed: until the first byte the task holds only the socket, not the HTTP/2 and TLS
    // state (each boxed apart, so a cleartext connection does not carry the TLS state's room).
    match tls {
        None => Box::pin(serve_connection(tcp, service, place, first_due)).await,
        Some(acceptor) => {
            let due = first_due.min(accepted + HANDSHAKE_TIMEOUT);
            Box::pin(serve_tls(tcp, acceptor, service, place, due, first_due)).await
        }
    }
}

/// TLS by `handshake_due`, then HTTP/2 with its first call by `first_due`.
async fn serve_tls(
    tcp: TcpStream,
    acceptor: TlsAcceptor,
    service: Arc<Service>,
    place: &Place,
    handshake_due: Instant,
    first_due: Instant,
) {
    if let Ok(Ok(stream)) = timeout_at(handshake_due.into(), acceptor.accept(tcp)).await {
        serve_connection(stream, service, place, first_due).await;
    }
}

/// The calls of one connection running now, and a wake-up when the last one ends.
#[derive(Default)]
struct Calls {
    running: AtomicUsize,
    none_left: Notify,
}

/// One running call; its end is counted however its task ends.
struct Call(Arc<Calls>);

impl Call {
    fn start(calls: &Arc<Calls>) -> Call {
        calls.running.fetch_add(1, Ordering::AcqRel);
        Call(Arc::clone(calls))
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        if self.0.running.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.none_left.notify_one();
        }
    }
}

/// Serves one HTTP/2 connection: each call runs in its own task. The preface and the first
/// call must come by `first_due`; with no call open the connection is idle (its place may go
/// to a new connection) and is closed `--idle-timeout` after its last call ended. Besides the
/// limits set here, h2 itself answers each PING and SETTINGS before reading the next frame (a
/// flood queues nothing), resets streams a client opens past the concurrent limit, and ends a
/// connection with ENHANCE_YOUR_CALM that resets streams too fast or floods empty frames.
async fn serve_connection<T>(io: T, service: Arc<Service>, place: &Place, first_due: Instant)
where
    T: AsyncRead + AsyncWrite + Unpin,
{
    let limits = service.shared.limits;
    let handshake = h2::server::Builder::new()
        .initial_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .max_frame_size(MAX_FRAME)
        .max_concurrent_streams(limits.max_streams)
        .max_header_list_size(MAX_HEADER_LIST)
        .handshake::<T, bytes::Bytes>(io);
    let Ok(Ok(mut conn)) = timeout_at(first_due.into(), handshake).await else {
        return;
    };
    let calls = Arc::new(Calls::default());
    // When the connection became idle; None before its first call.
    let (mut idle, mut idle_since) = (true, None);
    // One timer and one wake-up registration for the connection's life, not one per call:
    // the timer is moved on when it fires early, and back only for a shorter idle time.
    let timer = tokio::time::sleep_until(first_due.into());
    let none_left = calls.none_left.notified();
    tokio::pin!(timer, none_left);
    loop {
        if !idle && calls.running.load(Ordering::Acquire) == 0 {
            let now = Instant::now();
            (idle, idle_since) = (true, Some(now));
            if !place.idle(now, true) {
                return;
            }
            let due = (now + limits.idle_timeout).into();
            if due < timer.deadline() {
                timer.as_mut().reset(due);
            }
        }
        tokio::select! {
            next = conn.accept() => {
                let Some(Ok((request, respond))) = next else {
                    return;
                };
                idle = false;
                if !place.busy() {
                    return;
                }
                let (service, call) = (Arc::clone(&service), Call::start(&calls));
                tokio::spawn(async move {
                    service.handle(request, respond).await;
                    drop(call);
                });
            }
            () = &mut none_left, if !idle => none_left.set(calls.none_left.notified()),
            () = &mut timer, if idle => {
                let due = idle_since.map_or(first_due, |at| at + limits.idle_timeout);
                if due <= Instant::now() {
                    return close_idle(conn).await;
                }
                timer.as_mut().reset(due.into());
            }
        }
    }
}

/// Closes an idle connection: GOAWAY naming the last call it took (so a client knows nothing
/// later was processed), then the end once that is written, or after [`GOAWAY_WAIT`].
async fn close_idle<T>(mut conn: h2::server::Connection<T, bytes::Bytes>)
where
    T: AsyncRead + AsyncWrite + Unpin,
{
    conn.abrupt_shutdown(h2::Reason::NO_ERROR);
    let _ = tokio::time::timeout(GOAWAY_WAIT, async {
        while let Some(Ok(_)) = conn.accept().await {}
    })
    .await;
}
