//! Unit tests of the pool's feed and sink.

use super::*;
use crate::measure::FailKind;

#[test]
fn feed_cycles_steps_and_spends_the_budget() {
    let requests = Arc::new(vec![vec![1], vec![2], vec![3]]);
    let mut sink = Sink::new(Vec::new(), false);
    let mut feed = Feed::new(requests, 4, Some(4), None, None);
    let steps: Vec<_> = std::iter::from_fn(|| feed.next(&mut sink, 0, 0).map(|s| s.step)).collect();
    assert_eq!(steps, vec![1, 2, 0, 1]);
    assert!(feed.exhausted());
    assert_eq!(feed.sent, 4);
    let mut open = Feed::new(Arc::new(vec![vec![0]]), 0, None, None, None);
    assert_eq!(open.next(&mut sink, 0, 0).map(|s| s.step), Some(0));
    sink.fail(FailKind::Reset, "boom".into());
    sink.fail(FailKind::Timeout, "later".into());
    assert_eq!(open.next(&mut sink, 0, 0), None);
    assert_eq!(sink.error.as_deref(), Some("boom"));
    assert_eq!(sink.tally.count(FailKind::Reset), 1);
    assert_eq!(sink.tally.count(FailKind::Timeout), 1);
    assert_eq!(sink.tally.example(FailKind::Timeout), Some("later"));
}

#[test]
fn slot_feed_sends_the_variant_of_the_pool_slot() {
    use crate::engine::slots::{OutputSlots, SlotShare};
    // 2 input steps x 4 slots; this worker owns slots 2 and 3.
    let requests: Vec<Vec<u8>> = (0..8u8).map(|i| vec![i]).collect();
    let mut feed = Feed::new(Arc::new(requests), 1, None, None, None);
    let slots = Arc::new(OutputSlots::new(4, Vec::new()).unwrap());
    feed.set_slots(SlotShare { slots, base: 2 });
    let mut sink = Sink::new(Vec::new(), false);
    // (pool slot, expected step, expected request index)
    let rows = [(0, 1, 6), (1, 0, 3), (0, 1, 6), (1, 0, 3)];
    for (pool_slot, step, request) in rows {
        let send = feed.next(&mut sink, 0, pool_slot).unwrap();
        assert_eq!((send.step, send.request), (step, request));
        assert_eq!(feed.bytes(&send), &[request as u8]);
        let mut rec = RequestRecord {
            step: 99,
            ..RequestRecord::default()
        };
        send.stamp(&mut rec);
        assert_eq!(rec.step, step as u32, "the record names the input step");
    }
}

#[test]
fn finish_in_slot_captures_the_slot_regions() {
    use crate::engine::slots::{OutputSlots, SlotShare};
    use crate::measure::record::framed_responses;
    let views: Vec<Vec<crate::engine::slots::OutputView>> = (0..3u8)
        .map(|s| vec![Box::new(vec![s; 2]) as crate::engine::slots::OutputView])
        .collect();
    let slots = Arc::new(OutputSlots::new(3, views).unwrap());
    let mut sink = Sink::new(Vec::new(), true);
    sink.capture = Some(SlotShare { slots, base: 1 });
    let ok = RequestRecord {
        ok: true,
        ..RequestRecord::default()
    };
    sink.started();
    sink.finish_in_slot(ok, b"resp", 1);
    sink.started();
    sink.finish_in_slot(RequestRecord::default(), b"error", 0);
    let r = sink.records[0];
    let body = &sink.bodies[r.body_off as usize..(r.body_off + r.body_len) as usize];
    let frames: Vec<&[u8]> = framed_responses(body).map(|(_, p)| p).collect();
    assert_eq!(frames, vec![&b"resp"[..], &[2, 2]]);
    // A failed request keeps its plain body.
    let f = sink.records[1];
    let body = &sink.bodies[f.body_off as usize..(f.body_off + f.body_len) as usize];
    assert_eq!(body, b"error");
    assert_eq!((sink.completed, sink.in_flight), (2, 0));
}

#[test]
fn paced_feed_hands_out_sends_only_when_due() {
    use crate::engine::pace::{deal, Schedule};
    let mut sink = Sink::new(Vec::new(), false);
    let plan = deal(&Schedule::Fixed(vec![10, 20, 30]), 1).remove(0);
    let mut feed = Feed::new(
        Arc::new(vec![vec![0]]),
        0,
        None,
        Some(Pace::new(plan, 1000, None)),
        None,
    );
    assert_eq!(feed.next_due_ns(), Some(1010));
    assert!(!feed.due(&sink, 1009));
    assert_eq!(feed.next(&mut sink, 1009, 0), None);
    // Late: both overdue sends come out at once, each with its own intended time.
    assert!(feed.due(&sink, 1025));
    let a = feed.next(&mut sink, 1025, 0).unwrap();
    let b = feed.next(&mut sink, 1025, 0).unwrap();
    assert_eq!((a.intended_ns, b.intended_ns), (1010, 1020));
    assert_eq!(feed.next(&mut sink, 1025, 0), None);
    assert_eq!(
        feed.next(&mut sink, 1030, 0).map(|s| s.intended_ns),
        Some(1030)
    );
    assert!(feed.exhausted(), "a fixed schedule ends");
    assert_eq!(feed.open_loop(), Some(None));
}

#[test]
fn sink_keeps_bodies_only_when_asked() {
    let mut sink = Sink::new(Vec::new(), true);
    sink.started();
    sink.finish(RequestRecord::default(), b"abc");
    sink.started();
    sink.finish(RequestRecord::default(), b"");
    assert_eq!(sink.records[0].body_len, 3);
    assert_eq!(sink.records[1].body_len, 0);
    assert_eq!((sink.completed, sink.in_flight), (2, 0));
    let mut plain = Sink::new(Vec::new(), false);
    plain.finish(RequestRecord::default(), b"abc");
    assert!(plain.bodies.is_empty());
}

#[test]
fn open_loop_rides_out_connection_losses_up_to_the_limit() {
    let mut sink = Sink::new(Vec::new(), false);
    sink.ride_out = true;
    // A reply the server answered wrongly is not a lost connection: it fails as always.
    assert!(!sink.rides_out(FailKind::Status));
    for _ in 0..RIDE_OUT_LIMIT - 1 {
        sink.fail(FailKind::Reset, "reset".into());
    }
    // A success in between starts the count again.
    sink.started();
    let ok = RequestRecord {
        ok: true,
        ..RequestRecord::default()
    };
    sink.finish(ok, &[]);
    for _ in 0..RIDE_OUT_LIMIT {
        sink.fail(FailKind::Closed, "closed".into());
    }
    assert!(!sink.failed && sink.error.is_none());
    assert_eq!(sink.tally.total(), u64::from(2 * RIDE_OUT_LIMIT - 1));
    // One loss too many: the server is gone, the run fails.
    sink.fail(FailKind::Reset, "reset".into());
    assert!(sink.failed);
    assert_eq!(sink.error.as_deref(), Some("reset"));
}
