//! Optional tier: the binary's latencies checked against a loopback packet capture. With
//! `INFERPERF_CAPTURE_TIER=1`, tcpdump, taskset and python3 on PATH and the right to capture
//! (root or CAP_NET_RAW), it runs `inferperf` (kernel receive stamps on) pinned to core 0
//! against the in-process reference server at concurrency 1 and 16 while four busy threads
//! share core 0, captures the traffic with tcpdump (nanosecond stamps) and compares every
//! request of the export with the wire through `benches/capture_proof.py`, the analyser the
//! bench uses: the capture dropped nothing, every exported request was matched to one on the
//! wire, and the p99 of (export latency - wire latency) is under 20 µs.
//!
//!     INFERPERF_CAPTURE_TIER=1 cargo test --profile ci --test it capture_tier -- --nocapture
//!
//! Otherwise it prints one line saying why it skipped.

use crate::common::Scratch;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use inferperf::server::{self, ServeConfig};

/// The p99 error (µs) the kernel receive stamps must stay under with the client's core busy.
const P99_LIMIT_US: f64 = 20.0;

/// Requests per run, by concurrency.
const RUNS: [(u32, u32); 2] = [(1, 1000), (16, 4000)];

/// Busy threads sharing the client's core.
const HOG_THREADS: usize = 4;

fn on_path(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Whether this process may open a packet socket: root, or CAP_NET_RAW (bit 13) in its
/// effective capabilities.
fn may_capture() -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        })
        .is_some_and(|caps| caps & (1 << 13) != 0)
}

fn skip_reason() -> Option<String> {
    if std::env::var("INFERPERF_CAPTURE_TIER").as_deref() != Ok("1") {
        return Some("INFERPERF_CAPTURE_TIER unset (see docs/testing.md)".into());
    }
    for tool in ["tcpdump", "taskset", "python3"] {
        if on_path(tool).is_none() {
            return Some(format!("{tool} is not on PATH"));
        }
    }
    if !may_capture() {
        return Some("this process may not capture packets (needs root or CAP_NET_RAW)".into());
    }
    None
}

/// Busy threads pinned to core 0 until dropped (bounded: each stops after 120 s by itself).
struct Hog {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Hog {
    fn start(n: usize) -> Hog {
        let stop = Arc::new(AtomicBool::new(false));
        let threads = (0..n)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    pin_to_core_0();
                    let until = Instant::now() + Duration::from_secs(120);
                    let mut x = 0u64;
                    while !stop.load(Ordering::Relaxed) && Instant::now() < until {
                        for _ in 0..10_000 {
                            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                        }
                    }
                })
            })
            .collect();
        Hog { stop, threads }
    }
}

impl Drop for Hog {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn pin_to_core_0() {
    // SAFETY: cpu_set_t is plain data; CPU_ZERO/CPU_SET write inside it; pid 0 is this thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_ZERO(&mut set);
        libc::CPU_SET(0, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

fn last_core() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get()) - 1
}

/// tcpdump on `lo` for one port, writing `pcap`; stopped with SIGINT by [`Capture::stop`].
struct Capture {
    child: Child,
    err: PathBuf,
}

impl Capture {
    fn start(port: u16, pcap: &Path) -> Capture {
        let err = pcap.with_extension("err");
        let child = Command::new("taskset")
            .args(["-c", &last_core().to_string(), "tcpdump", "-i", "lo"])
            .args(["--time-stamp-precision=nano", "-B", "65536", "-n", "-w"])
            .arg(pcap)
            .arg(format!("tcp port {port}"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .expect("tcpdump starts");
        let deadline = Instant::now() + Duration::from_secs(10);
        while !std::fs::read_to_string(&err)
            .unwrap_or_default()
            .contains("listening on")
        {
            assert!(
                Instant::now() < deadline,
                "tcpdump did not start listening: {}",
                std::fs::read_to_string(&err).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Capture { child, err }
    }

    /// Stops tcpdump (SIGINT, so it flushes its file and prints its counts); returns the
    /// packets it says were dropped.
    fn stop(mut self) -> u64 {
        std::thread::sleep(Duration::from_millis(200));
        // SAFETY: the pid is our child, not yet reaped.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGINT) };
        let status = self.child.wait().unwrap();
        let text = std::fs::read_to_string(&self.err).unwrap_or_default();
        assert!(status.success(), "tcpdump: {status}: {text}");
        let dropped: u64 = text
            .lines()
            .filter(|l| l.contains("dropped by"))
            .filter_map(|l| l.split_whitespace().next()?.parse::<u64>().ok())
            .sum();
        assert!(
            text.contains("packets captured"),
            "tcpdump printed no counts: {text}"
        );
        dropped
    }
}

/// One run at `concurrency` with the hog on core 0; returns the analyser's JSON.
fn compare(dir: &Path, server: &server::ServerHandle, concurrency: u32, count: u32) -> serde_json::Value {
    let port = server.addr.port();
    let pcap = dir.join(format!("c{concurrency}.pcap"));
    let export = dir.join(format!("c{concurrency}.json"));
    let capture = Capture::start(port, &pcap);
    let hog = Hog::start(HOG_THREADS);
    let out = Command::new("taskset")
        .args(["-c", "0", env!("CARGO_BIN_EXE_inferperf")])
        .args(["-m", "simple", "-u", &server.addr.to_string(), "--sync"])
        .args(["--concurrency-range", &concurrency.to_string()])
        .args(["--request-count", &count.to_string(), "--profile-export-file"])
        .arg(&export)
        .output()
        .expect("inferperf starts");
    drop(hog);
    let dropped = capture.stop();
    assert!(
        out.status.success(),
        "inferperf: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(dropped, 0, "tcpdump dropped packets: the comparison would not be sound");
    let analysis = Command::new("python3")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/capture_proof.py"))
        .args(["requests", "--proto", "http", "--json", "--port", &port.to_string()])
        .arg("--pcap")
        .arg(&pcap)
        .arg("--export")
        .arg(&export)
        .output()
        .expect("python3 runs the analyser");
    assert!(
        analysis.status.success(),
        "analyser: {}",
        String::from_utf8_lossy(&analysis.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&analysis.stdout).unwrap();
    println!("capture tier c{concurrency}: {v}");
    v
}

#[test]
fn capture_tier() {
    if let Some(why) = skip_reason() {
        println!("capture tier: skipped ({why})");
        return;
    }
    let server = server::start(ServeConfig {
        addr: "127.0.0.1:0".parse().unwrap(),
        threads: 1,
        pin_cores: vec![last_core()],
        ..ServeConfig::default()
    })
    .expect("reference server starts");
    let dir = Scratch::new("inferperf-capture-tier");
    for (concurrency, count) in RUNS {
        let v = compare(&dir, &server, concurrency, count);
        let n = |k: &str| v[k].as_u64().unwrap_or_else(|| panic!("{k} in {v}"));
        let us = |k: &str| v[k].as_f64().unwrap_or_else(|| panic!("{k} in {v}"));
        assert_eq!(n("export_requests"), u64::from(count), "{v}");
        assert_eq!(n("missing_bytes"), 0, "the capture lost bytes: {v}");
        assert_eq!(n("unmatched_export"), 0, "every request matched on the wire: {v}");
        assert_eq!(n("matched"), u64::from(count), "{v}");
        assert!(
            n("wire_requests") >= u64::from(count),
            "the wire holds every request: {v}"
        );
        // A matched request's export interval holds its wire interval (within the analyser's
        // 50 µs slack), so an error far below zero would mean a wrong pairing.
        assert!(us("min_us") > -50.0, "{v}");
        assert!(
            us("p99_us") < P99_LIMIT_US,
            "c{concurrency}: p99 error {} µs with {HOG_THREADS} busy threads on the client's core: {v}",
            us("p99_us")
        );
    }
}
