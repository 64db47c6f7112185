use std::thread;

use super::*;
use crate::measure::{Dist, RequestRecord};
use crate::mpi::local::LocalWorld;

const T: Duration = Duration::from_secs(10);

/// Runs `f(coord)` on every rank of an in-process world; rank r's clock reads r seconds ahead.
fn on_ranks<R: Send + 'static>(
    n: usize,
    mode: Mode,
    f: impl Fn(&mut MpiCoord) -> R + Send + Sync + 'static,
) -> Vec<R> {
    let f = std::sync::Arc::new(f);
    let handles: Vec<_> = LocalWorld::world(n)
        .into_iter()
        .map(|w| {
            let f = f.clone();
            thread::spawn(move || {
                let ahead = w.rank() as u64 * 1_000_000_000;
                let clock = crate::clock::Clock::new();
                let now = move || clock.now_ns() + ahead;
                let mut c = MpiCoord::new(Box::new(w), mode, T, &now).unwrap();
                f(&mut c)
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

fn window(rank: u64, latencies: &[u64]) -> WindowStats {
    WindowStats {
        start_ns: 1_000 + rank,
        end_ns: 2_000 + rank,
        duration_ns: 1_000 + rank,
        request_count: latencies.len() as u64,
        sent: latencies.len() as u64,
        latency: Dist::of(latencies.iter().copied()),
        client_cpu_ns: 10,
        workers: 1,
        ..WindowStats::default()
    }
}

#[test]
fn shares_split_evenly_with_the_remainder_to_low_ranks() {
    let shares = on_ranks(3, Mode::ScaleOut, |c| {
        (c.share(8), c.share(2), c.share_rate(30.0))
    });
    assert_eq!(shares, vec![(3, 1, 10.0), (3, 1, 10.0), (2, 0, 10.0)]);
    let whole = on_ranks(2, Mode::MultiModel, |c| (c.share(8), c.share_rate(30.0)));
    assert_eq!(whole, vec![(8, 30.0), (8, 30.0)]);
}

#[test]
fn offsets_are_measured_against_rank_0_and_only_rank_0_keeps_them() {
    let offsets = on_ranks(2, Mode::ScaleOut, |c| c.offsets_ns.clone());
    assert_eq!(offsets[0].len(), 2);
    assert_eq!(offsets[0][0], 0);
    // Rank 1 reads 1 s ahead; the barrier skew of two threads is far below 100 ms.
    assert!(
        (offsets[0][1] - 1_000_000_000).abs() < 100_000_000,
        "{offsets:?}"
    );
    assert!(offsets[1].is_empty());
}

#[test]
fn scale_out_merges_windows_exactly_on_rank_0() {
    let merged = on_ranks(2, Mode::ScaleOut, |c| {
        let r = c.rank() as u64;
        let mut ws = window(r, if r == 0 { &[30, 10] } else { &[20, 40, 5] });
        let rec = RequestRecord {
            start_ns: 100 + r,
            end_ns: 200 + r,
            ok: true,
            body_off: 0,
            body_len: 1,
            ..RequestRecord::default()
        };
        let mut recs = Some(WindowRecords {
            records: vec![rec],
            bodies: vec![b'a' + r as u8],
            sent: 1,
            ..WindowRecords::default()
        });
        c.merge_window(&mut ws, &mut recs).unwrap();
        (ws, recs.unwrap())
    });
    let (ws, recs) = &merged[0];
    assert_eq!(ws.latency, Dist::of([5, 10, 20, 30, 40]));
    assert_eq!((ws.request_count, ws.sent, ws.workers), (5, 5, 2));
    assert_eq!(
        (ws.start_ns, ws.end_ns, ws.duration_ns),
        (1_000, 2_001, 1_001)
    );
    assert_eq!(ws.client_cpu_ns, 20);
    // Both ranks' records, each pointing at its own body; one host, so no clock shift.
    assert_eq!(recs.records.len(), 2);
    assert_eq!(recs.bodies, b"ab");
    assert_eq!(recs.records[1].body_off, 1);
    assert_eq!(recs.records[1].start_ns, 101);
    assert_eq!(
        merged[1].0.latency,
        Dist::of([20, 40, 5]),
        "rank 1 keeps its own"
    );
}

#[test]
fn scale_out_follows_rank_0_and_any_failure_ends_every_rank() {
    let stable = on_ranks(2, Mode::ScaleOut, |c| {
        // Rank 1's local verdict is ignored: only rank 0 judges the merged windows.
        let local = if c.is_root() {
            Some(PointStatus::Stable)
        } else {
            Some(PointStatus::Unstable)
        };
        c.decide(local)
    });
    assert_eq!(stable, vec![Some(PointStatus::Stable); 2]);
    let go_on = on_ranks(2, Mode::ScaleOut, |c| {
        let local = (!c.is_root()).then_some(PointStatus::Stable);
        c.decide(local)
    });
    assert_eq!(go_on, vec![None, None]);
    let failed = on_ranks(2, Mode::ScaleOut, |c| {
        let local = (!c.is_root()).then(|| PointStatus::Failed("connection refused".into()));
        c.decide(local)
    });
    let want = Some(PointStatus::Failed("rank 1: connection refused".into()));
    assert_eq!(failed, vec![want.clone(), want]);
}

#[test]
fn multi_model_is_done_only_when_every_rank_is_stable() {
    let first = on_ranks(2, Mode::MultiModel, |c| {
        let local = c.is_root().then_some(PointStatus::Stable);
        c.decide(local)
    });
    assert_eq!(first, vec![None, None], "rank 1 is not stable yet");
    let both = on_ranks(2, Mode::MultiModel, |c| c.decide(Some(PointStatus::Stable)));
    assert_eq!(both, vec![Some(PointStatus::Stable); 2]);
    // A rank out of trials ends the level everywhere; the others report unstable.
    let out = on_ranks(2, Mode::MultiModel, |c| {
        let local = (!c.is_root()).then_some(PointStatus::Unstable);
        c.decide(local)
    });
    assert_eq!(out, vec![Some(PointStatus::Unstable); 2]);
    let interrupted = on_ranks(3, Mode::MultiModel, |c| {
        let local = (c.rank() == 2).then_some(PointStatus::Interrupted);
        c.decide(local)
    });
    assert_eq!(interrupted, vec![Some(PointStatus::Interrupted); 3]);
}

#[test]
fn statuses_and_decisions_round_trip() {
    let statuses = [
        None,
        Some(PointStatus::Stable),
        Some(PointStatus::Unstable),
        Some(PointStatus::OverThreshold),
        Some(PointStatus::Interrupted),
        Some(PointStatus::NoValidRequests),
        Some(PointStatus::Failed("x".into())),
    ];
    for s in statuses {
        let mut w = Writer::default();
        put_status(&mut w, s.as_ref());
        assert_eq!(get_status(&mut Reader::new(&w.buf)).unwrap(), s);
    }
    assert!(get_status(&mut Reader::new(&[9])).is_err());
    assert!(get_decision(&mut Reader::new(&[2, 0])).is_err());
    assert!(get_decision(&mut Reader::new(&[])).is_err());
}

#[test]
fn records_from_another_host_move_onto_rank_0s_clock() {
    let mut recs = WindowRecords {
        records: vec![RequestRecord {
            start_ns: 5_000,
            end_ns: 6_000,
            intended_ns: 0,
            ..RequestRecord::default()
        }],
        ..WindowRecords::default()
    };
    shift_records(&mut recs, 1_000);
    let r = recs.records[0];
    assert_eq!((r.start_ns, r.end_ns, r.intended_ns), (4_000, 5_000, 0));
}
