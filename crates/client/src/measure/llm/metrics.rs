//! Run-level statistics of the per-request LLM metrics (`request`).
//!
//! Every definition here is written out in [`super::definitions::METRICS`]; the names follow
//! GenAI-Perf (ITL = (E2E − TTFT)/(OSL − 1), which vLLM calls TPOT), and the per-chunk and
//! per-token gap distributions are reported beside it so vLLM's "ITL" can be compared too.
//! Times are ns in, ns out; the reports convert to ms.

use std::collections::BTreeMap;

use super::goodput::Goodput;
use super::record::{LlmRequest, RequestError};
use super::request::{
    chunk_gaps, credit_to_start_ns, effective_latency_ns, last_response_ns, request_metrics,
    token_gaps, RequestMetrics,
};
use super::stats::{Adjusted, SignedAcc, StatAcc, Stats};
use crate::measure::{FailKind, RxTime};

/// What `compute` needs besides the requests.
#[derive(Clone, Debug, Default)]
pub struct MetricOptions {
    /// `--goodput` constraints; empty = no goodput.
    pub goodput: Vec<Goodput>,
    /// `--slice-duration`: TTFT and ITL per slice of this length (ns) as well.
    pub slice_ns: Option<u64>,
    /// The window the time-weighted metrics cover (ns since the epoch): the run's first send
    /// to its last reply; `None`: the first request start to the last request end.
    pub window_ns: Option<(u64, u64)>,
    /// Responses were streamed: the first chunk ends a request's prefill (time-weighted
    /// prefill/decode metrics need it).
    pub streaming: bool,
    /// The endpoint returns no generated tokens (embeddings, rankings).
    pub no_output_tokens: bool,
}

/// Requests that met every `--goodput` constraint.
#[derive(Clone, Debug, PartialEq)]
pub struct GoodputSummary {
    pub good_requests: u64,
    /// Good requests per second of benchmark duration.
    pub per_sec: f64,
    /// good / (ok + failed): failed requests count against it.
    pub fraction: f64,
}

/// Failed requests that share their code, kind and message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrorGroup {
    pub error: RequestError,
    pub count: u64,
}

/// Everything a run's reports show. Stats are in base units: ns for times, tokens, and
/// tokens/s for the per-user throughput; `None` means no request produced the value.
#[derive(Clone, Debug, PartialEq)]
pub struct LlmMetrics {
    /// Successful requests.
    pub request_count: u64,
    pub error_count: u64,
    /// Failed requests by `RequestError::kind`, in [`FailKind`] order (the stderr summary's).
    pub errors_by_kind: Vec<(String, u64)>,
    /// Failed requests grouped as AIPerf's `error_summary` groups them, by (code, kind,
    /// message), in [`FailKind`] order, then by kind name, message and code.
    pub error_groups: Vec<ErrorGroup>,
    /// max(last response) − min(start) over all requests (ns).
    pub duration_ns: u64,
    /// Successful requests per second.
    pub request_throughput: f64,
    /// ΣOSL / duration (tokens/s).
    pub output_token_throughput: f64,
    /// ΣISL / duration (tokens/s).
    pub input_token_throughput: f64,
    /// Σ(ISL + OSL) / duration (tokens/s).
    pub total_token_throughput: f64,
    pub total_isl: u64,
    pub total_osl: u64,
    /// `Some` when goodput constraints were given.
    pub goodput: Option<GoodputSummary>,
    pub ttft: Option<Stats>,
    pub ttst: Option<Stats>,
    pub request_latency: Option<Stats>,
    pub itl: Option<Stats>,
    pub tps_per_user: Option<Stats>,
    pub osl: Option<Stats>,
    pub isl: Option<Stats>,
    pub chunks_per_request: Option<Stats>,
    /// All chunk gaps pooled over requests (ns).
    pub chunk_gap: Option<Stats>,
    /// All per-token gaps pooled over requests (ns).
    pub token_gap: Option<Stats>,
    pub guidellm_tpot: Option<Stats>,
    pub ttft_from_intended: Option<Stats>,
    pub request_latency_from_intended: Option<Stats>,
    /// Σ same-read events over successful requests.
    pub same_read_events: u64,
    /// Some request carried an intended send time (open loop).
    pub open_loop: bool,
    /// AIPerf's time to first output token (first answer chunk, after any reasoning).
    pub ttfo: Option<Stats>,
    /// Reasoning tokens per request; `None` when no request had any.
    pub reasoning_tokens: Option<Stats>,
    pub total_reasoning_tokens: u64,
    /// The server's `usage` against the client's counts, and asked against got OSL.
    pub checks: super::checks::TokenChecks,
    /// The client's own receive delay of the successful requests timed by a kernel receive
    /// stamp (ns, [`LlmRequest::client_delay_ns`]); `None` when none was.
    pub client_rx_delay: Option<Stats>,
    /// Successful requests whose end was timed by the clock although kernel receive stamps
    /// were asked for (the read that completed them carried none).
    pub rx_clock: u64,
    /// Per time slice (`--slice-duration`); empty without it.
    pub slices: Vec<super::slices::Slice>,
    /// AIPerf's `http_req_*` metrics over the traced requests (HTTP/1.1); empty for gRPC.
    pub http: Vec<super::http::HttpStat>,
    /// AIPerf's per-request metrics from the server's `usage` and the ones derived from
    /// latency and lengths.
    pub aiperf: AiperfRequestMetrics,
    /// AIPerf's error-adjusted latencies (`adj_*`); all `None` in a run without failures.
    pub adjusted: AdjustedLatencies,
    /// Images and audio of the requests that carried any.
    pub media: super::media::MediaMetrics,
    /// AIPerf's time-weighted metrics (effective/active concurrency and throughput, tokens in
    /// flight); `None` without requests.
    pub sweeps: Option<super::sweeps::Sweeps>,
    /// Responses were streamed ([`MetricOptions::streaming`]): AIPerf's export leaves its
    /// streaming-only metrics out otherwise.
    pub streaming: bool,
    /// [`MetricOptions::no_output_tokens`]: AIPerf's export leaves its token-output metrics
    /// out.
    pub no_output_tokens: bool,
}

/// AIPerf 0.13's `adj_<tag>` metrics: the metrics it flags
/// `MetricFlags.PERCENTILE_INCLUDES_FAILED_REQUESTS` (aiperf/metrics/types), over the
/// successful requests' values plus one +inf per failed request (ns). Each is `None` when the
/// run had no failures or the metric has no value.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AdjustedLatencies {
    pub ttft: Option<Adjusted>,
    pub request_latency: Option<Adjusted>,
    pub decode_duration: Option<Adjusted>,
    pub itl: Option<Adjusted>,
}

/// The server's `usage` counts over the successful requests that carried the field: their
/// distribution and their sum (AIPerf's `usage_*` and `total_usage_*`).
#[derive(Clone, Debug, PartialEq)]
pub struct UsageField {
    pub stats: Stats,
    pub total: u64,
}

/// AIPerf's per-request metrics beyond GenAI-Perf's set. Stats in base units (ns, tokens,
/// tokens/s, %); `None` when no request produced the value.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AiperfRequestMetrics {
    /// `usage.prompt_tokens`, `usage.completion_tokens`, `usage.total_tokens`.
    pub usage_prompt_tokens: Option<UsageField>,
    pub usage_completion_tokens: Option<UsageField>,
    pub usage_total_tokens: Option<UsageField>,
    /// `usage.completion_tokens_details.reasoning_tokens`.
    pub usage_reasoning_tokens: Option<UsageField>,
    /// `usage.prompt_tokens_details.cached_tokens` (AIPerf's prompt cache-read tokens).
    pub usage_prompt_cache_read_tokens: Option<UsageField>,
    pub usage_prompt_diff_pct: Option<Stats>,
    pub usage_completion_diff_pct: Option<Stats>,
    pub usage_reasoning_diff_pct: Option<Stats>,
    /// Signed: negative when a request got fewer tokens than it asked for.
    pub osl_mismatch_diff_pct: Option<Stats>,
    pub e2e_output_tps: Option<Stats>,
    pub prefill_tps_per_user: Option<Stats>,
    pub decode_duration: Option<Stats>,
    /// Over every request, failed ones included (ns).
    pub credit_to_start: Option<Stats>,
    pub effective_latency: Option<Stats>,
    /// Failed requests whose error message says the prompt did not fit the model's context
    /// (AIPerf's substrings, [`CONTEXT_OVERFLOW_SUBSTRINGS`], any case).
    pub context_overflow_count: u64,
}

/// What AIPerf looks for in an error message to count a context overflow.
pub const CONTEXT_OVERFLOW_SUBSTRINGS: [&str; 4] = [
    "context length",
    "maximum context",
    "context_length_exceeded",
    "prompt is too long",
];

/// The error of `r` says its prompt was longer than the model's context.
fn is_context_overflow(r: &LlmRequest) -> bool {
    r.error.as_ref().is_some_and(|e| {
        let text = e.message.to_lowercase();
        CONTEXT_OVERFLOW_SUBSTRINGS.iter().any(|s| text.contains(s))
    })
}

/// Accumulators of [`AiperfRequestMetrics`].
struct AiperfAccumulators {
    usage: [(StatAcc, u64); 5],
    prompt_diff: StatAcc,
    completion_diff: StatAcc,
    reasoning_diff: StatAcc,
    osl_diff: SignedAcc,
    e2e_tps: StatAcc,
    prefill_tps: StatAcc,
    decode: StatAcc,
    credit_to_start: StatAcc,
    effective: StatAcc,
    context_overflow: u64,
}

impl AiperfAccumulators {
    fn new() -> Self {
        let pct = StatAcc::new;
        AiperfAccumulators {
            usage: std::array::from_fn(|_| (StatAcc::new(), 0)),
            prompt_diff: pct(),
            completion_diff: pct(),
            reasoning_diff: pct(),
            osl_diff: SignedAcc::new(),
            e2e_tps: pct(),
            prefill_tps: pct(),
            decode: StatAcc::new(),
            credit_to_start: StatAcc::new(),
            effective: StatAcc::new(),
            context_overflow: 0,
        }
    }

    /// A successful request.
    fn add(&mut self, r: &LlmRequest, m: &RequestMetrics) {
        if let Some(u) = &r.usage {
            let fields = [
                Some(u.prompt_tokens),
                Some(u.completion_tokens),
                u.total_tokens,
                u.reasoning_tokens,
                u.cached_tokens,
            ];
            for ((acc, total), v) in self.usage.iter_mut().zip(fields) {
                if let Some(v) = v {
                    acc.record(v as f64);
                    *total += v;
                }
            }
        }
        let opt = |acc: &mut StatAcc, v: Option<f64>| {
            if let Some(v) = v {
                acc.record(v);
            }
        };
        opt(&mut self.prompt_diff, m.usage_prompt_diff_pct);
        opt(&mut self.completion_diff, m.usage_completion_diff_pct);
        opt(&mut self.reasoning_diff, m.usage_reasoning_diff_pct);
        if let Some(v) = m.osl_mismatch_diff_pct {
            self.osl_diff.record(v);
        }
        opt(&mut self.e2e_tps, m.e2e_output_tps);
        opt(&mut self.prefill_tps, m.prefill_tps_per_user);
        opt(&mut self.decode, m.decode_ns.map(|v| v as f64));
    }

    /// Any request, failed ones included.
    fn add_any(&mut self, r: &LlmRequest) {
        self.credit_to_start.record(credit_to_start_ns(r) as f64);
        self.effective.record(effective_latency_ns(r) as f64);
        self.context_overflow += u64::from(is_context_overflow(r));
    }

    fn finish(&self) -> AiperfRequestMetrics {
        let usage = |i: usize| {
            let (acc, total) = &self.usage[i];
            acc.stats().map(|stats| UsageField {
                stats,
                total: *total,
            })
        };
        AiperfRequestMetrics {
            usage_prompt_tokens: usage(0),
            usage_completion_tokens: usage(1),
            usage_total_tokens: usage(2),
            usage_reasoning_tokens: usage(3),
            usage_prompt_cache_read_tokens: usage(4),
            usage_prompt_diff_pct: self.prompt_diff.stats(),
            usage_completion_diff_pct: self.completion_diff.stats(),
            usage_reasoning_diff_pct: self.reasoning_diff.stats(),
            osl_mismatch_diff_pct: self.osl_diff.stats(),
            e2e_output_tps: self.e2e_tps.stats(),
            prefill_tps_per_user: self.prefill_tps.stats(),
            decode_duration: self.decode.stats(),
            credit_to_start: self.credit_to_start.stats(),
            effective_latency: self.effective.stats(),
            context_overflow_count: self.context_overflow,
        }
    }
}

/// One accumulator per distribution metric.
struct Accumulators {
    ttft: StatAcc,
    ttst: StatAcc,
    e2e: StatAcc,
    itl: StatAcc,
    tps_per_user: StatAcc,
    osl: StatAcc,
    isl: StatAcc,
    chunks: StatAcc,
    chunk_gap: StatAcc,
    token_gap: StatAcc,
    guidellm_tpot: StatAcc,
    ttft_intended: StatAcc,
    e2e_intended: StatAcc,
    ttfo: StatAcc,
    reasoning: StatAcc,
}

impl Accumulators {
    fn new() -> Self {
        Accumulators {
            ttft: StatAcc::new(),
            ttst: StatAcc::new(),
            e2e: StatAcc::new(),
            itl: StatAcc::new(),
            tps_per_user: StatAcc::new(),
            osl: StatAcc::new(),
            isl: StatAcc::new(),
            chunks: StatAcc::new(),
            chunk_gap: StatAcc::new(),
            token_gap: StatAcc::new(),
            guidellm_tpot: StatAcc::new(),
            ttft_intended: StatAcc::new(),
            e2e_intended: StatAcc::new(),
            ttfo: StatAcc::new(),
            reasoning: StatAcc::new(),
        }
    }

    fn add(&mut self, r: &LlmRequest, m: &RequestMetrics) {
        let opt = |acc: &mut StatAcc, v: Option<f64>| {
            if let Some(v) = v {
                acc.record(v);
            }
        };
        opt(&mut self.ttft, m.ttft_ns.map(|v| v as f64));
        opt(&mut self.ttst, m.ttst_ns.map(|v| v as f64));
        self.e2e.record(m.e2e_ns as f64);
        opt(&mut self.itl, m.itl_ns);
        opt(&mut self.tps_per_user, m.tps_per_user);
        self.osl.record(m.osl as f64);
        self.isl.record(m.isl as f64);
        self.chunks.record(m.chunks as f64);
        opt(&mut self.guidellm_tpot, m.guidellm_tpot_ns);
        opt(
            &mut self.ttft_intended,
            m.ttft_from_intended_ns.map(|v| v as f64),
        );
        opt(
            &mut self.e2e_intended,
            m.e2e_from_intended_ns.map(|v| v as f64),
        );
        opt(&mut self.ttfo, m.ttfo_ns.map(|v| v as f64));
        self.reasoning.record(m.reasoning_tokens as f64);
        for gap in chunk_gaps(r) {
            self.chunk_gap.record(gap as f64);
        }
        token_gaps(r, |gap, n| self.token_gap.record_n(gap, n));
    }
}

/// Benchmark duration over all requests, failed ones included (ns; 0 for no requests).
pub fn duration_ns(reqs: &[LlmRequest]) -> u64 {
    let start = reqs.iter().map(|r| r.start_ns).min();
    let end = reqs.iter().map(last_response_ns).max();
    match (start, end) {
        (Some(s), Some(e)) => e.saturating_sub(s),
        _ => 0,
    }
}

/// Computes every per-request value and the run-level statistics.
pub fn compute(reqs: &[LlmRequest], opts: &MetricOptions) -> LlmMetrics {
    let mut acc = Accumulators::new();
    let mut aiperf = AiperfAccumulators::new();
    let mut errors: BTreeMap<(FailKind, String), u64> = BTreeMap::new();
    let mut groups: BTreeMap<(FailKind, &RequestError), u64> = BTreeMap::new();
    let (mut ok, mut good, mut same_read) = (0u64, 0u64, 0u64);
    let (mut total_isl, mut total_osl, mut reasoning) = (0u64, 0u64, 0u64);
    let (mut rx_delay, mut rx_clock) = (StatAcc::new(), 0u64);
    for r in reqs {
        aiperf.add_any(r);
        let Some(m) = request_metrics(r) else {
            if let Some(e) = &r.error {
                *errors.entry((e.fail_kind(), e.kind.clone())).or_default() += 1;
                *groups.entry((e.fail_kind(), e)).or_default() += 1;
            }
            continue;
        };
        ok += 1;
        total_isl += m.isl;
        total_osl += m.osl;
        reasoning += m.reasoning_tokens;
        same_read += m.same_read_events;
        if !opts.goodput.is_empty() && opts.goodput.iter().all(|g| g.met_by(&m)) {
            good += 1;
        }
        acc.add(r, &m);
        aiperf.add(r, &m);
        match r.rx {
            RxTime::Kernel => rx_delay.record(f64::from(r.rx_delay_us) * 1e3),
            RxTime::Clock => rx_clock += 1,
            RxTime::NotStamped => {}
        }
    }
    let error_count: u64 = errors.values().sum();
    let duration_ns = duration_ns(reqs);
    let per_sec = |x: f64| {
        if duration_ns == 0 {
            0.0
        } else {
            x / (duration_ns as f64 / 1e9)
        }
    };
    // The time-weighted curves, summarised over the run's window and over each slice's.
    let curves = super::sweeps::SweepCurves::new(reqs, opts.streaming);
    let mut slices = opts
        .slice_ns
        .map_or_else(Vec::new, |ns| super::slices::slices(reqs, ns));
    if let Some(c) = &curves {
        let first = c.run_window().0;
        for s in &mut slices {
            s.sweeps = Some(c.over((first + s.start_ns, first + s.end_ns)));
        }
    }
    let goodput = (!opts.goodput.is_empty()).then(|| GoodputSummary {
        good_requests: good,
        per_sec: per_sec(good as f64),
        fraction: if ok + error_count == 0 {
            0.0
        } else {
            good as f64 / (ok + error_count) as f64
        },
    });
    LlmMetrics {
        request_count: ok,
        error_count,
        errors_by_kind: errors.into_iter().map(|((_, k), n)| (k, n)).collect(),
        error_groups: groups
            .into_iter()
            .map(|((_, e), count)| ErrorGroup {
                error: e.clone(),
                count,
            })
            .collect(),
        duration_ns,
        request_throughput: per_sec(ok as f64),
        output_token_throughput: per_sec(total_osl as f64),
        input_token_throughput: per_sec(total_isl as f64),
        total_token_throughput: per_sec((total_isl + total_osl) as f64),
        total_isl,
        total_osl,
        goodput,
        ttft: acc.ttft.stats(),
        ttst: acc.ttst.stats(),
        request_latency: acc.e2e.stats(),
        itl: acc.itl.stats(),
        tps_per_user: acc.tps_per_user.stats(),
        osl: acc.osl.stats(),
        isl: acc.isl.stats(),
        chunks_per_request: acc.chunks.stats(),
        chunk_gap: acc.chunk_gap.stats(),
        token_gap: acc.token_gap.stats(),
        guidellm_tpot: acc.guidellm_tpot.stats(),
        ttft_from_intended: acc.ttft_intended.stats(),
        request_latency_from_intended: acc.e2e_intended.stats(),
        same_read_events: same_read,
        open_loop: reqs.iter().any(|r| r.intended_ns != 0),
        ttfo: acc.ttfo.stats(),
        reasoning_tokens: acc.reasoning.stats().filter(|_| reasoning > 0),
        total_reasoning_tokens: reasoning,
        checks: super::checks::TokenChecks::of(reqs),
        client_rx_delay: rx_delay.stats(),
        rx_clock,
        slices,
        http: super::http::http_stats(reqs),
        adjusted: AdjustedLatencies {
            ttft: acc.ttft.adjusted(error_count),
            request_latency: acc.e2e.adjusted(error_count),
            decode_duration: aiperf.decode.adjusted(error_count),
            itl: acc.itl.adjusted(error_count),
        },
        aiperf: aiperf.finish(),
        media: super::media::compute(reqs),
        sweeps: curves
            .as_ref()
            .map(|c| c.over(opts.window_ns.unwrap_or(c.run_window()))),
        streaming: opts.streaming,
        no_output_tokens: opts.no_output_tokens,
    }
}

#[cfg(test)]
#[path = "metrics_tests.rs"]
mod tests;
