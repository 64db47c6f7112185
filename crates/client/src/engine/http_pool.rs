//! The HTTP/1.1 pool: one keep-alive connection per request in flight (no pipelining, as
//! perf_analyzer's clients do), so concurrency N means N connections.

use std::net::SocketAddr;
use std::sync::Arc;

use mio::{Registry, Token};

use super::conn::{Conn, Outcome, State};
use super::deadline::{Received, Sweep};
use super::pool::{Cx, Pool, Ready, Send};
use super::prefill::PrefillShare;
use super::sink::SENDS_PER_TURN;
use crate::clock::Clock;
use crate::measure::{FailKind, RequestRecord};
use crate::service::openai::{error_message, stream_error_message};
use crate::service::reply_check::ReplyCheck;
use crate::transport::{tx_stamp, TlsClient};

pub struct HttpPool {
    addr: SocketAddr,
    tls: Option<TlsClient>,
    /// Connections to open.
    count: usize,
    conns: Vec<Conn>,
    /// Connected connections with nothing in flight (a stack: the warmest is reused first).
    idle: Vec<usize>,
    /// Open loop: connections opened for due sends and not connected yet.
    connecting: usize,
    /// Time responses by kernel receive stamps (see `Conn::use_rx_stamps`).
    rx_stamps: bool,
    /// Start requests at the kernel's send stamps (see `Conn::use_tx_stamps`), counting
    /// those started by the clock instead.
    tx_stamps: Option<Arc<tx_stamp::Misses>>,
    /// Largest response body accepted (bytes).
    max_response: usize,
    /// The run's packet socket: event streams timed per TCP segment (see
    /// `Conn::use_packet_stamps`).
    packets: Option<std::sync::Arc<crate::transport::packet_stamps::PacketStamps>>,
    /// Session turns: why the connection could not be opened, for its slot's next turn.
    broken: Vec<Option<String>>,
    /// Session turns: what each connection's socket has served (see `retry_stale`).
    reuse: Vec<Reuse>,
    /// What a successful reply must be.
    check: ReplyCheck,
    /// `--prefill-concurrency`: this worker's view of the run's prefill gate. A connection
    /// whose request holds a slot watches for its first token (`Conn::holds_prefill`).
    prefill: Option<PrefillShare>,
    /// HTTP tracing (`profile`): the clock connections read their connect and handshake
    /// times from; every finished request's trace goes to the sink. `None`: no tracing.
    trace: Option<Clock>,
    /// A new connection for every request: each is replaced once its response is in.
    fresh: bool,
}

/// Session turns: what a connection's current socket has carried. A socket that is idle
/// and not to be replaced has answered every request sent on it (a failure replaces it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum Reuse {
    /// Nothing sent on it yet.
    #[default]
    Fresh,
    /// Its first request was sent on it.
    Used,
    /// The request in flight (or the last one) followed an answered one on it, so the
    /// server may have closed it while it was idle.
    Reused,
    /// It was opened to send again the turn that a reused socket lost; the turn is still in
    /// flight.
    Retrying,
}

impl Reuse {
    /// The socket is about to carry another request.
    fn next(self) -> Reuse {
        match self {
            Reuse::Fresh => Reuse::Used,
            _ => Reuse::Reused,
        }
    }
}

/// Open loop: connections opened at once, at most, when sends are due and none is free.
const MAX_CONNECTING: usize = 4;

impl HttpPool {
    pub fn new(addr: SocketAddr, tls: Option<TlsClient>, count: usize) -> HttpPool {
        HttpPool {
            addr,
            tls,
            count,
            conns: Vec::with_capacity(count),
            idle: Vec::with_capacity(count),
            connecting: 0,
            rx_stamps: false,
            tx_stamps: None,
            max_response: crate::protocol::http1::DEFAULT_MAX_RESPONSE_BYTES,
            packets: None,
            broken: vec![None; count],
            reuse: vec![Reuse::Fresh; count],
            check: ReplyCheck::None,
            prefill: None,
            trace: None,
            fresh: false,
        }
    }

    /// Traces every request's HTTP phases with `clock` (`None`: off).
    pub fn with_trace(mut self, clock: Option<Clock>) -> HttpPool {
        self.trace = clock;
        self
    }

    /// Replaces every connection once its response is in (`--connection-reuse-strategy
    /// never`).
    pub fn with_fresh_connections(mut self, on: bool) -> HttpPool {
        self.fresh = on;
        self
    }

    /// HTTP tracing: hands connection `i`'s trace of the request it just ended to the sink,
    /// for the record `finish` is about to store.
    #[inline]
    fn stage_trace(&self, i: usize, sink: &mut super::sink::Sink) {
        if self.trace.is_some() {
            let rec = &self.conns[i].rec;
            let due = if rec.intended_ns != 0 {
                rec.intended_ns
            } else {
                rec.start_ns
            };
            sink.trace = self.conns[i].trace(due);
        }
    }

    /// Caps the requests in prefill (sent, first token not yet received) with `share`'s
    /// gate (see `prefill.rs`).
    pub fn with_prefill(mut self, share: Option<PrefillShare>) -> HttpPool {
        self.prefill = share;
        self
    }

    /// Checks every successful reply with `check` (a failed check fails the request).
    pub fn with_reply_check(mut self, check: ReplyCheck) -> HttpPool {
        self.check = check;
        self
    }

    /// Times every response by the kernel's receive stamps (plain TCP only).
    pub fn with_rx_stamps(mut self, on: bool) -> HttpPool {
        self.rx_stamps = on;
        self
    }

    /// Start each request at the kernel's send stamp of its first write (plain TCP).
    pub fn with_tx_stamps(mut self, misses: Option<Arc<tx_stamp::Misses>>) -> HttpPool {
        self.tx_stamps = misses;
        self
    }

    /// Times event streams per TCP segment with the run's packet socket (`None`: off).
    pub fn with_packet_stamps(
        mut self,
        packets: Option<std::sync::Arc<crate::transport::packet_stamps::PacketStamps>>,
    ) -> HttpPool {
        self.packets = packets;
        self
    }

    /// Caps every response body at `bytes` (`--max-response-bytes`).
    pub fn with_max_response(mut self, bytes: usize) -> HttpPool {
        self.max_response = bytes;
        self
    }

    fn connect(&self, token: Token, registry: &Registry) -> std::io::Result<Conn> {
        let connect_start_ns = self.trace.map(|c| c.now_ns());
        let mut conn = Conn::connect(self.addr, token, registry, self.tls.as_ref())?;
        if let (Some(clock), Some(at)) = (self.trace, connect_start_ns) {
            conn.trace_from(clock, at);
        }
        conn.set_max_response(self.max_response);
        if self.rx_stamps {
            conn.use_rx_stamps();
        }
        if let Some(misses) = &self.tx_stamps {
            conn.use_tx_stamps(misses.clone());
        }
        if let Some(p) = &self.packets {
            conn.use_packet_stamps(p.clone());
        }
        Ok(conn)
    }

    /// Open loop with a send due and no idle connection: opens another one (within
    /// `--max-inflight`), so sends are never held back by a fixed pool.
    fn grow(&mut self, cx: &mut Cx<'_>, now_ns: u64) {
        let Some(cap) = cx.feed.open_loop() else {
            return;
        };
        let full = cap.is_some_and(|c| self.conns.len() >= c);
        if full || self.connecting >= MAX_CONNECTING || !cx.feed.due(cx.sink, now_ns) {
            return;
        }
        let token = Token(self.conns.len());
        match self.connect(token, cx.registry) {
            Ok(conn) => {
                self.conns.push(conn);
                self.connecting += 1;
            }
            Err(e) => cx.sink.fail(
                FailKind::Connect,
                format!("cannot connect to {}: {e}", self.addr),
            ),
        }
    }

    /// Handles what connection `i` reported, then gives back its prefill slot if its
    /// request has left prefill (first token seen, or the request ended in any way).
    fn handle(&mut self, i: usize, out: Outcome, cx: &mut Cx<'_>) {
        self.outcome(i, out, cx);
        if self.prefill.is_some() {
            self.settle_prefill(i);
        }
    }

    /// Prefill cap: a slot for the next send. `Some(holds)`: the send may go (holding a
    /// slot when the cap is on); `None`: every slot is taken, and the worker is woken when
    /// one is given back.
    #[inline]
    fn admit(&self) -> Option<bool> {
        match &self.prefill {
            None => Some(false),
            Some(p) => p.take().then_some(true),
        }
    }

    /// Gives back the slot `admit` took for a send that did not happen.
    fn unadmit(&self, holds: bool) {
        if let (true, Some(p)) = (holds, &self.prefill) {
            p.give_back();
        }
    }

    /// Prefill cap: connection `i` carries a request that holds a slot (`holds`) or not.
    fn hold_prefill(&mut self, i: usize, holds: bool) {
        let Some(p) = &self.prefill else {
            return;
        };
        self.conns[i].watch_first_token(holds.then_some(p.is_token));
    }

    /// Gives back connection `i`'s prefill slot once its request got its first token or is
    /// no longer in flight (completed, failed, timed out, cancelled); a session turn being
    /// sent again on a new connection keeps it.
    fn settle_prefill(&mut self, i: usize) {
        let conn = &self.conns[i];
        if !conn.holds_prefill() {
            return;
        }
        let resending = self.reuse.get(i) == Some(&Reuse::Retrying)
            && matches!(conn.state, State::Connecting | State::Handshaking);
        if conn.first_token_seen() || !(conn.in_flight() || resending) {
            self.hold_prefill(i, false);
            self.unadmit(true);
        }
    }

    fn outcome(&mut self, i: usize, out: Outcome, cx: &mut Cx<'_>) {
        match out {
            Outcome::Pending => {}
            Outcome::Connected => {
                self.connecting = self.connecting.saturating_sub(1);
                if self.reuse.get(i) == Some(&Reuse::Retrying) {
                    let out = self.conns[i].restart_owned(cx.clock, cx.registry);
                    return self.handle(i, out, cx);
                }
                self.idle.push(i);
            }
            Outcome::Completed => {
                let conn = &mut self.conns[i];
                let invalid = conn.check_reply(&self.check);
                let rec = conn.rec;
                let turns = cx.feed.turns();
                let session = turns.is_some();
                if !rec.ok {
                    let msg = match (invalid, conn.stream_error()) {
                        (Some(msg), _) => msg,
                        (None, Some(data)) => stream_error_message(data),
                        (None, None) => error_message(conn.status, conn.body()),
                    };
                    if let Some(t) = turns {
                        t.ended(i, &rec, conn.body(), Some(&msg), cx.clock);
                    }
                    cx.sink.fail(rec.fail, msg);
                } else if let Some(t) = turns {
                    t.ended(i, &rec, conn.body(), None, cx.clock);
                }
                self.stage_trace(i, cx.sink);
                let conn = &mut self.conns[i];
                cx.sink.finish_in_slot(rec, conn.body(), i);
                conn.release();
                conn.must_reconnect |= self.fresh;
                // Session turns replace a closed connection before its next send.
                if conn.must_reconnect && !session {
                    self.reconnect(i, cx);
                } else {
                    self.idle.push(i);
                }
            }
            Outcome::Failed {
                kind,
                msg,
                request_lost,
            } => self.failed(i, (kind, msg), request_lost, cx),
        }
    }

    /// Connection `i` failed; `request_lost`: with the request it had in flight.
    fn failed(
        &mut self,
        i: usize,
        (mut kind, mut msg): (FailKind, String),
        mut request_lost: bool,
        cx: &mut Cx<'_>,
    ) {
        if cx.feed.turns().is_some() {
            match self.retry_stale(i, request_lost, cx) {
                Ok(true) => return,
                Ok(false) => {}
                Err(why) => (kind, msg) = (FailKind::Connect, why),
            }
            // The connection opened for a retry failed: the turn it was to carry is lost.
            request_lost |= self.reuse[i] == Reuse::Retrying;
            self.reuse[i] = Reuse::Fresh;
        }
        if request_lost {
            let mut rec = self.conns[i].rec;
            rec.fail = kind;
            if let Some(t) = cx.feed.turns() {
                t.ended(i, &rec, &[], Some(&msg), cx.clock);
            }
            self.stage_trace(i, cx.sink);
            cx.sink.finish(rec, &[]);
        }
        if cx.feed.turns().is_some() {
            // The slot goes on with its next conversation (see `fill_turns`).
            if !request_lost {
                self.broken[i] = Some(msg.clone());
            }
            self.idle.push(i);
        } else if (request_lost && cx.sink.keep_going) || cx.sink.rides_out(kind) {
            // The run goes on: the connection that lost its request (or that the server
            // reset while idle) is replaced; it is idle again once connected.
            self.idle.retain(|&c| c != i);
            self.reconnect(i, cx);
        } else if cx.sink.keep_going {
            // The connection could not be opened (refused, handshake failed, timed out):
            // the server cannot be reached, so no new request starts and the run ends with
            // the failure instead of waiting for a connection that never comes.
            cx.sink.failed = true;
        }
        // perf_analyzer stops the run at the first failed request; the coordinator sees the
        // error at the next check and ends the measurement.
        cx.sink.fail(kind, msg);
    }

    /// Session turns: a turn lost before any byte of its answer, on a socket that had
    /// already answered a request, was most likely sent on a connection the server closed
    /// while it was idle (the close was not seen before the send). Such a turn is sent once
    /// more, on a new connection, and its failure is not reported. `Ok(true)`: the retry is
    /// under way; `Ok(false)`: the turn is not one to retry; `Err`: the new connection could
    /// not be opened, why.
    fn retry_stale(
        &mut self,
        i: usize,
        request_lost: bool,
        cx: &mut Cx<'_>,
    ) -> Result<bool, String> {
        let conn = &mut self.conns[i];
        if !request_lost || self.reuse[i] != Reuse::Reused || conn.response_begun() {
            return Ok(false);
        }
        match conn.reconnect(self.addr, cx.registry, self.tls.as_ref()) {
            // The turn goes again once connected (see `handle`).
            Ok(()) => {
                self.reuse[i] = Reuse::Retrying;
                Ok(true)
            }
            Err(e) => Err(format!("cannot reconnect to {}: {e}", self.addr)),
        }
    }

    /// Starts `send` on the idle connection `i`; `holds`: it holds a prefill slot.
    #[inline]
    fn send(&mut self, i: usize, send: Send, holds: bool, cx: &mut Cx<'_>) {
        cx.sink.started();
        if self.prefill.is_some() {
            self.hold_prefill(i, holds);
        }
        let conn = &mut self.conns[i];
        conn.keep_bodies = cx.sink.keep_bodies;
        let out = if send.owned {
            // Made for this send: the connection keeps its own copy until it is written.
            conn.start_owned(cx.feed.bytes(&send), send.step, cx.clock, cx.registry)
        } else {
            // The connection keeps the request index to write the rest from.
            conn.start(
                &cx.feed.requests[send.request],
                send.request,
                cx.clock,
                cx.registry,
            )
        };
        send.stamp(&mut conn.rec);
        self.handle(i, out, cx);
    }

    /// Session turns: connection `i` is slot `i`, so every idle connection is asked for its
    /// slot's next turn (one still waiting out its delay does not hold the others back). A
    /// connection the server closed, or that lost a request, reconnects first; one that
    /// could not connect fails its slot's next turn with that reason, so a server that is
    /// gone ends each conversation at its first turn instead of stalling the slot.
    fn fill_turns(&mut self, cx: &mut Cx<'_>) {
        let now_ns = cx.clock.now_ns();
        let mut k = 0;
        while let Some(&i) = self.idle.get(k) {
            if let Some(msg) = self.broken[i].take() {
                let Some(send) = cx.feed.next(cx.sink, now_ns, i) else {
                    self.broken[i] = Some(msg);
                    k += 1;
                    continue;
                };
                self.fail_turn(i, send, msg, now_ns, cx);
                self.conns[i].must_reconnect = true;
                continue;
            }
            if self.conns[i].must_reconnect {
                self.reuse[i] = Reuse::Fresh;
                let conn = &mut self.conns[i];
                match conn.reconnect(self.addr, cx.registry, self.tls.as_ref()) {
                    // Back among the idle ones once connected.
                    Ok(()) => {
                        self.idle.swap_remove(k);
                    }
                    Err(e) => {
                        conn.must_reconnect = false;
                        self.broken[i] = Some(format!("cannot reconnect to {}: {e}", self.addr));
                    }
                }
                continue;
            }
            let Some(holds) = self.admit() else {
                return;
            };
            let Some(send) = cx.feed.next(cx.sink, now_ns, i) else {
                self.unadmit(holds);
                k += 1;
                continue;
            };
            self.idle.swap_remove(k);
            self.reuse[i] = self.reuse[i].next();
            self.send(i, send, holds, cx);
        }
    }

    /// Session turns: `send` on connection `i` fails at once with `msg` (the connection
    /// could not be opened).
    fn fail_turn(&mut self, i: usize, send: Send, msg: String, now_ns: u64, cx: &mut Cx<'_>) {
        let mut rec = RequestRecord {
            start_ns: now_ns,
            send_end_ns: now_ns,
            end_ns: now_ns,
            ..RequestRecord::default()
        };
        send.stamp(&mut rec);
        cx.sink.started();
        if let Some(t) = cx.feed.turns() {
            t.ended(i, &rec, &[], Some(&msg), cx.clock);
        }
        rec.fail = FailKind::Connect;
        cx.sink.finish(rec, &[]);
        cx.sink.fail(FailKind::Connect, msg);
    }

    fn reconnect(&mut self, i: usize, cx: &mut Cx<'_>) {
        if let Err(e) = self.conns[i].reconnect(self.addr, cx.registry, self.tls.as_ref()) {
            cx.sink.fail(
                FailKind::Connect,
                format!("cannot reconnect to {}: {e}", self.addr),
            );
        }
    }
}

impl Pool for HttpPool {
    fn open(&mut self, registry: &Registry) -> Result<(), String> {
        while self.conns.len() < self.count {
            self.open_next(registry)?;
        }
        Ok(())
    }

    fn planned(&self) -> usize {
        self.count
    }

    fn open_next(&mut self, registry: &Registry) -> Result<usize, String> {
        let i = self.conns.len();
        let conn = self
            .connect(Token(i), registry)
            .map_err(|e| format!("cannot connect to {}: {e}", self.addr))?;
        self.conns.push(conn);
        Ok(i)
    }

    fn connected(&self, token: usize) -> bool {
        self.conns
            .get(token)
            .is_some_and(|c| !matches!(c.state, State::Connecting | State::Handshaking))
    }

    fn on_event(&mut self, token: usize, ready: Ready, cx: &mut Cx<'_>) {
        let Some(conn) = self.conns.get_mut(token) else {
            return;
        };
        let mut out = conn_event(conn, ready, cx);
        // The peer's FIN came with this event's data, so no later event will report it; the
        // response cut short must still end (read on to the EOF).
        if ready.closed && out == Outcome::Pending && conn.in_flight() {
            out = conn_event(conn, ready, cx);
        }
        self.handle(token, out, cx);
    }

    fn fill(&mut self, cx: &mut Cx<'_>) {
        if cx.feed.turns().is_some() {
            return self.fill_turns(cx);
        }
        let now_ns = cx.feed.now_if_paced(cx.clock);
        for _ in 0..SENDS_PER_TURN {
            let Some(&i) = self.idle.last() else {
                return self.grow(cx, now_ns);
            };
            let Some(holds) = self.admit() else {
                return;
            };
            let Some(send) = cx.feed.next(cx.sink, now_ns, i) else {
                self.unadmit(holds);
                return;
            };
            self.idle.pop();
            self.send(i, send, holds, cx);
        }
        cx.sink.backlog = true;
    }

    fn close(&mut self, registry: &Registry) {
        for c in &mut self.conns {
            c.deregister(registry);
        }
    }

    /// A request (or connect) past its idle or total limit fails with a timeout; its
    /// connection is closed and replaced.
    fn expire(&mut self, sweep: &Sweep, cx: &mut Cx<'_>) -> bool {
        let mut watching = false;
        for i in 0..self.conns.len() {
            let Some((mark, waiting)) = self.conns[i].progress() else {
                continue;
            };
            if self.cancel_due(i, sweep.now_ns, cx) {
                let msg = "cancelled on purpose (--request-cancellation-rate)".to_string();
                watching |= self.give_up(i, FailKind::Cancelled, msg, cx);
                continue;
            }
            let conn = &mut self.conns[i];
            let start = conn.request_start_ns();
            let Some(limit) = sweep.over(&mut conn.watch, mark, start) else {
                watching = true;
                continue;
            };
            let received = Received::Bytes(conn.received() as u64);
            let msg = sweep.message(limit, waiting, received);
            watching |= self.give_up(i, FailKind::Timeout, msg, cx);
        }
        watching
    }
}

impl HttpPool {
    /// The request on connection `i` is marked for cancellation and its delay is over.
    fn cancel_due(&self, i: usize, now_ns: u64, cx: &Cx<'_>) -> bool {
        let Some(c) = &cx.feed.cancel else {
            return false;
        };
        let conn = &self.conns[i];
        conn.sent_at_ns().is_some_and(|sent| {
            c.marks(conn.step) && now_ns.saturating_sub(sent) >= c.after.as_nanos() as u64
        })
    }

    /// Fails the request (or connect) on connection `i` with `kind`, closing the
    /// connection; returns whether a reconnect is now watched.
    fn give_up(&mut self, i: usize, kind: FailKind, msg: String, cx: &mut Cx<'_>) -> bool {
        // A silent server is not a stale connection: a session turn is not sent again. (An
        // open loop's connections opened past the first `count` have no entry.)
        if let Some(r) = self.reuse.get_mut(i) {
            *r = Reuse::Fresh;
        }
        let out = self.conns[i].expire(kind, msg);
        let lost = matches!(
            out,
            Outcome::Failed {
                request_lost: true,
                ..
            }
        );
        self.handle(i, out, cx);
        if !lost && cx.feed.turns().is_none() {
            // A connect that never finished: opened again (its slot is not lost).
            self.reconnect(i, cx);
            return true;
        }
        false
    }
}

/// Hands a readiness event to `conn`, with the bytes of the request it is sending.
#[inline]
fn conn_event(conn: &mut Conn, ready: Ready, cx: &mut Cx<'_>) -> Outcome {
    if conn.owns_request() {
        conn.on_event_owned(ready.writable, ready.readable, cx.clock, cx.registry)
    } else {
        let req = &cx.feed.requests[conn.step];
        conn.on_event(ready.writable, ready.readable, req, cx.clock, cx.registry)
    }
}

#[cfg(test)]
#[path = "http_pool_tests.rs"]
mod tests;
