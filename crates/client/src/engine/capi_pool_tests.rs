//! The pool against the stub library (skipped without gcc): closed-loop chains, budgets,
//! stopping, and what reaches the sink.

use super::*;
use crate::protocol::capi::stub_tests::build_stub;
use crate::protocol::capi::ServerOptions;
use mio::{Events, Poll};
use std::path::Path;
use std::time::Instant;

struct Rig {
    pool: CapiPool,
    poll: Poll,
    clock: Clock,
    lib: libloading::Library,
}

fn rig(tag: &str, slots: usize) -> Option<Rig> {
    let dir = build_stub(tag, &[])?;
    // Opened first: the same copy the server loads, so its counters are the run's.
    // SAFETY: the stub has no initialisers.
    let lib = unsafe { libloading::Library::new(dir.join("lib/libtritonserver.so")) }.unwrap();
    let server = Server::start(&ServerOptions {
        model_repository: dir.join("models"),
        server_dir: dir.clone(),
        log_verbose: 0,
        log_info: false,
        unload_model: None,
    })
    .unwrap();
    let poll = Poll::new().unwrap();
    let waker = Arc::new(Waker::new(poll.registry(), crate::engine::worker::WAKE).unwrap());
    let wire = CapiWire {
        server,
        model: Arc::new(ModelTarget {
            name: c"identity_fp32".into(),
            version: -1,
            outputs: Vec::new(),
        }),
        steps: Arc::new(vec![Vec::new(), Vec::new()]),
        decoupled: false,
        framed: false,
    };
    let clock = Clock::new();
    let mut pool = CapiPool::new(wire, waker, clock, false, slots);
    pool.open(poll.registry()).unwrap();
    let _ = Path::new(&dir);
    Some(Rig {
        pool,
        poll,
        clock,
        lib,
    })
}

impl Rig {
    fn counter(&self, name: &[u8]) -> u64 {
        // SAFETY: the stub's counters are `uint64_t (void)`.
        unsafe {
            let f: libloading::Symbol<unsafe extern "C" fn() -> u64> = self.lib.get(name).unwrap();
            f()
        }
    }

    /// Runs the worker's side (events, fill) until `done` holds; false after 10 s.
    fn run(&mut self, feed: &mut Feed, sink: &mut Sink, done: impl Fn(&Feed, &Sink) -> bool) {
        let mut events = Events::with_capacity(16);
        let until = Instant::now() + Duration::from_secs(10);
        while !done(feed, sink) {
            assert!(Instant::now() < until, "timed out");
            self.poll
                .poll(&mut events, Some(Duration::from_millis(5)))
                .unwrap();
            let mut cx = Cx {
                registry: self.poll.registry(),
                clock: &self.clock,
                feed,
                sink,
            };
            for ev in events.iter() {
                if ev.token() != crate::engine::worker::WAKE {
                    let ready = Ready {
                        writable: false,
                        readable: true,
                        closed: false,
                    };
                    self.pool.on_event(ev.token().0, ready, &mut cx);
                }
            }
            self.pool.fill(&mut cx);
        }
    }
}

fn feed(budget: Option<u64>) -> Feed {
    Feed::new(
        Arc::new(vec![Vec::new(), Vec::new()]),
        0,
        budget,
        None,
        None,
    )
}

#[test]
fn chains_spend_the_budget_exactly_with_the_slots_in_flight() {
    let Some(mut rig) = rig("pool-budget", 3) else {
        return;
    };
    let (mut feed, mut sink) = (feed(Some(500)), Sink::new(Vec::with_capacity(600), false));
    rig.run(&mut feed, &mut sink, |_, s| {
        s.completed == 500 && s.in_flight == 0
    });
    assert_eq!(
        rig.counter(b"stub_infer_count"),
        500,
        "the stub saw the budget"
    );
    // Never more than the slots. How many overlap depends on how the stand-in's one server
    // thread and the chains interleave; tests/it/run_capi.rs checks that a time window keeps
    // exactly `-c` in flight.
    let most = rig.counter(b"stub_max_inflight");
    assert!(
        (1..=3).contains(&most),
        "{most} requests in flight with 3 slots"
    );
    assert_eq!(sink.records.len(), 500);
    assert!(sink.records.iter().all(|r| r.ok && r.responses == 1));
    assert_eq!(feed.sent, 500, "chained sends are counted as sent");
    assert_eq!(rig.pool.chaining, Some(true));
    // The slots alternate the two input steps on their own.
    let second = sink.records.iter().filter(|r| r.step == 1).count();
    assert!((240..=260).contains(&second), "{second} of 500 on step 1");
    rig.pool.close(rig.poll.registry());
    assert!(rig.pool.slots.iter().all(|s| s.owed() == 0));
}

#[test]
fn a_stop_ends_every_chain_and_every_record_arrives() {
    let Some(mut rig) = rig("pool-stop", 2) else {
        return;
    };
    let (mut feed, mut sink) = (feed(None), Sink::new(Vec::with_capacity(1 << 16), false));
    rig.run(&mut feed, &mut sink, |_, s| s.completed >= 2000);
    feed.running = false;
    rig.run(&mut feed, &mut sink, |_, s| s.in_flight == 0);
    // Let any late callback land: nothing more may be sent after the chains stopped.
    rig.pool.close(rig.poll.registry());
    let sent = rig.counter(b"stub_infer_count");
    assert_eq!(
        sink.completed, sent,
        "every request the stub took is one record"
    );
    assert_eq!(feed.sent, sent);
    assert_eq!(rig.counter(b"stub_max_inflight"), 2);
    assert!(sink.records.iter().all(|r| r.ok && r.end_ns >= r.start_ns));
}
