//! The load engine: pinned worker threads, each with its own event loop and connections,
//! driven by the coordinator through window swaps.

pub mod capi_pool;
pub mod conn;
pub mod connect;
pub mod deadline;
pub mod grpc_pool;
mod grpc_streams;
pub mod http_pool;
pub mod pace;
pub mod pool;
pub mod prefill;
pub mod seq_feed;
pub mod sequence;
pub mod share;
mod sink;
pub mod slots;
pub mod timer;
pub mod turns;
pub mod window;
pub mod wire;
pub mod worker;

pub use deadline::RequestLimits;
pub use share::{split, split_lanes};

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{unbounded, Receiver, Sender};
use mio::{Poll, Waker};

use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::measure::{FailTally, RequestRecord, WindowRecords};
use crate::service::reply_check::ReplyCheck;
use crate::transport::TlsClient;
use capi_pool::CapiPool;
use connect::{ConnectReport, ConnectSummary};
use grpc_pool::GrpcPool;
use http_pool::HttpPool;
use pace::Schedule;
use pool::Pool;
use prefill::{PrefillCap, PrefillGate, PrefillShare};
use seq_feed::SeqPlan;
use slots::OutputSlots;
use turns::TurnSource;
use wire::Wire;
use worker::{Batch, Command, Shared, Worker, WorkerParams, WAKE};

/// Records preallocated per worker (56 bytes each); a pull interval with more completions
/// grows the buffer once and the grown buffer is then recycled.
const RECORDS_PER_WORKER: usize = 1 << 15;
/// How often `collect` checks that the workers it waits for are still alive.
const BATCH_POLL: Duration = Duration::from_millis(500);
/// How often the engine looks for the workers' connect reports.
const CONNECT_POLL: Duration = Duration::from_millis(1);
/// How long a worker may take to hand over its records before a warning says so.
const BATCH_SLOW: Duration = Duration::from_secs(10);

/// What every engine of a run shares.
#[derive(Clone)]
pub struct EngineSpec {
    pub addr: SocketAddr,
    /// Complete request bytes, one entry per input step.
    pub requests: Arc<Vec<Vec<u8>>>,
    /// Keep response bodies (for the profile export).
    pub keep_bodies: bool,
    /// Count failed requests and go on instead of stopping at the first (LLM `profile`).
    pub keep_going: bool,
    /// HTTP/1.1: record each request's HTTP phases (connect, TLS, send, wait, receive) for
    /// `profile`'s `http_req_*` metrics; off, the engine spends nothing on them.
    pub http_trace: bool,
    /// HTTP/1.1: a new connection for every request, closed once its response is in
    /// (AIPerf's `--connection-reuse-strategy never`).
    pub fresh_connections: bool,
    /// HTTP/1.1 and gRPC: time each read by the kernel's receive stamp (`SO_TIMESTAMPNS`);
    /// off, by the worker's clock read after it (the C API has no socket and always uses the
    /// clock).
    pub rx_stamps: bool,
    /// HTTP/1.1 and gRPC over plain TCP: start each request at the kernel's send stamp of
    /// the write carrying its first byte (`SO_TIMESTAMPING`), counting those started by the
    /// clock read just before that write instead (no stamp); `None`: off, every request
    /// starts at that clock read.
    pub tx_stamps: Option<Arc<crate::transport::tx_stamp::Misses>>,
    /// HTTP/1.1 event streams (`profile --streaming`): the packet socket that stamps every
    /// TCP segment from the server, so events that share a read keep their own segment's
    /// time (see `transport::packet_stamps`); `None`: off.
    pub packet_stamps: Option<Arc<crate::transport::packet_stamps::PacketStamps>>,
    pub pin: bool,
    /// Upper bound on worker threads.
    pub max_workers: usize,
    pub clock: Clock,
    /// TLS settings; `None`: plain TCP.
    pub tls: Option<TlsClient>,
    /// HTTP/1.1 or gRPC, and how `requests` are to be sent.
    pub wire: Wire,
    /// Sequence models: the sequence request templates (`requests` then serve only as the
    /// export's steps).
    pub sequences: Option<Arc<SeqPlan>>,
    /// `--shared-memory system`: `requests` hold one variant of each input step per
    /// in-flight slot (see `slots.rs`); `None`: one request per step.
    pub slots: Option<Arc<OutputSlots>>,
    /// HTTP/1 (LLM streams): let data gather for up to this long between polls, so a
    /// wake-up reads several streams' tokens (reads are timed by the kernel's receive
    /// stamps on every HTTP/1.1 and gRPC connection); `None`: read as soon as data arrives.
    pub read_batch: Option<Duration>,
    /// `--request-timeout` (total) and `--request-idle-timeout`: a request past either
    /// fails as timed out (see `deadline.rs`).
    pub request_limits: RequestLimits,
    /// What every successful reply must be (`ReplyCheck::None`: nothing is checked).
    pub reply_check: ReplyCheck,
    /// Largest response body (HTTP/1.1) or gRPC message accepted (bytes,
    /// `--max-response-bytes`); a longer one fails its request with a limit error.
    pub max_response_bytes: usize,
    /// `profile --request-cancellation-rate`: which requests are cancelled, and when.
    pub cancel: Option<Cancel>,
    /// `profile --prefill-concurrency`: requests in prefill at once over all workers, and
    /// how a stream's first token is recognised (HTTP/1.1 only; see `prefill.rs`).
    pub prefill: Option<PrefillCap>,
}

/// Requests cancelled on purpose: the connection of a marked request is closed this long
/// after the request was fully written (HTTP/1.1 pools; found by the timeout sweeps).
#[derive(Clone, Debug, PartialEq)]
pub struct Cancel {
    /// Per request (input step), whether it is cancelled.
    pub marked: Arc<[bool]>,
    pub after: Duration,
}

impl Cancel {
    /// `share` of `steps` requests marked, spread evenly over them.
    pub fn spread(steps: usize, share: f64, after: Duration) -> Cancel {
        let marked = (0..steps)
            .map(|i| ((i + 1) as f64 * share).floor() > (i as f64 * share).floor())
            .collect();
        Cancel { marked, after }
    }

    /// Request `step` is cancelled.
    #[inline]
    pub fn marks(&self, step: usize) -> bool {
        self.marked.get(step).copied().unwrap_or(false)
    }
}

struct WorkerHandle {
    commands: Sender<Command>,
    /// Shared with a C API pool, whose completion callbacks wake the worker with it.
    waker: Arc<Waker>,
    shared: Arc<Shared>,
    join: Option<JoinHandle<()>>,
}

impl WorkerHandle {
    /// The worker thread has returned (or panicked).
    fn ended(&self) -> bool {
        self.join.as_ref().map_or(true, JoinHandle::is_finished)
    }
}

/// A running set of workers holding `concurrency` requests in flight.
pub struct Engine {
    workers: Vec<WorkerHandle>,
    batches: Receiver<Batch>,
    /// Spare buffers handed to workers at the next swap (recycled, so memory stays flat).
    spare: Vec<(Vec<RequestRecord>, Vec<u8>)>,
    /// Closed loop: the workers' connects (opened before any request); `None` in open loop.
    connections: Option<ConnectSummary>,
    /// Closed loop: a worker could not open its connections, as (worker, message).
    connect_error: Option<(usize, String)>,
    /// The workers wait for [`Engine::go`].
    waiting: bool,
}

/// How load is generated.
#[derive(Clone, Debug, PartialEq)]
pub enum Load {
    /// Closed loop: this many requests in flight at all times.
    Concurrency(u64),
    /// `--periodic-concurrency-range`: `start` requests, then `step` more each time every
    /// launched request has had `period` responses, up to `end` (one worker).
    Periodic {
        start: u64,
        end: u64,
        step: u64,
        period: u32,
    },
    /// `--session-concurrency`: `slots` connections, each running one conversation at a
    /// time, its requests composed by `turns` when they may go (see `turns.rs`).
    Sessions { slots: u64, turns: TurnSource },
    /// Open loop: sends at the schedule's times, whatever is in flight.
    Paced {
        schedule: Schedule,
        /// `--max-inflight`: a cap on requests in flight (over all workers); `None`: none.
        max_inflight: Option<u64>,
    },
}

/// Cores this process may run on (respects `taskset`).
pub fn available_cores() -> Vec<core_affinity::CoreId> {
    core_affinity::get_core_ids().unwrap_or_default()
}

impl Engine {
    /// Starts `min(concurrency, max_workers)` workers with `concurrency` connections between
    /// them. `budget`: total requests to send (`--request-count`, warm-up), else unlimited.
    pub fn start(spec: &EngineSpec, concurrency: u64, budget: Option<u64>) -> Result<Engine> {
        Self::start_load(spec, &Load::Concurrency(concurrency), budget)
    }

    /// Starts the workers for `load`: closed loop (`concurrency` requests in flight, split
    /// over `min(concurrency, max_workers)` workers) or open loop (a schedule dealt to
    /// `max_workers` workers, each opening connections or streams as its sends come due).
    pub fn start_load(spec: &EngineSpec, load: &Load, budget: Option<u64>) -> Result<Engine> {
        let mut engine = Self::connect_load(spec, load, budget)?;
        engine.go();
        Ok(engine)
    }

    /// [`Engine::start_load`] up to the first send: in closed loop, returns once every
    /// worker has its connections open (paced, see `connect.rs`) or has given up, and the
    /// workers send nothing before [`Engine::go`]. Open loop starts sending at once.
    pub fn connect_load(spec: &EngineSpec, load: &Load, budget: Option<u64>) -> Result<Engine> {
        if spec.requests.is_empty() {
            return Err(Error::generic("no request to send (empty input data)"));
        }
        let plans = share::worker_plans(spec, load, budget)?;
        let n = plans.len();
        let cores = available_cores();
        let (out_tx, out_rx) = unbounded();
        let mut workers = Vec::with_capacity(n);
        let gate = spec.prefill.map(|p| Arc::new(PrefillGate::new(p.limit)));
        for (params, slots) in plans {
            let core = (spec.pin && !cores.is_empty()).then(|| cores[params.index % cores.len()]);
            let gate = gate.clone();
            workers.push(spawn_for_wire(spec, params, slots, gate, core, &out_tx)?);
        }
        let spare = (0..n)
            .map(|_| (Vec::with_capacity(RECORDS_PER_WORKER), Vec::new()))
            .collect();
        let mut engine = Engine {
            workers,
            batches: out_rx,
            spare,
            connections: None,
            connect_error: None,
            waiting: false,
        };
        if !matches!(load, Load::Paced { .. }) {
            engine.waiting = true;
            engine.await_connected(spec.addr)?;
        }
        Ok(engine)
    }

    /// Waits for every worker's connect report (a worker gives up after the request
    /// timeout), and sums them up.
    fn await_connected(&mut self, addr: SocketAddr) -> Result<()> {
        let mut reports: Vec<Option<ConnectReport>> = vec![None; self.workers.len()];
        while reports.iter().any(Option::is_none) {
            for (i, w) in self.workers.iter().enumerate() {
                if reports[i].is_some() {
                    continue;
                }
                reports[i] = w.shared.connected.lock().ok().and_then(|mut r| r.take());
                if reports[i].is_none() && w.ended() {
                    return Err(Error::generic(format!(
                        "worker thread {i} stopped while connecting"
                    )));
                }
            }
            std::thread::sleep(CONNECT_POLL);
        }
        let reports: Vec<ConnectReport> = reports.into_iter().flatten().collect();
        let summary = ConnectSummary::new(&reports);
        let prefix = format!("cannot connect to {addr}: ");
        self.connect_error = reports.iter().enumerate().find_map(|(i, r)| {
            let why = r.error.as_ref()?;
            let why = why.strip_prefix(&prefix).unwrap_or(why);
            let (opened, planned) = (summary.opened, summary.planned);
            Some((
                i,
                format!("cannot connect to {addr} ({opened} of {planned} connections open): {why}"),
            ))
        });
        self.connections = Some(summary);
        Ok(())
    }

    /// Closed loop: lets the workers send (after [`Engine::connect_load`]).
    pub fn go(&mut self) {
        if !std::mem::take(&mut self.waiting) {
            return;
        }
        for w in &self.workers {
            let _ = w.commands.send(Command::Go);
            let _ = w.waker.wake();
        }
    }

    /// Closed loop: the connects of every worker, made before the first request.
    pub fn connections(&self) -> Option<&ConnectSummary> {
        self.connections.as_ref()
    }

    /// Closed loop: why a worker could not open its connections (naming the address and how
    /// many connections did open).
    pub fn connect_error(&self) -> Option<&str> {
        self.connect_error.as_ref().map(|(_, m)| m.as_str())
    }

    pub fn worker_count(&self) -> usize {
        self.workers.len()
    }

    /// Requests completed so far (as last published by the workers, at most ~1 ms old).
    pub fn completed(&self) -> u64 {
        self.workers
            .iter()
            .map(|w| w.shared.completed.load(Ordering::Relaxed))
            .sum()
    }

    /// Every worker has spent its budget and has nothing in flight.
    pub fn all_finished(&self) -> bool {
        self.workers
            .iter()
            .all(|w| w.shared.finished.load(Ordering::Acquire))
    }

    /// The first error a worker reported, as `(worker index, message)`.
    pub fn first_error(&self) -> Option<(usize, String)> {
        if let Some(e) = &self.connect_error {
            return Some(e.clone());
        }
        self.workers.iter().enumerate().find_map(|(i, w)| {
            if !w.shared.has_error.load(Ordering::Acquire) {
                return None;
            }
            let msg = w.shared.error.lock().ok().and_then(|m| m.clone());
            Some((i, msg.unwrap_or_else(|| "unknown error".into())))
        })
    }

    /// Every worker's failures by kind (as of their last swap, first failure or exit), and
    /// the requests they had completed then (failed ones included).
    pub fn fail_tally(&self) -> (FailTally, u64) {
        let mut all = FailTally::default();
        let mut completed = 0;
        for w in &self.workers {
            if let Ok(t) = w.shared.tally.lock() {
                all.merge(&t.0);
                completed += t.1;
            }
        }
        (all, completed)
    }

    /// Ends a window at `until_ns`: gathers every record that ended by then into `window`
    /// (whose `records` and `bodies` are cleared first; its start/end are left to the caller).
    pub fn collect(&mut self, until_ns: u64, window: &mut WindowRecords) -> Result<()> {
        for w in &self.workers {
            let (fresh, fresh_bodies) = self.spare.pop().unwrap_or_default();
            let cmd = Command::Swap {
                until_ns,
                fresh,
                fresh_bodies,
            };
            if w.commands.send(cmd).is_err() || w.waker.wake().is_err() {
                return Err(Error::generic("a worker thread stopped unexpectedly"));
            }
        }
        window.records.clear();
        window.bodies.clear();
        window.sent = 0;
        window.client_cpu_ns = 0;
        window.workers = self.workers.len() as u32;
        for _ in 0..self.workers.len() {
            let batch = self.next_batch()?;
            self.absorb(batch, window);
        }
        Ok(())
    }

    /// Waits for the next worker's batch for as long as every worker thread is alive: a
    /// worker slowed down by a busy machine answers late, and its records still count. Only
    /// a worker thread that has ended without answering fails the window.
    fn next_batch(&self) -> Result<Batch> {
        let mut waited = Duration::ZERO;
        let mut warned = false;
        loop {
            match self.batches.recv_timeout(BATCH_POLL) {
                Ok(batch) => return Ok(batch),
                Err(crossbeam_channel::RecvTimeoutError::Disconnected) => {
                    return Err(Error::generic("every worker thread stopped unexpectedly"))
                }
                Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
            }
            if let Some(i) = self.workers.iter().position(WorkerHandle::ended) {
                // A batch may have been sent just before the thread ended.
                if let Ok(batch) = self.batches.try_recv() {
                    return Ok(batch);
                }
                return Err(Error::generic(format!(
                    "worker thread {i} stopped without handing over its records"
                )));
            }
            waited += BATCH_POLL;
            if !warned && waited >= BATCH_SLOW {
                warned = true;
                eprintln!(
                    "Warning: a worker thread has not handed over its records for {} s (the machine is busy); still waiting.",
                    waited.as_secs()
                );
            }
        }
    }

    fn absorb(&mut self, mut batch: Batch, window: &mut WindowRecords) {
        window.append_records(&batch.records, &batch.bodies);
        window.sent += batch.sent;
        window.client_cpu_ns += batch.cpu_ns;
        batch.records.clear();
        batch.bodies.clear();
        self.spare.push((batch.records, batch.bodies));
    }

    /// Stops sending new requests; the workers keep running, so requests in flight still
    /// complete and reach the next `collect`.
    pub fn halt(&self) {
        for w in &self.workers {
            let _ = w.commands.send(Command::Halt);
            let _ = w.waker.wake();
        }
    }

    /// Stops sending, lets in-flight requests finish (up to `drain`) and joins the workers.
    /// Records that ended after the last `collect` belong to no window and are dropped.
    pub fn stop(mut self, drain: Duration) {
        self.shutdown(Instant::now() + drain);
    }

    fn shutdown(&mut self, deadline: Instant) {
        for w in &self.workers {
            let _ = w.commands.send(Command::Stop { deadline });
            let _ = w.waker.wake();
        }
        for w in &mut self.workers {
            if let Some(j) = w.join.take() {
                let _ = j.join();
            }
        }
    }
}

/// Starts one worker thread driving the pool of `spec`'s wire, opening `slots` connections
/// (or streams) first; `gate`: the engine's prefill gate, when `spec.prefill` is set.
fn spawn_for_wire(
    spec: &EngineSpec,
    params: WorkerParams,
    slots: usize,
    gate: Option<Arc<PrefillGate>>,
    core: Option<core_affinity::CoreId>,
    out: &Sender<Batch>,
) -> Result<WorkerHandle> {
    let (addr, tls) = (spec.addr, spec.tls.clone());
    if gate.is_some() && !matches!(spec.wire, Wire::Http1) {
        return Err(Error::generic(
            "the prefill cap needs HTTP/1.1 event streams (--streaming)",
        ));
    }
    match &spec.wire {
        Wire::Http1 => {
            let (poll, waker) = worker_poll()?;
            let prefill = gate.zip(spec.prefill).map(|(gate, cap)| {
                PrefillShare::new(gate, cap.is_token, params.index, waker.clone())
            });
            let pool = HttpPool::new(addr, tls, slots)
                .with_rx_stamps(spec.rx_stamps)
                .with_tx_stamps(spec.tx_stamps.clone())
                .with_packet_stamps(spec.packet_stamps.clone())
                .with_reply_check(spec.reply_check.clone())
                .with_max_response(spec.max_response_bytes)
                .with_prefill(prefill)
                .with_trace(spec.http_trace.then_some(spec.clock))
                .with_fresh_connections(spec.fresh_connections);
            spawn_worker_on(params, pool, (poll, waker), core, out)
        }
        Wire::Grpc(wire) => {
            let pool = GrpcPool::new(addr, tls, wire.clone(), slots)
                .with_rx_stamps(spec.rx_stamps)
                .with_tx_stamps(spec.tx_stamps.clone())
                .with_packet_stamps(spec.packet_stamps.clone())
                .with_reply_check(spec.reply_check.clone())
                .with_max_response(spec.max_response_bytes);
            spawn_worker(params, pool, core, out)
        }
        Wire::Capi(wire) => {
            let (poll, waker) = worker_poll()?;
            let keep = spec.keep_bodies;
            let pool = CapiPool::new(wire.clone(), waker.clone(), spec.clock, keep, slots);
            spawn_worker_on(params, pool, (poll, waker), core, out)
        }
    }
}

/// A worker's event loop and the waker of its WAKE token.
fn worker_poll() -> Result<(Poll, Arc<Waker>)> {
    let poll = Poll::new()?;
    let waker = Arc::new(Waker::new(poll.registry(), WAKE)?);
    Ok((poll, waker))
}

/// Starts one pinned worker thread driving `pool`.
fn spawn_worker<P: Pool>(
    params: WorkerParams,
    pool: P,
    core: Option<core_affinity::CoreId>,
    out: &Sender<Batch>,
) -> Result<WorkerHandle> {
    spawn_worker_on(params, pool, worker_poll()?, core, out)
}

/// Starts one pinned worker thread driving `pool` on an event loop made beforehand (a C API
/// pool needs the loop's waker when it is built).
fn spawn_worker_on<P: Pool>(
    params: WorkerParams,
    pool: P,
    (poll, waker): (Poll, Arc<Waker>),
    core: Option<core_affinity::CoreId>,
    out: &Sender<Batch>,
) -> Result<WorkerHandle> {
    let (cmd_tx, cmd_rx) = unbounded();
    let shared = Arc::new(Shared::default());
    let index = params.index;
    let w = Worker::new(params, pool, poll, shared.clone(), out.clone());
    let join = std::thread::Builder::new()
        .name(format!("inferperf-worker-{index}"))
        .spawn(move || {
            if let Some(core) = core {
                core_affinity::set_for_current(core);
            }
            w.run(cmd_rx)
        })?;
    Ok(WorkerHandle {
        commands: cmd_tx,
        waker,
        shared,
        join: Some(join),
    })
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.shutdown(Instant::now());
    }
}

#[cfg(test)]
mod tls_tests;
