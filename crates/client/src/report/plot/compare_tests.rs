//! `inferperf compare`: parsing summaries, the table, the chart files and the exit codes.

use std::ffi::OsString;
use std::path::PathBuf;

use super::*;

struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("inferperf-compare-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create temp dir");
        TempDir(dir)
    }

    /// Writes `text` as `<dir>/<run>/profile_export_genai_perf.json` and returns the run dir.
    fn run(&self, run: &str, text: &str) -> PathBuf {
        let run_dir = self.0.join(run);
        std::fs::create_dir_all(&run_dir).expect("run dir");
        std::fs::write(run_dir.join(SUMMARY_FILE), text).expect("write summary");
        run_dir
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const RUN_A: &str = r#"{
  "request_throughput": {"unit": "requests/sec", "avg": 7.5},
  "request_latency": {"unit": "ms", "avg": 130.25, "p50": 128.0, "p90": 150.5, "p99": 170.75, "min": 100.0},
  "time_to_first_token": {"unit": "ms", "avg": 20.126, "p50": 19.0, "p90": 25.0, "p99": 31.5},
  "input_config": {"model": ["m"]}
}"#;

const RUN_B: &str = r#"{
  "time_to_first_token": {"unit": "ms", "avg": 40.5, "p50": 39.25, "p90": 45.0, "p99": 61.0},
  "request_throughput": {"unit": "requests/sec", "avg": 3.25},
  "inter_token_latency": {"unit": "ms", "avg": null}
}"#;

fn args(list: &[&str]) -> Vec<OsString> {
    list.iter().map(OsString::from).collect()
}

fn data_row<'a>(table: &'a str, metric: &str, stat: &str) -> Vec<&'a str> {
    let line = table
        .lines()
        .find(|l| l.starts_with(metric) && l.split_whitespace().nth(2) == Some(stat))
        .unwrap_or_else(|| panic!("no row {metric} {stat} in\n{table}"));
    line.split_whitespace().skip(3).collect()
}

#[test]
fn two_runs_give_a_table_and_charts() {
    let tmp = TempDir::new("two");
    let a = tmp.run("vllm-c8", RUN_A);
    // The second run is given as the file itself; its label is still its directory.
    let b = tmp.run("tgi-c8", RUN_B).join(SUMMARY_FILE);
    let out_dir = tmp.0.join("charts");
    let mut out = Vec::new();
    let written = run_compare(&[a, b], &out_dir, &mut out).expect("compare");
    let text = String::from_utf8(out).expect("utf8");

    let header = text.lines().next().expect("header");
    assert_eq!(
        header.split_whitespace().collect::<Vec<_>>(),
        ["Metric", "Stat", "vllm-c8", "tgi-c8"]
    );
    assert_eq!(
        data_row(&text, "time_to_first_token (ms)", "avg"),
        ["20.13", "40.50"]
    );
    assert_eq!(
        data_row(&text, "time_to_first_token (ms)", "p99"),
        ["31.50", "61.00"]
    );
    assert_eq!(
        data_row(&text, "request_latency (ms)", "p90"),
        ["150.50", "-"]
    );
    assert_eq!(
        data_row(&text, "request_throughput (requests/sec)", "avg"),
        ["7.50", "3.25"]
    );
    // No p50 for throughput anywhere, and a metric with only nulls is not listed.
    assert!(!text.contains("request_throughput (requests/sec)  p50"));
    assert!(!text.contains("inter_token_latency"));

    let names: Vec<String> = written
        .iter()
        .map(|p| p.file_name().expect("name").to_string_lossy().into_owned())
        .collect();
    let want: Vec<String> = [
        "time_to_first_token",
        "request_latency",
        "request_throughput",
    ]
    .iter()
    .flat_map(|s| [format!("{s}.svg"), format!("{s}.png")])
    .collect();
    assert_eq!(names, want);
    for path in &written {
        let bytes = std::fs::read(path).expect("chart");
        if path.extension().is_some_and(|e| e == "png") {
            assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
            let width = u32::from_be_bytes([bytes[16], bytes[17], bytes[18], bytes[19]]);
            assert_eq!(width, PLOT_SIZE.0);
        } else {
            let svg = String::from_utf8(bytes).expect("svg utf8");
            assert!(svg.contains("<svg") && svg.contains("vllm-c8") && svg.contains("tgi-c8"));
        }
    }
    let ttft_svg = std::fs::read_to_string(out_dir.join("time_to_first_token.svg")).expect("svg");
    assert!(ttft_svg.contains("Time to first token (ms)") && ttft_svg.contains("61.00"));
}

#[test]
fn parse_summary_errors_say_why() {
    let cases = [
        ("not json", "not JSON"),
        ("[1, 2]", "not a JSON object"),
        (r#"{"foo": {"avg": 1}}"#, "no known metric"),
        (r#"{"request_latency": {"unit": "ms"}}"#, "no known metric"),
        (r#"{"request_latency": 5}"#, "no known metric"),
    ];
    for (text, want) in cases {
        let err = parse_summary(text).expect_err(text);
        assert!(err.contains(want), "{text}: {err}");
    }
    let ok = parse_summary(r#"{"request_latency": {"p99": 9}}"#).expect("ok");
    assert_eq!(ok["request_latency"].unit, "");
    assert_eq!(ok["request_latency"].stats["p99"], 9.0);
}

#[test]
fn bad_inputs_are_usage_errors_naming_the_file() {
    let tmp = TempDir::new("bad");
    let garbage = tmp.run("garbage", "{{{");
    let empty_dir = tmp.0.join("empty");
    std::fs::create_dir_all(&empty_dir).expect("dir");
    let out_dir = tmp.0.join("out");
    let cases = [
        (
            garbage.clone(),
            "garbage/profile_export_genai_perf.json: not JSON",
        ),
        (empty_dir.clone(), "cannot read"),
        (tmp.0.join("nope.json"), "nope.json"),
    ];
    for (input, want) in cases {
        let err = run_compare(std::slice::from_ref(&input), &out_dir, &mut Vec::new())
            .expect_err("must fail");
        assert_eq!(
            err.kind,
            crate::error::ErrorKind::Usage,
            "{}",
            input.display()
        );
        assert!(err.msg.contains(want), "{}: {}", input.display(), err.msg);
        assert_eq!(err.exit_code(), 99);
    }
    assert!(!out_dir.exists(), "nothing is written when an input is bad");
    let code = compare_main(args(&["compare", garbage.to_str().expect("utf8")]));
    assert_eq!(code, 99);
}

#[test]
fn command_line_exits() {
    let no_runs = parse_args(args(&["compare"])).expect_err("needs a run");
    assert!(no_runs.to_stderr && no_runs.code == 99, "{no_runs:?}");
    let help = parse_args(args(&["compare", "--help"])).expect_err("help");
    assert!(!help.to_stderr && help.code == 0);
    assert!(help.text.contains("--output-dir"));
    let bad_flag = parse_args(args(&["compare", "--bogus", "x"])).expect_err("bad flag");
    assert_eq!(bad_flag.code, 99);
    let ok = parse_args(args(&["compare", "a", "b/"])).expect("parse");
    assert_eq!(ok.runs, [PathBuf::from("a"), PathBuf::from("b/")]);
    assert_eq!(ok.output_dir, PathBuf::from("compare"));
    assert_eq!(compare_main(args(&["compare"])), 99);
}

#[test]
fn labels_come_from_directories_and_stay_unique() {
    let tmp = TempDir::new("labels");
    let run = tmp.run("run-x", RUN_B);
    let file = run.join(SUMMARY_FILE);
    assert_eq!(run_label(&run, &file), "run-x");
    assert_eq!(run_label(&file, &file), "run-x");
    assert_eq!(run_label(&run.join("."), &file), "run-x");
    let root_file = PathBuf::from("/summary.json");
    assert_eq!(run_label(&root_file, &root_file), "summary");

    let summary = |label: &str| RunSummary {
        label: label.to_string(),
        metrics: BTreeMap::new(),
    };
    let earlier = [summary("a"), summary("a#2"), summary("b")];
    assert_eq!(unique_label("a", &earlier), "a#3");
    assert_eq!(unique_label("c", &earlier), "c");
}
