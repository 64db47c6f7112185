//! What the engine hands to measurement: one record per finished request, grouped by window.

use super::fail::FailKind;
use super::http_trace::{HttpTrace, TRACE_BYTES};

/// One finished (or failed) request. All times are ns since the Unix epoch (see `clock`).
///
/// Client-library timing follows perf_analyzer's six timers: send = `start_ns..send_end_ns`
/// (writing the request), receive = `recv_start_ns..end_ns` (first to last response byte),
/// response wait = the rest.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RequestRecord {
    /// Taken just before the first byte of the request was written.
    pub start_ns: u64,
    /// The last request byte was handed to the kernel.
    pub send_end_ns: u64,
    /// The first response byte was read. For a streamed request (gRPC `ModelStreamInfer`):
    /// the first non-null response arrived.
    pub recv_start_ns: u64,
    /// The response was complete (last byte read). The request belongs to the window this
    /// falls in.
    pub end_ns: u64,
    /// Index of the pre-encoded input step that was sent (for the export's `request_inputs`).
    pub step: u32,
    /// false: transport error or non-2xx status; such records count as errors, not latencies.
    pub ok: bool,
    /// Response body kept for the profile export: `WindowRecords::bodies[body_off..+body_len]`.
    /// Both 0 when the export is off.
    pub body_off: u32,
    pub body_len: u32,
    /// Responses that carried outputs (a decoupled model's empty final response is not
    /// counted); 1 for an ordinary request.
    pub responses: u32,
    /// Open loop: when the schedule meant the request to go (ns since the epoch); `start_ns -
    /// intended_ns` is its send lag. 0 in closed loop, where a request goes when a slot frees.
    pub intended_ns: u64,
    /// Sequence models: the worker's sequence slot + 1 (0: not a sequence request).
    pub seq_slot: u32,
    /// Sequence models: the `sequence_id` the request carried (0: none), for the export.
    pub seq_id: u64,
    /// Sequence models: the request carried `sequence_end`.
    pub seq_end: bool,
    /// The response was a Server-Sent Events stream (OpenAI `text/event-stream`): its body
    /// region holds one framed response per event (see [`framed_responses`]), `[DONE]` as
    /// an empty payload.
    pub sse: bool,
    /// Why the request failed ([`FailKind::None`] when `ok`).
    pub fail: FailKind,
    /// The HTTP status of the reply, or the grpc-status of a failed gRPC call (0: none
    /// came), for the exports' error `code`.
    pub status: u16,
    /// HTTP tracing (`profile` over HTTP/1.1): the request's [`HttpTrace`] is stored in the
    /// body buffer just before its body region (`bodies[body_off - TRACE_BYTES..body_off]`),
    /// and `body_off` is set even when the body is empty.
    pub traced: bool,
    /// How `end_ns` was timed: by the kernel's receive stamp of the read that completed the
    /// response, or by the clock (see [`RxTime`]).
    pub rx: RxTime,
    /// The client's own delay in handling the response (µs, the resolution every report
    /// prints it at; 32 bits keep the record at ten words): from the kernel receive stamp of
    /// a read of the response to the worker reading that data, the longest over the
    /// response's stamped reads (for an event stream, each read timed some of its events).
    /// 0 unless `rx` is [`RxTime::Kernel`].
    pub rx_delay_us: u32,
}

/// How a response's receive time was taken.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RxTime {
    /// Kernel stamps were not asked for (the C API has no socket): the clock at the read.
    #[default]
    NotStamped,
    /// The kernel's software receive stamp of the read that completed the response.
    Kernel,
    /// Stamps were asked for, but the completing read carried none (or one outside the
    /// request's span, a clock step): the clock at the read.
    Clock,
}

impl RequestRecord {
    /// The body region's offset and length must move with the buffer: it holds a body or a
    /// trace.
    #[inline]
    pub fn has_region(&self) -> bool {
        self.body_len > 0 || self.traced
    }

    /// Where the region of this record starts in its body buffer: its trace, if traced,
    /// else its body.
    #[inline]
    pub fn region_start(&self) -> usize {
        let off = self.body_off as usize;
        if self.traced {
            off.saturating_sub(TRACE_BYTES)
        } else {
            off
        }
    }

    /// The record's trace, read from `bodies` (the buffer its `body_off` points into).
    pub fn trace_in(&self, bodies: &[u8]) -> Option<HttpTrace> {
        if !self.traced {
            return None;
        }
        let off = self.body_off as usize;
        HttpTrace::from_bytes(bodies.get(off.checked_sub(TRACE_BYTES)?..off)?)
    }

    #[inline]
    pub fn latency_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns)
    }
    #[inline]
    pub fn send_ns(&self) -> u64 {
        self.send_end_ns.saturating_sub(self.start_ns)
    }
    #[inline]
    pub fn recv_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.recv_start_ns)
    }
    /// Open loop: how late the send was (ns).
    #[inline]
    pub fn lag_ns(&self) -> u64 {
        self.start_ns.saturating_sub(self.intended_ns)
    }
    /// Open loop: latency from the intended send time, i.e. corrected for coordinated
    /// omission (ns).
    #[inline]
    pub fn corrected_latency_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.intended_ns)
    }
}

/// Everything the workers finished in one measurement window `(start_ns, end_ns]`.
#[derive(Clone, Debug, Default)]
pub struct WindowRecords {
    pub start_ns: u64,
    pub end_ns: u64,
    /// Records of all workers whose `end_ns` falls in the window (ok and failed).
    pub records: Vec<RequestRecord>,
    /// Requests whose first byte was sent during the window (for "Avg send request rate").
    pub sent: u64,
    /// Response bodies for the profile export (empty when the export is off).
    pub bodies: Vec<u8>,
    /// CPU time the worker threads used during the window, summed over workers (ns).
    pub client_cpu_ns: u64,
    /// Number of worker threads that ran during the window.
    pub workers: u32,
}

impl WindowRecords {
    /// Appends `records` whose body offsets point into `bodies`, rebasing them onto
    /// `self.bodies`.
    pub fn append_records(&mut self, records: &[RequestRecord], bodies: &[u8]) {
        let base = self.bodies.len() as u32;
        self.bodies.extend_from_slice(bodies);
        self.records.extend(records.iter().map(|r| {
            let mut r = *r;
            if r.has_region() {
                r.body_off += base;
            }
            r
        }));
    }
}

/// Bytes of one response in a streamed request's body region: an 8-byte LE arrival time
/// (ns since the epoch) and a 4-byte LE length before the payload.
const FRAME_HEAD: usize = 12;

/// Appends one response of a streamed request to a body region (profile export).
pub fn push_framed_response(bodies: &mut Vec<u8>, arrival_ns: u64, payload: &[u8]) {
    bodies.extend_from_slice(&arrival_ns.to_le_bytes());
    bodies.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    bodies.extend_from_slice(payload);
}

/// The responses of a streamed request's body region, in arrival order; a torn tail ends the
/// iteration.
pub fn framed_responses(mut body: &[u8]) -> impl Iterator<Item = (u64, &[u8])> {
    std::iter::from_fn(move || {
        let head = body.get(..FRAME_HEAD)?;
        let arrival = u64::from_le_bytes(head[..8].try_into().ok()?);
        let len = u32::from_le_bytes(head[8..].try_into().ok()?) as usize;
        let payload = body.get(FRAME_HEAD..FRAME_HEAD.checked_add(len)?)?;
        body = &body[FRAME_HEAD + len..];
        Some((arrival, payload))
    })
}

/// A delay in ns as [`RequestRecord::rx_delay_us`] holds it (whole µs; 71 minutes at most).
pub fn delay_us(ns: u64) -> u32 {
    (ns / 1000).min(u64::from(u32::MAX)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ten words: five times, four counters, the sequence slot and id, four flags, the
    /// failure kind, the HTTP status, how the response was timed and the client's delay (µs).
    /// A record is written per request and kept for the windows of a level, so growth shows
    /// up in memory at high rates: this fails when a field is added (no padding is left).
    #[test]
    fn a_record_is_ten_words() {
        assert_eq!(std::mem::size_of::<RequestRecord>(), 80);
    }

    #[test]
    fn framed_responses_round_trip_and_stop_at_a_torn_tail() {
        let mut bodies = Vec::new();
        push_framed_response(&mut bodies, 7, b"abc");
        push_framed_response(&mut bodies, 9, b"");
        push_framed_response(&mut bodies, u64::MAX, b"z");
        let all: Vec<_> = framed_responses(&bodies).collect();
        assert_eq!(
            all,
            vec![(7, &b"abc"[..]), (9, &b""[..]), (u64::MAX, &b"z"[..])]
        );
        let torn: Vec<_> = framed_responses(&bodies[..bodies.len() - 1]).collect();
        assert_eq!(torn.len(), 2);
        assert_eq!(framed_responses(&[1, 2, 3]).count(), 0);
    }
}
