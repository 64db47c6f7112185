//! A small blocking gRPC client for the setup calls the coordinator makes (server and model
//! metadata, config, statistics, readiness): one unary call at a time over cleartext HTTP/2
//! (prior knowledge, no TLS). Not for the measured load: it allocates freely and waits on the
//! socket. The HTTP/2 state machine is the load path's `Session`; this file only moves its
//! bytes over a blocking socket.
//!
//! A call that ends with a gRPC or stream error keeps the connection; a connection-level
//! failure (I/O, timeout, protocol error, GOAWAY) drops it and the next call reconnects.

use std::io::{ErrorKind, Read, Write};
use std::time::{Duration, Instant};

use super::message::{write_message, DEFAULT_MAX_MESSAGE_LEN};
use super::request::call_headers;
use super::session::{Session, SessionConfig};
use crate::error::{Error, Result};
use crate::transport::tcp::os_message;
use crate::transport::{connect_blocking, BlockingStream, TlsClient};

mod call;
#[cfg(test)]
use call::percent_decode;
use call::{Call, Failure};

/// Receive window advertised for each stream and for the connection (bytes): large, so a
/// metadata or statistics response rarely waits for a WINDOW_UPDATE.
const RECV_WINDOW: u32 = 16 << 20;
/// Flow-control window every HTTP/2 connection and stream starts with (bytes).
const INITIAL_WINDOW: u32 = 65_535;

/// One HTTP/2 connection to a gRPC server, reopened after a connection-level failure.
#[derive(Debug)]
pub struct GrpcClient {
    /// `host:port` as given: used in messages and as `:authority`.
    address: String,
    /// Connect, read and write timeout; also the bound on one whole call.
    timeout: Duration,
    /// Receive window advertised (bytes); `RECV_WINDOW` except in tests.
    recv_window: u32,
    /// TLS settings (`None`: cleartext HTTP/2, prior knowledge).
    tls: Option<TlsClient>,
    conn: Option<Connection>,
}

/// The socket and the HTTP/2 session that outlive one call. The session is boxed: it is
/// large, and `GrpcClient` sits in enums beside much smaller clients.
struct Connection {
    socket: BlockingStream,
    session: Box<Session>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("open_streams", &self.session.open_streams())
            .finish_non_exhaustive()
    }
}

impl GrpcClient {
    /// Connects to `addr` (`host:port`) and sends the HTTP/2 preface and the client's SETTINGS, so
    /// an unreachable server is reported at once. `timeout` bounds the connect and each call.
    pub fn connect(addr: &str, timeout: Duration) -> Result<Self> {
        Self::connect_with_window(addr, timeout, RECV_WINDOW, None)
    }

    /// `connect`, over TLS when `tls` is given (its ALPN must offer `h2`).
    pub fn connect_tls(addr: &str, timeout: Duration, tls: Option<&TlsClient>) -> Result<Self> {
        Self::connect_with_window(addr, timeout, RECV_WINDOW, tls.cloned())
    }

    fn connect_with_window(
        addr: &str,
        timeout: Duration,
        recv_window: u32,
        tls: Option<TlsClient>,
    ) -> Result<Self> {
        let mut client = GrpcClient {
            address: addr.trim().to_string(),
            timeout: timeout.max(Duration::from_millis(1)),
            recv_window: recv_window.max(INITIAL_WINDOW),
            tls,
            conn: None,
        };
        client.conn = Some(client.open()?);
        Ok(client)
    }

    /// The `host:port` this client talks to.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// Calls `method` (e.g. `ServerMetadata`, under `/inference.GRPCInferenceService/`) with
    /// the encoded protobuf `request`; returns the encoded response message.
    pub fn unary(&mut self, method: &str, request: &[u8]) -> Result<Vec<u8>> {
        let mut body = Vec::with_capacity(request.len() + 5);
        write_message(&mut body, request, false)
            .map_err(|e| Error::generic(format!("{method}: {e}")))?;
        let mut conn = match self.conn.take() {
            Some(conn) if conn.session.can_open() => conn,
            _ => self.open()?,
        };
        let block = call_headers(&self.address, method, &[], self.tls.is_some(), None);
        let deadline = Instant::now() + self.timeout;
        let result = conn
            .session
            .open(&block, &body, true)
            .map_err(|e| Failure::Connection(e.to_string()))
            .and_then(|stream| conn.drive(Call::new(stream), deadline, self.timeout));
        let reusable = conn.session.failure().is_none() && !conn.session.going_away();
        match result {
            Ok(message) => {
                if reusable {
                    self.conn = Some(conn);
                }
                Ok(message)
            }
            Err(Failure::Call(why)) => {
                if reusable {
                    self.conn = Some(conn);
                }
                Err(Error::generic(format!("{method}: {why}")))
            }
            Err(Failure::Connection(why)) => Err(Error::generic(format!(
                "{method} to gRPC server at {}: {why}",
                self.address
            ))),
        }
    }

    fn open(&self) -> Result<Connection> {
        let socket = connect_blocking(
            &self.address,
            self.timeout,
            "gRPC server",
            self.tls.as_ref(),
        )?;
        let session = Box::new(Session::new(SessionConfig {
            recv_window: self.recv_window,
            max_message: DEFAULT_MAX_MESSAGE_LEN,
        }));
        let mut conn = Connection { socket, session };
        conn.flush().map_err(|e| {
            let why = os_message(&e);
            Error::generic(format!(
                "cannot connect to gRPC server at {}: {why}",
                self.address
            ))
        })?;
        Ok(conn)
    }
}

impl Connection {
    /// Writes everything the session has queued.
    fn flush(&mut self) -> std::io::Result<()> {
        let out = self.session.output();
        if !out.is_empty() {
            self.socket.write_all(out)?;
            let n = out.len();
            self.session.written(n);
        }
        Ok(())
    }

    /// Moves bytes both ways until `call`'s stream ends, then returns its outcome.
    fn drive(
        &mut self,
        mut call: Call,
        deadline: Instant,
        timeout: Duration,
    ) -> std::result::Result<Vec<u8>, Failure> {
        loop {
            self.flush()
                .map_err(|e| Failure::Connection(os_message(&e)))?;
            if call.done() {
                return call.outcome(self.session.goaway_reason());
            }
            self.read_some(&mut call, deadline, timeout)?;
        }
    }

    /// Reads once (waiting no later than `deadline`) and feeds the bytes to the session.
    fn read_some(
        &mut self,
        call: &mut Call,
        deadline: Instant,
        timeout: Duration,
    ) -> std::result::Result<(), Failure> {
        let silent =
            || Failure::Connection(format!("no response within {:.1} s", timeout.as_secs_f64()));
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(silent());
            }
            self.socket
                .tcp()
                .set_read_timeout(Some(left))
                .map_err(|e| Failure::Connection(os_message(&e)))?;
            match self.socket.read(self.session.input_space()) {
                Ok(0) => {
                    self.session.eof(&mut |event| call.on_event(event));
                    return Ok(());
                }
                Ok(n) => {
                    return self
                        .session
                        .received(n, &mut |event| call.on_event(event))
                        .map_err(|e| Failure::Connection(e.to_string()));
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return Err(silent())
                }
                Err(e) => return Err(Failure::Connection(os_message(&e))),
            }
        }
    }
}

#[cfg(test)]
#[path = "blocking_tests.rs"]
mod tests;
