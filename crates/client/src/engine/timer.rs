//! The open-loop send timer of a worker: a [`DeadlineTimer`] (ns resolution) armed for the
//! next due send, with the thread's timer slack lowered so wake-ups are not late.

use std::io;
use std::time::Duration;

use mio::{Registry, Token};

use crate::timerfd::DeadlineTimer;

pub struct Timer {
    fd: DeadlineTimer,
    /// Clock ns the timer is armed for (0 = disarmed), to skip re-arming for the same time.
    armed_for: u64,
}

impl Timer {
    /// A timer that raises a readable event with `token` when it fires. Also lowers the
    /// calling thread's timer slack to 1 ns: the default 50 us would make every wake-up late.
    pub fn new(registry: &Registry, token: Token) -> io::Result<Timer> {
        // SAFETY: prctl only changes this thread's timer slack.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
        Ok(Timer {
            fd: DeadlineTimer::new(registry, token)?,
            armed_for: 0,
        })
    }

    /// Fires once, `delay_ns` from now; `at_ns` names that moment so that asking again for
    /// the same one costs nothing.
    pub fn arm(&mut self, at_ns: u64, delay_ns: u64) {
        if self.armed_for != at_ns && self.fd.arm(Duration::from_nanos(delay_ns)).is_ok() {
            self.armed_for = at_ns;
        }
    }

    /// Called on the timer's event: consumes the expiry so the next one raises a new edge.
    pub fn fired(&mut self) {
        self.fd.drain();
        self.armed_for = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mio::{Events, Poll};
    use std::time::Instant;

    #[test]
    fn fires_once_after_the_delay() {
        let mut poll = Poll::new().unwrap();
        let mut timer = Timer::new(poll.registry(), Token(7)).unwrap();
        let mut events = Events::with_capacity(4);
        let start = Instant::now();
        timer.arm(1, 3_000_000);
        timer.arm(1, 50_000_000); // same moment: ignored
        poll.poll(&mut events, Some(Duration::from_secs(2)))
            .unwrap();
        let waited = start.elapsed();
        assert!(events.iter().any(|e| e.token() == Token(7)));
        assert!(waited >= Duration::from_millis(3), "{waited:?}");
        assert!(waited < Duration::from_millis(40), "{waited:?}");
        timer.fired();
        // Consumed: no second event without re-arming.
        poll.poll(&mut events, Some(Duration::from_millis(20)))
            .unwrap();
        assert!(events.is_empty());
    }
}
