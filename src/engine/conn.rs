//! One keep-alive HTTP/1.1 connection of a worker: a small state machine over a non-blocking
//! socket, with a preallocated read buffer and the request bytes borrowed from the worker.
//!
//! One request is in flight per connection (no pipelining), which is what perf_analyzer's
//! clients do too, so concurrency N means N connections.
//!
//! The socket is a [`Transport`]: plain TCP, or TLS whose handshake completes before the
//! connection counts as connected (so, as with TCP connect, it is not part of any request's
//! latency). Readiness follows the rule in [`crate::transport`].

use std::io;
use std::net::SocketAddr;

use mio::{Interest, Registry, Token};

use crate::clock::Clock;
use crate::measure::RequestRecord;
use crate::protocol::http1::{Progress, ResponseReader};
use crate::transport::{TlsClient, Transport};

/// Initial read buffer per connection (bytes). It grows only for responses larger than this.
const READ_BUF: usize = 16 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Non-blocking connect issued; waiting for the socket to become writable.
    Connecting,
    /// TCP connected; the TLS handshake is under way.
    Handshaking,
    /// Connected, nothing in flight.
    Idle,
    /// Part of the request is still to be written (the kernel buffer was full).
    Writing,
    /// The request is written; reading the response.
    Reading,
}

/// What happened after the socket reported readiness.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Nothing finished yet.
    Pending,
    /// The connection finished connecting and is idle.
    Connected,
    /// A response completed (ok or not); the record is in `Conn::rec`.
    Completed,
    /// The connection failed. `request_lost`: a request was in flight; `Conn::rec` holds it,
    /// marked not ok.
    Failed { msg: String, request_lost: bool },
}

pub struct Conn {
    pub token: Token,
    stream: Transport,
    pub state: State,
    /// Bytes of the current request already written.
    written: usize,
    /// Index of the request (input step) being sent.
    pub step: usize,
    rbuf: Vec<u8>,
    /// A request patched for this send (sequence models), written from here; empty when the
    /// request is the shared pre-encoded one. Its capacity is kept.
    own: Vec<u8>,
    owned: bool,
    rlen: usize,
    reader: ResponseReader,
    /// The request in flight (or the one just completed).
    pub rec: RequestRecord,
    /// Set when the last response asked to close the connection.
    pub must_reconnect: bool,
    /// HTTP status of the last completed response.
    pub status: u16,
}

impl Conn {
    /// Starts connecting to `addr`; with `tls`, the connection speaks TLS.
    pub fn connect(
        addr: SocketAddr,
        token: Token,
        registry: &Registry,
        tls: Option<&TlsClient>,
    ) -> io::Result<Conn> {
        let mut stream = Transport::connect(addr, tls)?;
        let both = Interest::READABLE | Interest::WRITABLE;
        registry.register(stream.socket(), token, both)?;
        Ok(Conn {
            token,
            stream,
            state: State::Connecting,
            written: 0,
            step: 0,
            rbuf: vec![0; READ_BUF],
            own: Vec::new(),
            owned: false,
            rlen: 0,
            reader: ResponseReader::new(),
            rec: RequestRecord::default(),
            must_reconnect: false,
            status: 0,
        })
    }

    /// Replaces the socket after the server closed it, keeping the buffers.
    pub fn reconnect(
        &mut self,
        addr: SocketAddr,
        registry: &Registry,
        tls: Option<&TlsClient>,
    ) -> io::Result<()> {
        let _ = registry.deregister(self.stream.socket());
        let mut stream = Transport::connect(addr, tls)?;
        let both = Interest::READABLE | Interest::WRITABLE;
        registry.register(stream.socket(), self.token, both)?;
        self.stream = stream;
        self.state = State::Connecting;
        self.rlen = 0;
        self.reader.reset();
        self.must_reconnect = false;
        Ok(())
    }

    pub fn deregister(&mut self, registry: &Registry) {
        let _ = registry.deregister(self.stream.socket());
    }

    /// Starts sending `req` (the pre-encoded bytes of input step `step`).
    pub fn start(
        &mut self,
        req: &[u8],
        step: usize,
        clock: &Clock,
        registry: &Registry,
    ) -> Outcome {
        self.step = step;
        self.written = 0;
        self.owned = false;
        self.rec = RequestRecord {
            start_ns: clock.now_ns(),
            step: step as u32,
            ..Default::default()
        };
        self.state = State::Writing;
        self.write_more(req, clock, registry)
    }

    /// Writes until the request is out or the socket is full.
    /// `start` with request bytes made for this send: they are copied into the connection,
    /// which writes them from there (`on_event_owned`).
    pub fn start_owned(
        &mut self,
        req: &[u8],
        step: usize,
        clock: &Clock,
        registry: &Registry,
    ) -> Outcome {
        let mut own = std::mem::take(&mut self.own);
        own.clear();
        own.extend_from_slice(req);
        let out = self.start(&own, step, clock, registry);
        self.own = own;
        self.owned = true;
        out
    }

    /// The request in flight is this connection's own copy (see `start_owned`).
    pub fn owns_request(&self) -> bool {
        self.owned
    }

    /// `on_event` for a request started with `start_owned`.
    pub fn on_event_owned(
        &mut self,
        writable: bool,
        readable: bool,
        clock: &Clock,
        registry: &Registry,
    ) -> Outcome {
        let own = std::mem::take(&mut self.own);
        let out = self.on_event(writable, readable, &own, clock, registry);
        self.own = own;
        out
    }

    pub fn write_more(&mut self, req: &[u8], clock: &Clock, registry: &Registry) -> Outcome {
        while self.written < req.len() {
            match self.stream.write(&req[self.written..]) {
                Ok(0) => return self.fail("connection closed while sending".into()),
                Ok(n) => self.written += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    // Ask for a writable edge only now; normally a request fits the socket buffer.
                    return self.want_writable(registry);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return self.fail(format!("send failed: {e}")),
            }
        }
        // With TLS the last records may still be queued; the request is sent once they are out.
        match self.stream.flush() {
            Ok(true) => {}
            Ok(false) => return self.want_writable(registry),
            Err(e) => return self.fail(format!("send failed: {e}")),
        }
        self.rec.send_end_ns = clock.now_ns();
        self.state = State::Reading;
        Outcome::Pending
    }

    /// Asks for a writable edge (normally a request fits the socket buffer, so this is rare).
    fn want_writable(&mut self, registry: &Registry) -> Outcome {
        let both = Interest::READABLE | Interest::WRITABLE;
        if let Err(e) = registry.reregister(self.stream.socket(), self.token, both) {
            return self.fail(format!("epoll: {e}"));
        }
        Outcome::Pending
    }

    /// Handles a readiness event.
    pub fn on_event(
        &mut self,
        writable: bool,
        readable: bool,
        req: &[u8],
        clock: &Clock,
        registry: &Registry,
    ) -> Outcome {
        match self.state {
            State::Connecting if writable || readable => self.finish_connect(registry),
            State::Handshaking => self.continue_handshake(registry),
            State::Writing if writable => {
                let out = self.write_more(req, clock, registry);
                if out == Outcome::Pending && self.state == State::Reading {
                    let _ =
                        registry.reregister(self.stream.socket(), self.token, Interest::READABLE);
                }
                out
            }
            State::Reading | State::Idle if writable && self.stream.wants_write() => {
                self.flush_backlog(readable, clock, registry)
            }
            State::Reading if readable => self.read_response(clock, registry),
            State::Idle if readable => self.read_idle(registry),
            _ => Outcome::Pending,
        }
    }

    /// TLS only: records queued by a read (a handshake message, key update or alert) that
    /// the socket did not take; pushed on the writable edge, then the event is handled.
    fn flush_backlog(&mut self, readable: bool, clock: &Clock, registry: &Registry) -> Outcome {
        match self.stream.flush() {
            Ok(true) => {
                let _ = registry.reregister(self.stream.socket(), self.token, Interest::READABLE);
            }
            Ok(false) => {}
            Err(e) => return self.fail(format!("send failed: {e}")),
        }
        match self.state {
            State::Reading if readable => self.read_response(clock, registry),
            State::Idle if readable => self.read_idle(registry),
            _ => Outcome::Pending,
        }
    }

    /// After a read: if TLS left bytes queued, a writable edge is needed to push them.
    fn watch_backlog(&mut self, registry: &Registry) {
        if self.stream.wants_write() {
            let both = Interest::READABLE | Interest::WRITABLE;
            let _ = registry.reregister(self.stream.socket(), self.token, both);
        }
    }

    fn finish_connect(&mut self, registry: &Registry) -> Outcome {
        let socket = self.stream.socket_ref();
        if let Ok(Some(e)) | Err(e) = socket.take_error() {
            return self.fail(format!("connect failed: {e}"));
        }
        match socket.peer_addr() {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotConnected => return Outcome::Pending,
            Err(e) => return self.fail(format!("connect failed: {e}")),
        }
        let _ = socket.set_nodelay(true);
        if self.stream.is_tls() {
            self.state = State::Handshaking;
            return self.continue_handshake(registry);
        }
        self.connected(registry)
    }

    /// Moves the TLS handshake on; READABLE | WRITABLE stay registered until it is done.
    fn continue_handshake(&mut self, registry: &Registry) -> Outcome {
        match self.stream.drive_handshake() {
            Ok(true) => self.connected(registry),
            Ok(false) => Outcome::Pending,
            Err(e) => self.fail(e.to_string()),
        }
    }

    fn connected(&mut self, registry: &Registry) -> Outcome {
        // The last TLS handshake flight may still be queued: keep the writable edge then.
        let interest = if self.stream.wants_write() {
            Interest::READABLE | Interest::WRITABLE
        } else {
            Interest::READABLE
        };
        if let Err(e) = registry.reregister(self.stream.socket(), self.token, interest) {
            return self.fail(format!("epoll: {e}"));
        }
        self.state = State::Idle;
        Outcome::Connected
    }

    /// Reads until the response is complete or the kernel buffer is drained. A short read
    /// means the socket was empty at that moment; with edge-triggered epoll the next arrival
    /// raises a new event, so no extra read is needed to see `WouldBlock`.
    fn read_response(&mut self, clock: &Clock, registry: &Registry) -> Outcome {
        loop {
            if self.rlen == self.rbuf.len() {
                self.rbuf.resize(self.rbuf.len() * 2, 0);
            }
            let space = self.rbuf.len() - self.rlen;
            match self.stream.read(&mut self.rbuf[self.rlen..]) {
                Ok(0) => return self.on_eof(clock),
                Ok(n) => {
                    if self.rlen == 0 && self.rec.recv_start_ns == 0 {
                        self.rec.recv_start_ns = clock.now_ns();
                    }
                    self.rlen += n;
                    match self.reader.advance(&self.rbuf[..self.rlen]) {
                        Ok(Progress::NeedMore) if n < space => {
                            self.watch_backlog(registry);
                            return Outcome::Pending;
                        }
                        Ok(Progress::NeedMore) => {}
                        Ok(Progress::Done(head)) => {
                            return self.complete(
                                head.status,
                                head.keep_alive,
                                head.consumed,
                                clock,
                            )
                        }
                        Err(e) => return self.fail(format!("bad HTTP response: {e}")),
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.watch_backlog(registry);
                    return Outcome::Pending;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return self.fail(format!("receive failed: {e}")),
            }
        }
    }

    fn on_eof(&mut self, clock: &Clock) -> Outcome {
        match self.reader.on_eof(&self.rbuf[..self.rlen]) {
            Ok(Progress::Done(head)) => {
                let out = self.complete(head.status, false, head.consumed, clock);
                self.must_reconnect = true;
                out
            }
            _ => self.fail("server closed the connection before the response was complete".into()),
        }
    }

    fn complete(
        &mut self,
        status: u16,
        keep_alive: bool,
        consumed: usize,
        clock: &Clock,
    ) -> Outcome {
        self.rec.end_ns = clock.now_ns();
        if self.rec.recv_start_ns == 0 {
            self.rec.recv_start_ns = self.rec.end_ns;
        }
        self.rec.ok = (200..300).contains(&status);
        self.status = status;
        self.state = State::Idle;
        if consumed != self.rlen {
            // Bytes beyond the response on a connection with one request in flight: the
            // server is confused; start afresh on a new connection.
            self.must_reconnect = true;
        }
        self.must_reconnect |= !keep_alive;
        Outcome::Completed
    }

    /// The body of the response that just completed (valid until the next `release`).
    pub fn body(&self) -> &[u8] {
        self.reader.body(&self.rbuf[..self.rlen])
    }

    /// Drops the completed response's bytes so the next request can start.
    pub fn release(&mut self) {
        self.rlen = 0;
        self.reader.reset();
    }

    /// Data or EOF on an idle connection: the server closed it (keep-alive timeout) or sent
    /// something unsolicited. Either way the connection must be replaced.
    /// With TLS, records carrying no data (session tickets) read as WouldBlock and keep the
    /// connection.
    fn read_idle(&mut self, registry: &Registry) -> Outcome {
        let mut probe = [0u8; 512];
        match self.stream.read(&mut probe) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                self.watch_backlog(registry);
                Outcome::Pending
            }
            _ => {
                self.must_reconnect = true;
                Outcome::Pending
            }
        }
    }

    fn fail(&mut self, msg: String) -> Outcome {
        let in_flight = matches!(self.state, State::Writing | State::Reading);
        if in_flight {
            self.rec.end_ns = self.rec.start_ns.max(self.rec.send_end_ns);
            self.rec.ok = false;
        }
        self.state = State::Idle;
        self.must_reconnect = true;
        Outcome::Failed {
            msg,
            request_lost: in_flight,
        }
    }

    /// True when a request is on the wire.
    pub fn in_flight(&self) -> bool {
        matches!(self.state, State::Writing | State::Reading)
    }
}
