//! Proves the per-request path does not allocate: the binary's counting allocator sees about the
//! same number of allocations for 1,000 requests as for 6,000 (fewer than one per 100 of the
//! 5,000 more). The reference server runs as
//! a separate process so that only the client's allocations are counted.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use crate::{common, counting};
use inferperf::config::{ConcurrencyRange, Config, MeasurementMode, Protocol};

fn allocations_for(addr: &str, requests: u64) -> u64 {
    allocations_with(addr, Protocol::Http, false, requests)
}

fn allocations_with(addr: &str, protocol: Protocol, streaming: bool, requests: u64) -> u64 {
    let cfg = Config {
        protocol,
        streaming,
        async_mode: streaming,
        model_name: "simple".into(),
        url: addr.into(),
        measurement_mode: MeasurementMode::CountWindows,
        request_count: requests,
        measurement_request_count: requests,
        concurrency: ConcurrencyRange {
            start: 4,
            end: 4,
            step: 1,
        },
        pin_threads: false,
        ready_timeout_s: 5,
        ..Config::default()
    };
    let mut out = Vec::with_capacity(1 << 16);
    let before = counting::process_allocs();
    let res = inferperf::run::run(&cfg, &mut out, Arc::new(AtomicBool::new(false))).unwrap();
    let used = counting::process_allocs() - before;
    assert!(res.error.is_none());
    assert_eq!(res.points[0].client.request_count, requests);
    used
}

#[test]
fn allocations_do_not_grow_with_requests() {
    let _serial = counting::serial();
    let (mut child, addr, grpc) = common::spawn_serve_grpc();
    let small = allocations_for(&addr, 1_000);
    let large = allocations_for(&addr, 6_000);
    let grpc_cells: Vec<(bool, u64, u64)> = [false, true]
        .into_iter()
        .map(|streaming| {
            let small = allocations_with(&grpc, Protocol::Grpc, streaming, 1_000);
            let large = allocations_with(&grpc, Protocol::Grpc, streaming, 6_000);
            (streaming, small, large)
        })
        .collect();
    let _ = child.kill();
    let _ = child.wait();
    for (streaming, small, large) in grpc_cells {
        eprintln!("gRPC (streaming {streaming}): {small} for 1,000 requests, {large} for 6,000");
        assert!(
            large < small + 50,
            "gRPC streaming={streaming}: 1k requests: {small} allocations, 6k: {large}"
        );
    }
    eprintln!("allocations: {small} for 1,000 requests, {large} for 6,000 requests");
    // 5,000 more requests may cost a few more buffer doublings on the coordinator, never one
    // allocation per request.
    assert!(
        large < small + 50,
        "1k requests: {small} allocations, 6k requests: {large}"
    );
}
