//! One keep-alive HTTP/1.1 connection of a worker: a small state machine over a non-blocking
//! socket, with a preallocated read buffer and the request bytes borrowed from the worker.
//!
//! One request is in flight per connection (no pipelining), which is what perf_analyzer's
//! clients do too, so concurrency N means N connections.
//!
//! The socket is a [`Transport`]: plain TCP, or TLS whose handshake completes before the
//! connection counts as connected (so, as with TCP connect, it is not part of any request's
//! latency). Readiness follows the rule in [`crate::transport`].
//!
//! A `text/event-stream` response (OpenAI streaming) is decoded as it arrives, one response
//! per `data:` event (the `sse` submodule); any other response is one response, its raw body.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use mio::{Interest, Registry, Token};

use super::deadline::{mark, Waiting, Watch};
use crate::clock::Clock;
use crate::measure::{FailKind, HttpTrace, RequestRecord, RxTime};
use crate::protocol::http1::{Limits, Progress, ResponseHead, ResponseReader};
use crate::service::reply_check::{LastGood, ReplyCheck};
use crate::transport::packet_stamps::{Link, PacketStamps};
use crate::transport::rx_stamp::{self, Arrival};
use crate::transport::tx_stamp::{self, SendStamps};
use crate::transport::{TlsClient, Transport};
use sse::{SseState, TokenWatch};

mod sse;

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
    /// marked not ok with `kind`.
    Failed {
        kind: FailKind,
        msg: String,
        request_lost: bool,
    },
}

pub struct Conn {
    pub token: Token,
    stream: Transport,
    pub state: State,
    /// Bytes of the current request already written.
    written: usize,
    /// Index in `Feed::requests` of the request being sent (its input step, or with output
    /// slots the step's variant for the slot).
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
    /// `Inference-Header-Content-Length` of the last completed response.
    header_len: Option<usize>,
    /// The last reply that passed the reply check (see `LastGood`).
    last_good: LastGood,
    /// Keep what the export needs of each response (the framed SSE events).
    pub keep_bodies: bool,
    /// Server-Sent Events decoding of an event-stream response.
    sse: SseState,
    /// Response times come from the kernel's receive stamps (see `transport::rx_stamp`):
    /// every read is stamped with when its data arrived, not when it was read.
    rx_stamps: bool,
    /// Stamps were asked for (`use_rx_stamps`), whether or not the socket gives them: a
    /// response timed by the clock then counts as a fallback.
    rx_wanted: bool,
    /// Requests start at the kernel's send stamp of their first write (`use_tx_stamps`,
    /// kept across reconnects; see `transport::tx_stamp`).
    tx: Option<SendStamps>,
    /// The last stamped read of the response in flight: when its data arrived and when it
    /// was read (`None` before one, or when the completing event was not a stamped read).
    last_read: Option<Arrival>,
    /// The longest the data of a stamped read of the response in flight waited in the
    /// socket for the worker (ns): the request's client receive delay.
    read_delay_max_ns: u64,
    /// The request timeout's view of this connection's progress (see `deadline.rs`).
    pub watch: Watch,
    /// HTTP tracing: the clock its connect and handshake times are read from (`None`: no
    /// times are read for tracing).
    trace_clock: Option<Clock>,
    /// HTTP tracing: when the current socket's TCP connect and TLS handshake started and
    /// ended (ns; 0 when not traced).
    sock: SockTimes,
    /// Requests started on the current socket.
    served: u32,
    /// The request in flight: its bytes and calls, and when its last byte was read.
    exchange: Exchange,
    /// Event streams timed per TCP segment by the run's packet socket (plain TCP only).
    pkt: Option<Link>,
}

/// When a socket was connected (ns since the epoch; see `HttpTrace`).
#[derive(Clone, Copy, Debug, Default)]
struct SockTimes {
    connect_start_ns: u64,
    connect_end_ns: u64,
    tls_start_ns: u64,
    tls_end_ns: u64,
}

/// What the request in flight moved: write and read calls that moved bytes, bytes read,
/// when the response's last byte was read, and whether its socket had served a request.
#[derive(Clone, Copy, Debug, Default)]
struct Exchange {
    writes: u32,
    reads: u32,
    bytes_read: u64,
    recv_end_ns: u64,
    reused: bool,
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
            header_len: None,
            last_good: LastGood::default(),
            keep_bodies: false,
            sse: SseState::default(),
            rx_stamps: false,
            rx_wanted: false,
            tx: None,
            last_read: None,
            read_delay_max_ns: 0,
            watch: Watch::default(),
            trace_clock: None,
            sock: SockTimes::default(),
            served: 0,
            exchange: Exchange::default(),
            pkt: None,
        })
    }

    /// Traces the connection's times from now on with `clock`; its connect started at
    /// `connect_start_ns`.
    pub fn trace_from(&mut self, clock: Clock, connect_start_ns: u64) {
        self.trace_clock = Some(clock);
        self.sock = SockTimes {
            connect_start_ns,
            ..SockTimes::default()
        };
    }

    /// The trace of the request in flight or just ended; `due_ns`: when it was due.
    pub fn trace(&self, due_ns: u64) -> HttpTrace {
        let x = &self.exchange;
        let sock = if x.reused {
            SockTimes::default()
        } else {
            self.sock
        };
        HttpTrace {
            due_ns,
            connect_start_ns: sock.connect_start_ns,
            connect_end_ns: sock.connect_end_ns,
            tls_start_ns: sock.tls_start_ns,
            tls_end_ns: sock.tls_end_ns,
            send_start_ns: self.rec.start_ns,
            send_end_ns: self.rec.send_end_ns,
            recv_start_ns: self.rec.recv_start_ns,
            recv_end_ns: x.recv_end_ns,
            bytes_sent: self.written as u64,
            bytes_received: x.bytes_read,
            writes: x.writes,
            reads: x.reads,
            reused: x.reused,
        }
    }

    /// HTTP tracing: the time now, when tracing (else 0, no clock read).
    #[inline]
    fn trace_now(&self) -> u64 {
        self.trace_clock.map_or(0, |c| c.now_ns())
    }

    /// Times responses by the kernel's receive stamps from now on (and after reconnects);
    /// false when the socket refused the option, in which case reads are timed as they happen
    /// (and counted as timed by the clock).
    pub fn use_rx_stamps(&mut self) -> bool {
        self.rx_wanted = true;
        self.rx_stamps = self.stream.enable_rx_stamps();
        self.rx_stamps
    }

    /// Starts requests at the kernel's send stamp of their first write from now on (and
    /// after reconnects), counting in `misses` those started by the clock read instead (the
    /// socket refused the option, or a stamp was missing). A no-op over TLS, whose writes
    /// are timed by the clock read before the push.
    pub fn use_tx_stamps(&mut self, misses: Arc<tx_stamp::Misses>) {
        self.tx = SendStamps::new(misses, &mut self.stream);
    }

    /// Times the events of event streams by the TCP segment that carried each one's last
    /// byte (see `transport::packet_stamps`), from now on and after reconnects; a read that
    /// brought several segments then no longer gives all its events one time. Plain TCP
    /// only (TLS records do not map to segments): a no-op over TLS.
    pub fn use_packet_stamps(&mut self, stamps: Arc<PacketStamps>) {
        if self.stream.is_tls() {
            return;
        }
        self.pkt = Some(Link::new(stamps, &self.stream));
    }

    /// Caps each response body at `max_response_bytes` (`--max-response-bytes`).
    pub fn set_max_response(&mut self, max_response_bytes: usize) {
        self.reader = ResponseReader::with_limits(Limits {
            max_body_bytes: max_response_bytes,
            ..Limits::default()
        });
    }

    /// Replaces the socket after the server closed it, keeping the buffers.
    pub fn reconnect(
        &mut self,
        addr: SocketAddr,
        registry: &Registry,
        tls: Option<&TlsClient>,
    ) -> io::Result<()> {
        let _ = registry.deregister(self.stream.socket());
        let connect_start_ns = self.trace_now();
        let mut stream = Transport::connect(addr, tls)?;
        let both = Interest::READABLE | Interest::WRITABLE;
        registry.register(stream.socket(), self.token, both)?;
        self.stream = stream;
        if let Some(link) = self.pkt.as_mut() {
            link.attach(&self.stream);
        }
        if self.rx_wanted {
            self.rx_stamps = self.stream.enable_rx_stamps();
        }
        if let Some(tx) = self.tx.as_mut() {
            tx.attach(&mut self.stream);
        }
        self.state = State::Connecting;
        self.rlen = 0;
        self.reader.reset();
        self.sse.reset();
        self.must_reconnect = false;
        self.watch.reset();
        self.served = 0;
        self.sock = SockTimes {
            connect_start_ns,
            ..SockTimes::default()
        };
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
        if self.sse.active {
            // A stream cut short by a failure left its state behind.
            self.sse.reset();
        }
        // `start_ns` is set by the write that hands the request's first byte to the kernel
        // (see `write_more`).
        self.rec = RequestRecord {
            step: step as u32,
            ..Default::default()
        };
        self.last_read = None;
        self.read_delay_max_ns = 0;
        self.exchange = Exchange {
            reused: self.served > 0,
            ..Exchange::default()
        };
        self.served += 1;
        self.state = State::Writing;
        self.write_more(req, clock, registry)
    }

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

    /// Sends the connection's own copy of the request (see `start_owned`) again, from its
    /// first byte, as a new request with the same step: for a request lost on a connection
    /// the server had closed, once this connection has reconnected.
    pub fn restart_owned(&mut self, clock: &Clock, registry: &Registry) -> Outcome {
        let own = std::mem::take(&mut self.own);
        let out = self.start(&own, self.step, clock, registry);
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

    /// Writes until the request is out or the socket is full. The request's start is the
    /// clock read just before the socket call that takes its first byte
    /// ([`Transport::write_timed`]); until a byte is taken, the first attempt's time stands
    /// in for it (the request timeout runs from it).
    pub fn write_more(&mut self, req: &[u8], clock: &Clock, registry: &Registry) -> Outcome {
        while self.written < req.len() {
            let wrote = if self.written == 0 {
                self.first_write(req, clock)
            } else {
                self.stream.write(&req[self.written..])
            };
            match wrote {
                Ok(0) => {
                    return self.fail(FailKind::Closed, "connection closed while sending".into())
                }
                Ok(n) => {
                    self.written += n;
                    self.exchange.writes += 1;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    // Ask for a writable edge only now; normally a request fits the socket buffer.
                    return self.want_writable(registry);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return self.send_failed(&e, clock),
            }
        }
        // With TLS the last records may still be queued; the request is sent once they are out.
        match self.stream.flush() {
            Ok(true) => {}
            Ok(false) => return self.want_writable(registry),
            Err(e) => return self.send_failed(&e, clock),
        }
        self.rec.send_end_ns = clock.now_ns();
        self.state = State::Reading;
        Outcome::Pending
    }

    /// The write of a request's first bytes: a write that takes some sets the request's
    /// start to the kernel's send stamp of its data (with send stamps on and given), else to
    /// the clock read just before it; one that takes none (the socket is full, or it failed)
    /// leaves the attempt's time, unless an earlier attempt left one.
    fn first_write(&mut self, req: &[u8], clock: &Clock) -> io::Result<usize> {
        let (wrote, at) = match self.stream.write_timed(req, clock) {
            Ok((0, _)) => (Ok(0), None),
            Ok((n, at)) => {
                let at = match &self.tx {
                    Some(tx) => tx.start(&self.stream, at, 1, clock),
                    None => at,
                };
                (Ok(n), Some(at))
            }
            Err(e) => (Err(e), None),
        };
        match at {
            Some(at) => self.rec.start_ns = at,
            None if self.rec.start_ns == 0 => self.rec.start_ns = clock.now_ns(),
            None => {}
        }
        wrote
    }

    /// The request could not be sent in full. A server refusing a request before reading all
    /// of it (413 for a body over its limit) answers, then closes, and the close fails the
    /// send; the answer is still in the socket. A response that arrived whole completes the
    /// request with its status; a head alone is named in the failure; without either the
    /// send error is the failure.
    fn send_failed(&mut self, e: &io::Error, clock: &Clock) -> Outcome {
        self.rec.send_end_ns = clock.now_ns();
        self.state = State::Reading;
        if let Some(head) = self.read_early_response(clock) {
            self.last_read = None;
            let read_ns = clock.now_ns();
            let out = self.complete_read(head, read_ns, clock);
            self.must_reconnect = true;
            return out;
        }
        let msg = match self.reader.status() {
            0 => format!("send failed: {e}"),
            status => format!(
                "server answered HTTP {status} before the request was sent in full and closed \
                 the connection (send failed: {e})"
            ),
        };
        self.fail(FailKind::of_io(e), msg)
    }

    /// After a failed send: reads what the server sent until the socket has no more (the
    /// reader's limits bound it); the head of a response that is complete.
    fn read_early_response(&mut self, clock: &Clock) -> Option<ResponseHead> {
        loop {
            if self.rlen == self.rbuf.len() {
                self.rbuf.resize(self.rbuf.len() * 2, 0);
            }
            let progress = match self.read_some(clock) {
                Ok((0, _)) => self.reader.on_eof(&self.rbuf[..self.rlen]),
                Ok((n, read_ns)) => {
                    if self.rlen == 0 && self.rec.recv_start_ns == 0 {
                        self.rec.recv_start_ns = read_ns;
                    }
                    self.count_read(n);
                    self.rlen += n;
                    let progress = self.reader.advance(&self.rbuf[..self.rlen]);
                    self.drop_interim();
                    progress
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return None,
            };
            match progress {
                Ok(Progress::Done(head)) => return Some(head),
                Ok(Progress::NeedMore) => {}
                Err(_) => return None,
            }
        }
    }

    /// Asks for a writable edge (normally a request fits the socket buffer, so this is rare).
    fn want_writable(&mut self, registry: &Registry) -> Outcome {
        let both = Interest::READABLE | Interest::WRITABLE;
        if let Err(e) = registry.reregister(self.stream.socket(), self.token, both) {
            return self.fail(FailKind::Other, format!("epoll: {e}"));
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
            Err(e) => return self.fail(FailKind::of_io(&e), format!("send failed: {e}")),
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
            return self.fail(FailKind::Connect, e.to_string());
        }
        match socket.peer_addr() {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotConnected => return Outcome::Pending,
            Err(e) => return self.fail(FailKind::Connect, e.to_string()),
        }
        let _ = socket.set_nodelay(true);
        if self.trace_clock.is_some() {
            let now = self.trace_now();
            self.sock.connect_end_ns = now;
            if self.stream.is_tls() {
                self.sock.tls_start_ns = now;
            }
        }
        if self.stream.is_tls() {
            self.state = State::Handshaking;
            return self.continue_handshake(registry);
        }
        self.connected(registry)
    }

    /// Moves the TLS handshake on; READABLE | WRITABLE stay registered until it is done.
    fn continue_handshake(&mut self, registry: &Registry) -> Outcome {
        match self.stream.drive_handshake() {
            Ok(true) => {
                if self.trace_clock.is_some() {
                    self.sock.tls_end_ns = self.trace_now();
                }
                self.connected(registry)
            }
            Ok(false) => Outcome::Pending,
            Err(e) => self.fail(FailKind::Connect, e.to_string()),
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
            return self.fail(FailKind::Other, format!("epoll: {e}"));
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
            match self.read_some(clock) {
                Ok((0, _)) => return self.on_eof(clock),
                Ok((n, read_ns)) => {
                    if self.rlen == 0 && self.rec.recv_start_ns == 0 {
                        self.rec.recv_start_ns = read_ns;
                    }
                    self.count_read(n);
                    let before = self.rlen;
                    self.rlen += n;
                    if let Err(e) = self.time_by_segments(before, n, read_ns, clock) {
                        return self.fail(
                            FailKind::Framing,
                            format!("bad event stream in the response: {e}"),
                        );
                    }
                    let progress = self.reader.advance(&self.rbuf[..self.rlen]);
                    self.drop_interim();
                    if let Err(e) = self.feed_events(read_ns) {
                        return self.fail(
                            FailKind::Framing,
                            format!("bad event stream in the response: {e}"),
                        );
                    }
                    match progress {
                        Ok(Progress::NeedMore) if n < space => {
                            self.watch_backlog(registry);
                            return Outcome::Pending;
                        }
                        Ok(Progress::NeedMore) => {}
                        Ok(Progress::Done(head)) => {
                            return self.complete_read(head, read_ns, clock);
                        }
                        Err(e) => return self.fail(e.kind(), format!("bad HTTP response: {e}")),
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.watch_backlog(registry);
                    return Outcome::Pending;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return self.fail(FailKind::of_io(&e), format!("receive failed: {e}")),
            }
        }
    }

    /// With packet stamps, after a read that put `n` bytes at `rbuf[before..]`: when they
    /// came in several TCP segments and may hold events, hands each segment's share to the
    /// response reader and the SSE decoder in turn, at that segment's arrival time, so each
    /// event takes the time of the segment holding its last byte. The read's last segment
    /// is left to the caller, which feeds the whole buffer at the read's own time
    /// (`read_ns`, the stamp of that same segment). A read whose segments were not all seen
    /// is left whole, and counted.
    fn time_by_segments(
        &mut self,
        before: usize,
        n: usize,
        read_ns: u64,
        clock: &Clock,
    ) -> Result<(), crate::protocol::sse::SseError> {
        let Some(link) = self.pkt.as_mut() else {
            return Ok(());
        };
        let from = link.advance(n);
        // A response whose head says it is no event stream has no events to time.
        if self.reader.head_parsed() && !self.sse.active {
            return Ok(());
        }
        if !link.ask(from) {
            return Ok(());
        }
        let ends = link.take_ends();
        let mut result = Ok(());
        if ends.len() > 1 {
            let floor = self.rec.start_ns;
            for &(end, stamp) in &ends[..ends.len() - 1] {
                let len = before + (end - from) as usize;
                if !matches!(
                    self.reader.advance(&self.rbuf[..len]),
                    Ok(Progress::NeedMore)
                ) {
                    break;
                }
                let a = rx_stamp::arrival(Some(stamp), floor, clock);
                let at = if a.stamped {
                    a.at_ns.min(read_ns)
                } else {
                    read_ns
                };
                result = self.feed_events_upto(len, at);
                if result.is_err() {
                    break;
                }
            }
        }
        if let Some(link) = self.pkt.as_mut() {
            link.give_back(ends);
        }
        result
    }

    /// A read that moved `n` bytes (more than 0).
    #[inline]
    fn count_read(&mut self, n: usize) {
        self.exchange.reads += 1;
        self.exchange.bytes_read += n as u64;
    }

    /// Interim (1xx) responses already skipped leave the buffer, so a run of them cannot
    /// grow it.
    fn drop_interim(&mut self) {
        let n = self.reader.discard_interim();
        if n > 0 {
            self.rbuf.copy_within(n..self.rlen, 0);
            self.rlen -= n;
        }
    }

    /// One read into the buffer: the byte count and when the data arrived (0 when no clock
    /// is needed). One clock read per read: at the first byte, until the head is parsed, and
    /// for every read of an event stream (its events take this read's time); a plain
    /// response's later reads need none. With kernel stamps every read is timed, by them.
    fn read_some(&mut self, clock: &Clock) -> io::Result<(usize, u64)> {
        let buf = &mut self.rbuf[self.rlen..];
        if self.rx_stamps {
            let (n, stamp) = self.stream.read_stamped(buf)?;
            let a = rx_stamp::arrival(stamp, self.rec.start_ns, clock);
            self.last_read = Some(a);
            self.read_delay_max_ns = self.read_delay_max_ns.max(a.delay_ns());
            return Ok((n, a.at_ns));
        }
        let n = self.stream.read(buf)?;
        let timed = self.rlen == 0 || self.sse.active || !self.reader.head_parsed();
        Ok((n, if timed { clock.now_ns() } else { 0 }))
    }

    fn on_eof(&mut self, clock: &Clock) -> Outcome {
        match self.reader.on_eof(&self.rbuf[..self.rlen]) {
            Ok(Progress::Done(head)) => {
                self.last_read = None;
                let read_ns = clock.now_ns();
                if let Err(e) = self.feed_events(read_ns) {
                    return self.fail(
                        FailKind::Framing,
                        format!("bad event stream in the response: {e}"),
                    );
                }
                let head = ResponseHead {
                    keep_alive: false,
                    ..head
                };
                let out = self.complete_read(head, read_ns, clock);
                self.must_reconnect = true;
                out
            }
            _ => self.fail(
                FailKind::Closed,
                "server closed the connection before the response was complete".into(),
            ),
        }
    }

    /// After a read: once the head says `text/event-stream` (and 2xx), hands the body bytes
    /// that arrived to the SSE decoder, as read at `read_ns`.
    fn feed_events(&mut self, read_ns: u64) -> Result<(), crate::protocol::sse::SseError> {
        self.feed_events_upto(self.rlen, read_ns)
    }

    /// `feed_events` for the first `len` bytes of the buffer (the response reader was last
    /// given exactly those).
    fn feed_events_upto(
        &mut self,
        len: usize,
        read_ns: u64,
    ) -> Result<(), crate::protocol::sse::SseError> {
        if !self.sse.active {
            let head = self.reader.head_parsed() && self.reader.is_event_stream();
            if !head || !(200..300).contains(&self.reader.status()) {
                return Ok(());
            }
            self.sse.active = true;
            self.rec.sse = true;
        }
        let body = self.reader.body_so_far(&self.rbuf[..len]);
        self.sse
            .feed(body, read_ns, self.keep_bodies, &mut self.rec)
    }

    /// The response is complete: ends the event stream (if any), then the request.
    fn complete_read(&mut self, head: ResponseHead, read_ns: u64, clock: &Clock) -> Outcome {
        if self.sse.active {
            if let Err(e) = self.sse.finish(read_ns, self.keep_bodies, &mut self.rec) {
                return self.fail(
                    FailKind::Framing,
                    format!("bad event stream in the response: {e}"),
                );
            }
        }
        // With kernel stamps the completing read's arrival time is the end; otherwise now.
        // The delay is the longest of the response's stamped reads (an event stream's
        // events take the times of the reads that brought them).
        let (end_ns, rx, delay_ns) = match self.last_read {
            Some(a) if self.rx_stamps && read_ns != 0 => (
                read_ns,
                a.rx_time(),
                self.read_delay_max_ns.max(a.delay_ns()),
            ),
            _ => {
                let rx = if self.rx_wanted {
                    RxTime::Clock
                } else {
                    RxTime::NotStamped
                };
                (clock.now_ns(), rx, 0)
            }
        };
        self.exchange.recv_end_ns = end_ns;
        self.header_len = head.inference_header_len;
        let out = self.complete(head.status, head.keep_alive, head.consumed, end_ns);
        self.rec.rx = rx;
        self.rec.rx_delay_us = crate::measure::record::delay_us(delay_ns);
        if self.sse.active {
            // Latency runs to the last event with data; `[DONE]` (perf_analyzer's null final
            // response) does not count.
            if self.sse.last_event_ns != 0 {
                self.rec.end_ns = self.sse.last_event_ns;
            }
            if self.sse.error.is_some() {
                self.rec.ok = false;
                self.rec.fail = FailKind::SseError;
            }
        }
        out
    }

    fn complete(&mut self, status: u16, keep_alive: bool, consumed: usize, end_ns: u64) -> Outcome {
        self.rec.end_ns = end_ns;
        if self.rec.recv_start_ns == 0 {
            self.rec.recv_start_ns = self.rec.end_ns;
        }
        // The send's end is read from the clock after the write returned; a kernel stamp
        // earlier than that says the request was out by then.
        self.rec.send_end_ns = self.rec.send_end_ns.min(self.rec.recv_start_ns);
        self.rec.ok = (200..300).contains(&status);
        self.rec.status = status;
        if !self.rec.ok {
            self.rec.fail = FailKind::Status;
        }
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

    /// The body of the response that just completed (valid until the next `release`): for an
    /// event stream, its framed events (empty unless `keep_bodies`).
    pub fn body(&self) -> &[u8] {
        if self.sse.active {
            return &self.sse.framed;
        }
        self.reader.body(&self.rbuf[..self.rlen])
    }

    /// Applies `check` to the successful reply that just completed (an event stream is
    /// checked as it is decoded): a refused reply marks the request failed, with its kind,
    /// and gives the message.
    pub fn check_reply(&mut self, check: &ReplyCheck) -> Option<String> {
        if check.is_none() || !self.rec.ok || self.sse.active {
            return None;
        }
        let body = self.reader.body(&self.rbuf[..self.rlen]);
        let bad = self
            .last_good
            .verify(body, self.header_len, |b, h| check.http(b, h))
            .err()?;
        self.rec.ok = false;
        self.rec.fail = bad.kind;
        Some(bad.msg)
    }

    /// Why the request that just completed is not ok, when the response says more than its
    /// status: the data of an `event: error` in its event stream.
    pub fn stream_error(&self) -> Option<&str> {
        self.sse.error.as_deref()
    }

    /// Drops the completed response's bytes so the next request can start.
    pub fn release(&mut self) {
        self.rlen = 0;
        self.reader.reset();
        if self.sse.active {
            self.sse.reset();
        }
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

    fn fail(&mut self, kind: FailKind, msg: String) -> Outcome {
        let in_flight = matches!(self.state, State::Writing | State::Reading);
        if in_flight {
            self.rec.end_ns = self.rec.start_ns.max(self.rec.send_end_ns);
            self.rec.ok = false;
            self.rec.fail = kind;
        }
        self.state = State::Idle;
        self.must_reconnect = true;
        self.watch.reset();
        Outcome::Failed {
            kind,
            msg,
            request_lost: in_flight,
        }
    }

    /// Gives up on the request in flight (its connection is replaced before the next one).
    pub fn expire(&mut self, kind: FailKind, msg: String) -> Outcome {
        self.fail(kind, msg)
    }

    /// What the connection waits for and a mark of its progress so far (any byte read or
    /// written, a new request or state changes it); `None` when it waits for nothing
    /// (idle).
    pub fn progress(&self) -> Option<(u64, Waiting)> {
        let waiting = match self.state {
            State::Idle => return None,
            State::Connecting | State::Handshaking => Waiting::Connecting,
            State::Writing => Waiting::Sending,
            State::Reading if self.reader.head_parsed() => Waiting::Body,
            State::Reading => Waiting::Head,
        };
        let parts = [
            self.state as u64,
            self.rec.start_ns,
            self.written as u64,
            self.rlen as u64,
        ];
        Some((mark(parts), waiting))
    }

    /// When the request in flight was fully written (ns), while its response is awaited.
    pub fn sent_at_ns(&self) -> Option<u64> {
        (self.state == State::Reading).then_some(self.rec.send_end_ns)
    }

    /// When the request in flight started (ns); `None` when none is (idle or connecting).
    pub fn request_start_ns(&self) -> Option<u64> {
        self.in_flight().then_some(self.rec.start_ns)
    }

    /// Bytes of the current response received so far (head included, interim responses
    /// not).
    pub fn received(&self) -> usize {
        self.rlen
    }

    /// A byte of the response to the current (or failed) request has arrived.
    pub fn response_begun(&self) -> bool {
        self.rlen > 0
    }

    /// True when a request is on the wire.
    pub fn in_flight(&self) -> bool {
        matches!(self.state, State::Writing | State::Reading)
    }

    /// Prefill cap: the next request waits for its first output token, an event of its
    /// stream whose data passes `test` (`None`: no wait is watched).
    pub fn watch_first_token(&mut self, test: Option<fn(&[u8]) -> bool>) {
        self.sse.token = TokenWatch::watch(test);
    }

    /// Prefill cap: the watched request's first output token has arrived.
    pub fn first_token_seen(&self) -> bool {
        self.sse.token.seen
    }

    /// Prefill cap: the request holds a slot, that is its first token is watched (arrived
    /// or not) and the slot has not been given back.
    pub fn holds_prefill(&self) -> bool {
        self.sse.token.test.is_some() || self.sse.token.seen
    }
}
