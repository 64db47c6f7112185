//! AIPerf's time-weighted metrics: effective and active concurrency, prefill/decode/total
//! throughput (also per user) and tokens in flight, as step functions of time over the run's
//! window (AIPerf 0.13's sweep-line metrics, same definitions and units).
//!
//! Every request holds intervals: in flight [start, end), prefill [start, first chunk) and
//! decode [first chunk, end). A sweep over the interval edges, ends before starts at equal
//! times, gives step functions:
//! - concurrency: requests in flight (failed ones too); prefill and decode concurrency:
//!   successful streamed requests in that phase;
//! - prefill throughput: each request adds ISL / (first chunk − start) over its prefill;
//! - decode throughput: each non-zero gap between two chunks of a request carries
//!   (OSL − 1) / (its non-zero gaps) tokens spread evenly over the gap (when no request of the
//!   run has two chunks: (OSL − 1) / (end − first chunk) over the whole decode);
//! - total throughput: prefill rate plus the whole-decode rate (OSL − 1) / (end − first chunk);
//! - per user: the throughput divided by the phase's concurrency (0 while it has none);
//! - tokens in flight: ISL from the start, then 1 token at the first chunk and
//!   (OSL − 1) / (chunk gaps) at each later chunk, all released at the end.
//!
//! `effective_*` (and tokens in flight) are the time-weighted statistics of a curve over the
//! whole window; `active_*` only over the times when the phase has a request in it (total:
//! when any request is in flight). avg and std are weighted by duration; pN is the smallest
//! value held for at least N % of the weighted time. Without streaming there is no first
//! token, so only the concurrency curve has values. Times are handled as ns after the
//! first request's start, so the ns-since-epoch clock keeps its precision; rates come out per
//! second. Sorting the edges makes the whole computation O(n log n) in requests plus chunks.

use super::record::LlmRequest;

/// ns per second: the rates are tokens/ns inside.
const NS_PER_S: f64 = 1e9;

/// Time-weighted statistics of one curve, in its display unit.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TimeStats {
    pub avg: f64,
    pub min: f64,
    pub max: f64,
    pub p50: f64,
    pub p90: f64,
    pub p95: f64,
    pub p99: f64,
    /// Time-weighted population standard deviation.
    pub std: f64,
}

impl TimeStats {
    fn scaled(self, k: f64) -> TimeStats {
        TimeStats {
            avg: self.avg * k,
            min: self.min * k,
            max: self.max * k,
            p50: self.p50 * k,
            p90: self.p90 * k,
            p95: self.p95 * k,
            p99: self.p99 * k,
            std: self.std * k,
        }
    }

    /// `(statistic, value)` in the order AIPerf's JSON writes them.
    pub fn named(&self) -> [(&'static str, f64); 8] {
        [
            ("avg", self.avg),
            ("p50", self.p50),
            ("p90", self.p90),
            ("p95", self.p95),
            ("p99", self.p99),
            ("min", self.min),
            ("max", self.max),
            ("std", self.std),
        ]
    }
}

/// AIPerf's console table a metric belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Group {
    /// "LLM Metrics: Effective": weighted over the whole window.
    Effective,
    /// "LLM Metrics: Active": weighted over the phase's busy time only.
    Active,
}

/// One time-weighted metric under AIPerf's tag, header and unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SweepDef {
    pub tag: &'static str,
    pub header: &'static str,
    pub unit: &'static str,
    pub group: Group,
}

const fn sweep_def(
    tag: &'static str,
    header: &'static str,
    unit: &'static str,
    group: Group,
) -> SweepDef {
    SweepDef {
        tag,
        header,
        unit,
        group,
    }
}

/// The metrics, in AIPerf's JSON order; [`Sweeps::stats`] follows it.
pub const SWEEP_METRICS: [SweepDef; 14] = [
    sweep_def(
        "effective_concurrency",
        "Effective Concurrency",
        "requests",
        Group::Effective,
    ),
    sweep_def(
        "effective_decode_throughput",
        "Effective Decode Throughput",
        "tokens/sec",
        Group::Effective,
    ),
    sweep_def(
        "effective_prefill_throughput",
        "Effective Prefill Throughput",
        "tokens/sec",
        Group::Effective,
    ),
    sweep_def(
        "effective_decode_concurrency",
        "Effective Decode Concurrency",
        "requests",
        Group::Effective,
    ),
    sweep_def(
        "effective_prefill_concurrency",
        "Effective Prefill Concurrency",
        "requests",
        Group::Effective,
    ),
    sweep_def(
        "effective_total_throughput",
        "Effective Total Throughput",
        "tokens/sec",
        Group::Effective,
    ),
    sweep_def(
        "effective_decode_throughput_per_user",
        "Effective Decode Throughput Per User",
        "tokens/sec/user",
        Group::Effective,
    ),
    sweep_def(
        "effective_prefill_throughput_per_user",
        "Effective Prefill Throughput Per User",
        "tokens/sec/user",
        Group::Effective,
    ),
    sweep_def(
        "tokens_in_flight",
        "Tokens In Flight",
        "tokens",
        Group::Effective,
    ),
    sweep_def(
        "active_decode_throughput",
        "Active Decode Throughput",
        "tokens/sec",
        Group::Active,
    ),
    sweep_def(
        "active_prefill_throughput",
        "Active Prefill Throughput",
        "tokens/sec",
        Group::Active,
    ),
    sweep_def(
        "active_decode_throughput_per_user",
        "Active Decode Throughput Per User",
        "tokens/sec/user",
        Group::Active,
    ),
    sweep_def(
        "active_prefill_throughput_per_user",
        "Active Prefill Throughput Per User",
        "tokens/sec/user",
        Group::Active,
    ),
    sweep_def(
        "active_total_throughput",
        "Active Total Throughput",
        "tokens/sec",
        Group::Active,
    ),
];

/// The time-weighted metrics of a run.
#[derive(Clone, Debug, PartialEq)]
pub struct Sweeps {
    /// The window the statistics cover (ns since the epoch).
    pub window_ns: (u64, u64),
    /// One entry per [`SWEEP_METRICS`] entry, same order, in display units.
    pub stats: [TimeStats; 14],
}

impl Sweeps {
    /// The statistics of `tag`.
    pub fn get(&self, tag: &str) -> Option<&TimeStats> {
        SWEEP_METRICS
            .iter()
            .position(|d| d.tag == tag)
            .map(|i| &self.stats[i])
    }

    /// Every metric with its statistics, in AIPerf's order.
    pub fn rows(&self) -> impl Iterator<Item = (&'static SweepDef, &TimeStats)> {
        SWEEP_METRICS.iter().zip(self.stats.iter())
    }
}

/// A step function: `vals[i]` holds from `ts[i]` to `ts[i + 1]`; 0 before `ts[0]`.
#[derive(Clone, Debug, Default, PartialEq)]
struct Step {
    ts: Vec<f64>,
    vals: Vec<f64>,
}

impl Step {
    /// The running sum of `(time, delta)` events, sorted by time with decreases first at
    /// equal times. Sums within 1e-9 of the largest magnitude are rounding left over from
    /// cancelling rates, and read as 0.
    fn from_events(mut events: Vec<(f64, f64)>) -> Step {
        events.sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then((a.1 > 0.0).cmp(&(b.1 > 0.0))));
        let mut sum = 0.0;
        let mut vals: Vec<f64> = events
            .iter()
            .map(|&(_, d)| {
                sum += d;
                sum
            })
            .collect();
        let max_abs = vals.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        if max_abs > 0.0 {
            for v in &mut vals {
                if v.abs() < 1e-9 * max_abs {
                    *v = 0.0;
                }
            }
        }
        Step {
            ts: events.into_iter().map(|(t, _)| t).collect(),
            vals,
        }
    }

    /// The value held at `t` (after every event at `t`).
    fn at(&self, t: f64) -> f64 {
        match self.ts.partition_point(|&x| x <= t) {
            0 => 0.0,
            i => self.vals[i - 1],
        }
    }

    /// `self / den` on the union of both functions' times; 0 where `den` is not positive.
    fn divide(&self, den: &Step) -> Step {
        if self.ts.is_empty() || den.ts.is_empty() {
            return Step::default();
        }
        let ts = merged(&self.ts, &den.ts);
        let (mut num_at, mut den_at) = (self.cursor(), den.cursor());
        let vals = ts
            .iter()
            .map(|&t| {
                let d = den_at.at(t);
                let n = num_at.at(t);
                if d > 0.0 {
                    n / d
                } else {
                    0.0
                }
            })
            .collect();
        Step { ts, vals }
    }

    /// A reader of the values at non-decreasing times, in O(1) amortised per read.
    fn cursor(&self) -> Cursor<'_> {
        Cursor { step: self, i: 0 }
    }
}

/// [`Step::at`] for times read in non-decreasing order.
struct Cursor<'a> {
    step: &'a Step,
    /// Events at or before the last time read.
    i: usize,
}

impl Cursor<'_> {
    fn at(&mut self, t: f64) -> f64 {
        let ts = &self.step.ts;
        while self.i < ts.len() && ts[self.i] <= t {
            self.i += 1;
        }
        match self.i {
            0 => 0.0,
            i => self.step.vals[i - 1],
        }
    }
}

/// The sorted union of two sorted time lists, each time once.
fn merged(a: &[f64], b: &[f64]) -> Vec<f64> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        let t = match (a.get(i), b.get(j)) {
            (Some(&x), Some(&y)) if y < x => {
                j += 1;
                y
            }
            (Some(&x), _) => {
                i += 1;
                x
            }
            (None, Some(&y)) => {
                j += 1;
                y
            }
            (None, None) => break,
        };
        if out.last() != Some(&t) {
            out.push(t);
        }
    }
    out
}

/// Statistics of `(value, duration)` segments, the average and spread taken over `total`
/// time; all zero without segments.
fn weighted_stats(mut segs: Vec<(f64, f64)>, total: f64) -> TimeStats {
    if segs.is_empty() || total <= 0.0 {
        return TimeStats::default();
    }
    let avg = segs.iter().map(|&(v, d)| v * d).sum::<f64>() / total;
    let var = segs
        .iter()
        .map(|&(v, d)| d * (v - avg) * (v - avg))
        .sum::<f64>()
        / total;
    segs.sort_unstable_by(|a, b| a.0.total_cmp(&b.0));
    let mut cum = Vec::with_capacity(segs.len());
    let mut run = 0.0;
    for &(_, d) in &segs {
        run += d;
        cum.push(run);
    }
    let last = segs.len() - 1;
    let pct = |q: f64| {
        let i = cum.partition_point(|&c| c / run < q);
        segs[i.min(last)].0
    };
    TimeStats {
        avg,
        min: segs[0].0,
        max: segs[last].0,
        p50: pct(0.50),
        p90: pct(0.90),
        p95: pct(0.95),
        p99: pct(0.99),
        std: var.sqrt(),
    }
}

/// Time-weighted statistics of `f` over [ws, we].
fn time_weighted(f: &Step, ws: f64, we: f64) -> TimeStats {
    let total = we - ws;
    if f.ts.is_empty() || total <= 0.0 {
        return TimeStats::default();
    }
    let mut segs = Vec::new();
    let first = f.ts.partition_point(|&x| x <= ws);
    let end_of = |i: usize| f.ts.get(i).map_or(we, |&t| t.min(we));
    let d = end_of(first) - ws;
    if d > 0.0 {
        segs.push((f.at(ws), d));
    }
    let mut i = first;
    while i < f.ts.len() && f.ts[i] < we {
        let d = end_of(i + 1) - f.ts[i];
        if d > 0.0 {
            segs.push((f.vals[i], d));
        }
        i += 1;
    }
    weighted_stats(segs, total)
}

/// Time-weighted statistics of `rate` over the parts of [ws, we] where `mask` is positive,
/// weighted by that busy time alone.
fn active_weighted(rate: &Step, mask: &Step, ws: f64, we: f64) -> TimeStats {
    if we - ws <= 0.0 || rate.ts.is_empty() || mask.ts.is_empty() {
        return TimeStats::default();
    }
    fn inside(s: &Step, ws: f64, we: f64) -> &[f64] {
        let lo = s.ts.partition_point(|&x| x <= ws);
        let hi = s.ts.partition_point(|&x| x < we);
        &s.ts[lo..hi.max(lo)]
    }
    let grid = merged(
        &merged(&[ws, we], inside(rate, ws, we)),
        inside(mask, ws, we),
    );
    let (mut rate_at, mut mask_at) = (rate.cursor(), mask.cursor());
    let mut segs = Vec::with_capacity(grid.len());
    for w in grid.windows(2) {
        let (m, r) = (mask_at.at(w[0]), rate_at.at(w[0]));
        if w[1] > w[0] && m > 0.0 {
            segs.push((r, w[1] - w[0]));
        }
    }
    let busy: f64 = segs.iter().map(|s| s.1).sum();
    weighted_stats(segs, busy)
}

/// The largest float below `x`: a chunk clamped before its request's end.
fn just_before(x: f64) -> f64 {
    if x.is_nan() || x == f64::NEG_INFINITY {
        x
    } else if x == 0.0 {
        -f64::from_bits(1)
    } else if x > 0.0 {
        f64::from_bits(x.to_bits() - 1)
    } else {
        f64::from_bits(x.to_bits() + 1)
    }
}

/// One request's times (ns after the origin) and token counts.
struct Span {
    start: f64,
    end: f64,
    /// First chunk (successful streamed requests with a chunk only).
    first: Option<f64>,
    isl: f64,
    osl: f64,
    /// Chunk arrivals (ns after the origin); empty unless `first` is set.
    chunks: Vec<f64>,
}

/// The curves of AIPerf's sweep, in tokens/ns for rates.
struct Curves {
    concurrency: Step,
    decode_concurrency: Step,
    prefill_concurrency: Step,
    decode: Step,
    prefill: Step,
    total: Step,
    decode_per_user: Step,
    prefill_per_user: Step,
    tokens_in_flight: Step,
}

fn curves(spans: &[Span]) -> Curves {
    let mut conc = Vec::new();
    let mut dconc = Vec::new();
    let mut pconc = Vec::new();
    let mut prefill = Vec::new();
    let mut uniform = Vec::new();
    for s in spans {
        conc.extend([(s.start, 1.0), (s.end, -1.0)]);
        let Some(g) = s.first else { continue };
        dconc.extend([(g, 1.0), (s.end, -1.0)]);
        pconc.extend([(s.start, 1.0), (g, -1.0)]);
        if g - s.start > 0.0 {
            let r = s.isl / (g - s.start);
            prefill.extend([(s.start, r), (g, -r)]);
        }
        if s.end - g > 0.0 && s.osl >= 1.0 {
            let r = (s.osl - 1.0) / (s.end - g);
            uniform.extend([(g, r), (s.end, -r)]);
        }
    }
    // Chunk gaps are used when any request has two chunks; otherwise the whole decode.
    let per_chunk = spans.iter().any(|s| s.chunks.len() >= 2);
    let decode = if per_chunk {
        let mut ev = Vec::new();
        for s in spans.iter().filter(|s| s.osl >= 1.0) {
            let gaps = s.chunks.windows(2).filter(|w| w[1] - w[0] > 0.0).count();
            if gaps == 0 {
                continue;
            }
            let per_gap = (s.osl - 1.0) / gaps as f64;
            for w in s.chunks.windows(2) {
                let gap = w[1] - w[0];
                if gap > 0.0 {
                    ev.extend([(w[0], per_gap / gap), (w[1], -per_gap / gap)]);
                }
            }
        }
        Step::from_events(ev)
    } else {
        Step::from_events(uniform.clone())
    };
    let mut total = prefill.clone();
    total.extend(uniform);
    let concurrency = Step::from_events(conc);
    let decode_concurrency = Step::from_events(dconc);
    let prefill_concurrency = Step::from_events(pconc);
    let prefill = Step::from_events(prefill);
    Curves {
        decode_per_user: decode.divide(&decode_concurrency),
        prefill_per_user: prefill.divide(&prefill_concurrency),
        tokens_in_flight: Step::from_events(tokens_in_flight(spans, per_chunk)),
        total: Step::from_events(total),
        concurrency,
        decode_concurrency,
        prefill_concurrency,
        decode,
        prefill,
    }
}

/// The tokens-in-flight events: ISL from the start of a request with a prefill; output tokens
/// chunk by chunk (`per_chunk`) or all at the first chunk; everything released at the end.
fn tokens_in_flight(spans: &[Span], per_chunk: bool) -> Vec<(f64, f64)> {
    let mut ev = Vec::new();
    for s in spans {
        let Some(g) = s.first else { continue };
        let prefill = g > s.start;
        if prefill {
            ev.push((s.start, s.isl));
        }
        let output = if per_chunk {
            s.chunks.len() >= 2 && s.osl >= 1.0
        } else {
            s.end - g > 0.0
        };
        if output {
            if per_chunk {
                ev.push((g, 1.0));
                let per = (s.osl - 1.0) / (s.chunks.len() - 1) as f64;
                for &t in &s.chunks[1..] {
                    let t = if t >= s.end { just_before(s.end) } else { t };
                    ev.push((t, per));
                }
            } else {
                ev.push((g, s.osl));
            }
        }
        let held = match (prefill, output) {
            (true, true) => s.isl + s.osl,
            (true, false) => s.isl,
            (false, true) => s.osl,
            (false, false) => continue,
        };
        ev.push((s.end, -held));
    }
    ev
}

/// The curves of a run, to be summarised over its window or over any other (time slices).
pub struct SweepCurves {
    /// Times inside are ns after this one (the first request's start).
    origin: u64,
    /// The last request's end (ns since the epoch).
    last_end: u64,
    curves: Curves,
}

impl SweepCurves {
    /// The curves of `reqs`; `streaming`: the responses were streamed, so the first chunk
    /// ends the prefill. `None` without requests.
    pub fn new(reqs: &[LlmRequest], streaming: bool) -> Option<SweepCurves> {
        let origin = reqs.iter().map(|r| r.start_ns).min()?;
        let last_end = reqs.iter().map(|r| r.end_ns).max().unwrap_or(origin);
        let rel = |ns: u64| (ns - origin) as f64;
        let spans: Vec<Span> = reqs
            .iter()
            .map(|r| {
                let timed = streaming && r.ok() && !r.chunks.is_empty();
                Span {
                    start: rel(r.start_ns),
                    end: rel(r.end_ns.max(r.start_ns)),
                    first: timed.then(|| rel(r.chunks[0].arrival_ns.max(r.start_ns))),
                    isl: r.isl as f64,
                    osl: r.osl as f64,
                    chunks: if timed {
                        r.chunks
                            .iter()
                            .map(|c| rel(c.arrival_ns.max(r.start_ns)))
                            .collect()
                    } else {
                        Vec::new()
                    },
                }
            })
            .collect();
        Some(SweepCurves {
            origin,
            last_end,
            curves: curves(&spans),
        })
    }

    /// From the first request's start to the last one's end.
    pub fn run_window(&self) -> (u64, u64) {
        (self.origin, self.last_end)
    }

    /// The statistics over `window_ns` (ns since the epoch).
    pub fn over(&self, window_ns: (u64, u64)) -> Sweeps {
        let rel = |ns: u64| (i128::from(ns) - i128::from(self.origin)) as f64;
        let (ws, we) = (rel(window_ns.0), rel(window_ns.1));
        let c = &self.curves;
        let tw = |f: &Step, k: f64| time_weighted(f, ws, we).scaled(k);
        let aw = |f: &Step, mask: &Step| active_weighted(f, mask, ws, we).scaled(NS_PER_S);
        Sweeps {
            window_ns,
            stats: [
                tw(&c.concurrency, 1.0),
                tw(&c.decode, NS_PER_S),
                tw(&c.prefill, NS_PER_S),
                tw(&c.decode_concurrency, 1.0),
                tw(&c.prefill_concurrency, 1.0),
                tw(&c.total, NS_PER_S),
                tw(&c.decode_per_user, NS_PER_S),
                tw(&c.prefill_per_user, NS_PER_S),
                tw(&c.tokens_in_flight, 1.0),
                aw(&c.decode, &c.decode_concurrency),
                aw(&c.prefill, &c.prefill_concurrency),
                aw(&c.decode_per_user, &c.decode_concurrency),
                aw(&c.prefill_per_user, &c.prefill_concurrency),
                aw(&c.total, &c.concurrency),
            ],
        }
    }
}

/// The time-weighted metrics of `reqs` over `window_ns` (ns since the epoch; by default from
/// the first start to the last end). `streaming`: the responses were streamed, so the first
/// chunk ends the prefill. `None` without requests.
pub fn compute(
    reqs: &[LlmRequest],
    window_ns: Option<(u64, u64)>,
    streaming: bool,
) -> Option<Sweeps> {
    let c = SweepCurves::new(reqs, streaming)?;
    Some(c.over(window_ns.unwrap_or(c.run_window())))
}

#[cfg(test)]
#[path = "sweeps_tests.rs"]
mod tests;
