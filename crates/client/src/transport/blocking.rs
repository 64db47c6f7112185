//! Blocking connections for setup calls (metadata, readiness, statistics), plain or TLS.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use rustls::{ClientConnection, StreamOwned};

use super::session::{drive_handshake, tls_error};
use super::tcp;
use super::tls::TlsClient;
use crate::error::{Error, Result};

/// A blocking connection with read and write timeouts.
#[derive(Debug)]
pub enum BlockingStream {
    Plain(TcpStream),
    Tls(Box<StreamOwned<ClientConnection, TcpStream>>),
}

impl BlockingStream {
    /// The protocol the server chose by ALPN (`b"h2"`); None for plain TCP.
    pub fn alpn_protocol(&self) -> Option<&[u8]> {
        match self {
            BlockingStream::Plain(_) => None,
            BlockingStream::Tls(s) => s.conn.alpn_protocol(),
        }
    }

    pub fn is_tls(&self) -> bool {
        matches!(self, BlockingStream::Tls(_))
    }

    /// The TCP socket underneath (for timeouts).
    pub fn tcp(&self) -> &TcpStream {
        match self {
            BlockingStream::Plain(s) => s,
            BlockingStream::Tls(s) => &s.sock,
        }
    }
}

impl Read for BlockingStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            BlockingStream::Plain(s) => s.read(buf),
            // A TCP close without close_notify is EOF here: HTTP/1 and HTTP/2 frame their
            // own messages, so the protocol layer tells a truncated reply from a finished one.
            BlockingStream::Tls(s) => match s.read(buf) {
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(0),
                other => other.map_err(clarify),
            },
        }
    }
}

impl Write for BlockingStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            BlockingStream::Plain(s) => s.write(buf),
            BlockingStream::Tls(s) => s.write(buf).map_err(clarify),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            BlockingStream::Plain(s) => s.flush(),
            BlockingStream::Tls(s) => s.flush().map_err(clarify),
        }
    }
}

/// rustls's `Stream` reports a TLS error as the bare rustls error; say it is TLS.
fn clarify(e: io::Error) -> io::Error {
    let tls = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        .map(|tls| tls_error(tls, false));
    tls.unwrap_or(e)
}

/// Connects to `address` (`host:port`) like [`tcp::connect_blocking`]
/// (timeout on connect and on every read and write, Nagle off) and, with `tls`, completes
/// the TLS handshake so a certificate problem is reported here. Errors read
/// "cannot connect to {what} at {address}: {reason}".
pub fn connect_blocking(
    address: &str,
    timeout: Duration,
    what: &str,
    tls: Option<&TlsClient>,
) -> Result<BlockingStream> {
    let mut socket = tcp::connect_blocking(address, timeout, what)?;
    let Some(client) = tls else {
        return Ok(BlockingStream::Plain(socket));
    };
    let cannot =
        |why: String| Error::generic(format!("cannot connect to {what} at {address}: {why}"));
    let mut session = client.session().map_err(|e| cannot(e.to_string()))?;
    let mut answered = false;
    let no_answer = || {
        cannot(format!(
            "TLS handshake: no answer within {:.1} s",
            timeout.as_secs_f64()
        ))
    };
    match drive_handshake(&mut session, &mut socket, &mut answered) {
        // The last flight may sit queued if the kernel buffer was full; blocking writes
        // (StreamOwned) send it with the first request.
        Ok(true) => {}
        // A blocking socket reports its read timeout as WouldBlock (EAGAIN) on Linux.
        Ok(false) => return Err(no_answer()),
        Err(e) if e.kind() == io::ErrorKind::TimedOut => return Err(no_answer()),
        Err(e) => return Err(cannot(tcp::os_message(&e))),
    }
    Ok(BlockingStream::Tls(Box::new(StreamOwned::new(
        session, socket,
    ))))
}
