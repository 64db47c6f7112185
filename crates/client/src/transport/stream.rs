//! TLS over a non-blocking mio socket, driven by hand (no rustls `Stream` helper, which
//! assumes blocking I/O).

use std::io::{self, Read, Write};

use mio::net::TcpStream;
use rustls::ClientConnection;

use super::session::{drive_handshake, process, push};
use crate::clock::Clock;

/// A client TLS session over a non-blocking TCP socket.
pub struct TlsStream {
    socket: TcpStream,
    session: ClientConnection,
    /// The server has sent at least one byte (tells "not TLS" from "closed" at handshake EOF).
    answered: bool,
    /// Socket reads go through `recvmsg` and keep the kernel's receive stamp (see
    /// [`super::rx_stamp`]).
    stamps: bool,
    /// The stamp of the last socket read that moved bytes (realtime ns), with `stamps`.
    last_stamp: Option<u64>,
}

/// The socket as rustls reads it, through `recvmsg`, keeping the stamp of each read that
/// moved bytes.
struct StampedReads<'a> {
    socket: &'a TcpStream,
    stamp: &'a mut Option<u64>,
}

impl Read for StampedReads<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let (n, stamp) = super::rx_stamp::recv(self.socket, buf)?;
        if n > 0 {
            *self.stamp = stamp;
        }
        Ok(n)
    }
}

impl TlsStream {
    pub fn new(socket: TcpStream, session: ClientConnection) -> TlsStream {
        TlsStream {
            socket,
            session,
            answered: false,
            stamps: false,
            last_stamp: None,
        }
    }

    pub fn socket(&mut self) -> &mut TcpStream {
        &mut self.socket
    }

    pub fn socket_ref(&self) -> &TcpStream {
        &self.socket
    }

    pub fn session(&self) -> &ClientConnection {
        &self.session
    }

    pub fn is_handshaking(&self) -> bool {
        self.session.is_handshaking()
    }

    pub fn wants_write(&self) -> bool {
        self.session.wants_write()
    }

    /// Asks the kernel to stamp arriving segments; later reads keep the stamp.
    pub fn enable_rx_stamps(&mut self) -> bool {
        self.stamps = super::rx_stamp::enable(&self.socket).is_ok();
        self.stamps
    }

    /// [`TlsStream::read`], plus the kernel stamp of the last socket read whose records
    /// hold the plaintext returned (the newest read that moved bytes; a record that spans
    /// reads is complete only with the last of them).
    pub fn read_stamped(&mut self, buf: &mut [u8]) -> io::Result<(usize, Option<u64>)> {
        let n = self.read(buf)?;
        Ok((n, self.last_stamp.filter(|_| n > 0)))
    }

    /// See [`super::Transport::drive_handshake`].
    pub fn drive_handshake(&mut self) -> io::Result<bool> {
        drive_handshake(&mut self.session, &mut self.socket, &mut self.answered)
    }

    /// See [`super::Transport::flush`].
    pub fn flush(&mut self) -> io::Result<bool> {
        push(&mut self.session, &mut self.socket)
    }

    /// Fills `buf` with plaintext until it is full or the socket would block, so that a short
    /// read means the socket was drained (the edge-triggered contract of a plain socket).
    /// EOF (with or without close_notify: HTTP frames its own messages) reads as Ok(0).
    pub fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let mut filled = 0;
        loop {
            match self.session.reader().read(&mut buf[filled..]) {
                Ok(0) => return Ok(filled),
                Ok(n) => {
                    filled += n;
                    if filled == buf.len() {
                        return Ok(filled);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(filled),
                Err(e) => return Err(e),
            }
            let got = if self.stamps {
                self.session.read_tls(&mut StampedReads {
                    socket: &self.socket,
                    stamp: &mut self.last_stamp,
                })
            } else {
                self.session.read_tls(&mut self.socket)
            };
            match got {
                Ok(0) if self.session.is_handshaking() => {
                    return Err(super::session::closed_during_handshake(self.answered))
                }
                // EOF is now recorded in the session: the next plaintext read reports it.
                Ok(0) => {}
                Ok(_) => {
                    self.answered = true;
                    process(&mut self.session, &mut self.socket)?;
                    // New records may need an answer (handshake flight, key update, alert).
                    push(&mut self.session, &mut self.socket)?;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    return if filled > 0 { Ok(filled) } else { Err(e) };
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Encrypts what rustls's outgoing buffer (64 KiB) has room for and pushes it to the
    /// socket. WouldBlock when nothing was taken; the caller then waits for a writable edge.
    pub fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        // Make room first: records left from an earlier call sit ahead of these bytes.
        push(&mut self.session, &mut self.socket)?;
        let taken = self.session.writer().write(buf)?;
        push(&mut self.session, &mut self.socket)?;
        if taken == 0 {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        Ok(taken)
    }

    /// [`TlsStream::write`], with the `clock` read taken after the bytes are encrypted and
    /// just before the push that hands their records to the socket.
    pub fn write_timed(&mut self, buf: &[u8], clock: &Clock) -> io::Result<(usize, u64)> {
        if buf.is_empty() {
            return Ok((0, clock.now_ns()));
        }
        push(&mut self.session, &mut self.socket)?;
        let taken = self.session.writer().write(buf)?;
        let at = clock.now_ns();
        push(&mut self.session, &mut self.socket)?;
        if taken == 0 {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        Ok((taken, at))
    }
}
