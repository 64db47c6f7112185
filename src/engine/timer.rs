//! A one-shot timer for a worker's event loop with nanosecond resolution (a `timerfd`):
//! `epoll_wait` timeouts are whole milliseconds, far too coarse for a send schedule.

use std::io;
use std::os::fd::RawFd;

use mio::unix::SourceFd;
use mio::{Interest, Registry, Token};

pub struct Timer {
    fd: RawFd,
    /// Clock ns the timer is armed for (0 = disarmed), to skip re-arming for the same time.
    armed_for: u64,
}

impl Timer {
    /// A timer that raises a readable event with `token` when it fires. Also lowers the
    /// calling thread's timer slack to 1 ns: the default 50 us would make every wake-up late.
    pub fn new(registry: &Registry, token: Token) -> io::Result<Timer> {
        // SAFETY: plain syscalls on values we own; the fd is checked before use.
        let fd = unsafe {
            libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong);
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let timer = Timer { fd, armed_for: 0 };
        registry.register(&mut SourceFd(&timer.fd), token, Interest::READABLE)?;
        Ok(timer)
    }

    /// Fires once, `delay_ns` from now (at least 1 ns); `at_ns` names that moment so that
    /// asking again for the same one costs nothing.
    pub fn arm(&mut self, at_ns: u64, delay_ns: u64) {
        if self.armed_for == at_ns {
            return;
        }
        let delay = delay_ns.max(1);
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: (delay / 1_000_000_000) as libc::time_t,
                tv_nsec: (delay % 1_000_000_000) as libc::c_long,
            },
        };
        // SAFETY: `spec` is a valid itimerspec; a null old-value pointer is allowed.
        let rc = unsafe { libc::timerfd_settime(self.fd, 0, &spec, std::ptr::null_mut()) };
        if rc == 0 {
            self.armed_for = at_ns;
        }
    }

    /// Called on the timer's event: consumes the expiry so the next one raises a new edge.
    pub fn fired(&mut self) {
        let mut count = [0u8; 8];
        // SAFETY: reads at most 8 bytes into our buffer; errors (EAGAIN) are ignored.
        unsafe { libc::read(self.fd, count.as_mut_ptr().cast(), count.len()) };
        self.armed_for = 0;
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        // SAFETY: we own the fd and close it once.
        unsafe { libc::close(self.fd) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mio::{Events, Poll};
    use std::time::{Duration, Instant};

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
