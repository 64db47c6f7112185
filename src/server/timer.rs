//! A Linux timerfd registered with mio, so response deadlines fire with ns resolution.
//!
//! mio rounds its poll timeout up to whole milliseconds (epoll_wait takes ms), which would make
//! a 500 µs delay last about 1 ms. The deadline heap arms this timer for its earliest entry; the
//! poll timeout still bounds the wait in case the timer could not be created.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

use mio::unix::SourceFd;
use mio::{Interest, Registry, Token};

#[derive(Debug)]
pub struct DeadlineTimer {
    fd: OwnedFd,
}

impl DeadlineTimer {
    pub fn new(registry: &Registry, token: Token) -> io::Result<DeadlineTimer> {
        // SAFETY: plain syscall with constant flags; the result is checked before use.
        let raw = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a freshly created descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        registry.register(&mut SourceFd(&fd.as_raw_fd()), token, Interest::READABLE)?;
        Ok(DeadlineTimer { fd })
    }

    /// Fires once, `after` from now (at least 1 ns: a zero value would disarm the timer).
    pub fn arm(&self, after: Duration) -> io::Result<()> {
        let after = after.max(Duration::from_nanos(1));
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: after.as_secs().min(i64::MAX as u64) as libc::time_t,
                tv_nsec: after.subsec_nanos() as libc::c_long,
            },
        };
        // SAFETY: the fd is ours and open; `spec` is a valid itimerspec; old value not wanted.
        let rc =
            unsafe { libc::timerfd_settime(self.fd.as_raw_fd(), 0, &spec, std::ptr::null_mut()) };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Consumes the expiry count so the next expiry produces a new readiness edge.
    pub fn drain(&self) {
        let mut count = [0u8; 8];
        // SAFETY: reading 8 bytes into an 8-byte buffer from our own non-blocking fd; a
        // WouldBlock result just means there was nothing to consume.
        let _ = unsafe { libc::read(self.fd.as_raw_fd(), count.as_mut_ptr().cast(), count.len()) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mio::{Events, Poll};
    use std::time::Instant;

    #[test]
    fn fires_after_sub_millisecond_delay() {
        let mut poll = Poll::new().unwrap();
        let timer = DeadlineTimer::new(poll.registry(), Token(7)).unwrap();
        let start = Instant::now();
        timer.arm(Duration::from_micros(300)).unwrap();
        let mut events = Events::with_capacity(4);
        poll.poll(&mut events, Some(Duration::from_secs(2)))
            .unwrap();
        let elapsed = start.elapsed();
        assert!(events.iter().any(|e| e.token() == Token(7)));
        assert!(elapsed >= Duration::from_micros(300), "{elapsed:?}");
        assert!(elapsed < Duration::from_millis(500), "{elapsed:?}");
        timer.drain();
    }
}
