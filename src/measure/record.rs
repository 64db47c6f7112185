//! What the engine hands to measurement: one record per finished request, grouped by window.

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
}

impl RequestRecord {
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
            if r.body_len > 0 {
                r.body_off += base;
            }
            r
        }));
    }
}
