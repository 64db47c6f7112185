//! Optional tier: the binary's latencies checked against a loopback packet capture. With
//! `INFERPERF_CAPTURE_TIER=1`, tcpdump, taskset and python3 on PATH and the right to capture
//! (root or CAP_NET_RAW), it runs `inferperf` (kernel send and receive stamps on, the
//! defaults) pinned to core 0 against the in-process reference server at concurrency 1 and 16
//! while four busy threads share core 0, captures the traffic with tcpdump (nanosecond stamps)
//! and compares every request of the export with the wire through `benches/capture_proof.py`,
//! the analyser the bench uses: the capture dropped nothing, every exported request was
//! matched to one on the wire, and the p99 of (export latency - wire latency) is under 20 µs.
//!
//!     INFERPERF_CAPTURE_TIER=1 cargo test --profile perf --test it capture_tier -- --nocapture
//!
//! Otherwise it prints one line saying why it skipped. The `capture_analyser_*` tests run by
//! default (python3 on PATH, else one line): the analyser against pcap files written here with
//! known segment times (HTTP/1.1 keep-alive, gRPC streams, a chunked SSE stream).

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
                            x = std::hint::black_box(
                                x.wrapping_mul(6364136223846793005).wrapping_add(1),
                            );
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
    /// packets it says were dropped. tcpdump is handed the kernel's capture ring a block at a
    /// time (when full or after 1 s) and leaves the block it holds on SIGINT, so it gets 1.5 s
    /// after the run's last packet first.
    fn stop(mut self) -> u64 {
        std::thread::sleep(Duration::from_millis(1500));
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
fn compare(
    dir: &Path,
    server: &server::ServerHandle,
    concurrency: u32,
    count: u32,
) -> serde_json::Value {
    let port = server.addr.port();
    let pcap = dir.join(format!("c{concurrency}.pcap"));
    let export = dir.join(format!("c{concurrency}.json"));
    let capture = Capture::start(port, &pcap);
    let hog = Hog::start(HOG_THREADS);
    let out = Command::new("taskset")
        .args(["-c", "0", env!("CARGO_BIN_EXE_inferperf")])
        .args(["-m", "simple", "-u", &server.addr.to_string(), "--sync"])
        .args(["--concurrency-range", &concurrency.to_string()])
        .args([
            "--request-count",
            &count.to_string(),
            "--profile-export-file",
        ])
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
    assert_eq!(
        dropped, 0,
        "tcpdump dropped packets: the comparison would not be sound"
    );
    let analysis = Command::new("python3")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/capture_proof.py"))
        .args([
            "requests",
            "--proto",
            "http",
            "--json",
            "--port",
            &port.to_string(),
        ])
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
        assert_eq!(
            n("unmatched_export"),
            0,
            "every request matched on the wire: {v}"
        );
        assert_eq!(n("matched"), u64::from(count), "{v}");
        assert!(
            n("wire_requests") >= u64::from(count),
            "the wire holds every request: {v}"
        );
        // A matched request's export interval holds its wire interval (within the analyser's
        // 50 µs slack), so an error far below zero would mean a wrong pairing.
        assert!(us("min_us") > -50.0, "{v}");
        // The receive side on its own first (kernel stamps), then the whole error.
        assert!(
            us("recv_p99_us") < P99_LIMIT_US,
            "c{concurrency}: receive part p99 {} µs with {HOG_THREADS} busy threads on the client's core: {v}",
            us("recv_p99_us")
        );
        assert!(
            us("p99_us") < P99_LIMIT_US,
            "c{concurrency}: p99 error {} µs (send part p99 {} µs) with {HOG_THREADS} busy threads on the client's core: {v}",
            us("p99_us"),
            us("send_p99_us")
        );
    }
}

/// A pcap file (nanosecond stamps, Ethernet) written segment by segment: every segment of a
/// test exchange between 127.0.0.1:`CLIENT_PORT + conn` and 127.0.0.1:`PORT`.
struct Pcap {
    bytes: Vec<u8>,
    /// Next sequence number per (connection, direction: 0 client->server, 1 back).
    seq: Vec<[u32; 2]>,
}

const PORT: u16 = 8000;
const CLIENT_PORT: u16 = 40000;
const T0: u64 = 1_700_000_000_000_000_000;

impl Pcap {
    fn new(conns: usize) -> Pcap {
        let mut bytes = Vec::new();
        for v in [0xa1b2_3c4d_u32, 0x0004_0002, 0, 0, 262_144, 1] {
            bytes.extend_from_slice(&v.to_le_bytes());
        }
        let mut p = Pcap {
            bytes,
            seq: vec![[1000, 5000]; conns],
        };
        for c in 0..conns {
            p.segment(T0, c, 0, 0x02, b"");
            p.segment(T0 + 10, c, 1, 0x12, b"");
            p.seq[c] = [1001, 5001];
        }
        p
    }

    fn segment(&mut self, t: u64, conn: usize, dir: usize, flags: u8, payload: &[u8]) {
        let client = CLIENT_PORT + conn as u16;
        let (sport, dport) = if dir == 0 {
            (client, PORT)
        } else {
            (PORT, client)
        };
        let seq = self.seq[conn][dir];
        self.seq[conn][dir] = seq.wrapping_add(payload.len() as u32);
        let mut tcp = Vec::new();
        tcp.extend_from_slice(&sport.to_be_bytes());
        tcp.extend_from_slice(&dport.to_be_bytes());
        tcp.extend_from_slice(&seq.to_be_bytes());
        tcp.extend_from_slice(&[0, 0, 0, 0, 5 << 4, flags, 0xff, 0xff, 0, 0, 0, 0]);
        tcp.extend_from_slice(payload);
        let mut ip = vec![0x45, 0];
        ip.extend_from_slice(&(20 + tcp.len() as u16).to_be_bytes());
        ip.extend_from_slice(&[0, 0, 0, 0, 64, 6, 0, 0, 127, 0, 0, 1, 127, 0, 0, 1]);
        ip.extend_from_slice(&tcp);
        let mut frame = vec![0u8; 12];
        frame.extend_from_slice(&[0x08, 0x00]);
        frame.extend_from_slice(&ip);
        for v in [
            (t / 1_000_000_000) as u32,
            (t % 1_000_000_000) as u32,
            frame.len() as u32,
            frame.len() as u32,
        ] {
            self.bytes.extend_from_slice(&v.to_le_bytes());
        }
        self.bytes.extend_from_slice(&frame);
    }
}

/// Runs the analyser on `pcap` and `export`; None (and one printed line) without python3.
fn analyse(
    dir: &Path,
    pcap: &Pcap,
    export: &serde_json::Value,
    args: &[&str],
) -> Option<serde_json::Value> {
    if on_path("python3").is_none() {
        println!("capture analyser: skipped (python3 is not on PATH)");
        return None;
    }
    std::fs::write(dir.join("t.pcap"), &pcap.bytes).unwrap();
    std::fs::write(dir.join("t.json"), export.to_string()).unwrap();
    let out = Command::new("python3")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/capture_proof.py"))
        .args(args)
        .args(["--json", "--port", &PORT.to_string(), "--pcap"])
        .arg(dir.join("t.pcap"))
        .arg("--export")
        .arg(dir.join("t.json"))
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(serde_json::from_slice(&out.stdout).unwrap())
}

fn export_of(entries: Vec<serde_json::Value>) -> serde_json::Value {
    serde_json::json!({"experiments": [{"requests": entries}]})
}

/// Two keep-alive HTTP/1.1 connections whose exchanges overlap, requests and responses split
/// over two segments each: every exported request pairs with its own exchange, and each error
/// is the export's latency minus first request byte to last response byte.
#[test]
fn capture_analyser_times_http_exchanges_from_first_to_last_byte() {
    let dir = Scratch::new("inferperf-capture-analyser-http");
    let req = b"POST /v2/models/m/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello";
    let resp = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc";
    let mut pcap = Pcap::new(2);
    let mut entries = Vec::new();
    let mut want = Vec::new();
    for i in 0..4u64 {
        let conn = (i % 2) as usize;
        let t = T0 + 1_000 + i * 30_000;
        pcap.segment(t, conn, 0, 0x18, &req[..20]);
        pcap.segment(t + 500, conn, 0, 0x18, &req[20..]);
        pcap.segment(t + 40_000, conn, 1, 0x18, &resp[..10]);
        pcap.segment(t + 42_000, conn, 1, 0x18, &resp[10..]);
        // The client's send is 2 µs before the wire, its receive i+1 µs after.
        let late = 1_000 * (i + 1);
        entries.push(
            serde_json::json!({"timestamp": t - 2_000, "response_timestamps": [t + 42_000 + late]}),
        );
        want.push((2_000 + late) as f64 / 1000.0);
    }
    let Some(v) = analyse(
        &dir,
        &pcap,
        &export_of(entries),
        &["requests", "--proto", "http"],
    ) else {
        return;
    };
    assert_eq!(v["connections"], 2, "{v}");
    assert_eq!(v["wire_requests"], 4, "{v}");
    assert_eq!(v["matched"], 4, "{v}");
    assert_eq!(v["unmatched_export"], 0, "{v}");
    assert_eq!(v["wire_p50_us"], 42.0, "{v}");
    assert_eq!(v["min_us"].as_f64(), Some(want[0]), "{v}");
    assert_eq!(v["max_us"].as_f64(), Some(want[3]), "{v}");
}

/// gRPC over cleartext HTTP/2: streams 1 and 3 of one connection, each from the client's
/// HEADERS frame to the server's trailers (END_STREAM).
#[test]
fn capture_analyser_times_grpc_streams_by_id() {
    let dir = Scratch::new("inferperf-capture-analyser-grpc");
    let frame = |ty: u8, flags: u8, sid: u32, payload: &[u8]| {
        let mut f = (payload.len() as u32).to_be_bytes()[1..].to_vec();
        f.extend_from_slice(&[ty, flags]);
        f.extend_from_slice(&sid.to_be_bytes());
        f.extend_from_slice(payload);
        f
    };
    let mut pcap = Pcap::new(1);
    let mut preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    preface.extend(frame(4, 0, 0, b""));
    pcap.segment(T0 + 100, 0, 0, 0x18, &preface);
    let mut entries = Vec::new();
    for (i, sid) in [1u32, 3].into_iter().enumerate() {
        let t = T0 + 1_000 + i as u64 * 100_000;
        let mut req = frame(1, 4, sid, b"hdrs");
        req.extend(frame(0, 1, sid, b"\0\0\0\0\x02ab"));
        pcap.segment(t, 0, 0, 0x18, &req);
        let mut head = frame(1, 4, sid, b"h");
        head.extend(frame(0, 0, sid, b"data"));
        pcap.segment(t + 20_000, 0, 1, 0x18, &head);
        pcap.segment(t + 30_000, 0, 1, 0x18, &frame(1, 5, sid, b"trailers"));
        entries.push(serde_json::json!({"timestamp": t - 1_000, "response_timestamps": [t + 30_000 + 4_000 * i as u64]}));
    }
    let Some(v) = analyse(
        &dir,
        &pcap,
        &export_of(entries),
        &["requests", "--proto", "grpc"],
    ) else {
        return;
    };
    assert_eq!(v["wire_requests"], 2, "{v}");
    assert_eq!(v["matched"], 2, "{v}");
    assert_eq!(v["wire_p50_us"], 30.0, "{v}");
    assert_eq!(
        (v["min_us"].as_f64(), v["max_us"].as_f64()),
        (Some(1.0), Some(5.0)),
        "{v}"
    );
}

/// A chunked SSE response whose second event is split across two segments: each exported
/// chunk is timed against the segment that holds its event's last byte, and the request is
/// found by its JSON body.
#[test]
fn capture_analyser_times_each_sse_event_by_its_last_byte() {
    let dir = Scratch::new("inferperf-capture-analyser-sse");
    let body = r#"{"messages":[{"content":"hi","role":"user"}],"model":"m","stream":true}"#;
    let mut req = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    req.extend_from_slice(body.as_bytes());
    let chunk = |event: &str| format!("{:x}\r\n{event}\r\n", event.len());
    let events = [
        "data: {\"a\":1}\n\n",
        "data: {\"a\":2}\n\n",
        "data: [DONE]\n\n",
    ];
    let second = chunk(events[1]);
    let segments = [
        format!(
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n{}",
            chunk(events[0])
        ),
        second[..8].to_string(),
        format!("{}{}0\r\n\r\n", &second[8..], chunk(events[2])),
    ];
    let mut pcap = Pcap::new(1);
    pcap.segment(T0 + 1_000, 0, 0, 0x18, &req);
    for (i, s) in segments.iter().enumerate() {
        pcap.segment(T0 + 50_000 + 5_000 * i as u64, 0, 1, 0x18, s.as_bytes());
    }
    // Event 1 in segment 0, event 2 ends in segment 2 with event 3; the client is 3, 7, 11 µs late.
    let stamps = [T0 + 53_000, T0 + 67_000, T0 + 71_000];
    let entry = serde_json::json!({
        "timestamp": T0,
        "request_inputs": {"payload": body},
        "response_timestamps": stamps,
        "response_outputs": events.iter().map(|e| serde_json::json!({"response": e})).collect::<Vec<_>>(),
    });
    let Some(v) = analyse(&dir, &pcap, &export_of(vec![entry]), &["chunks"]) else {
        return;
    };
    assert_eq!(v["matched"], 1, "{v}");
    assert_eq!(v["matched_by_time"], 0, "matched by body: {v}");
    assert_eq!(
        (v["chunks"].as_u64(), v["unmatched_chunks"].as_u64()),
        (Some(3), Some(0)),
        "{v}"
    );
    assert_eq!(
        (
            v["min_us"].as_f64(),
            v["p50_us"].as_f64(),
            v["max_us"].as_f64()
        ),
        (Some(3.0), Some(7.0), Some(11.0)),
        "{v}"
    );
    assert_eq!(v["first_max_us"].as_f64(), Some(3.0), "{v}");
}
