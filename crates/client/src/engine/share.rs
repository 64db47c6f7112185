//! How a load is divided among the workers: each worker's initial connections, schedule
//! lanes, request budget, output slots and sequences.

use crate::config::PA_MAX_INFLIGHT;
use crate::error::{Error, Result};

use super::pace::{self, Schedule};
use super::pool::{Pace, Ramp};
use super::seq_feed::SeqFeed;
use super::slots::{self, SlotShare};
use super::turns::TurnFeed;
use super::worker::WorkerParams;
use super::{EngineSpec, Load, RECORDS_PER_WORKER};

/// Each worker's parameters and how many connections (or streams) it opens first.
pub(super) fn worker_plans(
    spec: &EngineSpec,
    load: &Load,
    budget: Option<u64>,
) -> Result<Vec<(WorkerParams, usize)>> {
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
    let plans = shares.into_iter().enumerate().map(|(i, (slots, pace))| {
        let params = WorkerParams {
            index: i,
            requests: spec.requests.clone(),
            budget: budgets.as_ref().map(|b| b[i]),
            keep_bodies: spec.keep_bodies,
            keep_going: spec.keep_going,
            http_trace: spec.http_trace,
            clock: spec.clock,
            records: Vec::with_capacity(RECORDS_PER_WORKER),
            first_step: i,
            pace,
            seq: seq_feeds.next(),
            // Workers interleave through the inputs (worker i sends i, i + n, ...), as
            // perf_analyzer's threads do, so each entry of a dataset goes once per pass.
            stride: if fixed || spec.requests.len() > 1 {
                n
            } else {
                1
            },
            ramp: ramp(load),
            slots: slot_shares.next().flatten(),
            read_batch: spec.read_batch,
            request_limits: spec.request_limits,
            cancel: spec.cancel.clone(),
            turns: match load {
                Load::Sessions { turns, .. } => Some(TurnFeed::new(turns.0.worker(slots))),
                _ => None,
            },
        };
        (params, slots)
    });
    Ok(plans.collect())
}

/// `--periodic-concurrency-range`: the worker's ramp; `None` for other loads.
fn ramp(load: &Load) -> Option<Ramp> {
    match load {
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
    }
}

/// Connections (or gRPC slots) a paced worker opens before its first send; more open as
/// sends come due with none free.
const PACED_INITIAL_SLOTS: usize = 4;

/// Open loop without `--max-inflight`, `profile`: requests one worker may have in flight.
/// LLM requests last seconds, so many are in flight at moderate rates; the bound keeps
/// memory and connections finite (each is a connection over HTTP/1.1).
const PROFILE_MAX_INFLIGHT: usize = 2048;

/// The per-worker in-flight cap of an open loop without `--max-inflight`: `PA_MAX_INFLIGHT`
/// in perf_analyzer mode, `PROFILE_MAX_INFLIGHT` in `profile` (keep-going).
fn default_cap(spec: &EngineSpec) -> usize {
    if spec.keep_going {
        PROFILE_MAX_INFLIGHT
    } else {
        PA_MAX_INFLIGHT
    }
}
/// Sends start this long after the engine starts, so every worker is ready for the first.
const PACED_LEAD_NS: u64 = 2_000_000;

/// Each worker's initial slots and, when paced, its schedule.
fn worker_shares(spec: &EngineSpec, load: &Load) -> Vec<(usize, Option<Pace>)> {
    match load {
        Load::Periodic { start, .. } => vec![(*start as usize, None)],
        Load::Sessions { slots, turns } if turns.0.one_worker() => vec![(*slots as usize, None)],
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
                    let cap = caps.as_ref().map_or(default_cap(spec), |c| c[i] as usize);
                    let slots = cap.min(PACED_INITIAL_SLOTS);
                    (slots, Some(Pace::new(plan, origin_ns, Some(cap))))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::Clock;
    use crate::engine::slots::OutputSlots;
    use crate::engine::wire::Wire;
    use std::sync::Arc;

    fn spec_with_slots(max_workers: usize, slots: usize) -> EngineSpec {
        EngineSpec {
            addr: "127.0.0.1:1".parse().unwrap(),
            requests: Arc::new(vec![vec![0]; slots]),
            keep_bodies: false,
            keep_going: false,
            http_trace: false,
            rx_stamps: true,
            tx_stamps: Some(Default::default()),
            packet_stamps: None,
            fresh_connections: false,
            pin: false,
            max_workers,
            clock: Clock::new(),
            tls: None,
            wire: Wire::Http1,
            sequences: None,
            slots: Some(Arc::new(OutputSlots::new(slots, Vec::new()).unwrap())),
            read_batch: None,
            request_limits: Default::default(),
            reply_check: Default::default(),
            max_response_bytes: crate::protocol::http1::DEFAULT_MAX_RESPONSE_BYTES,
            cancel: None,
            prefill: None,
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
