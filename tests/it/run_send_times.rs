//! When a request starts: at the socket call that hands its first byte to the kernel, not
//! when the client began to encode or queue it. On gRPC, requests queued together on one
//! HTTP/2 connection go out in one write, so they must share that write's time; a start read
//! per request while queueing (before each one's frames were encoded) would give every
//! request a time of its own. Over plain TCP the start is the kernel's send stamp of that
//! write; a request without one starts at the clock read before it and is counted.

use std::collections::HashMap;
use std::path::Path;

use serde_json::Value;

use crate::common::*;
use inferperf::config::{ConcurrencyRange, Protocol};

/// Every request's start (`timestamp`, ns) in a perf_analyzer-format export.
fn starts(path: &Path) -> Vec<u64> {
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    doc["experiments"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|e| e["requests"].as_array().unwrap().iter())
        .map(|r| r["timestamp"].as_u64().unwrap())
        .collect()
}

/// One worker with 16 gRPC slots on one connection: its first 16 requests are queued as soon
/// as the server's SETTINGS arrive and written together, and later ones whenever several
/// responses come in one read. Every start is also before its own response.
#[test]
fn grpc_requests_written_together_share_their_start() {
    let server = start_grpc_server(Vec::new());
    let dir = temp_dir("send-times-grpc");
    let mut cfg = quick_config(&server, "simple", 100);
    cfg.protocol = Protocol::Grpc;
    cfg.url = server.grpc_addr.expect("gRPC endpoint").to_string();
    cfg.async_mode = true;
    cfg.max_threads = Some(1);
    cfg.request_count = 400;
    cfg.concurrency = ConcurrencyRange {
        start: 16,
        end: 16,
        step: 1,
    };
    cfg.profile_export_file = Some(dir.join("out.json"));
    let (res, _) = run(&cfg);
    assert!(res.error.is_none(), "{:?}", res.error);
    let starts = starts(&dir.join("out.json"));
    assert!(starts.len() >= 400, "{}", starts.len());
    let mut by_time: HashMap<u64, u32> = HashMap::new();
    for s in &starts {
        *by_time.entry(*s).or_default() += 1;
    }
    let largest = by_time.values().copied().max().unwrap();
    assert!(
        largest >= 8,
        "the first write carried the first 16 requests, yet at most {largest} share a start"
    );
    let latencies = export_latencies(&dir.join("out.json"));
    assert!(latencies[0] > 0, "a response before its request's start");
}

/// The requests started by the clock that the console reports (0 without the line).
fn clock_starts(text: &str) -> u64 {
    const LINE: &str =
        "Requests started by the clock (no kernel send stamp for the write of their first byte): ";
    text.lines()
        .find_map(|l| l.strip_prefix(LINE))
        .map_or(0, |n| n.trim().parse().expect("a count"))
}

/// Over plain TCP, HTTP/1.1 and gRPC, the requests start at the kernel's send stamp: the
/// console's count of requests started by the clock instead stays under 1 % (a stamp can
/// be missed when the kernel had not sent the data by the time the write returned), and
/// every start still precedes its response.
#[test]
fn requests_start_at_the_kernel_send_stamp_over_http_and_grpc() {
    let server = start_grpc_server(Vec::new());
    for protocol in [Protocol::Http, Protocol::Grpc] {
        let dir = temp_dir(&format!("send-stamps-{protocol:?}"));
        let mut cfg = quick_config(&server, "simple", 100);
        if protocol == Protocol::Grpc {
            cfg.protocol = Protocol::Grpc;
            cfg.url = server.grpc_addr.expect("gRPC endpoint").to_string();
        }
        cfg.request_count = 300;
        cfg.concurrency = ConcurrencyRange {
            start: 2,
            end: 2,
            step: 1,
        };
        cfg.profile_export_file = Some(dir.join("out.json"));
        assert!(cfg.tx_stamps, "send stamps are the default");
        let (res, text) = run(&cfg);
        assert!(res.error.is_none(), "{:?}", res.error);
        let sent = starts(&dir.join("out.json")).len() as u64;
        assert!(sent >= 300, "{protocol:?}: {sent}");
        let by_clock = clock_starts(&text);
        assert!(
            by_clock * 100 <= sent,
            "{protocol:?}: {by_clock} of {sent} requests started by the clock:\n{text}"
        );
        let latencies = export_latencies(&dir.join("out.json"));
        assert!(latencies.iter().all(|&l| l > 0), "{protocol:?}");
    }
}
