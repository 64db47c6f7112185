//! When the turns of open-loop conversation runs may go, as AIPerf times them:
//!
//! - [`Ticks`], for `--request-rate`: one clock of send ticks (the arrival schedule) for
//!   the whole run. Each tick sends one turn: the earliest waiting later turn of a running
//!   conversation (answered, its pause over), else the first turn of a new conversation if
//!   a slot is free. A tick nothing is ready for passes unused. A tick taken late moves the
//!   clock to the time it was taken, so a late run never sends a burst to catch up.
//! - [`Users`], for `--user-centric-rate R --num-users N`: each user (a conversation) sends
//!   its turns `N / R` seconds apart (`max(answer, previous send + gap)` when an answer is
//!   late), and the users' first turns are `1 / R` apart. The run starts in a steady state:
//!   the first `N` users are given the turns left of conversations already under way (a
//!   "virtual history"), and each user is replaced by a new one when its last turn is due.
//!
//! Both hold clock ns, with the run's origin set by the first call (the run's start).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::engine::pace::{deal, Schedule, WorkerSchedule};

const NS_PER_S: f64 = 1e9;

/// The send ticks of a `--request-rate` run.
#[derive(Debug, Clone)]
pub struct Ticks {
    schedule: WorkerSchedule,
    origin_ns: Option<u64>,
    /// How far late takes have moved the clock (ns).
    shift_ns: u64,
}

impl Ticks {
    pub fn new(schedule: &Schedule) -> Ticks {
        // One worker: the whole schedule.
        let schedule = deal(schedule, 1).swap_remove(0);
        Ticks {
            schedule,
            origin_ns: None,
            shift_ns: 0,
        }
    }

    /// Starts the clock at `now_ns` if it has not started.
    pub fn start(&mut self, now_ns: u64) {
        self.origin_ns.get_or_insert(now_ns);
    }

    /// Clock ns of the next tick (`Some(0)` before the clock starts); `None`: no tick left.
    pub fn next_ns(&self) -> Option<u64> {
        let Some(origin) = self.origin_ns else {
            return Some(0);
        };
        let at = self.schedule.peek()?;
        Some(origin.saturating_add(self.shift_ns).saturating_add(at))
    }

    /// The next tick passes unused.
    pub fn skip(&mut self) {
        self.schedule.advance();
    }

    /// The next tick sends at `now_ns`; when that is after the tick, the ticks after it move
    /// by the lateness.
    pub fn take(&mut self, now_ns: u64) {
        if let Some(at) = self.next_ns() {
            self.shift_ns += now_ns.saturating_sub(at);
        }
        self.schedule.advance();
    }
}

/// A user waiting for its first turn: when it may start, its turns at most (`None`: its
/// whole conversation), and its place in line (ties go in order).
type Start = Reverse<(u64, u64, Option<usize>)>;

/// The users of a `--user-centric-rate` run.
#[derive(Debug, Clone)]
pub struct Users {
    /// Between two turns of one user (ns): users / rate.
    pub gap_ns: u64,
    /// The first users: offsets (ns from the origin) and turns at most.
    first: Vec<(u64, Option<usize>)>,
    starts: BinaryHeap<Start>,
    origin_ns: Option<u64>,
    queued: u64,
}

impl Users {
    /// `users` users sending `rate` turns per second in all, for conversations of
    /// `mean_turns` turns on average.
    pub fn new(rate: f64, users: u64, mean_turns: f64) -> Users {
        let gap_ns = (users as f64 / rate * NS_PER_S).round() as u64;
        let stagger_ns = (NS_PER_S / rate).round() as u64;
        let first = first_users(users, mean_turns.round().max(1.0) as u64)
            .into_iter()
            .map(|(order, turns)| (order * stagger_ns, turns))
            .collect();
        Users {
            gap_ns,
            first,
            starts: BinaryHeap::new(),
            origin_ns: None,
            queued: 0,
        }
    }

    /// Starts the clock at `now_ns` if it has not started: the first users are queued.
    pub fn start(&mut self, now_ns: u64) {
        if self.origin_ns.is_some() {
            return;
        }
        self.origin_ns = Some(now_ns);
        for (offset, turns) in std::mem::take(&mut self.first) {
            self.queue(now_ns.saturating_add(offset), turns);
        }
    }

    fn queue(&mut self, at_ns: u64, turns: Option<usize>) {
        self.starts.push(Reverse((at_ns, self.queued, turns)));
        self.queued += 1;
    }

    /// Clock ns at which the next user may start (`Some(0)` before the clock starts).
    pub fn next_start_ns(&self) -> Option<u64> {
        if self.origin_ns.is_none() {
            return Some(0);
        }
        self.starts.peek().map(|Reverse((at, _, _))| *at)
    }

    /// The next user, if it may start at `now_ns`: when it was due and its turns at most.
    pub fn pop_due(&mut self, now_ns: u64) -> Option<(u64, Option<usize>)> {
        let Reverse((at, _, turns)) = *self.starts.peek()?;
        if at > now_ns {
            return None;
        }
        self.starts.pop();
        Some((at, turns))
    }

    /// A user due at `at_ns` started with `turns` turns: its replacement is due when its
    /// last turn is (`turns` gaps later).
    pub fn started(&mut self, at_ns: u64, turns: usize) {
        let at = at_ns.saturating_add(self.gap_ns.saturating_mul(turns as u64));
        self.queue(at, None);
    }

    /// When a user's next turn is due: a gap after its previous one was due, or at once
    /// when the answer came later than that.
    pub fn next_turn_ns(&self, previous_due_ns: u64, answered_ns: u64) -> u64 {
        previous_due_ns.saturating_add(self.gap_ns).max(answered_ns)
    }
}

/// AIPerf's virtual history for `users` users of `turns` turns: for each first user, its
/// place in the start order (0 first, one start gap apart) and its turns left (`None`:
/// a new user, its whole conversation). User i has been under way for `(users - i) *
/// lifetime / users` of the `lifetime = turns - 1` gaps of a conversation; the oldest has
/// none left and is replaced by a new user who starts first.
pub fn first_users(users: u64, turns: u64) -> Vec<(u64, Option<usize>)> {
    let lifetime = turns.saturating_sub(1).max(1);
    let n = users.max(1);
    // Places repeat when n and the lifetime share a factor: then a step prime to n
    // spreads them instead.
    let step = (gcd(n, lifetime) > 1).then(|| (2..n).find(|s| gcd(n, *s) == 1).unwrap_or(1));
    let mut out = Vec::with_capacity(n as usize);
    for i in 0..n {
        let age = (n - i) * lifetime;
        let left = lifetime.saturating_sub(age / n);
        if left == 0 {
            continue;
        }
        let place = match step {
            Some(s) => (i * s) % n,
            None => age % n,
        };
        out.push((n - place, Some(left as usize)));
    }
    out.push((0, None));
    out
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

#[cfg(test)]
#[path = "conversation_timing_tests.rs"]
mod tests;
