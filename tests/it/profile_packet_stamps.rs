//! `profile --streaming` times each chunk by the kernel stamp of its own TCP segment (a packet
//! socket), even when the client is stopped while its chunks arrive: the chunk gaps in
//! `profile_export.jsonl` must match the gaps between the server's writes (its token log)
//! within a bound far below the stop, while with `--no-packet-stamps` the chunks that waited
//! in the socket share a read's time and the gaps do not match. Skipped (one line) where no
//! packet socket can be opened (not root, no CAP_NET_RAW).

use crate::common::{temp_dir, wait_stopping};
use crate::run_profile::{start_llm, MODEL};

use std::process::{Command, Stdio};
use std::time::Duration;

use inferperf::transport::packet_stamps::PacketStamps;
use serde_json::Value;

/// Per request, in send order: the chunk gaps of the export, and the gaps between the
/// server's writes (ms).
type Gaps = Vec<(Vec<f64>, Vec<f64>)>;

/// Runs the binary at concurrency 1 (6 requests of 24 one-token chunks, 4 ms apart) against
/// the in-process server, stopping it (SIGSTOP) for 30 ms in every 32 from its first request;
/// `extra`: more flags. Returns the gaps and the console text.
fn run_stopped(tag: &str, extra: &[&str]) -> (Gaps, String) {
    const STOP: Duration = Duration::from_millis(30);
    const RUN: Duration = Duration::from_millis(2);
    let server = start_llm(10, 4, 1);
    let dir = temp_dir(tag);
    let console = std::fs::File::create(dir.join("console.txt")).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_inferperf"))
        .args(["profile", "-m", MODEL, "-u", &server.addr.to_string()])
        .args(["--streaming", "--concurrency", "1", "--request-count", "6"])
        .args(["--output-tokens-mean", "24", "--tokenizer", "cl100k_base"])
        .args(["--quiet", "--artifact-dir"])
        .arg(&dir)
        .args(extra)
        .stdout(Stdio::from(console))
        .spawn()
        .expect("inferperf starts");
    // Stopped from the first request the server reads (loading the tokenizer is not slowed).
    let status = wait_stopping(&mut child, RUN, STOP, || {
        !server.generation_starts().is_empty()
    });
    let text = std::fs::read_to_string(dir.join("console.txt")).unwrap();
    assert!(status.success(), "{status}: {text}");
    let written = server.token_write_times();
    server.stop();
    let jsonl = std::fs::read_to_string(dir.join("profile_export.jsonl")).unwrap();
    let mut records: Vec<Value> = jsonl
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    records.sort_by_key(|r| r["metadata"]["request_start_ns"].as_u64().unwrap());
    assert_eq!((records.len(), written.len()), (6, 6), "{text}");
    let gaps = records
        .iter()
        .zip(&written)
        .map(|(r, w)| {
            let ours: Vec<f64> = r["metrics"]["inter_chunk_latency"]["value"]
                .as_array()
                .unwrap_or_else(|| panic!("no chunk gaps in {r}"))
                .iter()
                .map(|v| v.as_f64().unwrap())
                .collect();
            let theirs: Vec<f64> = w.windows(2).map(|p| (p[1] - p[0]) as f64 / 1e6).collect();
            assert_eq!(ours.len(), theirs.len(), "{r}");
            (ours, theirs)
        })
        .collect();
    (gaps, text)
}

/// How many gaps differ from the server's by more than `ms`, and how many there are.
fn off_by_more_than(gaps: &Gaps, ms: f64) -> (usize, usize) {
    let pairs = gaps.iter().flat_map(|(o, t)| o.iter().zip(t));
    let total = pairs.clone().count();
    (pairs.filter(|(o, t)| (*o - *t).abs() > ms).count(), total)
}

#[test]
fn chunks_keep_their_segments_times_while_the_client_is_stopped() {
    if let Err(e) = PacketStamps::open("127.0.0.1:9".parse().unwrap()) {
        eprintln!("skipped: no packet socket here ({e}); needs root or CAP_NET_RAW");
        return;
    }
    let (gaps, text) = run_stopped("pkt-stopped", &[]);
    // 138 gaps of 4 ms; the client sleeps 30 ms in every 32, so most chunks wait in the
    // socket. Their segment stamps put every gap within 0.5 ms of the server's (a loaded
    // machine may miss a few segments: up to a tenth may be off).
    let (off, total) = off_by_more_than(&gaps, 0.5);
    assert_eq!(total, 6 * 23);
    assert!(
        off * 10 <= total,
        "{off} of {total} gaps off: {gaps:?}\n{text}"
    );
    assert!(
        text.contains("Chunks timed per TCP segment (packet socket): "),
        "{text}"
    );
    let split: u64 = text
        .split("Chunks timed per TCP segment (packet socket): ")
        .nth(1)
        .and_then(|t| t.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(split > 0, "no read held several segments:\n{text}");

    // The same stopped client without the packet socket: chunks that waited share their
    // read's time (gaps of 0, then one of about the stop), and the report bounds them.
    let (gaps, text) = run_stopped("pkt-stopped-off", &["--no-packet-stamps"]);
    let (off, total) = off_by_more_than(&gaps, 3.0);
    assert!(off * 3 >= total, "only {off} of {total} gaps off: {gaps:?}");
    assert!(text.contains("Chunks timed by a shared read: "), "{text}");
    assert!(
        text.contains("by at most the time since its stream's previous read: p99 "),
        "{text}"
    );
}
