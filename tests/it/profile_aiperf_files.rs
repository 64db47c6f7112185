//! AIPerf's files in a `profile` run folder, checked against a sample AIPerf 0.13 wrote for
//! the same kind of run (crates/client/src/report/llm/testdata/aiperf/single, trimmed): the
//! same files and folders, every JSON key (recursively) but those of metrics inferperf does
//! not measure, the CSV's blocks and labels, the per-request record keys. With
//! `INFERPERF_AIPERF` naming an `aiperf` executable, `aiperf plot` and `aiperf analyze
//! swim-lane` must read the folder and draw their images; without it that part prints one
//! line saying it skipped.

use crate::common::temp_dir;
use crate::run_profile::{profile, start_llm};

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// AIPerf metrics inferperf does not measure (none today: the list is where one would go, with
/// the reason); every other key of the sample must be in inferperf's files.
const NOT_MEASURED: &[&str] = &[];

fn not_measured(key: &str) -> bool {
    NOT_MEASURED.iter().any(|p| key.starts_with(p))
}

fn sample_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("crates/client/src/report/llm/testdata/aiperf/single")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn files_under(root: &Path, dir: &Path, out: &mut BTreeSet<String>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            files_under(root, &p, out);
        } else {
            out.insert(
                p.strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .replace('\\', "/"),
            );
        }
    }
}

/// Paths of keys in `sample` missing from `ours`, object keys recursively, lists by their
/// first elements; metric objects must also have the sample's `unit`.
fn missing(sample: &Value, ours: &Value, path: &str, top: bool, out: &mut Vec<String>) {
    match (sample, ours) {
        (Value::Object(s), Value::Object(o)) => {
            for (k, sv) in s {
                if top && not_measured(k) {
                    continue;
                }
                let at = format!("{path}.{k}");
                match o.get(k) {
                    None => out.push(at),
                    Some(ov) => {
                        if k == "unit" && sv != ov {
                            out.push(format!("{at} is {ov}, AIPerf's is {sv}"));
                        }
                        missing(sv, ov, &at, false, out);
                    }
                }
            }
        }
        (Value::Array(s), Value::Array(o)) => {
            if let (Some(s), Some(o)) = (s.first(), o.first()) {
                missing(s, o, &format!("{path}[0]"), false, out);
            }
        }
        _ => {}
    }
}

/// The CSV's blocks: each block's rows, split at blank lines.
fn csv_blocks(text: &str) -> Vec<Vec<String>> {
    let mut blocks = vec![Vec::new()];
    for line in text.split("\r\n") {
        if line.is_empty() {
            if !blocks.last().unwrap().is_empty() {
                blocks.push(Vec::new());
            }
        } else {
            blocks.last_mut().unwrap().push(line.to_string());
        }
    }
    blocks.retain(|b| !b.is_empty());
    blocks
}

/// The first field of a CSV row (labels with commas are quoted).
fn label(row: &str) -> String {
    if let Some(rest) = row.strip_prefix('"') {
        rest[..rest.find('"').unwrap()].to_string()
    } else {
        row.split(',').next().unwrap().to_string()
    }
}

/// A one-level run with `--artifact-dir` typed: (AIPerf's folder, GenAI-Perf's folder).
fn run_dir(tag: &str, more: &[&str]) -> (PathBuf, PathBuf) {
    let server = start_llm(3, 1, 1);
    let dir = temp_dir(tag);
    let mut args = vec![
        "--endpoint-type",
        "chat",
        "--streaming",
        "--concurrency",
        "2",
        "--request-count",
        "6",
        "--synthetic-input-tokens-mean",
        "20",
        "--output-tokens-mean",
        "8",
    ];
    args.extend(more);
    let (outcomes, _) = profile(&server, &dir, &args).unwrap();
    server.stop();
    (outcomes[0].aiperf_dir.clone(), outcomes[0].dir.clone())
}

#[test]
fn aiperf_files_have_the_layout_and_keys_of_aiperfs() {
    let (ours, genai) = run_dir("profile-aiperf-files", &[]);
    let sample = sample_dir();
    // `--artifact-dir` typed: AIPerf writes straight into it, GenAI-Perf into its level folder.
    assert_eq!(genai.parent(), Some(ours.as_path()));

    // Every file and folder AIPerf writes for the run.
    let (mut want, mut have) = (BTreeSet::new(), BTreeSet::new());
    files_under(&sample, &sample, &mut want);
    files_under(&ours, &ours, &mut have);
    let lacking: Vec<_> = want.difference(&have).collect();
    assert!(lacking.is_empty(), "missing {lacking:?} in {have:?}");
    let mut genai_files = BTreeSet::new();
    files_under(&genai, &genai, &mut genai_files);
    for name in [
        "profile_export.json",
        "profile_export_genai_perf.json",
        "profile_export_genai_perf.csv",
        "inputs.json",
    ] {
        assert!(genai_files.contains(name), "{name}");
    }
    // `aiperf plot` takes a folder with both of these for a run: only AIPerf's folder has them.
    for name in ["profile_export.jsonl", "profile_export_aiperf.json"] {
        assert!(!genai_files.contains(name), "{name} in GenAI-Perf's folder");
    }

    // The summary JSON: AIPerf's schema, keys and units.
    let s: Value = serde_json::from_str(&read(&sample.join("profile_export_aiperf.json"))).unwrap();
    let o: Value = serde_json::from_str(&read(&ours.join("profile_export_aiperf.json"))).unwrap();
    assert_eq!(o["schema_version"], s["schema_version"]);
    let mut gaps = Vec::new();
    missing(&s, &o, "", true, &mut gaps);
    assert!(gaps.is_empty(), "profile_export_aiperf.json lacks {gaps:?}");
    assert_eq!(o["request_count"]["avg"], 6.0);
    assert_eq!(o["request_latency"]["count"], 6);
    assert_eq!(o["input_config"]["phases"][0]["concurrency"], 2);
    assert_eq!(o["output_sequence_length"]["avg"], 8.0);

    // The CSV: AIPerf's blocks with their headers, and only labels AIPerf writes.
    let sb = csv_blocks(&read(&sample.join("profile_export_aiperf.csv")));
    let ob = csv_blocks(&read(&ours.join("profile_export_aiperf.csv")));
    assert_eq!(ob.len(), sb.len());
    for (s, o) in sb.iter().zip(&ob) {
        assert_eq!(o[0], s[0], "block header");
        let known: BTreeSet<String> = s.iter().map(|r| label(r)).collect();
        for row in o {
            assert!(
                known.contains(&label(row)),
                "{row:?} is not one of AIPerf's rows"
            );
            assert_eq!(row.split(',').count(), s[0].split(',').count(), "{row}");
        }
    }
    assert!(ob[0]
        .iter()
        .any(|r| r.starts_with("Time to First Token (ms),")));
    assert!(
        ob[1].contains(&"Request Count,6.00".to_string()),
        "{:?}",
        ob[1]
    );

    // The per-request records: AIPerf's metadata keys and metric units.
    let first = |path: &Path| -> Value {
        serde_json::from_str(read(path).lines().next().unwrap()).unwrap()
    };
    let sr = first(&sample.join("profile_export.jsonl"));
    let records = read(&ours.join("profile_export.jsonl"));
    assert_eq!(records.lines().count(), 6);
    for line in records.lines() {
        let r: Value = serde_json::from_str(line).unwrap();
        let mut gaps = Vec::new();
        missing(
            &sr["metadata"],
            &r["metadata"],
            "metadata",
            false,
            &mut gaps,
        );
        let metrics = sr["metrics"].as_object().unwrap();
        // A record whose chunks all came in one read (a loaded machine) has an ITL of 0 and,
        // as in AIPerf, no per-user throughput (1 / ITL).
        let one_read = r["metrics"]["inter_token_latency"]["value"].as_f64() == Some(0.0);
        for (k, v) in metrics.iter().filter(|(k, _)| !not_measured(k)) {
            match r["metrics"].get(k) {
                None if one_read && k.as_str() == "output_token_throughput_per_user" => {}
                None => gaps.push(format!("metrics.{k}")),
                Some(m) if m["unit"] != v["unit"] => gaps.push(format!("metrics.{k}.unit")),
                Some(_) => {}
            }
        }
        assert!(gaps.is_empty(), "record lacks {gaps:?}");
    }

    // inputs.json: GenAI-Perf's `payload` and AIPerf's `session_id` / `payloads` together.
    let si: Value = serde_json::from_str(&read(&sample.join("inputs.json"))).unwrap();
    let oi: Value = serde_json::from_str(&read(&ours.join("inputs.json"))).unwrap();
    let entries = oi["data"].as_array().unwrap();
    assert!(!entries.is_empty());
    for key in si["data"][0].as_object().unwrap().keys() {
        assert!(
            entries.iter().all(|e| e.get(key).is_some()),
            "inputs.json lacks {key}"
        );
    }
    assert!(entries.iter().all(|e| e["payload"] == e["payloads"]));

    let console = read(&ours.join("profile_export_console.txt"));
    assert!(console.contains("Time To First Token"), "{console}");
    assert!(read(&ours.join("logs/aiperf.log")).contains(" - INFO - "));
}

/// `INFERPERF_AIPERF=<aiperf executable>`: AIPerf's own tools read the run folder.
#[test]
fn aiperf_tools_read_the_run_folder() {
    let Some(aiperf) = std::env::var_os("INFERPERF_AIPERF") else {
        println!("profile_aiperf_files: aiperf tools skipped (set INFERPERF_AIPERF to an aiperf executable)");
        return;
    };
    let (ours, _) = run_dir("profile-aiperf-plot", &["--slice-duration", "0.01"]);
    let home = temp_dir("profile-aiperf-home");
    let run = |args: &[&std::ffi::OsStr]| {
        let out = Command::new(&aiperf)
            .args(args)
            .env("HOME", &home)
            .output()
            .expect("aiperf runs");
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "aiperf {args:?}: {text}");
    };
    // The artifact directory, AIPerf's run folder.
    run(&["plot".as_ref(), ours.as_os_str()]);
    let pngs: Vec<_> = std::fs::read_dir(ours.join("plots"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "png"))
        .collect();
    assert!(!pngs.is_empty(), "aiperf plot drew nothing");
    run(&["analyze".as_ref(), "swim-lane".as_ref(), ours.as_os_str()]);
    assert!(ours.join("swim_lane.png").is_file());
}

#[test]
fn aiperf_time_slices_have_aiperfs_names_and_rows() {
    let (ours, _) = run_dir("profile-aiperf-slices", &["--slice-duration", "0.01"]);
    let sample = sample_dir().with_file_name("timeslices");
    let name = "profile_export_aiperf_timeslices";
    let s: Value = serde_json::from_str(&read(&sample.join(format!("{name}.json")))).unwrap();
    let o: Value = serde_json::from_str(&read(&ours.join(format!("{name}.json")))).unwrap();
    let (ss, os) = (&s["timeslices"][0], o["timeslices"].as_array().unwrap());
    assert!(!os.is_empty());
    let mut requests = 0.0;
    for slice in os {
        assert!(slice["end_ns"].as_u64().unwrap() > slice["start_ns"].as_u64().unwrap());
        for (k, v) in slice.as_object().unwrap() {
            let known = ss
                .get(k)
                .unwrap_or_else(|| panic!("{k} is not one of AIPerf's slice keys"));
            assert_eq!(v.get("unit"), known.get("unit"), "{k}");
        }
        requests += slice["request_count"]["avg"].as_f64().unwrap();
    }
    assert_eq!(requests, 6.0, "every request counted in a slice");
    assert!(o.get("input_config").is_some());

    // The CSV: AIPerf's header, and each (metric, unit, statistic) one AIPerf writes.
    let rows = |text: &str| -> Vec<Vec<String>> {
        text.split("\r\n")
            .filter(|l| !l.is_empty())
            .map(|l| l.split(',').map(str::to_string).collect())
            .collect()
    };
    let sr = rows(&read(&sample.join(format!("{name}.csv"))));
    let or = rows(&read(&ours.join(format!("{name}.csv"))));
    assert_eq!(or[0], sr[0]);
    let known: BTreeSet<&[String]> = sr[1..].iter().map(|r| &r[3..6]).collect();
    assert!(or.len() > 1);
    for r in &or[1..] {
        assert!(
            known.contains(&r[3..6]),
            "{r:?} is not one of AIPerf's rows"
        );
    }
}

/// Keys of `sample`'s metric objects (`<key>: {stat: ..}`) but those inferperf does not
/// measure, each with its statistic names, missing from `ours`.
fn metric_gaps(sample: &Value, ours: &Value) -> Vec<String> {
    let mut gaps = Vec::new();
    for (k, s) in sample.as_object().unwrap() {
        if not_measured(k) {
            continue;
        }
        match ours.get(k) {
            None => gaps.push(k.clone()),
            Some(o) => {
                let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
                if keys(s) != keys(o) {
                    gaps.push(format!("{k}: {:?}, AIPerf's {:?}", keys(o), keys(s)));
                }
                if o["unit"] != s["unit"] {
                    gaps.push(format!(
                        "{k}.unit is {}, AIPerf's is {}",
                        o["unit"], s["unit"]
                    ));
                }
            }
        }
    }
    gaps
}

/// The `sweep_id` a level's run_config.json names.
fn s_id(level: &Path) -> Value {
    let rc: Value = serde_json::from_str(&read(&level.join("run_config.json"))).unwrap();
    rc["sweep_id"].clone()
}

/// A `--concurrency` list: AIPerf's layout of a single-trial sweep (AIPerf 0.13 wrote the
/// sample, crates/client/src/report/llm/testdata/aiperf/sweep, trimmed to one level folder
/// and a few metrics): a folder per level, each level's confidence summary under
/// `aggregate/`, and the cross-level summary under `sweep_aggregate/`, with AIPerf's keys.
#[test]
fn a_sweep_has_aiperfs_level_aggregate_and_sweep_folders() {
    let server = start_llm(3, 1, 1);
    let dir = temp_dir("profile-aiperf-sweep");
    let args = [
        "--streaming",
        "--concurrency",
        "1,2",
        "--request-count",
        "6",
        "--synthetic-input-tokens-mean",
        "20",
        "--output-tokens-mean",
        "8",
    ];
    let (outcomes, stdout) = profile(&server, &dir, &args).unwrap();
    server.stop();
    let sample = sample_dir().with_file_name("sweep");
    assert!(stdout.contains("AIPerf's sweep aggregate in"), "{stdout}");

    // One folder per level with every file AIPerf writes for a level; GenAI-Perf's level
    // folders hold neither file `aiperf plot` looks for, so each run is found once.
    let mut want = BTreeSet::new();
    let level = sample.join("concurrency_1");
    files_under(&level, &level, &mut want);
    for (o, c) in outcomes.iter().zip([1, 2]) {
        assert_eq!(o.aiperf_dir, dir.join(format!("concurrency_{c}")));
        let mut have = BTreeSet::new();
        files_under(&o.aiperf_dir, &o.aiperf_dir, &mut have);
        let lacking: Vec<_> = want.difference(&have).collect();
        assert!(lacking.is_empty(), "missing {lacking:?} in {have:?}");
        let records = read(&o.aiperf_dir.join("profile_export.jsonl"));
        assert_eq!(records.lines().count(), 6);
        for name in ["profile_export.jsonl", "profile_export_aiperf.json"] {
            assert!(!o.dir.join(name).exists(), "{name} in {}", o.dir.display());
        }
    }
    // GenAI-Perf's own summary stays where it was.
    assert!(dir.join("sweep_summary.json").is_file());

    // Each level's run_config.json has AIPerf's keys, names its level and holds the
    // settings under AIPerf's names; the sweep's own log is beside the levels.
    let s: Value = serde_json::from_str(&read(&level.join("run_config.json"))).unwrap();
    let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    for (i, o) in outcomes.iter().enumerate() {
        let c = i + 1;
        let rc: Value = serde_json::from_str(&read(&o.aiperf_dir.join("run_config.json"))).unwrap();
        assert_eq!(keys(&rc), keys(&s));
        assert_eq!(keys(&rc["variation"]), keys(&s["variation"]));
        assert_eq!(rc["variation"]["index"], i);
        let label = format!("phases.profiling.concurrency={c}");
        assert_eq!(rc["variation"]["label"], label.as_str());
        assert_eq!(
            rc["variation"]["values"],
            serde_json::json!({"phases.profiling.concurrency": c})
        );
        assert_eq!(rc["sweep_id"], s_id(&outcomes[0].aiperf_dir));
        assert_eq!(rc["artifact_dir"], o.aiperf_dir.to_str().unwrap());
        let cfg = &rc["cfg"];
        for k in keys(cfg) {
            assert!(s["cfg"].get(&k).is_some(), "cfg.{k} is not AIPerf's");
        }
        assert_eq!(cfg["models"]["items"][0]["name"], crate::run_profile::MODEL);
        assert_eq!(cfg["endpoint"]["streaming"], true);
        assert_eq!(cfg["endpoint"]["type"], s["cfg"]["endpoint"]["type"]);
        assert_eq!(cfg["phases"][0]["type"], "concurrency");
        assert_eq!(cfg["phases"][0]["concurrency"], c);
        assert_eq!(cfg["phases"][0]["requests"], 6);
        assert_eq!(cfg["datasets"][0]["prompts"]["isl"]["mean"], 20.0);
        assert_eq!(cfg["datasets"][0]["prompts"]["osl"]["mean"], 8.0);
        // What AIPerf settles at start-up, under its keys: a count run has no expected
        // length.
        assert_eq!(keys(&rc["resolved"]), keys(&s["resolved"]));
        assert_eq!(rc["resolved"]["gpu_telemetry_mode"], "summary");
        assert_eq!(rc["resolved"]["artifact_dir_created"], true);
    }
    let log = read(&dir.join("logs/aiperf.log"));
    assert!(sample.join("logs/aiperf.log").is_file());
    assert!(log.contains("Configurations: 2"), "{log}");
    assert!(
        log.contains("phases.profiling.concurrency=2: measured"),
        "{log}"
    );

    // Each level's confidence summary.
    let name = "profile_export_aiperf_aggregate";
    let s: Value = serde_json::from_str(&read(
        &sample
            .join("aggregate/concurrency_1")
            .join(format!("{name}.json")),
    ))
    .unwrap();
    for c in [1, 2] {
        let at = dir.join(format!("aggregate/concurrency_{c}"));
        let o: Value = serde_json::from_str(&read(&at.join(format!("{name}.json")))).unwrap();
        let mut gaps = Vec::new();
        missing(&s, &o, "", false, &mut gaps);
        gaps.retain(|g| !g.starts_with(".metrics."));
        gaps.extend(metric_gaps(&s["metrics"], &o["metrics"]));
        assert!(gaps.is_empty(), "{name}.json lacks {gaps:?}");
        assert_eq!(o["schema_version"], s["schema_version"]);
        let variation = format!("phases.profiling.concurrency={c}");
        assert_eq!(o["metadata"]["variation_label"], variation.as_str());
        assert_eq!(o["metrics"]["request_count_avg"]["mean"], 6.0);
        let sb = csv_blocks(&read(
            &sample
                .join("aggregate/concurrency_1")
                .join(format!("{name}.csv")),
        ));
        let ob = csv_blocks(&read(&at.join(format!("{name}.csv"))));
        assert_eq!(ob.len(), sb.len());
        assert_eq!(ob[0][0], sb[0][0], "header");
        let labels = |b: &[String]| b.iter().map(|r| label(r)).collect::<Vec<_>>();
        assert_eq!(labels(&ob[1]), labels(&sb[1]), "metadata rows");
        assert!(ob[0].contains(
            &"request_count_avg,6.00,0.00,6.00,6.00,0.0000,0.0000,6.00,6.00,,requests".to_string()
        ));
    }

    // The cross-level summary.
    let name = "profile_export_aiperf_sweep";
    let s: Value = serde_json::from_str(&read(
        &sample.join("sweep_aggregate").join(format!("{name}.json")),
    ))
    .unwrap();
    let o: Value = serde_json::from_str(&read(
        &dir.join("sweep_aggregate").join(format!("{name}.json")),
    ))
    .unwrap();
    let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    assert_eq!(keys(&o), keys(&s));
    assert_eq!(keys(&o["metadata"]), keys(&s["metadata"]));
    assert_eq!(
        o["metadata"]["sweep_parameters"],
        s["metadata"]["sweep_parameters"]
    );
    assert_eq!(
        (
            o["num_profile_runs"].as_u64(),
            o["num_successful_runs"].as_u64()
        ),
        (Some(2), Some(2))
    );
    let cells = o["per_combination_metrics"].as_array().unwrap();
    assert_eq!(cells.len(), 2);
    for (cell, c) in cells.iter().zip([1, 2]) {
        assert_eq!(cell["parameters"], serde_json::json!({"concurrency": c}));
        let gaps = metric_gaps(
            &s["per_combination_metrics"][0]["metrics"],
            &cell["metrics"],
        );
        assert!(gaps.is_empty(), "{name}.json lacks {gaps:?}");
        assert_eq!(cell["metrics"]["request_count"]["mean"], 6.0);
        assert_eq!(cell["metrics"]["request_latency"]["count"], 6);
    }
    assert_eq!(o["best_configurations"], s["best_configurations"]);
    assert_eq!(o["pareto_optimal"], s["pareto_optimal"]);
    let sb = csv_blocks(&read(
        &sample.join("sweep_aggregate").join(format!("{name}.csv")),
    ));
    let ob = csv_blocks(&read(
        &dir.join("sweep_aggregate").join(format!("{name}.csv")),
    ));
    assert_eq!(ob.len(), sb.len());
    assert_eq!(ob[0].len(), 3, "a header and a row per level");
    let header: Vec<&str> = ob[0][0].split(',').collect();
    assert_eq!(header[0], "concurrency");
    for group in header[1..].chunks(5) {
        let metric = group[0]
            .strip_suffix("_mean")
            .expect("a _mean column first");
        let want: Vec<String> = ["mean", "std", "min", "max", "cv"]
            .iter()
            .map(|s| format!("{metric}_{s}"))
            .collect();
        assert_eq!(group, want.iter().map(String::as_str).collect::<Vec<_>>());
    }
    for column in sb[0][0].split(',').filter(|c| !not_measured(c)) {
        assert!(header.contains(&column), "{column}");
    }
    for (s, o) in sb[1..].iter().zip(&ob[1..]) {
        assert_eq!(o, s);
    }

    // `aiperf plot` takes the artifact directory and finds the two levels (drawing needs
    // Chrome for its PNG export; finding the runs does not).
    if let Some(aiperf) = std::env::var_os("INFERPERF_AIPERF") {
        let out = Command::new(&aiperf)
            .args(["plot".as_ref(), dir.as_os_str()])
            .env("HOME", temp_dir("profile-aiperf-sweep-home"))
            .output()
            .expect("aiperf runs");
        let text = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "aiperf plot: {text}");
        let log = read(&dir.join("plots/aiperf_plot.log"));
        assert!(
            log.contains("MULTI_RUN mode: 2 run directories found"),
            "{log}"
        );
    }
}

/// A sweep without `--artifact-dir`: AIPerf 0.13 nests its level folders, their aggregates
/// and the sweep aggregate in the folder the first level would have had alone,
/// `artifacts/<model>-openai-chat-concurrency1/`, and writes the sweep's log to
/// `artifacts/logs/aiperf.log`; GenAI-Perf's level folders stay beside it.
#[test]
fn a_sweep_without_an_artifact_dir_nests_in_the_first_levels_folder() {
    let server = start_llm(3, 1, 1);
    let cwd = temp_dir("profile-aiperf-sweep-cwd");
    let out = Command::new(env!("CARGO_BIN_EXE_inferperf"))
        .args(["profile", "-m", crate::run_profile::MODEL])
        .args(["-u", &server.addr.to_string(), "--endpoint-type", "chat"])
        .args([
            "--streaming",
            "--concurrency",
            "1,2",
            "--request-count",
            "4",
        ])
        .args([
            "--synthetic-input-tokens-mean",
            "20",
            "--output-tokens-mean",
            "4",
        ])
        .args(["--tokenizer", "cl100k_base", "--quiet"])
        .current_dir(&cwd)
        .output()
        .unwrap();
    server.stop();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let artifacts = cwd.join("artifacts");
    let name = |c: u32| format!("{}-openai-chat-concurrency{c}", crate::run_profile::MODEL);
    let sweep = artifacts.join(name(1));
    let mut have = BTreeSet::new();
    files_under(&sweep, &sweep, &mut have);
    for c in [1, 2] {
        for file in [
            "profile_export.jsonl",
            "profile_export_aiperf.json",
            "run_config.json",
            "logs/aiperf.log",
        ] {
            let path = format!("concurrency_{c}/{file}");
            assert!(have.contains(&path), "no {path} in {have:?}");
        }
        let agg = format!("aggregate/concurrency_{c}/profile_export_aiperf_aggregate.json");
        assert!(have.contains(&agg), "no {agg} in {have:?}");
        let rc: Value = serde_json::from_str(&read(
            &sweep.join(format!("concurrency_{c}/run_config.json")),
        ))
        .unwrap();
        let level = Path::new("artifacts")
            .join(name(1))
            .join(format!("concurrency_{c}"));
        assert_eq!(rc["artifact_dir"], level.to_str().unwrap());
        // GenAI-Perf's level folder holds its own files and neither of AIPerf's run files.
        let genai = artifacts.join(name(c));
        assert!(genai.join("profile_export_genai_perf.json").is_file());
        assert!(!genai.join("profile_export_aiperf.json").exists());
    }
    assert!(have.contains("sweep_aggregate/profile_export_aiperf_sweep.json"));
    let log = read(&artifacts.join("logs/aiperf.log"));
    let aggregate = Path::new("artifacts")
        .join(name(1))
        .join("sweep_aggregate/profile_export_aiperf_sweep.json");
    assert!(
        log.contains(&format!(
            "Sweep aggregate JSON written to: {}",
            aggregate.display()
        )),
        "{log}"
    );
    let _ = std::fs::remove_dir_all(&cwd);
}
