//! Open-loop schedules as pure functions: when each request is meant to be sent.
//!
//! One global schedule of send offsets (ns from the start of a load level) is built, then dealt
//! round-robin to the workers as perf_analyzer deals it to its threads; each worker's list
//! repeats with the period of the whole schedule, so any run length is covered. The schedule
//! is data: the engine asks [`WorkerSchedule::peek`] when the next send is due and
//! [`WorkerSchedule::advance`] once it has sent.

use crate::inputs::Rng;

const NS_PER_S: f64 = 1e9;

/// The shape of a schedule (`--request-distribution`, `--request-intervals`,
/// `--fixed-schedule`).
#[derive(Debug, Clone, PartialEq)]
pub enum Schedule {
    /// Evenly spaced sends at `rate` per second.
    Constant { rate: f64 },
    /// Exponential gaps at mean `rate` per second, from a seeded generator, generated up to
    /// `horizon_ns` and then repeated.
    Poisson {
        rate: f64,
        seed: u64,
        horizon_ns: u64,
    },
    /// Gamma-distributed gaps at mean `rate` per second with shape `shape` (coefficient of
    /// variation 1/sqrt(shape): 1 is Poisson, larger is smoother, smaller burstier), from a
    /// seeded generator, generated up to `horizon_ns` and then repeated.
    Gamma {
        rate: f64,
        shape: f64,
        seed: u64,
        horizon_ns: u64,
    },
    /// `--request-intervals`: gaps (ns) in file order, looped.
    Intervals(Vec<u64>),
    /// `--fixed-schedule`: absolute send offsets (ns), each sent once.
    Fixed(Vec<u64>),
}

/// One worker's share of a schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerSchedule {
    /// Send offsets (ns) within the first period, ascending.
    times: Vec<u64>,
    /// Length of one period (ns); `None`: the list is sent once (fixed schedule).
    period: Option<u64>,
    index: usize,
    round: u64,
}

impl WorkerSchedule {
    /// The offset (ns from the level start) of the next send; `None` when a one-shot list is
    /// used up (or empty).
    #[inline]
    pub fn peek(&self) -> Option<u64> {
        let t = *self.times.get(self.index)?;
        match self.period {
            Some(p) => Some(t.saturating_add(p.saturating_mul(self.round))),
            None => Some(t),
        }
    }

    /// Moves past the send `peek` returned.
    #[inline]
    pub fn advance(&mut self) {
        self.index += 1;
        if self.index == self.times.len() && self.period.is_some() {
            self.index = 0;
            self.round += 1;
        }
    }

    /// Sends left in a one-shot list (`None` for a repeating schedule).
    pub fn remaining(&self) -> Option<usize> {
        self.period.map_or(
            Some(self.times.len() - self.index.min(self.times.len())),
            |_| None,
        )
    }
}

/// The schedule's send offsets (ns, ascending) within one period, and the period.
fn global_times(schedule: &Schedule, workers: usize) -> (Vec<u64>, Option<u64>) {
    match schedule {
        Schedule::Constant { rate } => {
            // One send per worker and period, as perf_analyzer: worker k sends at
            // (k+1)/rate + n * workers/rate.
            let gap = gap_ns(*rate);
            let times = (1..=workers as u64).map(|k| k * gap).collect();
            (times, Some(gap * workers as u64))
        }
        Schedule::Poisson {
            rate,
            seed,
            horizon_ns,
        } => {
            let mut rng = Rng::new(*seed);
            let mean = NS_PER_S / rate.max(1e-9);
            let mut t = 0u64;
            let mut times = Vec::new();
            while t < (*horizon_ns).max(1) && times.len() < MAX_SCHEDULE_LEN {
                t += exponential(&mut rng, mean).max(1);
                times.push(t);
            }
            let period = t;
            (times, Some(period))
        }
        Schedule::Gamma {
            rate,
            shape,
            seed,
            horizon_ns,
        } => {
            let mut rng = Rng::new(*seed);
            let mean = NS_PER_S / rate.max(1e-9);
            let shape = shape.max(1e-3);
            let mut t = 0u64;
            let mut times = Vec::new();
            while t < (*horizon_ns).max(1) && times.len() < MAX_SCHEDULE_LEN {
                t += ((gamma(&mut rng, shape) * mean / shape) as u64).max(1);
                times.push(t);
            }
            (times, Some(t))
        }
        Schedule::Intervals(gaps) => {
            // Cumulative sums, looping through the file until the worker index and the
            // interval index wrap together (perf_analyzer's rule).
            let mut times = Vec::new();
            let mut t = 0u64;
            let n = gaps.len().max(1);
            let rounds = lcm(n, workers.max(1)) / n;
            for _ in 0..rounds {
                for g in gaps {
                    t = t.saturating_add((*g).max(1));
                    times.push(t);
                }
            }
            (times, Some(t.max(1)))
        }
        Schedule::Fixed(offsets) => {
            let mut times = offsets.clone();
            times.sort_unstable();
            (times, None)
        }
    }
}

/// Longest generated schedule (sends), a bound on memory for very high rates.
const MAX_SCHEDULE_LEN: usize = 1 << 22;

fn gap_ns(rate: f64) -> u64 {
    ((NS_PER_S / rate.max(1e-9)).round() as u64).max(1)
}

/// An exponential variate with mean `mean` (ns), by inversion of a uniform in (0, 1].
fn exponential(rng: &mut Rng, mean: f64) -> u64 {
    let u = crate::random::unit_open0(rng.next_u64());
    (-u.ln() * mean) as u64
}

/// A uniform variate in (0, 1].
fn unit(rng: &mut Rng) -> f64 {
    crate::random::unit_open0(rng.next_u64())
}

/// A standard normal variate (Box-Muller).
fn normal(rng: &mut Rng) -> f64 {
    let (u, v) = (unit(rng), unit(rng));
    (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
}

/// A Gamma(`shape`, 1) variate (mean `shape`): Marsaglia and Tsang's squeeze method, with
/// the boost `G(a) = G(a + 1) U^(1/a)` for shapes below 1.
fn gamma(rng: &mut Rng, shape: f64) -> f64 {
    if shape < 1.0 {
        let boost = unit(rng).powf(1.0 / shape);
        return gamma(rng, shape + 1.0) * boost;
    }
    let d = shape - 1.0 / 3.0;
    let c = 1.0 / (9.0 * d).sqrt();
    loop {
        let x = normal(rng);
        let v = 1.0 + c * x;
        if v <= 0.0 {
            continue;
        }
        let v = v * v * v;
        let u = unit(rng);
        if u.ln() < 0.5 * x * x + d - d * v + d * v.ln() {
            return d * v;
        }
    }
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

fn lcm(a: usize, b: usize) -> usize {
    a / gcd(a, b) * b
}

/// Deals the schedule round-robin to `workers` workers: send i goes to worker `i % workers`.
pub fn deal(schedule: &Schedule, workers: usize) -> Vec<WorkerSchedule> {
    deal_lanes(schedule, workers, workers)
}

/// Deals the schedule round-robin to `lanes` lanes (send i to lane `i % lanes`), lane `l`
/// belonging to worker `l % workers`; `lanes` is at least `workers`. Sequence models use one
/// lane per sequence, so every sequence gets every `lanes`-th send even when the sequences
/// do not split evenly over the workers: worker w's sends then go to its lanes w, w +
/// workers, ... in turn. With more lanes than workers a repeating schedule is cut to whole
/// turns of the lanes, so each period deals the lanes alike.
pub fn deal_lanes(schedule: &Schedule, workers: usize, lanes: usize) -> Vec<WorkerSchedule> {
    let workers = workers.max(1);
    let lanes = lanes.max(workers);
    let (mut times, mut period) = global_times(schedule, lanes);
    if lanes > workers && period.is_some() && times.len() > lanes {
        times.truncate(times.len() - times.len() % lanes);
        // Every repeating schedule's period ends at its last send.
        period = times.last().copied();
    }
    let mut out: Vec<WorkerSchedule> = (0..workers)
        .map(|_| WorkerSchedule {
            times: Vec::with_capacity(times.len() / workers + 1),
            period,
            index: 0,
            round: 0,
        })
        .collect();
    for (i, t) in times.into_iter().enumerate() {
        out[(i % lanes) % workers].times.push(t);
    }
    // A repeating worker with no send in a period (fewer sends than workers) never sends.
    if period.is_some() {
        for w in &mut out {
            if w.times.is_empty() {
                w.period = None;
            }
        }
    }
    out
}

/// The request rate a schedule stands for (sends per second), as perf_analyzer reports it for
/// custom intervals: sends over the summed gaps.
pub fn nominal_rate(schedule: &Schedule) -> f64 {
    match schedule {
        Schedule::Constant { rate }
        | Schedule::Poisson { rate, .. }
        | Schedule::Gamma { rate, .. } => *rate,
        Schedule::Intervals(gaps) => {
            let total: u64 = gaps.iter().sum();
            if total == 0 {
                0.0
            } else {
                gaps.len() as f64 * NS_PER_S / total as f64
            }
        }
        Schedule::Fixed(_) => 0.0,
    }
}

#[cfg(test)]
#[path = "pace_tests.rs"]
mod tests;
