//! The readings of one endpoint over a profile, in bounded memory, and their summaries over
//! the measured span: gauges by avg / min / max / percentiles, counters by their growth.

use super::catalog::{Kind, Reading, MAX_SERIES, METRICS};

/// Points one series keeps; past it every other point is dropped and only every second
/// later reading is kept (then every fourth...), so a long run keeps an even sample.
pub const MAX_POINTS: usize = 4096;

/// One metric of one GPU / model over time.
#[derive(Clone, Debug)]
struct Series {
    metric: usize,
    key: String,
    /// (scrape time ns, value), in time order.
    points: Vec<(u64, f64)>,
    /// Keep one reading in `stride`.
    stride: u64,
    offered: u64,
    /// The latest reading, always kept (a counter's value after the run).
    last: (u64, f64),
}

impl Series {
    fn push(&mut self, at_ns: u64, value: f64) {
        self.last = (at_ns, value);
        let keep = self.offered % self.stride == 0;
        self.offered += 1;
        if !keep {
            return;
        }
        if self.points.len() >= MAX_POINTS {
            let mut i = 0;
            self.points.retain(|_| {
                i += 1;
                i % 2 == 1
            });
            self.stride = self.stride.saturating_mul(2);
        }
        self.points.push((at_ns, value));
    }
}

/// Everything scraped from one endpoint.
#[derive(Clone, Debug, Default)]
pub struct Store {
    series: Vec<Series>,
    /// Scrapes that answered, and those that failed.
    pub scrapes: u64,
    pub failed: u64,
}

impl Store {
    /// Adds one scrape's readings, taken at `at_ns`.
    pub fn push(&mut self, at_ns: u64, readings: Vec<Reading>) {
        self.scrapes += 1;
        for r in readings {
            let found = self
                .series
                .iter()
                .position(|s| s.metric == r.metric && s.key == r.series);
            let index = match found {
                Some(i) => i,
                None if self.series.len() >= MAX_SERIES => continue,
                None => {
                    self.series.push(Series {
                        metric: r.metric,
                        key: r.series,
                        points: Vec::new(),
                        stride: 1,
                        offered: 0,
                        last: (at_ns, r.value),
                    });
                    self.series.len() - 1
                }
            };
            self.series[index].push(at_ns, r.value);
        }
    }

    /// Points kept over all series (for the memory bound's test).
    pub fn points_kept(&self) -> usize {
        self.series.iter().map(|s| s.points.len()).sum()
    }

    /// Every series summarised over `span` (ns, inclusive), in catalogue order then by name.
    pub fn summarize(&self, span: (u64, u64)) -> Vec<SeriesSummary> {
        let mut out: Vec<SeriesSummary> = self.series.iter().map(|s| summary(s, span)).collect();
        out.sort_by(|a, b| (a.metric, &a.series).cmp(&(b.metric, &b.series)));
        out
    }
}

/// A gauge over the run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GaugeStats {
    pub avg: f64,
    pub min: f64,
    pub max: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
}

/// One series' summary.
#[derive(Clone, Debug, PartialEq)]
pub struct SeriesSummary {
    pub metric: usize,
    pub series: String,
    /// Readings inside the measured span.
    pub samples: usize,
    /// The last reading before the span (the first one when none was earlier), and the
    /// latest reading (taken after the run).
    pub before: f64,
    pub after: f64,
    /// Gauges: over the readings inside the span (the nearest one when none fell inside).
    pub gauge: Option<GaugeStats>,
    /// Counters: `after - before` (just `after` when the counter was reset in between),
    /// and that per second of the time between the two readings.
    pub delta: Option<f64>,
    pub rate_per_s: Option<f64>,
}

fn summary(s: &Series, (start, end): (u64, u64)) -> SeriesSummary {
    let before = s
        .points
        .iter()
        .rev()
        .find(|p| p.0 < start)
        .or(s.points.first())
        .copied()
        .unwrap_or(s.last);
    let mut inside: Vec<f64> = s
        .points
        .iter()
        .filter(|p| (start..=end).contains(&p.0))
        .map(|p| p.1)
        .collect();
    let samples = inside.len();
    let (mut gauge, mut delta, mut rate_per_s) = (None, None, None);
    match METRICS[s.metric].kind {
        Kind::Gauge => {
            if inside.is_empty() {
                let nearest = s.points.iter().rev().find(|p| p.0 <= end);
                inside.push(nearest.map_or(s.last.1, |p| p.1));
            }
            gauge = Some(gauge_stats(&mut inside));
        }
        Kind::Counter => {
            let grew = s.last.1 - before.1;
            let d = if grew < 0.0 { s.last.1 } else { grew };
            delta = Some(d);
            let secs = s.last.0.saturating_sub(before.0) as f64 / 1e9;
            rate_per_s = (secs > 0.0).then(|| d / secs);
        }
    }
    SeriesSummary {
        metric: s.metric,
        series: s.key.clone(),
        samples,
        before: before.1,
        after: s.last.1,
        gauge,
        delta,
        rate_per_s,
    }
}

/// Avg, min, max and percentiles of `values` (not empty); sorts them.
fn gauge_stats(values: &mut [f64]) -> GaugeStats {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    GaugeStats {
        avg: values.iter().sum::<f64>() / n as f64,
        min: values[0],
        max: values[n - 1],
        p50: percentile(values, 50.0),
        p90: percentile(values, 90.0),
        p99: percentile(values, 99.0),
    }
}

/// The `p`th percentile of sorted `values`, interpolated linearly between the closest ranks
/// (NumPy's default, as GenAI-Perf computes its telemetry percentiles).
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = p / 100.0 * (sorted.len() - 1) as f64;
    let (low, high) = (rank.floor() as usize, rank.ceil() as usize);
    let frac = rank - low as f64;
    sorted[low] + (sorted[high] - sorted[low]) * frac
}
