//! One server thread: a mio event loop over the listener, its connections and a deadline heap
//! (armed into a timerfd so sub-millisecond delays are honoured).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{self, Write};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::net::TcpListener;
use mio::{Events, Interest, Poll, Token};

use super::conn::{abandon, on_timer, pump, Conn, Ctx, Timers, READ_BUF};
use super::http::{write_error_json, write_head};
use super::models::MODELS;
use super::places::{Inbox, Wake};
use super::reply::JSON;

use super::state::Shared;
use inferperf_wire::timerfd::DeadlineTimer;

pub const LISTENER: Token = Token(0);
pub const WAKER: Token = Token(1);
const TIMER: Token = Token(2);
const FIRST_CONN: usize = 3;

/// The answer to a connection over `--max-connections` (every open one busy), written once
/// before closing it.
fn busy_answer() -> Vec<u8> {
    let mut body = Vec::new();
    write_error_json(&mut body, "too many connections (--max-connections)");
    let mut out = Vec::with_capacity(body.len() + 128);
    write_head(&mut out, 503, JSON, body.len(), None, true);
    out.extend_from_slice(&body);
    out
}

/// One server thread's state.
pub struct Worker {
    poll: Poll,
    listener: TcpListener,
    /// Connections of this loop whose places went to new connections.
    inbox: Arc<Inbox>,
    timer: Option<DeadlineTimer>,
    /// The deadline the timer is armed for, to avoid re-arming it for the same one.
    armed_for: Option<Instant>,
    conns: Vec<Option<Conn>>,
    free_slots: Vec<usize>,
    next_generation: u64,
    /// Deadlines of held delayed responses and of lingering closes, earliest first.
    timers: Timers,
    shared: Arc<Shared>,
    body: Vec<u8>,
    rng: u64,
    /// Per model: when this thread's single instance is free again (serial models only).
    busy_until: Vec<Instant>,
}

impl Worker {
    /// `poll` must already have the waker of `inbox` registered under [`WAKER`].
    pub fn new(
        poll: Poll,
        mut listener: TcpListener,
        shared: Arc<Shared>,
        inbox: Arc<Inbox>,
        seed: u64,
    ) -> io::Result<Worker> {
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)?;
        // Without a timerfd, deadlines still fire through the (ms-rounded) poll timeout.
        let timer = DeadlineTimer::new(poll.registry(), TIMER).ok();
        Ok(Worker {
            poll,
            listener,
            inbox,
            timer,
            armed_for: None,
            conns: Vec::new(),
            free_slots: Vec::new(),
            next_generation: 0,
            timers: BinaryHeap::new(),
            shared,
            body: Vec::with_capacity(READ_BUF),
            rng: seed | 1,
            busy_until: vec![Instant::now(); MODELS.len()],
        })
    }

    /// Runs until `shared.stop` is set (and the waker fires).
    pub fn run(mut self) -> io::Result<()> {
        let mut events = Events::with_capacity(256);
        while !self.shared.stop.load(Ordering::Acquire) {
            let timeout = self.next_timeout();
            match self.poll.poll(&mut events, timeout) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            for event in events.iter() {
                match event.token() {
                    LISTENER => self.accept(),
                    WAKER => self.close_evicted(),
                    TIMER => {
                        if let Some(t) = &self.timer {
                            t.drain();
                        }
                        self.armed_for = None;
                    }
                    Token(t) => {
                        let slot = t - FIRST_CONN;
                        if let Some(conn) = self.conns.get_mut(slot).and_then(Option::as_mut) {
                            conn.read_ready |= event.is_readable() || event.is_read_closed();
                        }
                        self.drive(slot);
                    }
                }
            }
            self.fire_due();
        }
        Ok(())
    }

    /// Poll timeout for the earliest deadline; also arms the timerfd for it.
    fn next_timeout(&mut self) -> Option<Duration> {
        let Reverse((deadline, _, _)) = *self.timers.peek()?;
        let wait = deadline.saturating_duration_since(Instant::now());
        if wait.is_zero() {
            return Some(wait);
        }
        if self.armed_for != Some(deadline) {
            if let Some(t) = &self.timer {
                if t.arm(wait).is_ok() {
                    self.armed_for = Some(deadline);
                }
            }
        }
        Some(wait)
    }

    fn accept(&mut self) {
        loop {
            let stream = match self.listener.accept() {
                Ok((stream, _)) => stream,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // WouldBlock: all taken (possibly by another thread); other errors (EMFILE, a
                // peer that reset before accept) leave the listener usable for the next edge.
                Err(_) => return,
            };
            let slot = self.free_slots.pop().unwrap_or_else(|| {
                self.conns.push(None);
                self.conns.len() - 1
            });
            let generation = self.next_generation;
            let wake = Wake::Loop {
                inbox: Arc::clone(&self.inbox),
                slot,
                generation,
            };
            let limits = &self.shared.limits;
            let now = Instant::now();
            let Some(place) = self.shared.conns.enter(limits.max_connections, now, wake) else {
                self.free_slots.push(slot);
                // Best effort: the refusal fits the socket's empty send buffer.
                let _ = (&stream).write(&busy_answer());
                continue;
            };
            let _ = stream.set_nodelay(true);
            let mut conn = Conn::new(stream, generation, limits, place, now);
            self.next_generation += 1;
            let interest = Interest::READABLE | Interest::WRITABLE;
            if self
                .poll
                .registry()
                .register(&mut conn.stream, Token(FIRST_CONN + slot), interest)
                .is_err()
            {
                self.free_slots.push(slot);
                self.shared.conns.leave(conn.place);
                continue;
            }
            self.conns[slot] = Some(conn);
            // Arms the connection's first-request deadline.
            self.drive(slot);
        }
    }

    /// Closes the connections whose places went to new connections.
    fn close_evicted(&mut self) {
        for (slot, generation) in self.inbox.take() {
            let current = self.conns.get(slot).and_then(Option::as_ref);
            if current.is_some_and(|c| c.generation == generation) {
                self.close(slot);
            }
        }
    }

    /// The connection in `slot`, if open, and the context its handlers run with.
    fn conn_ctx(&mut self, slot: usize) -> Option<(&mut Conn, Ctx<'_>)> {
        let conn = self.conns.get_mut(slot)?.as_mut()?;
        let ctx = Ctx {
            shared: &self.shared,
            body: &mut self.body,
            timers: &mut self.timers,
            rng: &mut self.rng,
            busy_until: &mut self.busy_until,
            slot,
        };
        Some((conn, ctx))
    }

    /// Reads, answers and writes on one connection; closes it when done or broken.
    fn drive(&mut self, slot: usize) {
        let Some((conn, mut ctx)) = self.conn_ctx(slot) else {
            return;
        };
        if !pump(conn, &mut ctx) {
            self.close(slot);
        }
    }

    fn close(&mut self, slot: usize) {
        let Some(mut conn) = self.conns.get_mut(slot).and_then(Option::take) else {
            return;
        };
        let _ = self.poll.registry().deregister(&mut conn.stream);
        abandon(&mut conn, &self.shared.stats);
        self.shared.conns.leave(conn.place);
        self.free_slots.push(slot);
    }

    /// Releases every held response whose deadline has passed and writes it out.
    fn fire_due(&mut self) {
        let now = Instant::now();
        while let Some(&Reverse((deadline, slot, generation))) = self.timers.peek() {
            if deadline > now {
                break;
            }
            self.timers.pop();
            let Some((conn, mut ctx)) = self.conn_ctx(slot) else {
                continue;
            };
            if conn.generation != generation {
                continue;
            }
            if !on_timer(conn, &mut ctx, now) {
                // The peer had its time to read the answer; close for good.
                self.close(slot);
                continue;
            }
            if conn.lingering.is_none() {
                self.drive(slot);
            }
        }
    }
}
