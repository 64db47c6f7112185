//! HTTP phase timings of one request, taken by the HTTP/1.1 engine's event loop on the same
//! clock as the request record (ns since the Unix epoch): when the request was due and when
//! it got a connection, the connection's TCP connect and TLS handshake (only for the first
//! request a connection carries), the first and last request byte written, the first and
//! last response byte read, and the bytes and read/write calls of the exchange.
//!
//! The phases follow k6's names as AIPerf 0.13 exports them (`http_req_blocked`, ...):
//! [`HttpTrace::phases`] turns the times into those durations.
//!
//! A trace is a fixed-size value: the engine fills one per connection and, only when
//! tracing is on (`profile` over HTTP/1.1), stores it beside the response body in the
//! worker's body buffer ([`HttpTrace::to_bytes`]), so a run without tracing neither
//! allocates nor copies anything for it.

/// The times (ns since the Unix epoch; 0: did not happen) and counts of one request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HttpTrace {
    /// When the request was due: its scheduled send time (open loop) or when its load slot
    /// took it (closed loop and sessions).
    pub due_ns: u64,
    /// The connection's TCP connect started (0 when the connection carried a request
    /// before: it was reused).
    pub connect_start_ns: u64,
    /// The TCP connect completed.
    pub connect_end_ns: u64,
    /// TLS only: the handshake started (right after the TCP connect) and completed.
    pub tls_start_ns: u64,
    pub tls_end_ns: u64,
    /// Just before the first request byte was written, and after the last one was.
    pub send_start_ns: u64,
    pub send_end_ns: u64,
    /// The first and the last response byte were read (the kernel's receive stamps when
    /// the engine uses them).
    pub recv_start_ns: u64,
    pub recv_end_ns: u64,
    /// Request bytes written (head and body) and response bytes read (head and body,
    /// interim responses included); plaintext bytes under TLS.
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// Write and read calls that moved at least one byte.
    pub writes: u32,
    pub reads: u32,
    /// The connection had carried a request before this one.
    pub reused: bool,
}

/// Bytes of [`HttpTrace::to_bytes`].
pub const TRACE_BYTES: usize = 13 * 8;

/// k6's phases of one request (ns, bytes, counts), as AIPerf 0.13 defines them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HttpPhases {
    /// Waiting for a connection: from when the request was due to when a connection was
    /// taken for it or began to be opened for it.
    pub blocked_ns: u64,
    /// Always 0: the server address is resolved once, before the run.
    pub dns_lookup_ns: u64,
    /// TCP connect and TLS handshake of a new connection; 0 when reused.
    pub connecting_ns: u64,
    /// First to last request byte written.
    pub sending_ns: u64,
    /// Last request byte written to first response byte read.
    pub waiting_ns: u64,
    /// First to last response byte read (0 when one read brought the whole response).
    pub receiving_ns: u64,
    /// sending + waiting + receiving.
    pub duration_ns: u64,
    /// blocked + dns_lookup + connecting.
    pub connection_overhead_ns: u64,
    /// blocked + dns_lookup + connecting + sending + waiting + receiving.
    pub total_ns: u64,
    pub reused: bool,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub chunks_sent: u64,
    pub chunks_received: u64,
}

impl HttpTrace {
    /// The trace as little-endian words (see `from_bytes`).
    pub fn to_bytes(&self) -> [u8; TRACE_BYTES] {
        let words = [
            self.due_ns,
            self.connect_start_ns,
            self.connect_end_ns,
            self.tls_start_ns,
            self.tls_end_ns,
            self.send_start_ns,
            self.send_end_ns,
            self.recv_start_ns,
            self.recv_end_ns,
            self.bytes_sent,
            self.bytes_received,
            u64::from(self.writes) | u64::from(self.reads) << 32,
            u64::from(self.reused),
        ];
        let mut out = [0u8; TRACE_BYTES];
        for (chunk, w) in out.chunks_exact_mut(8).zip(words) {
            chunk.copy_from_slice(&w.to_le_bytes());
        }
        out
    }

    /// The trace `to_bytes` wrote; `None` when `bytes` is not `TRACE_BYTES` long.
    pub fn from_bytes(bytes: &[u8]) -> Option<HttpTrace> {
        if bytes.len() != TRACE_BYTES {
            return None;
        }
        let mut w = [0u64; TRACE_BYTES / 8];
        for (v, chunk) in w.iter_mut().zip(bytes.chunks_exact(8)) {
            *v = u64::from_le_bytes(chunk.try_into().ok()?);
        }
        Some(HttpTrace {
            due_ns: w[0],
            connect_start_ns: w[1],
            connect_end_ns: w[2],
            tls_start_ns: w[3],
            tls_end_ns: w[4],
            send_start_ns: w[5],
            send_end_ns: w[6],
            recv_start_ns: w[7],
            recv_end_ns: w[8],
            bytes_sent: w[9],
            bytes_received: w[10],
            writes: w[11] as u32,
            reads: (w[11] >> 32) as u32,
            reused: w[12] != 0,
        })
    }

    /// The phases, or `None` when the exchange did not complete (nothing was read).
    pub fn phases(&self) -> Option<HttpPhases> {
        if self.send_start_ns == 0 || self.recv_start_ns == 0 || self.recv_end_ns == 0 {
            return None;
        }
        let send_end = self.send_end_ns.max(self.send_start_ns);
        let recv_start = self.recv_start_ns.max(send_end);
        let recv_end = self.recv_end_ns.max(recv_start);
        let sending_ns = send_end - self.send_start_ns;
        let waiting_ns = recv_start - send_end;
        let receiving_ns = if self.reads <= 1 {
            0
        } else {
            recv_end - recv_start
        };
        let fresh = !self.reused && self.connect_start_ns != 0;
        let connecting_ns = if fresh {
            self.connected_ns().saturating_sub(self.connect_start_ns)
        } else {
            0
        };
        // The wait for a connection ends when one is taken, or when one starts being opened
        // for the request (its connect time is not counted twice).
        let got_conn = if fresh && self.connect_start_ns > self.due_ns {
            self.connect_start_ns.min(self.send_start_ns)
        } else {
            self.send_start_ns
        };
        let blocked_ns = if self.due_ns == 0 {
            0
        } else {
            got_conn.saturating_sub(self.due_ns)
        };
        let dns_lookup_ns = 0;
        let connection_overhead_ns = blocked_ns + dns_lookup_ns + connecting_ns;
        let duration_ns = sending_ns + waiting_ns + receiving_ns;
        Some(HttpPhases {
            blocked_ns,
            dns_lookup_ns,
            connecting_ns,
            sending_ns,
            waiting_ns,
            receiving_ns,
            duration_ns,
            connection_overhead_ns,
            total_ns: connection_overhead_ns + duration_ns,
            reused: self.reused,
            bytes_sent: self.bytes_sent,
            bytes_received: self.bytes_received,
            chunks_sent: u64::from(self.writes),
            chunks_received: u64::from(self.reads),
        })
    }

    /// When the connection was ready for requests: the TLS handshake's end, else the TCP
    /// connect's.
    pub fn connected_ns(&self) -> u64 {
        if self.tls_end_ns != 0 {
            self.tls_end_ns
        } else {
            self.connect_end_ns
        }
    }
}

#[cfg(test)]
#[path = "http_trace_tests.rs"]
mod tests;
