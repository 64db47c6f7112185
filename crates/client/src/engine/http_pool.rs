//! The HTTP/1.1 pool: one keep-alive connection per request in flight (no pipelining, as
//! perf_analyzer's clients do), so concurrency N means N connections.

use std::net::SocketAddr;

use mio::{Registry, Token};

use super::conn::{Conn, Outcome};
use super::pool::{Cx, Pool, Ready};
use crate::service::openai::{error_message, stream_error_message};
use crate::transport::TlsClient;

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
        }
    }

    /// Times every response by the kernel's receive stamps (plain TCP only).
    pub fn with_rx_stamps(mut self, on: bool) -> HttpPool {
        self.rx_stamps = on;
        self
    }

    fn connect(&self, token: Token, registry: &Registry) -> std::io::Result<Conn> {
        let mut conn = Conn::connect(self.addr, token, registry, self.tls.as_ref())?;
        if self.rx_stamps {
            conn.use_rx_stamps();
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
            Err(e) => cx
                .sink
                .fail(format!("cannot connect to {}: {e}", self.addr)),
        }
    }

    fn handle(&mut self, i: usize, out: Outcome, cx: &mut Cx<'_>) {
        match out {
            Outcome::Pending => {}
            Outcome::Connected => {
                self.connecting = self.connecting.saturating_sub(1);
                self.idle.push(i);
            }
            Outcome::Completed => {
                let conn = &mut self.conns[i];
                let rec = conn.rec;
                if !rec.ok && !cx.sink.failed {
                    let msg = match conn.stream_error() {
                        Some(data) => stream_error_message(data),
                        None => error_message(conn.status, conn.body()),
                    };
                    cx.sink.fail(msg);
                }
                cx.sink.finish_in_slot(rec, conn.body(), i);
                conn.release();
                if conn.must_reconnect {
                    self.reconnect(i, cx);
                } else {
                    self.idle.push(i);
                }
            }
            Outcome::Failed { msg, request_lost } => {
                if request_lost {
                    cx.sink.finish(self.conns[i].rec, &[]);
                }
                // perf_analyzer stops the run at the first failed request; the coordinator
                // sees the error at the next check and ends the measurement.
                cx.sink.fail(msg);
            }
        }
    }

    fn reconnect(&mut self, i: usize, cx: &mut Cx<'_>) {
        if let Err(e) = self.conns[i].reconnect(self.addr, cx.registry, self.tls.as_ref()) {
            cx.sink
                .fail(format!("cannot reconnect to {}: {e}", self.addr));
        }
    }
}

impl Pool for HttpPool {
    fn open(&mut self, registry: &Registry) -> Result<(), String> {
        for i in 0..self.count {
            let conn = self
                .connect(Token(i), registry)
                .map_err(|e| format!("cannot connect to {}: {e}", self.addr))?;
            self.conns.push(conn);
        }
        Ok(())
    }

    fn on_event(&mut self, token: usize, ready: Ready, cx: &mut Cx<'_>) {
        let Some(conn) = self.conns.get_mut(token) else {
            return;
        };
        let out = if conn.owns_request() {
            conn.on_event_owned(ready.writable, ready.readable, cx.clock, cx.registry)
        } else {
            let req = &cx.feed.requests[conn.step];
            conn.on_event(ready.writable, ready.readable, req, cx.clock, cx.registry)
        };
        self.handle(token, out, cx);
    }

    fn fill(&mut self, cx: &mut Cx<'_>) {
        let now_ns = cx.feed.now_if_paced(cx.clock);
        loop {
            let Some(&i) = self.idle.last() else {
                return self.grow(cx, now_ns);
            };
            let Some(send) = cx.feed.next(cx.sink, now_ns, i) else {
                return;
            };
            self.idle.pop();
            cx.sink.started();
            let conn = &mut self.conns[i];
            conn.keep_bodies = cx.sink.keep_bodies;
            let out = if send.seq.is_some() {
                // Patched per request: the connection keeps its own copy until it is written.
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
    }

    fn close(&mut self, registry: &Registry) {
        for c in &mut self.conns {
            c.deregister(registry);
        }
    }
}
