//! Linux timerfds, for waits with ns resolution: mio rounds its poll timeout up to whole
//! milliseconds (epoll_wait takes ms) and tokio's timer wheel works in milliseconds too, which
//! would make a 500 µs wait last about 1 ms. [`DeadlineTimer`] is registered with mio (the
//! reference server's response deadlines, the load workers' send schedule); [`one_shot`] is a
//! bare armed fd for other reactors (the gRPC server's tokio runtime).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

use mio::unix::SourceFd;
use mio::{Interest, Registry, Token};

#[derive(Debug)]
pub struct DeadlineTimer {
    fd: OwnedFd,
}

/// A new, disarmed, non-blocking CLOCK_MONOTONIC timerfd.
fn create() -> io::Result<OwnedFd> {
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
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

/// Arms `fd` to fire once, `after` from now (at least 1 ns: a zero value would disarm it).
fn arm_fd(fd: &OwnedFd, after: Duration) -> io::Result<()> {
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
    // SAFETY: the fd is owned here and open; `spec` is a valid itimerspec; old value not wanted.
    let rc = unsafe { libc::timerfd_settime(fd.as_raw_fd(), 0, &spec, std::ptr::null_mut()) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A timerfd armed to fire once, `after` from now; it turns readable at expiry.
pub fn one_shot(after: Duration) -> io::Result<OwnedFd> {
    let fd = create()?;
    arm_fd(&fd, after)?;
    Ok(fd)
}

impl DeadlineTimer {
    pub fn new(registry: &Registry, token: Token) -> io::Result<DeadlineTimer> {
        let fd = create()?;
        registry.register(&mut SourceFd(&fd.as_raw_fd()), token, Interest::READABLE)?;
        Ok(DeadlineTimer { fd })
    }

    /// Fires once, `after` from now (at least 1 ns).
    pub fn arm(&self, after: Duration) -> io::Result<()> {
        arm_fd(&self.fd, after)
    }

    /// Consumes the expiry count so the next expiry produces a new readiness edge.
    pub fn drain(&self) {
        let mut count = [0u8; 8];
        // SAFETY: reading 8 bytes into an 8-byte buffer from this timer's own non-blocking fd; a
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
