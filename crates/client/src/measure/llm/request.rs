//! The LLM metrics of one request: times from its chunks' arrivals, token counts, and the
//! chunk and per-token gaps (definitions in [`super::definitions::METRICS`]). Times in ns.

use super::record::LlmRequest;

/// The time metrics of one successful request (ns unless stated).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RequestMetrics {
    /// First chunk − start; `None` without chunks (embeddings, rankings).
    pub ttft_ns: Option<u64>,
    /// Second chunk − first chunk (GenAI-Perf / AIPerf "time to second token": chunks, not
    /// tokens); `None` with fewer than two chunks.
    pub ttst_ns: Option<u64>,
    /// Last chunk − start, or end − start without chunks.
    pub e2e_ns: u64,
    /// (E2E − TTFT) / (OSL − 1); only with at least two chunks and OSL > 1.
    pub itl_ns: Option<f64>,
    /// (OSL − 1) / (E2E − TTFT) in tokens/s, i.e. 1/ITL; `None` when ITL is `None` or 0.
    pub tps_per_user: Option<f64>,
    /// GuideLLM's TPOT: (last chunk − start) / OSL; needs chunks and OSL ≥ 1.
    pub guidellm_tpot_ns: Option<f64>,
    pub isl: u64,
    pub osl: u64,
    /// Chunks that carried output text.
    pub chunks: u64,
    /// Chunks whose arrival time equals the previous chunk's (delivered by the same read).
    pub same_read_events: u64,
    /// Open loop only (`intended_ns` ≠ 0): TTFT and E2E measured from when the schedule
    /// meant the request to go, so client-side queueing counts (coordinated omission).
    pub ttft_from_intended_ns: Option<u64>,
    pub e2e_from_intended_ns: Option<u64>,
    /// AIPerf's time to first output token: first answer (non-reasoning) chunk − start.
    pub ttfo_ns: Option<u64>,
    /// Reasoning tokens among the `osl`.
    pub reasoning_tokens: u64,
    /// AIPerf's E2E output token throughput: OSL / request latency (tokens/s); `None` when
    /// the latency is 0.
    pub e2e_output_tps: Option<f64>,
    /// AIPerf's prefill throughput per user: ISL / TTFT (tokens/s); `None` without TTFT or
    /// when it is 0.
    pub prefill_tps_per_user: Option<f64>,
    /// AIPerf's decode duration: request latency − TTFT (ns); `None` without TTFT.
    pub decode_ns: Option<u64>,
    /// |usage.prompt_tokens − ISL| / ISL × 100, ISL the client tokenizer's; `None` without
    /// `usage` or with ISL 0.
    pub usage_prompt_diff_pct: Option<f64>,
    /// |usage.completion_tokens − OSL| / OSL × 100, OSL the client tokenizer's.
    pub usage_completion_diff_pct: Option<f64>,
    /// |usage reasoning tokens − client reasoning tokens| / client reasoning tokens × 100.
    pub usage_reasoning_diff_pct: Option<f64>,
    /// (OSL − max_tokens asked) / max_tokens × 100, signed; `None` when nothing was asked.
    pub osl_mismatch_diff_pct: Option<f64>,
}

/// When the request was handed out to be sent (AIPerf's `credit_issued_ns`): open loop,
/// the time the schedule meant it to go; closed loop, the moment the worker took it from the
/// schedule, which is the same step that stamps `start_ns` (the engine writes a request as
/// soon as it takes it), so the two are equal.
pub fn credit_issued_ns(r: &LlmRequest) -> u64 {
    if r.intended_ns != 0 {
        r.intended_ns
    } else {
        r.start_ns
    }
}

/// The time of the request's last response: its last content chunk, else its end (AIPerf's
/// `request_end_ns`).
pub fn last_response_ns(r: &LlmRequest) -> u64 {
    r.chunks.last().map_or(r.end_ns, |c| c.arrival_ns)
}

/// AIPerf's credit-to-start latency: request start − credit issued (ns), failed requests
/// included.
pub fn credit_to_start_ns(r: &LlmRequest) -> u64 {
    r.start_ns.saturating_sub(credit_issued_ns(r))
}

/// AIPerf's effective latency (coordinated-omission aware): last response − credit issued
/// (ns), failed requests included.
pub fn effective_latency_ns(r: &LlmRequest) -> u64 {
    last_response_ns(r).saturating_sub(credit_issued_ns(r))
}

/// |got − reference| in percent of `reference`; `None` when the reference is 0.
fn abs_diff_pct(got: u64, reference: u64) -> Option<f64> {
    (reference > 0).then(|| got.abs_diff(reference) as f64 * 100.0 / reference as f64)
}

/// The metrics of `r`, or `None` when it failed.
pub fn request_metrics(r: &LlmRequest) -> Option<RequestMetrics> {
    if !r.ok() {
        return None;
    }
    let first = r.chunks.first().map(|c| c.arrival_ns);
    let last = r.chunks.last().map_or(r.end_ns, |c| c.arrival_ns);
    let ttft_ns = first.map(|f| f.saturating_sub(r.start_ns));
    let e2e_ns = last.saturating_sub(r.start_ns);
    let ttst_ns = match r.chunks.as_slice() {
        [a, b, ..] => Some(b.arrival_ns.saturating_sub(a.arrival_ns)),
        _ => None,
    };
    let itl_ns = match ttft_ns {
        Some(ttft) if r.chunks.len() >= 2 && r.osl > 1 => {
            Some(e2e_ns.saturating_sub(ttft) as f64 / (r.osl - 1) as f64)
        }
        _ => None,
    };
    let tps_per_user = itl_ns.filter(|&itl| itl > 0.0).map(|itl| 1e9 / itl);
    let guidellm_tpot_ns = match first {
        Some(_) if r.osl >= 1 => Some(e2e_ns as f64 / r.osl as f64),
        _ => None,
    };
    let same_read_events = r
        .chunks
        .windows(2)
        .filter(|w| w[1].arrival_ns == w[0].arrival_ns)
        .count() as u64;
    let intended = (r.intended_ns != 0).then_some(r.intended_ns);
    let secs = |ns: u64| (ns > 0).then_some(ns as f64 / 1e9);
    // The usage comparisons use the client tokenizer's counts (kept apart when ISL and OSL
    // hold the server's).
    let (client_isl, client_osl) = r.client_counts.unwrap_or((r.isl, r.osl));
    let usage = r.usage.as_ref();
    Some(RequestMetrics {
        e2e_output_tps: secs(e2e_ns).map(|s| r.osl as f64 / s),
        prefill_tps_per_user: ttft_ns.and_then(secs).map(|s| r.isl as f64 / s),
        decode_ns: ttft_ns.map(|t| e2e_ns.saturating_sub(t)),
        usage_prompt_diff_pct: usage.and_then(|u| abs_diff_pct(u.prompt_tokens, client_isl)),
        usage_completion_diff_pct: usage
            .and_then(|u| abs_diff_pct(u.completion_tokens, client_osl)),
        usage_reasoning_diff_pct: usage
            .and_then(|u| u.reasoning_tokens)
            .and_then(|u| abs_diff_pct(u, r.reasoning_tokens)),
        osl_mismatch_diff_pct: r
            .requested_osl
            .filter(|&asked| asked > 0)
            .map(|asked| (r.osl as f64 - asked as f64) * 100.0 / asked as f64),
        ttft_ns,
        ttst_ns,
        e2e_ns,
        itl_ns,
        tps_per_user,
        guidellm_tpot_ns,
        isl: r.isl,
        osl: r.osl,
        chunks: r.chunks.len() as u64,
        same_read_events,
        ttft_from_intended_ns: intended.and_then(|i| first.map(|f| f.saturating_sub(i))),
        e2e_from_intended_ns: intended.map(|i| last.saturating_sub(i)),
        ttfo_ns: r.first_output_ns.map(|f| f.saturating_sub(r.start_ns)),
        reasoning_tokens: r.reasoning_tokens,
    })
}

/// Gaps between consecutive chunks of `r` in ns (vLLM's "ITL", AIPerf's ICL).
pub fn chunk_gaps(r: &LlmRequest) -> impl Iterator<Item = u64> + '_ {
    r.chunks
        .windows(2)
        .map(|w| w[1].arrival_ns.saturating_sub(w[0].arrival_ns))
}

/// Per-token gaps of `r`: each chunk's gap from the previous chunk split evenly over the
/// chunk's tokens, reported to `emit(gap_ns, tokens)` (one value, `tokens` times). A chunk
/// with no tokens passes its gap on to the next chunk that has some; the first chunk's
/// tokens have no gap (they belong to TTFT).
pub fn token_gaps(r: &LlmRequest, mut emit: impl FnMut(f64, u64)) {
    let mut carried_ns = 0u64;
    for w in r.chunks.windows(2) {
        let gap = w[1].arrival_ns.saturating_sub(w[0].arrival_ns) + carried_ns;
        if w[1].tokens == 0 {
            carried_ns = gap;
        } else {
            emit(gap as f64 / w[1].tokens as f64, w[1].tokens);
            carried_ns = 0;
        }
    }
}
