use super::*;

#[test]
fn the_virtual_history_of_aiperfs_example() {
    // AIPerf's example: 15 users, 20 turns. User 1 is done before the start and a new
    // user (all 20 turns) starts first; the others start one stagger apart with the
    // turns they have left.
    let first = first_users(15, 20);
    assert_eq!(first.len(), 15);
    assert_eq!(first.last(), Some(&(0, None)));
    let by_order: std::collections::BTreeMap<u64, usize> = first
        .iter()
        .filter_map(|(o, t)| t.map(|t| (*o, t)))
        .collect();
    // Orders 1..=14 each once.
    assert_eq!(
        by_order.keys().copied().collect::<Vec<_>>(),
        (1..15).collect::<Vec<_>>()
    );
    // The table's start order: 6, 11, 16, 2, 7, 12, 17, 3, 8, 13, 18, 4, 9, 14 turns.
    assert_eq!(
        by_order.values().copied().collect::<Vec<_>>(),
        vec![6, 11, 16, 2, 7, 12, 17, 3, 8, 13, 18, 4, 9, 14]
    );
}

#[test]
fn shared_factors_spread_the_places_with_a_coprime_step() {
    // 4 users, 3 turns: lifetime 2 shares a factor with 4.
    let first = first_users(4, 3);
    let mut orders: Vec<u64> = first.iter().map(|(o, _)| *o).collect();
    orders.sort_unstable();
    assert_eq!(orders, vec![0, 1, 2, 3], "each place once");
    // One user: only the new one (the old one is done).
    assert_eq!(first_users(1, 5), vec![(0, None)]);
}

#[test]
fn users_start_a_stagger_apart_and_are_replaced_when_their_last_turn_is_due() {
    // 2 users at 4 per second: turns 0.5 s apart per user, starts 0.25 s apart.
    let mut u = Users::new(4.0, 2, 3.0);
    assert_eq!(u.gap_ns, 500_000_000);
    assert_eq!(u.next_start_ns(), Some(0), "before the start");
    u.start(1_000);
    assert_eq!(u.pop_due(1_000), Some((1_000, None)), "the new user first");
    u.started(1_000, 3);
    assert_eq!(u.pop_due(1_000), None);
    assert_eq!(u.next_start_ns(), Some(250_001_000));
    let (at, turns) = u.pop_due(250_001_000).unwrap();
    assert_eq!((at, turns), (250_001_000, Some(1)));
    u.started(at, 1);
    // Its replacement: one gap after its only turn.
    assert_eq!(u.next_start_ns(), Some(750_001_000));
    // The new user's: three gaps after its first turn.
    u.pop_due(750_001_000).unwrap();
    assert_eq!(u.next_start_ns(), Some(1_500_001_000));
    // A later turn: a gap after the previous one was due, or at the (late) answer.
    assert_eq!(u.next_turn_ns(1_000, 2_000), 500_001_000);
    assert_eq!(u.next_turn_ns(1_000, 900_000_000), 900_000_000);
}

#[test]
fn ticks_follow_the_schedule_and_a_late_take_moves_the_clock() {
    let mut t = Ticks::new(&Schedule::Constant { rate: 10.0 });
    assert_eq!(t.next_ns(), Some(0), "before the start");
    t.start(1_000);
    assert_eq!(t.next_ns(), Some(100_001_000));
    t.skip();
    assert_eq!(t.next_ns(), Some(200_001_000));
    t.take(200_001_000);
    assert_eq!(t.next_ns(), Some(300_001_000));
    // Taken 50 ms late: the next tick is a whole gap after the take.
    t.take(350_001_000);
    assert_eq!(t.next_ns(), Some(450_001_000));
    let mut fixed = Ticks::new(&Schedule::Fixed(vec![5]));
    fixed.start(0);
    fixed.take(5);
    assert_eq!(fixed.next_ns(), None, "no tick left");
}
