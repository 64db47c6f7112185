//! The sweep over load levels (concurrency values, request rates or one interval schedule):
//! linear or binary search, one measured point per level, and the verdict on each.

use std::io::Write;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use super::coordinator::{profile_periodic, profile_point, PointCtx, PointOutcome, PointStatus};
use super::kinds::Service;
use super::load::LoadDesc;
use super::metrics::MetricsSource;
use super::peers::{Alone, Peers};
use super::setup::Target;
use crate::config::{Config, LoadMode, MeasurementMode};
use crate::engine::pace::{nominal_rate, Schedule};
use crate::engine::window::OutputCheck;
use crate::engine::{EngineSpec, Load};
use crate::error::{Error, ErrorKind, Result};
use crate::report::export::ExportExperiment;
use crate::report::{console, LoadValue, PointReport};

/// What the sweep produced.
#[derive(Default)]
pub struct SweepResult {
    pub points: Vec<PointReport>,
    pub exps: Vec<ExportExperiment>,
    pub error: Option<Error>,
}

pub struct Sweeper<'a> {
    pub cfg: &'a Config,
    /// The run's service kind (server statistics, report wording).
    pub service: &'a dyn Service,
    pub spec: &'a EngineSpec,
    pub target: &'a mut Target,
    pub stop: &'a AtomicBool,
    pub out: &'a mut dyn Write,
    pub step_inputs: &'a [String],
    /// Validation data's output check, when the input data has any.
    pub check: Option<&'a OutputCheck<'a>>,
    /// `--collect-metrics`: the endpoint polled while each point is measured.
    pub metrics: Option<&'a Arc<MetricsSource>>,
    /// The other processes (`--enable-mpi`; scale-out splits each level's load across them).
    pub peers: &'a mut dyn Peers,
    /// Called with every point reported so far after each reported level (writes the CSV,
    /// so a run that fails or is killed later keeps it); an error ends the sweep.
    pub on_point: &'a mut dyn FnMut(&[PointReport]) -> Result<()>,
    pub result: SweepResult,
}

impl Sweeper<'_> {
    /// Measures every level. An error in the middle of the sweep (a server gone, a failed
    /// warm-up, a metrics endpoint) ends it and lands in `result.error`: the levels measured
    /// before it are kept for the reports.
    pub fn run(&mut self) {
        if let Err(e) = self.sweep() {
            // The level's own verdict (e.g. a failed request) came first and names the cause.
            if self.result.error.is_none() {
                self.result.error = Some(e);
            }
        }
    }

    fn sweep(&mut self) -> Result<()> {
        match (self.cfg.load_mode, self.cfg.binary_search) {
            (LoadMode::Periodic, _) => self.periodic()?,
            (LoadMode::FixedSchedule, _) => {
                // perf_analyzer's experiment id for a fixed schedule: request_rate 0.0.
                self.level(LoadValue::RequestRate(0.0), true)?;
            }
            (LoadMode::Intervals, _) => {
                let rate =
                    nominal_rate(&Schedule::Intervals(self.cfg.request_intervals_ns.clone()));
                self.level(LoadValue::RequestRate(rate), true)?;
            }
            (_, false) => self.linear()?,
            (_, true) => self.binary()?,
        }
        Ok(())
    }

    /// The periodic ramp: no console statistics and no CSV, only the export's one
    /// experiment `{concurrency, 1}` with every request.
    fn periodic(&mut self) -> Result<()> {
        let cfg = self.cfg;
        let load = LoadDesc::of_config(cfg, LoadValue::Concurrency(1)).engine_load();
        let outcome = {
            let target = &mut *self.target;
            let mut fetch = || Ok(None);
            let mut ctx = PointCtx {
                cfg,
                spec: self.spec,
                stats: &mut fetch,
                cache_enabled: false,
                keep_windows: true,
                decoupled: target.decoupled(),
                composing: &[],
                check: self.check,
                stop: self.stop,
                out: &mut *self.out,
                peers: &mut Alone,
            };
            profile_periodic(&mut ctx, &load)?
        };
        self.result.exps.push(ExportExperiment {
            load: LoadValue::Concurrency(1),
            windows: outcome.windows,
            step_inputs: self.step_inputs.to_vec(),
        });
        match outcome.status {
            PointStatus::Failed(msg) => {
                let e = Error::generic(format!("inference request failed: {msg}"));
                self.result.error = Some(e);
            }
            PointStatus::Interrupted => eprintln!("Interrupted: writing the requests so far."),
            _ => {}
        }
        Ok(())
    }

    fn linear(&mut self) -> Result<()> {
        let mut k = 0u64;
        loop {
            let Some(value) = self.nth_value(k) else {
                return Ok(());
            };
            if !self.level(value, k == 0)? {
                return Ok(());
            }
            k += 1;
        }
    }

    /// The part of a level this rank generates: all of it, or its share in scale-out.
    fn rank_value(&self, value: LoadValue) -> LoadValue {
        match value {
            LoadValue::Concurrency(c) => LoadValue::Concurrency(self.peers.share(c)),
            LoadValue::RequestRate(r) => LoadValue::RequestRate(self.peers.share_rate(r)),
        }
    }

    /// Level `k` of a linear sweep: start + k * step while within the end (end 0: no end).
    fn nth_value(&self, k: u64) -> Option<LoadValue> {
        let cfg = self.cfg;
        match cfg.load_mode {
            LoadMode::Concurrency => {
                let r = cfg.concurrency;
                let c = r.start.checked_add(k.checked_mul(r.step)?)?;
                (r.end == 0 || c <= r.end).then_some(LoadValue::Concurrency(c))
            }
            _ => {
                let r = cfg.request_rate;
                let rate = r.start + k as f64 * r.step;
                // A small tolerance keeps 0.1 steps from missing the end to rounding.
                (r.end == 0.0 || rate <= r.end * (1.0 + 1e-9))
                    .then_some(LoadValue::RequestRate(rate))
            }
        }
    }

    /// perf_analyzer's bisection: the start must pass and the end must fail, then the
    /// middle of the remaining range is probed until it is no wider than the step.
    fn binary(&mut self) -> Result<()> {
        let cfg = self.cfg;
        let (mut lo, mut hi, step, integer) = match cfg.load_mode {
            LoadMode::Concurrency => {
                let r = cfg.concurrency;
                (r.start as f64, r.end as f64, r.step as f64, true)
            }
            _ => {
                let r = cfg.request_rate;
                (r.start, r.end, r.step, false)
            }
        };
        let value = |v: f64| {
            if integer {
                LoadValue::Concurrency(v as u64)
            } else {
                LoadValue::RequestRate(v)
            }
        };
        if !self.level(value(lo), true)? || self.result.error.is_some() {
            return Ok(());
        }
        if self.level(value(hi), false)? || self.result.error.is_some() {
            return Ok(());
        }
        while hi - lo > step {
            let mid = if integer {
                ((lo + hi) / 2.0).floor()
            } else {
                (lo + hi) / 2.0
            };
            if self.level(value(mid), false)? {
                lo = mid;
            } else {
                hi = mid;
            }
            if self.result.error.is_some() {
                break;
            }
        }
        Ok(())
    }

    /// Measures one level and reports it; true when it passed (stable, under `-l`) and the
    /// sweep may go on.
    fn level(&mut self, value: LoadValue, first: bool) -> Result<bool> {
        let cfg = self.cfg;
        let _ = self.out.write_all(console::point_header(&value).as_bytes());
        let load = LoadDesc::of_config(cfg, self.rank_value(value)).engine_load();
        let collector = self.metrics.map(|m| m.start(self.spec.clock));
        let outcome = self.measure(&load)?;
        let PointOutcome {
            status,
            client,
            server,
            windows,
            span_ns,
            stall,
        } = outcome;
        // A metrics endpoint that failed during the point fails the run (perf_analyzer).
        let metrics = match collector {
            Some(c) => c.finish(span_ns)?,
            None => None,
        };
        let measured = client.as_ref().is_some_and(|c| c.request_count > 0);
        if status == PointStatus::Interrupted && !measured {
            return Ok(self.interrupted_unmeasured());
        }
        if cfg.profile_export_file.is_some() {
            self.result.exps.push(ExportExperiment {
                load: value,
                windows,
                step_inputs: self.step_inputs.to_vec(),
            });
        }
        let report = client.map(|client| PointReport {
            load: value,
            batch_size: cfg.batch_size,
            client,
            server,
            metrics,
        });
        let first_linear = first && !cfg.binary_search;
        // Scale-out ranks other than 0 report nothing, not even the warnings.
        let quiet = !self.peers.reports();
        let mut verdict = judge(
            cfg,
            &status,
            report.as_ref(),
            value,
            first_linear,
            self.out,
            quiet,
        );
        // perf_analyzer's sentence stays the first line (tools read it); the stall follows.
        if let (Some(note), Some(e)) = (stall, verdict.error.as_mut()) {
            e.msg = format!("{}\n{note}", e.msg);
        }
        self.record(report, verdict)
    }

    /// Ctrl-C ended a level before any of its requests was measured (in its warm-up, or
    /// before its first window held one): the level has nothing to report, so it gets no
    /// console point, CSV row or export experiment. A run with no level measured at all ends
    /// with exit code 3, as one whose windows held no valid request. Returns false: the
    /// sweep stops.
    fn interrupted_unmeasured(&mut self) -> bool {
        if self.peers.reports() {
            eprintln!("Interrupted before any request of this level was measured.");
        }
        if self.result.points.is_empty() && self.result.error.is_none() {
            self.result.error = Some(Error {
                kind: ErrorKind::NoValidRequests,
                msg: "interrupted before any request was measured; nothing to report".into(),
            });
        }
        false
    }

    /// Measures one point at `load` against the target.
    fn measure(&mut self, load: &Load) -> Result<PointOutcome> {
        let cfg = self.cfg;
        let target = &mut *self.target;
        let cache_enabled = target.config().is_some_and(|c| c.response_cache);
        let decoupled = target.decoupled();
        let composing = target.composing().to_vec();
        let service = self.service;
        let mut fetch = || service.server_stats(cfg, target);
        let mut ctx = PointCtx {
            cfg,
            spec: self.spec,
            stats: &mut fetch,
            cache_enabled,
            keep_windows: cfg.profile_export_file.is_some(),
            decoupled,
            composing: &composing,
            check: self.check,
            stop: self.stop,
            out: &mut *self.out,
            peers: &mut *self.peers,
        };
        profile_point(&mut ctx, load)
    }

    /// Acts on a level's verdict: a kept point is printed, added to the result and handed to
    /// `on_point`; the verdict's error becomes the run's. Returns whether the sweep may go on.
    fn record(&mut self, report: Option<PointReport>, verdict: Verdict) -> Result<bool> {
        let cfg = self.cfg;
        if verdict.keep {
            if let Some(r) = report {
                let library = self.service.labels().library;
                let text = console::point(&r, cfg.percentile, cfg.verbose, library);
                let _ = self.out.write_all(text.as_bytes());
                let _ = self.out.flush();
                self.result.points.push(r);
                if verdict.error.is_some() {
                    self.result.error = verdict.error;
                }
                (self.on_point)(&self.result.points)?;
                return Ok(verdict.passed);
            }
        }
        if verdict.error.is_some() {
            self.result.error = verdict.error;
        }
        Ok(verdict.passed)
    }
}

/// What a level's outcome means for the sweep.
struct Verdict {
    /// Report the point.
    keep: bool,
    /// Stable and under `-l`: the sweep may go on (a binary search moves up).
    passed: bool,
    /// An error for the exit code.
    error: Option<Error>,
}

fn judge(
    cfg: &Config,
    status: &PointStatus,
    report: Option<&PointReport>,
    value: LoadValue,
    first: bool,
    out: &mut dyn Write,
    quiet: bool,
) -> Verdict {
    let warn = |msg: &str| {
        if !quiet {
            eprintln!("{}", crate::text::escape_control(msg));
        }
    };
    let verdict = |keep, passed, error| Verdict {
        keep,
        passed,
        error,
    };
    let over_limit = |out: &mut dyn Write| {
        let limit = cfg.latency_threshold_ms;
        let _ = writeln!(
            out,
            "Measured latency went over the set limit of {limit} msec. "
        );
        verdict(false, false, None)
    };
    match status {
        PointStatus::Stable => {
            let lat = report.map_or(0, |r| r.client.stabilizing_latency_ns);
            let limit = cfg.latency_threshold_ms;
            if limit > 0 && lat >= limit * 1_000_000 {
                return over_limit(out);
            }
            verdict(true, true, None)
        }
        PointStatus::OverThreshold => over_limit(out),
        PointStatus::Unstable => {
            let msg = unstable_message(cfg, value);
            if first {
                // Exit code 2; the caller prints the message once.
                return verdict(false, false, Some(Error::stability(msg)));
            }
            warn(&msg);
            verdict(false, false, None)
        }
        PointStatus::Interrupted => {
            warn("Interrupted: reporting the windows measured so far (not checked for stability).");
            verdict(true, false, None)
        }
        // The windows before the failure are reported when they hold any request.
        PointStatus::Failed(msg) => {
            let measured = report.is_some_and(|r| r.client.request_count > 0);
            verdict(measured, false, Some(failure(msg)))
        }
        PointStatus::NoValidRequests => verdict(false, false, Some(Error::no_valid_requests())),
    }
}

/// The error of a failed level: a request's, or the MPI job's (`MPI rank N: ...`).
fn failure(msg: &str) -> Error {
    if msg.starts_with("MPI rank") {
        Error::generic(msg)
    } else {
        Error::generic(format!("inference request failed: {msg}"))
    }
}

fn unstable_message(cfg: &Config, value: LoadValue) -> String {
    match value {
        LoadValue::Concurrency(c) => {
            let what = match cfg.measurement_mode {
                MeasurementMode::TimeWindows => "--measurement-interval",
                MeasurementMode::CountWindows => "--measurement-request-count",
            };
            format!(
                "Failed to obtain stable measurement within {} measurement windows for \
                 concurrency {c}. Please try to increase the {what}.",
                cfg.max_trials
            )
        }
        LoadValue::RequestRate(_) => "Failed to obtain stable measurement.".to_string(),
    }
}
