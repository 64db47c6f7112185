//! AIPerf 0.13's error-adjusted latencies (`adj_request_latency`, `adj_time_to_first_token`,
//! `adj_inter_token_latency`, `adj_decode_duration`): a run with failed requests writes, for
//! each latency AIPerf flags `PERCENTILE_INCLUDES_FAILED_REQUESTS`, the successful values plus
//! one +inf per failure, with numpy `method="nearest"` percentiles; AIPerf leaves every
//! non-finite statistic out of its JSON and CSV. Checked against a real AIPerf 0.13 run on the
//! fault server (testdata/aiperf_adjusted: streaming, 12 requests, every third one an HTTP
//! 500; and the same without streaming), and on `inferperf profile` runs against the fault
//! server, recomputed here from the run's own `profile_export.jsonl`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use inferperf::measure::llm::stats::{StatAcc, PERCENTILES};
use inferperf::server::fault::{start, FaultConfig, FaultMode};
use serde_json::Value;

use crate::common::temp_dir;

/// The four metrics, in AIPerf's order.
const ADJUSTED: [&str; 4] = [
    "time_to_first_token",
    "request_latency",
    "decode_duration",
    "inter_token_latency",
];

/// Requests per run, as in the AIPerf sample: every third fails.
const COUNT: u64 = 12;

fn sample_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("crates/client/src/measure/llm/testdata/aiperf_adjusted")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The successful requests' values of `tag` in a `profile_export.jsonl` (ms), and the number
/// of failed requests.
fn successes(jsonl: &str, tag: &str) -> (Vec<f64>, u64) {
    let (mut values, mut failed) = (Vec::new(), 0);
    for line in jsonl.lines() {
        let rec: Value = serde_json::from_str(line).unwrap();
        if !rec["error"].is_null() {
            failed += 1;
            continue;
        }
        if let Some(v) = rec["metrics"][tag]["value"].as_f64() {
            values.push(v);
        }
    }
    (values, failed)
}

/// numpy's `method="nearest"` percentile of sorted values, written out independently of the
/// crate: the value at rank q/100 · (n − 1) rounded half to even.
fn numpy_nearest(sorted: &[f64], q: f64) -> f64 {
    let rank = q / 100.0 * (sorted.len() - 1) as f64;
    let (lo, frac) = (rank.floor(), rank - rank.floor());
    let k = if frac > 0.5 || (frac == 0.5 && lo as u64 % 2 == 1) {
        lo + 1.0
    } else {
        lo
    };
    sorted[k as usize]
}

/// The `adj_<tag>` object AIPerf writes for these successes and failures: unit, the finite
/// percentiles, min, count (avg, max, sum and std are not finite, so left out).
fn expected(values: &[f64], failed: u64) -> Value {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let min = sorted[0];
    sorted.resize(sorted.len() + failed as usize, f64::INFINITY);
    let mut o = serde_json::Map::new();
    o.insert("unit".into(), "ms".into());
    for p in PERCENTILES {
        let v = numpy_nearest(&sorted, p as f64);
        if v.is_finite() {
            o.insert(format!("p{p}"), v.into());
        }
    }
    o.insert("min".into(), min.into());
    o.insert("count".into(), (sorted.len() as u64).into());
    Value::Object(o)
}

/// `got` equals `want`: same keys, numbers within 1e-12 relative.
fn assert_same(got: &Value, want: &Value, what: &str) {
    let (g, w) = (got.as_object().unwrap(), want.as_object().unwrap());
    let keys = |m: &serde_json::Map<String, Value>| m.keys().cloned().collect::<Vec<_>>();
    assert_eq!(keys(g), keys(w), "{what}: {got} vs {want}");
    for (k, wv) in w {
        let gv = &g[k];
        match (gv.as_f64(), wv.as_f64()) {
            (Some(a), Some(b)) => assert!(
                (a - b).abs() <= 1e-12 * b.abs().max(1.0),
                "{what}.{k}: {a} vs {b}"
            ),
            _ => assert_eq!(gv, wv, "{what}.{k}"),
        }
    }
}

/// The top-level keys of a pretty-printed JSON export (two-space indent), in file order.
fn top_keys(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.starts_with("  \"") && !l.starts_with("   "))
        .map(|l| l[3..].split('"').next().unwrap().to_string())
        .collect()
}

/// The `adj_*` tags of an export, in file order.
fn adj_tags(text: &str) -> Vec<String> {
    top_keys(text)
        .into_iter()
        .filter(|k| k.starts_with("adj_"))
        .collect()
}

/// The rows of a `profile_export_aiperf.csv` whose label says `(error-adjusted)`.
fn adj_csv_rows(csv: &str) -> Vec<Vec<String>> {
    csv.lines()
        .filter(|l| l.contains("(error-adjusted)"))
        .map(|l| l.trim_end().split(',').map(str::to_string).collect())
        .collect()
}

/// AIPerf's own numbers: its records plus +inf per failure, through numpy-nearest written out
/// here and through inferperf's accumulator, give its `adj_*` objects.
#[test]
fn aiperfs_adjusted_metrics_are_recomputed_from_its_records() {
    let dir = sample_dir();
    let text = read(&dir.join("profile_export_aiperf.json"));
    let export: Value = serde_json::from_str(&text).unwrap();
    let jsonl = read(&dir.join("profile_export.jsonl"));
    let tags: Vec<String> = ADJUSTED.iter().map(|t| format!("adj_{t}")).collect();
    assert_eq!(adj_tags(&text), tags);
    for tag in ADJUSTED {
        let (values, failed) = successes(&jsonl, tag);
        assert_eq!((values.len() as u64, failed), (8, 4), "{tag}");
        let got = &export[format!("adj_{tag}")];
        assert_same(
            got,
            &expected(&values, failed),
            &format!("AIPerf adj_{tag}"),
        );
        // The crate's accumulator, fed the same values, lands on the same ranks.
        let mut acc = StatAcc::new();
        for &v in &values {
            acc.record(v);
        }
        let adj = acc.adjusted(failed).expect("values and failures");
        assert_eq!(adj.count, COUNT);
        assert_eq!(Some(adj.min), got["min"].as_f64());
        for (p, v) in PERCENTILES.iter().zip(adj.percentiles) {
            match got.get(format!("p{p}")) {
                Some(x) => assert_eq!(Some(v), x.as_f64(), "{tag} p{p}"),
                None => assert_eq!(v, f64::INFINITY, "{tag} p{p}"),
            }
        }
    }
    // Without streaming only request latency has a value, so only it is adjusted.
    let plain = read(&dir.join("profile_export_aiperf_non_streaming.json"));
    assert_eq!(adj_tags(&plain), ["adj_request_latency"]);
    // Nothing failed: nothing adjusted.
    assert_eq!(StatAcc::new().adjusted(3), None);
    let mut acc = StatAcc::new();
    acc.record(1.0);
    assert_eq!(acc.adjusted(0), None);
}

/// What one `inferperf profile` run against the fault server left.
struct Run {
    /// `profile_export_aiperf.json`, as text and parsed.
    text: String,
    export: Value,
    jsonl: String,
    csv: String,
    console: String,
    /// `profile_export_aiperf_timeslices.json`, with `--slice-duration`.
    timeslices: Option<Value>,
}

fn profile(mode: FaultMode, streaming: bool) -> Run {
    profile_with(mode, streaming, &[])
}

/// [`profile`] with `extra` flags.
fn profile_with(mode: FaultMode, streaming: bool, extra: &[&str]) -> Run {
    let server = start(&FaultConfig {
        mode,
        http: "127.0.0.1:0".parse().unwrap(),
        grpc: None,
        ttl: Duration::from_secs(120),
    })
    .expect("fault server starts");
    let dir = temp_dir(&format!(
        "profile-adjusted-{}-{streaming}{}",
        mode.name(),
        extra.len()
    ));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_inferperf"));
    cmd.args(["profile", "-m", "m", "-u", &server.addr.to_string()])
        .args(["--endpoint-type", "chat", "--concurrency", "1"])
        .args(["--request-count", &COUNT.to_string()])
        .args(["--output-tokens-mean", "4", "--tokenizer", "cl100k_base"])
        .args(["--quiet", "--artifact-dir", dir.to_str().unwrap()]);
    if streaming {
        cmd.arg("--streaming");
    }
    cmd.args(extra);
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(server.infers(), COUNT, "{}", mode.name());
    server.stop();
    let text = read(&dir.join("profile_export_aiperf.json"));
    Run {
        export: serde_json::from_str(&text).unwrap(),
        text,
        jsonl: read(&dir.join("profile_export.jsonl")),
        csv: read(&dir.join("profile_export_aiperf.csv")),
        console: read(&dir.join("profile_export_console.txt")),
        timeslices: std::fs::read_to_string(dir.join("profile_export_aiperf_timeslices.json"))
            .ok()
            .map(|t| serde_json::from_str(&t).unwrap()),
    }
}

/// A streaming run where every third request fails: the four `adj_*` objects, count = ok +
/// failed, percentiles numpy-nearest over the run's own JSONL latencies plus +inf per failure,
/// the same keys as AIPerf's sample of the same shape, placed where AIPerf places them (after
/// the run-level values, before the time-weighted metrics); the CSV rows leave the same
/// cells empty as AIPerf's.
#[test]
fn a_run_with_failures_writes_the_adjusted_latencies() {
    let run = profile(FaultMode::EveryNthFails, true);
    let sample_text = read(&sample_dir().join("profile_export_aiperf.json"));
    let sample: Value = serde_json::from_str(&sample_text).unwrap();
    assert_eq!(adj_tags(&run.text), adj_tags(&sample_text));
    for tag in ADJUSTED {
        let (values, failed) = successes(&run.jsonl, tag);
        assert_eq!((values.len() as u64, failed), (8, 4), "{tag}");
        let key = format!("adj_{tag}");
        let got = &run.export[&key];
        assert_eq!(got["count"], COUNT, "{key}");
        assert_same(got, &expected(&values, failed), &key);
        let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
        assert_eq!(keys(got), keys(&sample[&key]), "{key}");
    }
    for text in [&run.text, &sample_text] {
        let keys = top_keys(text);
        let at = |k: &str| keys.iter().position(|x| x == k).unwrap();
        assert_eq!(
            at("adj_inter_token_latency") + 1,
            at("effective_concurrency")
        );
    }
    // CSV: the same empty cells as AIPerf's rows, the same minimum and percentiles shown.
    let sample_csv = read(&sample_dir().join("profile_export_aiperf.csv"));
    let (ours, theirs) = (adj_csv_rows(&run.csv), adj_csv_rows(&sample_csv));
    assert_eq!(ours.len(), 4, "{}", run.csv);
    for (o, t) in ours.iter().zip(&theirs) {
        assert_eq!(o[0], t[0]);
        let empty = |r: &[String]| r.iter().map(String::is_empty).collect::<Vec<_>>();
        assert_eq!(empty(o), empty(t), "{o:?} vs {t:?}");
    }
    let latency = ours
        .iter()
        .find(|r| r[0] == "Request Latency (error-adjusted) (ms)")
        .unwrap();
    let adj = &run.export["adj_request_latency"];
    assert_eq!(latency[2], format!("{:.2}", adj["min"].as_f64().unwrap()));
    assert_eq!(latency[9], format!("{:.2}", adj["p50"].as_f64().unwrap()));
    // Console: the label on two lines, avg and max N/A, the minimum shown.
    let row = run
        .console
        .lines()
        .find(|l| l.contains("Request Latency (error-adjusted)"))
        .unwrap_or_else(|| panic!("{}", run.console));
    let cells: Vec<&str> = row.split('│').map(str::trim).collect();
    let min = format!("{:.2}", adj["min"].as_f64().unwrap());
    assert_eq!(
        (cells[2], cells[3], cells[4]),
        ("N/A", min.as_str(), "N/A"),
        "{row}"
    );
}

/// Without streaming only `adj_request_latency` (AIPerf's non-streaming sample has only it);
/// without failures none at all.
#[test]
fn adjusted_latencies_follow_the_mode_and_need_a_failure() {
    let plain = profile(FaultMode::EveryNthFails, false);
    let sample = read(&sample_dir().join("profile_export_aiperf_non_streaming.json"));
    assert_eq!(adj_tags(&plain.text), adj_tags(&sample));
    let (values, failed) = successes(&plain.jsonl, "request_latency");
    assert_same(
        &plain.export["adj_request_latency"],
        &expected(&values, failed),
        "non-streaming adj_request_latency",
    );
    let healthy = profile(FaultMode::None, true);
    assert_eq!(healthy.export["request_count"]["avg"], COUNT as f64);
    assert_eq!(adj_tags(&healthy.text), Vec::<String>::new());
    assert!(!healthy.csv.contains("error-adjusted"), "{}", healthy.csv);
    assert!(
        !healthy.console.contains("error-adjusted"),
        "{}",
        healthy.console
    );
    assert!(healthy
        .csv
        .lines()
        .any(|l| l.starts_with("Request Latency (ms)")));
}

/// The per-request metrics of the first time slice of a timeslices export.
fn slice_metrics(export: &Value) -> Vec<String> {
    let first = &export["timeslices"][0];
    [
        "request_latency",
        "time_to_first_token",
        "inter_token_latency",
    ]
    .into_iter()
    .filter(|t| !first[*t].is_null())
    .map(str::to_string)
    .collect()
}

/// AIPerf's timeslices follow the run's mode as its summary does: without streaming no slice
/// has `time_to_first_token` or `inter_token_latency` (AIPerf 0.13's non-streaming sample has
/// neither), with streaming every slice has both.
#[test]
fn timeslices_keep_the_metrics_of_the_mode() {
    let sample = serde_json::from_str::<Value>(&read(
        &sample_dir().join("profile_export_aiperf_timeslices_non_streaming.json"),
    ))
    .unwrap();
    assert_eq!(slice_metrics(&sample), ["request_latency"]);
    let slice = ["--slice-duration", "30"];
    let plain = profile_with(FaultMode::None, false, &slice);
    let plain = plain.timeslices.expect("timeslices written");
    assert_eq!(slice_metrics(&plain), ["request_latency"], "{plain}");
    let streamed = profile_with(FaultMode::None, true, &slice);
    let streamed = streamed.timeslices.expect("timeslices written");
    assert_eq!(
        slice_metrics(&streamed),
        [
            "request_latency",
            "time_to_first_token",
            "inter_token_latency"
        ],
        "{streamed}"
    );
}
