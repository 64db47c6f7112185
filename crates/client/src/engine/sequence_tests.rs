use super::*;

fn cfg(id_start: u64, id_range: u64, length: u64, variation_pct: f64) -> SeqConfig {
    SeqConfig {
        id_start,
        id_range,
        length,
        variation_pct,
        ..SeqConfig::default()
    }
}

/// (slot, id, start, end) per call of `next`.
type Step = (usize, u64, bool, bool);

fn replay(seq: &mut Sequences, steps: &[Step]) {
    for (i, &(slot, id, start, end)) in steps.iter().enumerate() {
        let f = seq.next(slot);
        assert_eq!(
            (f.id, f.start, f.end),
            (id, start, end),
            "call {i} on slot {slot}"
        );
    }
}

#[test]
fn ids_flags_and_collision_skips_follow_the_counter() {
    const S: bool = true;
    const N: bool = false;
    // Range 3, 3 slots, 2 requests per sequence.
    let mut seq = Sequences::new(&cfg(1, 3, 2, 0.0), 3, &[]).unwrap();
    replay(
        &mut seq,
        &[
            (0, 1, S, N),
            (1, 2, S, N),
            (0, 1, N, S),
            (0, 3, S, N), // counter 2
            (0, 3, N, S),
            (0, 1, S, N), // counter 3 wraps to 1, free again
            (0, 1, N, S),
            (0, 1, S, N), // candidate 2 is live on slot 1: slot 0 keeps its old id
            (2, 3, S, N),
            (0, 1, N, S),
            (1, 2, N, S),
            (1, 2, S, N), // candidate 1 is still held by slot 0 (ended): keep old id 2
        ],
    );
}

#[test]
fn a_fresh_slot_whose_candidate_is_held_draws_again() {
    // One request per sequence, so every call starts (and ends) a sequence.
    let mut seq = Sequences::new(&cfg(1, 3, 1, 0.0), 3, &[]).unwrap();
    let ids: Vec<(usize, u64)> = [0, 0, 1, 0, 0, 0, 0, 0, 2, 0]
        .iter()
        .map(|&slot| {
            let f = seq.next(slot);
            assert!(f.start && f.end);
            (slot, f.id)
        })
        .collect();
    let expected = [
        (0, 1),
        (0, 2),
        (1, 3),
        (0, 1),
        (0, 2),
        (0, 2), // candidate 3 held by slot 1
        (0, 1),
        (0, 2),
        (2, 1), // candidate 3 held, slot 2 has no old id: next candidate 1
        (0, 2),
    ];
    assert_eq!(ids, expected);
}

#[test]
fn ids_held_at_once_are_distinct_and_in_range() {
    for seed in 0..20u64 {
        let c = SeqConfig {
            seed,
            ..cfg(5, 6, 4, 50.0)
        };
        let mut seq = Sequences::new(&c, 6, &[]).unwrap();
        let mut pick = SplitMix64::new(seed);
        for _ in 0..2_000 {
            let slot = pick.below(6);
            let f = seq.next(slot);
            assert!((5..11).contains(&f.id), "seed {seed}: id {}", f.id);
            let held: Vec<u64> = seq
                .slots
                .iter()
                .map(|s| s.id)
                .filter(|&id| id != 0)
                .collect();
            let mut unique = held.clone();
            unique.sort_unstable();
            unique.dedup();
            assert_eq!(unique.len(), held.len(), "seed {seed}: {held:?}");
        }
    }
}

#[test]
fn configuration_errors_name_the_flag_and_numbers() {
    let table: &[(SeqConfig, usize, &[usize], &[&str])] = &[
        (
            cfg(1, 3, 20, 20.0),
            4,
            &[],
            &["--sequence-id-range", " 3 ", " 4 "],
        ),
        (cfg(1, 0, 20, 20.0), 1, &[], &["--sequence-id-range", " 0 "]),
        (
            cfg(1, 10, 20, -1.0),
            1,
            &[],
            &["--sequence-length-variation", "-1"],
        ),
        (
            cfg(1, 10, 20, f64::NAN),
            1,
            &[],
            &["--sequence-length-variation"],
        ),
        (cfg(1, 10, 20, 20.0), 1, &[3, 0], &["stream 1", "no steps"]),
    ];
    for (c, slots, streams, words) in table {
        let err = Sequences::new(c, *slots, streams).unwrap_err();
        assert_eq!(err.exit_code(), 99);
        for w in *words {
            assert!(err.msg.contains(w), "{:?}: missing {w:?}", err.msg);
        }
    }
    // A range exactly as large as the slot count is fine.
    assert!(Sequences::new(&cfg(1, 4, 20, 20.0), 4, &[]).is_ok());
}

#[test]
fn start_zero_becomes_one_with_a_warning() {
    let mut seq = Sequences::new(&cfg(0, 5, 1, 0.0), 1, &[]).unwrap();
    assert!(seq.warning().unwrap().contains("--sequence-id-range"));
    assert_eq!(seq.next(0).id, 1);
    assert!(Sequences::new(&cfg(7, 5, 1, 0.0), 1, &[])
        .unwrap()
        .warning()
        .is_none());
    assert_eq!(coerce_id_start(9), (9, None));
}

#[test]
fn unbounded_range_near_the_top_of_u64_stays_representable() {
    let start = u64::MAX - 1;
    let mut seq = Sequences::new(&cfg(start, UNBOUNDED_ID_RANGE, 1, 0.0), 2, &[]).unwrap();
    let ids: Vec<u64> = (0..4).map(|_| seq.next(0).id).collect();
    assert_eq!(ids, [u64::MAX - 1, u64::MAX, u64::MAX - 1, u64::MAX]);
}

#[test]
fn json_streams_set_the_length_unless_the_flag_was_given() {
    let steps = [3usize, 5];
    let mut seq = Sequences::new(&cfg(1, 100, 20, 20.0), 1, &steps).unwrap();
    for _ in 0..20 {
        let first = seq.next(0);
        assert!(first.start && first.step == 0);
        let len = steps[first.stream];
        let mut got = vec![first.step];
        for _ in 1..len {
            got.push(seq.next(0).step);
        }
        assert_eq!(got, (0..len).collect::<Vec<_>>());
        assert!(seq.live().next().is_none(), "sequence of {len} ended");
    }
    // With --sequence-length 7 (no variation) the steps wrap around the stream.
    let c = SeqConfig {
        length_given: true,
        ..cfg(1, 100, 7, 0.0)
    };
    let mut seq = Sequences::new(&c, 1, &[3]).unwrap();
    let fields: Vec<(usize, bool)> = (0..7)
        .map(|_| seq.next(0))
        .map(|f| (f.step, f.end))
        .collect();
    let expected = [0, 1, 2, 0, 1, 2, 0].map(|s| (s, false));
    assert_eq!(fields[..6], expected[..6]);
    assert_eq!(fields[6], (0, true));
}

#[test]
fn streams_are_chosen_uniformly() {
    let mut seq = Sequences::new(&cfg(1, 100, 1, 0.0), 1, &[1, 1, 1]).unwrap();
    let mut counts = [0u32; 3];
    for _ in 0..3_000 {
        counts[seq.next(0).stream] += 1;
    }
    assert!(
        counts.iter().all(|&c| (850..1150).contains(&c)),
        "{counts:?}"
    );
}

fn lengths(base: u64, pct: f64, seed: u64, n: usize) -> Vec<u64> {
    let c = SeqConfig {
        seed,
        ..cfg(1, UNBOUNDED_ID_RANGE, base, pct)
    };
    let mut seq = Sequences::new(&c, 1, &[]).unwrap();
    (0..n)
        .map(|_| {
            let mut len = 1;
            while !seq.next(0).end {
                len += 1;
            }
            len
        })
        .collect()
}

#[test]
fn lengths_stay_within_the_variation_and_spread_over_it() {
    let table = [
        (100u64, 20.0, 80u64, 120u64),
        (20, 20.0, 17, 23),
        (10, 0.0, 10, 10),
    ];
    for (base, pct, lo, hi) in table {
        let got = lengths(base, pct, 42, 4_000);
        let (min, max) = (*got.iter().min().unwrap(), *got.iter().max().unwrap());
        assert!(min >= lo && max <= hi, "{base}±{pct}%: {min}..{max}");
        // The whole band is used, and it is centred on the base length.
        assert!(
            min <= lo + 1 && max + 1 >= hi,
            "{base}±{pct}%: {min}..{max}"
        );
        let mean = got.iter().sum::<u64>() as f64 / got.len() as f64;
        assert!(
            (mean - base as f64).abs() < 0.02 * base as f64,
            "mean {mean}"
        );
    }
    // Large variation never gives an empty sequence.
    assert!(lengths(2, 400.0, 7, 1_000).iter().all(|&l| l >= 1));
}

#[test]
fn same_seed_same_run_other_seed_other_run() {
    assert_eq!(lengths(50, 30.0, 1, 200), lengths(50, 30.0, 1, 200));
    assert_ne!(lengths(50, 30.0, 1, 200), lengths(50, 30.0, 2, 200));
}

#[test]
fn finish_closes_live_slots_with_the_last_step() {
    let c = SeqConfig {
        length_given: true,
        ..cfg(1, 100, 5, 0.0)
    };
    let mut seq = Sequences::new(&c, 3, &[4]).unwrap();
    seq.next(0);
    seq.next(0);
    seq.next(2);
    assert_eq!(seq.live().collect::<Vec<_>>(), [0, 2]);
    let closing = seq.finish(0).unwrap();
    let expected = SeqFields {
        id: 1,
        start: false,
        end: true,
        stream: 0,
        step: 0, // (length 5 - 1) % 4 steps
    };
    assert_eq!(closing, expected);
    assert_eq!(seq.live().collect::<Vec<_>>(), [2]);
    assert_eq!(seq.finish(0), None, "already closed");
    assert_eq!(seq.finish(1), None, "never started");
    assert_eq!(seq.finish(9), None, "no such slot");
    // The slot starts a new sequence afterwards.
    assert!(seq.next(0).start);
}

#[test]
fn pick_slot_deals_round_robin_and_waits_for_a_busy_slot() {
    let c = cfg(1, 100, 5, 0.0);
    let mut seq = Sequences::new(&c, 4, &[]).unwrap();
    let mut order = Vec::new();
    for _ in 0..10 {
        let slot = seq.pick_slot(&[]).unwrap();
        seq.advance_deal();
        order.push(slot);
    }
    assert_eq!(order, [0, 1, 2, 3, 0, 1, 2, 3, 0, 1]);
    // Slot 2 is next; while it is busy the deal holds (no other slot is picked) and
    // picking does not move it on.
    let busy = [false, false, true, false];
    assert_eq!(seq.pick_slot(&busy), None);
    assert_eq!(seq.pick_slot(&busy), None);
    assert_eq!(seq.pick_slot(&[false, true, false, true]), Some(2));
    assert_eq!(seq.pick_slot(&[true; 4]), None);
    let empty = Sequences::new(&cfg(1, 100, 5, 0.0), 0, &[]).unwrap();
    assert_eq!(empty.pick_slot(&[]), None);
}

#[test]
fn split_gives_workers_disjoint_blocks_of_ids() {
    let table: &[(u64, &[usize])] = &[(8, &[2, 2, 2, 2]), (6, &[2, 2, 1, 1]), (7, &[3, 0, 4])];
    for &(range, slots) in table {
        let mut workers = Sequences::split(&cfg(10, range, 1, 0.0), slots, &[]).unwrap();
        let mut all = Vec::new();
        for (w, seq) in workers.iter_mut().enumerate() {
            if seq.slots() == 0 {
                continue;
            }
            // One-request sequences on one slot walk the whole block.
            let mut ids: Vec<u64> = (0..range).map(|_| seq.next(0).id).collect();
            ids.sort_unstable();
            ids.dedup();
            assert!(ids.len() >= slots[w], "range {range} worker {w}: {ids:?}");
            all.extend(ids);
        }
        let n = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), n, "range {range}: blocks overlap");
        assert!(
            all.iter().all(|id| (10..10 + range).contains(id)),
            "{all:?}"
        );
    }
    let err = Sequences::split(&cfg(1, 5, 1, 0.0), &[3, 3], &[]).unwrap_err();
    assert!(
        err.msg.contains("5") && err.msg.contains("6"),
        "{}",
        err.msg
    );
}
