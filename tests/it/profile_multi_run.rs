//! `inferperf profile --num-profile-runs N` against the reference server's fake LLM: the runs'
//! folders, the requests the server received, and AIPerf's confidence aggregate, whose
//! statistics are recomputed here from the runs' own `profile_export_aiperf.json`.

use crate::common::temp_dir;
use crate::run_profile::{profile, start_llm, MODEL};

use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// AIPerf's statistics of a metric, the ones its aggregate takes over the runs.
const STAT_KEYS: [&str; 14] = [
    "avg", "min", "max", "sum", "p1", "p5", "p10", "p25", "p50", "p75", "p90", "p95", "p99", "std",
];

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// `<tag>_<stat>` → (value, unit) of one run's summary.
fn flat(run: &Value) -> Vec<(String, f64, String)> {
    let mut out = Vec::new();
    for (tag, m) in run.as_object().unwrap() {
        let Some(unit) = m.get("unit").and_then(Value::as_str) else {
            continue;
        };
        for stat in STAT_KEYS {
            if let Some(v) = m.get(stat).and_then(Value::as_f64) {
                out.push((format!("{tag}_{stat}"), v, unit.to_string()));
            }
        }
    }
    out
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

/// Checks every statistic of `aggregate` against the runs' own summaries with `t`.
fn check_statistics(aggregate: &Value, runs: &[Value], t: f64) {
    let flats: Vec<_> = runs.iter().map(flat).collect();
    let metrics = aggregate["metrics"].as_object().unwrap();
    let keys: std::collections::BTreeSet<&String> = flats[0].iter().map(|e| &e.0).collect();
    let ours: std::collections::BTreeSet<&String> = metrics.keys().collect();
    assert_eq!(keys, ours, "one aggregate entry per statistic of the runs");
    let n = runs.len() as f64;
    for (key, _, unit) in &flats[0] {
        let values: Vec<f64> = flats
            .iter()
            .map(|f| f.iter().find(|e| &e.0 == key).unwrap().1)
            .collect();
        let mean = values.iter().sum::<f64>() / n;
        let std = (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
        let se = std / n.sqrt();
        let m = &metrics[key];
        let got = |k: &str| m[k].as_f64().unwrap_or_else(|| panic!("{key}.{k}: {m}"));
        assert!(close(got("mean"), mean), "{key} mean: {m}");
        assert!(close(got("std"), std), "{key} std: {m}");
        assert!(close(got("se"), se), "{key} se: {m}");
        let min = values.iter().copied().fold(f64::INFINITY, f64::min);
        let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        assert!(
            close(got("min"), min) && close(got("max"), max),
            "{key}: {m}"
        );
        assert!((got("t_critical") - t).abs() < 1e-6, "{key}: {m}");
        assert!(
            (got("ci_low") - (mean - t * se)).abs() <= 1e-6 * se.max(1.0),
            "{key}: {m}"
        );
        assert!(
            (got("ci_high") - (mean + t * se)).abs() <= 1e-6 * se.max(1.0),
            "{key}: {m}"
        );
        if mean != 0.0 {
            assert!(close(got("cv"), std / mean), "{key} cv: {m}");
        }
        assert_eq!(m["unit"], unit.as_str());
    }
}

#[test]
fn three_runs_write_their_folders_and_an_aggregate_with_confidence_intervals() {
    let server = start_llm(5, 1, 1);
    let dir = temp_dir("profile-multi-run");
    let args = [
        "--streaming",
        "--concurrency",
        "2",
        "--request-count",
        "6",
        "--warmup-request-count",
        "2",
        "--output-tokens-mean",
        "4",
        "--synthetic-input-tokens-mean",
        "16",
        "--num-profile-runs",
        "3",
    ];
    let (outcomes, stdout) = profile(&server, &dir, &args).unwrap();
    assert_eq!(outcomes.len(), 3, "one outcome per run");
    // 6 measured requests per run, and AIPerf's warm-up before the first run only.
    assert_eq!(server.token_times().len(), 3 * 6 + 2);
    let runs: Vec<Value> = (1..=3)
        .map(|k| {
            let run = dir.join(format!("profile_runs/run_{k:04}"));
            for f in [
                "inputs.json",
                "profile_export.jsonl",
                "profile_export_aiperf.csv",
                "profile_export_console.txt",
            ] {
                assert!(run.join(f).is_file(), "{}/{f}", run.display());
            }
            let genai = run.join(format!("{MODEL}-openai-chat-concurrency2"));
            assert!(genai.join("profile_export_genai_perf.json").is_file());
            let summary = read_json(&run.join("profile_export_aiperf.json"));
            assert_eq!(summary["request_count"]["avg"], 6.0, "run {k}");
            summary
        })
        .collect();
    assert!(!dir.join("profile_runs/run_0004").exists());
    let aggregate = read_json(&dir.join("aggregate/profile_export_aiperf_aggregate.json"));
    // The keys of AIPerf's confidence aggregate, as its exporter writes them (the committed
    // single-trial sample holds the same per-metric entry).
    let sample = read_json(Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/crates/client/src/report/llm/testdata/aiperf/sweep/aggregate/concurrency_1/",
        "profile_export_aiperf_aggregate.json"
    )));
    let keys = |v: &Value| -> Vec<String> { v.as_object().unwrap().keys().cloned().collect() };
    assert_eq!(keys(&aggregate), keys(&sample));
    assert_eq!(
        keys(&aggregate["metrics"]["request_latency_p99"]),
        keys(&sample["metrics"]["request_latency_p99"])
    );
    // AIPerf's metadata keys, in its order in the file.
    let text = std::fs::read_to_string(dir.join("aggregate/profile_export_aiperf_aggregate.json"))
        .unwrap();
    let order = [
        "aggregation_type",
        "num_profile_runs",
        "num_successful_runs",
        "failed_runs",
        "confidence_level",
        "run_labels",
        "cooldown_seconds",
    ];
    let mut sorted: Vec<&str> = order.to_vec();
    sorted.sort_unstable();
    assert_eq!(keys(&aggregate["metadata"]), sorted);
    let at: Vec<usize> = order
        .iter()
        .map(|k| text.find(&format!("\"{k}\":")).unwrap())
        .collect();
    assert!(at.windows(2).all(|w| w[0] < w[1]), "{text}");
    let meta = &aggregate["metadata"];
    assert_eq!(meta["aggregation_type"], "confidence");
    assert_eq!(
        (
            meta["num_profile_runs"].as_u64(),
            meta["num_successful_runs"].as_u64()
        ),
        (Some(3), Some(3))
    );
    assert_eq!(
        meta["run_labels"],
        serde_json::json!(["run_0001", "run_0002", "run_0003"])
    );
    assert_eq!(meta["confidence_level"], 0.95);
    check_statistics(&aggregate, &runs, 4.302653);
    let csv =
        std::fs::read_to_string(dir.join("aggregate/profile_export_aiperf_aggregate.csv")).unwrap();
    assert!(csv.starts_with("metric,mean,std,min,max,cv,se,ci_low,ci_high,t_critical,unit\r\n"));
    let ttft = csv
        .lines()
        .find(|l| l.starts_with("time_to_first_token_avg,"))
        .unwrap();
    let mean = aggregate["metrics"]["time_to_first_token_avg"]["mean"]
        .as_f64()
        .unwrap();
    assert!(
        ttft.starts_with(&format!("time_to_first_token_avg,{mean:.2},")),
        "{ttft}"
    );
    assert!(ttft.ends_with(",4.3027,ms"), "{ttft}");
    assert!(csv.ends_with(
        "Run Labels,\"['run_0001', 'run_0002', 'run_0003']\"\r\nCooldown Seconds,0.0\r\n"
    ));
    // The console: each run's table, then the aggregate's.
    for k in 1..=3 {
        assert!(
            stdout.contains(&format!("Profile run {k} of 3 (run_{k:04})")),
            "{stdout}"
        );
    }
    let table: Vec<&str> = stdout
        .lines()
        .skip_while(|l| !l.starts_with("Aggregate over 3 runs (3 successful), 95% confidence"))
        .collect();
    assert!(table.len() > 4, "{stdout}");
    let ttft_row = table
        .iter()
        .find(|l| l.starts_with("Time To First Token (Avg)"))
        .unwrap();
    let m = &aggregate["metrics"]["time_to_first_token_avg"];
    for k in ["mean", "ci_low", "ci_high"] {
        let v = format!("{:.2}", m[k].as_f64().unwrap());
        assert!(ttft_row.contains(&v), "{k} {v} in {ttft_row}");
    }
}

#[test]
fn the_confidence_level_cooldown_and_warm_up_flags_are_applied() {
    let server = start_llm(2, 1, 1);
    let dir = temp_dir("profile-multi-run-flags");
    let args = [
        "--concurrency",
        "1",
        "--request-count",
        "4",
        "--warmup-request-count",
        "1",
        "--no-profile-run-disable-warmup-after-first",
        "--output-tokens-mean",
        "3",
        "--synthetic-input-tokens-mean",
        "8",
        "--num-profile-runs",
        "2",
        "--confidence-level",
        "0.9",
        "--profile-run-cooldown-seconds",
        "0.3",
    ];
    let started = std::time::Instant::now();
    let (outcomes, stdout) = profile(&server, &dir, &args).unwrap();
    assert!(started.elapsed() >= std::time::Duration::from_millis(300));
    assert_eq!(outcomes.len(), 2);
    // Warm-up before each run.
    assert_eq!(server.token_times().len(), 2 * 4 + 2);
    let runs: Vec<Value> = (1..=2)
        .map(|k| {
            read_json(&dir.join(format!(
                "profile_runs/run_{k:04}/profile_export_aiperf.json"
            )))
        })
        .collect();
    let aggregate = read_json(&dir.join("aggregate/profile_export_aiperf_aggregate.json"));
    assert_eq!(aggregate["metadata"]["cooldown_seconds"], 0.3);
    assert_eq!(aggregate["metadata"]["confidence_level"], 0.9);
    // Student's t for 1 degree of freedom at 90 %.
    check_statistics(&aggregate, &runs, 6.313752);
    assert!(
        stdout.contains("Aggregate over 2 runs (2 successful), 90% confidence"),
        "{stdout}"
    );
    assert!(stdout.contains("Cooling down 0.3 s"), "{stdout}");
}

#[test]
fn bad_multi_run_values_exit_99_naming_the_flag() {
    for (args, flag) in [
        (&["--num-profile-runs", "0"][..], "--num-profile-runs 0"),
        (&["--num-profile-runs", "11"][..], "--num-profile-runs 11"),
        (&["--confidence-level", "1.5"][..], "--confidence-level 1.5"),
        (&["--confidence-level", "0"][..], "--confidence-level 0"),
        (
            &["--profile-run-cooldown-seconds", "-1"][..],
            "--profile-run-cooldown-seconds -1",
        ),
        (
            &["--num-profile-runs", "2", "--sweep", "4"][..],
            "--num-profile-runs",
        ),
        (
            &["--parameter-sweep-cooldown-seconds", "-2"][..],
            "--parameter-sweep-cooldown-seconds -2",
        ),
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_inferperf"))
            .args(["profile", "-m", "m", "-u", "127.0.0.1:9"])
            .args(args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(99), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains(flag), "{args:?}: {stderr}");
        assert!(o.stdout.is_empty(), "{args:?}");
    }
}

/// The per-level aggregates' means, recomputed from the runs, and the sweep aggregate's
/// cells, best configurations and Pareto front from those aggregates.
fn check_sweep(dir: &Path, runs: &[[&str; 2]], aggregates: &[&str], sweep: &str) {
    for (k, level) in ["concurrency_1", "concurrency_2"].iter().enumerate() {
        let summaries: Vec<Value> = runs
            .iter()
            .map(|r| read_json(&dir.join(r[k]).join("profile_export_aiperf.json")))
            .collect();
        for s in &summaries {
            assert_eq!(s["request_count"]["avg"], 4.0, "{level}");
        }
        let agg = read_json(
            &dir.join(aggregates[k])
                .join("profile_export_aiperf_aggregate.json"),
        );
        // Student's t for 1 degree of freedom at 95 %.
        check_statistics(&agg, &summaries, 12.706205);
        let meta = &agg["metadata"];
        assert_eq!(
            meta["variation_label"],
            format!("phases.profiling.concurrency={}", k + 1)
        );
        assert_eq!(
            meta["run_labels"],
            serde_json::json!(["run_0001", "run_0002"])
        );
        assert_eq!(meta["model"], MODEL);
    }
    let sweep_json = read_json(&dir.join(sweep).join("profile_export_aiperf_sweep.json"));
    assert_eq!(sweep_json["aggregation_type"], "sweep");
    assert_eq!(sweep_json["num_profile_runs"], 4);
    assert_eq!(sweep_json["num_successful_runs"], 4);
    assert_eq!(sweep_json["metadata"]["num_trials_per_value"], 2);
    let cells = sweep_json["per_combination_metrics"].as_array().unwrap();
    assert_eq!(cells.len(), 2);
    let mut throughput = Vec::new();
    for (k, cell) in cells.iter().enumerate() {
        assert_eq!(cell["parameters"]["concurrency"], k as u64 + 1);
        let agg = read_json(
            &dir.join(aggregates[k])
                .join("profile_export_aiperf_aggregate.json"),
        );
        for key in ["request_throughput_avg", "time_to_first_token_p99"] {
            assert_eq!(
                cell["metrics"][key]["mean"], agg["metrics"][key]["mean"],
                "{key}"
            );
            assert_eq!(
                cell["metrics"][key]["ci_low"], agg["metrics"][key]["ci_low"],
                "{key}"
            );
        }
        throughput.push(
            cell["metrics"]["request_throughput_avg"]["mean"]
                .as_f64()
                .unwrap(),
        );
    }
    let best = if throughput[1] > throughput[0] { 2 } else { 1 };
    assert_eq!(
        sweep_json["best_configurations"]["best_throughput"]["parameters"]["concurrency"],
        best
    );
    assert!(!sweep_json["pareto_optimal"].as_array().unwrap().is_empty());
    let csv =
        std::fs::read_to_string(dir.join(sweep).join("profile_export_aiperf_sweep.csv")).unwrap();
    assert!(csv.contains("\r\nBest Configurations\r\nConfiguration,concurrency,Metric,Unit\r\n"));
    assert!(csv.ends_with("Number of Profile Runs,4\r\nNumber of Successful Runs,4\r\n"));
}

#[test]
fn a_list_of_levels_repeats_trial_after_trial_with_per_level_and_sweep_aggregates() {
    let server = start_llm(2, 1, 1);
    let dir = temp_dir("profile-multi-run-sweep");
    let args = [
        "--streaming",
        "--concurrency",
        "1,2",
        "--request-count",
        "4",
        "--warmup-request-count",
        "1",
        "--output-tokens-mean",
        "3",
        "--synthetic-input-tokens-mean",
        "8",
        "--num-profile-runs",
        "2",
    ];
    let (outcomes, stdout) = profile(&server, &dir, &args).unwrap();
    assert_eq!(outcomes.len(), 4, "two levels, two runs each");
    // 4 measured requests per cell; the warm-up on each level's first run only.
    assert_eq!(server.token_times().len(), 4 * 4 + 2);
    let runs = [
        [
            "profile_runs/trial_0001/concurrency_1",
            "profile_runs/trial_0001/concurrency_2",
        ],
        [
            "profile_runs/trial_0002/concurrency_1",
            "profile_runs/trial_0002/concurrency_2",
        ],
    ];
    check_sweep(
        &dir,
        &runs,
        &["aggregate/concurrency_1", "aggregate/concurrency_2"],
        "aggregate/sweep_aggregate",
    );
    assert!(!dir.join("sweep_aggregate").exists());
    assert!(!dir.join("profile_runs/trial_0003").exists());
    // Repeated order: both levels of the first run, then both of the second.
    let order: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("Profile run "))
        .collect();
    assert_eq!(
        order,
        [
            "Profile run 1 of 2 (trial_0001), concurrency1",
            "Profile run 1 of 2 (trial_0001), concurrency2",
            "Profile run 2 of 2 (trial_0002), concurrency1",
            "Profile run 2 of 2 (trial_0002), concurrency2",
        ]
    );
    assert!(stdout.contains("best_throughput: concurrency="), "{stdout}");
}

#[test]
fn independent_mode_runs_every_trial_of_a_level_first_and_cools_down_between_levels() {
    let server = start_llm(2, 1, 1);
    let dir = temp_dir("profile-multi-run-sweep-independent");
    let args = [
        "--concurrency",
        "1,2",
        "--request-count",
        "4",
        "--output-tokens-mean",
        "3",
        "--synthetic-input-tokens-mean",
        "8",
        "--num-profile-runs",
        "2",
        "--parameter-sweep-mode",
        "independent",
        "--parameter-sweep-cooldown-seconds",
        "0.25",
    ];
    let started = std::time::Instant::now();
    let (outcomes, stdout) = profile(&server, &dir, &args).unwrap();
    assert!(started.elapsed() >= std::time::Duration::from_millis(250));
    assert_eq!(outcomes.len(), 4);
    assert_eq!(server.token_times().len(), 4 * 4);
    let runs = [
        [
            "concurrency_1/profile_runs/trial_0001",
            "concurrency_2/profile_runs/trial_0001",
        ],
        [
            "concurrency_1/profile_runs/trial_0002",
            "concurrency_2/profile_runs/trial_0002",
        ],
    ];
    check_sweep(
        &dir,
        &runs,
        &["concurrency_1/aggregate", "concurrency_2/aggregate"],
        "sweep_aggregate",
    );
    let agg = read_json(&dir.join("concurrency_2/aggregate/profile_export_aiperf_aggregate.json"));
    assert_eq!(agg["metadata"]["sweep_mode"], "independent");
    let order: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("Profile run ") || l.starts_with("Cooling down"))
        .collect();
    assert_eq!(
        order,
        [
            "Profile run 1 of 2 (trial_0001), concurrency1",
            "Profile run 2 of 2 (trial_0002), concurrency1",
            "Cooling down 0.25 s before the next level",
            "Profile run 1 of 2 (trial_0001), concurrency2",
            "Profile run 2 of 2 (trial_0002), concurrency2",
        ]
    );
}
