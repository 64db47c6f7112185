//! AIPerf's Multi-Run group: `--num-profile-runs N` repeats the whole profile of one
//! configuration N times and reports each metric's mean, spread and confidence interval
//! over the runs.
//!
//! As AIPerf 0.13 lays it out, with `<base>` the folder a single run's AIPerf files would go
//! to ([`layout::aiperf_dir`](super::layout::aiperf_dir)):
//!
//! - run k's files (AIPerf's, and GenAI-Perf's in their usual `<name>/` folder beneath) in
//!   `<base>/profile_runs/run_000k/`, each run a complete profile with its own console table;
//! - the confidence aggregate in `<base>/aggregate/profile_export_aiperf_aggregate.{json,csv}`
//!   (see [`crate::report::llm::aiperf_confidence`]), its table printed after the last run.
//!
//! Every run sends the same prepared requests (AIPerf's consistent seed). Warm-up requests
//! go before the first run only unless `--no-profile-run-disable-warmup-after-first`;
//! `--profile-run-cooldown-seconds` pauses between runs. A failed run is named in the
//! aggregate and the rest still run; the command then ends with the first failure.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args;

use super::cli::{LoadPoint, ProfileConfig};
use super::PointOutcome;
use crate::error::{Error, Result};
use crate::report::llm::aiperf_confidence;

/// Most runs AIPerf allows.
pub const MAX_RUNS: u32 = 10;
/// The folder of the runs inside the base folder.
pub const RUNS_DIR: &str = "profile_runs";
/// The folder of the aggregate inside the base folder.
pub const AGGREGATE_DIR: &str = "aggregate";
/// AIPerf's aggregate file names.
pub const AGGREGATE_JSON: &str = "profile_export_aiperf_aggregate.json";
pub const AGGREGATE_CSV: &str = "profile_export_aiperf_aggregate.csv";

/// AIPerf's `--parameter-sweep-mode`: the order of the runs of a list of levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SweepOrder {
    /// Run after run, every level once in each (`profile_runs/trial_NNNN/<level>/`).
    Repeated,
    /// Level after level, every run of it (`<level>/profile_runs/trial_NNNN/`).
    Independent,
}

/// The flags of AIPerf's Multi-Run group.
#[derive(Args, Debug, Clone)]
pub struct MultiRunArgs {
    /// AIPerf: run the profile N times (1-10) and report each metric's mean, standard
    /// deviation, coefficient of variation and confidence interval over the runs.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub num_profile_runs: u32,
    /// Confidence level of the intervals, strictly between 0 and 1.
    #[arg(long, default_value_t = 0.95, value_name = "LEVEL")]
    pub confidence_level: f64,
    /// Seconds of pause between profile runs.
    #[arg(long, default_value_t = 0.0, value_name = "S")]
    pub profile_run_cooldown_seconds: f64,
    /// Warm-up requests (--warmup-request-count) before the first run only (the default).
    #[arg(long, overrides_with = "no_profile_run_disable_warmup_after_first")]
    pub profile_run_disable_warmup_after_first: bool,
    /// Warm-up requests before every run.
    #[arg(long)]
    pub no_profile_run_disable_warmup_after_first: bool,
    /// Accepted for AIPerf compatibility: every run always sends the same prepared requests.
    #[arg(long)]
    pub set_consistent_seed: bool,
    /// A list of levels run several times: repeated (every level once per run, run after
    /// run) or independent (every run of one level, then the next level).
    #[arg(long, value_enum, default_value_t = SweepOrder::Repeated, value_name = "MODE")]
    pub parameter_sweep_mode: SweepOrder,
    /// Seconds of pause between the levels of a list.
    #[arg(long, default_value_t = 0.0, value_name = "S")]
    pub parameter_sweep_cooldown_seconds: f64,
    /// Which run this is (0-based; set for each run, not a flag).
    #[arg(skip)]
    pub run_index: usize,
}

impl Default for MultiRunArgs {
    fn default() -> Self {
        MultiRunArgs {
            num_profile_runs: 1,
            confidence_level: 0.95,
            profile_run_cooldown_seconds: 0.0,
            profile_run_disable_warmup_after_first: false,
            no_profile_run_disable_warmup_after_first: false,
            set_consistent_seed: false,
            parameter_sweep_mode: SweepOrder::Repeated,
            parameter_sweep_cooldown_seconds: 0.0,
            run_index: 0,
        }
    }
}

/// The flags' own checks: one line naming the flag.
pub fn check(a: &MultiRunArgs) -> Result<()> {
    if !(1..=MAX_RUNS).contains(&a.num_profile_runs) {
        return Err(Error::usage(format!(
            "profile: --num-profile-runs {} is out of range: give 1 to {MAX_RUNS}",
            a.num_profile_runs
        )));
    }
    let level = a.confidence_level;
    if !(level > 0.0 && level < 1.0) {
        return Err(Error::usage(format!(
            "profile: --confidence-level {level} is out of range: give a number strictly \
             between 0 and 1 (0.90, 0.95, 0.99)"
        )));
    }
    for (flag, cool) in [
        (
            "--profile-run-cooldown-seconds",
            a.profile_run_cooldown_seconds,
        ),
        (
            "--parameter-sweep-cooldown-seconds",
            a.parameter_sweep_cooldown_seconds,
        ),
    ] {
        if !(cool.is_finite() && (0.0..=86_400.0).contains(&cool)) {
            return Err(Error::usage(format!(
                "profile: {flag} {cool} is out of range: give 0 to 86400 seconds"
            )));
        }
    }
    Ok(())
}

/// Refuses several runs of a run whose levels depend on what it measures (GuideLLM's
/// `--sweep`, `--sla-search`); a list of levels may repeat.
pub fn check_plan(cfg: &ProfileConfig) -> Result<()> {
    let adaptive =
        super::sweep_args::Shape::of(cfg).is_ok_and(|s| s.plan != super::sweep_args::Plan::List);
    if cfg.args.multi_run.num_profile_runs > 1 && adaptive {
        return Err(Error::usage(
            "profile: --num-profile-runs with --sweep or --sla-search is not supported (their \
             levels depend on what each run measures): repeat a --concurrency or \
             --request-rate list instead",
        ));
    }
    Ok(())
}

/// The run repeats (more than one profile run).
pub fn is_multi_run(cfg: &ProfileConfig) -> bool {
    cfg.args.multi_run.num_profile_runs > 1
}

/// The folder of the runs and the aggregate.
pub fn base_dir(cfg: &ProfileConfig) -> PathBuf {
    super::layout::aiperf_dir(cfg, cfg.points[0])
}

/// The settings of run `i` (0-based): its folder as the artifact directory, and no warm-up
/// after the first run unless asked.
pub fn run_config(cfg: &ProfileConfig, i: usize) -> ProfileConfig {
    let mut c = cfg.clone();
    c.args.artifact_dir = base_dir(cfg)
        .join(RUNS_DIR)
        .join(aiperf_confidence::run_label(i));
    c.args.artifact_dir_given = true;
    c.args.multi_run.run_index = i;
    let warm_each = cfg.args.multi_run.no_profile_run_disable_warmup_after_first;
    if i > 0 && !warm_each {
        c.args.warmup_request_count = 0;
    }
    c
}

/// Runs the profile `num_profile_runs` times with `profile` (one complete profile in the
/// given settings), then writes and prints the aggregate. Returns every run's outcomes.
pub fn drive(
    cfg: &ProfileConfig,
    out: &mut dyn Write,
    mut profile: impl FnMut(&ProfileConfig, &mut dyn Write) -> Result<Vec<PointOutcome>>,
) -> Result<Vec<PointOutcome>> {
    if super::layout::is_sweep(cfg) {
        return drive_sweep(cfg, out, profile);
    }
    let n = cfg.args.multi_run.num_profile_runs as usize;
    let configs: Vec<ProfileConfig> = (0..n).map(|i| run_config(cfg, i)).collect();
    for c in &configs {
        super::layout::check_aiperf_dirs(c)?;
    }
    let base = base_dir(cfg);
    let aggregate_dir = base.join(AGGREGATE_DIR);
    check_aggregate_dir(&aggregate_dir)?;
    let mut outcomes: Vec<PointOutcome> = Vec::new();
    // Per run: the index of its outcome, or why it failed.
    let mut results: Vec<std::result::Result<usize, String>> = Vec::new();
    let mut first_error: Option<Error> = None;
    let cooldown = cfg.args.multi_run.profile_run_cooldown_seconds;
    for (i, c) in configs.iter().enumerate() {
        if i > 0 && cooldown > 0.0 {
            let _ = writeln!(out, "Cooling down {cooldown} s before the next run");
            std::thread::sleep(std::time::Duration::from_secs_f64(cooldown));
        }
        let label = aiperf_confidence::run_label(i);
        let _ = writeln!(out, "Profile run {} of {n} ({label})", i + 1);
        match profile(c, out) {
            Ok(mut o) if !o.is_empty() => {
                let interrupted = o.iter().any(|o| o.interrupted);
                results.push(Ok(outcomes.len()));
                outcomes.append(&mut o);
                if interrupted {
                    break;
                }
            }
            Ok(_) => results.push(Err("not measured".into())),
            Err(e) => {
                results.push(Err(e.msg.clone()));
                first_error.get_or_insert(e);
            }
        }
    }
    let runs: Vec<std::result::Result<&crate::measure::llm::LlmMetrics, String>> = results
        .iter()
        .map(|r| match r {
            Ok(k) => Ok(&outcomes[*k].metrics),
            Err(e) => Err(e.clone()),
        })
        .collect();
    let a = &cfg.args.multi_run;
    if let Some(agg) =
        aiperf_confidence::aggregate(&runs, a.confidence_level, a.profile_run_cooldown_seconds)
    {
        std::fs::create_dir_all(&aggregate_dir).map_err(|e| {
            Error::generic(format!("cannot write {}: {e}", aggregate_dir.display()))
        })?;
        let json = aggregate_dir.join(AGGREGATE_JSON);
        crate::report::write::write_atomic("", &json, agg.json().as_bytes())?;
        let csv = aggregate_dir.join(AGGREGATE_CSV);
        crate::report::write::write_atomic("", &csv, agg.csv().as_bytes())?;
        let _ = out.write_all(agg.table().as_bytes());
        let _ = writeln!(out, "AIPerf's aggregate in {}", json.display());
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(outcomes),
    }
}

/// AIPerf's label of trial `t` (0-based) of a level of a sweep: `trial_0001`.
pub fn trial_label(t: usize) -> String {
    format!("trial_{:04}", t + 1)
}

/// The folder of trial `t` of `point` in a sweep under `base` (AIPerf's layout of the order).
pub fn trial_dir(cfg: &ProfileConfig, base: &Path, point: LoadPoint, t: usize) -> PathBuf {
    let level = super::layout::level_dir_name(point);
    match cfg.args.multi_run.parameter_sweep_mode {
        SweepOrder::Repeated => base.join(RUNS_DIR).join(trial_label(t)).join(level),
        SweepOrder::Independent => base.join(level).join(RUNS_DIR).join(trial_label(t)),
    }
}

/// The folders of a level's aggregate and of the sweep aggregate under `base`.
pub fn aggregate_dirs(cfg: &ProfileConfig, base: &Path, point: LoadPoint) -> (PathBuf, PathBuf) {
    let level = super::layout::level_dir_name(point);
    let sweep = super::layout::SWEEP_AGGREGATE_DIR;
    match cfg.args.multi_run.parameter_sweep_mode {
        SweepOrder::Repeated => (
            base.join(AGGREGATE_DIR).join(level),
            base.join(AGGREGATE_DIR).join(sweep),
        ),
        SweepOrder::Independent => (base.join(level).join(AGGREGATE_DIR), base.join(sweep)),
    }
}

/// The settings of trial `t` of `point`: that level alone, its folder as the artifact
/// directory, the warm-up on the first trial only unless asked.
fn cell_config(cfg: &ProfileConfig, base: &Path, point: LoadPoint, t: usize) -> ProfileConfig {
    let mut c = cfg.clone();
    c.points = vec![point];
    c.args.artifact_dir = trial_dir(cfg, base, point, t);
    c.args.artifact_dir_given = true;
    c.args.multi_run.run_index = t;
    let warm_each = cfg.args.multi_run.no_profile_run_disable_warmup_after_first;
    if t > 0 && !warm_each {
        c.args.warmup_request_count = 0;
    }
    c
}

/// A list of levels run `num_profile_runs` times, in `--parameter-sweep-mode` order with
/// the cooldowns between runs and between levels; then each level's confidence aggregate
/// and the sweep aggregate over the levels. A failed run is named in the aggregates and the
/// rest still run; the command then ends with the first failure.
fn drive_sweep(
    cfg: &ProfileConfig,
    out: &mut dyn Write,
    mut profile: impl FnMut(&ProfileConfig, &mut dyn Write) -> Result<Vec<PointOutcome>>,
) -> Result<Vec<PointOutcome>> {
    use crate::report::llm::aiperf_sweep_trials::{self as trials, SweepMode, TrialLevel};
    let a = &cfg.args.multi_run;
    let n = a.num_profile_runs as usize;
    let points = cfg.points.clone();
    let base = super::layout::sweep_dir(cfg);
    // (level, trial) in the order they run.
    let order: Vec<(usize, usize)> = match a.parameter_sweep_mode {
        SweepOrder::Repeated => (0..n)
            .flat_map(|t| (0..points.len()).map(move |k| (k, t)))
            .collect(),
        SweepOrder::Independent => (0..points.len())
            .flat_map(|k| (0..n).map(move |t| (k, t)))
            .collect(),
    };
    for &(k, t) in &order {
        super::layout::check_aiperf_dirs(&cell_config(cfg, &base, points[k], t))?;
    }
    for p in &points {
        let (level, sweep) = aggregate_dirs(cfg, &base, *p);
        check_aggregate_dir(&level)?;
        check_aggregate_dir(&sweep)?;
    }
    let mut outcomes: Vec<PointOutcome> = Vec::new();
    let mut results: Vec<Vec<std::result::Result<usize, String>>> = vec![Vec::new(); points.len()];
    let mut first_error: Option<Error> = None;
    let mut last: Option<(usize, usize)> = None;
    let pause = |secs: f64, what: &str, out: &mut dyn Write| {
        if secs > 0.0 {
            let _ = writeln!(out, "Cooling down {secs} s before the next {what}");
            std::thread::sleep(std::time::Duration::from_secs_f64(secs));
        }
    };
    for &(k, t) in &order {
        if let Some((pk, pt)) = last {
            let next_level = match a.parameter_sweep_mode {
                SweepOrder::Repeated => pt == t,
                SweepOrder::Independent => pk != k,
            };
            if next_level {
                pause(a.parameter_sweep_cooldown_seconds, "level", out);
            } else {
                pause(a.profile_run_cooldown_seconds, "run", out);
            }
        }
        last = Some((k, t));
        let point = points[k];
        let c = cell_config(cfg, &base, point, t);
        let _ = writeln!(
            out,
            "Profile run {} of {n} ({}), {}",
            t + 1,
            trial_label(t),
            point.label()
        );
        match profile(&c, out) {
            Ok(mut o) if !o.is_empty() => {
                let interrupted = o.iter().any(|o| o.interrupted);
                results[k].push(Ok(outcomes.len()));
                outcomes.append(&mut o);
                if interrupted {
                    break;
                }
            }
            Ok(_) => results[k].push(Err("not measured".into())),
            Err(e) => {
                results[k].push(Err(e.msg.clone()));
                first_error.get_or_insert(e);
            }
        }
    }
    let mode = match a.parameter_sweep_mode {
        SweepOrder::Repeated => SweepMode::Repeated,
        SweepOrder::Independent => SweepMode::Independent,
    };
    let mut aggregates = Vec::new();
    for (k, point) in points.iter().enumerate() {
        let runs: Vec<std::result::Result<&crate::measure::llm::LlmMetrics, String>> = results[k]
            .iter()
            .map(|r| match r {
                Ok(i) => Ok(&outcomes[*i].metrics),
                Err(e) => Err(e.clone()),
            })
            .collect();
        let (name, text) = super::layout::parameter(*point);
        let value: serde_json::Value = match point {
            LoadPoint::Concurrency(c) => (*c).into(),
            LoadPoint::RequestRate(r) => (*r).into(),
        };
        let agg =
            aiperf_confidence::aggregate(&runs, a.confidence_level, a.profile_run_cooldown_seconds)
                .map(|mut agg| {
                    agg.variation = Some(aiperf_confidence::Variation {
                        path: crate::report::llm::aiperf_sweep::variation_path(name),
                        value: value.clone(),
                        text: text.clone(),
                        sweep_mode: mode.name(),
                        model: cfg.models[0].clone(),
                    });
                    agg
                });
        let failed = runs
            .iter()
            .enumerate()
            .filter_map(|(t, r)| {
                r.as_ref().err().map(|e| aiperf_confidence::FailedRun {
                    label: aiperf_confidence::run_label(t),
                    error: e.clone(),
                })
            })
            .collect();
        aggregates.push((name, value, text, runs.len(), failed, agg));
    }
    let levels: Vec<TrialLevel> = aggregates
        .iter()
        .map(|(name, value, text, runs, failed, agg)| TrialLevel {
            name,
            value: value.clone(),
            text: text.clone(),
            runs: *runs,
            failed: Vec::clone(failed),
            aggregate: agg.as_ref(),
        })
        .collect();
    let write = |dir: &Path, name: &str, text: String| -> Result<PathBuf> {
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::generic(format!("cannot write {}: {e}", dir.display())))?;
        let path = dir.join(name);
        crate::report::write::write_atomic("", &path, text.as_bytes())?;
        Ok(path)
    };
    for (point, level) in points.iter().zip(&levels) {
        let Some(agg) = level.aggregate else { continue };
        let (dir, _) = aggregate_dirs(cfg, &base, *point);
        write(&dir, AGGREGATE_JSON, agg.json())?;
        write(&dir, AGGREGATE_CSV, agg.csv())?;
        let _ = writeln!(out, "{}:", point.label());
        let _ = out.write_all(agg.table().as_bytes());
    }
    if levels.iter().any(|l| l.aggregate.is_some()) {
        let (_, dir) = aggregate_dirs(cfg, &base, points[0]);
        let json = write(
            &dir,
            SWEEP_JSON,
            trials::sweep_json(&levels, mode, a.confidence_level),
        )?;
        write(&dir, SWEEP_CSV, trials::sweep_csv(&levels))?;
        for (what, level, value, unit) in trials::best(&levels) {
            let _ = writeln!(
                out,
                "{what}: {}={} ({value:.2} {unit})",
                level.name, level.text
            );
        }
        let _ = writeln!(out, "AIPerf's sweep aggregate in {}", json.display());
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(outcomes),
    }
}

/// AIPerf's sweep aggregate file names.
pub const SWEEP_JSON: &str = "profile_export_aiperf_sweep.json";
pub const SWEEP_CSV: &str = "profile_export_aiperf_sweep.csv";

/// The aggregate folder holds no file of the aggregate's names that no AIPerf run wrote.
fn check_aggregate_dir(dir: &std::path::Path) -> Result<()> {
    let json = dir.join(AGGREGATE_JSON);
    let ours = std::fs::read(&json)
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .is_some_and(|v| v.get("aiperf_version").is_some());
    if ours {
        return Ok(());
    }
    match [json, dir.join(AGGREGATE_CSV)]
        .into_iter()
        .find(|p| p.exists())
    {
        Some(found) => Err(Error::usage(format!(
            "profile: --artifact-dir: {} exists and no AIPerf run wrote it; AIPerf's aggregate \
             would replace it: move it or choose another --artifact-dir",
            found.display()
        ))),
        None => Ok(()),
    }
}
