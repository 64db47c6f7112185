//! Measuring one load level: windows, the stability rule, warm-up, request count, and what to
//! do when the run is interrupted or the server fails (perf_analyzer §2.1-§2.3).

use std::collections::VecDeque;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::{Engine, EngineSpec};
use crate::config::{Config, MeasurementMode};
use crate::error::{Error, Result};
use crate::measure::stability::{is_stable, over_latency_threshold, throughput_stable, Trial};
use crate::measure::stats::{clamp_to_requests, merge, window_stats};
use crate::measure::{ClientStats, ModelStats, ServerStats, WindowRecords, WindowStats};

/// How long in-flight requests may take to finish when a level ends.
const DRAIN: Duration = Duration::from_secs(5);
/// How often the coordinator looks at Ctrl-C, worker errors and counts while a window runs.
const TICK: Duration = Duration::from_millis(5);

/// Fetches the model's cumulative server statistics (`None` when the server has none).
pub type StatsFetch<'a> = dyn FnMut() -> Result<Option<ModelStats>> + 'a;

/// How a level ended.
#[derive(Debug, Clone, PartialEq)]
pub enum PointStatus {
    Stable,
    /// Not stable within `-r` windows.
    Unstable,
    /// Stable, but its latency reached `-l`.
    OverThreshold,
    /// Ctrl-C: the last windows are reported as they are.
    Interrupted,
    /// A request failed (server error, connection lost); what was measured is reported.
    Failed(String),
    /// No valid request in the windows that count (exit code 3).
    NoValidRequests,
}

pub struct PointOutcome {
    pub status: PointStatus,
    /// Merged client and server statistics of the windows that count, when there are any.
    pub client: Option<ClientStats>,
    pub server: Option<ServerStats>,
    /// Every window measured, for the profile export (empty when the export is off).
    pub windows: Vec<WindowRecords>,
}

/// Everything a level needs besides its concurrency.
pub struct PointCtx<'a> {
    pub cfg: &'a Config,
    pub spec: &'a EngineSpec,
    pub stats: &'a mut StatsFetch<'a>,
    pub cache_enabled: bool,
    pub keep_windows: bool,
    /// Set by Ctrl-C (or a test) to end the run after the current window.
    pub stop: &'a AtomicBool,
    /// Where `-v` pass lines go.
    pub out: &'a mut dyn Write,
}

impl PointCtx<'_> {
    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || crate::signal::interrupted()
    }
}

enum WindowEnd {
    Full,
    Interrupted,
    Failed(String),
}

/// Measures one concurrency level.
pub fn profile_point(ctx: &mut PointCtx, concurrency: u64) -> Result<PointOutcome> {
    let cfg = ctx.cfg;
    if cfg.warmup_request_count > 0 {
        warm_up(ctx, concurrency)?;
    }
    let budget = (cfg.request_count > 0).then_some(cfg.request_count);
    let mut engine = Engine::start(ctx.spec, concurrency, budget)?;
    let clock = ctx.spec.clock;
    let mut server_prev = (ctx.stats)()?;
    let mut t_prev = clock.now_ns();
    let mut trials: Vec<Trial> = Vec::new();
    let mut last: VecDeque<WindowStats> = VecDeque::with_capacity(4);
    let mut windows = Vec::new();
    let mut window = WindowRecords::default();
    let mut done_before = 0u64;
    let max_trials = if budget.is_some() {
        1
    } else {
        cfg.max_trials.max(1)
    };
    let mut status = PointStatus::Unstable;
    for _ in 0..max_trials {
        let mut end = wait_window(ctx, &engine, done_before);
        let t_end = clock.now_ns();
        engine.collect(t_end, &mut window)?;
        done_before += window.records.len() as u64;
        window.start_ns = t_prev;
        window.end_ns = t_end;
        t_prev = t_end;
        // A server that stops answering statistics mid-run has usually died: keep what the
        // window measured and end the level with that error (unless a worker saw one first).
        let server_now = match (ctx.stats)() {
            Ok(s) => s,
            Err(e) => {
                if matches!(end, WindowEnd::Full | WindowEnd::Interrupted) {
                    end = WindowEnd::Failed(format!("server statistics: {e}"));
                }
                None
            }
        };
        let mut ws = window_stats(&window);
        ws.server = server_delta(&server_now, &server_prev, ctx.cache_enabled);
        server_prev = server_now;
        if budget.is_some() {
            clamp_window(&mut ws, &window);
        }
        let batch = cfg.batch_size;
        if cfg.verbose > 0 && budget.is_none() {
            let line =
                crate::report::console::pass_line(trials.len() + 1, &ws, batch, cfg.percentile);
            let _ = ctx.out.write_all(line.as_bytes());
        }
        trials.push(trial_of(&ws, batch, cfg.percentile));
        if ctx.keep_windows {
            windows.push(window.clone());
        }
        if last.len() == 3 {
            last.pop_front();
        }
        last.push_back(ws);
        status = match end {
            WindowEnd::Interrupted => PointStatus::Interrupted,
            WindowEnd::Failed(msg) => PointStatus::Failed(msg),
            WindowEnd::Full if budget.is_some() || is_stable(&trials, cfg.stability_threshold) => {
                PointStatus::Stable
            }
            WindowEnd::Full if threshold_hit(cfg, &trials) => PointStatus::OverThreshold,
            WindowEnd::Full => continue,
        };
        break;
    }
    drop(engine.stop(DRAIN));
    if status == PointStatus::Unstable && relax_async(ctx, &trials) {
        status = PointStatus::Stable;
    }
    let last: Vec<WindowStats> = last.into();
    if matches!(status, PointStatus::Stable | PointStatus::Unstable)
        && last.iter().any(|w| w.request_count == 0)
    {
        status = PointStatus::NoValidRequests;
    }
    let client = (!last.is_empty()).then(|| merge(&last, cfg.batch_size, cfg.percentile));
    let server = merge_server(&last);
    Ok(PointOutcome {
        status,
        client,
        server,
        windows,
    })
}

/// perf_analyzer's async relaxation: latency may wander if throughput is stable.
fn relax_async(ctx: &mut PointCtx, trials: &[Trial]) -> bool {
    if !ctx.cfg.async_mode || !throughput_stable(trials, ctx.cfg.stability_threshold) {
        return false;
    }
    eprintln!("Warning: Request latency is not stabilizing. Please try lowering the request rate.");
    true
}

fn threshold_hit(cfg: &Config, trials: &[Trial]) -> bool {
    cfg.latency_threshold_ms > 0 && over_latency_threshold(trials, cfg.latency_threshold_ms)
}

fn trial_of(ws: &WindowStats, batch: u64, percentile: Option<u32>) -> Trial {
    if ws.request_count == 0 {
        return Trial {
            throughput: 0.0,
            latency_ns: u64::MAX,
        };
    }
    Trial {
        throughput: ws.throughput(batch),
        latency_ns: ws.stabilizing_latency_ns(percentile),
    }
}

/// `--request-count`: the window is the time from the first send to the last response.
fn clamp_window(ws: &mut WindowStats, w: &WindowRecords) {
    let ok = w.records.iter().filter(|r| r.ok);
    let first = ok.clone().map(|r| r.start_ns).min();
    let last = ok.map(|r| r.end_ns).max();
    if let (Some(first), Some(last)) = (first, last) {
        clamp_to_requests(ws, first, last);
    }
}

/// Waits until the window should end, watching Ctrl-C and worker errors.
fn wait_window(ctx: &PointCtx, engine: &Engine, done_before: u64) -> WindowEnd {
    let cfg = ctx.cfg;
    let started = Instant::now();
    let interval = Duration::from_millis(cfg.measurement_interval_ms);
    loop {
        if ctx.stopped() {
            return WindowEnd::Interrupted;
        }
        if let Some((i, msg)) = engine.first_error() {
            return WindowEnd::Failed(format!("Thread [{i}] had error: {msg}"));
        }
        let full = if cfg.request_count > 0 {
            engine.all_finished()
        } else if cfg.measurement_mode == MeasurementMode::CountWindows {
            engine.completed().saturating_sub(done_before) >= cfg.measurement_request_count
        } else {
            started.elapsed() >= interval
        };
        if full {
            return WindowEnd::Full;
        }
        let sleep =
            if cfg.measurement_mode == MeasurementMode::TimeWindows && cfg.request_count == 0 {
                interval.saturating_sub(started.elapsed()).min(TICK)
            } else {
                Duration::from_millis(1)
            };
        std::thread::sleep(sleep);
    }
}

/// Sends `--warmup-request-count` requests at `min(concurrency, W)` and throws them away.
fn warm_up(ctx: &mut PointCtx, concurrency: u64) -> Result<()> {
    let w = ctx.cfg.warmup_request_count;
    if concurrency > w {
        eprintln!("Warning: concurrency {concurrency} is above --warmup-request-count {w}; warming up with {w}.");
    }
    let engine = Engine::start(ctx.spec, concurrency.min(w), Some(w))?;
    loop {
        if let Some((i, msg)) = engine.first_error() {
            return Err(Error::generic(format!(
                "warm-up failed: Thread [{i}] had error: {msg}"
            )));
        }
        if engine.all_finished() || ctx.stopped() {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    drop(engine.stop(DRAIN));
    Ok(())
}

fn server_delta(
    now: &Option<ModelStats>,
    prev: &Option<ModelStats>,
    cache: bool,
) -> Option<ServerStats> {
    match (now, prev) {
        (Some(n), Some(p)) => Some(ServerStats {
            model: n.delta(p),
            cache_enabled: cache,
        }),
        _ => None,
    }
}

fn merge_server(last: &[WindowStats]) -> Option<ServerStats> {
    let mut it = last.iter().filter_map(|w| w.server.as_ref());
    let mut sum = it.next()?.clone();
    for s in it {
        sum.model.add(&s.model);
    }
    Some(sum)
}
