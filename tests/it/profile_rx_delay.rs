//! The client's own receive delay in `inferperf profile`: every response is timed by the
//! kernel's receive stamps, and how long the client left each one waiting in the socket is
//! reported beside the latencies (a row of the GenAI-Perf CSV and console, per-request fields
//! in `profile_export.jsonl`, a warning above 1 ms at p99), never inside them. A client stopped
//! with SIGSTOP while its chunks arrive must show the stops in that delay, not in TTFT or
//! request latency.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use inferperf::measure::RxTime;
use serde_json::Value;

use crate::common::temp_dir;
use crate::run_profile::{profile, start_llm, MODEL};
use crate::run_rx_stamps::stamping_on;

/// The label of the delay's row in the console and the GenAI-Perf CSV.
const ROW: &str = "Client Receive Delay (ms)";

/// The first file named `name` under `dir` (the run writes into a folder named after the run).
fn find(dir: &Path, name: &str) -> PathBuf {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.file_name().is_some_and(|n| n == name) {
                return p;
            }
        }
    }
    panic!("no {name} under {}", dir.display());
}

/// The records of a `profile_export.jsonl`.
fn records(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The `p50` cell (ms) of the row labelled `label` in a GenAI-Perf CSV.
fn csv_p50(path: &Path, label: &str) -> f64 {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = header
        .iter()
        .position(|c| *c == "p50")
        .expect("a p50 column");
    let row = lines
        .find(|l| l.starts_with(&format!("{label},")))
        .unwrap_or_else(|| panic!("no {label} row in:\n{text}"));
    // Values are written as `1,234.56`, quoted when they hold a comma; ours stay below 1,000.
    let cells: Vec<&str> = row.split(',').collect();
    cells[col].parse().unwrap_or_else(|_| panic!("{row}"))
}

/// The median of `v` (sorted in place).
fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// A streamed run, left alone: every response is timed by a kernel stamp and the delay is
/// reported in every place it belongs, with one value per request. Its size is not asserted
/// (an idle client's delay depends on the machine).
#[test]
fn every_profile_response_carries_the_client_receive_delay() {
    let _on = stamping_on();
    let server = start_llm(5, 2, 1);
    for streaming in [true, false] {
        let dir = temp_dir(if streaming { "rx-delay-s" } else { "rx-delay" });
        let mut args = vec!["--concurrency", "2", "--request-count", "8"];
        args.extend(["--output-tokens-mean", "4"]);
        if streaming {
            args.push("--streaming");
        }
        let (outcomes, text) = profile(&server, &dir, &args).unwrap();
        let point = &outcomes[0];
        assert_eq!(point.requests.len(), 8);
        for r in &point.requests {
            assert!(r.ok(), "{:?}", r.error);
            assert_eq!(r.rx, RxTime::Kernel, "every response stamped: {r:?}");
        }
        let delay = point.metrics.client_rx_delay.as_ref().expect("a delay");
        assert_eq!(delay.count, 8, "one value per request");
        assert_eq!(point.metrics.rx_clock, 0);
        assert!(text.contains(&format!("{ROW}: avg ")), "{text}");
        assert!(!text.contains("Responses timed by the clock"), "{text}");

        let csv = find(&dir, "profile_export_genai_perf.csv");
        assert!(csv_p50(&csv, ROW) >= 0.0);
        let jsonl = records(&find(&dir, "profile_export.jsonl"));
        assert_eq!(jsonl.len(), 8);
        for rec in &jsonl {
            let md = &rec["metadata"];
            assert_eq!(md["receive_timed_by"], "kernel_stamp", "{md}");
            assert!(md["client_receive_delay_us"].is_u64(), "{md}");
            assert!(rec["metrics"].get("client_receive_delay").is_none());
        }
        // AIPerf's own summary keeps AIPerf's keys only.
        let aiperf = std::fs::read_to_string(find(&dir, "profile_export_aiperf.json"));
        assert!(!aiperf.unwrap().contains("client_receive_delay"));
    }
    server.stop();
}

/// `inferperf profile` as a child process, stopped (SIGSTOP) for 20 ms in every 25 while its
/// streamed chunks arrive (TTFT 10 ms, one chunk every 40 ms, so no two chunks of a stream
/// land in one stop): the kernel stamps each chunk when it arrives, so TTFT and latency stay
/// the server's, and the stops show as the client's receive delay, with the warning.
#[test]
fn a_stopped_profile_client_shows_in_the_delay_not_in_ttft() {
    const STOP: Duration = Duration::from_millis(20);
    const RUN: Duration = Duration::from_millis(5);
    const TTFT_MS: f64 = 10.0;
    let _on = stamping_on();
    let server = start_llm(TTFT_MS as u64, 40, 1);
    let dir = temp_dir("rx-delay-stopped");
    let console = std::fs::File::create(dir.join("console.txt")).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_inferperf"))
        .args(["profile", "-m", MODEL, "-u", &server.addr.to_string()])
        .args(["--streaming", "--concurrency", "1", "--request-count", "12"])
        .args(["--output-tokens-mean", "3", "--read-batch-us", "0"])
        .args(["--tokenizer", "cl100k_base", "--artifact-dir"])
        .arg(&dir)
        .stdout(Stdio::from(console))
        .stderr(Stdio::null())
        .spawn()
        .expect("inferperf starts");
    let pid = child.id() as libc::pid_t;
    let deadline = Instant::now() + Duration::from_secs(240);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the stopped client did not finish in time");
        }
        std::thread::sleep(RUN);
        // SAFETY: `pid` is our child, not yet reaped (try_wait above saw it running), so the
        // id cannot have been reused.
        unsafe { libc::kill(pid, libc::SIGSTOP) };
        std::thread::sleep(STOP);
        // SAFETY: as above; the child is stopped, so it has not exited since.
        unsafe { libc::kill(pid, libc::SIGCONT) };
    };
    server.stop();
    let text = std::fs::read_to_string(dir.join("console.txt")).unwrap();
    assert!(status.success(), "{status}: {text}");

    let jsonl = records(&find(&dir, "profile_export.jsonl"));
    assert_eq!(jsonl.len(), 12);
    let (mut delays_ms, mut ttfts_ms) = (Vec::new(), Vec::new());
    for rec in &jsonl {
        assert!(rec["error"].is_null(), "{rec}");
        let md = &rec["metadata"];
        assert_eq!(md["receive_timed_by"], "kernel_stamp", "{md}");
        delays_ms.push(md["client_receive_delay_us"].as_f64().unwrap() / 1e3);
        ttfts_ms.push(
            rec["metrics"]["time_to_first_token"]["value"]
                .as_f64()
                .unwrap(),
        );
    }
    let delay_p50 = median(&mut delays_ms);
    let ttft_p50 = median(&mut ttfts_ms);
    // Four reads per request (three chunks and [DONE]), each in a stop four times in five:
    // the median request waited over 1 ms for the client at some read.
    assert!(
        delay_p50 >= 1.0,
        "the stops are the client's delay: {delays_ms:?}"
    );
    // Had the delay leaked into TTFT, the median TTFT would be the server's plus the median
    // wait; it stays below the server's plus half of it.
    assert!(ttft_p50 >= TTFT_MS, "{ttfts_ms:?}");
    assert!(
        ttft_p50 < TTFT_MS + delay_p50 / 2.0,
        "TTFT leaves the client's wait out: {ttfts_ms:?}, delays {delays_ms:?}"
    );
    let csv = find(&dir, "profile_export_genai_perf.csv");
    assert!(csv_p50(&csv, ROW) >= 1.0, "{text}");
    assert!(text.contains(&format!("{ROW}: avg ")), "{text}");
    assert!(
        text.contains("[WARNING] The client was slow to read responses: client receive delay p99 "),
        "{text}"
    );
}
