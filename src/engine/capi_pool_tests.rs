//! The pool's completion bookkeeping, against the stub library (skipped without gcc).

use super::*;
use crate::protocol::capi::stub_tests::build_stub;
use crate::protocol::capi::ServerOptions;

fn pool(tag: &str, decoupled: bool) -> Option<(CapiPool, mio::Poll)> {
    let dir = build_stub(tag, &[])?;
    let server = Server::start(&ServerOptions {
        model_repository: dir.join("models"),
        server_dir: dir,
        log_verbose: 0,
        log_info: false,
        unload_model: None,
    })
    .unwrap();
    let poll = mio::Poll::new().unwrap();
    let waker = Arc::new(Waker::new(poll.registry(), crate::engine::worker::WAKE).unwrap());
    let wire = CapiWire {
        server,
        model: Arc::new(ModelTarget {
            name: c"identity_fp32".into(),
            version: -1,
            outputs: Vec::new(),
        }),
        steps: Arc::new(vec![Vec::new()]),
        decoupled,
    };
    let mut pool = CapiPool::new(wire, waker, Clock::new(), true, 1);
    pool.open(poll.registry()).unwrap();
    Some((pool, poll))
}

fn busy(pool: &mut CapiPool, start_ns: u64) {
    pool.free.clear();
    let slot = &mut pool.slots[0];
    slot.busy = true;
    slot.failed = false;
    slot.rec = RequestRecord {
        start_ns,
        ..RequestRecord::default()
    };
}

fn news(at_ns: u64, last: bool, has_response: bool, error: Option<&str>) -> Completion {
    Completion {
        slot: 0,
        at_ns,
        last,
        has_response,
        error: error.map(str::to_owned),
        body: if has_response {
            b"out".to_vec()
        } else {
            Vec::new()
        },
    }
}

#[test]
fn decoupled_request_ends_at_the_final_flag() {
    let Some((mut pool, _poll)) = pool("pool-dec", true) else {
        return;
    };
    let mut sink = Sink::new(Vec::new(), true);
    busy(&mut pool, 10);
    for c in [
        news(20, false, true, None),
        news(30, false, true, None),
        news(40, true, false, None),
    ] {
        pool.complete(c, &mut sink);
    }
    let r = sink.records[0];
    assert_eq!(
        (r.ok, r.responses, r.recv_start_ns, r.end_ns),
        (true, 2, 20, 30)
    );
    assert_eq!(
        &sink.bodies[..],
        b"out",
        "the last response's outputs are kept"
    );
    assert_eq!(pool.free, vec![0]);
    // Only the final flag: the request ends there.
    busy(&mut pool, 50);
    pool.complete(news(60, true, false, None), &mut sink);
    assert_eq!((sink.records[1].ok, sink.records[1].end_ns), (true, 60));
}

#[test]
fn an_error_is_one_failed_record_and_the_slot_waits_for_the_final_callback() {
    let Some((mut pool, _poll)) = pool("pool-err", false) else {
        return;
    };
    let mut sink = Sink::new(Vec::new(), false);
    busy(&mut pool, 10);
    pool.complete(news(20, false, true, Some("Internal: boom")), &mut sink);
    assert!(pool.free.is_empty(), "the request is still in the server");
    pool.complete(news(30, true, true, None), &mut sink);
    assert_eq!(sink.records.len(), 1);
    assert!(!sink.records[0].ok && sink.failed);
    assert_eq!(sink.error.as_deref(), Some("Internal: boom"));
    assert_eq!(pool.free, vec![0]);
    // Not decoupled and no response at all: a failure too.
    let mut sink = Sink::new(Vec::new(), false);
    busy(&mut pool, 40);
    pool.complete(news(50, true, false, None), &mut sink);
    assert!(!sink.records[0].ok);
    assert!(sink.error.unwrap().contains("without a response"));
}
