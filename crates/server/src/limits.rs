//! What the server allows one client: request sizes, connections, how long a request may take
//! to arrive, HTTP/2 streams. Each limit is a flag of `inferperf serve`; a client past one gets
//! a refusal naming it (HTTP 408/413/431/503, gRPC RESOURCE_EXHAUSTED) and never grows the
//! server's memory past it.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

/// Default of [`Limits::max_request_bytes`]: 64 MiB.
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 64 << 20;
/// Default of [`Limits::max_connections`]: room for a client holding 10,000 streams (each
/// connection's buffers start at 32 KiB, so this bounds them near 512 MiB).
pub const DEFAULT_MAX_CONNECTIONS: usize = 16384;
/// Default of [`Limits::read_timeout`].
pub const DEFAULT_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// Default of [`Limits::max_streams`].
pub const DEFAULT_MAX_STREAMS: u32 = 1024;

/// The server's limits on its clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest HTTP request body (after chunked decoding) and largest gRPC request message
    /// (after decompression), bytes; also the most a gRPC call's messages may add up to where
    /// the server keeps them all (the echo method).
    pub max_request_bytes: usize,
    /// Connections open at once, HTTP and gRPC together; one more is closed at accept (HTTP
    /// with a 503 first).
    pub max_connections: usize,
    /// An HTTP request head must be complete this long after its first byte, and a body must
    /// bring a byte at least this often; otherwise the answer is 408 and the connection closes.
    pub read_timeout: Duration,
    /// Streams one HTTP/2 connection may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS).
    pub max_streams: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_request_bytes: DEFAULT_MAX_REQUEST_BYTES,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            read_timeout: DEFAULT_READ_TIMEOUT,
            max_streams: DEFAULT_MAX_STREAMS,
        }
    }
}

/// Counts open connections against [`Limits::max_connections`] (only at accept and close),
/// and every connection accepted or refused since start.
#[derive(Debug, Default)]
pub struct ConnCount {
    open: AtomicUsize,
    accepted: AtomicU64,
    refused: AtomicU64,
}

impl ConnCount {
    /// Takes a place for a new connection; false when `max` are open already.
    pub fn try_open(&self, max: usize) -> bool {
        let ok = self
            .open
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .is_ok();
        let total = if ok { &self.accepted } else { &self.refused };
        total.fetch_add(1, Ordering::Relaxed);
        ok
    }

    /// Connections taken since start: (accepted, refused over the limit).
    pub fn totals(&self) -> (u64, u64) {
        (
            self.accepted.load(Ordering::Relaxed),
            self.refused.load(Ordering::Relaxed),
        )
    }

    /// Gives back a place taken by [`ConnCount::try_open`].
    pub fn close(&self) {
        let _ = self
            .open
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.open.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conn_count_stops_at_max() {
        let count = ConnCount::default();
        assert!(count.try_open(2) && count.try_open(2));
        assert!(!count.try_open(2));
        assert_eq!(count.open(), 2);
        count.close();
        assert!(count.try_open(2));
        assert_eq!(count.totals(), (3, 1), "three taken, one refused");
        count.close();
        count.close();
        count.close();
        assert_eq!(count.open(), 0, "never below zero");
    }
}
