//! The load engine: pinned worker threads, each with its own event loop and connections,
//! driven by the coordinator through window swaps.

pub mod capi_pool;
pub mod conn;
pub mod grpc_pool;
mod grpc_streams;
pub mod http_pool;
pub mod pace;
pub mod pool;
pub mod seq_feed;
pub mod sequence;
pub mod slots;
pub mod timer;
pub mod turns;
pub mod window;
pub mod wire;
pub mod worker;

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{unbounded, Receiver, Sender};
use mio::{Poll, Waker};

use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::measure::{RequestRecord, WindowRecords};
use crate::transport::TlsClient;
use capi_pool::CapiPool;
use grpc_pool::GrpcPool;
use http_pool::HttpPool;
use pace::Schedule;
use pool::{Pace, Pool, Ramp};
use seq_feed::{SeqFeed, SeqPlan};
use slots::{OutputSlots, SlotShare};
use turns::{TurnFeed, TurnSource};
use wire::Wire;
use worker::{Batch, Command, Shared, Worker, WorkerParams, WAKE};

/// Records preallocated per worker (56 bytes each); a pull interval with more completions
/// grows the buffer once and the grown buffer is then recycled.
const RECORDS_PER_WORKER: usize = 1 << 15;
/// How often `collect` checks that the workers it waits for are still alive.
const BATCH_POLL: Duration = Duration::from_millis(500);
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
    /// HTTP/1 (LLM streams): time reads by the kernel's receive stamps (plain TCP) and let
    /// data gather for up to this long between polls, so a wake-up reads several streams'
    /// tokens; `None`: read as soon as data arrives, timed at the read.
    pub read_batch: Option<Duration>,
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

/// Connections (or gRPC slots) a paced worker opens before its first send; more open as
/// sends come due with none free.
const PACED_INITIAL_SLOTS: usize = 4;
/// Sends start this long after the engine starts, so every worker is ready for the first.
const PACED_LEAD_NS: u64 = 2_000_000;

/// Each worker's initial slots and, when paced, its schedule.
fn worker_shares(spec: &EngineSpec, load: &Load) -> Vec<(usize, Option<Pace>)> {
    match load {
        Load::Periodic { start, .. } => vec![(*start as usize, None)],
        Load::Concurrency(c) | Load::Sessions { slots: c, .. } => {
            let n = (*c as usize).clamp(1, spec.max_workers.max(1));
            split(*c, n)
                .into_iter()
                .map(|s| (s as usize, None))
                .collect()
        }
        Load::Paced {
            schedule,
            max_inflight,
        } => {
            let mut n = spec.max_workers.max(1);
            if let (Some(m), Some(_)) = (max_inflight, &spec.slots) {
                // Slots are sized to --max-inflight: no worker may get a share of more than
                // that in all (which `m.max(n)` below would give when m < n).
                n = n.min((*m).max(1) as usize);
            }
            // Sequence models: one lane of the schedule per sequence, and no worker without
            // a sequence (perf_analyzer: min(threads, sequences)).
            let lanes = spec
                .sequences
                .as_ref()
                .map_or(n, |p| p.open_loop_slots.max(1));
            n = n.min(lanes);
            let origin_ns = spec.clock.now_ns() + PACED_LEAD_NS;
            let caps = max_inflight.map(|m| split(m.max(n as u64), n));
            pace::deal_lanes(schedule, n, lanes)
                .into_iter()
                .enumerate()
                .map(|(i, plan)| {
                    let cap = caps.as_ref().map(|c| c[i] as usize);
                    let slots = cap.map_or(PACED_INITIAL_SLOTS, |c| c.min(PACED_INITIAL_SLOTS));
                    (slots, Some(Pace::new(plan, origin_ns, cap)))
                })
                .collect()
        }
    }
}

/// Output slots: each worker's share (its first global slot), from the most requests each
/// worker may have in flight; all `None` without slots.
fn slot_shares(
    spec: &EngineSpec,
    load: &Load,
    shares: &[(usize, Option<Pace>)],
) -> Result<Vec<Option<SlotShare>>> {
    let Some(slots) = &spec.slots else {
        return Ok(vec![None; shares.len()]);
    };
    let most = shares
        .iter()
        .map(|(initial, pace)| match (load, pace) {
            (Load::Periodic { end, .. }, _) => Ok(*end as usize),
            (_, Some(p)) => p.max_inflight.ok_or_else(|| {
                Error::usage("shared memory output slots need --max-inflight in rate modes")
            }),
            (_, None) => Ok(*initial),
        })
        .collect::<Result<Vec<usize>>>()?;
    Ok(slots::bases(&most, slots.count())?
        .into_iter()
        .map(|base| {
            Some(SlotShare {
                slots: slots.clone(),
                base,
            })
        })
        .collect())
}

/// Sequence models: each worker's sequences (closed loop: one per slot; open loop:
/// `--num-of-sequences` split over the workers, worker w holding the schedule's lanes w,
/// w + workers, ... in that order, see `pace::deal_lanes`).
fn seq_feeds(spec: &EngineSpec, shares: &[(usize, Option<Pace>)]) -> Result<Vec<SeqFeed>> {
    let Some(plan) = &spec.sequences else {
        return Ok(Vec::new());
    };
    let open_loop = shares.iter().any(|(_, pace)| pace.is_some());
    let slots: Vec<usize> = if open_loop {
        split(plan.open_loop_slots as u64, shares.len())
            .into_iter()
            .map(|s| s.max(1) as usize)
            .collect()
    } else {
        shares.iter().map(|(slots, _)| *slots).collect()
    };
    SeqFeed::split(plan, &slots, open_loop)
}

/// Splits `total` into `parts` shares the way perf_analyzer splits concurrency over threads:
/// `total / parts` each, one more for the first `total % parts`.
pub fn split(total: u64, parts: usize) -> Vec<u64> {
    let parts = parts.max(1) as u64;
    (0..parts)
        .map(|i| total / parts + u64::from(i < total % parts))
        .collect()
}

/// Splits `total` sends dealt round robin to `lanes` lanes, lane `l` on worker `l % parts`
/// (see `pace::deal_lanes`): how many of the first `total` sends each worker makes.
pub fn split_lanes(total: u64, parts: usize, lanes: usize) -> Vec<u64> {
    let parts = parts.max(1);
    let lanes = lanes.max(parts) as u64;
    let per_lane = |l: u64| total / lanes + u64::from(l < total % lanes);
    let mut out = vec![0u64; parts];
    for l in 0..lanes {
        out[(l % parts as u64) as usize] += per_lane(l);
    }
    out
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
        if spec.requests.is_empty() {
            return Err(Error::generic("no request to send (empty input data)"));
        }
        let shares = worker_shares(spec, load);
        let n = shares.len();
        let mut slot_shares = slot_shares(spec, load, &shares)?.into_iter();
        let mut seq_feeds = seq_feeds(spec, &shares)?.into_iter();
        let fixed = matches!(
            load,
            Load::Paced {
                schedule: Schedule::Fixed(_),
                ..
            }
        );
        let budgets = budget.map(|b| match (load, &spec.sequences) {
            // Sequences in open loop: each worker sends for its lanes of the schedule.
            (Load::Paced { .. }, Some(p)) => split_lanes(b, n, p.open_loop_slots.max(1)),
            _ => split(b, n),
        });
        let cores = available_cores();
        let (out_tx, out_rx) = unbounded();
        let mut workers = Vec::with_capacity(n);
        for (i, (slots, pace)) in shares.into_iter().enumerate() {
            let params = WorkerParams {
                index: i,
                requests: spec.requests.clone(),
                budget: budgets.as_ref().map(|b| b[i]),
                keep_bodies: spec.keep_bodies,
                keep_going: spec.keep_going,
                clock: spec.clock,
                records: Vec::with_capacity(RECORDS_PER_WORKER),
                first_step: i,
                pace,
                seq: seq_feeds.next(),
                stride: if fixed { n } else { 1 },
                ramp: match load {
                    Load::Periodic {
                        start,
                        end,
                        step,
                        period,
                    } => Some(Ramp::new(
                        *start as usize,
                        *end as usize,
                        *step as usize,
                        *period,
                    )),
                    _ => None,
                },
                slots: slot_shares.next().flatten(),
                read_batch: spec.read_batch,
                turns: match load {
                    Load::Sessions { turns, .. } => Some(TurnFeed::new(turns.0.worker(slots))),
                    _ => None,
                },
            };
            let core = (spec.pin && !cores.is_empty()).then(|| cores[i % cores.len()]);
            let (addr, tls) = (spec.addr, spec.tls.clone());
            let handle = match &spec.wire {
                Wire::Http1 => {
                    let pool =
                        HttpPool::new(addr, tls, slots).with_rx_stamps(spec.read_batch.is_some());
                    spawn_worker(params, pool, core, &out_tx)?
                }
                Wire::Grpc(wire) => {
                    let pool = GrpcPool::new(addr, tls, wire.clone(), slots)
                        .with_rx_stamps(spec.read_batch.is_some());
                    spawn_worker(params, pool, core, &out_tx)?
                }
                Wire::Capi(wire) => {
                    let (poll, waker) = worker_poll()?;
                    let keep = spec.keep_bodies;
                    let pool = CapiPool::new(wire.clone(), waker.clone(), spec.clock, keep, slots);
                    spawn_worker_on(params, pool, (poll, waker), core, &out_tx)?
                }
            };
            workers.push(handle);
        }
        let spare = (0..n)
            .map(|_| (Vec::with_capacity(RECORDS_PER_WORKER), Vec::new()))
            .collect();
        Ok(Engine {
            workers,
            batches: out_rx,
            spare,
        })
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
        self.workers.iter().enumerate().find_map(|(i, w)| {
            if !w.shared.has_error.load(Ordering::Acquire) {
                return None;
            }
            let msg = w.shared.error.lock().ok().and_then(|m| m.clone());
            Some((i, msg.unwrap_or_else(|| "unknown error".into())))
        })
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

#[cfg(test)]
mod tests {
    use super::*;

    fn spec_with_slots(max_workers: usize, slots: usize) -> EngineSpec {
        EngineSpec {
            addr: "127.0.0.1:1".parse().unwrap(),
            requests: Arc::new(vec![vec![0]; slots]),
            keep_bodies: false,
            keep_going: false,
            pin: false,
            max_workers,
            clock: Clock::new(),
            tls: None,
            wire: Wire::Http1,
            sequences: None,
            slots: Some(Arc::new(OutputSlots::new(slots, Vec::new()).unwrap())),
            read_batch: None,
        }
    }

    fn bases_for(spec: &EngineSpec, load: &Load) -> Result<Vec<usize>> {
        let shares = worker_shares(spec, load);
        let out = slot_shares(spec, load, &shares)?;
        Ok(out
            .into_iter()
            .map(|s| s.map_or(usize::MAX, |s| s.base))
            .collect())
    }

    #[test]
    fn workers_own_disjoint_slot_ranges() {
        let paced = |max_inflight| Load::Paced {
            schedule: pace::Schedule::Constant { rate: 100.0 },
            max_inflight,
        };
        let periodic = Load::Periodic {
            start: 1,
            end: 6,
            step: 1,
            period: 2,
        };
        // (workers, slots, load, bases or None for an error)
        let rows: Vec<(usize, usize, Load, Option<Vec<usize>>)> = vec![
            (2, 5, Load::Concurrency(5), Some(vec![0, 3])),
            (4, 8, Load::Concurrency(3), Some(vec![0, 1, 2])),
            (2, 4, Load::Concurrency(5), None),
            (2, 3, paced(Some(3)), Some(vec![0, 2])),
            // Fewer slots than workers: only as many workers as slots.
            (4, 1, paced(Some(1)), Some(vec![0])),
            (2, 3, paced(None), None),
            (2, 6, periodic, Some(vec![0])),
        ];
        for (workers, slots, load, want) in rows {
            let spec = spec_with_slots(workers, slots);
            assert_eq!(bases_for(&spec, &load).ok(), want, "{load:?} {workers}");
        }
        let mut plain = spec_with_slots(2, 1);
        plain.slots = None;
        assert_eq!(
            bases_for(&plain, &Load::Concurrency(4)).unwrap(),
            vec![usize::MAX; 2]
        );
    }

    #[test]
    fn split_matches_perf_analyzer() {
        assert_eq!(split(4, 2), vec![2, 2]);
        assert_eq!(split(5, 2), vec![3, 2]);
        assert_eq!(split(1, 3), vec![1, 0, 0]);
        assert_eq!(split(7, 3), vec![3, 2, 2]);
        assert_eq!(split(0, 1), vec![0]);
    }

    #[test]
    fn split_lanes_counts_each_workers_sends() {
        // (total, workers, lanes, expected): send i goes to worker (i % lanes) % workers.
        let rows: &[(u64, usize, usize, &[u64])] = &[
            (120, 2, 5, &[72, 48]),
            (7, 2, 5, &[4, 3]),
            (10, 2, 4, &[5, 5]),
            (9, 3, 3, &[3, 3, 3]),
            (3, 1, 4, &[3]),
        ];
        for &(total, workers, lanes, want) in rows {
            let brute = (0..total).fold(vec![0u64; workers], |mut acc, i| {
                acc[(i as usize % lanes) % workers] += 1;
                acc
            });
            assert_eq!(brute, want, "{total} {workers} {lanes}");
            assert_eq!(split_lanes(total, workers, lanes), want);
        }
    }
}
