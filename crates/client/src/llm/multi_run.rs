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
use std::path::PathBuf;

use clap::Args;

use super::cli::ProfileConfig;
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
    let cool = a.profile_run_cooldown_seconds;
    if !(cool.is_finite() && (0.0..=86_400.0).contains(&cool)) {
        return Err(Error::usage(format!(
            "profile: --profile-run-cooldown-seconds {cool} is out of range: give 0 to 86400 \
             seconds"
        )));
    }
    Ok(())
}

/// Refuses several runs of a run with several levels (a list, a sweep, an SLA search).
pub fn check_plan(cfg: &ProfileConfig) -> Result<()> {
    if cfg.args.multi_run.num_profile_runs > 1 && super::layout::is_sweep(cfg) {
        return Err(Error::usage(
            "profile: --num-profile-runs with several levels (a --concurrency or \
             --request-rate list, --sweep or --sla-search) is not supported: give one level \
             per command",
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
