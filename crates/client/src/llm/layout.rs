//! Where AIPerf's files go, as AIPerf 0.13 lays out its artifact directory (GenAI-Perf's files
//! always go to [`point_dir`](super::artifacts::point_dir), `<artifact dir>/<name>/`):
//!
//! - one level: straight into `--artifact-dir` when it was typed on the command line; without
//!   it, into `artifacts/<model>-<kind>-<stimulus>/`, the folder GenAI-Perf's files share;
//! - several levels (a list, a sweep, an SLA search): one folder per level,
//!   `<sweep dir>/<field>_<value>/` (`concurrency_4`, `rate_2.5`: the swept field of
//!   AIPerf's profiling phase), each level's one-trial confidence summary in
//!   `<sweep dir>/aggregate/<field>_<value>/`, the cross-level summary in
//!   `<sweep dir>/sweep_aggregate/`, and the sweep's log in `<artifact dir>/logs/aiperf.log`.
//!   The sweep dir is `--artifact-dir` when it was typed; without it, the folder the first
//!   level would have had alone, `artifacts/<model>-<kind>-<first level>/`.
//!
//! `aiperf plot <dir>` takes every folder holding both `profile_export.jsonl` and
//! `profile_export_aiperf.json` for a run, so those two always travel together and GenAI-Perf's
//! folders hold neither when AIPerf's files live elsewhere.

use std::path::{Path, PathBuf};

use super::cli::{LoadPoint, ProfileConfig};
use super::sweep_args::{Plan, Shape};
use crate::error::{Error, Result};

/// The folder of the cross-level summary inside the artifact directory.
pub const SWEEP_AGGREGATE_DIR: &str = "sweep_aggregate";
/// The folder of the per-level confidence summaries inside the artifact directory.
pub const AGGREGATE_DIR: &str = "aggregate";

/// The run measures more than one level (or searches for them).
pub fn is_sweep(cfg: &ProfileConfig) -> bool {
    cfg.points.len() > 1 || Shape::of(cfg).is_ok_and(|s| s.plan != Plan::List)
}

/// AIPerf's name for a level's folder in a sweep: the swept field of its profiling phase and
/// its value, the value as Python prints it (`concurrency_8`, `rate_5.0`).
pub fn level_dir_name(point: LoadPoint) -> String {
    let (name, value) = parameter(point);
    format!("{name}_{value}")
}

/// The swept field of AIPerf's profiling phase and its value as text (`rate`, `2.5`).
pub fn parameter(point: LoadPoint) -> (&'static str, String) {
    match point {
        LoadPoint::Concurrency(c) => ("concurrency", c.to_string()),
        LoadPoint::RequestRate(r) => ("rate", format!("{r:?}")),
    }
}

/// The folder of a sweep's level folders and its `aggregate/` and `sweep_aggregate/`.
pub fn sweep_dir(cfg: &ProfileConfig) -> PathBuf {
    match cfg.points.first() {
        Some(first) if !cfg.args.artifact_dir_given => super::artifacts::point_dir(cfg, *first),
        _ => cfg.args.artifact_dir.clone(),
    }
}

/// The folder of AIPerf's files for `point`.
pub fn aiperf_dir(cfg: &ProfileConfig, point: LoadPoint) -> PathBuf {
    if is_sweep(cfg) {
        sweep_dir(cfg).join(level_dir_name(point))
    } else if cfg.args.artifact_dir_given {
        cfg.args.artifact_dir.clone()
    } else {
        super::artifacts::point_dir(cfg, point)
    }
}

/// The files AIPerf's run folder holds (besides `logs/aiperf.log`), named by the caller's
/// export file for the per-request records.
pub fn aiperf_file_names(records_jsonl: &str) -> Vec<String> {
    let mut names: Vec<String> = [
        "inputs.json",
        "profile_export_aiperf.json",
        "profile_export_aiperf.csv",
        "profile_export_console.txt",
        "profile_export_aiperf_timeslices.json",
        "profile_export_aiperf_timeslices.csv",
        ".aiperf_results_ready.json",
        "logs/aiperf.log",
    ]
    .map(String::from)
    .to_vec();
    names.push(records_jsonl.to_string());
    names
}

/// A sweep level's own file: the run's settings as AIPerf dumps them.
pub const RUN_CONFIG: &str = "run_config.json";

/// Refuses, before anything is measured, a folder AIPerf's files would go to that holds a
/// file of one of their names which no AIPerf run (AIPerf's or inferperf's) wrote: the user's
/// file is never overwritten. A folder of an earlier run is reused, as AIPerf reuses it.
pub fn check_aiperf_dirs(cfg: &ProfileConfig) -> Result<()> {
    let names = super::export::ExportNames::from_export_file(&cfg.args.profile_export_file);
    let mut files = aiperf_file_names(&names.records_jsonl);
    if is_sweep(cfg) {
        files.push(RUN_CONFIG.to_string());
    }
    for point in &cfg.points {
        let dir = aiperf_dir(cfg, *point);
        if dir == super::artifacts::point_dir(cfg, *point) {
            // GenAI-Perf's own folder, whose files inferperf has always written.
            continue;
        }
        check_dir(&dir, &files)?;
    }
    if is_sweep(cfg) {
        let d = &sweep_dir(cfg);
        let sweep = [
            "profile_export_aiperf_sweep.json",
            "profile_export_aiperf_sweep.csv",
        ];
        check_dir(&d.join(SWEEP_AGGREGATE_DIR), &sweep.map(String::from))?;
        let aggregate = [
            "profile_export_aiperf_aggregate.json",
            "profile_export_aiperf_aggregate.csv",
        ]
        .map(String::from);
        for point in &cfg.points {
            check_dir(
                &d.join(AGGREGATE_DIR).join(level_dir_name(*point)),
                &aggregate,
            )?;
        }
    }
    Ok(())
}

/// `dir` holds none of `files`, or is the folder of an earlier AIPerf run.
fn check_dir(dir: &Path, files: &[String]) -> Result<()> {
    let Some(found) = files.iter().map(|f| dir.join(f)).find(|p| p.exists()) else {
        return Ok(());
    };
    if written_by_a_run(dir) {
        return Ok(());
    }
    Err(Error::usage(format!(
        "profile: --artifact-dir: {} exists and no AIPerf run wrote it; AIPerf's files would \
         replace it: move it or choose another --artifact-dir",
        found.display()
    )))
}

/// An AIPerf run (or inferperf's) left its summary or its sweep summary in `dir`.
fn written_by_a_run(dir: &Path) -> bool {
    let keyed = |file: &str, key: &str| {
        std::fs::read(dir.join(file))
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .is_some_and(|v| v.get(key).is_some())
    };
    keyed("profile_export_aiperf.json", "aiperf_version")
        || keyed("profile_export_aiperf_aggregate.json", "aiperf_version")
        || keyed("profile_export_aiperf_sweep.json", "aggregation_type")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;

    fn cfg(args: &[&str]) -> ProfileConfig {
        let mut v: Vec<OsString> = vec!["profile".into()];
        v.extend(args.iter().map(OsString::from));
        super::super::cli::parse(v).unwrap().unwrap()
    }

    #[test]
    fn aiperf_folders_follow_aiperfs_rule() {
        let one = cfg(&["-m", "llm", "--concurrency", "2"]);
        let p = one.points[0];
        assert_eq!(
            aiperf_dir(&one, p),
            super::super::artifacts::point_dir(&one, p)
        );
        let typed = cfg(&["-m", "llm", "--concurrency", "2", "--artifact-dir", "out"]);
        assert_eq!(aiperf_dir(&typed, typed.points[0]), PathBuf::from("out"));
        let typed_default = cfg(&["-m", "llm", "--artifact-dir", "artifacts"]);
        assert_eq!(
            aiperf_dir(&typed_default, typed_default.points[0]),
            PathBuf::from("artifacts")
        );
        let list = cfg(&[
            "-m",
            "llm",
            "--request-rate",
            "2.5,5",
            "--artifact-dir",
            "o",
        ]);
        assert!(is_sweep(&list));
        let dirs: Vec<PathBuf> = list.points.iter().map(|p| aiperf_dir(&list, *p)).collect();
        assert_eq!(
            dirs,
            [PathBuf::from("o/rate_2.5"), PathBuf::from("o/rate_5.0")]
        );
        // Without --artifact-dir AIPerf nests a sweep in the first level's own folder.
        let untyped = cfg(&["-m", "llm", "--concurrency", "1,8"]);
        let first = PathBuf::from("artifacts/llm-openai-chat-concurrency1");
        assert_eq!(sweep_dir(&untyped), first);
        assert_eq!(
            aiperf_dir(&untyped, untyped.points[1]),
            first.join("concurrency_8")
        );
        let rates = cfg(&["-m", "llm", "--request-rate", "5,10"]);
        assert_eq!(
            aiperf_dir(&rates, rates.points[1]),
            PathBuf::from("artifacts/llm-openai-chat-request_rate5.0/rate_10.0")
        );
    }

    #[test]
    fn a_users_file_is_never_replaced() {
        let dir = std::env::temp_dir().join(format!("inferperf-layout-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let d = dir.to_str().unwrap();
        let c = cfg(&["-m", "llm", "--artifact-dir", d]);
        check_aiperf_dirs(&c).unwrap();
        std::fs::write(dir.join("inputs.json"), "{}").unwrap();
        let e = check_aiperf_dirs(&c).unwrap_err();
        assert_eq!(e.exit_code(), 99);
        assert!(
            e.msg.contains("--artifact-dir") && e.msg.contains("inputs.json"),
            "{}",
            e.msg
        );
        std::fs::write(
            dir.join("profile_export_aiperf.json"),
            r#"{"schema_version": "1.4", "aiperf_version": "0.13.0"}"#,
        )
        .unwrap();
        check_aiperf_dirs(&c).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
