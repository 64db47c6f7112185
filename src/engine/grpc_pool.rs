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

use mio::{Interest, Registry, Token};

use super::pool::{Cx, Pool, Ready, Send, Sink};
use super::wire::GrpcWire;
use crate::clock::Clock;
use crate::measure::record::push_framed_response;
use crate::measure::RequestRecord;
use crate::protocol::grpc::session::{Event, Session, SessionConfig, StreamEnd};
use crate::service::stream_scan::scan_stream_response;
use crate::transport::{TlsClient, Transport};

/// Slots (requests in flight) per HTTP/2 connection; more slots open more connections.
/// Below the usual server limits (nginx 128, Triton/gRPC 100+).
const STREAMS_PER_CONN: usize = 100;

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
}

struct Slot {
    conn: usize,
    /// The stream carrying this slot's request (streaming: its long-lived stream); 0 = none.
    stream: u32,
    busy: bool,
    rec: RequestRecord,
    /// Response bytes kept for the profile export.
    body: Vec<u8>,
    /// Streaming: arrival of the last response with outputs (ns).
    last_output_ns: u64,
}

impl Slot {
    fn new(conn: usize) -> Slot {
        Slot {
            conn,
            stream: 0,
            busy: false,
            rec: RequestRecord::default(),
            body: Vec::new(),
            last_output_ns: 0,
        }
    }
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
        }
    }

    fn connect(&self, token: usize, registry: &Registry) -> io::Result<H2Conn> {
        let mut transport = Transport::connect(self.addr, self.tls.as_ref())?;
        let both = Interest::READABLE | Interest::WRITABLE;
        registry.register(transport.socket(), Token(token), both)?;
        Ok(H2Conn {
            transport,
            session: Session::new(SessionConfig::default()),
            state: State::Connecting,
            streams: Vec::new(),
            writable: true,
            pending_flush: false,
        })
    }

    /// Replaces a finished connection (GOAWAY drained, or closed) with a new one.
    fn reconnect(&mut self, i: usize, cx: &mut Cx<'_>) {
        let _ = cx.registry.deregister(self.conns[i].transport.socket());
        match self.connect(i, cx.registry) {
            Ok(conn) => self.conns[i] = conn,
            Err(e) => cx
                .sink
                .fail(format!("cannot reconnect to {}: {e}", self.addr)),
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
        let start_ns = cx.clock.now_ns();
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
            // perf_analyzer's gRPC "marshal" time: building the request's frames (here a
            // copy of the pre-encoded bytes into the session); the socket write and the
            // network count as response wait, as in its gRPC client.
            let send_end_ns = cx.clock.now_ns();
            slot.busy = true;
            slot.body.clear();
            slot.last_output_ns = 0;
            slot.rec = RequestRecord {
                start_ns,
                send_end_ns,
                step: step as u32,
                ..RequestRecord::default()
            };
            send.stamp(&mut slot.rec);
            conn.pending_flush = true;
        }
        sent
    }

    /// Open loop with a send due and no free slot that can take it: adds a slot on a
    /// connection that can open a stream (within `--max-inflight`). True when one was added.
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
            c.state == State::Open && c.session.peer_settings_received() && c.session.can_open()
        };
        let Some(conn) = self.conns.iter().position(open) else {
            return false;
        };
        self.slots.push(Slot::new(conn));
        self.free.push(self.slots.len() - 1);
        true
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
        if let Err(e) = flush(conn, i, cx.registry) {
            self.fail_conn(i, e, cx);
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
            ..
        } = self;
        let H2Conn {
            transport,
            session,
            streams,
            ..
        } = &mut conns[i];
        let sink = &mut *cx.sink;
        let clock = cx.clock;
        let mut on = |ev: Event<'_>| on_stream_event(ev, streams, slots, free, wire, sink, clock);
        let broken = loop {
            let space = session.input_space();
            let cap = space.len();
            match transport.read(space) {
                Ok(0) => {
                    session.eof(&mut on);
                    break (!session.peer_settings_received()).then(|| {
                        "the server closed the connection before its HTTP/2 SETTINGS (is it a \
                         gRPC server?)"
                            .to_string()
                    });
                }
                Ok(n) => match session.received(n, &mut on) {
                    Err(e) => break Some(e.to_string()),
                    Ok(()) if n < cap && !closed => break None,
                    Ok(()) => {}
                },
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break None,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    session.eof(&mut on);
                    break Some(e.to_string());
                }
            }
        };
        if let Some(why) = broken {
            cx.sink.fail(format!("gRPC connection to {addr}: {why}"));
        }
    }

    fn fail_conn(&mut self, i: usize, msg: String, cx: &mut Cx<'_>) {
        let GrpcPool {
            conns,
            slots,
            free,
            wire,
            ..
        } = self;
        let H2Conn {
            session, streams, ..
        } = &mut conns[i];
        session.eof(&mut |ev| on_stream_event(ev, streams, slots, free, wire, cx.sink, cx.clock));
        cx.sink
            .fail(format!("gRPC connection to {}: {msg}", self.addr));
    }

    /// The TCP connect finished (or failed); TLS then starts its handshake.
    fn on_connect_event(&mut self, i: usize, cx: &mut Cx<'_>) {
        let conn = &mut self.conns[i];
        let socket = conn.transport.socket_ref();
        if let Ok(Some(e)) | Err(e) = socket.take_error() {
            return self.fail_conn(i, format!("connect failed: {e}"), cx);
        }
        match socket.peer_addr() {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotConnected => return,
            Err(e) => return self.fail_conn(i, format!("connect failed: {e}"), cx),
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
            Err(e) => self.fail_conn(i, e.to_string(), cx),
        }
    }
}

/// Writes what the session has queued; WRITABLE is registered only while output waits.
fn flush(conn: &mut H2Conn, token: usize, registry: &Registry) -> Result<(), String> {
    conn.pending_flush = false;
    loop {
        let out = conn.session.output();
        if out.is_empty() {
            break;
        }
        match conn.transport.write(out) {
            Ok(n) => conn.session.written(n),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("send failed: {e}")),
        }
    }
    let tls_done = conn
        .transport
        .flush()
        .map_err(|e| format!("send failed: {e}"))?;
    let waiting = !tls_done || !conn.session.output().is_empty();
    if waiting != conn.writable {
        let interest = if waiting {
            Interest::READABLE | Interest::WRITABLE
        } else {
            Interest::READABLE
        };
        registry
            .reregister(conn.transport.socket(), Token(token), interest)
            .map_err(|e| format!("epoll: {e}"))?;
        conn.writable = waiting;
    }
    Ok(())
}

/// One session event: stamps, response counting, completion.
fn on_stream_event(
    ev: Event<'_>,
    streams: &mut Vec<(u32, usize)>,
    slots: &mut [Slot],
    free: &mut Vec<usize>,
    wire: &GrpcWire,
    sink: &mut Sink,
    clock: &Clock,
) {
    let id = match &ev {
        Event::Headers { stream }
        | Event::Message { stream, .. }
        | Event::Closed { stream, .. } => *stream,
    };
    let Some(pos) = streams.iter().position(|&(sid, _)| sid == id) else {
        return;
    };
    let s = streams[pos].1;
    match ev {
        Event::Headers { .. } => {
            if !wire.streaming && slots[s].rec.recv_start_ns == 0 {
                slots[s].rec.recv_start_ns = clock.now_ns();
            }
        }
        Event::Message { data, .. } => {
            if wire.streaming {
                on_stream_response(s, data, slots, free, wire, sink, clock);
            } else if sink.keep_bodies {
                slots[s].body.clear();
                slots[s].body.extend_from_slice(data);
            }
        }
        Event::Closed { end, .. } => {
            streams.swap_remove(pos);
            on_closed(s, &end, slots, free, wire, sink, clock);
        }
    }
}

/// A streaming response: counts it, and completes the request at its final response.
fn on_stream_response(
    s: usize,
    data: &[u8],
    slots: &mut [Slot],
    free: &mut Vec<usize>,
    wire: &GrpcWire,
    sink: &mut Sink,
    clock: &Clock,
) {
    let slot = &mut slots[s];
    if !slot.busy {
        return;
    }
    let now = clock.now_ns();
    let resp = match scan_stream_response(data) {
        Ok(r) => r,
        Err(e) => return fail_slot(slot, free, s, sink, now, e.to_string()),
    };
    if let Some(err) = resp.error {
        let msg = String::from_utf8_lossy(err).into_owned();
        return fail_slot(slot, free, s, sink, now, msg);
    }
    if sink.keep_bodies {
        push_framed_response(&mut slot.body, now, data);
    }
    if resp.has_outputs {
        if slot.rec.responses == 0 {
            slot.rec.recv_start_ns = now;
        }
        slot.rec.responses += 1;
        slot.last_output_ns = now;
        sink.response(slot.rec.responses);
    }
    if resp.final_flag.unwrap_or(!wire.decoupled) {
        // Latency runs to the last response with outputs; a request answered only by the
        // empty final response ends there.
        slot.rec.end_ns = if slot.rec.responses > 0 {
            slot.last_output_ns
        } else {
            now
        };
        if slot.rec.recv_start_ns == 0 {
            slot.rec.recv_start_ns = slot.rec.end_ns;
        }
        slot.rec.ok = true;
        slot.busy = false;
        sink.finish(slot.rec, &slot.body);
        free.push(s);
    }
}

fn fail_slot(
    slot: &mut Slot,
    free: &mut Vec<usize>,
    s: usize,
    sink: &mut Sink,
    now: u64,
    msg: String,
) {
    slot.rec.end_ns = now.max(slot.rec.start_ns);
    slot.rec.ok = false;
    slot.busy = false;
    sink.finish(slot.rec, &[]);
    sink.fail(msg);
    free.push(s);
}

/// A stream ended: a unary call completes; a streaming slot loses its stream.
fn on_closed(
    s: usize,
    end: &StreamEnd,
    slots: &mut [Slot],
    free: &mut Vec<usize>,
    wire: &GrpcWire,
    sink: &mut Sink,
    clock: &Clock,
) {
    let slot = &mut slots[s];
    slot.stream = 0;
    if !slot.busy {
        return;
    }
    let now = clock.now_ns();
    if *end == StreamEnd::Refused {
        // The server never processed it (GOAWAY): no record; the slot sends again later.
        slot.busy = false;
        sink.abandon(&slot.rec);
        free.push(s);
        return;
    }
    if wire.streaming || !end.is_ok() {
        let why = if end.is_ok() {
            "the stream ended before the request's final response".to_string()
        } else {
            end.to_string()
        };
        return fail_slot(slot, free, s, sink, now, why);
    }
    slot.rec.end_ns = now;
    if slot.rec.recv_start_ns == 0 {
        slot.rec.recv_start_ns = now;
    }
    slot.rec.ok = true;
    slot.rec.responses = 1;
    slot.busy = false;
    sink.finish_in_slot(slot.rec, &slot.body, s);
    free.push(s);
}

impl Pool for GrpcPool {
    fn open(&mut self, registry: &Registry) -> Result<(), String> {
        for i in 0..self.conn_count {
            let conn = self
                .connect(i, registry)
                .map_err(|e| format!("cannot connect to {}: {e}", self.addr))?;
            self.conns.push(conn);
        }
        Ok(())
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
                if let Err(e) = flush(&mut self.conns[i], i, cx.registry) {
                    self.fail_conn(i, e, cx);
                }
            }
        }
    }

    fn close(&mut self, registry: &Registry) {
        for c in &mut self.conns {
            let _ = registry.deregister(c.transport.socket());
        }
    }
}
