//! Which levels a run measures, one after the other: the `--concurrency` /
//! `--request-rate` list, GuideLLM's sweep (synchronous, throughput, then constant rates
//! between their measured request rates), or the SLA search (bisection for the largest
//! level whose goodput fraction meets the limit). Each level is run by the caller's
//! `level` function; the rows go into a [`SweepSummary`].

use std::io::Write;

use super::cli::{LoadPoint, ProfileConfig};
use super::sweep::{SlaAnswer, SweepRow, SweepSummary};
use super::sweep_args::{Plan, Shape, SlaAxis};
use super::PointOutcome;
use crate::error::{Error, Result};

/// GuideLLM's constant rates: `profiles - 2` rates evenly spaced from the synchronous rate
/// (excluded) up to the throughput rate (included), as `linspace(sync, max, profiles - 1)`
/// without its first value.
/// Each rounded to 0.01 request/s (at least 0.01), so levels have short names.
pub fn sweep_rates(sync_rate: f64, max_rate: f64, profiles: u32) -> Vec<f64> {
    let n = profiles.saturating_sub(1).max(2);
    let step = (max_rate - sync_rate) / f64::from(n - 1);
    (1..n)
        .map(|i| round_rate(sync_rate + step * f64::from(i)))
        .collect()
}

/// A rate rounded to 0.01 request/s, at least 0.01.
pub fn round_rate(rate: f64) -> f64 {
    ((rate * 100.0).round() / 100.0).max(0.01)
}

/// Bisection for the largest passing level in `[low, high]`: `low` first (a failure ends
/// the search with no answer), then `high` (a pass ends it with `high`), then midpoints
/// until the passing and failing levels are `precision` apart (1 for concurrency).
#[derive(Debug, Clone, PartialEq)]
pub struct Bisect {
    /// The largest level that passed, and the smallest that failed.
    pass: Option<f64>,
    fail: Option<f64>,
    low: f64,
    high: f64,
    precision: f64,
    whole: bool,
    done: bool,
}

impl Bisect {
    pub fn new(low: f64, high: f64, precision: f64, whole: bool) -> Bisect {
        Bisect {
            pass: None,
            fail: None,
            low,
            high,
            precision,
            whole,
            done: false,
        }
    }

    /// The next level to probe; `None` when the search is over.
    pub fn next(&self) -> Option<f64> {
        if self.done {
            return None;
        }
        match (self.pass, self.fail) {
            (None, None) => Some(self.low),
            (Some(_), None) => Some(self.high),
            (Some(p), Some(f)) if f - p > self.precision => {
                let mid = (p + f) / 2.0;
                Some(if self.whole { mid.floor() } else { mid })
            }
            _ => None,
        }
    }

    /// The result of probing `level`.
    pub fn record(&mut self, level: f64, passed: bool) {
        if passed {
            self.pass = Some(level);
            self.done |= level >= self.high;
        } else {
            self.fail = Some(level);
            self.done |= self.pass.is_none();
        }
    }

    /// The largest level that passed.
    pub fn best(&self) -> Option<f64> {
        self.pass
    }
}

/// Runs every level of `shape` with `level` and prints the summary after the last one
/// (when there was more than one level or a sweep/search); writes it beside the levels.
/// Returns the levels and the summary (which holds a row per level in every case).
pub fn drive(
    cfg: &ProfileConfig,
    shape: &Shape,
    out: &mut dyn Write,
    mut level: impl FnMut(LoadPoint, &mut dyn Write) -> Result<PointOutcome>,
) -> Result<(Vec<PointOutcome>, SweepSummary)> {
    let mut outcomes: Vec<PointOutcome> = Vec::new();
    let mut summary = SweepSummary::default();
    let mut failure: Option<Error> = None;
    let rows = &mut summary.rows;
    // A failed level ends the run (`Ok(None)`), its row marked; the error is returned once
    // the summaries of the levels that ran are written.
    let mut run = |point: LoadPoint, role: &'static str, out: &mut dyn Write| {
        let mut o = match level(point, out) {
            Ok(o) => o,
            Err(e) => {
                let dir = super::artifacts::point_dir(cfg, point);
                rows.push(SweepRow::failed(point, role, &e.msg, &dir));
                failure = Some(e);
                return Ok(None);
            }
        };
        let mut row = SweepRow::of(point, role, &o.metrics, o.cancelled, &o.dir);
        row.error = o.failure.as_ref().map(|e| e.msg.clone());
        rows.push(row);
        let figures = Figures {
            rate: o.metrics.request_throughput,
            goodput_fraction: o.metrics.goodput.as_ref().map_or(0.0, |g| g.fraction),
        };
        let failed = o.failure.take();
        outcomes.push(o);
        if failed.is_some() {
            failure = failed;
            return Ok(None);
        }
        Ok((!last_interrupted(&outcomes)).then_some(figures))
    };
    match shape.plan {
        Plan::List => {
            let cooldown = cfg.args.multi_run.parameter_sweep_cooldown_seconds;
            for (i, &point) in cfg.points.iter().enumerate() {
                if i > 0 && cooldown > 0.0 {
                    let _ = writeln!(out, "Cooling down {cooldown} s before the next level");
                    std::thread::sleep(std::time::Duration::from_secs_f64(cooldown));
                }
                if run(point, "level", out)?.is_none() {
                    break;
                }
            }
        }
        Plan::Sweep {
            profiles,
            concurrency,
        } => guidellm(profiles, concurrency, out, &mut run)?,
        Plan::Sla {
            axis,
            low,
            high,
            min_fraction,
            precision,
        } => {
            let mut search = Bisect::new(low, high, precision, axis == SlaAxis::Concurrency);
            let mut passes = Vec::new();
            sla(axis, min_fraction, &mut search, &mut passes, out, &mut run)?;
            for (row, pass) in summary.rows.iter_mut().zip(passes) {
                row.sla_pass = Some(pass);
            }
            let axis = match axis {
                SlaAxis::Concurrency => "concurrency",
                SlaAxis::RequestRate => "request_rate",
            };
            summary.sla = Some(SlaAnswer {
                axis,
                min_goodput_fraction: min_fraction,
                best: search.best(),
            });
        }
    }
    if super::layout::is_sweep(cfg) && !summary.rows.is_empty() {
        let _ = out.write_all(summary.table().as_bytes());
        summary.write(&cfg.args.artifact_dir, cfg.args.generate_plots)?;
        let json = cfg.args.artifact_dir.join(super::sweep::SUMMARY_JSON);
        let _ = writeln!(out, "Sweep summary in {}", json.display());
        let aggregate = write_aiperf_aggregate(cfg, &summary, &outcomes)?;
        let _ = writeln!(out, "AIPerf's sweep aggregate in {}", aggregate.display());
    }
    match failure {
        Some(e) => Err(e),
        None => Ok((outcomes, summary)),
    }
}

/// AIPerf's summaries of the levels that ran: each successful level's
/// `aggregate/<level>/profile_export_aiperf_aggregate.{json,csv}` and the cross-level
/// `sweep_aggregate/profile_export_aiperf_sweep.{json,csv}` (row `i` is outcome `i`; a failed
/// level, always the last, is AIPerf's failed run), both in the sweep's folder, and the sweep's
/// `logs/aiperf.log` in the artifact directory; returns the sweep aggregate's folder.
fn write_aiperf_aggregate(
    cfg: &ProfileConfig,
    summary: &SweepSummary,
    outcomes: &[PointOutcome],
) -> Result<std::path::PathBuf> {
    use super::layout;
    use crate::report::llm::aiperf_sweep::{self, SweepLevel};
    let levels: Vec<SweepLevel> = summary
        .rows
        .iter()
        .enumerate()
        .map(|(i, row)| {
            let point = row_point(row);
            let (name, text) = layout::parameter(point);
            let value = match point {
                LoadPoint::Concurrency(c) => c.into(),
                LoadPoint::RequestRate(r) => r.into(),
            };
            let result = match (&row.error, outcomes.get(i)) {
                (None, Some(o)) => Ok(&o.metrics),
                (Some(e), _) => Err(e.clone()),
                (None, None) => Err("not measured".to_string()),
            };
            SweepLevel {
                name,
                value,
                text,
                result,
            }
        })
        .collect();
    let write = |dir: &std::path::Path, name: &str, text: String| {
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::generic(format!("cannot write {}: {e}", dir.display())))?;
        crate::report::write::write_atomic("", &dir.join(name), text.as_bytes())
    };
    let root = &layout::sweep_dir(cfg);
    for (row, level) in summary.rows.iter().zip(&levels) {
        let Ok(metrics) = level.result else { continue };
        let dir = root
            .join(layout::AGGREGATE_DIR)
            .join(layout::level_dir_name(row_point(row)));
        let model = &cfg.models[0];
        let json = aiperf_sweep::aggregate_json(level, metrics, model);
        write(&dir, "profile_export_aiperf_aggregate.json", json)?;
        let csv = aiperf_sweep::aggregate_csv(level, metrics, model);
        write(&dir, "profile_export_aiperf_aggregate.csv", csv)?;
    }
    let dir = root.join(layout::SWEEP_AGGREGATE_DIR);
    write(
        &dir,
        "profile_export_aiperf_sweep.json",
        aiperf_sweep::sweep_json(&levels),
    )?;
    write(
        &dir,
        "profile_export_aiperf_sweep.csv",
        aiperf_sweep::sweep_csv(&levels),
    )?;
    let logs = cfg.args.artifact_dir.join("logs");
    write(&logs, "aiperf.log", sweep_log(&levels, outcomes, &dir))?;
    Ok(dir)
}

/// The sweep's own log, as AIPerf's multi-run log tells it: the number of levels, each
/// level's start, and where the sweep aggregate went.
fn sweep_log(
    levels: &[crate::report::llm::aiperf_sweep::SweepLevel],
    outcomes: &[PointOutcome],
    aggregate: &std::path::Path,
) -> String {
    use crate::report::llm::aiperf::log_line;
    let now = crate::clock::Clock::new().now_ns();
    let started = |o: &PointOutcome| o.requests.iter().map(|r| r.start_ns).min();
    let first = outcomes.iter().find_map(started).unwrap_or(now);
    let mut log = [
        "Starting Multi-Run Benchmark".to_string(),
        format!("  Configurations: {}", levels.len()),
        "  Trials per config: 1".to_string(),
        format!("  Total runs: {}", levels.len()),
    ]
    .map(|m| log_line(first, &m))
    .concat();
    for (i, level) in levels.iter().enumerate() {
        let at = outcomes.get(i).and_then(started).unwrap_or(now);
        let label = level.variation_label();
        let outcome = match &level.result {
            Ok(_) => "measured".to_string(),
            Err(e) => format!("failed: {e}"),
        };
        log.push_str(&log_line(at, &format!("[v{i} t0] {label}: {outcome}")));
    }
    for (what, ext) in [("JSON", "json"), ("CSV", "csv")] {
        let file = aggregate.join(format!("profile_export_aiperf_sweep.{ext}"));
        let line = format!("Sweep aggregate {what} written to: {}", file.display());
        log.push_str(&log_line(now, &line));
    }
    log
}

/// The level a summary row measured.
fn row_point(row: &SweepRow) -> LoadPoint {
    match (row.concurrency, row.request_rate) {
        (Some(c), _) => LoadPoint::Concurrency(c),
        (None, r) => LoadPoint::RequestRate(r.unwrap_or_default()),
    }
}

/// The probes of an SLA search, each judged by its goodput fraction (`passes`, in order).
fn sla(
    axis: SlaAxis,
    min_fraction: f64,
    search: &mut Bisect,
    passes: &mut Vec<bool>,
    out: &mut dyn Write,
    run: &mut RunLevel<'_>,
) -> Result<()> {
    while let Some(v) = search.next() {
        let point = match axis {
            SlaAxis::Concurrency => LoadPoint::Concurrency(v as u64),
            SlaAxis::RequestRate => LoadPoint::RequestRate(v),
        };
        let Some(Figures {
            goodput_fraction: fraction,
            ..
        }) = run(point, "probe", out)?
        else {
            break;
        };
        let passed = fraction >= min_fraction;
        passes.push(passed);
        let verdict = if passed { "pass" } else { "fail" };
        let label = point.label();
        let _ = writeln!(
            out,
            "SLA probe {label}: goodput fraction {fraction:.3} ({verdict})"
        );
        search.record(v, passed);
    }
    Ok(())
}

/// What the plans need of a finished level.
#[derive(Debug, Clone, Copy)]
struct Figures {
    /// Successful requests per second.
    rate: f64,
    /// Share of requests that met every `--goodput` limit (0 without limits).
    goodput_fraction: f64,
}

/// The last level was interrupted (Ctrl-C): no further level runs.
fn last_interrupted(outcomes: &[PointOutcome]) -> bool {
    outcomes.last().is_some_and(|o| o.interrupted)
}

/// Runs one level in a role; its figures, or `None` when it was interrupted.
type RunLevel<'a> =
    dyn FnMut(LoadPoint, &'static str, &mut dyn Write) -> Result<Option<Figures>> + 'a;

/// GuideLLM's sweep: synchronous, throughput, then the constant rates between.
fn guidellm(
    profiles: u32,
    concurrency: u64,
    out: &mut dyn Write,
    run: &mut RunLevel<'_>,
) -> Result<()> {
    let Some(Figures { rate: sync, .. }) = run(LoadPoint::Concurrency(1), "synchronous", out)?
    else {
        return Ok(());
    };
    let throughput = LoadPoint::Concurrency(concurrency);
    let Some(Figures { rate: max, .. }) = run(throughput, "throughput", out)? else {
        return Ok(());
    };
    if !(sync > 0.0 && max > 0.0) {
        return Err(crate::error::Error::generic(
            "sweep: the synchronous or throughput profile measured no request rate",
        ));
    }
    for rate in sweep_rates(sync, max, profiles) {
        if run(LoadPoint::RequestRate(rate), "constant", out)?.is_none() {
            break;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweep_rates_are_guidellms_linspace() {
        assert_eq!(
            sweep_rates(2.0, 10.0, 10),
            vec![3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0]
        );
        assert_eq!(sweep_rates(1.0, 5.0, 3), vec![5.0]);
        assert_eq!(sweep_rates(1.0, 3.0, 4), vec![2.0, 3.0]);
        assert_eq!(sweep_rates(1.0, 2.0, 5), vec![1.33, 1.67, 2.0]);
        assert_eq!(sweep_rates(0.001, 0.002, 3), vec![0.01]);
    }

    /// Runs a search against a pass/fail rule; returns the probes and the answer.
    fn search(
        low: f64,
        high: f64,
        precision: f64,
        whole: bool,
        limit: f64,
    ) -> (Vec<f64>, Option<f64>) {
        let mut b = Bisect::new(low, high, precision, whole);
        let mut probes = Vec::new();
        while let Some(v) = b.next() {
            probes.push(v);
            b.record(v, v <= limit);
            assert!(probes.len() < 64, "the search ends");
        }
        (probes, b.best())
    }

    #[test]
    fn bisection_finds_the_largest_passing_level() {
        assert_eq!(
            search(1.0, 16.0, 1.0, true, 5.0),
            (vec![1.0, 16.0, 8.0, 4.0, 6.0, 5.0], Some(5.0))
        );
        assert_eq!(
            search(1.0, 16.0, 1.0, true, 100.0),
            (vec![1.0, 16.0], Some(16.0))
        );
        assert_eq!(search(2.0, 16.0, 1.0, true, 1.0), (vec![2.0], None));
        for limit in 1..16 {
            assert_eq!(
                search(1.0, 16.0, 1.0, true, limit as f64).1,
                Some(limit as f64)
            );
        }
        let (probes, best) = search(1.0, 100.0, 0.5, false, 37.3);
        let best = best.unwrap();
        assert!(best <= 37.3 && 37.3 - best <= 0.5, "{best} {probes:?}");
    }
}
