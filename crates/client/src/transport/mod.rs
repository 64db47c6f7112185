//! Connections to the server: plain TCP or TLS over it, chosen once per connection, with the
//! non-blocking I/O idiom in one place.
//!
//! Readiness rule for edge-triggered epoll (what a caller of [`Transport`] must do):
//! - keep READABLE registered;
//! - after any call, if [`Transport::wants_write`] is true, make sure WRITABLE is registered,
//!   and on a writable edge call [`Transport::flush`] (then resume any `write` that returned
//!   WouldBlock);
//! - a `read` that returns fewer bytes than asked has seen the socket empty (or EOF), so the
//!   next arrival raises a new edge; a full read must be followed by another read.
//!
//! A plain connection costs exactly a socket read or write per call; `flush` and
//! `wants_write` are free for it.

pub mod blocking;
pub mod fd_limit;
pub mod packet_stamps;
pub mod rx_stamp;
mod session;
mod stream;
pub mod tcp;
pub mod tls;
pub mod tx_stamp;

use std::io::{self, Read, Write};
use std::net::SocketAddr;

use mio::net::TcpStream;

use crate::clock::Clock;

pub use blocking::{connect_blocking, BlockingStream};
pub use session::NOT_TLS;
pub use stream::TlsStream;
pub use tls::{PemOrDer, TlsClient, TlsOptions};

/// A non-blocking connection: plain TCP or TLS over it, chosen once at connect time.
pub enum Transport {
    Plain(TcpStream),
    Tls(Box<TlsStream>),
}

impl Transport {
    /// Starts a non-blocking connect to `addr`; with `tls`, a TLS session to run over it.
    /// Register [`Transport::socket`] for READABLE | WRITABLE, wait for the connect, then call
    /// [`Transport::drive_handshake`] until it returns true.
    pub fn connect(addr: SocketAddr, tls: Option<&TlsClient>) -> io::Result<Transport> {
        let socket = TcpStream::connect(addr)?;
        Ok(match tls {
            None => Transport::Plain(socket),
            Some(client) => Transport::Tls(Box::new(TlsStream::new(socket, client.session()?))),
        })
    }

    /// The socket, to (re)register with mio.
    pub fn socket(&mut self) -> &mut TcpStream {
        match self {
            Transport::Plain(s) => s,
            Transport::Tls(t) => t.socket(),
        }
    }

    /// The socket, for queries (`take_error`, `peer_addr`, `set_nodelay`).
    pub fn socket_ref(&self) -> &TcpStream {
        match self {
            Transport::Plain(s) => s,
            Transport::Tls(t) => t.socket_ref(),
        }
    }

    pub fn is_tls(&self) -> bool {
        matches!(self, Transport::Tls(_))
    }

    /// The protocol the server chose by ALPN (`b"h2"`), once the handshake is done.
    pub fn alpn_protocol(&self) -> Option<&[u8]> {
        match self {
            Transport::Plain(_) => None,
            Transport::Tls(t) => t.session().alpn_protocol(),
        }
    }

    /// Plaintext in: like `Read::read` on a non-blocking socket (WouldBlock when nothing is
    /// ready, Ok(0) at EOF). Drives the handshake as needed.
    #[inline]
    pub fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Transport::Plain(s) => s.read(buf),
            Transport::Tls(t) => t.read(buf),
        }
    }

    /// Like [`Transport::read`], plus the kernel's arrival stamp of the data (realtime ns,
    /// see [`rx_stamp`]) when [`Transport::enable_rx_stamps`] succeeded. With TLS it is the
    /// stamp of the socket read that brought the records the plaintext came from.
    #[inline]
    pub fn read_stamped(&mut self, buf: &mut [u8]) -> io::Result<(usize, Option<u64>)> {
        match self {
            Transport::Plain(s) => rx_stamp::recv(s, buf),
            Transport::Tls(t) => t.read_stamped(buf),
        }
    }

    /// Asks the kernel to stamp arriving data; false when the socket refused the option.
    pub fn enable_rx_stamps(&mut self) -> bool {
        match self {
            Transport::Plain(s) => rx_stamp::enable(s).is_ok(),
            Transport::Tls(t) => t.enable_rx_stamps(),
        }
    }

    /// Asks the kernel to stamp the data of each write as it leaves (see [`tx_stamp`]);
    /// false when the socket refused the option, and always over TLS, whose writes are timed
    /// by the clock read before the push of the encrypted records.
    pub fn enable_tx_stamps(&mut self) -> bool {
        match self {
            Transport::Plain(s) => tx_stamp::enable(std::os::fd::AsRawFd::as_raw_fd(s)).is_ok(),
            Transport::Tls(_) => false,
        }
    }

    /// The kernel's send stamp of the last write (realtime ns), read from the error queue
    /// (one system call); `None` without one.
    pub fn take_tx_stamp(&self) -> Option<u64> {
        match self {
            Transport::Plain(s) => tx_stamp::take(std::os::fd::AsRawFd::as_raw_fd(s)),
            Transport::Tls(_) => None,
        }
    }

    /// Plaintext out: takes what it can, WouldBlock when nothing; with TLS the encrypted
    /// bytes the socket did not take stay queued and `wants_write()` is true.
    #[inline]
    pub fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Transport::Plain(s) => s.write(buf),
            Transport::Tls(t) => t.write(buf),
        }
    }

    /// [`Transport::write`], timed: also the `clock` read taken just before the socket call
    /// that hands the first of the bytes taken to the kernel (plain TCP: the `write` itself;
    /// TLS: the push of the records, after they are encrypted). This is a request's send
    /// time: nothing of the client's own work (encoding, queueing, encryption) falls after it.
    /// The clock is read once per call.
    #[inline]
    pub fn write_timed(&mut self, buf: &[u8], clock: &Clock) -> io::Result<(usize, u64)> {
        match self {
            Transport::Plain(s) => {
                let at = clock.now_ns();
                Ok((s.write(buf)?, at))
            }
            Transport::Tls(t) => t.write_timed(buf, clock),
        }
    }

    /// Pushes queued TLS bytes (handshake or records) to the socket; Ok(true) when none
    /// remain. Always Ok(true) for plain TCP, without a syscall.
    #[inline]
    pub fn flush(&mut self) -> io::Result<bool> {
        match self {
            Transport::Plain(_) => Ok(true),
            Transport::Tls(t) => t.flush(),
        }
    }

    /// TLS bytes are queued that the socket has not taken yet.
    #[inline]
    pub fn wants_write(&self) -> bool {
        match self {
            Transport::Plain(_) => false,
            Transport::Tls(t) => t.wants_write(),
        }
    }

    pub fn is_handshaking(&self) -> bool {
        match self {
            Transport::Plain(_) => false,
            Transport::Tls(t) => t.is_handshaking(),
        }
    }

    /// Advances the TLS handshake (call once the TCP connect finished, then on every event
    /// until it returns true). Ok(true): done, possibly with the last flight still queued
    /// (`wants_write`); Ok(false): waiting for the socket. Always Ok(true) for plain TCP.
    pub fn drive_handshake(&mut self) -> io::Result<bool> {
        match self {
            Transport::Plain(_) => Ok(true),
            Transport::Tls(t) => t.drive_handshake(),
        }
    }
}

#[cfg(any(test, feature = "test-support"))]
#[doc(hidden)]
pub mod test_pki;
