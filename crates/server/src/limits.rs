//! What the server allows one client: request sizes, connections, how long a request may take
//! to arrive and a connection may stay idle, HTTP/2 streams. Each limit is a flag of `inferperf
//! serve`; a client past one gets a refusal naming it (HTTP 408/413/431/503, gRPC
//! RESOURCE_EXHAUSTED or DEADLINE_EXCEEDED) or its connection closed, and never grows the
//! server's memory past it.

use std::time::Duration;

/// Default of [`Limits::max_request_bytes`]: 64 MiB.
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 64 << 20;
/// Default of [`Limits::max_connections`]: room for a client holding 10,000 streams (a
/// connection that has sent a request keeps 32 KiB of buffers, so this bounds them near
/// 512 MiB; one that has sent nothing holds none).
pub const DEFAULT_MAX_CONNECTIONS: usize = 16384;
/// Default of [`Limits::read_timeout`].
pub const DEFAULT_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// Default of [`Limits::idle_timeout`].
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Default of [`Limits::request_read_timeout`]: a request of the default 64 MiB limit must
/// arrive at about 1 MiB/s or faster.
pub const DEFAULT_REQUEST_READ_TIMEOUT: Duration = Duration::from_secs(60);
/// Default of [`Limits::max_streams`].
pub const DEFAULT_MAX_STREAMS: u32 = 1024;

/// The server's limits on its clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest HTTP request body (after chunked decoding) and largest gRPC request message
    /// (after decompression), bytes; also the most a gRPC call's messages may add up to where
    /// the server keeps them all (the echo method).
    pub max_request_bytes: usize,
    /// Connections open at once, HTTP and gRPC together. One more takes the place of an idle
    /// connection (see `places`); when every connection is busy it is closed at accept (HTTP
    /// with a 503 first).
    pub max_connections: usize,
    /// A new connection that sends nothing for this long after it is accepted is closed (gRPC:
    /// TLS, the HTTP/2 preface and a call's HEADERS must all come by then). An HTTP request
    /// head must be complete this long after its first byte, and a body must bring a byte at
    /// least this often; otherwise the answer is 408 and the connection closes.
    pub read_timeout: Duration,
    /// A connection with no request in progress (HTTP: between requests; gRPC: no call open)
    /// is closed after this long (gRPC with GOAWAY first).
    pub idle_timeout: Duration,
    /// A whole request must arrive this long after its first byte (HTTP: head and body, else
    /// 408; gRPC: a unary call's request, or one message of a stream, else DEADLINE_EXCEEDED),
    /// however steadily it trickles in.
    pub request_read_timeout: Duration,
    /// Streams one HTTP/2 connection may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS).
    pub max_streams: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_request_bytes: DEFAULT_MAX_REQUEST_BYTES,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            read_timeout: DEFAULT_READ_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            request_read_timeout: DEFAULT_REQUEST_READ_TIMEOUT,
            max_streams: DEFAULT_MAX_STREAMS,
        }
    }
}
