//! Runs one load point of `profile` on the engine: an optional warm-up, then the measured
//! requests, gathered every 100 ms with a progress line, until the request count is done, the
//! duration is up, or the user interrupts (what was measured is kept).

use std::time::{Duration, Instant};

use super::cli::{LoadPoint, ProfileConfig};
use super::load_args::Arrival;
use super::progress::Progress;
use super::sweep_args::Shape;
use crate::engine::connect::ConnectSummary;
use crate::engine::pace::Schedule;
use crate::engine::{Engine, EngineSpec, Load};
use crate::error::{Error, Result};
use crate::measure::llm::LlmRequest;
use crate::measure::{FailKind, FailTally, RequestRecord, WindowRecords};
use crate::report::LoadValue;
use crate::run::driver::{self, End, Phase, Watch};
use crate::run::load::LoadDesc;
use std::sync::atomic::AtomicBool;

/// Requests measured per point when neither a count nor a duration is given.
pub const DEFAULT_REQUEST_COUNT: u64 = 100;
/// How long in-flight requests may take to finish after a stop (Ctrl-C or duration).
const DRAIN: Duration = Duration::from_secs(30);
/// How often records are gathered from the workers.
const TICK: Duration = Duration::from_millis(100);

/// Everything measured at one point.
#[derive(Debug, Default)]
pub struct PointRun {
    pub records: Vec<RequestRecord>,
    /// Response bodies / framed events; records' `body_off` point here.
    pub bodies: Vec<u8>,
    /// First send and last gather (ns since the epoch).
    pub start_ns: u64,
    pub end_ns: u64,
    /// The user pressed Ctrl-C.
    pub interrupted: bool,
    /// CPU time the load workers used while measuring (ns, summed over workers): the
    /// client's own overhead, published with the results.
    pub worker_cpu_ns: u64,
    /// The failed requests, counted by kind.
    pub fails: FailTally,
    /// Closed loop: the connections, opened before the first request.
    pub connections: Option<ConnectSummary>,
    /// `--failed-request-threshold` stopped the run: (failed, finished) when it did.
    pub threshold_hit: Option<(u64, u64)>,
    /// The run ended before its request count or duration because its connections could
    /// not be reopened (the server went away): why, for the run's error.
    pub cut_short: Option<String>,
}

/// How long a `profile` Poisson schedule runs before it repeats (ns).
const POISSON_HORIZON_NS: u64 = 60_000_000_000;

/// The engine's load for a point.
pub fn load(cfg: &ProfileConfig, point: LoadPoint) -> Load {
    let schedule = schedule(cfg, point);
    let dataset = &cfg.args.dataset;
    if let Some(load) = dataset.engine_load(point, cfg.args.max_inflight, schedule.as_ref()) {
        return load;
    }
    let value = match point {
        LoadPoint::Concurrency(c) => LoadValue::Concurrency(c),
        LoadPoint::RequestRate(rate) => LoadValue::RequestRate(rate),
    };
    match schedule {
        Some(schedule) => Load::Paced {
            schedule,
            max_inflight: cfg.args.max_inflight,
        },
        None => LoadDesc {
            seed: cfg.args.random_seed,
            max_inflight: cfg.args.max_inflight,
            ..LoadDesc::simple(value)
        }
        .engine_load(),
    }
}

/// A rate point's arrival schedule (`None` for a concurrency point).
fn schedule(cfg: &ProfileConfig, point: LoadPoint) -> Option<Schedule> {
    let horizon_ns = POISSON_HORIZON_NS;
    let seed = cfg.args.random_seed;
    match (point, &cfg.load.rate_series, cfg.load.arrival) {
        (LoadPoint::Concurrency(_), ..) => None,
        (LoadPoint::RequestRate(_), Some(points), _) => {
            let (count, duration) = measured_until(cfg);
            let duration = duration.map(|d| d.as_secs_f64());
            let times = super::rate_series::offsets(points, count, duration);
            Some(Schedule::Fixed(times))
        }
        (LoadPoint::RequestRate(rate), None, Arrival::Gamma(shape)) => Some(Schedule::Gamma {
            rate,
            shape,
            seed,
            horizon_ns,
        }),
        (LoadPoint::RequestRate(rate), None, Arrival::Poisson) => Some(Schedule::Poisson {
            rate,
            seed,
            horizon_ns,
        }),
        (LoadPoint::RequestRate(rate), None, Arrival::Constant) => {
            Some(Schedule::Constant { rate })
        }
    }
}

/// The measured run's bounds: a request count (the default when neither is given) and a
/// duration.
fn measured_until(cfg: &ProfileConfig) -> (Option<u64>, Option<Duration>) {
    let count = match (cfg.args.request_count, cfg.args.benchmark_duration) {
        (Some(n), _) => Some(n),
        (None, Some(_)) => None,
        (None, None) => Some(DEFAULT_REQUEST_COUNT),
    };
    (
        count,
        cfg.args.benchmark_duration.map(Duration::from_secs_f64),
    )
}

/// Warm-up (not measured; on `warm`'s requests when given, else on `spec`'s), the ramp of
/// `shape` (not measured), then the measured run.
pub fn run_point(
    spec: &EngineSpec,
    warm: Option<&EngineSpec>,
    cfg: &ProfileConfig,
    point: LoadPoint,
    shape: &Shape,
) -> Result<PointRun> {
    let warm_spec = warm;
    let load = load(cfg, point);
    let interrupted = || PointRun {
        interrupted: true,
        ..PointRun::default()
    };
    if cfg.args.warmup_request_count > 0 {
        let warm = cfg.args.warmup_request_count;
        let quiet = cfg.args.quiet;
        drive(
            warm_spec.unwrap_or(spec),
            &load,
            Some(warm),
            None,
            "warm-up",
            quiet,
            Measured::default(),
        )?;
        if crate::signal::interrupted() {
            return Ok(interrupted());
        }
    }
    if let Some(ramp_s) = shape.ramp_s {
        ramp(spec, cfg, point, ramp_s)?;
        if crate::signal::interrupted() {
            return Ok(interrupted());
        }
    }
    let (count, duration) = measured_until(cfg);
    let measured = Measured {
        grace: cfg.load.grace,
        failed_threshold: cfg.load.failed_request_threshold.map(|t| {
            let floor = match point {
                LoadPoint::Concurrency(c) => c.max(THRESHOLD_FLOOR),
                LoadPoint::RequestRate(_) => THRESHOLD_FLOOR,
            };
            (t, floor)
        }),
    };
    drive(
        spec,
        &load,
        count,
        duration,
        &point.label(),
        cfg.args.quiet,
        measured,
    )
}

/// `--failed-request-threshold` is checked once this many requests (or the concurrency, if
/// more) have finished, as AIPerf's grace floor.
const THRESHOLD_FLOOR: u64 = 10;

/// What the measured run adds to a plain drive: its grace period and failure threshold.
#[derive(Debug, Clone, Copy)]
struct Measured {
    /// Wait after the duration for requests in flight; `None`: until they finish.
    grace: Option<Duration>,
    /// (ratio, requests finished before it is checked).
    failed_threshold: Option<(f64, u64)>,
}

impl Default for Measured {
    fn default() -> Self {
        Measured {
            grace: Some(DRAIN),
            failed_threshold: None,
        }
    }
}

/// Steps of a concurrency ramp at most (each restarts the engine at the next level).
const MAX_RAMP_STEPS: u64 = 20;
/// AIPerf's rate ramp update interval: the ramp starts at rate x this / duration.
const RAMP_UPDATE_S: f64 = 0.1;

/// The ramp up to `point` over `secs` seconds, not measured: concurrency from 1 in even
/// steps (each held for its share of the duration), or the request rate rising linearly.
fn ramp(spec: &EngineSpec, cfg: &ProfileConfig, point: LoadPoint, secs: f64) -> Result<()> {
    let quiet = cfg.args.quiet;
    match point {
        LoadPoint::Concurrency(c) => {
            let levels = ramp_levels(c);
            let hold = Duration::from_secs_f64(secs / levels.len().max(1) as f64);
            for level in levels {
                let load = Load::Concurrency(level);
                drive(
                    spec,
                    &load,
                    None,
                    Some(hold),
                    "ramp",
                    quiet,
                    Measured::default(),
                )?;
                if crate::signal::interrupted() {
                    break;
                }
            }
        }
        LoadPoint::RequestRate(rate) => {
            let times = ramp_offsets(rate, secs);
            if times.is_empty() {
                return Ok(());
            }
            let n = times.len() as u64;
            let load = Load::Paced {
                schedule: crate::engine::pace::Schedule::Fixed(times),
                max_inflight: cfg.args.max_inflight,
            };
            drive(
                spec,
                &load,
                Some(n),
                None,
                "ramp",
                quiet,
                Measured::default(),
            )?;
        }
    }
    Ok(())
}

/// The concurrencies a ramp to `target` holds in turn before the target itself: 1 up to
/// below `target`, evenly spaced, at most [`MAX_RAMP_STEPS`] of them.
pub fn ramp_levels(target: u64) -> Vec<u64> {
    if target <= 1 {
        return Vec::new();
    }
    let steps = (target - 1).min(MAX_RAMP_STEPS);
    let mut levels: Vec<u64> = (0..steps).map(|i| 1 + i * (target - 1) / steps).collect();
    levels.dedup();
    levels
}

/// Send offsets (ns) of a rate rising linearly from `rate` x 0.1 s / `secs` to `rate` over
/// `secs`: the k-th send is where the expected count of sends reaches k.
pub fn ramp_offsets(rate: f64, secs: f64) -> Vec<u64> {
    let r0 = (rate * RAMP_UPDATE_S / secs).min(rate);
    // sends(t) = r0 t + (rate - r0) t^2 / (2 secs); solved for sends(t) = k.
    let a = (rate - r0) / (2.0 * secs);
    let total = r0 * secs + a * secs * secs;
    (1..=total.floor() as u64)
        .map(|k| {
            let k = k as f64;
            let t = if a > 0.0 {
                (-r0 + (r0 * r0 + 4.0 * a * k).sqrt()) / (2.0 * a)
            } else {
                k / r0
            };
            (t * 1e9) as u64
        })
        .collect()
}

/// The requests that were not cancelled on purpose, and how many were.
pub fn without_cancelled(requests: &[LlmRequest]) -> (Vec<LlmRequest>, u64) {
    let cancelled = |r: &LlmRequest| r.error.as_ref().is_some_and(|e| e.kind == "cancelled");
    let kept: Vec<LlmRequest> = requests.iter().filter(|r| !cancelled(r)).cloned().collect();
    let n = (requests.len() - kept.len()) as u64;
    (kept, n)
}

/// The failure tally without the requests cancelled on purpose.
pub fn fails_without_cancelled(fails: &FailTally) -> FailTally {
    fails.without(crate::measure::FailKind::Cancelled)
}

/// The summary JSON with the count of requests cancelled on purpose (`cancelled_count`)
/// when there were any.
pub fn with_cancelled(json: String, cancelled: u64) -> String {
    if cancelled == 0 {
        return json;
    }
    match serde_json::from_str::<serde_json::Value>(&json) {
        Ok(serde_json::Value::Object(mut map)) => {
            map.insert(
                "cancelled_count".into(),
                serde_json::json!({"unit": "requests", "avg": cancelled}),
            );
            serde_json::to_string_pretty(&map).unwrap_or(json)
        }
        _ => json,
    }
}

/// Runs the engine until `count` requests are done or `duration` is up (then stops sending
/// and waits for what is in flight, within the measured run's grace period), gathering
/// records as it goes. The warm-up and ramps run with [`Measured::default`].
fn drive(
    spec: &EngineSpec,
    load: &Load,
    count: Option<u64>,
    duration: Option<Duration>,
    label: &str,
    quiet: bool,
    measured: Measured,
) -> Result<PointRun> {
    // Closed loop: every connection is open before the run's clock starts.
    let mut engine = Engine::connect_load(spec, load, count)?;
    if let Some(msg) = engine.connect_error() {
        return Err(Error::generic(format!("no request completed: {msg}")));
    }
    let start_ns = spec.clock.now_ns();
    engine.go();
    let started = Instant::now();
    let mut point = Gather {
        spec,
        run: PointRun {
            start_ns,
            connections: engine.connections().cloned(),
            ..PointRun::default()
        },
        window: WindowRecords::default(),
        progress: Progress::new(label, count, duration, quiet),
        started,
        until: duration,
        finished: false,
        threshold: measured.failed_threshold,
        failed: 0,
    };
    // Failed requests stay in the records; Ctrl-C is watched through the signal alone.
    let never = AtomicBool::new(false);
    let watch = Watch {
        stop: Some(&never),
        fail_on_error: false,
        gather_every: TICK,
    };
    let end = driver::drive(watch, &mut engine, &mut point)?;
    point.run.interrupted = end == End::Interrupted;
    // Every worker stopped on its own before the duration was up: its connections are gone.
    let ended_early = point.finished && !point.run.interrupted;
    if !point.finished && !point.run.interrupted {
        // Out of time (or over the failure threshold): nothing new is sent; what is in
        // flight may finish within the grace period (Ctrl-C ends the wait: the requests
        // still in flight are left out).
        engine.halt();
        let grace = match point.run.threshold_hit {
            Some(_) => DRAIN,
            None => measured.grace.unwrap_or(Duration::MAX),
        };
        point.until = point.started.elapsed().checked_add(grace);
        point.threshold = None;
        point.run.interrupted = driver::drive(watch, &mut engine, &mut point)? == End::Interrupted;
    }
    point.gather(&mut engine)?;
    let Gather {
        mut run,
        mut progress,
        ..
    } = point;
    progress.finish();
    // The last gather's swap published every worker's tally.
    run.fails = engine_fails(&engine);
    engine.stop(Duration::from_millis(100));
    if run.records.is_empty() && !run.interrupted {
        // Nothing recorded: every failure was a connection's (no request went out).
        return Err(match run.fails.summary(0) {
            Some(line) => Error::generic(line),
            None => Error::no_valid_requests(),
        });
    }
    let recorded = run.records.len() as u64;
    let short_of_count = count.map_or(true, |n| recorded < n);
    if ended_early && short_of_count && run.fails.count(FailKind::Connect) > 0 {
        let elapsed = started.elapsed().as_secs_f64();
        run.cut_short = Some(cut_short_line(
            &run.fails, recorded, count, duration, elapsed,
        ));
    }
    add_unrecorded_failures(&mut run);
    Ok(run)
}

/// Why a run that ended early ended: how far it got against what was asked, and the
/// connect failure that stopped it.
fn cut_short_line(
    fails: &FailTally,
    recorded: u64,
    count: Option<u64>,
    duration: Option<Duration>,
    elapsed_s: f64,
) -> String {
    let asked = match (count, duration) {
        (Some(n), _) => format!("{recorded} of the {n} requests asked (--request-count)"),
        (None, Some(d)) => format!(
            "{elapsed_s:.1} s of the {} s asked (--benchmark-duration)",
            crate::report::fmt::fmt_g(d.as_secs_f64())
        ),
        (None, None) => format!("{recorded} requests"),
    };
    let example = fails.example(FailKind::Connect).unwrap_or("connect failed");
    format!(
        "the run was cut short after {asked}: the server stopped accepting connections ({example}); \
         the reports hold what was measured"
    )
}

/// Failures the engine counted without a record (a connection that could not be reopened
/// for the next request) become failed records stamped at the last record's end, so that
/// every failed request counts once in the console, the exports and the line on stderr.
fn add_unrecorded_failures(run: &mut PointRun) {
    let at = run
        .records
        .iter()
        .map(|r| r.end_ns)
        .max()
        .unwrap_or(run.start_ns);
    for kind in FailKind::ALL {
        let recorded = run
            .records
            .iter()
            .filter(|r| !r.ok && r.fail == kind)
            .count() as u64;
        for _ in recorded..run.fails.count(kind) {
            run.records.push(RequestRecord {
                start_ns: at,
                send_end_ns: at,
                end_ns: at,
                // No prompt went out: the step indexes nothing.
                step: u32::MAX,
                fail: kind,
                ..RequestRecord::default()
            });
        }
    }
}

/// The workers' failure tally (published at their last swap and at their exit).
fn engine_fails(engine: &Engine) -> FailTally {
    engine.fail_tally().0
}

/// The measured run as a driver phase: keeps every record and shows the progress line.
struct Gather<'a> {
    spec: &'a EngineSpec,
    run: PointRun,
    window: WindowRecords,
    progress: Progress,
    started: Instant,
    /// The phase ends this long after the start (the duration, or the end of the drain).
    until: Option<Duration>,
    /// Every worker had finished when the phase ended.
    finished: bool,
    /// `--failed-request-threshold`: (ratio, requests finished before it is checked).
    threshold: Option<(f64, u64)>,
    /// Failed requests gathered so far (cancelled ones not counted).
    failed: u64,
}

impl Phase for Gather<'_> {
    fn done(&mut self, engine: &Engine) -> bool {
        // Read before the last gather: a worker that finishes after its batch was taken
        // would leave its last records out of the run.
        self.finished = engine.all_finished();
        self.finished
            || self.run.threshold_hit.is_some() && self.threshold.is_some()
            || self.until.is_some_and(|d| self.started.elapsed() >= d)
    }

    fn gather(&mut self, engine: &mut Engine) -> Result<Option<String>> {
        let now_ns = self.spec.clock.now_ns();
        engine.collect(now_ns, &mut self.window)?;
        let run = &mut self.run;
        run.records.extend_from_slice(&self.window.records);
        self.failed += self
            .window
            .records
            .iter()
            .filter(|r| !r.ok && r.fail != crate::measure::FailKind::Cancelled)
            .count() as u64;
        if let Some((ratio, floor)) = self.threshold {
            let total = run.records.len() as u64;
            if run.threshold_hit.is_none() && over_threshold(self.failed, total, ratio, floor) {
                run.threshold_hit = Some((self.failed, total));
            }
        }
        run.worker_cpu_ns += self.window.client_cpu_ns;
        rebase(run, &self.window);
        run.end_ns = now_ns;
        let done = run.records.len() as u64;
        self.progress
            .show(&self.window, done, self.started.elapsed());
        Ok(None)
    }

    fn nap(&self) -> Duration {
        TICK
    }
}

/// More than `ratio` of `total` finished requests failed, once `floor` have finished.
pub fn over_threshold(failed: u64, total: u64, ratio: f64, floor: u64) -> bool {
    total >= floor.max(1) && failed as f64 / total as f64 > ratio
}

/// Moves the window's bodies into the run, fixing the offsets of the records just added.
fn rebase(run: &mut PointRun, window: &WindowRecords) {
    let base = run.bodies.len() as u32;
    run.bodies.extend_from_slice(&window.bodies);
    let first = run.records.len() - window.records.len();
    for r in &mut run.records[first..] {
        if r.has_region() {
            r.body_off += base;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(args: &[&str]) -> ProfileConfig {
        let mut v: Vec<std::ffi::OsString> = vec!["profile".into()];
        v.extend(args.iter().map(Into::into));
        super::super::cli::parse(v).unwrap().unwrap()
    }

    #[test]
    fn points_map_to_the_engine_load() {
        let c = cfg(&["-m", "llm", "--concurrency", "3"]);
        assert_eq!(load(&c, LoadPoint::Concurrency(3)), Load::Concurrency(3));
        let args = [
            "-m",
            "llm",
            "--request-rate",
            "2.5",
            "--request-distribution",
            "poisson",
            "--random-seed",
            "7",
            "--max-inflight",
            "4",
        ];
        let c = cfg(&args);
        assert_eq!(
            load(&c, LoadPoint::RequestRate(2.5)),
            Load::Paced {
                schedule: Schedule::Poisson {
                    rate: 2.5,
                    seed: 7,
                    horizon_ns: 60_000_000_000
                },
                max_inflight: Some(4)
            }
        );
        let gamma = ["-m", "llm", "--request-rate", "3", "--vllm-burstiness", "4"];
        assert_eq!(
            load(&cfg(&gamma), LoadPoint::RequestRate(3.0)),
            Load::Paced {
                schedule: Schedule::Gamma {
                    rate: 3.0,
                    shape: 4.0,
                    seed: 0,
                    horizon_ns: 60_000_000_000
                },
                max_inflight: None
            }
        );
        let aiperf = [
            "-m",
            "llm",
            "--request-rate",
            "3",
            "--request-rate-mode",
            "poisson",
        ];
        assert!(matches!(
            load(&cfg(&aiperf), LoadPoint::RequestRate(3.0)),
            Load::Paced {
                schedule: Schedule::Poisson { rate, .. },
                ..
            } if rate == 3.0
        ));
        let c = cfg(&["-m", "llm", "--request-rate", "2"]);
        assert_eq!(
            load(&c, LoadPoint::RequestRate(2.0)),
            Load::Paced {
                schedule: Schedule::Constant { rate: 2.0 },
                max_inflight: None
            }
        );
    }

    /// A failure the engine counted without a record becomes one failed record; failures
    /// that have their record are not counted twice.
    #[test]
    fn failures_without_a_record_become_records() {
        let rec = |end_ns, fail| RequestRecord {
            end_ns,
            ok: fail == FailKind::None,
            fail,
            ..RequestRecord::default()
        };
        let mut run = PointRun {
            records: vec![
                rec(10, FailKind::None),
                rec(30, FailKind::Closed),
                rec(20, FailKind::None),
            ],
            ..PointRun::default()
        };
        run.fails.add(FailKind::Closed, || "closed".into());
        for _ in 0..2 {
            run.fails
                .add(FailKind::Connect, || "connect failed: refused".into());
        }
        add_unrecorded_failures(&mut run);
        assert_eq!(run.records.len(), 5);
        let added = &run.records[3..];
        assert!(added
            .iter()
            .all(|r| r.fail == FailKind::Connect && !r.ok && r.end_ns == 30));
        let failed = run.records.iter().filter(|r| !r.ok).count() as u64;
        assert_eq!(failed, run.fails.total());
        let line = cut_short_line(&run.fails, 3, None, Some(Duration::from_secs(12)), 4.86);
        assert!(
            line.starts_with("the run was cut short after 4.9 s of the 12 s asked (--benchmark-duration): the server stopped accepting connections (connect failed: refused)"),
            "{line}"
        );
        let line = cut_short_line(&run.fails, 44, Some(100), None, 1.0);
        assert!(
            line.contains("after 44 of the 100 requests asked (--request-count)"),
            "{line}"
        );
    }

    #[test]
    fn the_failure_threshold_waits_for_its_floor_and_then_compares_the_share() {
        assert!(!over_threshold(9, 9, 0.5, 10), "below the floor");
        assert!(over_threshold(6, 10, 0.5, 10));
        assert!(!over_threshold(5, 10, 0.5, 10), "exceeds, not reaches");
        assert!(over_threshold(1, 10, 0.0, 10));
        assert!(!over_threshold(10, 10, 1.0, 10));
    }

    #[test]
    fn ramps_rise_to_the_target() {
        assert_eq!(ramp_levels(1), Vec::<u64>::new());
        assert_eq!(ramp_levels(4), vec![1, 2, 3]);
        let long = ramp_levels(1000);
        assert_eq!((long.len(), long[0]), (20, 1));
        assert!(long.windows(2).all(|w| w[0] < w[1]) && *long.last().unwrap() < 1000);
        // 10/s over 2 s from 0.5/s: 0.5*2 + 9.5*2/2 = 10.5 expected sends, so 10.
        let t = ramp_offsets(10.0, 2.0);
        assert_eq!(t.len(), 10);
        assert!(t.windows(2).all(|w| w[0] < w[1]) && *t.last().unwrap() <= 2_000_000_000);
        // The gaps shrink as the rate rises.
        assert!(t[1] - t[0] > t[9] - t[8]);
    }

    #[test]
    fn cancelled_requests_are_set_apart() {
        use crate::measure::llm::record::RequestError;
        let cancelled = LlmRequest {
            error: Some(RequestError {
                kind: "cancelled".into(),
                message: String::new(),
                code: None,
            }),
            ..LlmRequest::default()
        };
        let failed = LlmRequest {
            error: Some(RequestError {
                kind: "timeout".into(),
                message: String::new(),
                code: None,
            }),
            ..LlmRequest::default()
        };
        let (kept, n) = without_cancelled(&[cancelled, failed.clone(), LlmRequest::default()]);
        assert_eq!((kept.len(), n), (2, 1));
        assert_eq!(kept[0], failed);
        let json = with_cancelled("{\"a\": 1}".into(), 3);
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["cancelled_count"]["avg"], 3);
        assert_eq!(with_cancelled("{}".into(), 0), "{}");
    }
}
