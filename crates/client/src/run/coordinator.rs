//! Measuring one load level: windows, the stability rule, warm-up, request count, and what to
//! do when the run is interrupted or the server fails.

use std::collections::VecDeque;
use std::io::Write;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use super::driver::{drive, End, Phase, UntilFinished, Watch};
use super::peers::Peers;
pub use super::peers::PointStatus;
use super::stall::{self, Sent};
use crate::config::{Config, MeasurementMode};
use crate::engine::window::{OutputCheck, WindowAcc, PULL_EVERY};
use crate::engine::{Engine, EngineSpec, Load};
use crate::error::{Error, Result};
use crate::measure::schedule::schedule_stats;
use crate::measure::server_stats::{composing_deltas, ComposingModel};
use crate::measure::stability::{is_stable, over_latency_threshold, throughput_stable, Trial};
use crate::measure::stats::{merge, merge_server, response_stats};
use crate::measure::{ClientStats, ModelStats, ServerStats, WindowRecords, WindowStats};

/// How long in-flight requests may take to finish when a level ends.
const DRAIN: Duration = Duration::from_secs(5);
/// How often the driver looks at Ctrl-C, worker errors and counts while a window runs.
const TICK: Duration = Duration::from_millis(5);

/// Fetches the model's cumulative server statistics (`None` when the server has none).
pub type StatsFetch<'a> = dyn FnMut() -> Result<Option<StatsSnapshot>> + 'a;

/// Cumulative server statistics at one moment: the profiled model (its versions summed
/// unless one was asked for) and, for ensembles and BLS composing models, every model.
#[derive(Clone, Debug, Default)]
pub struct StatsSnapshot {
    pub model: ModelStats,
    /// Every model's entries; empty unless composing models are reported.
    pub all: Vec<ModelStats>,
}

pub struct PointOutcome {
    pub status: PointStatus,
    /// Merged client and server statistics of the windows that count, when there are any.
    pub client: Option<ClientStats>,
    pub server: Option<ServerStats>,
    /// Every window measured, for the profile export (empty when the export is off).
    pub windows: Vec<WindowRecords>,
    /// Start and end (ns since the epoch) of the windows `client` merges; `--collect-metrics`
    /// merges the metrics sampled in it.
    pub span_ns: Option<(u64, u64)>,
    /// No valid request because the server answered none: what was sent and how long it
    /// waited (see `stall.rs`).
    pub stall: Option<String>,
}

/// Everything a level needs besides its concurrency.
pub struct PointCtx<'a> {
    pub cfg: &'a Config,
    pub spec: &'a EngineSpec,
    pub stats: &'a mut StatsFetch<'a>,
    pub cache_enabled: bool,
    pub keep_windows: bool,
    /// A decoupled model: many responses per request (adds the response statistics).
    pub decoupled: bool,
    /// Ensemble steps or `--bls-composing-models`, reported in the Server section.
    pub composing: &'a [ComposingModel],
    /// Validation data: checks each response's outputs (the engine keeps the bodies).
    pub check: Option<&'a OutputCheck<'a>>,
    /// Set by Ctrl-C (or a test) to end the run after the current window.
    pub stop: &'a AtomicBool,
    /// Where `-v` pass lines go.
    pub out: &'a mut dyn Write,
    /// The other processes this level is measured with ([`super::peers::Alone`]: none).
    pub peers: &'a mut dyn Peers,
}

impl PointCtx<'_> {
    /// The driver's watch: Ctrl-C, the stop flag and worker errors end a phase.
    fn watch(&self, gather_every: Duration) -> Watch<'_> {
        Watch {
            stop: Some(self.stop),
            fail_on_error: true,
            gather_every,
        }
    }
}

/// Measures one load level.
pub fn profile_point(ctx: &mut PointCtx, load: &Load) -> Result<PointOutcome> {
    let cfg = ctx.cfg;
    // Interrupted in the warm-up, nothing of the level is measured. Scale-out ranks go on to
    // the level's barriers, where they agree on the interruption.
    let warm = cfg.warmup_request_count > 0;
    if warm && warm_up(ctx, load)? == End::Interrupted && !ctx.peers.scale_out() {
        return Ok(PointOutcome {
            status: PointStatus::Interrupted,
            client: None,
            server: None,
            windows: Vec::new(),
            span_ns: None,
            stall: None,
        });
    }
    let budget = (cfg.request_count > 0).then(|| share(ctx, cfg.request_count));
    // Closed loop: the connections open before the clock starts (and before any request).
    let mut engine = Engine::connect_load(ctx.spec, load, budget)?;
    if let (true, Some(c)) = (cfg.verbose > 0, engine.connections()) {
        let _ = ctx.out.write_all(format!("  {}", c.line()).as_bytes());
    }
    // The starting statistics and the first window's start are taken before any request of
    // the level is sent, so the server-side deltas cover exactly the measured requests.
    let server_start = (ctx.stats)()?;
    // Every rank starts its load together (perf_analyzer's barrier before profiling).
    ctx.peers.start_level()?;
    let window_start = ctx.spec.clock.now_ns();
    engine.go();
    let max_trials = if budget.is_some() {
        1
    } else {
        cfg.max_trials.max(1)
    };
    let mut m = Measurement {
        server_prev: server_start,
        acc: WindowAcc::new(window_start, ctx.keep_windows),
        trials: Vec::new(),
        last: VecDeque::with_capacity(4),
        windows: Vec::new(),
        level: Sent::default(),
    };
    let follower = is_follower(ctx);
    let mut status = PointStatus::Unstable;
    for trial in 1..=max_trials {
        let end = measure_window(ctx, &mut engine, &mut m)?;
        let last_trial = trial == max_trials;
        let mut verdict = window_verdict(ctx, end, budget.is_some(), &m.trials, last_trial);
        verdict = ctx.peers.agree(verdict);
        if let Some(s) = verdict {
            status = s;
            break;
        }
    }
    let (tally, completed) = engine.fail_tally();
    engine.stop(DRAIN);
    let last: Vec<WindowStats> = m.last.into();
    if !follower
        && matches!(status, PointStatus::Stable | PointStatus::Unstable)
        && last.iter().any(|w| w.request_count == 0)
    {
        // A window with no valid request because its requests failed (failures the open
        // loop rode out) names the failures instead.
        status = match tally.summary(completed) {
            Some(why) if last.iter().any(|w| w.error_count > 0) => PointStatus::Failed(why),
            _ => PointStatus::NoValidRequests,
        };
    }
    // Requests sent and none answered: the oldest went out as the first window started.
    let stall = match status {
        PointStatus::NoValidRequests => {
            let waited = last
                .last()
                .map_or(0, |w| w.end_ns.saturating_sub(window_start));
            stall::note(cfg, m.level, waited)
        }
        _ => None,
    };
    let client = (!last.is_empty()).then(|| {
        let mut c = merge(&last, cfg.batch_size, cfg.percentile);
        if ctx.decoupled {
            c.responses = Some(response_stats(&last));
        }
        c.schedule = schedule_stats(&last);
        c
    });
    let server = merge_server(&last);
    let span_ns = last
        .first()
        .zip(last.last())
        .map(|(a, b)| (a.start_ns, b.end_ns));
    Ok(PointOutcome {
        status,
        client,
        server,
        windows: m.windows,
        span_ns,
        stall,
    })
}

/// Scale-out ranks other than 0: rank 0 judges the merged windows, so this rank's own
/// windows decide nothing (and print no warning about them).
fn is_follower(ctx: &PointCtx) -> bool {
    ctx.peers.scale_out() && !ctx.peers.reports()
}

/// This rank's verdict after a window: `None` to measure another one.
fn window_verdict(
    ctx: &mut PointCtx,
    end: End,
    budget: bool,
    trials: &[Trial],
    last_trial: bool,
) -> Option<PointStatus> {
    let cfg = ctx.cfg;
    match end {
        End::Interrupted => Some(PointStatus::Interrupted),
        End::Failed(msg) => Some(PointStatus::Failed(msg)),
        End::Done if budget || is_stable(trials, cfg.stability_threshold) => {
            Some(PointStatus::Stable)
        }
        End::Done if threshold_hit(cfg, trials) => Some(PointStatus::OverThreshold),
        End::Done if last_trial => {
            if !is_follower(ctx) && relax_async(ctx, trials) {
                Some(PointStatus::Stable)
            } else {
                Some(PointStatus::Unstable)
            }
        }
        End::Done => None,
    }
}

/// `--periodic-concurrency-range`: runs the ramp to its end with no windows or stability
/// check; every request goes into one window `[0, u64::MAX]` for the profile export.
pub fn profile_periodic(ctx: &mut PointCtx, load: &Load) -> Result<PointOutcome> {
    let Load::Periodic { end, .. } = load else {
        return Err(Error::generic("periodic profiling needs a periodic load"));
    };
    let mut engine = Engine::start_load(ctx.spec, load, Some(*end))?;
    let mut ramp = Ramp(WindowAcc::new(0, true));
    let status = match drive(ctx.watch(PULL_EVERY), &mut engine, &mut ramp)? {
        End::Interrupted => PointStatus::Interrupted,
        End::Failed(msg) => PointStatus::Failed(msg),
        End::Done => PointStatus::Stable,
    };
    let mut acc = ramp.0;
    acc.pull(&mut engine, u64::MAX)?;
    let (_, window) = acc.finish(u64::MAX, false);
    engine.stop(DRAIN);
    Ok(PointOutcome {
        status,
        client: None,
        server: None,
        windows: window.into_iter().collect(),
        span_ns: None,
        stall: None,
    })
}

/// The periodic ramp's phase: every record into one window, until every worker is done.
struct Ramp(WindowAcc);

impl Phase for Ramp {
    fn done(&mut self, engine: &Engine) -> bool {
        engine.all_finished()
    }
    fn gather(&mut self, engine: &mut Engine) -> Result<Option<String>> {
        self.0.pull(engine, u64::MAX)?;
        Ok(None)
    }
    fn nap(&self) -> Duration {
        TICK
    }
}

/// The state of one level's measurement across its windows.
struct Measurement {
    server_prev: Option<StatsSnapshot>,
    acc: WindowAcc,
    trials: Vec<Trial>,
    /// The last three windows: the ones a stable level reports.
    last: VecDeque<WindowStats>,
    /// Every window's records, for the profile export.
    windows: Vec<WindowRecords>,
    /// Requests sent and ended over every window of the level.
    level: Sent,
}

/// Runs one window to its end and records its statistics and trial.
fn measure_window(ctx: &mut PointCtx, engine: &mut Engine, m: &mut Measurement) -> Result<End> {
    let cfg = ctx.cfg;
    let mut end = wait_window(ctx, engine, &mut m.acc)?;
    // Scale-out: every rank's window ends at the same barrier, so the merged window is one
    // span of wall time.
    let scale_out = ctx.peers.scale_out();
    if scale_out {
        if let Err(e) = ctx.peers.end_window() {
            end = End::Failed(e.to_string());
        }
    }
    let t_end = ctx.spec.clock.now_ns();
    m.acc.pull(engine, t_end)?;
    if let Some(msg) = ctx.check.and_then(|c| m.acc.check_outputs(c)) {
        end = End::Failed(msg);
    }
    // A server that stops answering statistics mid-run has usually died: keep what the
    // window measured and end the level with that error (unless a worker saw one first).
    let server_now = match (ctx.stats)() {
        Ok(s) => s,
        Err(e) => {
            if matches!(end, End::Done | End::Interrupted) {
                end = End::Failed(format!("server statistics: {e}"));
            }
            None
        }
    };
    let (mut ws, mut records) = m.acc.finish(t_end, cfg.request_count > 0);
    if scale_out {
        if let Err(e) = ctx.peers.merge_window(&mut ws, &mut records) {
            if matches!(end, End::Done | End::Interrupted) {
                end = End::Failed(e.to_string());
            }
        }
    }
    ws.server = server_delta(
        &server_now,
        &m.server_prev,
        ctx.cache_enabled,
        ctx.composing,
    );
    m.server_prev = server_now;
    if cfg.verbose > 0 {
        let line = crate::report::console::pass_line(
            m.trials.len() + 1,
            &ws,
            cfg.batch_size,
            cfg.percentile,
        );
        let _ = ctx.out.write_all(line.as_bytes());
    }
    m.trials
        .push(Trial::from_window(&ws, cfg.batch_size, cfg.percentile));
    m.level.sent += ws.sent;
    m.level.ended += ws.request_count + ws.error_count;
    m.windows.extend(records);
    if m.last.len() == 3 {
        m.last.pop_front();
    }
    m.last.push_back(ws);
    Ok(end)
}

/// perf_analyzer's async relaxation: after the last trial, a level whose throughput is stable
/// is accepted even if its latency is not (with a warning).
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

/// This rank's part of a count (all of it without scale-out).
fn share(ctx: &PointCtx, total: u64) -> u64 {
    ctx.peers.share(total)
}

/// Runs the window until it should end, watching Ctrl-C and worker errors, and pulls
/// records from the workers every `PULL_EVERY` meanwhile.
fn wait_window(ctx: &PointCtx, engine: &mut Engine, acc: &mut WindowAcc) -> Result<End> {
    let cfg = ctx.cfg;
    // Count windows look at their count every `count_check_ms` (a second, as perf_analyzer):
    // a window lasts whole steps, at least one, however fast its requests complete.
    let count_step = Duration::from_millis(cfg.count_check_ms.max(1));
    let mut window = Window {
        ctx,
        acc,
        started: Instant::now(),
        interval: Duration::from_millis(cfg.measurement_interval_ms),
        done_before: 0,
        count_share: share(ctx, cfg.measurement_request_count),
        count_step,
        count_check: count_step,
    };
    window.done_before = window.acc.pulled_before_window();
    drive(ctx.watch(PULL_EVERY), engine, &mut window)
}

/// One window as a driver phase. A count window ends at the first whole step of its time at
/// which it holds its count.
struct Window<'c, 'a> {
    ctx: &'c PointCtx<'a>,
    acc: &'c mut WindowAcc,
    started: Instant,
    interval: Duration,
    /// Requests pulled before the window started.
    done_before: u64,
    count_share: u64,
    count_step: Duration,
    count_check: Duration,
}

impl Phase for Window<'_, '_> {
    fn done(&mut self, engine: &Engine) -> bool {
        let cfg = self.ctx.cfg;
        if cfg.request_count > 0 {
            engine.all_finished()
        } else if cfg.measurement_mode == MeasurementMode::CountWindows {
            if self.started.elapsed() < self.count_check {
                false
            } else {
                self.count_check += self.count_step;
                engine.completed().saturating_sub(self.done_before) >= self.count_share
            }
        } else {
            self.started.elapsed() >= self.interval
        }
    }

    fn gather(&mut self, engine: &mut Engine) -> Result<Option<String>> {
        self.acc.pull(engine, self.ctx.spec.clock.now_ns())?;
        Ok(self.ctx.check.and_then(|c| self.acc.check_outputs(c)))
    }

    /// `--request-count` ends within one tick of its last response; its duration is
    /// measured, so the tick moves where the boundary falls, not the figures.
    fn nap(&self) -> Duration {
        let cfg = self.ctx.cfg;
        if cfg.request_count > 0 {
            TICK
        } else if cfg.measurement_mode == MeasurementMode::TimeWindows {
            self.interval
                .saturating_sub(self.started.elapsed())
                .min(TICK)
        } else {
            self.count_check
                .saturating_sub(self.started.elapsed())
                .min(TICK)
        }
    }
}

/// Sends `--warmup-request-count` requests (at `min(concurrency, W)`, or on the level's
/// schedule) and throws them away; `End::Interrupted` when Ctrl-C ended it.
fn warm_up(ctx: &mut PointCtx, load: &Load) -> Result<End> {
    let w = share(ctx, ctx.cfg.warmup_request_count);
    if w == 0 {
        return Ok(End::Done);
    }
    let load = match load {
        Load::Concurrency(c) => {
            if *c > w {
                eprintln!("Warning: concurrency {c} is above --warmup-request-count {w}; warming up with {w}.");
            }
            Load::Concurrency((*c).min(w))
        }
        paced => paced.clone(),
    };
    let mut engine = Engine::start_load(ctx.spec, &load, Some(w))?;
    let end = drive(
        ctx.watch(Duration::MAX),
        &mut engine,
        &mut UntilFinished(TICK),
    )?;
    if let End::Failed(msg) = end {
        return Err(Error::generic(format!("warm-up failed: {msg}")));
    }
    engine.stop(DRAIN);
    Ok(end)
}

fn server_delta(
    now: &Option<StatsSnapshot>,
    prev: &Option<StatsSnapshot>,
    cache: bool,
    composing: &[ComposingModel],
) -> Option<ServerStats> {
    let (Some(n), Some(p)) = (now, prev) else {
        return None;
    };
    let composing = if composing.is_empty() {
        Vec::new()
    } else {
        match composing_deltas(&p.all, &n.all, composing) {
            Ok((stats, warnings)) => {
                warnings
                    .iter()
                    .for_each(|w| eprintln!("Warning: {}", crate::text::escape_control(w)));
                stats
            }
            Err(e) => {
                eprintln!("Warning: composing model statistics: {e}");
                Vec::new()
            }
        }
    };
    Some(ServerStats {
        model: n.model.delta(&p.model),
        cache_enabled: cache,
        composing,
    })
}
