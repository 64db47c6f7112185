//! The gRPC pool: HTTP/2 connections (the sans-IO [`Session`] over a [`Transport`]), each
//! carrying many requests at once as streams.
//!
//! A worker's concurrency is a number of slots; slot `s` lives on connection
//! `s % connections`, with at most `STREAMS_PER_CONN` slots per connection. Unary calls
//! (`ModelInfer`) open one stream per request; with `--streaming` each slot keeps one
//! `ModelStreamInfer` stream open and sends its requests on it one after another, a request
//! being complete at its final response (`triton_final_response`, or the one response of a
//! model that is not decoupled).
//!
//! Nothing here allocates per request once warm: the session reuses its stream slots, the
//! request bytes are copied from the pre-encoded message, and stream responses are read by
//! `stream_scan` without decoding.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use mio::{Interest, Registry, Token};

use super::deadline::{mark, Sweep, Watch};
use super::grpc_streams::{Slot, StreamCx, When};
use super::pool::{Cx, Pool, Ready, Send};
use super::wire::GrpcWire;
use crate::clock::Clock;
use crate::measure::{FailKind, RequestRecord};
use crate::protocol::grpc::session::{Event, Session, SessionConfig};
use crate::service::reply_check::ReplyCheck;
use crate::transport::packet_stamps::{Link, PacketStamps};
use crate::transport::rx_stamp::{self, Arrival};
use crate::transport::tx_stamp::{self, SendStamps};
use crate::transport::{TlsClient, Transport};

/// Slots (requests in flight) per HTTP/2 connection; more slots open more connections.
/// Below the usual server limits (nginx 128, Triton/gRPC 100+).
const STREAMS_PER_CONN: usize = 100;

mod expire;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Non-blocking connect issued.
    Connecting,
    /// TCP connected, TLS handshake under way.
    Handshaking,
    /// The preface is out (or queued); streams open once the server's SETTINGS arrived.
    Open,
}

struct H2Conn {
    transport: Transport,
    session: Session,
    state: State,
    /// Streams in flight: (stream id, slot).
    streams: Vec<(u32, usize)>,
    /// WRITABLE is registered (output is waiting for the socket).
    writable: bool,
    /// Requests were queued since the last flush.
    pending_flush: bool,
    /// Requests whose bytes are queued in the session and not all written yet, in queue
    /// order: their send times are taken by the writes that carry them (see `flush`).
    unsent: Vec<Unsent>,
    /// Reads are timed by the kernel's receive stamps (see `transport::rx_stamp`).
    stamped: bool,
    /// Requests start at the kernel's send stamp of the write carrying their first byte
    /// (see `transport::tx_stamp`).
    tx: Option<SendStamps>,
    /// Responses that arrive in different TCP segments but are read together are timed by
    /// their own segment (see `transport::packet_stamps`); plain TCP with stamps only.
    pkt: Option<Link>,
    /// Bytes read so far: the request timeout's mark of the connection's progress.
    bytes_in: u64,
    /// The request timeout's view of the connection (see `deadline.rs`).
    watch: Watch,
    /// Slots bound to this connection.
    slot_count: usize,
}

/// A request queued in a connection's session output: where its bytes lie in
/// `Session::output()` (they move to the front as writes take bytes), and the slot it was
/// queued for, with the slot's `queued_ns` then (a slot failed and reused since is not it).
struct Unsent {
    slot: usize,
    queued_ns: u64,
    /// Offset of the request's first byte in the output.
    first: usize,
    /// Offset just past its last queued byte.
    end: usize,
    /// A write has carried its first byte (its start is set).
    started: bool,
}

pub struct GrpcPool {
    addr: SocketAddr,
    tls: Option<TlsClient>,
    wire: GrpcWire,
    conn_count: usize,
    conns: Vec<H2Conn>,
    slots: Vec<Slot>,
    /// Slots with no request in flight.
    free: Vec<usize>,
    /// Time responses by kernel receive stamps (plain TCP).
    rx_stamps: bool,
    /// Start requests at the kernel's send stamps (plain TCP), counting those started by
    /// the clock instead.
    tx_stamps: Option<Arc<tx_stamp::Misses>>,
    /// The run's packet socket, to time each response by its own TCP segment.
    packets: Option<Arc<PacketStamps>>,
    /// What a successful reply must be.
    check: ReplyCheck,
    /// What each connection's session advertises and accepts.
    session: SessionConfig,
}

impl GrpcPool {
    pub fn new(addr: SocketAddr, tls: Option<TlsClient>, wire: GrpcWire, slots: usize) -> Self {
        let conn_count = slots.div_ceil(STREAMS_PER_CONN).max(1);
        let slots: Vec<Slot> = (0..slots).map(|s| Slot::new(s % conn_count)).collect();
        let free = (0..slots.len()).rev().collect();
        GrpcPool {
            addr,
            tls,
            wire,
            conn_count,
            conns: Vec::with_capacity(conn_count),
            slots,
            free,
            rx_stamps: false,
            tx_stamps: None,
            packets: None,
            check: ReplyCheck::None,
            session: SessionConfig::default(),
        }
    }

    /// Checks every successful reply with `check` (a failed check fails the request).
    pub fn with_reply_check(mut self, check: ReplyCheck) -> GrpcPool {
        self.check = check;
        self
    }

    /// Times every read by when its data arrived (the kernel's receive stamp of its last
    /// segment) instead of when the worker got to it; plain TCP only.
    pub fn with_rx_stamps(mut self, on: bool) -> GrpcPool {
        self.rx_stamps = on;
        self
    }

    /// Start each request at the kernel's send stamp of the write carrying its first byte
    /// (plain TCP).
    pub fn with_tx_stamps(mut self, misses: Option<Arc<tx_stamp::Misses>>) -> GrpcPool {
        self.tx_stamps = misses;
        self
    }

    /// Times each response (and each streamed message) by the kernel stamp of the TCP segment
    /// that carried its last frame, from the run's packet socket, when one read takes several
    /// segments; with receive stamps over plain TCP only.
    pub fn with_packet_stamps(mut self, packets: Option<Arc<PacketStamps>>) -> GrpcPool {
        self.packets = packets;
        self
    }

    /// Caps every response message at `bytes` (`--max-response-bytes`).
    pub fn with_max_response(mut self, bytes: usize) -> GrpcPool {
        self.session.max_message = bytes;
        self
    }

    fn connect(&self, token: usize, registry: &Registry) -> io::Result<H2Conn> {
        let mut transport = Transport::connect(self.addr, self.tls.as_ref())?;
        let stamped = self.rx_stamps && transport.enable_rx_stamps();
        let tx = self
            .tx_stamps
            .clone()
            .and_then(|m| SendStamps::new(m, &mut transport));
        let pkt = match &self.packets {
            Some(p) if stamped && !transport.is_tls() => Some(Link::new(p.clone(), &transport)),
            _ => None,
        };
        let both = Interest::READABLE | Interest::WRITABLE;
        registry.register(transport.socket(), Token(token), both)?;
        Ok(H2Conn {
            transport,
            session: Session::new(self.session),
            state: State::Connecting,
            streams: Vec::new(),
            writable: true,
            pending_flush: false,
            unsent: Vec::new(),
            stamped,
            tx,
            pkt,
            bytes_in: 0,
            watch: Watch::default(),
            slot_count: 0,
        })
    }

    /// Replaces a finished connection (GOAWAY drained, or closed) with a new one.
    fn reconnect(&mut self, i: usize, cx: &mut Cx<'_>) {
        let _ = cx.registry.deregister(self.conns[i].transport.socket());
        match self.connect(i, cx.registry) {
            Ok(conn) => {
                let slot_count = self.conns[i].slot_count;
                self.conns[i] = H2Conn { slot_count, ..conn };
            }
            Err(e) => cx.sink.fail(
                FailKind::Connect,
                format!("cannot reconnect to {}: {e}", self.addr),
            ),
        }
        for slot in self.slots.iter_mut().filter(|s| s.conn == i) {
            slot.stream = 0;
        }
    }

    /// Starts `send` on slot `s`; false when its connection cannot take it now.
    fn start(&mut self, s: usize, send: Send, cx: &mut Cx<'_>) -> bool {
        let step = send.step;
        let slot = &mut self.slots[s];
        let conn = &mut self.conns[slot.conn];
        let req = cx.feed.bytes(&send);
        let first = conn.session.output().len();
        let queued_ns = cx.clock.now_ns();
        let sent = if self.wire.streaming && slot.stream != 0 {
            conn.session.send(slot.stream, req, false).is_ok()
        } else {
            let end_stream = !self.wire.streaming;
            match conn.session.open(&self.wire.headers, req, end_stream) {
                Ok(id) => {
                    slot.stream = id;
                    conn.streams.push((id, s));
                    true
                }
                Err(_) => false,
            }
        };
        if sent {
            // Queued, not sent: the time stands for the start until the write that carries
            // the request's first byte replaces it (`flush`), so that the frames' encoding
            // and the wait for the other requests queued with it fall before the start.
            slot.busy = true;
            slot.body.clear();
            slot.last_output_ns = 0;
            slot.reply = None;
            slot.queued_ns = queued_ns;
            slot.read_delay_max_ns = 0;
            slot.rec = RequestRecord {
                start_ns: queued_ns,
                send_end_ns: queued_ns,
                step: step as u32,
                ..RequestRecord::default()
            };
            send.stamp(&mut slot.rec);
            conn.unsent.push(Unsent {
                slot: s,
                queued_ns,
                first,
                end: conn.session.output().len(),
                started: false,
            });
            conn.pending_flush = true;
        }
        sent
    }

    /// Open loop with a send due and no free slot that can take it: adds a slot on a
    /// connection that can open a stream and has fewer than `STREAMS_PER_CONN` slots
    /// (within the in-flight cap), or, when every connection is full, opens one more
    /// connection (one at a time) whose slots come once its SETTINGS arrive. True when a
    /// slot was added. Keeping each connection's streams bounded matters past capacity:
    /// servers slow down sharply with hundreds of streams on one connection (nginx serves
    /// 83k req/s at 100 streams and 4.6k at 256).
    fn grow(&mut self, cx: &mut Cx<'_>, now_ns: u64) -> bool {
        let wanted = match cx.feed.open_loop() {
            Some(cap) => {
                !cap.is_some_and(|c| self.slots.len() >= c) && cx.feed.due(cx.sink, now_ns)
            }
            None => cx.feed.ramp_allows(cx.sink),
        };
        if !wanted {
            return false;
        }
        let open = |c: &H2Conn| {
            c.state == State::Open
                && c.session.peer_settings_received()
                && c.session.can_open()
                && c.slot_count < STREAMS_PER_CONN
        };
        let Some(conn) = self.conns.iter().position(open) else {
            self.add_conn(cx);
            return false;
        };
        self.conns[conn].slot_count += 1;
        self.slots.push(Slot::new(conn));
        self.free.push(self.slots.len() - 1);
        true
    }

    /// Opens one more connection for the open loop's slots, unless one is still on its way
    /// (connecting, or waiting for the server's SETTINGS).
    fn add_conn(&mut self, cx: &mut Cx<'_>) {
        let pending = |c: &H2Conn| c.state != State::Open || !c.session.peer_settings_received();
        if self.conns.iter().any(pending) || cx.sink.failed {
            return;
        }
        let token = self.conns.len();
        match self.connect(token, cx.registry) {
            Ok(conn) => self.conns.push(conn),
            Err(e) => cx.sink.fail(
                FailKind::Connect,
                format!("cannot connect to {}: {e}", self.addr),
            ),
        }
    }

    /// Whether slot `s` could start a request now.
    fn ready(&self, s: usize) -> bool {
        let slot = &self.slots[s];
        let conn = &self.conns[slot.conn];
        if conn.state != State::Open || !conn.session.peer_settings_received() {
            return false;
        }
        (self.wire.streaming && slot.stream != 0) || conn.session.can_open()
    }

    fn on_ready_event(&mut self, i: usize, ready: Ready, cx: &mut Cx<'_>) {
        if ready.readable {
            self.read(i, ready.closed, cx);
        }
        let conn = &mut self.conns[i];
        if let Err((kind, e)) = flush(conn, i, &mut self.slots, cx) {
            self.fail_conn(i, kind, e, cx);
        }
        if self.conns[i].session.is_done() && !cx.sink.failed {
            self.reconnect(i, cx);
        }
    }

    /// Reads until the socket is drained, handing every frame to the session. A connection
    /// that breaks is reported: a broken HTTP/2 peer, or one that closes before its SETTINGS
    /// (not a gRPC server), fails the run; a clean close after them is reconnected.
    fn read(&mut self, i: usize, closed: bool, cx: &mut Cx<'_>) {
        let addr = self.addr;
        let GrpcPool {
            conns,
            slots,
            free,
            wire,
            check,
            ..
        } = self;
        let H2Conn {
            transport,
            session,
            streams,
            stamped,
            pkt,
            bytes_in,
            ..
        } = &mut conns[i];
        let sink = &mut *cx.sink;
        let clock = cx.clock;
        let counted = sink.tally.total();
        let broken = loop {
            let space = session.input_space();
            let cap = space.len();
            let (read, at) = read_timed(transport, space, *stamped, clock, streams, slots);
            // Several segments in one read: each event takes its own segment's stamp.
            let split = match (&read, pkt.as_mut()) {
                (Ok(n), Some(link)) if *n > 0 => {
                    let from = link.advance(*n);
                    link.ask(from) && link.ends().len() > 1
                }
                _ => false,
            };
            let segments = pkt.as_ref().filter(|_| split);
            let floor = if split { floor_ns(streams, slots) } else { 0 };
            let mut on = |ev: Event<'_>, end: u64| {
                let rx = match (segments, at) {
                    (Some(link), Some(read_at)) => Some(segment_arrival(
                        link.stamp_before(end),
                        read_at,
                        floor,
                        clock,
                    )),
                    _ => at,
                };
                let when = When {
                    clock,
                    at: rx.map(|a| a.at_ns),
                    rx,
                };
                StreamCx::new(slots, free, (wire, check), sink, when).event(ev, streams)
            };
            match read {
                Ok(0) => {
                    session.eof(&mut |ev| on(ev, u64::MAX));
                    break (!session.peer_settings_received()).then(|| {
                        let why = "the server closed the connection before its HTTP/2 SETTINGS \
                                   (is it a gRPC server?)";
                        (FailKind::Closed, why.to_string())
                    });
                }
                Ok(n) => {
                    *bytes_in += n as u64;
                    match session.received_at(n, &mut on) {
                        Err(e) => break Some((e.kind(), e.to_string())),
                        Ok(()) if n < cap && !closed => break None,
                        Ok(()) => {}
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break None,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => break Some((FailKind::of_io(&e), e.to_string())),
            }
        };
        if let Some((kind, why)) = broken {
            let msg = format!("gRPC connection to {addr}: {why}");
            let when = When {
                clock,
                at: None,
                rx: None,
            };
            session.eof(&mut |ev| {
                StreamCx::new(slots, free, (wire, check), sink, when)
                    .with_cause(kind, &msg)
                    .event(ev, streams)
            });
            // Counted once: as its requests, or (none in flight) as the connection.
            if sink.tally.total() == counted {
                sink.fail(kind, msg);
            }
        }
    }

    fn fail_conn(&mut self, i: usize, kind: FailKind, msg: String, cx: &mut Cx<'_>) {
        let msg = format!("gRPC connection to {}: {msg}", self.addr);
        let GrpcPool {
            conns,
            slots,
            free,
            wire,
            check,
            ..
        } = self;
        let H2Conn {
            session, streams, ..
        } = &mut conns[i];
        let (sink, clock) = (&mut *cx.sink, cx.clock);
        let counted = sink.tally.total();
        let when = When {
            clock,
            at: None,
            rx: None,
        };
        session.eof(&mut |ev| {
            StreamCx::new(slots, free, (wire, check), sink, when)
                .with_cause(kind, &msg)
                .event(ev, streams)
        });
        // Counted once: as its requests, or (none in flight) as the connection.
        if cx.sink.tally.total() == counted {
            cx.sink.fail(kind, msg);
        }
    }

    /// Connection `i` could not be opened (refused, handshake failed). In `profile`
    /// (keep-going) the server cannot be reached, so no new request starts and the run ends
    /// with the failure instead of waiting for a connection that never comes; perf_analyzer
    /// mode stops at any failure anyway.
    fn connect_failed(&mut self, i: usize, msg: String, cx: &mut Cx<'_>) {
        self.fail_conn(i, FailKind::Connect, msg, cx);
        cx.sink.failed = true;
    }

    /// The TCP connect finished (or failed); TLS then starts its handshake.
    fn on_connect_event(&mut self, i: usize, cx: &mut Cx<'_>) {
        let conn = &mut self.conns[i];
        let socket = conn.transport.socket_ref();
        if let Ok(Some(e)) | Err(e) = socket.take_error() {
            return self.connect_failed(i, e.to_string(), cx);
        }
        match socket.peer_addr() {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotConnected => return,
            Err(e) => return self.connect_failed(i, e.to_string(), cx),
        }
        let _ = socket.set_nodelay(true);
        conn.state = State::Handshaking;
        self.on_handshake_event(i, cx);
    }

    fn on_handshake_event(&mut self, i: usize, cx: &mut Cx<'_>) {
        match self.conns[i].transport.drive_handshake() {
            Ok(true) => {
                self.conns[i].state = State::Open;
                let ready = Ready {
                    writable: true,
                    readable: true,
                    closed: false,
                };
                self.on_ready_event(i, ready, cx);
            }
            Ok(false) => {}
            Err(e) => self.connect_failed(i, e.to_string(), cx),
        }
    }
}

/// Writes what the session has queued; WRITABLE is registered only while output waits.
/// Each write is timed (`Transport::write_timed`) and gives the requests it carries their
/// send times (see `took`).
fn flush(
    conn: &mut H2Conn,
    token: usize,
    slots: &mut [Slot],
    cx: &Cx<'_>,
) -> Result<(), (FailKind, String)> {
    conn.pending_flush = false;
    let registry = cx.registry;
    loop {
        let out = conn.session.output();
        if out.is_empty() {
            break;
        }
        match conn.transport.write_timed(out, cx.clock) {
            Ok((n, at_ns)) => {
                conn.session.written(n);
                if !conn.unsent.is_empty() {
                    let starting = |u: &&Unsent| u.first < n && !u.started;
                    let at_ns = match &conn.tx {
                        Some(tx) => match conn.unsent.iter().filter(starting).count() as u64 {
                            0 => at_ns,
                            k => tx.start(&conn.transport, at_ns, k, cx.clock),
                        },
                        None => at_ns,
                    };
                    took(&mut conn.unsent, slots, n, at_ns, cx.clock);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err((FailKind::of_io(&e), format!("send failed: {e}"))),
        }
    }
    let tls_done = conn
        .transport
        .flush()
        .map_err(|e| (FailKind::of_io(&e), format!("send failed: {e}")))?;
    let waiting = !tls_done || !conn.session.output().is_empty();
    if waiting != conn.writable {
        let interest = if waiting {
            Interest::READABLE | Interest::WRITABLE
        } else {
            Interest::READABLE
        };
        registry
            .reregister(conn.transport.socket(), Token(token), interest)
            .map_err(|e| (FailKind::Other, format!("epoll: {e}")))?;
        conn.writable = waiting;
    }
    Ok(())
}

/// A write took the first `n` bytes of the session output, its socket call starting at
/// `at_ns`: a request whose first byte was among them starts then (perf_analyzer's gRPC
/// client starts its timer before marshalling; here the socket call is the start, the same
/// point HTTP/1.1 uses), and one whose last queued byte was among them was sent when the
/// write returned (read once, only then). With TLS "written" means encrypted and handed to
/// the TLS session, which pushes to the socket at once unless the socket is full.
fn took(unsent: &mut Vec<Unsent>, slots: &mut [Slot], n: usize, at_ns: u64, clock: &Clock) {
    let mut returned_ns = None;
    unsent.retain_mut(|u| {
        let slot = &mut slots[u.slot];
        if !slot.busy || slot.queued_ns != u.queued_ns {
            return false;
        }
        if u.first < n && !u.started {
            slot.rec.start_ns = at_ns;
            u.started = true;
        }
        if u.end <= n {
            let end_ns = *returned_ns.get_or_insert_with(|| clock.now_ns());
            slot.rec.send_end_ns = end_ns;
            return false;
        }
        u.first = u.first.saturating_sub(n);
        u.end -= n;
        true
    });
}

/// One read from a connection, and (with stamps) when its data arrived: the stamp is kept
/// only within [the earliest start of its requests in flight, now] (see
/// `rx_stamp::arrival`).
fn read_timed(
    transport: &mut Transport,
    space: &mut [u8],
    stamped: bool,
    clock: &Clock,
    streams: &[(u32, usize)],
    slots: &[Slot],
) -> (io::Result<usize>, Option<Arrival>) {
    if !stamped {
        return (transport.read(space), None);
    }
    match transport.read_stamped(space) {
        Ok((n, stamp)) => {
            let at = rx_stamp::arrival(stamp, floor_ns(streams, slots), clock);
            (Ok(n), Some(at))
        }
        Err(e) => (Err(e), None),
    }
}

/// The earliest start of a connection's requests in flight (0 with none): no data for them
/// can have arrived before it.
fn floor_ns(streams: &[(u32, usize)], slots: &[Slot]) -> u64 {
    streams
        .iter()
        .map(|&(_, s)| slots[s].rec.start_ns)
        .min()
        .unwrap_or(0)
}

/// When an event of a read that took several segments arrived: `stamp`, its own segment's
/// (the one holding its last byte), where it maps onto the run clock within [`floor_ns`, the
/// read's own arrival]; else the read's arrival.
fn segment_arrival(stamp: Option<u64>, read: Arrival, floor_ns: u64, clock: &Clock) -> Arrival {
    let own = rx_stamp::arrival(stamp, floor_ns, clock);
    if own.stamped && read.stamped && own.at_ns <= read.at_ns {
        Arrival {
            at_ns: own.at_ns,
            read_ns: read.read_ns,
            stamped: true,
        }
    } else {
        read
    }
}

impl Pool for GrpcPool {
    fn open(&mut self, registry: &Registry) -> Result<(), String> {
        while self.conns.len() < self.conn_count {
            self.open_next(registry)?;
        }
        Ok(())
    }

    fn planned(&self) -> usize {
        self.conn_count
    }

    fn open_next(&mut self, registry: &Registry) -> Result<usize, String> {
        let i = self.conns.len();
        let conn = self
            .connect(i, registry)
            .map_err(|e| format!("cannot connect to {}: {e}", self.addr))?;
        let slot_count = self.slots.iter().filter(|s| s.conn == i).count();
        self.conns.push(H2Conn { slot_count, ..conn });
        Ok(i)
    }

    fn connected(&self, token: usize) -> bool {
        self.conns
            .get(token)
            .is_some_and(|c| c.state == State::Open)
    }

    fn on_event(&mut self, token: usize, ready: Ready, cx: &mut Cx<'_>) {
        let Some(conn) = self.conns.get(token) else {
            return;
        };
        match conn.state {
            State::Connecting if ready.writable || ready.readable => {
                self.on_connect_event(token, cx)
            }
            State::Handshaking => self.on_handshake_event(token, cx),
            State::Open => self.on_ready_event(token, ready, cx),
            State::Connecting => {}
        }
    }

    fn fill(&mut self, cx: &mut Cx<'_>) {
        let now_ns = cx.feed.now_if_paced(cx.clock);
        let mut k = 0;
        let mut touched = false;
        loop {
            if k == self.free.len() && !self.grow(cx, now_ns) {
                break;
            }
            let s = self.free[k];
            if !self.ready(s) {
                k += 1;
                continue;
            }
            let Some(send) = cx.feed.next(cx.sink, now_ns, s) else {
                break;
            };
            if self.start(s, send, cx) {
                cx.sink.started();
                self.free.swap_remove(k);
                touched = true;
            } else {
                k += 1;
            }
        }
        if touched {
            for i in 0..self.conns.len() {
                if !self.conns[i].pending_flush {
                    continue;
                }
                if let Err((kind, e)) = flush(&mut self.conns[i], i, &mut self.slots, cx) {
                    self.fail_conn(i, kind, e, cx);
                }
            }
        }
    }

    fn close(&mut self, registry: &Registry) {
        for c in &mut self.conns {
            let _ = registry.deregister(c.transport.socket());
        }
    }

    /// A connection that connects for the limit, or moves no byte for it while streams are
    /// in flight, fails them and is replaced; a single stream with no progress for the limit
    /// is reset (RST_STREAM CANCEL) and fails.
    fn expire(&mut self, sweep: &Sweep, cx: &mut Cx<'_>) -> bool {
        let mut watching = false;
        for i in 0..self.conns.len() {
            let conn = &mut self.conns[i];
            let connecting = conn.state != State::Open || !conn.session.peer_settings_received();
            // A streaming slot's stream stays open between its requests: only a request in
            // flight waits for anything.
            let slots = &self.slots;
            let busy = conn.streams.iter().any(|&(_, s)| slots[s].busy);
            if !connecting && !busy {
                conn.watch.reset();
                continue;
            }
            watching = true;
            let progress = mark([conn.state as u64, conn.bytes_in, 0, 0]);
            if conn.watch.stalled(progress, sweep.now_ns, sweep.idle_ns) {
                self.expire_conn(i, connecting, sweep, cx);
            } else {
                self.expire_streams(i, sweep, cx);
            }
        }
        watching
    }
}
