//! A pinned worker thread: its own `mio::Poll`, its own connections, its own record buffer.
//!
//! Nothing on the per-request path allocates, locks or touches an atomic: records go into a
//! preallocated Vec that the coordinator swaps at window edges (through a channel, woken by a
//! `mio::Waker`), and the completed-request counter is published at most once a millisecond.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use mio::{Events, Poll, Token};

use super::conn::{Conn, Outcome};
use crate::clock::Clock;
use crate::measure::RequestRecord;
use crate::service::triton_http::error_message;
use crate::transport::TlsClient;

/// Token of the coordinator's waker; connection tokens are their index.
pub const WAKE: Token = Token(usize::MAX);

/// How often (at most) a worker publishes its completed-request count.
const PUBLISH_EVERY: Duration = Duration::from_millis(1);

/// What the coordinator asks of a worker.
pub enum Command {
    /// Hand over the records that ended at or before `until_ns`, and continue with `fresh`.
    Swap {
        until_ns: u64,
        fresh: Vec<RequestRecord>,
        fresh_bodies: Vec<u8>,
    },
    /// Send nothing new; finish what is in flight until `deadline`, then exit.
    Stop { deadline: Instant },
}

/// Records handed from a worker to the coordinator.
pub struct Batch {
    pub worker: usize,
    pub records: Vec<RequestRecord>,
    pub bodies: Vec<u8>,
    /// Requests started since the previous batch.
    pub sent: u64,
    /// Thread CPU time used since the previous batch (ns).
    pub cpu_ns: u64,
}

/// State a worker shares with the coordinator; touched off the per-request path only.
#[repr(align(64))]
#[derive(Default)]
pub struct Shared {
    /// Requests completed so far (published at most every `PUBLISH_EVERY`).
    pub completed: AtomicU64,
    /// The request budget is spent and nothing is in flight.
    pub finished: AtomicBool,
    pub has_error: AtomicBool,
    pub error: Mutex<Option<String>>,
}

pub struct WorkerParams {
    pub index: usize,
    pub addr: SocketAddr,
    pub requests: Arc<Vec<Vec<u8>>>,
    pub connections: usize,
    /// Requests this worker may start; `None`: until told to stop.
    pub budget: Option<u64>,
    pub keep_bodies: bool,
    pub clock: Clock,
    pub records: Vec<RequestRecord>,
    /// First input step this worker sends; workers interleave through the steps.
    pub first_step: usize,
    /// TLS settings for every connection; `None`: plain TCP.
    pub tls: Option<TlsClient>,
}

pub struct Worker {
    p: WorkerParams,
    poll: Poll,
    conns: Vec<Conn>,
    records: Vec<RequestRecord>,
    bodies: Vec<u8>,
    next_step: usize,
    sent: u64,
    completed: u64,
    running: bool,
    /// A request failed: send nothing more (the coordinator ends the run).
    failed: bool,
    in_flight: usize,
    cpu_mark: u64,
    shared: Arc<Shared>,
    out: Sender<Batch>,
}

impl Worker {
    pub fn new(mut p: WorkerParams, poll: Poll, shared: Arc<Shared>, out: Sender<Batch>) -> Worker {
        let records = std::mem::take(&mut p.records);
        let next_step = p.first_step % p.requests.len().max(1);
        Worker {
            p,
            poll,
            conns: Vec::new(),
            records,
            bodies: Vec::new(),
            next_step,
            sent: 0,
            completed: 0,
            running: true,
            failed: false,
            in_flight: 0,
            cpu_mark: thread_cpu_ns(),
            shared,
            out,
        }
    }

    /// The thread body: connect, then run the event loop until stopped.
    pub fn run(mut self, commands: Receiver<Command>) {
        for i in 0..self.p.connections {
            match Conn::connect(
                self.p.addr,
                Token(i),
                self.poll.registry(),
                self.p.tls.as_ref(),
            ) {
                Ok(c) => self.conns.push(c),
                Err(e) => {
                    self.set_error(format!("cannot connect to {}: {e}", self.p.addr));
                    break;
                }
            }
        }
        let mut events = Events::with_capacity(1024);
        let mut last_publish = Instant::now();
        let mut deadline: Option<Instant> = None;
        loop {
            let timeout = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            let timeout = timeout.map(|t| t.min(Duration::from_millis(10)));
            if let Err(e) = self.poll.poll(&mut events, timeout) {
                if e.kind() != std::io::ErrorKind::Interrupted {
                    self.set_error(format!("epoll failed: {e}"));
                    deadline = Some(Instant::now());
                }
            }
            for ev in events.iter() {
                if ev.token() == WAKE {
                    if let Some(d) = self.handle_commands(&commands) {
                        deadline = Some(d);
                    }
                } else {
                    self.on_event(
                        ev.token().0,
                        ev.is_writable(),
                        ev.is_readable() || ev.is_read_closed(),
                    );
                }
            }
            let now = Instant::now();
            if now.duration_since(last_publish) >= PUBLISH_EVERY {
                self.shared
                    .completed
                    .store(self.completed, Ordering::Relaxed);
                last_publish = now;
            }
            if self.in_flight == 0 && (!self.running || self.p.budget == Some(0)) {
                self.shared
                    .completed
                    .store(self.completed, Ordering::Relaxed);
                self.shared.finished.store(true, Ordering::Release);
            }
            if let Some(d) = deadline {
                if self.in_flight == 0 || now >= d {
                    break;
                }
            }
        }
        for c in &mut self.conns {
            c.deregister(self.poll.registry());
        }
    }

    /// Returns a stop deadline when told to stop.
    fn handle_commands(&mut self, commands: &Receiver<Command>) -> Option<Instant> {
        let mut stop = None;
        while let Ok(cmd) = commands.try_recv() {
            match cmd {
                Command::Swap {
                    until_ns,
                    fresh,
                    fresh_bodies,
                } => {
                    let batch = self.swap(until_ns, fresh, fresh_bodies);
                    let _ = self.out.send(batch);
                }
                Command::Stop { deadline } => {
                    self.running = false;
                    stop = Some(deadline);
                }
            }
        }
        stop
    }

    /// Hands over the records that ended by `until_ns`; later ones stay for the next window.
    fn swap(
        &mut self,
        until_ns: u64,
        mut fresh: Vec<RequestRecord>,
        mut fresh_bodies: Vec<u8>,
    ) -> Batch {
        fresh.clear();
        fresh_bodies.clear();
        let mut batch = self.take_batch(fresh, fresh_bodies);
        let mut kept = 0;
        for j in 0..batch.records.len() {
            let mut r = batch.records[j];
            if r.end_ns > until_ns {
                if r.body_len > 0 {
                    let (o, n) = (r.body_off as usize, r.body_len as usize);
                    r.body_off = self.bodies.len() as u32;
                    self.bodies.extend_from_slice(&batch.bodies[o..o + n]);
                }
                self.records.push(r);
            } else {
                batch.records[kept] = r;
                kept += 1;
            }
        }
        batch.records.truncate(kept);
        batch
    }

    fn take_batch(&mut self, fresh: Vec<RequestRecord>, fresh_bodies: Vec<u8>) -> Batch {
        let cpu = thread_cpu_ns();
        let batch = Batch {
            worker: self.p.index,
            records: std::mem::replace(&mut self.records, fresh),
            bodies: std::mem::replace(&mut self.bodies, fresh_bodies),
            sent: self.sent,
            cpu_ns: cpu.saturating_sub(self.cpu_mark),
        };
        self.sent = 0;
        self.cpu_mark = cpu;
        batch
    }

    fn on_event(&mut self, i: usize, writable: bool, readable: bool) {
        let Some(conn) = self.conns.get_mut(i) else {
            return;
        };
        let req = &self.p.requests[conn.step];
        let out = conn.on_event(writable, readable, req, &self.p.clock, self.poll.registry());
        self.handle_outcome(i, out);
    }

    fn handle_outcome(&mut self, i: usize, out: Outcome) {
        match out {
            Outcome::Pending => {}
            Outcome::Connected => self.send_next(i),
            Outcome::Completed => {
                self.in_flight -= 1;
                self.record_completion(i);
                if self.conns[i].must_reconnect {
                    self.reconnect(i);
                } else {
                    self.send_next(i);
                }
            }
            Outcome::Failed { msg, request_lost } => {
                if request_lost {
                    self.in_flight -= 1;
                    self.completed += 1;
                    self.records.push(self.conns[i].rec);
                }
                // perf_analyzer stops the run at the first failed request; the coordinator
                // sees the error at the next check and ends the measurement.
                self.set_error(msg);
            }
        }
    }

    fn record_completion(&mut self, i: usize) {
        let conn = &mut self.conns[i];
        let mut rec = conn.rec;
        if !rec.ok && !self.failed {
            self.failed = true;
            set_error(&self.shared, error_message(conn.status, conn.body()));
        }
        if self.p.keep_bodies {
            let body = conn.body();
            rec.body_off = self.bodies.len() as u32;
            rec.body_len = body.len() as u32;
            self.bodies.extend_from_slice(body);
        }
        conn.release();
        self.records.push(rec);
        self.completed += 1;
    }

    fn reconnect(&mut self, i: usize) {
        if let Err(e) =
            self.conns[i].reconnect(self.p.addr, self.poll.registry(), self.p.tls.as_ref())
        {
            self.set_error(format!("cannot reconnect to {}: {e}", self.p.addr));
        }
    }

    /// Starts the next request on connection `i` if the run and the budget allow it.
    fn send_next(&mut self, i: usize) {
        if !self.running || self.failed {
            return;
        }
        match &mut self.p.budget {
            Some(0) => return,
            Some(b) => *b -= 1,
            None => {}
        }
        let step = self.next_step;
        self.next_step += 1;
        if self.next_step == self.p.requests.len() {
            self.next_step = 0;
        }
        self.sent += 1;
        self.in_flight += 1;
        let req = &self.p.requests[step];
        let out = self.conns[i].start(req, step, &self.p.clock, self.poll.registry());
        self.handle_outcome(i, out);
    }

    fn set_error(&mut self, msg: String) {
        self.failed = true;
        set_error(&self.shared, msg);
    }
}

fn set_error(shared: &Shared, msg: String) {
    if let Ok(mut slot) = shared.error.lock() {
        if slot.is_none() {
            *slot = Some(msg);
        }
    }
    shared.has_error.store(true, Ordering::Release);
}

/// CPU time of the calling thread (ns).
pub fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime only writes into the timespec we pass.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
